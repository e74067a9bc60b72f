"""Finish times agree with SimGrid's max-min model (a separate process, tests/peers/simgrid_peer.py)
on random cases: fat-trees, tori and random direct-connect graphs, 10 to 500 flows, mixed start
times, heterogeneous capacities, some flows split over two weighted paths."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from topoopt.flowsim.netsim_json import run_netsim

PEER = Path(__file__).resolve().parents[1] / "peers" / "simgrid_peer.py"
PEER_PYTHON = "/usr/bin/python3"
SETUP_HINT = (
    "SimGrid is not importable by /usr/bin/python3; run the project set-up "
    "(it installs Debian's python3-simgrid: apt-get install python3-simgrid)"
)


@functools.cache
def simgrid_available() -> str:
    try:
        r = subprocess.run(
            [PEER_PYTHON, "-c", "import simgrid"], capture_output=True, text=True, timeout=60
        )
    except (FileNotFoundError, subprocess.TimeoutExpired) as exc:
        return f"{SETUP_HINT} ({exc})"
    return "" if r.returncode == 0 else f"{SETUP_HINT}: {r.stderr.strip()[-300:]}"


def run_peer(case: dict, tmp_path: Path) -> dict:
    problem = simgrid_available()
    if problem:
        pytest.fail(problem)
    src, out = tmp_path / "case.json", tmp_path / "out.json"
    src.write_text(json.dumps(case))
    r = subprocess.run(
        [PEER_PYTHON, str(PEER), str(src), str(out)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(out.read_text())


def fat_tree(k: int) -> tuple[nx.Graph, list]:
    g = nx.Graph()
    h = k // 2
    for p in range(k):
        for e in range(h):
            for a in range(h):
                g.add_edge(("edge", p, e), ("agg", p, a))
            for i in range(h):
                g.add_edge(("host", p, e, i), ("edge", p, e))
        for a in range(h):
            for j in range(h):
                g.add_edge(("agg", p, a), ("core", a, j))
    return g, sorted(n for n in g if n[0] == "host")


def torus(dims: tuple[int, ...]) -> tuple[nx.Graph, list]:
    g = nx.grid_graph(dim=list(dims), periodic=True)
    return g, sorted(g)


def direct_connect(n: int, degree: int, seed: int) -> tuple[nx.Graph, list]:
    g = nx.random_regular_graph(degree, n, seed=seed)
    return g, sorted(g)


def make_case(graph: nx.Graph, hosts: list, n_flows: int, seed: int, split: float) -> dict:
    """Random flows on shortest paths (one picked at random per flow, or two weighted ones)."""
    rng = np.random.default_rng(seed)
    arcs = sorted((u, v) for a, b in graph.edges for u, v in ((a, b), (b, a)))
    index = {arc: i for i, arc in enumerate(arcs)}
    caps = rng.choice([12.5e9, 25e9, 50e9], len(arcs))
    links = [{"id": f"L{i}", "capacity": float(c), "latency": 0.0} for i, c in enumerate(caps)]
    shortest: dict = {}
    flows = []
    for f in range(n_flows):
        s, d = rng.choice(len(hosts), 2, replace=False)
        key = (hosts[s], hosts[d])
        if key not in shortest:
            shortest[key] = sorted(nx.all_shortest_paths(graph, *key))
        options = shortest[key]
        size = 4 * int(rng.integers(250_000, 25_000_000))  # whole bytes after a 1/4 split
        start = 0.0 if rng.random() < 0.5 else float(rng.uniform(0.0, 0.02))
        if len(options) > 1 and rng.random() < split:
            pick = rng.choice(len(options), 2, replace=False)
            weights = [0.25, 0.75] if rng.random() < 0.5 else [0.5, 0.5]
        else:
            pick, weights = [int(rng.integers(len(options)))], [1.0]
        paths = [
            {
                "links": [f"L{index[(u, v)]}" for u, v in zip(p[:-1], p[1:], strict=True)],
                "weight": w,
            }
            for p, w in zip((options[i] for i in pick), weights, strict=True)
        ]
        flows.append({"id": f, "bytes": size, "start": start, "paths": paths})
    return {"links": links, "flows": flows}


CASES = (
    [("fat_tree4", n, 0.3) for n in (10, 40, 120, 300, 500)]
    + [("fat_tree6", n, 0.0) for n in (25, 200, 500)]
    + [("torus4x4", n, 0.4) for n in (10, 50, 150, 400)]
    + [("torus3x3x3", n, 0.0) for n in (30, 250)]
    + [("direct16d4", n, 0.3) for n in (15, 80, 200, 500)]
    + [("direct40d6", n, 0.0) for n in (60, 300, 450)]
    + [("fat_tree4_same_start", 200, 0.0), ("torus4x4_same_start", 100, 0.2)]
)


def build(name: str, seed: int):
    if name.startswith("fat_tree4"):
        return fat_tree(4)
    if name == "fat_tree6":
        return fat_tree(6)
    if name.startswith("torus4x4"):
        return torus((4, 4))
    if name == "torus3x3x3":
        return torus((3, 3, 3))
    if name == "direct16d4":
        return direct_connect(16, 4, seed)
    return direct_connect(40, 6, seed)


@pytest.mark.parametrize(("name", "n_flows", "split"), CASES)
def test_finish_times_agree_with_simgrid(name, n_flows, split, tmp_path):
    seed = 1000 + CASES.index((name, n_flows, split))
    graph, hosts = build(name, seed)
    case = make_case(graph, hosts, n_flows, seed, split)
    if name.endswith("same_start"):
        for flow in case["flows"]:
            flow["start"] = 0.0
    ours = run_netsim(case)
    theirs = run_peer(case, tmp_path)
    a = np.array([f["finish"] for f in ours["flows"]])
    b = np.array([f["finish"] for f in theirs["flows"]])
    assert [f["id"] for f in theirs["flows"]] == [f["id"] for f in ours["flows"]]
    rel = np.abs(a - b) / b
    assert rel.max() <= 1e-9, f"max relative difference {rel.max():.3e} at flow {rel.argmax()}"


def test_enough_cases():
    assert len(CASES) >= 20
    assert min(n for _, n, _ in CASES) == 10 and max(n for _, n, _ in CASES) == 500
