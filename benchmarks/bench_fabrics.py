"""Build three 1,024-server fabrics and route all server pairs; print seconds and peak memory.

Fabrics: k=16 fat-tree (1,024 hosts), 16x16x4 torus, 1,024-server degree-8 direct-connect
(TopoOpt geometric circulant). Routes: one shortest path per ordered server pair (1,047,552
pairs), ECMP with k=4 paths, and dimension order on the torus. Peak memory is the tracemalloc
peak of each step (numpy allocations are traced).
Run: ``.venv/bin/python benchmarks/bench_fabrics.py``.
"""

from __future__ import annotations

import time
import tracemalloc

from topoopt.fabrics import bisection, diameter, direct_connect, fat_tree, routes, torus


def measure(fn):
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, dt, peak / 2**20


def main() -> None:
    builders = {
        "fat-tree k=16": lambda: fat_tree(16),
        "torus 16x16x4": lambda: torus("16x16x4"),
        "direct n=1024 d=8": lambda: direct_connect(1024, 8),
    }
    rows = []
    for name, build in builders.items():
        fab, t, m = measure(build)
        rows.append((name, "build", fab.n_nodes, fab.n_links, "-", t, m))
        _, t, m = measure(lambda f=fab: (bisection(f), diameter(f)))
        rows.append((name, "bisection+diameter", "", "", "-", t, m))
        methods = [("shortest", {}), ("ecmp k=4", {"k": 4})]
        if fab.family == "torus":
            methods.append(("dimension-order", {}))
        for label, kw in methods:
            method = label.split()[0]
            ps, t, m = measure(lambda f=fab, me=method, kw=kw: routes(f, me, **kw))
            rows.append((name, f"routes {label}", ps.n_commodities, "", ps.n_paths, t, m))
    head = f"{'fabric':<20}{'step':<24}{'nodes/pairs':>12}{'links':>8}{'paths':>10}"
    print(head + f"{'seconds':>10}{'peak MiB':>10}")
    for name, step, a, b, p, t, m in rows:
        print(f"{name:<20}{step:<24}{a!s:>12}{b!s:>8}{p!s:>10}{t:>10.2f}{m:>10.1f}")


if __name__ == "__main__":
    main()
