"""The tree is ruff-clean (lint and format)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "check", str(ROOT)], capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_format():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", str(ROOT)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
