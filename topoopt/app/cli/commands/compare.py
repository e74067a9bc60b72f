"""``topoopt compare PLAN --fabrics LIST``: one row per fabric, judged by the flow model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.byte_sizes import parse_bytes
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
    PriorityOption,
    ReductionOption,
    RoundingCheckOption,
    SettingsOption,
    SplitAllreduceOption,
    WorkLimitOption,
    command_progress,
    emit_json,
    given_options,
    handle_errors,
    nic_hint,
    parse_name_list,
    prepare_output,
    stdout,
    to_jsonable,
    warn_line,
    warnings_said,
    write_output_text,
    write_output_with,
)
from topoopt.units import gbps_to_bytes_per_s

__all__ = [
    "register",
    "compare_command",
    "PER_PHASE_DELAY_US",
    "PerPhaseOption",
    "DelayUsOption",
    "per_phase_delay",
]

PER_PHASE_DELAY_US = 10_000.0
"""``--delay-us``'s default with ``--per-phase`` (``compare``, ``advise``): ``reconfig``'s,
Palomar's 10 ms."""

PerPhaseOption = Annotated[
    bool,
    typer.Option(
        "--per-phase",
        help="Evaluate the ocs-spine and hybrid rows with per-phase circuits charged the OCS "
        "delay (as reconfig --fabric ocs-spine / hybrid; the static circuits always a "
        "candidate; minutes a row at 1,024 GPUs)",
    ),
]
DelayUsOption = Annotated[
    float, typer.Option(help="With --per-phase: reconfiguration delay of the OCS, microseconds")
]


def per_phase_delay(per_phase: bool, delay_us: float) -> float | None:
    """``--per-phase`` / ``--delay-us`` as seconds (None: static circuits); ``--delay-us`` given
    without ``--per-phase``, or not a finite number of microseconds >= 0: a one-line error."""
    import math

    from traffic.errors import InputError

    if isinstance(delay_us, bool) or not (math.isfinite(delay_us) and delay_us >= 0):
        raise InputError("--delay-us", delay_us, "a finite number of microseconds >= 0")
    if not per_phase:
        if given_options("delay_us"):
            raise InputError("--delay-us", delay_us, "only with --per-phase")
        return None
    return float(delay_us) / 1e6


# Every name topoopt.app.studies.compare.FABRICS accepts (tests/test_cli.py checks they agree; the
# list is written out so that --help does not import the study).
ALL_FABRICS = (
    "ideal",
    "fat-tree",
    "fat-tree-oversub",
    "fat-tree-cost-equivalent",
    "torus",
    "expander",
    "topoopt",
    "topoopt-released",
    "topoopt-best",
    "joint",
    "hybrid",
    "fat-tree-ina",
    "hybrid-ina",
    "rail",
    "rail-only",
    "ocs-spine",
    "rail-circuits",
    "rail-circuits-2",
)
DEFAULT_FABRICS = "ideal,fat-tree,fat-tree-oversub,torus,expander,topoopt,topoopt-best,joint"


