"""Per-phase routing on `joint`'s circuits (the bubble lever of issue 26 item 4) at advise's scale.

Builds the `joint` row's design as ``topoopt advise JOB --gpus N --gpu h100-sxm --degree 8
--link-gbps 400 --time-limit T`` does (:func:`topoopt.app.studies.compare.build_fabric`; with
``--time-limit 600`` the search ends on its deterministic work limit, not on the clock: the
line ``search:`` says so, or prints the search's warning), then routes it per phase on the same
circuits (:func:`solvers.joint.phase_routing.phase_routing`) and prints the static and per-phase
iterations, the phases and the CPU seconds. With ``--clos S`` (the fastest row's iteration of
the advise table) it prints the gap to it against advise's 2 % "equal iteration". Run it under
``/usr/bin/time -v`` for the peak memory::

    nice -n 19 /usr/bin/time -v python benchmarks/bench_phase_routing.py mixtral-8x7b \\
        --gpus 4096 --clos 3.8363 --time-limit 600
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> None:
    from solvers import search_warning
    from solvers.joint.phase_routing import phase_routing
    from topoopt.app.studies.advise import load_jobs, scale_plan
    from topoopt.app.studies.compare import build_fabric
    from traffic.build import workload_from_plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", help="a plan name or file")
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--clos", type=float, help="the fastest advise row's iteration, seconds")
    ap.add_argument("--min-fraction", type=float, default=0.02)
    ap.add_argument(
        "--max-buckets",
        type=int,
        help="gradient buckets per channel at most (a coarsening, flagged; default: exact)",
    )
    ap.add_argument(
        "--time-limit",
        type=float,
        default=30.0,
        help="the design search's wall-clock cap, seconds (advise's default: 30)",
    )
    ap.add_argument(
        "--symmetric", action=argparse.BooleanOptionalAction, default=True,
        help="average the per-phase routes over the design's automorphisms (the default)",
    )  # fmt: skip
    a = ap.parse_args(argv)
    plan = scale_plan(load_jobs(a.job)[0].plan, a.gpus, "h100-sxm")
    wl = workload_from_plan(plan)
    c0 = time.process_time()
    run = build_fabric("joint", wl, 8, 400e9 / 8, seed=0, time_limit_s=a.time_limit)
    print(f"design: {time.process_time() - c0:.1f} s CPU", flush=True)
    info = run.design.info or {}
    print(
        f"search: {search_warning(run.design) or 'no warning'}; stopped by "
        f"{info.get('stopped_by')!r}, deterministic {info.get('deterministic')!r}",
        flush=True,
    )
    c1 = time.process_time()
    say = lambda m: print(m, flush=True)  # noqa: E731
    r = phase_routing(run.workload, run.design, run.fabric, min_fraction=a.min_fraction,
                      max_buckets=a.max_buckets, progress=say, symmetric=a.symmetric)  # fmt: skip
    cpu = time.process_time() - c1
    print(f"{a.job} at {a.gpus} GPUs: static {r.static_iteration_s!r} s, every phase routed "
          f"{r.all_routed_s!r} s, chosen {r.iteration_s!r} s "
          f"({''.join('R' if x else 'S' for x in r.choice)}), "
          f"{100 * (1 - r.iteration_s / r.static_iteration_s):.3f} % faster; "
          f"{r.evaluations} routings simulated; {cpu:.1f} s CPU")  # fmt: skip
    print("phases: " + "; ".join(f"{p.name} [{p.start_s:.4f}, {p.end_s:.4f}) s" for p in r.phases))
    if a.clos:
        for name, t in (("static", r.static_iteration_s), ("per phase", r.iteration_s)):
            gap = 100 * (t / a.clos - 1)
            print(f"{name}: {gap:+.2f} % against {a.clos} s "
                  f"({'inside' if gap <= 2.0 else 'outside'} advise's 2 %)")  # fmt: skip


if __name__ == "__main__":
    main()
