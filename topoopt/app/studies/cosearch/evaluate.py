"""One evaluation of a co-search: a plan on a fabric, judged by the flow model; and the bounds.

:func:`evaluate` is a pure function of its :class:`EvalTask` (every random choice takes the task's
seed, the ``joint`` optimizer stops on its deterministic work limit), so it can run in any process
(:mod:`topoopt.app.studies.engine`) and give the same answer.

Bounds (:func:`compute_bound`): the iteration model (:mod:`topoopt.flowsim.iteration`) runs stage
``i`` of ``p`` a forward of ``f_i / v`` and a backward of ``r f_i / v`` seconds per chunk of a
micro-batch (``r = 2``, 3 with full recomputation, ``f_i`` = forward FLOPs / achieved FLOP/s)
and the optimizer ``o_i`` after the stage's last backward. Whatever the network:

* stage ``i`` starts after micro-batch 0's first chunk went through stages ``0..i-1``:
  ``sum_{j<i} f_j / v``;
* it then computes ``m (1 + r) f_i`` seconds in all;
* its last backward (of the first chunk) must still go down stages ``i-1..0``:
  ``sum_{j<i} r f_j / v``, after which stage 0 runs its optimizer ``o_0``; and stage ``i``'s
  optimizer follows its own last backward.

so ``T >= max_i [ sum_{j<i} f_j / v + m (1 + r) f_i + max(o_i, sum_{j<i} r f_j / v + o_0) ]``
(:func:`compute_bound`): the *compute-only* bound. It equals the flow model's ``compute_s`` (the
makespan with every transfer instantaneous) for 1F1B pipelines, whose critical path is exactly
this, and is below it otherwise. Any network only adds to it.

*Ideal-switch* bound (:func:`network_bound`): on one non-blocking switch with ``degree x B`` per
server (the ideal fabric of :mod:`topoopt.app.studies.compare`), everything server ``s`` sends to
other servers crosses its uplink and everything it receives its downlink, so the iteration takes
at least ``max_s max(out_s, in_s) / (degree B)`` with ``out_s``, ``in_s`` the row and column
sums of the server traffic matrix off the diagonal (:func:`traffic.expand.server_matrix`, ring
collectives as the flow model expands them). The search uses ``max(compute, ideal-switch)``: a
lower bound on the candidate's ideal-switch iteration, computed without simulating.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from topoopt.app.studies.cosearch.space import Candidate, candidate_plan, table_gpus
from topoopt.flowsim.iteration import TooManyFlows, simulate_iteration
from topoopt.flowsim.roofline import (
    RooflineParams,
    forward_time,
    optimizer_time,
    plan_gpu,
    throughput_facts,
)
from traffic.build import workload_from_plan
from traffic.memory import memory_per_gpu
from traffic.models import megatron
from traffic.models.recsys import dims_per_gpu, mlp_parameters, recsys_demands
from traffic.placement import rank_grids
from traffic.plan import Plan
from traffic.workload import Workload

__all__ = [
    "MAX_FLOWS",
    "SCREEN_FLOWS",
    "SCREEN_MAX_BUCKETS",
    "EvalTask",
    "compute_bound",
    "design_summary",
    "evaluate",
    "network_bound",
    "workload_for",
]

DESIGNED = ("topoopt", "topoopt-released", "joint")

SCREEN_FLOWS = 500_000
"""Screening evaluations are exact up to this many flows, coarsened above
(:data:`SCREEN_MAX_BUCKETS`)."""

SCREEN_MAX_BUCKETS = 256
"""Gradient-sync buckets per channel of a coarsened evaluation (``simulate_iteration``'s
``max_buckets``): it changes only families asking more, i.e. ZeRO-2 / FSDP collectives that
repeat every micro-batch (``docs/cosearch.md`` gives its measured error)."""

MAX_FLOWS = 2_000_000
"""Size guard of one evaluation: an iteration of more flows is not built (about 0.3 kB each while
building; 2 M flows stay under 1 GB per worker). An exact evaluation above it falls back to the
screening coarsening; a candidate above it even so gets a ``skipped`` record."""


def workload_for(base: dict, cand: Candidate) -> tuple[Plan, Workload]:
    """The candidate's plan and Workload (recommendation models: with its table placement)."""
    plan = candidate_plan(base, cand)
    w = workload_from_plan(plan, name=cand.label or plan.model.name)
    if cand.table_servers is not None:
        tg = table_gpus(cand.table_servers, plan.cluster.gpus_per_server)
        dense, _ = rank_grids(1, 1, plan.gpus, order=plan.parallelism.order)
        demands = recsys_demands(plan, dense, tg)
        info = dict(w.info)
        dims = dims_per_gpu(plan.model, plan.gpus, tg)
        info["embedding_dims_per_gpu"] = dims.tolist() if dims.size <= 4096 else None
        conv = dict(w.conventions)
        conv["embedding_sharding"] = (
            f"table-wise, each table on one server ({len(set(cand.table_servers))} servers "
            "hold tables), a server's tables round-robin over its GPUs"
        )
        w = replace(w, demands=tuple(demands), info=info, conventions=conv)
    return plan, w


