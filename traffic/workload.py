"""The Workload: the traffic of one training iteration, kept symbolic.

A :class:`Workload` is a tuple of :class:`Demand` families. One family stands for many identical
collectives (or transfers) that differ only in their group: ``groups`` is an integer array with one
row per group of global GPU ranks, so that 2,048 tensor-parallel groups of 8 are one object and one
``(2048, 8)`` array, not 2,048 Python objects. Expansion into GPU- or server-level pair matrices
(:mod:`traffic.expand`) is vectorised over the rows.

Sizes follow the nccl-tests convention (``S``): the buffer size for all-reduce, the output size for
all-gather, the input size for reduce-scatter, one rank's whole send buffer for all-to-all, the
message for broadcast and send. ``count`` is how many times the family runs per iteration (layers x
micro-batches x ...). Units: bytes; "per iteration" means one optimizer step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from traffic.errors import InputError

__all__ = [
    "OPS",
    "CLASSES",
    "PHASES",
    "Demand",
    "TaskGraph",
    "Workload",
    "peer_nbytes",
    "peer_pairs",
    "peer_row",
    "wire_bytes_per_collective",
]

OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast", "send")
"""Collective kinds. ``send`` groups are ``[source, destination]`` pairs."""

CLASSES = ("tp", "cp", "pp", "dp", "ep", "embedding", "mp")
"""Traffic classes: tensor, context, pipeline, data (also ZeRO/FSDP), expert parallel, embedding,
and ``mp``: a model-parallel transfer whose kind the source does not say (imported traces)."""

PHASES = ("forward", "backward", "optimizer")
"""Phases of an iteration, in order."""


def wire_bytes_per_collective(op: str, g: int, size: float) -> float:
    """Bytes all members of one group put on the wire together for one collective.

    Bandwidth-optimal algorithms (ring, direct, double binary tree, hierarchical, and
    halving-doubling on a power-of-two group) all send exactly this much:

    ============== =============== ================================
    op             per rank        per group (this function)
    ============== =============== ================================
    all-reduce     2(g-1)/g * S    2(g-1) * S
    reduce-scatter (g-1)/g * S     (g-1) * S
    all-gather     (g-1)/g * S     (g-1) * S
    all-to-all     (g-1)/g * S     (g-1) * S
    broadcast      S (non-leaves)  (g-1) * S
    send           S               S
    ============== =============== ================================

    Examples
    --------
    >>> wire_bytes_per_collective("all-reduce", 8, 1024)
    14336.0
    >>> wire_bytes_per_collective("send", 2, 10)
    10.0
    """
    if op == "send":
        return float(size)
    if op == "all-reduce":
        return 2.0 * (g - 1) * size
    if op in ("reduce-scatter", "all-gather", "all-to-all", "broadcast"):
        return float(g - 1) * size
    raise InputError("op", op, f"one of {', '.join(OPS)}")


def peer_pairs(peer_bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, bytes)`` of an all-to-all matrix's nonzero entries, row by row and ascending
    ``j`` within a row (``numpy.nonzero``'s order), for a dense array or a canonical sparse
    matrix (:class:`Demand`): the same arrays for the same matrix in either form.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> m = np.array([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [5.0, 7.0, 0.0]])
    >>> [a.tolist() for a in peer_pairs(m)]
    [[0, 2, 2], [1, 0, 1], [2.0, 5.0, 7.0]]
    >>> [a.tolist() for a in peer_pairs(sp.csr_matrix(m))]
    [[0, 2, 2], [1, 0, 1], [2.0, 5.0, 7.0]]
    """
    if sp.issparse(peer_bytes):
        m = sp.csr_matrix(peer_bytes, dtype=np.float64)
        m.sum_duplicates()
        m.eliminate_zeros()
        m.sort_indices()
        i = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
        return i, m.indices.astype(np.int64), m.data.astype(np.float64)
    i, j = np.nonzero(peer_bytes)
    return i, j, peer_bytes[i, j].astype(np.float64)


def peer_row(peer_bytes, i: int) -> np.ndarray:
    """Row ``i`` of an all-to-all matrix (the bytes member ``i`` sends each member), dense
    float64, for a dense array or a sparse matrix."""
    if sp.issparse(peer_bytes):
        return np.asarray(sp.csr_matrix(peer_bytes)[[int(i)]].toarray()[0], dtype=np.float64)
    return np.asarray(peer_bytes[int(i)], dtype=np.float64)


