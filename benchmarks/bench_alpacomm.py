"""AlpaComm figures: cross-mesh resharding bytes and 1F1B against eager-1F1B (prints tables;
asserts nothing). The numbers of ``docs/alpacomm.md``.

Part 1, one plan (default: GPT-3 175B, ``stage_tp`` ``[8, 8, 4, 4] x 4``, ``pp = 16``,
``dp = 1``, 64 micro-batches, 12 servers x 8 GPUs) on a full-bisection fat-tree with one port
of each ``--gbps`` (``simulate --fabric fat-tree --degree 1 --link-gbps G``): for ``naive`` and
``broadcast`` resharding, the inter-server bytes of class ``pp`` and the iteration time under
1F1B, under the 1F1B order with in-order sends (the ablation: what eager-1F1B's
one-stream-per-pair sends alone give) and under eager-1F1B (eager order without the fallback,
and what ``simulate --schedule eager-1f1b`` reports).

Part 2, ``--random N`` random pipelines (2-5 one-GPU stages, 1-9 micro-batches, per-stage
compute and send sizes drawn with seed 0): how often the eager order (with and without in-order
sends) is faster, equal or slower than 1F1B before the fallback.

Usage::

    .venv/bin/python benchmarks/bench_alpacomm.py                       # 25 and 100 Gbps
    .venv/bin/python benchmarks/bench_alpacomm.py --gbps 10 --random 200
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np

import topoopt.flowsim.iteration as iteration
from topoopt.app.studies.compare import build_fabric
from topoopt.fabrics import ideal
from topoopt.flowsim.roofline import RooflineParams
from topoopt.units import gbps_to_bytes_per_s
from traffic.build import workload_from_plan
from traffic.expand import server_matrix
from traffic.workload import Demand, Workload

PLAN = {
    "model": "gpt3-175b",
    "parallelism": {
        "stage_tp": [8, 8, 4, 4] * 4,
        "pp": 16,
        "dp": 1,
        "micro_batch_size": 1,
        "global_batch_size": 64,
    },
    "cluster": {"servers": 12, "gpus_per_server": 8},
}


@contextlib.contextmanager
def _order(eager_order: bool):
    """Ablation: eager-1F1B's in-order sends with the 1F1B order (``eager_order`` False)."""
    orig = iteration.pipeline_order
    if not eager_order:
        iteration.pipeline_order = lambda p, m, stage, v=1, eager=False: orig(p, m, stage, v)
    try:
        yield
    finally:
        iteration.pipeline_order = orig


def _run(w, fab, **kw):
    return iteration.simulate_iteration(w, fab, exposed_by_class=False, **kw)


def plan_table(gbps: list[float]) -> None:
    print("resharding  Gbps  inter-server pp GB    1f1b s  1f1b+in-order s  eager s  reported s")
    for alg in ("naive", "broadcast"):
        w = workload_from_plan({**PLAN, "options": {"resharding": alg}})
        m = server_matrix(w.select(classes=["pp"]))
        inter = float(m.sum() - m.diagonal().sum())
        for g in gbps:
            run = build_fabric("fat-tree", w, 1, gbps_to_bytes_per_s(g))  # as `simulate`
            fab, kw = run.fabric, {"routing": run.routing}
            plain = _run(run.workload, fab, schedule="1f1b", **kw).iteration_s
            with _order(False):
                fifo = _run(run.workload, fab, schedule="eager-1f1b", **kw).info["eager_1f1b_s"]
            r = _run(run.workload, fab, schedule="eager-1f1b", **kw)
            print(
                f"{alg:10s} {g:5.0f}  {inter / 1e9:18.1f}  {plain:8.3f}  {fifo:15.3f}  "
                f"{r.info['eager_1f1b_s']:7.3f}  {r.iteration_s:10.3f}"
            )


def _chain(p, m, flops, send) -> Workload:
    dem = []
    for a in range(p - 1):
        dem.append(Demand("send", [[a, a + 1]], send, "pp", "forward", m, False, stage=a))
        dem.append(Demand("send", [[a + 1, a]], send, "pp", "backward", m, False, stage=a + 1))
    info = {
        "micro_batches": m,
        "forward_flops_per_microbatch_per_gpu": list(flops),
        "parameters_per_gpu_per_stage": [0] * p,
    }
    return Workload(p, 1, tuple(dem), info=info, conventions={"vpp": 1})


def random_table(n: int) -> None:
    gpu = RooflineParams(peak_flops=1e12, efficiency=1.0, memory_bandwidth=1e12)
    counts = {}
    for label, eager_order in (("1f1b order + in-order sends", False), ("eager-1f1b", True)):
        rng = np.random.default_rng(0)
        c = {"faster": 0, "equal": 0, "slower": 0}
        worst = 1.0
        for _ in range(n):
            p, m = int(rng.integers(2, 6)), int(rng.integers(1, 10))
            flops = rng.uniform(0.2, 2.0, p) * 1e12
            w = _chain(p, m, flops, float(rng.uniform(0, 3)) * 1e9)
            with _order(eager_order):
                r = _run(w, ideal(p, port_bandwidth=1e9), gpu=gpu, schedule="eager-1f1b")
            e, o = r.info["eager_1f1b_s"], r.info["1f1b_s"]
            key = "slower" if e > o * (1 + 1e-12) else "faster" if e < o * (1 - 1e-12) else "equal"
            c[key] += 1
            worst = max(worst, e / o)
        counts[label] = c
        print(f"{label:28s} vs 1f1b on {n} random pipelines: {c}, worst ratio {worst:.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gbps", type=float, nargs="+", default=[25.0, 100.0])
    ap.add_argument("--random", type=int, default=0)
    a = ap.parse_args()
    plan_table(a.gbps)
    if a.random:
        random_table(a.random)


if __name__ == "__main__":
    main()
