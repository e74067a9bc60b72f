"""``topoopt cosearch MODEL``: search the parallelization plan and the network together."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from rich.table import Table

from topoopt.app.cli.byte_sizes import parse_bytes
from topoopt.app.cli.choices import FabricName
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    DEFAULT_SEED,
    EfficiencyOption,
    GpuOption,
    emit_json,
    handle_errors,
    nic_hint,
    parse_name_list,
    prepare_output,
    stdout,
    warn_line,
    warnings_said,
    write_output_text,
)
from topoopt.app.report.time_units import time_unit
from topoopt.units import gbps_to_bytes_per_s

__all__ = ["register", "cosearch_command", "setup"]


def setup(model: str, servers: int | None, gpus_per_server: int | None):
    """The base plan (model, precision, options, cluster, global batch) and the reference plan.

    ``model`` is a plan file, an embedded plan name or a zoo model name. The reference is the
    plan's parallelism (``dp`` re-derived for the cluster) when it is valid there, else None.
    """
    from topoopt.app.studies.cosearch.space import (
        Candidate,
        _label,
        base_mapping,
        table_servers_gpu_round_robin,
    )
    from traffic.errors import InputError
    from traffic.plan import embedded_plan_names, load_plan
    from traffic.zoo import ZOO, zoo_names

    if Path(model).exists() or model in embedded_plan_names():
        plan = load_plan(model)
    elif model in ZOO:
        plan = None
    else:
        raise InputError(
            "MODEL",
            model,
            "a plan file, an embedded plan (" + ", ".join(embedded_plan_names()) + ") or a zoo "
            "model (" + ", ".join(zoo_names()) + ")",
        )
    for name, v in (("--servers", servers), ("--gpus-per-server", gpus_per_server)):
        if v is not None and v < 1:
            raise InputError(name, v, "a positive integer")
    if plan is None:
        spec = dict(ZOO[model])
        n, g = servers or 16, gpus_per_server or 8
        gb = spec.get("global_batch") or n * g
        base = {
            "model": {"name": model, **spec, "global_batch": gb},
            "cluster": {"servers": n, "gpus_per_server": g},
        }
        return base, None
    cl = {
        "servers": servers or plan.cluster.servers,
        "gpus_per_server": gpus_per_server or plan.cluster.gpus_per_server,
    }
    for key in ("gpu", "efficiency"):  # the plan's hardware stays
        if base_mapping(plan)["cluster"].get(key) is not None:
            cl[key] = base_mapping(plan)["cluster"][key]
    base = base_mapping(plan)
    base["model"] = {**base["model"], "global_batch": plan.global_batch}
    base["cluster"] = cl
    par = plan.parallelism.model_dump()
    par["dp"] = None
    par["global_batch_size"] = plan.global_batch
    par = {k: v for k, v in par.items() if v is not None}
    try:
        ref_plan = load_plan({**base, "parallelism": par})
    except InputError:
        return base, None
    par["dp"] = ref_plan.dp
    if plan.model.kind != "transformer":
        keep = {"dp", "micro_batch_size", "global_batch_size"}
        keep |= {k for k in ("zero", "fsdp", "distributed_optimizer") if par.get(k)}
        par = {k: v for k, v in par.items() if k in keep}
    else:
        par = {
            k: v
            for k, v in par.items()
            if k
            in (
                "tp",
                "pp",
                "dp",
                "cp",
                "vpp",
                "micro_batch_size",
                "global_batch_size",
                "sp",
                "recompute",
                "order",
                "ep",
                "etp",
                "zero",
                "fsdp",
                "distributed_optimizer",
            )
            and not (k in ("zero", "fsdp", "distributed_optimizer") and not v)
        }
        if not plan.model.is_moe:
            par.pop("ep", None)
            par.pop("etp", None)
    ts = None
    if plan.model.kind == "recsys":  # the default layout, explicit (the MCMC moves its tables)
        tables = sum(t.count for t in plan.model.tables)
        ts = table_servers_gpu_round_robin(tables, ref_plan.gpus, cl["gpus_per_server"])
    label = _label(par, ts, "round-robin over GPUs" if ts else None)
    return base, Candidate(tuple(sorted(par.items())), ts, "reference " + label)


def _public(rec: dict | None) -> dict | None:
    if rec is None:
        return None
    out = {k: v for k, v in rec.items() if k not in ("design_object", "server_bytes", "index")}
    return out


def _finite(x):
    """``x`` with the infinite times of skipped candidates as null (strict JSON)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


def result_document(res, engine) -> dict[str, Any]:
    """The ``--json`` document of a :class:`~topoopt.app.studies.cosearch.search.SearchResult`
    (a candidate too large to simulate has null times and a ``skipped`` reason)."""
    return _finite(_document(res, engine))


