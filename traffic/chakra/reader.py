"""Import a folder of per-rank Chakra execution traces (``NAME.<rank>.et``) as a Workload.

Mapping onto the symbolic :class:`~traffic.workload.Workload`:

- **Collectives** (``COMM_COLL_NODE``): the ``k``-th collective of a process group on each of its
  members is one collective of that group. Its ``comm_type`` gives the op (``ALL_REDUCE``,
  ``ALL_GATHER``, ``REDUCE_SCATTER`` / ``REDUCE_SCATTER_BLOCK``, ``ALL_TO_ALL``, ``BROADCAST``;
  ``BARRIER`` synchronises without traffic) and ``comm_size`` its size ``S`` in bytes, read in
  the nccl-tests convention of :mod:`traffic.workload`. Every member must agree on both.
- **Process groups**: ``pg_name`` names the group. Its members are read from a
  ``comm_group.json`` beside the traces when there is one (ASTRA-sim's comm-group file:
  ``{"<pg_name>": [ranks...]}``), else they are the ranks whose traces use that ``pg_name``; a
  collective without ``pg_name`` spans every rank.
- **Point-to-point** (``COMM_SEND_NODE`` / ``COMM_RECV_NODE``): ``comm_dst`` on the sender,
  ``comm_src`` on the receiver (each defaults to the trace's own rank), ``comm_tag`` (default 0) and
  ``comm_size``. The ``k``-th send from ``a`` to ``b`` with a tag pairs with the ``k``-th receive
  at ``b`` from ``a`` with that tag; the pair is one ``send`` of ``comm_size`` bytes. The transfer
  starts when the send's dependencies are met (a send does not wait for the receive to be
  posted), and the receive completes when the transfer has arrived and its own dependencies are
  met.
- **Compute** (``COMP_NODE``): ``duration_micros`` becomes the task's run time. GPU operators run
  one at a time per rank, CPU operators (``is_cpu_op`` true) on the rank's host thread beside them.
- Every other node (metadata, memory, ...) is a zero-time step that keeps its dependencies.
- **Host-side calls**: a communication node with ``is_cpu_op`` true and neither ``comm_type``
  nor ``comm_size`` (PyTorch's ``c10d::allreduce_`` ...; the GPU kernel node below it carries the
  collective) is a step of the rank's host thread, as long as its ``duration_micros``.
- **Dependencies**: ``ctrl_deps`` and ``data_deps`` both mean "after". A dependency on an id that
  is not in the trace (a node the converter dropped) is ignored and counted in
  ``Workload.info["dangling_dependencies"]``. Older converters wrote a CPU operator and its GPU
  kernel as each other's dependency (one by control, one by data): control dependencies inside
  a cycle are dropped (counted in ``info``); a cycle of data dependencies is an error.

Chakra does not say which parallelism a collective serves, nor the phase. A node's attributes
``topoopt_class`` and ``topoopt_phase`` (written by :mod:`traffic.chakra.writer`) give them;
otherwise the class is ``mp`` and the phase ``forward``. ``gpus_per_server`` comes from the
``gpus_per_server`` attribute of the global metadata when present, else the caller, else 1 (each
rank a server of its own). Families of identical collectives (op, size, class, phase, group size,
repeats) become one :class:`~traffic.workload.Demand` each, and every node becomes a task of the
Workload's :class:`~traffic.workload.TaskGraph` (collectives and send/receive pairs merged across
ranks), so the iteration model replays the trace's dependency graph.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from traffic.chakra.framing import ALLOWED as FRAMING_ALLOWED
from traffic.chakra.framing import MAX_TRACE_BYTES, unframe
from traffic.chakra.schema import COLLECTIVE, NODE_TYPE
from traffic.errors import InputError
from traffic.limits import MAX_ITERATION_BYTES, max_input_bytes
from traffic.workload import CLASSES, PHASES, Demand, TaskGraph, Workload

__all__ = ["OPS_BY_COMM_TYPE", "MAX_RANKS", "trace_files", "read_chakra", "is_chakra_folder"]

OPS_BY_COMM_TYPE = {
    COLLECTIVE["ALL_REDUCE"]: "all-reduce",
    COLLECTIVE["ALL_GATHER"]: "all-gather",
    COLLECTIVE["REDUCE_SCATTER"]: "reduce-scatter",
    COLLECTIVE["REDUCE_SCATTER_BLOCK"]: "reduce-scatter",
    COLLECTIVE["ALL_TO_ALL"]: "all-to-all",
    COLLECTIVE["BROADCAST"]: "broadcast",
    COLLECTIVE["BARRIER"]: "barrier",
}
"""Chakra ``comm_type`` -> our op (``barrier``: synchronisation without traffic)."""

MAX_RANKS = 65536
"""Most ranks (trace files) a folder may hold."""

_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<rank>0|[1-9][0-9]*)\.et$")
_ALLOWED_FOLDER = "a folder of Chakra traces NAME.<rank>.et for ranks 0..n-1 (one NAME)"
_COLL, _SEND, _RECV, _COMP = (
    NODE_TYPE["COMM_COLL_NODE"],
    NODE_TYPE["COMM_SEND_NODE"],
    NODE_TYPE["COMM_RECV_NODE"],
    NODE_TYPE["COMP_NODE"],
)


def trace_files(folder: str | os.PathLike) -> list[Path]:
    """The trace files of ``folder`` in rank order.

    Raises
    ------
    InputError
        Not a folder, no ``*.et`` file, several prefixes, or ranks that are not ``0..n-1``.
    """
    d = Path(folder)
    if not d.is_dir():
        raise InputError(str(folder), "not a folder", _ALLOWED_FOLDER)
    found: dict[str, dict[int, Path]] = defaultdict(dict)
    for p in d.iterdir():
        m = _NAME.match(p.name)
        if m and p.is_file():
            found[m["prefix"]][int(m["rank"])] = p
    if not found:
        raise InputError(str(folder), "no NAME.<rank>.et file", _ALLOWED_FOLDER)
    if len(found) > 1:
        raise InputError(str(folder), f"several trace names: {sorted(found)[:4]}", _ALLOWED_FOLDER)
    ranks = next(iter(found.values()))
    if len(ranks) > MAX_RANKS:
        raise InputError(str(folder), f"{len(ranks)} ranks", f"at most {MAX_RANKS} ranks")
    missing = sorted(set(range(len(ranks))) - set(ranks))
    if missing:
        raise InputError(
            str(folder), f"ranks {sorted(ranks)[:6]}... without rank {missing[0]}", _ALLOWED_FOLDER
        )
    return [ranks[r] for r in range(len(ranks))]


def is_chakra_folder(source: str | os.PathLike) -> bool:
    """True when ``source`` is a folder holding at least one ``*.<rank>.et`` file."""
    d = Path(source)
    return d.is_dir() and any(_NAME.match(p.name) for p in d.iterdir())


_VALUE_KINDS = ("int64_val", "uint64_val", "int32_val", "uint32_val", "sint64_val", "sint32_val")


def _attrs(node) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        if kind is None:
            continue
        v = getattr(a, kind)
        if kind.endswith("_list"):
            v = list(v.values)
        out[a.name] = (kind, v)
    return out


def _int_attr(attrs: dict, name: str, where: str, default=None, lo: int = 0) -> int:
    if name not in attrs:
        if default is None:
            raise InputError(f"{where}.{name}", "missing", "an integer attribute")
        return default
    kind, v = attrs[name]
    if kind not in _VALUE_KINDS and kind not in ("fixed64_val", "fixed32_val", "sfixed64_val"):
        raise InputError(f"{where}.{name}", f"a {kind} attribute", "an integer attribute")
    if v < lo:
        raise InputError(f"{where}.{name}", v, f"an integer >= {lo}")
    return int(v)


def _str_attr(attrs: dict, name: str, where: str, default: str = "") -> str:
    if name not in attrs:
        return default
    kind, v = attrs[name]
    if kind != "string_val":
        raise InputError(f"{where}.{name}", f"a {kind} attribute", "a string attribute")
    return v


def _comm_groups(folder: Path) -> dict[str, tuple[int, ...]] | None:
    p = folder / "comm_group.json"
    if not p.is_file():
        return None
    from traffic.chakra.groups import parse_comm_groups

    return parse_comm_groups(p)


class _Rank:
    """One rank's nodes as arrays plus the indices of its communication nodes."""

    __slots__ = ("rank", "src", "nodes", "index", "deps", "dangling", "self_ctrl")

    def __init__(self, rank: int, src: str, nodes):
        self.rank, self.src, self.nodes = rank, src, nodes
        ids = np.fromiter((n.id for n in nodes), np.uint64, len(nodes))
        order = np.argsort(ids, kind="stable")
        if ids.size and (np.diff(ids[order]) == 0).any():
            dup = int(ids[order][np.flatnonzero(np.diff(ids[order]) == 0)[0]])
            raise InputError(src, f"node id {dup} twice", "unique node ids")
        self.index = dict(zip(ids.tolist(), range(len(nodes)), strict=True))
        deps = set()  # (before, after, 1 for a control dependency / 0 for data)
        self.dangling = 0
        self.self_ctrl = 0
        for i, n in enumerate(nodes):
            for ctrl, ids_ in ((1, n.ctrl_deps), (0, n.data_deps)):
                for d in ids_:
                    j = self.index.get(d)
                    if j is None:  # a node the converter dropped: nothing to wait for
                        self.dangling += 1
                    elif j != i:
                        deps.add((j, i, ctrl))
                    elif ctrl:  # a control cycle of one node: dropped like longer ones
                        self.self_ctrl += 1
                    else:  # a data cycle of one node: refused like longer ones
                        raise InputError(
                            f"{src}: node {d}.data_deps", f"node {d} itself", "other nodes' ids"
                        )
        self.deps = np.array(sorted(deps), np.int64).reshape(-1, 3)


