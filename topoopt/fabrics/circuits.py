"""Optical circuits as one frozen canonical value: a multigraph on ``n`` servers.

A :class:`Circuits` holds ``int64 (E, 3)`` rows ``[u, v, count]`` with ``u < v``, each pair once
(parallel circuits merged into its count), sorted by ``(u, v)``, every count ``>= 1``. It is built
once, at the boundary, from whatever a caller has (rows with or without a count, a numpy array, a
networkx (multi)graph, another :class:`Circuits`), and every receiver trusts it: the views
(:meth:`~Circuits.degrees`, :meth:`~Circuits.links`, :meth:`~Circuits.link_of`,
:meth:`~Circuits.hop_distances`, :meth:`~Circuits.connected`, :meth:`~Circuits.merged`,
:meth:`~Circuits.to_fabric`) are methods, so no solver reshapes or re-canonicalises an array.
:meth:`~Circuits.to_fabric` builds through :func:`topoopt.fabrics.circuit_fabric.circuit_fabric`,
which takes the value as it is and imports nothing of this module (no import circle);
:func:`topoopt.fabrics.direct_connect.direct_connect` is a :class:`Circuits` plus that builder.

The directed links of a circuit table (:meth:`Circuits.links`) are numbered ``2 i`` for
``u -> v`` and ``2 i + 1`` for ``v -> u`` of row ``i``, each with ``count x link_bandwidth``
bytes/s: the layout of :func:`topoopt.fabrics.direct_connect.direct_connect` fabrics built by the
solvers, and of their routings.

Examples
--------
>>> c = Circuits([[2, 0, 1], [0, 2, 1], [1, 3, 2], [0, 1, 0]], 4)
>>> c.rows.tolist()
[[0, 2, 2], [1, 3, 2]]
>>> c.degrees().tolist(), c.total, len(c)
([2, 2, 2, 2], 4, 2)
>>> c.connected()
False
>>> c.merged([[0, 1, 1]]).rows.tolist()
[[0, 1, 1], [0, 2, 2], [1, 3, 2]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components, shortest_path

from traffic.errors import InputError

__all__ = ["Circuits", "circuit_links", "circuit_degrees"]


def _rows_of(data: Any, field: str) -> np.ndarray:
    """``data`` as an ``int64 (E, 3)`` array of raw rows (ids not yet checked)."""
    if hasattr(data, "edges") and hasattr(data, "is_multigraph"):  # a networkx graph
        rows = [(u, v, d.get("count", 1)) for u, v, d in data.edges(data=True)]
        arr: Any = np.asarray(rows, dtype=object).reshape(-1, 3)
    elif isinstance(data, np.ndarray):
        arr = data
    else:
        rows = [tuple(r) for r in data]
        if any(len(r) not in (2, 3) for r in rows):
            raise InputError(field, "a malformed row", "rows of (u, v) or (u, v, count)")
        arr = np.asarray([r + (1,) * (3 - len(r)) for r in rows], dtype=object)
    if arr.size == 0:
        return np.zeros((0, 3), np.int64)
    if arr.ndim == 1 and arr.size % 3 == 0 and arr.dtype != object:
        arr = arr.reshape(-1, 3)  # a flat [u, v, count, ...] array
    if arr.ndim != 2 or arr.shape[1] not in (2, 3):
        raise InputError(field, f"shape {arr.shape}", "rows of (u, v) or (u, v, count)")
    if arr.dtype.kind in "iu":
        a = arr.astype(np.int64, copy=False)
    else:
        try:
            f = np.asarray(arr, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(field, "non-numeric entry", "integer server ids and counts") from None
        if not np.all(np.isfinite(f)) or np.any(f != np.round(f)) or np.any(np.abs(f) >= 2**62):
            raise InputError(field, "non-integer entry", "integer server ids and counts")
        a = f.astype(np.int64)
    if a.shape[1] == 2:
        a = np.column_stack([a, np.ones(a.shape[0], np.int64)])
    return a


class Circuits:
    """A frozen canonical circuit multigraph on ``n`` servers (module docstring).

    Parameters
    ----------
    data : Circuits, array_like or networkx graph
        ``(u, v)`` or ``(u, v, count)`` rows in any order and orientation (a pair may repeat:
        counts add up; zero counts are dropped), or a (multi)graph over ``0..n-1`` (an edge
        attribute ``count`` multiplies an edge; parallel edges add up).
    n : int, optional
        Number of servers (default: one more than the largest server id, at least 1; a
        :class:`Circuits` keeps its own and must match ``n`` when both are given).
    field : str
        The input's name in error messages (``"circuits"``, ``"prewired"``, ...).
    degree : int or array_like, optional
        Ports per server (one number or ``(n,)``): a server with more circuits is an error.
    min_count : int
        Smallest count a row may give (default 0: zero-count rows are dropped; 1 refuses them).

    Raises
    ------
    InputError
        A row that is not two or three integers, a server id outside ``0..n-1``, a circuit from
        a server to itself (``u != v`` is required), a negative count, or a server above
        ``degree``.

    Attributes
    ----------
    n : int
    rows : numpy.ndarray
        ``int64 (E, 3)`` canonical rows, read-only.
    """

    __slots__ = ("n", "rows", "_keys")

    def __init__(
        self,
        data: Any = (),
        n: int | None = None,
        *,
        field: str = "circuits",
        degree=None,
        min_count=0,
    ):
        if isinstance(data, Circuits):
            n = data.n if n is None else int(n)
            if data.n != n:
                raise InputError(f"{field} servers", data.n, f"{n} servers")
            rows = data.rows
        else:
            raw = _rows_of(data, field)
            if n is None:
                n = max(int(raw[:, :2].max()) + 1, 1) if raw.size else 1
            n = int(n)
            if n < 0:
                raise InputError("servers", n, "an integer >= 0")
            rows = _canonical(raw, n, field, int(min_count))
            rows.flags.writeable = False
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "rows", rows)
        object.__setattr__(self, "_keys", None)
        if degree is not None:
            deg = self.degrees()
            cap = np.broadcast_to(np.asarray(degree, np.int64), deg.shape)
            over = np.flatnonzero(deg > cap)
            if over.size:
                i = int(over[0])
                allowed = f"at most {int(cap[i])} circuits (the degree)"
                raise InputError(f"{field}.server[{i}]", int(deg[i]), allowed)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Circuits is frozen")

    def __reduce__(self):
        # pickle (Ray, multiprocessing) rebuilds through the constructor: the rows are
        # canonical already, so this re-checks them and leaves the value frozen
        return (Circuits, (self.rows.copy(), self.n))

    # -- the value -------------------------------------------------------------------------

    def __len__(self) -> int:
        """Server pairs with at least one circuit."""
        return int(self.rows.shape[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Circuits):
            return NotImplemented
        return self.n == other.n and np.array_equal(self.rows, other.rows)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Circuits(n={self.n}, pairs={len(self)}, circuits={self.total})"

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.rows if dtype is None else self.rows.astype(dtype)
        return out.copy() if copy or dtype is None else out

    @property
    def total(self) -> int:
        """Number of circuits (parallel ones counted)."""
        return int(self.rows[:, 2].sum())

    def tolist(self) -> list[list[int]]:
        return self.rows.tolist()

    def __iter__(self):
        """The rows as ``(u, v, count)`` tuples of ints, in canonical order."""
        return iter([tuple(r) for r in self.rows.tolist()])

    # -- views -----------------------------------------------------------------------------

    def degrees(self) -> np.ndarray:
        """``int64 (n,)`` ports used at each server (a circuit uses one port at each end)."""
        r = self.rows
        return (
            np.bincount(r[:, 0], r[:, 2], self.n) + np.bincount(r[:, 1], r[:, 2], self.n)
        ).astype(np.int64)

    def links(self, link_bandwidth: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Directed links ``(src, dst, capacity)``: ``2 i`` is ``u -> v`` and ``2 i + 1`` is
        ``v -> u`` of row ``i``, with ``count x link_bandwidth`` bytes/s each.

        >>> s, d, c = Circuits([[0, 1, 2]], 2).links(1e9)
        >>> s.tolist(), d.tolist(), c.tolist()
        ([0, 1], [1, 0], [2000000000.0, 2000000000.0])
        """
        return circuit_links(self.rows, link_bandwidth)

    def link_of(self, u, v) -> np.ndarray:
        """Directed link id (:meth:`links`) of each ``u -> v`` (``-1`` where no circuit).

        >>> Circuits([[0, 1, 1], [1, 2, 1]], 3).link_of([1, 0, 2, 0], [0, 1, 1, 2]).tolist()
        [1, 0, 3, -1]
        """
        u = np.asarray(u, np.int64)
        v = np.asarray(v, np.int64)
        if self._keys is None:
            object.__setattr__(self, "_keys", self.rows[:, 0] * self.n + self.rows[:, 1])
        keys = self._keys
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        want = lo * self.n + hi
        out = np.full(want.shape, -1, np.int64)
        if keys.size == 0:
            return out
        pos = np.clip(np.searchsorted(keys, want), 0, keys.size - 1)
        hit = (keys[pos] == want) & (u != v)
        out[hit] = 2 * pos[hit] + (u[hit] > v[hit])
        return out

    def adjacency(self) -> sp.csr_matrix:
        """Symmetric ``(n, n)`` sparse matrix of circuit counts."""
        r = self.rows
        rows = np.concatenate([r[:, 0], r[:, 1]])
        cols = np.concatenate([r[:, 1], r[:, 0]])
        vals = np.concatenate([r[:, 2], r[:, 2]]).astype(np.float64)
        return sp.csr_matrix((vals, (rows, cols)), shape=(self.n, self.n))

    def hop_distances(self) -> np.ndarray:
        """``float64 (n, n)`` circuit hops between servers (``inf`` where unreachable).

        >>> Circuits([[0, 1, 1], [1, 2, 1]], 4).hop_distances()[0].tolist()
        [0.0, 1.0, 2.0, inf]
        """
        return shortest_path(self.adjacency(), method="D", directed=False, unweighted=True)

    def components(self) -> tuple[int, np.ndarray]:
        """Number of connected components and each server's component label."""
        return connected_components(self.adjacency(), directed=False)

    def connected(self) -> bool:
        """Whether every server reaches every other (a cluster of one server is connected)."""
        return self.n <= 1 or self.components()[0] == 1

    def merged(self, other: Any) -> Circuits:
        """These circuits plus ``other``'s (counts add up)."""
        rows = other.rows if isinstance(other, Circuits) else _rows_of(other, "circuits")
        return Circuits(np.vstack([self.rows, rows]), self.n)

    @property
    def key(self) -> bytes:
        """The rows as bytes: equal circuits on the same servers give equal keys (a dict key)."""
        return self.rows.tobytes()

    @classmethod
    def from_key(cls, key: bytes, n: int) -> Circuits:
        """The circuits whose :attr:`key` is ``key`` (on ``n`` servers; trusted, not re-checked).

        >>> c = Circuits([[1, 0, 2]], 3)
        >>> Circuits.from_key(c.key, 3) == c
        True
        """
        out = object.__new__(cls)
        rows = np.frombuffer(key, np.int64).reshape(-1, 3)
        object.__setattr__(out, "n", int(n))
        object.__setattr__(out, "rows", rows)
        object.__setattr__(out, "_keys", None)
        return out

    def to_fabric(self, degree: int | None = None, port_bandwidth: float | None = None, **kw):
        """The direct-connect :class:`~topoopt.fabrics.fabric.Fabric` of these circuits:
        ``degree`` ports per server (default: the most any server uses) of ``port_bandwidth``
        bytes/s on optical devices; keywords as
        :func:`topoopt.fabrics.circuit_fabric.circuit_fabric` (``device``, ``latency``, ...).

        >>> f = Circuits([[0, 1, 2], [1, 2, 1]], 3).to_fabric(4, 1e9)
        >>> f.n_nodes, f.params["circuits"], f.params["degree"]
        (7, 3, 4)
        """
        from topoopt.fabrics.circuit_fabric import circuit_fabric

        if port_bandwidth is not None:
            kw["port_bandwidth"] = port_bandwidth
        return circuit_fabric(self, degree, **kw)


