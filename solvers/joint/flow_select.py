"""The joint optimizer's last step: judge the finalists with the flow model, keep the fastest.

The optimizer's own objective (:mod:`solvers.model.congestion`: per phase, the most congested link)
ranks candidates quickly, but a design is judged by the flow model: max-min fair flows, ring
collectives as chained steps, phases in sequence. Two designs with nearly equal congestion can
differ in simulated time, and the congestion winner is sometimes slower. So the driver keeps a
few finalists (its best routed candidates and the TopoOpt baselines) and
:func:`select_by_flow` simulates each one (communication alone,
:func:`topoopt.flowsim.collectives.communication_time`, and the whole iteration,
:func:`topoopt.flowsim.iteration.simulate_iteration`, on the realised design,
:mod:`solvers.realise`), in the order given, while the deadline allows, and returns the one with
the shortest communication among those no slower than the ``topoopt`` baseline in either time
(and no worse in the optimizer's objective). The baseline is always simulated, so the choice is
never slower than it in the flow model. A finalist worse than the baseline in the objective
can never be chosen, so it is not simulated (``skipped``: no time, no memory spent on it; at
1,024 GPUs Llama 3 405B's such finalist took 7.49 GB). The objective's own pick (``pick``) is
simulated first, so the work limit goes to it before the others.

Work limit: the simulations can be given a budget of sub-flow re-fills (the flow model's
deterministic measure of work, :class:`topoopt.flowsim.simulator.WorkLimitExceeded`), shared
by the finalists in order; a finalist whose simulation needs more than what is left is not
judged (``over_budget``), and neither are the ones after it. The same inputs therefore select
the same design on any machine; the wall-clock deadline is only a cap on top.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from dataclasses import dataclass

from solvers.model.design import Design
from solvers.model.problem import DesignProblem
from traffic.workload import Workload

__all__ = ["FLOW_SELECT_MAX_FLOWS", "FlowScore", "flow_times", "score", "select_by_flow"]

FLOW_SELECT_MAX_FLOWS = 5_000_000
"""A plan-derived finalist whose iteration has more flows is not judged by the flow model
(``too_large``, like ``over_budget``: the objective decides); counted before any flow is built
(:class:`topoopt.flowsim.iteration.TooManyFlows`). ZeRO-3 / FSDP plans on 128 servers have tens
of millions."""


@dataclass(frozen=True)
class FlowScore:
    """Simulated times of one finalist: communication alone and the whole iteration (seconds),
    the wall time the two simulations took, whether a wall-clock timeout stopped them, whether
    the work limit did (the times are then ``inf``), the sub-flow re-fills they used, and
    whether the iteration has more than :data:`FLOW_SELECT_MAX_FLOWS` flows (``too_large``,
    with ``over_budget``; nothing is simulated), and whether it was not simulated because it
    cannot be chosen (``skipped``: worse than the reference in the optimizer's objective)."""

    name: str
    comm_s: float
    iteration_s: float
    wall_s: float
    timed_out: bool = False
    over_budget: bool = False
    refills: int = 0
    too_large: bool = False
    skipped: bool = False


def flow_times(
    design: Design,
    problem: DesignProblem,
    workload: Workload,
    max_refills: int | None = None,
) -> tuple[float, float, int]:
    """``(communication_s, iteration_s, refills)`` the flow model gives ``design``, and the
    sub-flow re-fills the simulations took (their deterministic work).

    ``iteration_s`` is NaN when the workload has no compute model (neither a plan's per-GPU
    FLOPs nor a task graph).

    The design is realised as the design benchmark does it (:func:`solvers.realise.design_fabric`,
    :func:`~solvers.realise.design_routing`, :func:`~solvers.realise.design_workload`); then
    :func:`topoopt.flowsim.collectives.communication_time` runs every phase's flows alone and
    :func:`topoopt.flowsim.iteration.simulate_iteration` the whole iteration with compute
    (no link-load series is recorded). With ``max_refills`` the two simulations share that work
    limit (:class:`topoopt.flowsim.simulator.WorkLimitExceeded` when it is not enough).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> from solvers.baselines.topoopt_method import topoopt_design
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(4).reshape(1, 4), 4e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> comm, it, refills = flow_times(topoopt_design(p), p, w)
    >>> round(comm * 1e3, 3)  # two directed rings of 2 MB: 2*(4-1)/4 * 2 MB / (1 GB/s) + latency
    3.001
    >>> it  # a hand-made Workload has no compute model
    nan
    """
    from solvers.realise import design_fabric, design_routing, design_workload
    from topoopt.flowsim.collectives import communication_time
    from topoopt.flowsim.iteration import simulate_iteration

    fabric = design_fabric(design, gpus_per_server=workload.gpus_per_server)
    routing = design_routing(design, fabric)
    realised = design_workload(workload, design, problem)
    from topoopt.flowsim.simulator import WorkLimitExceeded

    it, used = math.nan, 0
    if workload.taskgraph is not None or "forward_flops_per_microbatch_per_gpu" in workload.info:
        # the iteration first: a plan's flows are counted before any is built (TooManyFlows
        # above FLOW_SELECT_MAX_FLOWS); the communication alone has no more flows than it
        res = simulate_iteration(
            realised,
            fabric,
            routing=routing,
            exposed_by_class=False,
            record_series=False,
            max_refills=max_refills,
            max_flows=FLOW_SELECT_MAX_FLOWS if workload.taskgraph is None else None,
        )
        it, used = float(res.iteration_s), int(res.info["refills"])
    try:
        c = communication_time(
            realised, fabric, routing=routing,
            max_refills=None if max_refills is None else max_refills - used,
        )  # fmt: skip
    except WorkLimitExceeded as e:  # the work of both simulations against the caller's limit
        raise WorkLimitExceeded(used + e.refills, max_refills) from None
    return float(c.total_s), it, used + int(c.sim.refills)


def _child(conn, design, problem, workload, max_refills) -> None:
    try:
        conn.send(flow_times(design, problem, workload, max_refills))
    except Exception as e:  # reported to the parent, which re-raises it
        conn.send(e)
    finally:
        conn.close()


def score(
    name: str,
    design: Design,
    problem: DesignProblem,
    workload: Workload,
    timeout: float | None = None,
    max_refills: int | None = None,
) -> FlowScore:
    """:func:`flow_times` of ``design`` as a :class:`FlowScore` (with its wall time).

    With ``timeout`` (seconds) the simulation runs in a forked child process that is killed when
    the time is up; the score is then ``inf`` (a flow simulation cannot be interrupted
    otherwise, and on a large all-to-all it can take far longer than a solver's limit), and so
    it is when the child dies without an answer (killed, out of memory): never an error. With
    ``max_refills`` the simulations stop deterministically once they need more sub-flow
    re-fills; the score is then ``inf`` with ``over_budget`` set and ``refills`` the work done.
    """
    from topoopt.flowsim.iteration import TooManyFlows
    from topoopt.flowsim.simulator import WorkLimitExceeded

    t = time.perf_counter()
    if timeout is None:
        try:
            comm, it, used = flow_times(design, problem, workload, max_refills)
        except WorkLimitExceeded as e:
            wall = time.perf_counter() - t
            return FlowScore(name, math.inf, math.inf, wall, over_budget=True, refills=e.refills)
        except TooManyFlows:
            wall = time.perf_counter() - t
            return FlowScore(name, math.inf, math.inf, wall, over_budget=True, too_large=True)
        return FlowScore(name, comm, it, time.perf_counter() - t, refills=used)
    if timeout <= 0:
        return FlowScore(name, math.inf, math.inf, 0.0, True)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child, args=(child, design, problem, workload, max_refills), daemon=True
    )
    proc.start()
    child.close()
    got = None
    if parent.poll(timeout):
        try:
            got = parent.recv()
        except EOFError:  # the child died without an answer (killed, out of memory): no score
            got = None
    if got is None:
        proc.kill()
    proc.join()
    parent.close()
    wall = time.perf_counter() - t
    if isinstance(got, WorkLimitExceeded):
        return FlowScore(name, math.inf, math.inf, wall, over_budget=True, refills=got.refills)
    if isinstance(got, TooManyFlows):
        return FlowScore(name, math.inf, math.inf, wall, over_budget=True, too_large=True)
    if isinstance(got, Exception):
        raise got
    if got is None:
        return FlowScore(name, math.inf, math.inf, wall, True)
    comm, it, used = got
    return FlowScore(name, comm, it, wall, refills=used)


