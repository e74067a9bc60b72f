"""Per-phase routing on fixed circuits (issue 26 item 4, the bubble lever): closed forms on three
servers, the engine's routing epochs against separate simulations, the search's guarantees on a
tiny pipeline plan."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.joint.phase_routing import (
    merge_routing,
    phase_routing,
    route_phase,
    routing_schedule,
)
from solvers.model.design import NodePaths
from solvers.reconfig.schedule import simulate_schedule
from topoopt.fabrics.direct_connect import direct_connect
from topoopt.flowsim.network import FlowBuilder, Network

B = 10.0  # bytes/s per circuit
TRIANGLE = [[0, 1, 1], [1, 2, 1], [0, 2, 1]]
STATIC = NodePaths.from_lists(
    [0, 1, 2], [1, 2, 0], [[([0, 1], 1.0)], [([1, 2], 1.0)], [([2, 0], 1.0)]]
)


def _run(routings, starts, flows):
    """Finish times (latency removed) of ``flows`` ``(src, dst, bytes, after or None)`` on the
    triangle under the routing tables ``routings`` from ``starts``."""
    fab = direct_connect(3, 2, TRIANGLE, B)
    r = routing_schedule(fab, TRIANGLE, routings, starts)
    fb = FlowBuilder(Network(fab, intra_bandwidth=1e9))
    for s, d, b, after in flows:
        if after is None:
            fb.add_ranks([s], [d], [b])
        else:
            fb.add_ranks([s], [d], [b], after=np.array([after]), after_ptr=np.array([0, 1]))
    res = simulate_schedule(fb, r)
    return np.asarray(res.finish), float(fab.latency.max()), res


def test_route_phase_detours_over_the_idle_port_closed_form():
    """1 GB from 0 to 1 on a triangle: statically on its circuit (1 s); routed alone, half over
    the idle detour 0-2-1 (0.5 s); never above the static routing's congestion."""
    m = sp.csr_matrix(([1e9], ([0], [1])), shape=(3, 3))
    r, s0, s1 = route_phase(TRIANGLE, 3, 1e9, m, STATIC)
    assert s0 == 1.0 and s1 == pytest.approx(0.5, rel=1e-6) and s1 <= s0
    paths = dict((tuple(p), w) for p, w in r.to_lists()[0])
    assert set(paths) == {(0, 1), (0, 2, 1)}
    assert paths[(0, 2, 1)] == pytest.approx(0.5, rel=1e-6)
    merged = merge_routing(STATIC, r, 3)
    assert merged.to_lists()[1:] == STATIC.to_lists()[1:]  # other pairs keep their paths


def test_a_pair_the_static_routing_leaves_out_starts_on_its_shortest_path():
    """1 GB from 0 to 2, a pair the static table does not route (the flow model gives it ECMP
    over its shortest path, the circuit 0-2: 1 s); routed, half over the detour 0-1-2."""
    m = sp.csr_matrix(([1e9], ([0], [2])), shape=(3, 3))
    r, s0, s1 = route_phase(TRIANGLE, 3, 1e9, m, STATIC)
    assert s0 == 1.0 and s1 == pytest.approx(0.5, rel=1e-6)
    paths = dict((tuple(p), w) for p, w in r.to_lists()[0])
    assert set(paths) == {(0, 2), (0, 1, 2)}
    assert paths[(0, 1, 2)] == pytest.approx(0.5, rel=1e-6)


def test_pipeline_send_then_ring_closed_form():
    """A pipeline send 0 -> 1 of 60 bytes, then a ring (0->1, 1->2, 2->0, 30 bytes each) after
    it. Static routing (every pair on its circuit): 60/10 + 30/10 = 9 s, the ports 0->2 and
    2->1 idle during the send. Per phase (the send split over its circuit and the idle
    detour 0-2-1 until the reference's phase boundary, 6 s; the static table after): the send
    ends at 3 s; the ring's 0->1 starts on the split table (15 + 15 bytes, 1.5 s) and 1->2,
    2->0 run on their circuits (30/10): last byte at 6 s. The idle port 0->2 carries 30 + 15
    bytes."""
    send = NodePaths.from_lists([0], [1], [[([0, 1], 0.5), ([0, 2, 1], 0.5)]])
    split = merge_routing(STATIC, send, 3)
    flows = [(0, 1, 60.0, None), (0, 1, 30.0, 0), (1, 2, 30.0, 0), (2, 0, 30.0, 0)]
    f_static, lat, r_static = _run((STATIC,), (0.0,), flows)
    f_phase, _, r_phase = _run((split, STATIC), (0.0, 6.0), flows)
    assert f_static.max() == pytest.approx(9.0 + 2 * lat, rel=1e-12)
    assert f_phase[0] == pytest.approx(3.0 + 2 * lat, rel=1e-12)
    assert f_phase[1] == pytest.approx(4.5 + 4 * lat, rel=1e-9)
    assert f_phase.max() == pytest.approx(6.0 + lat + lat * 2, rel=1e-9)
    fab = direct_connect(3, 2, TRIANGLE, B)
    l02 = int(np.flatnonzero((fab.src == 0) & (fab.dst == 2))[0])
    assert r_static.link_bytes[l02] == 0.0
    assert r_phase.link_bytes[l02] == pytest.approx(45.0, rel=1e-12)


