"""``topoopt compare PLAN --fabrics LIST``: one row per fabric, judged by the flow model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.cli.common import (
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    write_output_text,
    write_output_with,
)
from topoopt.units import gbps_to_bytes_per_s

__all__ = ["register", "compare_command"]

# Every name topoopt.studies.compare.FABRICS accepts (tests/test_cli.py checks they agree; the
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
    degree: Annotated[int, typer.Option(help="Ports per server")] = 8,
    link_gbps: Annotated[float, typer.Option(help="Port bandwidth, Gbps")] = 100.0,
    oversubscription: Annotated[float, typer.Option(help="Of fat-tree-oversub / hybrid")] = 4.0,
    time_limit: Annotated[float, typer.Option(help="Seconds for the joint optimizer")] = 30.0,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    csv: Annotated[Path | None, typer.Option(help="Write the table as CSV")] = None,
    html: Annotated[Path | None, typer.Option(help="Write the interactive report")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Iteration, communication and exposed time, capex, power, perf/$, ratio to ideal."""
    from topoopt.studies.compare import compare
    from traffic.load import load_workload

    prepare_output(csv, force, "--csv")
    prepare_output(html, force, "--html")
    names = [f.strip() for f in fabrics.split(",") if f.strip()]
    workload = load_workload(plan)
    res = compare(
        workload,
        names,
        degree,
        gbps_to_bytes_per_s(link_gbps),
        oversubscription=oversubscription,
        seed=seed,
        time_limit_s=time_limit,
        progress=lambda m: print(m, file=sys.stderr),
    )
    table = res.table
    if csv is not None:
        write_output_with(csv, lambda t: table.to_csv(t, index=False))
    if html is not None:
        from topoopt.report.pages import compare_page

        write_output_text(html, compare_page(res, title=f"{workload.name}: fabric comparison"))
    if as_json:
        emit_json({"rows": table.to_dict(orient="records"), "params": res.params})
        return
    t = Table(title=f"{workload.name}: {degree} x {link_gbps:g} Gbps per server")
    cols = [
        ("fabric", "fabric", None),
        ("iteration ms", "iteration_s", 1e3),
        ("comm ms", "comm_s", 1e3),
        ("exposed ms", "exposed_comm_s", 1e3),
        ("capex M$", "capex_usd", 1e-6),
        ("power kW", "power_w", 1e-3),
        ("x ideal", "ratio_to_ideal", 1.0),
    ]
    for head, _, _ in cols:
        t.add_column(head, justify="left" if head == "fabric" else "right", no_wrap=True)
    for _, r in table.iterrows():
        t.add_row(*[str(r[c]) if s is None else f"{r[c] * s:.3f}" for _, c, s in cols])
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
