"""``topoopt design PLAN``: choose optical circuits, rings and routing for a plan."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT_S,
    EfficiencyOption,
    GpuOption,
    GpusOption,
    OcsLayoutKind,
    PresetOption,
    PricesOption,
    ReductionOption,
    SettingsOption,
    command_progress,
    command_started,
    emit_json,
    handle_errors,
    nic_hint,
    prepare_output,
    stdout,
    warn_line,
    warnings_said,
    write_output_json,
    write_output_text,
    write_output_with,
)
from topoopt.app.cli.help_style import code_default
from topoopt.app.report.time_units import time_unit
from topoopt.units import duration_text, gbps_to_bytes_per_s

__all__ = ["register", "design_command", "OUTPUT_RESERVE"]

OUTPUT_RESERVE = 0.1
"""Share of ``--time-limit`` kept after the design's simulation for the verdict, the outputs and
the process's exit: at 256-512 servers under load 17 they took 7-11 s of wall time past a 60 s
cap (1.19-1.25x) with 1 s of CPU."""


class Solver(StrEnum):
    topoopt = "topoopt"
    topoopt_released = "topoopt-released"
    expander = "expander"
    joint = "joint"


class Objective(StrEnum):
    iteration = "iteration"
    congestion = "congestion"


class FabricKind(StrEnum):
    optical = "optical"
    hybrid = "hybrid"
    rail = "rail"
    rail_only = "rail-only"


SWITCHED = (FabricKind.rail, FabricKind.rail_only)
"""Fabrics with no circuits: design sizes the cheapest catalogue Clos and simulates it."""


class Electrical(StrEnum):
    leaf_spine = "leaf-spine"
    fat_tree = "fat-tree"


@handle_errors
def design_command(
    plan: Annotated[str, typer.Argument(help="Plan file, embedded plan name, or .fbuf")],
    fabric: Annotated[
        FabricKind,
        typer.Option(
            help="What to design: the optical layer, a hybrid's optical layer, or the sizing "
            "(switch model, tiers, price) of a switched rail fabric: rail (rail-optimised Clos) "
            "or rail-only (no spine across rails)"
        ),
    ] = FabricKind.optical,
    degree: Annotated[
        int, typer.Option(help="Ports (NICs) per server: optical ports, or rails")
    ] = DEFAULT_DEGREE,
    link_gbps: Annotated[
        float, typer.Option(help="Bandwidth of one port, Gbps")
    ] = DEFAULT_LINK_GBPS,
    solver: Annotated[Solver, typer.Option(help="Optimizer")] = Solver.joint,
    time_limit: Annotated[
        float, typer.Option(help="Seconds the joint optimizer may use")
    ] = DEFAULT_TIME_LIMIT_S,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    objective: Annotated[
        Objective,
        typer.Option(
            help="Joint: minimise the flow model's iteration time (critical-path guided), or "
            "the per-phase congestion objective"
        ),
    ] = Objective.iteration,
    work_limit: Annotated[
        float | None,
        typer.Option(
            help="Joint: deterministic work budget (a count of LP and flow-model work, not a time: "
            "one unit took 0.06 s on gpt3-175b-32 and 0.6 s on a 16-server task graph on 2 "
            "cores; default "
            + code_default("solvers.joint.iteration_search", "DEFAULT_ITERATION_WORK_LIMIT")
            + " with --objective iteration, "
            + code_default("solvers.joint.driver", "DEFAULT_WORK_LIMIT")
            + " with congestion up to "
            + code_default("solvers.joint.driver", "LP_MAX_SERVERS")
            + " servers, "
            + code_default("solvers.joint.driver", "LP_FREE_WORK_LIMIT")
            + " above (the LP-free search)); "
            "the same plan, seed and work limit give the same design on any machine"
        ),
    ] = None,
    priorities: Annotated[
        bool,
        typer.Option(
            "--priorities/--no-priorities",
            help="Joint (--objective iteration): per-class strict priority may be part of the "
            "design (design.json 'priority'; simulate --design honours it)",
        ),
    ] = False,
    electrical: Annotated[
        Electrical, typer.Option(help="Hybrid: the electrical fabric under the optical layer")
    ] = Electrical.leaf_spine,
    oversubscription: Annotated[
        float | None,
        typer.Option(
            help="Hybrid: oversubscription of the electrical fabric (default 4); rail, rail-only: "
            "of the Clos (default 1)"
        ),
    ] = None,
    electrical_gbps: Annotated[
        float | None, typer.Option(help="Hybrid: electrical NIC bandwidth (default --link-gbps)")
    ] = None,
    max_parallel: Annotated[
        int | None,
        typer.Option(help="Cap on parallel circuits between two servers (default: --degree)"),
    ] = None,
    reserve_ports: Annotated[
        int | None,
        typer.Option(help="Optical ports per server held back from the optimizer (every server)"),
    ] = None,
    prewired: Annotated[
        Path | None,
        typer.Option(
            help="Circuits that must stay: CSV with header u,v,count, or a JSON list of [u,v,count]"
        ),
    ] = None,
    ocs_radix: Annotated[
        int | None,
        typer.Option(
            help="Ports of one OCS: the optical layer needs several, and a circuit joins two "
            "ports on one OCS (default: one OCS per port index, unbounded)"
        ),
    ] = None,
    ocs_layout: Annotated[
        OcsLayoutKind,
        typer.Option(
            help="With --ocs-radix: per-rail (port i of every server on OCS group i) "
            "or packed (fewest OCSes)"
        ),
    ] = OcsLayoutKind.per_rail,
    out: Annotated[Path | None, typer.Option(help="Write design.json here")] = None,
    html: Annotated[Path | None, typer.Option(help="Draw the design (plotly HTML)")] = None,
    graphml: Annotated[
        Path | None,
        typer.Option(help="Write the designed fabric as GraphML (node types, capacity, count)"),
    ] = None,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    reduction: ReductionOption = True,
    prices: PricesOption = None,
    preset: PresetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the design as JSON")] = False,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Design the circuit topology and routing; report objective, lower bound and gap."""
    import time

    from solvers import DesignProblem, read_prewired_file, solve, with_port_options
    from traffic.errors import InputError, check_finite
    from traffic.load import load_workload

    # --time-limit caps the whole command: the search gets what loading the plan left of it,
    # and the design's simulation what the search left (issue 30: the cap was overrun 1.6-5.5x
    # at 256-512 servers by the work outside the search)
    t_start = command_started()

    def time_left() -> float:
        """Seconds of --time-limit left for the search and the design's simulation (the last
        OUTPUT_RESERVE of it is for writing the results)."""
        if not (isinstance(time_limit, int | float) and 0 < time_limit < float("inf")):
            return time_limit  # the solver's one-line error (or no cap)
        end = t_start + (1 - OUTPUT_RESERVE) * time_limit
        return max(end - time.perf_counter(), 1e-3)

    if fabric in SWITCHED:  # no circuits: the optical layer's options mean nothing here
        for name, given in (
            ("--ocs-radix", ocs_radix),
            ("--prewired", prewired),
            ("--reserve-ports", reserve_ports),
            ("--out", out),
            ("--html", html),
        ):
            if given is not None:
                raise InputError(
                    name,
                    given,
                    "with --fabric optical or hybrid (a switched fabric has no circuits; "
                    "--json prints its sizing)",
                )
    prepare_output(out, force, "--out")
    prepare_output(html, force, "--html")
    prepare_output(graphml, force, "--graphml")
    if reserve_ports is not None and not 0 <= reserve_ports <= degree:
        raise InputError("--reserve-ports", reserve_ports, f"an integer 0..{degree} (--degree)")
    wired = None
    if prewired is not None:
        wired = read_prewired_file(prewired)
    workload = load_workload(
        plan, gpu=gpu, efficiency=efficiency, settings=settings or (), gpus=gpus
    )
    nic_hint(gpu, link_gbps)
    if fabric in SWITCHED:
        from topoopt.fabrics.cost import resolve_prices

        table = None if prices is None and preset is None else resolve_prices(prices, preset)
        _switched(
            workload, fabric.value, degree, link_gbps,
            1.0 if oversubscription is None else oversubscription, graphml, as_json, reduction,
            efficiency, table,
        )  # fmt: skip
        return
    if prices is not None or preset is not None:  # an optical design is not priced here
        raise InputError(
            "--prices" if prices is not None else "--preset", prices or preset,
            "none without --fabric rail or rail-only (the switched fabrics design sizes and "
            "prices; compare and advise price an optical design)",
        )  # fmt: skip
    if oversubscription is None:
        oversubscription = 4.0
    from topoopt.flowsim.work import check_work

    # before the design problem is lifted; the design's simulation goes through the symmetry
    # reduction (its cap, as compare's) unless asked not to or the design may carry priorities
    check_work(workload, "design's simulations", reduced=reduction and not priorities)
    problem = DesignProblem.from_workload(
        workload,
        degree=degree,
        link_bandwidth=gbps_to_bytes_per_s(link_gbps),
        max_parallel=max_parallel,
        reserved=reserve_ports,
        prewired=wired,
    )
    if ocs_radix is not None:
        if fabric == FabricKind.hybrid:
            raise InputError("--ocs-radix", ocs_radix, "with --fabric optical only")
        from topoopt.fabrics import OcsLayout

        layer = OcsLayout(problem.n, degree, ocs_radix, ocs_layout.value)
        problem = problem.with_options(ocs=layer)
    if fabric == FabricKind.hybrid:
        design = _hybrid(
            problem,
            workload,
            degree,
            link_gbps,
            electrical.value,
            oversubscription,
            electrical_gbps,
            time_left(),
            seed,
        )
    else:
        with command_progress("design") as bar:
            design = solve(
                problem,
                solver.value,
                time_limit_s=time_left(),
                seed=seed,
                progress=bar,
                work_limit=work_limit,
                objective=objective.value,
                priorities=priorities,
            )
        design = with_port_options(design, problem)
        from solvers import search_warning

        # fell back to another objective, or cut by the clock: stderr, JSON and HTML
        warn_line(search_warning(design, solver.value))
    check_finite(design.to_dict(), plan, "design")  # design.json is strict JSON: no Infinity
    from topoopt.app.report.study_verdicts import design_verdict
    from topoopt.app.studies.simulate import design_iteration_within

    # the objective may be another one (congestion): the design's simulated iteration beside it,
    # within what the search left of --time-limit less OUTPUT_RESERVE of it for writing the
    # results (None when the clock cut it: a warning)
    simulated = design_iteration_within(workload, design, time_left() - 1e-3, reduction)
    simulated_s, reduced = (None, "off: cut by the time limit") if simulated is None else simulated
    if simulated_s is None:
        from dataclasses import replace

        cut = dict(getattr(design, "info", None) or {})
        cut["deterministic"] = False
        cut["time_limit_cut"] = [*cut.get("time_limit_cut", []), "the design's simulation"]
        design = replace(design, info=cut)
        warn_line(
            f"warning: design: the time limit ({time_limit:g} s) cut the design's simulation: "
            "no simulated iteration (not deterministic: raise --time-limit)"
        )
    info = dict(getattr(design, "info", None) or {})
    ideal_s = info.get("ideal_iteration_s")
    verdict = design_verdict(
        str(design.solver),
        simulated_s,
        info.get("objective"),
        float(design.objective_s),
        float(design.lower_bound_s),
        ideal_s=None if ideal_s is None else float(ideal_s),
    )
    if out is not None:
        write_output_json(out, design.to_dict(), indent=1)  # design.to_json(), strict
    if html is not None:
        from topoopt.app.report.design_figures import design_page

        scored = problem if fabric == FabricKind.optical else None  # loads: optical designs only
        page = design_page(
            design,
            scored,
            title=f"{workload.name}: design",
            verdict=verdict,
            warnings=warnings_said(),
        )
        write_output_text(html, page)
    if graphml is not None:
        from topoopt.exports.graphml import write_graphml

        if fabric == FabricKind.hybrid:
            built = design.fabric()
        else:
            from solvers import design_fabric

            built = design_fabric(design, gpus_per_server=workload.gpus_per_server, device="ocs")
        write_output_with(graphml, lambda tmp: write_graphml(built, tmp))
    if as_json:
        emit_json(
            {
                **design.to_dict(),
                "simulated_iteration_s": simulated_s,
                "reduction": reduced,
                "params": {"reduction": bool(reduction), "efficiency": efficiency},
                "verdict": verdict,
            }
        )
        return
    for sentence in verdict:  # the verdict first, as the HTML report opens with it
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(title=f"{workload.name}: {solver.value} design, {degree} x {link_gbps:g} Gbps")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("servers", str(design.servers))
    t.add_row("circuits", str(design.circuits.total))
    t.add_row("rings", str(len(design.rings)))
    if getattr(design, "priority", ()):
        t.add_row("priority", ", ".join(design.priority) + " first")
    if problem.reserved is not None:
        t.add_row("reserved ports", str(int(problem.reserved.sum())))
    if problem.prewired is not None:
        t.add_row("pre-wired circuits", str(problem.prewired_circuits().total))
    t.add_row("status", design.status)
    shown = [x for x in (simulated_s, design.objective_s, design.lower_bound_s) if x is not None]
    unit, k = time_unit(shown)
    sim_text = "cut by the time limit" if simulated_s is None else f"{simulated_s * k:.4f}"
    t.add_row(f"simulated iteration ({unit})", sim_text)
    objective = info.get("objective")
    head = "objective" if objective is None else f"objective: {objective}"
    t.add_row(f"{head} ({unit})", f"{design.objective_s * k:.4f}")
    t.add_row(f"lower bound ({unit})", f"{design.lower_bound_s * k:.4f}")
    t.add_row("gap", f"{design.gap:.2%}")
    stdout.print(t)
    # the clock on stderr: stdout is the same bytes on any machine (issue 30)
    print(f"designed in {design.wall_s:.2f} s", file=sys.stderr)


