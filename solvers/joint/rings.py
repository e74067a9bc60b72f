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

from topoopt.fabrics.circuits import Circuits

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
    gid = m.tolist()
    nb: list[list[int]] = [[] for _ in range(g)]
    for u, v in zip(a[keep].tolist(), b[keep].tolist(), strict=True):
        nb[u].append(v)
        nb[v].append(u)
    deg0 = [len(x) for x in nb]
    used: set[int] = set()
    found: list[np.ndarray] = []
    seen: set[bytes] = set()
    steps = 0
    starts = g if max_starts is None else min(g, max(int(max_starts), 0))
    for start in range(starts):
        if len(found) >= limit:
            break
        unv = deg0.copy()  # unvisited neighbours of each member
        vis = [False] * g
        vis[start] = True
        for w in nb[start]:
            unv[w] -= 1
        order = [start]
        steps += deg0[start]
        while len(order) < g:
            cur = order[-1]
            nxt = [v for v in nb[cur] if not vis[v]]
            steps += deg0[cur]
            if not nxt:
                break
            fresh = [v for v in nxt if (min(cur, v) * g + max(cur, v)) not in used] or nxt
            pick = min(fresh, key=lambda v: (unv[v], gid[v]))
            order.append(pick)
            vis[pick] = True
            for w in nb[pick]:
                unv[w] -= 1
            steps += deg0[pick]
        if len(order) == g and start in nb[order[-1]]:
            o = m[np.asarray(order, np.int64)]
            k = int(np.argmin(o))
            o = np.roll(o, -k)
            key = o.tobytes()
            if key in seen:
                continue
            rev = np.concatenate([o[:1], o[1:][::-1]])
            seen.add(key)
            seen.add(rev.tobytes())
            found += [o, rev]
            for x, y in zip(order, order[1:] + order[:1], strict=True):
                used.add(min(x, y) * g + max(x, y))
    return (found[:limit] if found else []), steps


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