def peer_nbytes(peer_bytes) -> int:
    """Bytes an all-to-all matrix holds: ``nbytes`` of a dense array; data, indices and index
    pointers of a sparse one.

    >>> import scipy.sparse as sp
    >>> peer_nbytes(np.zeros((4, 4))), peer_nbytes(sp.csr_matrix(np.eye(4)[::-1]))
    (128, 68)
    """
    if sp.issparse(peer_bytes):
        m = peer_bytes.tocsr()
        return int(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes)
    return int(np.asarray(peer_bytes).nbytes)


@dataclass(frozen=True, eq=False)
class Demand:
    """A family of identical collectives or transfers, one per row of ``groups``.

    Parameters
    ----------
    op : str
        One of :data:`OPS`.
    groups : numpy.ndarray
        ``int64`` array of shape ``(G, g)``: global GPU ranks of each group. For ``send`` each row
        is ``[source, destination]``; for ``broadcast`` the first member is the root.
    size : float
        ``S`` in bytes (nccl-tests convention), per collective.
    cls : str
        Traffic class, one of :data:`CLASSES`.
    phase : str
        One of :data:`PHASES`.
    count : int
        Times each group runs this collective per iteration (e.g. layers x micro-batches x 4).
    mutable : bool
        True when the algorithm may choose who talks to whom (ring all-reduce: any ring order
        does); false for a fixed pair pattern (pipeline sends, embedding all-to-all).
    name : str
        Human-readable label, e.g. ``"tp all-reduce (attention + mlp)"``.
    peer_bytes : numpy.ndarray or scipy.sparse matrix, optional
        For non-uniform all-to-all only: ``(g, g)`` bytes member ``i`` sends member ``j`` per
        collective (zero diagonal). When given, ``size`` must equal the largest row sum
        (one rank's whole send buffer). A sparse matrix is kept as a canonical CSR matrix
        (float64, sorted indices, no explicit zeros), for an all-to-all in which few members
        send (or receive): DLRM's embedding tables on 64 of 16,384 GPUs. Read it through
        :func:`peer_pairs`, :func:`peer_row` and :func:`peer_nbytes`, which take either form.
    stage : int, optional
        Pipeline stage the family belongs to, when it belongs to one (used by the iteration model).
    ordered : bool
        True when each row already lists the members in the order the collective uses them (a
        ring order chosen by a solver); False (default) lets expansion use ascending rank order
        for all-reduce, reduce-scatter and all-gather (NCCL-like: each server's members
        contiguous).
    schedule : numpy.ndarray, optional
        For all-reduce, reduce-scatter and all-gather only: ``(k, 3)`` transfers ``[source
        position, destination position, bytes per byte of S]`` between the positions of a row
        (ascending rank), run instead of the expansion's algorithm, all released together (the
        fluid limit of a pipelined tree schedule: a Blink packing a design picked,
        :mod:`solvers.joint.collective_choice`).
    """

    op: str
    groups: np.ndarray
    size: float
    cls: str
    phase: str
    count: int = 1
    mutable: bool = True
    name: str = ""
    peer_bytes: np.ndarray | None = None
    stage: int | None = None
    ordered: bool = False
    schedule: np.ndarray | None = None

    def __post_init__(self) -> None:
        groups = np.asarray(self.groups, dtype=np.int64)
        if groups.ndim == 1:
            groups = groups.reshape(1, -1)
        object.__setattr__(self, "groups", groups)
        where = f"demand {self.name!r}" if self.name else "demand"
        if self.op not in OPS:
            raise InputError(f"{where}.op", self.op, f"one of {', '.join(OPS)}")
        if self.cls not in CLASSES:
            raise InputError(f"{where}.cls", self.cls, f"one of {', '.join(CLASSES)}")
        if self.phase not in PHASES:
            raise InputError(f"{where}.phase", self.phase, f"one of {', '.join(PHASES)}")
        if groups.ndim != 2 or groups.shape[1] < 1:
            raise InputError(f"{where}.groups", groups.shape, "a 2-D array (groups x members)")
        if self.op == "send" and groups.shape[1] != 2:
            raise InputError(f"{where}.groups", groups.shape, "rows [source, destination]")
        if groups.size and groups.min() < 0:
            raise InputError(f"{where}.groups", int(groups.min()), "non-negative ranks")
        if not np.isfinite(self.size) or self.size < 0:
            raise InputError(f"{where}.size", self.size, "a finite number of bytes >= 0")
        if int(self.count) != self.count or self.count < 0:
            raise InputError(f"{where}.count", self.count, "an integer >= 0")
        object.__setattr__(self, "count", int(self.count))
        if self.peer_bytes is not None:
            pb = self.peer_bytes
            if sp.issparse(pb):
                pb = sp.csr_matrix(pb, dtype=np.float64, copy=True)
                pb.sum_duplicates()
                pb.eliminate_zeros()
                pb.sort_indices()
                values, diag = pb.data, pb.diagonal()
            else:
                pb = np.asarray(pb, dtype=np.float64)
                values, diag = pb, np.diag(pb) if pb.ndim == 2 else pb
            g = groups.shape[1]
            if self.op != "all-to-all" or pb.shape != (g, g):
                raise InputError(f"{where}.peer_bytes", pb.shape, f"a ({g}, {g}) all-to-all matrix")
            if (values < 0).any() or np.any(diag != 0):
                raise InputError(
                    f"{where}.peer_bytes", "negative or diagonal", "zero diagonal, >= 0"
                )
            object.__setattr__(self, "peer_bytes", pb)
        if self.schedule is not None:
            sc = np.asarray(self.schedule, dtype=np.float64)
            g = groups.shape[1]
            ok = sc.ndim == 2 and sc.shape[1] == 3 and np.isfinite(sc).all()
            ok = ok and self.op in ("all-reduce", "reduce-scatter", "all-gather")
            if ok and sc.size:
                pos = sc[:, :2]
                ok = bool(np.all((pos == np.round(pos)) & (pos >= 0) & (pos < g)))
                ok = ok and bool(np.all((sc[:, 0] != sc[:, 1]) & (sc[:, 2] >= 0)))
            if not ok:
                raise InputError(
                    f"{where}.schedule", sc.shape, f"(k, 3) transfers between positions 0..{g - 1}"
                )
            object.__setattr__(self, "schedule", sc)

    @property
    def n_groups(self) -> int:
        """Number of groups (rows)."""
        return int(self.groups.shape[0])

    @property
    def group_size(self) -> int:
        """Members per group (``g``)."""
        return int(self.groups.shape[1])

    def wire_bytes(self) -> float:
        """Bytes on the wire per iteration for the whole family (all groups, all repeats).

        Bandwidth-optimal algorithms; intra-server bytes included.
        """
        if self.peer_bytes is not None:
            per = float(self.peer_bytes.sum())
        else:
            per = wire_bytes_per_collective(self.op, self.group_size, self.size)
        if self.group_size == 1:
            per = 0.0
        return per * self.n_groups * self.count