def _switched(
    workload, layout, degree, link_gbps, oversubscription, graphml, as_json, reduction=True,
    efficiency=None, prices=None,
) -> None:  # fmt: skip
    """``design --fabric rail|rail-only``: the cheapest catalogue Clos, its candidates, its
    simulated iteration (:func:`topoopt.app.studies.switched_design.design_switched`)."""
    from topoopt.app.studies.switched_design import design_switched
    from topoopt.flowsim.work import check_work

    check_work(workload, "design's simulation", reduced=reduction)
    with command_progress("design"):
        d = design_switched(
            workload,
            layout,
            degree,
            gbps_to_bytes_per_s(link_gbps),
            oversubscription=oversubscription,
            prices=prices,
            reduction=reduction,
        )
    doc = {**d.to_dict(), "params": {"reduction": bool(reduction), "efficiency": efficiency}}
    doc["prices"] = "default" if prices is None else prices.source
    info = doc["fabric_info"]
    tiers = info["tiers"]
    per_tier = ", ".join(
        f"{info[k]} {k}" for k in ("leaves", "spines", "aggregation", "cores") if info.get(k)
    )
    unit, k = time_unit([doc["iteration_s"]])
    verdict = [
        f"The cheapest {layout} fabric for {doc['servers']} servers of {degree} NICs x "
        f"{link_gbps:g} Gbps is {info['switches']} {info['switch']} switches in {tiers} "
        f"tier{'s' if tiers > 1 else ''} ({per_tier}) at {doc['capex_usd']:,.0f} USD; "
        f"it runs an iteration in {doc['iteration_s'] * k:.4f} {unit}."
    ]
    if d.run.note:
        warn_line(f"{layout}: {d.run.note}")
    if degree != workload.gpus_per_server:
        warn_line(
            f"{layout}: {degree} NICs for {workload.gpus_per_server} GPUs per server: no rail "
            "routing (a GPU's flows spread over every NIC)"
        )
    if graphml is not None:
        from topoopt.exports.graphml import write_graphml

        write_output_with(graphml, lambda tmp: write_graphml(d.run.fabric, tmp))
    if as_json:
        emit_json({**doc, "verdict": verdict})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    gpu, eff = doc["gpu"], doc["efficiency"]
    t = Table(
        title=f"{workload.name}: {layout} design, {degree} NICs x {link_gbps:g} Gbps per server"
        + ("" if gpu is None else f", {gpu}")
        + ("" if eff is None else f" at efficiency {eff:g}")
    )
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row("servers", str(doc["servers"]))
    t.add_row("switch", f"{info['switch']} ({info['radix']} x {info['switch_gbps']:g} Gbps)")
    t.add_row("tiers", f"{tiers} ({per_tier})")
    t.add_row("switches", str(info["switches"]))
    t.add_row("switch ports", str(info["switch_ports"]))
    t.add_row("oversubscription", f"{info['oversubscription_realised']:g}:1")
    t.add_row("capex (USD)", f"{doc['capex_usd']:,.0f}")
    t.add_row("power (W)", f"{doc['power_w']:,.0f}")
    t.add_row(f"simulated iteration ({unit})", f"{doc['iteration_s'] * k:.4f}")
    t.add_row(f"exposed communication ({unit})", f"{doc['exposed_comm_s'] * k:.4f}")
    if doc["tflops_per_gpu"] is not None:
        t.add_row("TFLOP/s per GPU", f"{doc['tflops_per_gpu']:.1f}")
        t.add_row("MFU", f"{doc['mfu']:.1%}")
    stdout.print(t)
    c = Table(title="candidates: one Clos per catalogue switch at the NIC speed")
    for head in ("switch", "tiers", "switches", "switch ports", "capex (USD)", "power (W)"):
        c.add_column(head, justify="left" if head == "switch" else "right")
    for row in doc["candidates"]:
        if row["tiers"] is None:
            c.add_row(row["switch"], "> 3", "-", "-", "-", "-")
            continue
        name = row["switch"] + (" (chosen)" if row["chosen"] else "")
        c.add_row(
            name,
            str(row["tiers"]),
            str(row["switches"]),
            str(row["switch_ports"]),
            f"{row['capex_usd']:,.0f}",
            f"{row['power_w']:,.0f}",
        )
    stdout.print(c)
    print(f"designed in {d.wall_s:.2f} s", file=sys.stderr)