def read_chakra(
    folder: str | os.PathLike, gpus_per_server: int | None = None, *, name: str | None = None
) -> Workload:
    """Read a folder of per-rank Chakra traces into a Workload with its dependency graph.

    Parameters
    ----------
    folder : str or os.PathLike
        Holds ``NAME.0.et`` ... ``NAME.<n-1>.et`` (and optionally ``comm_group.json``).
    gpus_per_server : int, optional
        GPUs per server; default: the traces' ``gpus_per_server`` metadata attribute, else 1.
    name : str, optional
        Workload name (default: the folder's name).

    Raises
    ------
    InputError
        Malformed files (framing, protobuf), unknown dependency ids, a cycle, a collective whose
        members disagree on op or size, a group member without the matching collective, a send
        without its receive, an unsupported ``comm_type``.
    """
    folder = Path(folder)
    files = trace_files(folder)
    n = len(files)
    ranks: list[_Rank] = []
    meta_gps = None
    cap = MAX_TRACE_BYTES  # TOPOOPT_MAX_INPUT_MB lowers it when set (its default is lower)
    if os.environ.get("TOPOOPT_MAX_INPUT_MB", "").strip():
        cap = min(cap, max_input_bytes())
    for r, p in enumerate(files):
        try:
            size = p.stat().st_size
            if size > cap:
                raise InputError(str(p), f"{size:,} bytes", f"a trace of at most {cap:,} bytes")
            data = p.read_bytes()
        except OSError as e:
            raise InputError(str(p), f"unreadable ({e.strerror or e})", FRAMING_ALLOWED) from None
        meta, nodes = unframe(data, str(p))
        if r == 0:
            ma = _attrs(meta)
            if "gpus_per_server" in ma:
                meta_gps = _int_attr(ma, "gpus_per_server", f"{p}: metadata", lo=1)
        ranks.append(_Rank(r, str(p), nodes))
    g = int(gpus_per_server or meta_gps or 1)
    if n % g:
        raise InputError("gpus_per_server", g, f"a divisor of the {n} ranks")
    groups_file = _comm_groups(folder)

    # ---- pass 1: classify nodes, collect collectives per (pg, rank) and p2p per channel -----
    T_kind: list[str] = []  # per task
    T_rank: list[int] = []
    T_runtime: list[float] = []
    T_size: list[float] = []
    T_cpu: list[bool] = []
    T_info: list[tuple] = []  # (op, size, cls, phase) or ()
    task_of: list[np.ndarray] = []  # per rank: node index -> task
    pg_seq: dict[str, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    sends: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    recvs: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for rk in ranks:
        tmap = np.full(len(rk.nodes), -1, np.int64)
        for i, node in enumerate(rk.nodes):
            where = f"{rk.src}: node {node.id}"
            t = int(node.type)
            a = _attrs(node) if t in (_COLL, _SEND, _RECV, _COMP) else {}
            host = a.get("is_cpu_op", ("bool_val", False))
            host = host[0] == "bool_val" and bool(host[1])
            if (
                t in (_COLL, _SEND, _RECV)
                and host
                and "comm_type" not in a
                and "comm_size" not in a
            ):
                # the host-side call (c10d::allreduce_ ...); its GPU kernel node carries the
                # collective. A step of the host thread, as long as the call took.
                t = _COMP
            if t in (_COLL, _SEND, _RECV):
                size = _int_attr(a, "comm_size", where)
                exact = a.get("topoopt_size")
                if exact is not None and exact[0] == "double_val":
                    if not np.isfinite(exact[1]) or abs(exact[1] - size) > 1.0:
                        raise InputError(f"{where}.topoopt_size", exact[1], "comm_size +- 1 byte")
                    size = exact[1]
                cls = _str_attr(a, "topoopt_class", where, "mp")
                if cls not in CLASSES:
                    raise InputError(f"{where}.topoopt_class", cls, f"one of {', '.join(CLASSES)}")
                phase = _str_attr(a, "topoopt_phase", where, "forward")
                if phase not in PHASES:
                    raise InputError(f"{where}.topoopt_phase", phase, f"one of {', '.join(PHASES)}")
                if t == _COLL:
                    ct = _int_attr(a, "comm_type", where)
                    op = OPS_BY_COMM_TYPE.get(ct)
                    if op is None:
                        known = ", ".join(
                            f"{k}={v}" for k, v in COLLECTIVE.items() if v in OPS_BY_COMM_TYPE
                        )
                        raise InputError(f"{where}.comm_type", ct, f"one of {known}")
                    pg = _str_attr(a, "pg_name", where)
                    pg_seq[pg][rk.rank].append((i, len(T_kind)))
                    peer = a.get("topoopt_peer_bytes")
                    T_info.append((op, size, cls, phase, peer))
                    T_kind.append("collective")
                else:
                    tag = _int_attr(a, "comm_tag", where, default=0)
                    if t == _SEND:
                        s = _int_attr(a, "comm_src", where, default=rk.rank)
                        dst = _int_attr(a, "comm_dst", where)
                        key = (s, dst, tag)
                        sends[key].append((rk.rank, len(T_kind)))
                    else:
                        s = _int_attr(a, "comm_src", where)
                        dst = _int_attr(a, "comm_dst", where, default=rk.rank)
                        key = (s, dst, tag)
                        recvs[key].append((rk.rank, len(T_kind)))
                    for f, v in (("comm_src", s), ("comm_dst", dst)):
                        if v >= n:
                            raise InputError(f"{where}.{f}", v, f"a rank < {n}")
                    T_info.append(("send", size, cls, phase, None))
                    T_kind.append("send" if t == _SEND else "recv")
                T_runtime.append(0.0)
                T_cpu.append(False)
            elif t == _COMP:
                T_kind.append("compute")
                T_runtime.append(node.duration_micros * 1e-6)
                T_cpu.append(host)
                T_info.append(())
            else:
                T_kind.append("step")
                T_runtime.append(0.0)
                T_cpu.append(False)
                T_info.append(())
            T_rank.append(rk.rank)
            T_size.append(0.0)
            tmap[i] = len(T_kind) - 1
        task_of.append(tmap)

    n_nodes = len(T_kind)
    merge = np.arange(n_nodes, dtype=np.int64)  # node task -> representative task
    # ---- collectives: the k-th of a pg on each member is one collective ----------------------
    coll_rows: list[tuple[int, tuple[int, ...], list[int]]] = []  # (task, members, per member)
    for pg, per_rank in pg_seq.items():
        if groups_file is not None and pg in groups_file:
            members = groups_file[pg]
        elif pg == "":
            members = tuple(range(n))
        else:
            members = tuple(sorted(per_rank))
        outside = sorted(set(per_rank) - set(members))
        if outside:
            raise InputError(
                f"pg_name {pg!r}", f"used by rank {outside[0]}", f"members {list(members)[:8]}"
            )
        counts = {r: len(per_rank.get(r, ())) for r in members}
        if len(set(counts.values())) != 1:
            r_lo = min(counts, key=counts.get)
            raise InputError(
                f"pg_name {pg!r}",
                f"{counts[r_lo]} collectives on rank {r_lo}, {max(counts.values())} elsewhere",
                "the same number of collectives on every member",
            )
        k_total = next(iter(counts.values()))
        for k in range(k_total):
            tasks = [per_rank[r][k][1] for r in members]
            first = T_info[tasks[0]]
            for t in tasks[1:]:
                if T_info[t][:2] != first[:2]:
                    raise InputError(
                        f"pg_name {pg!r} collective {k}",
                        f"{T_info[t][0]} of {T_info[t][1]} B on rank {T_rank[t]}",
                        f"{first[0]} of {first[1]} B as on rank {T_rank[tasks[0]]}",
                    )
            merge[tasks] = tasks[0]
            coll_rows.append((tasks[0], members, tasks))
    # ---- point-to-point: k-th send on a channel pairs with the k-th receive ------------------
    p2p_rows: list[tuple[int, tuple[int, int]]] = []
    recv_after: list[tuple[int, int]] = []  # (send task, receive task)
    for key in sorted(set(sends) | set(recvs)):
        s_list, r_list = sends.get(key, []), recvs.get(key, [])
        if len(s_list) != len(r_list):
            raise InputError(
                f"send {key[0]} -> {key[1]} tag {key[2]}",
                f"{len(s_list)} sends, {len(r_list)} receives",
                "one receive per send",
            )
        for (_, ts), (_, tr) in zip(s_list, r_list, strict=True):
            if T_info[ts][1] != T_info[tr][1]:
                raise InputError(
                    f"send {key[0]} -> {key[1]} tag {key[2]}",
                    f"{T_info[ts][1]} B sent, {T_info[tr][1]} B received",
                    "equal sizes",
                )
            # the receive is its own zero-time step after the transfer (a send does not wait
            # for the receive to be posted: merging the two would make a ring of sends cyclic)
            T_kind[tr] = "step"
            recv_after.append((ts, tr))
            p2p_rows.append((ts, (key[0], key[1])))

    comm_bytes = math.fsum(float(i[1]) for i in T_info if i)
    if not comm_bytes < MAX_ITERATION_BYTES:
        raise InputError(
            str(folder),
            f"about {comm_bytes:.3g} bytes of comm_size over the ranks",
            f"less than 2**62 = {MAX_ITERATION_BYTES:.3g} bytes per iteration (as for plans)",
        )
    moves = any(
        T_info[t][0] != "barrier" and len(m) > 1 and T_info[t][1] > 0 for t, m, _ in coll_rows
    ) or any(T_info[t][1] > 0 for t, _ in p2p_rows)
    if not moves and not any(x > 0 for x in T_runtime):
        raise InputError(
            str(folder),
            f"{n_nodes} nodes: no bytes moved and no compute time",
            "traces with a collective or send of bytes between ranks, or a COMP_NODE with "
            "duration_micros > 0 (else an iteration takes 0 s)",
        )

    # ---- demand families ---------------------------------------------------------------------
    instances: dict[tuple, dict[tuple, list[int]]] = defaultdict(lambda: defaultdict(list))
    for t, members, tasks in coll_rows:
        op, size, cls, phase, peer = T_info[t]
        if op == "barrier":  # synchronisation without traffic
            continue
        pb = None
        if peer is not None and op == "all-to-all":
            pb = _peer_matrix([T_info[m][4] for m in tasks], len(members))
        key = (op, float(size), cls, phase, len(members), None if pb is None else pb.tobytes())
        instances[key][tuple(members)].append(t)
    for t, pair in p2p_rows:
        _, size, cls, phase, _ = T_info[t]
        instances[("send", float(size), cls, phase, 2, None)][pair].append(t)
    demands: list[Demand] = []
    demand_map = np.full((n_nodes, 2), -1, np.int64)
    fam: dict[tuple, tuple[list, list]] = {}
    for key in sorted(instances, key=lambda k: (PHASES.index(k[3]), k[0], k[2], k[1], k[4])):
        for grp, tlist in sorted(instances[key].items()):
            fkey = key + (len(tlist),)
            rows, tasks = fam.setdefault(fkey, ([], []))
            rows.append(grp)
            tasks.append(tlist)
    for fkey, (rows, tasks) in fam.items():
        op, size, cls, phase, gsize, pbytes, count = fkey
        idx = len(demands)
        for r, tlist in enumerate(tasks):
            if gsize > 1:  # a one-rank collective is listed but moves nothing: a plain step
                demand_map[tlist, 0] = idx
                demand_map[tlist, 1] = r
        peer = None
        if pbytes is not None:
            peer = np.frombuffer(pbytes, np.float64).reshape(gsize, gsize)
        demands.append(
            Demand(
                op=op,
                groups=np.array(rows, np.int64),
                size=size,
                cls=cls,
                phase=phase,
                count=count,
                mutable=op not in ("send", "all-to-all", "broadcast"),
                name=f"chakra {cls} {op} {phase} ({len(rows)} x {gsize} ranks x {size:g} B)",
                peer_bytes=peer,
                ordered=True,
            )
        )

    # ---- the task graph: merged tasks, edges through the merge --------------------------------
    keep = np.flatnonzero(merge == np.arange(n_nodes))
    new_index = np.full(n_nodes, -1, np.int64)
    new_index[keep] = np.arange(keep.size)
    kinds = np.array(T_kind, dtype=object)
    kind = np.empty(keep.size, dtype=object)
    for src_kind, tg_kind in (
        ("compute", "forward"),
        ("step", "barrier"),
        ("send", "transfer"),
        ("collective", "collective"),
    ):
        kind[kinds[keep] == src_kind] = tg_kind
    rank_arr = np.array(T_rank, np.int64)
    cpu_arr = np.array(T_cpu, bool)
    barrier_coll = np.array(
        [T_kind[t] == "collective" and T_info[t][0] == "barrier" for t in keep.tolist()], bool
    )
    kind[barrier_coll] = "barrier"
    comp = kind == "forward"
    server = np.where(comp, rank_arr[keep] // g, -1)
    device = np.where(comp, 2 * rank_arr[keep] + cpu_arr[keep], -1)
    edges_parts = []  # (before, after, is control dependency)
    for rk, tmap in zip(ranks, task_of, strict=True):
        if rk.deps.size:
            u = new_index[merge[tmap[rk.deps[:, 0]]]]
            v = new_index[merge[tmap[rk.deps[:, 1]]]]
            edges_parts.append(np.stack([u, v, rk.deps[:, 2]], axis=1))
    if recv_after:
        ra = np.array(recv_after, np.int64)
        z = np.zeros(len(ra), np.int64)
        edges_parts.append(np.stack([new_index[ra[:, 0]], new_index[ra[:, 1]], z], axis=1))
    edges = np.concatenate(edges_parts) if edges_parts else np.zeros((0, 3), np.int64)
    edges = edges[edges[:, 0] != edges[:, 1]]
    dropped = sum(rk.self_ctrl for rk in ranks)
    scc = _strong_components(keep.size, edges[:, :2])
    if scc is not None:
        # Older converters wrote a CPU operator and its GPU kernel as each other's dependency
        # (one by control, one by data). Data dependencies win: control dependencies inside a
        # cycle are dropped (and counted); a cycle of data dependencies is an error.
        inside = (scc[edges[:, 0]] == scc[edges[:, 1]]) & (edges[:, 2] == 1)
        dropped += int(inside.sum())
        edges = edges[~inside]
        if _strong_components(keep.size, edges[:, :2]) is not None:
            raise InputError(str(folder), "a dependency cycle", "an acyclic dependency graph")
    edges = edges[:, :2]
    edges = np.unique(edges, axis=0) if edges.size else edges
    size_bytes = np.array([float(T_info[t][1]) if T_info[t] else 0.0 for t in keep.tolist()])
    graph = TaskGraph(
        task_id=keep.astype(np.int64),
        kind=kind.astype(str),
        server=server,
        runtime_s=np.array(T_runtime, np.float64)[keep],
        size_bytes=size_bytes,
        edges=edges.astype(np.int64),
        demand=demand_map[keep],
        device=device,
    )
    info = {
        "source": str(folder),
        "format": "Chakra execution traces",
        "ranks": n,
        "nodes": n_nodes,
        "tasks": int(keep.size),
        "collectives": len(coll_rows),
        "point_to_point": len(p2p_rows),
        "process_groups": len(pg_seq),
        "comm_group_file": groups_file is not None,
        "dangling_dependencies": int(sum(rk.dangling for rk in ranks)),
        "cyclic_control_dependencies_dropped": dropped,
    }
    conventions = {
        "comm_size": "S in the nccl-tests convention (buffer for all-reduce, output for "
        "all-gather, input for reduce-scatter, one rank's send buffer for all-to-all)",
        "class": "topoopt_class attribute, else mp (Chakra does not say the parallelism)",
        "phase": "topoopt_phase attribute, else forward",
        "groups": "comm_group.json when present, else the ranks that use each pg_name; no "
        "pg_name = every rank",
        "compute": "COMP_NODE duration_micros; GPU operators one at a time per rank, CPU "
        "operators (is_cpu_op) on the rank's host thread",
        "gpus_per_server": g,
    }
    return Workload(
        gpus=n,
        gpus_per_server=g,
        demands=tuple(demands),
        name=name or folder.name,
        conventions=conventions,
        info=info,
        taskgraph=graph,
    )


def _peer_matrix(attrs: list, g: int) -> np.ndarray:
    """The (g, g) byte matrix of a non-uniform all-to-all from each member's row attribute."""
    rows = []
    for a in attrs:
        kind, vals = a if a is not None else ("missing", [])
        if kind != "double_list" or len(vals) != g:
            raise InputError("topoopt_peer_bytes", f"{kind} of {len(vals)}", f"{g} doubles")
        rows.append(vals)
    pb = np.array(rows, np.float64)
    if not np.isfinite(pb).all() or (pb < 0).any():
        raise InputError("topoopt_peer_bytes", "negative or non-finite", "bytes >= 0")
    np.fill_diagonal(pb, 0.0)
    return pb


def _strong_components(n: int, edges: np.ndarray) -> np.ndarray | None:
    """Strong-component label of each task when the graph has a cycle, else None."""
    if not edges.size:
        return None
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    a = sp.csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    ncomp, labels = connected_components(a, directed=True, connection="strong")
    return None if ncomp == n else labels
