"""Study: how far are max-min fair flow finish times from packet-level-calibrated ones?

Small two-tier leaf-spine fabrics (8, 16 and 32 hosts, 4 hosts per leaf, 4 spines: full
bisection; every link 100 Gbps = 12.5e9 bytes/s and 1 us), deterministic ECMP (the spine is
``(src + dst) mod 4``), and four traffic patterns:

- ``ring``: one step of a ring all-reduce, host ``i`` sends 16 MiB to ``i + 1``;
- ``all-to-all``: every host sends 16 MiB / n to every other host;
- ``incast``: every host sends 4 MiB to host 0 at once;
- ``random``: 4n flows of 1-16 MiB between random pairs, starting uniformly in [0, 2 ms].

Each case runs through topoopt's flow model (:func:`topoopt.flowsim.netsim_json.run_netsim`)
and, as the second opinion, through SimGrid (``tests/peers/simgrid_peer.py`` under Debian's
``/usr/bin/python3``) with its models calibrated against packet-level TCP:

- ``lv08``: SimGrid's default (Velho & Legrand 2009): bandwidth factor 0.97, latency factor
  13.01, a 4 MiB TCP window bounding each flow's rate by ``gamma / (2 * latency)``, reverse-path
  cross-traffic;
- ``cm02-gamma``: exact bandwidth sharing plus the window bound only;
- ``maxmin``: the pure max-min configuration without latencies, as a control (must agree to
  rounding: with latencies SimGrid's CM02 weights shares by path latency).

The ns-3 wheel on PyPI (``ns3``) was tried first: see ``docs/validation.md`` for why it is not
used here. Printed per case and model: the relative error ``(peer - ours) / peer`` of every
flow's finish time, as median, 90th percentile and extremes; a positive error means the max-min
model is optimistic (finishes earlier than the peer).

Usage::

    .venv/bin/python benchmarks/study_packet_level.py           # all cases (~1 min)
    .venv/bin/python benchmarks/study_packet_level.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from topoopt.flowsim.netsim_json import run_netsim  # noqa: E402

PEER = ROOT / "tests" / "peers" / "simgrid_peer.py"
NS3_PEER = ROOT / "tests" / "peers" / "ns3_peer.py"
LINK = 12.5e9
LAT = 1e-6
MiB = 1 << 20
MODELS = ("maxmin", "cm02-gamma", "lv08")


def leaf_spine(n_hosts: int, per_leaf: int = 4, spines: int = 4):
    """A two-tier leaf-spine: directed links (flow model), cables (packet level) and a path
    function giving a flow's directed link ids and its node path. Nodes: hosts ``0..n-1``, then
    leaves, then spines."""
    leaves = n_hosts // per_leaf
    links, cables = [], []

    def add() -> int:
        links.append({"id": len(links), "capacity": LINK, "latency": LAT})
        return len(links) - 1

    def leaf(a: int) -> int:
        return n_hosts + a

    def spine(s: int) -> int:
        return n_hosts + leaves + s

    up = [add() for _ in range(n_hosts)]  # host -> leaf
    down = [add() for _ in range(n_hosts)]  # leaf -> host
    l2s = {(a, s): add() for a in range(leaves) for s in range(spines)}
    s2l = {(s, a): add() for a in range(leaves) for s in range(spines)}
    for h in range(n_hosts):
        cables.append({"u": h, "v": leaf(h // per_leaf), "bandwidth": LINK, "latency": LAT})
    for a in range(leaves):
        for s in range(spines):
            cables.append({"u": leaf(a), "v": spine(s), "bandwidth": LINK, "latency": LAT})

    def path(src: int, dst: int) -> tuple[list[int], list[int]]:
        a, b = src // per_leaf, dst // per_leaf
        if a == b:
            return [up[src], down[dst]], [src, leaf(a), dst]
        s = (src + dst) % spines
        ids = [up[src], l2s[(a, s)], s2l[(s, b)], down[dst]]
        return ids, [src, leaf(a), spine(s), leaf(b), dst]

    return links, cables, n_hosts + leaves + spines, path


def case(pattern: str, n: int, seed: int = 0) -> dict:
    """The netsim document of one case, plus ``packet``: the same case for the ns-3 peer."""
    links, cables, n_nodes, path = leaf_spine(n)
    rng = np.random.default_rng(seed)
    flows, packet_flows = [], []

    def flow(src, dst, nbytes, start=0.0):
        ids, nodes = path(src, dst)
        f = {"id": len(flows), "bytes": int(nbytes), "start": float(start)}
        flows.append({**f, "paths": [{"links": ids, "weight": 1.0}]})
        packet_flows.append({**f, "path": nodes})

    if pattern == "ring":
        for i in range(n):
            flow(i, (i + 1) % n, 16 * MiB)
    elif pattern == "all-to-all":
        for i in range(n):
            for j in range(n):
                if i != j:
                    flow(i, j, 16 * MiB // n)
    elif pattern == "incast":
        for i in range(1, n):
            flow(i, 0, 4 * MiB)
    elif pattern == "random":
        for _ in range(4 * n):
            s, d = rng.choice(n, 2, replace=False)
            flow(int(s), int(d), int(rng.integers(1, 17)) * MiB, rng.uniform(0, 2e-3))
    else:
        raise ValueError(pattern)
    packet = {"name": f"{pattern} n={n}", "nodes": n_nodes, "links": cables}
    return {"links": links, "flows": flows, "packet": {**packet, "flows": packet_flows}}


def peer(doc: dict, model: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as d:
        cp, op = Path(d) / "case.json", Path(d) / "out.json"
        cp.write_text(json.dumps(doc, allow_nan=False))
        subprocess.run(
            ["/usr/bin/python3", str(PEER), str(cp), str(op), model],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        out = json.loads(op.read_text())
    return np.array([f["finish"] for f in out["flows"]])


def errors(ours: np.ndarray, theirs: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Relative error of the flow completion time (finish - start): (peer - ours) / peer."""
    a, b = ours - start, theirs - start
    return (b - a) / b


