"""Per-phase pod-to-pod circuits of the OCS spine on a realistic MoE job (issue 26, item 2).

Mixtral 8x7B (the embedded plan: tp 2, pp 4, ep 8, sp, distributed optimizer) scaled to
``--gpus`` H100 SXM GPUs (``advise``'s weak scaling), 8 x 400 G NICs per server, on
``compare``'s OCS spine (the cheapest catalogue radix, or ``--pods`` pods of it): one
:func:`solvers.reconfig.spine.reconfigure_spine` at the smallest delay with every asked delay
on its dark-time grid gives the best schedule at each (the delay sweep's rule: the result at
delay X is the best over dark times >= X). Prints one JSON line per delay: static and chosen
iteration, their ratio, reconfigurations, phases, candidates, capex; then CPU seconds.

Usage::

    nice -n 19 .venv/bin/python benchmarks/bench_spine_reconfig.py --gpus 1024
    nice -n 19 .venv/bin/python benchmarks/bench_spine_reconfig.py --gpus 4096 --pods 8
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
    ap.add_argument("--pods", type=int, default=None)
    ap.add_argument("--delays-us", default="10,1000,10000")
    ap.add_argument("--max-evaluations", type=int, default=64)
    ap.add_argument(
        "--static-alternatives", action="store_true",
        help="also hold each phase's engineered circuits for the whole iteration",
    )  # fmt: skip
    a = ap.parse_args(argv)

    from topoopt.app.studies.advise import scale_plan
    from topoopt.app.studies.spine_reconfig import spine_reconfig
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    t0 = time.process_time()
    w = workload_from_plan(scale_plan(load_plan(a.plan), a.gpus, a.gpu))
    delays = sorted(float(x) / 1e6 for x in a.delays_us.split(","))
    bw = a.link_gbps * 1e9 / 8
    res, capex = spine_reconfig(
        w, a.degree, bw, delays[0], pods=a.pods, holds=tuple(delays),
        max_evaluations=a.max_evaluations,
        progress=lambda m: print(f"[{time.process_time() - t0:7.1f} s] {m}", file=sys.stderr),
    )  # fmt: skip
    for d in delays:
        hs = [h for h in res.by_hold if h >= d * (1 - 1e-9)]
        h = min(hs, key=lambda x: (res.by_hold[x], x))
        sched = res.by_hold_schedule[h]
        print(json.dumps({
            "plan": a.plan, "gpus": a.gpus, "servers": w.servers, "pods": res.info["pods"],
            "ocses": res.info["ocses"], "radix": res.info["radix"], "delay_s": d,
            "static_iteration_s": res.static_iteration_s, "iteration_s": res.by_hold[h],
            "speedup": res.static_iteration_s / res.by_hold[h],
            "reconfigurations": sched.reconfigurations(), "dark_s": h,
            "schedule": [s.label for s in sched.sets], "starts_s": list(sched.starts),
            "phases": [(p.name, p.start_s, p.end_s) for p in res.phases],
            "candidates": [len(c) for c in res.candidates], "evaluations": res.evaluations,
            "stopped_by": res.info["stopped_by"], "coarsened": res.info["coarsened"],
            "lower_bound_s": res.lower_bound_s, "capex_usd": capex["static"]["capex_usd"],
            "power_w": capex["static"]["power_w"],
        }, allow_nan=False), flush=True)  # fmt: skip
    if a.static_alternatives:  # DELTA's question: a better static set than the traffic matrix's
        from solvers.reconfig.schedule import Schedule
        from solvers.reconfig.spine import iteration_under_spine_schedule
        from topoopt.fabrics.ocs_spine import ocs_spine_shape

        p = res.static.params
        sh = ocs_spine_shape(
            w.servers, p["radix"], ports_per_server=a.degree, pods=p["pods"],
            ocs_radix=p["ocs_radix"],
        )  # fmt: skip
        for cands in res.candidates:
            for cs in cands[1:]:
                run = iteration_under_spine_schedule(
                    w, Schedule((cs,), (0.0,), ("iteration",)), sh, bw, 0.0,
                    compute_s=res.info["compute_s"],
                )  # fmt: skip
                print(json.dumps({
                    "static_alternative": cs.label, "iteration_s": run.iteration_s,
                    "static_iteration_s": res.static_iteration_s,
                    "ratio": run.iteration_s / res.static_iteration_s,
                    "circuits": cs.total, "static_circuits": res.schedule.sets[0].total
                    if res.schedule.is_static() else None,
                }, allow_nan=False), flush=True)  # fmt: skip
    print(f"cpu_s {time.process_time() - t0:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
