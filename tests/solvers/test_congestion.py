"""The congestion objective: recomputed against a plain-Python re-implementation and closed forms,
and every feasibility check fires on a broken design."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.model.congestion import (
    PhaseRouting,
    RingSet,
    evaluate_routing,
    link_lookup,
    node_paths_to_pathset,
    pathset_to_node_paths,
    phase_pairs,
)
from solvers.model.problem import DesignProblem, PhaseTraffic
from topoopt.fabrics.circuits import Circuits, circuit_degrees, circuit_links
from traffic.errors import InputError

B = 10.0


def ring4():
    """Circuits 0-1-2-3-0, one each."""
    return np.array([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])


def dp_problem(rb=40.0, fixed=None, n=4, d=2):
    ph = PhaseTraffic("backward", [0, n], np.arange(n), [rb], fixed or sp.csr_matrix((n, n)))
    return DesignProblem(n, d, B, (ph,))


def direct_paths(circuits, pairs):
    src, dst, _ = circuit_links(Circuits(circuits, 4).rows, B)
    look = link_lookup(src, dst, 4)
    s = np.array([p[0] for p in pairs])
    t = np.array([p[1] for p in pairs])
    return node_paths_to_pathset(s, t, [[([a, b], 1.0)] for a, b in pairs], look)


def test_canonical_and_degrees():
    c = Circuits([[3, 0, 1], [0, 3, 2], [1, 2, 1]], 4).rows
    assert c.tolist() == [[0, 3, 3], [1, 2, 1]]
    assert circuit_degrees(c, 4).tolist() == [3, 1, 1, 3]
    with pytest.raises(InputError, match="circuits"):
        Circuits([[0, 4, 1]], 4)
    with pytest.raises(InputError, match="u != v"):
        Circuits([[1, 1, 1]], 4)


def test_one_ring_along_the_circuits_closed_form():
    # one directed ring 0->1->2->3 carrying R per step on links of capacity B: T = R / B
    p = dp_problem(rb=40.0)
    rings = RingSet.from_lists([(0, 1.0, [0, 1, 2, 3])])
    paths = direct_paths(ring4(), [(0, 1), (1, 2), (2, 3), (3, 0)])
    ev = evaluate_routing(p, ring4(), [PhaseRouting(rings, paths)])
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(40.0 / B)
    # both directions, half each: T = R / (2B)
    rings2 = RingSet.from_lists([(0, 0.5, [0, 1, 2, 3]), (0, 0.5, [3, 2, 1, 0])])
    pairs = [(0, 1), (1, 2), (2, 3), (3, 0), (3, 2), (2, 1), (1, 0), (0, 3)]
    ev2 = evaluate_routing(p, ring4(), [PhaseRouting(rings2, direct_paths(ring4(), pairs))])
    assert ev2.feasible and ev2.objective == pytest.approx(20.0 / B)


def _reference_objective(problem, circuits, routings):
    """Plain-Python re-implementation: dict of loads, loops over rings and node paths."""
    c = Circuits(circuits, problem.n).rows
    capacity = {}
    for u, v, k in c.tolist():
        capacity[(u, v)] = capacity[(v, u)] = k * problem.link_bandwidth
    src, dst, _ = circuit_links(c, problem.link_bandwidth)
    total = 0.0
    for ph, rt in zip(problem.phases, routings, strict=True):
        demand = {}
        fx = ph.fixed.tocoo()
        for a, b, x in zip(fx.row.tolist(), fx.col.tolist(), fx.data.tolist(), strict=True):
            demand[(a, b)] = demand.get((a, b), 0.0) + x
        for g, w, order in rt.rings.to_lists():
            for i, a in enumerate(order):
                b = order[(i + 1) % len(order)]
                demand[(a, b)] = demand.get((a, b), 0.0) + w * ph.ring_bytes[g]
        node_paths = pathset_to_node_paths(rt.paths, src, dst)
        loads = dict.fromkeys(capacity, 0.0)
        for k in range(rt.paths.n_commodities):
            pair = (int(rt.paths.src[k]), int(rt.paths.dst[k]))
            for nodes, w in node_paths[k]:
                for a, b in zip(nodes, nodes[1:], strict=False):
                    loads[(a, b)] += w * demand.get(pair, 0.0)
        total += max(loads[e] / capacity[e] for e in capacity)
    return total


def test_random_designs_match_reference():
    rng = np.random.default_rng(3)
    n = 6
    # circulant +-1, +-2 (degree 4), with a doubled circuit
    c = [[i, (i + 1) % n, 1] for i in range(n)] + [[i, (i + 2) % n, 1] for i in range(n)]
    c = Circuits(c, n).rows
    src, dst, _ = circuit_links(c, 1.0)
    look = link_lookup(src, dst, n)
    for _ in range(5):
        fixed = sp.csr_matrix(rng.random((n, n)) * (rng.random((n, n)) < 0.4))
        members = np.sort(rng.choice(n, 4, replace=False))
        ph = PhaseTraffic("p", [0, 4], members, [rng.random() * 5], fixed)
        prob = DesignProblem(n, 4, 1.0, (ph,))
        rings = RingSet.from_lists(
            [(0, 0.3, rng.permutation(members).tolist()), (0, 0.7, members.tolist())]
        )
        s, t, _ = phase_pairs(ph, rings, n)
        # two paths per pair: direct-ish walk around the +1 ring and around the -1 ring
        plist = []
        for a, b in zip(s.tolist(), t.tolist(), strict=True):
            fwd = [a]
            while fwd[-1] != b:
                fwd.append((fwd[-1] + 1) % n)
            back = [a]
            while back[-1] != b:
                back.append((back[-1] - 1) % n)
            w = rng.random()
            plist.append([(fwd, w), (back, 1.0 - w)])
        paths = node_paths_to_pathset(s, t, plist, look)
        ev = evaluate_routing(prob, c, [PhaseRouting(rings, paths)])
        assert ev.feasible, ev.violations
        want = _reference_objective(prob, c, [PhaseRouting(rings, paths)])
        assert ev.objective == pytest.approx(want, rel=1e-12)


def test_violations_are_reported():
    p = dp_problem(rb=40.0, d=2)
    rings = RingSet.from_lists([(0, 1.0, [0, 1, 2, 3])])
    good = direct_paths(ring4(), [(0, 1), (1, 2), (2, 3), (3, 0)])
    # degree: a third circuit at server 0
    extra = np.vstack([ring4(), [[0, 2, 1]]])
    src, dst, _ = circuit_links(Circuits(extra, 4).rows, B)
    look = link_lookup(src, dst, 4)
    s, t = np.array([0, 1, 2, 3]), np.array([1, 2, 3, 0])
    paths = node_paths_to_pathset(s, t, [[([a, b], 1.0)] for a, b in zip(s, t, strict=True)], look)
    ev = evaluate_routing(p, extra, [PhaseRouting(rings, paths)])
    assert not ev.feasible and any("degree" in v for v in ev.violations)
    # weights not summing to one
    bad_w = type(good)(
        good.src, good.dst, good.commodity_ptr, good.path_ptr, good.path_links, good.weight * 0.5
    )
    ev = evaluate_routing(p, ring4(), [PhaseRouting(rings, bad_w)])
    assert any("sum to 1" in v for v in ev.violations)
    # a path that is not a walk: commodity 0->1 routed over link 1->2
    links = good.path_links.copy()
    links[0] = links[1]
    broken = type(good)(good.src, good.dst, good.commodity_ptr, good.path_ptr, links, good.weight)
    ev = evaluate_routing(p, ring4(), [PhaseRouting(rings, broken)])
    assert any("start at its source" in v for v in ev.violations)
    # a ring step with no path -> infinite time
    short = direct_paths(ring4(), [(0, 1), (1, 2), (2, 3)])
    ev = evaluate_routing(p, ring4(), [PhaseRouting(rings, short)])
    assert not ev.feasible and np.isinf(ev.objective)
    # a ring that is not a permutation of its group
    bad_ring = RingSet.from_lists([(0, 1.0, [0, 1, 2, 2])])
    ev = evaluate_routing(p, ring4(), [PhaseRouting(bad_ring, good)])
    assert any("permutation" in v for v in ev.violations)
    # a hop over a missing circuit cannot even be written down
    with pytest.raises(InputError, match="routing"):
        direct_paths(ring4(), [(0, 2)])


def test_problem_from_workload_closed_forms():
    # 4 servers x 2 GPUs. DP all-reduce groups {0,2,4,6} and {1,3,5,7} (one GPU per server):
    # one server group {0,1,2,3}, ring bytes 2 x 2(4-1)/4 x S x count. A TP all-reduce inside a
    # server contributes nothing. A pipeline send 1 -> 4 (server 0 -> 2) of 5 bytes x 3 is fixed.
    from traffic.workload import Demand, Workload

    w = Workload(
        gpus=8,
        gpus_per_server=2,
        demands=(
            Demand("all-reduce", np.array([[0, 2, 4, 6], [1, 3, 5, 7]]), 10.0, "dp", "backward",
                   count=2),
            Demand("all-reduce", np.array([[0, 1], [2, 3]]), 99.0, "tp", "backward"),
            Demand("send", np.array([[1, 4]]), 5.0, "pp", "forward", count=3, mutable=False),
            Demand("all-gather", np.array([[0, 2]]), 8.0, "dp", "backward", mutable=False),
        ),
    )  # fmt: skip
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=2.0)
    assert [ph.name for ph in p.phases] == ["forward", "backward"]
    fwd, bwd = p.phases
    assert fwd.n_groups == 0 and fwd.fixed.toarray()[0, 2] == 15.0 and fwd.fixed.sum() == 15.0
    assert bwd.n_groups == 1 and bwd.group(0).tolist() == [0, 1, 2, 3]
    assert bwd.ring_bytes[0] == pytest.approx(2 * 2 * 3 / 4 * 10.0 * 2)
    # fixed all-gather of 2 ranks on servers 0 and 1: ring, (g-1)/g S = 4 bytes each way
    assert bwd.fixed.toarray()[0, 1] == 4.0 and bwd.fixed.toarray()[1, 0] == 4.0
    one = DesignProblem.from_workload(w, degree=3, link_bandwidth=2.0, split_phases=False)
    assert [ph.name for ph in one.phases] == ["iteration"]
    assert one.phases[0].total_bytes() == pytest.approx(fwd.total_bytes() + bwd.total_bytes())
    with pytest.raises(InputError, match="degree"):
        DesignProblem.from_workload(w, degree=0, link_bandwidth=2.0)
    with pytest.raises(InputError, match="link_bandwidth"):
        DesignProblem.from_workload(w, degree=2, link_bandwidth=-1.0)
