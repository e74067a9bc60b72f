"""``topoopt demo``: the whole idea on embedded plans, a table and a self-contained report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.cli.common import emit_json, handle_errors, prepare_output, stdout, write_output_text

__all__ = ["register", "demo_command"]


@handle_errors
def demo_command(
    out: Annotated[Path, typer.Option(help="The HTML report")] = Path("topoopt-demo.html"),
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    force: Annotated[bool, typer.Option(help="Overwrite an existing report")] = False,
) -> None:
    """Run the end-to-end demo on embedded plans and write topoopt-demo.html."""
    from topoopt.report.traffic_figures import format_bytes
    from topoopt.studies.demo import run_demo

    prepare_output(out, force)
    result = run_demo()
    write_output_text(out, result.html())
    if as_json:
        emit_json({"report": str(out), "traffic": result.traffic.to_dict(orient="records")})
        return
    table = Table(title="Traffic per iteration (ring all-reduce)")
    for col in ("plan", "GPUs", "servers", "total", "inter-server", "intra-server"):
        table.add_column(col, justify="left" if col == "plan" else "right")
    for _, r in result.traffic.iterrows():
        table.add_row(
            r["plan"],
            str(int(r["gpus"])),
            str(int(r["servers"])),
            format_bytes(r["total_bytes"]),
            format_bytes(r["inter_server_bytes"]),
            format_bytes(r["intra_server_bytes"]),
        )
    stdout.print(table)
    stdout.print(f"report: {out}")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
