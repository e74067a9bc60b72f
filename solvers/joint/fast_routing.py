"""LP-free routing for clusters too large for the routing LP: closed-form paths, balanced.

Above ``lp_max_servers`` the joint optimizer does not build routing LPs
(:mod:`solvers.joint.driver`); :func:`fast_route` routes a circuit set without one:

1. *Rings* (:func:`choose_rings`): per phase and group, the warm start's rings when every step
   of them is a circuit of the candidate, else rings along circuits
   (:func:`solvers.joint.rings.circuit_rings`, equal weights), else the members in order both
   ways (a virtual ring, forwarded over the circuits).
2. *Candidate paths* (:func:`candidate_paths`), in closed form from one breadth-first search
   per source: for a pair ``(u, v)`` at ``D`` hops, one path through each circuit neighbour
   ``x`` of ``u`` with ``dist(x, v) <= D`` -- the direct circuit (``x = v``), the two-hop paths
   through common neighbours, and every first hop that stays on a shortest (or one-hop-longer)
   route, continued along ``x``'s shortest-path tree. At most ``degree`` paths per pair, all
   simple (a path through ``u`` again would need ``dist(x, v) > D``).
3. *Balancing* (:func:`balance`): Frank-Wolfe on the smooth congestion objective
   ``F(w) = sum_p ||L_p(w) / cap||_q`` (``q`` rising from :data:`Q_START` to :data:`Q_END`, the
   ``q``-norm tending to the maximum), one shared weight vector for every phase (the routing a
   :class:`~solvers.model.design.Design` holds): each round moves every pair toward its
   cheapest path under the gradient's link prices, the step chosen by a line search on ``F``
   (loads are linear in the weights, so each trial step costs one vector operation per
   phase). The exact objective ``sum_p max_l L_pl / cap_l`` is recomputed every round and the
   best weights kept, so the result is never worse than the start (all bytes on the shortest
   candidates, split evenly).

Everything is numpy over CSR arrays; no decision depends on the clock. The work charged
(deterministic, about one unit per second of one core on the reference machine, as the routing
LPs' units) counts every step whose cost grows with the size: :data:`WORK_PER_WALK_STEP` per
step of the ring walks, :data:`WORK_PER_DISTANCE` per server pair of the breadth-first
distances, and per round of the balancing :data:`WORK_PER_ENTRY` per path-link entry and phase
and :data:`WORK_PER_LINK_TRIAL` per link, phase and evaluation of the smooth objective. Before
session 38 only the path-link entries were counted: at 512-2,048 servers a routing was charged
0.0001-0.5 units for 0.7-1.4 s of CPU, the work limit never bound and the wall clock ended the
search (a result that depended on the machine's load).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from solvers.joint.rings import walk_rings
from solvers.model.congestion import RingSet, phase_pairs
from solvers.model.problem import DesignProblem
from solvers.routing_lp import SharedRouting
from topoopt.csr import PairIndex, gather_rows
from topoopt.fabrics.circuits import Circuits, circuit_links
from topoopt.paths import PathSet

__all__ = [
    "choose_rings",
    "candidate_paths",
    "balance",
    "fast_route",
    "drop_paths",
    "ROUNDS",
    "Q_START",
    "Q_END",
    "RING_LIMIT",
    "WORK_PER_ENTRY",
    "WORK_PER_LINK_TRIAL",
    "WORK_PER_DISTANCE",
    "WORK_PER_WALK_STEP",
    "counted_rings",
]

ROUNDS = 40
"""Frank-Wolfe rounds of :func:`balance`."""

Q_START, Q_END = 8.0, 64.0
"""The norm of the smooth objective rises geometrically from ``Q_START`` to ``Q_END``."""

RING_LIMIT = 4
"""At most this many directed rings along circuits per group (:func:`choose_rings`)."""

WORK_PER_ENTRY = 2e-9
"""Work units per path-link entry, phase and round of :func:`balance` (about 5 ns of numpy on
the reference machine), the same unit as :data:`solvers.joint.driver.DEFAULT_WORK_LIMIT`."""

WORK_PER_LINK_TRIAL = 1.5e-8
"""Work units per link, phase and evaluation of the smooth objective in :func:`balance`
(:data:`ROUNDS` rounds of one gradient and ``len(_STEPS)`` line-search trials; 0.15 s of CPU
for the 2 x 16,384 links of 2,048 servers at degree 8, measured 2026-12-06)."""

WORK_PER_DISTANCE = 1.5e-7
"""Work units per server pair of the breadth-first distances and predecessors of
:func:`candidate_paths` (``n**2`` entries: 0.25-1.4 s of CPU at 2,048 servers, 0.03-0.17 s at
512, measured 2026-12-06 on 2 loaded cores)."""

WORK_PER_WALK_STEP = 5e-9
"""Work units per step of the ring walks (:func:`solvers.joint.rings.walk_rings`, compiled: a
neighbour-list entry read; 2.9 M steps in 0.013 s of CPU on a 512-member group, measured
2026-12-06; the plain-Python walks took 0.63 s, most of a routing at 512 servers)."""

_STEPS = np.array([1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625])


def choose_rings(problem: DesignProblem, circuits: np.ndarray, extra=None) -> tuple[RingSet, ...]:
    """One :class:`~solvers.model.congestion.RingSet` per phase (module docstring, step 1).

    ``extra`` (a :class:`~solvers.model.design.Design`, optional) offers its rings first.
    """
    return counted_rings(problem, circuits, extra)[0]


def counted_rings(
    problem: DesignProblem, circuits: np.ndarray, extra=None
) -> tuple[tuple[RingSet, ...], int]:
    """:func:`choose_rings` and the steps its walks took
    (:func:`solvers.joint.rings.walk_rings`: neighbour-list entries read), a deterministic
    count charged at :data:`WORK_PER_WALK_STEP`."""
    n = problem.n
    steps = 0
    cc = Circuits(circuits, n)
    c = cc.rows
    have = set((c[:, 0] * n + c[:, 1]).tolist()) | set((c[:, 1] * n + c[:, 0]).tolist())
    out = []
    cache: dict[bytes, list[np.ndarray]] = {}
    for ph in problem.phases:
        triples: list[tuple[int, float, list[int]]] = []
        for g in range(ph.n_groups):
            m = ph.group(g)
            mine = []
            if extra is not None:
                mine = [
                    r for r in extra.rings
                    if r["phase"] == ph.name and r["group"] == g and not r.get("virtual")
                ]  # fmt: skip
                ok = all(
                    a * n + b in have
                    for r in mine
                    for a, b in zip(r["order"], r["order"][1:] + r["order"][:1], strict=True)
                )
                if not ok or abs(sum(r["weight"] for r in mine) - 1.0) > 1e-6:
                    mine = []
            if mine:
                triples += [(g, float(r["weight"]), list(r["order"])) for r in mine]
                continue
            key = m.tobytes()
            if key not in cache:
                if m.size > 2:
                    cache[key], k = walk_rings(m, cc, n, limit=RING_LIMIT)
                    steps += k
                else:
                    cache[key] = [m]
            rings = cache[key] or [m, np.concatenate([m[:1], m[1:][::-1]])]
            if m.size <= 2:
                rings = [m]
            triples += [(g, 1.0 / len(rings), r.tolist()) for r in rings]
        out.append(RingSet.from_lists(triples))
    return tuple(out), steps


def candidate_paths(circuits: np.ndarray, n: int, src: np.ndarray, dst: np.ndarray):
    """The closed-form candidate paths of every pair ``(src[k], dst[k])`` (module docstring,
    step 2) over the links of :func:`~topoopt.fabrics.circuits.circuit_links`.

    Returns ``(paths, hops)``: a :class:`~topoopt.paths.PathSet` (weights even over each pair's
    shortest candidates) and every path's hop count; ``None`` when a pair is disconnected.

    Examples
    --------
    A square 0-1-2-3-0: 0 -> 1 direct or around (3 hops, longer than 1 + 1: not a candidate);
    0 -> 2 through 1 or through 3, half each.

    >>> c = np.array([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    >>> p, hops = candidate_paths(c, 4, np.array([0, 0]), np.array([1, 2]))
    >>> hops.tolist(), p.weight.tolist()
    ([1, 2, 2], [1.0, 0.5, 0.5])
    """
    c = Circuits(circuits, n).rows
    lsrc, ldst, _ = circuit_links(c, 1.0)
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    adj = sp.csr_matrix((np.ones(lsrc.size), (lsrc, ldst)), shape=(n, n))
    adj.sum_duplicates()
    dist, pred = csgraph.shortest_path(adj, unweighted=True, return_predecessors=True)
    if src.size and not np.all(np.isfinite(dist[src, dst])):
        return None
    dist = np.where(np.isfinite(dist), dist, n + 1).astype(np.int64)
    ptr, nbr = adj.indptr.astype(np.int64), adj.indices.astype(np.int64)
    deg = np.diff(ptr)
    k_of = np.repeat(np.arange(src.size), deg[src])
    x = nbr[gather_rows(ptr, src)]
    u, v = src[k_of], dst[k_of]
    keep = dist[x, v] <= dist[u, v]
    k_of, x, u, v = k_of[keep], x[keep], u[keep], v[keep]
    order = np.lexsort((x, k_of))  # commodity, then neighbour: deterministic
    k_of, x, u, v = k_of[order], x[order], u[order], v[order]
    tail = dist[x, v]  # hops from x to v
    lens = tail + 2  # nodes: u, x ... v
    nptr = np.zeros(lens.size + 1, np.int64)
    nptr[1:] = np.cumsum(lens)
    nodes = np.empty(int(nptr[-1]), np.int64)
    nodes[nptr[:-1]] = u
    end = nptr[1:] - 1
    cur = v.copy()
    nodes[end] = cur
    for s in range(1, int(tail.max()) + 1 if tail.size else 1):
        act = tail >= s
        cur[act] = pred[x[act], cur[act]]
        nodes[end[act] - s] = cur[act]
    last = np.zeros(nodes.size, bool)
    last[end] = True
    hop_u = nodes[~last]
    hop_v = nodes[np.flatnonzero(~last) + 1]
    links = PairIndex(lsrc, ldst, n)(hop_u, hop_v)
    hops = lens - 1
    cptr = np.zeros(src.size + 1, np.int64)
    cptr[1:] = np.cumsum(np.bincount(k_of, minlength=src.size))
    shortest = np.minimum.reduceat(hops, cptr[:-1]) if hops.size else hops
    on = hops == shortest[k_of]
    cnt = np.bincount(k_of, weights=on, minlength=src.size)
    w = on / cnt[k_of]
    pptr = np.zeros(hops.size + 1, np.int64)
    pptr[1:] = np.cumsum(hops)
    return PathSet(src, dst, cptr, pptr, links, w), hops


def _segment_argmin(cost: np.ndarray, cptr: np.ndarray, comm: np.ndarray) -> np.ndarray:
    """Index of the cheapest path of every commodity (the first on ties); every commodity has
    at least one path and its paths are contiguous. NaN counts as above every number (as a
    sort puts it last): a commodity whose costs are all NaN gets its first path.

    The same pick as ``np.lexsort((np.arange(cost.size), cost, comm))[cptr[:-1]]`` in linear
    time: each segment's smallest cost (``fmin`` skips NaN), then its first path at that cost.

    >>> _segment_argmin(np.array([3.0, 1.0, 1.0, np.nan, 2.0]), np.array([0, 3, 5]), None)
    array([1, 4])
    """
    starts = cptr[:-1]
    if cost.size == 0:
        return starts.copy()
    sizes = np.diff(cptr)
    lo = np.fmin.reduceat(cost, starts)
    hit = cost == np.repeat(lo, sizes)
    pos = np.where(hit, np.arange(cost.size), cost.size)
    first = np.minimum.reduceat(pos, starts)
    none = first == cost.size  # every cost NaN
    first[none] = starts[none]
    return first


def _loads(paths: PathSet, weight: np.ndarray, pb: np.ndarray, comm, lens, n_links) -> np.ndarray:
    """Per-phase link loads ``(phases, links)`` of commodity bytes ``pb`` on ``weight``."""
    out = np.zeros((pb.shape[0], n_links))
    for i in range(pb.shape[0]):
        per = np.repeat(pb[i, comm] * weight, lens)
        out[i] = np.bincount(paths.path_links, weights=per, minlength=n_links)
    return out


def _smooth(u: np.ndarray, q: float) -> float:
    """``sum_p ||u_p||_q`` of utilisations ``u`` (phases x links), computed stably."""
    top = u.max(axis=1)
    tot = 0.0
    for i in range(u.shape[0]):
        if top[i] > 0:
            tot += float(top[i] * np.sum((u[i] / top[i]) ** q) ** (1.0 / q))
    return tot


def balance(
    paths: PathSet, pb: np.ndarray, cap: np.ndarray, rounds: int = ROUNDS
) -> tuple[np.ndarray, float, float]:
    """Frank-Wolfe balancing of ``paths``' weights (module docstring, step 3).

    ``pb`` is ``(phases, commodities)`` bytes, ``cap`` the links' bytes/s. Returns the best
    weights found, their exact objective ``sum_p max_l load / cap`` (seconds) and the work.
    """
    comm = paths.path_commodity()
    lens = paths.path_lengths()
    cptr = paths.commodity_ptr
    n_links = cap.size
    w = paths.weight.copy()
    load = _loads(paths, w, pb, comm, lens, n_links)
    best_w, best = w.copy(), float((load / cap).max(axis=1).sum())
    qs = np.geomspace(Q_START, Q_END, max(int(rounds), 1))
    starts = paths.path_ptr[:-1]
    multi = np.diff(cptr) > 1
    once = WORK_PER_ENTRY * paths.path_links.size * pb.shape[0]  # building the loads
    if not multi.any() or rounds <= 0:
        return best_w, best, once
    for q in qs:
        u = load / cap
        top = u.max(axis=1, keepdims=True)
        top[top <= 0] = 1.0
        r = u / top
        norm = np.sum(r**q, axis=1, keepdims=True) ** ((q - 1.0) / q)
        grad = (r ** (q - 1.0)) / norm / cap  # d ||u_p||_q / d load_pl
        cost = np.zeros(w.size)
        for i in range(pb.shape[0]):
            price = np.add.reduceat(grad[i][paths.path_links], starts) if w.size else cost
            cost += pb[i, comm] * price
        pick = _segment_argmin(cost, cptr, comm)
        s = np.zeros(w.size)
        s[pick] = 1.0
        target = _loads(paths, s, pb, comm, lens, n_links)
        trials = [(_smooth((load + a * (target - load)) / cap, q), a) for a in _STEPS]
        f0 = _smooth(load / cap, q)
        fa, a = min(trials)
        if fa >= f0:
            continue
        w = (1.0 - a) * w + a * s
        load = load + a * (target - load)
        exact = float((load / cap).max(axis=1).sum())
        if exact < best * (1 - 1e-12):
            best, best_w = exact, w.copy()
    smooth_work = WORK_PER_LINK_TRIAL * n_links * pb.shape[0] * len(qs) * (2 + len(_STEPS))
    work = once * (1 + len(qs) * (2 + len(_STEPS))) + smooth_work
    return best_w, best, work


def fast_route(
    problem: DesignProblem, circuits: np.ndarray, extra=None, rounds: int = ROUNDS
) -> tuple[SharedRouting | None, float, np.ndarray]:
    """Route ``circuits`` without an LP (module docstring); the same triple as
    :func:`solvers.joint.driver.route_design`: the routing (``solver="lp-free"``), its exact
    objective (seconds) and per-link utilisation (load / capacity / phase time, max over
    phases); ``(None, inf, zeros)`` when a pair with traffic is disconnected.

    Examples
    --------
    Four servers all-to-all on a square with one diagonal (0-2), 1 GB per pair at 1 GB/s:

    >>> from solvers.model.problem import PhaseTraffic
    >>> fx = sp.csr_matrix(np.ones((4, 4)) - np.eye(4)) * 1e9
    >>> p = DesignProblem(4, 3, 1e9, (PhaseTraffic("x", [0], [], [], fx),))
    >>> c = np.array([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1], [0, 2, 1]])
    >>> routed, t, util = fast_route(p, c)
    >>> routed.solver, round(t, 6), bool(util.max() <= 1 + 1e-9)
    ('lp-free', 1.5, True)
    """
    t0 = time.perf_counter()
    n = problem.n
    c = Circuits(circuits, n).rows
    _, _, cap = circuit_links(c, problem.link_bandwidth)
    none = (None, np.inf, np.zeros(cap.size))
    rings, steps = counted_rings(problem, c, extra)
    per = [phase_pairs(ph, rs, n) for ph, rs in zip(problem.phases, rings, strict=True)]
    keys = np.unique(np.concatenate([s * n + t for s, t, _ in per])) if per else np.zeros(0)
    keys = keys.astype(np.int64)
    got = candidate_paths(c, n, keys // n, keys % n)
    if got is None or cap.size == 0:
        return none
    paths, _ = got
    pb = np.zeros((len(per), keys.size))
    for i, (s, t, b) in enumerate(per):
        pb[i, np.searchsorted(keys, s * n + t)] = b
    w, obj, work = balance(paths, pb, cap, rounds)
    work += WORK_PER_WALK_STEP * steps + WORK_PER_DISTANCE * n * n
    paths = PathSet(paths.src, paths.dst, paths.commodity_ptr, paths.path_ptr, paths.path_links, w)
    keep = w > 1e-12  # drop unused paths (weights renormalised per commodity)
    if not keep.all():
        paths = drop_paths(paths, keep)
    comm = paths.path_commodity()
    load = _loads(paths, paths.weight, pb, comm, paths.path_lengths(), cap.size)
    times = (load / cap).max(axis=1)
    util = np.zeros(cap.size)
    for t, ld in zip(times, load, strict=True):
        if t > 0:
            util = np.maximum(util, ld / cap / t)
    routed = SharedRouting(
        paths, rings, times, np.zeros(len(per)), "feasible", "lp-free",
        time.perf_counter() - t0, work,
    )  # fmt: skip
    return routed, float(times.sum()), util


def drop_paths(paths: PathSet, keep: np.ndarray) -> PathSet:
    """``paths`` without the paths ``~keep`` (every commodity keeps at least one), each
    commodity's weights renormalised to sum to 1."""
    comm = paths.path_commodity()
    lens = paths.path_lengths()
    w = paths.weight[keep]
    kc = comm[keep]
    tot = np.bincount(kc, weights=w, minlength=paths.n_commodities)
    cptr = np.zeros(paths.n_commodities + 1, np.int64)
    cptr[1:] = np.cumsum(np.bincount(kc, minlength=paths.n_commodities))
    link_keep = np.repeat(keep, lens)
    pptr = np.zeros(int(keep.sum()) + 1, np.int64)
    pptr[1:] = np.cumsum(lens[keep])
    return PathSet(paths.src, paths.dst, cptr, pptr, paths.path_links[link_keep], w / tot[kc])