def _document(res, engine) -> dict[str, Any]:
    b = res.best
    best = {
        "plan": b["plan"],
        "label": b["label"],
        "fabric": b["fabric"],
        "iteration_s": b["iteration_s"],
        "compute_s": b["compute_s"],
        "exposed_comm_s": b["exposed_comm_s"],
        "capex_usd": b["capex_usd"],
        "memory_per_gpu_bytes": b["memory_per_gpu_bytes"],
        "design": b.get("design"),
        "search_warning": b.get("search_warning"),
    }
    ref = res.reference
    return {
        "backend": engine.backend,
        "workers": engine.workers,
        "evaluated": len(res.records),
        "method": res.config.method,
        "best": best,
        "reference": None
        if ref is None
        else {
            k: ref[k]
            for k in ("plan", "label", "fabric", "iteration_s", "capex_usd", "memory_per_gpu_bytes")
        },
        "speedup_over_reference": None
        if ref is None or not math.isfinite(ref["iteration_s"] / b["iteration_s"])
        else ref["iteration_s"] / b["iteration_s"],
        "pareto": [
            {
                **{k: r[k] for k in ("label", "plan", "fabric", "iteration_s", "capex_usd")},
                "search_warning": r.get("search_warning"),
            }
            for r in res.pareto
        ],
        "fabrics": [
            {
                **{k: r[k] for k in ("label", "fabric", "stage", "iteration_s", "capex_usd")},
                "search_warning": r.get("search_warning"),
            }
            for r in res.records
            if r["stage"] in ("target", "reference", "pareto") and not r.get("fixed_topology")
        ],
        "candidates": res.candidates,
        "counts": res.counts,
    }


