"""The work and memory of one iteration simulation, estimated before any flow is built.

:func:`estimate_work` counts the flows :func:`~topoopt.flowsim.iteration.simulate_iteration`
would build for a Workload, from the plan's structure alone (the iteration model's own count,
``_PipelineModel.n_flows``: compute pieces, blocking tasks, cross-server collectives, pipeline
sends, gradient buckets, barriers), without a network, so that no fabric, route or flow exists
yet. The count is exact on every fabric without in-network aggregation (routes split a flow's
bytes over paths, they do not add flows); an INA fabric replaces some host collectives by
aggregation trees of about as many flows.

From the count, the peak resident memory of a ``topoopt simulate`` process:

``peak_bytes = PROCESS_BYTES + held + (FLOW_PEAK_BYTES + PATH_BYTES * (paths - 1)) * flows
+ GPU_PEAK_BYTES * gpus + GPU_PAIR_BYTES * gpus**2``

where ``held`` is the bytes of the dense all-to-all matrices the Workload holds
(:func:`held_matrix_bytes`) and ``paths`` is the most paths a flow is split over on the fabric
(:func:`fabric_paths`; 1 on the ideal switch and before a fabric exists, 16 on the two-tier
Clos of 128 servers): every further path is a sub-flow with its links in the simulator. The
commands check the estimate with ``paths = 1`` before anything is built (the flows alone: a
lower bound), because the most paths of a pair says little of the sub-flows a plan builds: the
iteration model merges identical flows before they are split over paths, and most flows of a
parallel plan join near servers. On GPT-3 175B at 16,384 GPUs on the three-tier Clos the most
paths is 256, and the 1,058,684 flows take 17,147,580 sub-flows (16.2 a flow): ``paths = 256``
estimated 35.6 GB of arrays for a run that peaks at 6.24 GB, and refused it.

:func:`~topoopt.flowsim.subflow_guard.check_subflows` then checks the sub-flows exactly, when
the flows are routed and before the sub-flow arrays are allocated
(:meth:`topoopt.flowsim.network.FlowBuilder.build`):

``arrays = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * sub-flows``

which is at least the measured peak above :data:`PROCESS_BYTES` and at most 1.6 times it on
the GPT-3 rows of ``docs/performance.md`` on the fat-tree (flows / sub-flows / peak GB:
264,828 / 2,142,436 / 0.94 at 2,048 GPUs, 1.52x; 605,052 / 5,385,996 / 1.84 at 8,192, 1.46x;
1,058,684 / 17,147,580 / 6.24 at 16,384, 1.04x).

with the constants measured on 30 plans (``benchmarks/bench_estimate.py``, table in
``docs/performance.md``): the estimate is at least the measured peak and at most twice it on
every one of them. :func:`check_work` refuses a request whose flows exceed ``TOPOOPT_MAX_FLOWS``
or whose arrays (``peak_bytes - PROCESS_BYTES``) exceed ``TOPOOPT_MEMORY_BUDGET_GB``, naming the
estimate, the limit and the variable that raises it.

Imported task graphs are estimated from their tasks: one flow per task, plus the flows of each
all-reduce task's ring (two per member).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.flowsim.subflow_guard import (
    BUNDLE_BYTES,
    BUNDLE_FLOW_BYTES,
    FLOW_PEAK_BYTES,
    QUOTIENT_CLASS_BYTES,
    SUBFLOW_BYTES,
    check_subflows,
)
from traffic.errors import InputError
from traffic.limits import memory_budget_bytes
from traffic.workload import Workload, peer_nbytes

__all__ = [
    "PROCESS_BYTES",
    "FLOW_PEAK_BYTES",
    "GPU_PEAK_BYTES",
    "GPU_PAIR_BYTES",
    "PATH_BYTES",
    "QUOTIENT_CLASS_BYTES",
    "REDUCED_FLOW_FACTOR",
    "SUBFLOW_BYTES",
    "WorkEstimate",
    "fabric_paths",
    "estimate_work",
    "held_matrix_bytes",
    "check_work",
    "check_subflows",
]

PROCESS_BYTES = 0.36e9
"""Resident bytes of the interpreter with numpy, scipy, pandas, numba (its kernels loaded from
the cache) and the CLI before any plan: the smallest plans peak at 0.28 GB here. A first run
that compiles the numba kernels takes about 0.25 GB more once (not covered)."""

PATH_BYTES = 128.0
"""Peak bytes per flow and further path it is split over (measured 51-91 bytes on the Clos of
128 servers, 16 paths per pair, against the ideal switch)."""

GPU_PEAK_BYTES = 4096.0
"""Peak bytes per GPU beside the flows: the Workload's groups, cells and stages
(:data:`traffic.limits.BYTES_PER_GPU`)."""


GPU_PAIR_BYTES = 1.0
"""Peak bytes per pair of GPUs: an empirical term for what grows faster than the flows at tens
of thousands of GPUs (GPT-3 175B, tp 8, pp 16, global batch 1,536 on the ideal switch, reduced:
peak 0.99 / 2.50 / 7.46 GB at 16,384 / 32,768 / 65,536 GPUs for 1.06 / 1.97 / 3.78 M flows,
where the flow and GPU terms alone gave 1.38 / 2.26 / 4.03 GB). Its cause is not identified;
below a thousand GPUs it adds at most 1 MB."""


REDUCED_FLOW_FACTOR = 3
"""The flow cap of a simulation through the symmetry reduction is this many times
``TOPOOPT_MAX_FLOWS`` (:func:`check_work` with ``reduced``): the cap stands for about 3 minutes
of work, and the reduced path's work is linear in what it builds (flows, route bundles), not in
the event loop over every flow. Measured (``docs/performance.md``, session 36): exact FSDP
(``gpt3-175b-fsdp``, dp 512) at 4,096 GPUs, 10.8 M flows of one bundle each, 145.8 s CPU
(13.5 us a flow, against about 45 us a flow unreduced), so 12 M flows are about 3 minutes;
plans of several bundles a flow (GPT-3 175B on the rail fabric at 16,384 GPUs: 4.3 a flow,
about 40 us a flow) reach the bundle memory guard (:func:`~topoopt.flowsim.subflow_guard.
check_bundles`) before the cap."""


@dataclass(frozen=True)
class WorkEstimate:
    """What one iteration simulation of a Workload will build.

    Attributes
    ----------
    flows : int
        Flows of one build (exact for plan-derived workloads on fabrics without INA).
    gpus : int
        GPUs of the workload.
    peak_bytes : float
        Estimated peak resident memory of the process, bytes (module docstring).
    paths : int
        The most paths a flow is split over, as given to :func:`estimate_work`.
    """

    flows: int
    gpus: int
    peak_bytes: float
    paths: int = 1

    @property
    def array_bytes(self) -> float:
        """``peak_bytes`` beyond the interpreter's own (what the memory budget limits)."""
        return self.peak_bytes - PROCESS_BYTES


