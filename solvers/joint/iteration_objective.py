"""The iteration objective's pieces: task times, criticality windows, ring remapping, scoring.

The joint optimizer's ``objective="iteration"`` (:mod:`solvers.joint.iteration_search`) judges a
design by what users pay for, the flow model's iteration time
(:func:`topoopt.flowsim.iteration.simulate_iteration` on the realised design), and steers its
search with the iteration's critical path:

1. :func:`ideal_reference` simulates the iteration on the ideal switch of the same ports and
   reads every task's duration off the timeline (:func:`task_times`); the critical path method
   on those durations (:func:`solvers.joint.critical_path.schedule`) gives each transfer and
   all-reduce its slack and criticality ``dur / (dur + slack)``.
2. :func:`window_problem` turns that into a congestion problem the routing LP and the circuit
   constructions understand: the ideal iteration is cut into ``K`` windows of equal length; a
   window is one phase, holding the bytes of every communication task in flight during it
   (pro rata of its overlap with the window), each weighted by the task's criticality (at
   least ``floor``, so every pair and group keeps a route and a ring). Summed over windows, the
   most congested link's time approximates the network-bound part of the iteration, counted
   where it hurts: a transfer with much slack barely counts, one on the critical path fully,
   and transfers that are in flight at different times no longer compete as they do in the
   per-phase traffic matrix (which treats a whole forward pass as simultaneous).
3. :func:`remap_rings` carries the ring orders chosen on the windows back to the original
   problem's phases and groups (the realisation, :func:`solvers.realise.design_workload`, looks
   rings up by phase and server set).
4. :func:`iteration_time` realises a design and returns its flow-model iteration time under a
   work limit of sub-flow re-fills.

No priorities are assumed anywhere: the flow model shares links max-min fairly between all
flows, critical or not, and so does every design this objective returns (criticality only
weighs what the optimizer routes and wires for).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from solvers.joint.critical_path import Schedule, criticality, schedule
from solvers.model.design import Design
from solvers.model.problem import DesignProblem, PhaseTraffic, _merge_groups, ring_factor
from topoopt.fabrics.circuits import Circuits
from traffic.workload import TaskGraph, Workload

__all__ = [
    "has_compute_model",
    "task_times",
    "ideal_reference",
    "window_problem",
    "remap_rings",
    "iteration_time",
    "DEFAULT_FLOOR",
    "window_count",
    "two_hop_spread",
    "spread_routing",
]

DEFAULT_FLOOR = 0.05
"""Smallest criticality weight of a communication task in :func:`window_problem`."""


def window_count(n: int) -> int:
    """Windows of :func:`window_problem` for ``n`` servers: 16 up to 32 servers, fewer above
    (each window is one phase of every routing LP, whose size grows with ``n^2 d``).

    >>> [window_count(n) for n in (16, 32, 64, 128, 256)]
    [16, 16, 8, 4, 2]
    """
    return int(min(16, max(2, 512 // max(n, 1))))


def has_compute_model(workload: Workload | None) -> bool:
    """True when the flow model can simulate ``workload``'s iteration (a task graph, or a
    plan-derived workload with per-stage FLOPs)."""
    if workload is None:
        return False
    return workload.taskgraph is not None or bool(
        workload.info.get("forward_flops_per_microbatch_per_gpu")
    )


def _timeline_tasks(tg: TaskGraph) -> np.ndarray:
    """Task indices in the order :func:`simulate_iteration` adds them to its timeline."""
    kind = tg.kind
    comp = np.flatnonzero(np.isin(kind, ("forward", "backward", "update")))
    cm = np.flatnonzero(kind == "comm")
    tr = np.flatnonzero(kind == "transfer")
    ar = np.flatnonzero((kind == "all-reduce") & (tg.demand[:, 0] >= 0))
    return np.concatenate([comp, cm, tr, ar])


def task_times(result, tg: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """``(start_s, finish_s)`` of every task of ``tg`` in a simulated iteration ``result``
    (:class:`topoopt.flowsim.iteration.IterationResult` of a task-graph workload); tasks the
    timeline does not list (barriers, one-server all-reduces) get NaN.

    The timeline keeps the order tasks were added in its index: compute tasks, intra-server
    copies, transfers, then all-reduces, each in task order. A timeline of another length raises
    ``ValueError``.
    """
    tl = result.timeline.sort_index()
    order = _timeline_tasks(tg)
    if len(tl) != order.size:
        raise ValueError(f"timeline has {len(tl)} tasks, the task graph {order.size}")
    start = np.full(tg.n_tasks, np.nan)
    finish = np.full(tg.n_tasks, np.nan)
    start[order] = tl["start_s"].to_numpy()
    finish[order] = tl["finish_s"].to_numpy()
    return start, finish


def ideal_reference(
    workload: Workload, degree: int, link_bandwidth: float, max_refills: int | None = None
):
    """The iteration on the ideal switch of ``degree`` ports of ``link_bandwidth`` per server, as
    the bound (:func:`topoopt.fabrics.ideal.ideal_bound`: one link's latency server to server,
    the least a circuit has; the plain :func:`~topoopt.fabrics.ideal.ideal` takes two, so its
    iteration was up to 23 us above a direct design's on ``vgg16-dp`` and the search's "lower
    bound" above its incumbent, clipped to a gap of 0 and called optimal).

    Returns
    -------
    result : IterationResult
        The flow model's simulation.
    sched : Schedule or None
        CPM on the durations the ideal run gave every task (task graphs only; ``None`` for a
        plan-derived workload, whose task graph lives inside the flow model).
    """
    from topoopt.fabrics.ideal import ideal_bound
    from topoopt.flowsim.iteration import simulate_iteration

    fab = ideal_bound(
        workload.servers, degree, link_bandwidth, gpus_per_server=workload.gpus_per_server
    )
    res = simulate_iteration(
        workload, fab, exposed_by_class=False, record_series=False, max_refills=max_refills
    )
    tg = workload.taskgraph
    if tg is None:
        return res, None
    start, finish = task_times(res, tg)
    dur = np.nan_to_num(finish - start, nan=0.0)
    return res, schedule(tg.n_tasks, tg.edges, np.maximum(dur, 0.0))


def window_problem(
    problem: DesignProblem,
    sched: Schedule,
    n_windows: int | None = None,
    floor: float = DEFAULT_FLOOR,
) -> DesignProblem:
    """The criticality-weighted window problem (module docstring, step 2).

    Parameters
    ----------
    problem : DesignProblem
        Built from a task-graph workload (``problem.workload.taskgraph`` set).
    sched : Schedule
        CPM of the ideal run (:func:`ideal_reference`): the windows follow its times.
    n_windows : int, optional
        Default :func:`window_count`.
    floor : float
        Smallest weight of a task (every pair and group keeps some bytes).

    Returns
    -------
    DesignProblem
        Same servers, ports and options; phases ``w0 .. w{K-1}`` (empty windows dropped).
    """
    w = problem.workload
    tg = w.taskgraph
    n, gps = problem.n, w.gpus_per_server
    K = window_count(n) if n_windows is None else int(n_windows)
    crit = np.maximum(criticality(sched), floor)
    span = max(sched.makespan_s, 1e-300)
    edges = np.linspace(0.0, span, K + 1)
    st, fi = sched.earliest_start_s, sched.earliest_finish_s

    def shares(t: int) -> np.ndarray:
        """Fraction of task ``t``'s bytes in each window."""
        a, b = st[t], fi[t]
        if b <= a:
            k = min(int(np.searchsorted(edges, a, side="right")) - 1, K - 1)
            out = np.zeros(K)
            out[max(k, 0)] = 1.0
            return out
        ov = np.clip(np.minimum(edges[1:], b) - np.maximum(edges[:-1], a), 0.0, None)
        return ov / ov.sum() if ov.sum() > 0 else np.full(K, 1.0 / K)

    fixed_r: list[list[int]] = [[] for _ in range(K)]
    fixed_c: list[list[int]] = [[] for _ in range(K)]
    fixed_b: list[list[float]] = [[] for _ in range(K)]
    sets: list[list[np.ndarray]] = [[] for _ in range(K)]
    byts: list[list[float]] = [[] for _ in range(K)]
    for t in np.flatnonzero(tg.demand[:, 0] >= 0).tolist():
        f, r = (int(x) for x in tg.demand[t])
        d = w.demands[f]
        size = float(tg.size_bytes[t]) * crit[t]
        if size <= 0:
            continue
        sh = shares(t)
        row = d.groups[r]
        srv = row // gps
        if d.mutable and d.op in ("all-reduce", "reduce-scatter", "all-gather"):
            s = np.unique(srv)
            if s.size < 2:
                continue
            per = ring_factor(d.op, s.size) * size
            for k in np.flatnonzero(sh > 0).tolist():
                sets[k].append(s)
                byts[k].append(per * sh[k])
        elif d.op == "send":
            a, b = int(srv[0]), int(srv[1])
            if a == b:
                continue
            for k in np.flatnonzero(sh > 0).tolist():
                fixed_r[k].append(a)
                fixed_c[k].append(b)
                fixed_b[k].append(size * sh[k])
    phases = []
    for k in range(K):
        fixed = sp.csr_matrix((fixed_b[k], (fixed_r[k], fixed_c[k])), shape=(n, n))
        ptr, flat, rb = _merge_groups(sets[k], byts[k])
        ph = PhaseTraffic(f"w{k}", ptr, flat, rb, fixed)
        if ph.total_bytes() > 0:
            phases.append(ph)
    return problem.with_options(phases=tuple(phases), name=f"{problem.name} (windows)")


def remap_rings(design: Design, windows: DesignProblem, problem: DesignProblem) -> Design:
    """``design`` (solved on ``windows``) with its rings re-keyed to ``problem``'s phases and
    groups: each original group takes the rings of the window where its server set carries the
    most bytes (groups absent from every window get none: the flow model then runs them in
    ascending order on the design's routes)."""
    from dataclasses import replace

    best: dict[tuple[int, ...], tuple[float, str, int]] = {}
    for ph in windows.phases:
        for g in range(ph.n_groups):
            key = tuple(ph.group(g).tolist())
            b = float(ph.ring_bytes[g])
            if key not in best or b > best[key][0]:
                best[key] = (b, ph.name, g)
    by_src: dict[tuple[str, int], list[dict]] = {}
    for r in design.rings:
        by_src.setdefault((r["phase"], int(r["group"])), []).append(r)
    rings = []
    for ph in problem.phases:
        for g in range(ph.n_groups):
            key = tuple(ph.group(g).tolist())
            if key not in best:
                continue
            _, wname, wg = best[key]
            for r in by_src.get((wname, wg), []):
                rings.append({**r, "phase": ph.name, "group": g})
    return replace(design, rings=tuple(rings))


def iteration_time(
    design: Design,
    problem: DesignProblem,
    max_refills: int | None = None,
    flows: bool = False,
    compute_s: float | None = None,
) -> tuple:
    """``(iteration_s, refills)``: the flow model's iteration time of ``design`` (realised as
    :func:`solvers.realise.simulate_design` does) and the sub-flow re-fills it took; with
    ``flows`` also the number of flows simulated (``(iteration_s, refills, flows)``).

    ``iteration_s`` is ``inf`` when the work limit ``max_refills`` stops the simulation.
    ``compute_s``: the workload's compute-only iteration time when known (e.g. from
    :func:`ideal_reference`'s result), which saves the flow model that simulation."""
    from solvers.realise import design_fabric, design_routing, design_workload
    from topoopt.flowsim.iteration import simulate_iteration
    from topoopt.flowsim.simulator import WorkLimitExceeded

    w = problem.workload
    fabric = design_fabric(design, gpus_per_server=w.gpus_per_server)
    routing = design_routing(design, fabric)
    try:
        it = simulate_iteration(
            design_workload(w, design, problem),
            fabric,
            routing=routing,
            exposed_by_class=False,
            record_series=False,
            max_refills=max_refills,
            compute_s=compute_s,
            priority=getattr(design, "priority", ()) or None,
        )
    except WorkLimitExceeded as e:
        return (math.inf, int(e.refills), 0) if flows else (math.inf, int(e.refills))
    out = (float(it.iteration_s), int(it.info["refills"]))
    return (*out, int(it.info["flows"])) if flows else out


def two_hop_spread(circuits: Circuits, n: int, src: np.ndarray, dst: np.ndarray):
    """The widest routing of at most two hops for each pair ``(src[k], dst[k])``.

    The direct circuits (weight = their number ``m_uv``) and every two-hop path ``u -> x -> v``
    (weight ``min(m_ux, m_xv)``: the parallel circuits it can use on its scarcer hop), weights
    normalised per pair. Alone on the network, a transfer routed so sends on every path at
    once: on ``P`` link-disjoint single circuits it takes ``1 / P`` of its one-circuit time,
    which is what the ideal switch grants it (all ``d`` ports). Pairs with neither a circuit
    nor a common neighbour get no paths.

    Returns
    -------
    list of list of (list[int], float)
        Per pair, its ``(server path, weight)`` list
        (:meth:`solvers.model.design.NodePaths.to_lists` form).

    Examples
    --------
    Square 0-1-2-3-0 with a doubled diagonal 0-2: 0 -> 2 goes 1/2 direct, 1/4 via 1, 1/4 via 3.

    >>> c = Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1], [0, 2, 2]], 4)
    >>> two_hop_spread(c, 4, np.array([0]), np.array([2]))
    [[([0, 2], 0.5), ([0, 1, 2], 0.25), ([0, 3, 2], 0.25)]]
    """
    c = circuits.rows
    m = np.zeros((n, n))
    np.add.at(m, (c[:, 0], c[:, 1]), c[:, 2])
    np.add.at(m, (c[:, 1], c[:, 0]), c[:, 2])
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    via = np.minimum(m[src, :], m[:, dst].T)  # (K, n): circuits of u -> x -> v
    via[np.arange(src.size), src] = 0.0
    via[np.arange(src.size), dst] = 0.0
    direct = m[src, dst]
    total = direct + via.sum(axis=1)
    out: list[list[tuple[list[int], float]]] = []
    for k in range(src.size):
        u, v, tot = int(src[k]), int(dst[k]), float(total[k])
        if tot <= 0:
            out.append([])
            continue
        paths = [([u, v], float(direct[k]) / tot)] if direct[k] > 0 else []
        xs = np.flatnonzero(via[k] > 0)
        paths += [([u, int(x), v], float(via[k, x]) / tot) for x in xs]
        out.append(paths)
    return out


def spread_routing(design: Design, alpha: float) -> Design:
    """``design`` with every routed pair's paths blended with :func:`two_hop_spread`:
    ``(1 - alpha)`` of its bytes on the design's own paths, ``alpha`` on the widest two-hop
    ones (pairs without such paths keep theirs). Bytes are conserved (weights sum to one).

    The routing LP minimises the most congested link, counting all transfers of a phase or
    window as simultaneous; it gives a pair as many paths as balancing needs, typically one.
    In the flow model a critical transfer is often alone on its links for a moment, and then
    its speed is its paths' total capacity: the blend trades congestion for that width, and the
    flow model picks ``alpha``.

    Examples
    --------
    >>> from solvers.model.design import NodePaths
    >>> c = np.array([[0, 1, 1], [1, 2, 1], [0, 2, 1]])
    >>> rt = NodePaths.from_lists([0], [2], [[([0, 2], 1.0)]])
    >>> d = Design(3, 2, 1.0, c, (), rt, "joint", "feasible", 1.0, 0.0, 1.0, 0.0, {})
    >>> spread_routing(d, 0.5).routing.to_lists()
    [[([0, 2], 0.75), ([0, 1, 2], 0.25)]]
    """
    from dataclasses import replace

    from solvers.model.design import NodePaths

    a = float(alpha)
    rt = design.routing
    if a <= 0 or rt.n_commodities == 0:
        return design
    wide = two_hop_spread(design.circuits, design.servers, rt.src, rt.dst)
    own = rt.to_lists()
    blended = []
    for k in range(rt.n_commodities):
        if not wide[k]:
            blended.append(own[k])
            continue
        acc: dict[tuple[int, ...], float] = {}
        for path, wt in own[k]:
            acc[tuple(path)] = acc.get(tuple(path), 0.0) + (1.0 - a) * wt
        for path, wt in wide[k]:
            acc[tuple(path)] = acc.get(tuple(path), 0.0) + a * wt
        blended.append([(list(p), wt) for p, wt in acc.items() if wt > 0])
    return replace(design, routing=NodePaths.from_lists(rt.src, rt.dst, blended))
