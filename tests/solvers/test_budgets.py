"""Solvers never crash on a budget (issue 12, section 3).

Every MathOpt solve of the package goes through :func:`solvers.routing_lp.run_mathopt`; the
fixtures here wrap it so that every LP and MIP really stops at a tiny limit (one simplex / PDLP
iteration and one branch-and-bound node, or one microsecond of wall clock), the way the
wall-clock cap of ``topoopt demo`` once stopped a routing LP mid-solve and the error escaped.
The solvers must then return their incumbent, say why they stopped, and the design must still
be feasible. Feasibility is checked here from the raw arrays, independently of the package's own
checker: ports per server, circuit counts, every path a walk over existing links from its source
to its destination, path weights summing to 1 per pair, ring weights summing to 1 per group
with each ring a permutation of its group, and every pair with traffic routed.

The last tests pin the one internal OR-Tools call: on the installed release the direct call into
MathOpt's solver core must give what the public ``mathopt.solve`` gives, and a release that has
not been checked fails loudly.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
import scipy.sparse as sp

import solvers.routing_lp as routing_lp
from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.driver import congestion_search
from solvers.joint.exact_mip import exact_design
from solvers.model.problem import DesignProblem, PhaseTraffic
from solvers.routing_lp import (
    FALLBACK_PATHS,
    route_circuits,
    route_phase,
    run_mathopt,
    run_mathopt_public,
    solve_matrix_program,
)
from topoopt.fabrics.circuits import Circuits, circuit_links
from traffic.workload import Demand, Workload


# --------------------------------------------------------------------------- budgets
class _Stops:
    """Counts the solves made under a fixture and those that ended without any solution (the
    case that used to raise)."""

    def __init__(self):
        self.solves = 0
        self.limited = 0  # a limit stopped them
        self.without_solution = 0


_CALLERS = ("solvers.routing_lp", "solvers.bounds", "solvers.hybrid_design",
            "solvers.joint.exact_mip")  # fmt: skip
"""Modules that call :func:`solve_matrix_program` (each holds its own reference)."""


@pytest.fixture
def tiny_iteration_cap(monkeypatch) -> _Stops:
    """Every LP (GLOP, PDLP) stops after one iteration, every MIP after one node: deterministic
    limits, given the way callers give them (so the result knows which limit it hit)."""
    import importlib

    real = routing_lp.solve_matrix_program
    stops = _Stops()

    def capped(*args, **kw):
        mip = kw.get("integers") is not None and np.any(kw["integers"])
        kw["node_limit" if mip else "iteration_limit"] = 1
        stops.solves += 1
        res = real(*args, **kw)
        stops.limited += bool(res.limit)
        stops.without_solution += res.x is None
        return res

    for name in _CALLERS:
        monkeypatch.setattr(importlib.import_module(name), "solve_matrix_program", capped)
    return stops


@pytest.fixture
def tiny_time_cap(monkeypatch) -> _Stops:
    """Every MathOpt solve gets one microsecond of wall clock (below ``solve_matrix_program``,
    which never asks for less than 10 ms)."""
    real = routing_lp.run_mathopt
    stops = _Stops()

    def capped(model, solver_type, params, hint=None):
        stops.solves += 1
        res = real(model, solver_type, replace(params, time_limit=timedelta(microseconds=1)), hint)
        stops.limited += res.termination.reason in (6, 9)  # no solution / feasible, at a limit
        stops.without_solution += not any(s.HasField("primal_solution") for s in res.solutions)
        return res

    monkeypatch.setattr(routing_lp, "run_mathopt", capped)
    return stops


# --------------------------------------------------------------------------- problems
def _workload(n: int = 8) -> Workload:
    """Data-parallel all-reduce over all servers plus an all-to-all among the first four."""
    return Workload(
        gpus=n,
        gpus_per_server=1,
        demands=(
            Demand("all-reduce", np.arange(n)[None], 64e6, "dp", "backward"),
            Demand("all-to-all", np.arange(4)[None], 32e6, "mp", "forward", mutable=False),
        ),
    )


def _phase(n: int, rng) -> PhaseTraffic:
    """One ring group over ``n - 1`` servers and random fixed pairs."""
    k = 3 * n
    s = rng.integers(0, n, k)
    t = (s + rng.integers(1, n, k)) % n
    fixed = sp.csr_matrix((rng.random(k) * 1e6 + 1e5, (s, t)), shape=(n, n))
    return PhaseTraffic("p", [0, n - 1], np.arange(n - 1), [2e6], fixed)


# --------------------------------------------------------------------------- independent checks
def check_link_paths(paths, link_src, link_dst, pairs) -> None:
    """``paths`` (a PathSet over link ids) routes every ``(s, t)`` of ``pairs`` on walks from
    ``s`` to ``t`` with non-negative weights summing to 1."""
    got = {}
    for c in range(paths.n_commodities):
        s, t = int(paths.src[c]), int(paths.dst[c])
        total = 0.0
        for q in range(paths.commodity_ptr[c], paths.commodity_ptr[c + 1]):
            links = paths.path_links[paths.path_ptr[q] : paths.path_ptr[q + 1]]
            assert links.size >= 1 and np.all((links >= 0) & (links < link_src.size))
            assert link_src[links[0]] == s and link_dst[links[-1]] == t
            assert np.array_equal(link_dst[links[:-1]], link_src[links[1:]])  # a walk
            assert paths.weight[q] >= 0
            total += float(paths.weight[q])
        assert total == pytest.approx(1.0, abs=1e-9), (s, t)
        got[(s, t)] = True
    for s, t in pairs:
        assert got.get((int(s), int(t))), f"pair {s}->{t} has traffic and no path"


def ring_pairs(rings) -> set[tuple[int, int]]:
    out = set()
    for r in range(rings.n_rings):
        if rings.weight[r] > 0:
            o = rings.order(r)
            out |= set(zip(o.tolist(), np.roll(o, -1).tolist(), strict=True))
    return out


def check_rings(rings, phase) -> None:
    """Ring weights sum to 1 per group; each ring is a permutation of its group's members."""
    for g in range(phase.n_groups):
        mine = np.flatnonzero(rings.group == g)
        assert mine.size >= 1
        assert rings.weight[mine].sum() == pytest.approx(1.0, abs=1e-9)
        for r in mine:
            assert sorted(rings.order(r).tolist()) == sorted(phase.group(g).tolist())


