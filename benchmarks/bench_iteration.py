"""Wall time and peak memory of the iteration model on embedded plans, on an ideal switch.

Run: ``.venv/bin/python benchmarks/bench_iteration.py [--by-class] [--plans gpt3-175b,...]``

Each plan runs on ``ideal(servers, degree=8, port_bandwidth=25e9)`` (8 x 200 Gbps per server, a
DGX A100's compute NICs) with ``gpus_per_server`` from the plan. ``wall_s`` covers
:func:`simulate_iteration` (two simulations: the full one and the one with instantaneous
communication; ``--by-class`` adds one per traffic class). ``peak_rss_mb`` is the process's peak
resident memory after the plan, a child process per plan so that figures do not accumulate.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

PLANS = ("gpt3-175b", "dlrm", "vgg16-dp")


def run_one(plan: str, by_class: bool) -> dict:
    from topoopt.fabrics import ideal
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    w = workload_from_plan(plan)
    fab = ideal(w.servers, degree=8, port_bandwidth=25e9, gpus_per_server=w.gpus_per_server)
    t0 = time.perf_counter()
    r = simulate_iteration(w, fab, exposed_by_class=by_class, record_series=False)
    wall = time.perf_counter() - t0
    return {
        "plan": plan,
        "gpus": w.gpus,
        "servers": w.servers,
        "wall_s": wall,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "iteration_s": r.iteration_s,
        "compute_s": r.compute_s,
        "comm_s": r.comm_s,
        "exposed_comm_s": r.exposed_comm_s,
        "exposed_by_class": {k: round(v, 6) for k, v in r.exposed_by_class.items()},
        "flows": r.info["flows"],
        "events": r.info["events"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--by-class", action="store_true", help="also exposed time per class")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(run_one(a.child, a.by_class)))
        return
    rows = []
    for plan in a.plans.split(","):
        cmd = [sys.executable, __file__, "--child", plan] + (["--by-class"] if a.by_class else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    head = (
        f"{'plan':<11}{'gpus':>6}{'wall_s':>9}{'peak_MB':>9}{'flows':>9}{'events':>8}"
        f"{'iter_s':>10}{'compute_s':>11}{'comm_s':>10}{'exposed_s':>11}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['plan']:<11}{r['gpus']:>6}{r['wall_s']:>9.2f}{r['peak_rss_mb']:>9.0f}"
            f"{r['flows']:>9}{r['events']:>8}{r['iteration_s']:>10.4f}{r['compute_s']:>11.4f}"
            f"{r['comm_s']:>10.4f}{r['exposed_comm_s']:>11.4f}"
        )
        if r["exposed_by_class"]:
            print(f"{'':<11}exposed by class (s): {r['exposed_by_class']}")


if __name__ == "__main__":
    main()
