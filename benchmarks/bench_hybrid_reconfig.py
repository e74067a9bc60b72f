"""Per-phase optical circuits of the hybrid fabric on a realistic MoE job (MixNet's closest model).

Mixtral 8x7B (the embedded plan) scaled to ``--gpus`` H100 SXM GPUs (``advise``'s weak scaling),
8 NICs per server, on ``compare``'s hybrid (4 NICs on a 4:1 leaf-spine, 4 optical ports, the
circulant, LP routing): one :func:`solvers.reconfig.hybrid_phase.reconfigure_hybrid` at the
smallest delay with every asked delay on its dark-time grid gives the best schedule at each (the
delay sweep's rule). Prints one JSON line per delay (static and chosen iteration, their ratio,
reconfigurations, capex); then, unless ``--no-controls``, one line per static control
(:func:`topoopt.app.studies.hybrid_reconfig.static_controls`: the search's demand circuits held
static for the whole iteration, as ``compare``'s hybrid row with those circuits) and the split
of the per-phase gain at the smallest delay into its static part (the best control) and its
reconfiguration part; then CPU seconds.

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
    ap.add_argument("--no-controls", action="store_true", help="skip the static controls")
    a = ap.parse_args(argv)

    from topoopt.app.studies.advise import scale_plan
    from topoopt.app.studies.hybrid_reconfig import hybrid_reconfig, static_controls
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    t0 = time.process_time()
    w = workload_from_plan(scale_plan(load_plan(a.plan), a.gpus, a.gpu))
    delays = sorted(float(x) / 1e6 for x in a.delays_us.split(","))
    bw = a.link_gbps * 1e9 / 8
    say = lambda m: print(f"[{time.process_time() - t0:7.1f} s] {m}", file=sys.stderr)  # noqa: E731
    res, capex = hybrid_reconfig(
        w, a.degree, bw, delays[0], holds=tuple(delays), max_evaluations=a.max_evaluations,
        progress=say,
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
    if not a.no_controls:
        rows = static_controls(w, a.degree, bw, res, progress=say)
        for r in rows:
            print(json.dumps({"control": r, "static_iteration_s": res.static_iteration_s},
                             allow_nan=False), flush=True)  # fmt: skip
        its = [r["iteration_s"] for r in rows if r["iteration_s"] is not None]
        best = min([res.static_iteration_s, *its])
        gain = res.static_iteration_s - res.iteration_s
        print(json.dumps({
            "split_at_delay_s": delays[0], "static_iteration_s": res.static_iteration_s,
            "best_static_control_s": best, "per_phase_s": res.iteration_s,
            "static_part_s": res.static_iteration_s - best,
            "reconfiguration_part_s": best - res.iteration_s,
            "static_share": (res.static_iteration_s - best) / gain if gain > 0 else None,
        }, allow_nan=False), flush=True)  # fmt: skip
    print(f"cpu_s {time.process_time() - t0:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