def select_by_flow(
    finalists: list[tuple[str, Design]],
    problem: DesignProblem,
    workload: Workload,
    deadline: float,
    known: dict[str, FlowScore] | None = None,
    reference: str = "topoopt",
    max_refills: int | None = None,
    pick: str | None = None,
) -> tuple[int, list[FlowScore]]:
    """Simulate the finalists that can be chosen; pick the fastest admissible one.

    A finalist is admissible when neither its communication time, nor its iteration time, nor
    its optimizer objective exceeds the ``reference`` finalist's (so the reference itself always
    is, and the choice loses to it neither in the flow model nor in the optimizer's own
    objective); among admissible finalists the
    shortest communication time wins (ties: shorter iteration, then the earlier finalist).
    Without a compute model (NaN iteration times) only communication is compared. A finalist
    whose objective exceeds the reference's is not simulated (``skipped``); one that is not
    judged (over the work limit, too large, cut by the clock) is never chosen.

    Parameters
    ----------
    finalists : list of (name, Design)
        In priority order; the reference must be among them.
    problem : DesignProblem
    workload : Workload
        The GPU-level workload behind ``problem``.
    deadline : float
        ``time.perf_counter()`` seconds: a wall-clock cap only. Every finalist is simulated to
        the end (the choice does not depend on the machine's speed) unless the cap comes first;
        a simulation the cap stops scores ``inf`` with ``timed_out`` set, and finalists after
        it are not simulated. The reference is always simulated (pass its score in ``known`` to
        cap it).
    known : dict, optional
        Scores already computed, by finalist name (not simulated again).
    reference : str
        Name of the finalist no choice may be slower than.
    max_refills : int, optional
        Work limit (sub-flow re-fills) shared by the finalists simulated here, in order: one
        that needs more than what is left scores ``inf`` with ``over_budget`` set, and the
        ones after it are not simulated (also ``over_budget``). Deterministic.
    pick : str, optional
        Name of the finalist the optimizer's objective picked: simulated first (before the
        finalists in order), so that the work limit goes to it first.

    Returns
    -------
    best : int
        Index into ``finalists`` of the choice.
    scores : list of FlowScore
        One per finalist, in finalist order (those not simulated scored ``inf`` with
        ``over_budget``, ``timed_out`` or ``skipped``).
    """
    known = dict(known or {})
    names = [nm for nm, _ in finalists]
    if reference not in names:
        raise ValueError(f"reference finalist {reference!r} missing from {names}")
    if pick is not None and pick not in names:
        raise ValueError(f"picked finalist {pick!r} missing from {names}")
    if reference not in known:
        ref_design = finalists[names.index(reference)][1]
        known[reference] = score(reference, ref_design, problem, workload)
    ref = known[reference]
    ref_obj = finalists[names.index(reference)][1].objective_s
    tol = 1 + 1e-9
    budget = max_refills

    def judge_one(i: int) -> FlowScore:
        nonlocal budget
        name, design = finalists[i]
        if name in known:
            return known[name]
        if design.objective_s > ref_obj * tol:  # never admissible: not simulated
            return FlowScore(name, math.inf, math.inf, 0.0, skipped=True)
        if budget is not None and budget <= 0:
            return FlowScore(name, math.inf, math.inf, 0.0, over_budget=True)
        left = deadline - time.perf_counter()
        if left <= 0:
            return FlowScore(name, math.inf, math.inf, 0.0, True)
        sc = score(name, design, problem, workload, timeout=left, max_refills=budget)
        if budget is not None:
            budget = 0 if sc.over_budget else budget - sc.refills
        return sc

    order = list(range(len(finalists)))
    if pick is not None:  # the objective's pick first
        k = names.index(pick)
        order = [k] + [i for i in order if i != k]
    got = {i: judge_one(i) for i in order}
    scores = [got[i] for i in range(len(finalists))]
    best = names.index(reference)
    best_key = (ref.comm_s, 0.0 if math.isnan(ref.iteration_s) else ref.iteration_s, best)
    for i, (_, design) in enumerate(finalists):
        sc = scores[i]
        it_ok = math.isnan(ref.iteration_s) or sc.iteration_s <= ref.iteration_s * tol
        obj_ok = design.objective_s <= ref_obj * tol
        if sc.comm_s <= ref.comm_s * tol and it_ok and obj_ok:
            key = (sc.comm_s, 0.0 if math.isnan(sc.iteration_s) else sc.iteration_s, i)
            if key < best_key:
                best, best_key = i, key
    return best, scores
