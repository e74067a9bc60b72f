"""``topoopt cluster JOBS.yaml``: jobs placed on disjoint servers of a shared OCS cluster, each
designed within its servers' ports on realisable circuits (:mod:`topoopt.app.studies.cluster`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.choices import SolverName
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    ReductionOption,
    command_progress,
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    write_output_text,
)
from topoopt.app.report.time_units import time_unit
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError
from traffic.limits import check_server_ports

__all__ = ["register", "cluster_command"]


@handle_errors
def cluster_command(
    jobs: Annotated[Path, typer.Argument(help="Jobs file (YAML/JSON): jobs: [{name, plan}]")],
    servers: Annotated[int, typer.Option(help="Servers of the cluster")],
    degree: Annotated[int, typer.Option(help="Optical ports per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[float, typer.Option(help="Port bandwidth, Gbps")] = DEFAULT_LINK_GBPS,
    ocs_radix: Annotated[
        int | None, typer.Option(help="Ports of one OCS unit (default: one unit per port index)")
    ] = None,
    arrivals: Annotated[
        Path | None, typer.Option(help="Events file: [{time_s, arrive: {name, plan} | depart}]")
    ] = None,
    solver: Annotated[SolverName, typer.Option(help="Per-job solver")] = SolverName.topoopt,
    work_limit: Annotated[
        float, typer.Option(help="Deterministic work budget of each joint solve")
    ] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    reduction: ReductionOption = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    html: Annotated[Path | None, typer.Option(help="Write an HTML report")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Per-job iteration time on a shared OCS cluster against each job alone on an ideal switch."""
    from topoopt.app.studies.cluster import run_cluster

    solver = SolverName(solver).value
    if not (work_limit > 0 and math.isfinite(work_limit)):
        raise InputError("--work-limit", work_limit, "a finite number > 0")
    if servers < 1 or servers > 1_000_000:
        raise InputError("--servers", servers, "an integer from 1 to 1,000,000")
    check_server_ports("--degree", degree)
    if servers * degree > 2**24:
        raise InputError("--servers x --degree", servers * degree, "at most 2^24 ports")
    if ocs_radix is not None and ocs_radix < 2:
        raise InputError("--ocs-radix", ocs_radix, "an integer >= 2 (ports of one OCS unit)")
    prepare_output(html, force, "--html")
    # a bar with ETA on a terminal; off one, a line every few seconds and the rest at the end
    # (held by handle_errors, so an error leaves one line on stderr)
    with command_progress("cluster") as bar:
        res = run_cluster(
            jobs, servers, degree, gbps_to_bytes_per_s(link_gbps),
            ocs_radix=ocs_radix, arrivals=arrivals, solver=solver, seed=seed,
            work_limit=work_limit if solver == "joint" else None,
            progress=bar, reduction=reduction,
        )  # fmt: skip
    from topoopt.app.report.study_verdicts import cluster_verdict

    verdict = cluster_verdict(res)
    if html is not None:
        from topoopt.app.report.cluster_figures import cluster_page

        write_output_text(html, cluster_page(res, verdict=verdict))
    if as_json:
        emit_json({"verdict": verdict, **res})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(title=f"{len(res['jobs'])} jobs on {servers} servers, {degree} x {link_gbps:g} Gbps")
    u, k = time_unit([j[c] for j in res["jobs"] for c in ("iteration_s", "alone_ideal_s")])
    for head in ("job", "servers", f"iteration {u}", f"ideal switch {u}", "slowdown", "repaired"):
        t.add_column(head, justify="right", no_wrap=True)
    for j in res["jobs"]:
        t.add_row(
            j["name"],
            f"{j['servers'][0]}..{j['servers'][-1]}",
            f"{j['iteration_s'] * k:.4g}",
            f"{j['alone_ideal_s'] * k:.4g}",
            f"{j['slowdown']:.3f}",
            str(j["repaired_circuits"]),
        )
    stdout.print(t)
    for e in res.get("events", []):
        stdout.print(
            f"t={e['time_s']:g} s {e['event']} {e['job']}: {e['changed_circuits']} running "
            f"circuits changed, {e['added_circuits']} added"
            + (" (re-planned)" if e["replanned"] else "")
        )


def register(app: typer.Typer) -> None:
    app.command("cluster")(cluster_command)
