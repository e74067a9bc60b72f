"""Weighted path sets: how traffic between node pairs is spread over directed links.

A :class:`PathSet` is the one routing format shared by the fabrics (shortest paths, ECMP,
dimension order, host forwarding), the solvers (optimised weighted paths) and the flow model,
which consumes it directly. It is stored in compressed-sparse-row form:

- commodity ``k`` is the ordered node pair ``(src[k], dst[k])``;
- its paths are ``commodity_ptr[k] : commodity_ptr[k+1]`` (indices into the path arrays);
- path ``p`` crosses the directed links ``path_links[path_ptr[p] : path_ptr[p+1]]`` in order and
  carries the fraction ``weight[p]`` of the commodity (weights of a commodity sum to 1).

Link ids are indices into the owning fabric's directed link table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from topoopt.csr import PairIndex
from traffic.errors import InputError

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built (a light start-up)
    import scipy.sparse as sp

__all__ = ["PathSet"]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(lo[i], hi[i])`` for all ``i``, vectorised."""
    lens = hi - lo
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return starts + np.arange(total)


@dataclass(frozen=True, eq=False)
class PathSet:
    """Weighted paths for a set of commodities (ordered node pairs), in CSR form.

    Attributes
    ----------
    src, dst : numpy.ndarray
        ``int64`` node ids of each commodity, shape ``(K,)``.
    commodity_ptr : numpy.ndarray
        ``int64``, shape ``(K+1,)``: the paths of commodity ``k`` are
        ``commodity_ptr[k] : commodity_ptr[k+1]``.
    path_ptr : numpy.ndarray
        ``int64``, shape ``(P+1,)``: the links of path ``p`` are
        ``path_links[path_ptr[p] : path_ptr[p+1]]``.
    path_links : numpy.ndarray
        ``int64`` directed link ids, in path order.
    weight : numpy.ndarray
        ``float64``, shape ``(P,)``: fraction of the commodity on each path.
    """

    src: np.ndarray
    dst: np.ndarray
    commodity_ptr: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    weight: np.ndarray

    def __post_init__(self) -> None:
        for name in ("src", "dst", "commodity_ptr", "path_ptr", "path_links"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), np.int64))
        object.__setattr__(self, "weight", np.ascontiguousarray(self.weight, np.float64))
        k, p = self.src.shape[0], self.weight.shape[0]
        if self.dst.shape != (k,) or self.commodity_ptr.shape != (k + 1,):
            raise InputError("paths.commodity_ptr", self.commodity_ptr.shape, f"shape ({k + 1},)")
        if self.path_ptr.shape != (p + 1,) or self.commodity_ptr[-1] != p:
            raise InputError("paths.path_ptr", self.path_ptr.shape, f"shape ({p + 1},)")
        if self.path_ptr[-1] != self.path_links.shape[0]:
            raise InputError("paths.path_links", self.path_links.shape, "path_ptr[-1] links")

    # ------------------------------------------------------------------ sizes
    @property
    def n_commodities(self) -> int:
        return int(self.src.shape[0])

    @property
    def n_paths(self) -> int:
        return int(self.weight.shape[0])

    def path_lengths(self) -> np.ndarray:
        """Hop count of every path."""
        return np.diff(self.path_ptr)

    def path_commodity(self) -> np.ndarray:
        """Commodity index of every path."""
        return np.repeat(np.arange(self.n_commodities), np.diff(self.commodity_ptr))

    # ------------------------------------------------------------------ look-ups
    def index(self, src: np.ndarray, dst: np.ndarray, n_nodes: int) -> np.ndarray:
        """Commodity index of each ``(src, dst)`` pair (vectorised); ``-1`` where absent."""
        return PairIndex(self.src, self.dst, n_nodes)(src, dst)

    def link_incidence(self, n_links: int) -> sp.csr_matrix:
        """Sparse ``(P, n_links)`` matrix with 1 where path ``p`` crosses link ``l``."""
        import scipy.sparse as sp

        rows = np.repeat(np.arange(self.n_paths), self.path_lengths())
        data = np.ones(rows.shape[0])
        return sp.csr_matrix((data, (rows, self.path_links)), shape=(self.n_paths, n_links))

    def link_loads(self, commodity_bytes: np.ndarray, n_links: int) -> np.ndarray:
        """Bytes each directed link carries when commodity ``k`` sends ``commodity_bytes[k]``."""
        path_bytes = np.asarray(commodity_bytes, np.float64)[self.path_commodity()] * self.weight
        link_bytes = np.repeat(path_bytes, self.path_lengths())
        return np.bincount(self.path_links, weights=link_bytes, minlength=n_links)

    def take(self, commodities: np.ndarray) -> PathSet:
        """The sub-PathSet of the given commodity indices (in that order)."""
        k = np.asarray(commodities, np.int64).ravel()
        n_paths = np.diff(self.commodity_ptr)[k]
        path_ids = _ranges(self.commodity_ptr[k], self.commodity_ptr[k + 1])
        lens = np.diff(self.path_ptr)[path_ids]
        link_ids = _ranges(self.path_ptr[path_ids], self.path_ptr[path_ids + 1])
        return PathSet(
            src=self.src[k],
            dst=self.dst[k],
            commodity_ptr=np.concatenate([[0], np.cumsum(n_paths)]),
            path_ptr=np.concatenate([[0], np.cumsum(lens)]),
            path_links=self.path_links[link_ids],
            weight=self.weight[path_ids],
        )

    @staticmethod
    def concat(parts: list[PathSet]) -> PathSet:
        """One PathSet holding the commodities of ``parts`` in order (same link numbering)."""
        parts = list(parts)
        c_off = np.cumsum([0] + [p.n_paths for p in parts[:-1]])
        l_off = np.cumsum([0] + [p.path_links.shape[0] for p in parts[:-1]])
        return PathSet(
            src=np.concatenate([p.src for p in parts]),
            dst=np.concatenate([p.dst for p in parts]),
            commodity_ptr=np.concatenate(
                [[0]] + [p.commodity_ptr[1:] + o for p, o in zip(parts, c_off, strict=True)]
            ),
            path_ptr=np.concatenate(
                [[0]] + [p.path_ptr[1:] + o for p, o in zip(parts, l_off, strict=True)]
            ),
            path_links=np.concatenate([p.path_links for p in parts]),
            weight=np.concatenate([p.weight for p in parts]),
        )

    def with_fallback(self, fallback: PathSet, n_nodes: int) -> PathSet:
        """These commodities, plus those of ``fallback`` whose pair is not here."""
        missing = self.index(fallback.src, fallback.dst, n_nodes) < 0
        return PathSet.concat([self, fallback.take(np.flatnonzero(missing))])

    def mean_hops(self) -> np.ndarray:
        """Weighted mean hop count of each commodity."""
        w = self.weight * self.path_lengths()
        return np.add.reduceat(w, self.commodity_ptr[:-1]) if self.n_paths else np.zeros(0)
