"""Issue 14's CANDLE targets for the joint optimizer with priorities (prints a table; exit 1 on a
miss).

For each TopoOpt task graph and port count, ``solve(..., "joint", objective="iteration",
priorities=True)`` designs the circuits; the shipped design is simulated independently
(:func:`solvers.realise.simulate_design`) and compared with the ideal switch (fair sharing, and
at 8 ports also with the design's priorities): the iteration over the ideal switch must be at
most the target (1.10 at 8 ports, 1.35 at 4 ports, 100 Gbps ports). The 16-server cases run in
the test suite (``tests/solvers/test_block_routing.py``); the 32-server case takes 85-100 s of
CPU here and runs only from this script.

Usage::

    .venv/bin/python benchmarks/candle_targets.py                 # every case
    .venv/bin/python benchmarks/candle_targets.py --case 100candle_32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solvers.model.problem import DesignProblem  # noqa: E402
from solvers.realise import simulate_design  # noqa: E402
from solvers.registry import solve  # noqa: E402
from topoopt.fabrics import ideal  # noqa: E402
from topoopt.flowsim.iteration import simulate_iteration  # noqa: E402
from traffic.load import load_workload  # noqa: E402

TG = ROOT / "tests" / "data" / "topoopt-taskgraphs"
LINK_BANDWIDTH = 100e9 / 8  # 100 Gbps in bytes/s
CASES = [("100candle_16", 8, 1.10), ("100candle_16", 4, 1.35), ("100candle_32", 8, 1.10)]


def run(case: str, degree: int, target: float) -> bool:
    t0 = time.process_time()
    w = load_workload(str(TG / f"{case}.fbuf"))
    p = DesignProblem.from_workload(w, degree=degree, link_bandwidth=LINK_BANDWIDTH)
    d = solve(p, "joint", time_limit_s=900, objective="iteration", priorities=True)
    it = simulate_design(w, d, p, exposed_by_class=False).iteration_s
    fab = ideal(w.servers, degree, LINK_BANDWIDTH, gpus_per_server=w.gpus_per_server)
    fair = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    ref = fair
    if degree == 8:
        prio = simulate_iteration(w, fab, exposed_by_class=False, priority=d.priority)
        ref = min(fair, prio.iteration_s)
    ok = (
        d.info["deterministic"]
        and abs(it - d.objective_s) <= 1e-9 * it
        and d.lower_bound_s <= it <= target * ref
    )
    print(
        f"{case} {degree} ports: iteration {it * 1e3:.3f} ms, {it / ref:.4f}x the ideal switch "
        f"(target {target}), bound {d.lower_bound_s * 1e3:.3f} ms, "
        f"{time.process_time() - t0:.1f} s CPU: {'met' if ok else 'MISSED'}"
    )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default=None, help="one task graph (default: every case)")
    args = ap.parse_args()
    cases = [c for c in CASES if args.case in (None, c[0])]
    if not cases:
        ap.error(f"--case: got {args.case!r}; allowed: {', '.join(sorted({c[0] for c in CASES}))}")
    sys.exit(0 if all([run(*c) for c in cases]) else 1)


if __name__ == "__main__":
    main()
