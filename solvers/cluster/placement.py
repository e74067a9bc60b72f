"""Where a job goes: candidate server sets among the free servers, best first.

A job of ``m`` servers is offered windows of ``m`` consecutive free servers (in server order, so
jobs stay compact and the cluster stays unfragmented). Windows are ranked by

1. the number of OCS planes on which the window lies inside one unit (more planes whole, more
   ports of every server usable for the job's own circuits);
2. the span ``last - first`` of the window (compact first);
3. the first server (first fit).
"""

from __future__ import annotations

import numpy as np

from solvers.cluster.ocs import OcsLayer

__all__ = ["candidate_placements"]


def candidate_placements(
    free: np.ndarray, m: int, layer: OcsLayer, limit: int = 8
) -> list[np.ndarray]:
    """Up to ``limit`` server sets of size ``m`` among ``free`` servers, best first.

    Parameters
    ----------
    free : numpy.ndarray
        Free server ids.
    m : int
        Servers the job needs.
    layer : OcsLayer
    limit : int
        Candidates returned.

    Examples
    --------
    >>> layer = OcsLayer.build(8, 2, 4)
    >>> [c.tolist() for c in candidate_placements(np.arange(8), 2, layer, 3)]
    [[0, 1], [2, 3], [4, 5]]
    >>> [c.tolist() for c in candidate_placements(np.arange(8), 4, layer, 2)]
    [[0, 1, 2, 3], [2, 3, 4, 5]]
    """
    f = np.sort(np.asarray(free, np.int64))
    if m < 1 or f.size < m:
        return []
    win = np.lib.stride_tricks.sliding_window_view(f, m)  # (W, m)
    u = layer.units[:, win]  # (D, W, m)
    whole = (u.min(axis=2) == u.max(axis=2)).sum(axis=0)
    span = win[:, -1] - win[:, 0]
    order = np.lexsort((win[:, 0], span, -whole))
    return [win[k].copy() for k in order[:limit]]