@pytest.mark.parametrize("t1", [2.0, 7.0])
def test_routing_change_zero_delay_equals_separate_simulations(t1):
    """A change of routing with no dark time is exact: the send of 60 bytes on its circuit
    until ``t1`` (10 t1 bytes), then split on two disjoint paths, ends at t1 + (60 - 10 t1) /
    20, what a simulation of the rest alone on the split table gives after ``t1``; past its
    end (t1 = 7) the change does nothing and the run equals the static one."""
    send = NodePaths.from_lists([0], [1], [[([0, 1], 0.5), ([0, 2, 1], 0.5)]])
    split = merge_routing(STATIC, send, 3)
    f, lat, _ = _run((STATIC, split), (0.0, t1), [(0, 1, 60.0, None)])
    alone, _, _ = _run((STATIC,), (0.0,), [(0, 1, 60.0, None)])
    if t1 >= 6.0:
        assert f[0] == alone[0]
        return
    rest, _, _ = _run((split,), (0.0,), [(0, 1, 60.0 - B * t1, None)])
    assert f[0] - 2 * lat == pytest.approx(t1 + (rest[0] - 2 * lat), rel=1e-12)
    assert f[0] - 2 * lat == pytest.approx(t1 + (60.0 - B * t1) / 20.0, rel=1e-12)


def test_phase_routing_never_slower_and_exact_on_a_tiny_pipeline():
    """GPT-style pipeline (pp 2, dp 2) on 4 servers, 2 ports each (a TopoOpt design): the
    chosen routing schedule's iteration is the minimum of every simulated choice, at most the
    static routing's, and re-simulated alone gives the same number; the same call gives the
    same result (deterministic)."""
    from solvers import DesignProblem, design_fabric, design_workload, solve
    from solvers.joint.phase_routing import simulate_routing_schedule
    from traffic.build import workload_from_plan

    model = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
             "global_batch": 16}  # fmt: skip
    wl = workload_from_plan({
        "model": model,
        "parallelism": {"tp": 1, "pp": 2, "dp": 2, "micro_batch_size": 1,
                        "global_batch_size": 16},
        "cluster": {"servers": 4, "gpus_per_server": 1},
    })  # fmt: skip
    problem = DesignProblem.from_workload(wl, degree=2, link_bandwidth=12.5e9)
    design = solve(problem, "topoopt", seed=0)
    fab = design_fabric(design, gpus_per_server=1)
    w = design_workload(wl, design, problem)
    res = phase_routing(w, design, fab)
    again = phase_routing(w, design, fab)
    assert res.iteration_s == again.iteration_s and res.choice == again.choice
    assert any(res.choice) and res.iteration_s < res.static_iteration_s  # 1.30 -> 0.74 ms
    finite = [v for v in res.info["by_choice"].values() if np.isfinite(v)]
    assert res.iteration_s == min(finite) <= res.static_iteration_s
    assert res.info["by_choice"]["S" * len(res.phases)] == res.static_iteration_s
    assert all(r <= s for s, r in res.congestion)
    starts = [p.start_s for p in res.phases]
    run = simulate_routing_schedule(w, fab, design.circuits.rows, res.routings, starts)
    assert run.iteration_s == res.iteration_s


def test_one_table_over_the_memory_budget_runs_as_one_epoch(monkeypatch):
    """A single routing table whose plain simulation the memory budget refuses runs as one
    epoch of the time-varying engine: the same iteration."""
    import solvers.joint.phase_routing as pr
    from solvers import DesignProblem, design_fabric, design_workload, solve
    from traffic.build import workload_from_plan
    from traffic.errors import InputError

    wl = workload_from_plan("vgg16-dp")
    problem = DesignProblem.from_workload(wl, degree=2, link_bandwidth=12.5e9)
    design = solve(problem, "topoopt", seed=0)
    fab = design_fabric(design, gpus_per_server=wl.gpus_per_server)
    w = design_workload(wl, design, problem)
    args = (w, fab, design.circuits.rows, (design.routing,), (0.0,))
    plain = pr.simulate_routing_schedule(*args).iteration_s

    def refuse(*a, **k):
        raise InputError("flows", "many sub-flows", "fewer")

    monkeypatch.setattr(pr, "_plain", refuse)
    assert pr.simulate_routing_schedule(*args).iteration_s == pytest.approx(plain, rel=1e-9)
