"""Test-suite configuration and shared fixtures."""

from __future__ import annotations

import subprocess
import sys
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
            [sys.executable, "-m", "topoopt.cli", "demo", "--out", str(self.report), "--json"],
            capture_output=True,
            text=True,
            cwd=folder,
        )


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> DemoRun:
    return DemoRun(tmp_path_factory.mktemp("demo"))