def _taskgraph_flows(w: Workload) -> int:
    tg = w.taskgraph
    n = int(tg.n_tasks)
    ar = np.flatnonzero(np.isin(tg.kind, ("all-reduce", "collective")))
    for f, _r in tg.demand[ar].tolist():
        if f >= 0:
            n += 2 * int(w.demands[f].group_size)
    return n


def held_matrix_bytes(workload: Workload) -> float:
    """Bytes of the per-pair matrices the Workload itself holds (an all-to-all's
    ``peer_bytes``: ``group_size**2`` float64 dense, or a sparse matrix's arrays,
    :func:`traffic.workload.peer_nbytes`), which live through the whole simulation.

    DLRM at 16,384 GPUs with embedding tables of different widths holds two of them (forward
    and backward). Stored dense they were 2 x 16,384**2 x 8 = 4.29 GB before any flow existed
    (measured 2026-12-06: ``topoopt simulate`` on the three-tier Clos held 4.4 GB when the
    simulation started and peaked at 5.88 GB, while the flow and GPU terms gave 2.27 GB);
    stored sparse (the 64 GPUs with tables send), 25 MB."""
    held = (d.peer_bytes for d in workload.demands if d.peer_bytes is not None)
    return float(sum(peer_nbytes(m) for m in held))