@handle_errors
def compare_command(
    plan: Annotated[str, typer.Argument(help="Plan file, embedded plan name, or .fbuf")],
    fabrics: Annotated[
        str,
        typer.Option(
            help="Comma-separated fabrics, any of: "
            + ", ".join(ALL_FABRICS)
            + ". Default: "
            + DEFAULT_FABRICS.replace(",", ", "),
            show_default=False,
        ),
    ] = DEFAULT_FABRICS,
    degree: Annotated[int, typer.Option(help="Ports per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[float, typer.Option(help="Port bandwidth, Gbps")] = DEFAULT_LINK_GBPS,
    oversubscription: Annotated[float, typer.Option(help="Of fat-tree-oversub / hybrid")] = 4.0,
    time_limit: Annotated[
        float, typer.Option(help="Seconds for the joint optimizer")
    ] = DEFAULT_TIME_LIMIT_S,
    work_limit: WorkLimitOption = None,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    prices: PricesOption = None,
    preset: PresetOption = None,
    priority: PriorityOption = None,
    split_allreduce: SplitAllreduceOption = None,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    ocs_radix: Annotated[
        int | None,
        typer.Option(
            help="Ports of one OCS for topoopt, topoopt-best and joint: the optical layer "
            "needs several, a circuit joins two ports of one OCS (default: one OCS of all "
            "servers per port index)"
        ),
    ] = None,
    ocs_layout: Annotated[
        OcsLayoutKind,
        typer.Option(
            help="With --ocs-radix: per-rail (port i of every server on OCS group i) "
            "or packed (fewest OCSes)"
        ),
    ] = OcsLayoutKind.per_rail,
    per_phase: PerPhaseOption = False,
    delay_us: DelayUsOption = PER_PHASE_DELAY_US,
    reduction: ReductionOption = True,
    rounding_check: RoundingCheckOption = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    csv: Annotated[Path | None, typer.Option(help="Write the table as CSV")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the interactive report")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Iteration, communication and exposed time, capex, power, perf/$, ratio to ideal."""
    from topoopt.app.studies.compare import compare, json_rows
    from traffic.load import load_workload

    delay_s = per_phase_delay(per_phase, delay_us)
    prepare_output(csv, force, "--csv")
    prepare_output(html, force, "--html")
    names = parse_name_list(fabrics, "--fabrics")
    from topoopt.fabrics.cost import resolve_prices

    price_table = resolve_prices(prices, preset)
    workload = load_workload(
        plan, gpu=gpu, efficiency=efficiency, settings=settings or (), gpus=gpus
    )
    nic_hint(gpu, link_gbps)
    with command_progress("compare") as bar:
        res = compare(
            workload,
            names,
            degree,
            gbps_to_bytes_per_s(link_gbps),
            oversubscription=oversubscription,
            seed=seed,
            time_limit_s=time_limit,
            work_limit=work_limit,
            prices=price_table,
            progress=bar,
            priority=priority,
            on_fabric_done=lambda _name: bar.advance(),
            split_allreduce=parse_bytes(split_allreduce, "--split-allreduce"),
            ocs_radix=ocs_radix,
            ocs_layout=ocs_layout.value,
            per_phase_delay_s=delay_s,
            reduction=reduction,
            rounding_check=rounding_check,
        )
    table = res.table
    res.params["prices"] = price_table.source
    from solvers import search_warning
    from topoopt.app.studies.compare import fabric_warning

    for run in res.runs:  # one line per search that fell back or was cut by the clock
        if run.design is not None:  # on stderr, and in the JSON document and the HTML report
            warn_line(search_warning(run.design, run.name))
        warn_line(fabric_warning(run))  # rings that miss cables, an oversubscription not built
    from topoopt.app.report.verdict import (
        best_rows,
        rounding_sentence,
        shown_name,
        verdict_sentences,
    )
    from topoopt.app.studies.compare import per_phase_sentence

    verdict = verdict_sentences(table, res.iterations)
    if (pp := per_phase_sentence(table)) is not None:
        verdict.append(pp)
    if (rs := rounding_sentence(table, rounding_check)) is not None:
        verdict.append(rs)
    if csv is not None:
        flat = table.copy()
        for col in ("capex_breakdown", "power_breakdown", "fabric_info", "schedule"):
            if col in flat:  # nested columns as one JSON document per cell
                flat[col] = [
                    json.dumps(to_jsonable(v), sort_keys=True, allow_nan=False) for v in flat[col]
                ]
        write_output_with(csv, lambda t: flat.to_csv(t, index=False))
    if html is not None:
        from topoopt.app.report.pages import compare_page

        page = compare_page(
            res, title=f"{workload.name}: fabric comparison", warnings=warnings_said()
        )
        write_output_text(html, page)
    if as_json:  # null: no design
        emit_json({"verdict": verdict, "rows": json_rows(table), "params": res.params})
        return
    gpu, eff = res.params["gpu"], res.params["efficiency"]
    t = Table(
        title=f"{workload.name}: {degree} NICs x {link_gbps:g} Gbps per server"
        + ("" if gpu is None else f", {gpu}")
        + ("" if eff is None else f" at efficiency {eff:g}"),
        caption="bold green: fastest overall and fastest at equal capex; "
        "ideal: a bound, not a product" + _ideal_caption(table),
    )
    from topoopt.app.report.pages import summary_columns  # the HTML summary's columns

    cols = summary_columns(table)
    for head, c, _ in cols:
        if c not in table:
            continue
        t.add_column(head, justify="left" if head == "fabric" else "right", no_wrap=True)
    for _, r in table.iterrows():
        if isinstance(r.get("error"), str):  # a fabric that cannot be built: say why
            shown = [c for _, c, _ in cols if c in table]
            t.add_row(r["fabric"], *["n/a"] * (len(shown) - 1))
            print(f"{r['fabric']}: not built: {r['error']}", file=sys.stderr)
            continue
        t.add_row(
            *[
                (shown_name(str(r[c])) if c == "fabric" else str(r[c]))
                if s is None
                else f"{r[c] * s:.3f}"
                for _, c, s in cols
                if c in table
            ]
        )
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    best = best_rows(table)
    for i, row in enumerate(t.rows):
        row.style = "bold green" if i in best else None
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)


def _ideal_caption(table) -> str:
    """``; ideal with joint's collectives (the plan's: 87.933 ms)`` when the ideal row ran a
    design's collectives (``compare``'s ``ideal_collectives``), else nothing."""
    if "ideal_collectives" not in table:
        return ""
    r = table.loc[table["fabric"] == "ideal"].iloc[0]
    who = r.get("ideal_collectives")
    if not isinstance(who, str):
        return ""
    return f"; ideal with {who}'s collectives (the plan's own: {1e3 * r['ideal_ring_s']:.6g} ms)"
