"""Issue 29 item 6: the intact design is at least as fast as re-routing its circuits without one
of them (what a single failure's re-optimisation finds when it rewires nothing): the iteration
search tries those routings (:mod:`solvers.joint.subset_routing`) before it ships."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.driver import route_design, to_design
from solvers.joint.iteration_objective import iteration_time
from solvers.joint.subset_routing import SUBSET_REROUTES, reroute_order
from solvers.model.congestion import evaluate_routing
from solvers.model.problem import DesignProblem
from solvers.registry import solve
from tests.test_whatif import dlrm_like


@pytest.fixture(scope="module")
def dlrm10():
    w = dlrm_like(10)
    p = DesignProblem.from_workload(w, 3, 12.5e9)
    return p, solve(p, "joint", time_limit_s=600)


def test_reroutes_without_one_circuit_are_tried_and_never_faster(dlrm10):
    problem, d = dlrm10
    assert d.info["objective"] == "iteration" and d.info["deterministic"]
    tried = d.info["subset_reroutes"]  # absent before: the intact search never tried them
    assert len(tried) == SUBSET_REROUTES
    base = topoopt_design(problem, "topoopt", seed=0)  # the routing LP's warm-start rings
    rows = {tuple(r[:2]): r[2] for r in d.circuits.tolist()}
    for t in tried:
        u, v = t["circuit"]
        assert rows[(u, v)] >= 1
        sub = d.circuits.rows.copy()
        sub[[tuple(r[:2]) == (u, v) for r in sub.tolist()], 2] -= 1
        sub = sub[sub[:, 2] > 0]
        routed, _, _ = route_design(problem, sub, extra=base)
        rerouted = to_design(problem, sub, routed, 0.0, "joint", time.perf_counter(), {})
        on_intact = replace(rerouted, circuits=d.circuits)  # valid: a subset's hops
        ev = evaluate_routing(problem, on_intact.circuits, on_intact.phase_routings(problem))
        assert ev.feasible
        it = iteration_time(on_intact, problem)[0]
        assert it == pytest.approx(t["iteration_s"], rel=1e-5)  # what the search simulated
        assert d.objective_s <= it * (1 + 1e-6)  # the intact design is no slower


def test_reroute_order_is_least_loaded_first_and_spares_prewired():
    problem = DesignProblem.from_workload(dlrm_like(8), 3, 12.5e9)
    d = topoopt_design(problem, "topoopt", seed=0)
    order = reroute_order(problem, d)
    ev = evaluate_routing(problem, d.circuits, d.phase_routings(problem), keep_loads=True)
    cap = np.repeat(d.circuits.rows[:, 2] * problem.link_bandwidth, 2)
    util = np.max([ld / cap / t for ld, t in zip(ev.link_loads, ev.phase_times, strict=True)], 0)
    per_row = np.maximum(util[0::2], util[1::2])
    assert sorted(order) == list(range(len(d.circuits)))
    assert np.all(np.diff(per_row[order]) >= 0)
    pinned = problem.with_options(prewired=d.circuits.rows[:2])
    assert reroute_order(pinned, d) == [i for i in order if i >= 2]