def check_design(design, problem: DesignProblem) -> None:
    """A design is feasible for ``problem`` (module docstring), from its raw arrays."""
    n, d = problem.n, problem.degree
    c = np.asarray(design.circuits, np.int64)
    assert c.ndim == 2 and c.shape[1] == 3
    assert np.all((c[:, 0] >= 0) & (c[:, 1] < n) & (c[:, 0] < c[:, 1]) & (c[:, 2] >= 1))
    ports = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
    assert ports.max() <= d, ports
    assert c[:, 2].max() <= problem.pair_cap
    have = set(zip(c[:, 0].tolist(), c[:, 1].tolist(), strict=True))
    rt = design.routing
    routed = set()
    for k in range(rt.src.size):
        s, t = int(rt.src[k]), int(rt.dst[k])
        total = 0.0
        for q in range(rt.commodity_ptr[k], rt.commodity_ptr[k + 1]):
            nodes = rt.nodes[rt.path_ptr[q] : rt.path_ptr[q + 1]].tolist()
            assert nodes[0] == s and nodes[-1] == t and len(nodes) >= 2
            for a, b in zip(nodes[:-1], nodes[1:], strict=True):
                assert (min(a, b), max(a, b)) in have, f"hop {a}-{b} has no circuit"
            assert rt.weight[q] >= 0
            total += float(rt.weight[q])
        assert total == pytest.approx(1.0, abs=1e-9)
        routed.add((s, t))
    for ph in problem.phases:
        fx = ph.fixed.tocoo()
        need = {(int(a), int(b)) for a, b, x in zip(fx.row, fx.col, fx.data, strict=True) if x > 0}
        for g in range(ph.n_groups):
            recs = [r for r in design.rings if r["phase"] == ph.name and r["group"] == g]
            assert recs and sum(r["weight"] for r in recs) == pytest.approx(1.0, abs=1e-9)
            for r in recs:
                assert sorted(r["order"]) == sorted(ph.group(g).tolist())
                if r["weight"] > 0:
                    o = r["order"]
                    need |= set(zip(o, o[1:] + o[:1], strict=True))
        missing = {p for p in need if p[0] != p[1]} - routed
        assert not missing, f"pairs with traffic and no route: {sorted(missing)[:5]}"
    assert np.isfinite(design.objective_s) and design.objective_s > 0


