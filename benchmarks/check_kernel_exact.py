"""Check: this tree's event loop against another checkout's, on seeded random flow sets.

A change to the compiled event loop (:func:`topoopt.flowsim._kernels.simulate_kernel`) must not
change its results. This runs the same flow sets through ``simulate`` of this tree and of a
baseline tree (each in its own process, so both ``topoopt`` packages load their own kernels) and
prints, per case, the largest relative difference of flow finish times, sub-flow last-byte times,
link bytes and the recorded link loads (against the link's capacity; the change logs, without
entries that do not change a link's load by more than 1e-12 of its capacity, must have the same
entries: the kernel logs every link it re-filled, and two kernels may re-fill different sets
of links whose loads stay the same), then the
largest over all cases against ``--tol`` (default ``1e-12``); exit 1 if it is above.

Cases (seeded, :func:`flow_sets`): random flows on k = 4 and k = 8 fat-trees (ECMP paths of
``bench_flowsim.py``) with link capacities mixed over 12.5 / 25 / 50 GB/s, 200 to 10,000 flows,
all at t = 0 or staggered starts, some with random dependencies (a flow after one to three
earlier flows), multiplicities 1 to 4, two paths a flow (weights 0.3 / 0.7), zero-byte flows and
path latencies. Priorities are split into plain flows before the kernel (``flowsim.priorities``),
so they need no case of their own.

Usage::

    .venv/bin/python benchmarks/check_kernel_exact.py --baseline /work/main
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CASES = [
    # (k, flows, seed, stagger s, dependencies, multiplicity, two paths)
    (4, 200, 0, 0.0, False, False, False),
    (4, 200, 1, 0.05, True, True, False),
    (4, 500, 2, 0.02, True, False, True),
    (8, 2000, 3, 0.0, False, False, False),
    (8, 2000, 4, 0.1, False, True, False),
    (8, 2000, 5, 0.05, True, True, True),
    (8, 10000, 6, 0.0, False, False, False),
    (8, 10000, 7, 0.2, True, False, False),
]


def flow_sets(tree: str):
    """Yield ``(name, FlowSet)`` for :data:`CASES` with ``topoopt`` imported from ``tree``."""
    sys.path.insert(0, tree)
    from topoopt.flowsim import FlowSet

    spec = importlib.util.spec_from_file_location(
        "bench_flowsim", ROOT / "benchmarks" / "bench_flowsim.py"
    )
    bf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bf)
    for k, n, seed, stagger, deps, mult, two in CASES:
        rng = np.random.default_rng(100 + seed)
        n_hosts = k**3 // 4
        src = rng.integers(0, n_hosts, n)
        dst = (src + rng.integers(1, n_hosts, n)) % n_hosts
        n_links, ptr1, links1 = bf.fat_tree_paths(k, src, dst, rng)
        cap = rng.choice([12.5e9, 25e9, 50e9], n_links)
        lat = rng.choice([0.0, 1e-6, 5e-6], n_links)
        size = rng.integers(1, 1001, n) * 1e6
        size[rng.random(n) < 0.02] = 0.0
        start = rng.uniform(0.0, stagger, n) if stagger > 0 else np.zeros(n)
        if two:  # a second ECMP draw per flow, weights 0.3 / 0.7
            _, ptr2, links2 = bf.fat_tree_paths(k, src, dst, rng)
            plinks = []
            for f in range(n):
                plinks += [links1[ptr1[f] : ptr1[f + 1]], links2[ptr2[f] : ptr2[f + 1]]]
            flow_ptr = np.arange(0, 2 * n + 1, 2)
            path_ptr = np.concatenate([[0], np.cumsum([len(x) for x in plinks])])
            path_links = np.concatenate(plinks)
            weight = np.tile([0.3, 0.7], n)
        else:
            flow_ptr, path_ptr, path_links, weight = np.arange(n + 1), ptr1, links1, np.ones(n)
        dep_ptr = deps_arr = None
        if deps:
            counts = np.where(np.arange(n) > 0, rng.integers(0, 4, n), 0)
            counts[rng.random(n) < 0.5] = 0
            lists = [rng.choice(f, min(int(c), f), replace=False) for f, c in enumerate(counts)]
            dep_ptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
            deps_arr = np.concatenate(lists).astype(np.int64) if dep_ptr[-1] else np.zeros(0, int)
        multiplicity = rng.integers(1, 5, n) if mult else None
        yield (
            f"k={k} n={n} seed={seed} stagger={stagger} deps={deps} mult={mult} two={two}",
            FlowSet(
                capacity=cap, latency=lat, size=size, start=start, flow_ptr=flow_ptr,
                path_ptr=path_ptr, path_links=path_links, weight=weight, dep_ptr=dep_ptr,
                deps=deps_arr, multiplicity=multiplicity,
            ),
        )  # fmt: skip


def child(tree: str, out: str) -> None:
    """Simulate every case with ``tree``'s ``topoopt``; save the results to ``out`` (npz)."""
    arrays = {}
    for i, (_, fs) in enumerate(flow_sets(tree)):
        from topoopt.flowsim import simulate  # ``tree``'s (first on sys.path)

        res = simulate(fs)
        arrays[f"{i}_finish"] = res.finish
        arrays[f"{i}_last"] = res.path_last_byte
        arrays[f"{i}_bytes"] = res.link_bytes
        arrays[f"{i}_stime"] = res.series_time
        arrays[f"{i}_slink"] = res.series_link
        arrays[f"{i}_sload"] = res.series_load
        arrays[f"{i}_events"] = np.array([res.n_events])
        arrays[f"{i}_cap"] = res.capacity
    np.savez(out, **arrays)


