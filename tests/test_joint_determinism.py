"""The joint optimizer is deterministic for a given seed and thread count (issue 5, section 2).

Every decision of :func:`solvers.joint.driver.congestion_search` is taken on a deterministic work
budget; the wall clock is only a cap. Checked here:

1. the same problem solved twice gives the same design document, except wall times;
2. independence from the clock: with ``time.perf_counter`` running 3x faster or 3x slower
   (every module reads the clock through ``time.perf_counter``), the design is the same as an
   unpatched run's, as long as the cap is not reached;
3. a tiny time limit still returns a valid design, flagged ``deterministic: False`` and
   ``stopped_by: "time limit"``;
4. each seed is reproducible;
5. the work limit decides how much is routed: 0 keeps the baseline, a small limit stops the
   search (``stopped_by: "work limit"``), the default runs the small search to its end.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from solvers.joint.driver import BOUND_WORK_SHARE, congestion_search
from solvers.model.congestion import evaluate_routing
from solvers.model.design import design_document
from solvers.model.problem import DesignProblem
from solvers.registry import solve
from topoopt.fabrics.circuits import circuit_degrees
from traffic.workload import Demand, Workload

GPUS = 4  # per server


def pipeline_workload(n: int = 12) -> Workload:
    """Three pipeline stages across servers (one-way sends) plus a data-parallel all-reduce in
    each stage: MP traffic the baseline does not serve well, small enough to solve in seconds."""
    r = np.arange(n * GPUS).reshape(3, n // 3, GPUS)
    sends = np.stack([r[:-1].ravel(), r[1:].ravel()], axis=1)
    dp = r.transpose(0, 2, 1).reshape(-1, n // 3).copy()
    return Workload(
        n * GPUS,
        GPUS,
        (
            Demand("send", sends, 8e6, "pp", "forward", count=4, mutable=False, name="acts"),
            Demand("send", sends[:, ::-1].copy(), 8e6, "pp", "backward", count=4, mutable=False),
            Demand("all-reduce", dp, 20e6, "dp", "backward", name="grads"),
        ),
        name="pp-test",
    )


@pytest.fixture(scope="module")
def problem() -> DesignProblem:
    return DesignProblem.from_workload(pipeline_workload(), degree=4, link_bandwidth=12.5e9)


WALL_KEYS = {"wall_s", "flow_wall_s", "t"}


def strip_wall(doc):
    """The document without its wall-clock fields (wall_s, per-step wall_s, trace times)."""
    if isinstance(doc, dict):
        return {k: strip_wall(v) for k, v in doc.items() if k not in WALL_KEYS}
    if isinstance(doc, list):
        return [strip_wall(v) for v in doc]
    return doc


def document(design) -> str:
    return json.dumps(strip_wall(design_document(design)), sort_keys=True)


@pytest.fixture(scope="module")
def reference(problem):
    return congestion_search(problem, time_limit_s=120.0, seed=0)


def test_reference_run_is_deterministic_and_valid(problem, reference):
    info = reference.info
    assert info["deterministic"] is True
    assert info["stopped_by"] in ("done", "optimal", "work limit")
    assert info["candidates"], "the search routed no candidate"
    # the work used is the bound's plus every routing's (plus the swap search's, if it ran)
    routed = info["bound_work"] + sum(c["work"] for c in info["candidates"])
    assert info["work_used"] >= routed - 1e-6
    if not info.get("local_search_evaluations"):
        assert info["work_used"] == pytest.approx(routed, abs=1e-6)
    # a valid design: degree respected, routing re-scored to the reported objective
    assert circuit_degrees(reference.circuits, problem.n).max() <= problem.degree
    ev = evaluate_routing(problem, reference.circuits, reference.phase_routings(problem))
    assert ev.feasible
    assert ev.objective == pytest.approx(reference.objective_s, rel=1e-9)
    assert reference.objective_s <= info["baseline"]["topoopt"] * (1 + 1e-9)


def test_same_problem_twice_gives_the_same_document(problem, reference):
    again = congestion_search(problem, time_limit_s=120.0, seed=0)
    assert document(again) == document(reference)
    # and the documents do differ in something the comparison would see
    assert document(again) != document(congestion_search(problem, time_limit_s=120.0, work_limit=0))


class ScaledClock:
    """``time.perf_counter`` running ``factor`` times as fast as the real one."""

    def __init__(self, real, factor: float) -> None:
        self.real, self.factor, self.start = real, factor, real()

    def __call__(self) -> float:
        return self.start + (self.real() - self.start) * self.factor


@pytest.mark.parametrize("factor", [3.0, 1 / 3])
def test_design_does_not_depend_on_the_clock(problem, reference, monkeypatch, factor):
    clock = ScaledClock(time.perf_counter, factor)
    real = time.monotonic()
    monkeypatch.setattr(time, "perf_counter", clock)
    d = congestion_search(problem, time_limit_s=120.0, seed=0)
    monkeypatch.undo()
    real = time.monotonic() - real
    assert d.info["deterministic"] is True
    assert document(d) == document(reference)
    # the patched clock was the one read: the design's wall time is ``factor`` x the real one
    assert 0.5 * factor * real < d.wall_s <= 1.01 * factor * real


def test_tiny_time_limit_returns_a_valid_design_flagged_not_deterministic(problem):
    d = congestion_search(problem, time_limit_s=1e-3, seed=0)
    assert d.info["deterministic"] is False
    assert d.info["stopped_by"] == "time limit"
    assert d.info["time_limit_cut"]
    assert circuit_degrees(d.circuits, problem.n).max() <= problem.degree
    ev = evaluate_routing(problem, d.circuits, d.phase_routings(problem))
    assert ev.feasible
    assert d.objective_s == pytest.approx(ev.objective, rel=1e-9)
    assert d.objective_s <= d.info["baseline"]["topoopt"] * (1 + 1e-9)


def test_each_seed_is_reproducible(problem, reference):
    one = [congestion_search(problem, time_limit_s=120.0, seed=1) for _ in range(2)]
    assert document(one[0]) == document(one[1])
    assert one[0].info["seed"] == 1 and reference.info["seed"] == 0


def test_work_limit_decides_how_far_the_search_goes(problem, reference):
    none = congestion_search(problem, time_limit_s=120.0, work_limit=0)
    assert none.info["candidates"] == []
    assert none.info["stopped_by"] == "work limit"
    assert none.info["deterministic"] is True
    assert none.objective_s == pytest.approx(
        min(none.info["baseline"].values()), rel=1e-9
    )  # a baseline, no routed candidate
    # a limit of half the first routing's work: the LP bound gets at most its share of it, the
    # first candidate is routed (a routing starts while the work used plus the last routing's
    # fits, and none ran yet), and then the limit stops the search
    limit = reference.info["candidates"][0]["work"] / 2
    one = congestion_search(problem, time_limit_s=120.0, work_limit=limit)
    assert [c["candidate"] for c in one.info["candidates"]] == [
        reference.info["candidates"][0]["candidate"]
    ]
    assert one.info["candidates"][0]["work"] == pytest.approx(
        reference.info["candidates"][0]["work"], rel=1e-12
    )
    assert one.info["stopped_by"] == "work limit"
    assert one.info["bound_work"] <= BOUND_WORK_SHARE * limit + 1e-9
    assert one.info["work_used"] == pytest.approx(
        one.info["bound_work"] + one.info["candidates"][0]["work"], abs=1e-6
    )  # rounded to 1e-6


def test_registry_passes_the_work_limit(problem):
    d = solve(problem, "joint", time_limit_s=120.0, work_limit=0)
    assert d.info["work_limit"] == 0 and d.info["candidates"] == []
