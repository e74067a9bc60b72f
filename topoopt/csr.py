"""Small vectorised tricks on CSR arrays and sorted keys, shared by the flow model, the fabrics
and the solvers (one copy each).

- :func:`ranges`: the concatenated ``arange(lo[i], hi[i])``;
- :func:`gather_rows`: the element indices ``ptr[r]:ptr[r+1]`` of chosen CSR rows;
- :class:`PairIndex`: a vectorised ``(u, v) -> id`` look-up over integer pairs, by a sorted key.

Examples
--------
>>> ranges([0, 5], [2, 8]).tolist()
[0, 1, 5, 6, 7]
>>> gather_rows(np.array([0, 2, 2, 5]), [2, 0]).tolist()
[2, 3, 4, 0, 1]
>>> PairIndex([0, 1, 2], [1, 0, 0], 3)([1, 2, 0], [0, 1, 1]).tolist()
[1, -1, 0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["ranges", "gather_rows", "PairIndex"]


def ranges(lo, hi) -> np.ndarray:
    """Concatenated ``arange(lo[i], hi[i])`` (``int64``; empty ranges contribute nothing)."""
    lo = np.asarray(lo, np.int64)
    lens = np.asarray(hi, np.int64) - lo
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    return np.repeat(lo - (np.cumsum(lens) - lens), lens) + np.arange(total, dtype=np.int64)


def gather_rows(ptr: np.ndarray, rows) -> np.ndarray:
    """Concatenated element indices ``ptr[r]:ptr[r+1]`` of the CSR rows ``rows``, in order."""
    rows = np.asarray(rows, np.int64)
    return ranges(ptr[rows], ptr[rows + 1])


class PairIndex:
    """Id of each integer pair ``(src[i], dst[i])`` by a sorted key ``src * base + dst``.

    Calling it with arrays ``u, v`` returns, for each ``(u[j], v[j])``, the first ``i`` (in
    ``src`` order) with that pair, ``-1`` where there is none. ``base`` must exceed every id.
    """

    __slots__ = ("base", "_skey", "_order")

    def __init__(self, src, dst, base: int):
        self.base = int(base)
        key = np.asarray(src, np.int64) * self.base + np.asarray(dst, np.int64)
        self._order = np.argsort(key, kind="stable")
        self._skey = key[self._order]

    def __call__(self, u, v) -> np.ndarray:
        want = np.asarray(u, np.int64) * self.base + np.asarray(v, np.int64)
        out = np.full(want.shape, -1, np.int64)
        if self._skey.size == 0:
            return out
        pos = np.clip(np.searchsorted(self._skey, want), 0, self._skey.size - 1)
        hit = self._skey[pos] == want
        out[hit] = self._order[pos[hit]]
        return out
