"""Designs realised on task-graph Workloads (imported TopoOpt traces).

Invariants first (bytes conserved per phase, every task keeps its edges, each ring's row is a
permutation of the original row in the ring's server order), then the flow model: a design with
one ring per group simulates exactly like the original workload with its rows re-ordered by hand
(a second, minimal construction), and a real artifact task graph runs end to end.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from solvers.baselines.topoopt_method import topoopt_design
from solvers.model.problem import DesignProblem
from solvers.realise import design_fabric, design_routing, design_workload
from solvers.realise_taskgraph import ring_taskgraph_workload
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.iteration import simulate_iteration
from traffic.workload import Demand, TaskGraph, Workload

TASKGRAPHS = Path(__file__).resolve().parents[1] / "data" / "topoopt-taskgraphs"


def small_taskgraph() -> Workload:
    """6 servers x 1 GPU: compute -> two all-reduces (one over all, one over 3) -> compute."""
    tg = TaskGraph(
        task_id=np.arange(4),
        kind=np.array(["backward", "all-reduce", "all-reduce", "update"]),
        server=np.array([0, -1, -1, 0]),
        runtime_s=np.array([1e-3, 0.0, 0.0, 1e-3]),
        size_bytes=np.array([0.0, 6e6, 3e6, 0.0]),
        edges=np.array([[0, 1], [0, 2], [1, 3], [2, 3]]),
        demand=np.array([[-1, -1], [0, 0], [1, 0], [-1, -1]]),
    )
    return Workload(
        gpus=6,
        gpus_per_server=1,
        demands=(
            Demand("all-reduce", np.arange(6).reshape(1, 6), 6e6, "dp", "backward"),
            Demand("all-reduce", np.array([[1, 3, 5]]), 3e6, "dp", "backward"),
        ),
        taskgraph=tg,
    )


def ring_bytes(w: Workload) -> dict[str, float]:
    """Bytes of the ring collectives per phase (size x rows)."""
    out: dict[str, float] = {}
    for d in w.demands:
        if d.op == "all-reduce":
            out[d.phase] = out.get(d.phase, 0.0) + d.size * d.n_groups
    return out


def test_rings_split_tasks_and_conserve_bytes():
    w = small_taskgraph()
    table = {
        ("backward", (0, 1, 2, 3, 4, 5)): [
            (np.array([0, 2, 4, 1, 3, 5]), 0.5),
            (np.array([0, 5, 3, 1, 4, 2]), 0.5),
        ],
        ("backward", (1, 3, 5)): [(np.array([5, 3, 1]), 1.0)],
    }
    out = ring_taskgraph_workload(w, table, single=False)
    assert ring_bytes(out) == pytest.approx(ring_bytes(w))
    tg = out.taskgraph
    assert tg.n_tasks == 5  # the 6-server all-reduce became two tasks
    assert tg.size_bytes[tg.kind == "all-reduce"].sum() == pytest.approx(9e6)
    # every copy has the original's edges: 0 -> copy -> 3
    copy = 4
    assert [0, copy] in tg.edges.tolist() and [copy, 3] in tg.edges.tolist()
    # rows follow their ring's order and are permutations of the original rows
    for t in np.flatnonzero(tg.kind == "all-reduce").tolist():
        f, r = tg.demand[t]
        d = out.demands[f]
        assert d.ordered
        row = d.groups[r].tolist()
        assert sorted(row) in ([0, 1, 2, 3, 4, 5], [1, 3, 5])
    orders = sorted(out.demands[f].groups[r].tolist() for f, r in tg.demand[[1, 2, 4]].tolist())
    assert orders == [[0, 2, 4, 1, 3, 5], [0, 5, 3, 1, 4, 2], [5, 3, 1]]
    assert sorted(tg.size_bytes[[1, 2, 4]].tolist()) == [3e6, 3e6, 3e6]


def test_single_ring_design_simulates_like_rows_reordered_by_hand():
    w = small_taskgraph()
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    design = topoopt_design(p, "topoopt-released")
    # keep only one direction of each group's rings, with weight 1
    rings, seen = [], set()
    for r in design.rings:
        if (r["phase"], r["group"]) not in seen:
            seen.add((r["phase"], r["group"]))
            rings.append({**r, "weight": 1.0})
    one = replace(design, rings=tuple(rings))
    got = design_workload(w, one, p)
    # by hand: the same demands, each row in its ring's order, marked ordered
    by_group = {tuple(sorted(r["order"])): r["order"] for r in rings}
    hand = replace(
        w,
        demands=tuple(
            replace(d, groups=np.array([by_group[tuple(sorted(d.groups[0]))]]), ordered=True)
            for d in w.demands
        ),
    )
    fab = design_fabric(one, gpus_per_server=1)
    route = design_routing(one, fab)
    a = simulate_iteration(got, fab, routing=route, exposed_by_class=False).iteration_s
    b = simulate_iteration(hand, fab, routing=route, exposed_by_class=False).iteration_s
    assert a == pytest.approx(b, rel=1e-12)
    ca = communication_time(got, fab, routing=route).total_s
    cb = communication_time(hand, fab, routing=route).total_s
    assert ca == pytest.approx(cb, rel=1e-12)


def test_artifact_taskgraph_runs_on_a_designed_fabric():
    from traffic.taskgraph import read_taskgraph

    w = read_taskgraph(TASKGRAPHS / "100dlrm_16.fbuf")
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=12.5e9)
    design = topoopt_design(p)
    realised = design_workload(w, design, p)
    assert ring_bytes(realised) == pytest.approx(ring_bytes(w))
    mp = [d for d in w.demands if d.op == "send"]
    assert [d for d in realised.demands if d.op == "send"] == mp  # untouched, same objects
    fab = design_fabric(design, gpus_per_server=w.gpus_per_server)
    it = simulate_iteration(realised, fab, routing=design_routing(design, fab))
    assert np.isfinite(it.iteration_s) and it.iteration_s > 0
