"""The joint optimizer's anytime pipeline: check, warm start, improve, route, bound, Design.

Each step is a public function; :func:`joint_design` chains them under one time limit.

1. :func:`check_problem` -- raise :class:`InputError` on a problem no design can serve.
2. :func:`warm_start` -- the TopoOpt baselines (``topoopt`` and ``topoopt-released``,
   :func:`solvers.topoopt_method.topoopt_design`); the best of them is the first incumbent, so
   the result is never worse than the baseline.
3. :func:`candidate_circuits` -- designs TopoOpt does not try: every degree split between
   AllReduce rings and MP matchings (TopoOpt rounds one split from byte ratios), rings on the
   optimal mean-hop strides (:func:`solvers.strides.best_strides`) instead of the geometric rule,
   and free ports filled. Each candidate is *routed by the LP* (:func:`route_design`), which also
   chooses the ring mixture of every mutable group (TopoOpt splits evenly and routes MP traffic
   on random shortest paths), and scored exactly.
4. :func:`solvers.joint.local_search.improve_by_swaps` -- degree-preserving 2-swaps that put a
   circuit on the hottest link, accepted when the routed objective drops.
5. For clusters of at most ``exact_max_servers`` servers,
   :func:`solvers.joint.exact_mip.exact_design` proves the optimum (warm-started with the
   incumbent as a hint and as the bound ``M``).
6. :func:`solvers.bounds.lower_bound` -- ideal switch and LP relaxation; the gap is
   ``(objective - bound) / objective``.
7. :func:`solvers.joint.flow_select.select_by_flow` -- when the problem knows its Workload, the
   finalists (the best routed candidates and both baselines, smallest objective first) are
   simulated by the flow model and the one with the shortest communication wins among those no
   slower than ``topoopt`` in communication or iteration time and no worse in the objective.
   The ``topoopt`` design is simulated right after the warm start (time-boxed to a quarter of
   the limit; if it cannot finish, the objective decides) and time for about four more
   simulations is kept back from steps 3-5. Each routing LP gets 60% of the time left, its path
   decomposition comes on top.

Above ``lp_max_servers`` servers (default 256) the routing LP is not run; the finalists are the
baselines and the best of them with its free ports filled.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from solvers.bounds import lower_bound
from solvers.congestion import (
    canonical_circuits,
    circuit_links,
    evaluate_routing,
    ring_steps,
)
from solvers.design import Design, NodePaths
from solvers.joint.exact_mip import exact_design
from solvers.joint.flow_select import FlowScore, select_by_flow
from solvers.joint.flow_select import score as flow_score
from solvers.joint.local_search import fill_free_ports, improve_by_swaps
from solvers.joint.rings import circuit_rings, hamiltonian_cycles, stride_rings
from solvers.problem import DesignProblem
from solvers.routing_lp import SharedRouting, min_hop_paths, route_circuits
from solvers.topoopt_method import allreduce_rings, mp_matchings, topoopt_design
from solvers.traffic_input import topoopt_traffic
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "check_problem",
    "warm_start",
    "candidate_circuits",
    "ring_candidates_for",
    "quick_score",
    "route_design",
    "to_design",
    "joint_design",
    "SELECT_BY",
]

Progress = Callable[[float, float], None]

SELECT_BY = ("flow", "objective")
"""How :func:`joint_design` picks its result among the finalists."""


def check_problem(problem: DesignProblem) -> None:
    """Raise :class:`InputError` when no design can carry ``problem``'s traffic."""
    if problem.degree < 2:
        raise InputError("degree", problem.degree, "at least 2 ports (a connected design)")
    if problem.n < 3:
        raise InputError("servers", problem.n, "at least 3 servers")


def warm_start(problem: DesignProblem, seed: int = 0) -> list[Design]:
    """The TopoOpt baselines, best first."""
    out = [topoopt_design(problem, v, seed=seed) for v in ("topoopt", "topoopt-released")]
    return sorted(out, key=lambda d: d.objective_s)


