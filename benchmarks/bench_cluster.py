"""Benchmark the shared-cluster setup of TopoOpt (NSDI'23, section 6, Fig. 16-like): 432 servers
running 16-server jobs drawn (seeded) from DLRM, BERT-like transformer, CANDLE and VGG task graphs;
mean and p90 per-job iteration time (prints a table; asserts nothing).

Fabrics:

- ``topoopt d x 100G``: every job placed on disjoint servers and designed by TopoOpt's
  TopologyFinder within its servers' ``d`` ports, realisable on the OCS layer
  (:mod:`solvers.cluster`; one OCS unit per port index unless ``--ocs-radix``), simulated on its
  own circuits;
- ``ideal B``: each job alone on a non-blocking switch of ``B`` Gbps per server;
- ``fat-tree B``: each job on a k=12 three-tier fat-tree (432 hosts, full bisection) with
  ``B`` Gbps links, on 16 servers of one pod. A full-bisection fat-tree is non-blocking, so the
  other jobs' traffic is not simulated (an upper bound on its performance under ECMP).

Usage::

    .venv/bin/python benchmarks/bench_cluster.py                 # 5..27 jobs, full grid
    .venv/bin/python benchmarks/bench_cluster.py --jobs 5 27 --ocs-radix 144
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from solvers.cluster.cluster_design import design_cluster
from solvers.cluster.jobs import Job
from solvers.cluster.ocs import OcsLayer
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError
from traffic.load import load_workload

GRAPHS = Path(__file__).resolve().parents[1] / "tests" / "data" / "topoopt-taskgraphs"
MODELS = {
    "dlrm": "100dlrm_16.fbuf",
    "bert": "100transformer_16.fbuf",
    "candle": "100candle_16.fbuf",
    "vgg": "100vgg_16.fbuf",
}


def _alone(workload, fabric) -> float:
    from topoopt.flowsim.iteration import simulate_iteration

    return float(simulate_iteration(workload, fabric, exposed_by_class=False).iteration_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=432)
    ap.add_argument("--jobs", type=int, nargs="+", default=[5, 10, 15, 20, 27])
    ap.add_argument("--degrees", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--link-gbps", type=float, default=100.0)
    ap.add_argument("--switch-gbps", type=float, nargs="+", default=[100, 200, 400, 800])
    ap.add_argument("--ocs-radix", type=int, nargs="+", default=[0], help="0: one unit per index")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-fat-tree", action="store_true")
    args = ap.parse_args()

    from topoopt.fabrics.fat_tree import fat_tree
    from topoopt.fabrics.ideal import ideal

    workloads = {m: load_workload(GRAPHS / f) for m, f in MODELS.items()}
    rng = np.random.default_rng(args.seed)
    draw = rng.choice(list(MODELS), size=max(args.jobs))
    print(f"job models drawn (seed {args.seed}): {' '.join(draw.tolist())}", flush=True)

    rows = []
    per_model: dict[tuple[str, str], float] = {}
    t0 = time.perf_counter()
    for gbps in args.switch_gbps:
        bw = gbps_to_bytes_per_s(gbps)
        for m, w in workloads.items():
            per_model[(f"ideal {gbps:g}G", m)] = _alone(w, ideal(16, 1, bw))
            if not args.no_fat_tree:
                per_model[(f"fat-tree {gbps:g}G", m)] = _alone(w, fat_tree(12, port_bandwidth=bw))
        print(f"switch fabrics at {gbps:g} Gbps: {time.perf_counter() - t0:.0f} s", flush=True)
    for n in args.jobs:
        picked = draw[:n]
        for name in sorted({k[0] for k in per_model}):
            it = np.array([per_model[(name, m)] for m in picked])
            rows.append((name, n, it.mean(), np.quantile(it, 0.9), np.nan, np.nan))

    cache: dict = {}
    for radix in args.ocs_radix:
        for d in args.degrees:
            layer = OcsLayer.build(args.servers, d, radix or None)
            label = f"topoopt {d}x{args.link_gbps:g}G" + (f" R={radix}" if radix else "")
            for n in args.jobs:
                jobs = [Job(f"j{i}-{m}", workloads[m]) for i, m in enumerate(draw[:n])]
                t1 = time.perf_counter()
                try:
                    cl = design_cluster(
                        jobs, layer, gbps_to_bytes_per_s(args.link_gbps), cache=cache
                    )
                except InputError as exc:  # the OCS layer cannot connect every job
                    print(f"{label}, {n} jobs: not placed ({exc})", flush=True)
                    continue
                it = np.array([j.iteration_s for j in cl.jobs])
                sl = np.array([j.iteration_s / j.alone_ideal_s for j in cl.jobs])
                rep = sum(j.repaired for j in cl.jobs)
                rows.append((label, n, it.mean(), np.quantile(it, 0.9), rep, sl.mean()))
                print(
                    f"{label}, {n} jobs: {time.perf_counter() - t1:.1f} s, {rep} circuits repaired",
                    flush=True,
                )
    table = pd.DataFrame(
        rows,
        columns=["fabric", "jobs", "mean_ms", "p90_ms", "repaired", "mean_slowdown_vs_ideal_d_x_B"],
    )
    table["mean_ms"] *= 1e3
    table["p90_ms"] *= 1e3
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    wide = table.pivot_table(index="fabric", columns="jobs", values=["mean_ms", "p90_ms"])
    print(wide.to_string(float_format=lambda x: f"{x:.4g}"))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
