"""Benchmark: collective algorithms against their cut bounds, SCCL's DGX-1 and Blink's rings.

Run: ``.venv/bin/python benchmarks/bench_collectives.py [--quick]``. Prints three tables:

1. time / cut bound of every algorithm (ring, tree, halving-doubling, direct, blink, synthesize)
   for all-gather and all-reduce of 1 GB on random 3-regular graphs of 8 servers (100 Gbps), one
   row per seed, with the synthesis method picked and the seconds it took;
2. the SCCL Pareto frontier of all-gather on the DGX-1 (one round per step, and with up to 4
   extra rounds), and the flow-model time of its bandwidth-optimal point against the bound;
3. Blink against rings on DGX-1 allocations: the rank-order ring, the best of every ring order,
   the best ring run both ways (two channels) and the tree packing, broadcast and all-reduce of
   100 MB.
"""

from __future__ import annotations

import argparse
import itertools
import time

import networkx as nx

from solvers.collectives.bounds import cut_bound
from solvers.collectives.overlay import overlay, server_links
from solvers.collectives.rings import best_ring
from solvers.collectives.run import ALGORITHMS, run_collective
from solvers.collectives.schedule import time_schedule
from solvers.collectives.synthesis import sccl_pareto, sccl_schedule
from solvers.collectives.topologies import DGX1_NVLINKS, dgx1
from topoopt.fabrics import expander

S = 1e9


def regular_table(seeds) -> None:
    print("1. time / cut bound, 1 GB, random 3-regular graphs of 8 servers, 100 Gbps links")
    head = " ".join(f"{a[:9]:>9}" for a in ALGORITHMS)
    print(
        f"{'seed':>4} {'collective':>10} {head} {'synth method':>12} {'synth s':>7}"
        "  candidates (time / bound)"
    )
    for seed in seeds:
        f = expander(8, 3, seed, 12.5e9)
        for coll in ("all-gather", "all-reduce"):
            cells, method, secs, cands = [], "", 0.0, ""
            for alg in ALGORITHMS:
                t0 = time.perf_counter()
                r = run_collective(f, coll, S, alg)
                if alg == "synthesize":
                    method, secs = r.schedule.info["method"], time.perf_counter() - t0
                    cands = ", ".join(
                        f"{c['method']} {c['time_s'] / r.lower_bound_s:.4f}"
                        for c in r.schedule.info["candidates"]
                    )
                cells.append(f"{r.time_s / r.lower_bound_s:9.4f}")
            print(f"{seed:>4} {coll:>10} {' '.join(cells)} {method:>12} {secs:7.2f}  {cands}")


def dgx1_table() -> None:
    print("\n2. SCCL all-gather Pareto frontier on the DGX-1 (steps K, chunks C, rounds R)")
    sl = server_links(dgx1())
    f = dgx1()
    bound = cut_bound(f, "all-gather", S).seconds
    for slack, max_steps in ((0, 8), (4, 3)):
        t0 = time.perf_counter()
        pts = sccl_pareto(sl, "all-gather", max_chunks=6, max_steps=max_steps, slack=slack)
        secs = time.perf_counter() - t0
        for p in pts:
            t, _ = time_schedule(sccl_schedule(sl, "all-gather", S, p), f)
            print(
                f"  slack {slack}: K={p.steps} C={p.chunks} R={p.rounds}"
                f" R/C={p.rounds / p.chunks:.4f} rounds/step {list(p.step_rounds)}"
                f"  time/bound {t / bound:.4f}"
            )
        print(f"  (slack {slack}: {secs:.1f} s, steps up to {max_steps})")


def allocations(k: int):
    for gpus in itertools.combinations(range(8), k):
        g = nx.Graph((i, j) for i in gpus for j in gpus if i < j and DGX1_NVLINKS[i, j])
        if g.number_of_nodes() == k and nx.is_connected(g):
            yield list(gpus)


def blink_table(sizes) -> None:
    print("\n3. Blink vs rings on DGX-1 allocations, 100 MB (ms; speed-up of blink over best ring)")
    print(
        f"{'gpus':>20} {'collective':>10} {'ring':>8} {'best ring':>9} {'best 2-way':>10} "
        f"{'blink':>8} {'bound':>8} {'speed-up':>8}"
    )
    size = 1e8
    for k in sizes:
        seen = set()
        for gpus in allocations(k):
            f = dgx1(gpus)
            sl = server_links(f)
            arcs = zip(sl.src.tolist(), sl.dst.tolist(), sl.count.tolist(), strict=True)
            key = tuple(sorted(arcs))
            if key in seen:  # the same renumbered graph as an allocation already shown
                continue
            seen.add(key)
            ov = overlay(f)
            for coll in ("broadcast", "all-reduce"):
                ring = run_collective(f, coll, size, "ring").time_s
                br = best_ring(ov, coll, size).seconds
                two = (
                    best_ring(ov, coll, size, both_directions=True).seconds
                    if coll != "broadcast"
                    else float("nan")
                )
                b = run_collective(f, coll, size, "blink")
                best = min(br, two) if coll != "broadcast" else br
                print(
                    f"{','.join(map(str, gpus)):>20} {coll:>10} {ring * 1e3:8.3f} {br * 1e3:9.3f} "
                    f"{two * 1e3:10.3f} {b.time_s * 1e3:8.3f} {b.lower_bound_s * 1e3:8.3f} "
                    f"{best / b.time_s:8.2f}"
                )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    regular_table(range(3) if a.quick else range(10))
    dgx1_table()
    blink_table((4, 8) if a.quick else (3, 4, 5, 6, 7, 8))


if __name__ == "__main__":
    main()
