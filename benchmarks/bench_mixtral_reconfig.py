"""Reconfigurable circuits for a job: static ``joint`` design vs per-phase circuits vs the Clos.

Builds the ``fat-tree`` and ``joint`` rows as ``topoopt advise JOB --gpus N --gpu h100-sxm
--degree 8 --link-gbps 400`` does (:func:`topoopt.app.studies.compare.build_fabric`, the search's
900 s default, no work limit), then runs one :func:`solvers.reconfigure` over the dark-time grid
(``--holds-us`` plus the delays) with ``joint``'s design as the static design, and prints per
delay the best iteration over dark times at least the delay (as :func:`solvers.delay_sweep`),
the reconfigurations and the schedule chosen (``docs/verdicts.md``, "Reconfigurable circuits
for Mixtral"; Mixtral 8x7B at 1,024 GPUs, ``--phase-solvers demand``: 344 s CPU, 4.1 GB, under
the memory lock)::

    flock /tmp/s44-mem.lock nice -n 5 /usr/bin/time -v python \\
        benchmarks/bench_mixtral_reconfig.py mixtral-8x7b --gpus 1024 --phase-solvers demand \\
        --holds-us 10,1000,10000 [--wrap-overlap]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

DEGREE = 8
LINK = 400e9 / 8  # bytes/s: 400 Gbps


def main(argv=None) -> None:
    from solvers import reconfigure
    from solvers.reconfig import HOLD_GRID_S
    from topoopt.app.studies.advise import load_jobs, scale_plan
    from topoopt.app.studies.compare import build_fabric
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", help="a plan name or file")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--delays-us", default="10000,1000,10", help="comma-separated, microseconds")
    ap.add_argument("--phase-solvers", default="joint,topoopt,demand")
    ap.add_argument("--max-phases", type=int, default=4)
    ap.add_argument("--phase-merge", default="labels", help="shortest or labels (comm_phases)")
    ap.add_argument(
        "--wrap-overlap", action="store_true", help="the wrap may overlap the next iteration"
    )
    ap.add_argument("--max-evaluations", type=int, default=128)
    ap.add_argument(
        "--holds-us", default=None, help="dark-time grid, microseconds (default: HOLD_GRID_S)"
    )
    ap.add_argument("--no-clos", action="store_true", help="skip the fat-tree row")
    ap.add_argument("--json", help="write the rows and schedules here")
    a = ap.parse_args(argv)

    def say(m: str) -> None:
        print(m, file=sys.stderr, flush=True)

    wl = workload_from_plan(scale_plan(load_jobs(a.job)[0].plan, a.gpus, "h100-sxm"))
    c0 = time.process_time()
    out: dict = {"job": a.job, "gpus": a.gpus}
    if not a.no_clos:
        clos = build_fabric("fat-tree", wl, DEGREE, LINK, seed=0, time_limit_s=900.0)
        it = simulate_iteration(
            clos.workload, clos.fabric, exposed_by_class=False, reduction=True, path_times=False
        )
        out["clos_s"] = float(it.iteration_s)
        say(f"fat-tree: {it.iteration_s!r} s ({time.process_time() - c0:.1f} s CPU)")
    run = build_fabric("joint", wl, DEGREE, LINK, seed=0, time_limit_s=900.0)
    say(f"joint design ({time.process_time() - c0:.1f} s CPU)")
    delays = sorted(float(x) * 1e-6 for x in a.delays_us.split(","))
    base = HOLD_GRID_S if a.holds_us is None else [float(x) * 1e-6 for x in a.holds_us.split(",")]
    grid = tuple(sorted(set(base) | set(delays)))
    r = reconfigure(
        wl, DEGREE, LINK, delays[0], holds=grid, progress=say, static_design=run.design,
        solvers=tuple(a.phase_solvers.split(",")), seed=0, max_phases=a.max_phases,
        phase_merge=a.phase_merge, max_evaluations=a.max_evaluations,
        wrap_overlap=a.wrap_overlap,
    )  # fmt: skip
    out["cpu_s"] = time.process_time() - c0
    rows = []

    def label(s) -> str:
        return " | ".join(f"{cs.label}@{t:.6g}" for cs, t in zip(s.sets, s.starts, strict=True))

    for d in delays:  # as solvers.delay_sweep: the best over dark times >= the delay
        h = min((x for x in r.by_hold if x >= d * (1 - 1e-9)), key=lambda x: (r.by_hold[x], x))
        s = r.by_hold_schedule[h]
        rows.append(
            {"delay_s": d, "iteration_s": r.by_hold[h], "static_iteration_s": r.static_iteration_s,
             "reconfigurations": s.reconfigurations(), "dark_s": h if not s.is_static() else d,
             "schedule": label(s)}
        )  # fmt: skip
    out["rows"] = rows
    out["lower_bound_s"] = r.lower_bound_s
    out["phases"] = [{"name": p.name, "start_s": p.start_s, "end_s": p.end_s} for p in r.phases]
    out["candidates"] = [[cs.label for cs in c] for c in r.candidates]
    out["by_dark"] = {
        f"{h:g}": {
            "iteration_s": r.by_hold[h],
            "schedule": [
                {"start_s": t, "phase": ph, "set": cs.label}
                for cs, t, ph in zip(s.sets, s.starts, s.phases, strict=True)
            ],
        }
        for h, s in sorted(r.by_hold_schedule.items())
    }
    out["evaluations"] = r.evaluations
    out["info"] = {k: v for k, v in r.info.items() if k != "wall_s"}
    for row in rows:
        print(row)
    print(json.dumps(out, indent=1, allow_nan=False, default=str))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, allow_nan=False, default=str)


if __name__ == "__main__":
    main()
