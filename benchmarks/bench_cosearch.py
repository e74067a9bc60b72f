"""Benchmark the co-search's evaluations on the engine: 1 worker (in-process) against ``K`` Ray
workers on the same evaluations (prints a table; asserts nothing).

The evaluations are the first ``N`` candidates of the plan space in increasing compute bound
(what the refinement's first level evaluates), each simulated on the ``--fabric`` (default
``topoopt``: TopoOpt's one-shot design, then the flow model). Both runs must give identical
records (but for wall times); the table gives the wall time of each (after one warm-up evaluation
per worker: imports and numba kernels; the start-up column includes it), evaluations per minute,
the CPU seconds the evaluations took in their worker processes, the largest resident set of a
worker, the load average before and after (the machine may be shared: wall-clock speed-ups are
only meaningful on an otherwise idle machine) and the speed-up. The evaluations are screening
ones (:data:`topoopt.app.studies.cosearch.evaluate.SCREEN_MAX_BUCKETS`), with their flow counts. The
issue's targets: 40 evaluations in under 10 minutes on 2 cores, and at least 1.6x from 1 to 2
workers.

Usage::

    .venv/bin/python benchmarks/bench_cosearch.py                  # gpt3-175b, 16 x 8 GPUs, N=40
    .venv/bin/python benchmarks/bench_cosearch.py --model dlrm --evaluations 16
"""

from __future__ import annotations

import argparse
import os
import resource
import time

from topoopt.app.cli.commands.cosearch import setup
from topoopt.app.studies.cosearch.evaluate import EvalTask, compute_bound, evaluate
from topoopt.app.studies.cosearch.space import plan_space
from topoopt.app.studies.engine import Engine
from topoopt.units import gbps_to_bytes_per_s


def _warm(task):
    """One evaluation per worker before timing (imports and JIT-compiled kernels), held a
    second so that each worker takes one."""
    evaluate(task)
    time.sleep(1.0)


def _timed(task):
    """One evaluation, with the CPU seconds it took and its worker's peak RSS (bytes)."""
    c0 = time.process_time()
    rec = evaluate(task)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return rec, time.process_time() - c0, rss, os.getpid()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt3-175b")
    ap.add_argument("--servers", type=int, default=16)
    ap.add_argument("--gpus-per-server", type=int, default=8)
    ap.add_argument("--gpu-memory-gb", type=float, default=80.0)
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--link-gbps", type=float, default=100.0)
    ap.add_argument("--fabric", default="topoopt")
    ap.add_argument("--evaluations", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    base, _ = setup(args.model, args.servers, args.gpus_per_server)
    t0 = time.perf_counter()
    space = plan_space(base, args.gpu_memory_gb * 1e9)
    order = sorted(
        range(len(space)), key=lambda k: (compute_bound(space.plans[k]), space.candidates[k].key)
    )
    print(f"space: {len(space)} plans ({time.perf_counter() - t0:.1f} s to enumerate)")
    bw = gbps_to_bytes_per_s(args.link_gbps)
    tasks = [
        EvalTask(i, space.base, space.candidates[k], args.fabric, args.degree, bw, screening=True)
        for i, k in enumerate(order[: args.evaluations])
    ]
    rows = []
    records = {}
    for workers in (1, args.workers):
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        with Engine(workers, progress=True) as eng:
            eng.map(_warm, [tasks[0]] * workers, label="warm-up")  # imports, numba kernels
            t1 = time.perf_counter()
            outs = eng.map(_timed, tasks, label=f"{workers} worker(s)")
            t2 = time.perf_counter()
        recs = [o[0] for o in outs]
        cpu = sum(o[1] for o in outs)
        rss, busy = {}, {}
        for o in outs:
            rss[o[3]] = max(rss.get(o[3], 0), o[2])
            busy[o[3]] = busy.get(o[3], 0.0) + o[1]
        records[workers] = [
            {k: v for k, v in r.items() if k not in ("wall_s", "design_object")} for r in recs
        ]
        load1 = os.getloadavg()[0]
        rows.append((workers, eng.backend, t1 - t0, t2 - t1, cpu, max(rss.values()), load0, load1))
        shares = ", ".join(f"{v:.1f}" for v in sorted(busy.values(), reverse=True))
        print(f"{workers} worker(s): CPU s per worker process {shares}")
        balance = cpu / max(busy.values())
        if workers == 1:
            print("  #  flows      coarsened  skipped  iteration s  plan")
            for r in recs:
                print(
                    f"{r['index']:>3} {r['flows'] or 0:>10,} {r['coarsened']!s:>10} "
                    f"{bool(r['skipped'])!s:>8} {r['iteration_s']:>12.3f}  {r['label']}"
                )
    same = records[1] == records[args.workers]
    print(f"\n{len(tasks)} evaluations of {args.model} on {args.fabric}, identical records: {same}")
    head = ("workers", "backend", "start s", "wall s", "cpu s", "cpu/eval", "eval/min", "rss MB")
    print(" ".join(f"{h:>9}" for h in head), "  load (1 min) before/after")
    for w, b, start, wall, cpu, rss, l0, l1 in rows:
        per_min = 60 * len(tasks) / wall
        vals = (w, b, f"{start:.1f}", f"{wall:.1f}", f"{cpu:.1f}", f"{cpu / len(tasks):.2f}")
        vals += (f"{per_min:.1f}", f"{rss / 1e6:.0f}")
        print(" ".join(f"{v:>9}" for v in vals), f"  {l0:.2f} / {l1:.2f}")
    print(
        f"speed-up {rows[0][3] / rows[1][3]:.2f}x (wall, start-up excluded); "
        f"{rows[0][3] / (rows[1][3] + rows[1][2]):.2f}x with Ray's start-up; "
        f"{balance:.2f}x on idle cores (the evaluations' CPU seconds over the busiest worker's)"
    )


if __name__ == "__main__":
    main()
