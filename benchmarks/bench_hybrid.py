"""Benchmark the hybrid optical-layer design (prints a table; asserts nothing).

Workloads: the embedded plans ``dlrm`` (16 servers), ``dlrm-128`` and ``gpt3-175b`` (128
servers). Electrical fabric: a 4:1 oversubscribed leaf-spine (``--leaf-hosts`` servers per leaf,
``ceil(h/4)`` uplinks each), 100 Gbps everywhere. For each optical degree ``d``:

- ``electrical``: the leaf-spine alone;
- ``+circulant``: plus the geometric circulant circuits (what ``hybrid()`` builds by default);
- ``+topoopt``: plus the TopoOpt method's circuits for ``d`` ports;
- ``+hybrid``: plus :func:`solvers.hybrid_design.hybrid_design`'s circuits.

All four are routed with :func:`solvers.hybrid_design.route_hybrid` (one LP-optimised routing
over both layers). Columns: the congestion objective (``obj_ms``), the flow model's
communication time (``flow_ms``, :func:`topoopt.flowsim.collectives.communication_time` with the
design's routing and rings), their ratio, the ratio to ``+hybrid``'s flow time, and for
``+hybrid`` its lower bound and wall time.

Usage::

    .venv/bin/python benchmarks/bench_hybrid.py                       # all, d in {2, 4}, 60 s
    .venv/bin/python benchmarks/bench_hybrid.py --plans dlrm --degrees 2 4 --time-limit 20
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from solvers.hybrid_design import (
    HybridDesign,
    _combined,
    _node_paths,
    _rings_of,
    baseline_circuits,
    hybrid_design,
    route_hybrid,
)
from solvers.model.problem import DesignProblem
from solvers.realise import design_workload
from topoopt.fabrics.fat_tree import leaf_spine
from topoopt.flowsim.collectives import communication_time
from traffic.load import load_workload

BANDWIDTH = 100e9 / 8  # 100 Gbps in bytes/s
LEAF_HOSTS = {16: 4, 128: 16}


def packaged(problem, efab, spec, d, circuits, name) -> tuple[HybridDesign, float]:
    """A baseline's circuits routed by route_hybrid, as a HybridDesign (for the flow model)."""
    t0 = time.perf_counter()
    f = _combined(efab, d, circuits, BANDWIDTH, "ocs") if d else efab
    r = route_hybrid(problem, f)
    n = problem.n
    have = {int(u) * n + int(v) for u, v, _ in circuits.tolist()}
    have |= {int(v) * n + int(u) for u, v, _ in circuits.tolist()}
    des = HybridDesign(n, d, BANDWIDTH, circuits, _rings_of(problem, r.rings, have),
                       _node_paths(r.paths, f.dst), name, "feasible", r.time_s, 0.0, 0.0,
                       time.perf_counter() - t0, electrical=spec)  # fmt: skip
    return des, r.time_s


def flow_time(workload, problem, des: HybridDesign) -> float:
    f = des.fabric()
    w = design_workload(workload, des, problem)
    return communication_time(w, f, routing=des.routing_pathset(f)).total_s


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", nargs="+", default=["dlrm", "dlrm-128", "gpt3-175b"])
    ap.add_argument("--degrees", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--oversubscription", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    head = (
        f"{'plan':<11}{'n':>4}{'d':>3}  {'fabric':<12}{'obj_ms':>11}{'flow_ms':>11}"
        f"{'flow/obj':>9}{'vs_hybrid':>10}{'bound_ms':>10}{'wall_s':>8}"
    )
    print(head)
    print("-" * len(head))
    for plan in args.plans:
        w = load_workload(plan)
        n = w.servers
        h = LEAF_HOSTS.get(n, max(2, n // 8))
        efab = leaf_spine(n, args.oversubscription, leaf_hosts=h, port_bandwidth=BANDWIDTH,
                          gpus_per_server=w.gpus_per_server)  # fmt: skip
        spec = {"family": "leaf-spine", "servers": n, "oversubscription": args.oversubscription,
                "leaf_hosts": h, "port_bandwidth": BANDWIDTH,
                "gpus_per_server": w.gpus_per_server}  # fmt: skip
        for d in args.degrees:
            p = DesignProblem.from_workload(w, degree=d, link_bandwidth=BANDWIDTH)
            rows = []
            des_e, obj_e = packaged(p, efab, spec, 0, _empty(), "electrical")
            rows.append(("electrical", des_e, obj_e))
            for name, c in baseline_circuits(p, d, BANDWIDTH, args.seed).items():
                des_b, obj_b = packaged(p, efab, spec, d, c, name)
                rows.append(("+" + name, des_b, obj_b))
            t0 = time.perf_counter()
            des_h = hybrid_design(p, spec, d, time_limit_s=args.time_limit, seed=args.seed)
            wall = time.perf_counter() - t0
            rows.append(("+hybrid", des_h, des_h.objective_s))
            flows = [flow_time(w, p, des) for _, des, _ in rows]
            fh = flows[-1]
            for (name, des, obj), ft in zip(rows, flows, strict=True):
                last = name == "+hybrid"
                print(
                    f"{plan:<11}{n:>4}{d:>3}  {name:<12}{obj * 1e3:>11.4g}{ft * 1e3:>11.4g}"
                    f"{ft / obj if obj else math.nan:>9.3f}{ft / fh:>10.3f}"
                    f"{des.lower_bound_s * 1e3 if last else math.nan:>10.4g}"
                    f"{wall if last else des.wall_s:>8.1f}"
                )
            sys.stdout.flush()


def _empty():
    import numpy as np

    return np.zeros((0, 3), np.int64)


if __name__ == "__main__":
    main()