@dataclass(frozen=True, eq=False)
class TaskGraph:
    """The dependency graph of one iteration's compute and communication tasks.

    Arrays are aligned by task index. ``kind`` is one of ``forward``, ``backward``, ``update``,
    ``comm`` (intra-server), ``barrier``, ``transfer`` (a network transfer between servers) and
    ``all-reduce`` or ``collective`` (any collective of a Demand: all-reduce, all-gather, ...).
    ``server`` is the server id for compute tasks; ``demand`` maps a communication task to
    ``(demand index, row)`` in the Workload, ``-1`` for compute tasks. ``device``, when given,
    names the resource each compute task occupies (tasks on one device share it; default: one
    device per server, as TopoOpt's task graphs represent a server by one device).

    Attributes
    ----------
    task_id : numpy.ndarray   (int64, the source file's ids)
    kind : numpy.ndarray      (str)
    server : numpy.ndarray    (int64; -1 when not tied to one server)
    runtime_s : numpy.ndarray (float64 seconds)
    size_bytes : numpy.ndarray (float64 bytes; 0 for compute)
    edges : numpy.ndarray     (int64, shape (E, 2), task indices: [before, after])
    demand : numpy.ndarray    (int64, shape (T, 2): [demand index, row] or [-1, -1])
    device : numpy.ndarray, optional (int64 device id per task; -1 for non-compute tasks)
    """

    task_id: np.ndarray
    kind: np.ndarray
    server: np.ndarray
    runtime_s: np.ndarray
    size_bytes: np.ndarray
    edges: np.ndarray
    demand: np.ndarray
    device: np.ndarray | None = None

    @property
    def n_tasks(self) -> int:
        return int(self.task_id.shape[0])


