"""The design benchmark suite (issues 5 and 13): workloads x designs, judged by the flow model.

For each workload (:mod:`workloads`), server count ``n`` and port count ``d`` (``B = 100 Gbps``
per port) it builds the ideal switch, the ``topoopt``, ``topoopt-released`` and ``joint`` designs,
the random ``expander`` and the fat-tree of equal cost to the ``topoopt`` design, simulates one
iteration on each with the flow model (:func:`topoopt.app.studies.compare.compare`), adds the best
TopoOpt variant per case (``topoopt-best``) and ``joint`` run with the congestion objective
(``joint-congestion``), and prints the table (iteration first, ratios against the ideal switch),
a headline table per case and the summary lines: wins and losses of ``joint`` against the best
TopoOpt variant and against the cost-equivalent fat-tree. Every row also goes to a CSV.

Usage::

    .venv/bin/python benchmarks/design/run.py --quick            # n=16, d=4, short limits
    .venv/bin/python benchmarks/design/run.py                    # n in {16,64,128}, d in {4,8}
    .venv/bin/python benchmarks/design/run.py --sizes 128 --degrees 8 --workloads dlrm,gpt3-pp

Columns are described in ``benchmarks/design/README.md``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from workloads import MP_HEAVY, PURE_DP, suite_cases  # noqa: E402

from topoopt.app.studies.compare import compare  # noqa: E402
from traffic.errors import InputError  # noqa: E402

__all__ = [
    "FABRICS",
    "DERIVED",
    "run_case",
    "run_suite",
    "headline",
    "tally",
    "summary_lines",
    "main",
]

FABRICS = ("ideal", "topoopt", "topoopt-released", "expander", "joint", "fat-tree-cost-equivalent")
"""Fabrics simulated in every case, in table order (``ideal`` first: the ratios' reference)."""

DERIVED = ("topoopt-best", "joint-congestion")
"""Rows added after :data:`FABRICS`: ``topoopt-best`` (the faster of ``topoopt`` and
``topoopt-released`` by iteration time, its ``variant`` column naming the winner; no extra
simulation) and ``joint-congestion`` (``joint`` minimising the congestion objective, when
:func:`solvers.registry.solve` takes ``objective``; ``joint`` is the solver's default)."""

LINK_BANDWIDTH = 100e9 / 8
"""100 Gbps per port, in bytes/s."""

TIE = 1e-3
"""Relative difference under which two iteration times count as a tie."""

COLUMNS = [
    "workload",
    "servers",
    "degree",
    "fabric",
    "variant",
    "iteration_s",
    "iter_ratio",
    "comm_s",
    "comm_ratio",
    "solver_wall_s",
    "objective_s",
    "lower_bound_s",
    "gap",
    "capex_usd",
    "build_s",
    "simulate_s",
    "stopped_by",
]


def _takes_objective() -> bool:
    """Whether :func:`solvers.registry.solve` has the ``objective`` keyword."""
    import inspect

    from solvers.registry import solve

    return "objective" in inspect.signature(solve).parameters


def _joint_congestion(workload, degree: int, time_limit_s: float, seed: int) -> dict:
    """One row: ``joint`` with ``objective="congestion"``, realised and simulated as
    :func:`topoopt.app.studies.compare.compare` does for designed fabrics."""
    from solvers.model.problem import DesignProblem
    from solvers.realise import design_fabric, design_routing, design_workload
    from solvers.registry import solve
    from topoopt.flowsim.collectives import communication_time
    from topoopt.flowsim.iteration import simulate_iteration

    t0 = time.perf_counter()
    problem = DesignProblem.from_workload(workload, degree=degree, link_bandwidth=LINK_BANDWIDTH)
    design = solve(problem, "joint", time_limit_s=time_limit_s, seed=seed, objective="congestion")
    fab = design_fabric(design, gpus_per_server=workload.gpus_per_server)
    w = design_workload(workload, design, problem)
    routing = design_routing(design, fab)
    t1 = time.perf_counter()
    it = simulate_iteration(w, fab, routing=routing, exposed_by_class=False)
    cm = communication_time(w, fab, routing=routing)
    return {
        "fabric": "joint-congestion",
        "variant": str(design.info.get("objective", "congestion")),
        "iteration_s": it.iteration_s,
        # compare's comm_s: the critical-path communication when the flow model reports it
        "comm_s": float(getattr(it, "comm_s", cm.total_s)),
        "solver_wall_s": float(design.wall_s),
        "objective_s": design.objective_s,
        "lower_bound_s": design.lower_bound_s,
        "gap": design.gap,
        "build_s": t1 - t0,
        "simulate_s": time.perf_counter() - t1,
        "stopped_by": str(design.info.get("stopped_by") or ""),
    }


def run_case(
    workload,
    name: str,
    degree: int,
    time_limit_s: float,
    seed: int = 0,
    congestion: bool | None = None,
) -> pd.DataFrame:
    """Rows of one (workload, d) case: one per fabric of :data:`FABRICS`, then
    :data:`DERIVED`; ratios against the ideal switch. ``congestion`` (default: when the
    registry supports it) adds the ``joint-congestion`` row."""
    res = compare(
        workload,
        FABRICS,
        degree=degree,
        link_bandwidth=LINK_BANDWIDTH,
        seed=seed,
        time_limit_s=time_limit_s,
    )
    t = res.table.copy()
    t["variant"] = ""
    wall = []
    for run in res.runs:
        wall.append(float(run.design.wall_s) if run.design is not None else np.nan)
    t["solver_wall_s"] = wall
    for col in ("objective_s", "lower_bound_s", "gap"):
        if col not in t:
            t[col] = np.nan
    if "stopped_by" not in t:
        t["stopped_by"] = ""
    t["stopped_by"] = t["stopped_by"].fillna("").astype(str)
    pair = t[t["fabric"].isin(["topoopt", "topoopt-released"])]
    best = pair.loc[pair["iteration_s"].idxmin()].copy()
    best["variant"], best["fabric"] = best["fabric"], "topoopt-best"
    extra = [best.to_dict()]
    if congestion is None:
        congestion = _takes_objective()
    if congestion:
        row = _joint_congestion(workload, degree, time_limit_s, seed)
        row["capex_usd"] = float(t.loc[t["fabric"] == "joint", "capex_usd"].iloc[0])
        extra.append(row)
    t = pd.concat([t, pd.DataFrame(extra)], ignore_index=True)
    ideal = t.loc[t["fabric"] == "ideal"].iloc[0]
    t.insert(0, "workload", name)
    t.insert(1, "servers", workload.servers)
    t.insert(2, "degree", degree)
    t["iter_ratio"] = t["iteration_s"] / ideal["iteration_s"]
    t["comm_ratio"] = t["comm_s"] / ideal["comm_s"] if ideal["comm_s"] > 0 else np.nan
    return t[COLUMNS]


def run_suite(
    workloads: list[str] | None,
    sizes: list[int],
    degrees: list[int],
    time_limit_s: float,
    seed: int = 0,
    log=None,
    taskgraph_sizes: list[int] | None = None,
    out: str | None = None,
) -> pd.DataFrame:
    """All cases of a run, concatenated (see :func:`run_case`); with ``out``, the CSV is
    rewritten after every case (a long run leaves its rows so far)."""
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    frames = []
    congestion = _takes_objective()
    for case in suite_cases(workloads, sizes, taskgraph_sizes):
        w = case.build()
        for d in degrees:
            t0 = time.perf_counter()
            frames.append(run_case(w, case.name, d, time_limit_s, seed, congestion))
            say(f"{case.name} n={case.servers} d={d}: {time.perf_counter() - t0:.1f} s")
            if out:
                pd.concat(frames, ignore_index=True).to_csv(out, index=False)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _ratio(table: pd.DataFrame, num: str, den: str, col: str) -> pd.Series:
    key = ["workload", "servers", "degree"]
    a = table[table["fabric"] == num].set_index(key)[col]
    b = table[table["fabric"] == den].set_index(key)[col]
    return (a / b).dropna()


def _gmean(x: pd.Series) -> float:
    return float(np.exp(np.log(x.clip(lower=1e-12)).mean())) if len(x) else math.nan


def tally(ratio: pd.Series) -> tuple[int, int, int]:
    """(wins, ties, losses) of a ratio ``ours / theirs`` (ties within :data:`TIE`).

    >>> tally(pd.Series([0.5, 1.0, 1.0005, 1.2]))
    (1, 2, 1)
    """
    wins = int((ratio < 1 - TIE).sum())
    losses = int((ratio > 1 + TIE).sum())
    return wins, len(ratio) - wins - losses, losses


def headline(table: pd.DataFrame) -> pd.DataFrame:
    """One row per case: iteration ratios to the ideal switch (``topoopt-best`` with its winning
    variant, ``joint``, ``joint-congestion`` when run, the cost-equivalent fat-tree, the
    expander), then ``joint`` over the best TopoOpt variant and over the cost-equivalent
    fat-tree (iteration, then communication)."""
    key = ["workload", "servers", "degree"]
    it = table.pivot_table(index=key, columns="fabric", values="iter_ratio", sort=False)
    out = pd.DataFrame(index=it.index)
    best = table[table["fabric"] == "topoopt-best"].set_index(key)
    out["topoopt_best_variant"] = best["variant"]
    names = ["topoopt-best", "joint", "joint-congestion", "fat-tree-cost-equivalent", "expander"]
    for nm in names:
        if nm in it:
            out[f"{nm} /ideal"] = it[nm]
    out["joint/best-topoopt iter"] = _ratio(table, "joint", "topoopt-best", "iteration_s")
    out["joint/ft-cost-eq iter"] = _ratio(table, "joint", "fat-tree-cost-equivalent", "iteration_s")
    if "joint-congestion" in it:
        out["joint-cong/best-topoopt iter"] = _ratio(
            table, "joint-congestion", "topoopt-best", "iteration_s"
        )
    out["joint/best-topoopt comm"] = _ratio(table, "joint", "topoopt-best", "comm_s")
    return out.reset_index()


def summary_lines(table: pd.DataFrame) -> list[str]:
    """The headline figures: wins and losses on iteration time of ``joint`` (and
    ``joint-congestion``) against the best TopoOpt variant and the cost-equivalent fat-tree,
    over all cases and the MP-heavy ones; geometric means; the pure data-parallel check."""
    out = []
    ji = _ratio(table, "joint", "ideal", "comm_s")
    dp = ji[ji.index.get_level_values(0).isin(PURE_DP)]
    if len(dp):
        worst = dp.idxmax()
        out.append(
            f"pure DP: max joint/ideal communication = {dp.max():.4f} "
            f"({worst[0]} n={worst[1]} d={worst[2]}; target <= 1.02)"
        )
    has_cong = bool((table["fabric"] == "joint-congestion").any())
    mine = ["joint"] + (["joint-congestion"] if has_cong else [])
    for who in mine:
        for ref, label in (("topoopt-best", "best TopoOpt variant"),
                           ("fat-tree-cost-equivalent", "cost-equivalent fat-tree")):  # fmt: skip
            r = _ratio(table, who, ref, "iteration_s")
            mp = r[r.index.get_level_values(0).isin(MP_HEAVY)]
            w, t, lo = tally(r)
            wm, tm, lm = tally(mp)
            out.append(
                f"{who} vs {label} (iteration): wins {w}, ties {t}, losses {lo} of {len(r)} "
                f"cases; MP-heavy: wins {wm}, ties {tm}, losses {lm} of {len(mp)}; geometric "
                f"mean {_gmean(r):.3f} (MP-heavy {_gmean(mp):.3f})"
            )
            worse = r[r > 1 + TIE].sort_values(ascending=False)
            if len(worse):
                cases = ", ".join(f"{k[0]} n={k[1]} d={k[2]} {v:.3f}" for k, v in worse.items())
                out.append(f"  {who} slower than the {label}: {cases}")
    rc = _ratio(table, "joint", "topoopt-best", "comm_s")
    mpc = rc[rc.index.get_level_values(0).isin(MP_HEAVY)]
    out.append(
        f"joint/best TopoOpt communication: geometric mean {_gmean(rc):.3f} over {len(rc)} "
        f"cases (MP-heavy {_gmean(mpc):.3f} over {len(mpc)})"
    )
    if "stopped_by" in table:
        for who in mine:
            rows = table[table["fabric"] == who]
            cut = rows[rows["stopped_by"].fillna("").astype(str) == "time limit"]
            cases = ", ".join(f"{r.workload} n={r.servers} d={r.degree}" for r in cut.itertuples())
            out.append(
                f"{who} searches cut by the wall clock (depend on the machine's load): "
                f"{len(cut)} of {len(rows)} cases" + (f": {cases}" if cases else "")
            )
    paper = _ratio(table, "topoopt-best", "topoopt", "iteration_s")
    n_rel = int((table.loc[table["fabric"] == "topoopt-best", "variant"] != "topoopt").sum())
    out.append(
        f"best TopoOpt variant: topoopt-released in {n_rel} of {len(paper)} cases "
        f"(geometric mean best/paper iteration {_gmean(paper):.3f})"
    )
    return out


def print_report(table: pd.DataFrame) -> None:
    """The table (iteration first; times in ms, ratios against the ideal switch), the headline
    table per case, and the summary lines."""
    cols = ["workload", "servers", "degree", "fabric", "variant", "iteration_s", "iter_ratio"]
    show = table[cols + ["comm_s", "comm_ratio", "solver_wall_s", "gap"]].copy()
    show["variant"] = show["variant"].fillna("")
    show.insert(5, "iteration_ms", show.pop("iteration_s") * 1e3)
    show.insert(7, "comm_ms", show.pop("comm_s") * 1e3)
    fmt = {"float_format": lambda x: f"{x:.4g}", "index": False}
    with pd.option_context("display.width", 250, "display.max_rows", None,
                           "display.max_columns", None):  # fmt: skip
        print(show.to_string(**fmt))
        print()
        print("Headline: iteration over the ideal switch, and joint over the baselines")
        print(headline(table).to_string(**fmt))
    print()
    for line in summary_lines(table):
        print(line)


def _ints(text: str, field: str) -> list[int]:
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(field, text, "comma-separated integers") from None
    if not vals or min(vals) < 1:
        raise InputError(field, text, "comma-separated integers >= 1")
    return vals


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n=16, d=4, 20 s limit, 16-server graphs")
    ap.add_argument("--sizes", default=None, help="server counts (default 16,64,128)")
    ap.add_argument("--degrees", default=None, help="ports per server (default 4,8)")
    ap.add_argument("--workloads", default=None, help="comma-separated names (default: all)")
    ap.add_argument(
        "--taskgraph-sizes", default=None, help="task graphs of these server counts (default all)"
    )
    ap.add_argument("--time-limit", type=float, default=None, help="joint's limit, s (60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="design-bench.csv", help="CSV of all rows")
    ap.add_argument("--table", default=None, help="print the table of an earlier run's CSV")
    a = ap.parse_args(argv)
    if a.table:
        print_report(pd.read_csv(a.table))
        return 0
    try:
        sizes = _ints(a.sizes or ("16" if a.quick else "16,64,128"), "--sizes")
        degrees = _ints(a.degrees or ("4" if a.quick else "4,8"), "--degrees")
        limit = a.time_limit if a.time_limit is not None else (20.0 if a.quick else 60.0)
        names = a.workloads.split(",") if a.workloads else None
        t0 = time.perf_counter()
        tg_sizes = a.taskgraph_sizes or ("16" if a.quick else None)
        tg = _ints(tg_sizes, "--taskgraph-sizes") if tg_sizes else None
        table = run_suite(names, sizes, degrees, limit, a.seed, taskgraph_sizes=tg, out=a.out)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    wall = time.perf_counter() - t0
    if table.empty:
        print("no case matches the selection", file=sys.stderr)
        return 2
    table.to_csv(a.out, index=False)
    print_report(table)
    print(f"total wall time: {wall:.0f} s; rows written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
