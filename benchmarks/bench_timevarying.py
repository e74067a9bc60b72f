"""Benchmark: the time-varying engine (:func:`topoopt.flowsim.timevarying.simulate_epochs`).

Random flows on a fat-tree (the generator of ``bench_flowsim.py``: uniform random pairs, a
random ECMP path per flow, 12.5 GB/s links, sizes 1..1000 MB, starts uniform over ``[0, T]``).
Per row it prints the CPU time of :func:`topoopt.flowsim.simulate` and of ``simulate_epochs``
in four settings, with the events and re-fills of the latter:

- ``plain``: no epochs, one class, unit weights (and the largest relative difference of finish
  times from ``simulate``);
- ``epochs``: 8 capacity epochs (every link at 50..100 % of its capacity, 5 % of links off);
- ``reroute``: 4 epochs that each re-draw every flow's ECMP path (remaining bytes re-split);
- ``classes``: 3 strict priority classes and weights 1..4.

Usage::

    .venv/bin/python benchmarks/bench_timevarying.py            # 10^4 and 10^5 flows
    .venv/bin/python benchmarks/bench_timevarying.py --quick    # 10^4 flows only

The 10^4-flow rows keep up to 10^4 flows in flight (all start at once, or within 2 s); the
10^5-flow rows on a k=16 fat-tree arrive over 400 s or 100 s (a few hundred to a few thousand
in flight). Every event costs linear passes over the active pieces, so the engine's time grows
with the flows in flight, unlike ``simulate``'s (groups of equal-rate sub-flows).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_flowsim import fat_tree_paths, flow_set  # noqa: E402

from topoopt.flowsim import simulate  # noqa: E402
from topoopt.flowsim.timevarying import Epoch, EpochPaths, simulate_epochs  # noqa: E402


def reroute_epochs(fs, k: int, n: int, horizon: float, seed: int) -> list[Epoch]:
    """``n`` epochs that each draw a new random ECMP path for every flow (same src/dst)."""
    rng = np.random.default_rng(seed)
    h2, n_hosts = k // 2, k**3 // 4
    src = fs.path_links[fs.path_ptr[:-1]]  # first hop: the source's up-link = its host id
    dst = fs.path_links[fs.path_ptr[1:] - 1] - n_hosts  # last hop: the destination's down-link
    assert (src < n_hosts).all() and (dst >= 0).all() and h2 > 0
    out = []
    for i in range(n):
        _, ptr, links = fat_tree_paths(k, src, dst, rng)
        paths = EpochPaths(np.arange(fs.n_flows + 1), ptr, links, np.ones(fs.n_flows))
        out.append(Epoch(horizon * (i + 1) / (n + 1), fs.capacity, paths))
    return out


def capacity_epochs(fs, n: int, horizon: float, seed: int) -> list[Epoch]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        cap = fs.capacity * rng.uniform(0.5, 1.0, fs.n_links)
        cap[rng.random(fs.n_links) < 0.05] = 0.0
        out.append(Epoch(horizon * (i + 1) / (n + 1), cap))
    out.append(Epoch(horizon, fs.capacity))
    return out


def timed(fn):
    """CPU seconds of ``fn()`` (the engines are single-threaded; on a shared machine the CPU
    time is the comparable figure) and its result."""
    t0 = time.process_time()
    res = fn()
    return time.process_time() - t0, res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rows = [("fat-tree k=8", 8, 10_000, 0.0), ("fat-tree k=8", 8, 10_000, 2.0)]
    if not args.quick:
        rows += [("fat-tree k=16", 16, 100_000, 400.0), ("fat-tree k=16", 16, 100_000, 100.0)]
    tiny = flow_set("fat-tree k=4", 20, "random", seed=1)
    t_load, _ = timed(lambda: simulate_epochs(tiny, priority=np.arange(20) % 2))
    print(f"numba kernels loaded/compiled in {t_load:.2f} s")
    head = (
        f"{'fabric':14} {'flows':>7} {'T s':>5} {'simulate s':>10} {'plain s':>8} {'max rel':>8} "
        f"{'epochs s':>8} {'reroute s':>9} {'classes s':>9} {'events':>7} {'re-fills':>11}"
    )
    print(head)
    for name, k, n, stagger in rows:
        fs = flow_set(name, n, "random", seed=3, stagger=stagger)
        t_sim, ref = timed(lambda fs=fs: simulate(fs, record_series=False))
        t_plain, plain = timed(lambda fs=fs: simulate_epochs(fs, record_series=False))
        rel = float(np.max(np.abs(plain.finish - ref.finish) / ref.finish))
        horizon = 0.5 * ref.makespan
        caps = capacity_epochs(fs, 8, horizon, seed=4)
        t_ep, _ = timed(lambda fs=fs, e=caps: simulate_epochs(fs, e, record_series=False))
        moves = reroute_epochs(fs, k, 4, horizon, seed=5)
        t_rr, _ = timed(lambda fs=fs, e=moves: simulate_epochs(fs, e, record_series=False))
        rng = np.random.default_rng(6)
        prio, w = rng.integers(0, 3, n), rng.integers(1, 5, n).astype(float)
        t_cl, cl = timed(
            lambda fs=fs, p=prio, w=w: simulate_epochs(
                fs, priority=p, weight=w, record_series=False
            )
        )
        print(
            f"{name:14} {n:>7} {stagger:>5.0f} {t_sim:>10.2f} {t_plain:>8.2f} {rel:>8.1e} "
            f"{t_ep:>8.2f} {t_rr:>9.2f} {t_cl:>9.2f} {plain.n_events:>7} {plain.refills:>11,}",
            flush=True,
        )


if __name__ == "__main__":
    main()
