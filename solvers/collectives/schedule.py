"""The common schedule type of every collective algorithm, and how it becomes flows.

A :class:`Schedule` is a set of transfers between members (servers ``0 .. n-1``) with bytes,
dependencies and steps: a :class:`topoopt.flowsim.collectives.FlowTemplate`, plus the name of the
algorithm and what it found (``info``). With ``barriers`` the schedule is step-synchronous (SCCL's
k-synchronous algorithms): every transfer of step ``k+1`` waits for all transfers of step ``k``.

Builders:

- :func:`template_schedule`: the existing algorithms (ring, tree, halving-doubling, direct) of
  :func:`topoopt.flowsim.collectives.flow_template`;
- :func:`tree_schedule`: data split over weighted arborescences (Blink, TACCL-style synthesis):
  out-trees broadcast a root's data, in-trees reduce data to a root. ``chunks=None`` is the
  fluid limit of pipelining (every tree edge one flow carrying its bytes, all released together,
  like the fluid ring of :mod:`topoopt.flowsim.collectives`; flows on one arc merged);
  ``chunks=C`` pipelines ``C`` chunks, each tree edge's chunk after its parent edge's (broadcast)
  or its children's (reduce) and its own previous chunk; an all-reduce's broadcast of a chunk
  waits for that chunk's reduction at the root;
- :func:`step_schedule`: explicit ``(chunk bytes, src, dst, step)`` sends of an exact synthesis.

:func:`schedule_flowset` turns a schedule into a :class:`topoopt.flowsim.FlowSet` on a fabric and
:func:`time_schedule` times it with :func:`topoopt.flowsim.simulate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim import simulate
from topoopt.flowsim.collectives import (
    CollectiveFlows,
    FlowTemplate,
    flow_template,
    replicate_template,
)
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.network import FlowBuilder, Network
from topoopt.flowsim.simulator import SimResult
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.workload import CLASSES

__all__ = [
    "Schedule",
    "Tree",
    "template_schedule",
    "tree_schedule",
    "step_schedule",
    "schedule_flowset",
    "time_schedule",
    "synchronous_template",
    "schedule_rank_flows",
]


@dataclass(frozen=True, eq=False)
class Schedule:
    """Transfers of one collective between members ``0 .. n-1`` (see the module docstring).

    Attributes
    ----------
    collective, algorithm : str
    n : int
    size : float
        nccl-tests size ``S`` (bytes).
    flows : FlowTemplate
        Transfers (``src``, ``dst``, ``bytes``, CSR dependencies, ``step``).
    barriers : bool
        Step-synchronous: step ``k+1`` starts when all of step ``k`` is done.
    info : dict
        What the algorithm found (JSON-able).
    """

    collective: str
    algorithm: str
    n: int
    size: float
    flows: FlowTemplate
    barriers: bool = False
    info: dict = field(default_factory=dict)

    @property
    def n_flows(self) -> int:
        return self.flows.n_flows

    @property
    def n_steps(self) -> int:
        return int(self.flows.step.max()) + 1 if self.n_flows else 0

    def arc_bytes(self) -> dict[tuple[int, int], float]:
        """Bytes per ordered member pair."""
        out: dict[tuple[int, int], float] = {}
        for s, d, b in zip(self.flows.src, self.flows.dst, self.flows.bytes, strict=True):
            out[(int(s), int(d))] = out.get((int(s), int(d)), 0.0) + float(b)
        return out

    def summary(self, max_transfers: int = 256) -> dict:
        """JSON-able description: counts, wire bytes, ``info``, and the transfers when few."""
        out = {
            "collective": self.collective,
            "algorithm": self.algorithm,
            "members": self.n,
            "size_bytes": self.size,
            "transfers": self.n_flows,
            "steps": self.n_steps,
            "step_synchronous": self.barriers,
            "wire_bytes": float(self.flows.bytes.sum()),
            **self.info,
        }
        if self.n_flows <= max_transfers:
            f = self.flows
            out["transfer_list"] = [
                [int(s), int(d), float(b), int(k)]
                for s, d, b, k in zip(f.src, f.dst, f.bytes, f.step, strict=True)
            ]
        return out


def _template(src, dst, b, deps: list[list[int]] | None, step) -> FlowTemplate:
    n = len(src)
    lens = np.zeros(n, np.int64) if deps is None else np.array([len(x) for x in deps], np.int64)
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    flat = (
        np.zeros(0, np.int64)
        if deps is None or not lens.sum()
        else np.concatenate([np.asarray(x, np.int64) for x in deps if x])
    )
    return FlowTemplate(
        np.asarray(src, np.int64).reshape(-1),
        np.asarray(dst, np.int64).reshape(-1),
        np.asarray(b, np.float64).reshape(-1),
        ptr,
        flat,
        np.asarray(step, np.int64).reshape(-1),
    )


def template_schedule(
    collective: str, n: int, size: float, algorithm: str, ring_orders: np.ndarray | None = None
) -> Schedule:
    """One of the existing algorithms (:func:`topoopt.flowsim.collectives.flow_template`,
    fluid mode) as a schedule; ``ring_orders`` (``(r, n)``) are the rings of a ring all-reduce,
    reduce-scatter or all-gather (default: one ring in rank order).

    >>> s = template_schedule("all-gather", 4, 1000.0, "ring")
    >>> s.n_flows, float(s.flows.bytes.sum())
    (4, 3000.0)
    """
    ordered = collective in ("all-reduce", "reduce-scatter", "all-gather")
    ro = ring_orders if algorithm == "ring" and ordered else None
    t = flow_template(collective, n, size, algorithm, ring_orders=ro)
    info = {} if ro is None else {"rings": int(np.asarray(ro).reshape(-1, n).shape[0])}
    return Schedule(collective, algorithm, n, float(size), t, info=info)


@dataclass(frozen=True, eq=False)
class Tree:
    """A weighted arborescence over members.

    ``parent[v]`` is ``v``'s parent (``-1`` at the root); ``inward`` trees carry data towards the
    root (reduce), the others away from it (broadcast). ``share`` is the fraction of the root's
    data (its shard, or everything for a broadcast) the tree carries.
    """

    root: int
    parent: tuple[int, ...]
    share: float
    inward: bool = False

    def depth(self) -> np.ndarray:
        """Hops from the root of every member."""
        p = np.asarray(self.parent)
        d = np.zeros(p.shape[0], np.int64)
        for v in range(p.shape[0]):
            k, u = 0, v
            while p[u] >= 0:
                u, k = p[u], k + 1
            d[v] = k
        return d


def tree_schedule(
    collective: str,
    n: int,
    size: float,
    trees: list[Tree],
    *,
    algorithm: str,
    chunks: int | None = None,
    info: dict | None = None,
) -> Schedule:
    """Transfers of ``collective`` over weighted trees (module docstring).

    The data of a root is ``S/n`` (its shard) for all-gather, reduce-scatter and all-reduce, and
    ``S`` for a broadcast. An all-reduce uses the inward trees of every root (reduce its shard)
    then its outward trees (broadcast the result).

    Examples
    --------
    A broadcast of 1,000 bytes from 0 along the path 0 -> 1 -> 2, two chunks: four transfers, the
    second hop of a chunk after its first hop:

    >>> t = Tree(0, (-1, 0, 1), 1.0)
    >>> s = tree_schedule("broadcast", 3, 1000.0, [t], algorithm="blink", chunks=2)
    >>> s.flows.src.tolist(), s.flows.dst.tolist(), s.flows.bytes.tolist()
    ([0, 1, 0, 1], [1, 2, 1, 2], [500.0, 500.0, 500.0, 500.0])
    >>> s.flows.deps[s.flows.dep_ptr[3]:s.flows.dep_ptr[4]].tolist()
    [2, 1]
    """
    if chunks is not None and (int(chunks) != chunks or chunks < 1):
        raise InputError("chunks", chunks, "an integer >= 1 (or none: the fluid limit)")
    data = size if collective == "broadcast" else size / n
    src: list[int] = []
    dst: list[int] = []
    byts: list[float] = []
    step: list[int] = []
    deps: list[list[int]] = []
    c_n = 1 if chunks is None else int(chunks)
    # (root, chunk) -> ids of reduce flows into the root (all-reduce broadcast waits for them)
    reduced: dict[tuple[int, int], list[int]] = {}
    ordered = sorted(trees, key=lambda t: (not t.inward, t.root))  # reductions first
    for t in ordered:
        p = np.asarray(t.parent)
        depth = t.depth()
        dmax = int(depth.max())
        b = data * t.share / c_n
        kids = [np.flatnonzero(p == v) for v in range(n)]
        into_prev: dict[int, int] = {}
        for c in range(c_n):
            into: dict[int, int] = {}  # broadcast: flow id delivering this chunk to v
            if t.inward:
                # leaves first: v -> parent after every child's flow into v
                for v in sorted(np.flatnonzero(p >= 0), key=lambda v: -depth[v]):
                    dep = [into[int(k)] for k in kids[v]]
                    if c:
                        dep.append(into_prev[int(v)])
                    fid = len(src)
                    src.append(int(v))
                    dst.append(int(p[v]))
                    byts.append(b)
                    step.append(dmax - int(depth[v]))
                    deps.append(dep)
                    into[int(v)] = fid
                reduced.setdefault((t.root, c), []).extend(into[int(k)] for k in kids[t.root])
            else:
                for v in sorted(np.flatnonzero(p >= 0), key=lambda v: depth[v]):
                    dep = [into[int(p[v])]] if p[v] != t.root else []
                    if p[v] == t.root and collective == "all-reduce":
                        dep = list(reduced.get((t.root, c), []))
                    if c:
                        dep.append(into_prev[int(v)])
                    fid = len(src)
                    src.append(int(p[v]))
                    dst.append(int(v))
                    byts.append(b)
                    step.append(int(depth[v]) - 1 + (dmax if collective == "all-reduce" else 0))
                    deps.append(dep)
                    into[int(v)] = fid
            into_prev = into
    if chunks is None:  # fluid: one flow per arc, no dependencies
        key = np.asarray(src, np.int64) * n + np.asarray(dst, np.int64)
        uniq, inv = np.unique(key, return_inverse=True)
        tot = np.bincount(inv, weights=np.asarray(byts), minlength=uniq.shape[0])
        ft = _template(uniq // n, uniq % n, tot, None, np.zeros(uniq.shape[0], np.int64))
    else:
        ft = _template(src, dst, byts, deps, step)
    meta = {
        "trees": len(trees),
        "chunks": chunks,
        "pipeline": "fluid" if chunks is None else "chunked",
    }
    meta.update(info or {})
    return Schedule(collective, algorithm, n, float(size), ft, False, meta)


def step_schedule(
    collective: str,
    n: int,
    size: float,
    sends: list[tuple[float, int, int, int]],
    *,
    algorithm: str,
    info: dict | None = None,
) -> Schedule:
    """A step-synchronous schedule from ``(bytes, src, dst, step)`` sends (steps from 0).

    >>> s = step_schedule("all-gather", 2, 10.0, [(5.0, 0, 1, 0), (5.0, 1, 0, 0)], algorithm="x")
    >>> s.barriers, s.n_steps, float(s.flows.bytes.sum())
    (True, 1, 10.0)
    """
    if not sends:
        return Schedule(collective, algorithm, n, float(size), _template([], [], [], None, []))
    b, s, d, k = (list(x) for x in zip(*sends, strict=True))
    return Schedule(
        collective, algorithm, n, float(size), _template(s, d, b, None, k), True, dict(info or {})
    )


def schedule_flowset(schedule: Schedule, network: Network) -> FlowSet:
    """The schedule's transfers as flows on ``network`` (member ``i`` is rank ``i``; one rank per
    server), step barriers on the null link when ``schedule.barriers``."""
    f = schedule.flows
    fb = FlowBuilder(network)
    if not schedule.barriers:
        fb.add_ranks(f.src, f.dst, f.bytes, after=f.deps, after_ptr=f.dep_ptr)
        return fb.build()
    ids = fb.add_ranks(f.src, f.dst, f.bytes)
    prev = None
    for k in range(schedule.n_steps):
        mine = ids[f.step == k]
        if prev is not None and mine.size:
            fb.add_deps(mine, np.full(mine.shape[0], prev))
        if mine.size:
            prev = fb.add_barrier(mine)
    return fb.build()


def time_schedule(
    schedule: Schedule, fabric: Fabric, routing: PathSet | None = None
) -> tuple[float, SimResult]:
    """Time a schedule with the flow model on ``fabric`` (members on servers ``0 .. n-1``).

    Examples
    --------
    A ring all-gather of 1 MB on a 4-server ring of 1 GB/s links: ``3/4 * S / B`` = 750 us plus
    one 1 us hop.

    >>> from topoopt.fabrics import torus
    >>> t, _ = time_schedule(template_schedule("all-gather", 4, 1e6, "ring"), torus("4", 1e9))
    >>> round(t * 1e6, 6)
    751.0
    """
    if schedule.n > fabric.n_servers:
        raise InputError("members", schedule.n, f"at most the fabric's {fabric.n_servers} servers")
    if schedule.n_flows == 0:
        return 0.0, simulate(schedule_flowset(schedule, Network(fabric, gpus_per_server=1)))
    net = Network(fabric, gpus_per_server=1, routing=routing)
    sim = simulate(schedule_flowset(schedule, net), record_series=False)
    return float(sim.makespan), sim


def synchronous_template(schedule: Schedule) -> FlowTemplate:
    """The schedule's transfers with its step barriers written as dependencies (every transfer of
    step ``k+1`` after every transfer of step ``k``); the template itself when it has none."""
    f = schedule.flows
    if not schedule.barriers or schedule.n_steps <= 1:
        return f
    by_step = [np.flatnonzero(f.step == k) for k in range(schedule.n_steps)]
    deps = [[] if f.step[i] == 0 else by_step[f.step[i] - 1].tolist() for i in range(f.n_flows)]
    return _template(f.src, f.dst, f.bytes, deps, f.step)


def schedule_rank_flows(
    schedule: Schedule, members, *, demand: int = 0, cls: str = "dp"
) -> CollectiveFlows:
    """Rank-level flows of ``schedule`` run by every group row of ``members`` (``(G, n)`` GPU
    ranks, position ``i`` of the schedule is ``members[:, i]``), in the form
    :func:`topoopt.flowsim.collectives.expand_demand` returns: the hook through which an
    iteration model can run a Blink or synthesized schedule instead of a ring.

    Examples
    --------
    >>> s = template_schedule("all-gather", 3, 300.0, "ring")
    >>> cf = schedule_rank_flows(s, [[4, 5, 6], [7, 8, 9]])
    >>> cf.src.tolist(), cf.dst.tolist(), cf.total_bytes()
    ([4, 5, 6, 7, 8, 9], [5, 6, 4, 8, 9, 7], 1200.0)
    """
    m = np.asarray(members, np.int64)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    if m.ndim != 2 or m.shape[1] != schedule.n:
        raise InputError("members", m.shape, f"a (groups, {schedule.n}) array of ranks")
    if cls not in CLASSES:
        raise InputError("cls", cls, f"one of {', '.join(CLASSES)}")
    t = synchronous_template(schedule)
    return replicate_template(t, m, demand=demand, rows=np.arange(m.shape[0]), cls=cls)
