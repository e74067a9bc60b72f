"""Benchmark the joint optimizer against the TopoOpt baseline (prints a table; asserts nothing).

Workloads are built by hand (8 GPUs per server, one GPU per server in each group):

- ``dlrm``: embedding all-to-all across all servers in forward and backward (fixed) plus a
  data-parallel all-reduce over all servers (mutable), DLRM-like;
- ``dp``: a pure data-parallel all-reduce;
- ``pp``: a 4-stage pipeline across servers (one-way activation sends forward, gradients
  backward) with data parallelism inside each stage.

For each (workload, n, d): the ``topoopt`` baseline's objective and wall time, then ``joint``'s
objective, lower bound, gap, wall time and ratio to the baseline (the congestion objective of
:mod:`solvers.model.congestion`; the flow-model comparison is the design benchmark's job,
``benchmarks/design/run.py``). ``joint`` picks its result among its finalists by the flow
model's communication time (``--select-by flow``, the default; never worse than ``topoopt`` in
the objective either) or by the objective alone (``--select-by objective``). ``--work-limit``
sets joint's deterministic work budget; ``--repeat 2`` solves each case twice (the rows must be
identical but for wall times).

Usage::

    .venv/bin/python benchmarks/bench_joint.py                      # n=128 (60 s), n=1024 (300 s)
    .venv/bin/python benchmarks/bench_joint.py --sizes 128 --workloads dlrm dp pp
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.driver import congestion_search
from solvers.model.problem import DesignProblem
from traffic.workload import Demand, Workload

GPUS_PER_SERVER = 8
LINK_BANDWIDTH = 100e9 / 8  # 100 Gbps in bytes/s


def dlrm(n: int) -> Workload:
    r = np.arange(n * GPUS_PER_SERVER).reshape(n, GPUS_PER_SERVER).T.copy()
    demands = (
        Demand("all-to-all", r, 32e6, "embedding", "forward", mutable=False, name="emb fwd"),
        Demand("all-to-all", r, 32e6, "embedding", "backward", mutable=False, name="emb bwd"),
        Demand("all-reduce", r, 200e6, "dp", "backward", name="dense grads"),
    )
    return Workload(n * GPUS_PER_SERVER, GPUS_PER_SERVER, demands, name=f"dlrm-like n={n}")


def pure_dp(n: int) -> Workload:
    r = np.arange(n * GPUS_PER_SERVER).reshape(n, GPUS_PER_SERVER).T.copy()
    demands = (Demand("all-reduce", r, 400e6, "dp", "backward", name="grads"),)
    return Workload(n * GPUS_PER_SERVER, GPUS_PER_SERVER, demands, name=f"dp n={n}")


def pipeline(n: int, stages: int = 4) -> Workload:
    r = np.arange(n * GPUS_PER_SERVER).reshape(stages, n // stages, GPUS_PER_SERVER)
    sends = np.stack([r[:-1].ravel(), r[1:].ravel()], axis=1)
    dp = r.transpose(0, 2, 1).reshape(-1, n // stages).copy()
    demands = (
        Demand("send", sends, 50e6, "pp", "forward", count=8, mutable=False, name="activations"),
        Demand("send", sends[:, ::-1].copy(), 50e6, "pp", "backward", count=8, mutable=False),
        Demand("all-reduce", dp, 100e6, "dp", "backward", name="grads"),
    )
    return Workload(n * GPUS_PER_SERVER, GPUS_PER_SERVER, demands, name=f"pp n={n}")


WORKLOADS = {"dlrm": dlrm, "dp": pure_dp, "pp": pipeline}
LIMITS = {128: 60.0, 1024: 300.0}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 1024])
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--workloads", nargs="+", default=["dlrm", "dp"], choices=sorted(WORKLOADS))
    ap.add_argument("--time-limit", type=float, default=None, help="override the per-size limit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--select-by", default="flow", choices=["flow", "objective"])
    ap.add_argument("--work-limit", type=float, default=None, help="joint's work limit (units)")
    ap.add_argument("--repeat", type=int, default=1, help="solve each case this many times")
    args = ap.parse_args(argv)
    head = (
        f"{'workload':<16}{'n':>6}{'d':>3}{'topoopt_s':>12}{'topo_wall':>10}{'joint_s':>12}"
        f"{'bound_s':>12}{'gap':>8}{'wall_s':>8}{'limit':>7}{'work':>7}{'joint/topo':>11}"
        f"  stopped_by det  status"
    )
    print(head)
    for n in args.sizes:
        limit = args.time_limit or LIMITS.get(n, 60.0)
        for name in args.workloads:
            w = WORKLOADS[name](n)
            p = DesignProblem.from_workload(w, degree=args.degree, link_bandwidth=LINK_BANDWIDTH)
            t = time.perf_counter()
            base = topoopt_design(p, "topoopt", seed=args.seed)
            base_wall = time.perf_counter() - t

            t0 = time.perf_counter()

            def progress(inc, bound, t0=t0):
                print(f"  [{time.perf_counter() - t0:7.1f} s] incumbent {inc:.6g} s, "
                      f"bound {bound:.6g} s", file=sys.stderr)  # fmt: skip

            for _ in range(args.repeat):
                d = congestion_search(
                    p, time_limit_s=limit, seed=args.seed, progress=progress,
                    select_by=args.select_by, work_limit=args.work_limit,
                )  # fmt: skip
                print(
                    f"{w.name:<16}{n:>6}{args.degree:>3}{base.objective_s:>12.6f}"
                    f"{base_wall:>10.2f}{d.objective_s:>12.6f}{d.lower_bound_s:>12.6f}"
                    f"{d.gap:>8.3f}{d.wall_s:>8.1f}{limit:>7.0f}{d.info['work_used']:>7.1f}"
                    f"{d.objective_s / base.objective_s:>11.4f}  {d.info['stopped_by']:<11}"
                    f"{'yes' if d.info['deterministic'] else 'no':<4} {d.status}"
                    f" ({d.info.get('winner', 'baseline')})",
                    flush=True,
                )


if __name__ == "__main__":
    main()
