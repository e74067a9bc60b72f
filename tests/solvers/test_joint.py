"""The joint optimizer.

- Exact MIP == brute force: every degree-feasible multigraph of a tiny cluster is enumerated
  here and scored by an LP written independently (per-pair commodities on scipy's HiGHS, every
  directed ring of each group enumerated with itertools), and the minimum equals the MIP optimum.
- Invariants of the driver's designs: degree <= d, routing conserves flow (re-scored by
  solvers.model.congestion), objective >= lower bound, joint <= the TopoOpt baseline.
- Pure data parallel: within 2% of the ideal-switch bound.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from solvers.baselines.topoopt_method import topoopt_design
from solvers.bounds import ideal_switch_bound
from solvers.joint.driver import congestion_search
from solvers.joint.exact_mip import exact_design
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design
from solvers.model.problem import DesignProblem, PhaseTraffic
from traffic.errors import InputError
from traffic.workload import Demand, Workload


# --------------------------------------------------------------------------- brute force
def multigraphs(n, d, cap):
    pairs = list(itertools.combinations(range(n), 2))
    for counts in itertools.product(range(cap + 1), repeat=len(pairs)):
        deg = [0] * n
        for (u, v), k in zip(pairs, counts, strict=True):
            deg[u] += k
            deg[v] += k
        if max(deg) <= d:
            yield {(u, v): k for (u, v), k in zip(pairs, counts, strict=True) if k}


def directed_rings(members):
    first, rest = members[0], members[1:]
    return [(first,) + p for p in itertools.permutations(rest)]


def brute_force_time(problem, graph):
    """min sum_p T_p over ring mixtures and per-pair multi-commodity flows on a fixed graph."""
    n, B = problem.n, problem.link_bandwidth
    arcs = [(u, v) for u, v in graph] + [(v, u) for u, v in graph]
    cap = [graph[(min(a, b), max(a, b))] * B for a, b in arcs]
    total = 0.0
    for ph in problem.phases:
        fixed = ph.fixed.toarray()
        rings = []  # (group bytes, ring tuple)
        for g in range(ph.n_groups):
            members = tuple(int(x) for x in ph.group(g))
            rings.append([(ph.ring_bytes[g], r) for r in directed_rings(members)])
        pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
        na, nq = len(arcs), len(pairs)
        n_lam = sum(len(r) for r in rings)
        nv = nq * na + n_lam + 1
        eq_rows, eq_cols, eq_vals, beq = [], [], [], []
        row = 0
        for qi, (a, b) in enumerate(pairs):
            for v in range(n):
                for ai, (x, y) in enumerate(arcs):
                    if x == v:
                        eq_rows.append(row), eq_cols.append(qi * na + ai), eq_vals.append(1.0)
                    if y == v:
                        eq_rows.append(row), eq_cols.append(qi * na + ai), eq_vals.append(-1.0)
                sign = 1.0 if v == a else (-1.0 if v == b else 0.0)
                col = nq * na
                for grp in rings:
                    for rb, ring in grp:
                        succ = [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
                        steps = succ.count((a, b))
                        if steps and sign:
                            eq_rows.append(row), eq_cols.append(col)
                            eq_vals.append(-sign * rb * steps)
                        col += 1
                beq.append(sign * fixed[a, b])
                row += 1
        col = nq * na
        for grp in rings:
            for _ in grp:
                eq_rows.append(row), eq_cols.append(col), eq_vals.append(1.0)
                col += 1
            beq.append(1.0)
            row += 1
        a_eq = sp.csr_matrix((eq_vals, (eq_rows, eq_cols)), shape=(row, nv))
        ub_rows, ub_cols, ub_vals = [], [], []
        for ai in range(na):
            for qi in range(nq):
                ub_rows.append(ai), ub_cols.append(qi * na + ai), ub_vals.append(1.0)
            ub_rows.append(ai), ub_cols.append(nv - 1), ub_vals.append(-cap[ai])
        a_ub = sp.csr_matrix((ub_vals, (ub_rows, ub_cols)), shape=(na, nv))
        c = np.zeros(nv)
        c[-1] = 1.0
        res = linprog(c, A_ub=a_ub, b_ub=np.zeros(na), A_eq=a_eq, b_eq=beq, method="highs")
        if res.status == 2:
            return np.inf
        assert res.status == 0
        total += res.fun
    return total


def brute_force(problem):
    best, arg = np.inf, None
    for g in multigraphs(problem.n, problem.degree, problem.pair_cap):
        if not g:
            continue
        t = brute_force_time(problem, g)
        if t < best - 1e-12:
            best, arg = t, g
    return best, arg


def tiny_problems():
    rng = np.random.default_rng(7)
    n = 4
    f = rng.integers(0, 4, (n, n)).astype(float)
    np.fill_diagonal(f, 0)
    f[f < 2] = 0
    yield (
        "n4-d3-mixed",
        DesignProblem(n, 3, 2.0, (PhaseTraffic("p", [0, 3], [0, 1, 3], [3.0], sp.csr_matrix(f)),)),
    )
    n = 5
    fwd = sp.csr_matrix((np.full(4, 2.0), ([0, 1, 2, 3], [1, 2, 3, 4])), shape=(n, n))
    phases = (
        PhaseTraffic("forward", [0], [], [], fwd),
        PhaseTraffic("backward", [0, 5], np.arange(5), [4.0], fwd.T.tocsr()),
    )
    yield "n5-d2-pipeline+dp", DesignProblem(n, 2, 1.0, phases)
    n = 6
    f = np.zeros((n, n))
    f[0, 3], f[3, 0], f[1, 4], f[2, 5] = 3.0, 1.0, 2.0, 2.0
    ph = PhaseTraffic("p", [0, 3], [0, 2, 4], [2.0], sp.csr_matrix(f))
    yield "n6-d2-simple", DesignProblem(n, 2, 1.0, (ph,), max_parallel=1)


@pytest.mark.parametrize("name,problem", list(tiny_problems()))
def test_exact_mip_equals_brute_force(name, problem):
    want, graph = brute_force(problem)
    assert np.isfinite(want)
    r = exact_design(problem, upper_bound_s=want * 4, time_limit=60)
    assert r.status == "optimal", name
    assert r.objective_s == pytest.approx(want, rel=1e-5), (name, graph, r.circuits)
    # the MIP's design, re-scored by the brute-force LP, has the same time
    g = {(int(u), int(v)): int(k) for u, v, k in r.circuits}
    assert brute_force_time(problem, g) == pytest.approx(want, rel=1e-5)
    assert r.bound_s <= want * (1 + 1e-6)


# --------------------------------------------------------------------------- the driver
def workload_problems():
    g = 2
    # DLRM-like: embedding all-to-all across servers (fixed) + data-parallel all-reduce
    n = 10
    r = np.arange(n * g).reshape(n, g).T.copy()
    w = Workload(
        gpus=n * g,
        gpus_per_server=g,
        demands=(
            Demand("all-to-all", r, 4e6, "embedding", "forward", mutable=False),
            Demand("all-reduce", r, 20e6, "dp", "backward"),
        ),
    )
    yield "dlrm-like", DesignProblem.from_workload(w, degree=4, link_bandwidth=1e9)
    # pipeline across servers (one-way sends per phase) + DP inside each stage
    n, stages = 12, 3
    r = np.arange(n * g).reshape(stages, n // stages, g)
    sends = np.stack([r[:-1].ravel(), r[1:].ravel()], axis=1)
    dp = r.transpose(0, 2, 1).reshape(-1, n // stages).copy()
    w = Workload(
        gpus=n * g,
        gpus_per_server=g,
        demands=(
            Demand("send", sends, 8e6, "pp", "forward", mutable=False, count=4),
            Demand("send", sends[:, ::-1].copy(), 8e6, "pp", "backward", mutable=False, count=4),
            Demand("all-reduce", dp, 30e6, "dp", "backward"),
        ),
    )
    yield "pipeline", DesignProblem.from_workload(w, degree=4, link_bandwidth=1e9)


@pytest.mark.parametrize("name,problem", list(workload_problems()))
def test_driver_invariants(name, problem):
    seen = []
    d = congestion_search(
        problem, time_limit_s=20, seed=1, progress=lambda a, b: seen.append((a, b))
    )
    assert d.solver == "joint" and d.status in ("optimal", "feasible")
    assert (d.port_usage() <= problem.degree).all()
    # routing conserves flow and the objective is what the evaluator recomputes
    ev = evaluate_routing(problem, d.circuits, d.phase_routings(problem))
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(d.objective_s, rel=1e-9)
    # bounds: the reported one, and an independent recomputation of the ideal switch
    assert d.lower_bound_s <= d.objective_s * (1 + 1e-9)
    assert d.lower_bound_s >= ideal_switch_bound(problem).sum() * (1 - 1e-9)
    assert d.gap == pytest.approx((d.objective_s - d.lower_bound_s) / d.objective_s)
    # never worse than the TopoOpt baseline on the same problem
    base = topoopt_design(problem, "topoopt", seed=1)
    assert d.objective_s <= base.objective_s * (1 + 1e-9)
    # progress: incumbents never increase, bounds never exceed incumbents
    assert seen and all(
        a2 <= a1 * (1 + 1e-12) for (a1, _), (a2, _) in zip(seen, seen[1:], strict=False)
    )
    assert all(b <= a * (1 + 1e-9) for a, b in seen)
    # design.json round trip keeps everything the evaluator needs
    again = Design.from_json(d.to_json())
    ev2 = evaluate_routing(problem, again.circuits, again.phase_routings(problem))
    assert ev2.objective == pytest.approx(d.objective_s, rel=1e-9)


def test_driver_is_deterministic():
    _, problem = next(iter(workload_problems()))
    a = congestion_search(problem, time_limit_s=20, seed=3)
    b = congestion_search(problem, time_limit_s=20, seed=3)
    assert np.array_equal(a.circuits, b.circuits)
    assert a.objective_s == b.objective_s
    assert a.routing.to_dict() == b.routing.to_dict()


def test_pure_data_parallel_within_two_percent_of_ideal():
    for n, deg in ((9, 4), (16, 4), (12, 6)):
        r = np.arange(n * 4).reshape(n, 4).T.copy()
        w = Workload(gpus=n * 4, gpus_per_server=4, demands=(
            Demand("all-reduce", r, 64e6, "dp", "backward"),))  # fmt: skip
        problem = DesignProblem.from_workload(w, degree=deg, link_bandwidth=1e9)
        d = congestion_search(problem, time_limit_s=20)
        ideal = ideal_switch_bound(problem).sum()
        assert d.objective_s <= 1.02 * ideal, (n, deg, d.objective_s / ideal)


def test_driver_on_a_tiny_cluster_is_exact():
    # one phase: the design's single routing loses nothing, so the driver reaches the optimum
    name, problem = list(tiny_problems())[0]  # n = 4, d = 3
    want, _ = brute_force(problem)
    d = congestion_search(problem, time_limit_s=30)
    assert d.objective_s == pytest.approx(want, rel=1e-5)
    assert d.status == "optimal"
    assert d.lower_bound_s == pytest.approx(want, rel=1e-5)
    # two phases: a design carries one routing for all phases, the brute force (and the MIP)
    # may route each phase its own way, so the optimum is a lower bound the driver respects
    name, problem = list(tiny_problems())[1]  # n = 5, d = 2
    want, _ = brute_force(problem)
    d = congestion_search(problem, time_limit_s=30)
    assert d.lower_bound_s == pytest.approx(want, rel=1e-5)
    assert d.objective_s >= want * (1 - 1e-9)


def test_bad_input():
    ph = PhaseTraffic("p", [0, 4], np.arange(4), [1.0], sp.csr_matrix((4, 4)))
    with pytest.raises(InputError, match="degree"):
        congestion_search(DesignProblem(4, 1, 1.0, (ph,)), time_limit_s=5)
    with pytest.raises(InputError, match="upper_bound_s"):
        exact_design(DesignProblem(4, 2, 1.0, (ph,)), upper_bound_s=np.inf)


def test_large_cluster_fallback_is_never_worse_than_the_baseline():
    # above lp_max_servers the driver routes its constructions without an LP (issue 29 item 7);
    # the best baseline (free ports filled) stays a finalist, so the result is never worse
    for _, problem in workload_problems():
        d = congestion_search(problem, time_limit_s=10, lp_max_servers=4)
        base = min(topoopt_design(problem, v).objective_s for v in ("topoopt", "topoopt-released"))
        ev = evaluate_routing(problem, d.circuits, d.phase_routings(problem))
        assert ev.feasible and ev.objective == pytest.approx(d.objective_s, rel=1e-9)
        assert d.objective_s <= base * (1 + 1e-9)
        assert d.lower_bound_s <= d.objective_s


def test_select_by_is_checked():
    _, problem = next(iter(workload_problems()))
    with pytest.raises(InputError, match="select_by: got 'fastest'"):
        congestion_search(problem, time_limit_s=5, select_by="fastest")


def test_hand_made_workload_is_judged_by_communication_alone():
    # a Workload without a compute model: the finalists are compared on communication only and
    # the result is never slower than topoopt's design there (recomputed independently)
    from solvers.joint.flow_select import flow_times

    _, problem = next(iter(workload_problems()))
    d = congestion_search(problem, time_limit_s=20)
    base = topoopt_design(problem, "topoopt")
    jc, ji, _ = flow_times(d, problem, problem.workload)
    bc, _, _ = flow_times(base, problem, problem.workload)
    assert np.isnan(ji) and jc <= bc * (1 + 1e-9)
    assert set(d.info["flow_comm_s"]) >= {"topoopt", d.info["winner"]}


def test_limits_past_the_machine_timers_are_refused():
    """A time limit past 11.6 days (a pipe's poll takes milliseconds as a C int) and a work limit
    past 1e9 units ended in OverflowError tracebacks deep in a search; now one InputError."""
    _, problem = next(iter(workload_problems()))
    with pytest.raises(InputError, match=r"^time_limit_s: got 1e\+300; allowed: .* at most"):
        congestion_search(problem, time_limit_s=1e300)
    with pytest.raises(InputError, match=r"^work_limit: got 1e\+300; allowed: .* at most"):
        congestion_search(problem, time_limit_s=5, work_limit=1e300)
