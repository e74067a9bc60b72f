"""Degree-preserving moves on a circuit multigraph, guided by link loads.

- :func:`fill_free_ports`: wire pairs of servers that still have free ports (capacity never hurts
  under the congestion objective), heaviest traffic first.
- :func:`swap_candidates`: 2-swaps that put a new circuit on the hottest server pair. For the
  most loaded directed link ``u -> v`` (or the heaviest pair with no circuit), circuits
  ``{u, x}`` and ``{v, y}`` are replaced by ``{u, v}`` and ``{x, y}``; every server keeps its
  port count. The coolest circuits are tried first.
- :func:`improve_by_swaps`: first-improvement local search over those moves with any evaluator
  (the routing LP in the driver), until the deadline or no move improves.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from solvers.congestion import canonical_circuits, circuit_degrees

__all__ = ["fill_free_ports", "swap_candidates", "improve_by_swaps"]


def fill_free_ports(circuits, n: int, d: int, demand: sp.spmatrix, pair_cap: int) -> np.ndarray:
    """Add circuits between servers with free ports, heaviest symmetric demand first.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> fill_free_ports([[0, 1, 1]], 4, 1, sp.csr_matrix((4, 4)), 1).tolist()
    [[0, 1, 1], [2, 3, 1]]
    """
    c = canonical_circuits(circuits, n)
    free = d - circuit_degrees(c, n)
    if free.sum() < 2:
        return c
    dem = sp.csr_matrix(demand)
    count = {(int(u), int(v)): int(k) for u, v, k in c}
    added = []
    while True:
        idx = np.flatnonzero(free > 0)
        if idx.size < 2:
            break
        sub = dem[idx][:, idx].toarray()
        w = sub + sub.T
        ok = np.triu(np.ones((idx.size, idx.size), bool), 1)
        for (a, b), k in count.items():
            if k >= pair_cap and free[a] > 0 and free[b] > 0:
                ia, ib = np.searchsorted(idx, a), np.searchsorted(idx, b)
                ok[ia, ib] = False
        if not ok.any():
            break
        score = np.where(ok, w, -np.inf)
        flat = int(np.argmax(score))  # first maximum: lowest (a, b) among ties
        a, b = int(idx[flat // idx.size]), int(idx[flat % idx.size])
        count[(a, b)] = count.get((a, b), 0) + 1
        free[a] -= 1
        free[b] -= 1
        added.append([a, b, 1])
    if not added:
        return c
    return canonical_circuits(np.vstack([c, np.asarray(added, np.int64)]), n)


def swap_candidates(
    circuits: np.ndarray,
    n: int,
    link_util: np.ndarray,
    pair_cap: int,
    limit: int = 6,
    hot: tuple[int, int] | None = None,
) -> list[np.ndarray]:
    """Degree-preserving 2-swaps that add a circuit on the hottest pair (module docstring).

    ``link_util`` is load / capacity of each directed link of :func:`circuit_links` order
    (``2c`` is ``u -> v`` of row ``c``). ``hot`` overrides the target pair.
    """
    c = canonical_circuits(circuits, n)
    E = c.shape[0]
    if E < 2:
        return []
    util = np.maximum(link_util[0::2], link_util[1::2])  # per circuit row
    if hot is None:
        r = int(np.argmax(util))
        u, v = int(c[r, 0]), int(c[r, 1])
    else:
        u, v = min(hot), max(hot)
    row_of = {(int(a), int(b)): i for i, (a, b, _) in enumerate(c)}
    if (u, v) in row_of and c[row_of[(u, v)], 2] >= pair_cap:
        return []
    at_u = [i for i in range(E) if u in (c[i, 0], c[i, 1]) and v not in (c[i, 0], c[i, 1])]
    at_v = [i for i in range(E) if v in (c[i, 0], c[i, 1]) and u not in (c[i, 0], c[i, 1])]
    at_u.sort(key=lambda i: (util[i], i))
    at_v.sort(key=lambda i: (util[i], i))
    out = []
    for i in at_u[:4]:
        x = int(c[i, 0] if c[i, 1] == u else c[i, 1])
        for j in at_v[:4]:
            y = int(c[j, 0] if c[j, 1] == v else c[j, 1])
            if x == y:
                continue
            new = c.copy()
            new[i, 2] -= 1
            new[j, 2] -= 1
            add = np.array([[u, v, 1], [min(x, y), max(x, y), 1]], np.int64)
            cand = canonical_circuits(np.vstack([new, add]), n)
            if cand[:, 2].max() > pair_cap:
                continue
            out.append(cand)
            if len(out) >= limit:
                return out
    return out


def improve_by_swaps(
    circuits: np.ndarray,
    n: int,
    pair_cap: int,
    evaluate: Callable[[np.ndarray], tuple[float, np.ndarray]],
    current: tuple[float, np.ndarray],
    deadline: float,
    max_rounds: int = 50,
    on_improve: Callable[[np.ndarray, float], None] | None = None,
) -> tuple[np.ndarray, float, int]:
    """First-improvement local search over :func:`swap_candidates`.

    ``evaluate(circuits) -> (objective, directed link utilisation)`` (``inf`` when infeasible);
    ``current`` is the value and utilisation of ``circuits``. Stops at ``deadline``
    (``time.perf_counter()`` seconds) or when no move improves. Returns the best circuits, their
    objective and the number of evaluations.
    """
    best_c = canonical_circuits(circuits, n)
    best_v, util = current
    evals = 0
    for _ in range(max_rounds):
        if time.perf_counter() >= deadline:
            break
        improved = False
        for cand in swap_candidates(best_c, n, util, pair_cap):
            if time.perf_counter() >= deadline:
                break
            v, u2 = evaluate(cand)
            evals += 1
            if v < best_v * (1 - 1e-9):
                best_c, best_v, util = cand, v, u2
                improved = True
                if on_improve is not None:
                    on_improve(best_c, best_v)
                break
        if not improved:
            break
    return best_c, best_v, evals
