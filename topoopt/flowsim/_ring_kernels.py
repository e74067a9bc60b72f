"""Compiled (numba) loops of the ring search (:mod:`topoopt.flowsim.fabric_rings`).

The search counts a factor's cycles twice per exchange it tries, and the rotation-extension
reverses a path's tail at every rotation: linear passes that cost milliseconds in Python on
thousands of servers (a 2,048-server torus took two minutes to find its two rings). Here they
are compiled, with the same results:

- :func:`factor_cycles`: the connected components of the edges a factor owns (a 2-factor's
  cycles), the count :func:`topoopt.flowsim.fabric_rings._cycles` gives on the same edges;
- :func:`reverse_tail`: reverse ``path[a:b]`` and renumber the positions of its servers.

Examples
--------
>>> import numpy as np
>>> u, v = np.array([0, 1, 2, 3, 4, 5]), np.array([1, 2, 0, 4, 5, 3])
>>> int(factor_cycles(6, u, v, np.zeros(6, np.int64), 0))
2
>>> path, pos = np.array([4, 0, 1, 2, 3]), np.array([1, 2, 3, 4, 0])
>>> reverse_tail(path, pos, 2, 5)
>>> path.tolist(), pos.tolist()
([4, 0, 3, 2, 1], [1, 4, 3, 2, 0])
"""

from __future__ import annotations

import numpy as np
from numba import njit

from topoopt.numba_cache import kernel_cache

_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)

__all__ = ["factor_cycles", "reverse_tail"]


@njit(cache=_CACHE)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(cache=_CACHE)
def factor_cycles(n, u, v, owner, p):
    """Connected components of the graph on ``n`` nodes of the edges ``e`` with ``owner[e] ==
    p`` (``u[e] - v[e]``): a 2-factor's cycles, walked; any other graph's components (isolated
    nodes count one each), by union-find."""
    first = np.full(n, -1, np.int64)
    second = np.full(n, -1, np.int64)
    regular = True
    for e in range(u.shape[0]):
        if owner[e] != p:
            continue
        x = u[e]
        y = v[e]
        for a, b in ((x, y), (y, x)):
            if first[a] < 0:
                first[a] = b
            elif second[a] < 0:
                second[a] = b
            else:
                regular = False
    if regular:
        for a in range(n):
            if second[a] < 0:
                regular = False
                break
    if not regular:
        parent = np.arange(n)
        count = n
        for e in range(u.shape[0]):
            if owner[e] != p:
                continue
            ra = _find(parent, u[e])
            rb = _find(parent, v[e])
            if ra != rb:
                parent[ra] = rb
                count -= 1
        return count
    seen = np.zeros(n, np.bool_)
    count = 0
    for start in range(n):
        if seen[start]:
            continue
        count += 1
        prev = -1
        cur = start
        while not seen[cur]:
            seen[cur] = True
            nxt = first[cur] if first[cur] != prev else second[cur]
            prev = cur
            cur = nxt
    return count


@njit(cache=_CACHE)
def reverse_tail(path, pos, a, b):
    """Reverse ``path[a:b]`` in place and set ``pos[path[k]] = k`` for ``k`` in ``a..b-1``."""
    i = a
    j = b - 1
    while i < j:
        t = path[i]
        path[i] = path[j]
        path[j] = t
        i += 1
        j -= 1
    for k in range(a, b):
        pos[path[k]] = k
