"""Output files under signals, races and permissions; strict JSON everywhere.

The writer is paused deterministically between writing its temporary file and publishing it
(``TOPOOPT_PAUSE_BEFORE_PUBLISH``, see :mod:`topoopt.atomic`): the test waits for the flag file,
then signals the process or creates the target under it, then lets it go on.
"""

from __future__ import annotations

import ast
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import topoopt.atomic as atomic
from topoopt.app.cli.app import app
from topoopt.app.cli.common import dumps_strict, emit_json
from topoopt.atomic import (
    PAUSE_ENV,
    atomic_write_text,
    check_writable,
    remove_stale_temporaries,
    temporary_name_pattern,
)
from traffic.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
FLOWS = {
    "links": [{"id": "a", "capacity": 100.0}],
    "flows": [{"id": 1, "bytes": 100, "paths": [{"links": ["a"]}]}],
}


def strict_loads(text: str):
    """json.loads that refuses NaN / Infinity (Python's json accepts them by default)."""

    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def cli(*args, cwd: Path):
    """Run a command in-process (no subprocess: these cases need no signals) inside ``cwd``."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(app, [str(a) for a in args])
    finally:
        os.chdir(here)


def temporaries(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp") or n.endswith(".part"))


@pytest.fixture(scope="module")
def compiled_netsim(tmp_path_factory):
    """One ``netsim`` run in this process before the subprocess ones: where the flow kernels
    are not compiled ahead of time (a fresh worktree, ``TOPOOPT_AOT=0``) numba compiles them
    here, with no deadline, and caches them, so that :class:`Paused`'s processes (this tree's
    code too) load them (1.3 s of CPU) instead of compiling them under their hang cap (34 s of
    CPU, 113 s wall at load 10: the cap of 120 s was hit). The cap stays: it bounds start-up and
    a tiny run."""
    folder = tmp_path_factory.mktemp("warm")
    (folder / "flows.json").write_text(json.dumps(FLOWS))
    r = cli("netsim", "flows.json", "--out", "out.json", cwd=folder)
    assert r.exit_code == 0, r.output


class Paused:
    """A ``topoopt netsim --out`` run paused after writing its temporary file (tests using it
    request :func:`compiled_netsim` first)."""

    def __init__(self, folder: Path, *extra: str):
        (folder / "flows.json").write_text(json.dumps(FLOWS))
        self.folder = folder
        self.out = folder / "out.json"
        self.flag = folder / "paused.flag"
        # this tree's code, as in this process: a relative PYTHONPATH (".") would be read from
        # `folder`, and the process would import another install (its own kernels to compile)
        path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        env = dict(os.environ, **{PAUSE_ENV: str(self.flag), "PYTHONPATH": path})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "topoopt.app.cli", "netsim", "flows.json", "--out", "out.json"]
            + list(extra),
            cwd=folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120  # a cap against a hung test, not a measurement
        while not self.flag.exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "writer never paused"
            time.sleep(0.01)
        self.tmp = Path(self.flag.read_text())

    def resume(self) -> tuple[int, str, str]:
        self.flag.unlink()
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err

    def signal(self, sig: int) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=120)
        self.flag.unlink(missing_ok=True)
        return self.proc.returncode, out, err


# ------------------------------------------------------------------------------------------
# Temporary files: named after their writer, removed on SIGTERM / SIGINT, stale ones collected.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_write_removes_the_temporary_file(compiled_netsim, tmp_path, sig):
    run = Paused(tmp_path)
    assert run.tmp.exists()
    rc, out, err = run.signal(sig)
    if sig == signal.SIGTERM:
        assert rc == -signal.SIGTERM  # ends by the signal, as it would without the handler
    else:
        assert rc != 0  # KeyboardInterrupt, reported by click as "Aborted!"
        assert "Traceback" not in err
    assert not run.tmp.exists()
    assert not run.out.exists()
    assert temporaries(tmp_path) == []
    assert out == ""


def test_sigkill_leaves_a_stale_file_that_the_next_run_removes(compiled_netsim, tmp_path):
    run = Paused(tmp_path)
    rc, _, _ = run.signal(signal.SIGKILL)
    assert rc == -signal.SIGKILL
    assert run.tmp.exists(), "SIGKILL cannot be caught: the file stays until a later run"
    # Beside it: a temporary file of a live process (this one) and one written on another host.
    m = temporary_name_pattern().match(run.tmp.name)
    live = tmp_path / f".keep.json.abcdefgh.{m['host']}.{os.getpid()}.tmp"
    host = "000000" if m["host"] != "000000" else "111111"
    other_host = tmp_path / f".keep.json.abcdefgh.{host}.{run.proc.pid}.tmp"
    unrelated = tmp_path / ".notes.tmp"
    for p in (live, other_host, unrelated):
        p.write_text("x")

    r = cli("netsim", "flows.json", "--out", "second.json", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert not run.tmp.exists()
    assert live.exists() and other_host.exists() and unrelated.exists()
    assert strict_loads((tmp_path / "second.json").read_text())["makespan"] == pytest.approx(1.0)


def test_remove_stale_temporaries_judges_by_process(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True)  # fmt: skip
    dead_pid = int(done.stdout)
    host = atomic._HOST
    dead = tmp_path / f".a.csv.k2x9_a0q.{host}.{dead_pid}.tmp"
    mine = tmp_path / f".a.csv.k2x9_a0q.{host}.{os.getpid()}.tmp"
    dead.write_text("half")
    mine.write_text("half")
    assert remove_stale_temporaries(tmp_path) == [dead]
    assert not dead.exists() and mine.exists()
    # check_writable collects them too (it runs before any work of a command)
    dead.write_text("half")
    check_writable(tmp_path / "new.csv")
    assert not dead.exists() and mine.exists()
    assert temporaries(tmp_path) == [mine.name]


def test_signal_handlers_are_restored_after_a_write(tmp_path):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    seen = {}

    def writer(t: Path) -> None:
        seen.update({s: signal.getsignal(s) for s in before})
        t.write_text("ok")

    atomic.atomic_write_with(tmp_path / "x.txt", writer, force=False)
    assert all(seen[s] is atomic._on_signal for s in before)
    assert {s: signal.getsignal(s) for s in before} == before
    assert (tmp_path / "x.txt").read_text() == "ok"


# ------------------------------------------------------------------------------------------
# --force is checked again when the file is published.
# ------------------------------------------------------------------------------------------


def test_file_created_during_the_run_is_not_replaced_without_force(compiled_netsim, tmp_path):
    run = Paused(tmp_path)
    run.out.write_text("someone else's file\n")
    rc, out, err = run.resume()
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert lines[-1].startswith("error: out.json: ")
    assert "created by someone else" in lines[-1] and "--force" in lines[-1]
    assert sum(line.startswith("error:") for line in lines) == 1
    assert ".tmp" not in err
    assert run.out.read_text() == "someone else's file\n"
    assert temporaries(tmp_path) == []


def test_file_created_during_the_run_is_replaced_with_force(compiled_netsim, tmp_path):
    run = Paused(tmp_path, "--force")
    try:
        # the temporary file: beside the target, named after it and after the writer's pid
        assert run.tmp.parent == tmp_path and run.tmp.name.startswith(".out.json.")
        m = temporary_name_pattern().match(run.tmp.name)
        assert m is not None and int(m["pid"]) == run.proc.pid
        # the whole content is in the temporary file before it is published
        assert strict_loads(run.tmp.read_text())["makespan"] == pytest.approx(1.0)
        assert not run.out.exists()
        run.out.write_text("someone else's file\n")
    except BaseException:
        run.signal(signal.SIGKILL)
        raise
    rc, _, err = run.resume()
    assert rc == 0, err
    assert strict_loads(run.out.read_text())["makespan"] == pytest.approx(1.0)
    assert temporaries(tmp_path) == []


def test_publish_without_hard_links_uses_exclusive_creation(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted", str(src))

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "r.txt"
    atomic_write_text(target, "first", force=False)
    assert target.read_text() == "first"
    with pytest.raises(InputError) as exc:
        atomic_write_text(target, "second", force=False)
    assert exc.value.field == str(target)
    assert target.read_text() == "first"
    atomic_write_text(target, "third", force=True)
    assert target.read_text() == "third"
    assert temporaries(tmp_path) == []


def test_publish_never_follows_a_symlink_planted_at_the_target(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (tmp_path / "out.txt").symlink_to(victim)
    with pytest.raises(InputError):
        atomic_write_text(tmp_path / "out.txt", "new", force=False)
    assert victim.read_text() == "keep"


# ------------------------------------------------------------------------------------------
# Two outputs naming one file: an error before any work.
# ------------------------------------------------------------------------------------------

SAME = [
    ("design", "--out", "--html"),
    ("compare", "--csv", "--html"),
]


@pytest.mark.parametrize("command,first,second", SAME, ids=[c for c, _, _ in SAME])
def test_two_outputs_one_path_is_an_error_before_any_work(tmp_path, command, first, second):
    # The plan does not exist: the error about the outputs comes before the plan is read.
    r = cli(command, "no-such-plan.yaml", first, "x.out", second, "x.out", cwd=tmp_path)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"error: {second}: got 'x.out'; allowed: a file different from {first} (x.out)"
    ]
    assert os.listdir(tmp_path) == []


def test_two_outputs_through_a_symlink_or_a_hard_link(tmp_path):
    (tmp_path / "alias.html").symlink_to(tmp_path / "x.json")  # dangling: x.json comes later
    r = cli("design", "dlrm", "--out", "x.json", "--html", "alias.html", cwd=tmp_path)
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        "error: --html: got 'alias.html'; allowed: a file different from --out (x.json)"
    ]
    (tmp_path / "a.csv").write_text("a")
    os.link(tmp_path / "a.csv", tmp_path / "b.html")
    r = cli("compare", "dlrm", "--csv", "a.csv", "--html", "b.html", "--force", cwd=tmp_path)
    assert r.exit_code == 2
    assert "--html" in r.stderr and "--csv" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert (tmp_path / "a.csv").read_text() == "a"


# ------------------------------------------------------------------------------------------
# Permissions, found before the work, named by the user's path.
# ------------------------------------------------------------------------------------------


def _unwritable_folder(tmp_path: Path) -> Path:
    """A folder this process cannot create files in (chmod, or sysfs when running as root)."""
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        return ro
    ro = Path("/sys/kernel")
    try:
        fd = os.open(ro / "topoopt-probe", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        return ro
    os.close(fd)
    os.unlink(ro / "topoopt-probe")
    pytest.skip("no folder this root process cannot write")


def test_unwritable_folder_is_reported_before_the_work(tmp_path):
    ro = _unwritable_folder(tmp_path)
    (tmp_path / "flows.json").write_text(json.dumps(FLOWS))
    target = ro / "out.json"
    # The flow file is missing: the output is checked first, so the error is about the output.
    r = cli("netsim", "missing-flows.json", "--out", target, cwd=tmp_path)
    assert r.exit_code == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: {target}: got 'folder {ro} not writable'")
    assert ".tmp" not in line
    assert not target.exists()


def test_unwritable_folder_at_write_time_names_the_users_path(tmp_path):
    ro = _unwritable_folder(tmp_path)
    with pytest.raises(InputError) as exc:
        atomic_write_text(ro / "late.json", "{}")
    assert exc.value.field == str(ro / "late.json")
    assert ".tmp" not in str(exc.value)


def test_bad_output_places(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    cases = {
        tmp_path / "folder": "a folder",
        tmp_path / "missing" / "out.json": "an existing folder",
        tmp_path / "file" / "out.json": "not a folder",
    }
    for path, words in cases.items():
        with pytest.raises(InputError) as exc:
            check_writable(path, force=True)
        assert exc.value.field == str(path) and words in str(exc.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write read-only files")
def test_read_only_target_with_force(tmp_path):
    target = tmp_path / "ro.json"
    target.write_text("{}")
    target.chmod(0o444)
    with pytest.raises(InputError, match="read-only"):
        check_writable(target, force=True)


# ------------------------------------------------------------------------------------------
# Strict JSON.
# ------------------------------------------------------------------------------------------


def test_dumps_strict_never_writes_nan_or_infinity():
    doc = {"ok": [1, 2.5], "bad": {"rate": float("inf")}, "worse": float("nan")}
    try:
        text = dumps_strict(doc, "result")
    except InputError as exc:  # refused, naming the non-finite value by its path
        assert "result.bad.rate" in str(exc) or "result.worse" in str(exc)
    else:  # or written as null by to_jsonable
        assert strict_loads(text)["ok"] == [1, 2.5]
    assert dumps_strict({"a": (1, 2)}, indent=None) == '{"a": [1, 2]}'


def test_emit_json_is_strict(capsys):
    emit_json({"x": 1.5, "y": [1, 2]})
    doc = strict_loads(capsys.readouterr().out)  # in the envelope; no command outside the CLI
    assert doc == {
        "topoopt_version": "0.1.0",
        "command": None,
        "inputs": {},
        "warnings": [],
        "x": 1.5,
        "y": [1, 2],
    }


def test_design_json_refuses_infinity():
    from solvers.hybrid_design import HybridDesign
    from solvers.model.design import Design

    # to_json only needs to_dict: run it on a stand-in whose objective is infinite
    stand_in = type("S", (), {"to_dict": lambda self: {"objective_s": float("inf")}})()
    for cls in (Design, HybridDesign):
        with pytest.raises(ValueError, match="JSON compliant"):
            cls.to_json(stand_in)


def _json_writes_without_allow_nan(path: Path, base: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in ("dump", "dumps")):
            continue
        if not (isinstance(f.value, ast.Name) and f.value.id == "json"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        ok = isinstance(kw.get("allow_nan"), ast.Constant) and kw["allow_nan"].value is False
        if not ok:
            bad.append(f"{path.relative_to(base)}:{node.lineno}")
    return bad


def test_every_json_writer_of_the_project_is_strict():
    bad = []
    for folder in ("topoopt", "traffic", "solvers", "benchmarks", "notebooks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            bad += _json_writes_without_allow_nan(path)
    assert bad == [], "json.dump(s) without allow_nan=False (or use cli.common.dumps_strict)"


def test_the_strictness_scan_finds_a_lax_writer(tmp_path):
    probe = tmp_path / "lax.py"
    probe.write_text("import json\njson.dumps({})\njson.dumps({}, allow_nan=False)\n")
    assert _json_writes_without_allow_nan(probe, tmp_path) == ["lax.py:2"]
