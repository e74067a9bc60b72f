"""NCCL-like rings on a fabric: edge-disjoint Hamiltonian cycles, each run both ways.

NCCL runs a collective over several rings ("channels") laid on the links it finds, and each
ring's traffic flows one way round it; rings in opposite directions use both directions of every
full-duplex link. On a direct fabric (torus, expander, direct-connect) one ring in rank order
uses one of a server's ``d`` ports (or multi-hop routes), so it runs up to ``d`` times slower than
the fabric allows. This module builds the rings a direct fabric offers:

1. the server multigraph of the fabric's server-to-server cables (a bundle of ``m`` cables is
   ``m`` parallel edges);
2. a 2-factorisation of it (every server degree 2 in each factor): a torus's dimensions (one
   factor per dimension and parallel link), otherwise Petersen's construction (orient an Euler
   circuit, split the ``d/2``-regular bipartite out/in graph into perfect matchings);
3. local search: on a 4-cycle ``a b c d`` whose edges ``ab, cd`` lie in factor ``p`` and
   ``bc, da`` in factor ``q``, exchanging the two pairs keeps both 2-factors; an exchange is kept
   when it lowers the number of cycles of one factor without raising the other's (seeded order);
4. when that (or Posa's rotation-extension, tried next) leaves all factors Hamiltonian but
   one, the last pair exchanges the cables of alternating closed walks (:func:`_complete`):
   a random regular graph has few 4-cycles, and the last factor's cycles rarely joined;
5. every factor that is now one cycle is a Hamiltonian ring; :func:`fabric_rings` returns those
   rings in both directions (``2 k`` rings for ``k`` cycles). The ``d``-regular 2-D torus always
   has a decomposition into two Hamiltonian cycles (Kotzig); the search finds it on the tori
   :func:`torus` builds (tested on the sizes ``compare`` uses).

Where the search finds no Hamiltonian factor, the rings are one cycle of rank order and its
reverse (both directions of every route). On switched fabrics a server's egress port is its
bottleneck whatever the ring, so :func:`fabric_rings` returns the one ring in rank order.

:func:`ring_workload` splits a workload's mutable ring collectives over those rings (``S / r``
each), as :func:`solvers.realise.design_workload` does for a design's rings.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim._ring_kernels import factor_cycles, reverse_tail
from traffic.workload import Workload

__all__ = ["fabric_rings", "hamiltonian_factors", "ring_facts", "ring_workload", "is_direct"]

_ORDERED = ("all-reduce", "reduce-scatter", "all-gather")
_MAX_SERVERS = 8192
"""Servers above which no ring is searched (rank order and its reverse instead, multi-hop, said
by :func:`ring_facts`): 65,536 GPUs of 8 a server. The search's own work limits bound it; on
8,192 servers it took 47 s CPU for the 32x16x16 torus of 6 ports (its 3 rings), 38 s for an
expander of 8 ports (its 4), against 1.6 s and 10 s at 4,096 (the limit was 4,096 until
2026-12-08: a 65,536-GPU torus ran its all-reduce on one ring of 2 of its 6 ports)."""
_MAX_SWEEPS = 60
_PLATEAU_SWEEPS = 20
_MAX_SQUARES = 2**20
"""4-cycles above which the search is not tried (the rotation-extension alone finds the rings):
a random graph's 4-cycles grow as the fourth power of its degree, about 0.6 M at 48 ports per
server, 2 M at 64."""
_MAX_TRIES = 2**17
"""Exchanges the search tries at most (each two cycle counts): a torus with bundles of parallel
cables has many factors per cable pair (128 ports on 128 servers: 535,626 exchanges, 86 s)."""
_MAX_TURNS = 2**25
"""Orientations of 4-cycles the search visits at most (``_MAX_SWEEPS`` sweeps, fewer when the
fabric has more than ``2**25 / 60`` orientations: about 24 ports per server on a random graph,
whose 4-cycles grow as the fourth power of the degree). A deterministic work limit: 64 ports per
server on 128 servers would otherwise sweep 60 times over 3.6 M orientations."""
_POSA_TRIES = 8
_PAIR_WALK = 30
"""Cables of one alternating walk of :func:`_complete` at most (with 30, 2,048 servers of 8 ports
took 4.4 s in all against 7.1 s with 10, and 1,024 of 4 ports found their last ring)."""
_PAIR_WALKS = 256
"""Walks per server :func:`_complete` may try at most, and never more than :data:`_PAIR_MAX`
(a deterministic work limit; 8 ports needed 3.4 walks a server on 128 servers, 31 on 2,048; a
fabric with no such decomposition spends the whole budget: 0.2 s on 64 servers)."""
_PAIR_MAX = 2**17
"""Walks :func:`_complete` may try at most (about 5 s on 2,048 servers)."""
_POSA_STEPS = 40


def is_direct(fabric: Fabric) -> bool:
    """True when the fabric has no switches (servers wired to servers: torus, expander, ...)."""
    return fabric.n_switches == 0


def _server_edges(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    n = fabric.n_servers
    s, d = np.asarray(fabric.src), np.asarray(fabric.dst)
    keep = (s < n) & (d < n) & (s < d)
    m = np.asarray(fabric.multiplicity)[keep]
    return np.repeat(s[keep], m), np.repeat(d[keep], m)


def _dimension_factors(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> list[np.ndarray] | None:
    """Edge ids of each dimension's factors on an untwisted torus (None otherwise)."""
    c = fabric.coords
    if c is None or fabric.params.get("twist") not in (None, False):
        return None
    diff = c[u] != c[v]
    if np.any(diff.sum(axis=1) != 1):
        return None
    dim = np.argmax(diff, axis=1)
    n = fabric.n_servers
    out = []
    for k in range(c.shape[1]):
        ids = np.flatnonzero(dim == k)
        if ids.size == 0:
            continue
        if ids.size % n:
            return None
        f = ids.size // n  # factors of this dimension: the parallel copies, round-robin
        pk = u[ids] * n + v[ids]
        occ = np.zeros(ids.size, np.int64)  # occurrence of each edge among its pair's copies
        srt = np.argsort(pk, kind="stable")
        first = np.searchsorted(pk[srt], pk[srt])
        occ[srt] = np.arange(ids.size) - first
        out.extend(ids[occ % f == c] for c in range(f))
    # each factor must give every server degree 2
    for f in out:
        deg = np.bincount(np.concatenate([u[f], v[f]]), minlength=n)
        if np.any(deg != 2):
            return None
    return out


