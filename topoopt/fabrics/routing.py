"""Routing on fabrics: shortest paths with ECMP, dimension order, host forwarding, explicit paths.

Every function returns a :class:`topoopt.paths.PathSet` over the fabric's directed link ids.

Shortest paths count hops. For a set of destinations ``T``, breadth-first search on the reversed
graph (:func:`scipy.sparse.csgraph.shortest_path`) gives ``dist[t, u]``, the hops from ``u`` to
``t``; the number of shortest paths ``sigma[t, u]`` follows level by level,

.. math:: \\sigma_t(u) = \\sum_{v:\\,(u,v)\\in E,\\ d_t(v) = d_t(u) - 1} \\sigma_t(v),
          \\quad \\sigma_t(t) = 1,

as one sparse product per level. Path number ``r`` (``0 <= r < sigma``) of a commodity is then
*unranked* hop by hop: at node ``u`` the successors on shortest paths are taken in link-id order,
and the path enters the first successor whose cumulative count exceeds ``r``. All paths advance
together (vectorised, in chunks), so all server pairs of a 1,024-server fabric take seconds.

ECMP with ``k`` paths takes the ranks ``floor(i * sigma / k)``, ``i < k``: evenly spread over the
path order, so on a fat-tree they use distinct aggregation switches first.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from topoopt.csr import ranges
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "METHODS",
    "routes",
    "route_link_counts",
    "route_link_entries",
    "shortest_path_counts",
    "server_pairs",
    "dimension_order_routes",
    "explicit_paths",
    "path_nodes",
    "pair_uniform",
]

METHODS = ("ecmp", "shortest", "dimension-order", "host-forwarding")
"""Routing methods of :func:`routes`."""


def server_pairs(n_servers: int) -> np.ndarray:
    """All ordered pairs of distinct servers, ``(n(n-1), 2)``, source-major.

    >>> server_pairs(3).tolist()
    [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]]
    """
    s = np.repeat(np.arange(n_servers), n_servers)
    d = np.tile(np.arange(n_servers), n_servers)
    keep = s != d
    return np.column_stack([s[keep], d[keep]])


def _pairs(fabric: Fabric, pairs) -> tuple[np.ndarray, np.ndarray]:
    if pairs is None:
        p = server_pairs(fabric.n_servers)
    else:
        p = np.asarray(pairs, dtype=np.int64)
        if p.size == 0:
            p = p.reshape(0, 2)
        if p.ndim != 2 or p.shape[1] != 2:
            raise InputError("pairs", f"shape {p.shape}", "an (K, 2) array of node ids")
        bad = (p < 0) | (p >= fabric.n_nodes)
        if bad.any():
            raise InputError("pairs", int(p[bad][0]), f"node ids 0..{fabric.n_nodes - 1}")
    return p[:, 0].copy(), p[:, 1].copy()


def _link_subset(fabric: Fabric, kinds) -> np.ndarray:
    if kinds is None:
        return np.arange(fabric.n_links)
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    return np.flatnonzero(np.isin(fabric.link_kind, kinds))


def shortest_path_counts(
    fabric: Fabric, targets: np.ndarray, kinds: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Hop distances and shortest-path counts from every node to each target.

    Parameters
    ----------
    fabric : Fabric
    targets : array_like of int
        Destination node ids.
    kinds : sequence of str, optional
        Use only links of these kinds.

    Returns
    -------
    dist : numpy.ndarray
        ``(len(targets), N)`` float hops from node ``u`` to ``targets[i]`` (``inf`` if none).
    sigma : numpy.ndarray
        ``(len(targets), N)`` float number of shortest paths (0 where unreachable).

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> dist, sigma = shortest_path_counts(fat_tree(4), [15])
    >>> int(dist[0, 0]), int(sigma[0, 0])
    (6, 4)
    """
    links = _link_subset(fabric, kinds)
    n = fabric.n_nodes
    targets = np.asarray(targets, np.int64)
    a = sp.csr_matrix((np.ones(links.size), (fabric.src[links], fabric.dst[links])), shape=(n, n))
    if targets.size == 0:
        return np.zeros((0, n)), np.zeros((0, n))
    dist = csgraph.shortest_path(a.T.tocsr(), directed=True, unweighted=True, indices=targets)
    dist = np.atleast_2d(dist)
    sigma = np.zeros_like(dist)
    sigma[np.arange(targets.size), targets] = 1.0
    finite = np.isfinite(dist)
    top = int(dist[finite].max()) if finite.any() else 0
    for level in range(1, top + 1):
        prev = np.where(dist == level - 1, sigma, 0.0)
        reach = (a @ prev.T).T  # reach[t, u] = sum over out-neighbours v of u of prev[t, v]
        at = dist == level
        sigma[at] = reach[at]
    return dist, sigma