def _hybrid(
    problem,
    workload,
    degree,
    link_gbps,
    electrical,
    oversubscription,
    electrical_gbps,
    time_limit,
    seed,
):
    """The optical layer of a hybrid fabric designed over the given electrical fabric."""
    from solvers import solve_hybrid
    from topoopt.fabrics.fat_tree import fat_tree, fat_tree_radix, leaf_hosts, leaf_spine

    n, gps = workload.servers, workload.gpus_per_server
    b_el = gbps_to_bytes_per_s(link_gbps if electrical_gbps is None else electrical_gbps)
    if electrical == "leaf-spine":
        elec = leaf_spine(
            n, oversubscription, leaf_hosts=leaf_hosts(n), port_bandwidth=b_el, gpus_per_server=gps
        )
    else:
        elec = fat_tree(
            fat_tree_radix(n),
            n,
            oversubscription=oversubscription,
            port_bandwidth=b_el,
            gpus_per_server=gps,
        )

    def report(incumbent_s: float, bound_s: float) -> None:
        print(
            f"hybrid: incumbent {duration_text(incumbent_s)}, lower bound {duration_text(bound_s)}",
            file=sys.stderr,
        )

    return solve_hybrid(problem, elec, degree, time_limit_s=time_limit, seed=seed, progress=report)


def register(app: typer.Typer) -> None:
    app.command("design")(design_command)
