"""Issue 26 item 4, the lever "rail-aligned circuits": advise's rows for rail-circuits.

Each row is advise's own evaluation (:func:`topoopt.app.studies.advise.evaluate`: the same
build, simulation, price and columns as ``topoopt advise JOB --gpus N --gpu h100-sxm --degree 8
--link-gbps 400``), on the job's own plan scaled to ``N`` GPUs as advise scales it.

    PYTHONPATH=. python benchmarks/rail_circuits_lever.py gpt3-175b 1024 \
        rail-only,rail-circuits,rail-circuits-2 > out.jsonl

One JSON line per row (job, fabric, iteration_s, capex_usd, power_w, per M$, per kW, CPU s).
"""

from __future__ import annotations

import json
import sys
import time

from topoopt.app.studies.advise import evaluate, scale_plan
from topoopt.fabrics.cost import load_prices
from traffic.plan import load_plan

KEYS = (
    "job", "fabric", "gpus", "iteration_s", "capex_usd", "power_w",
    "iterations_per_s_per_musd", "iterations_per_s_per_kw", "binding_class", "binding_link",
    "paths_exact", "search_warning", "note", "error",
)  # fmt: skip


def main(job: str, gpus: int, fabrics: list[str]) -> None:
    plan = scale_plan(load_plan(job), gpus, "h100-sxm")
    common = {
        "degree": 8, "link_bandwidth": 400e9 / 8, "oversubscription": 4.0, "seed": 0,
        "time_limit_s": 30.0, "prices": load_prices(),
    }  # fmt: skip
    for f in fabrics:
        c0 = time.process_time()
        row = evaluate({"job": job, "plan": plan, "weight": 1.0, "fabric": f, **common})
        out = {k: row.get(k) for k in KEYS}
        out["cpu_s"] = round(time.process_time() - c0, 1)
        out["wall_s"] = round(float(row.get("wall_s", 0.0)), 1)
        print(json.dumps(out, allow_nan=False, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3].split(","))
