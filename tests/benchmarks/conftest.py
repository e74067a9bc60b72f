"""The benchmark scripts loaded as modules by file (``benchmarks/`` is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_script(path: Path, name: str):
    """The module of the script ``path``, registered as ``name`` (dataclasses look their module
    up in ``sys.modules``); loaded once a name."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def bench_script():
    """``bench_script("bench_anchors")``: the module of ``benchmarks/bench_anchors.py``."""
    return lambda stem: load_script(BENCHMARKS / f"{stem}.py", stem)
