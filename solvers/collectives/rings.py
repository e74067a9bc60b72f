"""The best ring a ring algorithm could pick on a small fabric (the baseline Blink is judged by).

NCCL builds its rings over the links it finds (NVLink rings on a DGX-1); on a partial
allocation no ring may use all links. :func:`best_ring` enumerates every ring order of ``n <= 9``
members (``(n-1)!/2`` undirected rings) and scores each by the fluid ring time on the overlay:
every ring edge carries ``f * S`` bytes (``f = (n-1)/n`` for all-gather and reduce-scatter,
``2(n-1)/n`` for all-reduce; a broadcast is the chain from the root, ``S`` per edge), so the time
is the busiest link's bytes over its capacity. ``both_directions`` runs the ring and its reverse
with half the data each (two NCCL channels), which uses both directions of every ring link.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from solvers.collectives.overlay import Overlay
from traffic.errors import InputError

__all__ = ["RingChoice", "best_ring", "MAX_RING_SEARCH"]

MAX_RING_SEARCH = 9
"""Largest member count :func:`best_ring` enumerates."""


@dataclass(frozen=True)
class RingChoice:
    """The best ring order found and its fluid time (seconds, latency not included)."""

    order: tuple[int, ...]
    seconds: float
    both_directions: bool
    rings_tried: int


def best_ring(
    ov: Overlay, collective: str, size: float, *, both_directions: bool = False, root: int = 0
) -> RingChoice:
    """Exhaustive search of the best ring order (module docstring).

    Examples
    --------
    On a 4-server ring of 1 GB/s links the best ring is the physical one: all-gather of 1 MB in
    ``3/4 * 1e6 / 1e9`` s one way, half that over both directions.

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import overlay
    >>> ov = overlay(torus("4", 1e9))
    >>> r = best_ring(ov, "all-gather", 1e6)
    >>> r.order, round(r.seconds * 1e6, 6)
    ((0, 1, 2, 3), 750.0)
    >>> round(best_ring(ov, "all-gather", 1e6, both_directions=True).seconds * 1e6, 6)
    375.0
    """
    n = ov.n
    if n > MAX_RING_SEARCH:
        raise InputError("servers", n, f"at most {MAX_RING_SEARCH} for the exhaustive ring search")
    factor = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0}
    if collective == "broadcast":
        per_edge = size
    elif collective in factor:
        per_edge = factor[collective] * (n - 1) / n * size
    else:
        raise InputError(
            "collective", collective, "all-gather, reduce-scatter, all-reduce, broadcast"
        )
    if both_directions and collective == "broadcast":
        raise InputError("both_directions", True, "False for a broadcast (a chain from the root)")
    rest = [v for v in range(n) if v != root]
    perms = np.array(list(itertools.permutations(rest)), np.int64)
    if collective != "broadcast":  # a ring and its reverse are the same undirected ring
        perms = perms[perms[:, 0] < perms[:, -1]] if n > 2 else perms
    orders = np.column_stack([np.full(perms.shape[0], root), perms])
    nxt = np.roll(orders, -1, axis=1)
    if collective == "broadcast":  # the chain root -> ... -> last (no closing edge)
        arcs = ov.arc(orders[:, :-1], nxt[:, :-1])
    else:
        arcs = ov.arc(orders, nxt)
    share = 0.5 if both_directions else 1.0
    m = np.zeros((ov.n_arcs, orders.shape[0]))
    cols = np.repeat(np.arange(orders.shape[0]), arcs.shape[1])
    np.add.at(m, (arcs.ravel(), cols), share * per_edge)
    if both_directions:
        np.add.at(m, (ov.arc(nxt, orders).ravel(), cols), share * per_edge)
    t = ((ov.load @ m) / ov.capacity[:, None]).max(axis=0)
    i = int(np.argmin(t))
    return RingChoice(tuple(int(v) for v in orders[i]), float(t[i]), both_directions, len(t))
