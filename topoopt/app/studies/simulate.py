"""What ``topoopt simulate`` computes: one plan on one fabric or design."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from topoopt.app.studies.compare import build_fabric
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.iteration import (
    ITERATION_ONLY,
    SCHEDULES,
    reduction_status,
    simulate_iteration,
)
from topoopt.flowsim.priorities import check_priority
from topoopt.flowsim.roofline import throughput_facts
from traffic.errors import InputError
from traffic.load import load_workload
from traffic.workload import Workload

__all__ = ["design_case", "design_iteration", "design_iteration_within", "simulate_plan"]


def simulate_plan(
    plan: str | Workload,
    *,
    design: str | Path | None = None,
    fabric: str | None = None,
    degree: int = 8,
    link_bandwidth: float = 12.5e9,
    oversubscription: float = 4.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    schedule: str | None = None,
    priority: str | None = None,
    split_allreduce: float | None = None,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings=(),
    gpus: int | None = None,
    reduction: bool = True,
    time_limit_s: float = 900.0,
    max_paths: int | None = None,
    rounding_check: int = 0,
    prices=None,
    work_limit: float | None = None,
) -> dict[str, Any]:
    """Simulate ``plan`` on a design file or a fabric kind (priced with ``prices``, a
    :class:`~topoopt.fabrics.cost.PriceTable`; None: the defaults).

    Returns
    -------
    dict
        ``iteration_s``, ``compute_s``, ``comm_s`` (communication on the iteration's critical
        path), ``exposed_comm_s`` (``iteration_s - compute_s``, at most ``comm_s``),
        ``comm_s_by_class`` (``comm_s`` by class), ``exposed_comm_s_by_class`` (iteration time
        minus the time with that class instantaneous), ``comm_busy_s`` (time some
        communication is in flight), ``comm_alone_s`` and ``comm_alone_s_by_class`` (the
        communication alone, every phase's flows released together, phases in sequence; per
        class: that class alone), ``fabric``, ``workload``, ``servers``, ``gpus``; with
        ``fabric``, its ``capex_usd``, ``power_w`` and
        :func:`~topoopt.app.studies.compare.cost_columns` (``server_bandwidth``, breakdowns,
        ``fabric_info``: tiers, switches). Definitions
        in :mod:`topoopt.flowsim.iteration`. With a pipeline schedule (``schedule``: ``1f1b``,
        ``interleaved`` or ``eager-1f1b``, :func:`~topoopt.flowsim.iteration.simulate_iteration`)
        also ``schedule`` and ``schedule_used``, and for ``eager-1f1b`` the iteration time of
        both orders (``eager_1f1b_s``, ``1f1b_s``).
        With ``priority`` (traffic classes, highest first)
        or ``split_allreduce`` (micro-op bytes; :mod:`topoopt.flowsim.priorities`) the iteration
        is simulated with them, and the result also has ``priority`` / ``split_allreduce_bytes``.
        ``gpu`` (a catalogue name) replaces the plan's ``cluster.gpu``; the result says which
        GPU it modelled and what it predicts (``gpu``, ``gpu_peak_tflops``, ``efficiency``,
        ``model_flops_per_iteration``, ``tflops_per_gpu``, ``mfu``:
        :func:`~topoopt.flowsim.roofline.throughput_facts`). ``efficiency`` (in [0.001, 1]) is
        the kernel efficiency, set as the plan's ``cluster.efficiency`` after ``gpu``
        (:func:`traffic.load.with_efficiency`). ``settings``: ``KEY=VALUE`` plan fields set
        after them (``--set``, :func:`traffic.load.with_settings`).
        ``reduction``: what the symmetry reduction found (``status`` ``on``/``off``, classes,
        flows before and after, ``reason`` when off: no symmetry, the check failed, priorities or
        split all-reduce); on by default (exact), ``reduction=False`` runs without it. It
        applies to the iteration and to the communication-alone times
        (:func:`~topoopt.flowsim.collectives.communication_time`).
        ``time_limit_s``: the wall-clock safety cap of a fabric that is designed (``joint``,
        ``topoopt-best``; the CLI's ``--time-limit``); ``search_warning`` is then the line of
        :func:`solvers.search_warning` (``None``: the search neither fell back nor was cut).
        ``max_paths``: at most this many ECMP paths per server pair (per rail switch pair on a
        rail fabric; :class:`~topoopt.flowsim.network.Network`), an approximation that bounds
        the sub-flows; ``paths`` in the result says whether every path was used (``exact``)
        and, when not, the cap and a ``note``.
        ``rounding_check``: simulate the iteration again this many times with every fabric
        link's bandwidth scaled by ``1 + e`` (``|e|`` in 1e-15..1e-13, seeded by ``seed``;
        :mod:`topoopt.flowsim.conditioning`); ``rounding`` in the result says how far rounding
        alone moves the iteration (``conditioned``: ``well`` or ``ill``, ``spread``,
        ``std_s``, ``sentence``); None without the check.
    """
    from topoopt.flowsim.conditioning import check_runs

    rounding_check = check_runs(rounding_check)
    if schedule is not None and schedule not in SCHEDULES:
        raise InputError("--schedule", schedule, f"one of {', '.join(SCHEDULES)}")
    if isinstance(plan, Workload):
        given = (("gpu", gpu), ("efficiency", efficiency), ("settings", settings), ("gpus", gpus))
        for name, value in given:
            if value not in (None, (), []):
                raise InputError(
                    name, value, "a plan name or file (a Workload carries its own GPU)"
                )
        workload = plan
    else:
        workload = load_workload(plan, gpu=gpu, efficiency=efficiency, settings=settings, gpus=gpus)
    from topoopt.flowsim.work import check_work

    # before any fabric, route or flow; the reduction is not used with priorities or a
    # split all-reduce (topoopt.flowsim.iteration.simulate_iteration)
    check_work(workload, reduced=reduction and priority is None and split_allreduce is None)
    priced: dict[str, Any] = {}
    if design is not None:
        path = Path(design)
        if not path.is_file():
            raise InputError("--design", str(design), "an existing design.json file")
        from solvers import load_design

        d = load_design(path)  # strict schema (solvers.model.design_schema)
        fab, w, routing, label, own = design_case(workload, d, str(path))
        if priority is None and own:
            priority = own  # the design's own class priorities (``--priority`` overrides)
    else:
        run = build_fabric(
            fabric,
            workload,
            degree,
            link_bandwidth,
            oversubscription=oversubscription,
            seed=seed,
            progress=progress,
            time_limit_s=time_limit_s,
            prices=prices,
            work_limit=work_limit,
        )
        fab, w, routing, label = run.fabric, run.workload, run.routing, fabric
        from topoopt.app.studies.compare import cost_columns, fabric_warning

        priced = {"capex_usd": run.capex_usd, "power_w": run.power_w, **cost_columns(run, prices)}
        if run.design is not None:  # said on stderr and in the JSON (the CLI pops it)
            from solvers import search_warning

            priced["search_warning"] = search_warning(run.design, str(fabric))
        if fabric_warning(run) is not None:
            priced["fabric_warning"] = fabric_warning(run)
    # the flows of the workload the fabric runs (a design's rings change them); their sub-flows
    # are checked exactly once routed (topoopt.flowsim.work.check_subflows)
    check_work(w, reduced=reduction and priority is None and split_allreduce is None)
    if progress:
        progress(f"simulating {workload.name} on {label}")
    if schedule is not None and w.taskgraph is not None:
        raise InputError("--schedule", schedule, "a plan (an imported task graph has its own)")
    if schedule is not None and len(w.info.get("forward_flops_per_microbatch_per_gpu") or ()) == 1:
        # the library runs any schedule on one stage (all alike); asked for here, it is a mistake
        raise InputError("--schedule", schedule, "none for a plan without a pipeline (pp = 1)")
    it = simulate_iteration(
        w, fab, routing=routing, exposed_by_class=True, schedule=schedule, priority=priority,
        split_allreduce=split_allreduce, reduction=reduction, max_paths=max_paths,
        path_times=False,
    )  # fmt: skip
    rounding = None
    if rounding_check:
        from topoopt.flowsim.conditioning import check

        rounding = check(
            fab, it.iteration_s, rounding_check, seed,
            lambda f: simulate_iteration(
                w, f, routing=routing, exposed_by_class=False, schedule=schedule,
                priority=priority, split_allreduce=split_allreduce, reduction=reduction,
                max_paths=max_paths, path_times=False,
            ).iteration_s,
            progress,
        )  # fmt: skip
    comm = communication_time(
        w, fab, routing=routing, reduction=reduction, max_paths=max_paths, path_times=False
    )
    alone_by_class = {}
    for cls in sorted({x.cls for x in w.demands}):
        alone = communication_time(
            w.select(classes=[cls]), fab, routing=routing, reduction=reduction,
            max_paths=max_paths, path_times=False,
        )  # fmt: skip
        alone_by_class[cls] = alone.total_s
    keys = ("schedule", "schedule_used", "eager_1f1b_s", "1f1b_s")
    extra: dict[str, Any] = dict(priced)  # a built fabric's capex, power, tiers (compare's)
    if schedule is not None:
        extra.update({k: it.info[k] for k in keys if k in it.info})
    if priority is not None:
        extra["priority"] = list(check_priority(priority))
    if split_allreduce is not None:
        extra["split_allreduce_bytes"] = float(split_allreduce)
    return {
        "workload": workload.name,
        "fabric": label,
        "servers": workload.servers,
        "gpus": workload.gpus,
        "iteration_s": it.iteration_s,
        "compute_s": it.compute_s,
        "comm_s": it.comm_s,
        "exposed_comm_s": it.exposed_comm_s,
        "exposed_comm_s_by_class": dict(it.exposed_by_class),
        "comm_s_by_class": dict(it.comm_by_class),
        "comm_busy_s": it.comm_busy_s,
        "comm_alone_s": comm.total_s,
        "comm_alone_s_by_class": alone_by_class,
        **throughput_facts(w, it.iteration_s),
        "reduction": it.info["reduction"],
        "paths": path_facts(max_paths, it.info["capped_pairs"]),
        "rounding": rounding,
        **extra,
    }


def path_facts(max_paths: int | None, capped_pairs: int = 0) -> dict[str, Any]:
    """What the routes of a simulation kept: every ECMP path (exact), or at most ``max_paths``
    per pair, which is an approximation only where a pair has more (``capped_pairs`` of them:
    then the sentence that says so).

    >>> path_facts(None)
    {'exact': True, 'max_paths': None, 'capped_pairs': 0, 'note': None}
    >>> path_facts(32)["exact"], path_facts(32, 5)["exact"]
    (True, False)
    """
    if max_paths is None or capped_pairs == 0:
        return {
            "exact": True,
            "max_paths": None if max_paths is None else int(max_paths),
            "capped_pairs": 0,
            "note": None,
        }
    note = (
        f"routes capped at {max_paths} ECMP paths per pair (a hashed one per stratum of "
        f"equal-cost paths) on {capped_pairs:,} server or switch pairs with more: an "
        "approximation of the equal split over every path; docs/performance.md gives its "
        "measured error"
    )
    return {
        "exact": False,
        "max_paths": int(max_paths),
        "capped_pairs": int(capped_pairs),
        "note": note,
    }


def design_case(workload: Workload, d: Any, where: str = "design"):
    """The fabric, workload, routing, label and class priorities of design ``d`` for
    ``workload`` (what :func:`simulate_plan` runs with ``design``): an optical design on its
    circuits and rings, a hybrid design on its electrical fabric plus circuits.

    Raises :class:`InputError` when the design is for another number of servers or its rings do
    not fit the plan's collectives (``where`` names the design in the message)."""
    from solvers import (
        DesignProblem,
        HybridDesign,
        check_design_rings,
        design_fabric,
        design_routing,
        design_workload,
    )

    if d.servers != workload.servers:
        raise InputError(
            "--design", f"{d.servers} servers", f"a design for {workload.servers} servers"
        )
    problem = DesignProblem.from_workload(workload, d.degree, d.link_bandwidth)
    check_design_rings(d, problem, where)
    if isinstance(d, HybridDesign):
        fab = d.fabric()
        routing = d.routing_pathset(fab)
    else:
        fab = design_fabric(d, gpus_per_server=workload.gpus_per_server)
        routing = design_routing(d, fab)
    w = design_workload(workload, d, problem)
    return fab, w, routing, d.solver, tuple(getattr(d, "priority", ()) or ())


