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

import math
import time
from collections.abc import Callable

import numpy as np

from topoopt.fabrics.circuits import Circuits

__all__ = ["swap_candidates", "improve_by_swaps"]


def swap_candidates(
    circuits: np.ndarray,
    n: int,
    link_util: np.ndarray,
    pair_cap: int,
    limit: int = 6,
    hot: tuple[int, int] | None = None,
    floor: Circuits | None = None,
    placement: np.ndarray | None = None,
    layer=None,
) -> list[np.ndarray]:
    """Degree-preserving 2-swaps that add a circuit on the hottest pair (module docstring).

    ``link_util`` is load / capacity of each directed link of :func:`circuit_links` order
    (``2c`` is ``u -> v`` of row ``c``). ``hot`` overrides the target pair. ``floor``: rows
    :class:`Circuits` (the pre-wired circuits) no swap may take a pair below. ``placement``:
    rows ``[u, v, ocs, count]`` placing ``circuits`` on finite-radix OCSes
    (:func:`solvers.joint.ocs_fit.placement_of`): only swaps of two circuits on one OCS are
    proposed (``{u, x}`` and ``{v, y}`` on OCS ``o`` become ``{u, v}`` and ``{x, y}`` on the
    same ports of ``o``), so every candidate fits the layer as well; every pair of circuits
    at ``u`` and ``v`` is then considered, not the four coolest of each, and when the hottest
    pair has no such move the next hottest circuit's pair is the target. With ``layer`` (the
    :class:`~topoopt.fabrics.ocs_layout.OcsLayout`) each candidate's placement, known by
    construction, is remembered (:func:`solvers.model.ocs_layers.remember_placement`).

    Examples
    --------
    Servers 0 and 1 are hot; circuit 0-2 is pre-wired, so only 0-3 can make room at server 0:

    >>> c = np.array([[0, 1, 1], [0, 2, 1], [0, 3, 1], [1, 2, 1], [1, 3, 1], [2, 3, 1]])
    >>> util = np.repeat([1.0, 0.1, 0.2, 0.3, 0.4, 0.5], 2)
    >>> [x.tolist() for x in swap_candidates(c, 4, util, 2, floor=Circuits([[0, 2, 1]], 4))]
    [[[0, 1, 2], [0, 2, 1], [1, 3, 1], [2, 3, 2]]]

    Two swaps join 0 and 1 (taking 0-2 and 1-3, or 0-3 and 1-2). With 0-2 and 1-3 on OCS 0
    but 0-3 on OCS 1 and 1-2 on OCS 2, only the first keeps every circuit on one OCS:

    >>> len(swap_candidates(c, 4, util, 2))
    2
    >>> pl = np.array([[0, 1, 0, 1], [0, 2, 0, 1], [1, 3, 0, 1], [0, 3, 1, 1], [1, 2, 2, 1],
    ...                [2, 3, 1, 1]])
    >>> [x.tolist() for x in swap_candidates(c, 4, util, 2, placement=pl)]
    [[[0, 1, 2], [0, 3, 1], [1, 2, 1], [2, 3, 2]]]
    """
    c = Circuits(circuits, n).rows
    E = c.shape[0]
    if E < 2:
        return []
    util = np.maximum(link_util[0::2], link_util[1::2])  # per circuit row
    if hot is None and placement is not None:
        # on OCSes the hottest pair may have no move (its servers share no other OCS with
        # circuits to give): the next hottest circuit's pair, and so on
        for r in sorted(range(E), key=lambda i: (-util[i], i)):
            got = swap_candidates(
                c, n, link_util, pair_cap, limit, (int(c[r, 0]), int(c[r, 1])), floor,
                placement, layer,
            )  # fmt: skip
            if got:
                return got
        return []
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
    if floor is not None and len(floor):
        keep = {(int(a), int(b)): int(k) for a, b, k in floor.tolist()}
        at_u = [i for i in at_u if c[i, 2] > keep.get((int(c[i, 0]), int(c[i, 1])), 0)]
        at_v = [i for i in at_v if c[i, 2] > keep.get((int(c[i, 0]), int(c[i, 1])), 0)]
    at_u.sort(key=lambda i: (util[i], i))
    at_v.sort(key=lambda i: (util[i], i))
    width = 4
    on: dict[tuple[int, int], set[int]] = {}
    if placement is not None:  # the OCSes each pair's circuits sit on
        for a, b, o, k in np.asarray(placement, np.int64).reshape(-1, 4).tolist():
            if k > 0:
                on.setdefault((min(a, b), max(a, b)), set()).add(o)
        width = E
    out = []
    for i in at_u[:width]:
        x = int(c[i, 0] if c[i, 1] == u else c[i, 1])
        for j in at_v[:width]:
            y = int(c[j, 0] if c[j, 1] == v else c[j, 1])
            if x == y:
                continue
            common: set[int] = set()
            if placement is not None:
                pi = on.get((int(c[i, 0]), int(c[i, 1])), set())
                common = pi & on.get((int(c[j, 0]), int(c[j, 1])), set())
                if not common:
                    continue  # no OCS holds both: the new circuits would have no common OCS
            new = c.copy()
            new[i, 2] -= 1
            new[j, 2] -= 1
            add = np.array([[u, v, 1], [min(x, y), max(x, y), 1]], np.int64)
            cand = Circuits(np.vstack([new, add]), n).rows
            if cand[:, 2].max() > pair_cap:
                continue
            if layer is not None and common:
                _remember_swap(cand, layer, placement, (c[i], c[j]), (u, v, x, y), min(common))
            out.append(cand)
            if len(out) >= limit:
                return out
    return out