# --------------------------------------------------------------------------- routing LP
@pytest.mark.parametrize("solver", ["glop", "pdlp"])
@pytest.mark.parametrize("cap", ["tiny_iteration_cap", "tiny_time_cap"])
def test_route_phase_returns_a_feasible_routing_at_a_tiny_limit(solver, cap, request):
    stops = request.getfixturevalue(cap)
    rng = np.random.default_rng(3)
    n = 8
    circ = Circuits([[i, (i + 1) % n, 1] for i in range(n)] + [[0, 4, 1], [2, 6, 1]], n).rows
    src, dst, cap_ = circuit_links(circ, 1e9)
    ph = _phase(n, rng)
    r = route_phase(n, src, dst, cap_, phase=ph, solver=solver, iteration_limit=1)
    assert stops.solves == 1
    check_rings(r.rings, ph)
    fx = ph.fixed.tocoo()
    pairs = set(zip(fx.row.tolist(), fx.col.tolist(), strict=True)) | ring_pairs(r.rings)
    check_link_paths(r.paths, src, dst, pairs)
    assert r.limit in ("iteration", "time")
    if stops.without_solution:  # the LP had nothing: the fallback routed it
        assert r.fallback == FALLBACK_PATHS and r.status == "limit"
    # the time is recomputed from the returned paths: max over links of load / capacity
    s, t, b = routing_lp.phase_pairs(ph, r.rings, n)
    loads = r.paths.link_loads(b[np.argsort(s * n + t)], src.size)
    assert r.time_s == pytest.approx(float((loads / cap_).max()), rel=1e-9)
    assert 0 <= r.lower_bound_s <= r.time_s


def test_glop_stopped_without_a_solution_falls_back_instead_of_raising(tiny_time_cap):
    """The demo's crash: the clock stopped GLOP with no solution (MathOpt reports the limit as
    undetermined for GLOP: it was the clock); now fewest-hop paths, and the clock is named."""
    n = 6
    circ = Circuits([[i, (i + 1) % n, 1] for i in range(n)], n).rows
    src, dst, cap = circuit_links(circ, 1.0)
    s, t = np.array([0, 1, 2, 3]), np.array([3, 4, 5, 0])
    r = route_phase(n, src, dst, cap, pair_src=s, pair_dst=t, pair_bytes=np.ones(4), solver="glop")
    assert tiny_time_cap.without_solution == 1
    assert (r.status, r.limit, r.fallback) == ("limit", "time", FALLBACK_PATHS)
    check_link_paths(r.paths, src, dst, zip(s, t, strict=True))
    assert np.all(r.paths.path_lengths() == 3)  # fewest hops on a 6-ring: 3 either way
    assert r.time_s == pytest.approx(float((r.link_loads / cap).max()))


@pytest.mark.parametrize("cap", ["tiny_iteration_cap", "tiny_time_cap"])
def test_route_circuits_shares_a_feasible_routing_at_a_tiny_limit(cap, request):
    stops = request.getfixturevalue(cap)
    p = DesignProblem.from_workload(_workload(), degree=4, link_bandwidth=1e9)
    base = topoopt_design(p)
    routed = route_circuits(p, base.circuits)
    assert p.n_phases >= 2 and stops.solves == p.n_phases + 1  # per phase, then the sharing LP
    src, dst, _ = circuit_links(Circuits(base.circuits, p.n).rows, p.link_bandwidth)
    for ph, rings in zip(p.phases, routed.rings, strict=True):
        check_rings(rings, ph)
        fx = ph.fixed.tocoo()
        pairs = set(zip(fx.row.tolist(), fx.col.tolist(), strict=True)) | ring_pairs(rings)
        check_link_paths(routed.paths, src, dst, pairs)
    assert routed.limit in ("iteration", "time")
    if stops.without_solution == stops.solves:  # no LP had a solution: all fell back
        assert routed.fallback


# --------------------------------------------------------------------------- MIP, joint, hybrid
@pytest.mark.parametrize("cap", ["tiny_iteration_cap", "tiny_time_cap"])
def test_exact_mip_returns_its_incumbent_at_a_tiny_limit(cap, request):
    request.getfixturevalue(cap)
    p = DesignProblem.from_workload(_workload(5), degree=2, link_bandwidth=1e9)
    base = topoopt_design(p)
    ex = exact_design(p, base.objective_s, hint_circuits=base.circuits, node_limit=10)
    assert ex.limit in ("node", "iteration", "time") and ex.stopped_by == f"{ex.limit} limit"
    assert ex.status in ("feasible", "limit")
    if ex.circuits is not None:
        ports = np.bincount(ex.circuits[:, 0], ex.circuits[:, 2], p.n)
        ports += np.bincount(ex.circuits[:, 1], ex.circuits[:, 2], p.n)
        assert ports.max() <= p.degree


