"""Two plans of the soak (``benchmarks/soak.py``, issue 30 item 6) in one process: nothing
raises, the ideal switch is no slower than any fabric, more ports are never slower, the joint
design's objective is at least its lower bound, on random valid plans (seeded). The soak itself
runs 200 plans with every default fabric and default limits; here the fabrics that are built
rather than searched, and the joint design with a work limit of 1 (its best warm start)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from traffic.errors import InputError
from traffic.plan import load_plan

SOAK = Path(__file__).resolve().parents[1] / "benchmarks" / "soak.py"


def _soak():
    spec = importlib.util.spec_from_file_location("soak", SOAK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_random_plans_are_physically_sane():
    soak = _soak()
    rng = np.random.default_rng(7)
    plans = []
    while len(plans) < 2:  # five cost 41 s of CPU: the soak itself is the long run
        doc = soak.draw_plan(rng)
        try:
            load_plan(doc)
        except InputError:
            continue
        plans.append(doc)
    assert len({str(p) for p in plans}) == 2  # two different plans
    problems = [
        (k, f) for k, doc in enumerate(plans) for f in soak.check_plan(doc, soak.CHEAP, 1.0)
    ]
    assert problems == []
