"""The schema of ``design.json`` (optical and hybrid designs): pydantic models and the checks
of the relations between their fields. It imports nothing else of :mod:`solvers`; the loader
that builds a design from it is :func:`solvers.registry.load_design`.

``design.json`` is read in three steps, each refusing bad input with one
:class:`~traffic.errors.InputError` naming the file and the field path:

1. strict decoding (:mod:`traffic.decode`): UTF-8, strict JSON, no duplicate keys, no NaN or
   Infinity, int64 integers, bounded nesting and size;
2. the pydantic models below (:class:`DesignDocument`, :class:`HybridDocument`): every key known,
   strict types (``"16"`` is not 16, ``1.9`` is not a count), finite numbers, ranges;
3. :func:`check_design_document`: the relations between fields, vectorised. Circuits join two
   different servers ``0..servers-1`` with a count >= 1 and use at most ``degree`` ports per
   server; the routing's CSR arrays are consistent (``commodity_ptr`` and ``path_ptr`` start at
   0, grow, end at the path and node counts; every commodity has a path, every path >= 1 hop),
   commodities are distinct pairs of different servers, each path starts at its source and ends
   at its destination, node ids are servers (optical) or fabric nodes (hybrid, checked when the
   fabric is built), path weights are in (0, 1] and sum to 1 per commodity; ring members are
   distinct sorted servers, the order is a permutation of the members, rings of one group have
   the same members and weights summing to 1; ``reserved_ports`` has one value ``0..degree`` per
   server, at most the ports its circuits leave free; the ``prewired`` circuits are among the
   circuits. Bandwidths are in ``[1, 1e15]`` bytes/s and no path crosses a hop twice. The optional
   ``collectives`` (optical designs only) name distinct sorted servers, one entry per
   ``(phase, group, collective)``, and transfers between distinct positions of those members.

:func:`solvers.registry.check_design_rings` then checks the rings against the problem being
simulated (phase names, group indices, members equal to the group's servers), and the
``collectives`` the same way.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traffic.decode import validate
from traffic.errors import InputError
from traffic.limits import MAX_SERVER_PORTS, check_count
from traffic.workload import CLASSES

__all__ = [
    "MAX_SERVERS",
    "MIN_BANDWIDTH",
    "MAX_BANDWIDTH",
    "WEIGHT_TOLERANCE",
    "RingDocument",
    "CollectiveDocument",
    "RoutingDocument",
    "ElectricalDocument",
    "DesignDocument",
    "HybridDocument",
    "validate_design_document",
    "check_design_document",
]

MAX_SERVERS = 2**31 - 1
"""Largest server count (and server id + 1) of a design."""

MIN_BANDWIDTH = 1.0
"""Smallest link bandwidth of a design, bytes/s (with iteration bytes below 2**62 every time
stays finite)."""

MAX_BANDWIDTH = 1e15
"""Largest link bandwidth of a design, bytes/s (8 Pbps)."""

WEIGHT_TOLERANCE = 1e-6
"""Path weights of a commodity, and ring weights of a group, sum to 1 within this."""

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
_Nat = Annotated[int, Field(ge=0, le=2**62)]
_Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_Row = Annotated[list[_Nat], Field(min_length=3, max_length=3)]
_Bandwidth = Annotated[float, Field(ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH, allow_inf_nan=False)]


class RingDocument(BaseModel):
    """One directed ring of a mutable group: ``order`` is the ring order of ``members``."""

    model_config = _STRICT

    phase: Annotated[str, Field(min_length=1, max_length=200)]
    group: _Nat
    members: Annotated[list[_Nat], Field(min_length=1)]
    order: Annotated[list[_Nat], Field(min_length=1)]
    stride: int | None = None
    weight: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    virtual: bool = False


class CollectiveDocument(BaseModel):
    """The schedule a design picked for one collective of a mutable group instead of its rings
    (:mod:`solvers.joint.collective_choice`): transfers ``src[i] -> dst[i]`` between positions of
    ``members`` carrying ``fraction[i]`` bytes per byte of the collective's size, all released
    together."""

    model_config = _STRICT

    phase: Annotated[str, Field(min_length=1, max_length=200)]
    group: _Nat
    collective: Literal["all-reduce", "reduce-scatter", "all-gather"]
    algorithm: Literal["blink"]
    members: Annotated[list[_Nat], Field(min_length=2)]
    src: list[_Nat]
    dst: list[_Nat]
    fraction: list[Annotated[float, Field(gt=0, le=2**20, allow_inf_nan=False)]]
    info: dict[str, Any] = {}


class RoutingDocument(BaseModel):
    """Weighted server paths, as CSR arrays (see :class:`solvers.model.design.NodePaths`)."""

    model_config = _STRICT

    src: list[_Nat]
    dst: list[_Nat]
    commodity_ptr: Annotated[list[_Nat], Field(min_length=1)]
    path_ptr: Annotated[list[_Nat], Field(min_length=1)]
    nodes: list[_Nat]
    weight: list[Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]]


_Class = Literal[CLASSES]
"""A traffic class (:data:`traffic.workload.CLASSES`), for ``priority``."""


class DesignDocument(BaseModel):
    """``design.json`` of an optical design (:class:`solvers.model.design.Design`)."""

    model_config = _STRICT

    servers: Annotated[int, Field(ge=1, le=MAX_SERVERS)]
    degree: Annotated[int, Field(ge=0, le=MAX_SERVER_PORTS)]
    link_bandwidth: _Bandwidth
    circuits: list[_Row]
    rings: list[RingDocument]
    routing: RoutingDocument
    solver: Annotated[str, Field(max_length=200)]
    status: Annotated[str, Field(max_length=200)]
    objective_s: _Seconds
    lower_bound_s: _Seconds
    gap: Annotated[float, Field(allow_inf_nan=False)]
    wall_s: _Seconds
    info: dict[str, Any] = {}
    reserved_ports: list[_Nat] | None = None
    prewired: list[_Row] | None = None
    collectives: list[CollectiveDocument] | None = None
    priority: list[_Class] | None = None


class ElectricalDocument(BaseModel):
    """The electrical fabric of a hybrid design (:func:`solvers.hybrid_design.build_electrical`)."""

    model_config = _STRICT

    family: Literal["leaf-spine", "fat-tree"]
    servers: Annotated[int, Field(ge=1, le=MAX_SERVERS)]
    oversubscription: Annotated[float, Field(ge=1, le=1e6, allow_inf_nan=False)] | None = None
    agg_oversubscription: Annotated[float, Field(ge=1, le=1e6, allow_inf_nan=False)] | None = None
    radix: Annotated[int, Field(ge=2, le=65536)] | None = None
    spine_radix: Annotated[int, Field(ge=2, le=65536)] | None = None
    leaf_hosts: Annotated[int, Field(ge=1, le=65536)] | None = None
    k: Annotated[int, Field(ge=2, le=1024)] | None = None
    port_bandwidth: _Bandwidth | None = None
    gpus_per_server: Annotated[int, Field(ge=1, le=65536)] | None = None
    intra_server_bandwidth: _Bandwidth | None = None
    latency: Annotated[float, Field(ge=0, le=1e3, allow_inf_nan=False)] | None = None


class HybridDocument(DesignDocument):
    """``design.json`` of a hybrid design (:class:`solvers.hybrid_design.HybridDesign`)."""

    electrical: ElectricalDocument
    device: Literal["ocs", "patch-panel"] = "ocs"


def validate_design_document(data: Any, name: str, hybrid: bool | None = None) -> DesignDocument:
    """Steps 2 and 3 of the module docstring on decoded JSON ``data``; the validated document.

    ``hybrid=None`` takes a hybrid design when ``data`` has an ``electrical`` key.
    """
    if not isinstance(data, dict):
        raise InputError(name, type(data).__name__, "a design document (a JSON object)")
    if hybrid is None:
        hybrid = "electrical" in data
    if isinstance(data.get("servers"), int) and not isinstance(data["servers"], bool):
        check_count(f"{name} servers", data["servers"], 64, "servers")
    doc = validate(HybridDocument if hybrid else DesignDocument, data, name)
    check_design_document(doc, name)
    return doc


def _fail(field: str, value: Any, allowed: str) -> None:
    raise InputError(field, value, allowed)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_rows(rows: list[list[int]], n: int, field: str, min_count: int) -> np.ndarray:
    a = np.asarray(rows, np.int64).reshape(-1, 3)
    if not a.size:
        return a
    bad = (a[:, 0] >= n) | (a[:, 1] >= n)
    if bad.any():
        i = _first(bad)
        _fail(f"{field}[{i}]", rows[i], f"server ids 0..{n - 1}")
    same = a[:, 0] == a[:, 1]
    if same.any():
        i = _first(same)
        _fail(f"{field}[{i}]", rows[i], "a circuit between two different servers")
    low = a[:, 2] < min_count
    if low.any():
        i = _first(low)
        _fail(f"{field}[{i}]", rows[i], f"a count >= {min_count}")
    return a


def check_design_document(doc: DesignDocument, name: str) -> None:
    """Step 3 of the module docstring: the relations between the fields of ``doc``."""
    n, d = doc.servers, doc.degree
    c = _check_rows(doc.circuits, n, f"{name} circuits", 1)
    if c.size:
        if np.any(c[:, 2] > d):
            i = _first(c[:, 2] > d)
            _fail(f"{name} circuits[{i}]", doc.circuits[i], f"a count <= degree = {d}")
        deg = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
        if np.any(deg > d):
            i = _first(deg > d)
            _fail(f"{name} circuits (server {i})", int(deg[i]), f"<= {d} ports (degree)")
    if doc.reserved_ports is not None:
        r = np.asarray(doc.reserved_ports, np.int64)
        if r.shape != (n,):
            _fail(f"{name} reserved_ports", f"{r.size} values", f"{n} values (one per server)")
        if np.any(r > d):
            i = _first(r > d)
            _fail(f"{name} reserved_ports[{i}]", int(r[i]), f"0..{d} (degree)")
    if doc.reserved_ports is not None and c.size:
        used = r + deg
        if np.any(used > d):
            i = _first(used > d)
            _fail(
                f"{name} circuits (server {i})",
                f"{int(deg[i])} ports",
                f"at most the {d - int(r[i])} usable ports (degree {d} - reserved {int(r[i])})",
            )
    if doc.prewired is not None:
        p = _check_rows(doc.prewired, n, f"{name} prewired", 1)
        if p.size:  # every pre-wired circuit stays: it is among the circuits
            have: dict[tuple[int, int], int] = defaultdict(int)
            for u, v, k in c.tolist():
                have[(min(u, v), max(u, v))] += k
            want: dict[tuple[int, int], int] = defaultdict(int)
            for u, v, k in p.tolist():
                want[(min(u, v), max(u, v))] += k
            for (u, v), k in sorted(want.items()):
                if k > have[(u, v)]:
                    _fail(
                        f"{name} circuits (pre-wired pair {u}-{v})",
                        have[(u, v)],
                        f"at least the {k} pre-wired circuit(s)",
                    )
    _check_routing(doc.routing, n, name, hybrid=isinstance(doc, HybridDocument))
    _check_rings(doc.rings, n, name)
    if doc.collectives is not None:
        if isinstance(doc, HybridDocument):
            _fail(f"{name} collectives", "present", "no collectives in a hybrid design")
        _check_collectives(doc.collectives, n, name)
    prio = getattr(doc, "priority", None)
    if prio is not None:
        if isinstance(doc, HybridDocument):
            _fail(f"{name} priority", prio, "no priority in a hybrid design")
        if not prio or len(set(prio)) != len(prio):
            _fail(f"{name} priority", prio, "distinct traffic classes, highest first, at least one")
    if isinstance(doc, HybridDocument) and doc.electrical.servers != n:
        _fail(f"{name} electrical.servers", doc.electrical.servers, f"{n} (the design's servers)")


def _check_routing(r: RoutingDocument, n: int, name: str, hybrid: bool) -> None:
    f = f"{name} routing"
    src, dst = np.asarray(r.src, np.int64), np.asarray(r.dst, np.int64)
    cptr, pptr = np.asarray(r.commodity_ptr, np.int64), np.asarray(r.path_ptr, np.int64)
    nodes, w = np.asarray(r.nodes, np.int64), np.asarray(r.weight, np.float64)
    k, p = src.size, w.size
    if dst.size != k:
        _fail(f"{f}.dst", f"{dst.size} values", f"{k} values (one per src)")
    if cptr.size != k + 1 or cptr[0] != 0 or cptr[-1] != p:
        _fail(f"{f}.commodity_ptr", r.commodity_ptr, f"{k + 1} values from 0 to {p} (paths)")
    if k and np.any(np.diff(cptr) < 1):
        i = _first(np.diff(cptr) < 1)
        _fail(f"{f}.commodity_ptr[{i + 1}]", int(cptr[i + 1]), "increasing (a path per pair)")
    if pptr.size != p + 1 or pptr[0] != 0 or pptr[-1] != nodes.size:
        _fail(f"{f}.path_ptr", r.path_ptr, f"{p + 1} values from 0 to {nodes.size} (nodes)")
    if p and np.any(np.diff(pptr) < 2):
        i = _first(np.diff(pptr) < 2)
        _fail(f"{f}.path_ptr[{i + 1}]", int(pptr[i + 1]), "paths of at least 2 nodes (1 hop)")
    for arr, key in ((src, "src"), (dst, "dst")):
        if k and np.any(arr >= n):
            i = _first(arr >= n)
            _fail(f"{f}.{key}[{i}]", int(arr[i]), f"a server id 0..{n - 1}")
    if k and np.any(src == dst):
        i = _first(src == dst)
        _fail(f"{f}.dst[{i}]", int(dst[i]), "a server other than src")
    if k > 1:
        key = src * n + dst
        order = np.argsort(key, kind="stable")
        dup = np.diff(key[order]) == 0
        if dup.any():
            i = int(order[_first(dup) + 1])
            _fail(f"{f}.dst[{i}]", int(dst[i]), "each (src, dst) pair once")
    if not hybrid and nodes.size and np.any(nodes >= n):
        i = _first(nodes >= n)
        _fail(f"{f}.nodes[{i}]", int(nodes[i]), f"a server id 0..{n - 1}")
    if p:
        owner = np.repeat(np.arange(k), np.diff(cptr))
        heads, tails = nodes[pptr[:-1]], nodes[pptr[1:] - 1]
        bad = heads != src[owner]
        if bad.any():
            i = _first(bad)
            _fail(f"{f}.nodes[{int(pptr[i])}]", int(heads[i]), f"the path's source {src[owner[i]]}")
        bad = tails != dst[owner]
        if bad.any():
            i = _first(bad)
            at = int(pptr[i + 1] - 1)
            _fail(f"{f}.nodes[{at}]", int(tails[i]), f"the path's destination {dst[owner[i]]}")
        # no directed hop twice in one path (the flow model carries a path over a link once)
        if nodes.size > 1:
            path_of = np.repeat(np.arange(p), np.diff(pptr))
            last = np.zeros(nodes.size, bool)
            last[pptr[1:] - 1] = True
            hop = np.flatnonzero(~last)
            order = np.lexsort((nodes[hop + 1], nodes[hop], path_of[hop]))
            h = hop[order]
            again = (
                (path_of[h[1:]] == path_of[h[:-1]])
                & (nodes[h[1:]] == nodes[h[:-1]])
                & (nodes[h[1:] + 1] == nodes[h[:-1] + 1])
            )
            if again.any():
                i = int(h[1:][again][0])
                _fail(
                    f"{f}.nodes[{i}:{i + 2}]",
                    [int(nodes[i]), int(nodes[i + 1])],
                    "paths that cross each hop at most once",
                )
        sums = np.add.reduceat(w, cptr[:-1]) if k else np.zeros(0)
        off = np.abs(sums - 1.0) > WEIGHT_TOLERANCE
        if off.any():
            i = _first(off)
            _fail(
                f"{f}.weight[{int(cptr[i])}:{int(cptr[i + 1])}]",
                f"a sum of {sums[i]:.9g}",
                f"weights summing to 1 per (src, dst) pair (within {WEIGHT_TOLERANCE:g})",
            )


def _check_rings(rings: list[RingDocument], n: int, name: str) -> None:
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, ring in enumerate(rings):
        f = f"{name} rings[{i}]"
        m = np.asarray(ring.members, np.int64)
        if np.any(m >= n):
            j = _first(m >= n)
            _fail(f"{f}.members[{j}]", int(m[j]), f"a server id 0..{n - 1}")
        if m.size > 1 and np.any(np.diff(m) <= 0):
            j = _first(np.diff(m) <= 0) + 1
            _fail(f"{f}.members[{j}]", int(m[j]), "distinct servers in increasing order")
        o = np.sort(np.asarray(ring.order, np.int64))
        if o.shape != m.shape or np.any(o != m):
            _fail(f"{f}.order", ring.order, "a permutation of the ring's members")
        groups[(ring.phase, ring.group)].append(i)
    for (phase, group), idx in groups.items():
        first = rings[idx[0]].members
        for i in idx[1:]:
            if rings[i].members != first:
                _fail(f"{name} rings[{i}].members", rings[i].members, f"{first} (same group)")
        total = float(sum(rings[i].weight for i in idx))
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            _fail(
                f"{name} rings (phase {phase!r}, group {group})",
                f"weights summing to {total:.9g}",
                f"ring weights of a group summing to 1 (within {WEIGHT_TOLERANCE:g})",
            )


def _check_collectives(entries: list[CollectiveDocument], n: int, name: str) -> None:
    seen: set[tuple] = set()
    for i, c in enumerate(entries):
        f = f"{name} collectives[{i}]"
        m = np.asarray(c.members, np.int64)
        if m.max() >= n or np.any(np.diff(m) <= 0):
            _fail(f"{f}.members", c.members, f"distinct sorted servers 0..{n - 1}")
        key = (c.phase, c.group, c.collective)
        if key in seen:
            _fail(f, list(key), "one entry per (phase, group, collective)")
        seen.add(key)
        if not len(c.src) == len(c.dst) == len(c.fraction) or not c.src:
            _fail(f"{f}.src", len(c.src), "src, dst and fraction of one length >= 1")
        s, t = np.asarray(c.src, np.int64), np.asarray(c.dst, np.int64)
        bad = (s >= m.size) | (t >= m.size) | (s == t)
        if bad.any():
            j = _first(bad)
            _fail(f"{f}.src[{j}]", [c.src[j], c.dst[j]], f"two different positions 0..{m.size - 1}")