def candidate_circuits(
    problem: DesignProblem, deadline: float, stride_time: float = 5.0
) -> list[tuple[str, np.ndarray]]:
    """Circuit sets to route and compare (module docstring, step 3), cheapest first."""
    n, d = problem.n, problem.degree
    traffic = topoopt_traffic(problem)
    mp = traffic.mp
    out: list[tuple[str, np.ndarray]] = []
    top = d - d % 2
    for d_ar in range(top, 1, -2):
        if time.perf_counter() >= deadline:
            break
        ar, _, _ = allreduce_rings(traffic, d_ar)
        d_mp = d - d_ar
        parts = [ar]
        if d_mp and mp.nnz:
            parts.append(mp_matchings(mp, d_mp, n)[0])
        c = canonical_circuits(np.vstack(parts), n)
        out.append((f"split d_ar={d_ar}", fill_free_ports(c, n, d, mp, problem.pair_cap)))
    # all-server ring group (or no group): optimal mean-hop circulant for the ring ports
    whole = any(g.size == n for g in traffic.groups) or not traffic.groups
    left = deadline - time.perf_counter()
    if whole and left > 1.0 and top >= 4:
        from solvers.strides import best_strides
        from topoopt.fabrics import circulant_circuits

        for d_ar in range(top, 3, -2):
            try:
                res = best_strides(n, d_ar, "mean-hops", time_limit_s=min(stride_time, left / 2))
            except InputError:
                continue
            c = np.asarray(circulant_circuits(n, res.strides), np.int64).reshape(-1, 3)
            parts = [c]
            if d - d_ar and mp.nnz:
                parts.append(mp_matchings(mp, d - d_ar, n)[0])
            c = canonical_circuits(np.vstack(parts), n)
            out.append(
                (f"best strides {list(res.strides)} + {d - d_ar} MP ports",
                 fill_free_ports(c, n, d, mp, problem.pair_cap))
            )  # fmt: skip
            left = deadline - time.perf_counter()
            if left <= 1.0:
                break
    return out


def ring_candidates_for(
    problem: DesignProblem, circuits: np.ndarray, extra: Design | None = None, exact: bool = False
) -> list[list[list[np.ndarray]]]:
    """Candidate rings per phase and group: rings along circuits, stride 1 both ways, the
    baseline's rings, and (``exact``) every Hamiltonian cycle of groups of at most 6."""
    out = []
    for ph in problem.phases:
        per = []
        for g in range(ph.n_groups):
            m = ph.group(g)
            cands = circuit_rings(m, circuits, problem.n) + stride_rings(m, [1])
            if extra is not None:
                cands += [
                    np.asarray(r["order"], np.int64)
                    for r in extra.rings
                    if r["phase"] == ph.name and r["group"] == g
                ]
            if exact and m.size <= 6:
                cands += hamiltonian_cycles(m)
            uniq: dict[bytes, np.ndarray] = {}
            for r in cands:
                uniq.setdefault(r.tobytes(), r)
            per.append(list(uniq.values()))
        out.append(per)
    return out


