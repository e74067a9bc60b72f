"""Ring orders for the mutable all-reduce groups: candidates the routing LP mixes.

A ring over a group is a directed cyclic order of its members; the routing LP
(:func:`solvers.routing_lp.route_phase`) chooses the fraction of the group's bytes each candidate
ring carries. Candidates come from three places:

- :func:`hamiltonian_cycles`: every directed ring (``(g-1)!`` of them), for exact solves on tiny
  groups;
- :func:`stride_rings`: the rings ``i -> i + p`` over the group's positions for strides ``p``
  coprime with ``g`` (TotientPerms), both directions;
- :func:`circuit_rings`: rings that follow circuits of a given design (a cycle of circuits
  through every member carries the ring at one hop per step), found greedily.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numba import njit

from topoopt.fabrics.circuits import Circuits
from topoopt.numba_cache import kernel_cache

__all__ = ["hamiltonian_cycles", "stride_rings", "circuit_rings", "walk_rings", "ring_candidates"]


def hamiltonian_cycles(members) -> list[np.ndarray]:
    """Every directed ring over ``members`` (first member fixed): ``(g-1)!`` orders.

    Examples
    --------
    >>> [r.tolist() for r in hamiltonian_cycles([4, 7, 9])]
    [[4, 7, 9], [4, 9, 7]]
    """
    m = np.asarray(members, np.int64)
    if m.size <= 2:
        return [m.copy()]
    return [np.array((m[0],) + p, np.int64) for p in itertools.permutations(m[1:].tolist())]


def stride_rings(members, strides) -> list[np.ndarray]:
    """Rings ``position i -> i + p`` (and reversed) for each stride ``p`` coprime with ``g``.

    Examples
    --------
    >>> [r.tolist() for r in stride_rings([0, 1, 2, 3, 4], [2])]
    [[0, 2, 4, 1, 3], [0, 3, 1, 4, 2]]
    """
    m = np.asarray(members, np.int64)
    g = m.size
    out = []
    for p in strides:
        p = int(p) % g
        if g < 2 or math.gcd(p, g) != 1:
            continue
        pos = (np.arange(g) * p) % g
        out.append(m[pos])
        out.append(m[(-np.arange(g) * p) % g])
    return out


def circuit_rings(
    members, circuits: Circuits, n: int, limit: int = 8, max_starts: int | None = None
) -> list[np.ndarray]:
    """Up to ``limit`` directed rings through ``members`` that follow circuits.

    Greedy: the members' induced circuit graph is walked from each start, always to the
    lowest-numbered unvisited neighbour with the fewest unvisited neighbours (Warnsdorff's rule);
    a walk that closes into a Hamiltonian cycle of circuits is kept with its reverse. Circuits
    already used by a kept cycle are avoided while an alternative exists, so cycles tend to be
    edge-disjoint (each carries two directed rings at full rate). ``max_starts`` (None: every
    member) walks from at most that many starts, the members in order
    (:func:`walk_rings`, which also counts the work).

    Examples
    --------
    >>> c = Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]], 4)
    >>> [r.tolist() for r in circuit_rings([0, 1, 2, 3], c, 4)]
    [[0, 1, 2, 3], [0, 3, 2, 1]]
    """
    return walk_rings(members, circuits, n, limit, max_starts)[0]


def walk_rings(
    members, circuits: Circuits, n: int, limit: int = 8, max_starts: int | None = None
) -> tuple[list[np.ndarray], int]:
    """:func:`circuit_rings` and its deterministic work: the neighbour-list entries the walks
    read (each step reads the current member's list and, once visited, updates its neighbours'
    counts of unvisited neighbours; linear in the walk, where re-counting them at every step
    was quadratic in the degree). ``max_starts`` caps the walks (None: one from every member).
    The walks run compiled (:func:`_walk_kernel`; the plain-Python form is the oracle of
    ``tests/solvers/test_joint_search_work.py``): 50x faster on 512 members.

    Examples
    --------
    >>> c = Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]], 4)
    >>> rings, steps = walk_rings([0, 1, 2, 3], c, 4)
    >>> len(rings), steps
    (2, 56)
    """
    m = np.asarray(members, np.int64)
    g = m.size
    if g < 3:
        return [m.copy()], 0
    inside = np.full(n, -1, np.int64)
    inside[m] = np.arange(g)
    c = circuits.rows
    a, b = inside[c[:, 0]], inside[c[:, 1]]
    keep = (a >= 0) & (b >= 0)
    a, b = a[keep], b[keep]
    # CSR of the induced circuit graph in local ids, each list in circuit-row order
    ends = np.concatenate([np.stack([a, b], 1), np.stack([b, a], 1)], 1).reshape(-1, 2)
    order = np.argsort(ends[:, 0], kind="stable")
    ptr = np.zeros(g + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(ends[:, 0], minlength=g))
    nbr = np.ascontiguousarray(ends[order, 1])
    starts = g if max_starts is None else min(g, max(int(max_starts), 0))
    cycles, k, steps = _walk_kernel(ptr, nbr, m, int(limit), starts)
    found: list[np.ndarray] = []
    for o in cycles[:k]:
        found += [o.copy(), np.concatenate([o[:1], o[1:][::-1]])]
    return found[:limit], int(steps)


_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)


@njit(cache=_CACHE)
def _walk_kernel(ptr, nbr, gid, limit, starts):  # pragma: no cover - compiled
    """Compiled walks of :func:`walk_rings` (local ids ``0..g-1``, neighbour lists ``ptr`` /
    ``nbr``, global ids ``gid``): the distinct cycles found (rotated to their smallest global
    id first; each stands for itself and its reverse), how many, and the steps."""
    g = ptr.size - 1
    ncyc_max = (limit + 1) // 2
    cycles = np.empty((max(ncyc_max, 1), g), np.int64)
    k = 0
    deg0 = ptr[1:] - ptr[:-1]
    used = np.zeros(nbr.size, np.bool_)  # per directed list entry, both ends marked
    unv = np.empty(g, np.int64)
    vis = np.zeros(g, np.bool_)
    order = np.empty(g, np.int64)
    canon = np.empty(g, np.int64)
    steps = 0
    for start in range(starts):
        if 2 * k >= limit:
            break
        unv[:] = deg0
        vis[:] = False
        vis[start] = True
        for j in range(ptr[start], ptr[start + 1]):
            unv[nbr[j]] -= 1
        order[0] = start
        ln = 1
        steps += deg0[start]
        while ln < g:
            cur = order[ln - 1]
            steps += deg0[cur]
            any_next = False
            any_fresh = False
            for j in range(ptr[cur], ptr[cur + 1]):
                if not vis[nbr[j]]:
                    any_next = True
                    if not used[j]:
                        any_fresh = True
            if not any_next:
                break
            pick = -1
            for j in range(ptr[cur], ptr[cur + 1]):
                v = nbr[j]
                if vis[v] or (any_fresh and used[j]):
                    continue
                if pick < 0 or unv[v] < unv[pick] or (unv[v] == unv[pick] and gid[v] < gid[pick]):
                    pick = v
            order[ln] = pick
            ln += 1
            vis[pick] = True
            for j in range(ptr[pick], ptr[pick + 1]):
                unv[nbr[j]] -= 1
            steps += deg0[pick]
        if ln < g:
            continue
        last = order[g - 1]
        closes = False
        for j in range(ptr[last], ptr[last + 1]):
            if nbr[j] == start:
                closes = True
        if not closes:
            continue
        r = 0
        for i in range(1, g):
            if gid[order[i]] < gid[order[r]]:
                r = i
        for i in range(g):
            canon[i] = gid[order[(r + i) % g]]
        dup = False
        for q in range(k):
            same, rev = True, True
            for i in range(g):
                if cycles[q, i] != canon[i]:
                    same = False
                if cycles[q, (g - i) % g] != canon[i]:
                    rev = False
            if same or rev:
                dup = True
                break
        if dup:
            continue
        cycles[k, :] = canon
        k += 1
        for i in range(g):
            x, y = order[i], order[(i + 1) % g]
            for j in range(ptr[x], ptr[x + 1]):
                if nbr[j] == y:
                    used[j] = True
            for j in range(ptr[y], ptr[y + 1]):
                if nbr[j] == x:
                    used[j] = True
    return cycles, k, steps


def ring_candidates(
    members, circuits: Circuits | None = None, n: int | None = None, strides=(1,)
) -> list[np.ndarray]:
    """Candidate rings for one group: rings along circuits (when given) plus stride rings.

    Duplicates are removed; the order is deterministic.
    """
    out: list[np.ndarray] = []
    if circuits is not None:
        out += circuit_rings(members, circuits, int(n))
    out += stride_rings(members, strides)
    if not out:
        out = [np.asarray(members, np.int64)]
    uniq: dict[bytes, np.ndarray] = {}
    for r in out:
        uniq.setdefault(np.asarray(r, np.int64).tobytes(), np.asarray(r, np.int64))
    return list(uniq.values())
