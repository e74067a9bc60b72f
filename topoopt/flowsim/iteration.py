"""Iteration time: one training iteration's compute and communication as flows on a network.

:func:`simulate_iteration` turns a Workload into a task graph of compute and communication,
expresses every task as flows (:mod:`topoopt.flowsim.network`: compute = a flow of ``T`` bytes on a
private 1 byte/s device link; communication = flows on intra-server links and fabric routes), and
simulates it under max-min fair sharing (:func:`topoopt.flowsim.simulate`).

Plan-derived workloads (:func:`traffic.build.workload_from_plan`)
---------------------------------------------------------------------
*Cells.* Ranks joined by a blocking collective (below) form a *cell*: the GPUs that compute in
lockstep (a tensor-parallel group; with EP or an all-to-all spanning replicas, all of them). A
cell is one device: its members run the same kernels at the same time, so one device flow per
task is exact for all of them. Each rank's pipeline stage comes from the demands' ``stage``.

*Compute.* Forward of one micro-batch on stage ``i``: ``F_i / (peak * efficiency)``
(:mod:`topoopt.flowsim.roofline`, ``F_i`` = ``info["forward_flops_per_microbatch_per_gpu"][i]``);
plus, with ``options.memory_bound_kernels``, the HBM bytes of the memory-bound kernels
(``info["forward_memory_bytes_per_microbatch_per_gpu"]``) at the GPU's memory bandwidth;
backward twice that, three times with full recomputation; with ``v`` virtual stages a chunk takes
``1/v`` of it. Optimizer: memory-bound Adam over the stage's parameters per GPU.

*Schedule.* Each cell runs its stage's 1F1B order (``min(p-i-1, m)`` warm-up forwards, then
one-forward-one-backward, then the cool-down backwards); with ``v > 1`` Megatron's interleaved
order (warm-up ``2(p-i-1) + (v-1)p`` chunk-forwards, micro-batches in groups of ``p`` per chunk,
``m`` a multiple of ``p``). A device's tasks are chained in that order. Eager-1F1B
(:func:`pipeline_order`, ``schedule="eager-1f1b"``) runs up to ``2(p-i)-1`` micro-batches in
flight on stage ``i`` and issues the pipeline sends of one pair of ranks in micro-batch order
(one stream); :func:`simulate_iteration` also simulates 1F1B and keeps the faster. The forward of
micro-batch ``j`` on chunk ``c`` waits for the pipeline send from chunk ``c-1``; the backward for
the send from chunk ``c+1`` (the last chunk's backward follows its own forward).

*Blocking communication* (TP/SP/CP collectives, EP and other all-to-alls, pipeline
scatter-gather re-assembly, and every forward-phase collective) is on the critical path of its
stage: a family of ``count`` collectives per iteration contributes ``count // (m v)`` of them to
each of the stage's ``m v`` compute tasks of its phase (the remainder to the last one), run after
the compute task and before the device's next task. Aggregation: the per-layer collectives of one
(stage, micro-batch, phase) are one comm task. When a collective's group lies inside one server
the task is a device flow of the time those collectives take alone on the intra-server links
(computed once per layout by simulating them): exact when nothing else uses those GPUs' intra
links meanwhile (true unless pipeline sends or data-parallel rings also stay inside the server,
which then are not slowed by it); per layer, interleaving compute and collective instead of
running them back to back gives the same sum. Groups spanning servers run as real flows.

*Pipeline sends* of every replica are real flows on the fabric. The ``t`` ranks of a cell that
send to the ``t`` ranks of the next stage's cell on the same pair of servers are one flow of
``t`` times the bytes (routes are per server pair, so the ``t`` flows share every path).

*Gradient synchronisation* (data-parallel and tied-embedding all-reduces or reduce-scatters of
the backward phase) is bucketed: ``n = ceil(S_total / bucket_bytes)`` equal buckets. The last
backward task of each device is split into ``n`` equal pieces (gradients appear at a uniform
rate) and bucket ``k`` of a group starts when its members have produced it and the group's
bucket ``k-1`` is done (one NCCL stream per group); with ``options.overlap_grad_reduce: false``
every bucket waits for the whole last backward task (Megatron-LM's local DDP of 2021). Groups
whose members all sit on distinct servers and that cover the same servers and cells are merged
into one group of multiplied bytes, as the sends. The optimizer step of a cell waits for its
last backward task and all buckets of its groups; optimizer-phase collectives (parameter
all-gathers) follow the optimizer.

*Merging exactness.* Merging ``k`` identical flows into one flow of ``k`` times the bytes is
exact under max-min fairness when every network flow is merged by the same factor (the
allocation of the merged system is the original one scaled by ``k``); the result reports the
factors (``info["merge_factors"]``) and whether they are uniform (``info["merge_exact"]``).

Imported TopoOpt task graphs (:func:`traffic.taskgraph.read_taskgraph`)
-----------------------------------------------------------------------
Every task is kept: forward/backward/update tasks are their runtime on the server's device link
(tasks of one server ready at once share it, processor-sharing); ``comm`` tasks (intra-server
copies) their runtime on a second per-server device link; barriers are instantaneous; transfers
are flows between their servers; all-reduces are collective flows of their group followed by a
barrier. Successor edges become dependencies.

Definitions (:class:`IterationResult`)
--------------------------------------
All four are measured on the simulated iteration.

``iteration_s``: makespan. ``compute_s``: makespan with every communication flow instantaneous
(zero bytes on the null link): the compute critical path with an infinitely fast network.
``exposed_comm_s = iteration_s - compute_s``. ``exposed_by_class[c] = iteration_s -`` the makespan
with class ``c``'s communication instantaneous (the others as they are).

``comm_s``: communication on the critical path. The critical path (:func:`critical_path`) runs
back from the flow that finishes last, each time to the dependency that finished last (the one
the flow waited for), preferring a compute flow on ties; its flows follow each other without gap
from time 0, so ``iteration_s = C + comm_s`` with ``C`` the seconds of compute on it and
``comm_s`` the seconds of its transfers and collectives (network flows, intra-server
collectives, gradient buckets; barriers take no time). ``comm_by_class`` splits it by class.
``comm_busy_s``: length of the union of the intervals during which some communication task is in
flight anywhere (``comm_s <= comm_busy_s``: the critical path's communication intervals are
disjoint and inside that union).

*exposed <= comm.* For plan-derived workloads a device's tasks are chained, so a compute flow
never shares its device link and takes its nominal time; the critical path's compute flows are a
chain of the task graph, which the compute-only run also contains with the same durations, so
``C <= compute_s`` and ``exposed_comm_s = iteration_s - compute_s <= iteration_s - C = comm_s``.
(Imported task graphs share a server's device among the tasks ready at once, so there ``C`` is
elapsed time and the inequality is checked, not implied.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from math import ceil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse import csgraph

from topoopt.csr import ranges
from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim.collectives import (
    ALGORITHMS,
    MODES,
    demand_rows,
    expand_demand,
    flow_template,
    members_per_server,
    schedule_template,
)
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.ina import ina_template
from topoopt.flowsim.network import (
    FlowBuilder,
    Network,
    simulate_builder,
    simulate_builder_classes,
)
from topoopt.flowsim.priorities import check_priority, simulate_tasks
from topoopt.flowsim.roofline import (
    RooflineParams,
    forward_time,
    optimizer_time,
    workload_gpu,
    workload_scale_up_bandwidth,
)
from topoopt.flowsim.simulator import SimResult, WorkLimitExceeded, expand_classes
from topoopt.flowsim.subflow_guard import check_expansion
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.workload import CLASSES, Demand, Workload

__all__ = [
    "IterationResult",
    "TooManyFlows",
    "SCHEDULES",
    "pipeline_order",
    "reduction_status",
    "simulate_iteration",
    "ITERATION_ONLY",
    "TIMELINE_COLUMNS",
]

TIMELINE_COLUMNS = (
    "task",
    "kind",
    "cell",
    "stage",
    "micro_batch",
    "phase",
    "class",
    "start_s",
    "finish_s",
)
"""Columns of :attr:`IterationResult.timeline`."""

_PHASE_NAMES = ("forward", "backward")


class TooManyFlows(InputError):
    """A plan-derived iteration would build more flows than ``max_flows`` allows
    (:func:`simulate_iteration`); raised before any flow is built. ``n_flows`` is the count.

    >>> print(TooManyFlows(3_000_000, 2_000_000))
    workload: got '3,000,000 flows'; allowed: at most max_flows=2,000,000 flows
    """

    def __init__(self, n_flows: int, max_flows: int, hint: str = ""):
        self.n_flows, self.max_flows, self.hint = int(n_flows), int(max_flows), str(hint)
        allowed = f"at most max_flows={self.max_flows:,} flows" + (f" ({hint})" if hint else "")
        super().__init__("workload", f"{self.n_flows:,} flows", allowed)

    def __reduce__(self):  # pickles by its own fields (a worker process sends it back)
        return (type(self), (self.n_flows, self.max_flows, self.hint))


# ------------------------------------------------------------------------------------------------
# Result
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class IterationResult:
    """One simulated training iteration (seconds, bytes; definitions in the module docstring).

    Attributes
    ----------
    iteration_s : float
        Iteration time.
    compute_s : float
        Iteration time with an infinitely fast network (compute critical path).
    comm_s : float
        Communication on the critical path: seconds of the iteration's critical path spent in
        transfers and collectives (``exposed_comm_s <= comm_s <= comm_busy_s``).
    exposed_comm_s : float
        ``iteration_s - compute_s``.
    exposed_by_class : dict
        Class -> ``iteration_s`` minus the iteration time with that class instantaneous.
    links : pandas.DataFrame
        Per fabric and intra-server link: ``link``, ``kind``, ``src``, ``dst``, ``bytes``,
        ``capacity``, ``utilisation`` (bytes / (capacity * iteration_s)).
    timeline : pandas.DataFrame
        One row per task, columns :data:`TIMELINE_COLUMNS` (for a Gantt chart).
    sim : SimResult
        The full simulation (per-flow times, link bytes, load series; per-sub-flow times
        unless :func:`simulate_iteration` was asked ``path_times=False``).
    info : dict
        Sizes and modelling facts (flows, tasks, cells, merge factors, critical path, ...).
    comm_busy_s : float
        Time during which some communication is in flight anywhere (union of intervals).
    comm_by_class : dict
        Class -> seconds of ``comm_s`` (a blocking task shared by classes split pro rata).
    """

    iteration_s: float
    compute_s: float
    comm_s: float
    exposed_comm_s: float
    exposed_by_class: dict
    links: pd.DataFrame
    timeline: pd.DataFrame
    sim: SimResult
    info: dict = field(default_factory=dict)
    comm_busy_s: float = 0.0
    comm_by_class: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------
# Schedules
# ------------------------------------------------------------------------------------------------


SCHEDULES = ("1f1b", "interleaved", "eager-1f1b")
"""Pipeline schedules of :func:`simulate_iteration` (``None``: interleaved when ``vpp > 1``,
else 1F1B)."""


def pipeline_order(p: int, m: int, stage: int, v: int = 1, eager: bool = False) -> np.ndarray:
    """The 1F1B (``v = 1``), interleaved 1F1B (``v > 1``) or eager-1F1B task order of a stage.

    Returns an ``(2 m v, 3)`` int array of ``(phase, micro-batch, chunk)`` rows, phase 0 forward
    and 1 backward, chunk the device's local chunk ``0..v-1`` (global chunk ``chunk * p +
    stage``).

    1F1B runs ``min(p - i - 1, m)`` warm-up forwards on stage ``i``, so at most ``p - i``
    micro-batches are in flight. Eager-1F1B (``eager``, ``v = 1``; the "overlapping-friendly"
    schedule of Zhuang et al., "On Optimizing the Communication of Model Parallelism", MLSys
    2023, arXiv:2211.05322, as Alpa's ``OverlapFriendlyPipeDreamSchedule`` orders it) issues
    forwards as early as a memory rule of ``2(p - i) - 1`` micro-batches in flight allows:
    ``min(2(p - i - 1), m)`` warm-up forwards, then one-forward-one-backward. The activations of
    the next micro-batches are then sent (resharded) while the stage computes, instead of when
    the receiver waits for them. The last stage's order is the same in both.

    Examples
    --------
    >>> pipeline_order(2, 3, 0)[:, :2].tolist()
    [[0, 0], [0, 1], [1, 0], [0, 2], [1, 1], [1, 2]]
    >>> pipeline_order(2, 3, 1)[:, :2].tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1], [0, 2], [1, 2]]
    >>> pipeline_order(2, 3, 0, eager=True)[:, :2].tolist()
    [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    """
    if eager and v > 1:
        raise InputError("schedule", "eager-1f1b", "1f1b or interleaved when vpp > 1")
    if v > 1 and m % p:
        raise InputError("micro_batches", m, f"a multiple of pp={p} with interleaving (vpp={v})")
    total = m * v
    k = np.arange(total)
    mb = (k // (p * v)) * p + k % p
    chunk_f = (k // p) % v
    chunk_b = v - 1 - chunk_f
    if v == 1:
        mb = k
        warm = min((2 if eager else 1) * (p - stage - 1), m)
    else:
        warm = min(2 * (p - stage - 1) + (v - 1) * p, total)
    fwd = np.column_stack([np.zeros(total, np.int64), mb, chunk_f])
    bwd = np.column_stack([np.ones(total, np.int64), mb, chunk_b])
    rows = [fwd[:warm]]
    steady = total - warm
    inter = np.empty((2 * steady, 3), np.int64)
    inter[0::2] = fwd[warm:]
    inter[1::2] = bwd[:steady]
    rows += [inter, bwd[steady:]]
    return np.concatenate(rows)


# ------------------------------------------------------------------------------------------------
# Task records
# ------------------------------------------------------------------------------------------------


class _Tasks:
    """Logical tasks as contiguous flow-id ranges ``lo:hi`` with labels.

    ``add`` runs once per task group (16,000 times per build on GPT-3 over 32 servers), so it
    only records its arguments; :attr:`parts` turns them into columns in one pass when read."""

    _LABELS = (("task", object), ("kind", object), ("cell", np.int64), ("stage", np.int64),
               ("micro_batch", np.int64), ("phase", object), ("class", object))  # fmt: skip
    _SCALARS = (str, int, np.integer, np.str_)

    def __init__(self):
        self._parts: list[dict] = []
        self._pending: list[tuple] = []
        # flows shared by several classes: (flow ids, class -> seconds of each flow)
        self.splits: list[tuple[np.ndarray, dict]] = []

    def add(self, kind, cls, phase, lo, hi, *, cell=-1, stage=-1, mb=-1, name=""):
        lo = np.asarray(lo, np.int64).ravel()
        self._pending.append((lo, (name, kind, cell, stage, mb, phase, cls, hi)))

    @property
    def parts(self) -> list[dict]:
        """Column dicts (``task``, ``kind``, ..., ``lo``, ``hi``; one row per task)."""
        if self._pending:
            self._parts.append(self._columns(self._pending))
            self._pending = []
        return self._parts

    def _columns(self, pending: list[tuple]) -> dict:
        n = np.array([lo.shape[0] for lo, _ in pending], np.int64)
        start = np.cumsum(n) - n
        total = int(n.sum())
        out = {}
        for j, (key, dtype) in enumerate((*self._LABELS, ("hi", np.int64))):
            col = np.empty(total, dtype)
            sc, sv, ar, av = [], [], [], []  # scalar / array entries: index, value
            for i, (_, v) in enumerate(pending):
                x = v[j]
                if isinstance(x, self._SCALARS):
                    sc.append(i)
                    sv.append(x)
                else:
                    a = np.asarray(x, dtype)
                    ar.append(i)
                    av.append(a if a.shape == (n[i],) else np.broadcast_to(a, (int(n[i]),)))
            if sc:
                k = np.asarray(sc, np.int64)
                col[_ranges(start[k], start[k] + n[k])] = np.repeat(np.array(sv, dtype), n[k])
            if ar:
                k = np.asarray(ar, np.int64)
                col[_ranges(start[k], start[k] + n[k])] = np.concatenate(av)
            if key == "hi":
                out["lo"] = np.concatenate([lo for lo, _ in pending])
            out[key] = col
        return out

    def flow_labels(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Per flow id ``0..n-1``: whether it is compute (device work of a compute or optimizer
        task) and its task's class (``""`` for flows of no task: barriers)."""
        compute = np.zeros(n, bool)
        cls = np.full(n, "", dtype=object)
        for p in self.parts:
            lo, hi = p["lo"], p["hi"]
            keep = hi > lo
            if not keep.any():
                continue
            ids = _ranges(lo[keep], hi[keep])
            rep = np.repeat(np.arange(lo.shape[0])[keep], (hi - lo)[keep])
            compute[ids] = np.isin(p["kind"][rep], ("compute", "optimizer"))
            cls[ids] = p["class"][rep]
        return compute, cls

    def frame(self, sim: SimResult) -> pd.DataFrame:
        if not self.parts:
            return pd.DataFrame(columns=list(TIMELINE_COLUMNS))
        cols = {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}
        lo, hi = cols.pop("lo"), cols.pop("hi")
        keep = hi > lo
        cols = {k: v[keep] for k, v in cols.items()}
        lo, hi = lo[keep], hi[keep]
        if lo.size == 0:  # no task owns a flow (metadata-only or barrier-only traces)
            return pd.DataFrame(columns=list(TIMELINE_COLUMNS))
        # starts: min over the range; finishes: max over the range (ranges are contiguous)
        order = np.argsort(lo, kind="stable")
        st = np.empty(lo.shape[0])
        fi = np.empty(lo.shape[0])
        flat_ids = _ranges(lo[order], hi[order])
        cuts = np.concatenate([[0], np.cumsum(hi[order] - lo[order])[:-1]])
        st[order] = np.minimum.reduceat(sim.start[flat_ids], cuts)
        fi[order] = np.maximum.reduceat(sim.finish[flat_ids], cuts)
        cols["start_s"] = st
        cols["finish_s"] = fi
        df = pd.DataFrame(cols)
        for c in ("cell", "stage", "micro_batch"):
            df[c] = df[c].astype(np.int64)
        return df[list(TIMELINE_COLUMNS)].sort_values(["start_s", "cell"], kind="stable")


_ranges = ranges


def _union_length(start: np.ndarray, finish: np.ndarray) -> float:
    """Total length of the union of intervals ``[start, finish]``."""
    keep = finish > start
    s, f = start[keep], finish[keep]
    if s.size == 0:
        return 0.0
    order = np.argsort(s, kind="stable")
    s, f = s[order], f[order]
    reach = np.maximum.accumulate(f)
    new = np.r_[True, s[1:] > reach[:-1]]
    g_start = s[new]
    g_end = np.maximum.reduceat(f, np.flatnonzero(new))
    return float((g_end - g_start).sum())


def critical_path(sim: SimResult, dep_ptr: np.ndarray, deps: np.ndarray, prefer=None) -> np.ndarray:
    """Flow ids of a critical path of a simulation, first flow first.

    From the flow that finishes last, step to the dependency that finished last (the one the
    flow waited for: a flow starts when its last dependency finishes); among dependencies that
    finish together (within 1e-12 relative), the first one marked in ``prefer`` (a boolean per
    flow), else the smallest id. Consecutive flows touch (each starts at its predecessor's
    finish) and the first starts at the release time, so their durations sum to the makespan.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> sim = SimpleNamespace(start=np.array([0.0, 0.0, 2.0]), finish=np.array([2.0, 1.0, 5.0]))
    >>> critical_path(sim, np.array([0, 0, 0, 2]), np.array([0, 1])).tolist()
    [0, 2]
    """
    n = sim.finish.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    fin = np.asarray(sim.finish)
    tol = 1e-12 * max(1.0, float(fin.max()))
    f = int(np.argmax(fin))
    path = [f]
    while dep_ptr[f + 1] > dep_ptr[f]:
        ds = deps[dep_ptr[f] : dep_ptr[f + 1]]
        fd = fin[ds]
        cand = np.sort(ds[fd >= fd.max() - tol])
        if prefer is not None and cand.size > 1 and prefer[cand].any():
            cand = cand[prefer[cand]]
        f = int(cand[0])
        path.append(f)
    return np.asarray(path[::-1], np.int64)


def _critical_comm(sim: SimResult, fb: FlowBuilder, tasks: _Tasks) -> tuple[float, dict, dict]:
    """Communication on the critical path: seconds in all, seconds per class, and facts."""
    a = fb.arrays()
    n = sim.finish.shape[0]
    compute, cls = tasks.flow_labels(n)
    path = critical_path(sim, a["dep_ptr"], a["deps"], prefer=compute)
    dur = np.asarray(sim.finish)[path] - np.asarray(sim.start)[path]
    is_comp = compute[path]
    comm_ids, comm_dur = path[~is_comp], dur[~is_comp]
    by_class: dict[str, float] = {}
    # flows shared by classes (intra-server blocking collectives): split pro rata
    names = sorted({c for _, parts in tasks.splits for c in parts})
    if names:
        s_ids = np.concatenate([ids for ids, _ in tasks.splits])
        share = np.zeros((s_ids.size, len(names)))
        row = 0
        for ids, parts in tasks.splits:
            for c, x in parts.items():
                share[row : row + ids.size, names.index(c)] = x
            row += ids.size
        order = np.argsort(s_ids)
        s_ids, share = s_ids[order], share[order]
    for f, t in zip(comm_ids.tolist(), comm_dur.tolist(), strict=True):
        if t <= 0:
            continue
        if names:
            k = int(np.searchsorted(s_ids, f))
            if k < s_ids.size and s_ids[k] == f and share[k].sum() > 0:
                for c, x in zip(names, share[k] / share[k].sum(), strict=True):
                    if x > 0:
                        by_class[c] = by_class.get(c, 0.0) + t * float(x)
                continue
        c = str(cls[f]) or "barrier"
        by_class[c] = by_class.get(c, 0.0) + t
    facts = {
        "critical_path_flows": int(path.size),
        "critical_path_compute_s": float(dur[is_comp].sum()),
    }
    return float(comm_dur.sum()), by_class, facts


# ------------------------------------------------------------------------------------------------
# Plan-derived workloads
# ------------------------------------------------------------------------------------------------


def _prefetched(d: Demand) -> bool:
    """A sharded parameter all-gather of a forward or backward pass (FSDP, ZeRO-3): it runs on its
    own stream one slot ahead of the compute that needs it (:meth:`_PipelineModel._prefetch`),
    neither joining cells nor waiting behind a cell's blocking collectives."""
    return d.op == "all-gather" and d.cls == "dp" and d.phase in ("forward", "backward")


def _blocking(d: Demand) -> bool:
    if d.op == "send" or _prefetched(d):
        return False
    if d.phase == "forward" or d.op == "all-to-all":
        return True
    return d.cls not in ("dp", "embedding")


class _PipelineModel:
    aggregate = True  # simulate identical flows as classes (simulate_iteration's switch)
    reduction = True  # simulate through the symmetry quotient (simulate_iteration's switch)

    def __init__(
        self,
        w: Workload,
        net: Network,
        gpu,
        bucket_bytes,
        algorithm,
        mode,
        schedule=None,
        max_buckets=None,
    ):
        self.w, self.net, self.algorithm, self.mode = w, net, algorithm, mode
        # the work estimate (flowsim.work) builds without a network: no rail hop then
        self._rail_routing = bool(net is not None and net.rail_routing)
        self.max_buckets = max_buckets
        self.capped = False  # some channel has fewer buckets than bucket_bytes asks
        info, conv = w.info, w.conventions
        flops = info.get("forward_flops_per_microbatch_per_gpu")
        if not flops:
            raise InputError(
                "workload",
                w.name or "unnamed",
                "a plan-derived Workload (info with forward_flops_per_microbatch_per_gpu) or an "
                "imported task graph",
            )
        self.p = p = len(flops)
        self.m = m = int(info.get("micro_batches", 1))
        self.v = v = int(conv.get("vpp", 1) or 1)
        if p == 1:
            self.v = v = 1
        mem = info.get("forward_memory_bytes_per_microbatch_per_gpu") or None
        t_f = np.asarray(forward_time(np.asarray(flops, float), mem, gpu)).reshape(-1)
        mult = 3.0 if conv.get("recompute") == "full" else 2.0
        self.t_f, self.t_b = t_f / v, mult * t_f / v
        self.bucket_bytes = bucket_bytes
        self._stages_and_cells()
        params = info.get("parameters_per_gpu_per_stage")
        if not params:
            gb = float(conv.get("grad_reduce_bytes", 2) or 2)
            params = [0.0] * p
            for d in w.demands:
                if d.cls == "dp" and d.phase == "backward" and d.op != "all-to-all":
                    params[d.stage or 0] += d.size * d.count / gb
        self.t_opt = np.asarray(optimizer_time(np.asarray(params, float), gpu)).reshape(-1)
        if schedule in ("1f1b", "eager-1f1b") and v > 1:
            raise InputError("schedule", schedule, "interleaved for a plan with vpp > 1")
        self.eager = eager = schedule == "eager-1f1b"
        self.orders = [pipeline_order(p, m, i, v, eager=eager) for i in range(p)]
        self.n_slots = 2 * m * v
        self._classify()
        self._iso_cache: dict = {}
        self.isolated: dict | None = None  # a cache shared across models (simulate_iteration)
        self._same_rail: dict = {}  # family -> merged rows that are one flow per rail i -> i

    # -------------------------------------------------------------- structure
    def _stages_and_cells(self):
        w = self.w
        R = w.gpus
        stage = np.full(R, -1, np.int64)
        # the source of a send and the members of a blocking collective are on the demand's
        # stage; other families (e.g. the tied-embedding group of the first and last stage) only
        # fill ranks left unknown
        later = []
        for d in w.demands:
            if d.stage is None:
                continue
            if d.op == "send":
                stage[d.groups[:, 0]] = d.stage
            elif _blocking(d):
                stage[d.groups.ravel()] = d.stage
            else:
                later.append(d)
        for d in later:
            r = d.groups.ravel()
            stage[r[stage[r] < 0]] = d.stage
        if self.p == 1:
            stage[stage < 0] = 0
        if np.any(stage < 0):
            r = int(np.flatnonzero(stage < 0)[0])
            raise InputError("workload.demands", f"rank {r} in no stage", "stages for all ranks")
        a, b = [np.arange(R)], [np.arange(R)]
        for d in w.demands:
            if _blocking(d) and d.group_size > 1 and d.count > 0:
                g = d.groups
                a.append(np.repeat(g[:, 0], g.shape[1] - 1))
                b.append(g[:, 1:].ravel())
        a, b = np.concatenate(a), np.concatenate(b)
        adj = sp.csr_matrix((np.ones(a.shape[0]), (a, b)), shape=(R, R))
        _, lab = csgraph.connected_components(adj, directed=False)
        # relabel cells by their smallest rank
        first = np.full(lab.max() + 1, R, np.int64)
        np.minimum.at(first, lab, np.arange(R))
        rank_order = np.argsort(first, kind="stable")
        relabel = np.empty_like(rank_order)
        relabel[rank_order] = np.arange(rank_order.shape[0])
        cell = relabel[lab]
        self.cell_of = cell
        self.n_cells = C = int(cell.max()) + 1
        cst = np.full(C, -1, np.int64)
        cst[cell] = stage
        if np.any(cst[cell] != stage):
            raise InputError(
                "workload.demands", "a blocking collective across stages", "groups in one stage"
            )
        self.cell_stage = cst
        self.rank_stage = stage

    def _classify(self):
        w = self.w
        self.blocking, self.sync, self.after_opt, self.sends = [], [], [], {}
        self.prefetch = []
        for idx, d in enumerate(w.demands):
            if d.group_size <= 1 or d.count == 0 or d.n_groups == 0:
                continue
            if _prefetched(d):
                self.prefetch.append(idx)
            elif d.op == "send":
                a = int(self.rank_stage[d.groups[0, 0]])
                z = int(self.rank_stage[d.groups[0, 1]])
                self.sends.setdefault((d.phase, a, z), []).append(idx)
            elif _blocking(d):
                self.blocking.append(idx)
            elif d.phase == "optimizer":
                self.after_opt.append(idx)
            else:
                self.sync.append(idx)
        # channels: families that are rings of one collective (same op, class, phase, stage,
        # count and member sets, e.g. a design's rings) share its buckets
        self.channels = _channel_groups(w, self.sync)
        # pieces of the last backward task per stage: the largest bucket count of its stage
        self.n_buckets = {}
        pieces = np.ones(self.p, np.int64)
        for members in self.channels:
            total = sum(w.demands[i].size * w.demands[i].count for i in members)
            nb = max(1, ceil(total / self.bucket_bytes))
            if self.max_buckets is not None and nb > self.max_buckets:
                nb = self.max_buckets  # coarsened (simulate_iteration's max_buckets)
                self.capped = True
            for idx in members:
                self.n_buckets[idx] = nb
                st = np.unique(self.cell_stage[self.cell_of[w.demands[idx].groups.ravel()]])
                pieces[st] = np.maximum(pieces[st], nb)
        self.pieces = pieces

    # -------------------------------------------------------------- blocking durations
    def _isolated(self, idx: int, r: int, reps: int) -> float:
        """Seconds ``reps`` collectives of row ``r`` of demand ``idx`` (inside one server) take
        alone; cached by the members' local GPU indices."""
        gps = self.w.gpus_per_server
        local = demand_rows(self.w, idx)[r] % gps
        key = (idx, reps, tuple(local.tolist()))
        cache = self._iso_cache
        if self.isolated is not None:  # shared by the models of one workload (simulate_iteration)
            net, cache = self.net, self.isolated
            key = (id(self.w), self.algorithm, self.mode, self.aggregate, self.reduction,
                   net.gpus_per_server, net.intra_bandwidth, net.intra_latency, net.rail_routing,
                   *key)  # fmt: skip
        if key not in cache:
            cf = expand_demand(
                self.w, idx, algorithm=self.algorithm, mode=self.mode, rows=[r], repeats=reps
            )
            if cf.n_flows == 0:
                cache[key] = 0.0
            else:
                # the same group on server 0: only the local indices matter inside a server
                cf = replace(cf, src=cf.src % gps, dst=cf.dst % gps)
                fb = FlowBuilder(self.net)
                cf.add_to(fb)
                sim = simulate_builder(
                    fb, aggregate=self.aggregate, record_series=False, reduction=self.reduction
                )
                cache[key] = sim.makespan
        return cache[key]

    # -------------------------------------------------------------- build
    def build(self, instant: frozenset):
        w, net, m, v, p, S = self.w, self.net, self.m, self.v, self.p, self.n_slots
        fb, tasks = FlowBuilder(net), _Tasks()
        C = self.n_cells
        dev = fb.device_link(fb.new_devices(C))
        gps = w.gpus_per_server
        merge = []  # merge factors of network flows
        Cst = np.full((C, S), -1, np.int64)  # first flow of each compute task
        Cen = np.full((C, S), -1, np.int64)  # last flow of each compute task
        K = np.full((C, S), -1, np.int64)
        Pmax = int(self.pieces.max())
        Pid = np.full((C, Pmax), -1, np.int64)
        slot_of = np.zeros((p, 2, v, m), np.int64)
        for i in range(p):
            o = self.orders[i]
            slot_of[i, o[:, 0], o[:, 2], o[:, 1]] = np.arange(S)
        cross_rows: list = []
        # ---- compute tasks, stage by stage (all cells of a stage at once)
        for i in range(p):
            cs = np.flatnonzero(self.cell_stage == i)
            if cs.size == 0:
                continue
            o = self.orders[i]
            dur = np.where(o[:, 0] == 0, self.t_f[i], self.t_b[i])
            nc, P = cs.size, int(self.pieces[i])
            ids = fb.add_links(np.repeat(dev[cs], S - 1), np.tile(dur[:-1], nc)).reshape(nc, S - 1)
            Cst[cs, : S - 1] = ids
            Cen[cs, : S - 1] = ids
            pid = fb.add_links(np.repeat(dev[cs], P), np.full(nc * P, dur[-1] / P)).reshape(nc, P)
            Pid[cs, :P] = pid
            Cst[cs, S - 1] = pid[:, 0]
            Cen[cs, S - 1] = pid[:, -1]
            if P > 1:
                fb.add_deps(pid[:, 1:], pid[:, :-1])
            ph = np.where(o[:, 0] == 0, "forward", "backward")
            for j in range(S):
                tasks.add(
                    "compute",
                    "compute",
                    ph[j],
                    Cst[cs, j],
                    Cen[cs, j] + 1,
                    cell=cs,
                    stage=i,
                    mb=o[j, 1],
                    name=f"{ph[j][0].upper()}{o[j, 1]}c{o[j, 2]}",
                )
            # ---- blocking comm per (cell, slot): isolated durations or real flows. Each rank
            # runs its collectives one after the other; groups of other ranks run meanwhile
            # (the TP groups of a cell an all-to-all or a sharded group joins): a cell's task
            # lasts as long as its busiest rank's
            ranks = np.flatnonzero(self.rank_stage == i)
            local = np.full(w.gpus, -1, np.int64)
            local[ranks] = np.arange(ranks.size)
            rdur = np.zeros((ranks.size, S))
            rcls: dict[str, np.ndarray] = {}  # the part of rdur each class takes
            is_last = np.zeros(S, bool)
            for ph_code in (0, 1):
                sl = np.flatnonzero(o[:, 0] == ph_code)
                is_last[sl[-1]] = True
            labels = set()
            for idx in self.blocking:
                d = w.demands[idx]
                ph_code = _PHASE_NAMES.index(d.phase) if d.phase in _PHASE_NAMES else 1
                rows = demand_rows(w, idx)
                rcell = self.cell_of[rows[:, 0]]
                base, rem = divmod(d.count, m * v)
                sl = np.flatnonzero(o[:, 0] == ph_code)
                # this stage's rows, by cell then row (the order flows and sums are made in)
                mine = np.flatnonzero(self.cell_stage[rcell] == i)
                if mine.size == 0:
                    continue
                labels.add(d.cls)
                mine = mine[np.argsort(rcell[mine], kind="stable")]
                srv = rows[mine] // gps
                intra = np.all(srv == srv[:, :1], axis=1)
                for r in mine[~intra].tolist():
                    cross_rows.append((idx, r, int(rcell[r]), sl, base, rem))
                if d.cls in instant or not intra.any():
                    continue
                mine = mine[intra]
                # isolated durations per pattern of local GPU indices (_isolated's cache key)
                _, first, pat = np.unique(
                    rows[mine] % gps, axis=0, return_index=True, return_inverse=True
                )
                reg = np.array(
                    [self._isolated(idx, int(mine[k]), base) if base else 0.0 for k in first]
                )
                last = np.array(
                    [
                        self._isolated(idx, int(mine[k]), base + rem) if base + rem else 0.0
                        for k in first
                    ]
                )
                d_reg, d_last = reg[pat.reshape(-1)], last[pat.reshape(-1)]
                # row by row, member by member: the sums of the per-row loop, in its order
                # (each row adds d_reg on its members' slots, then the last slot's difference
                # on its first member)
                lr = local[rows[mine]]  # (rows, members)
                n_r, k_m, n_s = lr.shape[0], lr.shape[1], sl.size
                at_r = np.concatenate([np.repeat(lr, n_s, axis=1), lr[:, :1]], axis=1)
                at_s = np.concatenate([np.tile(sl, (n_r, k_m)), np.full((n_r, 1), sl[-1])], axis=1)
                val = np.concatenate(
                    [np.repeat(d_reg[:, None], k_m * n_s, axis=1), (d_last - d_reg)[:, None]],
                    axis=1,
                )
                rc = rcls.setdefault(d.cls, np.zeros((ranks.size, S)))
                for tab in (rdur, rc):
                    np.add.at(tab, (at_r.ravel(), at_s.ravel()), val.ravel())
            # the busiest rank of each cell (first of equals) and its per-class parts
            rc_cell = self.cell_of[ranks]
            order = np.lexsort((np.arange(ranks.size), rc_cell))
            starts = np.searchsorted(rc_cell[order], cs)
            busiest = np.zeros((nc, S), np.int64)
            for ci in range(nc):
                mine = order[starts[ci] : (starts[ci + 1] if ci + 1 < nc else order.size)]
                busiest[ci] = mine[np.argmax(rdur[mine], axis=0)]
            kdur = np.take_along_axis(rdur, busiest, axis=0)
            kcls = {c: np.take_along_axis(x, busiest, axis=0) for c, x in rcls.items()}
            cls_label = "+".join(sorted(labels)) or "none"
            kid = fb.add_links(np.repeat(dev[cs], S), kdur.ravel()).reshape(nc, S)
            K[cs] = kid
            if kcls:
                tasks.splits.append((kid.ravel(), {c: x.ravel() for c, x in kcls.items()}))
            fb.add_deps(kid, Cen[cs])
            fb.add_deps(Cst[cs, 1:], kid[:, :-1])
            for j in range(S):
                tasks.add(
                    "comm",
                    cls_label,
                    ph[j],
                    kid[:, j],
                    kid[:, j] + 1,
                    cell=cs,
                    stage=i,
                    mb=o[j, 1],
                    name=f"blocking {cls_label}",
                )
        # ---- blocking groups that span servers: real flows between compute and its comm task
        for idx, r, c, sl, base, rem in cross_rows:
            d = w.demands[idx]
            for k, j in enumerate(sl):
                reps = base + (rem if k == sl.size - 1 else 0)
                if reps == 0:
                    continue
                cf = expand_demand(
                    w, idx, algorithm=self.algorithm, mode=self.mode, rows=[r], repeats=reps,
                    network=net,
                )  # fmt: skip
                ids = cf.add_to(fb, after=[Cen[c, j]], instantaneous=d.cls in instant)
                fb.add_deps(np.full(ids.size, K[c, j]), ids)
                i = int(self.cell_stage[c])
                tasks.add(
                    "comm",
                    d.cls,
                    d.phase,
                    ids[0],
                    ids[-1] + 1,
                    cell=c,
                    stage=i,
                    mb=int(self.orders[i][j, 1]),
                    name=d.name,
                )
        # ---- parameter all-gathers (FSDP, ZeRO-3), prefetched on their own stream
        for idx in self.prefetch:
            self._prefetch(fb, tasks, idx, instant, Cst, K)
        # ---- pipeline: sends between chunks, and the turn at the last chunk
        for b in range(p * v - 1):
            a, z = b % p, (b + 1) % p
            ca, cz = b // p, (b + 1) // p
            for phase, s_st, s_ch, d_st, d_ch, s_ph, d_ph in (
                ("forward", a, ca, z, cz, 0, 0),
                ("backward", z, cz, a, ca, 1, 1),
            ):
                src_slot = slot_of[s_st, s_ph, s_ch]  # (m,)
                dst_slot = slot_of[d_st, d_ph, d_ch]
                if s_st == d_st:
                    cs = np.flatnonzero(self.cell_stage == s_st)
                    fb.add_deps(Cst[cs][:, dst_slot], K[cs][:, src_slot])
                    continue
                idxs = self.sends.get((phase, s_st, d_st))
                if not idxs:
                    raise InputError(
                        "workload.demands",
                        f"no pipeline send {phase} {s_st}->{d_st}",
                        "pp send demands for every stage boundary",
                    )
                for idx in idxs:
                    d = w.demands[idx]
                    src, dst = d.groups[:, 0], d.groups[:, 1]
                    u_src, u_dst, u_mult, u_same = _merge_pairs(
                        src, dst, self.cell_of, gps, self._rail_routing
                    )
                    merge.append(u_mult[(u_src // gps) != (u_dst // gps)])
                    U = u_src.size
                    ids = fb.add_ranks(
                        np.tile(u_src, m),
                        np.tile(u_dst, m),
                        np.tile(u_mult * d.size, m),
                        instantaneous="pp" in instant or d.cls in instant,
                        same_rail=np.tile(u_same, m),
                    ).reshape(m, U)
                    sc, dc = self.cell_of[u_src], self.cell_of[u_dst]
                    fb.add_deps(ids, K[sc[None, :], src_slot[:, None]])
                    fb.add_deps(Cst[dc[None, :], dst_slot[:, None]], ids)
                    if self.eager and m > 1:  # one stream per pair: micro-batches in order
                        fb.add_deps(ids[1:], ids[:-1])
                    tasks.add(
                        "send",
                        d.cls,
                        phase,
                        ids.ravel(),
                        ids.ravel() + 1,
                        cell=np.tile(sc, m),
                        stage=s_st,
                        mb=np.repeat(np.arange(m), U),
                        name=d.name,
                    )
        last = np.flatnonzero(self.cell_stage == p - 1)
        turn_f = slot_of[p - 1, 0, v - 1]
        turn_b = slot_of[p - 1, 1, v - 1]
        fb.add_deps(Cst[last][:, turn_b], K[last][:, turn_f])
        # ---- gradient sync buckets (channels of one collective: bucket k of every channel
        # waits for bucket k-1 of all of them, one NCCL stream per group)
        opt_after: list[tuple[np.ndarray, np.ndarray]] = []
        for members in self.channels:
            parts = []
            for idx in members:
                cells, Q, R, ident = self._sync(fb, tasks, idx, instant, Pid, merge, start=None)
                opt_after.append((cells, R[:, -1]))
                parts.append((Q, R, ident))
            if len(members) > 1:
                _couple_channels(fb, parts)
        # ---- optimizer
        opt = fb.add_links(dev, self.t_opt[self.cell_stage])
        fb.add_deps(opt, K[:, S - 1])
        for cells, R in opt_after:
            fb.add_deps(opt[cells.ravel()], np.repeat(R, cells.shape[1]))
        tasks.add(
            "optimizer",
            "compute",
            "optimizer",
            opt,
            opt + 1,
            cell=np.arange(C),
            stage=self.cell_stage,
            name="optimizer step",
        )
        for idx in self.after_opt:
            self._sync(fb, tasks, idx, instant, Pid, merge, start=opt)
        return fb, tasks, merge

    def _prefetch_flows(self, idx):
        """``(stage, slots, flows)`` of a prefetched family: the stage's slots of its phase in
        execution order and one slot's flows, all rows (``count`` gathers spread evenly over
        the slots: with ``vpp`` chunks a slot gathers its chunk's share)."""
        w = self.w
        d = w.demands[idx]
        i = int(self.rank_stage[d.groups[0, 0]])
        o = self.orders[i]
        sl = np.flatnonzero(o[:, 0] == (0 if d.phase == "forward" else 1))
        cf = expand_demand(
            w, idx, algorithm=self.algorithm, mode=self.mode, repeats=1,
            size=d.size * d.count / sl.size, network=self.net,
        )  # fmt: skip
        return i, sl, cf

    def _prefetch(self, fb, tasks, idx, instant, Cst, K):
        """A sharded parameter all-gather, one per slot of its phase, as FSDP runs it: on its own
        stream (slot ``k``'s gather after slot ``k - 1``'s), issued once slot ``j - 2`` of every
        member cell has ended (slot ``j - 1`` may run: one slot of prefetch, overlapping its
        compute), and slot ``j``'s compute in every member cell waits for it. Blocking
        collectives (TP) neither wait for it nor delay it."""
        w = self.w
        d = w.demands[idx]
        i, sl, cf = self._prefetch_flows(idx)
        G, n = d.n_groups, sl.size
        tot = cf.n_flows
        if tot == 0:
            return
        nt = tot // G
        lens = np.tile(np.diff(cf.dep_ptr), n)
        ptr = np.zeros(n * tot + 1, np.int64)
        np.cumsum(lens, out=ptr[1:])
        deps = (cf.deps[None, :] + (np.arange(n) * tot)[:, None]).ravel() + fb.n
        ids = fb.add_ranks(
            np.tile(cf.src, n), np.tile(cf.dst, n), np.tile(cf.size, n), after=deps,
            after_ptr=ptr, instantaneous=d.cls in instant,
        ).reshape(n, G, nt)  # fmt: skip
        Q = fb.add_links(fb.net.null_link, np.zeros(n * G)).reshape(n, G)
        R = fb.add_links(fb.net.null_link, np.zeros(n * G)).reshape(n, G)
        free = np.diff(cf.dep_ptr)[:nt] == 0
        fb.add_deps(ids[:, :, free], np.broadcast_to(Q[:, :, None], (n, G, int(free.sum()))))
        fb.add_deps(np.broadcast_to(R[:, :, None], ids.shape), ids)
        fb.add_deps(Q[1:], R[:-1])
        cells = self.cell_of[demand_rows(w, idx)]  # (G, g)
        g = cells.shape[1]
        gate = np.flatnonzero(sl >= 2)
        fb.add_deps(
            np.broadcast_to(Q[gate][:, :, None], (gate.size, G, g)),
            K[cells[None, :, :], (sl[gate] - 2)[:, None, None]],
        )
        fb.add_deps(
            Cst[cells[None, :, :], sl[:, None, None]], np.broadcast_to(R[:, :, None], (n, G, g))
        )
        tasks.add(
            "sync",
            d.cls,
            d.phase,
            ids[:, :, 0].ravel(),
            ids[:, :, -1].ravel() + 1,
            cell=np.tile(cells[:, 0], n),
            stage=i,
            mb=np.repeat(self.orders[i][sl, 1], G),
            name=d.name,
        )

    def _sync_template(self, idx, bucketed):
        """Merged rows of a bucketed family and its per-bucket flow template: ``(urows,
        ucells, mult, distinct, nb, template, ends)`` (``distinct``: rows whose members sit on
        distinct servers, the merged ones; ``ends``: the rows the template's positions name)."""
        w, gps = self.w, self.w.gpus_per_server
        d = w.demands[idx]
        rows = demand_rows(w, idx)
        cells = self.cell_of[rows]
        servers = rows // gps
        distinct = np.all(np.diff(np.sort(servers, axis=1), axis=1) != 0, axis=1)
        key = np.concatenate([servers, cells], axis=1)
        key[~distinct, 0] = -1 - np.flatnonzero(~distinct)  # never merge these
        same = np.zeros(rows.shape[0], bool)
        if self._rail_routing:
            # rows of one GPU index each, a family covering every rail evenly, merge into one
            # same-rail row; other rows only with rows of the same GPU indices (same rails)
            loc = rows % gps
            one = np.all(loc == loc[:, :1], axis=1)
            same = _full_rail_families(key, loc[:, 0], np.where(one, loc[:, 0], -1), gps)
            key = np.concatenate([key, np.where(same[:, None], -1, loc)], axis=1)
        if key.shape[0] == 1:  # one group (a data-parallel ring of every GPU): nothing to merge
            first, mult = np.zeros(1, np.int64), np.ones(1, np.int64)
        else:
            _, first, mult = np.unique(key, axis=0, return_index=True, return_counts=True)
        urows, ucells = rows[first], cells[first]
        self._same_rail[idx] = same[first]
        total = d.size * d.count
        nb = self.n_buckets.get(idx, 1) if bucketed else 1
        k = members_per_server(urows, gps) if self.algorithm == "hierarchical" else None
        if d.schedule is not None:  # a schedule the design picked (Demand.schedule)
            t = schedule_template(d.schedule, total / nb)
        else:
            t = flow_template(
                d.op,
                d.group_size,
                total / nb,
                self.algorithm,
                mode=self.mode if d.op != "all-to-all" else "fluid",
                members_per_server=k,
                peer_bytes=d.peer_bytes,
            )
        ends = urows
        if self.mode == "fluid" and d.schedule is None and self.net is not None:  # INA (ina)
            x = ina_template(self.net, d, urows, total / nb, family_rows=rows, host=t)
            if x is not None:
                t, ends = x
        return urows, ucells, mult, distinct[first], nb, t, ends

    def n_flows(self) -> int:
        """Flows :meth:`build` creates, counted from the plan's structure without building them
        (compute pieces, blocking tasks, cross-server collectives, sends, buckets, barriers)."""
        w, m, v, p, S, C = self.w, self.m, self.v, self.p, self.n_slots, self.n_cells
        gps = w.gpus_per_server
        n = C * S + C  # blocking tasks, optimizer steps
        for i in range(p):
            nc = int(np.count_nonzero(self.cell_stage == i))
            n += nc * (S - 1 + int(self.pieces[i]))
        for idx in self.blocking:
            d = w.demands[idx]
            rows = demand_rows(w, idx)
            srv = rows // gps
            cross = int(np.count_nonzero(np.any(srv != srv[:, :1], axis=1)))
            if cross == 0:
                continue
            base, rem = divmod(d.count, m * v)
            per_phase = m * v  # slots of the demand's phase
            sizes = {}
            for reps, k in ((base, per_phase - 1), (base + rem, 1)):
                if reps == 0 or k == 0:
                    continue
                if reps not in sizes:
                    r0 = int(np.flatnonzero(np.any(srv != srv[:, :1], axis=1))[0])
                    cf = expand_demand(
                        w, idx, algorithm=self.algorithm, mode=self.mode, rows=[r0],
                        repeats=reps, network=self.net,
                    )  # fmt: skip
                    sizes[reps] = cf.n_flows
                n += cross * k * sizes[reps]
        for idx in self.prefetch:
            _, sl, cf = self._prefetch_flows(idx)
            if cf.n_flows:
                n += sl.size * (cf.n_flows + 2 * w.demands[idx].n_groups)
        for b in range(p * v - 1):  # the pipeline boundaries build() visits
            a, z = b % p, (b + 1) % p
            for key in (("forward", a, z), ("backward", z, a)):
                if a == z:
                    continue
                for idx in self.sends.get(key, ()):
                    d = w.demands[idx]
                    u_src, _, _, _ = _merge_pairs(
                        d.groups[:, 0], d.groups[:, 1], self.cell_of, gps, self._rail_routing
                    )
                    n += m * u_src.size
        sorted_rows = {}
        for idx in self.sync + self.after_opt:
            urows, _, _, _, nb, t, _ = self._sync_template(idx, idx in self.n_buckets)
            n += urows.shape[0] * nb * (t.n_flows + 2)
            sorted_rows[idx] = np.sort(urows, axis=1)
        for members in self.channels:  # _couple_channels: one barrier per member set and bucket
            nb = int(self.n_buckets.get(members[0], 1))
            if len(members) > 1 and nb > 1:
                rows = np.concatenate([sorted_rows[i] for i in members])
                n += np.unique(rows, axis=0).shape[0] * (nb - 1)
        return int(n)

    def _sync(self, fb, tasks, idx, instant, Pid, merge, start):
        """Bucketed collective of one family; returns the member cells per merged row, the
        start and end barriers ``(rows, buckets)`` and each merged row's members (sorted)."""
        w = self.w
        d = w.demands[idx]
        urows, ucells, mult, distinct_first, nb, t, ends = self._sync_template(idx, start is None)
        merge.append(mult[distinct_first])
        U = urows.shape[0]
        nt = t.n_flows
        blocks = U * nb
        src = np.repeat(ends[:, t.src], nb, axis=0).ravel()
        dst = np.repeat(ends[:, t.dst], nb, axis=0).ravel()
        size = (np.repeat(mult, nb)[:, None] * t.bytes[None, :]).ravel()
        off = np.arange(blocks) * nt
        lens = np.tile(np.diff(t.dep_ptr), blocks)
        ptr = np.zeros(blocks * nt + 1, np.int64)
        np.cumsum(lens, out=ptr[1:])
        base = fb.n
        deps = (t.deps[None, :] + off[:, None]).ravel() + base
        inst = d.cls in instant
        sr = np.repeat(self._same_rail.get(idx, np.zeros(U, bool)), nb * nt)
        ids = fb.add_ranks(
            src, dst, size, after=deps, after_ptr=ptr, instantaneous=inst, same_rail=sr
        )
        ids = ids.reshape(blocks, nt)
        Q = fb.add_links(fb.net.null_link, np.zeros(blocks)).reshape(U, nb)
        R = fb.add_links(fb.net.null_link, np.zeros(blocks)).reshape(U, nb)
        free = np.diff(t.dep_ptr) == 0
        fb.add_deps(ids[:, free], np.repeat(Q.ravel(), int(free.sum())).reshape(blocks, -1))
        fb.add_deps(np.repeat(R.ravel(), nt).reshape(blocks, nt), ids)
        if nb > 1:
            fb.add_deps(Q[:, 1:], R[:, :-1])
        g = d.group_size
        if start is None:
            st = self.cell_stage[ucells]  # (U, g)
            P = self.pieces[st]
            b = np.arange(nb)
            piece = np.ceil((b[None, None, :] + 1) * P[:, :, None] / nb).astype(np.int64) - 1
            if not w.conventions.get("overlap_grad_reduce", True):
                piece = np.broadcast_to(P[:, :, None] - 1, piece.shape)  # after the backward
            dep = Pid[ucells[:, :, None], piece]  # (U, g, nb)
            fb.add_deps(np.broadcast_to(Q[:, None, :], (U, g, nb)), dep)
        else:
            fb.add_deps(np.repeat(Q[:, :1], g, axis=1), start[ucells])
        tasks.add(
            "sync",
            d.cls,
            d.phase,
            ids[:, 0],
            ids[:, -1] + 1,
            cell=np.repeat(ucells[:, 0], nb),
            stage=np.repeat(self.cell_stage[ucells[:, 0]], nb),
            name=d.name,
        )
        return ucells, Q, R, np.sort(urows, axis=1)


def _channel_groups(w: Workload, idxs: list[int]) -> list[list[int]]:
    """Families of ``idxs`` grouped into the channels of one collective: equal op, class,
    phase, stage and count, and the same member set in every group (in any order)."""
    groups: dict[tuple, list[int]] = {}
    for idx in idxs:
        d = w.demands[idx]
        rows = np.sort(d.groups, axis=1)
        rows = rows[np.lexsort(rows.T[::-1])]
        key = (d.op, d.cls, d.phase, d.stage, d.count, rows.shape, rows.tobytes())
        groups.setdefault(key, []).append(idx)
    return list(groups.values())


def _couple_channels(fb: FlowBuilder, parts: list) -> None:
    """Bucket ``k + 1`` of a group in any channel starts after bucket ``k`` of the same group
    (same sorted members) has ended in every channel. ``parts``: ``(Q, R, members)`` per
    channel, ``Q``/``R`` the ``(rows, buckets)`` start/end barriers."""
    nb = parts[0][0].shape[1]
    if nb <= 1:
        return
    Q = np.concatenate([q for q, _, _ in parts])
    R = np.concatenate([r for _, r, _ in parts])
    members = np.concatenate([m for _, _, m in parts])
    _, ident = np.unique(members, axis=0, return_inverse=True)
    ident = ident.reshape(-1)
    n_id = int(ident.max()) + 1
    bar = fb.add_links(fb.net.null_link, np.zeros(n_id * (nb - 1))).reshape(n_id, nb - 1)
    fb.add_deps(bar[ident], R[:, :-1])
    fb.add_deps(Q[:, 1:], bar[ident])


def _merge_pairs(src, dst, cell_of, gps, rails=False):
    """Merge send rows with equal (source cell, source server, destination server) when the two
    servers differ; returns representative source/destination ranks, multiplicities and, with
    ``rails``, which merged rows are one flow per rail ``i -> i`` (``same_rail`` of
    :meth:`~topoopt.flowsim.network.FlowBuilder.add_ranks`; other rows merge only with rows of
    the same GPU indices, whose flows take the same rails)."""
    ss, ds = src // gps, dst // gps
    inter = ss != ds
    key = np.column_stack([cell_of[src], ss, ds, np.where(inter, -1, src)])
    if not rails:
        _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
        return src[first], dst[first], counts, np.zeros(first.size, bool)
    full = _full_rail_families(key, src % gps, dst % gps, gps)
    loc = np.where(full[:, None], -1, np.column_stack([src % gps, dst % gps]))
    _, first, counts = np.unique(
        np.column_stack([key, loc]), axis=0, return_index=True, return_counts=True
    )
    return src[first], dst[first], counts, full[first] & inter[first]


def _full_rail_families(key, src_loc, dst_loc, gps):
    """Rows whose family (equal ``key``) is one flow per rail ``i -> i`` for every ``i``, each
    rail the same number of times: the rows such a family merges into exactly."""
    _, gid = np.unique(key, axis=0, return_inverse=True)
    gid = gid.reshape(-1)
    k = int(gid.max()) + 1 if gid.size else 0
    same = np.bincount(gid, weights=src_loc != dst_loc, minlength=k) == 0
    per = np.zeros((k, gps), np.int64)
    np.add.at(per, (gid, src_loc), 1)
    even = np.all(per == per[:, :1], axis=1) & (per[:, 0] > 0)
    return (same & even)[gid]


# ------------------------------------------------------------------------------------------------
# Imported task graphs
# ------------------------------------------------------------------------------------------------


class _TaskGraphModel:
    def __init__(self, w: Workload, net: Network, algorithm: str, mode: str):
        self.w, self.net, self.algorithm, self.mode = w, net, algorithm, mode

    def build(self, instant: frozenset):
        w, net = self.w, self.net
        tg = w.taskgraph
        fb, tasks = FlowBuilder(net), _Tasks()
        T = tg.n_tasks
        ns = w.servers
        tail = np.full(T, -1, np.int64)
        head_lo = np.full(T, -1, np.int64)
        head_hi = np.full(T, -1, np.int64)
        kind = tg.kind
        server = np.maximum(tg.server, 0)
        # compute devices: one per server (TopoOpt task graphs) unless the graph names its own
        cdev = server if tg.device is None else np.maximum(np.asarray(tg.device, np.int64), 0)
        nd = ns if tg.device is None else int(cdev.max(initial=0)) + 1
        dev = fb.device_link(fb.new_devices(nd + ns))
        comp = np.flatnonzero(np.isin(kind, ("forward", "backward", "update")))
        ids = fb.add_links(dev[cdev[comp]], tg.runtime_s[comp])
        tail[comp] = ids
        tasks.add("compute", "compute", kind[comp], ids, ids + 1, cell=server[comp], name="task")
        cm = np.flatnonzero(kind == "comm")
        ids = fb.add_links(dev[nd + server[cm]], tg.runtime_s[cm])
        tail[cm] = ids
        tasks.add("comm", "intra", "comm", ids, ids + 1, cell=server[cm], name="comm")
        br = np.flatnonzero(kind == "barrier")
        ids = fb.add_links(np.full(br.size, net.null_link), np.zeros(br.size))
        tail[br] = ids
        tr = np.flatnonzero(kind == "transfer")
        if tr.size:
            dm = tg.demand[tr]
            src = np.array([w.demands[f].groups[r, 0] for f, r in dm.tolist()], np.int64)
            dst = np.array([w.demands[f].groups[r, 1] for f, r in dm.tolist()], np.int64)
            ids = fb.add_ranks(src, dst, tg.size_bytes[tr], instantaneous="mp" in instant)
            tail[tr] = ids
            tasks.add(
                "send",
                "mp",
                "transfer",
                ids,
                ids + 1,
                cell=src // w.gpus_per_server,
                name="transfer",
            )
        single = tail >= 0
        head_lo[single] = tail[single]
        head_hi[single] = tail[single] + 1
        ar = np.flatnonzero((kind == "all-reduce") | (kind == "collective"))
        heads: dict[int, np.ndarray] = {}  # all-reduce task -> its flows without internal deps
        for t in ar.tolist():
            f, r = tg.demand[t]
            if f < 0:  # a one-server all-reduce: no traffic
                tail[t] = head_lo[t] = fb.add_barrier([])
                head_hi[t] = head_lo[t] + 1
                continue
            d = w.demands[f]
            cf = expand_demand(
                w,
                int(f),
                algorithm=self.algorithm,
                mode=self.mode,
                rows=[int(r)],
                repeats=1,
                size=float(tg.size_bytes[t]),
                network=self.net,
            )
            ids = cf.add_to(fb, instantaneous=d.cls in instant)
            free = ids[np.diff(cf.dep_ptr) == 0]
            bar = fb.add_barrier(ids)
            tail[t] = bar
            # heads: flows without internal dependencies, contiguous from the first one
            head_lo[t], head_hi[t] = ids[0], ids[0] + 1
            heads[t] = free
            tasks.add("sync", d.cls, d.phase, ids[0], bar + 1, name=d.name)
        e = tg.edges
        if e.size:
            u, vv = e[:, 0], e[:, 1]
            is_ar = np.isin(vv, ar)
            fb.add_deps(head_lo[vv[~is_ar]], tail[u[~is_ar]])
            for uu, v1 in zip(u[is_ar].tolist(), vv[is_ar].tolist(), strict=True):
                h = heads.get(v1)
                if h is None:
                    fb.add_deps([head_lo[v1]], [tail[uu]])
                else:
                    fb.add_deps(h, np.full(h.size, tail[uu]))
        return fb, tasks, []


# ------------------------------------------------------------------------------------------------
# Entry point
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Classes:
    """A simulation per merged flow (:func:`topoopt.flowsim.network.simulate_builder_classes`),
    not yet expanded per builder flow; ``makespan`` and ``refills`` are the expanded ones."""

    sim: SimResult
    flows: FlowSet | SimpleNamespace  # only n_flows and flow_ptr are kept (not the paths)
    class_of: np.ndarray

    def __post_init__(self) -> None:
        lean = SimpleNamespace(n_flows=self.flows.n_flows, flow_ptr=self.flows.flow_ptr)
        object.__setattr__(self, "flows", lean)

    @property
    def makespan(self) -> float:
        return self.sim.makespan

    @property
    def refills(self) -> int:
        return self.sim.refills


def _classes(w: Workload) -> list[str]:
    present = {d.cls for d in w.demands if d.group_size > 1 and d.count > 0}
    return [c for c in CLASSES if c in present]


def _reduction_info(sim, asked, simulator, priority, split_allreduce) -> dict:
    """What ``info["reduction"]`` reports: the symmetry reduction's own record, or why off."""
    if not asked:
        return {"status": "off", "reason": "not asked (--no-reduction)"}
    if simulator is not None:
        return {"status": "off", "reason": "a custom simulator (time-varying fabric)"}
    if priority is not None or split_allreduce is not None:
        return {"status": "off", "reason": "priorities / split all-reduce (epoch engine)"}
    return dict(sim.reduction) if sim.reduction is not None else {"status": "off"}


ITERATION_ONLY = {"exposed_by_class": False, "record_series": False, "path_times": False}
"""Keyword arguments of :func:`simulate_iteration` for a caller that needs the iteration time
alone (``design``'s and ``cluster``'s simulations): no run per class made instantaneous, no
link-load series, no per-sub-flow times; the iteration time is the same."""


def reduction_status(it: IterationResult) -> str:
    """What a result document reports as ``reduction``: ``on`` (the iteration's simulation went
    through the symmetry quotient) or ``off: why`` (from ``info["reduction"]``, which
    :func:`simulate_iteration` fills).

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> reduction_status(R(info={"reduction": {"status": "on", "flow_classes": 3}}))
    'on'
    >>> reduction_status(R(info={"reduction": {"status": "off", "reason": "no flows"}}))
    'off: no flows'
    >>> reduction_status(R(info={}))
    'off'
    """
    info = it.info.get("reduction") or {"status": "off"}
    if info.get("status") == "on":
        return "on"
    return f"off: {info['reason']}" if info.get("reason") else "off"


def simulate_iteration(
    workload: Workload,
    fabric: Fabric,
    *,
    algorithm: str = "ring",
    mode: str = "fluid",
    routing: PathSet | None = None,
    gpu: RooflineParams | None = None,
    bucket_bytes: float = 25e6,
    intra_bandwidth: float | None = None,
    exposed_by_class: bool = True,
    record_series: bool = False,
    aggregate: bool = True,
    reduction: bool = False,
    max_refills: int | None = None,
    compute_s: float | None = None,
    schedule: str | None = None,
    simulator=None,
    priority: Sequence[str] | str | None = None,
    split_allreduce: float | None = None,
    max_buckets: int | None = None,
    max_flows: int | None = None,
    rail_routing: bool | None = None,
    max_paths: int | None = None,
    path_times: bool = True,
    isolated_cache: dict | None = None,
    builds: dict | None = None,
) -> IterationResult:
    """Simulate one training iteration of ``workload`` on ``fabric``.

    Parameters
    ----------
    workload : Workload
        From a plan (:func:`traffic.build.workload_from_plan`) or an imported task graph.
    fabric : Fabric
        At least ``workload.servers`` servers.
    algorithm : str
        Collective algorithm (:data:`topoopt.flowsim.collectives.ALGORITHMS`).
    mode : {"fluid", "steps"}
        Collective flow model (:mod:`topoopt.flowsim.collectives`).
    routing : PathSet, optional
        Server-pair routes overriding the fabric's ECMP routes (e.g. a solver's).
    gpu : RooflineParams, optional
        Compute throughput (default: the plan's ``cluster.gpu``,
        :func:`~topoopt.flowsim.roofline.workload_gpu`; without one an A100 bf16 at 50 % of
        peak, or at the plan's ``cluster.efficiency``).
    bucket_bytes : float
        Gradient bucket size (default 25 MB as PyTorch DDP / Megatron).
    intra_bandwidth : float, optional
        Bytes/s of each GPU's intra-server link (default: the scale-up bandwidth of the plan's
        ``cluster.gpu`` when it names one, else the fabric's, else NVLink 3).
    exposed_by_class : bool
        Also simulate each class instantaneous to get ``exposed_by_class``.
    record_series : bool
        Keep the piecewise-constant link load series in ``sim`` (off by default: it has an
        entry per link whose load an event changes, which on a large all-to-all with split
        routes is ~10^8 entries and doubles the simulation time; ``links`` has every link's
        bytes and mean utilisation either way).
    aggregate : bool
        Simulate identical flows (same route, bytes and dependencies, e.g. the GPU pairs of two
        servers in an all-to-all) as one flow with a multiplicity
        (:func:`topoopt.flowsim.network.simulate_builder`): exact, only faster. ``sim`` is per
        flow either way; ``info["simulated_flows"]`` counts what the event loop ran.
    reduction : bool
        Simulate through the symmetry quotient (:mod:`topoopt.flowsim.symmetry`: one
        representative per class of interchangeable flows and links, found by colour
        refinement, checked exactly, expanded back per flow): the same result up to rounding.
        ``info["reduction"]`` says what it found (``status`` ``on``/``off``, classes, flows
        before and after) or why it is off. Not used with ``simulator``, ``priority`` or
        ``split_allreduce`` (``off`` with that reason). Off by default: exact, but at 2,048
        GPUs its colour refinement still costs more than the smaller simulation saves
        (``benchmarks/bench_scale.py --cases gpt3``).
    max_refills : int, optional
        Work limit shared by the iteration's simulations (with compute, compute alone, one per
        class): :class:`~topoopt.flowsim.simulator.WorkLimitExceeded` once they need more
        sub-flow re-fills in all (:func:`topoopt.flowsim.simulator.simulate`).
    compute_s : float, optional
        The iteration time with every communication instantaneous, when the caller already
        has it from a simulation of the same workload with the same intra-server links (it
        does not depend on the fabric): that simulation is skipped (an optimizer that
        simulates many designs of one workload uses this).
    schedule : {"1f1b", "interleaved", "eager-1f1b"}, optional
        Pipeline schedule of a plan-derived workload (:func:`pipeline_order`; default
        interleaved when ``vpp > 1``, else 1F1B). ``interleaved`` with ``vpp = 1`` is 1F1B.
        ``eager-1f1b`` (eager order, pipeline sends of one pair in micro-batch order) is never
        slower than ``1f1b``: both are simulated and the iteration runs the faster
        (``info["schedule_used"]`` says which, ties keep the eager one;
        ``info["eager_1f1b_s"]`` and ``info["1f1b_s"]`` are both times), as a runtime that
        times its first iterations would.
    simulator : callable, optional
        ``simulator(builder, max_refills) -> SimResult`` run instead of
        :func:`~topoopt.flowsim.network.simulate_builder` on every flow set built (e.g. a
        time-varying fabric, :mod:`solvers.reconfig`); it must return per-builder-flow results.
    priority : sequence of str or str, optional
        Traffic classes, highest first (``"ep"``, ``("ep", "tp")``): strict priority levels of
        the flows by their tasks' classes, classes not named at the lowest level, simulated by
        :func:`topoopt.flowsim.timevarying.simulate_epochs` (:mod:`topoopt.flowsim.priorities`).
    split_allreduce : float, optional
        Micro-op size, bytes: every gradient all-reduce flow is cut into micro-ops of at most
        this many bytes run one after the other (:func:`topoopt.flowsim.priorities.split_flows`;
        semantics in :mod:`topoopt.flowsim.priorities`). Both are unused with ``simulator``.
    max_buckets : int, optional
        A *coarsening*, off by default: at most this many gradient-sync buckets per channel
        (bucket bytes grow to ``total / max_buckets`` where ``total / bucket_bytes`` exceeds it;
        the last backward task is cut into as many pieces). Families that repeat every
        micro-batch (ZeRO-2 and FSDP reduce-scatters; FSDP's parameter all-gathers are not bucketed:
        one per slot, prefetched) otherwise ask ``m S / bucket_bytes`` buckets, 168 k
        for GPT-3 175B with ``m = 96`` on 16 servers, i.e. 43 M flows. Alone on their links,
        ``n`` buckets end about ``T/n + X + n a`` (network-bound) or ``T + X/n + a``
        (compute-bound) after the last backward starts (``T`` its compute, ``X`` the transfer
        time, ``a`` one bucket's latency), so ``n' < n`` buckets err by about ``max(T, X) / n'
        + (n - n') a``: below ``1 / n'`` of the iteration when latencies are small against a
        bucket's transfer (25 MB buckets: milliseconds against microseconds; the co-search
        measures it, ``docs/cosearch.md``). ``info["buckets_capped"]`` says whether it changed
        anything.
    max_flows : int, optional
        Size guard for plan-derived workloads: :class:`TooManyFlows` (an
        :class:`~traffic.errors.InputError`) before anything is built when the iteration has
        more flows than this (counted from the plan: ``info["flows"]`` when it runs).
    rail_routing : bool, optional
        GPU ``i``'s traffic on NIC ``i`` of a rail fabric, with the scale-up hop to another rail
        (:class:`~topoopt.flowsim.network.Network`; default: on for rail fabrics).
    max_paths : int, optional
        At most this many ECMP paths per server pair (per switch pair with rail routing), an
        approximation (:class:`~topoopt.flowsim.network.Network`); default every path, exact.
        ``info["capped_pairs"]``: the routed pairs with more paths than that (0: the cap did
        not bind, the result is exact).
    path_times : bool
        Keep the per-sub-flow times of the result (``sim.path_start``, ``path_last_byte``,
        ``path_finish``). With ``aggregate`` and the default simulator the result of the merged
        flows is expanded per builder flow, and these arrays get one entry per path of every
        builder flow (:data:`~topoopt.flowsim.subflow_guard.EXPANDED_PATH_BYTES` each): checked
        before the flows are routed (:func:`~topoopt.flowsim.subflow_guard.check_expansion`,
        where the routes' path counts are known without listing them) and again before the
        expansion. ``False``: per-flow times and link bytes only (every figure of the result
        but those arrays, which are ``None``; what ``advise`` reads).
    isolated_cache : dict, optional
        The isolated durations of intra-server collectives (the blocking ones' times alone on
        server 0's NVLink links), shared by the calls that pass the same dict: keyed by the
        workload (its ``id``: the dict must not outlive it), algorithm, mode, aggregation and
        the intra-server links (GPUs per server, bandwidth, latency), which is all they depend
        on (the fabric's links carry none of their flows). ``None`` (default): each call
        computes its own. The results are the same (the reconfiguration search passes one per
        search).
    builds : dict, optional
        The iteration's flow builder (with its tasks; not the compute-only or per-class runs'),
        shared by the calls that pass the same dict and differ only in ``simulator``,
        ``compute_s``, ``max_refills``, ``exposed_by_class``, ``record_series``, ``path_times``
        or ``max_flows`` (none of which shapes it): per-phase routing simulates one iteration
        under several routing schedules on one fabric
        (:func:`solvers.joint.phase_routing.phase_routing`, which passes ``compute_s``). The dict
        holds the workload, fabric and routing it was filled for and the other arguments; a
        call with another of them (compared by identity for the objects, by value for the
        rest) empties it first. Plan-derived workloads only, not ``eager-1f1b`` (a task graph
        or that schedule builds as without it). A simulator must not change a builder. The
        results are the same.

    Returns
    -------
    IterationResult

    Raises
    ------
    InputError
        Unknown algorithm or mode, bad ``bucket_bytes``, a workload with more servers than the
        fabric, a workload that is neither plan-derived nor an imported task graph.

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> from topoopt.fabrics import ideal
    >>> w = workload_from_plan("vgg16-dp")
    >>> r = simulate_iteration(w, ideal(w.servers, gpus_per_server=w.gpus_per_server))
    >>> r.iteration_s >= r.compute_s > 0
    True
    """
    if algorithm not in ALGORITHMS:
        raise InputError("algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")
    if mode not in MODES:
        raise InputError("mode", mode, f"one of {', '.join(MODES)}")
    if not (
        isinstance(bucket_bytes, int | float) and np.isfinite(bucket_bytes) and bucket_bytes > 0
    ):
        raise InputError("bucket_bytes", bucket_bytes, "a positive number of bytes")
    if gpu is None:
        gpu = workload_gpu(workload)
    if intra_bandwidth is None:
        intra_bandwidth = workload_scale_up_bandwidth(workload)
    if not isinstance(gpu, RooflineParams):
        raise InputError("gpu", type(gpu).__name__, "a RooflineParams")
    if schedule is not None and schedule not in SCHEDULES:
        raise InputError("schedule", schedule, f"one of {', '.join(SCHEDULES)}")
    if priority is not None:
        priority = check_priority(priority)
    if split_allreduce is not None and not (
        isinstance(split_allreduce, int | float) and np.isfinite(split_allreduce)
        and split_allreduce > 0
    ):  # fmt: skip
        raise InputError("split_allreduce", split_allreduce, "a positive number of bytes")
    if not isinstance(path_times, bool):
        raise InputError("path_times", path_times, "True or False")
    net = Network(
        fabric, workload.gpus_per_server, intra_bandwidth, routing=routing,
        rail_routing=rail_routing, max_paths=max_paths,
    )  # fmt: skip
    net.check_workload(workload.gpus, workload.gpus_per_server)
    if workload.taskgraph is not None:
        model = _TaskGraphModel(workload, net, algorithm, mode)
    else:
        if max_buckets is not None and (
            isinstance(max_buckets, bool) or not isinstance(max_buckets, int) or max_buckets < 1
        ):
            raise InputError("max_buckets", max_buckets, "a positive integer or None")
        model = _PipelineModel(
            workload, net, gpu, bucket_bytes, algorithm, mode, schedule, max_buckets
        )
        model.aggregate = aggregate
        model.reduction = reduction
        model.isolated = isolated_cache
        if max_flows is not None:
            n_built = model.n_flows()
            if n_built > max_flows:
                hint = "" if max_buckets is not None else "max_buckets coarsens gradient buckets"
                raise TooManyFlows(n_built, max_flows, hint)
    classes = _classes(workload)

    if not isinstance(aggregate, bool):
        raise InputError("aggregate", aggregate, "True or False")
    if not isinstance(reduction, bool):
        raise InputError("reduction", reduction, "True or False")

    build_key = None
    if builds is not None and isinstance(model, _PipelineModel) and schedule != "eager-1f1b":
        build_key = (algorithm, mode, gpu, float(bucket_bytes), schedule, max_buckets,
                     intra_bandwidth, rail_routing, max_paths, aggregate, reduction)  # fmt: skip
        held = builds.get("for")
        if held is None or not (
            held[0] is workload and held[1] is fabric and held[2] is routing
            and held[3] == build_key
        ):  # fmt: skip
            builds.clear()
            builds["for"] = (workload, fabric, routing, build_key)

    def build(instant):
        """``model.build(instant)``, or the iteration's builder ``builds`` holds."""
        key = frozenset(instant)
        if build_key is None or key:
            return model.build(key)
        if key not in builds:
            builds[key] = model.build(key)
        return builds[key]

    used = [0]  # sub-flow re-fills of the simulations so far (their work)
    labels: dict = {}  # classes of the first reduced phase, seeding the later phases' refinement

    def run(instant, series=False):
        """``(sim, tasks, merge, fb)``; ``sim`` per merged flow when ``aggregate`` with the
        default simulator, then ``expand(sim)`` turns it per builder flow (kept for the result
        only: the other phases need the makespan, and expanding every sub-flow of every
        builder flow is most of the peak memory at 16,384 GPUs)."""
        fb, tasks, merge = build(instant)
        limit = None if max_refills is None else max_refills - used[0]
        try:
            if simulator is not None:
                sim = simulator(fb, limit)
            elif priority is not None or split_allreduce is not None:
                sim = simulate_tasks(
                    fb, tasks, priority=priority, split_allreduce=split_allreduce,
                    aggregate=aggregate, record_series=series, max_refills=limit,
                )  # fmt: skip
            elif aggregate:
                sim = _Classes(*simulate_builder_classes(
                    fb, record_series=series, max_refills=limit, reduction=reduction,
                    class_labels=labels.setdefault(id(model), {}),
                    expansion=path_times and not instant,  # the result's run: checked early
                    per_path=path_times and not instant,
                ))  # fmt: skip
            else:
                sim = simulate_builder(
                    fb, aggregate=False, record_series=series, max_refills=limit,
                    reduction=reduction,
                )  # fmt: skip
        except WorkLimitExceeded as e:  # report the work of all the simulations so far
            raise WorkLimitExceeded(used[0] + e.refills, max_refills) from None
        used[0] += sim.refills
        return sim, tasks, merge, fb

    sim, tasks, merge, fb = run((), record_series)
    used_schedule, eager_facts = schedule, {}
    if schedule == "eager-1f1b" and isinstance(model, _PipelineModel) and model.p > 1:
        eager = model  # the guarantee: never slower than 1F1B on the same plan
        model = _PipelineModel(
            workload, net, gpu, bucket_bytes, algorithm, mode, "1f1b", max_buckets
        )
        model.aggregate = aggregate
        model.reduction = reduction
        model.isolated = isolated_cache
        plain = run((), record_series)
        eager_facts = {"eager_1f1b_s": float(sim.makespan), "1f1b_s": float(plain[0].makespan)}
        if plain[0].makespan < sim.makespan:
            sim, tasks, merge, fb = plain
            used_schedule = "1f1b"
        else:
            model = eager
    iteration = float(sim.makespan)
    compute = float(run(classes)[0].makespan) if compute_s is None else float(compute_s)
    by_class = {}
    if exposed_by_class:
        for c in classes:
            by_class[c] = iteration - float(run([c])[0].makespan)
    if isinstance(sim, _Classes):
        # every builder flow gets its class's per-path times: refuse before allocating them
        # when they do not fit (topoopt.flowsim.subflow_guard.check_expansion)
        ptr = np.asarray(sim.flows.flow_ptr, np.int64)
        expanded = int(np.diff(ptr)[sim.class_of].sum(dtype=np.int64)) if path_times else 0
        check_expansion(sim.class_of.size, int(ptr[-1]), expanded)
        sim = expand_classes(sim.sim, sim.flows, sim.class_of, paths=path_times)
    timeline = tasks.frame(sim)
    is_comm = ~timeline["kind"].isin(["compute", "optimizer"]).to_numpy()
    busy = _union_length(
        timeline["start_s"].to_numpy()[is_comm], timeline["finish_s"].to_numpy()[is_comm]
    )
    comm, comm_by_class, cp_facts = _critical_comm(sim, fb, tasks)
    n_net = net.null_link
    cap = net.capacity(0)[:n_net]
    kinds = net.link_kind(0)[:n_net]
    lsrc = np.concatenate([fabric.src, np.arange(net.n_gpu_slots) // net.gpus_per_server])
    ldst = np.concatenate([fabric.dst, np.arange(net.n_gpu_slots) // net.gpus_per_server])
    lb = sim.link_bytes[:n_net]
    links = pd.DataFrame(
        {
            "link": np.arange(n_net),
            "kind": kinds.astype(str),
            "src": lsrc,
            "dst": ldst,
            "bytes": lb,
            "capacity": cap,
            "utilisation": lb / (cap * iteration) if iteration > 0 else np.zeros(n_net),
        }
    )
    factors = np.concatenate(merge) if merge else np.zeros(0, np.int64)
    uniq = sorted({int(x) for x in np.unique(factors)}) if factors.size else []
    info = {
        "flows": int(sim.finish.shape[0]),
        "simulated_flows": int(sim.simulated_flows),
        "tasks": int(len(timeline)),
        "events": int(sim.n_events),
        "refills": int(used[0]),
        "merge_factors": uniq,
        "merge_exact": len(uniq) <= 1,
        "reduction": _reduction_info(sim, reduction, simulator, priority, split_allreduce),
        "algorithm": algorithm,
        "mode": mode,
        "gpu": gpu.name,
        "bucket_bytes": float(bucket_bytes),
        "capped_pairs": net.capped_pairs,
        **cp_facts,
    }
    if isinstance(model, _PipelineModel):
        info.update(
            cells=model.n_cells,
            stages=model.p,
            micro_batches=model.m,
            vpp=model.v,
            schedule=schedule or ("interleaved" if model.v > 1 else "1f1b"),
            schedule_used=used_schedule or ("interleaved" if model.v > 1 else "1f1b"),
            **eager_facts,
            forward_s_per_stage=(model.t_f * model.v).tolist(),
            backward_s_per_stage=(model.t_b * model.v).tolist(),
            optimizer_s_per_stage=model.t_opt.tolist(),
            buckets_capped=model.capped,
            max_buckets=max_buckets,
        )
    return IterationResult(
        iteration_s=iteration,
        compute_s=compute,
        comm_s=comm,
        exposed_comm_s=iteration - compute,
        exposed_by_class=by_class,
        links=links,
        timeline=timeline,
        sim=sim,
        info=info,
        comm_busy_s=busy,
        comm_by_class=comm_by_class,
    )