def _petersen_factors(n: int, u: np.ndarray, v: np.ndarray) -> list[np.ndarray] | None:
    """Petersen's 2-factorisation of an even-regular multigraph (None when it is not one)."""
    import networkx as nx

    deg = np.bincount(np.concatenate([u, v]), minlength=n)
    if deg[0] % 2 or np.any(deg != deg[0]) or deg[0] == 0:
        return None
    g = nx.MultiGraph()
    g.add_nodes_from(range(n))
    for e, (a, b) in enumerate(zip(u.tolist(), v.tolist(), strict=True)):
        g.add_edge(a, b, key=e)
    if not nx.is_connected(g):
        return None
    arcs = [(a, b, k) for a, b, k in nx.eulerian_circuit(g, keys=True)]
    # bipartite out-copy a -> in-copy b, deg/2-regular: peel perfect matchings
    left: dict[int, list[tuple[int, int]]] = {i: [] for i in range(n)}
    for a, b, k in arcs:
        left[a].append((b, k))
    factors = []
    for _ in range(int(deg[0]) // 2):
        bg = nx.Graph()
        bg.add_nodes_from(range(n), bipartite=0)
        bg.add_nodes_from(range(n, 2 * n), bipartite=1)
        for a in range(n):
            for b, _k in left[a]:
                bg.add_edge(a, n + b)
        match = nx.bipartite.hopcroft_karp_matching(bg, top_nodes=range(n))
        ids = []
        for a in range(n):
            b = match[a] - n
            j = next(i for i, (bb, _k) in enumerate(left[a]) if bb == b)
            ids.append(left[a].pop(j)[1])
        factors.append(np.asarray(ids, np.int64))
    return factors


def _components(n: int, u: np.ndarray, v: np.ndarray) -> int:
    """Connected components of the edges ``u - v`` on ``n`` nodes (scipy): what
    :func:`topoopt.flowsim._ring_kernels.factor_cycles` counts, for its tests."""
    a = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    return int(connected_components(a, directed=False)[0])


def _four_cycles(n: int, u: np.ndarray, v: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Every 4-cycle ``(a, b, c, d)`` of the simple graph under the cables (``a < c``,
    ``b < d``), or none when there are more than ``_MAX_SQUARES`` (counted first)."""
    adj = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.int64).tocsr()
    nbrs = [adj.indices[adj.indptr[i] : adj.indptr[i + 1]] for i in range(n)]
    common = (adj @ adj).tocoo()
    keep = (common.row < common.col) & (common.data >= 2)
    k = common.data[keep]
    if int((k * (k - 1) // 2).sum()) > _MAX_SQUARES:
        return []
    out = []
    for a, c in zip(common.row[keep].tolist(), common.col[keep].tolist(), strict=True):
        mid = np.intersect1d(nbrs[a], nbrs[c])
        for i in range(mid.size):
            for j in range(i + 1, mid.size):
                out.append((a, int(mid[i]), c, int(mid[j])))
    return out


def hamiltonian_factors(fabric: Fabric, seed: int = 0) -> list[np.ndarray]:
    """Edge-disjoint Hamiltonian cycles of a direct fabric's servers (module docstring).

    Returns
    -------
    list of numpy.ndarray
        Each a server order ``(n,)`` following one Hamiltonian cycle (consecutive servers, and
        the last and first, joined by a cable); no two cycles share a cable.

    Examples
    --------
    A 4x4 torus of 4 ports per server splits into two Hamiltonian cycles:

    >>> from topoopt.fabrics import torus
    >>> cyc = hamiltonian_factors(torus("4x4", 1e9))
    >>> len(cyc), sorted(cyc[0].tolist()) == list(range(16))
    (2, True)
    """
    key = ("hamiltonian_factors", seed)
    if key in fabric._cache:
        return fabric._cache[key]
    n = fabric.n_servers
    out: list[np.ndarray] = []
    u, v = _server_edges(fabric)
    if 3 <= n <= _MAX_SERVERS and u.size:
        factors = _dimension_factors(fabric, u, v) or _petersen_factors(n, u, v)
        if factors:
            out = _search(n, u, v, factors, seed)
        if len(out) < u.size // n:  # not a full decomposition: try rotation-extension too
            alt = _sequential(n, u, v, seed)
            out = alt if len(alt) > len(out) else out
        if 0 < len(out) == u.size // n - 1:  # all but one: the last pair by alternating walks
            out = _complete(n, u, v, out, seed)
    fabric._cache[key] = out
    return out


def _complete(n: int, u: np.ndarray, v: np.ndarray, out: list, seed: int) -> list[np.ndarray]:
    """``out`` (all Hamiltonian cycles but one) completed when the cables left form a 2-factor:
    the last cycle of ``out`` (factor 0) and that 2-factor (factor 1) exchange the cables of
    alternating closed walks (from a random server, cables of factor 0 and 1 in turn, at most
    :data:`_PAIR_WALK` of them, none twice: both stay 2-factors), an exchange kept unless it
    raises their total cycle count, until both are one cycle (``out`` with both) or
    :data:`_PAIR_WALKS` walks a server are spent (``out`` as it was). Seeded: the same rings
    every time.

    A random regular graph's 4-cycles are few, so the search's exchanges rarely join the last
    factor's cycles: 4 ports on 32 to 1,024 servers, 8 ports on 64 to 2,048 servers ended one
    ring short (6 of the 8 directed rings), and ring collectives over every server used three
    quarters of the ports (half with 4 ports)."""
    walks = min(_PAIR_WALKS * n, _PAIR_MAX)
    if walks <= 0:
        return out
    left: dict[tuple[int, int], int] = {}
    for cyc in out[:-1]:
        for a, b in zip(cyc.tolist(), np.roll(cyc, -1).tolist(), strict=True):
            k = (min(a, b), max(a, b))
            left[k] = left.get(k, 0) + 1
    last: dict[tuple[int, int], int] = {}
    cyc = out[-1]
    for a, b in zip(cyc.tolist(), np.roll(cyc, -1).tolist(), strict=True):
        k = (min(a, b), max(a, b))
        last[k] = last.get(k, 0) + 1
    eu, ev, own = [], [], []
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        k = (min(a, b), max(a, b))
        if left.get(k, 0) > 0:
            left[k] -= 1
            continue
        eu.append(a)
        ev.append(b)
        in_last = last.get(k, 0) > 0
        if in_last:
            last[k] -= 1
        own.append(0 if in_last else 1)
    pu, pv, po = np.asarray(eu, np.int64), np.asarray(ev, np.int64), np.asarray(own, np.int64)
    deg = np.bincount(pu[po == 1], minlength=n) + np.bincount(pv[po == 1], minlength=n)
    if pu.size != 2 * n or (deg != 2).any():
        return out  # the cables left are not a 2-factor (an irregular fabric)
    inc: list[list[int]] = [[] for _ in range(n)]
    for e, (a, b) in enumerate(zip(eu, ev, strict=True)):
        inc[a].append(e)
        inc[b].append(e)
    rng = np.random.default_rng([seed, 48])
    c0, c1 = 1, int(factor_cycles(n, pu, pv, po, 1))
    for _ in range(walks):
        if c0 == c1 == 1:
            break
        start = int(rng.integers(n))
        cur, want, walk, seen, closed = start, 0, [], set(), False
        for _step in range(_PAIR_WALK):
            opts = [e for e in inc[cur] if own[e] == want and e not in seen]
            if not opts:
                break
            e = opts[int(rng.integers(len(opts)))]
            seen.add(e)
            walk.append(e)
            cur = ev[e] if eu[e] == cur else eu[e]
            want ^= 1
            if cur == start and want == 0 and len(walk) >= 4:
                closed = True
                break
        if not closed:
            continue
        for e in walk:
            own[e] ^= 1
        po[walk] ^= 1
        n0, n1 = int(factor_cycles(n, pu, pv, po, 0)), int(factor_cycles(n, pu, pv, po, 1))
        if n0 + n1 <= c0 + c1:
            c0, c1 = n0, n1
            continue
        for e in walk:
            own[e] ^= 1
        po[walk] ^= 1
    if c0 == c1 == 1:
        pair = _walk(n, pu[po == 0], pv[po == 0]), _walk(n, pu[po == 1], pv[po == 1])
        return [*out[:-1], *pair]
    return out


def _orientations(n: int, u: np.ndarray, v: np.ndarray, squares) -> tuple[np.ndarray, list]:
    """The two orientations ``(w, x, y, z)`` of every 4-cycle (``(a, b, c, d)``, then
    ``(b, c, d, a)``) and, per orientation, its cables ``(wx, yz, xy, zw)`` when each of those
    pairs has exactly one cable (``None`` when one has a bundle)."""
    sq = np.asarray(squares, np.int64).reshape(-1, 4)
    turns = np.stack([sq, np.roll(sq, -1, axis=1)], axis=1).reshape(-1, 4)
    key = np.minimum(u, v) * n + np.maximum(u, v)
    order = np.argsort(key, kind="stable")
    keys, first, many = np.unique(key[order], return_index=True, return_counts=True)
    w, x, y, z = turns.T
    cab = []
    for a, b in ((w, x), (y, z), (x, y), (z, w)):
        j = np.searchsorted(keys, np.minimum(a, b) * n + np.maximum(a, b))
        cab.append((order[first[j]], many[j] == 1))
    ids = np.stack([c[0] for c in cab], axis=1)
    one = np.logical_and.reduce([c[1] for c in cab])
    simple = [tuple(r) if ok else None for r, ok in zip(ids.tolist(), one.tolist(), strict=True)]
    return turns, simple


class _Enough(Exception):
    """The search's work limit (:data:`_MAX_TRIES`) is reached."""


def _search(n, u, v, factors, seed) -> list[np.ndarray]:
    owner = np.full(u.size, -1, np.int64)
    for p, f in enumerate(factors):
        owner[f] = p
    own = owner.tolist()  # the same owners, for the scalar lookups of the sweep
    pair: dict[tuple[int, int], list[int]] = {}
    for e, (a, b) in enumerate(zip(u.tolist(), v.tolist(), strict=True)):
        pair.setdefault((min(a, b), max(a, b)), []).append(e)

    def count(p):
        return int(factor_cycles(n, u, v, owner, p))

    counts = [count(p) for p in range(len(factors))]
    squares = _four_cycles(n, u, v)
    rng = np.random.default_rng(seed)

    def cables(a, b):
        return pair.get((min(a, b), max(a, b)), ())

    def edge(cab, p):
        for e in cab:
            if own[e] == p:
                return e
        return None

    def both(c1, c2, above=-1) -> list[int]:
        """Factors above ``above`` owning a cable of both pairs, ascending: the factors a scan
        of every factor in order would find (a pair has one cable, or its bundle's few)."""
        return sorted({own[e] for e in c1 if own[e] > above} & {own[e] for e in c2})

    def move(es, p):
        for e in es:
            own[e] = p
        owner[es] = p

    def evaluate(p, q, one, two) -> bool:
        """Exchange ``one`` (p's) and ``two`` (q's); keep it when it helps (or, stuck, by a
        coin when neutral), else put them back."""
        nonlocal better, tries
        if tries >= _MAX_TRIES:
            raise _Enough
        tries += 1
        move(one, q)
        move(two, p)
        cp, cq = count(p), count(q)
        total, old = cp + cq, counts[p] + counts[q]
        if (cp <= counts[p] and cq <= counts[q] and total < old) or (
            stuck and total == old and rng.random() < 0.5
        ):
            better = better or total < old
            counts[p], counts[q] = cp, cq
            return True
        move(one, p)
        move(two, q)
        return False

    # sweeps over the 4-cycles in a seeded order: keep an exchange that lowers the cycle count
    # of one factor without raising the other's; when a sweep finds none, neutral exchanges
    # (same total) are kept with probability 1/2 to leave the plateau. For each orientation the
    # factors p (owning ``wx`` and ``yz``) and q (owning ``xy`` and ``zw``) are visited in
    # ascending order, p's read again after a kept exchange. An orientation of single cables
    # (every pair of a simple graph) has at most one p and one q: read directly.
    turns, simple = _orientations(n, u, v, squares)
    stuck, better, tries = 0, False, 0
    try:
        for _sweep in range(min(_MAX_SWEEPS, max(1, _MAX_TURNS // max(1, len(turns))))):
            if all(c == 1 for c in counts) or not squares or stuck > _PLATEAU_SWEEPS:
                break
            better = False
            for i in rng.permutation(len(squares)).tolist():
                for k in (2 * i, 2 * i + 1):
                    s4 = simple[k]
                    if s4 is not None:
                        ea, eb, ec, ed = s4
                        last = -1
                        while True:
                            p, q = own[ea], own[ec]
                            if (
                                own[eb] != p or p <= last or own[ed] != q or q == p
                                or counts[p] == counts[q] == 1
                            ):  # fmt: skip
                                break
                            if not evaluate(p, q, [ea, eb], [ec, ed]):
                                break
                            last = p
                        continue
                    w, x, y, z = turns[k].tolist()
                    wx, yz, xy, zw = cables(w, x), cables(y, z), cables(x, y), cables(z, w)
                    p = -1
                    while True:
                        ps = both(wx, yz, p)
                        if not ps:
                            break
                        p = ps[0]
                        one = [edge(wx, p), edge(yz, p)]
                        if one[0] == one[1]:
                            continue
                        for q in both(xy, zw):
                            if q == p or counts[p] == counts[q] == 1:
                                continue
                            two = [edge(xy, q), edge(zw, q)]
                            if two[0] != two[1] and evaluate(p, q, one, two):
                                break
            stuck = 0 if better else stuck + 1
    except _Enough:  # the exchanges tried reached _MAX_TRIES: the factors as they are
        pass
    return [_walk(n, u[owner == p], v[owner == p]) for p in range(len(factors)) if counts[p] == 1]


def _sequential(n: int, u: np.ndarray, v: np.ndarray, seed: int) -> list[np.ndarray]:
    """Hamiltonian cycles found one after the other by Posa's rotation-extension on the cables
    not yet used (a few seeded attempts each)."""
    rng = np.random.default_rng(seed)
    left: dict[tuple[int, int], int] = {}
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        k = (min(a, b), max(a, b))
        left[k] = left.get(k, 0) + 1
    out = []
    while True:
        nbrs: list[list[int]] = [[] for _ in range(n)]
        for a, b in left:
            nbrs[a].append(b)
            nbrs[b].append(a)
        if min(len(x) for x in nbrs) < 2:
            break
        cyc = None
        for _ in range(_POSA_TRIES):
            cyc = _posa(n, nbrs, rng)
            if cyc is not None:
                break
        if cyc is None:
            break
        out.append(np.asarray(cyc, np.int64))
        for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True):
            k = (min(a, b), max(a, b))
            left[k] -= 1
            if left[k] == 0:
                del left[k]
    return out


def _posa(n: int, nbrs: list[list[int]], rng) -> list[int] | None:
    """One seeded attempt: a path grown at its end, rotated (its tail reversed, compiled) when
    the end has no free neighbour; the Hamiltonian cycle when it closes, else None."""
    sets = [set(x) for x in nbrs]
    path = np.empty(n, np.int64)
    path[0] = int(rng.integers(n))
    size = 1
    pos = np.full(n, -1, np.int64)
    pos[path[0]] = 0
    for _ in range(_POSA_STEPS * n):
        end = int(path[size - 1])
        free = [w for w in nbrs[end] if pos[w] < 0]
        if free:
            w = free[int(rng.integers(len(free)))]
            pos[w] = size
            path[size] = w
            size += 1
            continue
        if size == n and int(path[0]) in sets[end]:
            return path.tolist()
        inner = [w for w in nbrs[end] if pos[w] < size - 2]
        if not inner:
            return None
        i = int(pos[inner[int(rng.integers(len(inner)))]])
        reverse_tail(path, pos, i + 1, size)
    return None


def _walk(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Server order along a Hamiltonian 2-factor given by its edges."""
    nb: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(u.tolist(), v.tolist(), strict=True):
        nb[a].append(b)
        nb[b].append(a)
    order, prev, cur = [0], -1, 0
    for _ in range(n - 1):
        nxt = nb[cur][0] if nb[cur][0] != prev else nb[cur][1]
        order.append(nxt)
        prev, cur = cur, nxt
    return np.asarray(order, np.int64)


def ring_facts(fabric: Fabric, seed: int = 0) -> dict:
    """What the rings of a direct fabric use: ``rings`` (edge-disjoint Hamiltonian cycles found,
    each run both ways), ``possible`` (``cables // 2`` of the server with the fewest
    server-to-server cables: at most that many disjoint Hamiltonian cycles), ``full`` (all of
    them found), and ``note``, the sentence a comparison row carries (what the rings are and,
    when some are missing, that a collective over every server then runs slower than the
    fabric allows). Switched fabrics: ``None``.

    >>> from topoopt.fabrics import torus, ideal
    >>> f = ring_facts(torus("4x4", 1e9))
    >>> f["rings"], f["possible"], f["full"]
    (2, 2, True)
    >>> ring_facts(ideal(4)) is None
    True
    """
    n = fabric.n_servers
    if not is_direct(fabric) or n < 3:
        return None
    u, v = _server_edges(fabric)
    deg = np.bincount(np.concatenate([u, v]), minlength=n)
    possible = int(deg.min()) // 2
    k = len(hamiltonian_factors(fabric, seed))
    ports = f"{2 * possible} of a server's {int(deg.min())} cables" if deg.min() % 2 else ""
    cycles = "1 Hamiltonian cycle" if k == 1 else f"{k} edge-disjoint Hamiltonian cycles"
    if k == possible:
        note = f"rings: {cycles}, both directions (fabric_rings), on " + (
            ports or "every server-to-server cable"
        )
    elif k:
        note = (
            f"rings: {cycles} of the {possible} the cables allow, "
            "both directions (fabric_rings: the search found no more); collectives over every "
            "server use those rings' cables only"
        )
    else:
        why = (
            f"above {_MAX_SERVERS:,} servers the search is not run"
            if n > _MAX_SERVERS
            else "the search found none"
        )
        note = (
            f"rings: no Hamiltonian cycle ({why}): collectives over every server run one ring "
            "in rank order and its reverse, on multi-hop routes, slower than the fabric allows"
        )
    return {"rings": k, "possible": possible, "full": k == possible, "note": note}


def fabric_rings(fabric: Fabric, seed: int = 0) -> np.ndarray:
    """``(r, n)`` server orders of the rings a collective over all servers runs (docstring).

    Direct fabrics: every Hamiltonian cycle of :func:`hamiltonian_factors` in both directions
    (or rank order and its reverse when there is none); switched fabrics: rank order.

    >>> from topoopt.fabrics import torus, ideal
    >>> fabric_rings(torus("4x4", 1e9)).shape, fabric_rings(ideal(4)).tolist()
    ((4, 16), [[0, 1, 2, 3]])
    """
    n = fabric.n_servers
    if not is_direct(fabric) or n < 3:
        return np.arange(n, dtype=np.int64).reshape(1, n)
    cyc = hamiltonian_factors(fabric, seed) or [np.arange(n, dtype=np.int64)]
    return np.stack([r for c in cyc for r in (c, c[::-1])])


def ring_workload(workload: Workload, fabric: Fabric, seed: int = 0) -> Workload:
    """``workload`` with its mutable ring collectives split over the fabric's rings.

    A family row whose members span every server follows :func:`fabric_rings` (members ordered
    by their server's place on the ring, then by rank; ``S / r`` per ring). On a direct fabric
    the other rows run their rank-order ring and its reverse (``S / 2`` each). Families that are
    already ordered, carry a schedule, or belong to a task-graph workload are kept.

    Examples
    --------
    >>> from traffic.workload import Demand
    >>> from topoopt.fabrics import torus
    >>> w = Workload(16, 1, (Demand("all-reduce", [list(range(16))], 8e6, "dp", "backward"),))
    >>> rw = ring_workload(w, torus("4x4", 1e9))
    >>> len(rw.demands), rw.total_wire_bytes() == w.total_wire_bytes()
    (4, True)
    """
    n = fabric.n_servers
    if workload.taskgraph is not None or n < 3:
        return workload
    rings = fabric_rings(fabric, seed)
    direct = is_direct(fabric)
    if rings.shape[0] == 1 and not direct:
        return workload
    gps = workload.gpus_per_server
    out = []
    for d in workload.demands:
        if not (
            d.mutable
            and not d.ordered
            and d.schedule is None
            and d.op in _ORDERED
            and d.group_size > 1
            and d.n_groups
        ):
            out.append(d)
            continue
        rows = np.sort(d.groups, axis=1)
        srv = rows // gps
        full = np.array([np.unique(s).size == n for s in srv])
        if full.any():
            sub, ssub = rows[full], srv[full]
            for j, order in enumerate(rings):
                pos = np.empty(n, np.int64)
                pos[order] = np.arange(n)
                key = pos[ssub] * (workload.gpus + 1) + sub
                ordered = np.take_along_axis(sub, np.argsort(key, axis=1), axis=1)
                name = f"{d.name} [ring {j + 1}/{rings.shape[0]}]"
                out.append(
                    replace(
                        d, groups=ordered, size=d.size / rings.shape[0], ordered=True, name=name
                    )
                )
        rest = rows[~full]
        if rest.size and direct and d.group_size > 2:
            for j, r in enumerate((rest, rest[:, ::-1])):
                name = f"{d.name} [ring {j + 1}/2]"
                out.append(replace(d, groups=r, size=d.size / 2, ordered=True, name=name))
        elif rest.size:
            out.append(replace(d, groups=rest))
    return replace(workload, demands=tuple(out))
