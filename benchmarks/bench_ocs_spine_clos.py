"""The OCS spine against the full-bisection Clos at a size where the Clos needs three tiers
(Jupiter Evolving's claim: an OCS layer replacing the spine saves ~30 % capex and ~41 % power).
Prints capex, power and their components for both, and the ratios; asserts nothing. The numbers
of ``docs/anchors.md`` (Jupiter row) and ``docs/advise.md``.

Both fabrics are built by ``advise``'s machinery (:func:`topoopt.app.studies.compare.build_fabric`:
the cheapest catalogue Clos at the port speed, and the cheapest OCS spine, its circuits
engineered for the plan's pod-level traffic) and priced by the same bill-of-materials rules.
``--simulate`` also times one iteration of the plan on both (:func:`topoopt.app.studies.advise.
evaluate`: every ECMP path through the symmetry quotient, capped only over the memory budget);
at 2,048 servers that takes minutes and gigabytes.

Usage::

    .venv/bin/python benchmarks/bench_ocs_spine_clos.py                    # 16,384 GPUs
    .venv/bin/python benchmarks/bench_ocs_spine_clos.py --gpus 1024       # two-tier Clos
    .venv/bin/python benchmarks/bench_ocs_spine_clos.py --simulate
"""

from __future__ import annotations

import argparse
import time

from topoopt.app.studies.advise import evaluate, load_jobs, scale_plan
from topoopt.app.studies.compare import build_fabric, cost_columns
from topoopt.fabrics.cost import load_prices
from traffic.build import workload_from_plan


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="gpt3-175b")
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--link-gbps", type=float, default=400.0)
    ap.add_argument("--simulate", action="store_true")
    a = ap.parse_args()
    table = load_prices()
    plan = scale_plan(load_jobs(a.plan)[0].plan, a.gpus, a.gpu)
    wl = workload_from_plan(plan)
    bw = a.link_gbps * 1e9 / 8
    print(f"{a.plan} on {a.gpus} GPUs = {wl.servers} servers x {a.degree} x {a.link_gbps:g} G")
    got = {}
    for nm in ("fat-tree", "ocs-spine"):
        t0 = time.perf_counter()
        run = build_fabric(nm, wl, a.degree, bw, prices=table)
        cols = cost_columns(run, table)
        info = cols["fabric_info"]
        capex = cols["capex_breakdown"]
        power = cols["power_breakdown"]
        got[nm] = (run.capex_usd, run.power_w, capex.get("nic", 0.0), power.get("nic", 0.0))
        keys = ("tiers", "radix", "leaves", "aggregation", "spines", "cores", "pods", "ocses")
        print(
            f"{nm:10s} capex {run.capex_usd / 1e6:9.3f} M$  power {run.power_w / 1e3:8.1f} kW  "
            f"built in {time.perf_counter() - t0:.1f} s"
        )
        print("  ", {k: info[k] for k in keys if info.get(k) is not None})
        print("   capex M$", {k: round(v / 1e6, 3) for k, v in capex.items()})
        print("   power kW", {k: round(v / 1e3, 1) for k, v in power.items()})
        if a.simulate:
            row = evaluate(
                {
                    "job": a.plan, "plan": plan, "weight": 1.0, "fabric": nm,
                    "degree": a.degree, "link_bandwidth": bw, "oversubscription": 4.0,
                    "seed": 0, "time_limit_s": 30.0, "prices": table,
                }
            )  # fmt: skip
            print(f"   iteration {row.get('iteration_s')} s ({row['wall_s']:.0f} s wall)")
    (c0, p0, n0, w0), (c1, p1, n1, w1) = got["fat-tree"], got["ocs-spine"]
    print(
        f"ocs-spine / Clos: capex {c1 / c0:.3f} ({100 * (1 - c1 / c0):.1f} % less), "
        f"power {p1 / p0:.3f} ({100 * (1 - p1 / p0):.1f} % less); without the NICs: capex "
        f"{100 * (1 - (c1 - n1) / (c0 - n0)):.1f} % less, power "
        f"{100 * (1 - (p1 - w1) / (p0 - w0)):.1f} % less"
    )


if __name__ == "__main__":
    main()
