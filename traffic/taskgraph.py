"""Import TopoOpt / FlexNet FlatBuffers task graphs into a :class:`~traffic.workload.Workload`.

The TopoOpt artifact (hipersys-team/TopoOpt) stores one simulated training iteration as a
FlatBuffers "task graph": a header (GPUs per server, servers, switches, bandwidths), a table of
tasks (compute, transfers, all-reduces) with their successor lists, and a table of devices. This
module reads that format without generated code, vectorised with numpy over the whole buffer, and
maps it onto the symbolic Workload:

- type-5 tasks (nominal network transfers, MP traffic whose kind the file does not say) become
  fixed ``send`` demands of class ``mp``, summed per (source server, destination server, phase);
- type-6 tasks (all-reduces) become mutable ``all-reduce`` demands of class ``dp`` on their server
  groups, ``S`` = the task's ``xfersize``; groups of one server carry no traffic and are dropped
  (counted in ``Workload.info``);
- every task and every successor edge becomes the Workload's :class:`~traffic.workload.TaskGraph`.

Each server is represented by its first GPU (``rank = server * gpus_per_server``). Units inside are
SI: the file's milliseconds become seconds and its bytes per millisecond become bytes per second.

The two steps are public: :func:`parse_taskgraph` (bytes -> :class:`RawTaskGraph`, the file's
fields as arrays) and :func:`workload_from_taskgraph` (RawTaskGraph -> Workload, named as
:func:`traffic.build.workload_from_plan`); :func:`read_taskgraph` chains them for a file.
Anything that is not a well-formed task graph raises :class:`~traffic.errors.InputError` naming the
file, what was found, and what is allowed.

Format: ``../shared/reference/topoopt-taskgraph-format.md`` (FlatBuffers wire format: root
``uint32`` offset; tables reach their vtable through a signed ``int32``; vtables hold ``uint16``
sizes and one ``uint16`` offset per field; vectors are ``uint32``-length-prefixed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from traffic.errors import InputError
from traffic.workload import PHASES, Demand, TaskGraph, Workload

__all__ = [
    "TASK_KINDS",
    "ALLOWED",
    "RawTaskGraph",
    "parse_taskgraph",
    "workload_from_taskgraph",
    "read_taskgraph",
]

TASK_KINDS = {
    0: "forward",
    1: "backward",
    2: "comm",
    3: "update",
    4: "barrier",
    5: "transfer",
    6: "all-reduce",
}
"""Task type codes of the file and the :class:`~traffic.workload.TaskGraph` kind of each."""

ALLOWED = (
    "a TopoOpt FlatBuffers task graph (root table TaskGraph with ngpupernode, nnode, nswitch, "
    "bandwidths, tasks and devices; see shared/reference/topoopt-taskgraph-format.md)"
)
"""What :class:`~traffic.errors.InputError` says is allowed when a file is not a task graph."""

_MS_PER_S = 1e3
_NONE = np.uint64(0xFFFFFFFFFFFFFFFF)  # nodeid of devices that belong to no server
_MAX_GPUS_PER_SERVER = 1 << 10
_MAX_SERVERS = 1 << 24
_MAX_XFER = 1 << 53  # bytes; keeps sizes exact as float64 and sums exact as int64
_PHASE_ITERATIONS = 256  # bound on propagation through chains of communication tasks

# Field indices of the schema (see the format note).
_TG_NGPU, _TG_NNODE, _TG_NSWITCH, _TG_INTERGPUBW, _TG_DRAMBW, _TG_NETBW = range(6)
_TG_CONN, _TG_OPS, _TG_TASKS, _TG_DEVICES, _TG_ROUTES, _TG_RINGS = range(6, 12)
_TASK_TYPE, _TASK_ID, _TASK_DEVICE, _TASK_RUNTIME, _TASK_XFER, _TASK_NEXT = range(6)
_DEV_TYPE, _DEV_ID, _DEV_NODE, _DEV_PROPERTY, _DEV_BANDWIDTH = range(5)


# --------------------------------------------------------------------------------------------
# Low-level, vectorised FlatBuffers access with bounds checks.
# --------------------------------------------------------------------------------------------


class _Buffer:
    """A byte buffer read with vectorised, bounds-checked little-endian gathers."""

    def __init__(self, data: bytes, source: str):
        self.u8 = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        self.n = int(self.u8.size)
        self.source = source

    def fail(self, found: str) -> InputError:
        return InputError(self.source, found, ALLOWED)

    def gather(self, pos: np.ndarray, dtype: str, what: str) -> np.ndarray:
        """Values of little-endian ``dtype`` at byte positions ``pos`` (any alignment)."""
        dt = np.dtype(dtype)
        pos = np.asarray(pos, dtype=np.int64)
        if pos.size == 0:
            return np.empty(0, dtype=dt.newbyteorder("="))
        lo, hi = int(pos.min()), int(pos.max())
        if lo < 0 or hi + dt.itemsize > self.n:
            bad = lo if lo < 0 else hi
            raise self.fail(
                f"{what} at byte {bad}, outside the {self.n}-byte file (truncated or not a task "
                "graph)"
            )
        idx = pos[:, None] + np.arange(dt.itemsize, dtype=np.int64)
        return self.u8[idx].view(dt).reshape(-1).astype(dt.newbyteorder("="))


@dataclass(frozen=True)
class _Tables:
    """Positions of a batch of tables of one type, with their vtables."""

    pos: np.ndarray  # int64 table positions
    vtable: np.ndarray  # int64 vtable positions
    vsize: np.ndarray  # int64 vtable sizes in bytes
    tsize: np.ndarray  # int64 inline table sizes in bytes


def _tables(buf: _Buffer, pos: np.ndarray, what: str) -> _Tables:
    """Locate the vtables of tables at ``pos``; check that tables and vtables lie in the file."""
    pos = np.asarray(pos, dtype=np.int64)
    soff = buf.gather(pos, "<i4", what).astype(np.int64)
    vt = pos - soff
    vsize = buf.gather(vt, "<u2", f"{what} vtable").astype(np.int64)
    tsize = buf.gather(vt + 2, "<u2", f"{what} vtable").astype(np.int64)
    bad = (vsize < 4) | (vsize % 2 == 1) | (tsize < 4)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise buf.fail(
            f"{what} vtable of {int(vsize[i])} bytes for a {int(tsize[i])}-byte table (vtables "
            "are even and >= 4 bytes, tables >= 4 bytes)"
        )
    end = np.maximum(vt + vsize, pos + tsize)
    if end.size and int(end.max()) > buf.n:
        raise buf.fail(
            f"{what} ending at byte {int(end.max())}, past the end of the {buf.n}-byte file "
            "(truncated?)"
        )
    return _Tables(pos, vt, vsize, tsize)


def _field_offsets(buf: _Buffer, t: _Tables, index: int, what: str) -> np.ndarray:
    """Offset of field ``index`` inside each table (0 where the field is absent)."""
    slot = 4 + 2 * index
    present = t.vsize >= slot + 2
    off = np.zeros(t.pos.shape, dtype=np.int64)
    if present.any():
        off[present] = buf.gather(t.vtable[present] + slot, "<u2", f"{what} vtable").astype(
            np.int64
        )
    outside = off >= t.tsize
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise buf.fail(f"{what} at offset {int(off[i])} of a {int(t.tsize[i])}-byte table")
    return off


def _scalar(buf: _Buffer, t: _Tables, index: int, dtype: str, default, what: str) -> np.ndarray:
    """Scalar field ``index`` of each table, ``default`` where absent."""
    off = _field_offsets(buf, t, index, what)
    out = np.full(t.pos.shape, default, dtype=np.dtype(dtype).newbyteorder("="))
    has = off > 0
    if has.any():
        out[has] = buf.gather(t.pos[has] + off[has], dtype, what)
    return out


def _vector(
    buf: _Buffer, t: _Tables, index: int, elem_size: int, what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vector field ``index`` of each table: (present, first element position, length)."""
    off = _field_offsets(buf, t, index, what)
    has = off > 0
    start = np.zeros(t.pos.shape, dtype=np.int64)
    length = np.zeros(t.pos.shape, dtype=np.int64)
    if has.any():
        slot = t.pos[has] + off[has]
        head = slot + buf.gather(slot, "<u4", f"{what} offset").astype(np.int64)
        n = buf.gather(head, "<u4", f"{what} length").astype(np.int64)
        end = head + 4 + n * elem_size
        if end.max() > buf.n:
            i = int(np.argmax(end))
            raise buf.fail(
                f"{what} of {int(n[i])} elements ending at byte {int(end[i])}, past the end of "
                f"the {buf.n}-byte file"
            )
        start[has] = head + 4
        length[has] = n
    return has, start, length