def ns3_finishes(python: Path, cases: list[dict]) -> list[np.ndarray]:
    """Finish times of every case from one ns-3 peer process (its import takes about a minute)."""
    with tempfile.TemporaryDirectory() as d:
        cp, op = Path(d) / "cases.json", Path(d) / "out.json"
        cp.write_text(json.dumps(cases, allow_nan=False))
        subprocess.run(
            [str(python), str(NS3_PEER), str(cp), str(op)], check=True, stderr=subprocess.DEVNULL
        )
        out = json.loads(op.read_text())
    return [np.array([f["finish"] for f in c["flows"]]) for c in out]


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the table as JSON")
    ap.add_argument(
        "--ns3",
        type=Path,
        default=ROOT / ".venv-ns3" / "bin" / "python",
        help="Python of the ns3 wheel's environment (make ns3-peer); skipped when missing",
    )
    ap.add_argument("--sizes", default="8,16,32", help="host counts")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    cases = [(p, n, case(p, n)) for p in ("ring", "all-to-all", "incast", "random") for n in sizes]
    packet = {}
    if args.ns3.exists():
        t0 = time.perf_counter()
        got = ns3_finishes(args.ns3, [c["packet"] for _, _, c in cases])
        packet = {(p, n): f for (p, n, _), f in zip(cases, got, strict=True)}
        print(f"ns-3: {len(cases)} cases in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    else:
        print(f"ns-3 peer not found at {args.ns3}: skipped (make ns3-peer)", file=sys.stderr)
    rows = []
    print(
        f"{'case':18s} {'peer':11s} {'flows':>6s} {'median':>8s} {'p90':>8s} {'min':>8s} "
        f"{'max':>8s}  {'makespan ours':>13s} {'peer':>9s}"
    )
    for pattern, n, doc in cases:
        net = {"links": doc["links"], "flows": doc["flows"]}
        # the control runs without latency on both sides: SimGrid's CM02 weights a flow's
        # share by its path latency (RTT unfairness) whenever latencies are not zero
        flat = {"links": [dict(lk, latency=0.0) for lk in doc["links"]], "flows": doc["flows"]}
        start = np.array([f["start"] for f in doc["flows"]])
        ours_lat = np.array([f["finish"] for f in run_netsim(net)["flows"]])
        for model in (*MODELS, "ns-3"):
            if model == "ns-3":
                if (pattern, n) not in packet:
                    continue
                ours, theirs = ours_lat, packet[(pattern, n)]
            elif model == "maxmin":
                ours = np.array([f["finish"] for f in run_netsim(flat)["flows"]])
                theirs = peer(flat, model)
            else:
                ours, theirs = ours_lat, peer(net, model)
            e = errors(ours, theirs, start)
            row = {
                "case": f"{pattern} n={n}",
                "peer": model,
                "flows": len(doc["flows"]),
                "unfinished": int((theirs < 0).sum()),
                "median": float(np.median(e)),
                "p90": float(np.quantile(e, 0.9)),
                "min": float(e.min()),
                "max": float(e.max()),
                "makespan_ours_s": float(ours.max()),
                "makespan_peer_s": float(theirs.max()),
            }
            rows.append(row)
            print(
                f"{row['case']:18s} {model:11s} {row['flows']:6d} {row['median']:8.2%} "
                f"{row['p90']:8.2%} {row['min']:8.2%} {row['max']:8.2%}  "
                f"{row['makespan_ours_s'] * 1e3:11.3f}ms {row['makespan_peer_s'] * 1e3:7.3f}ms"
                + (f"  ({row['unfinished']} unfinished)" if row["unfinished"] else "")
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, allow_nan=False) + "\n")
    return {"rows": rows}


if __name__ == "__main__":
    main()
