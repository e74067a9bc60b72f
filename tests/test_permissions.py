"""Permissions as a user meets them (issue 30, item 3): the CLI run as ``nobody`` (CI runs as
root, which reads and writes everything) against a read-only output folder, an unreadable input,
an unwritable temporary folder and an output inside a read-only file system (a tmpfs mounted
read-only, else a chmod'ed tree). A refusal is one ``error:`` line, exit 2, nothing left behind;
an unwritable ``TMPDIR`` is no refusal at all (temporary files sit beside the output, never in
``TMPDIR``), so that command succeeds and writes nothing there.

Only when the test runs as root with ``setpriv`` (it drops to ``nobody:nogroup``); skipped with
the reason otherwise. Everything lives in a folder of its own under ``/tmp`` that ``nobody`` can
traverse; no other permission is changed."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "fuzz" / "seeds" / "plan.json"
FLOWS = ROOT / "tests" / "fuzz" / "seeds" / "flows.json"
SETPRIV = shutil.which("setpriv")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or SETPRIV is None,
    reason="needs root and setpriv to run the CLI as nobody",
)


def _as_nobody(
    args, cwd: Path, module: str | None = "topoopt", **env
) -> subprocess.CompletedProcess:
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(cwd / "home"),  # a user has a home (numba caches its kernels there)
        **env,
    }
    cmd = [SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable]
    return subprocess.run(
        [*cmd, *(["-m", module] if module else []), *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def box():
    """A folder nobody can traverse, with a readable plan, an unreadable one and a home."""
    d = Path(tempfile.mkdtemp(prefix="topoopt-perm-", dir="/tmp"))
    d.chmod(0o755)
    probe = subprocess.run(
        [SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
         f"import sys; sys.path.insert(0, {str(ROOT)!r}); import topoopt"],
        capture_output=True, text=True, cwd=d, timeout=120,
    )  # fmt: skip
    if probe.returncode != 0:
        shutil.rmtree(d)
        pytest.skip(f"nobody cannot run the venv or read the worktree: {probe.stderr[-200:]}")
    (d / "home").mkdir(mode=0o777)
    (d / "home").chmod(0o777)
    shutil.copy(SEED, d / "plan.json")
    (d / "plan.json").chmod(0o644)
    shutil.copy(SEED, d / "secret.json")
    (d / "secret.json").chmod(0o600)  # root's: nobody cannot read it
    yield d
    subprocess.run(["umount", str(d / "rofs")], capture_output=True)
    shutil.rmtree(d)


def _uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert r.stdout == "" and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def test_read_only_output_folder(box):
    ro = box / "ro"
    ro.mkdir(mode=0o555)
    ro.chmod(0o555)
    line = _one_line(_as_nobody(["traffic", "plan.json", "--out", "ro/t.json"], box))
    assert "ro/t.json" in line and "Permission denied" in line
    assert list(ro.iterdir()) == []


def test_unreadable_input(box):
    line = _one_line(_as_nobody(["traffic", "secret.json", "--json"], box))
    assert line == (
        "error: secret.json: got 'unreadable (Permission denied)'; allowed: a plan file"
    )
    r = _as_nobody(["design", "plan.json", "--degree", "2", "--solver", "topoopt",
                    "--prewired", "secret.json", "--out", "home/d.json"], box)  # fmt: skip
    assert "secret.json" in _one_line(r) and not (box / "home" / "d.json").exists()


def test_unwritable_tmpdir_is_not_used(box):
    t = box / "tmp"
    t.mkdir(mode=0o555)
    t.chmod(0o555)
    r = _as_nobody(["traffic", "plan.json", "--out", "home/t.json"], box, TMPDIR=str(t))
    assert r.returncode == 0, r.stderr
    assert (box / "home" / "t.json").stat().st_size > 0 and list(t.iterdir()) == []
    assert sorted(p.name for p in (box / "home").iterdir() if p.name != ".cache") == ["t.json"]


def test_output_inside_a_read_only_file_system(box):
    ro = box / "rofs"
    ro.mkdir()
    mounted = (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True
        ).returncode
        == 0
    )
    if not mounted:  # no mount permission here: a chmod'ed tree instead
        (ro / "sub").mkdir()
        ro.chmod(0o555)
        (ro / "sub").chmod(0o555)
    target = "rofs/sub/t.json" if not mounted else "rofs/t.json"
    line = _one_line(_as_nobody(["traffic", "plan.json", "--out", target], box))
    assert target in line
    left = [p.name for p in ro.rglob("*")]
    assert left == ([] if mounted else ["sub"])


def test_numba_cache_without_a_writable_home_or_install(box):
    """numba's ``cache=True`` raised ``RuntimeError: cannot cache function 'fill_kernel': no
    locator available`` (a traceback) when neither the install folder (root's worktree) nor
    ``HOME`` could be written. Now the kernels are cached in a folder of nobody's own under the
    temporary folder (``topoopt.numba_cache``), and the simulation answers.

    The flow model's ``netsim`` compiles and caches the max-min kernels (``fill_kernel`` among
    them): 14 kernels, 28.7 s of CPU from a cold cache, against 32 kernels and 50.7 s for
    ``simulate --fabric ideal`` (2026-12-06). Every kernel module is then imported in one more
    interpreter (``cache=True`` without a locator raised when a kernel was decorated), the ones
    ``netsim`` leaves alone among them."""
    flows = box / "flows.json"
    shutil.copy(FLOWS, flows)
    flows.chmod(0o644)
    r = _as_nobody(["netsim", flows.name, "--json"], box, HOME="/nonexistent")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-600:]
    assert json.loads(r.stdout)["makespan"] > 0
    kernels = sorted(p.stem for p in (ROOT / "topoopt" / "flowsim").glob("_*kernels.py"))
    assert len(kernels) >= 4, kernels
    # and one kernel compiled by numba's JIT and cached (netsim may have run on the ahead-of-time
    # module that make test builds, compiling nothing): the max-min kernel of the original error
    imports = "; ".join(f"import topoopt.flowsim.{k}" for k in kernels) + (
        "; import numpy as np; from topoopt.flowsim._kernels import fill_kernel; "
        "out = np.zeros(1); fill_kernel(np.array([0, 1]), np.array([0]), np.array([0]), "
        "np.array([2.0]), out); assert out[0] == 2.0"
    )
    r = _as_nobody(["-c", imports], box, module=None, HOME="/nonexistent")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-600:]
    folder = Path(tempfile.gettempdir()) / f"topoopt-numba-{_uid('nobody')}"
    assert folder.stat().st_uid == _uid("nobody") and folder.stat().st_mode & 0o777 == 0o700
    assert any(folder.rglob("*.nbi"))  # numba's cache index files: the kernels were cached
