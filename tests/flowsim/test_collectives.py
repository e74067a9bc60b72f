"""Collectives as flows: conservation, closed forms, intra-server links, dependencies, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from topoopt.fabrics import direct_connect, fat_tree, ideal
from topoopt.flowsim import simulate
from topoopt.flowsim.collectives import (
    ALGORITHMS,
    MODES,
    collective_flows,
    communication_time,
    flow_template,
)
from topoopt.flowsim.network import DEFAULT_INTRA_BANDWIDTH, FlowBuilder, Network
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.workload import Demand, Workload


def ring_fabric(n: int, bw: float, lat: float):
    """n servers on a bidirectional ring of dedicated circuits (i, i+1)."""
    circuits = [(i, (i + 1) % n) for i in range(n)]
    return direct_connect(n, 2, circuits, port_bandwidth=bw, latency=lat)


def mixed_workload() -> Workload:
    """16 GPUs on 4 servers of 4: every op, groups inside and across servers."""
    rng = np.random.default_rng(3)
    pb = rng.integers(0, 50, (4, 4)).astype(float)
    np.fill_diagonal(pb, 0.0)
    return Workload(
        16,
        4,
        (
            Demand("all-reduce", np.arange(16).reshape(4, 4), 1000.0, "tp", "forward", 3),
            Demand("all-reduce", np.arange(16).reshape(4, 4).T, 800.0, "dp", "backward"),
            Demand("all-reduce", [np.arange(16)], 1600.0, "dp", "backward", 2),
            Demand("all-reduce", [[0, 5, 10]], 900.0, "dp", "backward"),
            Demand("reduce-scatter", [np.arange(8), np.arange(8, 16)], 640.0, "dp", "backward"),
            Demand("all-gather", [np.arange(8), np.arange(8, 16)], 640.0, "dp", "optimizer"),
            Demand("all-to-all", [[0, 4, 8, 12], [1, 5, 9, 13]], 400.0, "ep", "forward", 2),
            Demand(
                "all-to-all",
                [[2, 6, 10, 14]],
                float(pb.sum(1).max()),
                "ep",
                "forward",
                peer_bytes=pb,
            ),
            Demand("broadcast", [[3, 7, 11, 15, 0]], 500.0, "embedding", "forward"),
            Demand("send", [[0, 4], [1, 5], [2, 2 + 12]], 300.0, "pp", "forward", 4),
        ),
    )


@pytest.mark.parametrize(
    ("algorithm", "mode"), [(a, "fluid") for a in ALGORITHMS] + [("ring", "steps")]
)
def test_flows_carry_exactly_wire_bytes(algorithm, mode):
    w = mixed_workload()
    f = collective_flows(w, algorithm=algorithm, mode=mode)
    for i, d in enumerate(w.demands):
        assert f.size[f.demand == i].sum() == pytest.approx(d.wire_bytes(), rel=1e-12)
    assert f.total_bytes() == pytest.approx(w.total_wire_bytes(), rel=1e-12)
    # dependencies point to earlier flows of the same demand and group row
    owner = np.repeat(np.arange(f.n_flows), np.diff(f.dep_ptr))
    assert np.all(f.deps < owner)
    assert np.all(f.demand[f.deps] == f.demand[owner]) and np.all(f.row[f.deps] == f.row[owner])


def test_conservation_on_a_plan_workload_and_in_the_simulation():
    w = workload_from_plan("vgg16-dp")
    f = collective_flows(w)
    assert f.total_bytes() == pytest.approx(w.total_wire_bytes(), rel=1e-12)
    net = Network(ideal(w.servers, gpus_per_server=w.gpus_per_server), w.gpus_per_server)
    sim = simulate(f.flowset(net), record_series=False)
    # every network byte crosses two links (up to the switch, down from it); intra bytes one
    inter = net.server_of(f.src) != net.server_of(f.dst)
    fab = sim.link_bytes[: net.n_fabric_links].sum()
    intra = sim.link_bytes[net.n_fabric_links : net.null_link].sum()
    assert fab == pytest.approx(2 * f.size[inter].sum(), rel=1e-12)
    assert intra == pytest.approx(f.size[~inter].sum(), rel=1e-12)


@pytest.mark.parametrize("g", [2, 3, 5, 8])
def test_lone_all_reduce_matches_closed_form_on_a_switch(g):
    S, B, lat = 3e8, 12.5e9, 1e-6
    w = Workload(g, 1, (Demand("all-reduce", [np.arange(g)], S, "dp", "backward"),))
    t = communication_time(w, ideal(g, port_bandwidth=B, latency=lat)).total_s
    # each member sends 2(g-1)/g*S on its own uplink: the switch is non-blocking; 2 hops
    assert t == pytest.approx(2 * (g - 1) / g * S / B + 2 * lat, rel=1e-12)


@pytest.mark.parametrize("g", [3, 4, 7])
def test_step_synchronous_ring_on_dedicated_links(g):
    S, B, alpha = 7e6, 1e9, 5e-6
    w = Workload(g, 1, (Demand("all-reduce", [np.arange(g)], S, "dp", "backward"),))
    fab = ring_fabric(g, B, alpha)
    steps = communication_time(w, fab, mode="steps").total_s
    assert steps == pytest.approx(2 * (g - 1) * (S / (g * B) + alpha), rel=1e-12)
    fluid = communication_time(w, fab).total_s
    assert fluid == pytest.approx(2 * (g - 1) / g * S / B + alpha, rel=1e-12)
    # reduce-scatter: g-1 steps
    w2 = Workload(g, 1, (Demand("reduce-scatter", [np.arange(g)], S, "dp", "backward"),))
    t = communication_time(w2, fab, mode="steps").total_s
    assert t == pytest.approx((g - 1) * (S / (g * B) + alpha), rel=1e-12)


def test_step_ring_dependencies_against_a_recursion():
    """Heterogeneous member bandwidths: finish[k][j] = max(finish[k-1][j], finish[k-1][j-1]) +
    chunk/B_j + latency, computed by hand and compared with the simulation."""
    g, S, lat = 4, 4e6, 2e-6
    bws = np.array([1e9, 2e9, 0.5e9, 1.5e9])
    w = Workload(g, 1, (Demand("all-reduce", [np.arange(g)], S, "dp", "backward"),))
    f = collective_flows(w, mode="steps")
    net = Network(ring_fabric(g, 1.0, lat))
    fb = FlowBuilder(net)
    # route member j's chunks on a private link of bandwidth bws[j] (its own device link)
    dev = fb.new_devices(g)
    fb.add_links(fb.device_link(dev[f.src]), f.size, after=f.deps, after_ptr=f.dep_ptr)
    fs = fb.build()
    cap = fs.capacity.copy()
    cap[fb.device_link(dev)] = bws
    lat_arr = fs.latency.copy()
    lat_arr[fb.device_link(dev)] = lat
    from dataclasses import replace

    sim = simulate(replace(fs, capacity=cap, latency=lat_arr))
    chunk = S / g
    fin = np.zeros(g)
    for _k in range(2 * (g - 1)):
        fin = np.maximum(fin, np.roll(fin, 1)) + chunk / bws + lat
    assert sim.makespan == pytest.approx(fin.max(), rel=1e-12)
    assert np.sort(sim.finish[-g:]) == pytest.approx(np.sort(fin), rel=1e-12)


def test_two_rings_in_opposite_directions_halve_the_time():
    g, S, B = 6, 6e6, 1e9
    w = Workload(g, 1, (Demand("all-reduce", [np.arange(g)], S, "dp", "backward"),))
    net = Network(ring_fabric(g, B, 0.0))
    orders = np.array([np.arange(g), np.arange(g)[::-1]])
    f = collective_flows(w, ring_orders=orders)
    assert f.n_flows == 2 * g and f.total_bytes() == pytest.approx(2 * (g - 1) * S)
    t = simulate(f.flowset(net)).makespan
    assert t == pytest.approx(2 * (g - 1) / g * (S / 2) / B, rel=1e-12)
    fs = collective_flows(w, ring_orders=orders, mode="steps")
    t = simulate(fs.flowset(net)).makespan
    assert t == pytest.approx(2 * (g - 1) * S / (2 * g * B), rel=1e-12)


def test_hierarchical_uses_the_intra_links_for_its_intra_stage():
    m, k, S = 3, 4, 1.2e7
    B, Bnv, lat = 1e9, 1e11, 1e-6
    gpus = m * k
    w = Workload(gpus, k, (Demand("all-reduce", [np.arange(gpus)], S, "dp", "backward"),))
    f = collective_flows(w, algorithm="hierarchical")
    same = f.src // k == f.dst // k
    assert np.all(same[f.step != 1]) and not np.any(same[f.step == 1])
    fab = ideal(m, port_bandwidth=B, latency=lat, gpus_per_server=k, intra_server_bandwidth=Bnv)
    res = communication_time(w, fab, algorithm="hierarchical")
    net = Network(fab, k)
    lb = res.sim.link_bytes
    intra = lb[net.intra_link(np.arange(gpus))]
    assert intra == pytest.approx(np.full(gpus, 2 * (k - 1) / k * S), rel=1e-12)
    uplinks = lb[fab.link_ids(np.arange(m), np.full(m, m))]
    assert uplinks == pytest.approx(np.full(m, 2 * (m - 1) / m * S), rel=1e-12)
    expect = 2 * (k - 1) / k * S / Bnv + 2 * (m - 1) / m * S / B + 2 * lat
    assert res.total_s == pytest.approx(expect, rel=1e-12)
    # the ring moves S*2(g-1)/g through the intra links and the NICs at once instead
    ring = communication_time(w, fab).total_s
    assert ring == pytest.approx(2 * (gpus - 1) / gpus * S / B * 1 + 2 * lat, rel=1e-12)


def test_intra_server_collective_never_touches_the_fabric():
    w = Workload(8, 8, (Demand("all-reduce", [np.arange(8)], 8e6, "tp", "forward", 5),))
    fab = ideal(1, gpus_per_server=8)
    res = communication_time(w, fab)
    net = Network(fab, 8)
    assert res.sim.link_bytes[: net.n_fabric_links].sum() == 0.0
    assert res.total_s == pytest.approx(5 * 2 * 7 / 8 * 8e6 / DEFAULT_INTRA_BANDWIDTH, rel=1e-12)


def test_phases_run_in_sequence_and_routes_can_be_overridden():
    S, B = 1e6, 1e9
    dems = (
        Demand("send", [[0, 1]], S, "pp", "forward"),
        Demand("send", [[1, 0]], 2 * S, "pp", "backward"),
        Demand("all-gather", [[0, 1, 2, 3]], 4 * S, "dp", "optimizer"),
    )
    w = Workload(4, 1, dems)
    fab = fat_tree(4, port_bandwidth=B, latency=0.0)
    res = communication_time(w, fab)
    # all-gather ring 0->1->2->3->0 in one pod: 0->1 and 2->3 stay under their edge switch, 1->2
    # and 3->0 cross the aggregation layer in opposite directions; no link carries two ring edges,
    # so each edge (3/4 * 4S = 3 MB) runs at the port bandwidth: 3 ms.
    assert res.by_phase["duration_s"].tolist() == pytest.approx([1e-3, 2e-3, 3e-3], rel=1e-12)
    assert res.total_s == pytest.approx(6e-3, rel=1e-12)
    from topoopt.fabrics import routes

    ps = routes(fab, "shortest", pairs=[[0, 1], [1, 0], [1, 2], [2, 3], [3, 0]])
    res2 = communication_time(w, fab, routing=ps)
    assert res2.total_s == pytest.approx(6e-3, rel=1e-12)


def test_templates_every_algorithm_mode_and_size():
    for op, g, alg in itertools.product(
        ("all-reduce", "reduce-scatter", "all-gather", "broadcast", "all-to-all"),
        (2, 3, 4, 6, 8),
        ALGORITHMS,
    ):
        t = flow_template(op, g, 96.0, alg, members_per_server=2 if g % 2 == 0 else None, repeats=3)
        want = 3 * Demand(op, [np.arange(g)], 96.0, "dp", "backward").wire_bytes()
        assert t.bytes.sum() == pytest.approx(want, rel=1e-12), (op, g, alg)
    assert set(MODES) == {"fluid", "steps"}
    t = flow_template("all-reduce", 5, 100.0, mode="steps", repeats=2)
    assert t.n_flows == 2 * 2 * 4 * 5 and t.step.max() == 15


def test_bad_input():
    w = mixed_workload()
    with pytest.raises(InputError, match="algorithm"):
        collective_flows(w, algorithm="butterfly")
    with pytest.raises(InputError, match="mode"):
        collective_flows(w, mode="burst")
    with pytest.raises(InputError, match="mode"):
        collective_flows(w, algorithm="tree", mode="steps")
    with pytest.raises(InputError, match="ring_orders"):
        flow_template("all-reduce", 3, 1.0, ring_orders=[[0, 0, 1]])
    with pytest.raises(InputError, match="classes"):
        collective_flows(w, classes=["zz"])
    with pytest.raises(InputError, match="workload.servers"):
        communication_time(w, ideal(2, gpus_per_server=4))
    with pytest.raises(InputError, match="gpus_per_server"):
        Network(ideal(8), gpus_per_server=2).check_workload(16, 4)
    with pytest.raises(InputError, match="intra_bandwidth"):
        Network(ideal(2), intra_bandwidth=-1.0)
    with pytest.raises(InputError, match="routing"):
        Network(ideal(2), routing="ecmp")


def test_partial_routing_override_falls_back_to_fabric_routes():
    from topoopt.fabrics import routes

    w = mixed_workload()
    fab = ideal(4, gpus_per_server=4)
    full = communication_time(w, fab)
    partial = communication_time(w, fab, routing=routes(fab, pairs=[[0, 1]]))
    assert partial.total_s == pytest.approx(full.total_s, rel=1e-12)