def _pair_distances(fabric: Fabric, src: np.ndarray, dst: np.ndarray, kinds, connected=True):
    """The breadth-first tables of the pairs' destinations and each pair's row in them:
    ``(ti, dist, sigma, length)`` with ``length = dist[ti, src]``; with ``connected`` a pair
    without a path is refused in one line (field ``fabric``)."""
    targets, ti = np.unique(dst, return_inverse=True)
    ti = ti.reshape(-1)
    dist, sigma = shortest_path_counts(fabric, targets, kinds)
    length = dist[ti, src]
    if connected:
        bad = ~np.isfinite(length)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                "fabric",
                f"no path from node {int(src[i])} to node {int(dst[i])} ({fabric.family})",
                "a connected fabric where routes are requested",
            )
    return ti, dist, sigma, length


def _pick_by_fraction(within, cnt, rows, seg, inv, rank):
    """The successor of each path (:func:`_unrank`) when its group's path counts exceed float
    precision (over 2^52 paths between a pair, e.g. a sparse circuit set with pairs tens of
    hops apart): the search runs on each group's cumulative fractions of its count, so the
    group index and the fraction share one float key without the counts. A path then follows
    the successor whose share holds its fractional rank (to about ``groups x 2^-52``), always
    one of the group's successors on a shortest path."""
    if not np.isfinite(within).all():
        raise InputError("k", "every path", "a fabric with at most 1e308 equal-cost paths a pair")
    n_g = seg.size - 1
    total = within[seg[1:] - 1]
    frac = within / total[rows]
    q = np.minimum(rank / total[inv], 1.0)
    pick = np.searchsorted(rows + frac, inv + q, side="right")
    # a rank at its group's very end (or rounded past it) takes the group's last successor on
    # a shortest path
    pos = np.where(cnt > 0, np.arange(cnt.size), -1)
    last = np.maximum.reduceat(pos, seg[:-1]) if n_g else pos[:0]
    return np.minimum(pick, last[inv])


