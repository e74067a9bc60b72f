"""Class priorities as part of a design, and the block candidates (issue #14).

- A design's ``priority`` survives design.json, is checked by the schema, and every simulation of
  the design uses it (``simulate_design``, ``simulate --design``, compare's rows).
- ``joint --priorities``: the baselines under each order are what an independent simulation
  gives, the result is never slower than any of them, its objective is its simulation, and the
  same input gives the same design.
- The block construction finds the blocks of the fixed traffic (checked against networkx's
  components of the demands) and builds only designs within the ports.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_iteration_objective import _ring_workload as _ring_dag  # the same small DAG

from solvers.joint.block_candidates import block_candidates, blocks
from solvers.joint.iteration_search import priority_orders
from solvers.model.design import Design, NodePaths
from solvers.model.problem import DesignProblem
from solvers.realise import simulate_design
from solvers.registry import solve
from traffic.errors import InputError
from traffic.workload import Demand, TaskGraph, Workload

ROOT = Path(__file__).resolve().parents[2]
CANDLE16 = ROOT / "tests" / "data" / "topoopt-taskgraphs" / "100candle_16.fbuf"


def _shared_link_workload(mp_bytes=50e6, ar_bytes=100e6):
    """Two servers: forward on 0, a transfer 0 -> 1, backward on 1; an all-reduce over both
    servers from the start (no predecessor) shares the circuit with the transfer."""
    kinds = ["forward", "transfer", "backward", "all-reduce"]
    servers = [0, -1, 1, -1]
    runtime = [1e-3, 0.0, 2e-3, 0.0]
    size = [0.0, mp_bytes, 0.0, ar_bytes]
    demand = [[-1, -1], [0, 0], [-1, -1], [1, 0]]
    tg = TaskGraph(np.arange(4), np.array(kinds), np.array(servers), np.array(runtime),
                   np.array(size), np.array([[0, 1], [1, 2]]), np.array(demand))  # fmt: skip
    return Workload(2, 1, (
        Demand("send", np.array([[0, 1]]), mp_bytes, "mp", "forward"),
        Demand("all-reduce", np.array([[0, 1]]), ar_bytes, "dp", "backward"),
    ), name="shared-link", taskgraph=tg)  # fmt: skip


def _one_circuit_design(B=1e9):
    routing = NodePaths.from_lists([0, 1], [1, 0], [[([0, 1], 1.0)], [([1, 0], 1.0)]])
    c = np.array([[0, 1, 1]], np.int64)
    return Design(2, 1, B, c, (), routing, "x", "feasible", 0.0, 0.0, 0.0, 0.0)


def test_priority_is_simulated_closed_form():
    """mp first: the transfer runs at the full circuit, S / B after the forward (the all-reduce
    waits on that direction); fair sharing: it gets half while both send, so it is slower; the
    iteration ends with the all-reduce either way, when the circuit has carried both."""
    w = _shared_link_workload()
    p = DesignProblem.from_workload(w, degree=1, link_bandwidth=1e9)
    d = _one_circuit_design()
    fair = simulate_design(w, d, p, exposed_by_class=False)
    first = simulate_design(w, replace(d, priority=("mp",)), p, exposed_by_class=False)
    explicit = simulate_design(w, d, p, exposed_by_class=False, priority=("mp",))
    assert first.iteration_s == explicit.iteration_s  # the design's own priority is used

    def transfer(res):
        tl = res.timeline
        row = tl[tl["kind"] == "send"].iloc[0]
        return float(row.start_s), float(row.finish_s)

    s, f = transfer(first)
    assert s == pytest.approx(1e-3, rel=1e-9)
    assert f - s == pytest.approx(50e6 / 1e9, rel=1e-3)  # alone at B (plus one hop's latency)
    s2, f2 = transfer(fair)
    assert f2 - s2 > 1.2 * (f - s)
    # the circuit is work-conserving either way: 0 -> 1 carries 50 MB + 100 MB of the ring
    for res in (first, fair):
        assert res.iteration_s == pytest.approx(150e6 / 1e9, rel=1e-4)


def test_priority_in_design_json_and_schema():
    d = replace(_one_circuit_design(), priority=("mp", "dp"))
    text = d.to_json()
    assert json.loads(text)["priority"] == ["mp", "dp"]
    back = Design.from_json(text)
    assert back.priority == ("mp", "dp")
    plain = _one_circuit_design().to_json()
    assert "priority" not in json.loads(plain)  # older files stay identical
    assert Design.from_json(plain).priority == ()
    for bad, word in ((["mp", "mp"], "distinct"), ([], "at least one"), (["gold"], "priority")):
        doc = json.loads(text)
        doc["priority"] = bad
        with pytest.raises(InputError) as e:
            Design.from_json(json.dumps(doc))
        assert word in str(e.value) and "\n" not in str(e.value)


def test_priority_orders_are_the_classes_crossing_servers():
    w = _shared_link_workload()
    p = DesignProblem.from_workload(w, degree=1, link_bandwidth=1e9)
    assert priority_orders(p) == [("dp",), ("mp",)]
    # one GPU server pair inside a server carries nothing across: no order for that class
    w2 = Workload(4, 2, (
        Demand("send", np.array([[0, 1]]), 1e6, "tp", "forward"),
        Demand("all-reduce", np.array([[0, 2]]), 1e6, "dp", "backward"),
    ))  # fmt: skip
    p2 = DesignProblem.from_workload(w2, degree=1, link_bandwidth=1e9)
    assert priority_orders(p2) == []


def test_joint_with_priorities_never_slower_and_deterministic():
    from solvers.baselines.expander_design import expander_design
    from solvers.baselines.topoopt_method import topoopt_design

    w = _ring_dag()
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=1e9)
    a = solve(p, "joint", time_limit_s=600, work_limit=2, seed=1, priorities=True)
    bases = [topoopt_design(p, "topoopt", seed=1), topoopt_design(p, "topoopt-released", seed=1),
             expander_design(p, seed=1)]  # fmt: skip
    seen = []
    for b in bases:
        seen.append(simulate_design(w, b, p, exposed_by_class=False).iteration_s)
        for label, per in a.info["priority_iteration_s"].items():
            got = simulate_design(w, replace(b, priority=tuple(label.split(","))), p,
                                  exposed_by_class=False).iteration_s  # fmt: skip
            assert per[b.solver] == pytest.approx(got, rel=1e-12)
            seen.append(got)
    assert a.objective_s <= min(seen)
    again = simulate_design(w, a, p, exposed_by_class=False).iteration_s
    assert again == pytest.approx(a.objective_s, rel=1e-12)  # the shipped priority is used
    assert a.lower_bound_s <= a.objective_s
    if a.priority:
        assert a.info["ideal_priority_iteration_s"] > 0
    b2 = solve(p, "joint", time_limit_s=600, work_limit=2, seed=1, priorities=True)
    assert np.array_equal(a.circuits, b2.circuits) and a.priority == b2.priority
    assert a.objective_s == b2.objective_s


@pytest.fixture(scope="module")
def candle16():
    if not CANDLE16.is_file():
        pytest.skip("TopoOpt task graphs not found")
    from traffic.load import load_workload

    return load_workload(str(CANDLE16))


def test_blocks_match_networkx_components(candle16):
    w = candle16
    g = nx.Graph()
    g.add_nodes_from(range(w.servers))
    for d in w.demands:
        if not d.mutable:
            for a, b in (np.asarray(d.groups) // w.gpus_per_server).tolist():
                if a != b:
                    g.add_edge(a, b)
    want = sorted(sorted(c) for c in nx.connected_components(g))
    for deg in (4, 8):
        p = DesignProblem.from_workload(w, degree=deg, link_bandwidth=12.5e9)
        assert blocks(p) == want
        cands = block_candidates(p)
        assert cands
        for name, c in cands:
            use = np.zeros(w.servers, np.int64)
            np.add.at(use, c[:, 0], c[:, 2])
            np.add.at(use, c[:, 1], c[:, 2])
            assert use.max() <= deg, name
            m = {(int(u), int(v)): int(k) for u, v, k in c}
            # every server is wired to its counterpart in the next block
            for b in range(len(want)):
                for pos in range(len(want[0])):
                    u, v = want[b][pos], want[(b + 1) % len(want)][pos]
                    assert m.get((min(u, v), max(u, v)), 0) >= 1, name
            if "complete x" in name:
                k = int(name.split("complete x")[1].split()[0])
                for blk in want:
                    for i in blk:
                        for j in blk:
                            assert i >= j or m.get((i, j), 0) >= k, name


def test_no_blocks_without_fixed_traffic_blocks():
    w = _ring_dag()  # one component: the transfers form a ring over all servers
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=1e9)
    assert blocks(p) is None and block_candidates(p) == []


def test_cli_simulate_design_honours_priority(tmp_path, candle16):
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    run = CliRunner()
    d = tmp_path / "d.json"
    r = run.invoke(app, ["design", str(CANDLE16), "--solver", "topoopt", "--degree", "4",
                         "--out", str(d)])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(d.read_text())
    doc["priority"] = ["mp"]
    dp = tmp_path / "dp.json"
    dp.write_text(json.dumps(doc))

    def it(*args):
        r = run.invoke(app, ["simulate", str(CANDLE16), *args, "--json"])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["iteration_s"]

    own = it("--design", str(dp))
    explicit = it("--design", str(d), "--priority", "mp")
    fair = it("--design", str(d))
    assert own == explicit != fair
    doc["priority"] = ["mp", "mp"]
    dp.write_text(json.dumps(doc))
    r = run.invoke(app, ["simulate", str(CANDLE16), "--design", str(dp), "--json"])
    assert r.exit_code == 2 and "priority" in r.output
