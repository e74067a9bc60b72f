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
    w = f.size - m + 1  # window k is f[k : k + m]
    u = layer.units[:, f]  # (D, F)
    # a window is whole on a plane iff the unit does not change between consecutive members
    steps = np.zeros((u.shape[0], f.size), np.int64)
    steps[:, 1:] = np.cumsum(u[:, 1:] != u[:, :-1], axis=1)
    whole = (steps[:, m - 1 :] == steps[:, :w]).sum(axis=0)
    first = f[:w]
    span = f[m - 1 :] - first
    order = np.lexsort((first, span, -whole))
    return [f[k : k + m].copy() for k in order[:limit]]
