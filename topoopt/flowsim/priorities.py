"""Lina-style traffic priorities for the iteration model: class levels and micro-op splitting.

Lina (Li et al., USENIX ATC 2023) gives the MoE all-to-all priority over the concurrent
data-parallel all-reduce and splits the all-reduce into small micro-ops, so an all-to-all waits
at most one micro-op. Here:

- **Priority levels** (:func:`priority_levels`): ``order`` names traffic classes, highest first
  (``("ep",)``, ``("ep", "tp")``); a flow of class ``order[i]`` gets level ``i`` and every other
  flow (classes not named, compute, barriers) the lowest level ``len(order)``. A flow whose task
  belongs to several classes (``"ep+tp"``, a collective shared by two parallelisms) takes the
  highest level of its classes. The levels are strict priorities of
  :func:`topoopt.flowsim.timevarying.simulate_epochs`: lexicographic max-min, a lower level gets
  what higher ones leave, preempted at once (the fluid limit of Lina's scheduling). Compute runs
  on private device links, so its level changes nothing.
- **Micro-op splitting** (:func:`split_flows`, ``split_allreduce`` of
  :func:`topoopt.flowsim.iteration.simulate_iteration`): every flow of a gradient all-reduce
  (tasks of kind ``sync`` of plan-derived workloads; ``all-reduce`` and ``collective`` of task
  graphs) of ``S > B`` bytes becomes ``ceil(S / B)`` equal flows on the same paths, run one
  after the other (the first takes the flow's dependencies, the flows that waited for it wait
  for the last; the result reports the original flow: first piece's start, last piece's
  finish).
- **Micro-ops are not preempted** (with both options): every all-reduce flow, split or not, is
  *non-preemptive* (``nonpreemptive`` of :func:`~topoopt.flowsim.timevarying.simulate_epochs`):
  a micro-op starts only when no flow of a higher level is sending on a link of its paths
  (else it waits for them), and once started it shares in the highest level until it ends.
  So an all-to-all that arrives while a micro-op is in flight shares with at most that one
  micro-op per path and the next micro-op waits for it: the all-to-all waits at most one
  micro-op, Lina's point. ``--priority`` alone is preemptive at every instant (the limit of
  micro-ops of size 0); ``--split-allreduce`` with a size above every flow makes each whole
  all-reduce flow one non-preemptive unit (no micro-ops); ``--split-allreduce`` without
  ``--priority`` only splits (one level: nothing waits).

Examples
--------
>>> priority_levels(np.array(["ep+tp", "dp", "compute", "tp"], dtype=object), ("ep", "tp"))
array([0, 2, 2, 1])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from topoopt.csr import ranges
from topoopt.flowsim.flowset import FlowSet, _gather_rows
from topoopt.flowsim.simulator import SimResult, expand_classes
from topoopt.flowsim.timevarying import simulate_epochs
from traffic.errors import InputError
from traffic.workload import CLASSES

__all__ = [
    "SPLIT_KINDS",
    "check_priority",
    "priority_levels",
    "simulate_tasks",
    "split_flows",
    "unsplit_result",
]

SPLIT_KINDS = ("sync", "all-reduce", "collective")
"""Task kinds whose flows ``split_allreduce`` cuts into micro-ops (gradient all-reduces)."""


def check_priority(priority) -> tuple[str, ...]:
    """The priority order as a tuple of class names (from ``"ep,tp"`` or a sequence).

    Examples
    --------
    >>> check_priority("ep, tp")
    ('ep', 'tp')
    """
    if isinstance(priority, str):
        names = [x.strip() for x in priority.split(",")]
    elif isinstance(priority, Sequence) and all(isinstance(x, str) for x in priority):
        names = [x.strip() for x in priority]
    else:
        raise InputError("priority", priority, "traffic classes, highest first, e.g. 'ep,tp'")
    for x in names:
        if x not in CLASSES:
            raise InputError("priority", x, f"traffic classes among {', '.join(CLASSES)}")
    if not names or len(set(names)) != len(names):
        raise InputError("priority", ",".join(names), "one or more distinct traffic classes")
    return tuple(names)


def priority_levels(labels: np.ndarray, order: Sequence[str]) -> np.ndarray:
    """``int64`` level of each flow from its class label (module docstring); 0 = highest."""
    rank = {c: i for i, c in enumerate(order)}
    low = len(order)
    uniq, inv = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    lev = np.array(
        [min([rank.get(p, low) for p in str(u).split("+")], default=low) for u in uniq], np.int64
    )
    return lev[inv.reshape(-1)] if uniq.size else np.zeros(0, np.int64)


def _check_pieces(n: float, max_bytes: float) -> None:
    """Refuse a split into more flows than ``TOPOOPT_MAX_FLOWS`` or than the memory budget holds
    (:data:`topoopt.flowsim.work.FLOW_PEAK_BYTES` each), naming the count and both ways out."""
    from traffic.limits import FLOW_PEAK_BYTES, max_flows, memory_budget_bytes

    cap = min(float(max_flows()), memory_budget_bytes() / FLOW_PEAK_BYTES)
    if n > cap:
        raise InputError(
            "split_allreduce",
            f"{max_bytes:g} bytes: about {n:,.0f} flows after the split",
            f"at most {cap:,.0f} flows (a larger --split-allreduce; TOPOOPT_MAX_FLOWS and "
            "TOPOOPT_MEMORY_BUDGET_GB bound them)",
        )


def split_flows(fs: FlowSet, mask: np.ndarray, max_bytes: float) -> tuple[FlowSet, np.ndarray]:
    """Cut every flow ``f`` with ``mask[f]`` and ``size > max_bytes`` into a chain of
    ``ceil(size / max_bytes)`` equal flows on its paths (module docstring).

    Returns ``(flows, owner)``: new flow ``i`` is a piece of flow ``owner[i]`` (pieces are
    consecutive, in chain order).

    Examples
    --------
    >>> fs = FlowSet.single_path([10.0], [0.0], size=[25.0, 5.0], start=[0.0, 0.0],
    ...                          paths=[[0], [0]], after=[[], [0]])
    >>> small, owner = split_flows(fs, np.array([True, False]), 10.0)
    >>> owner.tolist(), small.size.round(3).tolist(), small.deps.tolist()
    ([0, 0, 0, 1], [8.333, 8.333, 8.333, 5.0], [0, 1, 2])
    """
    if not (isinstance(max_bytes, int | float) and np.isfinite(max_bytes) and max_bytes > 0):
        raise InputError("split_allreduce", max_bytes, "a positive number of bytes")
    n_f = fs.n_flows
    mask = np.asarray(mask, bool).reshape(-1)
    k = np.where(mask & (fs.size > max_bytes), np.ceil(fs.size / max_bytes), 1)
    _check_pieces(float(k.sum()), max_bytes)  # before the pieces exist
    k = k.astype(np.int64)
    owner = np.repeat(np.arange(n_f, dtype=np.int64), k)
    first = np.cumsum(k) - k
    last = first + k - 1
    piece = np.arange(owner.shape[0], dtype=np.int64) - first[owner]
    paths = _gather_rows(fs.flow_ptr, owner)
    flow_ptr = np.zeros(owner.shape[0] + 1, np.int64)
    np.cumsum(np.diff(fs.flow_ptr)[owner], out=flow_ptr[1:])
    path_ptr = np.zeros(paths.shape[0] + 1, np.int64)
    np.cumsum(np.diff(fs.path_ptr)[paths], out=path_ptr[1:])
    # first piece: the flow's dependencies (on their last pieces); others: the previous piece
    head = piece == 0
    n_dep = np.where(head, np.diff(fs.dep_ptr)[owner], 1)
    dep_ptr = np.zeros(owner.shape[0] + 1, np.int64)
    np.cumsum(n_dep, out=dep_ptr[1:])
    deps = np.empty(int(dep_ptr[-1]), np.int64)
    heads = np.flatnonzero(head)
    deps_of_heads = last[fs.deps[_gather_rows(fs.dep_ptr, owner[heads])]]
    deps[_gather_rows(dep_ptr, heads)] = deps_of_heads
    tails = np.flatnonzero(~head)
    deps[dep_ptr[tails]] = tails - 1
    out = FlowSet(
        capacity=fs.capacity,
        latency=fs.latency,
        size=(fs.size / k)[owner],
        start=fs.start[owner],
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=fs.path_links[_gather_rows(fs.path_ptr, paths)],
        weight=fs.weight[paths],
        dep_ptr=dep_ptr,
        deps=deps,
        multiplicity=fs.multiplicity[owner],
    )
    return out, owner


def unsplit_result(res: SimResult, fs: FlowSet, owner: np.ndarray) -> SimResult:
    """The result of a simulation of :func:`split_flows`'s output, per original flow of
    ``fs``: start of the first piece, finish of the last; per-path times of the last piece
    (``path_start`` of the first)."""
    n_f = fs.n_flows
    k = np.bincount(owner, minlength=n_f)
    first = np.cumsum(k) - k
    last = first + k - 1
    lens = np.diff(fs.flow_ptr)
    new_ptr = np.zeros(owner.shape[0] + 1, np.int64)
    np.cumsum(lens[owner], out=new_ptr[1:])
    p_last = _gather_rows(new_ptr, last)
    p_first = _gather_rows(new_ptr, first)
    return SimResult(
        start=res.start[first],
        finish=res.finish[last],
        path_start=res.path_start[p_first],
        path_last_byte=res.path_last_byte[p_last],
        path_finish=res.path_finish[p_last],
        link_bytes=res.link_bytes,
        capacity=res.capacity,
        series_time=res.series_time,
        series_link=res.series_link,
        series_load=res.series_load,
        makespan=res.makespan,
        n_events=res.n_events,
        fill_rounds=res.fill_rounds,
        simulated_flows=res.simulated_flows,
        refills=res.refills,
    )


def _flow_kinds(tasks, n: int) -> np.ndarray:
    """Task kind of every builder flow (``""`` for flows of no task)."""
    kind = np.full(n, "", dtype=object)
    for p in tasks.parts:
        lo, hi = p["lo"], p["hi"]
        keep = hi > lo
        if keep.any():
            kind[ranges(lo[keep], hi[keep])] = np.repeat(p["kind"][keep], (hi - lo)[keep])
    return kind


def simulate_tasks(
    builder,
    tasks,
    *,
    priority: Sequence[str] | None = None,
    split_allreduce: float | None = None,
    aggregate: bool = True,
    record_series: bool = False,
    max_refills: int | None = None,
) -> SimResult:
    """Simulate an iteration model's flows with priority levels and/or micro-op splitting.

    ``builder`` is the :class:`topoopt.flowsim.network.FlowBuilder` and ``tasks`` the task
    records of :func:`topoopt.flowsim.iteration.simulate_iteration`'s model; the result is per
    builder flow, as :func:`topoopt.flowsim.network.simulate_builder`'s. Identical flows are
    merged (``aggregate``) only when they have the same level (else not at all).
    """
    _, labels = tasks.flow_labels(builder.n)
    order = () if priority is None else check_priority(priority)
    level = priority_levels(labels, order)
    if aggregate:
        fs, class_of = builder.build_classes()
        lev = np.zeros(fs.n_flows, np.int64)
        lev[class_of] = level
        if (lev[class_of] != level).any():
            fs, class_of = builder.build(), np.arange(builder.n, dtype=np.int64)
            lev = level
    else:
        fs, class_of = builder.build(), np.arange(builder.n, dtype=np.int64)
        lev = level
    if split_allreduce is None:
        sim = simulate_epochs(
            fs, priority=lev, record_series=record_series, max_refills=max_refills
        )
        return expand_classes(sim, fs, class_of)
    kinds = _flow_kinds(tasks, builder.n)
    rep = np.zeros(fs.n_flows, np.int64)
    rep[class_of] = np.arange(builder.n)
    mask = np.isin(kinds[rep].astype(str), SPLIT_KINDS)
    small, owner = split_flows(fs, mask, split_allreduce)
    sim = simulate_epochs(
        small,
        priority=lev[owner],
        record_series=record_series,
        max_refills=max_refills,
        nonpreemptive=mask[owner] if order else None,
    )
    return expand_classes(unsplit_result(sim, fs, owner), fs, class_of)
