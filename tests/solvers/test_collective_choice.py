"""The joint optimizer's collective post-pass (solvers.joint.collective_choice).

A 10-server data-parallel plan on the Petersen graph (pre-wired, every port): the graph has no
Hamiltonian cycle, so the design's rings forward through hosts, while a Blink packing uses all
3 circuits of every server. Closed form of the packing's all-reduce: each server receives
``2 (n-1)/n * S`` over ``d`` circuits of ``B``: ``t = 2 * 9/10 * S / (3 B)``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.collective_choice import blink_entry, choose_collectives
from solvers.joint.driver import congestion_search
from solvers.joint.flow_select import flow_times
from solvers.model.design import Design
from solvers.model.problem import DesignProblem
from solvers.realise import design_workload
from solvers.registry import load_design
from topoopt.app.cli.app import app
from traffic.errors import InputError
from traffic.workload import Demand, Workload

B = 12.5e9
S = 100e6
OUTER = [(i, (i + 1) % 5) for i in range(5)]
INNER = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
SPOKES = [(i, i + 5) for i in range(5)]
PETERSEN = [[min(a, b), max(a, b), 1] for a, b in OUTER + INNER + SPOKES]
PLAN = """model: vgg16
parallelism: {dp: 10, micro_batch_size: 16, global_batch_size: 160}
precision: {activation_bytes: 4, gradient_bytes: 4, parameter_bytes: 4}
cluster: {servers: 10, gpus_per_server: 1}
"""


def _dp(n: int, size: float = S) -> Workload:
    d = Demand("all-reduce", np.arange(n).reshape(1, n), size, "dp", "backward")
    return Workload(gpus=n, gpus_per_server=1, demands=(d,))


@pytest.fixture(scope="module")
def petersen():
    w = _dp(10)
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=B, prewired=np.array(PETERSEN))
    return w, p, congestion_search(p, time_limit_s=60, local_search=False)


def test_joint_picks_blink_on_petersen(petersen):
    w, p, d = petersen
    assert sorted(map(tuple, d.circuits.tolist())) == sorted(map(tuple, PETERSEN))
    ch = d.info["collective_choice"]
    assert [c["algorithm"] for c in d.collectives] == ["blink"]
    assert d.collectives[0]["members"] == list(range(10))
    # the packing's closed form, plus one 1 us hop
    assert ch["comm_s"] == pytest.approx(2 * 0.9 * S / (3 * B) + 1e-6, rel=1e-6)
    assert ch["comm_s"] < 0.5 * ch["ring_comm_s"]  # rings forward through hosts on Petersen
    # what was picked is what the flow model simulates for the design
    comm, _, _ = flow_times(d, p, w)
    assert comm == pytest.approx(ch["comm_s"], rel=1e-12)
    # the packing's transfers carry the all-reduce's wire bytes: 2 (n-1) S/n per member
    assert sum(d.collectives[0]["fraction"]) == pytest.approx(2 * 9, rel=1e-9)


def test_design_json_round_trips(petersen, tmp_path):
    _, p, d = petersen
    path = tmp_path / "design.json"
    path.write_text(d.to_json())
    back = load_design(path)
    assert back.collectives == tuple(
        {**c, "info": dict(c["info"])} for c in json.loads(d.to_json())["collectives"]
    )
    assert back.to_json() == d.to_json()
    # a design without collectives writes no key (older files unchanged)
    plain = Design.from_json(d.to_json())
    assert "collectives" not in topoopt_design(p).to_dict()
    assert plain.collectives == back.collectives


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda c: c.update(algorithm="tree"), "algorithm"),
        (lambda c: c.update(src=c["src"][:-1]), "src"),
        (lambda c: c.update(dst=[c["src"][0], *c["dst"][1:]]), "src[0]"),
        (lambda c: c.update(members=[1, 0, *c["members"][2:]]), "members"),
        (lambda c: c.update(extra=1), "extra"),
        (lambda c: c.update(fraction=[-1.0, *c["fraction"][1:]]), "fraction"),
    ],
)
def test_malformed_collectives_are_refused(petersen, tmp_path, edit, field):
    doc = json.loads(petersen[2].to_json())
    edit(doc["collectives"][0])
    path = tmp_path / "design.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as e:
        load_design(path)
    assert "collectives" in str(e.value) and field in str(e.value)


def test_rings_kept_where_they_are_optimal():
    """A 6-server ring of single circuits: the ring meets the cut bound, nothing is picked."""
    w = _dp(6)
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    d = congestion_search(p, time_limit_s=30)
    ch = d.info["collective_choice"]
    assert d.collectives == ()
    assert [t["outcome"] for t in ch["tried"]] == ["rings kept (not faster)"]
    assert ch["comm_s"] == ch["ring_comm_s"]
    assert ch["tried"][0]["comm_s"] >= ch["ring_comm_s"] * (1 - 1e-9)


def test_never_slower_and_disconnected_groups_skipped():
    """Two 4-server groups on circuits that only join servers across groups: the groups'
    own circuits do not connect them, so no packing is tried and the design is unchanged."""
    rows = np.array([[0, 2, 4, 6], [1, 3, 5, 7]])
    w = Workload(8, 1, (Demand("all-reduce", rows, S, "dp", "backward"),))
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    base = topoopt_design(p)
    ring = [[i, (i + 1) % 8] for i in range(8)]
    c = np.array([[min(a, b), max(a, b), 1] for a, b in ring])
    d = Design(8, 2, B, c, base.rings, base.routing, "x", "feasible", 1.0, 0.0, 0.0, 0.0)
    assert blink_entry(d, "backward", 0, "all-reduce", (0, 2, 4, 6)) is None
    out, info = choose_collectives(d, p, w)
    assert out is d and info["comm_s"] == info["ring_comm_s"]
    assert {t["outcome"] for t in info["tried"]} == {
        "skipped (the group's circuits do not connect it)"
    }


def test_task_graph_workloads_refuse_collectives(petersen):
    _, p, d = petersen
    tg = type("W", (), {"taskgraph": object(), "servers": 10})()
    with pytest.raises(InputError, match="collectives"):
        design_workload(tg, d, p)


def test_cli_design_then_simulate_reproduces_the_time(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    wired = tmp_path / "petersen.json"
    wired.write_text(json.dumps(PETERSEN))
    out = tmp_path / "design.json"
    runner = CliRunner()
    args = ["design", str(plan), "--degree", "3", "--link-gbps", "100"]
    r = runner.invoke(app, [*args, "--prewired", str(wired), "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    ch = doc["info"]["collective_choice"]
    assert [c["algorithm"] for c in doc["collectives"]] == ["blink"]
    assert ch["iteration_s"] < ch["ring_iteration_s"]
    assert doc["objective_s"] == ch["iteration_s"]
    r = runner.invoke(app, ["simulate", str(plan), "--design", str(out), "--json"])
    assert r.exit_code == 0, r.output
    sim = json.loads(r.stdout)
    assert sim["iteration_s"] == pytest.approx(doc["objective_s"], rel=1e-9)


def test_packing_lp_limit_keeps_the_rings(petersen, monkeypatch):
    """Issue 29.18: GLOP stopping on its iteration limit (status 4, ABNORMAL) raised a
    RuntimeError through compare/design. Now: a limit before any packing keeps the rings (the
    design and its time unchanged, the record says why); a limit in a later round keeps the
    last optimal master's packing (status lp-limit) at the initial columns' rate or better."""
    import solvers.collectives.blink as blink
    from solvers.collectives.overlay import overlay
    from topoopt.fabrics.direct_connect import direct_connect

    w, p, _ = petersen
    base = topoopt_design(p)
    c = np.array(PETERSEN)
    d = Design(10, 3, B, c, base.rings, base.routing, "x", "feasible", 1.0, 0.0, 0.0, 0.0)
    free, free_info = choose_collectives(d, p, w)
    assert [e["algorithm"] for e in free.collectives] == ["blink"]  # without a limit: Blink
    monkeypatch.setattr(blink, "_solve_status", lambda solver: 4)
    out, info = choose_collectives(d, p, w)
    assert out is d and info["comm_s"] == info["ring_comm_s"] == free_info["ring_comm_s"]
    assert [t["outcome"] for t in info["tried"]] == [
        "rings kept (the tree-packing LP stopped with status 4)"
    ]
    # a limit in round 2: round 1's packing (ring and fewest-hop trees), every weight kept
    calls = []

    def second_fails(solver):
        calls.append(1)
        return 4 if len(calls) > 1 else solver.Solve()

    monkeypatch.setattr(blink, "_solve_status", second_fails)
    ov = overlay(direct_connect(10, 3, circuits=c, port_bandwidth=B))
    pk = blink.pack_trees(ov, "all-reduce")
    assert pk.status == "lp-limit" and pk.iterations == 1 and len(calls) == 2
    per_root: dict = {}
    for t in pk.trees:
        per_root[(t.root, t.inward)] = per_root.get((t.root, t.inward), 0.0) + t.share
    assert len(per_root) == 20 and all(abs(v - 1.0) < 1e-9 for v in per_root.values())
    monkeypatch.undo()
    full = blink.pack_trees(ov, "all-reduce")
    assert 0 < pk.rate <= full.rate * (1 + 1e-9)


def test_deadline_cuts_the_pass_and_says_so(petersen):
    """Issue 29 item 20: the Blink pass honours the search's deadline. A deadline already past:
    nothing is tried, the rings stay, ``time_limit`` says the clock cut it (the search then
    reports ``stopped_by = "time limit"``). A distant one: the same pick as without a deadline
    (each trial simulated in a child process killed at the deadline)."""
    import time

    w, p, d = petersen
    rings = _without_collectives(d)
    known = flow_times(rings, p, w)
    out, info = choose_collectives(rings, p, w, known, deadline=time.perf_counter())
    assert out is rings and out.collectives == ()
    assert info["time_limit"] is True and info["tried"] == []
    assert any("time limit" in s for s in info["skipped"])
    out, info = choose_collectives(rings, p, w, known, deadline=time.perf_counter() + 600)
    assert "time_limit" not in info
    assert [c["algorithm"] for c in out.collectives] == ["blink"]
    assert info["comm_s"] == pytest.approx(d.info["collective_choice"]["comm_s"], rel=1e-12)


def _without_collectives(d: Design) -> Design:
    """``d`` without its collectives (its rings)."""
    from dataclasses import replace

    return replace(d, collectives=())
