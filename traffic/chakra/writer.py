"""Write a Workload's communication as per-rank Chakra execution traces.

One trace per rank, ``NAME.<rank>.et``, plus ``comm_group.json`` (ASTRA-sim's comm-group file:
process-group name -> member ranks in ring order). Every collective of every demand family is
written ``count`` times for each of its groups, as a ``COMM_COLL_NODE`` on each member with
``comm_type``, ``comm_size`` (``S``, nccl-tests convention) and ``pg_name``; a ``send`` becomes a
``COMM_SEND_NODE`` on the source (``comm_dst``, ``comm_tag``) and a ``COMM_RECV_NODE`` on the
destination (``comm_src``, ``comm_tag``). Each rank's nodes form one chain (``ctrl_deps`` on the
previous node) in one global order, so every group sees its collectives in the same order on all
members and a replay cannot deadlock.

Our own attributes make the round trip exact and are ignored by other readers: ``topoopt_class``
and ``topoopt_phase`` on every communication node, ``topoopt_size`` (double) when ``S`` is not a
whole number of bytes, ``topoopt_peer_bytes`` (this member's row) for a non-uniform all-to-all.
The global metadata carries ``gpus_per_server``.

**Compute** (optional, ``compute=``): the caller gives each rank's forward and backward seconds
per micro-batch and its optimizer seconds (topoopt's roofline times,
:func:`topoopt.exports.astra_sim.compute_durations`). The forward and backward phases are then
written micro-batch by micro-batch: a ``COMP_NODE`` (``duration_micros``, rounded to whole
microseconds, the field's unit; ``topoopt_duration_s`` keeps the exact value) followed by that
micro-batch's share of every per-micro-batch family (``count / m`` collectives), then the
families run once per iteration (gradient synchronisation); the optimizer's ``COMP_NODE``
precedes the optimizer-phase collectives. The chain stays one global order (deadlock-free); it
does not reproduce the 1F1B schedule or overlap compute with communication. Without
``compute``, only communication is written: the traces describe *what* is communicated, in a
deadlock-free order, not when.

**Streaming.** Nodes are encoded as they are generated (each distinct node body is serialised
once and reused for its ``count`` repetitions, with its ``id`` and ``ctrl_deps`` prepended) into a
per-rank buffer appended to the rank's file every :data:`FLUSH_BYTES`, so memory is bounded by
the buffers (:func:`chakra_memory_estimate`, checked against ``TOPOOPT_MEMORY_BUDGET_GB`` before
anything is written) and not by the node count; ``max_nodes`` only bounds the disk written
(about 60-140 bytes a node).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from traffic.chakra.framing import encode_varint
from traffic.chakra.groups import comm_groups_text
from traffic.chakra.schema import COLLECTIVE, NODE_TYPE, messages
from traffic.errors import InputError
from traffic.limits import check_memory
from traffic.workload import PHASES, Workload, peer_row

__all__ = [
    "COMM_TYPE_OF_OP",
    "FLUSH_BYTES",
    "MAX_NODES",
    "chakra_memory_estimate",
    "chakra_node_count",
    "write_chakra",
]

COMM_TYPE_OF_OP = {
    "all-reduce": COLLECTIVE["ALL_REDUCE"],
    "all-gather": COLLECTIVE["ALL_GATHER"],
    "reduce-scatter": COLLECTIVE["REDUCE_SCATTER"],
    "all-to-all": COLLECTIVE["ALL_TO_ALL"],
    "broadcast": COLLECTIVE["BROADCAST"],
}
"""Our op -> Chakra ``comm_type``."""

MAX_NODES = 20_000_000
"""Default cap on the nodes (over all ranks) one export writes: about 2.7 GB on disk and half a
minute of CPU here (``gpt3-175b``'s 5,887,104 nodes: 801 MB, 9.8 s CPU); every embedded plan
fits (``gpt3-175b-fsdp``: 16,651,264). At 200,000,000 a 16-GPU GPT of 10^6 layers (128 M
nodes) was admitted and wrote for minutes."""

FLUSH_BYTES = 1 << 16
"""Bytes a rank's buffer holds before it is appended to the rank's file."""

SCHEMA = "topoopt-chakra-1"


def _order(w: Workload) -> list[int]:
    """Demand indices in phase order (stable within a phase)."""
    return sorted(range(len(w.demands)), key=lambda i: PHASES.index(w.demands[i].phase))


def _written(d) -> bool:
    return d.group_size >= 2 and d.count > 0


def _per_microbatch(d, m: int) -> bool:
    """A family split over the ``m`` micro-batches (forward/backward, not data-parallel)."""
    return d.phase in ("forward", "backward") and d.cls != "dp" and d.count % m == 0


def chakra_node_count(w: Workload, compute: dict | None = None) -> int:
    """Nodes an export of ``w`` writes over all ranks (collectives of one rank carry none).

    With ``compute``, each rank adds ``2 m + 1`` compute nodes (forward and backward per
    micro-batch, the optimizer).

    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(4, 2, (Demand("all-reduce", [[0, 1], [2, 3]], 8.0, "dp", "backward", 3),))
    >>> chakra_node_count(w)
    12
    >>> chakra_node_count(w, {"micro_batches": 2})
    32
    """
    total = sum(d.count * d.n_groups * d.group_size for d in w.demands if _written(d))
    if compute is not None:
        total += w.gpus * (2 * int(compute["micro_batches"]) + 1)
    return int(total)


def chakra_memory_estimate(w: Workload) -> float:
    """Bytes :func:`write_chakra` holds at most: a :data:`FLUSH_BYTES` buffer per rank plus one
    serialised body (about 160 bytes) per distinct node, i.e. per member of each group of
    each family (repetitions reuse it), plus the process-group table."""
    distinct = sum(d.n_groups * d.group_size for d in w.demands if _written(d))
    peer = sum(
        d.n_groups * d.group_size * d.group_size * 8
        for d in w.demands
        if _written(d) and d.peer_bytes is not None
    )
    return float(w.gpus) * (FLUSH_BYTES + 4096) + 160.0 * distinct + peer


def _attr(node, name: str, **value) -> None:
    node.attr.add(name=name, **value)


def _framed(node_id: int, body: bytes) -> bytes:
    """A Node message: ``id`` (field 1), ``ctrl_deps`` on ``id - 1`` (field 4, packed) and the
    pre-serialised ``body``, prefixed by its length (protobuf accepts fields in any order)."""
    head = b"\x08" + encode_varint(node_id)
    if node_id:
        dep = encode_varint(node_id - 1)
        head += b"\x22" + encode_varint(len(dep)) + dep
    msg = head + body
    return encode_varint(len(msg)) + msg


class _Ranks:
    """Per-rank next id and buffered bytes, appended to ``NAME.<rank>.et`` when full."""

    def __init__(self, folder: Path, name: str, n: int, head: bytes):
        self.paths = [folder / f"{name}.{r}.et" for r in range(n)]
        self.next_id = [0] * n
        self.buf = [bytearray(head) for _ in range(n)]
        self.written = 0
        for p in self.paths:
            p.write_bytes(b"")

    def add(self, rank: int, body: bytes) -> None:
        i = self.next_id[rank]
        self.next_id[rank] = i + 1
        b = self.buf[rank]
        b += _framed(i, body)
        if len(b) >= FLUSH_BYTES:
            self.flush(rank)

    def flush(self, rank: int) -> None:
        b = self.buf[rank]
        if b:
            with open(self.paths[rank], "ab") as f:
                f.write(b)
            self.written += len(b)
            b.clear()


def write_chakra(
    w: Workload,
    folder: str | os.PathLike,
    *,
    name: str = "trace",
    max_nodes: int = MAX_NODES,
    compute: dict | None = None,
) -> dict:
    """Write ``w`` as ``folder/NAME.<rank>.et`` for every rank plus ``folder/comm_group.json``.

    Parameters
    ----------
    w : Workload
    folder : path
        An existing, empty folder (the CLI writes into a temporary folder and renames it).
    name : str
        File name prefix.
    max_nodes : int
        Refuse (``InputError``) an export that would write more nodes than this.
    compute : dict, optional
        ``micro_batches`` (int ``m``), and per-rank arrays of seconds ``forward`` and
        ``backward`` (one micro-batch) and ``optimizer`` (the step): written as compute nodes
        (see the module docstring).

    Returns
    -------
    dict
        ``ranks``, ``nodes``, ``compute_nodes``, ``process_groups``, ``bytes`` written,
        ``files``.

    Raises
    ------
    InputError
        Over ``max_nodes`` (``--max-nodes``) or over the memory budget, before anything is
        written.
    """
    n = w.gpus
    n_nodes = chakra_node_count(w, compute)
    if n_nodes > max_nodes:
        raise InputError(
            "--max-nodes",
            f"{n_nodes:,} Chakra nodes for {w.name or 'this workload'} (about "
            f"{n_nodes * 140 / 1e9:,.1f} GB on disk)",
            f"at most {max_nodes:,} (raise --max-nodes, or a smaller plan)",
        )
    check_memory("export", chakra_memory_estimate(w), f"a Chakra export of {n:,} ranks")
    m_compute = 0
    if compute is not None:
        m_compute = int(compute["micro_batches"])
        phases = ("forward", "backward", "optimizer")
        times = {k: np.asarray(compute[k], np.float64) for k in phases}
        for k, t in times.items():
            if t.shape != (n,) or not np.all(np.isfinite(t)) or np.any(t < 0):
                raise InputError(f"compute.{k}", t.shape, f"{n} finite seconds >= 0 (one a rank)")
        if m_compute < 1:
            raise InputError("compute.micro_batches", m_compute, "an integer >= 1")
    m = messages()
    folder = Path(folder)
    meta = m.GlobalMetadata(version="0.0.4")
    meta.attr.add(name="schema", string_val=SCHEMA)
    meta.attr.add(name="gpus_per_server", uint64_val=int(w.gpus_per_server))
    meta.attr.add(name="workload", string_val=str(w.name))
    head = meta.SerializeToString(deterministic=True)
    out = _Ranks(folder, name, n, encode_varint(len(head)) + head)
    pgs: dict[tuple[int, ...], str] = {}
    coll_type, send_type, recv_type = (
        NODE_TYPE["COMM_COLL_NODE"],
        NODE_TYPE["COMM_SEND_NODE"],
        NODE_TYPE["COMM_RECV_NODE"],
    )
    comp_type = NODE_TYPE["COMP_NODE"]
    comp_cache: dict[tuple[str, float], bytes] = {}
    n_comp = 0

    def comp(phase: str, j: int) -> None:
        nonlocal n_comp
        for rank in range(n):
            t = float(times[phase][rank])
            body = comp_cache.get((phase, t))
            if body is None:
                node = m.Node(name=f"{phase} compute", type=comp_type)
                node.duration_micros = int(round(t * 1e6))
                _attr(node, "is_cpu_op", bool_val=False)
                _attr(node, "topoopt_phase", string_val=phase)
                _attr(node, "topoopt_duration_s", double_val=t)
                body = comp_cache[(phase, t)] = node.SerializeToString(deterministic=True)
            out.add(rank, body)
            n_comp += 1

    def bodies(tag: int, d) -> list[list[tuple[int, bytes]]]:
        """(rank, serialised body) of every node of one collective/send, per group."""
        size = float(d.size)
        whole = size == int(size)
        common = {"cls": d.cls, "phase": d.phase}
        rows = []
        for row in d.groups.tolist():
            items = []
            if d.op == "send":
                src, dst = int(row[0]), int(row[1])
                for rank, ntype, peer_field, peer in (
                    (src, send_type, "comm_dst", dst),
                    (dst, recv_type, "comm_src", src),
                ):
                    node = m.Node(name=f"{d.cls} send {tag}", type=ntype)
                    _attr(node, "is_cpu_op", bool_val=False)
                    _attr(node, "comm_size", int64_val=int(round(size)))
                    _attr(node, peer_field, int64_val=peer)
                    _attr(node, "comm_tag", int64_val=tag)
                    _extras(node, common, size, whole)
                    items.append((rank, node.SerializeToString(deterministic=True)))
                rows.append(items)
                continue
            key = tuple(int(r) for r in row)
            pg = pgs.setdefault(key, str(len(pgs) + 1))
            for pos, rank in enumerate(key):
                node = m.Node(name=f"{d.cls} {d.op} {tag}", type=coll_type)
                _attr(node, "is_cpu_op", bool_val=False)
                _attr(node, "comm_type", int64_val=COMM_TYPE_OF_OP[d.op])
                _attr(node, "comm_size", int64_val=int(round(size)))
                _attr(node, "pg_name", string_val=pg)
                _extras(node, common, size, whole)
                if d.peer_bytes is not None:
                    node.attr.add(name="topoopt_peer_bytes").double_list.values.extend(
                        peer_row(d.peer_bytes, pos).tolist()
                    )
                items.append((rank, node.SerializeToString(deterministic=True)))
            rows.append(items)
        return rows

    def emit(rows, reps: int) -> None:
        for _ in range(reps):
            for items in rows:
                for rank, body in items:
                    out.add(rank, body)

    order = [(tag, w.demands[i]) for tag, i in enumerate(_order(w)) if _written(w.demands[i])]
    cache = {tag: bodies(tag, d) for tag, d in order}
    for phase in PHASES:
        fams = [(tag, d) for tag, d in order if d.phase == phase]
        if compute is not None and phase in ("forward", "backward"):
            split = [(t, d) for t, d in fams if _per_microbatch(d, m_compute)]
            rest = [(t, d) for t, d in fams if not _per_microbatch(d, m_compute)]
            for j in range(m_compute):
                comp(phase, j)
                for tag, d in split:
                    emit(cache[tag], d.count // m_compute)
            fams = rest
        elif compute is not None and phase == "optimizer":
            comp("optimizer", 0)
        for tag, d in fams:
            emit(cache[tag], d.count)
    for rank in range(n):
        out.flush(rank)
    groups = {pg: key for key, pg in pgs.items()}
    text = comm_groups_text(groups)
    (folder / "comm_group.json").write_text(text, encoding="utf-8")
    return {
        "ranks": n,
        "nodes": int(sum(out.next_id)),
        "compute_nodes": n_comp,
        "process_groups": len(groups),
        "bytes": out.written + len(text.encode()),
        "files": [p.name for p in out.paths] + ["comm_group.json"],
    }


def _extras(node, common: dict, size: float, whole: bool) -> None:
    _attr(node, "topoopt_class", string_val=common["cls"])
    _attr(node, "topoopt_phase", string_val=common["phase"])
    if not whole:
        _attr(node, "topoopt_size", double_val=size)
