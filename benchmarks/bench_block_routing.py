"""What block routing does to one block construction (prints a table; issue 14's CANDLE cases).

For a TopoOpt task graph, a port count and one block construction
(:func:`solvers.joint.block_candidates.block_constructions`, chosen by a substring of its name),
the construction is routed by the routing LP on the phases and simulated with the flow model
(class priorities as given, mp first by default) under each block routing: the LP's rings, the
rings balanced across the blocks' positions (:func:`~solvers.joint.block_candidates.
balanced_block_rings`), with a share of the pairs across detoured through block mates
(:func:`~solvers.joint.block_candidates.block_detours`) and with every pair's bytes spread on
its two-hop paths (:func:`~solvers.joint.iteration_objective.spread_routing`). Each row gives
the iteration, the compute's end, the data-parallel traffic alone (MP sends shrunk to one byte)
and the MP sends alone (all-reduces shrunk to one byte), in ms and over the ideal switch.

Usage::

    .venv/bin/python benchmarks/bench_block_routing.py
    .venv/bin/python benchmarks/bench_block_routing.py --case 100candle_32 --block "4x8: ring x3"
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solvers.joint.block_candidates import (  # noqa: E402
    balanced_block_rings,
    block_constructions,
    block_detours,
)
from solvers.joint.driver import route_design, to_design  # noqa: E402
from solvers.joint.iteration_objective import spread_routing  # noqa: E402
from solvers.model.problem import DesignProblem  # noqa: E402
from solvers.realise import simulate_design  # noqa: E402
from topoopt.fabrics import ideal  # noqa: E402
from topoopt.flowsim.iteration import simulate_iteration  # noqa: E402
from traffic.load import load_workload  # noqa: E402

LINK_BANDWIDTH = 100e9 / 8  # 100 Gbps in bytes/s


def shrunk(w, kind: str):
    """``w`` with every task of ``kind`` (``"transfer"`` or ``"all-reduce"``) at one byte."""
    tg = w.taskgraph
    return replace(
        w, taskgraph=replace(tg, size_bytes=np.where(tg.kind == kind, 1.0, tg.size_bytes))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="100candle_16")
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--block", default="complete x2", help="a substring of the construction's name")
    ap.add_argument("--priority", default="mp", help="classes first, comma-separated; '' = fair")
    args = ap.parse_args()
    w = load_workload(str(ROOT / "tests" / "data" / "topoopt-taskgraphs" / f"{args.case}.fbuf"))
    p = DesignProblem.from_workload(w, degree=args.degree, link_bandwidth=LINK_BANDWIDTH)
    prio = tuple(c for c in args.priority.split(",") if c)
    got = [x for x in block_constructions(p) if args.block in x[0]]
    if not got:
        names = ", ".join(nm for nm, _, _ in block_constructions(p)) or "none"
        raise SystemExit(f"error: --block: got {args.block!r}; constructions: {names}")
    name, c, comps = got[0]
    routed, _, _ = route_design(p, c)
    d0 = to_design(p, c, routed, 0.0, "joint", 0.0, {})
    fab = ideal(w.servers, args.degree, LINK_BANDWIDTH, gpus_per_server=w.gpus_per_server)
    ideal_s = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    print(f"{args.case}, {args.degree} ports, {name}, {','.join(prio) or 'fair'} first; "
          f"ideal switch {ideal_s * 1e3:.2f} ms")  # fmt: skip
    dp_alone, mp_alone = shrunk(w, "transfer"), shrunk(w, "all-reduce")
    print(f"{'routing':52s} {'iteration':>17s} {'compute end':>12s} {'DP alone':>9s} "
          f"{'MP alone':>9s}")  # fmt: skip
    balanced = balanced_block_rings(d0, p, comps)
    rows = [("LP rings", d0, 0.0, 0.0), ("balanced rings", balanced, 0.0, 0.0)]
    rows += [("balanced rings, 0.5 detours", balanced, 0.0, 0.5)]
    rows += [(f"balanced rings, {a:g} spread, {det:g} detours", balanced, a, det)
             for a in (0.5, 1.0) for det in (0.0, 0.5)]  # fmt: skip
    for label, base, a, det in rows:
        d = replace(block_detours(spread_routing(base, a), p, det, comps), priority=prio)
        r = simulate_design(w, d, p, exposed_by_class=False)
        tl = r.timeline
        comp_end = float(tl[tl["kind"] == "compute"]["finish_s"].max())
        alone = [
            simulate_design(x, d, replace(p, workload=x), exposed_by_class=False).iteration_s
            for x in (dp_alone, mp_alone)
        ]
        it = f"{r.iteration_s * 1e3:9.2f} ({r.iteration_s / ideal_s:5.3f}x)"
        rest = f"{comp_end * 1e3:12.2f} {alone[0] * 1e3:9.2f} {alone[1] * 1e3:9.2f}"
        print(f"{label:52s} {it} {rest}", flush=True)


if __name__ == "__main__":
    main()
