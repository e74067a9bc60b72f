"""Wall time and peak memory of the iteration model on embedded plans, on an ideal switch.

Run: ``.venv/bin/python benchmarks/bench_iteration.py [--by-class] [--plans gpt3-175b,...]``

Each plan runs on ``ideal(servers, degree=8, port_bandwidth=25e9)`` (8 x 200 Gbps per server, a
DGX A100's compute NICs) with ``gpus_per_server`` from the plan. ``wall_s`` covers
:func:`simulate_iteration` (two simulations: the full one and the one with instantaneous
communication; ``--by-class`` adds one per traffic class). ``peak_rss_mb`` is the process's peak
resident memory after the plan, a child process per plan so that figures do not accumulate.

``--aggregation`` prints a second table: ``dlrm-128`` and ``gpt3-175b`` (128 servers) on
``ideal(128, 4, 12.5e9)`` and ``expander(128, 4, seed 0, 12.5e9)``, each with and without the
aggregation of identical flows into classes with a multiplicity (``aggregate=`` of
:func:`simulate_iteration`): wall time, rank-level flows, flows the event loop ran, events, and
the largest relative difference of the iteration time between the two (exact up to rounding).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

PLANS = ("gpt3-175b", "dlrm", "vgg16-dp")
AGG_PLANS = ("dlrm-128", "gpt3-175b")
AGG_FABRICS = ("ideal", "expander")


def fabric_for(name: str, w):
    from topoopt.fabrics import expander, ideal

    gps = w.gpus_per_server
    if name == "default":
        return ideal(w.servers, degree=8, port_bandwidth=25e9, gpus_per_server=gps)
    if name == "ideal":
        return ideal(w.servers, 4, 12.5e9, gpus_per_server=gps)
    return expander(w.servers, 4, 0, 12.5e9, gpus_per_server=gps)


def run_one(plan: str, by_class: bool, fabric: str = "default", aggregate: bool = True) -> dict:
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    w = workload_from_plan(plan)
    fab = fabric_for(fabric, w)
    t0 = time.perf_counter()
    r = simulate_iteration(
        w, fab, exposed_by_class=by_class, record_series=False, aggregate=aggregate
    )
    wall = time.perf_counter() - t0
    return {
        "plan": plan,
        "fabric": fabric,
        "aggregate": aggregate,
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
        "simulated_flows": r.info["simulated_flows"],
        "events": r.info["events"],
    }


def child(plan: str, by_class: bool, fabric: str = "default", aggregate: bool = True) -> dict:
    cmd = [sys.executable, __file__, "--child", plan, "--fabric", fabric]
    cmd += (["--by-class"] if by_class else []) + ([] if aggregate else ["--no-aggregate"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def aggregation_table() -> None:
    print(
        f"{'plan':<11}{'fabric':<10}{'agg':<5}{'wall_s':>9}{'flows':>9}{'simulated':>11}"
        f"{'events':>9}{'iter_s':>12}{'speedup':>9}{'rel_diff':>10}"
    )
    for plan in AGG_PLANS:
        for fabric in AGG_FABRICS:
            on = child(plan, False, fabric, True)
            off = child(plan, False, fabric, False)
            diff = abs(on["iteration_s"] - off["iteration_s"]) / off["iteration_s"]
            for r in (off, on):
                speed = f"{off['wall_s'] / r['wall_s']:>9.2f}" if r is on else f"{'':>9}"
                tail = f"{diff:>10.1e}" if r is on else ""
                print(
                    f"{plan:<11}{fabric:<10}{'on' if r['aggregate'] else 'off':<5}"
                    f"{r['wall_s']:>9.2f}{r['flows']:>9}{r['simulated_flows']:>11}"
                    f"{r['events']:>9}{r['iteration_s']:>12.6f}{speed}{tail}"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--by-class", action="store_true", help="also exposed time per class")
    ap.add_argument(
        "--aggregation", action="store_true", help="only the with/without aggregation table"
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--fabric", default="default", help=argparse.SUPPRESS)
    ap.add_argument("--no-aggregate", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(
            json.dumps(run_one(a.child, a.by_class, a.fabric, not a.no_aggregate), allow_nan=False)
        )
        return
    if a.aggregation:
        aggregation_table()
        return
    rows = [child(plan, a.by_class) for plan in a.plans.split(",")]
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
