"""Per-phase optical circuits of the hybrid fabric on a realistic MoE job (MixNet's closest model).

Mixtral 8x7B (the embedded plan) scaled to ``--gpus`` H100 SXM GPUs (``advise``'s weak scaling),
8 NICs per server, on ``compare``'s hybrid (4 NICs on a 4:1 leaf-spine, 4 optical ports, the
circulant, LP routing): one :func:`solvers.reconfig.hybrid_phase.reconfigure_hybrid` at the
smallest delay with every asked delay on its dark-time grid gives the best schedule at each (the
delay sweep's rule). Prints one JSON line per delay (static and chosen iteration, their ratio,
reconfigurations, capex), then CPU seconds.

Usage::

    nice -n 19 .venv/bin/python benchmarks/bench_hybrid_reconfig.py --gpus 1024 --link-gbps 400
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="mixtral-8x7b")
    ap.add_argument("--gpus", type=int, default=1024)
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--link-gbps", type=float, default=400.0)
    ap.add_argument("--delays-us", default="10,1000,10000")
    ap.add_argument("--max-evaluations", type=int, default=64)
    a = ap.parse_args(argv)

    from topoopt.app.studies.advise import scale_plan
    from topoopt.app.studies.hybrid_reconfig import hybrid_reconfig
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    t0 = time.process_time()
    w = workload_from_plan(scale_plan(load_plan(a.plan), a.gpus, a.gpu))
    delays = sorted(float(x) / 1e6 for x in a.delays_us.split(","))
    bw = a.link_gbps * 1e9 / 8
    res, capex = hybrid_reconfig(
        w, a.degree, bw, delays[0], holds=tuple(delays), max_evaluations=a.max_evaluations,
        progress=lambda m: print(f"[{time.process_time() - t0:7.1f} s] {m}", file=sys.stderr),
    )  # fmt: skip
    for d in delays:
        hs = [h for h in res.by_hold if h >= d * (1 - 1e-9)]
        h = min(hs, key=lambda x: (res.by_hold[x], x))
        sched = res.by_hold_schedule[h]
        print(json.dumps({
            "plan": a.plan, "gpus": a.gpus, "servers": w.servers, "link_gbps": a.link_gbps,
            "delay_s": d, "static_iteration_s": res.static_iteration_s,
            "iteration_s": res.by_hold[h], "speedup": res.static_iteration_s / res.by_hold[h],
            "reconfigurations": sched.reconfigurations(), "dark_s": h,
            "schedule": [s.label for s in sched.sets], "starts_s": list(sched.starts),
            "candidates": [len(c) for c in res.candidates], "evaluations": res.evaluations,
            "stopped_by": res.info["stopped_by"], "coarsened": res.info["coarsened"],
            "lower_bound_s": res.lower_bound_s, "capex_usd": capex["static"]["capex_usd"],
            "power_w": capex["static"]["power_w"],
        }, allow_nan=False), flush=True)  # fmt: skip
    print(f"cpu_s {time.process_time() - t0:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
