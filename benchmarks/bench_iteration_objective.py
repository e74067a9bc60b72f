"""Benchmark the joint optimizer's two objectives on TopoOpt's task graphs (prints a table).

For each task graph (from ``tests/data/topoopt-taskgraphs``, or the folder
``TOPOOPT_TASKGRAPHS`` names) at 4 and 8 ports of 100 Gbps: the flow model's iteration
time (:func:`solvers.realise.simulate_design`) on the ideal switch and on the designs of
``topoopt``, ``topoopt-released``, ``joint --objective congestion``, ``joint --objective
iteration`` and the same with ``--priorities`` (class priorities part of the design, simulated
with them), each with its ratio to the ideal switch (and, for a design with priorities, its
ratio to the stronger of the ideal switch shared fairly and under the same priorities), and the
solvers' wall seconds. The joint solves stop on ``--work-limit`` work units (default: each
objective's own default); the wall-clock cap ``--time-limit`` (default 300 s) is generous so that
the figures are the deterministic ones on a loaded machine too (the iteration line says whether
the cap cut).

``100dlrm_128`` is skipped unless ``--with-dlrm128`` is given: one flow simulation of its
TopoOpt design takes about 20 s, so the iteration objective falls back to the congestion
objective there (its warm start does not fit the work limit) and the row would mostly time
simulations.

``--diagnose`` adds, per row, what limits the iteration objective's design (measured, not
assumed):

- the ideal switch with ``1 .. d`` ports per server (ratio to ``d`` ports): how many ideal
  ports the design is worth;
- the design with one traffic class alone (the other class's tasks shrunk to 1 byte), each
  against the ideal switch with the same class alone: whether the classes are each served and
  the loss comes from their sharing links;
- an equal-capacity full mesh (every pair one circuit of ``d B / (n - 1)``, so each server
  has the same total bandwidth), routed by the routing LP on the phases, and with every pair's
  bytes spread on its widest two-hop paths: a direct-connect reference with no port budget.

Usage::

    .venv/bin/python benchmarks/bench_iteration_objective.py
    .venv/bin/python benchmarks/bench_iteration_objective.py --cases 100candle_16 --degrees 8
    .venv/bin/python benchmarks/bench_iteration_objective.py --cases 100candle_16 --diagnose
"""

from __future__ import annotations

import argparse
import os
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

CASES = (
    "100candle_16",
    "100candle_32",
    "100dlrm_16",
    "100dlrm_32",
    "100transformer_16",
    "100vgg_16",
    "100dlrm_128",
)
LINK_BANDWIDTH = 100e9 / 8  # 100 Gbps in bytes/s


def taskgraph_dir() -> Path:
    env = os.environ.get("TOPOOPT_TASKGRAPHS")
    for p in ([Path(env)] if env else []) + [ROOT / "tests" / "data" / "topoopt-taskgraphs"]:
        if p.is_dir():
            return p
    raise SystemExit("no task graph folder (tests/data/topoopt-taskgraphs)")


def diagnose(w, p, design, ideal_s: float) -> dict:
    """The ``--diagnose`` figures (module docstring) for one case, ratios."""
    from dataclasses import replace

    import numpy as np

    from solvers.joint.driver import route_design, to_design
    from solvers.joint.iteration_objective import iteration_time, spread_routing

    out: dict = {}
    n, d, bw = w.servers, p.degree, p.link_bandwidth
    gps = w.gpus_per_server
    per_port = []
    for k in range(1, d + 1):
        fab = ideal(n, k, bw, gpus_per_server=gps)
        per_port.append(simulate_iteration(w, fab, exposed_by_class=False).iteration_s / ideal_s)
    out["ideal_by_ports"] = per_port
    tg = w.taskgraph
    for label, drop in (("mp sends alone", "all-reduce"), ("all-reduces alone", "transfer")):
        sz = np.where(tg.kind == drop, 1.0, tg.size_bytes)
        w1 = replace(w, taskgraph=replace(tg, size_bytes=sz))
        fab = ideal(n, d, bw, gpus_per_server=gps)
        ref = simulate_iteration(w1, fab, exposed_by_class=False).iteration_s
        got = simulate_design(w1, design, replace(p, workload=w1), exposed_by_class=False)
        out[label] = got.iteration_s / ref
    q = DesignProblem.from_workload(w, degree=n - 1, link_bandwidth=d * bw / (n - 1))
    mesh = np.array([[i, j, 1] for i in range(n) for j in range(i + 1, n)], np.int64)
    routed, _, _ = route_design(q, mesh)
    if routed is not None:
        m = to_design(q, mesh, routed, 0.0, "mesh", time.perf_counter(), {})
        out["equal-capacity mesh, LP routing"] = iteration_time(m, q)[0] / ideal_s
        wide = spread_routing(m, 1.0)
        out["equal-capacity mesh, two-hop spread"] = iteration_time(wide, q)[0] / ideal_s
    return out


