"""``topoopt traffic PLAN``: the traffic of one iteration, by class, and its pair matrix."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.common import (
    GpusOption,
    SettingsOption,
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    write_output_json,
    write_output_text,
    write_output_with,
)
from traffic.errors import InputError, check_finite

__all__ = ["register", "traffic_command"]


class Level(StrEnum):
    gpu = "gpu"
    server = "server"


class Algorithm(StrEnum):
    ring = "ring"
    halving_doubling = "halving-doubling"
    tree = "tree"
    direct = "direct"
    hierarchical = "hierarchical"


OUT_SUFFIXES = (".csv", ".parquet", ".json")


def _write_pairs(path: Path, frame, level: str, n: int) -> None:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        write_output_with(path, lambda t: frame.to_csv(t, index=False))
    elif suffix == ".parquet":
        write_output_with(path, lambda t: frame.to_parquet(t, index=False))
    else:
        doc = {"level": level, "n": n, **{c: frame[c].to_numpy() for c in frame.columns}}
        write_output_json(path, doc)


@handle_errors
def traffic_command(
    plan: Annotated[
        str, typer.Argument(help="Plan file (.yaml/.json), embedded plan name, or .fbuf")
    ],
    level: Annotated[
        Level, typer.Option(help="Endpoints of the matrix written by --out")
    ] = Level.server,
    algorithm: Annotated[
        Algorithm, typer.Option(help="Collective algorithm used to expand the demands")
    ] = Algorithm.ring,
    out: Annotated[
        Path | None, typer.Option(help="Write the pair matrix: FILE.csv, .parquet or .json")
    ] = None,
    html: Annotated[Path | None, typer.Option(help="Write an interactive server heatmap")] = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Bytes per class (cluster total and per GPU), intra- vs inter-server bytes."""
    from traffic.expand import expand
    from traffic.load import load_workload
    from traffic.summary import class_table, pair_frame, traffic_summary

    if out is not None and out.suffix.lower() not in OUT_SUFFIXES:
        raise InputError("--out", str(out), f"a file ending in {', '.join(OUT_SUFFIXES)}")
    if html is not None and html.suffix.lower() not in (".html", ".htm"):
        raise InputError("--html", str(html), "a file ending in .html")
    prepare_output(out, force, "--out")
    prepare_output(html, force, "--html")

    workload = load_workload(plan, settings=settings or (), gpus=gpus)
    summary = traffic_summary(workload, algorithm.value)
    check_finite(summary, plan)  # a non-finite byte count is an error naming the plan
    if out is not None:
        pairs = expand(workload, algorithm.value, level.value)
        _write_pairs(out, pair_frame(pairs), level.value, pairs.n)
    if html is not None:
        from topoopt.app.report.html import page_html
        from topoopt.app.report.traffic_figures import class_bars, server_heatmap

        server_pairs = expand(workload, algorithm.value, "server")
        figs = [
            ("traffic-heatmap", server_heatmap(server_pairs)),
            ("traffic-classes", class_bars(class_table(workload, server_pairs))),
        ]
        from topoopt.app.report.traffic_figures import format_bytes

        classes = class_table(workload, server_pairs)
        cols = ["bytes", "bytes_per_gpu", "intra_server_bytes", "inter_server_bytes"]
        shown = classes[["class", *cols]].copy()
        for c in cols:
            shown[c] = [format_bytes(v) for v in shown[c]]
        shown.columns = ["class", "total", "per GPU", "intra-server", "inter-server"]
        page = page_html(
            figs,
            f"Traffic of {workload.name or plan}",
            summary=[("Bytes per iteration, by class", shown)],
        )
        write_output_text(html, page)
    if as_json:
        emit_json(summary)
        return
    from topoopt.app.report.traffic_figures import format_bytes

    table = Table(title=f"{workload.name or plan}: traffic per iteration ({algorithm.value})")
    for col in ("class", "total", "per GPU", "intra-server", "inter-server"):
        table.add_column(col, justify="left" if col == "class" else "right")
    pairs = expand(workload, algorithm.value, "server")
    for _, row in class_table(workload, pairs).iterrows():
        table.add_row(
            row["class"],
            format_bytes(row["bytes"]),
            format_bytes(row["bytes_per_gpu"]),
            format_bytes(row["intra_server_bytes"]),
            format_bytes(row["inter_server_bytes"]),
        )
    table.add_row(
        "all",
        format_bytes(summary["total_bytes"]),
        format_bytes(summary["total_bytes"] / workload.gpus),
        format_bytes(summary["intra_server_bytes"]),
        format_bytes(summary["inter_server_bytes"]),
        style="bold",
    )
    stdout.print(table)
    params = summary["parameters"]
    stdout.print(
        f"{workload.gpus} GPUs on {workload.servers} servers"
        + (f", {params:,} parameters" if params else "")
    )
    if summary["conventions"]:
        stdout.print(
            "conventions: " + ", ".join(f"{k}={v}" for k, v in summary["conventions"].items())
        )


def register(app: typer.Typer) -> None:
    app.command("traffic")(traffic_command)
