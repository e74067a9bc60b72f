"""``topoopt simulate PLAN``: one iteration on a fabric or a design, by the flow model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from topoopt.app.cli.byte_sizes import parse_bytes
from topoopt.app.cli.choices import FabricName, Schedule
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    DEFAULT_TIME_LIMIT_S,
    EfficiencyOption,
    GpuOption,
    GpusOption,
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
    handle_errors,
    nic_hint,
    stdout,
    warn_line,
)
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError, check_finite

__all__ = ["register", "simulate_command"]


@handle_errors
def simulate_command(
    plan: Annotated[str, typer.Argument(help="Plan file, embedded plan name, or .fbuf")],
    design: Annotated[
        Path | None, typer.Option(help="A design.json written by `topoopt design`")
    ] = None,
    fabric: Annotated[
        FabricName | None,
        typer.Option(
            metavar="FABRIC",
            help="A fabric kind, one of: " + ", ".join(f.value for f in FabricName),
        ),
    ] = None,
    degree: Annotated[int, typer.Option(help="Ports per server (with --fabric)")] = DEFAULT_DEGREE,
    link_gbps: Annotated[
        float, typer.Option(help="Port bandwidth, Gbps (with --fabric)")
    ] = DEFAULT_LINK_GBPS,
    oversubscription: Annotated[float, typer.Option(help="For oversubscribed fabrics")] = 4.0,
    seed: Annotated[int, typer.Option(help="Seed of random fabrics and solvers")] = DEFAULT_SEED,
    schedule: Annotated[
        Schedule | None,
        typer.Option(
            help="Pipeline schedule (default: interleaved when vpp > 1, else 1f1b); eager-1f1b "
            "is never slower than 1f1b"
        ),
    ] = None,
    priority: PriorityOption = None,
    split_allreduce: SplitAllreduceOption = None,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    reduction: ReductionOption = True,
    time_limit: Annotated[
        float, typer.Option(help="Seconds for a designed fabric's search (joint, topoopt-best)")
    ] = DEFAULT_TIME_LIMIT_S,
    work_limit: WorkLimitOption = None,
    max_paths: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="At most this many ECMP paths per server pair (per rail switch pair on a rail "
            "fabric), a hashed sample of each stratum: an approximation that bounds the "
            "sub-flows (default: every path, exact; the JSON's `paths` says which)",
        ),
    ] = None,
    rounding_check: RoundingCheckOption = 0,
    prices: PricesOption = None,
    preset: PresetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Iteration time, communication time and exposed communication, per class."""
    from topoopt.app.studies.simulate import simulate_plan
    from topoopt.fabrics.cost import resolve_prices

    if (design is None) == (fabric is None):
        raise InputError("--design/--fabric", "both" if design else "neither", "exactly one")
    nic_hint(gpu, link_gbps)
    with command_progress("simulate") as bar:
        res = simulate_plan(
            plan,
            design=design,
            fabric=None if fabric is None else FabricName(fabric).value,
            degree=degree,
            link_bandwidth=gbps_to_bytes_per_s(link_gbps),
            oversubscription=oversubscription,
            seed=seed,
            progress=bar,
            schedule=None if schedule is None else Schedule(schedule).value,
            priority=priority,
            split_allreduce=parse_bytes(split_allreduce, "--split-allreduce"),
            gpu=gpu,
            efficiency=efficiency,
            settings=settings or (),
            gpus=gpus,
            reduction=reduction,
            time_limit_s=time_limit,
            work_limit=work_limit,
            max_paths=max_paths,
            rounding_check=rounding_check,
            prices=None if prices is None and preset is None else resolve_prices(prices, preset),
        )
    warn_line(res.pop("search_warning", None))
    warn_line(res.pop("fabric_warning", None))  # rings missing cables, oversubscription not built
    warn_line(res["paths"]["note"])  # a cap that bound: stderr and JSON (None: nothing)
    check_finite(res, str(design) if design is not None else plan)  # never a null time
    from topoopt.app.report.study_verdicts import simulate_verdict

    verdict = simulate_verdict(res)
    if as_json:
        emit_json({"verdict": verdict, **res})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    gpu_text = "" if res["gpu"] is None else f", {res['gpu']} at efficiency {res['efficiency']:g}"
    t = Table(title=f"{res['workload']} on {res['fabric']}{gpu_text}")
    t.add_column("quantity")
    from topoopt.app.report.time_units import time_unit

    unit, k = time_unit([res["iteration_s"], res["comm_alone_s"]])
    t.add_column(unit, justify="right")
    for key in ("iteration_s", "compute_s", "comm_s", "exposed_comm_s"):
        t.add_row(key.removesuffix("_s"), f"{res[key] * k:.3f}")
    for cls, v in res["exposed_comm_s_by_class"].items():
        t.add_row(f"exposed {cls}", f"{v * k:.3f}")
    for cls, v in res["comm_s_by_class"].items():
        t.add_row(f"comm {cls} (critical path)", f"{v * k:.3f}")
    t.add_row("comm alone (phases in sequence)", f"{res['comm_alone_s'] * k:.3f}")
    if res["tflops_per_gpu"] is not None:
        t.add_row("model TFLOP/s per GPU", f"{res['tflops_per_gpu']:.1f}")
        t.add_row("MFU", f"{res['mfu']:.3f}")
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
