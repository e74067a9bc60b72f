"""Cross-mesh resharding between pipeline stages of different tensor-parallel sizes.

When stage ``a`` (sender mesh of ``t_a`` GPUs) and stage ``z`` (receiver mesh of ``t_z`` GPUs)
shard the boundary activation differently, the activation (forward) and its gradient (backward)
must be *resharded*: every receiver GPU needs some slices of the tensor that sit on some sender
GPUs (Zhuang et al., "On Optimizing the Communication of Model Parallelism", MLSys 2023,
"AlpaComm", section 3).

Layouts
    The boundary tensor has ``E`` elements of ``beta`` bytes (``S = E * beta``) along one flat
    (sequence-major) axis. With sequence parallelism TP rank ``k`` of a mesh of ``t`` holds the
    elements ``[floor(k E / t), floor((k+1) E / t))`` (*sharded*); without it every TP rank
    holds, and needs, the whole tensor (*replicated*).
Pieces
    Both meshes' shard boundaries lie on the grid of ``L = lcm(t_a, t_z)`` pieces, piece ``q``
    being ``[floor(q E / L), floor((q+1) E / L))``.

Two algorithms (per pipeline replica; bytes per micro-batch and direction):

``naive`` (send/recv)
    Every receiver GPU ``k`` fetches the slices it needs from the sender that holds them: from
    a sharded sender, the overlap of its interval with each sender's interval; from a
    replicated sender, its whole need from sender ``k mod t_a``. Bytes: ``sum_k |need_k| beta``
    on the network (``t_z S`` replicated -> replicated, ``S`` into a sharded receiver).
``broadcast`` (AlpaComm)
    Each piece crosses the network once per receiver *host* that needs it, to one receiver GPU
    of that host, which broadcasts it (NVLink) to that host's other GPUs needing it. Senders
    and receiving GPUs are load-balanced greedily: pieces in order, each (piece, host) sent by
    the least-loaded sender holding the piece to the least-loaded GPU of the host needing it
    (ties: lowest index). Network bytes ``sum_q |hosts needing q| |q| beta`` (``S`` per
    receiver host replicated -> replicated, against ``t_z S`` naive); intra-host broadcast
    ``sum_q (|GPUs needing q| - |hosts needing q|) |q| beta``.

With equal sizes and layouts ``naive`` is Megatron's pipeline send (rank ``k`` to rank ``k``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import lcm

import numpy as np

from traffic.errors import InputError
from traffic.workload import Demand

__all__ = [
    "RESHARDING",
    "ReshardPlan",
    "intervals",
    "reshard_plan",
    "reshard_demands",
]

RESHARDING = ("naive", "broadcast")
"""Resharding algorithms: send/recv, and AlpaComm's broadcast-based, load-balanced one."""


@dataclass(frozen=True)
class ReshardPlan:
    """The transfers of one resharding of one replica, in mesh-local indices.

    Attributes
    ----------
    sends : tuple of (int, int, int)
        ``(sender index, receiver index, bytes)`` network transfers.
    broadcasts : tuple of (int, tuple of int, int)
        ``(root receiver, other receivers, bytes)`` intra-host broadcasts.
    """

    sends: tuple[tuple[int, int, int], ...]
    broadcasts: tuple[tuple[int, tuple[int, ...], int], ...]

    @property
    def network_bytes(self) -> int:
        """Bytes of the network sends."""
        return sum(b for _, _, b in self.sends)

    @property
    def broadcast_bytes(self) -> int:
        """Wire bytes of the intra-host broadcasts (``(g-1) S`` each)."""
        return sum(len(o) * b for _, o, b in self.broadcasts)


def intervals(n: int, parts: int) -> np.ndarray:
    """Element intervals ``[lo, hi)`` of ``parts`` near-equal shards of ``n`` elements.

    Examples
    --------
    >>> intervals(10, 4).tolist()
    [[0, 2], [2, 5], [5, 7], [7, 10]]
    """
    k = np.arange(parts + 1, dtype=np.int64)
    b = (k * n) // parts
    return np.column_stack([b[:-1], b[1:]])


