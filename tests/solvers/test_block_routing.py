"""Block partitions, balanced block rings and block detours (issue #14, the CANDLE targets).

- :func:`block_partitions` equals an independent derivation with networkx (components of the
  fixed traffic above every weight threshold, kept while the blocks hold 80 % of the bytes).
- :func:`balanced_block_rings` gives Hamiltonian rings over each group whose crossings between
  blocks are circuits and load every position's circuits across equally (counted from the
  orders, both directions).
- :func:`block_detours` moves a share of a pair's bytes onto link-disjoint detours; a lone
  transfer then takes the closed-form time of its slowest path.
- On TopoOpt's CANDLE task graphs, ``joint --priorities`` meets issue #14's targets, by the
  flow model simulated independently of the optimizer.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_iteration_objective import _chain_workload, _direct_design

from solvers.joint.block_candidates import (
    balanced_block_rings,
    block_constructions,
    block_detours,
    block_partitions,
)
from solvers.joint.driver import route_design, to_design
from solvers.joint.iteration_objective import iteration_time
from solvers.model.problem import DesignProblem
from traffic.load import load_workload

ROOT = Path(__file__).resolve().parents[2]
TG = ROOT / "tests" / "data" / "topoopt-taskgraphs"
B = 100e9 / 8


def _fixed_pair_bytes(w):
    """Server pair -> fixed (non-mutable) bytes, both directions summed, from the demands."""
    acc: dict[tuple[int, int], float] = defaultdict(float)
    for d in w.demands:
        if d.mutable:
            continue
        for a, b in (np.asarray(d.groups) // w.gpus_per_server).tolist():
            if a != b:
                acc[(min(a, b), max(a, b))] += float(d.size) * int(d.count)
    return acc


def _nx_partitions(w, share=0.8):
    acc = _fixed_pair_bytes(w)
    total = sum(acc.values())
    out = []
    for cut in [-1.0, *sorted(set(acc.values()))[:-1]]:
        g = nx.Graph()
        g.add_nodes_from(range(w.servers))
        g.add_edges_from(e for e, x in acc.items() if x > cut)
        comps = sorted(sorted(c) for c in nx.connected_components(g))
        label = {u: i for i, c in enumerate(comps) for u in c}
        inside = sum(x for (a, b), x in acc.items() if label[a] == label[b])
        if inside < share * total:
            break
        sizes = {len(c) for c in comps}
        if len(comps) >= 2 and len(sizes) == 1 and min(sizes) >= 2 and comps not in out:
            out.append(comps)
    return out


@pytest.mark.parametrize("case", ["100candle_16", "100candle_32", "100dlrm_16"])
def test_block_partitions_match_networkx(case):
    w = load_workload(str(TG / f"{case}.fbuf"))
    p = DesignProblem.from_workload(w, degree=8, link_bandwidth=B)
    got = block_partitions(p)
    assert got == _nx_partitions(w)
    if case == "100candle_32":  # two components of 16, and the four replicas of 8 inside them
        assert got == [
            [list(range(0, 16)), list(range(16, 32))],
            [list(range(i, i + 8)) for i in range(0, 32, 8)],
        ]
    if case == "100dlrm_16":  # the embedding all-to-all joins every server: no blocks
        assert got == []


def _routed_block_design(case, degree, which):
    w = load_workload(str(TG / f"{case}.fbuf"))
    p = DesignProblem.from_workload(w, degree=degree, link_bandwidth=B)
    name, c, comps = next(x for x in block_constructions(p) if which in x[0])
    routed, _, _ = route_design(p, c)
    return p, to_design(p, c, routed, 0.0, "joint", 0.0, {}), comps


def test_balanced_block_rings_are_rings_and_balance_positions():
    p, d0, comps = _routed_block_design("100candle_16", 8, "complete x2")
    d = balanced_block_rings(d0, p, comps)
    block_of = {u: b for b, c in enumerate(comps) for u in c}
    pos_of = {u: i for c in comps for i, u in enumerate(c)}
    have = {(int(u), int(v)) for u, v, m in d.circuits if m > 0}
    have |= {(v, u) for u, v in have}
    groups = defaultdict(list)
    for r in d.rings:
        groups[(r["phase"], r["group"])].append(r)
    assert {k for k in groups} == {(r["phase"], r["group"]) for r in d0.rings}
    for rings in groups.values():
        members = rings[0]["members"]
        assert sum(r["weight"] for r in rings) == pytest.approx(1.0)
        load = defaultdict(float)  # (position, direction between the blocks) -> weight
        for r in rings:
            o = r["order"]
            assert sorted(o) == sorted(members) and len(set(o)) == len(o)
            for i in range(len(o)):
                a, b = o[i], o[(i + 1) % len(o)]
                if block_of[a] != block_of[b]:
                    assert (a, b) in have and pos_of[a] == pos_of[b]
                    load[(pos_of[a], block_of[a], block_of[b])] += r["weight"]
        per_block = len(members) // len(comps)
        assert len(rings) == (2 * per_block if per_block > 1 else 2)
        # every position of the group, every hop between consecutive blocks, each way: the same
        assert max(load.values()) == pytest.approx(min(load.values()))
        assert len(load) == per_block * len(comps) * 2


def test_block_detours_lone_transfer_closed_form():
    """Two blocks {0, 1} and {2, 3}, circuits 0-1, 2-3 inside and 0-2, 1-3 across, B each. A
    lone transfer 0 -> 2 of S bytes takes S / B on its circuit; with share ``a`` on the detour
    0 -> 1 -> 3 -> 2 (link-disjoint from it) it takes max(1 - a, a) S / B (plus path latency)."""
    n, S = 4, 2e9
    w = _chain_workload(n, [(0, 2, S)])
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    circuits = [[0, 1, 1], [2, 3, 1], [0, 2, 1], [1, 3, 1]]
    direct = _direct_design(circuits, n, 2, B, [(0, 2)])
    comps = [[0, 1], [2, 3]]
    base = iteration_time(direct, p)[0]
    for a in (0.0, 0.25, 0.5, 0.8):
        d = block_detours(direct, p, a, comps)
        lists = d.routing.to_lists()
        assert all(sum(wt for _, wt in pl) == pytest.approx(1.0) for pl in lists)
        if a > 0:
            assert ([0, 1, 3, 2], pytest.approx(a)) in [(q, wt) for q, wt in lists[0]]
        it = iteration_time(d, p)[0]
        # up to the detour's two extra hops of path latency (microseconds; S / B is 160 ms)
        assert it - base == pytest.approx((max(1 - a, a) - 1) * S / B, abs=5e-6)


def test_block_detours_need_the_circuits():
    """Without the mates' circuit across (1-3), 0 -> 2 has no detour and keeps its path."""
    n = 4
    w = _chain_workload(n, [(0, 2, 1e9)])
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    direct = _direct_design([[0, 1, 1], [2, 3, 1], [0, 2, 1]], n, 2, B, [(0, 2)])
    d = block_detours(direct, p, 0.5, [[0, 1], [2, 3]])
    assert d.routing.to_lists() == direct.routing.to_lists()