@dataclass(frozen=True, eq=False)
class Workload:
    """The traffic of one training iteration.

    Parameters
    ----------
    gpus : int
        Number of GPUs (ranks ``0 .. gpus-1``).
    gpus_per_server : int
        GPUs per server; server of rank ``r`` is ``r // gpus_per_server``.
    demands : tuple of Demand
    name : str
        Where the workload came from (plan or file name).
    parameters : int, optional
        Model parameter count, when the source is a plan.
    conventions : Mapping
        Every counting choice made (recompute, SP re-gather, gradient dtype, ...), echoed in the
        output so that a reader knows what was counted.
    info : Mapping
        Other facts about the source (e.g. micro-batches, per-stage FLOPs) for later stages.
    taskgraph : TaskGraph, optional
        The iteration's dependency graph, when the source provides one (imported task graphs).
    """

    gpus: int
    gpus_per_server: int
    demands: tuple[Demand, ...]
    name: str = ""
    parameters: int | None = None
    conventions: Mapping[str, Any] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)
    taskgraph: TaskGraph | None = None

    def __post_init__(self) -> None:
        if int(self.gpus) != self.gpus or self.gpus < 1:
            raise InputError("workload.gpus", self.gpus, "a positive integer")
        if int(self.gpus_per_server) != self.gpus_per_server or self.gpus_per_server < 1:
            raise InputError("workload.gpus_per_server", self.gpus_per_server, "a positive integer")
        if self.gpus % self.gpus_per_server:
            raise InputError(
                "workload.gpus", self.gpus, f"a multiple of gpus_per_server={self.gpus_per_server}"
            )
        object.__setattr__(self, "demands", tuple(self.demands))
        for d in self.demands:
            if d.groups.size and d.groups.max() >= self.gpus:
                raise InputError(
                    f"demand {d.name!r}.groups", int(d.groups.max()), f"ranks < {self.gpus}"
                )

    @property
    def servers(self) -> int:
        """Number of servers."""
        return self.gpus // self.gpus_per_server

    def server_of(self, ranks: np.ndarray) -> np.ndarray:
        """Server index of each rank."""
        return np.asarray(ranks, dtype=np.int64) // self.gpus_per_server

    def select(self, classes: Iterable[str] | None = None, phases: Iterable[str] | None = None):
        """A Workload with only the demands of the given classes and phases."""
        cs = set(classes) if classes is not None else set(CLASSES)
        ps = set(phases) if phases is not None else set(PHASES)
        keep = tuple(d for d in self.demands if d.cls in cs and d.phase in ps)
        return replace(self, demands=keep)

    def bytes_by_class(self) -> dict[str, float]:
        """Wire bytes per iteration by class, summed over all GPUs (bandwidth-optimal)."""
        out: dict[str, float] = {}
        for d in self.demands:
            out[d.cls] = out.get(d.cls, 0.0) + d.wire_bytes()
        return out

    def total_wire_bytes(self) -> float:
        """Wire bytes per iteration over all demands."""
        return float(sum(d.wire_bytes() for d in self.demands))

    def __repr__(self) -> str:
        """One line (the families are in :meth:`summary`), e.g. ``Workload('dlrm.yaml', 128 GPUs
        on 16 servers, 3 demand families, 8.47e+09 bytes per iteration)``."""
        families = f"{len(self.demands)} demand families"
        wire = f"{self.total_wire_bytes():.3g} bytes per iteration"
        where = f"{self.gpus} GPUs on {self.servers} servers"
        return f"Workload({self.name!r}, {where}, {families}, {wire})"

    def _repr_html_(self) -> str:
        """The one line of :meth:`__repr__` over the :meth:`summary` table (Jupyter)."""
        import html

        return f"<p>{html.escape(repr(self))}</p>" + self.summary().to_html(index=False)

    def summary(self):
        """A pandas DataFrame with one row per demand family."""
        import pandas as pd

        rows = [
            {
                "name": d.name,
                "op": d.op,
                "class": d.cls,
                "phase": d.phase,
                "groups": d.n_groups,
                "group_size": d.group_size,
                "size_bytes": d.size,
                "count": d.count,
                "mutable": d.mutable,
                "stage": d.stage,
                "wire_bytes": d.wire_bytes(),
            }
            for d in self.demands
        ]
        return pd.DataFrame(rows)
