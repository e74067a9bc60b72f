"""Expansion of symbolic demands into pair traffic under a chosen collective algorithm.

Every demand family is expanded from a *template*: the ``(source position, destination position,
bytes)`` triples of one collective over positions ``0..g-1`` of a group. The template is then
broadcast over all rows of the family's ``groups`` array with one fancy-indexing operation, so
expansion costs O(pairs) numpy work and no Python loop over groups.

Ring orders: members of all-reduce, reduce-scatter and all-gather groups are taken in ascending
rank order unless an explicit order is given (``orders``, or a family marked ``ordered``).
Since ``server = rank // gpus_per_server``, ascending order keeps each server's members
contiguous in the ring, as NCCL orders its rings. Broadcast, send and all-to-all use the group
as given (root first; fixed pairs).

Algorithms and their templates (``S`` the nccl-tests size, ``g`` the group size):

``ring``
    all-reduce: each position sends ``2(g-1)/g*S`` to its successor; reduce-scatter and
    all-gather ``(g-1)/g*S``; broadcast: a pipelined chain from the root, ``S`` per hop.
``halving-doubling``
    all-reduce (recursive halving then doubling): in step ``j`` position ``i`` exchanges
    ``S/2^j`` with ``i XOR p/2^j`` in each half, ``p`` the largest power of two <= g. When
    ``g`` is not a power of two the ``g-p`` extra members first send their ``S`` to position
    ``i-p`` and receive the result (``S``) back at the end. Reduce-scatter and all-gather use
    one half (power-of-two groups; otherwise the ring).
``tree``
    NCCL's double binary tree for all-reduce: two trees each carry ``S/2`` (reduce up, broadcast
    down). Tree one is the binary heap over positions (parent of ``i`` is ``(i-1)//2``), tree two
    the same heap over mirrored positions ``g-1-i``. Broadcast: the binary heap from the root.
    Reduce-scatter and all-gather: the ring (NCCL has no tree for them).
``direct``
    all-reduce as direct reduce-scatter + all-gather, ``2S/g`` to every peer; reduce-scatter and
    all-gather ``S/g`` to every peer; broadcast: the root sends ``S`` to every member.
``hierarchical``
    when every group has the same number ``k`` of members on each of its ``m`` servers:
    intra-server ring reduce-scatter, inter-server ring all-reduce of ``S/k`` among the members
    with the same local index, intra-server ring all-gather (reduce-scatter and all-gather: the
    corresponding halves). Otherwise the ring.

All-to-all is always direct (``S/g`` to each peer, or ``peer_bytes``); send is a single pair.
Every template puts exactly :meth:`Demand.wire_bytes` on the wire: ``2(g-1)S`` per all-reduce,
``(g-1)S`` per reduce-scatter, all-gather, all-to-all and broadcast (halving-doubling on a
non-power-of-two group too: ``2(p-1)S`` inside the power-of-two core plus ``2(g-p)S`` for the
extras). The algorithm changes who talks to whom, not how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from traffic.errors import InputError
from traffic.workload import CLASSES, Workload, peer_pairs

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built (a light start-up)
    import scipy.sparse as sp

__all__ = [
    "ALGORITHMS",
    "PairTraffic",
    "collective_template",
    "members_per_server",
    "expand",
    "gpu_matrix",
    "server_matrix",
]

ALGORITHMS = ("ring", "halving-doubling", "tree", "direct", "hierarchical")

_ORDERED_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def _check_algorithm(algorithm: str) -> None:
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")


def _ring(g: int, b: float):
    i = np.arange(g)
    return i, (i + 1) % g, np.full(g, b)


def _direct(g: int, b: float):
    i, j = np.nonzero(~np.eye(g, dtype=bool))
    return i, j, np.full(i.shape[0], b)


def _heap_edges(g: int):
    child = np.arange(1, g)
    return child, (child - 1) // 2


def _concat(parts):
    parts = [p for p in parts if len(p[0])]
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def _halving_doubling(op: str, g: int, size: float):
    p = 1 << (g.bit_length() - 1)
    if op != "all-reduce" and p != g:
        return None
    parts = []
    steps = p.bit_length() - 1
    i = np.arange(p)
    for j in range(1, steps + 1):
        partner = i ^ (p >> j)
        b = size / (1 << j)
        mult = 2.0 if op == "all-reduce" else 1.0
        parts.append((i, partner, np.full(p, mult * b)))
    if p != g:
        extra = np.arange(p, g)
        parts.append((extra, extra - p, np.full(g - p, float(size))))
        parts.append((extra - p, extra, np.full(g - p, float(size))))
    return _concat(parts)


def _tree(op: str, g: int, size: float):
    if op == "broadcast":
        child, parent = _heap_edges(g)
        return parent, child, np.full(g - 1, float(size))
    if op != "all-reduce":
        return None
    child, parent = _heap_edges(g)
    half = size / 2.0
    parts = []
    for c, pa in ((child, parent), (g - 1 - child, g - 1 - parent)):
        parts.append((c, pa, np.full(g - 1, half)))
        parts.append((pa, c, np.full(g - 1, half)))
    return _concat(parts)


def _hierarchical(op: str, g: int, size: float, k: int):
    """Template for groups of ``m = g/k`` servers with ``k`` contiguous members each."""
    m = g // k
    if k <= 1 or m <= 1 or op not in _ORDERED_OPS:
        return None
    pos = np.arange(g).reshape(m, k)
    intra_src = pos.ravel()
    intra_dst = np.roll(pos, -1, axis=1).ravel()
    inter_src = pos.T.ravel()
    inter_dst = np.roll(pos, -1, axis=0).T.ravel()
    intra = (k - 1) / k * size
    if op == "all-reduce":
        inter = 2.0 * (m - 1) / m * size / k
        return _concat(
            [
                (intra_src, intra_dst, np.full(g, 2.0 * intra)),
                (inter_src, inter_dst, np.full(g, inter)),
            ]
        )
    inter = (m - 1) / m * size / k
    return _concat(
        [(intra_src, intra_dst, np.full(g, intra)), (inter_src, inter_dst, np.full(g, inter))]
    )


def collective_template(
    op: str,
    g: int,
    size: float,
    algorithm: str = "ring",
    peer_bytes: np.ndarray | None = None,
    members_per_server: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs of one collective over group positions ``0..g-1``.

    Parameters
    ----------
    op, g, size
        The collective, its group size and its nccl-tests size ``S`` in bytes.
    algorithm : str
        One of :data:`ALGORITHMS`; falls back to the ring where the algorithm does not apply.
    peer_bytes : numpy.ndarray or scipy.sparse matrix, optional
        Non-uniform all-to-all matrix (bytes member ``i`` sends ``j``).
    members_per_server : int, optional
        ``k`` for the hierarchical algorithm (positions ``k*s .. k*s+k-1`` share a server).

    Returns
    -------
    (src, dst, bytes) : tuple of numpy.ndarray
        Source and destination positions and the bytes each pair carries per collective.

    Examples
    --------
    >>> s, d, b = collective_template("all-reduce", 4, 1000.0)
    >>> s.tolist(), d.tolist(), b.tolist()
    ([0, 1, 2, 3], [1, 2, 3, 0], [1500.0, 1500.0, 1500.0, 1500.0])
    >>> float(collective_template("all-reduce", 4, 1000.0, "tree")[2].sum())
    6000.0
    """
    _check_algorithm(algorithm)
    if g <= 1:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    if op == "send":
        return np.array([0]), np.array([1]), np.array([float(size)])
    if op == "all-to-all":
        if peer_bytes is not None:
            return peer_pairs(peer_bytes)
        return _direct(g, size / g)
    out = None
    if algorithm == "halving-doubling":
        out = _halving_doubling(op, g, size)
    elif algorithm == "tree":
        out = _tree(op, g, size)
    elif algorithm == "direct":
        if op == "broadcast":
            out = (np.zeros(g - 1, np.int64), np.arange(1, g), np.full(g - 1, float(size)))
        else:
            per = (2.0 if op == "all-reduce" else 1.0) * size / g
            out = _direct(g, per)
    elif algorithm == "hierarchical" and members_per_server:
        out = _hierarchical(op, g, size, members_per_server)
    if out is not None:
        return out
    # the ring (and every fallback)
    if op == "broadcast":
        i = np.arange(g - 1)
        return i, i + 1, np.full(g - 1, float(size))
    per = (2.0 if op == "all-reduce" else 1.0) * (g - 1) / g * size
    return _ring(g, per)