def _canonical(a: np.ndarray, n: int, field: str, min_count: int = 0) -> np.ndarray:
    """Checked, merged, sorted rows with zero counts dropped (a new writable array)."""
    if a.shape[0]:
        ends = a[:, :2]
        bad = np.any((ends < 0) | (ends >= n), axis=1)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            out_of = ends[r][(ends[r] < 0) | (ends[r] >= n)]
            raise InputError(f"{field} (row {r})", int(out_of[0]), f"server ids 0..{n - 1}")
        loop = a[:, 0] == a[:, 1]
        if loop.any():
            r = int(np.flatnonzero(loop)[0])
            raise InputError(
                f"{field} (row {r})", a[r].tolist(), "u != v (a circuit between two servers)"
            )
        if a[:, 2].min() < max(min_count, 0):
            r = int(np.argmin(a[:, 2]))
            allowed = f"an integer >= {max(min_count, 0)}"
            raise InputError(f"{field} (row {r}) count", int(a[r, 2]), allowed)
    else:
        return np.zeros((0, 3), np.int64)
    u, v = np.minimum(a[:, 0], a[:, 1]), np.maximum(a[:, 0], a[:, 1])
    key, inv = np.unique(u * n + v, return_inverse=True)
    cnt = np.bincount(inv.reshape(-1), weights=a[:, 2], minlength=key.size).astype(np.int64)
    out = np.stack([key // n, key % n, cnt], axis=1)
    return np.ascontiguousarray(out[out[:, 2] > 0])


def circuit_links(rows: np.ndarray, link_bandwidth: float) -> tuple[np.ndarray, ...]:
    """Directed links ``(src, dst, capacity)`` of canonical rows (as :meth:`Circuits.links`)."""
    c = np.asarray(rows, np.int64).reshape(-1, 3)
    src = np.empty(2 * c.shape[0], np.int64)
    dst = np.empty_like(src)
    src[0::2], dst[0::2] = c[:, 0], c[:, 1]
    src[1::2], dst[1::2] = c[:, 1], c[:, 0]
    cap = np.repeat(c[:, 2].astype(np.float64) * float(link_bandwidth), 2)
    return src, dst, cap


def circuit_degrees(rows: np.ndarray, n: int) -> np.ndarray:
    """Ports used at each server of canonical rows (as :meth:`Circuits.degrees`)."""
    c = np.asarray(rows, np.int64).reshape(-1, 3)
    return np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
