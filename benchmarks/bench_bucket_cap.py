"""Error of the screening coarsening (``simulate_iteration(max_buckets=...)``) against the exact
bucketed simulation, on ZeRO-2 and FSDP plans small enough to simulate exactly (prints a table;
asserts nothing).

The co-search screens candidates with at most
:data:`topoopt.app.studies.cosearch.evaluate.SCREEN_MAX_BUCKETS` gradient buckets per channel:
ZeRO-2
and FSDP families repeat every micro-batch, and at 25 MB per bucket GPT-3 175B on 16 servers asks
168 k buckets (43 M flows), which no worker can build. Each row here is one plan on one fabric:
the exact iteration (every 25 MB bucket), its flow count and CPU seconds, and the relative error
of each cap (``(=)``: the cap is above the plan's bucket count, nothing changes).

Usage::

    .venv/bin/python benchmarks/bench_bucket_cap.py
"""

from __future__ import annotations

import time

from topoopt.app.studies.compare import build_fabric
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan

CAPS = (16, 64, 256, 1024)
FABRICS = ("ideal", "topoopt", "fat-tree-cost-equivalent")


def cases():
    """(plan mapping, label): 3 model layouts x ZeRO-2 / FSDP x m = 1, 4."""
    for model, servers, gps, tp in (("llama2-7b", 4, 8, 1), ("llama2-7b", 4, 8, 8),
                                    ("llama3-8b", 8, 4, 2)):  # fmt: skip
        for shard in ({"fsdp": "full_shard"}, {"zero": 2}):
            for m in (1, 4):
                dp = servers * gps // tp
                par = {"tp": tp, "pp": 1, "dp": dp, "micro_batch_size": 1,
                       "global_batch_size": dp * m, **shard}  # fmt: skip
                kind = "fsdp full_shard" if "fsdp" in shard else "zero2"
                label = f"{model} {servers}x{gps} tp{tp} {kind} m={m}"
                cluster = {"servers": servers, "gpus_per_server": gps}
                yield {"model": model, "parallelism": par, "cluster": cluster}, label


def main() -> None:
    worst = dict.fromkeys(CAPS, 0.0)
    print(f"{'plan':40s} {'fabric':24s} {'exact s':>10} {'flows':>8} {'cpu s':>6}  " +
          " ".join(f"{'cap ' + str(c):>12}" for c in CAPS))  # fmt: skip
    for plan, label in cases():
        w = workload_from_plan(plan)
        for fabric in FABRICS:
            run = build_fabric(fabric, w, 4, 12.5e9, seed=0)
            kw = {"routing": run.routing, "exposed_by_class": False}
            c0 = time.process_time()
            ex = simulate_iteration(run.workload, run.fabric, **kw)
            cpu = time.process_time() - c0
            cells = []
            for cap in CAPS:
                co = simulate_iteration(run.workload, run.fabric, max_buckets=cap, **kw)
                err = abs(co.iteration_s - ex.iteration_s) / ex.iteration_s
                worst[cap] = max(worst[cap], err)
                cells.append(f"{err:.2e}" + ("" if co.info["buckets_capped"] else "(=)"))
            print(f"{label:40s} {fabric:24s} {ex.iteration_s:10.4f} {ex.info['flows']:8d} "
                  f"{cpu:6.1f}  " + " ".join(f"{c:>12}" for c in cells), flush=True)  # fmt: skip
    print("max relative error per cap: " + ", ".join(f"{c}: {worst[c]:.2e}" for c in CAPS))


if __name__ == "__main__":
    main()