def _unrank(
    fabric: Fabric,
    links: np.ndarray,
    dist: np.ndarray,
    sigma: np.ndarray,
    ti: np.ndarray,
    start: np.ndarray,
    rank: np.ndarray,
    length: np.ndarray,
) -> np.ndarray:
    """Links of the paths with the given ranks; returns the flat link array (path-major)."""
    n = fabric.n_nodes
    order = links[np.lexsort((links, fabric.src[links]))]
    out_src = fabric.src[order]
    out_ptr = np.searchsorted(out_src, np.arange(n + 1))
    out_deg = np.diff(out_ptr)
    out_dst = fabric.dst[order]
    ptr = np.zeros(length.size + 1, np.int64)
    np.cumsum(length, out=ptr[1:])
    flat = np.empty(int(ptr[-1]), np.int64)
    cur = start.astype(np.int64).copy()
    r = rank.astype(np.float64).copy()
    for step in range(int(length.max()) if length.size else 0):
        active = np.flatnonzero(length > step)
        # paths at the same (target, node) share their successor counts: expand each group once
        gkey, inv = np.unique(ti[active] * n + cur[active], return_inverse=True)
        inv = inv.reshape(-1)
        gt, gu = gkey // n, gkey % n
        dg = out_deg[gu]
        seg = np.zeros(gkey.size + 1, np.int64)
        np.cumsum(dg, out=seg[1:])
        rows = np.repeat(np.arange(gkey.size), dg)
        cand = out_ptr[gu][rows] + (np.arange(rows.size) - seg[rows])
        v = out_dst[cand]
        t_rows = gt[rows]
        on_path = dist[t_rows, v] == dist[gt, gu][rows] - 1
        cnt = np.where(on_path, sigma[t_rows, v], 0.0)
        cum = np.cumsum(cnt)
        within = cum - np.r_[0.0, cum][seg[rows]]
        # first successor of the path's group whose cumulative count exceeds the path's rank:
        # one global search with the group index as the high-order part of the key
        big = float(within.max()) + 1.0 if within.size else 1.0
        if big * gkey.size < 2.0**52:  # exact: integer counts and ranks in one float key
            pick = np.searchsorted(rows * big + within, inv * big + r[active], side="right")
        else:
            pick = _pick_by_fraction(within, cnt, rows, seg, inv, r[active])
        r[active] -= within[pick] - cnt[pick]
        # ranks past float precision (a sample of the paths anyway) stay in the successor's
        # own range, so the next steps choose among its shortest paths
        r[active] = np.clip(r[active], 0.0, np.maximum(cnt[pick] - 1.0, 0.0))
        flat[ptr[active] + step] = order[cand[pick]]
        cur[active] = v[pick]
    return flat


