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

Compute is not written: a plan's Workload holds the traffic, not a schedule (the iteration model
builds that), and a task graph's dependencies are not carried over either. The traces therefore
describe *what* is communicated, in a deadlock-free order, not when.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from traffic.chakra.framing import encode_varint
from traffic.chakra.groups import comm_groups_text
from traffic.chakra.schema import COLLECTIVE, NODE_TYPE, messages
from traffic.errors import InputError
from traffic.workload import PHASES, Workload

__all__ = ["COMM_TYPE_OF_OP", "MAX_NODES", "chakra_node_count", "write_chakra"]

COMM_TYPE_OF_OP = {
    "all-reduce": COLLECTIVE["ALL_REDUCE"],
    "all-gather": COLLECTIVE["ALL_GATHER"],
    "reduce-scatter": COLLECTIVE["REDUCE_SCATTER"],
    "all-to-all": COLLECTIVE["ALL_TO_ALL"],
    "broadcast": COLLECTIVE["BROADCAST"],
}
"""Our op -> Chakra ``comm_type``."""

MAX_NODES = 5_000_000
"""Most nodes (over all ranks) one export writes; about 100 bytes each on disk."""

SCHEMA = "topoopt-chakra-1"


def _order(w: Workload) -> list[int]:
    """Demand indices in phase order (stable within a phase)."""
    return sorted(range(len(w.demands)), key=lambda i: PHASES.index(w.demands[i].phase))


def chakra_node_count(w: Workload) -> int:
    """Nodes an export of ``w`` writes over all ranks (collectives of one rank carry none).

    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(4, 2, (Demand("all-reduce", [[0, 1], [2, 3]], 8.0, "dp", "backward", 3),))
    >>> chakra_node_count(w)
    12
    """
    total = 0
    for d in w.demands:
        if d.group_size < 2 or d.count == 0:
            continue
        total += d.count * d.n_groups * d.group_size
    return int(total)


def _attr(node, name: str, **value) -> None:
    node.attr.add(name=name, **value)


def write_chakra(
    w: Workload, folder: str | os.PathLike, *, name: str = "trace", max_nodes: int = MAX_NODES
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

    Returns
    -------
    dict
        ``ranks``, ``nodes``, ``process_groups``, ``bytes`` written, ``files``.
    """
    n_nodes = chakra_node_count(w)
    if n_nodes > max_nodes:
        raise InputError(
            "export",
            f"{n_nodes:,} Chakra nodes for {w.name or 'this workload'}",
            f"at most {max_nodes:,} (a smaller plan: fewer GPUs, micro-batches or layers)",
        )
    m = messages()
    folder = Path(folder)
    n = w.gpus
    per_rank: list[list] = [[] for _ in range(n)]
    next_id = np.zeros(n, np.int64)
    pgs: dict[tuple[int, ...], str] = {}
    coll_type, send_type, recv_type = (
        NODE_TYPE["COMM_COLL_NODE"],
        NODE_TYPE["COMM_SEND_NODE"],
        NODE_TYPE["COMM_RECV_NODE"],
    )

    def add(rank: int, node) -> None:
        node.id = int(next_id[rank])
        if next_id[rank]:
            node.ctrl_deps.append(int(next_id[rank] - 1))
        next_id[rank] += 1
        per_rank[rank].append(node)

    for tag, i in enumerate(_order(w)):
        d = w.demands[i]
        if d.group_size < 2 or d.count == 0:
            continue
        size = float(d.size)
        whole = size == int(size)
        common = {"cls": d.cls, "phase": d.phase}
        for rep in range(d.count):
            for row in d.groups.tolist():
                if d.op == "send":
                    src, dst = int(row[0]), int(row[1])
                    for rank, ntype, peer_field, peer in (
                        (src, send_type, "comm_dst", dst),
                        (dst, recv_type, "comm_src", src),
                    ):
                        node = m.Node(name=f"{d.cls} send {tag}.{rep}", type=ntype)
                        _attr(node, "is_cpu_op", bool_val=False)
                        _attr(node, "comm_size", int64_val=int(round(size)))
                        _attr(node, peer_field, int64_val=peer)
                        _attr(node, "comm_tag", int64_val=tag)
                        _extras(node, common, size, whole)
                        add(rank, node)
                    continue
                key = tuple(int(r) for r in row)
                pg = pgs.setdefault(key, str(len(pgs) + 1))
                for pos, rank in enumerate(key):
                    node = m.Node(name=f"{d.cls} {d.op} {tag}.{rep}", type=coll_type)
                    _attr(node, "is_cpu_op", bool_val=False)
                    _attr(node, "comm_type", int64_val=COMM_TYPE_OF_OP[d.op])
                    _attr(node, "comm_size", int64_val=int(round(size)))
                    _attr(node, "pg_name", string_val=pg)
                    _extras(node, common, size, whole)
                    if d.peer_bytes is not None:
                        node.attr.add(name="topoopt_peer_bytes").double_list.values.extend(
                            d.peer_bytes[pos].tolist()
                        )
                    add(rank, node)
    meta = m.GlobalMetadata(version="0.0.4")
    meta.attr.add(name="schema", string_val=SCHEMA)
    meta.attr.add(name="gpus_per_server", uint64_val=int(w.gpus_per_server))
    meta.attr.add(name="workload", string_val=str(w.name))
    head = meta.SerializeToString(deterministic=True)
    head = encode_varint(len(head)) + head
    written = 0
    files = []
    for rank in range(n):
        parts = [head]
        for node in per_rank[rank]:
            body = node.SerializeToString(deterministic=True)
            parts.append(encode_varint(len(body)))
            parts.append(body)
        data = b"".join(parts)
        p = folder / f"{name}.{rank}.et"
        p.write_bytes(data)
        written += len(data)
        files.append(p.name)
    groups = {pg: key for key, pg in pgs.items()}
    text = comm_groups_text(groups)
    (folder / "comm_group.json").write_text(text, encoding="utf-8")
    return {
        "ranks": n,
        "nodes": int(next_id.sum()),
        "process_groups": len(groups),
        "bytes": written + len(text.encode()),
        "files": files + ["comm_group.json"],
    }


def _extras(node, common: dict, size: float, whole: bool) -> None:
    _attr(node, "topoopt_class", string_val=common["cls"])
    _attr(node, "topoopt_phase", string_val=common["phase"])
    if not whole:
        _attr(node, "topoopt_size", double_val=size)