def run_case(
    path: Path, degree: int, time_limit: float, work_limit: float | None, diag: bool = False
) -> dict:
    w = load_workload(str(path))
    p = DesignProblem.from_workload(w, degree=degree, link_bandwidth=LINK_BANDWIDTH)
    row: dict = {"case": path.stem, "d": degree}
    fab = ideal(w.servers, degree, LINK_BANDWIDTH, gpus_per_server=w.gpus_per_server)
    t = time.perf_counter()
    row["ideal"] = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    row["ideal_wall"] = time.perf_counter() - t
    runs = [
        ("topoopt", "topoopt", None),
        ("topoopt-released", "topoopt-released", None),
        ("joint(congestion)", "joint", "congestion"),
        ("joint(iteration)", "joint", "iteration"),
        ("joint(iteration+prio)", "joint", "iteration+prio"),
    ]
    for label, name, objective in runs:
        t = time.perf_counter()
        kw = {} if objective is None else {"objective": objective}
        if objective == "iteration+prio":
            kw = {"objective": "iteration", "priorities": True}
        d = solve(p, name, time_limit_s=time_limit, work_limit=work_limit, **kw)
        row[f"{label}_wall"] = time.perf_counter() - t
        row[label] = simulate_design(w, d, p, exposed_by_class=False).iteration_s
        if objective == "iteration+prio":
            row["priority"] = list(d.priority)
            row["ideal_prio"] = row["ideal"]
            if d.priority:  # the ideal switch under the same priorities, the stronger ideal
                row["ideal_prio"] = simulate_iteration(
                    w, fab, exposed_by_class=False, priority=d.priority
                ).iteration_s
        if objective == "iteration":
            row["iteration_info"] = {
                k: d.info.get(k)
                for k in ("objective", "winner", "stopped_by", "work_used", "deterministic")
            }
            row["lower_bound"] = d.lower_bound_s
            if diag:
                row["diagnose"] = diagnose(w, p, d, row["ideal"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="*", default=[c for c in CASES if c != "100dlrm_128"])
    ap.add_argument("--with-dlrm128", action="store_true")
    ap.add_argument("--degrees", nargs="*", type=int, default=[4, 8])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--work-limit", type=float, default=None)
    ap.add_argument("--diagnose", action="store_true", help="what limits the design")
    args = ap.parse_args()
    cases = list(args.cases) + (["100dlrm_128"] if args.with_dlrm128 else [])
    folder = taskgraph_dir()
    labels = [
        "topoopt",
        "topoopt-released",
        "joint(congestion)",
        "joint(iteration)",
        "joint(iteration+prio)",
    ]
    head = f"{'case':18s} {'d':>2s} {'ideal ms':>9s} " + " ".join(
        f"{lb + ' ms (x)':>26s}" for lb in labels
    )
    print(head)
    print(f"{'':18s} {'':2s} {'':9s} " + " ".join(f"{'wall s':>26s}" for _ in labels))
    for case in cases:
        for d in args.degrees:
            r = run_case(
                folder / f"{case}.fbuf", d, args.time_limit, args.work_limit, args.diagnose
            )
            ideal_s = r["ideal"]
            cells = " ".join(
                f"{r[lb] * 1e3:12.2f} ({r[lb] / ideal_s:5.3f}x)      " for lb in labels
            )
            print(f"{case:18s} {d:2d} {ideal_s * 1e3:9.2f} {cells}")
            walls = " ".join(f"{r[lb + '_wall']:26.1f}" for lb in labels)
            print(f"{'':18s} {'':2s} {'':9s} {walls}")
            info = r["iteration_info"]
            print(
                f"{'':18s} {'':2s} iteration objective: lower bound {r['lower_bound'] * 1e3:.2f} "
                f"ms, winner {info['winner']!r}, stopped by {info['stopped_by']}, "
                f"work {info['work_used']}, deterministic {info['deterministic']}, "
                f"objective run {info['objective']}; with priorities: "
                f"{','.join(r['priority']) or 'fair'} first",
                flush=True,
            )
            if r["priority"]:
                strong = min(ideal_s, r["ideal_prio"])
                print(
                    f"{'':18s} {'':2s} ideal switch with {','.join(r['priority'])} first "
                    f"{r['ideal_prio'] * 1e3:.2f} ms; joint(iteration+prio) over the stronger "
                    f"ideal {r['joint(iteration+prio)'] / strong:.3f}x",
                    flush=True,
                )
            for k, v in r.get("diagnose", {}).items():
                v = " ".join(f"{x:.3f}" for x in v) if isinstance(v, list) else f"{v:.3f}"
                print(f"{'':18s} {'':2s} diagnose: {k} {v}", flush=True)
    if "100dlrm_128" not in cases:
        print("100dlrm_128 skipped (one flow simulation of a design takes ~20 s; --with-dlrm128)")


if __name__ == "__main__":
    main()
