"""Test-suite configuration and shared fixtures."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# tests/peers/ holds programs run by other interpreters (SimGrid's Debian Python), not tests.
collect_ignore = ["peers"]


class DemoRun:
    """One real run of ``topoopt demo --json`` in a fresh folder (shared by the tests)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.report = folder / "demo.html"
        self.proc = subprocess.run(
            [sys.executable, "-m", "topoopt.app.cli", "demo", "--out", str(self.report), "--json"],
            capture_output=True,
            text=True,
            cwd=folder,
        )


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    return DemoRun(tmp_path_factory.mktemp("demo"))


DEMO_REPEATS = 20
"""Consecutive demo runs of the determinism test (issue 12)."""


class DemoRepeats:
    """``DEMO_REPEATS`` runs of the demo in one background interpreter
    (``tests/peers/demo_repeat.py``), started when the suite collects the determinism test: the
    test session runs in one process, so the runs take the other core."""

    def __init__(self) -> None:
        self.n = DEMO_REPEATS
        self.folder = Path(tempfile.mkdtemp(prefix="topoopt-demo-repeats-"))
        self.result = self.folder / "runs.json"
        self.log = open(self.folder / "stderr.txt", "w")  # noqa: SIM115 (closed in wait)
        script = Path(__file__).parent / "peers" / "demo_repeat.py"
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.result), str(self.n)],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )

    def wait(self, timeout_s: float) -> tuple[int, str]:
        """The return code and the end of stderr, once the runs are over."""
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc, (self.folder / "stderr.txt").read_text()[-3000:]


_repeats: list[DemoRepeats] = []


def pytest_collection_modifyitems(session, config, items):
    """Start the background demo runs when the determinism test is collected, and run that
    test last, so the rest of the suite overlaps with the runs."""
    wanted = [it for it in items if it.get_closest_marker("demo_repeats")]
    if not wanted:
        return
    items[:] = [it for it in items if it not in wanted] + wanted
    if not _repeats:
        _repeats.append(DemoRepeats())


def pytest_unconfigure(config):
    for r in _repeats:
        if r.proc.poll() is None:
            r.proc.kill()
            r.proc.wait()
        if not r.log.closed:
            r.log.close()
        shutil.rmtree(r.folder, ignore_errors=True)  # its runs.json and stderr.txt


@pytest.fixture(scope="session")
def demo_repeats() -> DemoRepeats:
    assert _repeats, "the demo_repeats marker starts the runs at collection"
    return _repeats[0]