def _ranges(start: np.ndarray, length: np.ndarray, step: int) -> np.ndarray:
    """Concatenation of ``start[i] + step * arange(length[i])`` over ``i`` (vectorised)."""
    total = int(length.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    first = np.cumsum(length) - length  # index of each range's first element in the output
    k = np.arange(total, dtype=np.int64) - np.repeat(first, length)
    return np.repeat(start, length) + step * k


def _table_vector(buf: _Buffer, t: _Tables, index: int, what: str) -> tuple[np.ndarray, _Tables]:
    """The tables of vector-of-tables field ``index`` of each of ``t``, concatenated.

    Returns the number of tables each of ``t`` holds (0 where the field is absent) and the tables.
    """
    _, start, length = _vector(buf, t, index, 4, f"{what} vector")
    if int(length.sum()) * 4 > buf.n:  # only shared vectors could claim more; refuse to expand
        raise buf.fail(f"{int(length.sum())} {what} tables in a {buf.n}-byte file")
    slots = _ranges(start, length, 4)
    pos = slots + buf.gather(slots, "<u4", f"{what} table offset").astype(np.int64)
    return length, _tables(buf, pos, what)


def _check_nested(buf: _Buffer, root: _Tables) -> dict[str, int]:
    """Walk the tables this importer does not decode, so that a cut anywhere is detected.

    Connections and operators are checked as tables; routes down to their paths' hop vectors and
    rings down to their descriptors' jump vectors. Returns the number of each.
    """
    counts = {}
    for index, name in ((_TG_CONN, "connection"), (_TG_OPS, "operator")):
        n, _ = _table_vector(buf, root, index, name)
        counts[name] = int(n.sum())
    n, routes = _table_vector(buf, root, _TG_ROUTES, "route")
    counts["route"] = int(n.sum())
    _, paths = _table_vector(buf, routes, 2, "route path")
    _vector(buf, paths, 0, 4, "route path hopnode vector")
    n, rings = _table_vector(buf, root, _TG_RINGS, "rings")
    counts["rings"] = int(n.sum())
    _, descriptors = _table_vector(buf, rings, 1, "ring descriptor")
    _vector(buf, descriptors, 0, 4, "ring descriptor jumps vector")
    return counts


# --------------------------------------------------------------------------------------------
# The file's content.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RawTaskGraph:
    """The content of a TopoOpt task graph file, as arrays, in SI units.

    Task arrays are aligned by the file's task order; devices by the file's device order. The
    successor lists are in CSR form: task ``i``'s list is ``next_ids[next_ptr[i]:next_ptr[i+1]]``
    (successor task ids, or for an all-reduce the server ids of its group).

    Attributes
    ----------
    source : str
        File name (or ``"<bytes>"``), used in error messages.
    ngpupernode, nnode, nswitch : int
        GPUs per server, servers, switches.
    intergpubw, drambw, netbw : float
        Bandwidths in bytes per second (the file stores bytes per millisecond).
    task_type : numpy.ndarray (int16), task_id, task_device (uint64)
    task_runtime_s : numpy.ndarray (float64 seconds; the file stores float32 ms)
    task_xfersize : numpy.ndarray (uint64 bytes)
    next_ptr : numpy.ndarray (int64, length tasks + 1), next_ids : numpy.ndarray (uint64)
    device_type : numpy.ndarray (int32), device_id, device_node, device_property (uint64)
    device_bandwidth : numpy.ndarray (float64 bytes per second)
    n_connections, n_operators, n_routes, n_rings : int
        Lengths of the tables this importer does not decode further.
    """

    source: str
    ngpupernode: int
    nnode: int
    nswitch: int
    intergpubw: float
    drambw: float
    netbw: float
    task_type: np.ndarray
    task_id: np.ndarray
    task_device: np.ndarray
    task_runtime_s: np.ndarray
    task_xfersize: np.ndarray
    next_ptr: np.ndarray
    next_ids: np.ndarray
    device_type: np.ndarray
    device_id: np.ndarray
    device_node: np.ndarray
    device_property: np.ndarray
    device_bandwidth: np.ndarray
    n_connections: int = 0
    n_operators: int = 0
    n_routes: int = 0
    n_rings: int = 0

    @property
    def n_tasks(self) -> int:
        """Number of tasks."""
        return int(self.task_type.shape[0])

    @property
    def n_devices(self) -> int:
        """Number of devices."""
        return int(self.device_id.shape[0])

    def successors(self, i: int) -> np.ndarray:
        """Task ``i``'s list (successor ids; server ids for an all-reduce)."""
        return self.next_ids[self.next_ptr[i] : self.next_ptr[i + 1]]

    def type_counts(self) -> dict[str, int]:
        """Number of tasks of each kind (kinds absent from the file are left out)."""
        codes, counts = np.unique(self.task_type, return_counts=True)
        return {
            TASK_KINDS.get(int(c), str(int(c))): int(n) for c, n in zip(codes, counts, strict=True)
        }


def parse_taskgraph(data: bytes, source: str = "<bytes>") -> RawTaskGraph:
    """Read the bytes of a TopoOpt FlatBuffers task graph.

    Parameters
    ----------
    data : bytes
        The whole file.
    source : str
        Name used in error messages (the file path).

    Returns
    -------
    RawTaskGraph

    Raises
    ------
    InputError
        ``field`` is ``source``: the buffer is truncated, is some other file, has an offset or a
        vector running past its end, an unknown task type, or a header out of range
        (``1 <= ngpupernode <= 1024``, ``1 <= nnode <= 2**24``).

    Examples
    --------
    >>> parse_taskgraph(b"\\x89PNG\\r\\n\\x1a\\n", source="plot.png")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: plot.png: got 'root table at byte 1196314761, outside the 8-byte ...
    """
    buf = _Buffer(data, source)
    if buf.n < 8:
        raise buf.fail(f"{buf.n} bytes (too short for a FlatBuffers root offset and table)")
    root_pos = buf.gather(np.array([0]), "<u4", "root table offset").astype(np.int64)
    if root_pos[0] < 4:
        raise buf.fail(f"root table offset {int(root_pos[0])} (must be at least 4)")
    root = _tables(buf, root_pos, "root table")

    def header(index: int, dtype: str, what: str):
        return _scalar(buf, root, index, dtype, 0, what)[0]

    ngpu = int(header(_TG_NGPU, "<u4", "ngpupernode"))
    nnode = int(header(_TG_NNODE, "<u4", "nnode"))
    nswitch = int(header(_TG_NSWITCH, "<u4", "nswitch"))
    if not 1 <= ngpu <= _MAX_GPUS_PER_SERVER:
        raise buf.fail(f"ngpupernode = {ngpu} (must be 1..{_MAX_GPUS_PER_SERVER})")
    if not 1 <= nnode <= _MAX_SERVERS:
        raise buf.fail(f"nnode = {nnode} (must be 1..{_MAX_SERVERS})")
    bws = [float(header(i, "<f4", name)) for i, name in ((3, "intergpubw"), (4, "drambw"))]
    netbw = float(header(_TG_NETBW, "<f4", "netbw"))
    for name, v in zip(("intergpubw", "drambw", "netbw"), (*bws, netbw), strict=True):
        if not np.isfinite(v) or v < 0:
            raise buf.fail(f"{name} = {v} (must be a finite bandwidth >= 0)")

    if _field_offsets(buf, root, _TG_TASKS, "tasks")[0] == 0:
        raise buf.fail("a root table without a tasks vector")
    _, tasks = _table_vector(buf, root, _TG_TASKS, "task")
    _, devices = _table_vector(buf, root, _TG_DEVICES, "device")
    counts = _check_nested(buf, root)

    task_type = _scalar(buf, tasks, _TASK_TYPE, "<i2", 0, "task type")
    unknown = ~np.isin(task_type, np.array(list(TASK_KINDS), dtype=np.int16))
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise buf.fail(f"task {i} of type {int(task_type[i])} (types are 0..6)")
    runtime_ms = _scalar(buf, tasks, _TASK_RUNTIME, "<f4", 0.0, "task runtime")
    bad = ~np.isfinite(runtime_ms) | (runtime_ms < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise buf.fail(f"task {i} with runtime {float(runtime_ms[i])} ms (must be finite, >= 0)")
    xfer = _scalar(buf, tasks, _TASK_XFER, "<u8", 0, "task xfersize")
    if xfer.size and int(xfer.max()) > _MAX_XFER:
        raise buf.fail(f"xfersize {int(xfer.max())} bytes (at most 2**53)")
    _, nstart, nlen = _vector(buf, tasks, _TASK_NEXT, 8, "task nexttasks vector")
    if int(nlen.sum()) > buf.n:
        raise buf.fail(f"{int(nlen.sum())} successor entries in a {buf.n}-byte file")
    next_ids = buf.gather(_ranges(nstart, nlen, 8), "<u8", "task nexttasks")
    next_ptr = np.zeros(nlen.size + 1, dtype=np.int64)
    np.cumsum(nlen, out=next_ptr[1:])

    return RawTaskGraph(
        source=source,
        ngpupernode=ngpu,
        nnode=nnode,
        nswitch=nswitch,
        intergpubw=bws[0] * _MS_PER_S,
        drambw=bws[1] * _MS_PER_S,
        netbw=netbw * _MS_PER_S,
        task_type=task_type,
        task_id=_scalar(buf, tasks, _TASK_ID, "<u8", 0, "task id"),
        task_device=_scalar(buf, tasks, _TASK_DEVICE, "<u8", 0, "task device id"),
        task_runtime_s=runtime_ms.astype(np.float64) / _MS_PER_S,
        task_xfersize=xfer,
        next_ptr=next_ptr,
        next_ids=next_ids,
        device_type=_scalar(buf, devices, _DEV_TYPE, "<i4", 0, "device type"),
        device_id=_scalar(buf, devices, _DEV_ID, "<u8", 0, "device id"),
        device_node=_scalar(buf, devices, _DEV_NODE, "<u8", 0, "device nodeid"),
        device_property=_scalar(buf, devices, _DEV_PROPERTY, "<u8", 0, "device property"),
        device_bandwidth=_scalar(
            buf, devices, _DEV_BANDWIDTH, "<f4", 0.0, "device bandwidth"
        ).astype(np.float64)
        * _MS_PER_S,
        n_connections=counts["connection"],
        n_operators=counts["operator"],
        n_routes=counts["route"],
        n_rings=counts["rings"],
    )


# --------------------------------------------------------------------------------------------
# RawTaskGraph -> Workload.
# --------------------------------------------------------------------------------------------

_FWD, _BWD, _OPT = 0, 1, 2  # phase codes, indices into PHASES


def _lookup(sorted_ids: np.ndarray, order: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Index of each of ``ids`` in the original array, -1 where absent."""
    if sorted_ids.size == 0:
        return np.full(ids.shape, -1, dtype=np.int64)
    at = np.searchsorted(sorted_ids, ids)
    at_c = np.minimum(at, sorted_ids.size - 1)
    found = sorted_ids[at_c] == ids
    return np.where(found, order[at_c], -1).astype(np.int64)


def _acyclic(n: int, edges: np.ndarray) -> bool:
    """Kahn's algorithm, one vectorised step per level of the DAG."""
    if edges.shape[0] == 0:
        return True
    indeg = np.bincount(edges[:, 1], minlength=n)
    order = np.argsort(edges[:, 0], kind="stable")
    succ_sorted = edges[order, 1]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(edges[:, 0], minlength=n), out=ptr[1:])
    frontier = np.flatnonzero(indeg == 0)
    done = int(frontier.size)
    while frontier.size:
        succ = succ_sorted[_ranges(ptr[frontier], ptr[frontier + 1] - ptr[frontier], 1)]
        targets, hits = np.unique(succ, return_counts=True)
        indeg[targets] -= hits
        frontier = targets[indeg[targets] == 0]
        done += int(frontier.size)
    return done == n


def _phases(task_type: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, int]:
    """Phase code of each task and the number of tasks that needed the fallback rule.

    Compute tasks carry their phase (forward 0, backward 1, update -> optimizer 2). Any other
    task takes the latest phase among its predecessors, propagated through chains of
    communication tasks; failing that, the earliest phase among its successors; failing that,
    backward for an all-reduce (gradient synchronisation) and forward otherwise.
    """
    ph = np.full(task_type.shape, -1, dtype=np.int64)
    ph[task_type == 0] = _FWD
    ph[task_type == 1] = _BWD
    ph[task_type == 3] = _OPT
    src, dst = edges[:, 0], edges[:, 1]
    for _ in range(_PHASE_ITERATIONS):  # predecessors: latest phase wins
        best = np.full(ph.shape, -1, dtype=np.int64)
        np.maximum.at(best, dst, ph[src])
        new = (ph < 0) & (best >= 0)
        if not new.any():
            break
        ph[new] = best[new]
    big = len(PHASES)
    for _ in range(_PHASE_ITERATIONS):  # successors: earliest phase wins
        best = np.full(ph.shape, big, dtype=np.int64)
        np.minimum.at(best, src, np.where(ph[dst] >= 0, ph[dst], big))
        new = (ph < 0) & (best < big)
        if not new.any():
            break
        ph[new] = best[new]
    rest = ph < 0
    ph[rest & (task_type == 6)] = _BWD
    ph[rest & (task_type != 6)] = _FWD
    return ph, int(rest.sum())


def workload_from_taskgraph(raw: RawTaskGraph, name: str = "") -> Workload:
    """The Workload of a parsed task graph: demands plus the dependency graph.

    Parameters
    ----------
    raw : RawTaskGraph
        From :func:`parse_taskgraph`.
    name : str
        Workload name (default: ``raw.source``).

    Returns
    -------
    Workload
        ``gpus = nnode * ngpupernode``; send demands (class ``mp``, ``mutable=False``) first, in
        phase order then by size, then all-reduce demands (class ``dp``, mutable) by phase, group
        size and size. ``taskgraph`` holds every task, with ``demand[i] = (family, row)`` for
        transfers and kept all-reduces.

    Raises
    ------
    InputError
        ``field`` is ``raw.source``: duplicate task or device ids, a successor that is not a task,
        a task whose device is missing, a transfer whose device names a switch, an all-reduce
        group that is empty, repeats a server or names one ``>= nnode``, or a cycle.

    Notes
    -----
    Transfers: the task's device has ``deviceproperty = src * (nnode + nswitch) + dst``; the
    bytes of all transfers of one (src, dst, phase) are summed into one ``send`` row
    ``[src * g, dst * g]`` (``g`` GPUs per server), and rows with equal sums form one family.
    All-reduces: one row per task, ``[s * g for s in group]``, families by (phase, group size,
    size). Wire bytes are then ``S`` per transfer and ``2 (n - 1) S`` per all-reduce over ``n``
    servers.

    Examples
    --------
    A one-server file with one backward task of 2.5 ms, written with the ``flatbuffers``
    package (tables are built bottom-up; slot numbers are the schema's field indices):

    >>> import flatbuffers
    >>> b = flatbuffers.Builder(0)
    >>> b.StartObject(5)                    # Device: id 3 on server (nodeid) 0
    >>> b.PrependUint64Slot(1, 3, 0)
    >>> b.PrependUint64Slot(2, 0, 1)
    >>> device = b.EndObject()
    >>> b.StartObject(6)                    # Task: backward, id 7, on device 3, 2.5 ms
    >>> b.PrependInt16Slot(0, 1, 0)
    >>> b.PrependUint64Slot(1, 7, 0)
    >>> b.PrependUint64Slot(2, 3, 0)
    >>> b.PrependFloat32Slot(3, 2.5, 0.0)
    >>> task = b.EndObject()
    >>> vectors = []
    >>> for table in (task, device):
    ...     _ = b.StartVector(4, 1, 4)
    ...     b.PrependUOffsetTRelative(table)
    ...     vectors.append(b.EndVector())
    >>> b.StartObject(12)                   # TaskGraph: 1 GPU per server, 1 server
    >>> b.PrependUint32Slot(0, 1, 0)
    >>> b.PrependUint32Slot(1, 1, 0)
    >>> b.PrependUOffsetTRelativeSlot(8, vectors[0], 0)
    >>> b.PrependUOffsetTRelativeSlot(9, vectors[1], 0)
    >>> root = b.EndObject()
    >>> _ = b.Finish(root)
    >>> w = workload_from_taskgraph(parse_taskgraph(bytes(b.Output())))
    >>> w.gpus, len(w.demands), w.taskgraph.kind.tolist(), w.taskgraph.runtime_s.tolist()
    (1, 0, ['backward'], [0.0025])
    """
    src_name = raw.source
    nnode, g = raw.nnode, raw.ngpupernode

    def fail(found: str) -> InputError:
        return InputError(src_name, found, ALLOWED)

    T = raw.n_tasks
    ttype = raw.task_type.astype(np.int64)
    lens = np.diff(raw.next_ptr)

    # Task ids -> indices; successor edges (all-reduce lists are server groups, not edges).
    t_order = np.argsort(raw.task_id, kind="stable")
    t_sorted = raw.task_id[t_order]
    if T > 1 and (t_sorted[1:] == t_sorted[:-1]).any():
        dup = t_sorted[1:][t_sorted[1:] == t_sorted[:-1]][0]
        raise fail(f"task id {int(dup)} used by two tasks")
    owner = np.repeat(np.arange(T, dtype=np.int64), lens)
    is_edge = ttype[owner] != 6
    succ = _lookup(t_sorted, t_order, raw.next_ids[is_edge])
    if (succ < 0).any():
        k = int(np.flatnonzero(succ < 0)[0])
        raise fail(
            f"task {int(raw.task_id[owner[is_edge][k]])} lists successor "
            f"{int(raw.next_ids[is_edge][k])}, which is not a task"
        )
    edges = np.stack([owner[is_edge], succ], axis=1) if succ.size else np.empty((0, 2), np.int64)
    n_listed = int(edges.shape[0])
    edges = np.unique(edges, axis=0)  # some files list a successor twice; one edge suffices
    if not _acyclic(T, edges):
        raise fail("a cycle among the successor lists (a task graph is acyclic)")

    # Devices -> servers.
    d_order = np.argsort(raw.device_id, kind="stable")
    d_sorted = raw.device_id[d_order]
    if d_sorted.size > 1 and (d_sorted[1:] == d_sorted[:-1]).any():
        dup = d_sorted[1:][d_sorted[1:] == d_sorted[:-1]][0]
        raise fail(f"device id {int(dup)} used by two devices")
    dev = _lookup(d_sorted, d_order, raw.task_device)
    node = np.full(T, _NONE, dtype=np.uint64)
    node[dev >= 0] = raw.device_node[dev[dev >= 0]]
    on_server = (dev >= 0) & (node < np.uint64(nnode))
    server = np.where(on_server, node.astype(np.int64, copy=False), -1)
    compute = np.isin(ttype, (0, 1, 3))
    if (compute & ~on_server).any():
        i = int(np.flatnonzero(compute & ~on_server)[0])
        raise fail(
            f"compute task {int(raw.task_id[i])} on device {int(raw.task_device[i])}, which is "
            f"not a device of a server 0..{nnode - 1}"
        )

    phase, n_fallback = _phases(ttype, edges)
    demand_map = np.full((T, 2), -1, dtype=np.int64)
    demands: list[Demand] = []

    # Type 5: fixed sends, summed per (src, dst, phase).
    t5 = np.flatnonzero(ttype == 5)
    if (dev[t5] < 0).any():
        i = int(t5[dev[t5] < 0][0])
        raise fail(f"transfer task {int(raw.task_id[i])} on unknown device {raw.task_device[i]}")
    width = np.uint64(nnode + raw.nswitch)
    prop = raw.device_property[dev[t5]]
    s5, d5 = (prop // width).astype(np.int64), (prop % width).astype(np.int64)
    off = (s5 >= nnode) | (d5 >= nnode) | (s5 < 0)
    if off.any():
        k = int(np.flatnonzero(off)[0])
        raise fail(
            f"transfer task {int(raw.task_id[t5[k]])} between nodes {int(prop[k] // width)} and "
            f"{int(prop[k] % width)} (both must be servers 0..{nnode - 1})"
        )
    x5 = raw.task_xfersize[t5].astype(np.int64)
    if t5.size and int(x5.max()) * t5.size >= 1 << 63:
        raise fail("transfer sizes whose sum overflows 64 bits")
    key = (phase[t5] * nnode + s5) * nnode + d5
    ukey, inv = np.unique(key, return_inverse=True)
    total = np.zeros(ukey.size, dtype=np.int64)
    np.add.at(total, inv, x5)
    u_phase, u_pair = np.divmod(ukey, nnode * nnode)
    u_src, u_dst = np.divmod(u_pair, nnode)
    fam_of_key = np.empty(ukey.size, dtype=np.int64)
    row_of_key = np.empty(ukey.size, dtype=np.int64)
    order = np.lexsort((ukey, total, u_phase))  # rows ordered by (src, dst) inside a family
    if order.size:
        cut = np.flatnonzero((np.diff(u_phase[order]) != 0) | (np.diff(total[order]) != 0)) + 1
        for rows in np.split(order, cut):
            p, size = int(u_phase[rows[0]]), int(total[rows[0]])
            fam_of_key[rows] = len(demands)
            row_of_key[rows] = np.arange(rows.size)
            demands.append(
                Demand(
                    op="send",
                    groups=np.stack([u_src[rows] * g, u_dst[rows] * g], axis=1),
                    size=float(size),
                    cls="mp",
                    phase=PHASES[p],
                    mutable=False,
                    name=f"mp send {PHASES[p]} ({rows.size} pairs x {size} B)",
                )
            )
        demand_map[t5, 0] = fam_of_key[inv]
        demand_map[t5, 1] = row_of_key[inv]

    # Type 6: mutable all-reduces on server groups; groups of one server carry no traffic.
    t6 = np.flatnonzero(ttype == 6)
    g6 = lens[t6]
    if (g6 == 0).any():
        raise fail(f"all-reduce task {int(raw.task_id[t6[g6 == 0][0]])} with an empty group")
    ar_families = []
    for gsize in np.unique(g6[g6 > 1]).tolist():
        tasks = t6[g6 == gsize]
        members = raw.next_ids[raw.next_ptr[tasks][:, None] + np.arange(gsize)]
        if (members >= np.uint64(nnode)).any():
            r = int(np.flatnonzero((members >= np.uint64(nnode)).any(axis=1))[0])
            raise fail(
                f"all-reduce task {int(raw.task_id[tasks[r]])} on server "
                f"{int(members[r].max())} (servers are 0..{nnode - 1})"
            )
        members = members.astype(np.int64)
        srt = np.sort(members, axis=1)
        rep = (np.diff(srt, axis=1) == 0).any(axis=1)
        if rep.any():
            r = int(np.flatnonzero(rep)[0])
            raise fail(f"all-reduce task {int(raw.task_id[tasks[r]])} naming a server twice")
        sizes = raw.task_xfersize[tasks].astype(np.int64)
        ph6 = phase[tasks]
        fkey = np.stack([ph6, sizes], axis=1)
        ukeys, finv = np.unique(fkey, axis=0, return_inverse=True)
        for j, (p, size) in enumerate(ukeys.tolist()):
            sel = np.flatnonzero(finv.reshape(-1) == j)
            ar_families.append((p, gsize, size, tasks[sel], members[sel]))
    ar_families.sort(key=lambda f: (f[0], f[1], f[2]))
    for p, gsize, size, tasks, members in ar_families:
        demand_map[tasks, 0] = len(demands)
        demand_map[tasks, 1] = np.arange(tasks.size)
        demands.append(
            Demand(
                op="all-reduce",
                groups=members * g,
                size=float(size),
                cls="dp",
                phase=PHASES[p],
                mutable=True,
                name=f"dp all-reduce {PHASES[p]} ({tasks.size} x {gsize} servers x {size} B)",
            )
        )

    kinds = np.array([TASK_KINDS[k] for k in range(7)])
    comm = np.isin(ttype, (2, 5, 6))
    graph = TaskGraph(
        task_id=raw.task_id.view(np.int64),
        kind=kinds[ttype],
        server=server,
        runtime_s=raw.task_runtime_s.astype(np.float64),
        size_bytes=np.where(comm, raw.task_xfersize, 0).astype(np.float64),
        edges=edges,
        demand=demand_map,
    )
    n_single = int((g6 == 1).sum())
    info = {
        "source": src_name,
        "format": "TopoOpt FlatBuffers task graph",
        "servers": nnode,
        "switches": raw.nswitch,
        "net_bandwidth_bytes_per_s": raw.netbw,
        "intergpu_bandwidth_bytes_per_s": raw.intergpubw,
        "dram_bandwidth_bytes_per_s": raw.drambw,
        "tasks_by_kind": raw.type_counts(),
        "edges": int(edges.shape[0]),
        "duplicate_edges": n_listed - int(edges.shape[0]),
        "transfer_tasks": int(t5.size),
        "transfer_bytes": int(x5.sum()),
        "transfer_pairs": int(np.unique(u_pair).size),
        "allreduce_tasks": int(t6.size),
        "allreduce_dropped_single_server": n_single,
        "allreduce_dropped_bytes": int(raw.task_xfersize[t6[g6 == 1]].astype(np.int64).sum()),
        "phase_by_fallback": n_fallback,
        "devices": raw.n_devices,
        "connections": raw.n_connections,
        "routes": raw.n_routes,
    }
    conventions = {
        "rank": "each server is represented by its first GPU: rank = server * gpus_per_server",
        "transfers": "type-5 nominal network transfers -> fixed send demands, class mp, bytes "
        "summed per (source server, destination server, phase)",
        "all_reduce": "type-6 tasks -> mutable all-reduce, class dp, on the group's "
        "representative ranks, size = xfersize; single-server groups dropped (no traffic)",
        "phase": "compute tasks carry theirs (update -> optimizer); other tasks take the latest "
        "phase among predecessors (through chains of communication tasks), else the earliest "
        "among successors, else backward for an all-reduce and forward otherwise",
        "units": "runtime ms -> s; bandwidths bytes/ms -> bytes/s",
    }
    return Workload(
        gpus=nnode * g,
        gpus_per_server=g,
        demands=tuple(demands),
        name=name or src_name,
        conventions=conventions,
        info=info,
        taskgraph=graph,
    )


def read_taskgraph(path: str | os.PathLike) -> Workload:
    """Read a TopoOpt FlatBuffers task graph file into a Workload.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.fbuf`` file written by the TopoOpt / FlexNet simulator.

    Returns
    -------
    Workload
        See :func:`workload_from_taskgraph`; ``name`` is the file name.

    Raises
    ------
    InputError
        ``field`` is the path: the file is missing or unreadable, or is not a task graph.

    Examples
    --------
    >>> read_taskgraph("no-such-file.fbuf")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: no-such-file.fbuf: got 'no such file'; allowed: a TopoOpt ...
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(str(p), "no such file", ALLOWED) from None
    except OSError as e:
        raise InputError(str(p), f"unreadable ({e.strerror or e})", ALLOWED) from None
    return workload_from_taskgraph(parse_taskgraph(data, source=str(p)), name=p.name)