def estimate_work(
    workload: Workload,
    *,
    algorithm: str = "ring",
    mode: str = "fluid",
    bucket_bytes: float = 25e6,
    max_buckets: int | None = None,
    paths: int = 1,
    reduced: bool = False,
) -> WorkEstimate:
    """Flows and peak memory of simulating one iteration of ``workload`` (module docstring).

    Parameters are those of :func:`~topoopt.flowsim.iteration.simulate_iteration` that change
    the flows, and ``paths``, the most paths a flow is split over on the fabric
    (:func:`fabric_paths`). Nothing is expanded: the count walks the plan's families.
    ``reduced``: the simulation goes through the symmetry reduction, whose route-bundle path
    holds :data:`~topoopt.flowsim.subflow_guard.BUNDLE_FLOW_BYTES` a flow,
    :data:`~topoopt.flowsim.subflow_guard.BUNDLE_BYTES` a bundle (one a flow before the routes
    are known) and :data:`QUOTIENT_CLASS_BYTES` a quotient class (one a flow: no symmetry
    found) instead of :data:`FLOW_PEAK_BYTES` a flow; the bundles and sub-flows are
    checked exactly once routed (:func:`~topoopt.flowsim.subflow_guard.check_bundles`,
    :func:`check_subflows`).

    Examples
    --------
    VGG-16 data parallel on 16 servers x 8 GPUs: 23 gradient buckets of 25 MB, each a
    reduce-scatter and an all-gather flow per GPU, plus compute pieces, barriers and optimizer
    steps.

    >>> from traffic.load import load_workload
    >>> est = estimate_work(load_workload("vgg16-dp"))
    >>> est.flows, est.gpus
    (6446, 128)
    """
    from topoopt.flowsim.iteration import _PipelineModel
    from topoopt.flowsim.roofline import workload_gpu

    gpus = int(workload.gpus)
    if workload.taskgraph is not None:
        flows = _taskgraph_flows(workload)
    else:
        # no network: the count is the same on every fabric without in-network aggregation
        model = _PipelineModel(
            workload, None, workload_gpu(workload), bucket_bytes, algorithm, mode, None, max_buckets
        )
        flows = model.n_flows()
    # reduced: a bundle and a quotient class a flow at most (QUOTIENT_CLASS_BYTES)
    base = BUNDLE_FLOW_BYTES + BUNDLE_BYTES + QUOTIENT_CLASS_BYTES if reduced else FLOW_PEAK_BYTES
    per_flow = base + PATH_BYTES * float(max(int(paths), 1) - 1)
    peak = (
        PROCESS_BYTES
        + held_matrix_bytes(workload)
        + per_flow * float(flows)
        + GPU_PEAK_BYTES * float(gpus)
        + GPU_PAIR_BYTES * float(gpus) ** 2
    )
    return WorkEstimate(flows=int(flows), gpus=gpus, peak_bytes=peak, paths=max(int(paths), 1))


def check_work(
    workload: Workload, what: str = "simulation", *, reduced: bool = False, **kwargs
) -> WorkEstimate:
    """Refuse a simulation beyond the flow cap or the memory budget, before any fabric, route or
    flow exists; return the estimate otherwise.

    The flow cap is ``TOPOOPT_MAX_FLOWS`` (:func:`traffic.limits.max_flows`, about 3 minutes of
    the flow model per 4 million flows here), :data:`REDUCED_FLOW_FACTOR` times that with
    ``reduced`` (the simulation goes through the symmetry reduction); the budget
    ``TOPOOPT_MEMORY_BUDGET_GB`` holds the arrays, :attr:`WorkEstimate.array_bytes` (with
    ``reduced``, the reduced path's, :func:`estimate_work`). ``kwargs`` go to
    :func:`estimate_work`.

    Raises
    ------
    InputError
        Field ``plan``, naming the estimate, the limit and the variable that raises it.
    """
    from traffic.limits import DEFAULT_MAX_FLOWS, max_flows

    est = estimate_work(workload, reduced=reduced, **kwargs)
    cap = max_flows() * (REDUCED_FLOW_FACTOR if reduced else 1)
    if est.flows > cap:
        how = (
            f"{REDUCED_FLOW_FACTOR} x TOPOOPT_MAX_FLOWS with the symmetry reduction; set "
            "TOPOOPT_MAX_FLOWS to raise it"
            if reduced
            else f"set TOPOOPT_MAX_FLOWS to raise it; about 3 minutes per {DEFAULT_MAX_FLOWS:,} "
            "here"
        )
        raise InputError(
            "plan",
            f"about {est.flows:,} flows for one {what} ({workload.gpus:,} GPUs)",
            f"at most {cap:,} flows ({how})",
        )
    budget = memory_budget_bytes()
    if est.array_bytes > budget:
        raise InputError(
            "plan",
            f"about {est.array_bytes / 1e9:,.1f} GB of arrays for one {what} "
            f"({est.flows:,} flows, {workload.gpus:,} GPUs)",
            f"at most {budget / 1e9:g} GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)",
        )
    return est


def fabric_paths(fabric, routing=None) -> int:
    """The most paths a flow between two servers of ``fabric`` is split over (ECMP), from the
    routes of a few server pairs (the first server to the second, the middle and the last: the
    farthest on the fabrics built here); ``routing`` (a PathSet overriding the fabric's) gives
    its own most paths per pair."""
    from topoopt.fabrics.routing import routes

    if routing is not None:
        ptr = np.asarray(routing.commodity_ptr)
        return max(1, int(np.diff(ptr).max(initial=1)))
    n = int(fabric.n_servers)
    if n < 2:
        return 1
    dst = np.unique(np.array([1, n // 2, n - 1], np.int64))
    pairs = np.column_stack([np.zeros(dst.size, np.int64), dst])
    ps = routes(fabric, "ecmp", pairs=pairs)
    return max(1, int(np.diff(np.asarray(ps.commodity_ptr)).max(initial=1)))
