"""``topoopt whatif DESIGN.json --plan PLAN``: a design's iteration time when circuits fail."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.choices import SolverName
from topoopt.app.cli.common import (
    DEFAULT_SEED,
    command_progress,
    emit_json,
    handle_errors,
    stdout,
)
from traffic.errors import InputError

__all__ = ["register", "whatif_command"]


def _ms(x: float | None, k: float = 1e3) -> str:
    return "cannot run" if x is None else f"{x * k:.3f}"


@handle_errors
def whatif_command(
    plan: Annotated[
        str, typer.Argument(help="The plan the design was made for: file or embedded name")
    ],
    design: Annotated[
        Path, typer.Option(help="A design.json written by `topoopt design` for PLAN")
    ],
    fail_links: Annotated[int | None, typer.Option(help="K random circuits fail (seeded)")] = None,
    fail_ports: Annotated[
        Path | None,
        typer.Option(help="CSV/JSON of failed ports (server,ports) or circuits (u,v,count)"),
    ] = None,
    fail_ocs: Annotated[
        int | None, typer.Option(help="Optical device U fails (port U of every server)")
    ] = None,
    sweep: Annotated[
        bool, typer.Option("--sweep", help="Slowdown over random single and double failures")
    ] = False,
    samples: Annotated[int, typer.Option(help="Samples per failure count (--sweep; 1..100)")] = 4,
    solver: Annotated[
        SolverName | None, typer.Option(help="Re-optimiser (default: the design's solver)")
    ] = None,
    work_limit: Annotated[
        float, typer.Option(help="Deterministic work budget of a joint re-optimisation")
    ] = 2.0,
    seed: Annotated[
        int, typer.Option(help="Seed of the failures and the re-optimiser")
    ] = DEFAULT_SEED,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Iteration time before a failure, after it (rerouted), and re-optimised."""
    from topoopt.app.studies.whatif import (
        links_failure,
        load_case,
        ocs_failure,
        ports_failure,
        read_failure_file,
        whatif,
        whatif_sweep,
    )

    given = [x is not None for x in (fail_links, fail_ports, fail_ocs)] + [sweep]
    if sum(given) != 1:
        raise InputError(
            "--fail-links/--fail-ports/--fail-ocs/--sweep",
            f"{sum(given)} given",
            "exactly one",
        )
    if not (work_limit > 0 and work_limit < float("inf")):
        raise InputError("--work-limit", work_limit, "a finite number > 0")
    solver = None if solver is None else SolverName(solver).value
    spec = read_failure_file(fail_ports) if fail_ports is not None else None
    case = load_case(design, plan)
    d = case.design

    if sweep:
        with command_progress("whatif") as bar:
            res = whatif_sweep(
                case, samples=samples, seed=seed, solver=solver, work_limit=work_limit,
                progress=bar,
            )  # fmt: skip
        if as_json:
            emit_json(res)
            return
        t = Table(title=f"slowdown over random circuit failures ({samples} samples each)")
        t.add_column("failure")
        cols = ("p0", "p50", "p90", "p100")
        for q in cols:
            t.add_column(q, justify="right")
        t.add_column("cannot run", justify="right")

        def cells(qs: dict | None) -> list[str]:
            return [f"{(qs or {}).get(q, float('nan')):.3f}" for q in cols]

        for k, r in res["failures"].items():
            runs = str(r["disconnected"])
            t.add_row(f"{k} circuit(s), rerouted", *cells(r["after_slowdown"]), runs)
            t.add_row(f"{k} circuit(s), re-optimised", *cells(r["reoptimized_slowdown"]), runs)
            if "reoptimized_vs_best_intact" in r:
                t.add_row(
                    f"{k} circuit(s), re-optimised / best intact",
                    *cells(r["reoptimized_vs_best_intact"]),
                    runs,
                )
        ft = res.get("fat_tree")
        if ft:
            lost = f"{ft['switch_losses_disconnecting']}/{ft['switches']}"
            t.add_row("fat-tree: one switch", *cells(ft["slowdown"]), lost)
        stdout.print(t)
        if "best_intact_s" in res:
            stdout.print(
                f"the intact circuits on a re-optimised design's routes and rings take "
                f"{_ms(res['best_intact_s'])} ms against the design's {_ms(res['before_s'])} ms:"
                " its own routing leaves that on the table"
            )
        return
    if fail_links is not None:
        f = links_failure(case.ports, d.servers, fail_links, seed)
    elif fail_ocs is not None:
        f = ocs_failure(case.ports, d.servers, d.degree, fail_ocs)
    else:
        f = ports_failure(case.ports, d.servers, d.degree, spec)
    with command_progress("whatif") as bar:
        res = whatif(case, f, solver=solver, seed=seed, work_limit=work_limit, progress=bar)
    if res["after_s"] is None and res["reoptimized_s"] is None:
        raise InputError(
            "failure",
            res["failure"],
            "a failure that leaves the job's servers connected (rerouted or re-optimised)",
        )
    from topoopt.app.report.study_verdicts import whatif_verdict
    from topoopt.app.report.time_units import time_unit

    verdict = whatif_verdict(res)
    if as_json:
        emit_json({"verdict": verdict, **res})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    t = Table(title=f"{case.workload.name}: {res['failure']} ({len(res['failed'])} circuits lost)")
    keys = ("before_s", "before_rerouted_s", "after_s", "reoptimized_s", "intact_on_reoptimized_s")
    u, k = time_unit([res[x] for x in keys if res.get(x) is not None])
    t.add_column("quantity")
    t.add_column("value", justify="right")
    t.add_row(f"before ({u})", _ms(res["before_s"], k))
    t.add_row(f"before, on the rerouted paths ({u})", _ms(res["before_rerouted_s"], k))
    t.add_row(f"after, rerouted ({u})", _ms(res["after_s"], k))
    t.add_row(f"re-optimised by {res['solver']} ({u})", _ms(res["reoptimized_s"], k))
    t.add_row("circuits rewired", str(res["rewired_circuits"]))
    if res["fallback"]:
        t.add_row("re-optimisation", "slower: kept the rerouted design")
    if res["intact_on_reoptimized_s"] is not None:
        t.add_row(
            f"intact, on the re-optimised routes ({u})", _ms(res["intact_on_reoptimized_s"], k)
        )
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("whatif")(whatif_command)
