"""The design benchmark suite (issue 5, section 5): workloads x designs, judged by the flow model.

For each workload (:mod:`workloads`), server count ``n`` and port count ``d`` (``B = 100 Gbps``
per port) it builds the ideal switch, the ``topoopt``, ``topoopt-released`` and ``joint`` designs,
the random ``expander`` and the fat-tree of equal cost to the ``topoopt`` design, simulates one
iteration and the communication alone on each with the flow model
(:func:`topoopt.studies.compare.compare`), and prints ONE table of ratios against the ideal
switch, then the acceptance's summary lines. Every row also goes to a CSV.

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

from topoopt.studies.compare import compare  # noqa: E402
from traffic.errors import InputError  # noqa: E402

__all__ = ["FABRICS", "run_case", "run_suite", "summary_lines", "main"]

FABRICS = ("ideal", "topoopt", "topoopt-released", "expander", "joint", "fat-tree-cost-equivalent")
"""Fabrics of every case, in table order (``ideal`` first: the ratios' reference)."""

LINK_BANDWIDTH = 100e9 / 8
"""100 Gbps per port, in bytes/s."""


def run_case(workload, name: str, degree: int, time_limit_s: float, seed: int = 0) -> pd.DataFrame:
    """Rows of one (workload, d) case: one per fabric, ratios against the ideal switch."""
    res = compare(
        workload,
        FABRICS,
        degree=degree,
        link_bandwidth=LINK_BANDWIDTH,
        seed=seed,
        time_limit_s=time_limit_s,
    )
    t = res.table.copy()
    ideal = t.loc[t["fabric"] == "ideal"].iloc[0]
    t.insert(0, "workload", name)
    t.insert(1, "servers", workload.servers)
    t.insert(2, "degree", degree)
    t["iter_ratio"] = t["iteration_s"] / ideal["iteration_s"]
    t["comm_ratio"] = t["comm_s"] / ideal["comm_s"] if ideal["comm_s"] > 0 else np.nan
    wall = []
    for run in res.runs:
        wall.append(float(run.design.wall_s) if run.design is not None else np.nan)
    t["solver_wall_s"] = wall
    for col in ("objective_s", "lower_bound_s", "gap"):
        if col not in t:
            t[col] = np.nan
    return t[
        [
            "workload",
            "servers",
            "degree",
            "fabric",
            "iteration_s",
            "comm_s",
            "iter_ratio",
            "comm_ratio",
            "solver_wall_s",
            "objective_s",
            "lower_bound_s",
            "gap",
            "capex_usd",
            "build_s",
            "simulate_s",
        ]
    ]


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
    for case in suite_cases(workloads, sizes, taskgraph_sizes):
        w = case.build()
        for d in degrees:
            t0 = time.perf_counter()
            frames.append(run_case(w, case.name, d, time_limit_s, seed))
            say(f"{case.name} n={case.servers} d={d}: {time.perf_counter() - t0:.1f} s")
            if out:
                pd.concat(frames, ignore_index=True).to_csv(out, index=False)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _ratio(table: pd.DataFrame, num: str, den: str, col: str) -> pd.Series:
    key = ["workload", "servers", "degree"]
    a = table[table["fabric"] == num].set_index(key)[col]
    b = table[table["fabric"] == den].set_index(key)[col]
    return (a / b).dropna()


def summary_lines(table: pd.DataFrame) -> list[str]:
    """The acceptance's figures (module docstring of the README)."""
    out = []
    jt_comm = _ratio(table, "joint", "topoopt", "comm_s")
    jt_iter = _ratio(table, "joint", "topoopt", "iteration_s")
    ji = _ratio(table, "joint", "ideal", "comm_s")
    dp = ji[ji.index.get_level_values(0).isin(PURE_DP)]
    if len(dp):
        worst = dp.idxmax()
        out.append(
            f"pure DP: max joint/ideal communication = {dp.max():.4f} "
            f"({worst[0]} n={worst[1]} d={worst[2]}; target <= 1.02)"
        )
    for key, v in jt_comm.items():
        it = jt_iter.get(key, math.nan)
        flag = "ok" if v <= 1 + 1e-9 else "WORSE"
        out.append(
            f"joint/topoopt {key[0]} n={key[1]} d={key[2]}: comm {v:.3f}, iteration {it:.3f} "
            f"[{flag}]"
        )
    mp = jt_comm[jt_comm.index.get_level_values(0).isin(MP_HEAVY)]
    if len(mp):
        gm = float(np.exp(np.log(mp.clip(lower=1e-12)).mean()))
        out.append(
            f"MP-heavy geometric mean joint/topoopt (comm) = {gm:.3f} over {len(mp)} cases "
            f"(target <= 0.90)"
        )
        mpi = jt_iter[jt_iter.index.get_level_values(0).isin(MP_HEAVY)]
        gmi = float(np.exp(np.log(mpi.clip(lower=1e-12)).mean()))
        out.append(f"MP-heavy geometric mean joint/topoopt (iteration) = {gmi:.3f}")
    n_worse = int((jt_comm > 1 + 1e-9).sum())
    out.append(f"cases where joint is slower than topoopt (comm): {n_worse} of {len(jt_comm)}")
    return out


def print_report(table: pd.DataFrame) -> None:
    """The table (times in ms, ratios against the ideal switch) and the summary lines."""
    cols = ["workload", "servers", "degree", "fabric", "iteration_s", "comm_s", "iter_ratio"]
    show = table[cols + ["comm_ratio", "solver_wall_s", "gap"]].copy()
    show["iteration_ms"] = show.pop("iteration_s") * 1e3
    show["comm_ms"] = show.pop("comm_s") * 1e3
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(show.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
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
