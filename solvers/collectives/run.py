"""One collective on one fabric: build the algorithm's schedule, time it with the flow model.

:func:`run_collective` is what ``topoopt collective`` calls. Members are the fabric's servers
``0 .. n-1`` (one rank each). Algorithms:

- ``ring``, ``tree``, ``halving-doubling``, ``direct``: the flow templates of
  :mod:`topoopt.flowsim.collectives` (fluid mode); the ring runs NCCL-like over the rings of
  :func:`topoopt.flowsim.fabric_rings.fabric_rings` (a direct fabric's edge-disjoint
  Hamiltonian cycles, each both ways; rank order on a switched fabric);
- ``blink``: the tree packing of :mod:`solvers.collectives.blink`. It is never slower than the
  ring: the ring's schedule is timed too, and when it is faster the result is the ring's
  schedule, with ``schedule["selected"] == "ring"`` and the reason (a packing starts from the
  ring's own trees, so in the fluid limit this only happens through the flow model's sharing);
  an all-to-all, which has no tree form, runs the direct schedule (``selected == "direct"``;
  its one template, one flow per pair, which ``ring``, ``tree`` and ``halving-doubling`` are
  refused for rather than run under their names);
- ``synthesize``: SCCL-style exact synthesis when the fabric is switchless and has at most
  :data:`EXACT_MAX_MEMBERS` servers (the Pareto point with the lowest alpha-beta time for this
  size, within the work limits), TACCL-style synthesis with integral chunks, and the relaxation
  of its routing MILP (fractional chunks, ``taccl-lp``) on every fabric; the fastest in the flow
  model is returned, and all are listed in ``schedule["candidates"]``. All-to-all: the
  TACCL-style routing LP over direct and one-relay paths, or the fabric's own routes
  (``direct``) when they are faster in the flow model.

The lower bound is :func:`solvers.collectives.bounds.cut_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.collectives.blink import PackingStopped, pack_trees
from solvers.collectives.bounds import COLLECTIVES, cut_bound
from solvers.collectives.overlay import overlay, server_links
from solvers.collectives.schedule import Schedule, template_schedule, time_schedule, tree_schedule
from solvers.collectives.sizes import check_collective_size
from solvers.collectives.synthesis import (
    SCCL_COLLECTIVES,
    sccl_pareto,
    sccl_schedule,
    taccl_all_to_all,
    taccl_schedule,
)
from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim.fabric_rings import fabric_rings
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = ["ALGORITHMS", "EXACT_MAX_MEMBERS", "CollectiveResult", "run_collective"]

ALGORITHMS = ("ring", "tree", "halving-doubling", "direct", "blink", "synthesize")
"""Algorithms of ``topoopt collective``."""

EXACT_MAX_MEMBERS = 8
"""Largest switchless fabric (servers) on which ``synthesize`` tries SCCL-style exact synthesis."""


@dataclass(frozen=True, eq=False)
class CollectiveResult:
    """A timed collective.

    Attributes
    ----------
    time_s : float
        Flow-model time of the schedule.
    lower_bound_s : float
        Cut lower bound.
    algorithm : str
        The algorithm asked for.
    schedule : Schedule
        The schedule timed.
    bound_formula : str
    """

    time_s: float
    lower_bound_s: float
    algorithm: str
    schedule: Schedule
    bound_formula: str

    def to_dict(self) -> dict:
        """The JSON document of ``topoopt collective --json``."""
        return {
            "time_s": self.time_s,
            "lower_bound_s": self.lower_bound_s,
            "algorithm": self.algorithm,
            "schedule": self.schedule.summary(),
            "ratio_to_bound": self.time_s / self.lower_bound_s,
            "lower_bound_formula": self.bound_formula,
        }


_PARETO_CACHE: dict[tuple, list] = {}


def _packing(ov, collective: str, root: int):
    """:func:`pack_trees`, its LP limit as one line naming the algorithm (rings need no LP)."""
    try:
        return pack_trees(ov, collective, root=root)
    except PackingStopped as exc:
        raise InputError("--algorithm", "blink/synthesized", f"ring or tree here ({exc})") from None


def _pareto(sl, base: str, max_chunks: int, root: int, work_limit: float) -> list:
    """:func:`sccl_pareto`, memoised per topology and parameters (an all-reduce and an
    all-gather on one fabric share the all-gather frontier; results are deterministic)."""
    key = (sl.n, sl.src.tobytes(), sl.dst.tobytes(), sl.count.tobytes(), base, max_chunks, root)
    key = (*key, float(work_limit))
    if key not in _PARETO_CACHE:
        if len(_PARETO_CACHE) > 64:
            _PARETO_CACHE.clear()
        _PARETO_CACHE[key] = sccl_pareto(
            sl, base, max_chunks=max_chunks, root=root, work_limit=work_limit
        )
    return _PARETO_CACHE[key]


def _with(s: Schedule, **info) -> Schedule:
    return Schedule(s.collective, s.algorithm, s.n, s.size, s.flows, s.barriers, {**s.info, **info})


def _alpha_beta(p, n: int, size: float, collective: str, bw: float, alpha: float) -> float:
    d = size if collective == "broadcast" else size / n
    t = p.steps * alpha + p.rounds / p.chunks * d / bw
    return 2 * t if collective == "all-reduce" else t


def run_collective(
    fabric: Fabric,
    collective: str,
    size: float,
    algorithm: str,
    *,
    routing: PathSet | None = None,
    chunks: int | None = None,
    root: int = 0,
    exact_max_chunks: int = 3,
    exact_work_limit: float = 5.0,
    taccl_chunks: int = 8,
) -> CollectiveResult:
    """Schedule and time ``collective`` of ``size`` bytes over all servers of ``fabric``.

    Parameters
    ----------
    fabric : Fabric
    collective : str
        One of :data:`solvers.collectives.bounds.COLLECTIVES`.
    size : float
        nccl-tests size ``S``, bytes.
    algorithm : str
        One of :data:`ALGORITHMS` (module docstring).
    routing : PathSet, optional
        Server-pair routes (e.g. a design's) instead of the fabric's ECMP routes.
    chunks : int, optional
        Pipeline chunks of the tree schedules (blink, TACCL); default: the fluid limit.
    root : int
        Root of a broadcast.
    exact_max_chunks, exact_work_limit
        Chunks per member and CP-SAT deterministic time per problem of the exact synthesis.
    taccl_chunks : int
        Chunks per root the TACCL-style routing MILP assigns to trees (a broadcast, with its
        one root, gets ``n`` times as many).

    Examples
    --------
    >>> from topoopt.fabrics import expander
    >>> r = run_collective(expander(8, 3, 1, 12.5e9), "all-gather", 1e9, "blink")
    >>> round(r.lower_bound_s * 1e3, 4), round(r.time_s / r.lower_bound_s, 4)
    (23.3333, 1.0)
    """
    if collective not in COLLECTIVES:
        raise InputError("collective", collective, f"one of {', '.join(COLLECTIVES)}")
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")
    try:
        size = float(size)
    except (TypeError, ValueError):
        raise InputError("size", size, "a number of bytes > 0") from None
    if not (np.isfinite(size) and size > 0):
        raise InputError("size", size, "a finite number of bytes > 0")
    n = fabric.n_servers
    if n < 2:
        raise InputError("servers", n, "at least 2 servers")
    if not 0 <= int(root) < n:
        raise InputError("root", root, f"a server 0..{n - 1}")
    check_collective_size(collective, algorithm, n, fabric.n_nodes, routed=routing is None)
    bound = cut_bound(fabric, collective, size, n, root)
    if collective == "all-to-all" and algorithm in ALGORITHMS[:3]:
        # its template is one flow per pair whatever the name: the ring, tree or
        # halving-doubling label was put on the direct schedule
        raise InputError("algorithm", algorithm, "direct, blink or synthesize for an all-to-all")
    if algorithm in ALGORITHMS[:4]:
        if collective == "broadcast" and algorithm == "halving-doubling":
            raise InputError("algorithm", algorithm, "ring, tree or direct for a broadcast")
        sched = template_schedule(collective, n, size, algorithm, fabric_rings(fabric))
        t, _ = time_schedule(sched, fabric, routing)
        return CollectiveResult(t, bound.seconds, algorithm, sched, bound.formula)
    if collective == "all-to-all" and algorithm == "blink":
        # no tree form: the direct schedule (one flow per pair: the only template an all-to-all
        # has; it was "the faster of ring and direct", the same schedule twice), saying so
        sc = template_schedule(collective, n, size, "direct")
        t, alg = time_schedule(sc, fabric, routing)[0], "direct"
        why = "an all-to-all has no tree packing: the direct schedule, one flow per pair"
        sched = Schedule(
            collective, "blink", n, size, sc.flows, False, {"selected": alg, "reason": why}
        )
        return CollectiveResult(t, bound.seconds, algorithm, sched, bound.formula)
    ov = overlay(fabric, routing=routing)
    if collective == "all-to-all":
        sched = taccl_all_to_all(ov, size)
        t, _ = time_schedule(sched, fabric, routing)
        direct = template_schedule(collective, n, size, "direct")
        t_direct, _ = time_schedule(direct, fabric, routing)
        listing = [{"method": "taccl", "time_s": t}, {"method": "direct", "time_s": t_direct}]
        if t_direct < t:  # the fabric's own routes were better in the flow model
            sched, t = direct, t_direct
        sched = _with(sched, candidates=listing)
        sched = Schedule(collective, algorithm, n, size, sched.flows, False, sched.info)
        return CollectiveResult(t, bound.seconds, algorithm, sched, bound.formula)
    if algorithm == "blink":
        p = _packing(ov, collective, root)
        info = {
            "method": "blink",
            "packing_rate_bytes_per_s": p.rate,
            "packing_upper_bound_bytes_per_s": p.upper_bound,
            "packing_status": p.status,
            "lp_rounds": p.iterations,
        }
        sched = tree_schedule(
            collective, n, size, list(p.trees), algorithm="blink", chunks=chunks, info=info
        )
        t, _ = time_schedule(sched, fabric, routing)
        ring = template_schedule(collective, n, size, "ring", fabric_rings(fabric))
        t_ring, _ = time_schedule(ring, fabric, routing)
        if t_ring < t:
            why = f"the ring ({t_ring:.6g} s) is faster than the packing ({t:.6g} s)"
            sched = _with(ring, selected="ring", reason=why, packing_time_s=t)
            sched = Schedule(collective, "blink", n, size, sched.flows, sched.barriers, sched.info)
            t = t_ring
        else:
            sched = _with(sched, selected="packing", ring_time_s=t_ring)
        return CollectiveResult(t, bound.seconds, algorithm, sched, bound.formula)
    # synthesize
    cands: list[tuple[float, Schedule]] = []
    notes = []
    sl = None
    if n <= EXACT_MAX_MEMBERS and collective in SCCL_COLLECTIVES:
        try:
            sl = server_links(fabric)
        except InputError:
            notes.append("exact synthesis needs a switchless fabric")
    elif collective in SCCL_COLLECTIVES:
        notes.append(f"exact synthesis only up to {EXACT_MAX_MEMBERS} servers")
    if sl is not None and routing is None:
        base = "broadcast" if collective == "broadcast" else "all-gather"
        pts = _pareto(sl, base, exact_max_chunks, root, exact_work_limit)
        if pts:
            best = min(
                pts, key=lambda p: _alpha_beta(p, n, size, collective, sl.bandwidth, sl.latency)
            )
            pareto = [[p.steps, p.chunks, p.rounds] for p in pts]
            s = sccl_schedule(sl, collective, size, best, root=root, info={"pareto": pareto})
            cands.append((time_schedule(s, fabric, routing)[0], s))
        else:
            notes.append("exact synthesis found no schedule within its limits")
    per_root = taccl_chunks * n if collective == "broadcast" else taccl_chunks  # one root
    p = _packing(ov, collective, root)
    s = taccl_schedule(
        ov, collective, size, chunks_per_root=per_root, chunks=chunks, root=root, packing=p
    )
    cands.append((time_schedule(s, fabric, routing)[0], s))
    # the routing LP's relaxation (fractional chunks: the limit of many chunks per root)
    info = {"method": "taccl-lp", "lp_rate_bytes_per_s": p.rate, "packing_status": p.status}
    s = tree_schedule(
        collective, n, size, list(p.trees), algorithm="synthesize", chunks=chunks, info=info
    )
    cands.append((time_schedule(s, fabric, routing)[0], s))
    cands.sort(key=lambda c: c[0])
    t, sched = cands[0]
    listing = [{"method": c.info["method"], "time_s": tc} for tc, c in cands]
    sched = _with(sched, candidates=listing, notes=notes)
    return CollectiveResult(t, bound.seconds, algorithm, sched, bound.formula)