def quick_score(problem: DesignProblem, circuits: np.ndarray) -> float:
    """A fast estimate of a design's time, to rank candidates before the LP routes them.

    Rings along circuits (or the ascending ring) carry each group evenly; every pair takes one
    fewest-hop path. ``inf`` when disconnected.
    """
    n = problem.n
    c = canonical_circuits(circuits, n)
    src, dst, cap = circuit_links(c, problem.link_bandwidth)
    total = 0.0
    for ph in problem.phases:
        fx = ph.fixed.tocoo()
        s_parts = [fx.row.astype(np.int64)]
        t_parts = [fx.col.astype(np.int64)]
        b_parts = [fx.data]
        for g in range(ph.n_groups):
            m = ph.group(g)
            rings = circuit_rings(m, c, n, limit=4) or [m]
            for o in rings:
                s_parts.append(o)
                t_parts.append(np.roll(o, -1))
                b_parts.append(np.full(o.size, ph.ring_bytes[g] / len(rings)))
        s_, t_, b_ = (np.concatenate(x) for x in (s_parts, t_parts, b_parts))
        key = s_ * n + t_
        uk, inv = np.unique(key, return_inverse=True)
        byts = np.bincount(inv, weights=b_)
        paths = min_hop_paths(n, src, dst, uk // n, uk % n)
        if any(p is None for p in paths):
            return np.inf
        lens = np.array([p.size for p in paths])
        loads = np.bincount(
            np.concatenate(paths), weights=np.repeat(byts, lens), minlength=cap.size
        )
        total += float((loads / cap).max())
    return total


def route_design(
    problem: DesignProblem,
    circuits: np.ndarray,
    time_limit: float,
    extra: Design | None = None,
    exact: bool = False,
) -> tuple[SharedRouting, float, np.ndarray]:
    """Route ``circuits`` with the LP; returns the routing, its exact objective and per-link
    utilisation (load / capacity / phase time, max over phases). ``inf`` when disconnected."""
    c = canonical_circuits(circuits, problem.n)
    cands = ring_candidates_for(problem, c, extra, exact)
    try:
        routed = route_circuits(problem, c, cands, time_limit=max(time_limit, 1.0))
    except InputError:
        return None, np.inf, np.zeros(2 * c.shape[0])
    ev = evaluate_routing(problem, c, routed.routings(), keep_loads=True)
    if not ev.feasible:
        return None, np.inf, np.zeros(2 * c.shape[0])
    _, _, cap = circuit_links(c, problem.link_bandwidth)
    util = np.zeros(cap.size)
    for t, loads in zip(ev.phase_times, ev.link_loads, strict=True):
        if t > 0:
            util = np.maximum(util, loads / cap / t)
    return routed, ev.objective, util


def _node_paths(paths: PathSet, link_dst: np.ndarray) -> NodePaths:
    lens = paths.path_lengths()
    P = paths.n_paths
    pptr = np.zeros(P + 1, np.int64)
    pptr[1:] = np.cumsum(lens + 1)
    nodes = np.empty(int(pptr[-1]), np.int64)
    starts = pptr[:-1]
    nodes[starts] = paths.src[paths.path_commodity()]
    mask = np.ones(nodes.size, bool)
    mask[starts] = False
    nodes[mask] = link_dst[paths.path_links]
    return NodePaths(paths.src, paths.dst, paths.commodity_ptr, pptr, nodes, paths.weight)


def to_design(
    problem: DesignProblem,
    circuits: np.ndarray,
    routed: SharedRouting,
    lower_bound_s: float,
    solver: str,
    t0: float,
    info: dict,
    proven: bool = False,
) -> Design:
    """Package a routed design; the objective is recomputed by ``evaluate_routing``."""
    c = canonical_circuits(circuits, problem.n)
    src, dst, _ = circuit_links(c, problem.link_bandwidth)
    have = set((src * problem.n + dst).tolist())
    rings = []
    for ph, rs in zip(problem.phases, routed.rings, strict=True):
        s, t, _ = ring_steps(ph, rs)
        for r in range(rs.n_rings):
            o = rs.order(r)
            steps = o * problem.n + np.roll(o, -1)
            rings.append(
                {
                    "phase": ph.name,
                    "group": int(rs.group[r]),
                    "members": ph.group(int(rs.group[r])).tolist(),
                    "order": o.tolist(),
                    "stride": None,
                    "weight": float(rs.weight[r]),
                    "virtual": bool(any(x not in have for x in steps.tolist())),
                }
            )
        del s, t
    routing = _node_paths(routed.paths, dst)
    ev = evaluate_routing(problem, c, routed.routings())
    if not ev.feasible:
        raise RuntimeError(
            "joint design failed its own feasibility check: " + "; ".join(ev.violations)
        )
    obj = ev.objective
    lb = min(lower_bound_s, obj)
    gap = (obj - lb) / obj if obj > 0 else 0.0
    status = "optimal" if proven or gap <= 1e-6 else "feasible"
    return Design(
        problem.n, problem.degree, problem.link_bandwidth, c, tuple(rings), routing, solver,
        status, obj, lb, gap, time.perf_counter() - t0, info,
    )  # fmt: skip


def _rebound(design: Design, lb: float, t0: float, info: dict, keep_info: bool = False) -> Design:
    """``design`` as the joint optimizer's result: solver ``joint``, bound, gap and wall time.

    ``keep_info``: the design is the optimizer's own (its info is replaced by ``info``);
    otherwise it is a baseline, whose info is kept under ``baseline_info``."""
    obj = design.objective_s
    lb = min(max(lb, design.lower_bound_s), obj)
    gap = (obj - lb) / obj if obj > 0 else 0.0
    status = design.status if keep_info and design.status == "optimal" else "feasible"
    status = "optimal" if gap <= 1e-6 else status
    extra = dict(info) if keep_info else {**info, "baseline_info": dict(design.info)}
    return Design(
        design.servers, design.degree, design.link_bandwidth, design.circuits, design.rings,
        design.routing, "joint", status, obj, lb, gap, time.perf_counter() - t0, extra,
    )  # fmt: skip


def joint_design(
    problem: DesignProblem,
    time_limit_s: float = 60.0,
    seed: int = 0,
    threads: int = 1,
    progress: Progress | None = None,
    exact_max_servers: int = 8,
    lp_max_servers: int = 256,
    local_search: bool = True,
    select_by: str = "flow",
) -> Design:
    """The joint optimizer (module docstring): best design found within ``time_limit_s`` seconds.

    Parameters
    ----------
    problem : DesignProblem
    time_limit_s : float
        Seconds for the whole pipeline; the best design so far is returned when it runs out
        (the baseline warm start always completes first).
    seed : int
        Seed of the baseline's path draws (everything else is deterministic).
    threads : int
        Solver threads (the MIP; the LPs run single-threaded).
    progress : callable, optional
        ``progress(incumbent_s, bound_s)`` on every new incumbent or bound.
    exact_max_servers : int
        Run the exact MIP up to this many servers.
    lp_max_servers : int
        Route with the LP (and search) up to this many servers.
    local_search : bool
        Run the swap search.
    select_by : {"flow", "objective"}
        ``flow`` (default): when ``problem.workload`` is known, the finalists (the best routed
        candidates and the baselines) are simulated by the flow model and the one with the
        shortest communication time wins (:mod:`solvers.joint.flow_select`; the ``topoopt``
        baseline is simulated right after the warm start and time is kept for the others).
        ``objective``: the smallest congestion objective wins.

    Returns
    -------
    Design
        ``solver="joint"``, with status, objective, lower bound, gap and wall time; ``info``
        records the baseline objective, the candidate that won and the steps run.

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=6, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(6).reshape(1, 6), 6e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> d = joint_design(p, time_limit_s=20)
    >>> d.status, round(d.objective_s / d.lower_bound_s, 6)
    ('optimal', 1.0)
    """
    t0 = time.perf_counter()
    time_limit = float(time_limit_s)
    end = t0 + time_limit
    check_problem(problem)
    if select_by not in SELECT_BY:
        raise InputError("select_by", select_by, f"one of {', '.join(SELECT_BY)}")
    info: dict = {"seed": int(seed), "threads": int(threads), "steps": []}
    bases = warm_start(problem, seed)
    base = bases[0]
    info["baseline"] = {b.solver: b.objective_s for b in bases}
    inc_obj = base.objective_s
    inc: tuple | None = None  # (circuits, routed, name, proven, util)
    pool: list[tuple] = []  # every routed candidate: (objective, order, name, circuits, routed)
    bound_s = base.lower_bound_s
    n = problem.n

    # ---- flow-model judging: simulate the topoopt baseline now, keep time for the finalists
    workload = problem.workload if select_by == "flow" else None
    known: dict[str, FlowScore] = {}
    reserve = 0.0
    if workload is not None and problem.n_phases:
        topo = next(b for b in bases if b.solver == "topoopt")
        left = end - time.perf_counter()
        known["topoopt"] = flow_score(topo.solver, topo, problem, workload, 0.25 * left)
        if np.isfinite(known["topoopt"].comm_s):
            reserve = min(0.4 * time_limit, 4 * 1.3 * known["topoopt"].wall_s)
        else:  # the flow model is too slow for this limit: judge by the objective
            info["steps"].append(
                "flow model skipped (topoopt's simulation exceeded 1/4 of the limit)"
            )
            workload = None
    deadline = end - reserve  # the optimizer's own deadline

    def report():
        if progress is not None:
            progress(inc_obj, bound_s)

    def remaining():
        return deadline - time.perf_counter()

    def finish(lb: float) -> Design:
        """Finalists (best routed candidates, then the baselines), judged; the winner packaged."""
        finalists: list[tuple[str, Design, tuple | None]] = []
        if inc is not None:
            finalists.append((inc[2], None, inc))
        for val, _, name, c, routed in sorted(pool, key=lambda x: (x[0], x[1])):
            if len(finalists) >= 3 or val >= base.objective_s * (1 + 0.5):
                break
            if inc is not None and name == inc[2]:
                continue
            finalists.append((name, None, (c, routed, name, False, None)))
        finalists += [(b.solver, b, None) for b in bases]
        built = []
        for name, design, entry in finalists:
            if design is None:
                c, routed, nm, proven, _ = entry
                design = to_design(problem, c, routed, lb, "joint", t0, info, proven=proven)
            built.append((name, design))
        # simulate the most promising first (smallest objective; stable for equal ones)
        built.sort(key=lambda x: x[1].objective_s)
        pick = 0
        if workload is not None and problem.n_phases:
            pick, scores = select_by_flow(built, problem, workload, end, known)
            info["flow_comm_s"] = {sc.name: sc.comm_s for sc in scores}
            info["flow_iteration_s"] = {sc.name: sc.iteration_s for sc in scores}
            info["flow_wall_s"] = {sc.name: sc.wall_s for sc in scores}
            info["selected_by"] = "flow model (communication, no slower than topoopt)"
        else:
            info["selected_by"] = "optimizer objective"
        name, chosen = built[pick]
        info["winner"] = name
        if chosen.solver == "joint":
            if inc is not None and name == inc[2]:
                info["routing_solver"] = inc[1].solver
            return _rebound(chosen, lb, t0, info, keep_info=True)
        return _rebound(chosen, lb, t0, info)

    report()
    if problem.n_phases == 0 or n > lp_max_servers:
        info["steps"].append("baseline only (routing LP not run above lp_max_servers)")
        filled = fill_free_ports(
            base.circuits, n, problem.degree, topoopt_traffic(problem).mp, problem.pair_cap
        )
        added = int(filled[:, 2].sum() - base.circuits[:, 2].sum())
        info["free_ports_filled"] = added
        if added:
            more = Design(
                n, problem.degree, problem.link_bandwidth, filled, base.rings, base.routing,
                base.solver, base.status, 0.0, 0.0, 0.0, 0.0, base.info,
            )  # fmt: skip
            ev = evaluate_routing(problem, filled, more.phase_routings(problem))
            if ev.feasible and ev.objective <= base.objective_s:
                base = Design(
                    n, problem.degree, problem.link_bandwidth, filled, base.rings, base.routing,
                    f"{base.solver} + free ports", base.status, ev.objective, base.lower_bound_s,
                    0.0, 0.0, base.info,
                )  # fmt: skip
                bases = [base, *bases]
        b = lower_bound(problem, use_lp=False)
        info["bound_method"] = b.method
        return finish(max(bound_s, b.lower_bound_s))

    # ---- bound first (cheap unless the LP relaxation is small enough to run)
    b = lower_bound(problem, use_lp=True, time_limit=max(min(0.2 * remaining(), 30.0), 1.0))
    bound_s = max(bound_s, b.lower_bound_s)
    info["bound_method"] = b.method
    report()
    if inc_obj <= bound_s * (1 + 1e-9):
        info["steps"].append("baseline meets the lower bound: optimal")
        return finish(bound_s)

    # ---- candidates: the baselines' circuits and the other splits, each routed by the LP
    tried = []
    others = [(f"{x.solver} circuits", x.circuits) for x in bases[1:]]
    others += candidate_circuits(problem, deadline=t0 + 0.3 * (deadline - t0))
    scored = sorted(
        ((quick_score(problem, c), i, name, c) for i, (name, c) in enumerate(others)),
        key=lambda x: (x[0], x[1]),
    )
    cands = [(f"{base.solver} circuits", base.circuits)] + [(nm, c) for _, _, nm, c in scored]
    last = 0.0
    seen: set[bytes] = set()
    for name, c in cands:
        key = canonical_circuits(c, n).tobytes()
        if key in seen:
            continue
        seen.add(key)
        if remaining() < max(1.5 * last, 0.5):
            break
        ts = time.perf_counter()
        # the LP gets 60% of what is left: decomposing its flow into paths comes on top
        routed, val, util = route_design(problem, c, 0.6 * remaining(), extra=base)
        last = time.perf_counter() - ts
        tried.append({"candidate": name, "objective_s": val, "wall_s": last})
        if np.isfinite(val):
            pool.append((val, len(pool), name, canonical_circuits(c, n), routed))
        if val < inc_obj * (1 - 1e-12):
            inc_obj = val
            inc = (canonical_circuits(c, n), routed, name, False, util)
            report()
            if inc_obj <= bound_s * (1 + 1e-9):
                break
    info["candidates"] = tried

    # ---- exact MIP for tiny clusters
    if n <= exact_max_servers and remaining() > 1.0 and inc_obj > bound_s * (1 + 1e-9):
        hint = inc[0] if inc is not None else base.circuits
        ex = exact_design(
            problem, inc_obj, time_limit=max(remaining() - 1.0, 0.5), threads=threads, seed=seed,
            hint_circuits=hint,
        )  # fmt: skip
        info["exact"] = {"status": ex.status, "objective_s": ex.objective_s, "bound_s": ex.bound_s}
        if ex.status == "optimal":
            bound_s = max(bound_s, ex.bound_s * (1 - 1e-6))
        if ex.circuits is not None:
            routed, val, util = route_design(
                problem, ex.circuits, max(remaining(), 1.0), extra=base, exact=True
            )
            if val < inc_obj * (1 - 1e-9) or (inc is None and val <= inc_obj * (1 + 1e-9)):
                inc_obj = val
                proven = ex.status == "optimal" and val <= ex.objective_s * (1 + 1e-6)
                inc = (ex.circuits, routed, "exact MIP", proven, util)
        report()

    # ---- local search on the incumbent
    optimal = inc_obj <= bound_s * (1 + 1e-9)
    if local_search and not optimal and inc is not None and remaining() > 2 * max(last, 0.2):

        def evaluate(c):
            _, val, u = route_design(problem, c, 0.6 * remaining(), extra=base)
            return val, u

        def improved(c, v):
            nonlocal inc_obj
            inc_obj = v
            report()

        margin = max(last, 0.2)
        best_c, best_v, evals = improve_by_swaps(
            inc[0], n, problem.pair_cap, evaluate, (inc_obj, inc[4]),
            deadline=deadline - margin, on_improve=improved,
        )  # fmt: skip
        info["local_search_evaluations"] = evals
        if best_v < inc[1].time_s * (1 - 1e-9) and not np.array_equal(best_c, inc[0]):
            routed, val, util = route_design(problem, best_c, max(remaining(), 1.0), extra=base)
            if val <= best_v * (1 + 1e-9):
                inc = (best_c, routed, inc[2] + " + swaps", False, util)
                inc_obj = val

    if inc is None:
        info["steps"].append("baseline kept (no candidate improved on it)")
    return finish(bound_s)
