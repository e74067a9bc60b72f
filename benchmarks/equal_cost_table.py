"""Benchmark: the equal-cost table of issue 29 -- ``joint`` against the cost-equivalent fat-tree
and the best TopoOpt variant, per plan family, size and port count.

Families (9): six embedded plans rescaled to ``S`` servers by their data-parallel degree
(``vgg16-dp``, ``dlrm``, ``gpt3-175b`` with tp 8 / pp 16, ``gpt3-175b-fsdp``,
``llama3-70b-cp``, ``mixtral-8x7b``; the global batch scales with ``dp``) and three TopoOpt
task-graph families at the sizes they exist in (``candle`` 16/32, ``dlrm-taskgraph`` 16/32,
``transformer`` 16). A size a plan's parallelism cannot fill is skipped and said so.

Each case is one :func:`topoopt.app.studies.compare.compare` call over ``ideal``,
``fat-tree-cost-equivalent``, ``topoopt-best`` and ``joint`` at ``--degree`` ports of
``--link-gbps``. Printed, as markdown: one row per case (iteration times, joint / fat-tree,
joint / TopoOpt, the fat-tree's capex over joint's, the objective ``joint`` searched, wall and
CPU seconds of the case), then per family and over all cases the wins / losses / ties of
``joint`` against each (a tie: within :data:`TIE` relative), the geometric mean of the ratios
and, against the fat-tree, of time x capex (the buildable fat-tree may spend less than the
budget). Never asserts on time.

Usage::

    nice -n 19 .venv/bin/python benchmarks/equal_cost_table.py                  # all cases
    nice -n 19 .venv/bin/python benchmarks/equal_cost_table.py --families vgg16-dp,dlrm \\
        --sizes 16 --ports 4 --jsonl part1.jsonl     # each case appended as it ends
    .venv/bin/python benchmarks/equal_cost_table.py --table-from part1.jsonl part2.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TIE = 1e-3
"""Relative difference under which two iteration times are a tie (the demo's verdict rule)."""

PLANS = ("vgg16-dp", "dlrm", "gpt3-175b", "gpt3-175b-fsdp", "llama3-70b-cp", "mixtral-8x7b")
TASK_GRAPHS = {
    "candle": {16: "100candle_16.fbuf", 32: "100candle_32.fbuf"},
    "dlrm-taskgraph": {16: "100dlrm_16.fbuf", 32: "100dlrm_32.fbuf"},
    "transformer": {16: "100transformer_16.fbuf"},
}
FAMILIES = PLANS + tuple(TASK_GRAPHS)
FABRICS = ("ideal", "fat-tree-cost-equivalent", "topoopt-best", "joint")


def scaled_plan(name: str, servers: int) -> dict | None:
    """The embedded plan ``name`` on ``servers`` servers (module docstring); None when its
    model-parallel degrees do not divide the GPUs or the expert degree does not divide dp."""
    from traffic.plan import embedded_plan_path

    plan = yaml.safe_load(embedded_plan_path(name).read_text())
    par = dict(plan["parallelism"])
    gps = int(plan["cluster"]["gpus_per_server"])
    mp = int(par.get("tp", 1)) * int(par.get("pp", 1)) * int(par.get("cp", 1))
    gpus = servers * gps
    if gpus % mp:
        return None
    dp = gpus // mp
    if dp < 1 or dp % int(par.get("ep", 1)):
        return None
    old = int(par.get("dp", 1))
    batch = int(par["global_batch_size"]) * dp // old
    step = dp * int(par.get("micro_batch_size", 1))
    batch = max(step, batch - batch % step)
    par.update(dp=dp, global_batch_size=batch)
    plan["parallelism"] = par
    plan["cluster"] = dict(plan["cluster"], servers=servers)
    return plan


def workload_of(family: str, servers: int):
    """The case's Workload, or None when the family has no such size."""
    from traffic.build import workload_from_plan
    from traffic.load import load_workload

    if family in TASK_GRAPHS:
        f = TASK_GRAPHS[family].get(servers)
        return None if f is None else load_workload(ROOT / "tests/data/topoopt-taskgraphs" / f)
    plan = scaled_plan(family, servers)
    return None if plan is None else workload_from_plan(plan)


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def run_case(family: str, servers: int, ports: int, gbps: float, time_limit: float) -> dict:
    from topoopt.app.studies.compare import compare, json_rows

    w = workload_of(family, servers)
    if w is None:
        return {"family": family, "servers": servers, "ports": ports, "skipped": True}
    t0, c0 = time.perf_counter(), _cpu()
    res = compare(w, fabrics=FABRICS, degree=ports, link_bandwidth=gbps * 1e9 / 8,
                  time_limit_s=time_limit)  # fmt: skip
    rows = {r["fabric"]: r for r in json_rows(res.table)}
    out = {"family": family, "servers": servers, "ports": ports, "skipped": False,
           "wall_s": time.perf_counter() - t0, "cpu_s": _cpu() - c0}  # fmt: skip
    for f in FABRICS:
        out[f] = rows.get(f, {}).get("iteration_s")
    out["errors"] = {
        f: rows.get(f, {}).get("error") for f in FABRICS if rows.get(f, {}).get("error")
    }
    out["objective"] = rows.get("joint", {}).get("search_objective") or "iteration"
    out["deterministic"] = rows.get("joint", {}).get("deterministic")
    out["reason"] = rows.get("joint", {}).get("search_reason")
    out["stopped_by"] = rows.get("joint", {}).get("stopped_by")
    out["capex_usd"] = {f: rows.get(f, {}).get("capex_usd") for f in FABRICS}
    return out


def verdict(a: float, b: float) -> str:
    """``win`` when ``a`` is faster than ``b`` beyond :data:`TIE`, ``loss``, or ``tie``."""
    if a < b * (1 - TIE):
        return "win"
    if a > b * (1 + TIE):
        return "loss"
    return "tie"


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _capex_ratio(r: dict) -> float:
    """The cost-equivalent fat-tree's capex over joint's (below 1: the buildable fat-tree
    spends less than the optical budget)."""
    c = r.get("capex_usd") or {}
    ft, j = c.get("fat-tree-cost-equivalent"), c.get("joint")
    return ft / j if ft and j else math.nan


def markdown(results: list[dict]) -> str:
    lines = [
        "| family | servers | ports | ideal s | fat-tree (equal cost) s | TopoOpt best s | "
        "joint s | joint / fat-tree | joint / TopoOpt | fat-tree $ / joint $ | objective | "
        "wall s | CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in results:
        if r["skipped"]:
            why = r.get("error") or "the plan's parallelism does not fit"
            lines.append(f"| {r['family']} | {r['servers']} | {r['ports']} | "
                         f"({why}) ||||||||||")  # fmt: skip
            continue
        missing = [f for f in FABRICS if r[f] is None]
        if missing:
            why = f"no time for {', '.join(missing)}: {r.get('errors')}"
            lines.append(f"| {r['family']} | {r['servers']} | {r['ports']} | ({why}) ||||||||||")
            continue
        j, ft, tb = r["joint"], r["fat-tree-cost-equivalent"], r["topoopt-best"]
        det = "" if r["deterministic"] in (True, None) else " (clock cut)"
        lines.append(
            f"| {r['family']} | {r['servers']} | {r['ports']} | {r['ideal']:.4g} | {ft:.4g} | "
            f"{tb:.4g} | {j:.4g} | {j / ft:.3f} | {j / tb:.3f} | {_capex_ratio(r):.2f} | "
            f"{r['objective']}{det} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} |"
        )
    lines += [
        "",
        "| family | cases | vs fat-tree W/L/T | geomean | per $ geomean | vs TopoOpt W/L/T | "
        "geomean |",
        "|---|---:|---|---:|---:|---|---:|",
    ]
    done = [r for r in results if not r["skipped"] and all(r[f] for f in FABRICS)]
    groups = [(fam, [r for r in done if r["family"] == fam]) for fam in dict.fromkeys(
        r["family"] for r in done)]  # fmt: skip
    for fam, rs in [*groups, ("all", done)] if done else []:
        cells = []
        for other in ("fat-tree-cost-equivalent", "topoopt-best"):
            v = [verdict(r["joint"], r[other]) for r in rs]
            cells += [f"{v.count('win')}/{v.count('loss')}/{v.count('tie')}",
                      f"{geomean([r['joint'] / r[other] for r in rs]):.3f}"]  # fmt: skip
            if other == "fat-tree-cost-equivalent":  # time x capex: joint's over the fat-tree's
                per = [r["joint"] / r[other] / _capex_ratio(r) for r in rs]
                cells.append(f"{geomean(per):.3f}")
        name = f"**{fam}**" if fam == "all" else fam
        lines.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="16,32,64")
    ap.add_argument("--ports", default="4,8")
    ap.add_argument("--link-gbps", type=float, default=100.0)
    ap.add_argument("--time-limit", type=float, default=900.0)
    ap.add_argument(
        "--jsonl",
        type=Path,
        default=None,
        help="append each case's result to this file as one JSON line when it ends",
    )
    ap.add_argument(
        "--table-from",
        type=Path,
        nargs="+",
        default=None,
        help="print the table of the cases in these --jsonl files; run nothing",
    )
    a = ap.parse_args(argv)
    if a.table_from:
        results = [json.loads(ln) for f in a.table_from for ln in f.read_text().splitlines() if ln]
        print(markdown(results))
        ran = [r for r in results if not r["skipped"]]
        print(f"\n{len(results)} cases, {sum(r['wall_s'] for r in ran):.0f} s wall, "
              f"{sum(r['cpu_s'] for r in ran):.0f} s CPU")  # fmt: skip
        return
    fams = [f for f in a.families.split(",") if f]
    bad = [f for f in fams if f not in FAMILIES]
    if bad:
        ap.error(f"--families: got {bad[0]!r}, allowed: {', '.join(FAMILIES)}")
    results = []
    t0 = time.perf_counter()
    for fam in fams:
        for s in (int(x) for x in a.sizes.split(",")):
            for p in (int(x) for x in a.ports.split(",")):
                if fam in TASK_GRAPHS and s not in TASK_GRAPHS[fam]:
                    continue
                try:
                    r = run_case(fam, s, p, a.link_gbps, a.time_limit)
                except Exception as e:  # a traceback is a finding: the row says it, the rest run
                    r = {"family": fam, "servers": s, "ports": p, "skipped": True,
                         "error": f"{type(e).__name__}: {e}"}  # fmt: skip
                results.append(r)
                if a.jsonl:
                    with a.jsonl.open("a") as fh:
                        fh.write(json.dumps(r, allow_nan=False) + "\n")
                done = "skipped" if r["skipped"] else f"{r['wall_s']:.0f} s, CPU {r['cpu_s']:.0f} s"
                print(f"# {fam} {s} servers {p} ports: {done}", file=sys.stderr, flush=True)
    print(markdown(results))
    print(f"\n{len(results)} cases in {time.perf_counter() - t0:.0f} s wall, "
          f"{_cpu():.0f} s CPU")  # fmt: skip


if __name__ == "__main__":
    main()