def reshard_plan(
    elements: int,
    element_bytes: int,
    t_src: int,
    t_dst: int,
    sharded: bool,
    algorithm: str = "naive",
    dst_hosts: tuple[int, ...] | None = None,
) -> ReshardPlan:
    """Transfers that reshard a tensor from a mesh of ``t_src`` to one of ``t_dst`` GPUs.

    Parameters
    ----------
    elements, element_bytes : int
        Tensor size ``E`` and bytes per element.
    t_src, t_dst : int
        Sender and receiver mesh sizes.
    sharded : bool
        Both meshes shard the tensor (sequence parallelism), else both replicate it.
    algorithm : {"naive", "broadcast"}
        See the module docstring.
    dst_hosts : tuple of int, optional
        Host of each receiver GPU (default: all on one host); used by ``broadcast``.

    Returns
    -------
    ReshardPlan

    Examples
    --------
    Replicated 8 -> 4 GPUs on one host, a tensor of 8 MB:

    >>> reshard_plan(8 * 2**20, 1, 8, 4, False).network_bytes // 2**20
    32
    >>> p = reshard_plan(8 * 2**20, 1, 8, 4, False, "broadcast")
    >>> p.network_bytes // 2**20, p.broadcast_bytes // 2**20, len(p.sends)
    (8, 24, 8)
    """
    if algorithm not in RESHARDING:
        raise InputError("options.resharding", algorithm, f"one of {', '.join(RESHARDING)}")
    beta = int(element_bytes)
    src = intervals(elements, t_src) if sharded else np.tile([[0, elements]], (t_src, 1))
    dst = intervals(elements, t_dst) if sharded else np.tile([[0, elements]], (t_dst, 1))
    sends: list[tuple[int, int, int]] = []
    bcasts: list[tuple[int, tuple[int, ...], int]] = []
    if algorithm == "naive":
        for k in range(t_dst):
            lo, hi = dst[k]
            holders = range(t_src) if sharded else (k % t_src,)
            for j in holders:
                n = min(hi, src[j, 1]) - max(lo, src[j, 0])
                if n > 0:
                    sends.append((j, k, int(n) * beta))
        return ReshardPlan(tuple(sends), ())
    hosts = tuple(dst_hosts) if dst_hosts is not None else (0,) * t_dst
    if len(hosts) != t_dst:
        raise InputError("dst_hosts", len(hosts), f"{t_dst} hosts (one per receiver)")
    pieces = intervals(elements, lcm(t_src, t_dst))
    send_load = np.zeros(t_src, np.int64)
    recv_load = np.zeros(t_dst, np.int64)
    for lo, hi in pieces.tolist():
        n = (hi - lo) * beta
        if n == 0:
            continue
        holders = np.flatnonzero((src[:, 0] <= lo) & (src[:, 1] >= hi))
        needers = np.flatnonzero((dst[:, 0] <= lo) & (dst[:, 1] >= hi))
        for host in sorted({hosts[k] for k in needers}):
            on_host = [int(k) for k in needers if hosts[k] == host]
            j = int(holders[np.argmin(send_load[holders])])
            root = on_host[int(np.argmin(recv_load[on_host]))]
            send_load[j] += n
            recv_load[root] += n
            sends.append((j, root, n))
            others = tuple(k for k in on_host if k != root)
            if others:
                bcasts.append((root, others, n))
    return ReshardPlan(tuple(sends), tuple(bcasts))


def reshard_demands(
    src_mesh: np.ndarray,
    dst_mesh: np.ndarray,
    elements: int,
    element_bytes: int,
    sharded: bool,
    algorithm: str,
    gpus_per_server: int,
    *,
    phase: str,
    count: int,
    stage: int,
    dst_stage: int,
    name: str,
) -> list[Demand]:
    """The resharding of every pipeline replica as ``pp`` demand families.

    Parameters
    ----------
    src_mesh, dst_mesh : numpy.ndarray
        ``(R, t_src)`` and ``(R, t_dst)`` global ranks, row ``r`` one replica
        (:func:`traffic.placement.stage_meshes`).
    elements, element_bytes, sharded, algorithm
        As :func:`reshard_plan`.
    gpus_per_server : int
        Host of rank ``r`` is ``r // gpus_per_server``.
    phase, count, stage, dst_stage, name
        Demand fields; sends belong to ``stage`` (the sender's), broadcasts to ``dst_stage``.

    Returns
    -------
    list of Demand
        ``send`` families (one per byte size) and ``broadcast`` families (one per byte size and
        group size), replicas with the same host pattern of receivers stacked in their rows.

    Examples
    --------
    >>> src = np.arange(8).reshape(1, 8); dst = np.arange(8, 12).reshape(1, 4)
    >>> ds = reshard_demands(src, dst, 1024, 2, False, "broadcast", 8, phase="forward",
    ...                      count=3, stage=0, dst_stage=1, name="x")
    >>> [(d.op, d.groups.shape, d.size) for d in ds]
    [('send', (8, 2), 256.0), ('broadcast', (8, 4), 256.0)]
    """
    src_mesh, dst_mesh = np.asarray(src_mesh, np.int64), np.asarray(dst_mesh, np.int64)
    t_src, t_dst = src_mesh.shape[1], dst_mesh.shape[1]
    host = dst_mesh // gpus_per_server
    # receivers' host pattern per replica: label k = index of its host among the row's hosts
    pattern = np.array([np.unique(r, return_inverse=True)[1] for r in host], np.int64)
    pats, inv = np.unique(pattern, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    sends: dict[int, list[np.ndarray]] = {}
    bcasts: dict[tuple[int, int], list[np.ndarray]] = {}
    for p, pat in enumerate(pats):
        reps = np.flatnonzero(inv == p)
        plan = reshard_plan(
            elements, element_bytes, t_src, t_dst, sharded, algorithm, tuple(pat.tolist())
        )
        for j, k, b in plan.sends:
            sends.setdefault(b, []).append(np.column_stack([src_mesh[reps, j], dst_mesh[reps, k]]))
        for root, others, b in plan.broadcasts:
            cols = [root, *others]
            bcasts.setdefault((b, len(cols)), []).append(dst_mesh[reps][:, cols])
    out: list[Demand] = []
    for b in sorted(sends):
        out.append(
            Demand(
                "send",
                np.concatenate(sends[b]),
                float(b),
                "pp",
                phase,
                count,
                False,
                f"{name} ({algorithm})",
                stage=stage,
            )
        )
    for b, g in sorted(bcasts):
        out.append(
            Demand(
                "broadcast",
                np.concatenate(bcasts[(b, g)]),
                float(b),
                "pp",
                phase,
                count,
                False,
                f"{name} (intra-host broadcast)",
                stage=dst_stage,
            )
        )
    return out
