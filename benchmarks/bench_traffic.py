"""Benchmark: plan -> Workload -> server matrix at scale (issue 2 acceptance).

GPT-3 175B with t=8, p=16, d=128 on 16,384 GPUs (2,048 servers x 8). Prints wall seconds per
stage and peak memory (RSS high-water mark of this process, and tracemalloc's peak of Python
allocations) as one table. Run: ``.venv/bin/python benchmarks/bench_traffic.py``.
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

from traffic.build import workload_from_plan
from traffic.expand import expand
from traffic.plan import load_plan

PLAN = {
    "model": "gpt3-175b",
    "parallelism": {
        "tp": 8,
        "pp": 16,
        "dp": 128,
        "micro_batch_size": 1,
        "global_batch_size": 1536,
        "sp": False,
    },
    "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
    "cluster": {"servers": 2048, "gpus_per_server": 8},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--servers", type=int, default=2048)
    args = ap.parse_args()
    plan_doc = dict(PLAN)
    plan_doc["cluster"] = {"servers": args.servers, "gpus_per_server": 8}
    plan_doc["parallelism"] = dict(PLAN["parallelism"], dp=args.servers * 8 // (8 * 16))

    tracemalloc.start()
    t0 = time.perf_counter()
    plan = load_plan(plan_doc)
    t1 = time.perf_counter()
    workload = workload_from_plan(plan)
    t2 = time.perf_counter()
    pairs = expand(workload, "ring", "server")
    matrix = pairs.matrix()
    t3 = time.perf_counter()
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    rows = [
        ("gpus", f"{workload.gpus:,}"),
        ("servers", f"{workload.servers:,}"),
        ("demand families", f"{len(workload.demands):,}"),
        ("pair entries (unsummed)", f"{pairs.src.shape[0]:,}"),
        ("server matrix non-zeros", f"{matrix.nnz:,}"),
        ("total wire bytes / iteration", f"{matrix.sum():.6e}"),
        ("load plan (s)", f"{t1 - t0:.3f}"),
        ("plan -> Workload (s)", f"{t2 - t1:.3f}"),
        ("Workload -> server matrix (s)", f"{t3 - t2:.3f}"),
        ("total (s)", f"{t3 - t0:.3f}"),
        ("peak Python allocations (MB)", f"{py_peak / 1e6:.1f}"),
        ("peak RSS incl. interpreter+libs (MB)", f"{rss_peak / 1e6:.1f}"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"GPT-3 175B t=8 p=16 d={plan_doc['parallelism']['dp']}: traffic benchmark")
    for k, v in rows:
        print(f"  {k:<{width}}  {v:>16}")


if __name__ == "__main__":
    main()
