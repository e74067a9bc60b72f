"""Test-suite configuration and shared fixtures."""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

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
    """``DEMO_REPEATS`` runs of the demo (``tests/peers/demo_repeat.py``): the run slots
    ``0 .. n-1``, each claimed by one fresh interpreter. The first starts when the suite collects
    the determinism test, on the core the single-process test session leaves idle. When the
    session reaches that test (it runs last) with slots still free, :meth:`wait` starts a second
    interpreter that takes them on the core the session no longer needs, instead of leaving it
    idle while the first one finishes alone (the twenty runs were the suite's critical path:
    its last 152 s, stop 36)."""

    SCRIPT = Path(__file__).parent / "peers" / "demo_repeat.py"

    def __init__(self) -> None:
        self.n = DEMO_REPEATS
        self.folder = Path(tempfile.mkdtemp(prefix="topoopt-demo-repeats-"))
        self.slots = self.folder / "slots"
        self.slots.mkdir()
        self.runs: list[tuple[subprocess.Popen, IO[str], Path]] = []
        self._start()

    def _start(self) -> None:
        k = len(self.runs)
        result = self.folder / f"runs-{k}.json"
        log = open(self.folder / f"stderr-{k}.txt", "w")  # noqa: SIM115 (closed in wait)
        proc = subprocess.Popen(
            [sys.executable, str(self.SCRIPT), str(result), str(self.n), str(self.slots)],
            cwd=self.folder,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        self.runs.append((proc, log, result))

    def free_slots(self) -> int:
        return self.n - sum(1 for _ in self.slots.iterdir())

    def wait(self, timeout_s: float) -> tuple[int, str]:
        """The first non-zero return code (else 0) and the end of each interpreter's stderr,
        once every slot has run (a second interpreter helps if slots are still free)."""
        if self.runs[0][0].poll() is None and self.free_slots() > 0:
            self._start()
        end = time.monotonic() + timeout_s
        codes, tails = [], []
        for k, (proc, log, _) in enumerate(self.runs):
            try:
                codes.append(proc.wait(timeout=max(end - time.monotonic(), 0.0)))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
            log.close()
            tails.append((self.folder / f"stderr-{k}.txt").read_text()[-3000:])
        return next((c for c in codes if c != 0), 0), "\n".join(tails)

    def results(self) -> list[dict]:
        """Each interpreter's document (``runs``, ``first_rows``, ``opened``)."""
        return [json.loads(result.read_text()) for _, _, result in self.runs]


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


_FROZEN_AT = [0]
"""``len(sys.modules)`` when the objects alive were last frozen (:func:`_freeze`)."""

REFREEZE_MODULES = 20
"""Modules imported since the last freeze (lazily, by a test) that make the next teardown
freeze again."""


def _freeze() -> None:
    """Move the objects alive now to the collector's permanent generation (``gc.freeze``), so
    that full collections (``advise``'s ``gc.collect`` after each row among them) scan only what
    the tests build after it, not the ~250,000 objects of numpy, pandas, numba, OR-Tools and
    the package. Unfreezing and collecting first lets go of what died since the last freeze.
    Measured 2026-12-06 on the advise-jobs fuzz (54 cases, 13 valid ones of 18 rows): 29.6 s
    of its 39 s of CPU were full collections walking the imports."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _FROZEN_AT[0] = len(sys.modules)


def pytest_collection_finish(session):
    _freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Freeze again after a test (its fixtures torn down) that imported modules: the
    commands import their solvers and kernels when first run."""
    yield
    if len(sys.modules) >= _FROZEN_AT[0] + REFREEZE_MODULES:
        _freeze()


def pytest_unconfigure(config):
    for r in _repeats:
        for proc, log, _ in r.runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if not log.closed:
                log.close()
        shutil.rmtree(r.folder, ignore_errors=True)  # its slots, runs-*.json and stderr-*.txt


@pytest.fixture(scope="session")
def demo_repeats() -> DemoRepeats:
    assert _repeats, "the demo_repeats marker starts the runs at collection"
    return _repeats[0]


@pytest.fixture(scope="session")
def bench_script():
    """``bench_script("bench_anchors")``: the module of ``benchmarks/bench_anchors.py`` (the
    folder is not a package), registered under its stem (dataclasses look their module up in
    ``sys.modules``) and loaded once."""
    import importlib.util

    folder = Path(__file__).resolve().parent.parent / "benchmarks"

    def load(stem: str):
        if stem not in sys.modules:
            spec = importlib.util.spec_from_file_location(stem, folder / f"{stem}.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[stem] = mod
            spec.loader.exec_module(mod)
        return sys.modules[stem]

    return load
