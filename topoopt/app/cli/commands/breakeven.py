"""``topoopt breakeven PLAN``: the port price at which an optical design and the cost-equivalent
fat-tree tie in iteration time (:mod:`topoopt.app.studies.breakeven`)."""

from __future__ import annotations

import enum
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT_S,
    PresetOption,
    PricesOption,
    command_progress,
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    warn_line,
    warnings_said,
    write_output_text,
)
from topoopt.app.report.time_units import time_unit
from topoopt.units import gbps_to_bytes_per_s

__all__ = ["register", "breakeven_command"]


class Design(enum.StrEnum):
    topoopt = "topoopt"
    topoopt_released = "topoopt-released"
    topoopt_best = "topoopt-best"
    joint = "joint"


class Mode(enum.StrEnum):
    electrical = "electrical"
    optical = "optical"


def _finite(obj):
    """``inf`` / NaN (a budget that buys no fat-tree) as null in the JSON document."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


@handle_errors
def breakeven_command(
    plan: Annotated[str, typer.Argument(help="Plan file, embedded plan name, or .fbuf")],
    degree: Annotated[int, typer.Option(help="Optical ports per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[float, typer.Option(help="Port bandwidth, Gbps")] = DEFAULT_LINK_GBPS,
    design_fabric: Annotated[
        Design, typer.Option("--design-fabric", "--solver", help="The optical design")
    ] = Design.topoopt,
    mode: Annotated[
        Mode,
        typer.Option(
            help="electrical: vary the switch-port price; optical: the patch-panel/OCS port price"
        ),
    ] = Mode.electrical,
    prices: PricesOption = None,
    preset: PresetOption = None,
    rel_tol: Annotated[float, typer.Option(help="Bisection stops at this price ratio - 1")] = 1e-3,
    time_limit: Annotated[
        float, typer.Option(help="Seconds for the joint optimizer")
    ] = DEFAULT_TIME_LIMIT_S,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    html: Annotated[Path | None, typer.Option(help="Write iteration time vs price")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Switch-port (or optical port) price at which the design ties the cost-equivalent fat-tree."""
    from topoopt.app.studies.breakeven import breakeven
    from topoopt.fabrics.cost import resolve_prices
    from traffic.load import load_workload

    prepare_output(html, force, "--html")
    table = resolve_prices(prices, preset)
    workload = load_workload(plan)
    with command_progress("breakeven") as bar:
        res = breakeven(
            workload,
            degree,
            gbps_to_bytes_per_s(link_gbps),
            design_fabric=design_fabric.value,
            mode=mode.value,
            prices=table,
            seed=seed,
            time_limit_s=time_limit,
            rel_tol=rel_tol,
            progress=bar,
        )
    from topoopt.app.report.study_verdicts import breakeven_verdict

    warn_line(res.params.get("search_warning"))  # stderr, JSON and the HTML report
    verdict = breakeven_verdict(res)
    if html is not None:
        from topoopt.app.report.cost_figures import breakeven_curve
        from topoopt.app.report.html import page_html

        what = "switch-port" if mode.value == "electrical" else "optical port"
        fig = breakeven_curve(
            res.curve,
            res.optical_iteration_s,
            res.price_usd,
            price_label=f"{what} price, USD ({res.price_item})",
            title=f"{workload.name}: {res.design} vs the cost-equivalent fat-tree",
        )
        intro = (
            f"{workload.name}: {workload.servers} servers, {degree} x {link_gbps:g} Gbps; "
            f"breakeven {res.status}"
            + ("" if res.price_usd is None else f" at {res.price_usd:.4g} USD per port")
            + "."
        )
        write_output_text(
            html,
            page_html(
                [("breakeven-curve", fig)],
                f"{workload.name}: breakeven",
                intro,
                verdict=verdict,
                warnings=warnings_said(),
            ),
        )
    if as_json:
        emit_json({"verdict": verdict, **_finite(res.to_dict())})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(title=f"{workload.name}: {res.design} vs cost-equivalent fat-tree ({res.mode})")
    unit, k = time_unit([res.optical_iteration_s, res.tie_iteration_s or 0.0])
    heads = ("status", "price USD", "item", "table price USD", f"optical {unit}", f"tie {unit}")
    for head in heads:
        t.add_column(head, justify="right", no_wrap=True)
    t.add_row(
        res.status,
        "-" if res.price_usd is None else f"{res.price_usd:.4g}",
        res.price_item,
        f"{res.base_price_usd:.4g}",
        f"{res.optical_iteration_s * k:.4g}",
        "-" if res.tie_iteration_s is None else f"{res.tie_iteration_s * k:.4g}",
    )
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("breakeven")(breakeven_command)
