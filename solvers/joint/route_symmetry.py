"""Symmetric routing tables: the automorphisms of a design and the routes averaged over them.

The flow model simulates a routing schedule through its symmetry quotient
(:func:`topoopt.flowsim.epochs_reduction.reduce_grouped`), which is only as small as the
routing tables are symmetric. Per-phase routes found pair by pair (Frank-Wolfe, cheapest
detours, ties broken by index: :func:`solvers.joint.phase_routing.route_phase`) differ
between server pairs that the design cannot tell apart, and one asymmetric decision is enough
to split every class of a cyclic symmetry. This module makes a table invariant:

1. **Automorphisms** (:func:`automorphisms`): the permutations ``g`` of the servers that map
   the circuits onto themselves (with their multiplicities), the static routing onto itself
   (pairs, node sequences, weights: exactly) and every phase's traffic onto itself (bytes
   within a relative :data:`TRAFFIC_RTOL`). Candidates come from colour refinement
   (1-dimensional Weisfeiler-Leman), level by level as in a base of the group: at each level
   the points of the levels before are fixed, ``p`` is the first server of the first cell
   left with several servers, and for every ``j`` of that cell that no element found yet
   maps ``p`` to (fixing the points before), the two copies of the structure are refined
   with ``p`` individualised in the first and ``j`` in the second, then individualised
   greedily until every colour is one server per copy; each candidate is checked exactly,
   and the group is the closure of the checked ones under composition (at most
   :data:`MAX_GROUP` elements; beyond it, the group found so far; at most
   :data:`MAX_FAILED` failed candidates a level). A greedy completion that
   fails only loses symmetry, never correctness.
2. **Averaging** (:func:`symmetrize`): the Reynolds average ``w'(p, P) = 1/|G| sum_g w(g p,
   g P)`` of a routing's weights over the group, computed once per orbit of pairs at its
   representative and mapped to every member (the image of the representative's routes).
   Every sum is taken over values sorted first, so the members' weights are equal to the
   last bit and the table is invariant under ``G``. The average of the images of a routing
   is never more congested than the routing when the traffic is invariant (the load of each
   link is an average of its images' loads; the maximum is convex); the caller recomputes
   the congestion anyway.

Guarantees: deterministic (no clock, no random choice: the colour hashes are fixed); the group is a
group (identity first, closed under composition), every element checked exactly.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from solvers.model.design import NodePaths
from topoopt.csr import ranges
from topoopt.fabrics.circuits import Circuits

__all__ = ["automorphisms", "symmetrize", "MAX_GROUP", "MAX_FAILED", "TRAFFIC_RTOL"]

MAX_GROUP = 4096
"""Elements of the automorphism group at most (:func:`automorphisms`)."""

MAX_FAILED = 64
"""Candidates that fail (no permutation, or not an automorphism) at one level of
:func:`automorphisms` before it gives up the rest of that level's cell (a bound on the work
where colour refinement cannot tell the servers apart; it only loses symmetry)."""

TRAFFIC_RTOL = 1e-9
"""Relative tolerance (of the largest pair's bytes) when checking that a permutation maps a
phase's traffic onto itself: the phase traffic is the reference run's bytes pro rata to time,
equal between symmetric pairs up to rounding."""

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 of ``uint64`` words (a fixed, seeded-by-construction hash)."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK
        return z ^ (z >> np.uint64(31))


def _edges(n: int, circuits: np.ndarray, traffics) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Directed coloured edges ``(u, v, colour)`` of the structure: each circuit both ways
    (colour: its multiplicity), each phase's pair with bytes (colour: phase and bytes to six
    significant digits of its phase's largest). ``circuits``: canonical rows."""
    c = circuits
    us = [c[:, 0], c[:, 1]]
    vs = [c[:, 1], c[:, 0]]
    cols = [c[:, 2], c[:, 2]]
    for i, m in enumerate(traffics):
        m = sp.coo_matrix(m)
        keep = (m.data > 0) & (m.row != m.col)
        b = m.data[keep]
        if not b.size:
            continue
        q = np.round(b / b.max() * 1e6).astype(np.int64)
        us.append(m.row[keep].astype(np.int64))
        vs.append(m.col[keep].astype(np.int64))
        cols.append((i + 1) * 10_000_000 + q)
    return np.concatenate(us), np.concatenate(vs), np.concatenate(cols)


def _refine(colour: np.ndarray, u: np.ndarray, v: np.ndarray, ecol: np.ndarray) -> np.ndarray:
    """Colour refinement to the stable colouring: a node's new colour is its colour and the
    multisets of (edge colour, neighbour colour) of its out- and in-edges, until the number of
    colours stops growing. Colours are dense and canonical (the same structure gives the same
    colours, whatever the node numbering)."""
    n = colour.size
    ew = _mix(ecol.astype(np.uint64) * np.uint64(0x100000001B3))
    k = np.unique(colour).size
    while True:
        cw = _mix(colour.astype(np.uint64) + np.uint64(0x51ED27))
        with np.errstate(over="ignore"):
            out_h = np.zeros(n, np.uint64)
            in_h = np.zeros(n, np.uint64)
            np.add.at(out_h, u, _mix(ew ^ cw[v]))
            np.add.at(in_h, v, _mix(ew ^ (cw[u] + np.uint64(1))))
        keys = np.stack([colour.astype(np.int64), out_h.view(np.int64), in_h.view(np.int64)])
        _, new = np.unique(keys, axis=1, return_inverse=True)
        new = new.reshape(-1).astype(np.int64)
        k2 = int(new.max()) + 1
        colour = new
        if k2 == k:
            return colour
        k = k2


def _candidate(n, u, v, ecol, base, pairs) -> np.ndarray | None:
    """A permutation ``g`` with ``g[x] == y`` for every ``(x, y)`` of ``pairs``, suggested by
    refinement of two copies of the structure (module docstring, step 1), or None when the
    greedy individualisation fails."""
    uu, vv, ee = np.concatenate([u, u + n]), np.concatenate([v, v + n]), np.concatenate([ecol] * 2)
    col = np.concatenate([base, base]).astype(np.int64)
    top = int(col.max()) + 1
    for i, (x, y) in enumerate(pairs):
        col[x], col[n + y] = top + i, top + i
    while True:
        col = _refine(col, uu, vv, ee)
        a, b = col[:n], col[n:]
        k = int(col.max()) + 1
        ca, cb = np.bincount(a, minlength=k), np.bincount(b, minlength=k)
        if not np.array_equal(ca, cb):
            return None
        big = np.flatnonzero(ca > 1)
        if not big.size:
            node_of = np.empty(k, np.int64)
            node_of[b] = np.arange(n)
            return node_of[a]  # x -> the node of the second copy with x's colour
        c = int(big[0])
        x, y = int(np.flatnonzero(a == c)[0]), int(np.flatnonzero(b == c)[0])
        col = col.copy()
        col[x], col[n + y] = k, k


def _routing_key(r: NodePaths, g: np.ndarray | None = None) -> tuple:
    """The routing (mapped by ``g``) as sorted rows: (pair, weight bits, node sequence)."""
    if r is None or r.n_paths == 0:
        return ()
    comm = r.path_commodity()
    src, dst = r.src[comm], r.dst[comm]
    nodes = r.nodes if g is None else g[r.nodes]
    if g is not None:
        src, dst = g[src], g[dst]
    lens = np.diff(r.path_ptr)
    width = int(lens.max())
    mat = np.full((r.n_paths, width), -1, np.int64)
    col = np.arange(nodes.size) - np.repeat(r.path_ptr[:-1], lens)
    mat[np.repeat(np.arange(r.n_paths), lens), col] = nodes
    rows = np.column_stack([src, dst, r.weight.view(np.int64), mat])
    return rows[np.lexsort(rows.T[::-1])]


def _traffic_ok(g: np.ndarray, traffics) -> bool:
    """``g`` maps every matrix of ``traffics`` onto itself: the same pairs with bytes, the
    bytes within :data:`TRAFFIC_RTOL` of the largest."""
    for m in traffics:
        m = sp.csr_matrix(m)
        m.sum_duplicates()
        m = m.tocoo()
        keep = m.data != 0
        r, c, b = m.row[keep].astype(np.int64), m.col[keep].astype(np.int64), m.data[keep]
        if not b.size:
            continue
        n = m.shape[0]
        own, img = r * n + c, g[r] * n + g[c]
        o1, o2 = np.argsort(own), np.argsort(img)
        if not np.array_equal(own[o1], img[o2]):
            return False
        if np.abs(b[o1] - b[o2]).max() > TRAFFIC_RTOL * np.abs(b).max():
            return False
    return True


def _is_automorphism(g, n, circuits, static_key, static, traffics) -> bool:
    """``g`` maps the circuits (canonical rows), the static routing and the traffic onto
    themselves (module docstring, step 1)."""
    if not np.array_equal(np.sort(g), np.arange(n)):
        return False
    c = circuits
    img = np.column_stack([np.minimum(g[c[:, 0]], g[c[:, 1]]),
                           np.maximum(g[c[:, 0]], g[c[:, 1]]), c[:, 2]])  # fmt: skip
    own = np.column_stack([np.minimum(c[:, 0], c[:, 1]), np.maximum(c[:, 0], c[:, 1]), c[:, 2]])
    if not np.array_equal(img[np.lexsort(img.T[::-1])], own[np.lexsort(own.T[::-1])]):
        return False
    if static is not None:
        got = _routing_key(static, g)
        if len(got) != len(static_key) or not np.array_equal(got, static_key):
            return False
    return _traffic_ok(g, traffics)


def _closure(gens: list[np.ndarray], n: int) -> np.ndarray | None:
    """The group generated by ``gens`` (identity first, then in order of discovery), or None
    beyond :data:`MAX_GROUP` elements."""
    ident = np.arange(n, dtype=np.int64)
    seen = {ident.tobytes(): 0}
    out = [ident]
    i = 0
    while i < len(out):
        for s in gens:
            h = s[out[i]]
            key = h.tobytes()
            if key not in seen:
                if len(out) >= MAX_GROUP:
                    return None
                seen[key] = len(out)
                out.append(h)
        i += 1
    return np.stack(out)


def automorphisms(n: int, circuits, static: NodePaths | None = None, traffics=()) -> np.ndarray:
    """The automorphism group found of the structure (module docstring, step 1): an ``int64
    (|G|, n)`` array, row ``k`` the permutation ``server -> g_k(server)``, the identity first;
    just the identity when none is found.

    Examples
    --------
    A ring of four servers with one circuit per neighbour: the rotations and reflections.

    >>> c = [[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]]
    >>> automorphisms(4, c).shape
    (8, 4)

    With one unit of traffic 0 -> 1 and 2 -> 3 only the rotation by two is left.

    >>> t = sp.csr_matrix(([1.0, 1.0], ([0, 2], [1, 3])), shape=(4, 4))
    >>> automorphisms(4, c, traffics=[t]).tolist()
    [[0, 1, 2, 3], [2, 3, 0, 1]]
    """
    circuits = Circuits(circuits, n).rows
    traffics = list(traffics)
    u, v, ecol = _edges(n, circuits, traffics)
    base = _refine(np.zeros(n, np.int64), u, v, ecol)
    static_key = _routing_key(static) if static is not None else None
    gens: list[np.ndarray] = []
    group = np.arange(n, dtype=np.int64)[None, :]
    points: list[int] = []  # the base: level by level, the points fixed so far
    col = base
    while True:
        # the first cell of more than one server once the points so far are individualised
        if points:
            col = base.copy()
            col[points] = int(base.max()) + 1 + np.arange(len(points))
            col = _refine(col, u, v, ecol)
        cnt = np.bincount(col)
        big = np.flatnonzero(cnt > 1)
        if not big.size:
            return group
        members = np.flatnonzero(col == big[0])
        p = int(members[0])
        fix = np.all(group[:, points] == np.asarray(points, np.int64), axis=1)
        failed = 0
        for j in members[1:]:
            if np.any(group[fix, p] == j):  # an element found fixes the points, maps p to j
                continue
            if failed >= MAX_FAILED:
                break
            g = _candidate(n, u, v, ecol, base, [(x, x) for x in points] + [(p, int(j))])
            if g is None or not _is_automorphism(g, n, circuits, static_key, static, traffics):
                failed += 1
                continue
            got = _closure(gens + [g], n)
            if got is None:  # above MAX_GROUP: the group found so far (closed)
                return group
            gens.append(g)
            group = got
            fix = np.all(group[:, points] == np.asarray(points, np.int64), axis=1)
        points.append(p)


def symmetrize(routing: NodePaths, group: np.ndarray) -> NodePaths | None:
    """``routing`` averaged over ``group`` (module docstring, step 2), its pairs ordered as
    ``routing``'s; None when the set of pairs is not invariant (no average is taken).

    Examples
    --------
    Two servers swapped by the group; 0 -> 1 direct, 1 -> 0 half over server 2: averaged,
    each pair half direct, half over 2 (the server 2 is fixed by the swap).

    >>> r = NodePaths.from_lists([0, 1], [1, 0], [[([0, 1], 1.0)],
    ...                                           [([1, 0], 0.5), ([1, 2, 0], 0.5)]])
    >>> g = np.array([[0, 1, 2], [1, 0, 2]])
    >>> symmetrize(r, g).to_lists()
    [[([0, 1], 0.75), ([0, 2, 1], 0.25)], [([1, 0], 0.75), ([1, 2, 0], 0.25)]]
    """
    group = np.asarray(group, np.int64)
    n_g, n = group.shape
    k = routing.n_commodities
    if n_g == 1 or k == 0:
        return routing
    key = routing.src * n + routing.dst
    order = np.argsort(key)
    skey = key[order]
    if np.unique(skey).size != k:
        return None
    # image of every pair under every element: (|G|, K) commodity indices
    img = group[:, routing.src] * n + group[:, routing.dst]
    pos = np.searchsorted(skey, img)
    pos = np.minimum(pos, k - 1)
    if not np.array_equal(skey[pos], img):
        return None
    img_c = order[pos]  # img_c[g, c]: the commodity g maps c to
    # orbits: the representative of each commodity is the smallest index in its orbit
    rep = img_c.min(axis=0)
    reps = np.unique(rep)
    # contributions to rep r: for each g, commodity c = img_c[g, r]'s paths mapped by g^-1
    inv = np.empty_like(group)
    inv[np.arange(n_g)[:, None], group] = np.arange(n, dtype=np.int64)[None, :]
    g_idx = np.repeat(np.arange(n_g), reps.size)
    r_idx = np.tile(reps, n_g)
    c_idx = img_c[g_idx, r_idx]
    lo, hi = routing.commodity_ptr[c_idx], routing.commodity_ptr[c_idx + 1]
    pid = ranges(lo, hi)  # paths contributed
    owner = np.repeat(np.arange(c_idx.size), hi - lo)  # index into (g_idx, r_idx)
    lens = np.diff(routing.path_ptr)[pid]
    width = int(lens.max())
    mat = np.full((pid.size, width), -1, np.int64)
    nid = ranges(routing.path_ptr[pid], routing.path_ptr[pid + 1])
    col = np.arange(nid.size) - np.repeat(np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    row = np.repeat(np.arange(pid.size), lens)
    mat[row, col] = inv[g_idx[owner][row], routing.nodes[nid]]
    rows = np.column_stack([r_idx[owner], mat])
    uniq, which = np.unique(rows, axis=0, return_inverse=True)
    which = which.reshape(-1)
    w = routing.weight[pid]
    srt = np.lexsort((w, which))  # within each distinct (rep, path): weights ascending
    starts = np.flatnonzero(np.r_[True, np.diff(which[srt]) != 0])
    wsum = np.add.reduceat(w[srt], starts) / n_g  # the sum of sorted values: order-free
    # the representative's averaged paths: uniq rows (rep, nodes...) with weights wsum
    r_of = uniq[:, 0]
    # every commodity c: the image of its representative's paths by one g with g(rep) = c
    g_first = _first_mapping(img_c, rep)
    rp_ptr = np.zeros(k + 1, np.int64)
    cnt_r = np.bincount(r_of, minlength=k)
    np.cumsum(cnt_r, out=rp_ptr[1:])  # uniq is sorted by representative
    per = cnt_r[rep]
    cptr = np.zeros(k + 1, np.int64)
    np.cumsum(per, out=cptr[1:])
    src_rows = ranges(rp_ptr[rep], rp_ptr[rep + 1])  # rows of uniq, commodity by commodity
    gg = np.repeat(g_first, per)
    pm = uniq[src_rows, 1:]
    plen = (pm >= 0).sum(axis=1)
    pptr = np.zeros(src_rows.size + 1, np.int64)
    np.cumsum(plen, out=pptr[1:])
    valid = pm >= 0
    nodes = group[np.repeat(gg, plen), pm[valid]]
    return NodePaths(routing.src, routing.dst, cptr, pptr, nodes, wsum[src_rows])


def _first_mapping(img_c: np.ndarray, rep: np.ndarray) -> np.ndarray:
    """Per commodity ``c``, the first element ``g`` (in the group's order) mapping its
    representative to it: ``img_c[g, rep[c]] == c``."""
    k = rep.size
    hit = img_c[:, rep] == np.arange(k)[None, :]
    return np.argmax(hit, axis=0)