def test_exact_mip_under_a_tiny_work_limit_returns_its_warm_start_at_once(monkeypatch):
    """Issue 30 item 2: a work limit that cannot pay for the MIP's root gives back the warm start
    without calling the solver, the same bytes twice; the warm start's objective is the upper
    bound the caller gave."""
    import solvers.joint.exact_mip as em

    def refuse(*a, **k):
        raise AssertionError("the solver was called")

    monkeypatch.setattr(em, "solve_matrix_program", refuse)
    p = DesignProblem.from_workload(_workload(5), degree=2, link_bandwidth=1e9)
    base = topoopt_design(p)
    got = [exact_design(p, base.objective_s, hint_circuits=base.circuits, work_limit=w)
           for w in (1e-3, 1e-3, 0.0)]  # fmt: skip
    for ex in got:
        assert ex.limit == "work" and ex.stopped_by == "work limit" and ex.status == "feasible"
        assert ex.circuits.tobytes() == base.circuits.rows.tobytes()
        assert ex.objective_s == base.objective_s and ex.work == 0.0
    no_hint = exact_design(p, base.objective_s, work_limit=1e-3)
    assert no_hint.circuits is None and no_hint.status == "limit" and no_hint.limit == "work"


def test_exact_mip_work_limit_becomes_scips_limits_and_is_charged(monkeypatch):
    """The work limit reaches SCIP as node, per-LP iteration, cut-round and strong-branching
    limits computed by hand from the model's size (module docstring of exact_mip); the work the
    solve reports is its LP iterations x nonzeros x SCIP's per-iteration work, within the limit;
    two runs give the same bytes."""
    import solvers.joint.exact_mip as em

    seen = []
    real = em.solve_matrix_program

    def spy(c, a, *args, **kw):
        res = real(c, a, *args, **kw)
        seen.append((a.shape[0], a.nnz, kw["node_limit"], kw["scip_params"], res.iterations))
        return res

    monkeypatch.setattr(em, "solve_matrix_program", spy)
    p = DesignProblem.from_workload(_workload(5), degree=2, link_bandwidth=1e9)
    base = topoopt_design(p)
    w = 2.0
    runs = [exact_design(p, base.objective_s, hint_circuits=base.circuits, work_limit=w)
            for _ in range(2)]  # fmt: skip
    rows, nnz, nodes, params, iters = seen[0]
    per = nnz * 4e-8  # SCIP: work units per LP iteration on this matrix
    budget = (w - 1e-6 * nnz) / per  # LP iterations the limit pays for
    want_nodes = int((budget - 16 * rows) // (2 * rows))  # root: 5 cut rounds + 1 + 10 sb LPs
    assert nodes == want_nodes >= 1
    assert params == {"lp/iterlim": 2 * rows, "lp/rootiterlim": 4 * rows,
                      "separating/maxroundsroot": 5, "separating/maxrounds": 1,
                      "branching/relpscost/sbiterofs": 10 * rows}  # fmt: skip
    assert runs[0].work == pytest.approx((iters * 4e-8 + 1e-6) * nnz) and 0 < runs[0].work <= w
    assert seen[0][4] == seen[1][4]
    a, b = runs
    assert (a.status, a.limit, a.objective_s, a.bound_s) == (b.status, b.limit, b.objective_s,
                                                             b.bound_s)  # fmt: skip
    assert a.circuits.tobytes() == b.circuits.tobytes()


@pytest.mark.parametrize("cap", ["tiny_iteration_cap", "tiny_time_cap"])
def test_joint_design_is_feasible_when_every_solve_hits_a_tiny_limit(cap, request):
    stops = request.getfixturevalue(cap)
    p = DesignProblem.from_workload(_workload(6), degree=2, link_bandwidth=1e9)
    d = congestion_search(p, time_limit_s=60, select_by="objective")  # 6 servers: the MIP runs too
    assert stops.solves > 0 and stops.limited > 0  # the limits really bit
    check_design(d, p)
    assert d.info["stopped_by"] in ("optimal", "work limit", "time limit", "done")
    assert "exact" in d.info and d.info["exact"]["stopped_by"].endswith("limit")
    if cap == "tiny_time_cap":  # GLOP has no solution after 1 us: the routings fell back
        assert d.info["stopped_by"] == "time limit" and not d.info["deterministic"]
        assert d.info.get("lp_fallbacks"), "LPs that stopped without a solution are recorded"


@pytest.mark.parametrize("cap", ["tiny_iteration_cap", "tiny_time_cap"])
def test_hybrid_design_is_feasible_when_every_solve_hits_a_tiny_limit(cap, request):
    from solvers.hybrid_design import hybrid_design
    from topoopt.fabrics.fat_tree import leaf_spine

    stops = request.getfixturevalue(cap)
    p = DesignProblem.from_workload(_workload(), degree=2, link_bandwidth=1e9)
    e = leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=1e9)
    d = hybrid_design(p, e, 2, time_limit_s=30)
    assert stops.limited > 0
    if cap == "tiny_time_cap":
        assert stops.without_solution > 0  # the arc LPs and the path LP fell back
    assert int(d.port_usage().max()) <= 2
    fab = d.fabric()
    check_link_paths(d.routing_pathset(fab), fab.src, fab.dst, [])
    assert np.isfinite(d.objective_s) and d.info["stopped_by"] in ("local optimum", "time limit")


