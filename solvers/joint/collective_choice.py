"""The joint optimizer's post-pass: run a collective by a Blink tree packing where it beats rings.

The joint optimizer designs circuits and, for every mutable all-reduce, reduce-scatter and
all-gather group, a mixture of rings. On an irregular circuit graph rings cannot always use every
circuit a group has; a Blink packing of spanning trees
(:func:`solvers.collectives.blink.pack_trees`) can. :func:`choose_collectives` tries, for the
final design, each collective family the design routes as rings:

- *what graph*: the group's servers and the design's circuits between them (parallel circuits
  bundled), as a direct-connect fabric of its own; transfers between members that are not
  neighbours are forwarded by other members on that graph's fewest-hop (ECMP) routes, never by
  servers outside the group. Groups whose circuits do not connect them are skipped;
- *what schedule*: the packing's trees in the fluid limit of pipelining
  (:func:`solvers.collectives.schedule.tree_schedule` with ``chunks=None``: one transfer per
  tree arc, all released together, like the flow model's fluid rings), recorded in
  ``design.collectives`` and simulated through :attr:`traffic.workload.Demand.schedule`
  (:func:`solvers.realise.design_workload`); only rows with one GPU per server qualify;
- *when it is kept*: families are tried one after the other, each on top of the ones kept so
  far, and kept only when the flow model's iteration (:func:`solvers.joint.flow_select.flow_times`;
  communication alone when the workload has no compute model) is shorter than without it by more
  than :data:`MIN_GAIN`. The design is therefore never slower than its rings in the flow model.

Determinism and limits: the packing is column generation under :data:`PACKING_ROUNDS` rounds;
at most :data:`MAX_FAMILIES` families of at most :data:`MAX_MEMBERS` servers are tried, and each
trial simulation may use :data:`REFILL_FACTOR` times the ring simulation's sub-flow re-fills
(a trial that needs more is not kept). What was skipped, and why, is in the returned ``info``.
Task-graph workloads are skipped (their tasks name ring families).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from solvers.collectives.blink import PackingStopped
from solvers.model.design import Design
from solvers.model.problem import DesignProblem
from traffic.workload import Workload

__all__ = [
    "MAX_MEMBERS",
    "MAX_FAMILIES",
    "PACKING_ROUNDS",
    "REFILL_FACTOR",
    "MIN_GAIN",
    "ring_families",
    "blink_entry",
    "choose_collectives",
]

MAX_MEMBERS = 32
"""Largest group (servers) a packing is computed for (the overlay has ``n(n-1)`` arcs and an
all-reduce ``2n`` commodities; above this it cannot pay within the joint's budget)."""

MAX_FAMILIES = 8
"""At most this many collective families are tried (in workload order)."""

PACKING_ROUNDS = 60
"""Column-generation rounds of each packing (deterministic work limit)."""

REFILL_FACTOR = 4.0
"""A trial simulation may use this many times the ring simulation's sub-flow re-fills."""

MIN_GAIN = 1e-9
"""Relative improvement of the simulated time a packing must bring to be kept."""

_ORDERED_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def ring_families(
    design: Design, problem: DesignProblem, workload: Workload
) -> list[tuple[str, int, str, tuple[int, ...]]]:
    """``(phase, group, collective, servers)`` of every mutable collective family the design
    routes as rings whose rows have one GPU per server, in workload order.

    Examples
    --------
    >>> from traffic.workload import Demand
    >>> from solvers.baselines.topoopt_method import topoopt_design
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(4).reshape(1, 4), 4e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> ring_families(topoopt_design(p), p, w)
    [('backward', 0, 'all-reduce', (0, 1, 2, 3))]
    """
    groups = {}
    for ph in problem.phases:
        for k in range(ph.n_groups):
            groups[(ph.name, tuple(int(x) for x in np.sort(ph.group(k))))] = k
    ringed = {(r["phase"], int(r["group"])) for r in design.rings}
    single = [ph.name for ph in problem.phases] == ["iteration"]
    out: list[tuple[str, int, str, tuple[int, ...]]] = []
    for d in workload.demands:
        if not (d.mutable and d.op in _ORDERED_OPS and d.group_size > 1 and d.n_groups):
            continue
        phase = "iteration" if single else d.phase
        servers = np.sort(d.groups, axis=1) // workload.gpus_per_server
        for row in np.unique(servers, axis=0):
            key = tuple(int(x) for x in row)
            if len(set(key)) != d.group_size or (phase, key) not in groups:
                continue
            g = groups[(phase, key)]
            fam = (phase, g, d.op, key)
            if (phase, g) in ringed and fam not in out:
                out.append(fam)
    return out


def blink_entry(
    design: Design, phase: str, group: int, collective: str, members: tuple[int, ...]
) -> dict | None:
    """The ``design.collectives`` entry of a Blink packing of ``collective`` on the group's
    servers and the design's circuits between them (module docstring); None when those
    circuits do not connect the group.

    Examples
    --------
    Four servers on a ring of single circuits: the packing's all-gather moves ``3/4`` of ``S``
    into every server (``fraction`` sums to ``3``, the ring's wire bytes per byte of ``S``):

    >>> from solvers.model.design import NodePaths
    >>> c = np.array([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]])
    >>> d = Design(4, 2, 1e9, c, (), NodePaths.empty(), "x", "feasible", 1.0, 0.0, 0.0, 0.0)
    >>> e = blink_entry(d, "iteration", 0, "all-gather", (0, 1, 2, 3))
    >>> e["algorithm"], round(sum(e["fraction"]), 9)
    ('blink', 3.0)
    """
    from solvers.collectives.blink import pack_trees
    from solvers.collectives.overlay import overlay
    from solvers.collectives.schedule import tree_schedule
    from topoopt.fabrics.direct_connect import direct_connect

    m = np.asarray(members, np.int64)
    k = m.size
    pos = np.full(design.servers, -1, np.int64)
    pos[m] = np.arange(k)
    c = design.circuits.rows
    inside = (pos[c[:, 0]] >= 0) & (pos[c[:, 1]] >= 0) if c.size else np.zeros(0, bool)
    sub = np.column_stack([pos[c[inside, 0]], pos[c[inside, 1]], c[inside, 2]])
    if sub.shape[0] == 0:
        return None
    adj = csr_matrix((np.ones(sub.shape[0]), (sub[:, 0], sub[:, 1])), shape=(k, k))
    if connected_components(adj, directed=False)[0] != 1:
        return None
    fab = direct_connect(k, design.degree, circuits=sub, port_bandwidth=design.link_bandwidth)
    p = pack_trees(overlay(fab), collective, max_rounds=PACKING_ROUNDS)
    s = tree_schedule(collective, k, 1.0, list(p.trees), algorithm="blink")
    f = s.flows
    keep = f.bytes > 0
    return {
        "phase": phase,
        "group": int(group),
        "collective": collective,
        "algorithm": "blink",
        "members": m.tolist(),
        "src": f.src[keep].tolist(),
        "dst": f.dst[keep].tolist(),
        "fraction": f.bytes[keep].tolist(),
        "info": {
            "trees": len(p.trees),
            "packing_rate_bytes_per_s": float(p.rate),
            "packing_status": p.status,
            "lp_rounds": int(p.iterations),
        },
    }


def _metric(comm: float, it: float) -> float:
    return comm if math.isnan(it) else it


def choose_collectives(
    design: Design,
    problem: DesignProblem,
    workload: Workload | None,
    known: tuple[float, float, int] | None = None,
    deadline: float | None = None,
) -> tuple[Design, dict]:
    """``design`` with the Blink packings that shorten its simulated iteration (module
    docstring), and what was tried.

    Parameters
    ----------
    design : Design
        The joint optimizer's final design.
    problem : DesignProblem
    workload : Workload or None
        The GPU-level workload (None: nothing is tried).
    known : (float, float, int), optional
        :func:`~solvers.joint.flow_select.flow_times` of ``design`` (with its rings) when
        already simulated: communication, iteration (NaN without a compute model), re-fills.
    deadline : float, optional
        :func:`time.perf_counter` time by which the pass ends: each simulation then runs in a
        child process killed at the deadline (:func:`~solvers.joint.flow_select.score`), no
        family is tried after it, and ``info["time_limit"]`` is True when it cut the pass (the
        design keeps what was picked before).

    Returns
    -------
    (Design, dict)
        The design (``collectives`` set when a packing was kept) and ``info``: ``ring_comm_s``,
        ``ring_iteration_s``, ``comm_s``, ``iteration_s`` (the flow model's times of the
        returned design; NaN iteration without a compute model), ``tried`` (one record per
        family: phase, group, collective, servers, outcome and times) and ``skipped`` (why a
        family or the whole pass was not tried).

    Examples
    --------
    A 4-server ring design: rings are as good as any packing there, so they are kept.

    >>> from traffic.workload import Demand
    >>> from solvers.baselines.topoopt_method import topoopt_design
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(4).reshape(1, 4), 4e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> d, info = choose_collectives(topoopt_design(p), p, w)
    >>> d.collectives, [t["outcome"] for t in info["tried"]]
    ((), ['rings kept (not faster)'])
    """
    from topoopt.flowsim.simulator import WorkLimitExceeded

    info: dict = {"tried": [], "skipped": []}

    def times(d: Design, cap: int | None) -> tuple[float, float, int] | None:
        """The flow model's times of ``d``; None when the deadline cut the simulation."""
        from solvers.joint.flow_select import flow_times, score

        if deadline is None:
            return flow_times(d, problem, workload, max_refills=cap)
        sc = score("trial", d, problem, workload, deadline - time.perf_counter(), cap)
        if sc.over_budget and not sc.too_large:
            raise WorkLimitExceeded(sc.refills, cap)
        if sc.timed_out or not np.isfinite(sc.comm_s):
            info["time_limit"] = True
            return None
        return sc.comm_s, sc.iteration_s, sc.refills

    if workload is None:
        info["skipped"].append("no workload: the flow model cannot judge")
        return design, info
    if workload.taskgraph is not None:
        info["skipped"].append("task-graph workload (its tasks name ring families)")
        return design, info
    fams = ring_families(design, problem, workload)
    if not fams:
        info["skipped"].append("no ring family with one GPU per server")
        return design, info
    if known is not None and np.isfinite(known[0]) and not design.collectives:
        comm, it, used = float(known[0]), float(known[1]), int(known[2])
    else:
        got = times(design, None)
        if got is None:
            info["skipped"].append("time limit: the design's own simulation was cut")
            return design, info
        comm, it, used = got
    info["ring_comm_s"], info["ring_iteration_s"] = comm, it
    best = _metric(comm, it)
    cap = int(REFILL_FACTOR * max(used, 1000))
    cur = design
    for j, (phase, g, op, key) in enumerate(fams):
        rec = {"phase": phase, "group": g, "collective": op, "servers": len(key)}
        if info.get("time_limit") or (deadline is not None and time.perf_counter() >= deadline):
            info["time_limit"] = True
            info["skipped"].append(f"{phase} group {g} {op}: the time limit was up")
            continue
        if j >= MAX_FAMILIES:
            info["skipped"].append(f"{phase} group {g} {op}: beyond {MAX_FAMILIES} families")
            continue
        if len(key) > MAX_MEMBERS:
            info["skipped"].append(f"{phase} group {g} {op}: {len(key)} > {MAX_MEMBERS} servers")
            continue
        try:
            entry = blink_entry(cur, phase, g, op, key)
        except PackingStopped as exc:  # a limit of the LP: the rings stay, as on every limit
            rec["outcome"] = f"rings kept (the tree-packing LP stopped with status {exc.status})"
            info["tried"].append(rec)
            continue
        if entry is None:
            rec["outcome"] = "skipped (the group's circuits do not connect it)"
            info["tried"].append(rec)
            continue
        trial = replace(cur, collectives=(*cur.collectives, entry))
        try:
            got = times(trial, cap)
        except WorkLimitExceeded:
            rec["outcome"] = f"rings kept (the trial needs more than {cap} re-fills)"
            info["tried"].append(rec)
            continue
        if got is None:
            rec["outcome"] = "rings kept (the time limit cut the trial)"
            info["tried"].append(rec)
            continue
        c2, it2, _ = got
        rec.update(comm_s=c2, iteration_s=it2, packing=entry["info"])
        if _metric(c2, it2) < best * (1 - MIN_GAIN):
            cur, best, comm, it = trial, _metric(c2, it2), c2, it2
            rec["outcome"] = "blink"
        else:
            rec["outcome"] = "rings kept (not faster)"
        info["tried"].append(rec)
    info["comm_s"], info["iteration_s"] = comm, it
    return cur, info
