"""``topoopt netsim FLOWS.json``: simulate flows on links under max-min fair sharing."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.common import (
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    write_output_json,
)
from traffic.errors import check_finite

__all__ = ["register", "netsim"]


@handle_errors
def netsim(
    flows_json: Annotated[
        Path, typer.Argument(help="Netsim JSON: links (B/s, s) and flows (bytes, s, paths).")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"flows": [...], "makespan"} as JSON.')
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON result to this file.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
) -> None:
    """Max-min fair flow-level simulation of a netsim JSON file (see docs of
    topoopt.flowsim.netsim_json); prints start and finish of every flow and the makespan."""
    from topoopt.flowsim.netsim_json import load_netsim, result_document  # numba: here only
    from topoopt.flowsim.simulator import simulate

    out_path = prepare_output(out, force, "--out")
    case = load_netsim(flows_json)
    result = simulate(case.flows, record_series=False)
    doc = result_document(case, result)
    check_finite(doc, str(flows_json))  # a non-finite finish time is an error, never null
    if out_path is not None:
        write_output_json(out_path, doc, indent=2)
    if as_json:
        emit_json(doc)
        return
    table = Table(title=f"{len(case.flow_ids)} flows on {len(case.link_ids)} links")
    table.add_column("flow")
    table.add_column("start (ms)", justify="right")
    table.add_column("finish (ms)", justify="right")
    table.add_column("duration (ms)", justify="right")
    for row in doc["flows"]:
        s, f = row["start"], row["finish"]
        table.add_row(str(row["id"]), f"{s * 1e3:.6g}", f"{f * 1e3:.6g}", f"{(f - s) * 1e3:.6g}")
    stdout.print(table)
    stdout.print(f"makespan: {doc['makespan'] * 1e3:.6g} ms")


def register(app: typer.Typer) -> None:
    """Add the ``netsim`` command to the application."""
    app.command("netsim")(netsim)