def design_iteration(workload: Workload, d: Any, reduction: bool = True, **kwargs):
    """The simulated iteration (:class:`~topoopt.flowsim.iteration.IterationResult`) of
    ``workload`` on design ``d``, exactly as ``topoopt simulate PLAN --design FILE`` runs it
    (the design's own class priorities; through the symmetry reduction with ``reduction``, which
    is exact, and off by itself under priorities). ``design`` prints it beside the search's
    objective, which may be another objective (congestion). ``kwargs`` go to
    :func:`~topoopt.flowsim.iteration.simulate_iteration`: :data:`ITERATION_ONLY` skips what
    the iteration time does not need."""
    from topoopt.flowsim.work import check_work, fabric_paths

    fab, w, routing, _, own = design_case(workload, d)
    check_work(w, paths=fabric_paths(fab, routing), reduced=reduction and not own)
    return simulate_iteration(
        w, fab, routing=routing, priority=own or None, reduction=reduction, **kwargs
    )


def _iteration_child(conn, workload, d, reduction) -> None:
    try:
        it = design_iteration(workload, d, reduction, **ITERATION_ONLY)
        conn.send((float(it.iteration_s), reduction_status(it)))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which re-raises it
        conn.send(e)
    finally:
        conn.close()


def design_iteration_within(
    workload: Workload, d: Any, timeout_s: float, reduction: bool = True
) -> tuple[float, str] | None:
    """:func:`design_iteration`'s iteration time (seconds) and its ``reduction``
    (:func:`~topoopt.flowsim.iteration.reduction_status`: ``on`` or ``off: why``) under a
    wall-clock cap: None when ``timeout_s`` seconds pass first (``design --time-limit`` covers
    the design's simulation too, issue 30: at 256-512 servers it took longer than the search the
    limit capped). Only the iteration is simulated (:data:`ITERATION_ONLY`).

    A flow simulation cannot be interrupted, so with a finite ``timeout_s`` it runs in a forked
    child process that is killed when the time is up (as the joint search's flow judging does,
    :func:`solvers.joint.flow_select.score`); an error in it (a size refused by the work
    estimate) is raised here. With ``timeout_s`` ``inf`` it runs in this process."""
    import math
    import multiprocessing

    if not math.isfinite(timeout_s):
        it = design_iteration(workload, d, reduction, **ITERATION_ONLY)
        return float(it.iteration_s), reduction_status(it)
    if timeout_s <= 0:
        return None
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_iteration_child, args=(child, workload, d, reduction), daemon=True)
    proc.start()
    child.close()
    got = None
    if parent.poll(timeout_s):
        try:
            got = parent.recv()
        except EOFError:  # the child died without an answer (killed, out of memory)
            got = None
    if got is None:
        proc.kill()
    proc.join()
    parent.close()
    if isinstance(got, Exception):
        raise got
    return got
