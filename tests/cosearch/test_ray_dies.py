"""The local Ray instance dying mid-search (issue 30, "what to build" 4).

``cosearch --workers 2 --out FILE`` runs on a local Ray instance it starts; once a few
evaluations are on file, the test SIGKILLs that instance's raylet and GCS processes (children
of the CLI process, by their ids). The command must end with one ``error:`` line and exit 2,
leave the evaluations it had finished in FILE, and ``--resume`` must continue from them to the
document of an uninterrupted search (the same bytes but for ``backend`` and ``workers``).
A checkpoint of another search, or ``--resume`` without ``--out``, is one line too."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[2]
PLAN = """\
model: {layers: 4, hidden: 256, heads: 4, vocab: 512, seq_len: 128}
parallelism: {tp: 2, pp: 2, global_batch_size: 16}
cluster: {servers: 4, gpus_per_server: 2}
"""
ARGS = ["--degree", "2", "--fabric", "topoopt", "--max-evaluations", "16",
        "--pareto-fabrics", "ideal", "--gpu-memory-gb", "1", "--json"]  # fmt: skip


def _cmd(plan, *extra):
    return [sys.executable, "-m", "topoopt", "cosearch", str(plan), *ARGS, *extra]


def _env():
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _children(pid: int) -> list[tuple[int, str]]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == pid:
            out.append((int(d.name), name))
    return out


def _evaluations(path: Path) -> int:
    try:
        return max(0, path.read_bytes().count(b"\n") - 1)  # the header is one line
    except OSError:
        return 0


def _document(text: str) -> dict:
    doc = json.loads(text)
    doc.pop("backend"), doc.pop("workers")
    for opt in ("--out", "--resume", "--workers"):  # the envelope's command line
        doc["inputs"]["options"].pop(opt, None)
    return doc


@pytest.mark.slow
def test_the_local_instance_dying_saves_the_evaluations_and_resume_continues(tmp_path):
    plan = tmp_path / "tiny.yaml"
    plan.write_text(PLAN)
    ck = tmp_path / "evals.jsonl"
    # every stderr line as written (TOPOOPT_PROGRESS=1), not the latest one every 5 s: which
    # lines precede the error then does not depend on how fast the machine is (see below)
    proc = subprocess.Popen(
        _cmd(plan, "--workers", "2", "--out", ck), cwd=tmp_path,
        env=dict(_env(), TOPOOPT_PROGRESS="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    killed = []
    try:
        deadline = time.monotonic() + 300
        while _evaluations(ck) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid, name in _children(proc.pid):
            if name.startswith(("raylet", "gcs_server")):
                os.kill(pid, signal.SIGKILL)
                killed.append(name)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sorted(killed) == ["gcs_server", "raylet"], killed
    assert proc.returncode == 2, (proc.returncode, err[-800:])
    # Off a terminal, stderr is held and by default its latest line goes out at most every 5 s,
    # the first one 5 s after the start (PlainProgress): which of the command's own lines went
    # out before the error was a matter of timing (under load the start-up took over 5 s and
    # the "N plans fit" line, written before the search, went out: the test failed on it).
    # With every line out, all of them precede the error: the "plans fit" line and the
    # progress "label: k/n" lines; nothing else may (no traceback, no Ray noise).
    own = (r"[^:]+: \d+/\d+", r"\d+ plans fit; cut: .*")
    lines = [x for x in err.strip().splitlines() if not any(re.fullmatch(p, x) for p in own)]
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: ray: "), err[-800:]
    assert err.strip().splitlines()[-1] == lines[0]
    assert "local Ray instance stopped" in lines[0] and "--resume" in lines[0]
    saved = _evaluations(ck)
    assert 3 <= saved < 16
    # resume (in-process: the evaluations do not depend on where they run)
    r = subprocess.run(_cmd(plan, "--out", ck, "--resume"), cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-800:]
    assert f"{saved} evaluations reused from" in r.stderr
    resumed = _document(r.stdout)
    # the uninterrupted search
    full = subprocess.run(_cmd(plan), cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert full.returncode == 0, full.stderr[-800:]
    assert json.dumps(resumed, sort_keys=True) == json.dumps(_document(full.stdout), sort_keys=True)
    assert resumed["evaluated"] == _evaluations(ck)  # every evaluation is on file now


def test_resume_refuses_what_it_cannot_continue(tmp_path):
    plan = tmp_path / "tiny.yaml"
    plan.write_text(PLAN)
    other = tmp_path / "other.jsonl"
    other.write_text('{"kind": "topoopt-cosearch-checkpoint", "search": "x", "version": 1}\n')
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n")
    for extra, needle in (
        (["--resume"], "error: --resume: got 'without --out'"),
        (["--out", other, "--resume"], "the checkpoint of the same cosearch command"),
        (["--out", junk, "--resume"], "a checkpoint written by cosearch --out"),
    ):
        r = subprocess.run(_cmd(plan, *extra), cwd=tmp_path, env=_env(), capture_output=True,
                           text=True, timeout=300)  # fmt: skip
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], r.stderr[-600:]
    assert other.read_text().count("\n") == 1  # untouched
