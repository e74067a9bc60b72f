"""``topoopt advise JOBS``: every fabric family on these jobs at this scale; the verdict."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.commands.compare import (
    PER_PHASE_DELAY_US,
    DelayUsOption,
    PerPhaseOption,
    per_phase_delay,
)
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT_S,
    EfficiencyOption,
    GpuOption,
    GpusOption,
    PresetOption,
    PricesOption,
    RoundingCheckOption,
    SettingsOption,
    WorkLimitOption,
    emit_json,
    handle_errors,
    nic_hint,
    prepare_output,
    stdout,
    warn_line,
    warnings_said,
    write_output_text,
)
from topoopt.units import gbps_to_bytes_per_s

__all__ = ["register", "advise_command"]


@handle_errors
def advise_command(
    jobs: Annotated[
        str, typer.Argument(help="A plan (file or embedded name) or a jobs file: [{plan, weight}]")
    ],
    gpus: GpusOption = None,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    settings: SettingsOption = None,
    degree: Annotated[int, typer.Option(help="NICs (ports) per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[
        float, typer.Option(help="NIC / port bandwidth, Gbps")
    ] = DEFAULT_LINK_GBPS,
    budget: Annotated[
        float | None, typer.Option(help="Budget, USD (default: the full-bisection Clos's capex)")
    ] = None,
    target_iteration_s: Annotated[
        float | None,
        typer.Option(help="Target iteration time, s (default: the full-bisection Clos's)"),
    ] = None,
    oversubscription: Annotated[float, typer.Option(help="Of the oversubscribed Clos")] = 4.0,
    time_limit: Annotated[
        float, typer.Option(help="Wall-clock cap of the joint optimizer, seconds")
    ] = DEFAULT_TIME_LIMIT_S,
    work_limit: WorkLimitOption = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    prices: PricesOption = None,
    preset: PresetOption = None,
    cosearch: Annotated[
        bool,
        typer.Option(
            help="Co-search the plans: each family's row is the fastest of the given plan and "
            "the --finalists plans fastest on the ideal switch of the --screen plans of lowest "
            "bound"
        ),
    ] = False,
    finalists: Annotated[
        int, typer.Option(help="With --cosearch: co-searched plans tried on every family")
    ] = 3,
    screen: Annotated[
        int | None,
        typer.Option(
            help="With --cosearch: plans of lowest bound simulated on the ideal switch to choose "
            "the finalists (default 3 x --finalists)"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(help="Parallel evaluations (1: no Ray)")] = 1,
    address: Annotated[str | None, typer.Option(help="Existing Ray cluster address")] = None,
    per_phase: PerPhaseOption = False,
    delay_us: DelayUsOption = PER_PHASE_DELAY_US,
    phase_routing: Annotated[
        bool,
        typer.Option(
            "--phase-routing/--no-phase-routing",
            help="Add the row joint-phased: joint's circuits with routing tables changed per "
            "communication phase (same capex; never slower than joint; 20-100 s more CPU at "
            "1,024-4,096 GPUs, about 4 min at 16,384; refused in a warning where its sub-flows "
            "exceed the memory budget)",
        ),
    ] = True,
    rounding_check: RoundingCheckOption = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    html: Annotated[Path | None, typer.Option(help="Write the HTML report")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Which network to buy: Pareto, equal capex, equal iteration, verdict per job."""
    from topoopt.app.studies.advise import advise, json_document, load_jobs
    from topoopt.fabrics.cost import resolve_prices
    from traffic.errors import InputError

    delay_s = per_phase_delay(per_phase, delay_us)
    prepare_output(html, force, "--html")
    if finalists < 1:
        raise InputError("--finalists", finalists, "an integer >= 1")
    if workers < 1:
        raise InputError("--workers", workers, "a positive integer")
    price_table = resolve_prices(prices, preset)
    job_list = load_jobs(jobs)
    nic_hint(gpu, link_gbps)
    res = advise(
        job_list, gpus=gpus, gpu=gpu, efficiency=efficiency, settings=settings or (),
        degree=degree,
        link_bandwidth=gbps_to_bytes_per_s(link_gbps), budget_usd=budget,
        target_iteration_s=target_iteration_s,
        oversubscription=oversubscription, seed=seed, time_limit_s=time_limit,
        work_limit=work_limit, prices=price_table, workers=workers, address=address, progress=True,
        cosearch=cosearch, finalists=finalists, screen=screen, per_phase_delay_s=delay_s,
        phase_routing=phase_routing, rounding_check=rounding_check,
    )  # fmt: skip
    for line in res.warnings():  # stderr, the JSON envelope's warnings and the HTML report
        warn_line(line)
    doc = json_document(res)
    if html is not None:
        from topoopt.app.report.html import page_html

        # the CLI table's columns (the plan with --cosearch, the Pareto rows marked), and why
        # a row was not built (the CLI says it on stderr)
        cols = [
            "job", "family", "fabric", *(("plan",) if cosearch else ()), "capex_usd", "power_w",
            "iteration_s", "iterations_per_s_per_musd", "iterations_per_s_per_kw", "server_gbps",
            "tiers", "optics_share", "error",
        ]  # fmt: skip
        frame = res.rows[[c for c in cols if c in res.rows]].reset_index(drop=True)
        pareto = [
            k
            for k, (job, fab) in enumerate(zip(frame["job"], frame["fabric"], strict=True))
            if fab in res.judged[job]["pareto"]
        ]
        title = f"advise: {', '.join(j['name'] for j in res.params['jobs'])}"
        caption = "marked: on the Pareto front (capex, power, iteration)"
        page = page_html(
            [], title, verdict=res.verdict, summary=[(caption, frame)], warnings=warnings_said(),
            highlight=pareto,
        )  # fmt: skip
        write_output_text(html, page)
    if as_json:
        emit_json(doc)
        return
    t = Table(
        title=f"advise: {degree} x {link_gbps:g} Gbps per server"
        + ("" if res.params["gpu"] is None else f", {res.params['gpu']}")
        + ("" if efficiency is None else f" at efficiency {efficiency:g}")
    )
    heads = (
        ("job", "job", None), ("family", "family", None), ("fabric", "fabric", None),
        *((("plan", "plan", None),) if cosearch else ()),
        ("capex M$", "capex_usd", 1e-6), ("power kW", "power_w", 1e-3),
        ("iteration s", "iteration_s", 1.0), ("it/s per M$", "iterations_per_s_per_musd", 1.0),
        ("it/s per kW", "iterations_per_s_per_kw", 1.0), ("Gbps/server", "server_gbps", 1.0),
        ("tiers", "tiers", None), ("optics %", "optics_share", 100.0),
    )  # fmt: skip
    for h, _, _ in heads:
        t.add_column(h, justify="left" if h in ("job", "family", "fabric", "plan") else "right")
    for _, r in res.rows.iterrows():
        if isinstance(r.get("error"), str):
            print(f"{r['job']} / {r['fabric']}: not built: {r['error']}", file=sys.stderr)
            continue
        pareto = r["fabric"] in res.judged[r["job"]]["pareto"]
        cells = [_cell(r.get(c), c, s) for _, c, s in heads]
        t.add_row(*cells, style="bold green" if pareto else None)
    for s in res.verdict:  # the verdict first, as the HTML report opens with it
        stdout.print(s, markup=False, highlight=False)
    stdout.print(t)
    stdout.print("bold green: on the Pareto front (capex, power, iteration)", highlight=False)
    stdout.print(f"{len(res.rows)} evaluations", highlight=False)
    print(f"{len(res.rows)} evaluations in {res.wall_s:.1f} s", file=sys.stderr)  # the clock


def _cell(value, column: str, scale: float | None) -> str:
    """One cell of the table: ``-`` where the row has no value (a torus has no switch tiers:
    the table printed ``nan``), tiers as a count (it printed ``1.0``), numbers scaled to the
    column's unit at 4 significant digits.

    >>> _cell(float("nan"), "tiers", None), _cell(2.0, "tiers", None), _cell(0.5, "x", 100.0)
    ('-', '2', '50')
    """
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column == "tiers":
        return str(int(value))
    return str(value) if scale is None else f"{float(value) * scale:.4g}"


def register(app: typer.Typer) -> None:
    app.command("advise")(advise_command)