def routes(
    fabric: Fabric,
    method: str = "ecmp",
    pairs: np.ndarray | None = None,
    k: int | None = None,
    *,
    kinds: Sequence[str] | None = None,
    seed: int | None = None,
    max_paths: int = 50_000_000,
    per_pair: bool = False,
    stats: dict | None = None,
) -> PathSet:
    """Routes between node pairs (default: all ordered server pairs) as a :class:`PathSet`.

    Parameters
    ----------
    fabric : Fabric
    method : {"ecmp", "shortest", "dimension-order", "host-forwarding"}
        ``ecmp``: all shortest paths (or ``k`` of them), equal split. ``shortest``: one shortest
        path, the first in link order, or a uniformly random one when ``seed`` is given (the
        released TopoOpt routing). ``ecmp`` with ``k``: a pair with more than ``k`` shortest
        paths keeps ``k`` of them, one per stratum of ``count / k`` consecutive ranks (the
        first of each, or a uniformly random one when ``seed`` is given). ``dimension-order``:
        see :func:`dimension_order_routes`.
        ``host-forwarding``: ECMP over optical circuits only, servers forwarding.
    pairs : array_like, optional
        ``(K, 2)`` source/destination node ids; a pair ``(u, u)`` gets one empty path.
    k : int, optional
        Keep at most ``k`` equal-cost paths per pair (``ecmp``/``host-forwarding``).
    kinds : sequence of str, optional
        Route over links of these kinds only (e.g. ``("optical",)``).
    seed : int, optional
        Random shortest-path choice for ``shortest``, and within the strata of ``ecmp`` with
        ``k`` (pairs with at most ``k`` paths keep all of them, in rank order).
    max_paths : int
        Refuse to enumerate more paths than this (pass ``k``).
    per_pair : bool
        With ``seed``: draw each pair's random ranks from a hash of ``(seed, source,
        destination, stratum)`` (:func:`pair_uniform`) instead of one generator over all the
        pairs asked, so a pair's routes do not depend on the other pairs (a subset's routes are
        the superset's rows).
    stats : dict, optional
        With ``k`` (``ecmp``/``host-forwarding``): ``stats["capped"]`` is set to a boolean
        array, per pair, true where the pair has more than ``k`` shortest paths (its routes
        are a sample), so a caller can tell a cap that bound from one that did not.

    Returns
    -------
    PathSet

    Raises
    ------
    InputError
        Unknown method, a pair without a path (disconnected fabric), too many paths.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> ps = routes(fat_tree(4), "ecmp", pairs=[[0, 15], [0, 1]])
    >>> np.diff(ps.commodity_ptr).tolist(), ps.weight[:2].tolist()
    ([4, 1], [0.25, 0.25])
    """
    if method not in METHODS:
        raise InputError("method", method, f"one of {', '.join(METHODS)}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1):
        raise InputError("k", k, "a positive integer or None (all equal-cost paths)")
    if method == "dimension-order":
        return dimension_order_routes(fabric, pairs)
    if method == "host-forwarding":
        kinds = ("optical",)
        if not np.any(fabric.link_kind == "optical"):
            raise InputError("method", method, "a fabric with optical circuits")
    src, dst = _pairs(fabric, pairs)
    links = _link_subset(fabric, kinds)
    ti, dist, sigma, length = _pair_distances(fabric, src, dst, kinds)
    count = sigma[ti, src]
    length = length.astype(np.int64)
    if method == "shortest":
        npath = np.ones(src.size, np.int64)
        if seed is None:
            rank = np.zeros(src.size)
        else:
            rng = np.random.default_rng(seed)
            rank = np.floor(rng.random(src.size) * count)
    else:
        npath = count if k is None else np.minimum(count, k)
        if stats is not None and k is not None:
            stats["capped"] = count > k
        if float(npath.sum()) > max_paths:
            raise InputError("k", k, f"a limit keeping the path count under {max_paths:,}")
        npath = npath.astype(np.int64)
        cptr = np.zeros(src.size + 1, np.int64)
        np.cumsum(npath, out=cptr[1:])
        comm = np.repeat(np.arange(src.size), npath)
        i = np.arange(comm.size) - cptr[comm]
        rank = np.floor(i * count[comm] / npath[comm])
        if seed is not None:  # a uniformly random rank of each stratum [rank, next)
            width = np.floor((i + 1) * count[comm] / npath[comm]) - rank
            if per_pair:
                u = pair_uniform(src[comm], dst[comm], i, seed)
            else:
                u = np.random.default_rng(seed).random(comm.size)
            rank += np.minimum(np.floor(u * width), width - 1)
        length_p = length[comm]
        flat = _unrank(fabric, links, dist, sigma, ti[comm], src[comm], rank, length_p)
        pptr = np.zeros(comm.size + 1, np.int64)
        np.cumsum(length_p, out=pptr[1:])
        return PathSet(src, dst, cptr, pptr, flat, 1.0 / npath[comm])
    flat = _unrank(fabric, links, dist, sigma, ti, src, rank, length)
    ptr = np.zeros(src.size + 1, np.int64)
    np.cumsum(length, out=ptr[1:])
    return PathSet(src, dst, np.arange(src.size + 1), ptr, flat, np.ones(src.size))


CHUNK_CANDIDATES = 1 << 23
"""Candidate links (a bound: hops x frontier nodes x out-degree) per chunk of pairs in
:func:`route_link_counts`, which bounds its temporary arrays."""


def route_link_counts(
    fabric: Fabric, pairs, *, kinds: Sequence[str] | None = None, by_hop: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per pair, the links of its shortest paths and how many of them cross each link, without
    listing the paths.

    A link ``(x, y)`` is on a shortest path from ``s`` to ``t`` at hop ``h`` exactly when
    ``d_s(x) = h`` and ``d_t(y) = d_t(s) - h - 1``; then ``sigma_s(x) sigma_t(y)`` of the
    pair's ``sigma_t(s)`` paths cross it. ``d_t`` and ``sigma_t`` are
    :func:`shortest_path_counts`'s table; ``sigma_s`` is counted forward from ``s`` hop by
    hop over the links of the pair's shortest paths only (every shortest ``s -> x`` path of a
    node ``x`` on a shortest ``s -> t`` path is one). Memory is one entry per (pair, link of
    its shortest paths) instead of one per (path, hop): on a three-tier fat-tree of ``k``-port
    switches ``k^2 / 2 + k`` per cross-pod leaf pair against ``k^2``.

    Parameters
    ----------
    fabric : Fabric
    pairs : array_like
        ``(K, 2)`` source/destination node ids (``(u, u)``: no links).
    kinds : sequence of str, optional
        Links of these kinds only (as :func:`routes`).
    by_hop : bool
        Each pair's links by hop, then ascending (the order route bundles keep,
        :class:`topoopt.flowsim.bundles.BundleSet`), instead of ascending.

    Returns
    -------
    ptr, link, count, hop : numpy.ndarray
        Pair ``i``'s links are ``link[ptr[i]:ptr[i+1]]`` (ascending), ``count`` the number of
        its shortest paths crossing each (``int64``; their sum over the links at hop 0 is the
        pair's path count), ``hop`` the link's position on those paths (0: the first).

    Raises
    ------
    InputError
        A pair without a path, or path counts beyond ``2**53``.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> ptr, link, count, hop = route_link_counts(fat_tree(4), [[0, 15]])
    >>> count.tolist()  # 4 paths: server link, 2 aggregations, 4 cores, 2 aggregations, ...
    [4, 4, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]
    >>> hop.tolist()
    [0, 5, 1, 1, 4, 4, 2, 2, 2, 2, 3, 3, 3, 3]
    """
    src, dst = _pairs(fabric, pairs)
    links = _link_subset(fabric, kinds)
    n = fabric.n_nodes
    ti, dist, sigma, length = _pair_distances(fabric, src, dst, kinds)
    if src.size and float(sigma[ti, src].max()) >= 2.0**53:
        raise InputError("pairs", None, "pairs with fewer shortest paths (over 2**53)")
    order = links[np.lexsort((links, fabric.src[links]))]
    out_ptr = np.searchsorted(fabric.src[order], np.arange(n + 1))
    out_dst = fabric.dst[order]
    # pairs in chunks of a bounded number of candidate links (hops x nodes x out-degree)
    max_deg = int(np.diff(out_ptr).max(initial=1))
    bound = np.cumsum(length * np.minimum(sigma[ti, src], n) * max_deg)
    marks = np.arange(1, int(bound[-1] // CHUNK_CANDIDATES) + 1 if src.size else 0)
    cut = np.searchsorted(bound, marks * float(CHUNK_CANDIDATES)) + 1
    edges = np.unique(np.r_[0, np.minimum(cut, src.size), src.size]).astype(np.int64)
    out = []  # per chunk of pairs, its entries sorted by (pair, link): chunks are in pair order
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        parts = []
        # the frontier: (pair, node, sigma_s(node)) at the current hop
        fp, fu = np.arange(lo, hi, dtype=np.int64), src[lo:hi].astype(np.int64)
        fc = np.ones(hi - lo)
        for h in range(int(length[lo:hi].max())):
            live = dist[ti[fp], fu] > 0
            fp, fu, fc = fp[live], fu[live], fc[live]
            deg = out_ptr[fu + 1] - out_ptr[fu]
            rows = np.repeat(np.arange(fp.size, dtype=np.int64), deg)
            cand = ranges(out_ptr[fu], out_ptr[fu + 1])
            v, p = out_dst[cand], fp[rows]
            on = dist[ti[p], v] == dist[ti[p], fu[rows]] - 1
            rows, cand, v, p = rows[on], cand[on], v[on], p[on]
            parts.append((p, order[cand], fc[rows] * sigma[ti[p], v], np.full(p.size, h)))
            key, inv = np.unique(p * n + v, return_inverse=True)
            fp, fu = key // n, key % n
            fc = np.bincount(inv.reshape(-1), weights=fc[rows], minlength=key.size)
        if parts:  # sorted chunk by chunk: the temporaries stay a chunk's
            p, lk, c, hp = (np.concatenate(x) for x in zip(*parts, strict=True))
            del parts
            o = np.lexsort((lk, hp, p) if by_hop else (lk, p))
            out.append((np.bincount(p - lo, minlength=hi - lo), lk[o], c[o].astype(np.int64),
                        hp[o].astype(np.int64)))  # fmt: skip
            del p, lk, c, hp, o
        else:
            out.append((np.zeros(hi - lo, np.int64),) + (np.zeros(0, np.int64),) * 3)
    ptr = np.zeros(src.size + 1, np.int64)
    if not out:
        return ptr, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    cnt, lk, c, hp = (np.concatenate(x) if len(out) > 1 else x[0] for x in zip(*out, strict=True))
    del out
    np.cumsum(cnt, out=ptr[1:])
    return ptr, lk, c, hp


def route_link_entries(fabric: Fabric, pairs, *, kinds: Sequence[str] | None = None) -> int:
    """The number of entries :func:`route_link_counts` would return for ``pairs`` (the links of
    every pair's shortest paths, summed), without computing them: the pairs are grouped by
    their hop distance and shortest-path count, and one pair of each group is counted exactly
    (exact on fabrics where such pairs are alike, as the leaf pairs of a Clos; an estimate
    elsewhere). Lets a caller refuse the counts before their memory is spent.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> route_link_entries(fat_tree(4), [[0, 15], [0, 1], [2, 2]])  # 14 + 2 + 0
    16
    >>> int(route_link_counts(fat_tree(4), [[0, 15], [0, 1], [2, 2]])[0][-1])
    16
    """
    src, dst = _pairs(fabric, pairs)
    if not src.size:
        return 0
    ti, dist, sigma, length = _pair_distances(fabric, src, dst, kinds, connected=False)
    paths = sigma[ti, src]
    del dist, sigma
    length = np.where(np.isfinite(length), length, -1.0)
    _, rep, mult = np.unique(
        np.column_stack([length, paths]), axis=0, return_index=True, return_counts=True
    )
    ptr = route_link_counts(fabric, np.column_stack([src[rep], dst[rep]]), kinds=kinds)[0]
    return int(np.dot(np.diff(ptr), mult))


def pair_uniform(src, dst, i, seed: int) -> np.ndarray:
    """Uniform numbers in ``[0, 1)``, one per ``(src, dst, i)``, from a hash of ``seed`` and the
    three integers (splitmix64's finaliser over their mix): the same triple always gives the
    same number, whatever else is asked.

    >>> a = pair_uniform([0, 1, 0], [5, 5, 5], [0, 0, 0], 0)
    >>> bool(a[0] == a[2]), bool(a[0] != a[1]), bool(((a >= 0) & (a < 1)).all())
    (True, True, True)
    """
    with np.errstate(over="ignore"):
        h = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        for x in (src, dst, i):
            h = h ^ np.asarray(x, np.int64).astype(np.uint64)
            h = h * np.uint64(0xBF58476D1CE4E5B9)
            h = h ^ (h >> np.uint64(31))
        h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        h = h ^ (h >> np.uint64(31))
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def dimension_order_routes(fabric: Fabric, pairs: np.ndarray | None = None) -> PathSet:
    """Dimension-order routing on an untwisted torus: dimension 0 first, then 1, then 2.

    In each dimension of size ``d`` the route goes the short way round, ``delta = (t - s) mod d``
    steps forward when ``delta <= d/2`` (a tie goes forward), else ``d - delta`` steps back.

    Examples
    --------
    >>> from topoopt.fabrics import torus
    >>> f = torus("4x4")
    >>> path_nodes(f, dimension_order_routes(f, [[0, 10]]), 0).tolist()
    [0, 1, 2, 6, 10]
    """
    if fabric.coords is None or fabric.params.get("twist") is not None:
        raise InputError(
            "method", "dimension-order", f"an untwisted torus (got {fabric.family}); use ecmp"
        )
    src, dst = _pairs(fabric, pairs)
    if np.any(src >= fabric.n_servers) or np.any(dst >= fabric.n_servers):
        raise InputError("pairs", "non-server node", "server ids on a torus")
    dims = np.asarray(fabric.params["dims"], np.int64)
    cs, ct = fabric.coords[src], fabric.coords[dst]
    delta = (ct - cs) % dims
    fwd = delta <= dims // 2
    steps = np.where(fwd, delta, dims - delta)
    length = steps.sum(axis=1)
    ptr = np.zeros(src.size + 1, np.int64)
    np.cumsum(length, out=ptr[1:])
    flat = np.empty(int(ptr[-1]), np.int64)
    pos = ptr[:-1].copy()
    cur = cs.copy()
    mult = np.cumprod(np.r_[1, dims[:-1]])
    for i in range(dims.size):
        for s in range(int(steps[:, i].max()) if src.size else 0):
            act = np.flatnonzero(steps[:, i] > s)
            a = cur[act] @ mult
            cur[act, i] = (cur[act, i] + np.where(fwd[act, i], 1, -1)) % dims[i]
            b = cur[act] @ mult
            lid = fabric.link_ids(a, b)
            if np.any(lid < 0):
                raise InputError("fabric", "missing torus link", "a complete torus")
            flat[pos[act]] = lid
            pos[act] += 1
    return PathSet(src, dst, np.arange(src.size + 1), ptr, flat, np.ones(src.size))


def explicit_paths(
    fabric: Fabric,
    node_paths: Sequence[Sequence[int]],
    weights: Sequence[float] | None = None,
) -> PathSet:
    """A PathSet from explicit node sequences (what the solvers output).

    Paths are grouped by ``(first node, last node)``; commodities are ordered by first
    appearance. Weights are normalised to sum to 1 per commodity (default: equal split).

    Examples
    --------
    >>> from topoopt.fabrics import direct_connect
    >>> f = direct_connect(4, 2, [(0, 1), (1, 2), (2, 3), (3, 0)])
    >>> ps = explicit_paths(f, [[0, 1, 2], [0, 3, 2]], [3, 1])
    >>> ps.n_commodities, ps.weight.tolist()
    (1, [0.75, 0.25])
    """
    paths = [np.asarray(p, np.int64).reshape(-1) for p in node_paths]
    if any(p.size < 1 for p in paths):
        raise InputError("paths", "an empty path", "node sequences of at least one node")
    w = np.ones(len(paths)) if weights is None else np.asarray(weights, np.float64)
    if w.shape != (len(paths),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError("weights", "bad weights", f"{len(paths)} positive finite numbers")
    ends = np.array([[p[0], p[-1]] for p in paths], np.int64).reshape(-1, 2)
    key = ends[:, 0] * fabric.n_nodes + ends[:, 1]
    uniq, first, inv = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(uniq.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(uniq.size)
    comm = rank[inv.reshape(-1)]
    order = np.argsort(comm, kind="stable")
    links = []
    for j in order:
        p = paths[j]
        lid = fabric.link_ids(p[:-1], p[1:])
        if np.any(lid < 0):
            h = int(np.flatnonzero(lid < 0)[0])
            raise InputError(f"paths[{j}]", f"hop {int(p[h])}->{int(p[h + 1])}", "fabric links")
        links.append(lid)
    lengths = np.array([x.size for x in links], np.int64)
    pptr = np.zeros(len(paths) + 1, np.int64)
    np.cumsum(lengths, out=pptr[1:])
    per = np.bincount(comm, minlength=uniq.size)
    cptr = np.zeros(uniq.size + 1, np.int64)
    np.cumsum(per, out=cptr[1:])
    wsum = np.bincount(comm, weights=w, minlength=uniq.size)
    csrc = np.empty(uniq.size, np.int64)
    cdst = np.empty(uniq.size, np.int64)
    csrc[comm], cdst[comm] = ends[:, 0], ends[:, 1]
    flat = np.concatenate(links) if links else np.zeros(0, np.int64)
    return PathSet(csrc, cdst, cptr, pptr, flat, (w / wsum[comm])[order])


def path_nodes(fabric: Fabric, paths: PathSet, p: int) -> np.ndarray:
    """Node sequence of path ``p`` of ``paths`` (source first).

    >>> from topoopt.fabrics import ideal
    >>> f = ideal(3)
    >>> path_nodes(f, routes(f, pairs=[[0, 2]]), 0).tolist()
    [0, 3, 2]
    """
    c = int(np.searchsorted(paths.commodity_ptr, p, side="right") - 1)
    lk = paths.path_links[paths.path_ptr[p] : paths.path_ptr[p + 1]]
    return np.r_[paths.src[c], fabric.dst[lk]]
