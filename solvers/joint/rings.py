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

__all__ = ["hamiltonian_cycles", "stride_rings", "circuit_rings", "ring_candidates"]


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


def circuit_rings(members, circuits: Circuits, n: int, limit: int = 8) -> list[np.ndarray]:
    """Up to ``limit`` directed rings through ``members`` that follow circuits.

    Greedy: the members' induced circuit graph is walked from each start, always to the
    lowest-numbered unvisited neighbour with the fewest unvisited neighbours (Warnsdorff's rule);
    a walk that closes into a Hamiltonian cycle of circuits is kept with its reverse. Circuits
    already used by a kept cycle are avoided while an alternative exists, so cycles tend to be
    edge-disjoint (each carries two directed rings at full rate).

    Examples
    --------
    >>> c = Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]], 4)
    >>> [r.tolist() for r in circuit_rings([0, 1, 2, 3], c, 4)]
    [[0, 1, 2, 3], [0, 3, 2, 1]]
    """
    m = np.asarray(members, np.int64)
    g = m.size
    if g < 3:
        return [m.copy()]
    inside = np.zeros(n, bool)
    inside[m] = True
    c = circuits.rows
    keep = inside[c[:, 0]] & inside[c[:, 1]]
    adj: dict[int, list[int]] = {int(u): [] for u in m}
    for u, v, _ in c[keep].tolist():
        adj[u].append(v)
        adj[v].append(u)
    used: set[tuple[int, int]] = set()
    found: list[np.ndarray] = []
    seen: set[bytes] = set()
    for start in m.tolist():
        if len(found) >= limit:
            break
        order = [start]
        visited = {start}
        while len(order) < g:
            cur = order[-1]
            nxt = [v for v in adj[cur] if v not in visited]
            if not nxt:
                break
            fresh = [v for v in nxt if (min(cur, v), max(cur, v)) not in used] or nxt
            fresh.sort(key=lambda v: (sum(1 for w in adj[v] if w not in visited), v))
            order.append(fresh[0])
            visited.add(fresh[0])
        if len(order) == g and start in adj[order[-1]]:
            o = np.asarray(order, np.int64)
            k = int(np.argmin(o))
            o = np.roll(o, -k)
            key = o.tobytes()
            if key in seen:
                continue
            rev = np.concatenate([o[:1], o[1:][::-1]])
            seen.add(key)
            seen.add(rev.tobytes())
            found += [o, rev]
            for a, b in zip(order, order[1:] + order[:1], strict=True):
                used.add((min(a, b), max(a, b)))
    return found[:limit] if found else []


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
