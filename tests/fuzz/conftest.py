"""Fuzz tests: a small memory budget for every case, and the per-kind counts in the summary."""

from __future__ import annotations

import json
import os

import pytest
from fuzz_kinds import STATS


@pytest.fixture(autouse=True)
def small_budget(monkeypatch):
    """2 GB of arrays and 4 MB files at most: accepted cases stay small, big ones are refused."""
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "2")
    monkeypatch.setenv("TOPOOPT_MAX_INPUT_MB", "4")


def pytest_terminal_summary(terminalreporter):
    if not STATS:
        return
    tr = terminalreporter
    tr.section("fuzzed inputs per kind")
    tr.write_line(f"{'kind':<16}{'cases':>8}{'exit 0':>8}{'exit 2':>8}{'crashes':>9}")
    total = {"cases": 0, "exit0": 0, "exit2": 0, "crashes": 0}
    for kind, c in sorted(STATS.items()):
        tr.write_line(f"{kind:<16}{c['cases']:>8}{c['exit0']:>8}{c['exit2']:>8}{c['crashes']:>9}")
        for k in total:
            total[k] += c[k]
    tr.write_line(
        f"{'total':<16}{total['cases']:>8}{total['exit0']:>8}{total['exit2']:>8}"
        f"{total['crashes']:>9}"
    )
    out = os.environ.get("TOPOOPT_FUZZ_REPORT")
    if out:
        with open(out, "w") as fh:
            json.dump({k: dict(v) for k, v in STATS.items()}, fh, indent=1)