def changes(stime, slink, sload, cap):
    """The load log ``(time, link, load)`` without its entries that leave the link's load
    unchanged (within 1e-12 of its capacity, the kernel's own rule)."""
    last = np.zeros(cap.shape[0])
    keep = np.zeros(stime.shape[0], bool)
    for k in range(stime.shape[0]):
        lk = slink[k]
        if abs(sload[k] - last[lk]) > 1e-12 * cap[lk]:
            keep[k] = True
            last[lk] = sload[k]
    return stime[keep], slink[keep], sload[keep]


def rel(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    scale = np.maximum(np.abs(a), np.abs(b))
    d = np.abs(a - b)
    ok = scale > 0
    return float(np.max(d[ok] / scale[ok])) if ok.any() else 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="the checkout to compare against (required)")
    ap.add_argument("--tol", type=float, default=1e-12)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    if not args.baseline:
        ap.error("--baseline is required")
    names = list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        res = {}
        for tag, tree in (("this", str(ROOT)), ("base", args.baseline)):
            out = str(Path(tmp) / f"{tag}.npz")
            cmd = [sys.executable, __file__, "--child", tree, out]
            subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": tree})
            res[tag] = np.load(out)
        worst = 0.0
        for i, case in enumerate(names):
            a, b = res["this"], res["base"]
            d = {key: rel(a[f"{i}_{key}"], b[f"{i}_{key}"]) for key in ("finish", "last", "bytes")}
            cap = a[f"{i}_cap"]
            ta, la_, va = changes(a[f"{i}_stime"], a[f"{i}_slink"], a[f"{i}_sload"], cap)
            tb, lb_, vb = changes(b[f"{i}_stime"], b[f"{i}_slink"], b[f"{i}_sload"], cap)
            # loads against the link's capacity (a load that should be 0 may be a rounding
            # residue in one tree and exactly 0 in the other)
            if not np.array_equal(la_, lb_):
                d["stime"] = d["sload"] = float("inf")
            else:
                d["stime"] = rel(ta, tb)
                d["sload"] = float(np.max(np.abs(va - vb) / cap[la_])) if la_.size else 0.0
            w = max(d.values())
            worst = max(worst, w)
            label = json.dumps(case, allow_nan=False)
            print(
                f"{label} events {int(a[f'{i}_events'][0])}/{int(b[f'{i}_events'][0])}"
                f" max rel diff {w:.1e} " + " ".join(f"{k} {v:.1e}" for k, v in d.items()),
                flush=True,
            )
        print(f"largest relative difference {worst:.1e} (tolerance {args.tol:.0e})")
        return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
