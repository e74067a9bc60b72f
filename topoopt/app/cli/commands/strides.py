"""``topoopt strides N D``: the best circulant stride set, proven optimal, with its scores."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import typer
from rich.table import Table

from topoopt.app.cli.common import emit_json, handle_errors, stdout

__all__ = ["register", "strides_command"]


@handle_errors
def strides_command(
    n: Annotated[int, typer.Argument(help="Servers")],
    d: Annotated[int, typer.Argument(help="Ports per server (even: each stride uses +p and -p)")],
    objective: Annotated[
        Literal["diameter", "mean-hops"], typer.Option(help="What to minimise")
    ] = "mean-hops",
    time_limit: Annotated[
        float | None, typer.Option(help="Stop after this many seconds (default: run to proof)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Best circulant strides (all coprime with N) for D ports, and TopoOpt's geometric rule."""
    from solvers import best_strides

    result = best_strides(n, d, objective, time_limit_s=time_limit)
    geo, geo_diam, geo_mean = result.geometric  # evaluated inside the time limit
    geo = list(geo)
    if as_json:
        out = result.to_dict()
        out["geometric"] = {"strides": geo, "diameter": geo_diam, "mean_hops": geo_mean}
        emit_json(out)
        return
    table = Table(title=f"Circulant strides, n={result.n}, d={result.degree} ({objective})")
    for col in ("method", "strides", "diameter", "mean hops", "status"):
        table.add_column(col, justify="left" if col in ("method", "strides") else "right")
    table.add_row(
        "exact",
        " ".join(map(str, result.strides)),
        str(result.diameter),
        f"{result.mean_hops:.3f}",
        result.status,
    )
    table.add_row(
        "geometric (TopoOpt)", " ".join(map(str, geo)), str(geo_diam), f"{geo_mean:.3f}", "-"
    )
    stdout.print(table)
    print(f"exact search: {result.wall_s:.2f} s", file=sys.stderr)  # the clock, off stdout
    if result.status != "optimal":
        stdout.print(f"lower bound: {result.lower_bound:.3f} (gap {100 * result.gap:.1f}%)")


def register(app: typer.Typer) -> None:
    app.command("strides")(strides_command)
