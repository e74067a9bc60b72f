"""The LP-free router and the large-cluster search of issue 29 item 7
(:mod:`solvers.joint.fast_routing`, :mod:`solvers.joint.lp_free`): invariants of the
closed-form paths, the byte-hop bound on a hypercube, an independent arc-based LP as the
optimum on small random graphs, and the search above ``lp_max_servers``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.driver import congestion_search
from solvers.joint.fast_routing import candidate_paths, fast_route
from solvers.joint.lp_free import circulant_mean_hops, greedy_strides
from solvers.model.congestion import PhaseRouting, evaluate_routing
from solvers.model.problem import DesignProblem, PhaseTraffic
from topoopt.fabrics.circuits import Circuits, circuit_links


def _hypercube(dim: int) -> np.ndarray:
    n = 2**dim
    rows = [[u, u ^ (1 << b), 1] for u in range(n) for b in range(dim) if u < u ^ (1 << b)]
    return np.asarray(rows, np.int64)


def _random_regular(n: int, d: int, seed: int) -> np.ndarray:
    import networkx as nx

    g = nx.random_regular_graph(d, n, seed=seed)
    assert nx.is_connected(g)
    rows = np.asarray([[min(u, v), max(u, v), 1] for u, v in g.edges()], np.int64)
    return Circuits(rows, n).rows  # the canonical table link ids refer to


def _fixed_problem(n: int, d: int, traffic: np.ndarray, b: float = 1e9) -> DesignProblem:
    ph = PhaseTraffic("x", [0], [], [], sp.csr_matrix(traffic))
    return DesignProblem(n, d, b, (ph,))


def _arc_lp_optimum(problem: DesignProblem, circuits: np.ndarray) -> float:
    """min T s.t. per-commodity flow conservation on the directed links, every link's load
    <= T * capacity: the exact min-congestion routing (one phase, fixed traffic)."""
    n = problem.n
    src, dst, cap = circuit_links(circuits, 1.0)  # in units of the link bandwidth
    fx = problem.phases[0].fixed.tocoo()
    byts = (fx.data / problem.link_bandwidth).tolist()  # seconds on one link: well scaled
    pairs = list(zip(fx.row.tolist(), fx.col.tolist(), byts, strict=True))
    L, K = src.size, len(pairs)
    nv = K * L + 1  # f[k, l], then T
    a_eq, b_eq = [], []
    for k, (s, t, byts) in enumerate(pairs):
        for v in range(n):
            row = np.zeros(nv)
            row[k * L + np.flatnonzero(src == v)] += 1.0
            row[k * L + np.flatnonzero(dst == v)] -= 1.0
            a_eq.append(row)
            b_eq.append(byts if v == s else (-byts if v == t else 0.0))
    a_ub = np.zeros((L, nv))
    for k in range(K):
        a_ub[np.arange(L), k * L + np.arange(L)] = 1.0
    a_ub[:, -1] = -cap
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(L), A_eq=np.asarray(a_eq), b_eq=b_eq,
                  bounds=[(0, None)] * nv, method="highs")  # fmt: skip
    assert res.status == 0
    return float(res.fun)


def test_candidate_paths_are_simple_walks_of_at_most_one_extra_hop():
    c = _random_regular(12, 3, seed=1)
    n = 12
    src, dst = np.array([p for p in itertools.permutations(range(n), 2)]).T
    paths, hops = candidate_paths(c, n, src, dst)
    lsrc, ldst, _ = circuit_links(c, 1.0)
    adj = sp.csr_matrix((np.ones(lsrc.size), (lsrc, ldst)), shape=(n, n))
    dist = sp.csgraph.shortest_path(adj, unweighted=True)
    comm = paths.path_commodity()
    for p in range(paths.n_paths):
        links = paths.path_links[paths.path_ptr[p] : paths.path_ptr[p + 1]]
        nodes = [int(lsrc[links[0]])] + ldst[links].tolist()
        k = comm[p]
        assert nodes[0] == src[k] and nodes[-1] == dst[k]
        assert np.all(ldst[links[:-1]] == lsrc[links[1:]])  # a walk over circuits
        assert len(set(nodes)) == len(nodes)  # simple
        assert dist[src[k], dst[k]] <= len(links) <= dist[src[k], dst[k]] + 1
    per = np.diff(paths.commodity_ptr)
    assert per.min() >= 1 and per.max() <= 3  # one per first hop at most
    w = np.bincount(comm, weights=paths.weight)
    assert np.allclose(w, 1.0)
    # the start: every pair on its shortest candidates only
    assert np.all(hops[paths.weight > 0] == dist[src[comm], dst[comm]][paths.weight > 0])


def test_hypercube_all_to_all_meets_the_byte_hop_bound():
    # Q3, 1 GB per ordered pair at 1 GB/s: 8 * (3*1 + 3*2 + 1*3) GB-hops over 24 directed links
    # is 4 s on every link at best (the byte-hop bound; the LP reaches it); the closed-form
    # candidates balanced by Frank-Wolfe come within 1 % (measured 4.034 s)
    n = 8
    problem = _fixed_problem(n, 3, (np.ones((n, n)) - np.eye(n)) * 1e9)
    routed, t, util = fast_route(problem, _hypercube(3))
    assert t >= 4.0 * (1 - 1e-9)
    assert t <= 4.0 * 1.01
    ev = evaluate_routing(problem, _hypercube(3), routed.routings())
    assert ev.feasible and ev.objective == pytest.approx(t, rel=1e-12)
    assert util.max() == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_close_to_the_exact_arc_lp_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n, d = 8, 3
    c = _random_regular(n, d, seed=seed)
    tm = rng.integers(0, 4, size=(n, n)) * 1e9
    np.fill_diagonal(tm, 0)
    problem = _fixed_problem(n, d, tm)
    opt = _arc_lp_optimum(problem, c)
    routed, t, _ = fast_route(problem, c)
    ev = evaluate_routing(problem, c, routed.routings())
    assert ev.feasible and ev.objective == pytest.approx(t, rel=1e-12)
    assert t >= opt * (1 - 1e-7)  # no routing beats the LP
    assert t <= opt * 1.02  # measured 1.001-1.006 on these seeds


def test_rings_follow_circuits_or_the_baseline():
    # a data-parallel ring over 6 servers on a 6-cycle: the ring runs on its circuits, 1 hop
    n = 6
    ph = PhaseTraffic("b", [0, n], np.arange(n), [3e9], sp.csr_matrix((n, n)))
    problem = DesignProblem(n, 2, 1e9, (ph,))
    c = np.array([[i, (i + 1) % n, 1] for i in range(n)])
    c[:, :2].sort(axis=1)
    routed, t, _ = fast_route(problem, c)
    assert t == pytest.approx(1.5)  # two directed rings, half each: 1.5 GB per link
    assert routed.paths.path_lengths().max() == 1
    base = topoopt_design(problem, "topoopt")
    r2, t2, _ = fast_route(problem, base.circuits, extra=base)
    assert t2 <= base.objective_s * (1 + 1e-9)
    assert PhaseRouting  # the routings() view is what evaluate_routing reads (checked above)


def test_greedy_strides_and_mean_hops_closed_forms():
    # C_n, n even: distances 1,1,2,2,...,n/2 -> (n/2)^2 / (n - 1)
    for n in (8, 10, 16):
        assert circulant_mean_hops(n, [1]) == pytest.approx((n / 2) ** 2 / (n - 1))
    assert circulant_mean_hops(8, [2]) == np.inf  # gcd 2: disconnected
    s = greedy_strides(64, 3)
    assert s[0] == 1 and len(s) == 3
    best = min(circulant_mean_hops(64, [1, p]) for p in range(2, 33))
    assert circulant_mean_hops(64, s[:2]) == best


def test_search_above_lp_max_servers_routes_its_own_designs():
    """lp_max_servers=4 puts the 12-server pipeline problem on the LP-free path: the result is
    feasible, recomputes to its objective, is deterministic, and is an LP-free design strictly
    better than both baselines (before: the baseline itself; the never-worse check on every
    workload problem is tests/solvers/test_joint.py's large-cluster test)."""
    from tests.solvers.test_joint import workload_problems

    problem = dict(workload_problems())["pipeline"]
    kw = {"time_limit_s": 60, "lp_max_servers": 4, "select_by": "objective"}  # no simulations
    d = congestion_search(problem, **kw)
    again = congestion_search(problem, **kw)
    assert d.circuits.tolist() == again.circuits.tolist()  # deterministic
    assert d.routing.weight.tolist() == again.routing.weight.tolist()
    ev = evaluate_routing(problem, d.circuits, d.phase_routings(problem))
    assert ev.feasible and ev.objective == pytest.approx(d.objective_s, rel=1e-9)
    assert d.info["steps"][0].startswith("LP-free routing")
    assert d.info["deterministic"] and d.info.get("routing_solver") == "lp-free"
    base = min(topoopt_design(problem, v).objective_s for v in ("topoopt", "topoopt-released"))
    assert d.objective_s < base * (1 - 1e-3)