def _stage_times(plan: Plan, gpu: RooflineParams):
    m = plan.model
    mem = None
    if m.kind == "transformer":
        flops = megatron.forward_flops(plan)
        mem = megatron.forward_memory_bytes(plan) or None
        params = [p.dense + p.expert for p in megatron.stage_parameters(plan)]
    elif m.kind == "recsys":
        flops = [2.0 * plan.parallelism.micro_batch_size * mlp_parameters(m)]
        params = [mlp_parameters(m)]
    else:
        flops = [plan.parallelism.micro_batch_size * float(m.forward_flops_per_sample)]
        params = [int(m.parameters)]
    f = np.asarray(forward_time(np.asarray(flops, float), mem, gpu), float).reshape(-1)
    o = np.asarray(optimizer_time(np.asarray(params, float), gpu), float).reshape(-1)
    return f, o


def compute_bound(plan: Plan, gpu: RooflineParams | None = None) -> float:
    """Compute-only lower bound of the iteration time, seconds (module docstring).

    ``gpu`` defaults to the plan's ``cluster.gpu`` (:func:`topoopt.flowsim.roofline.plan_gpu`).

    Examples
    --------
    One stage: ``m`` forwards and backwards then the optimizer.

    >>> from traffic.plan import load_plan
    >>> p = load_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16},
    ...                "cluster": {"servers": 16, "gpus_per_server": 8}})
    >>> round(compute_bound(p), 2)
    180.17
    """
    f, o = _stage_times(plan, plan_gpu(plan) if gpu is None else gpu)
    par = plan.parallelism
    p = f.size
    v = par.vpp if p > 1 else 1
    r = 3.0 if plan.model.kind == "transformer" and par.recompute == "full" else 2.0
    m = plan.micro_batches
    fill = np.concatenate([[0.0], np.cumsum(f / v)[:-1]])
    drain = np.concatenate([[0.0], np.cumsum(r * f / v)[:-1]])
    per = fill + m * (1.0 + r) * f + np.maximum(o, drain + o[0])
    return float(per.max())


def network_bound(workload: Workload, degree: int, link_bandwidth: float) -> float:
    """Ideal-switch lower bound of the iteration, seconds (module docstring).

    Examples
    --------
    Two servers exchanging 1 GB each way through one 12.5 GB/s port: 0.08 s.

    >>> from traffic.workload import Demand
    >>> d = Demand("send", np.array([[0, 1], [1, 0]]), 1e9, "pp", "forward")
    >>> w = Workload(gpus=2, gpus_per_server=1, demands=(d,))
    >>> network_bound(w, 1, 12.5e9)
    0.08
    """
    from traffic.expand import server_matrix

    m = server_matrix(workload).tocsr()
    m.setdiag(0.0)
    out_b = np.asarray(m.sum(axis=1)).ravel()
    in_b = np.asarray(m.sum(axis=0)).ravel()
    peak = max(float(out_b.max(initial=0.0)), float(in_b.max(initial=0.0)))
    return peak / (degree * float(link_bandwidth))