@handle_errors
def cosearch_command(
    model: Annotated[str, typer.Argument(help="Zoo model, embedded plan or plan file")],
    servers: Annotated[
        int | None, typer.Option(help="Servers (default: the plan's, or 16)")
    ] = None,
    gpus_per_server: Annotated[int | None, typer.Option(help="GPUs per server")] = None,
    gpu_memory_gb: Annotated[
        str,
        typer.Option(
            metavar="SIZE",
            help="Memory per GPU: GB (1e9 bytes) as a plain number, or with a suffix (80GB, 96GiB)",
        ),
    ] = "80",
    degree: Annotated[int, typer.Option(help="Ports per server")] = DEFAULT_DEGREE,
    link_gbps: Annotated[float, typer.Option(help="Port bandwidth, Gbps")] = DEFAULT_LINK_GBPS,
    fabric: Annotated[
        FabricName,
        typer.Option(
            metavar="FABRIC",
            help="Fabric to choose the plan for, one of: " + ", ".join(f.value for f in FabricName),
        ),
    ] = FabricName.joint,
    method: Annotated[
        Literal["refine", "topoopt-mcmc"], typer.Option(help="refine (ours) or topoopt-mcmc")
    ] = "refine",
    workers: Annotated[int, typer.Option(help="Parallel evaluations (1: no Ray)")] = 1,
    max_evaluations: Annotated[int, typer.Option(help="Flow-model evaluations in all")] = 40,
    finalists: Annotated[int, typer.Option(help="Plans judged on the target fabric")] = 3,
    work_limit: Annotated[
        float | None, typer.Option(help="Work units per joint design (default: solver's)")
    ] = None,
    pareto_fabrics: Annotated[
        str, typer.Option(help="Comma-separated fabrics for the Pareto front")
    ] = "ideal,fat-tree,fat-tree-cost-equivalent,topoopt,joint",
    seed: Annotated[int, typer.Option(help="Seed of every random choice")] = DEFAULT_SEED,
    address: Annotated[str | None, typer.Option(help="Existing Ray cluster address")] = None,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    html: Annotated[Path | None, typer.Option(help="Write the report (HTML)")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Save every evaluation as it finishes (JSON lines), for --resume"),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the search saved in --out (its evaluations are reused)")
    ] = False,
    force: Annotated[bool, typer.Option(help="Overwrite existing output files")] = False,
) -> None:
    """Best plan + design for MODEL on the cluster, and the Pareto front across fabrics."""
    from topoopt.app.studies.cosearch.search import SearchConfig, cosearch
    from topoopt.app.studies.cosearch.space import plan_space
    from topoopt.app.studies.engine import Engine
    from traffic.errors import InputError

    prepare_output(html, force, "--html")
    if resume and out is None:
        raise InputError("--resume", "without --out", "--out FILE, the evaluations to continue")
    memory_bytes = parse_bytes(gpu_memory_gb, "--gpu-memory-gb", plain_unit=1e9, plain_name="GB")
    prepare_output(out, force or resume, "--out")
    if not link_gbps > 0:
        raise InputError("--link-gbps", link_gbps, "a positive number")
    if workers < 1:
        raise InputError("--workers", workers, "a positive integer")
    if finalists < 1:
        raise InputError("--finalists", finalists, "an integer >= 1")
    cfg = SearchConfig(
        fabric=FabricName(fabric).value,
        degree=degree,
        link_bandwidth=gbps_to_bytes_per_s(link_gbps),
        max_evaluations=max_evaluations,
        seed=seed,
        method=method,
        finalists=finalists,
        work_limit=work_limit,
        pareto_fabrics=tuple(parse_name_list(pareto_fabrics, "--pareto-fabrics")),
    )
    base, ref = setup(model, servers, gpus_per_server)
    if gpu is not None and gpu != base["cluster"].get("gpu"):
        from traffic.hardware import gpu_spec  # replaces the plan's GPU and its efficiency

        gpu_spec(gpu, "--gpu")
        cl = {k: v for k, v in base["cluster"].items() if k != "efficiency"}
        base = {**base, "cluster": {**cl, "gpu": gpu}}
    nic_hint(gpu, link_gbps)
    if efficiency is not None:  # after --gpu, as the plan's cluster.efficiency
        base = {**base, "cluster": {**base["cluster"], "efficiency": float(efficiency)}}
    ck = None
    if out is not None:  # before any work: a checkpoint of another search is one line at once
        from topoopt.app.studies.cosearch.checkpoint import Checkpoint, search_digest

        digest = search_digest({**base, "gpu_memory_bytes": memory_bytes}, cfg, ref)
        ck = Checkpoint(out, digest, resume=resume)
    # sizes first, and nothing on stderr before them: a refusal is one line
    from topoopt.app.studies.cosearch.search import check_size, check_space
    from traffic.limits import memory_budget_bytes

    share = memory_budget_bytes() / workers
    try:
        space = plan_space(base, memory_bytes)
        check_space(space)  # no plan fits: the one line, before the count below
        if len(space):
            first = ref if ref is not None else space.candidates[0]
            check_size(space.base, first, share, ref is not None)
    except BaseException:
        if ck is not None:
            ck.close(failed=True)
        raise
    print(f"{len(space)} plans fit; cut: {space.rejected}", file=sys.stderr)
    failed = True
    try:
        with Engine(workers, address, progress=sys.stderr.isatty() or True) as eng:
            res = cosearch(space, cfg, eng, reference=ref, checkpoint=ck, size_checked=True)
            doc = result_document(res, eng)
        failed = False
    finally:
        if ck is not None:
            ck.close(failed=failed)
    if ck is not None and ck.reused:
        print(f"{ck.reused} evaluations reused from {out}", file=sys.stderr)
    from topoopt.app.report.study_verdicts import cosearch_verdict

    b = res.best
    for line in res.search_warnings():  # a design search fell back or the clock cut it
        warn_line(line)
    coarse = [r for r in [b, *res.pareto] if r.get("coarsened")]
    if coarse:  # a reported point evaluated with coarsened gradient buckets
        warn_line(
            f"cosearch: {len(coarse)} reported point(s) evaluated with coarsened gradient "
            "buckets (too many flows to simulate exactly)"
        )
    verdict = cosearch_verdict(b, res.reference, res.pareto)
    if html is not None:
        from topoopt.app.report.cosearch_figures import cosearch_page

        page = cosearch_page(
            res, title=f"{model}: co-search", verdict=verdict, warnings=warnings_said()
        )
        write_output_text(html, page)
    if as_json:
        emit_json({"verdict": verdict, **doc})
        return
    for sentence in verdict:
        stdout.print(sentence, markup=False, highlight=False)
    d = b.get("design")
    if d:
        stdout.print(
            f"design ({d['solver']}, {d['status']}): circuits [u, v, count] {d['circuits']}"
        )
    t = Table(title="Pareto front: iteration time vs network capex")
    unit, k = time_unit([r["iteration_s"] for r in res.pareto])
    for head in ("fabric", "plan", f"iteration {unit}", "capex M$", "iter/s per M$"):
        t.add_column(head)
    fastest = min(range(len(res.pareto)), key=lambda i: res.pareto[i]["iteration_s"], default=-1)
    for i, r in enumerate(res.pareto):
        t.add_row(
            r["fabric"],
            r["label"],
            f"{r['iteration_s'] * k:.4g}",
            f"{r['capex_usd'] / 1e6:.3f}",
            "-" if r["capex_usd"] <= 0 else f"{1e6 / (r['iteration_s'] * r['capex_usd']):.4g}",
            style="bold green" if i == fastest else None,
        )
    stdout.print(t)
    stdout.print(f"{len(res.records)} evaluations ({eng.backend}, {workers} workers)")


def register(app: typer.Typer) -> None:
    app.command("cosearch")(cosearch_command)
