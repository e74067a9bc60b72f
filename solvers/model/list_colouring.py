"""List edge colouring of a circuit multigraph: every circuit gets a *colour* (a port index,
an OCS plane) that is free at both of its ends and allowed for it.

Circuits ``u-v`` (rows ``[u, v, count]``, one unit circuit per count) on ``m`` servers with ``d``
colours; ``units`` ``(d, m)`` says where each server's colour-``i`` port lands, and a circuit may
take colour ``i`` only when both ends land on the same unit of plane ``i``. Every server uses each
colour at most once. This is the placement of circuits on OCS planes of finite radix (the shared
cluster's :mod:`solvers.cluster.ocs`, one OCS group per port index) and, with ``units`` the OCS
of every port (:attr:`topoopt.fabrics.OcsLayout.ocs_of` transposed), a constructive placement
on a design's optical layer (:func:`solvers.model.ocs_layers.place_circuits`).

List edge colouring is NP-hard in general (an odd ring on ``d = 2`` colours has none).
:func:`assign_ports` searches it exactly, most constrained circuit first with backtracking,
within a deterministic step budget shared by a few restarts (seeded circuit orders); each partial
colouring is completed greedily and by Kempe-chain flips (two colours swapped along an
alternating path, as in Vizing's proof); when that finds no complete colouring and has not
proved that none exists, a construction is tried (:func:`colour_by_matchings`: one maximum
matching per colour, the circuits with fewest colours left preferred, then Kempe flips and
shifts) unless a count excludes any colouring (:func:`matching_bound`), and the colouring with
most circuits of the two is returned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "PortAssignment",
    "assign_ports",
    "expand_circuits",
    "kempe_repair",
    "shift_repair",
    "ball_repair",
    "MATCHING_TRIES",
    "matching_bound",
    "colour_by_matchings",
    "DEFAULT_STEPS",
]

DEFAULT_STEPS = 20_000
"""Backtracking steps :func:`assign_ports` takes before it settles for a partial colouring."""


@dataclass(frozen=True, eq=False)
class PortAssignment:
    """A plane (port index) for every unit circuit, or ``-1`` where none could be found.

    Attributes
    ----------
    u, v : numpy.ndarray
        ``int64 (E,)``: the unit circuits (a row of count ``c`` is ``c`` unit circuits).
    port : numpy.ndarray
        ``int64 (E,)``: plane of each circuit, ``-1`` if it is left out.
    complete : bool
        Every circuit has a plane (the multigraph is realisable).
    proven : bool
        ``complete``, or the multigraph is proven not realisable: the search finished without
        a colouring, or more circuits than :func:`matching_bound` allows; ``False`` when the
        step budget ran out first without either.
    steps : int
        Search steps taken.
    """

    u: np.ndarray
    v: np.ndarray
    port: np.ndarray
    complete: bool
    proven: bool
    steps: int

    def coloured(self) -> np.ndarray:
        """Rows ``[u, v, port]`` of the circuits that have a plane."""
        k = self.port >= 0
        return np.stack([self.u[k], self.v[k], self.port[k]], axis=1)

    def left_out(self) -> np.ndarray:
        """Rows ``[u, v]`` of the circuits without a plane."""
        k = self.port < 0
        return np.stack([self.u[k], self.v[k]], axis=1)


def expand_circuits(circuits: Circuits) -> tuple[np.ndarray, np.ndarray]:
    """Unit circuits ``(u, v)`` with ``u < v``, one per circuit, in row order.

    >>> [a.tolist() for a in expand_circuits(Circuits([[1, 0, 2], [1, 2, 1]], 3))]
    [[0, 0, 1], [1, 1, 2]]
    """
    c = circuits.rows
    return np.repeat(c[:, 0], c[:, 2]), np.repeat(c[:, 1], c[:, 2])


def assign_ports(
    circuits: Circuits, units: np.ndarray, steps: int = DEFAULT_STEPS, restarts: int = 4
) -> PortAssignment:
    """Colour the circuits with planes (module docstring): exact search, else a best partial.

    Parameters
    ----------
    circuits : Circuits
        The circuits on the ``m`` servers.
    units : numpy.ndarray
        ``(D, m)`` unit of every server's port on each plane (:meth:`OcsLayer.restrict`).
    steps : int
        Budget of search steps (deterministic), shared by the restarts.
    restarts : int
        Searches from differently ordered circuits (seeded); each partial colouring is
        completed greedily and by Kempe-chain flips, and the first complete one (or the one
        with most circuits) is kept.

    Returns
    -------
    PortAssignment

    Examples
    --------
    A triangle is not realisable on two ports, a square is:

    >>> one = np.zeros((2, 4), np.int64)
    >>> assign_ports(Circuits([[0, 1, 1], [1, 2, 1], [0, 2, 1]], 3), one[:, :3]).complete
    False
    >>> a = assign_ports(Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]], 4), one)
    >>> a.complete, a.u.tolist(), a.v.tolist(), a.port.tolist()
    (True, [0, 0, 1, 2], [1, 3, 2, 3], [0, 1, 1, 0])
    """
    units = np.asarray(units, np.int64)
    d, m = units.shape
    if circuits.n != m:
        raise InputError("circuits servers", circuits.n, f"{m} (the servers of units)")
    u, v = expand_circuits(circuits)
    e = u.size
    allowed = units[:, u] == units[:, v]  # (d, e)
    best = np.full(e, -1, np.int64)
    proven = False
    taken = 0
    for r in range(max(1, restarts)):
        # restart r visits the circuits in a seeded order (ties of the search break differently)
        perm = np.arange(e) if r == 0 else np.random.default_rng(r).permutation(e)
        port, done, t = _search(u[perm], v[perm], allowed[:, perm], m, d, steps // max(1, restarts))
        taken += t
        port = _greedy_extend(port, u[perm], v[perm], allowed[:, perm], m, d)
        port = kempe_repair(port, u[perm], v[perm], allowed[:, perm], m, d)
        back = np.empty(e, np.int64)
        back[perm] = port
        if (back >= 0).sum() > (best >= 0).sum() or r == 0:
            best = back
        if done and not np.all(port >= 0):
            proven = True  # the search was exhaustive: no colouring exists
        if proven or np.all(best >= 0):
            break
    if not proven and not np.all(best >= 0) and e > matching_bound(u, v, allowed, m):
        proven = True  # the step budget ran out, but the count excludes a colouring
    if not proven and not np.all(best >= 0):  # the step budget ran out: the construction
        for order in (range(d), range(d - 1, -1, -1)):
            port = colour_by_matchings(u, v, allowed, m, order)
            if (port >= 0).sum() > (best >= 0).sum():
                best = port  # complete, or more circuits than the search's best
            if np.all(best >= 0):
                break
    complete = bool(np.all(best >= 0))
    return PortAssignment(u, v, best, complete, complete or proven, taken)


def matching_bound(u, v, allowed, m: int) -> int:
    """An upper bound on the circuits any list edge colouring holds: on each colour, a matching
    of the circuits allowed it, at most half the servers (rounded down) of each connected
    component of those circuits. Below the number of circuits, no colouring exists (an odd
    component of a regular multigraph with one unit per colour, for instance).

    >>> u, v = np.array([0, 1, 0]), np.array([1, 2, 2])  # a triangle: 3 colours, or 2
    >>> [matching_bound(u, v, np.ones((d, 3), bool), 3) for d in (3, 2)]
    [3, 2]
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    total = 0
    for row in np.asarray(allowed, bool):
        k = np.flatnonzero(row)
        if not k.size:
            continue
        g = sp.coo_matrix((np.ones(k.size), (u[k], v[k])), shape=(m, m))
        _, label = connected_components(g, directed=False)
        ends = np.unique(np.concatenate([u[k], v[k]]))
        total += int((np.bincount(label[ends]) // 2).sum())
    return total


MATCHING_TRIES = 4
"""Tie orders :func:`colour_by_matchings` tries (circuit index, then seeded permutations)."""

BALL_STEPS = 10_000
"""Search steps of :func:`ball_repair` in one call of :func:`colour_by_matchings` (all tries)."""

BALL_SEARCH_STEPS = 2_000
"""Search steps of :func:`ball_repair` for one left-out circuit's neighbourhood."""


def colour_by_matchings(
    u, v, allowed, m: int, order=None, tries: int = MATCHING_TRIES, steps: int = BALL_STEPS
) -> np.ndarray:
    """A constructive list edge colouring: colour by colour (``order``, default ``0..d-1``), a
    maximum matching of the uncoloured circuits that may take it, the circuits with fewer
    colours left preferred (so they are not left without one), then Kempe-chain flips
    (:func:`kempe_repair`), shifts (:func:`shift_repair`) and a re-search of their
    neighbourhood (:func:`ball_repair`, ``steps`` in all the tries) for the circuits left over.
    Returns the colour of every unit circuit, ``-1`` where none. Deterministic.

    The matching (:func:`solvers.model.matching.priority_matching`) is of maximum cardinality;
    the preference orders its greedy start (fewest colours left first, ties by circuit index)
    and is not a weight that it maximises. Between two servers only one circuit is a
    candidate: the first in that order. When circuits are left over, up to ``tries`` tie
    orders are tried (the circuit index, then permutations seeded ``1, 2, ...``: among equally
    constrained circuits which matchings are found decides whether the last colours close odd
    cycles) and the first complete colouring, else the one with most circuits, is returned.

    >>> u, v = np.array([0, 1, 2, 0]), np.array([1, 2, 3, 3])  # a square
    >>> colour_by_matchings(u, v, np.ones((2, 4), bool), 4).tolist()
    [0, 1, 0, 1]
    """
    u = np.asarray(u, np.int64)
    v = np.asarray(v, np.int64)
    allowed = np.asarray(allowed, bool)
    d = allowed.shape[0]
    best = None
    budget = int(steps)
    for t in range(max(1, tries)):
        port = _colour_by_matchings_once(u, v, allowed, m, order, None if t == 0 else t)
        if not np.all(port >= 0) and budget > 0:
            port, taken = _ball_repair(port, u, v, allowed, m, d, 2, budget)
            budget -= taken
        if best is None or (port >= 0).sum() > (best >= 0).sum():
            best = port
        if np.all(best >= 0):
            break
    return best


def _colour_by_matchings_once(u, v, allowed, m: int, order, seed) -> np.ndarray:
    """:func:`colour_by_matchings` with one tie order: circuit index (``seed`` None) or a
    permutation seeded ``seed``."""
    from solvers.model.matching import priority_matching

    d = allowed.shape[0]
    u = np.asarray(u, np.int64)
    v = np.asarray(v, np.int64)
    port = np.full(u.size, -1, np.int64)
    left = np.array(allowed, bool)
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    tie = np.arange(u.size) if seed is None else np.random.default_rng(seed).permutation(u.size)
    for i in range(d) if order is None else order:
        open_ = np.flatnonzero((port < 0) & left[i] & (lo != hi))
        if open_.size:
            options = left[:, open_].sum(axis=0)  # colours still open to it, this one too
            # most constrained first, then the tie order; one circuit per server pair
            by = open_[np.lexsort((tie[open_], options))]
            _, first = np.unique(lo[by] * m + hi[by], return_index=True)
            cand = by[np.sort(first)]
            port[cand[priority_matching(m, lo[cand], hi[cand])]] = i
        left[i] = False
    port = kempe_repair(port, u, v, allowed, m, d)
    return port if np.all(port >= 0) else shift_repair(port, u, v, allowed, m, d)


def _search(u, v, allowed, m: int, d: int, steps: int) -> tuple[np.ndarray, bool, int]:
    """Backtracking list edge colouring, most constrained circuit first, within ``steps``.

    Returns the best (most circuits) colouring seen, whether the search was exhaustive, and
    the steps taken.

    Each step takes the uncoloured circuit with the fewest planes still open to it (free at both
    ends and allowed; ties: the lowest index) and gives it the lowest such plane; a circuit with
    none, or the end of the budget, ends the descent and the search backtracks to the last
    circuit with another plane. The counts are kept up to date as planes are taken and given
    back (only the circuits at the two servers change), in buckets by count, so a step costs
    the circuits at two servers, not a pass over every circuit. Planes are bits of an integer:
    ``free[s]`` those open at server ``s``, ``ok[k]`` those allowed for circuit ``k``.
    """
    import heapq

    e = u.size
    us, vs = u.tolist(), v.tolist()
    ok = [0] * e
    for c in range(d):
        for k in np.flatnonzero(allowed[c]).tolist():
            ok[k] |= 1 << c
    full = (1 << d) - 1
    free = [full] * m
    at: list[list[int]] = [[] for _ in range(m)]  # the circuits at each server, once each
    for k in range(e):
        at[us[k]].append(k)
        if vs[k] != us[k]:
            at[vs[k]].append(k)
    port = [-1] * e
    cnt = [(ok[k] & full).bit_count() for k in range(e)]
    buckets: list[list[int]] = [[] for _ in range(d + 1)]  # min-heaps of circuit indices
    for k in range(e):
        buckets[cnt[k]].append(k)  # ascending: already heaps
    best, best_n = list(port), 0
    n_col = 0
    n_open = e
    stack: list[tuple[int, list[int]]] = []  # (circuit, its remaining candidate planes)
    taken = 0
    proven = False

    def recount(k: int, bit: int, step: int) -> None:
        # the open circuits at k's two servers to which plane `bit` is open now (met twice if
        # between them: counted once) gain `step` planes
        m0 = mark[0]
        mark[0] += 1
        for s in (us[k], vs[k]) if us[k] != vs[k] else (us[k],):
            for q in at[s]:
                if (
                    port[q] < 0
                    and q != k
                    and seen[q] != m0
                    and ok[q] & free[us[q]] & free[vs[q]] & bit
                ):
                    seen[q] = m0
                    cnt[q] += step
                    heapq.heappush(buckets[cnt[q]], q)

    def take(k: int, c: int) -> None:
        bit = 1 << c
        recount(k, bit, -1)  # before: the plane is open to them until k takes it
        free[us[k]] &= ~bit
        free[vs[k]] &= ~bit
        port[k] = c

    def give_back(k: int) -> None:
        bit = 1 << port[k]
        port[k] = -1
        free[us[k]] |= bit
        free[vs[k]] |= bit
        recount(k, bit, 1)  # after: the plane is open to them again
        cnt[k] = (ok[k] & free[us[k]] & free[vs[k]]).bit_count()
        heapq.heappush(buckets[cnt[k]], k)

    seen = [-1] * e  # the step that last counted a circuit
    mark = [0]
    while True:
        if n_open == 0:
            best, best_n = list(port), e
            break
        j, jc = -1, 0
        for b in range(d + 1):
            h = buckets[b]
            while h and (port[h[0]] >= 0 or cnt[h[0]] != b):
                heapq.heappop(h)
            if h:
                j, jc = h[0], b
                break
        if jc > 0 and taken < steps:
            avail = ok[j] & free[us[j]] & free[vs[j]]
            cands = [c for c in range(d) if avail >> c & 1]
            stack.append((j, cands[1:]))
            take(j, cands[0])
            n_open -= 1
            n_col += 1
            taken += 1
            continue
        if n_col > best_n:
            best, best_n = list(port), n_col
        if taken >= steps:
            break
        # backtrack to the last circuit with another candidate
        while stack:
            edge, rest = stack.pop()
            give_back(edge)
            n_open += 1
            n_col -= 1
            fe = free[us[edge]] & free[vs[edge]]
            rest = [x for x in rest if fe >> x & 1]
            if rest:
                stack.append((edge, rest[1:]))
                take(edge, rest[0])
                n_open -= 1
                n_col += 1
                taken += 1
                break
        else:
            proven = True
            break
    return np.array(best, np.int64), proven, taken


def kempe_repair(port, u, v, allowed, m: int, d: int) -> np.ndarray:
    """Colour left-out circuits by flipping two-colour (Kempe) chains, as in Vizing's proof.

    For a left-out circuit ``x-y``, plane ``a`` free at ``x`` and ``b`` free at ``y``: the path
    from ``y`` alternating planes ``a`` and ``b`` is flipped (``a <-> b``) when it does not reach
    ``x`` and every circuit on it may take its new plane (same unit); ``a`` is then free at both
    ends. Deterministic: circuits, then plane pairs, in index order.
    """
    port = port.copy()
    inc = _incidence(port, u, v, m, d)
    todo = [(e, int(u[e]), int(v[e])) for e in np.flatnonzero(port < 0).tolist()]
    todo += [(e, y, x) for e, x, y in todo]  # each circuit from both ends
    for edge, x, y in todo:
        if port[edge] < 0:
            _kempe_one(edge, x, y, port, inc, u, v, allowed, m, d)
    return port


def shift_repair(port, u, v, allowed, m: int, d: int) -> np.ndarray:
    """Colour left-out circuits one shift deeper than :func:`kempe_repair`.

    For a left-out circuit ``e = x-y`` and a plane ``c`` allowed for it and free at ``y`` but
    taken at ``x`` by circuit ``f``: ``e`` takes ``c`` from ``f``, and ``f`` is coloured again
    directly or by one Kempe flip (from either end); otherwise the move is undone. This is the
    first step of a Vizing fan, for the case of no spare plane (``d`` planes on servers of
    degree ``d``), where one Kempe chain alone joins the two ends. Deterministic: circuits,
    ends, then planes in index order.
    """
    port = port.copy()
    inc = _incidence(port, u, v, m, d)
    for edge in np.flatnonzero(port < 0).tolist():
        x0, y0 = int(u[edge]), int(v[edge])
        for x, y in ((x0, y0), (y0, x0)):
            if port[edge] >= 0:
                break
            for c in range(d):
                f = int(inc[x, c])
                if f < 0 or inc[y, c] >= 0 or not allowed[c, edge]:
                    continue
                inc[u[f], c] = inc[v[f], c] = -1  # f gives c to edge
                port[f] = -1
                port[edge] = c
                inc[x, c] = inc[y, c] = edge
                fu, fv = int(u[f]), int(v[f])
                if _kempe_one(f, fu, fv, port, inc, u, v, allowed, m, d) or _kempe_one(
                    f, fv, fu, port, inc, u, v, allowed, m, d
                ):
                    break
                inc[x, c] = inc[y, c] = -1  # undo
                port[edge] = -1
                port[f] = c
                inc[fu, c] = inc[fv, c] = f
    return port


def ball_repair(
    port, u, v, allowed, m: int, d: int, radius: int = 2, steps: int = BALL_STEPS
) -> np.ndarray:
    """Colour left-out circuits by recolouring their neighbourhood exactly (a large
    neighbourhood search).

    For a left-out circuit, the servers within ``radius`` circuits of its ends are the ball;
    the circuits with both ends in it are uncoloured and searched again (:func:`_search`, at
    most :data:`BALL_SEARCH_STEPS` steps a ball and ``steps`` in all), each allowed only the
    colours that the circuits outside the ball leave free at both its ends. The ball's new
    colouring is kept when it holds more circuits. Deterministic: left-out circuits in index
    order, the ball's circuits in index order.
    """
    return _ball_repair(port, u, v, allowed, m, d, radius, steps)[0]


def _ball_repair(port, u, v, allowed, m: int, d: int, radius: int, steps: int):
    """:func:`ball_repair`, and the search steps it took."""
    port = port.copy()
    taken = 0
    inc = _incidence(port, u, v, m, d)
    at: list[list[int]] = [[] for _ in range(m)]
    for k, (a, b) in enumerate(zip(u.tolist(), v.tolist(), strict=True)):
        at[a].append(k)
        at[b].append(k)
    for edge in np.flatnonzero(port < 0).tolist():
        if port[edge] >= 0:
            continue
        if taken >= steps:
            break
        ball = {int(u[edge]), int(v[edge])}
        rim = list(ball)
        for _ in range(radius):
            rim = [w for s in rim for k in at[s] for w in (int(u[k] + v[k] - s),) if w not in ball]
            ball.update(rim)
        inside = sorted({k for s in ball for k in at[s] if u[k] in ball and v[k] in ball})
        sub = np.array(inside, np.int64)
        before = int((port[sub] >= 0).sum())
        for k in sub[port[sub] >= 0].tolist():
            inc[u[k], port[k]] = inc[v[k], port[k]] = -1
        free = inc < 0  # (m, d): the colours the circuits outside leave free
        servers = np.array(sorted(ball), np.int64)
        local = np.searchsorted(servers, np.stack([u[sub], v[sub]]))
        ok = allowed[:, sub] & free[u[sub]].T & free[v[sub]].T
        budget = min(BALL_SEARCH_STEPS, steps - taken)
        got, _, t = _search(local[0], local[1], ok, servers.size, d, budget)
        taken += t
        if int((got >= 0).sum()) > before:
            port[sub] = got
        for k in sub[port[sub] >= 0].tolist():
            inc[u[k], port[k]] = inc[v[k], port[k]] = k
    return port, taken


def _incidence(port, u, v, m: int, d: int) -> np.ndarray:
    """``(m, d)``: the circuit on plane ``c`` at server ``s``, ``-1`` if none."""
    inc = np.full((m, d), -1, np.int64)
    for k in np.flatnonzero(port >= 0).tolist():
        inc[u[k], port[k]] = inc[v[k], port[k]] = k
    return inc


def _kempe_one(edge: int, x: int, y: int, port, inc, u, v, allowed, m: int, d: int) -> bool:
    """Colour the left-out ``edge = x-y`` directly or by one Kempe flip from ``y``
    (:func:`kempe_repair`), updating ``port`` and ``inc`` in place; whether it was coloured."""
    for a in range(d):
        if inc[x, a] >= 0 or not allowed[a, edge]:
            continue
        if inc[y, a] < 0:
            port[edge] = a
            inc[x, a] = inc[y, a] = edge
            return True
        for b in range(d):
            if b == a or inc[y, b] >= 0:
                continue
            # the a/b chain from y: y -a- ... alternating
            chain, node, col, ok = [], y, a, True
            while True:
                k = int(inc[node, col])
                if k < 0:
                    break
                other = int(u[k] + v[k] - node)
                if other == x or not allowed[a + b - col, k] or len(chain) > 2 * m:
                    ok = False
                    break
                chain.append(k)
                node, col = other, a + b - col
            if not ok:
                continue
            for k in chain:
                inc[u[k], port[k]] = inc[v[k], port[k]] = -1
            for k in chain:
                port[k] = a + b - port[k]
            for k in chain:
                inc[u[k], port[k]] = inc[v[k], port[k]] = k
            port[edge] = a
            inc[x, a] = inc[y, a] = edge
            return True
    return False


def _greedy_extend(port, u, v, allowed, m: int, d: int) -> np.ndarray:
    """Give a plane to every left-out circuit that still has one free at both ends."""
    port = port.copy()
    free = np.ones((m, d), bool)
    k = port >= 0
    free[u[k], port[k]] = False
    free[v[k], port[k]] = False
    for edge in np.flatnonzero(port < 0).tolist():
        ok = np.flatnonzero(allowed[:, edge] & free[u[edge]] & free[v[edge]])
        if ok.size:
            c = int(ok[0])
            port[edge] = c
            free[u[edge], c] = free[v[edge], c] = False
    return port