@dataclass(frozen=True)
class EvalTask:
    """One evaluation: ``candidate`` of ``base`` on ``fabric``.

    Attributes
    ----------
    index : int
        Position in the search's list of evaluations (results are collected by it).
    base : dict
        Model, precision, options and cluster (:func:`.space.base_mapping`).
    candidate : Candidate
    fabric : str
        A fabric name of :data:`topoopt.app.studies.compare.FABRICS`.
    degree, link_bandwidth : int, float
        Ports per server and bytes/s per port.
    seed : int
    work_limit : float or None
        Deterministic work budget of the ``joint`` optimizer.
    fixed_design : Design, optional
        Evaluate on this optical design (the alternating search's current topology) instead of
        designing one for the candidate; its fabric's own routing carries the traffic.
    keep_design : bool
        Return the design (circuits) and the server traffic matrix, for reports.
    stage : str
        The search level that asked (a label).
    screening : bool
        The search's ranking levels: exact when the iteration has at most
        :data:`SCREEN_FLOWS` flows, else with at most :data:`SCREEN_MAX_BUCKETS` gradient
        buckets per channel; otherwise exact up to :data:`MAX_FLOWS` flows, else coarsened
        the same way (``coarsened`` in the record).
    memory_share_bytes : float or None
        The arrays one evaluation may hold (``TOPOOPT_MEMORY_BUDGET_GB`` over the workers, set
        by the search): an evaluation whose estimate
        (:func:`topoopt.flowsim.work.estimate_work`, with the fabric's ECMP paths) exceeds it
        is not built (``skipped``): checked before the fabric or design is built (on one path
        a flow), and again on the fabric's paths. None: no share (only the flow limits).
    """

    index: int
    base: dict
    candidate: Candidate
    fabric: str
    degree: int
    link_bandwidth: float
    seed: int = 0
    work_limit: float | None = None
    fixed_design: Any = None
    keep_design: bool = False
    stage: str = ""
    screening: bool = False
    memory_share_bytes: float | None = None


def design_summary(design) -> dict[str, Any]:
    """JSON-ready view of a solver :class:`~solvers.model.design.Design`."""
    return {
        "solver": design.solver,
        "status": design.status,
        "circuits": design.circuits.tolist(),
        "objective_s": float(design.objective_s),
        "lower_bound_s": float(design.lower_bound_s),
        "work_used": design.info.get("work_used"),
        "deterministic": design.info.get("deterministic", True),
        "objective": design.info.get("objective"),
        "stopped_by": design.info.get("stopped_by"),
    }


def _search_warning(design, task: EvalTask) -> str | None:
    """The line of :func:`solvers.search_warning` for the design searched in this evaluation
    (it fell back to another objective, or the wall clock cut it), labelled with the fabric and
    the plan; None when it did neither, when nothing was searched, or when the design is the
    fixed one of another evaluation (that evaluation says it)."""
    if design is None or task.fixed_design is not None:
        return None
    from solvers import search_warning

    return search_warning(design, f"cosearch: {task.fabric} for {task.candidate.label}")


def _designed(w: Workload, name: str, task: EvalTask):
    from solvers import DesignProblem, design_fabric, design_routing, design_workload, solve

    problem = DesignProblem.from_workload(w, degree=task.degree, link_bandwidth=task.link_bandwidth)
    design = solve(problem, name, time_limit_s=3600.0, seed=task.seed, work_limit=task.work_limit)
    fab = design_fabric(design, gpus_per_server=w.gpus_per_server)
    return fab, design_workload(w, design, problem), design_routing(design, fab), design


