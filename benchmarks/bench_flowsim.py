"""Benchmark: topoopt's max-min flow simulator against SimGrid on the same flow sets.

Random traffic (uniform random source/destination pairs) on:

- a k=8 fat-tree (128 hosts, 12.5 GB/s links, ECMP: a random aggregation and core switch per flow),
- a 1,024-server degree-8 direct-connect graph (random regular, seeded; one BFS shortest path),
- a k=16 fat-tree (1,024 hosts) with 100,000 flows (ours only: SimGrid needs many minutes there).

Flow sizes: ``equal`` (every flow 100 MB: flows with equal rates end together, so events are
batched) or ``random`` (1..1000 MB uniform, whole MB: about one completion event per flow). Starts:
``0`` (all flows at once) or staggered uniformly over ``[0, T]`` seconds (one arrival event per
flow). SimGrid runs as a separate process (``/usr/bin/python3 tests/peers/simgrid_peer.py``); the
table prints both wall times (ours: simulation only, compiled kernels already loaded; SimGrid:
platform build + run, inside the peer), their ratio and the largest relative difference of
finish times; ``re-fills`` is the number of sub-flow rates the simulator recomputed over all
events (its work; an upper bound on the rate changes, which every exact event-driven max-min
simulator must make). At the end: the one-off time to load (or compile) the numba kernels, and
the peak memory (max RSS) of this process and of the SimGrid processes.

Usage::

    .venv/bin/python benchmarks/bench_flowsim.py            # full table (~12 min on 2 cores)
    .venv/bin/python benchmarks/bench_flowsim.py --quick    # small rows (~1 min)
    .venv/bin/python benchmarks/bench_flowsim.py --no-simgrid
    .venv/bin/python benchmarks/bench_flowsim.py --rows "fat-tree k=16:100000:random:0"
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topoopt.flowsim import FlowSet, simulate  # noqa: E402

PEER = ROOT / "tests" / "peers" / "simgrid_peer.py"
LINK_BPS = 12.5e9


def fat_tree_paths(k: int, src: np.ndarray, dst: np.ndarray, rng: np.random.Generator):
    """Directed-link paths on a k-ary fat-tree, vectorised. Link ids: host up, host down,
    edge->agg, agg->edge, agg->core, core->agg blocks. Returns (n_links, path_ptr, path_links)."""
    h2, n_hosts, n_edge = k // 2, k**3 // 4, k * k // 2
    base_eu = 2 * n_hosts
    base_ed = base_eu + n_edge * h2
    base_cu = base_ed + n_edge * h2
    base_cd = base_cu + n_edge * h2
    n_links = base_cd + n_edge * h2
    n = src.shape[0]
    es, ed = src // h2, dst // h2
    ps, pd = src // (h2 * h2), dst // (h2 * h2)
    a = rng.integers(0, h2, n)  # aggregation switch (same index in both pods)
    j = rng.integers(0, h2, n)  # core switch among those of that aggregation index
    hops = np.stack(
        [
            src,
            base_eu + es * h2 + a,
            base_cu + (ps * h2 + a) * h2 + j,
            base_cd + (pd * h2 + a) * h2 + j,
            base_ed + ed * h2 + a,
            n_hosts + dst,
        ],
        axis=1,
    )
    use = np.ones((n, 6), bool)
    same_edge = es == ed
    use[(ps == pd) & ~same_edge, 2:4] = False
    use[same_edge, 1:5] = False
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(use.sum(1), out=ptr[1:])
    return n_links, ptr, hops[use]


def direct_connect_paths(n_nodes: int, degree: int, src, dst, seed: int):
    """One BFS shortest path per flow on a random regular graph (server = node)."""
    import networkx as nx

    g = nx.random_regular_graph(degree, n_nodes, seed=seed)
    arcs = np.array(sorted((u, v) for a, b in g.edges for u, v in ((a, b), (b, a))))
    link_id = sp.csr_matrix(
        (np.arange(len(arcs)) + 1, (arcs[:, 0], arcs[:, 1])), shape=(n_nodes, n_nodes)
    )
    adj = sp.csr_matrix((np.ones(len(arcs)), (arcs[:, 0], arcs[:, 1])), shape=(n_nodes,) * 2)
    sources = np.unique(src)
    _, pred = shortest_path(adj, unweighted=True, indices=sources, return_predecessors=True)
    row = np.searchsorted(sources, src)
    # Walk back from dst to src for all flows at once.
    hops = []
    cur = dst.copy()
    alive = cur != src
    while alive.any():
        prev = pred[row, cur]
        step = np.where(alive, np.asarray(link_id[prev.clip(0), cur]).ravel() - 1, -1)
        hops.append(step)
        cur = np.where(alive, prev, cur)
        alive = cur != src
    m = np.stack(hops[::-1], axis=1) if hops else np.zeros((len(src), 0), np.int64)
    m = np.sort(np.where(m < 0, np.iinfo(np.int64).max, m), axis=1)  # order irrelevant to sharing
    use = m != np.iinfo(np.int64).max
    ptr = np.zeros(len(src) + 1, np.int64)
    np.cumsum(use.sum(1), out=ptr[1:])
    return len(arcs), ptr, m[use]


def flow_set(fabric: str, n_flows: int, sizes: str, seed: int = 0, stagger: float = 0.0) -> FlowSet:
    """Random flows on ``fabric`` ("fat-tree k=K" or "direct 1024 d=8"); sizes "equal" or
    "random"; starts uniform over ``[0, stagger]`` seconds (all 0 if ``stagger`` is 0)."""
    rng = np.random.default_rng(seed)
    if fabric.startswith("fat-tree"):
        k = int(fabric.split("k=")[1])
        n_hosts = k**3 // 4
        src = rng.integers(0, n_hosts, n_flows)
        dst = (src + rng.integers(1, n_hosts, n_flows)) % n_hosts
        n_links, ptr, links = fat_tree_paths(k, src, dst, rng)
    else:
        n_hosts = 1024
        src = rng.integers(0, n_hosts, n_flows)
        dst = (src + rng.integers(1, n_hosts, n_flows)) % n_hosts
        n_links, ptr, links = direct_connect_paths(n_hosts, 8, src, dst, seed)
    size = np.full(n_flows, 1e8) if sizes == "equal" else rng.integers(1, 1001, n_flows) * 1e6
    start = rng.uniform(0.0, stagger, n_flows) if stagger > 0 else np.zeros(n_flows)
    return FlowSet(
        capacity=np.full(n_links, LINK_BPS),
        latency=np.zeros(n_links),
        size=size,
        start=start,
        flow_ptr=np.arange(n_flows + 1),
        path_ptr=ptr,
        path_links=links,
        weight=np.ones(n_flows),
    )


def netsim_doc(fs: FlowSet) -> dict:
    links = fs.path_links.tolist()
    ptr = fs.path_ptr.tolist()
    return {
        "links": [{"id": i, "capacity": c, "latency": 0.0} for i, c in enumerate(fs.capacity)],
        "flows": [
            {
                "id": f,
                "bytes": float(fs.size[f]),
                "start": float(fs.start[f]),
                "paths": [{"links": links[ptr[f] : ptr[f + 1]], "weight": 1.0}],
            }
            for f in range(fs.n_flows)
        ],
    }


def run_simgrid(fs: FlowSet) -> tuple[float, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        case, out = Path(tmp) / "case.json", Path(tmp) / "out.json"
        case.write_text(json.dumps(netsim_doc(fs), allow_nan=False))
        subprocess.run(
            ["/usr/bin/python3", str(PEER), str(case), str(out)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        res = json.loads(out.read_text())
    return res["wall_s"], np.array([f["finish"] for f in res["flows"]])


FULL_ROWS = [
    # fabric, flows, sizes, stagger (s), with SimGrid
    ("fat-tree k=8", 1_000, "equal", 0.0, True),
    ("fat-tree k=8", 1_000, "random", 0.0, True),
    ("fat-tree k=8", 1_000, "random", 0.5, True),
    ("direct 1024 d=8", 1_000, "random", 0.0, True),
    ("fat-tree k=8", 10_000, "equal", 0.0, True),
    ("fat-tree k=8", 10_000, "random", 0.0, True),
    ("fat-tree k=8", 10_000, "random", 2.0, True),
    ("direct 1024 d=8", 10_000, "equal", 0.0, True),
    ("direct 1024 d=8", 10_000, "random", 0.0, False),
    ("fat-tree k=16", 100_000, "equal", 0.0, False),
    ("fat-tree k=16", 100_000, "equal", 2.0, False),
    ("fat-tree k=16", 10_000, "random", 0.0, False),
    ("fat-tree k=16", 100_000, "random", 0.0, False),  # the 100,000-flow row (~1 min)
]
QUICK_ROWS = [r for r in FULL_ROWS if r[1] == 1_000] + [
    ("fat-tree k=8", 10_000, "equal", 0.0, True)
]


def parse_row(text: str) -> tuple[str, int, str, float, bool]:
    """``"fabric:flows:sizes:stagger[:simgrid]"``, e.g. ``"fat-tree k=8:10000:random:0:sg"``."""
    parts = text.split(":")
    return parts[0], int(parts[1]), parts[2], float(parts[3]), parts[4:] == ["sg"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small rows only")
    ap.add_argument("--no-simgrid", action="store_true", help="skip the SimGrid runs")
    ap.add_argument("--rows", nargs="*", help='custom rows "fabric:flows:sizes:stagger[:sg]"')
    args = ap.parse_args(argv)
    rows = QUICK_ROWS if args.quick else FULL_ROWS
    if args.rows:
        rows = [parse_row(r) for r in args.rows]
    t0 = time.perf_counter()
    simulate(flow_set("fat-tree k=4", 20, "random", stagger=0.1))  # load / compile the kernels
    warm = time.perf_counter() - t0
    head = (
        f"{'fabric':<16} {'flows':>7} {'sizes':>6} {'starts':>7} {'events':>7} {'re-fills':>9} "
        f"{'ours s':>8} {'simgrid s':>9} {'ratio':>7} {'max rel diff':>12}"
    )
    print(head)
    print("-" * len(head))
    for fabric, n, sizes, stagger, with_sg in rows:
        fs = flow_set(fabric, n, sizes, stagger=stagger)
        t0 = time.perf_counter()
        res = simulate(fs, record_series=False)
        ours = time.perf_counter() - t0
        sg_s, ratio, diff = "-", "-", "-"
        if with_sg and not args.no_simgrid:
            wall, finish = run_simgrid(fs)
            sg_s = f"{wall:.2f}"
            ratio = f"{wall / ours:.1f}x"
            diff = f"{np.max(np.abs(finish - res.finish) / finish):.1e}"
        starts = "0" if stagger == 0 else f"U0-{stagger:g}"
        print(
            f"{fabric:<16} {n:>7} {sizes:>6} {starts:>7} {res.n_events:>7} {res.refills:>9.2e} "
            f"{ours:>8.2f} {sg_s:>9} {ratio:>7} {diff:>12}",
            flush=True,
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    peak_sg = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    print(f"kernel load/compile (once per process): {warm:.2f} s")
    print(f"peak memory (max RSS): this process {peak:.2f} GB, SimGrid peer {peak_sg:.2f} GB")


if __name__ == "__main__":
    main()
