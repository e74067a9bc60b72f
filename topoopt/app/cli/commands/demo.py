"""``topoopt demo``: the whole idea on embedded plans, a table and a self-contained report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from topoopt.app.cli.common import (
    emit_json,
    handle_errors,
    prepare_output,
    stderr,
    stdout,
    warn_line,
    warnings_said,
    write_output_text,
)

__all__ = ["register", "demo_command"]


@handle_errors
def demo_command(
    out: Annotated[Path, typer.Option(help="The HTML report")] = Path("topoopt-demo.html"),
    time_limit: Annotated[
        float,
        typer.Option(
            help="Wall-clock cap of each design search, seconds: a safety net only (the searches "
            "stop on their deterministic work limits, so every run prints the same table)"
        ),
    ] = 900.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    force: Annotated[bool, typer.Option(help="Overwrite an existing report")] = False,
) -> None:
    """Run the end-to-end demo on embedded plans; write a self-contained report."""
    from topoopt.app.studies.demo import DEMO_DEGREES, DEMO_FABRICS, DEMO_PLANS, run_demo

    prepare_output(out, force, "--out")
    total = len(DEMO_PLANS) * (1 + len(DEMO_DEGREES) * len(DEMO_FABRICS))
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=stderr,
        transient=False,
    ) as bar:
        task = bar.add_task("demo", total=total)

        def step(msg: str) -> None:
            bar.update(task, advance=1, description=msg)

        result = run_demo(time_limit_s=time_limit, progress=lambda m: _say(bar, m), on_step=step)
    for line in result.warnings():  # on stderr, and in the JSON document and the report
        warn_line(line)
    write_output_text(out, result.html(warnings_said()))
    cmp = result.comparison
    if as_json:
        emit_json(
            {
                "report": str(out),
                "traffic": result.traffic.to_dict(orient="records"),
                "rows": _json_rows(cmp),
                "verdict": result.verdict(),
                "deterministic": result.deterministic,
            }
        )
        return
    for sentence in result.verdict():  # the verdict first, as the report opens with it
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(
        title="Simulated iteration per fabric (flow model); x ideal = over the ideal switch",
        caption="bold green: fastest and fastest at equal capex per plan and port count; "
        "ideal: a bound, not a product",
    )
    from topoopt.app.report.time_units import time_unit

    # one unit per plan (ms for DLRM, s for GPT-3), written in every cell
    units = {
        plan: time_unit(g["iteration_s"], g["comm_s"], g["exposed_comm_s"])
        for plan, g in cmp.groupby("plan", sort=False)
    }
    heads = ("plan", "ports", "fabric", "iteration", "comm", "exposed", "capex M$", "x ideal")
    for head in (*heads, "iter/s per M$"):
        t.add_column(head, justify="left" if head in ("plan", "fabric") else "right", no_wrap=True)
    from topoopt.app.report.verdict import shown_name

    best = result.best_positions()
    for i, (_, r) in enumerate(cmp.iterrows()):
        unit, k = units[r["plan"]]
        t.add_row(
            str(r["plan"]),
            str(int(r["degree"])),
            shown_name(str(r["fabric"])),
            *(f"{r[c] * k:.2f} {unit}" for c in ("iteration_s", "comm_s", "exposed_comm_s")),
            f"{r['capex_usd'] / 1e6:.3f}",
            f"{r['ratio_to_ideal']:.3f}",
            f"{r['iterations_per_s_per_musd']:.3f}" if "iterations_per_s_per_musd" in r else "-",
            style="bold green" if i in best else None,
        )
    stdout.print(t)  # the report's path is on stderr, once ("wrote ...")


def _say(bar: Progress, message: str) -> None:
    """A progress line above the bar, as written: no time or source-location columns
    (``Progress.log`` would add ``demo.py:49``), no markup or highlighting."""
    bar.console.print(message, markup=False, highlight=False, soft_wrap=True)


def _json_rows(cmp) -> list[dict]:
    """Comparison rows for ``--json`` (:func:`topoopt.app.studies.compare.json_rows`: a designed
    fabric's columns are ``null`` on the other fabrics' rows)."""
    from topoopt.app.studies.compare import json_rows

    return json_rows(cmp)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