def evaluate(task: EvalTask) -> dict[str, Any]:
    """Simulate one iteration of the task's candidate on its fabric; a JSON-ready record.

    Returns
    -------
    dict
        ``index``, ``key``, ``label``, ``fabric``, ``stage``, ``iteration_s``, ``compute_s``,
        ``exposed_comm_s``, ``capex_usd``, ``power_w``, ``memory_per_gpu_bytes``,
        ``compute_bound_s``, ``coarsened`` (buckets capped, :data:`SCREEN_MAX_BUCKETS`),
        ``flows`` (built), ``skipped`` (None, or why it was not simulated: its times are then
        infinite), ``search_warning`` (:func:`solvers.search_warning` of the design searched
        here, else None; the record carries it from any worker), ``wall_s`` and, with
        ``keep_design``, ``design`` and ``server_bytes`` (the
        server-level traffic matrix).
    """
    from topoopt.app.studies.compare import build_fabric
    from topoopt.fabrics.cost import cost as fabric_cost
    from topoopt.flowsim.work import estimate_work, fabric_paths

    t0 = time.perf_counter()
    plan, w = workload_for(task.base, task.candidate)
    share = task.memory_share_bytes
    exact_limit = SCREEN_FLOWS if task.screening else MAX_FLOWS
    tries = ((None, exact_limit), (SCREEN_MAX_BUCKETS, MAX_FLOWS))

    def too_large(workload, paths: int) -> str | None:
        """Why no try fits (flows or the memory share), or None."""
        why = None
        for max_buckets, limit in tries:
            est = estimate_work(workload, max_buckets=max_buckets, paths=paths)
            if est.flows > limit:
                why = f"too large: {est.flows:,} flows (limit {limit:,})"
            elif share is not None and est.array_bytes > share:
                why = (f"too large: about {est.array_bytes / 1e9:.3g} GB of arrays, more than "
                       f"this worker's share of the memory budget "
                       f"({share / 1e9:.3g} GB)")  # fmt: skip
            else:
                return None
        return why

    design = None
    routing = None
    priced = None
    early = None
    if share is not None:  # before any fabric or design (a design's searches simulate it)
        early = too_large(w, 1)
    if early is not None:
        fab = None
    elif task.fixed_design is not None:
        from solvers import design_fabric

        design = task.fixed_design
        fab = design_fabric(design, gpus_per_server=w.gpus_per_server)
        run_w = w
    elif task.fabric in DESIGNED:
        fab, run_w, routing, design = _designed(w, task.fabric, task)
    else:
        run = build_fabric(task.fabric, w, task.degree, task.link_bandwidth, seed=task.seed)
        fab, run_w, routing, design = run.fabric, run.workload, run.routing, run.design
        # compare's price of the fabric (one function): the cost-equivalent fat-tree and the
        # catalogue Clos are priced as bought, not re-priced from their arrays (issue 29.9)
        priced = (run.capex_usd, run.power_w)
    it, skipped = None, early
    paths = fabric_paths(fab, routing) if share is not None and early is None else 1
    for max_buckets, limit in tries if early is None else ():
        if share is not None:
            est = estimate_work(run_w, max_buckets=max_buckets, paths=paths)
            if est.array_bytes > share:
                skipped = (f"too large: about {est.array_bytes / 1e9:.3g} GB of arrays, more "
                           f"than this worker's share of the memory budget "
                           f"({share / 1e9:.3g} GB)")  # fmt: skip
                continue
        try:
            # through the exact symmetry quotient (the same times to rounding; issue 25: at
            # 16,384 GPUs the unreduced model takes tens of minutes and the quotient under one)
            it = simulate_iteration(
                run_w, fab, routing=routing, exposed_by_class=False, max_buckets=max_buckets,
                max_flows=limit, reduction=True,
            )  # fmt: skip
            break
        except TooManyFlows as e:
            skipped = f"too large: {e.n_flows:,} flows (limit {e.max_flows:,})"
    if fab is None:  # not built (too large): no network to price
        priced = (math.inf, math.inf)
    elif priced is None:
        c = fabric_cost(fab)
        priced = (c.capex_usd, c.power_w)
    tg = None
    if task.candidate.table_servers is not None:
        tg = table_gpus(task.candidate.table_servers, plan.cluster.gpus_per_server)
    mem = memory_per_gpu(plan, table_gpus=tg)
    out: dict[str, Any] = {
        "index": task.index,
        "key": task.candidate.key,
        "label": task.candidate.label,
        "plan": task.candidate.summary(),
        "fabric": task.fabric,
        "stage": task.stage,
        "iteration_s": float(it.iteration_s) if it is not None else math.inf,
        "compute_s": float(it.compute_s) if it is not None else math.inf,
        "exposed_comm_s": float(it.exposed_comm_s) if it is not None else math.inf,
        "coarsened": bool(it.info.get("buckets_capped")) if it is not None else False,
        "flows": int(it.info["flows"]) if it is not None else None,
        "skipped": None if it is not None else skipped,
        "capex_usd": float(priced[0]),
        "power_w": float(priced[1]),
        "memory_per_gpu_bytes": float(mem.total_bytes),
        "compute_bound_s": compute_bound(plan),
        "network_bound_s": network_bound(w, task.degree, task.link_bandwidth),
        "fixed_topology": task.fixed_design is not None,
        "search_warning": _search_warning(design, task),
        **throughput_facts(w, float(it.iteration_s) if it is not None else 0.0),
    }
    if task.keep_design:
        from traffic.expand import server_matrix

        out["design"] = design_summary(design) if design is not None else None
        out["server_bytes"] = np.asarray(server_matrix(w).toarray()).tolist()
        out["bytes_by_class"] = {k: float(v) for k, v in w.bytes_by_class().items()}
        out["design_object"] = design
    out["wall_s"] = time.perf_counter() - t0
    return out
