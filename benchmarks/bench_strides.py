"""Benchmark: exact circulant stride selection and the TopoOpt baseline, wall-clock seconds.

Run: ``.venv/bin/python benchmarks/bench_strides.py [--quick]``. Prints one table per part:

1. ``best_strides(n, d, objective)`` against TopoOpt's geometric rule (mean hops, diameter,
   ratio geometric / exact), seconds to proof;
2. ``topoopt_design`` / ``topoopt-released`` / ``expander`` on a synthetic MP-heavy workload
   (data-parallel all-reduce over all servers, pipeline sends, expert all-to-all in groups of 8
   servers), seconds and the congestion objective. Speed targets of issue 5: ``topoopt`` under
   2 s at n=128, d=8 and under 60 s at n=1,024, d=8.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from solvers.baselines.expander_design import expander_design
from solvers.baselines.strides import best_strides, circulant_stats, geometric_strides
from solvers.baselines.topoopt_method import topoopt_design
from solvers.model.problem import DesignProblem
from traffic.workload import Demand, Workload


def stride_table(cases: list[tuple[int, int]]) -> None:
    print(
        f"{'n':>5} {'d':>2} {'objective':>9} {'exact strides':>22} {'diam':>4} {'mean':>6} "
        f"{'geo diam':>8} {'geo mean':>8} {'geo/exact':>9} {'status':>8} {'seconds':>8}"
    )
    for n, d in cases:
        geo = geometric_strides(n, d)
        gd, gm = circulant_stats(n, geo)
        for obj in ("mean-hops", "diameter"):
            r = best_strides(n, d, obj)
            ratio = gm / r.mean_hops if obj == "mean-hops" else gd / r.diameter
            print(
                f"{n:>5} {d:>2} {obj:>9} {str(list(r.strides)):>22} {r.diameter:>4} "
                f"{r.mean_hops:>6.3f} {gd:>8} {gm:>8.3f} {ratio:>9.3f} {r.status:>8} "
                f"{r.wall_s:>8.2f}"
            )


def mp_heavy(n: int, gps: int = 4) -> Workload:
    dp = np.arange(n * gps).reshape(n, gps).T
    pp = np.stack([np.arange(0, (n - 1) * gps, gps), np.arange(gps, n * gps, gps)], axis=1)
    ep = np.arange(n * gps).reshape(-1, 8 * gps)[:, ::gps]
    return Workload(
        gpus=n * gps,
        gpus_per_server=gps,
        demands=(
            Demand("all-reduce", dp, 4e8, "dp", "backward"),
            Demand("send", pp, 2e7, "pp", "forward", count=8, mutable=False),
            Demand("all-to-all", ep, 2e9, "ep", "forward", count=4, mutable=False),
        ),
        name=f"synthetic-mp-heavy-{n}",
    )


def design_table(cases: list[tuple[int, int]]) -> None:
    print(
        f"{'n':>5} {'d':>2} {'solver':>17} {'d_AR':>4} {'d_MP':>4} {'objective_s':>11} "
        f"{'ideal_lb_s':>10} {'obj/lb':>7} {'seconds':>8}"
    )
    for n, d in cases:
        p = DesignProblem.from_workload(mp_heavy(n), degree=d, link_bandwidth=12.5e9)
        for name in ("topoopt", "topoopt-released", "expander"):
            t = time.perf_counter()
            des = expander_design(p) if name == "expander" else topoopt_design(p, name)
            sec = time.perf_counter() - t
            dar, dmp = des.info.get("d_ar", "-"), des.info.get("d_mp", "-")
            print(
                f"{n:>5} {d:>2} {name:>17} {dar:>4} {dmp:>4} {des.objective_s:>11.4f} "
                f"{des.lower_bound_s:>10.4f} {des.objective_s / des.lower_bound_s:>7.2f} "
                f"{sec:>8.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip n = 1,024")
    args = ap.parse_args()
    strides = [(128, 4), (128, 6), (128, 8), (512, 8)]
    designs = [(128, 4), (128, 8)]
    if not args.quick:
        strides += [(1024, 6), (1024, 8)]
        designs += [(1024, 8)]
    stride_table(strides)
    print()
    design_table(designs)


if __name__ == "__main__":
    main()
