"""Pipeline candidates (issue 29 item 5): circuits along the stage chains plus the data-parallel
partners. On a 4-stage, 2-replica GPT-3-shaped plan at 4 ports the joint optimizer finds a design
at least as fast as the hand design (one circuit to each pipeline neighbour, the other ports to
the data-parallel partner) even when the warm start's simulations use its whole work limit (as
on gpt3-175b-32 at the default limit, where it shipped TopoOpt's design)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import yaml

from solvers.joint.driver import route_design, to_design
from solvers.joint.iteration_objective import iteration_time
from solvers.joint.iteration_search import iteration_design
from solvers.joint.pipeline_candidates import pipeline_candidates, stage_chains
from solvers.model.problem import DesignProblem
from traffic.build import workload_from_plan
from traffic.plan import embedded_plan_path

PP, DP, DEGREE = 4, 2, 4


@pytest.fixture(scope="module")
def gpt_pp4():
    """GPT-3 175B's shape with 8 layers, tp 8 in a server, 4 stages x 2 replicas, 8 servers."""
    plan = yaml.safe_load(embedded_plan_path("gpt3-175b-32").read_text())
    plan["model"] = {"base": "gpt3-175b", "layers": 2 * PP}
    plan["parallelism"] = dict(plan["parallelism"], pp=PP, dp=DP, global_batch_size=16)
    plan["cluster"] = {"servers": PP * DP, "gpus_per_server": 8}
    w = workload_from_plan(plan)
    return DesignProblem.from_workload(w, degree=DEGREE, link_bandwidth=12.5e9)


def _hand(problem: DesignProblem) -> np.ndarray:
    """Stage ``s`` of replica ``r`` on server ``DP s + r`` (order tp-cp-ep-dp-pp): one circuit
    per pipeline hop, every other port to the data-parallel partner."""
    rows = [[DP * s + r, DP * (s + 1) + r, 1] for r in range(DP) for s in range(PP - 1)]
    for s in range(PP):
        ends = 1 if s in (0, PP - 1) else 2  # pipeline neighbours
        rows.append([DP * s, DP * s + 1, DEGREE - ends])
    return np.array(rows)


def test_stage_chains_and_the_hand_design_in_the_family(gpt_pp4):
    assert stage_chains(gpt_pp4) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    cands = dict(pipeline_candidates(gpt_pp4))
    hand = _hand(gpt_pp4)
    got = cands["pipeline x1 (open) + 2 ports to the ring groups"]
    key = lambda c: sorted(map(tuple, np.asarray(c).tolist()))  # noqa: E731
    assert key(got) == key(hand)
    for c in cands.values():  # every server uses exactly its 4 ports
        ports = np.bincount(np.r_[c[:, 0], c[:, 1]], weights=np.r_[c[:, 2], c[:, 2]], minlength=8)
        assert ports.tolist() == [DEGREE] * PP * DP


def test_joint_at_least_as_fast_as_the_hand_design(gpt_pp4):
    p = gpt_pp4
    hand = _hand(p)
    routed, _, _ = route_design(p, hand)
    hand_it = iteration_time(to_design(p, hand, routed, 0.0, "hand", time.perf_counter(), {}), p)[0]
    d = iteration_design(p, work_limit=2.0)  # the warm start's simulations use it all
    assert d.info["objective"] == "iteration"
    assert "skipped" in d.info["congestion_search"]
    assert d.objective_s <= hand_it * (1 + 1e-9)
    assert d.objective_s < min(d.info["iteration_s"].values())  # the warm start is slower
    assert iteration_time(d, p)[0] == pytest.approx(d.objective_s, rel=1e-6)