@pytest.mark.parametrize(
    "case, degree, target",
    [("100candle_16", 8, 1.10), ("100candle_16", 4, 1.35)],
)
def test_joint_priorities_meets_candle_targets(case, degree, target):
    """Issue #14's targets on TopoOpt's CANDLE task graphs (iteration over the ideal switch,
    100 Gbps ports): <= 1.10 at 8 ports, <= 1.35 at 4 ports, by an independent simulation of
    the shipped design; at 8 ports also against the ideal switch with the same priority. The
    32-server case (85-100 s of CPU) runs from ``benchmarks/candle_targets.py``."""
    from solvers.realise import simulate_design
    from solvers.registry import solve
    from topoopt.fabrics import ideal
    from topoopt.flowsim.iteration import simulate_iteration

    w = load_workload(str(TG / f"{case}.fbuf"))
    p = DesignProblem.from_workload(w, degree=degree, link_bandwidth=B)
    d = solve(p, "joint", time_limit_s=900, objective="iteration", priorities=True)
    assert d.info["deterministic"]
    it = simulate_design(w, d, p, exposed_by_class=False).iteration_s
    assert it == pytest.approx(d.objective_s, rel=1e-9)
    fab = ideal(w.servers, degree, B, gpus_per_server=w.gpus_per_server)
    fair = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    assert d.lower_bound_s <= it <= target * fair
    if degree == 8:
        prio = simulate_iteration(w, fab, exposed_by_class=False, priority=d.priority)
        assert it <= target * min(fair, prio.iteration_s)
