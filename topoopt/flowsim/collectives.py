"""Collectives as flows: a Workload's demands expanded into flows with dependencies on a network.

Every demand family is expanded from a *flow template*: the flows of one collective over group
positions ``0..g-1`` (source, destination, bytes) with dependencies between them, broadcast over
all rows of the family's ``groups`` array with fancy indexing (no Python loop over groups). Flows
between GPUs of one server use the source GPU's intra-server link; the others run between servers
on the fabric's routes (:class:`~topoopt.flowsim.network.Network`). ``S`` is the nccl-tests size,
``g`` the group size, ``r`` the number of rings.

Modes
-----
``fluid``
    One flow per communicating pair carrying everything the pair exchanges, all released
    together; ``count`` repeats of a family are one flow of ``count`` times the bytes. The ring
    all-reduce is one flow per ring edge of ``2(g-1)/g * S/r`` bytes (reduce-scatter and
    all-gather ``(g-1)/g * S/r``): exact for NCCL's pipelined ring when the ring edges share no
    link, since every edge then streams at its full rate from start to end; with shared links it
    is the fluid limit of the pipeline.
``steps`` (ring only)
    The ring as NCCL runs it, step-synchronous: an all-reduce is ``2(g-1)`` steps (reduce-scatter
    then all-gather; ``g-1`` for reduce-scatter or all-gather); in every step each member sends
    one chunk of ``S/(g r)`` bytes to its successor, and step ``k+1`` of member ``i`` starts after
    step ``k`` of member ``i`` (its own previous send) and of member ``i-1`` (the chunk it must
    forward or reduce). ``count`` repeats chain one after the other. On a ring of dedicated links
    of bandwidth ``B`` and latency ``alpha`` this takes ``2(g-1)(S/(gB) + alpha)``.

Algorithms (``fluid``; the templates of :func:`traffic.expand.collective_template`, plus
dependencies for the hierarchical one)

- ``ring``: one or several rings with given orders (``ring_orders``: an ``(r, g)`` array of
  position orders; ring ``q`` carries ``S/r``). Default: one ring in ascending rank order, which
  keeps each server's members contiguous as NCCL orders its rings.
- ``halving-doubling``, ``tree`` (NCCL's double binary tree), ``direct``: the pair templates of
  :mod:`traffic.expand`, all flows released together.
- ``hierarchical`` (every group with the same ``k`` members on each of its ``m`` servers): an
  intra-server ring reduce-scatter (``(k-1)/k * S`` per member, on the intra links), then an
  inter-server ring all-reduce of ``S/k`` among the members with the same local index
  (``2(m-1)/m * S/k`` per member; a member's flow starts when the reduce-scatter flows of its
  own and of its successor's server are done), then an intra-server ring all-gather (after the
  inter-server flows leaving and entering the server). Reduce-scatter: the first two stages (the
  second one a reduce-scatter); all-gather: inter-server all-gather then intra-server all-gather.
  Groups that do not have that shape use the ring.
- all-to-all is direct (``S/g`` per peer or ``peer_bytes``); send is one flow; broadcast is a
  chain (ring), a binary heap (tree) or direct sends from the root.

Every algorithm puts exactly :meth:`traffic.workload.Demand.wire_bytes` on the wire (intra-server
bytes included): the algorithm changes who talks to whom and when, not how much.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from topoopt.csr import gather_rows
from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.ina import ina_template
from topoopt.flowsim.network import FlowBuilder, Network, simulate_builder
from topoopt.flowsim.roofline import workload_scale_up_bandwidth
from topoopt.flowsim.simulator import SimResult
from topoopt.flowsim.templates import FlowTemplate
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.expand import ALGORITHMS, collective_template, members_per_server
from traffic.workload import CLASSES, PHASES, Workload

__all__ = [
    "ALGORITHMS",
    "MODES",
    "FlowTemplate",
    "CollectiveFlows",
    "CommunicationTime",
    "flow_template",
    "members_per_server",
    "demand_rows",
    "expand_demand",
    "replicate_template",
    "schedule_template",
    "collective_flows",
    "communication_time",
]

MODES = ("fluid", "steps")
"""How a collective becomes flows: one flow per pair (``fluid``) or ring steps (``steps``)."""

_ORDERED = ("all-reduce", "reduce-scatter", "all-gather")


def _no_deps(src, dst, b, step=None) -> FlowTemplate:
    n = np.asarray(src).shape[0]
    return FlowTemplate(
        np.asarray(src, np.int64),
        np.asarray(dst, np.int64),
        np.asarray(b, np.float64),
        np.zeros(n + 1, np.int64),
        np.zeros(0, np.int64),
        np.zeros(n, np.int64) if step is None else np.asarray(step, np.int64),
    )


def _check_orders(orders, g: int) -> np.ndarray:
    o = np.asarray(orders, np.int64)
    if o.ndim == 1:
        o = o.reshape(1, -1)
    if o.ndim != 2 or o.shape[1] != g or o.shape[0] < 1:
        raise InputError("ring_orders", o.shape, f"an (r, {g}) array of position orders")
    if not np.array_equal(np.sort(o, axis=1), np.broadcast_to(np.arange(g), o.shape)):
        raise InputError("ring_orders", o.tolist(), f"each row a permutation of 0..{g - 1}")
    return o


def _ring_fluid(op: str, g: int, size: float, orders: np.ndarray, reps: int) -> FlowTemplate:
    r = orders.shape[0]
    factor = 2.0 if op == "all-reduce" else 1.0
    per = factor * (g - 1) / g * size / r * reps
    src = orders.ravel()
    dst = np.roll(orders, -1, axis=1).ravel()
    return _no_deps(src, dst, np.full(src.shape[0], per))


def _ring_steps(op: str, g: int, size: float, orders: np.ndarray, reps: int) -> FlowTemplate:
    r = orders.shape[0]
    n_steps = (2 * (g - 1) if op == "all-reduce" else g - 1) * reps
    chunk = size / (g * r)
    q, k, j = np.meshgrid(np.arange(r), np.arange(n_steps), np.arange(g), indexing="ij")
    q, k, j = q.ravel(), k.ravel(), j.ravel()
    src = orders[q, j]
    dst = orders[q, (j + 1) % g]
    fid = lambda qq, kk, jj: (qq * n_steps + kk) * g + jj  # noqa: E731
    has = k > 0
    lens = np.where(has, 2, 0).astype(np.int64)
    ptr = np.zeros(src.shape[0] + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    own = fid(q[has], k[has] - 1, j[has])
    pred = fid(q[has], k[has] - 1, (j[has] - 1) % g)
    deps = np.column_stack([own, pred]).ravel()
    return FlowTemplate(src, dst, np.full(src.shape[0], chunk), ptr, deps, k)


def _hierarchical(op: str, g: int, size: float, k: int, reps: int) -> FlowTemplate | None:
    m = g // k
    if k <= 1 or m <= 1 or op not in _ORDERED:
        return None
    pos = np.arange(g).reshape(m, k)  # pos[s, i]: local index i on the group's server s
    intra_src, intra_dst = pos.ravel(), np.roll(pos, -1, axis=1).ravel()
    inter_src, inter_dst = pos.ravel(), np.roll(pos, -1, axis=0).ravel()
    server = np.repeat(np.arange(m), k)  # of flow index s*k + i within a stage
    intra_b = (k - 1) / k * size * reps
    inter_f = 2.0 if op == "all-reduce" else 1.0
    inter_b = inter_f * (m - 1) / m * size / k * reps
    stages: list[tuple[np.ndarray, np.ndarray, float]] = []
    if op in ("all-reduce", "reduce-scatter"):
        stages.append((intra_src, intra_dst, intra_b))
    stages.append((inter_src, inter_dst, inter_b))
    if op in ("all-reduce", "all-gather"):
        stages.append((intra_src, intra_dst, intra_b))
    srcs, dsts, byts, steps, lens, deps = [], [], [], [], [], []
    for st, (s, d, b) in enumerate(stages):
        srcs.append(s)
        dsts.append(d)
        byts.append(np.full(g, b))
        steps.append(np.full(g, st))
        if st == 0:
            lens.append(np.zeros(g, np.int64))
            continue
        base = (st - 1) * g
        inter_now = s is inter_src
        # servers whose previous-stage flows this flow waits for
        if inter_now:  # own server's and successor server's intra stage
            sv = np.column_stack([server, (server + 1) % m])
        else:  # inter flows leaving this server and entering it (from the predecessor)
            sv = np.column_stack([server, (server - 1) % m])
        prev = base + (sv[:, :, None] * k + np.arange(k)).reshape(g, -1)
        lens.append(np.full(g, prev.shape[1], np.int64))
        deps.append(prev.ravel())
    lens_a = np.concatenate(lens)
    ptr = np.zeros(lens_a.shape[0] + 1, np.int64)
    np.cumsum(lens_a, out=ptr[1:])
    return FlowTemplate(
        np.concatenate(srcs),
        np.concatenate(dsts),
        np.concatenate(byts),
        ptr,
        np.concatenate(deps) if deps else np.zeros(0, np.int64),
        np.concatenate(steps),
    )


def flow_template(
    op: str,
    g: int,
    size: float,
    algorithm: str = "ring",
    *,
    mode: str = "fluid",
    ring_orders: np.ndarray | None = None,
    members_per_server: int | None = None,
    peer_bytes: np.ndarray | None = None,
    repeats: int = 1,
) -> FlowTemplate:
    """Flows of ``repeats`` back-to-back collectives over positions ``0..g-1``.

    Parameters
    ----------
    op, g, size
        The collective (:data:`traffic.workload.OPS`), its group size and nccl-tests size (bytes).
    algorithm : str
        One of :data:`ALGORITHMS` (see the module docstring).
    mode : {"fluid", "steps"}
        ``steps`` is the step-synchronous ring (``algorithm="ring"`` only).
    ring_orders : array_like, optional
        ``(r, g)`` position orders of ``r`` rings (default: one ring ``0, 1, .., g-1``).
    members_per_server : int, optional
        ``k`` for ``hierarchical``: positions ``k*s .. k*s+k-1`` share a server.
    peer_bytes : numpy.ndarray, optional
        Non-uniform all-to-all matrix.
    repeats : int
        Collectives run one after the other (fluid: bytes times ``repeats``; steps: chained).

    Returns
    -------
    FlowTemplate

    Examples
    --------
    A 4-member step-synchronous ring all-reduce of 1,000 bytes: 6 steps x 4 members of 250 bytes,
    member 1's second step waits for its own first step and member 0's:

    >>> t = flow_template("all-reduce", 4, 1000.0, mode="steps")
    >>> t.n_flows, float(t.bytes.sum()), t.deps[t.dep_ptr[5]:t.dep_ptr[6]].tolist()
    (24, 6000.0, [1, 0])
    >>> float(flow_template("all-reduce", 4, 1000.0, "hierarchical", members_per_server=2)
    ...       .bytes.sum())
    6000.0
    """
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")
    if mode not in MODES:
        raise InputError("mode", mode, f"one of {', '.join(MODES)}")
    if mode == "steps" and algorithm != "ring":
        raise InputError("mode", mode, f"'fluid' with algorithm {algorithm!r} (steps: ring only)")
    if int(repeats) != repeats or repeats < 0:
        raise InputError("repeats", repeats, "an integer >= 0")
    reps = int(repeats)
    if g <= 1 or reps == 0:
        return _no_deps([], [], [])
    if op in _ORDERED:
        if algorithm == "ring" or ring_orders is not None:
            orders = _check_orders(np.arange(g) if ring_orders is None else ring_orders, g)
            if algorithm == "ring":
                fn = _ring_steps if mode == "steps" else _ring_fluid
                return fn(op, g, size, orders, reps)
        if algorithm == "hierarchical" and members_per_server:
            t = _hierarchical(op, g, size, int(members_per_server), reps)
            if t is not None:
                return t
    s, d, b = collective_template(op, g, size, algorithm, peer_bytes, None)
    return _no_deps(s, d, b * reps)


@dataclass(frozen=True, eq=False)
class CollectiveFlows:
    """Rank-level flows of the expanded demands, with their dependencies.

    Attributes
    ----------
    src, dst : numpy.ndarray
        ``int64`` GPU ranks.
    size : numpy.ndarray
        ``float64`` bytes.
    dep_ptr, deps : numpy.ndarray
        CSR dependencies between these flows.
    demand, row, step : numpy.ndarray
        ``int64`` demand family index, group row and template step of each flow.
    cls : numpy.ndarray
        ``int8`` index into :data:`traffic.workload.CLASSES`.
    """

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    dep_ptr: np.ndarray
    deps: np.ndarray
    demand: np.ndarray
    row: np.ndarray
    step: np.ndarray
    cls: np.ndarray

    @property
    def n_flows(self) -> int:
        return int(self.src.shape[0])

    def total_bytes(self) -> float:
        """Bytes of all flows (equals the demands' ``wire_bytes``)."""
        return float(self.size.sum())

    def add_to(self, builder: FlowBuilder, after=None, instantaneous: bool = False) -> np.ndarray:
        """Add the flows to a :class:`FlowBuilder`; those without dependencies wait for
        ``after``. Returns the builder's ids of the flows."""
        base = builder.n
        lens = np.diff(self.dep_ptr)
        extra = np.zeros(0, np.int64) if after is None else np.asarray(after, np.int64).ravel()
        if extra.size:
            free = lens == 0
            lens = np.where(free, extra.size, lens)
            parts = self.deps + base
            ptr0 = self.dep_ptr
            new_deps = np.empty(int(lens.sum()), np.int64)
            ptr = np.zeros(lens.shape[0] + 1, np.int64)
            np.cumsum(lens, out=ptr[1:])
            own = np.flatnonzero(~free)
            new_deps[_rows_of(ptr, own)] = parts[_rows_of(ptr0, own)]
            new_deps[_rows_of(ptr, np.flatnonzero(free))] = np.tile(extra, int(free.sum()))
        else:
            ptr = self.dep_ptr
            new_deps = self.deps + base
        return builder.add_ranks(
            self.src,
            self.dst,
            self.size,
            after=new_deps,
            after_ptr=ptr,
            instantaneous=instantaneous,
        )

    def flowset(self, network: Network, start: float = 0.0) -> FlowSet:
        """These flows alone as a FlowSet on ``network``."""
        fb = FlowBuilder(network)
        self.add_to(fb)
        return fb.build(start)


_rows_of = gather_rows


def _select(workload: Workload, classes, phases, demands) -> list[int]:
    cs = None if classes is None else set(classes)
    ps = None if phases is None else set(phases)
    for c in cs or ():
        if c not in CLASSES:
            raise InputError("classes", c, f"one of {', '.join(CLASSES)}")
    for p in ps or ():
        if p not in PHASES:
            raise InputError("phases", p, f"one of {', '.join(PHASES)}")
    idx = range(len(workload.demands)) if demands is None else demands
    out = []
    for i in idx:
        if not 0 <= int(i) < len(workload.demands):
            raise InputError("demands", i, f"demand indices 0..{len(workload.demands) - 1}")
        d = workload.demands[int(i)]
        if (cs is None or d.cls in cs) and (ps is None or d.phase in ps):
            out.append(int(i))
    return out


def demand_rows(workload: Workload, idx: int, orders: Mapping[int, np.ndarray] | None = None):
    """Member rows of demand ``idx`` in the order its collective uses them (ascending rank for
    all-reduce, reduce-scatter and all-gather unless ``orders`` gives one or the family is
    ``ordered``)."""
    d = workload.demands[idx]
    if orders is not None and idx in orders:
        rows = np.asarray(orders[idx], np.int64)
        if rows.shape != d.groups.shape or not np.array_equal(
            np.sort(rows, axis=1), np.sort(d.groups, axis=1)
        ):
            raise InputError(f"orders[{idx}]", rows.shape, "a permutation of each group row")
        return rows
    if d.op in _ORDERED and not d.ordered:
        return np.sort(d.groups, axis=1)
    return d.groups


def schedule_template(schedule: np.ndarray, scale: float) -> FlowTemplate:
    """The transfers of a :attr:`traffic.workload.Demand.schedule`, ``scale`` bytes per byte,
    released together.

    >>> t = schedule_template(np.array([[0, 1, 0.5], [1, 0, 0.5]]), 10.0)
    >>> t.src.tolist(), t.bytes.tolist(), t.dep_ptr.tolist()
    ([0, 1], [5.0, 5.0], [0, 0, 0])
    """
    k = schedule.shape[0]
    return FlowTemplate(
        schedule[:, 0].astype(np.int64),
        schedule[:, 1].astype(np.int64),
        schedule[:, 2] * scale,
        np.zeros(k + 1, np.int64),
        np.zeros(0, np.int64),
        np.zeros(k, np.int64),
    )


def expand_demand(
    workload: Workload,
    idx: int,
    *,
    algorithm: str = "ring",
    mode: str = "fluid",
    ring_orders: np.ndarray | None = None,
    orders: Mapping[int, np.ndarray] | None = None,
    rows: np.ndarray | None = None,
    repeats: int | None = None,
    size: float | None = None,
    network: Network | None = None,
) -> CollectiveFlows:
    """Flows of one demand family (all its groups, or the row indices ``rows``), vectorised.

    ``repeats`` (default: the demand's ``count``) and ``size`` (default: its ``S``) override the
    family's values, e.g. for one bucket of a gradient all-reduce. On a ``network`` whose
    switches aggregate, an all-reduce they can serve is an aggregation tree
    (:mod:`topoopt.flowsim.ina`).
    """
    d = workload.demands[idx]
    all_rows = demand_rows(workload, idx, orders)
    row_ids = np.arange(d.n_groups) if rows is None else np.asarray(rows, np.int64).ravel()
    members = all_rows[row_ids]
    k = None
    if algorithm == "hierarchical" and members.size:
        k = members_per_server(members, workload.gpus_per_server)
    reps = d.count if repeats is None else repeats
    s = d.size if size is None else size
    ro = ring_orders if d.op in _ORDERED else None
    if d.schedule is not None:  # a schedule the design picked (Demand.schedule)
        t = schedule_template(d.schedule, s * reps)
    else:
        t = flow_template(
            d.op,
            d.group_size,
            s,
            algorithm,
            mode=mode if d.op in _ORDERED else "fluid",
            ring_orders=ro,
            members_per_server=k,
            peer_bytes=d.peer_bytes,
            repeats=reps,
        )
    if network is not None and mode == "fluid" and d.schedule is None:
        # in-network aggregation (topoopt.flowsim.ina)
        x = ina_template(network, d, members, s, reps, family_rows=all_rows, host=t)
        if x is not None:
            t, members = x  # positions name the members, then switches
    return replicate_template(t, members, demand=idx, rows=row_ids, cls=d.cls)


def replicate_template(
    t: FlowTemplate, members: np.ndarray, *, demand: int, rows: np.ndarray, cls: str
) -> CollectiveFlows:
    """One copy of the template ``t`` per row of ``members`` (``(G, n)`` ranks; position ``i``
    of the template is ``members[:, i]``), dependencies kept inside each copy: the flows of a
    collective family, row ``g`` labelled ``rows[g]``, demand ``demand`` and class ``cls``.

    Examples
    --------
    >>> t = flow_template("all-gather", 3, 300.0)
    >>> cf = replicate_template(t, np.array([[4, 5, 6], [7, 8, 9]]), demand=0,
    ...                         rows=np.arange(2), cls="dp")
    >>> cf.src.tolist(), cf.row.tolist(), cf.total_bytes()
    ([4, 5, 6, 7, 8, 9], [0, 0, 0, 1, 1, 1], 1200.0)
    """
    nt, G = t.n_flows, members.shape[0]
    off = (np.arange(G, dtype=np.int64) * nt)[:, None]
    lens = np.tile(np.diff(t.dep_ptr), G)
    ptr = np.zeros(nt * G + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    return CollectiveFlows(
        src=members[:, t.src].ravel(),
        dst=members[:, t.dst].ravel(),
        size=np.tile(t.bytes, G),
        dep_ptr=ptr,
        deps=(t.deps[None, :] + off).ravel(),
        demand=np.full(nt * G, demand, np.int64),
        row=np.repeat(np.asarray(rows, np.int64), nt),
        step=np.tile(t.step, G),
        cls=np.full(nt * G, CLASSES.index(cls), np.int8),
    )


def _concat(parts: list[CollectiveFlows]) -> CollectiveFlows:
    if not parts:
        z = np.zeros(0, np.int64)
        return CollectiveFlows(
            z, z, np.zeros(0), np.zeros(1, np.int64), z, z, z, z, np.zeros(0, np.int8)
        )
    base = np.cumsum([0] + [p.n_flows for p in parts[:-1]])
    dbase = np.cumsum([0] + [p.deps.shape[0] for p in parts[:-1]])
    ptr = np.concatenate([[0]] + [p.dep_ptr[1:] + db for p, db in zip(parts, dbase, strict=True)])
    return CollectiveFlows(
        src=np.concatenate([p.src for p in parts]),
        dst=np.concatenate([p.dst for p in parts]),
        size=np.concatenate([p.size for p in parts]),
        dep_ptr=ptr.astype(np.int64),
        deps=np.concatenate([p.deps + b for p, b in zip(parts, base, strict=True)]),
        demand=np.concatenate([p.demand for p in parts]),
        row=np.concatenate([p.row for p in parts]),
        step=np.concatenate([p.step for p in parts]),
        cls=np.concatenate([p.cls for p in parts]),
    )


def collective_flows(
    workload: Workload,
    *,
    algorithm: str = "ring",
    mode: str = "fluid",
    ring_orders: np.ndarray | None = None,
    orders: Mapping[int, np.ndarray] | None = None,
    classes: Iterable[str] | None = None,
    phases: Iterable[str] | None = None,
    demands: Iterable[int] | None = None,
    network: Network | None = None,
) -> CollectiveFlows:
    """Expand demands into rank-level flows (all families released together).

    Parameters
    ----------
    workload : Workload
    algorithm : str
        One of :data:`ALGORITHMS`.
    mode : {"fluid", "steps"}
        See the module docstring (``steps``: ``algorithm="ring"`` only).
    ring_orders : array_like, optional
        ``(r, g)`` position orders of ``r`` rings, for every ordered collective (all its
        families must then have group size ``g``).
    orders : mapping, optional
        Demand index -> ``(G, g)`` explicit member orders (e.g. a solver's ring orders).
    classes, phases : iterable of str, optional
        Keep only these classes / phases.
    demands : iterable of int, optional
        Keep only these demand indices.
    network : Network, optional
        The network the flows will run on (in-network aggregation, :func:`expand_demand`).

    Returns
    -------
    CollectiveFlows

    Raises
    ------
    InputError
        Unknown algorithm or mode, ``steps`` with another algorithm than the ring, bad orders.

    Examples
    --------
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(4, 2, (Demand("all-reduce", [[0, 1, 2, 3]], 400.0, "dp", "backward"),))
    >>> f = collective_flows(w)
    >>> f.src.tolist(), f.dst.tolist(), f.total_bytes() == w.total_wire_bytes()
    ([0, 1, 2, 3], [1, 2, 3, 0], True)
    """
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")
    if mode not in MODES:
        raise InputError("mode", mode, f"one of {', '.join(MODES)}")
    if mode == "steps" and algorithm != "ring":
        raise InputError("mode", mode, f"'fluid' with algorithm {algorithm!r} (steps: ring only)")
    parts = []
    for idx in _select(workload, classes, phases, demands):
        d = workload.demands[idx]
        if d.group_size <= 1 or d.count == 0 or d.n_groups == 0:
            continue
        parts.append(
            expand_demand(
                workload,
                idx,
                algorithm=algorithm,
                mode=mode,
                ring_orders=ring_orders,
                orders=orders,
                network=network,
            )
        )
    return _concat(parts)


@dataclass(frozen=True, eq=False)
class CommunicationTime:
    """Communication of one iteration alone, phase after phase (seconds).

    Attributes
    ----------
    total_s : float
        Time to run every phase's communication, phases in sequence.
    by_phase : pandas.DataFrame
        One row per phase: ``phase``, ``start_s``, ``finish_s``, ``duration_s``, ``bytes``.
    flows : CollectiveFlows
        The rank-level flows (phases concatenated in order).
    sim : SimResult
        The simulation (flows first, then one barrier per phase).
    link_kind : numpy.ndarray
        Kind of every link of the simulation (fabric kinds, ``intra``, ``null``).
    """

    total_s: float
    by_phase: pd.DataFrame
    flows: CollectiveFlows
    sim: SimResult
    link_kind: np.ndarray


def communication_time(
    workload: Workload,
    fabric: Fabric,
    *,
    algorithm: str = "ring",
    mode: str = "fluid",
    routing: PathSet | None = None,
    orders: Mapping[int, np.ndarray] | None = None,
    intra_bandwidth: float | None = None,
    record_series: bool = False,
    aggregate: bool = True,
    max_refills: int | None = None,
    reduction: bool = False,
    max_paths: int | None = None,
    path_times: bool = True,
) -> CommunicationTime:
    """Simulate the communication of one iteration alone: all demands of each phase released
    together as flows, phases (forward, backward, optimizer) one after the other.

    Useful to compare fabrics and designs on traffic alone; :func:`simulate_iteration
    <topoopt.flowsim.iteration.simulate_iteration>` adds compute and overlap.

    Parameters
    ----------
    workload : Workload
    fabric : Fabric
        Must have at least ``workload.servers`` servers.
    algorithm, mode, orders
        As in :func:`collective_flows`.
    routing : PathSet, optional
        Server-pair routes overriding the fabric's ECMP routes (e.g. from a solver).
    intra_bandwidth : float, optional
        GPU intra-server egress bytes/s (default: the scale-up bandwidth of the plan's
        ``cluster.gpu`` when it names one, else the fabric's, else NVLink 3).
    record_series : bool
        Keep the piecewise-constant link loads.
    aggregate : bool
        Simulate identical flows (same server pair, bytes, dependencies) as one flow with a
        multiplicity (:meth:`FlowBuilder.build_classes`; exact, only faster). ``sim`` is per
        flow either way; ``sim.simulated_flows`` is what the event loop ran.
    max_refills : int, optional
        Work limit (:func:`topoopt.flowsim.simulator.simulate`; raises
        :class:`~topoopt.flowsim.simulator.WorkLimitExceeded`).
    reduction : bool
        Simulate through the exact symmetry quotient (:mod:`topoopt.flowsim.symmetry`): the
        same times up to rounding, ``sim.reduction`` says what it found.
    max_paths : int, optional
        At most this many ECMP paths per server pair, an approximation
        (:class:`~topoopt.flowsim.network.Network`); default every path, exact.
    path_times : bool
        Keep ``sim``'s per-sub-flow times (False: per-flow times and link bytes only; where
        every sub-flow is over the memory budget the reduced run then takes the grouped
        quotient: :func:`~topoopt.flowsim.network.simulate_builder`).

    Returns
    -------
    CommunicationTime

    Examples
    --------
    A 4-server ring all-reduce of 1 MB on a 1 GB/s switch: ``2(g-1)/g * S/B`` = 1.5 ms plus two
    1 us hops.

    >>> from traffic.workload import Demand, Workload
    >>> from topoopt.fabrics import ideal
    >>> w = Workload(4, 1, (Demand("all-reduce", [[0, 1, 2, 3]], 1e6, "dp", "backward"),))
    >>> round(communication_time(w, ideal(4, port_bandwidth=1e9)).total_s * 1e6, 6)
    1502.0
    """
    if intra_bandwidth is None:  # the scale-up bandwidth of the plan's cluster.gpu, if named
        intra_bandwidth = workload_scale_up_bandwidth(workload)
    net = Network(
        fabric, workload.gpus_per_server, intra_bandwidth, routing=routing, max_paths=max_paths
    )
    net.check_workload(workload.gpus, workload.gpus_per_server)
    fb = FlowBuilder(net)
    parts, rows, prev = [], [], None
    t_bar = []
    for ph in PHASES:
        cf = collective_flows(
            workload, algorithm=algorithm, mode=mode, orders=orders, phases=[ph], network=net
        )
        if cf.n_flows == 0:
            continue
        ids = cf.add_to(fb, after=None if prev is None else [prev])
        prev = fb.add_barrier(ids)
        parts.append(cf)
        rows.append((ph, ids, cf.total_bytes()))
        t_bar.append(prev)
    sim = simulate_builder(
        fb, aggregate=aggregate, record_series=record_series, max_refills=max_refills,
        reduction=reduction, path_times=path_times,
    )  # fmt: skip
    out_rows, t0 = [], 0.0
    for (ph, _ids, b), bar in zip(rows, t_bar, strict=True):
        t1 = float(sim.finish[bar])
        out_rows.append(
            {"phase": ph, "start_s": t0, "finish_s": t1, "duration_s": t1 - t0, "bytes": b}
        )
        t0 = t1
    frame = pd.DataFrame(out_rows, columns=["phase", "start_s", "finish_s", "duration_s", "bytes"])
    return CommunicationTime(
        total_s=t0,
        by_phase=frame,
        flows=_concat(parts),
        sim=sim,
        link_kind=net.link_kind(0),
    )
