"""The routing LP: returned paths conserve flow and are re-scored exactly; the optimum equals an
independent per-commodity LP written here on scipy's HiGHS; closed forms on small fabrics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from solvers.model.congestion import evaluate_routing
from solvers.model.problem import DesignProblem, PhaseTraffic
from solvers.routing_lp import (
    merge_paths,
    route_circuits,
    route_fabric,
    route_phase,
    share_paths,
    solve_matrix_program,
)
from topoopt.fabrics import leaf_spine
from topoopt.fabrics.circuits import Circuits, circuit_links
from traffic.errors import InputError


def reference_min_congestion(n, src, dst, cap, pairs):
    """min T s.t. per-commodity flow conservation, sum of flows <= cap * T (no aggregation)."""
    L, K = len(src), len(pairs)
    nv = K * L + 1
    rows, cols, vals, b = [], [], [], []
    for k, (s, t, d) in enumerate(pairs):
        for v in range(n):
            r = k * n + v
            for l in range(L):
                if src[l] == v:
                    rows.append(r), cols.append(k * L + l), vals.append(1.0)
                if dst[l] == v:
                    rows.append(r), cols.append(k * L + l), vals.append(-1.0)
            b.append(d if v == s else (-d if v == t else 0.0))
    a_eq = sp.csr_matrix((vals, (rows, cols)), shape=(K * n, nv))
    ub_rows, ub_cols, ub_vals = [], [], []
    for l in range(L):
        for k in range(K):
            ub_rows.append(l), ub_cols.append(k * L + l), ub_vals.append(1.0)
        ub_rows.append(l), ub_cols.append(nv - 1), ub_vals.append(-cap[l])
    a_ub = sp.csr_matrix((ub_vals, (ub_rows, ub_cols)), shape=(L, nv))
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(L), A_eq=a_eq, b_eq=b, method="highs")
    assert res.status == 0
    return res.fun


def random_circuits(rng, n, d):
    """A connected random multigraph: a Hamiltonian cycle plus random extra circuits."""
    perm = rng.permutation(n)
    c = [[perm[i], perm[(i + 1) % n], 1] for i in range(n)]
    deg = np.full(n, 2)
    for _ in range(4 * n):
        u, v = rng.choice(n, 2, replace=False)
        if deg[u] < d and deg[v] < d:
            c.append([u, v, 1])
            deg[u] += 1
            deg[v] += 1
    return Circuits(c, n).rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimum_matches_independent_lp(seed):
    rng = np.random.default_rng(seed)
    n = 6
    c = random_circuits(rng, n, 3)
    src, dst, cap = circuit_links(c, 2.0)
    k = 5
    s = rng.choice(n, k)
    t = (s + rng.integers(1, n, k)) % n
    byts = rng.random(k) * 10 + 1
    r = route_phase(n, src, dst, cap, pair_src=s, pair_dst=t, pair_bytes=byts, solver="glop")
    pairs = {}
    for a, b, x in zip(s.tolist(), t.tolist(), byts.tolist(), strict=True):
        pairs[(a, b)] = pairs.get((a, b), 0.0) + x
    want = reference_min_congestion(n, src, dst, cap, [(a, b, x) for (a, b), x in pairs.items()])
    assert r.time_s == pytest.approx(want, rel=1e-6)
    assert r.lower_bound_s <= r.time_s * (1 + 1e-9)
    assert r.lower_bound_s == pytest.approx(want, rel=1e-4)
    # paths re-scored by the congestion evaluator (walks from source to destination)
    fixed = sp.csr_matrix((byts, (s, t)), shape=(n, n))
    prob = DesignProblem(n, 3, 2.0, (PhaseTraffic("p", [0], [], [], fixed),))
    ev = evaluate_routing(prob, c, [r.routing])
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(r.time_s, rel=1e-12)


def test_ring_mixture_closed_form():
    # 5 servers on circuits 0-1-2-3-4-0 (capacity B each way), one all-reduce group over all:
    # candidate rings ascending and descending -> the LP splits 1/2 : 1/2, T = R / (2B)
    n, B, R = 5, 4.0, 10.0
    c = [[i, (i + 1) % n, 1] for i in range(n)]
    ph = PhaseTraffic("backward", [0, n], np.arange(n), [R], sp.csr_matrix((n, n)))
    prob = DesignProblem(n, 2, B, (ph,))
    out = route_circuits(prob, c)
    assert out.time_s == pytest.approx(R / (2 * B), rel=1e-6)
    assert sorted(np.round(out.rings[0].weight, 6).tolist()) == [0.5, 0.5]
    ev = evaluate_routing(prob, c, out.routings())
    assert ev.feasible and ev.objective == pytest.approx(R / (2 * B), rel=1e-9)
    # only the virtual ring 0,2,4,1,3: every step is 2 hops one way round or 3 the other. A
    # fraction a the long way loads forward links 2R(1-a), backward links 3Ra; balanced at
    # a = 2/5: T = 6R / (5B)
    cand = [[[np.array([0, 2, 4, 1, 3])]]]
    out2 = route_circuits(prob, c, ring_candidates=cand)
    assert out2.time_s == pytest.approx(6 * R / (5 * B), rel=1e-6)


def test_host_forwarding_switch():
    # servers 0, 1, 2; links 0-1 and 1-2 (direct) and switch 3 linked to 0 and 2, all cap 1.
    # 0 sends 2 bytes to 2: with forwarding through server 1, two disjoint paths -> T = 1;
    # without, only via the switch -> T = 2.
    und = [(0, 1), (1, 2), (0, 3), (3, 2)]
    src = np.array([a for a, b in und] + [b for a, b in und])
    dst = np.array([b for a, b in und] + [a for a, b in und])
    cap = np.ones(src.size)
    kw = dict(pair_src=np.array([0]), pair_dst=np.array([2]), pair_bytes=np.array([2.0]))
    on = route_phase(4, src, dst, cap, **kw)
    off = route_phase(4, src, dst, cap, forward=np.array([False, False, False, True]), **kw)
    assert on.time_s == pytest.approx(1.0, rel=1e-6)
    assert off.time_s == pytest.approx(2.0, rel=1e-6)
    assert off.paths.n_paths == 1
    # no path of the restricted routing enters server 1
    assert not np.isin(off.paths.path_links, np.flatnonzero(dst == 1)).any()


def test_disconnected_is_an_input_error():
    # two separate pairs of circuits: 0-1 and 2-3; traffic 0 -> 2 cannot be routed
    c = [[0, 1, 1], [2, 3, 1]]
    fixed = sp.csr_matrix(([1.0], ([0], [2])), shape=(4, 4))
    prob = DesignProblem(4, 1, 1.0, (PhaseTraffic("p", [0], [], [], fixed),))
    with pytest.raises(InputError, match="cannot reach"):
        route_circuits(prob, c)


def test_fabric_all_to_all_on_a_nonblocking_leaf_spine():
    # full-bisection leaf-spine: a uniform all-to-all runs at the injection rate,
    # T = (n-1) * s / port_bandwidth for s bytes per pair
    f = leaf_spine(8, 1.0, radix=4, port_bandwidth=1.0)
    n = 8
    m = np.ones((n, n)) - np.eye(n)
    prob = DesignProblem(n, 1, 1.0, (PhaseTraffic("a2a", [0], [], [], sp.csr_matrix(m)),))
    (r,) = route_fabric(f, prob)
    assert r.time_s == pytest.approx((n - 1) * 1.0, rel=1e-5)
    # no path relays through a server
    mids = []
    for p in range(r.paths.n_paths):
        links = r.paths.path_links[r.paths.path_ptr[p] : r.paths.path_ptr[p + 1]]
        mids += f.dst[links[:-1]].tolist()
    assert min(mids) >= n


def test_shared_paths_two_phases():
    # 4-cycle; phase a: 0 -> 2 (2 bytes), phase b: 1 -> 3 (2 bytes). Each alone: T = 1 (split).
    n = 4
    c = [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]]
    fa = sp.csr_matrix(([2.0], ([0], [2])), shape=(n, n))
    fb = sp.csr_matrix(([2.0], ([1], [3])), shape=(n, n))
    phases = (PhaseTraffic("a", [0], [], [], fa), PhaseTraffic("b", [0], [], [], fb))
    prob = DesignProblem(n, 2, 1.0, phases)
    out = route_circuits(prob, c)
    assert out.phase_times == pytest.approx([1.0, 1.0], rel=1e-6)
    assert out.lower_bound_s == pytest.approx(2.0, rel=1e-4)
    ev = evaluate_routing(prob, c, out.routings())
    assert ev.feasible and ev.objective == pytest.approx(out.time_s, rel=1e-12)
    src, _, cap = circuit_links(Circuits(c, n).rows, 1.0)
    per = [route_phase(n, *circuit_links(Circuits(c, n).rows, 1.0), phase=p) for p in phases]
    again = share_paths(n, src, cap, list(phases), per)
    assert again.time_s == pytest.approx(2.0, rel=1e-6)
    merged = merge_paths(n, src, cap, list(phases), per)
    ev = evaluate_routing(prob, c, merged.routings())
    assert ev.feasible and ev.objective == pytest.approx(merged.time_s, rel=1e-12)
    assert merged.time_s >= again.time_s * (1 - 1e-9)


@pytest.mark.parametrize("solver", ["glop", "pdlp", "highs"])
@pytest.mark.parametrize("time_limit", [60.0, 1e308])
def test_matrix_program_solvers_agree_with_scipy(solver, time_limit):
    # min c x s.t. A x >= b, 0 <= x <= 5; scipy's HiGHS (linprog) is the independent reference
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, (6, 8)).astype(float)
    b = rng.integers(1, 6, 6).astype(float)
    c = rng.integers(1, 9, 8).astype(float)
    ref = linprog(c, A_ub=-a, b_ub=-b, bounds=[(0, 5)] * 8, method="highs")
    got = solve_matrix_program(
        c, sp.csr_matrix(a), b, np.full(6, np.inf), np.zeros(8), np.full(8, 5.0), solver=solver,
        time_limit=time_limit,  # 1e308: beyond what a timedelta holds, so no limit
    )  # fmt: skip
    assert got.status == "optimal"
    assert got.objective == pytest.approx(ref.fun, rel=1e-4)
    assert np.all(a @ got.x >= b - 1e-4)