def members_per_server(rows: np.ndarray, gpus_per_server: int) -> int | None:
    """``k`` if every row has exactly ``k > 1`` consecutive members on each of its distinct
    servers (the shape the hierarchical algorithm needs), else None.

    >>> members_per_server(np.array([[0, 1, 2, 3]]), 2)
    2
    >>> members_per_server(np.array([[0, 2, 4, 6]]), 2) is None
    True
    """
    rows = np.asarray(rows, np.int64)
    g = rows.shape[1]
    servers = rows // gpus_per_server
    for k in range(min(gpus_per_server, g), 1, -1):
        if g % k:
            continue
        blocks = servers.reshape(rows.shape[0], g // k, k)
        same_inside = bool((blocks == blocks[:, :, :1]).all())
        distinct = g // k == 1 or bool((np.diff(np.sort(blocks[:, :, 0], axis=1)) != 0).all())
        if same_inside and distinct:
            return k
    return None


@dataclass(frozen=True, eq=False)
class PairTraffic:
    """Unsummed pair traffic: one entry per (template pair x group) of every demand family.

    Attributes
    ----------
    src, dst : numpy.ndarray
        ``int64`` endpoints (GPU ranks, or servers when ``level == "server"``).
    bytes : numpy.ndarray
        ``float64`` bytes per iteration (count already applied).
    cls : numpy.ndarray
        ``int8`` index into :data:`traffic.workload.CLASSES`.
    demand : numpy.ndarray
        ``int32`` index of the demand family in the Workload.
    n : int
        Number of endpoints (GPUs or servers).
    level : str
        ``"gpu"`` or ``"server"``.
    """

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    cls: np.ndarray
    demand: np.ndarray
    n: int
    level: str

    def matrix(self) -> sp.csr_matrix:
        """Summed ``(n, n)`` sparse matrix of bytes per iteration (diagonal: intra-endpoint)."""
        import scipy.sparse as sp

        return sp.csr_matrix((self.bytes, (self.src, self.dst)), shape=(self.n, self.n))

    def by_class(self) -> dict[str, sp.csr_matrix]:
        """One summed sparse matrix per traffic class present."""
        import scipy.sparse as sp

        out = {}
        for c in np.unique(self.cls):
            m = self.cls == c
            out[CLASSES[c]] = sp.csr_matrix(
                (self.bytes[m], (self.src[m], self.dst[m])), shape=(self.n, self.n)
            )
        return out

    def total(self) -> float:
        return float(self.bytes.sum())


def _selected(workload: Workload, classes, phases, mutable) -> list[int]:
    cs = set(classes) if classes is not None else None
    ps = set(phases) if phases is not None else None
    keep = []
    for idx, d in enumerate(workload.demands):
        if cs is not None and d.cls not in cs:
            continue
        if ps is not None and d.phase not in ps:
            continue
        if mutable is not None and d.mutable != mutable:
            continue
        keep.append(idx)
    return keep


def expand(
    workload: Workload,
    algorithm: str = "ring",
    level: str = "gpu",
    classes: Iterable[str] | None = None,
    phases: Iterable[str] | None = None,
    mutable: bool | None = None,
    orders: Mapping[int, np.ndarray] | None = None,
) -> PairTraffic:
    """Expand the Workload's demands into pair traffic.

    Parameters
    ----------
    workload : Workload
    algorithm : str
        Collective algorithm, one of :data:`ALGORITHMS` (see the module docstring).
    level : {"gpu", "server"}
        Endpoints: GPU ranks, or servers (``rank // gpus_per_server``; intra-server traffic
        lands on the diagonal).
    classes, phases : iterable of str, optional
        Keep only these classes / phases.
    mutable : bool, optional
        Keep only mutable (True) or fixed (False) demands.
    orders : mapping, optional
        Demand index -> ``(G, g)`` array of explicit member orders (e.g. ring orders chosen by a
        solver), replacing the default ascending order.

    Returns
    -------
    PairTraffic
    """
    _check_algorithm(algorithm)
    if level not in ("gpu", "server"):
        raise InputError("level", level, "gpu or server")
    gps = workload.gpus_per_server
    srcs, dsts, byts, clss, dems = [], [], [], [], []
    for idx in _selected(workload, classes, phases, mutable):
        d = workload.demands[idx]
        if d.group_size <= 1 or d.count == 0 or d.n_groups == 0:
            continue
        rows = d.groups
        if orders is not None and idx in orders:
            rows = np.asarray(orders[idx], dtype=np.int64)
            if rows.shape != d.groups.shape or not np.array_equal(
                np.sort(rows, axis=1), np.sort(d.groups, axis=1)
            ):
                raise InputError(f"orders[{idx}]", rows.shape, "a permutation of each group row")
        elif d.op in _ORDERED_OPS and not d.ordered:
            rows = np.sort(rows, axis=1)
        k = members_per_server(rows, gps) if algorithm == "hierarchical" else None
        ts, td, tb = collective_template(d.op, d.group_size, d.size, algorithm, d.peer_bytes, k)
        if ts.size == 0:
            continue
        s = rows[:, ts].ravel()
        t = rows[:, td].ravel()
        b = np.tile(tb * d.count, d.n_groups)
        srcs.append(s)
        dsts.append(t)
        byts.append(b)
        clss.append(np.full(s.shape[0], CLASSES.index(d.cls), np.int8))
        dems.append(np.full(s.shape[0], idx, np.int32))
    if srcs:
        src, dst = np.concatenate(srcs), np.concatenate(dsts)
        out_b, out_c, out_d = np.concatenate(byts), np.concatenate(clss), np.concatenate(dems)
    else:
        src = dst = np.zeros(0, np.int64)
        out_b, out_c, out_d = np.zeros(0), np.zeros(0, np.int8), np.zeros(0, np.int32)
    n = workload.gpus
    if level == "server":
        src, dst, n = src // gps, dst // gps, workload.servers
    return PairTraffic(src, dst, out_b, out_c, out_d, n, level)


def gpu_matrix(workload: Workload, algorithm: str = "ring", **filters) -> sp.csr_matrix:
    """``(gpus, gpus)`` sparse matrix of bytes per iteration (see :func:`expand`)."""
    return expand(workload, algorithm, "gpu", **filters).matrix()


def server_matrix(workload: Workload, algorithm: str = "ring", **filters) -> sp.csr_matrix:
    """``(servers, servers)`` sparse matrix of bytes per iteration; diagonal = intra-server.

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=4, gpus_per_server=2, demands=(
    ...     Demand("all-reduce", np.array([[0, 1, 2, 3]]), 400.0, "dp", "backward"),))
    >>> server_matrix(w).toarray().tolist()
    [[600.0, 600.0], [600.0, 600.0]]
    """
    return expand(workload, algorithm, "server", **filters).matrix()
