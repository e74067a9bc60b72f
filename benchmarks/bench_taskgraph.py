"""Benchmark the TopoOpt task-graph importer on the seven shared files.

Prints, per file: parse time (bytes -> RawTaskGraph), build time (RawTaskGraph -> Workload),
peak traced memory of one full ``read_taskgraph`` (tracemalloc; numpy buffers included), and the
traffic totals of the imported Workload. Timings are the best of ``--repeat`` runs.

Run: ``.venv/bin/python benchmarks/bench_taskgraph.py [--repeat 5] [DIR]``
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc
from pathlib import Path

from traffic.taskgraph import build_workload, parse_taskgraph, read_taskgraph

__all__ = ["main"]

DEFAULT_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "topoopt-taskgraphs"


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(DEFAULT_DIR))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    files = sorted(Path(args.folder).glob("*.fbuf"))
    if not files:
        raise SystemExit(f"no .fbuf files in {args.folder}")

    print("timing and memory")
    print(
        f"{'file':24s} {'MB':>6s} {'tasks':>7s} {'parse ms':>9s} {'build ms':>9s} {'peak MB':>8s}"
    )
    totals = []
    for f in files:
        data = f.read_bytes()
        t_parse, raw = _best(
            lambda data=data, f=f: parse_taskgraph(data, source=str(f)), args.repeat
        )
        t_build, w = _best(lambda raw=raw, f=f: build_workload(raw, name=f.name), args.repeat)
        tracemalloc.start()
        read_taskgraph(f)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"{f.name:24s} {len(data) / 1e6:6.2f} {raw.n_tasks:7d} {t_parse * 1e3:9.1f} "
            f"{t_build * 1e3:9.1f} {peak / 1e6:8.1f}"
        )
        totals.append((f.name, w))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process max RSS: {rss:.0f} MB\n")

    print("traffic totals (bytes per iteration; wire = S per send, 2(g-1)S per all-reduce)")
    head = (
        f"{'file':24s} {'servers':>7s} {'xfers':>6s} {'xfer bytes':>14s} {'pairs':>6s} "
        f"{'AR':>4s} {'AR g=1':>6s} {'AR sum S':>14s} {'wire mp':>14s} {'wire dp':>15s}"
    )
    print(head)
    for name, w in totals:
        i = w.info
        ar_s = sum(int(d.size) * d.n_groups for d in w.demands if d.op == "all-reduce")
        by = w.bytes_by_class()
        print(
            f"{name:24s} {w.servers:7d} {i['transfer_tasks']:6d} {i['transfer_bytes']:14d} "
            f"{i['transfer_pairs']:6d} {i['allreduce_tasks']:4d} "
            f"{i['allreduce_dropped_single_server']:6d} {ar_s:14d} {int(by.get('mp', 0)):14d} "
            f"{int(by.get('dp', 0)):15d}"
        )
    print("\nall-reduce groups by size (tasks x servers: sum of S)")
    for name, w in totals:
        sizes: dict[int, list[int]] = {}
        for d in w.demands:
            if d.op == "all-reduce":
                acc = sizes.setdefault(d.group_size, [0, 0])
                acc[0] += d.n_groups
                acc[1] += int(d.size) * d.n_groups
        shown = ", ".join(f"{n} x {g}: {s}" for g, (n, s) in sorted(sizes.items()))
        print(f"{name:24s} {shown}")


if __name__ == "__main__":
    main()
