"""Lower bounds: closed forms, and never above the time of any routed design (checked on every
degree-feasible design of a tiny problem, routed by the LP)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.bounds import ideal_switch_bound, lower_bound, lp_relaxation_bound
from solvers.model.problem import DesignProblem, PhaseTraffic
from solvers.routing_lp import route_circuits
from traffic.errors import InputError


def test_ideal_switch_closed_form():
    # server 0 sends 6 bytes to 1 and 3 to 2; group {0,1,2,3} ring bytes 2 -> out_0 = 11,
    # in_1 = 6 + 2 = 8; d = 2 ports of 0.5 bytes/s -> 11 s
    fixed = sp.csr_matrix(([6.0, 3.0], ([0, 0], [1, 2])), shape=(4, 4))
    ph = PhaseTraffic("p", [0, 4], [0, 1, 2, 3], [2.0], fixed)
    two = (ph, PhaseTraffic("q", [0], [], [], sp.csr_matrix(([1.0], ([3], [2])), shape=(4, 4))))
    prob = DesignProblem(4, 2, 0.5, two)
    assert ideal_switch_bound(prob).tolist() == [11.0, 1.0]


def test_one_way_pipeline_needs_both_directions():
    # one-way ring of transfers u -> u+1 on n servers, 1 byte each, d = 2 ports of 1 byte/s.
    # The LP relaxation's optimum is 2/3 for n = 3 (closed form in bounds.lower_bound's
    # docstring) and the triangle design achieves it.
    n = 3
    D = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
    prob = DesignProblem(n, 2, 1.0, (PhaseTraffic("fwd", [0], [], [], D),))
    b = lower_bound(prob)
    assert b.ideal_s.tolist() == [0.5]
    assert b.lower_bound_s == pytest.approx(2 / 3, rel=1e-6)
    assert b.method.startswith("lp")
    routed = route_circuits(prob, [[0, 1, 1], [1, 2, 1], [0, 2, 1]])
    assert routed.time_s == pytest.approx(2 / 3, rel=1e-6)


def test_pure_data_parallel_lp_equals_ideal():
    # a single all-reduce over all servers: d/2 Hamiltonian cycles reach the ideal switch, so
    # the relaxation cannot be higher than the ideal bound: R / (d B)
    n, d, B, R = 6, 2, 3.0, 12.0
    ph = PhaseTraffic("backward", [0, n], np.arange(n), [R], sp.csr_matrix((n, n)))
    prob = DesignProblem(n, d, B, (ph,))
    lp, how = lp_relaxation_bound(prob)
    assert lp[0] == pytest.approx(R / (d * B), rel=1e-6)
    assert lower_bound(prob).lower_bound_s == pytest.approx(R / (d * B), rel=1e-6)


def test_skipped_when_too_large():
    n = 10
    m = np.ones((n, n)) - np.eye(n)
    prob = DesignProblem(n, 3, 1.0, (PhaseTraffic("a2a", [0], [], [], sp.csr_matrix(m)),))
    b = lower_bound(prob, max_columns=100)
    assert b.lp_s is None and "skipped" in b.method
    # the hop-counting bound still holds: 3 servers at one hop, 6 at two -> 15 / 3 = 5 s
    assert b.ideal_s.tolist() == [3.0]
    assert b.lower_bound_s == pytest.approx(5.0)


def all_multigraphs(n, d, cap):
    """Every multigraph on n servers with degree <= d and at most cap circuits per pair."""
    pairs = list(itertools.combinations(range(n), 2))
    for counts in itertools.product(range(cap + 1), repeat=len(pairs)):
        deg = np.zeros(n, int)
        for (u, v), k in zip(pairs, counts, strict=True):
            deg[u] += k
            deg[v] += k
        if deg.max() <= d:
            yield [[u, v, k] for (u, v), k in zip(pairs, counts, strict=True) if k]


def test_bound_below_every_design_of_a_tiny_problem():
    # n = 4, d = 2: fixed one-way traffic plus a 3-member ring group; every connected
    # degree-feasible multigraph, routed optimally by the LP, takes at least the bound
    n = 4
    fixed = sp.csr_matrix(([3.0, 1.0, 2.0], ([0, 1, 3], [1, 3, 2])), shape=(n, n))
    ph = PhaseTraffic("p", [0, 3], [0, 2, 3], [2.0], fixed)
    prob = DesignProblem(n, 2, 1.0, (ph,))
    lb = lower_bound(prob).lower_bound_s
    best = np.inf
    for c in all_multigraphs(n, 2, 2):
        try:
            t = route_circuits(prob, c).time_s
        except InputError:
            continue  # disconnected for this traffic
        assert t >= lb * (1 - 1e-7)
        best = min(best, t)
    assert np.isfinite(best) and best >= lb


def test_hop_count_bound_is_attained_by_the_petersen_graph():
    # all-to-all of 1 byte per pair, 10 servers, 3 ports: the Moore bound (3 at one hop, 6 at
    # two: 15 byte-hops per server over 3 bytes/s) is 5 s, and the Petersen graph (a Moore
    # graph) routed by the LP reaches it; the ideal switch only says 3 s
    import networkx as nx

    n = 10
    D = sp.csr_matrix(np.ones((n, n)) - np.eye(n))
    prob = DesignProblem(n, 3, 1.0, (PhaseTraffic("a2a", [0], [], [], D),))
    b = lower_bound(prob, use_lp=False)
    assert b.ideal_s.tolist() == [3.0] and b.hops_s.tolist() == [5.0]
    assert b.lower_bound_s == 5.0 and b.method.startswith("hop counting")
    c = [[u, v, 1] for u, v in nx.petersen_graph().edges()]
    assert route_circuits(prob, c).time_s == pytest.approx(5.0, rel=1e-6)