def _remember_swap(cand, layer, placement, removed, ends, o: int) -> None:
    """The placement of a swap on OCS ``o``: one circuit of each removed pair taken off ``o``,
    ``{u, v}`` and ``{x, y}`` put on it (remembered for the layer)."""
    from solvers.model.ocs_layers import remember_placement

    pl = np.asarray(placement, np.int64).reshape(-1, 4).copy()
    for a, b, _ in removed:
        hit = np.flatnonzero((pl[:, 0] == a) & (pl[:, 1] == b) & (pl[:, 2] == o) & (pl[:, 3] > 0))
        pl[hit[0], 3] -= 1
    u, v, x, y = ends
    add = np.array([[min(u, v), max(u, v), o, 1], [min(x, y), max(x, y), o, 1]], np.int64)
    remember_placement(cand, layer, np.vstack([pl[pl[:, 3] > 0], add]))


def improve_by_swaps(
    circuits: np.ndarray,
    n: int,
    pair_cap: int,
    evaluate: Callable[[np.ndarray], tuple[float, np.ndarray]],
    current: tuple[float, np.ndarray],
    deadline: float = math.inf,
    max_rounds: int = 50,
    on_improve: Callable[[np.ndarray, float], None] | None = None,
    floor: Circuits | None = None,
    keep_going: Callable[[], bool] | None = None,
    placement: Callable[[np.ndarray], np.ndarray | None] | None = None,
    layer=None,
) -> tuple[np.ndarray, float, int]:
    """First-improvement local search over :func:`swap_candidates`.

    ``evaluate(circuits) -> (objective, directed link utilisation)`` (``inf`` when infeasible);
    ``current`` is the value and utilisation of ``circuits``. Stops when no move improves,
    after ``max_rounds`` improvements, when ``keep_going()`` (asked before every evaluation; a
    deterministic budget such as the driver's work limit) returns False, or at ``deadline``
    (``time.perf_counter()`` seconds, a wall-clock cap). Returns the best circuits, their
    objective and the number of evaluations. ``floor``: pre-wired circuits no swap removes
    (see :func:`swap_candidates`). ``placement(circuits)``: their rows ``[u, v, ocs, count]``
    on finite-radix OCSes (None: they do not fit, the search stops); every move then swaps two
    circuits of one OCS (``placement`` of :func:`swap_candidates`).

    Examples
    --------
    A 4-cycle with two ports per server, its circuit 0-1 the hottest; the evaluator prefers
    two circuits on 0-1. One swap (0-2 and 1-3 become 0-1 and 2-3) finds it:

    >>> def evaluate(c):
    ...     return (1.0 if [0, 1, 2] in c.tolist() else 2.0), np.ones(2 * len(c))
    >>> ring = [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]]
    >>> util = np.repeat([1.0, 0.1, 0.1, 0.1], 2)
    >>> c, v, k = improve_by_swaps(ring, 4, 2, evaluate, (2.0, util))
    >>> c.tolist(), v, k
    ([[0, 1, 2], [2, 3, 2]], 1.0, 1)
    >>> improve_by_swaps(ring, 4, 2, evaluate, (2.0, util), keep_going=lambda: False)[2]
    0
    """
    best_c = Circuits(circuits, n).rows
    best_v, util = current
    evals = 0
    for _ in range(max_rounds):
        if time.perf_counter() >= deadline or (keep_going is not None and not keep_going()):
            break
        improved = False
        placed = None if placement is None else placement(best_c)
        if placement is not None and placed is None:
            break
        for cand in swap_candidates(
            best_c, n, util, pair_cap, floor=floor, placement=placed, layer=layer
        ):
            if time.perf_counter() >= deadline or (keep_going is not None and not keep_going()):
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