# --------------------------------------------------------------------------- OR-Tools entry point
def test_the_internal_mathopt_call_is_verified_for_the_installed_release():
    import ortools

    release = ".".join(ortools.__version__.split(".")[:2])
    assert release in routing_lp.MATHOPT_VERIFIED, (
        f"OR-Tools {ortools.__version__} is installed but solvers.routing_lp.run_mathopt's "
        f"direct call into MathOpt's solver core was checked on {routing_lp.MATHOPT_VERIFIED} "
        "only: run this file's tests comparing it with the public mathopt.solve, then add the "
        "release to MATHOPT_VERIFIED (until then the slower public route is used)"
    )
    assert routing_lp.mathopt_fast_path()


def _proto_of(c, a, lb, ub, vlb, vub, ints):
    """The ModelProto solve_matrix_program builds, captured from run_mathopt."""
    seen = {}

    def grab(model, solver_type, params, hint=None):
        seen["args"] = (model, solver_type, params, hint)
        return run_mathopt(model, solver_type, params, hint)

    orig = routing_lp.run_mathopt
    routing_lp.run_mathopt = grab
    try:
        solve_matrix_program(c, a, lb, ub, vlb, vub, integers=ints, solver="scip",
                             hint=np.zeros(len(c)) if ints is not None else None)  # fmt: skip
    finally:
        routing_lp.run_mathopt = orig
    return seen["args"]


@pytest.mark.parametrize("solver", ["GLOP", "PDLP", "GSCIP"])
def test_internal_and_public_mathopt_routes_agree(solver):
    from ortools.math_opt.python import mathopt

    rng = np.random.default_rng(0)
    m, nv = 12, 20
    a = sp.random(m, nv, density=0.4, random_state=1, format="csr") + sp.eye(m, nv)
    c = rng.random(nv) + 0.1
    ints = np.arange(nv) % 2 == 0 if solver == "GSCIP" else None
    model, _, _, hint = _proto_of(c, a, np.ones(m), np.full(m, np.inf), np.zeros(nv),
                                  np.full(nv, 10.0), ints)  # fmt: skip
    stype = getattr(mathopt.SolverType, solver)
    work_limit = {"node_limit": 1} if solver == "GSCIP" else {"iteration_limit": 3}
    for limits in ({}, work_limit):
        params = mathopt.SolveParameters(threads=1, **limits)
        fast = run_mathopt(model, stype, params, hint)
        public = run_mathopt_public(model, stype, params, hint)
        assert fast.termination.reason == public.termination.reason
        assert fast.termination.limit == public.termination.limit
        assert len(fast.solutions) == len(public.solutions)
        for f, p in zip(fast.solutions, public.solutions, strict=True):
            assert list(f.primal_solution.variable_values.ids) == list(
                p.primal_solution.variable_values.ids
            )
            assert np.allclose(
                f.primal_solution.variable_values.values, p.primal_solution.variable_values.values
            )
        assert fast.solve_stats.simplex_iterations == public.solve_stats.simplex_iterations
