"""``topoopt reconfig PLAN``: the circuit schedule of an iteration for a reconfigurable switch."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.choices import SolverName
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT_S,
    GpusOption,
    PresetOption,
    PricesOption,
    SettingsOption,
    command_progress,
    emit_json,
    given_options,
    handle_errors,
    parse_name_list,
    prepare_output,
    stdout,
    warn_line,
    write_output_json,
)
from topoopt.app.report.time_units import time_unit
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError, check_finite

__all__ = ["register", "reconfig_command"]


@handle_errors
def reconfig_command(
    plan: Annotated[str, typer.Argument(help="Plan file, embedded plan name, or .fbuf")],
    degree: Annotated[int, typer.Option(help="Optical ports per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[
        float, typer.Option(help="Bandwidth of one port, Gbps")
    ] = DEFAULT_LINK_GBPS,
    delay_us: Annotated[
        float, typer.Option(help="Reconfiguration delay of the switch, microseconds")
    ] = 10_000.0,
    solver: Annotated[
        SolverName, typer.Option(help="Solver of the static design")
    ] = SolverName.joint,
    phase_solvers: Annotated[
        str, typer.Option(help="Per-phase designers, comma-separated (solver names, demand)")
    ] = "joint,topoopt,demand",
    design: Annotated[
        Path | None, typer.Option(help="Use this design.json as the static design")
    ] = None,
    work_limit: Annotated[
        float, typer.Option(help="Deterministic work budget of every joint solve")
    ] = 5.0,
    phase_merge: Annotated[
        str,
        typer.Option(
            help="How the static iteration's timeline joins into phases: shortest (a short "
            "stretch joins the one before, then the shortest the shorter neighbour) or labels "
            "(the neighbour of the most similar traffic; keeps a pipeline's 1F1B apart from "
            "its gradient sync)"
        ),
    ] = "shortest",
    wrap_overlap: Annotated[
        bool,
        typer.Option(
            "--wrap-overlap",
            help="The wrap back to the first set may run into the next iteration until its "
            "first fabric flow (otherwise the next iteration waits for it)",
        ),
    ] = False,
    max_evaluations: Annotated[
        int, typer.Option(help="Schedules simulated at most per dark time (work limit)")
    ] = 128,
    time_limit: Annotated[
        float,
        typer.Option(
            help="Wall-clock cap of every design solve, seconds (the work limit decides; "
            "the cap only guards a stuck search)"
        ),
    ] = DEFAULT_TIME_LIMIT_S,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    baselines: Annotated[
        bool, typer.Option("--baselines", help="Also run OCS-reconfig and SiP-ML-like")
    ] = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    fabric: Annotated[
        str,
        typer.Option(
            help="direct (circuits between servers), ocs-spine (pod-to-pod circuits of "
            "compare's OCS spine, engineered per phase) or hybrid (the optical half of "
            "compare's hybrid, demand circuits per phase)"
        ),
    ] = "direct",
    pods: Annotated[
        int | None, typer.Option(help="Pods of the OCS spine (default: compare's)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write the schedule (JSON) here")] = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    force: Annotated[bool, typer.Option(help="Overwrite an existing --out")] = False,
) -> None:
    """Choose when to change which circuits in an iteration (never slower than static)."""
    from topoopt.fabrics.cost import resolve_prices
    from traffic.load import load_workload

    if isinstance(delay_us, bool) or not (math.isfinite(delay_us) and delay_us >= 0):
        raise InputError("--delay-us", delay_us, "a finite number of microseconds >= 0")
    if degree < 1:
        raise InputError("--degree", degree, "an integer >= 1")
    if max_evaluations < 0:
        raise InputError("--max-evaluations", max_evaluations, "an integer >= 0")
    if not (math.isfinite(work_limit) and work_limit > 0):
        raise InputError("--work-limit", work_limit, "a finite number > 0")
    if not (math.isfinite(time_limit) and time_limit > 0):
        raise InputError("--time-limit", time_limit, "a finite number of seconds > 0")
    from solvers import PHASE_MERGES

    if phase_merge not in PHASE_MERGES:
        raise InputError("--phase-merge", phase_merge, " or ".join(PHASE_MERGES))
    if fabric not in ("direct", "ocs-spine", "hybrid"):
        raise InputError("--fabric", fabric, "direct, ocs-spine or hybrid")
    if fabric == "hybrid" and degree < 4:
        raise InputError("--degree", degree, "at least 4 with --fabric hybrid (half optical)")
    if fabric != "ocs-spine" and pods is not None:
        raise InputError("--pods", pods, "only with --fabric ocs-spine")
    if fabric != "direct" and (design is not None or baselines):
        raise InputError(
            "--design" if design is not None else "--baselines", f"with --fabric {fabric}",
            "only with --fabric direct",
        )  # fmt: skip
    if fabric != "direct":  # engineered or demand circuits: no solver, seed or budget
        given = {"solver": solver, "phase_solvers": phase_solvers, "work_limit": work_limit,
                 "seed": seed, "time_limit": time_limit, "phase_merge": phase_merge,
                 "wrap_overlap": wrap_overlap}  # fmt: skip
        for name in given_options(*given):
            value = getattr(given[name], "value", given[name])
            raise InputError(
                "--" + name.replace("_", "-"), value,
                f"only with --fabric direct (the {fabric} fabric's circuits come from the "
                "traffic; --max-evaluations caps its schedules)",
            )  # fmt: skip
    names = tuple(parse_name_list(phase_solvers, "--phase-solvers"))
    if not names:
        raise InputError("--phase-solvers", phase_solvers, "one or more solver names or demand")
    prepare_output(out, force, "--out")
    price_table = resolve_prices(prices, preset)
    workload = load_workload(plan, settings=settings or (), gpus=gpus)
    from topoopt.flowsim.work import check_work

    check_work(workload, "reconfig simulation")  # before any design or schedule
    static = None
    if design is not None:
        from solvers import HybridDesign, load_design

        static = load_design(design)
        if isinstance(static, HybridDesign):
            raise InputError("--design", "a hybrid design", "an optical (direct-connect) design")
        if static.servers != workload.servers or static.degree != degree:
            raise InputError(
                "--design",
                f"{static.servers} servers x {static.degree} ports",
                f"a design for {workload.servers} servers x {degree} ports (the plan, --degree)",
            )
    bw = gbps_to_bytes_per_s(link_gbps)
    if fabric == "ocs-spine":
        from topoopt.app.studies.spine_reconfig import spine_reconfig

        with command_progress("reconfig") as bar:
            res, capex = spine_reconfig(
                workload, degree, bw, delay_us / 1e6, pods=pods, prices=price_table,
                max_evaluations=max_evaluations, progress=bar,
            )  # fmt: skip
    elif fabric == "hybrid":
        from topoopt.app.studies.hybrid_reconfig import hybrid_reconfig

        with command_progress("reconfig") as bar:
            res, capex = hybrid_reconfig(
                workload, degree, bw, delay_us / 1e6, prices=price_table,
                max_evaluations=max_evaluations, progress=bar,
            )  # fmt: skip
    else:
        res, capex = _direct(
            workload, degree, bw, delay_us, static, solver, names, seed, work_limit,
            max_evaluations, baselines, price_table, time_limit, phase_merge, wrap_overlap,
        )  # fmt: skip
    from topoopt.app.report.study_verdicts import reconfig_verdict

    if fabric == "direct":
        from solvers import search_warning

        warn_line(search_warning(res.static, f"reconfig: static {res.static.solver} design"))
    if res.info.get("coarsened"):
        warn_line(
            f"reconfig: too many flows to search exactly; gradient buckets coarsened to "
            f"{res.info.get('max_buckets')} per channel"
        )
    verdict = reconfig_verdict(res, delay_us / 1e6)
    doc = {
        "workload": workload.name,
        "degree": degree,
        "link_gbps": link_gbps,
        **res.to_dict(),
        "capex": capex,
        "prices": price_table.source,
    }
    check_finite(doc, plan)
    if out is not None:
        write_output_json(out, doc, indent=1)
    if as_json:
        emit_json({"verdict": verdict, **doc})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(title=f"{workload.name}: {degree} x {link_gbps:g} Gbps, delay {delay_us:g} us")
    times = [res.iteration_s, res.static_iteration_s, *(b["iteration_s"] for b in res.baselines)]
    unit, k = time_unit(times)
    t.add_column("schedule")
    t.add_column(f"iteration ({unit})", justify="right")
    t.add_column("reconfigurations", justify="right")
    t.add_column("device")
    t.add_column("capex (USD)", justify="right")
    t.add_column("power (W)", justify="right")

    def money(name: str) -> list[str]:
        c = capex[name]
        return [c["device"], f"{c['capex_usd']:,.0f}", f"{c['power_w']:,.0f}"]

    t.add_row("chosen", f"{res.iteration_s * k:.4f}", str(res.reconfigurations), *money("chosen"))
    t.add_row("static", f"{res.static_iteration_s * k:.4f}", "0", *money("static"))
    for b in res.baselines:
        t.add_row(
            b["baseline"],
            f"{b['iteration_s'] * k:.4f}",
            str(b["reconfigurations"]),
            *money(b["baseline"]),
        )
    t.add_row("lower bound", f"{res.lower_bound_s * k:.4f}", "", "", "", "")
    stdout.print(t)
    for cs, start, ph in zip(
        res.schedule.sets, res.schedule.starts, res.schedule.phases, strict=True
    ):
        circuits = cs.circuits.total if fabric == "direct" else cs.total
        stdout.print(f"  from {start * 1e3:.4f} ms: {cs.label} ({circuits} circuits) for {ph}")


def _direct(
    workload, degree, bw, delay_us, static, solver, names, seed, work_limit, max_evaluations,
    baselines, price_table, time_limit, phase_merge="shortest", wrap_overlap=False,
):  # fmt: skip
    """The direct-connect search and its priced schedules."""
    from solvers import reconfigure, run_baselines, schedule_cost

    with command_progress("reconfig") as bar:
        res = reconfigure(
            workload,
            degree,
            bw,
            delay_us / 1e6,
            static_design=static,
            static_solver=solver.value,
            solvers=names,
            seed=seed,
            work_limit=work_limit,
            time_limit_s=time_limit,
            max_evaluations=max_evaluations,
            phase_merge=phase_merge,
            wrap_overlap=wrap_overlap,
            progress=bar,
        )
    if baselines:
        res.baselines.extend(run_baselines(res, workload, degree, bw))

    def priced(reconfigurations: int) -> dict:
        return schedule_cost(
            res.static.circuits.rows, workload.servers, degree, bw, reconfigurations, price_table,
            workload.gpus_per_server,
        )  # fmt: skip

    capex = {"chosen": priced(res.reconfigurations), "static": priced(0)}
    for b in res.baselines:
        capex[b["baseline"]] = priced(b["reconfigurations"])
    return res, capex


def register(app: typer.Typer) -> None:
    app.command("reconfig")(reconfig_command)
