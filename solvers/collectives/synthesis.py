"""Collective synthesis: SCCL-style exact schedules on small instances, TACCL-style beyond.

**Exact (SCCL).** Cai et al., "Synthesizing Optimal Collective Algorithms", PPoPP 2021, search
*k-synchronous* algorithms: every member's data is split into ``C`` chunks; the algorithm runs
``K`` steps, step ``k`` lasting ``r_k >= 1`` rounds with ``R = sum r_k``; in a round a link
carries one chunk (a bundle of ``m`` parallel links ``m`` chunks). Under the alpha-beta model the
time is ``K * alpha + (R / C) * beta * D`` (``D`` the bytes per member, ``beta = 1/B``): ``K``
is the latency cost, ``R/C`` the bandwidth cost. :func:`sccl_feasible` decides one
``(C, K, R)`` with CP-SAT (Booleans ``snd[chunk, link, step]`` and ``has[chunk, node, step]``; a
chunk is sent only by a node that has it, arrives at a node that does not, and every bundle
carries at most ``m * r_k`` chunks in step ``k``), on one worker with a deterministic-time limit
(wall clock only as a safety cap) and its status checked. :func:`sccl_pareto` walks the
``(K, R/C)`` frontier as SCCL's Pareto-Synthesize does: for each ``K`` from the diameter up,
the smallest ``R/C`` that is feasible, stopping at the bandwidth lower bound
``R/C >= (n-1) / min_v (links into v)``.

All-gather and broadcast are synthesised directly (non-combining); reduce-scatter is the
inverse of an all-gather (SCCL's inversion: every send reversed, steps in reverse order, copies
become reductions) and all-reduce is reduce-scatter followed by all-gather.

**Scaled (TACCL).** Shah et al., "TACCL: Guiding Collective Algorithm Synthesis using
Communication Sketches", NSDI 2023, route chunks with a MILP over a sketch of the topology and
order them afterwards. Here the sketch is the set of arborescences that the tree-packing LP
(:mod:`solvers.collectives.blink`) generates; the routing MILP (SCIP through ``pywraplp``, with a
time limit and its status checked) assigns each of a root's ``C`` chunks to one of its sketch
trees, minimising the busiest link's time; the ordering sends every chunk down its tree in
the fluid limit of pipelining, or, with ``chunks``, as one transfer per chunk and tree edge after
its parent edge, the transfers on each arc in order of depth then chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.collectives.blink import pack_trees, roots_and_directions
from solvers.collectives.overlay import Overlay, ServerLinks
from solvers.collectives.schedule import Schedule, Tree, step_schedule, tree_schedule
from topoopt.flowsim.templates import FlowTemplate
from traffic.errors import InputError

__all__ = [
    "SCCL_COLLECTIVES",
    "ExactResult",
    "sccl_feasible",
    "sccl_pareto",
    "sccl_schedule",
    "bandwidth_cost_bound",
    "taccl_schedule",
    "taccl_all_to_all",
    "SCCL_WORK_LIMIT",
    "A2A_RELAY_MAX",
]

SCCL_COLLECTIVES = ("all-gather", "broadcast", "reduce-scatter", "all-reduce")
"""Collectives the exact synthesis handles."""

SCCL_WORK_LIMIT = 20.0
"""CP-SAT deterministic time (its work units, about seconds) per feasibility problem."""


@dataclass(frozen=True)
class ExactResult:
    """Outcome of one exact ``(C, K, R)`` problem.

    ``status``: ``feasible``, ``infeasible`` (proven) or ``unknown`` (limit reached).
    ``sends``: ``(chunk, src, dst, step)`` of the schedule found (chunk = ``source * C + j``, or
    ``j`` for a broadcast), empty unless feasible. ``rounds``: ``r_k`` of every step.
    """

    chunks: int
    steps: int
    rounds: int
    status: str
    sends: tuple[tuple[int, int, int, int], ...] = ()
    step_rounds: tuple[int, ...] = ()


def _initial(collective: str, n: int, chunks: int, root: int) -> tuple[int, np.ndarray]:
    if collective == "broadcast":
        return chunks, np.full(chunks, root, np.int64)
    return n * chunks, np.repeat(np.arange(n), chunks)


def sccl_feasible(
    links: ServerLinks,
    collective: str,
    chunks: int,
    steps: int,
    rounds: int,
    *,
    root: int = 0,
    step_rounds: tuple[int, ...] | None = None,
    work_limit: float = SCCL_WORK_LIMIT,
    time_cap_s: float = 60.0,
) -> ExactResult:
    """Is there a k-synchronous ``collective`` (all-gather or broadcast) with ``chunks`` chunks
    per member, ``steps`` steps and ``rounds`` rounds on ``links``? (CP-SAT, module docstring.)

    Examples
    --------
    A 4-server ring (one link each way between neighbours): an all-gather needs 2 steps (the
    diameter); with 1 chunk, 2 rounds suffice, and 1 step is proven impossible.

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import server_links
    >>> sl = server_links(torus("4", 1e9))
    >>> sccl_feasible(sl, "all-gather", 1, 2, 2).status
    'feasible'
    >>> sccl_feasible(sl, "all-gather", 1, 1, 1).status
    'infeasible'
    """
    from ortools.sat.python import cp_model

    if collective not in ("all-gather", "broadcast"):
        raise InputError("collective", collective, "all-gather or broadcast (non-combining)")
    n, C, K, R = links.n, int(chunks), int(steps), int(rounds)
    if C < 1 or K < 1 or R < K:
        raise InputError("chunks/steps/rounds", (C, K, R), "C >= 1, K >= 1, R >= K")
    n_chunks, origin = _initial(collective, n, C, root)
    m = cp_model.CpModel()
    A = links.src.shape[0]
    if step_rounds is not None:  # the rounds of every step fixed (a smaller search)
        if len(step_rounds) != K or sum(step_rounds) > R or min(step_rounds) < 1:
            raise InputError("step_rounds", step_rounds, f"{K} integers >= 1 summing to <= {R}")
        r = [int(x) for x in step_rounds]
    else:
        r = [m.NewIntVar(1, R - K + 1, f"r{k}") for k in range(K)]
        m.Add(sum(r) <= R)
    has = {}
    for c in range(n_chunks):
        for v in range(n):
            has[c, v, 0] = 1 if origin[c] == v else 0
    snd = {}
    into = [np.flatnonzero(links.dst == v) for v in range(n)]
    for k in range(K):
        for c in range(n_chunks):
            for v in range(n):
                has[c, v, k + 1] = m.NewBoolVar(f"h{c}_{v}_{k + 1}")
            for a in range(A):
                u, v = int(links.src[a]), int(links.dst[a])
                if isinstance(has[c, v, k], int) and has[c, v, k] == 1:
                    continue  # never send a chunk to a node that has it
                if isinstance(has[c, u, k], int) and has[c, u, k] == 0:
                    continue
                x = m.NewBoolVar(f"s{c}_{a}_{k}")
                snd[c, a, k] = x
                if not isinstance(has[c, u, k], int):
                    m.AddImplication(x, has[c, u, k])
                if not isinstance(has[c, v, k], int):
                    m.AddImplication(x, has[c, v, k].Not())
            for v in range(n):
                h1, h0 = has[c, v, k + 1], has[c, v, k]
                arrivals = [snd[c, a, k] for a in into[v] if (c, a, k) in snd]
                m.Add(h1 <= h0 + sum(arrivals))  # h0 is a constant or a Boolean
                m.Add(h1 >= h0)
        for a in range(A):
            load = [snd[c, a, k] for c in range(n_chunks) if (c, a, k) in snd]
            if load:
                m.Add(sum(load) <= int(links.count[a]) * r[k])
    for c in range(n_chunks):
        for v in range(n):
            m.Add(has[c, v, K] == 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = float(work_limit)
    solver.parameters.max_time_in_seconds = float(time_cap_s)
    solver.parameters.random_seed = 0
    st = solver.Solve(m)
    if st == cp_model.INFEASIBLE:
        return ExactResult(C, K, R, "infeasible")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ExactResult(C, K, R, "unknown")
    sends = tuple(
        (c, int(links.src[a]), int(links.dst[a]), k)
        for (c, a, k), x in sorted(snd.items(), key=lambda t: (t[0][2], t[0][0], t[0][1]))
        if solver.Value(x)
    )
    rounds_used = tuple(int(x) if isinstance(x, int) else int(solver.Value(x)) for x in r)
    return ExactResult(C, K, R, "feasible", sends, rounds_used)


def bandwidth_cost_bound(links: ServerLinks, collective: str, root: int = 0) -> Fraction:
    """Lower bound on ``R/C``: all-gather ``(n-1) / min_v (links into v)``; broadcast
    ``1 / min_{v != root} (links into v)``.

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import server_links
    >>> bandwidth_cost_bound(server_links(torus("4", 1e9)), "all-gather")
    Fraction(3, 2)
    """
    indeg = np.bincount(links.dst, weights=links.count, minlength=links.n).astype(np.int64)
    if collective == "broadcast":
        return Fraction(1, int(np.delete(indeg, root).min()))
    return Fraction(links.n - 1, int(indeg.min()))


def _diameter(links: ServerLinks, root: int | None) -> int:
    n = links.n
    d = np.full((n, n), n + 1)
    np.fill_diagonal(d, 0)
    d[links.src, links.dst] = 1
    for k in range(n):  # Floyd-Warshall, n <= 8
        d = np.minimum(d, d[:, [k]] + d[[k], :])
    if d.max() > n:
        raise InputError("fabric", "disconnected", "connected servers")
    return int(d[root].max()) if root is not None else int(d.max())


def sccl_pareto(
    links: ServerLinks,
    collective: str = "all-gather",
    *,
    max_chunks: int = 6,
    max_steps: int | None = None,
    slack: int = 0,
    root: int = 0,
    work_limit: float = SCCL_WORK_LIMIT,
) -> list[ExactResult]:
    """The Pareto frontier ``(K, R/C)`` of k-synchronous algorithms (module docstring).

    For ``K`` from the diameter (the root's eccentricity for a broadcast) to ``max_steps``
    (default ``diameter + 6``), the candidates ``(C, R)`` with ``C <= max_chunks`` and
    ``K <= R <= K + slack`` (SCCL's k-synchrony; ``slack=0``: one round per step) are tried in
    increasing ``R/C`` (then fewer chunks), each with the step rounds fixed to one composition
    of ``R`` after another (balanced first); the first feasible one is
    the point at ``K`` when its ``R/C`` beats every smaller ``K``. A candidate that ends on a
    limit (``unknown``) is skipped, so the frontier is then an upper estimate. The walk stops at
    the bandwidth bound.

    Examples
    --------
    On a 4-server ring: the latency-optimal all-gather (2 steps, 1 chunk, 2 rounds), then the
    bandwidth-optimal one (3 steps, 2 chunks, 3 rounds: ``R/C = 3/2``, the bound).

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import server_links
    >>> [(p.steps, p.chunks, p.rounds) for p in sccl_pareto(server_links(torus("4", 1e9)))]
    [(2, 1, 2), (3, 2, 3)]
    """
    bound = bandwidth_cost_bound(links, collective, root)
    k0 = _diameter(links, root if collective == "broadcast" else None)
    k_max = k0 + 6 if max_steps is None else int(max_steps)
    best: Fraction | None = None
    out: list[ExactResult] = []
    for K in range(k0, k_max + 1):
        cands = sorted(
            {
                (Fraction(R, C), C, R)
                for C in range(1, max_chunks + 1)
                for R in range(K, K + int(slack) + 1)
                if Fraction(R, C) >= bound and (best is None or Fraction(R, C) < best)
            }
        )
        for _, C, R in cands:
            res = _feasible_any_rounds(links, collective, C, K, R, root, work_limit)
            if res.status == "feasible":
                out.append(res)
                best = Fraction(R, C)
                break
        if best is not None and best <= bound:
            break
    return out


def _compositions(total: int, parts: int):
    """Compositions of ``total`` into ``parts`` positive integers, the most balanced first."""
    if parts == 1:
        return [(total,)]
    out = [
        (a, *rest)
        for a in range(1, total - parts + 2)
        for rest in _compositions(total - a, parts - 1)
    ]
    return sorted(out, key=lambda c: (max(c) - min(c), c))


def _feasible_any_rounds(links, collective, C, K, R, root, work_limit) -> ExactResult:
    """``(C, K, R)`` decided with the rounds of each step fixed, one composition of ``R`` after
    another (many small problems solve faster than one with free rounds): feasible at the first
    feasible composition, infeasible when all are proven infeasible, else unknown."""
    if R == K:
        return sccl_feasible(links, collective, C, K, R, root=root, work_limit=work_limit)
    unknown = False
    for comp in _compositions(R, K):
        res = sccl_feasible(
            links, collective, C, K, R, root=root, step_rounds=comp, work_limit=work_limit
        )
        if res.status == "feasible":
            return res
        unknown |= res.status == "unknown"
    return ExactResult(C, K, R, "unknown" if unknown else "infeasible")


def sccl_schedule(
    links: ServerLinks,
    collective: str,
    size: float,
    result: ExactResult,
    *,
    root: int = 0,
    info: dict | None = None,
) -> Schedule:
    """The step-synchronous schedule of an exact result (an all-gather or broadcast result; a
    reduce-scatter is its inverse, an all-reduce the inverse followed by the all-gather).

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import server_links
    >>> sl = server_links(torus("4", 1e9))
    >>> s = sccl_schedule(sl, "all-reduce", 4e6, sccl_feasible(sl, "all-gather", 1, 2, 2))
    >>> s.n_steps, float(s.flows.bytes.sum()), s.barriers
    (4, 24000000.0, True)
    """
    if result.status != "feasible":
        raise InputError("result", result.status, "a feasible exact result")
    n, C, K = links.n, result.chunks, result.steps
    chunk = (size if collective == "broadcast" else size / n) / C
    ag = [(chunk, s, d, k) for _, s, d, k in result.sends]
    if collective in ("all-gather", "broadcast"):
        sends = ag
    else:
        inverse = [(b, d, s, K - 1 - k) for b, s, d, k in ag]
        sends = (
            inverse
            if collective == "reduce-scatter"
            else inverse + [(b, s, d, k + K) for b, s, d, k in ag]
        )
    meta = {
        "method": "sccl-exact",
        "chunks": C,
        "sccl_steps": K,
        "rounds": result.rounds,
        "step_rounds": list(result.step_rounds),
        "bandwidth_cost": str(Fraction(result.rounds, C)),
    }
    meta.update(info or {})
    return step_schedule(collective, n, size, sends, algorithm="synthesize", info=meta)


def _route_milp(ov: Overlay, trees: list[Tree], commodities, chunks: int, time_limit_s: float):
    """Integer chunk counts per sketch tree minimising the busiest link's load (SCIP)."""
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver("SCIP")
    if solver is None:  # pragma: no cover
        raise RuntimeError("OR-Tools SCIP is not available")
    solver.SetTimeLimit(int(time_limit_s * 1000))
    scale = float(ov.capacity.max())
    u = solver.NumVar(0.0, solver.infinity(), "u")
    com = {rc: i for i, rc in enumerate(commodities)}
    z = [solver.IntVar(0, chunks, f"z{i}") for i in range(len(trees))]
    for i in range(len(commodities)):
        members = [z[j] for j, t in enumerate(trees) if com[(t.root, t.inward)] == i]
        solver.Add(sum(members) == chunks)
    rows: dict[int, list] = {}
    for j, t in enumerate(trees):
        p = np.asarray(t.parent)
        v = np.flatnonzero(p >= 0)
        arcs = ov.arc(v, p[v]) if t.inward else ov.arc(p[v], v)
        ld = np.asarray(ov.load[:, arcs].sum(axis=1)).ravel()
        for l_id in np.flatnonzero(ld):
            rows.setdefault(int(l_id), []).append((j, float(ld[l_id])))
    for l_id, terms in rows.items():
        cap = float(ov.capacity[l_id]) / scale
        solver.Add(sum(w * z[j] for j, w in terms) <= cap * u)
    solver.Minimize(u)
    # warm start: the LP's shares rounded
    st = solver.Solve()
    if st not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return None, "no-solution"
    counts = np.array([round(x.solution_value()) for x in z], np.int64)
    return counts, "optimal" if st == pywraplp.Solver.OPTIMAL else "time-limit"


def taccl_schedule(
    ov: Overlay,
    collective: str,
    size: float,
    *,
    chunks_per_root: int = 8,
    chunks: int | None = None,
    root: int = 0,
    time_limit_s: float = 10.0,
    max_rounds: int = 60,
    packing=None,
) -> Schedule:
    """TACCL-style synthesis (module docstring): sketch trees from the packing LP, SCIP routing
    of ``chunks_per_root`` chunks per root, then ordering (fluid, or ``chunks`` pipelined).
    ``packing`` gives the sketch's packing when it is already computed.

    Examples
    --------
    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import overlay
    >>> s = taccl_schedule(overlay(torus("4", 1e9)), "all-gather", 4e6, chunks_per_root=2)
    >>> s.info["method"], s.info["routing_status"], float(s.flows.bytes.sum())
    ('taccl', 'optimal', 12000000.0)
    """
    if int(chunks_per_root) != chunks_per_root or chunks_per_root < 1:
        raise InputError("chunks_per_root", chunks_per_root, "an integer >= 1")
    if packing is None:  # the sketch: the trees of the packing LP
        packing = pack_trees(ov, collective, root=root, max_rounds=max_rounds)
    commodities = roots_and_directions(collective, ov.n, root)
    trees = list(packing.trees)
    counts, status = _route_milp(ov, trees, commodities, int(chunks_per_root), time_limit_s)
    if counts is None:  # keep the LP's fractional routing
        chosen, status = trees, "lp-fallback"
    else:
        chosen = [
            Tree(t.root, t.parent, c / chunks_per_root, t.inward)
            for t, c in zip(trees, counts, strict=True)
            if c > 0
        ]
    info = {
        "method": "taccl",
        "sketch_trees": len(trees),
        "chunks_per_root": int(chunks_per_root),
        "routing_status": status,
        "lp_rate_bytes_per_s": packing.rate,
    }
    return tree_schedule(
        collective, ov.n, size, chosen, algorithm="synthesize", chunks=chunks, info=info
    )


A2A_RELAY_MAX = 16
"""Largest all-to-all (members) routed with one-relay paths; above it only direct routes."""


def taccl_all_to_all(ov: Overlay, size: float, *, relays: bool = True) -> Schedule:
    """TACCL-style all-to-all: each pair's ``S/n`` bytes routed by an LP (GLOP, iteration limit,
    status checked) over its direct route and its one-relay paths ``s -> w -> t`` (a member
    forwarding), minimising the busiest link's time; the schedule is the fluid limit (the
    relayed bytes stream through ``w``), transfers on one arc merged.

    Examples
    --------
    On a 4-server ring of 1 GB/s links, 4 MB all-to-all: the bytes to the opposite server cross
    two links whatever the route, 16 MB of link traffic on 8 GB/s of links: 2 ms.

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import overlay
    >>> s = taccl_all_to_all(overlay(torus("4", 1e9)), 4e6)
    >>> s.info["method"], round(s.info["lp_time_s"] * 1e3, 6)
    ('taccl', 2.0)
    """
    from ortools.linear_solver import pywraplp

    n = ov.n
    demand = size / n
    relay = relays and n <= A2A_RELAY_MAX
    src, dst, via = [], [], []
    for s_ in range(n):
        for t in range(n):
            if s_ == t:
                continue
            src.append(s_)
            dst.append(t)
            via.append(-1)
            if relay:
                for w in range(n):
                    if w not in (s_, t):
                        src.append(s_)
                        dst.append(t)
                        via.append(w)
    src_a, dst_a, via_a = (np.asarray(x, np.int64) for x in (src, dst, via))
    direct = via_a < 0
    first = ov.arc(src_a, np.where(direct, dst_a, via_a))
    second = np.where(direct, -1, ov.arc(np.where(direct, 0, via_a), dst_a))
    load = ov.load.tocsc()
    scale = float(ov.capacity.max())
    solver = pywraplp.Solver.CreateSolver("GLOP")
    solver.SetSolverSpecificParametersAsString("max_number_of_iterations: 200000")
    u = solver.NumVar(0.0, solver.infinity(), "u")
    x = [solver.NumVar(0.0, solver.infinity(), f"x{i}") for i in range(src_a.shape[0])]
    pair = src_a * n + dst_a
    for key in np.unique(pair):
        solver.Add(sum(x[i] for i in np.flatnonzero(pair == key)) == 1.0)
    rows: dict[int, list] = {}
    for i in range(src_a.shape[0]):
        for a in (first[i], second[i]):
            if a < 0:
                continue
            col = load[:, int(a)]
            for l_id, w in zip(col.indices, col.data, strict=True):
                rows.setdefault(int(l_id), []).append((i, float(w)))
    for l_id, terms in rows.items():
        solver.Add(
            sum(w * demand / scale * x[i] for i, w in terms) <= float(ov.capacity[l_id]) / scale * u
        )
    solver.Minimize(u)
    st = solver.Solve()
    if st != pywraplp.Solver.OPTIMAL:
        raise RuntimeError(f"all-to-all routing LP stopped with status {st}")
    frac = np.array([v.solution_value() for v in x])
    arc_bytes = np.zeros(ov.n_arcs)
    np.add.at(arc_bytes, first, frac * demand)
    keep = second >= 0
    np.add.at(arc_bytes, second[keep], frac[keep] * demand)
    used = np.flatnonzero(arc_bytes > 1e-12 * size)
    flows = FlowTemplate(
        ov.src[used],
        ov.dst[used],
        arc_bytes[used],
        np.zeros(used.shape[0] + 1, np.int64),
        np.zeros(0, np.int64),
        np.zeros(used.shape[0], np.int64),
    )
    info = {
        "method": "taccl",
        "routing": "one-relay paths" if relay else "direct routes",
        "lp_time_s": float(u.solution_value()),
        "relayed_fraction": float(frac[~direct].sum() / max(frac.sum(), 1e-300)),
    }
    return Schedule("all-to-all", "synthesize", n, float(size), flows, False, info)
