"""The joint optimizer's flow-model judging (solvers.joint.flow_select).

The choice rule is checked against a direct re-implementation on hand-made scores; the driver's
guarantee (never slower than ``topoopt`` in the flow model, communication and iteration) is
checked by simulating both designs independently; a time-boxed simulation that cannot finish
scores ``inf``.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
import pytest

from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint import congestion_search
from solvers.joint.flow_select import FlowScore, flow_times, score, select_by_flow
from solvers.model.problem import DesignProblem
from traffic.load import load_workload


@pytest.fixture(scope="module")
def dlrm_problem():
    w = load_workload("dlrm")  # 16 servers x 8 GPUs, embedding all-to-all + DP all-reduce
    return w, DesignProblem.from_workload(w, degree=4, link_bandwidth=12.5e9)


def brute_choice(scores: list[FlowScore], objectives: list[float], ref: str) -> int:
    """Admissible: no worse than ``ref`` in either time or the objective; then min (comm,
    iteration, index)."""
    k = next(i for i, s in enumerate(scores) if s.name == ref)
    r, tol = scores[k], 1 + 1e-9
    ok = [
        i
        for i, s in enumerate(scores)
        if s.comm_s <= r.comm_s * tol
        and s.iteration_s <= r.iteration_s * tol
        and objectives[i] <= objectives[k] * tol
    ]
    return min(ok, key=lambda i: (scores[i].comm_s, scores[i].iteration_s, i))


@pytest.mark.parametrize("seed", range(8))
def test_choice_rule_matches_a_direct_implementation(dlrm_problem, seed):
    w, p = dlrm_problem
    rng = np.random.default_rng(seed)
    names = ["a", "topoopt", "b", "c"]
    known = {
        nm: FlowScore(nm, float(rng.integers(1, 4)), float(rng.integers(1, 4)), 0.0) for nm in names
    }
    base = topoopt_design(p)  # never simulated: every score is known
    objectives = [float(x) for x in rng.integers(1, 4, len(names))]
    designs = [replace(base, objective_s=o) for o in objectives]
    finalists = list(zip(names, designs, strict=True))
    best, scores = select_by_flow(finalists, p, w, time.perf_counter(), known)
    assert [s.name for s in scores] == names
    assert best == brute_choice(scores, objectives, "topoopt")


def test_reference_must_be_a_finalist(dlrm_problem):
    w, p = dlrm_problem
    with pytest.raises(ValueError, match="reference"):
        select_by_flow([("x", topoopt_design(p))], p, w, time.perf_counter() + 10)


def test_time_boxed_score_equals_the_direct_one_and_expires(dlrm_problem):
    w, p = dlrm_problem
    d = topoopt_design(p)
    direct = flow_times(d, p, w)
    boxed = score("topoopt", d, p, w, timeout=120.0)
    assert (boxed.comm_s, boxed.iteration_s) == pytest.approx(direct[:2], rel=1e-12)
    assert boxed.refills == direct[2] > 0
    expired = score("topoopt", d, p, w, timeout=1e-4)
    assert math.isinf(expired.comm_s)


@pytest.mark.parametrize("timeout", [None, 120.0])
def test_work_limited_score_is_all_or_nothing(dlrm_problem, timeout):
    """With exactly the re-fills the two simulations need, the score is the unlimited one; with
    one fewer it is over budget (in the forked child too: the exception crosses the pipe)."""
    w, p = dlrm_problem
    d = topoopt_design(p)
    comm, it, used = flow_times(d, p, w)
    fits = score("topoopt", d, p, w, timeout=timeout, max_refills=used)
    assert (fits.comm_s, fits.iteration_s, fits.refills) == (comm, it, used)
    assert not fits.over_budget
    short = score("topoopt", d, p, w, timeout=timeout, max_refills=used - 1)
    assert short.over_budget and not short.timed_out and math.isinf(short.comm_s)
    assert short.refills == used  # the iteration's last simulation stopped at its last event


def test_select_by_flow_shares_the_work_limit_in_order(dlrm_problem):
    """The reference fits; the next finalist gets what is left and the one after it nothing.
    (``other`` is given the reference's objective: a finalist worse in the objective would not
    be simulated at all.)"""
    w, p = dlrm_problem
    ref = topoopt_design(p)
    other = replace(topoopt_design(p, "topoopt-released"), objective_s=ref.objective_s)
    ref_score = score("topoopt", ref, p, w)
    _, _, other_used = flow_times(other, p, w)
    finalists = [("a", other), ("topoopt", ref), ("b", other)]
    far = time.perf_counter() + 600
    best, scores = select_by_flow(
        finalists, p, w, far, {"topoopt": ref_score}, max_refills=other_used
    )
    assert [sc.over_budget for sc in scores] == [False, False, True]
    best2, scores2 = select_by_flow(
        finalists, p, w, far, {"topoopt": ref_score}, max_refills=other_used - 1
    )
    assert [sc.over_budget for sc in scores2] == [True, False, True]
    assert best2 == 1  # only the reference was judged


def test_joint_is_never_slower_than_topoopt_in_the_flow_model(dlrm_problem):
    w, p = dlrm_problem
    d = congestion_search(p, time_limit_s=20, seed=0)
    base = topoopt_design(p, "topoopt", seed=0)
    jc, ji, _ = flow_times(d, p, w)
    bc, bi, _ = flow_times(base, p, w)
    assert jc <= bc * (1 + 1e-9) and ji <= bi * (1 + 1e-9)
    assert d.info["selected_by"].startswith("flow model")
    assert d.info["flow_comm_s"][d.info["winner"]] == pytest.approx(jc, rel=1e-12)
    # here the optimizer's design is clearly faster than TopoOpt's (the embedding all-to-all;
    # 0.74x since the baseline's matchings break their ties towards pairs with demand that are
    # far apart, issue 13)
    assert jc < 0.8 * bc
    # judged by the objective instead, the result still never loses to the baseline there
    o = congestion_search(p, time_limit_s=20, seed=0, select_by="objective")
    assert o.objective_s <= base.objective_s * (1 + 1e-9)
    assert o.info["selected_by"] == "optimizer objective"
