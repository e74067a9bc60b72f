"""The wheel carries all three top-level packages and works outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout}\n{r.stderr}"
    return r


def test_wheel_installs_and_imports_outside_checkout(tmp_path):
    dist = tmp_path / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(ROOT),
        ],
    )
    (wheel,) = dist.glob("topoopt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for pkg in ("topoopt", "traffic", "solvers"):
        assert f"{pkg}/__init__.py" in names, f"{pkg} missing from the wheel"
    assert not any(n.startswith("tests/") for n in names)
    assert "traffic/hardware/catalogue.yaml" in names  # the hardware catalogue's data file

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(py),
            "install",
            "--no-deps",
            "-q",
            "--no-index",
            str(wheel),
        ]
    )
    # Dependencies come from this environment's site-packages, added as a plain path (its own
    # .pth files, among them the editable install pointing at the checkout, are not processed).
    site = Path(
        _run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = (
        "import topoopt, traffic, solvers, topoopt.app.cli.app\n"
        "for m in (topoopt, traffic, solvers):\n"
        "    print(m.__file__)\n"
        "from traffic.hardware import load_catalogue\n"
        "assert 'gb200' in load_catalogue().gpus\n"
    )
    out = _run([str(py), "-c", code], cwd=tmp_path, env=env).stdout.split()
    assert len(out) == 3
    for f in out:
        assert Path(f).resolve().is_relative_to(site.resolve()), f
    help_text = _run([str(venv / "bin" / "topoopt"), "--help"], cwd=tmp_path, env=env).stdout
    assert "traffic" in help_text
