"""Delay sweep of ``topoopt reconfig``: iteration time against reconfiguration delay.

For each plan: the static joint design, the schedule :func:`solvers.reconfig.reconfigure`
chooses at every delay of the grid (10 us to 100 ms), the TopoOpt-paper baselines (OCS-reconfig
with the artifact's 4x-delay live period, SiP-ML-like fast reconfiguration) and the lower bound.
Prints one table per plan (ms) and, with ``--csv FILE``, writes all rows.

    PYTHONPATH=. python benchmarks/bench_reconfig.py dlrm mixtral-8x7b gpt3-175b-32 --degree 4
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from solvers.reconfig.search import HOLD_GRID_S, delay_sweep
from traffic.load import load_workload


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="+")
    ap.add_argument("--degree", type=int, default=4)
    ap.add_argument("--link-gbps", type=float, default=100.0)
    ap.add_argument("--solver", default="joint")
    ap.add_argument("--work-limit", type=float, default=5.0)
    ap.add_argument("--max-exhaustive", type=int, default=64)
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    frames = []
    for plan in a.plans:
        t0 = time.perf_counter()
        df = delay_sweep(
            load_workload(plan),
            a.degree,
            a.link_gbps * 1e9 / 8,
            HOLD_GRID_S,
            static_solver=a.solver,
            work_limit=a.work_limit,
            max_exhaustive=a.max_exhaustive,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
        df.insert(0, "plan", plan)
        frames.append(df)
        shown = df.copy()
        for c in shown.columns:
            if c.endswith("_s") and c != "delay_s":
                shown[c] = shown[c] * 1e3
        shown["delay_s"] = shown["delay_s"] * 1e6
        shown = shown.rename(columns={"delay_s": "delay_us"})
        print(f"{plan}: {a.degree} x {a.link_gbps:g} Gbps ({time.perf_counter() - t0:.0f} s)")
        print(shown.to_string(index=False, float_format=lambda x: f"{x:.4g}"), flush=True)
    if a.csv:
        pd.concat(frames).to_csv(a.csv, index=False)


if __name__ == "__main__":
    main()
