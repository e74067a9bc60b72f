"""In-network aggregation (topoopt.flowsim.ina): bytes per host link, closed forms, the memory
budget's fallback, the INA fabrics through compare / simulate and their CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.studies.compare import compare
from topoopt.fabrics import leaf_spine
from topoopt.fabrics.cost import cost
from topoopt.flowsim.collectives import collective_flows, communication_time
from topoopt.flowsim.ina import (
    ATP_MEMORY_BYTES,
    ina_family_fits,
    ina_share,
    window_bytes,
    with_ina,
)
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.network import FlowBuilder, Network
from traffic.load import load_workload
from traffic.workload import Demand, Workload

B = 1e9
S = 8e6


def _dp(servers: int, gps: int = 1, size: float = S) -> Workload:
    return Workload(
        servers * gps,
        gps,
        (Demand("all-reduce", [list(range(servers * gps))], size, "dp", "backward"),),
    )


def _fabric(servers=16, hosts=4, latency=0.0, **ina):
    f = leaf_spine(servers, radix=2 * hosts, leaf_hosts=hosts, port_bandwidth=B, latency=latency)
    return f if ina.pop("plain", False) else with_ina(f, **ina)


def _host_link_bytes(w: Workload, fab) -> tuple[np.ndarray, np.ndarray]:
    """Bytes each server sends on its uplink and receives on its downlink (per-flow paths)."""
    net = Network(fab, w.gpus_per_server)
    cf = collective_flows(w, network=net)
    fb = FlowBuilder(net)
    cf.add_to(fb)
    fs = fb.build()
    load = np.zeros(fs.capacity.shape[0])
    for f in range(fs.n_flows):
        for p in range(fs.flow_ptr[f], fs.flow_ptr[f + 1]):
            links = fs.path_links[fs.path_ptr[p] : fs.path_ptr[p + 1]]
            load[links] += fs.size[f] * fs.weight[p]
    n = fab.n_servers
    up = np.zeros(n)
    down = np.zeros(n)
    lf = slice(0, fab.n_links)
    src, dst, ld = fab.src, fab.dst, load[lf]
    np.add.at(up, src[src < n], ld[src < n])
    np.add.at(down, dst[dst < n], ld[dst < n])
    return up, down


@pytest.mark.parametrize("g", [4, 16])
def test_each_host_sends_and_receives_S_once_ring_twice(g):
    w = _dp(g)
    up, down = _host_link_bytes(w, _fabric(g))
    assert np.allclose(up, S) and np.allclose(down, S)
    ring_up, ring_down = _host_link_bytes(w, _fabric(g, plain=True))
    assert np.allclose(ring_up, 2 * (g - 1) / g * S) and np.allclose(ring_down, ring_up)


def test_a_fraction_splits_the_bytes_between_the_tree_and_the_ring():
    g, f = 8, 0.25
    w = _dp(g)
    up, down = _host_link_bytes(w, _fabric(g, fraction=f))
    want = f * S + (1 - f) * 2 * (g - 1) / g * S
    assert np.allclose(up, want) and np.allclose(down, want)


def test_hybrid_ina_picks_its_fastest_configuration():
    # never slower than the hybrid (configuration 0 is the hybrid); the split pays on pure DP
    for plan, most in (("vgg16-dp", 0.9), ("dlrm", 1.0)):
        r = compare(load_workload(plan), ["hybrid", "hybrid-ina"])
        t = r.table.set_index("fabric")
        ratio = t.loc["hybrid-ina", "comm_alone_s"] / t.loc["hybrid", "comm_alone_s"]
        assert ratio <= most * (1 + 1e-9), (plan, ratio)
        if plan == "vgg16-dp":
            run = next(x for x in r.runs if x.name == "hybrid-ina")
            assert 0.5 < run.fabric.params["ina_fraction"] < 1.0 and "circuits" in run.note


def test_gpus_per_server_reduce_inside_then_send_S_per_server():
    w = _dp(8, gps=4)
    up, down = _host_link_bytes(w, _fabric(8))
    assert np.allclose(up, S) and np.allclose(down, S)


@pytest.mark.parametrize("servers,hosts", [(16, 4), (8, 8), (12, 4)])
def test_closed_form_S_over_B_on_a_full_fat_tree(servers, hosts):
    # one ToR (8, 8) or a spine root; full bisection: every link carries at most S
    w = _dp(servers)
    t = communication_time(w, _fabric(servers, hosts)).total_s
    assert t == pytest.approx(S / B, rel=1e-9)
    ring = communication_time(w, _fabric(servers, hosts, plain=True)).total_s
    assert ring == pytest.approx(2 * (servers - 1) / servers * S / B, rel=1e-9)


def test_latency_adds_the_longest_flow_path():
    w = _dp(16)
    t = communication_time(w, _fabric(16, latency=1e-6)).total_s
    assert t == pytest.approx(S / B + 1e-6, rel=1e-9)  # every flow is one link


def test_window_is_the_bandwidth_delay_product_and_the_budget_decides():
    fab = _fabric(16, latency=1e-6)
    assert window_bytes(fab, 0, 2) == pytest.approx(B * 4e-6)
    net = Network(fab)
    rows = np.arange(16)[None, :]
    assert ina_family_fits(net, rows)
    # 4 ToRs + 1 root each hold 4 KB: a 4 KB budget fits, one byte less does not
    assert ina_family_fits(Network(_fabric(16, latency=1e-6, memory_bytes=4000.0)), rows)
    assert not ina_family_fits(Network(_fabric(16, latency=1e-6, memory_bytes=3999.0)), rows)


def test_budget_too_small_falls_back_to_the_host_algorithm_exactly():
    w = load_workload("vgg16-dp")
    fab = leaf_spine(16, radix=16, leaf_hosts=4, port_bandwidth=100e9)
    small = with_ina(fab, memory_bytes=1.0)
    assert not ina_family_fits(Network(fab, 8), w.demands[0].groups)  # not programmable
    assert not ina_family_fits(Network(small, 8), w.demands[0].groups)
    plain = communication_time(w, fab)
    fallback = communication_time(w, small)
    assert fallback.total_s == plain.total_s
    assert fallback.flows.total_bytes() == plain.flows.total_bytes() == w.total_wire_bytes()
    it_p, it_f = simulate_iteration(w, fab), simulate_iteration(w, small)
    assert it_f.iteration_s == it_p.iteration_s
    # ATP's 5.12 MB budget serves it: S up, S down per server instead of ~2S
    big = communication_time(w, with_ina(fab, memory_bytes=ATP_MEMORY_BYTES))
    assert big.total_s < 0.6 * plain.total_s


def test_a_family_of_many_groups_shares_the_memory():
    fab = _fabric(16, window=1000.0, memory_bytes=3500.0)
    net = Network(fab)
    three = np.array([[0, 4], [1, 5], [2, 6]])  # three groups through ToRs 0 and 1
    assert ina_family_fits(net, three)  # ToR 0 holds 3 x 1,000 <= 3,500
    four = np.r_[three, [[3, 7]]]
    assert not ina_family_fits(net, four)  # 4,000 > 3,500: best effort, 7/8 of the fragments
    assert ina_share(net, four) == pytest.approx(3500.0 / 4000.0)
    # fewer bytes than one aggregator (128 B) per group: nothing in the network
    assert ina_share(Network(_fabric(16, window=1000.0, memory_bytes=511.0)), four) == 0.0


def test_partial_memory_aggregates_its_share_and_the_host_ring_the_rest():
    g = 8
    w = _dp(g)
    # 2 ToRs + a root, one group: each needs one window; half a window of memory -> half
    up, down = _host_link_bytes(w, _fabric(g, window=2000.0, memory_bytes=1000.0))
    want = 0.5 * S + 0.5 * 2 * (g - 1) / g * S
    assert np.allclose(up, want) and np.allclose(down, want)
    # and it is faster than the ring, slower than the full tree
    t = [
        communication_time(w, _fabric(g, window=2000.0, memory_bytes=m)).total_s
        for m in (0.0, 1000.0, 2000.0)
    ]
    assert t[0] > t[1] > t[2]


def test_reduce_scatter_and_one_server_groups_keep_the_host_algorithm():
    fab = _fabric(4, hosts=2)
    w = Workload(
        8,
        2,
        (
            Demand("reduce-scatter", [list(range(8))], S, "dp", "backward"),
            Demand("all-reduce", [[0, 1], [2, 3]], S, "tp", "forward"),
        ),
    )
    cf = collective_flows(w, network=Network(fab, 2))
    assert cf.total_bytes() == pytest.approx(w.total_wire_bytes())


def test_ina_pure_data_parallel_at_most_0_6_of_the_fat_tree_and_priced_programmable():
    w = load_workload("vgg16-dp")
    r = compare(w, ["fat-tree", "fat-tree-ina"], degree=8, link_bandwidth=12.5e9)
    t = r.table.set_index("fabric")
    ratio = t.loc["fat-tree-ina", "comm_alone_s"] / t.loc["fat-tree", "comm_alone_s"]
    assert ratio <= 0.6
    # on a full-bisection fabric with k GPUs per server the bound is S / NIC: ratio ~ g/(2(g-1))
    assert ratio == pytest.approx(0.5, abs=0.01)
    assert t.loc["fat-tree-ina", "iteration_s"] < t.loc["fat-tree", "iteration_s"]
    ft = next(x for x in r.runs if x.name == "fat-tree-ina")
    bom = cost(ft.fabric).bom
    assert any(k.startswith("programmable_switch_port_") for k in bom)
    assert not any(k.startswith("switch_port_") for k in bom)
    assert t.loc["fat-tree-ina", "capex_usd"] > t.loc["fat-tree", "capex_usd"]
    assert sum(t.loc["fat-tree-ina", "capex_breakdown"].values()) == pytest.approx(
        t.loc["fat-tree-ina", "capex_usd"]
    )


def test_ina_on_the_vgg16_task_graph_at_most_0_6_of_the_fat_tree():
    w = load_workload("tests/data/topoopt-taskgraphs/100vgg_16.fbuf")
    t = compare(w, ["fat-tree", "fat-tree-ina"]).table.set_index("fabric")
    ratio = t.loc["fat-tree-ina", "comm_alone_s"] / t.loc["fat-tree", "comm_alone_s"]
    assert 0.45 <= ratio <= 0.6  # 16 servers, one GPU each: g / (2 (g-1)) = 0.533 at most


def test_ina_never_beats_its_own_bound_S_over_nic():
    # the ideal *host-based* switch is no bound for INA; each server must still send S and
    # receive S over its NIC, so S / B_nic is
    for servers, hosts in ((8, 4), (16, 4), (12, 4)):
        for size in (1e5, 3e6):
            w = _dp(servers, size=size)
            t = communication_time(w, _fabric(servers, hosts, latency=1e-6)).total_s
            assert t >= size / B * (1 - 1e-12)


@pytest.mark.parametrize("servers,gps,hosts", [(4, 2, 2), (8, 1, 4), (12, 4, 4), (16, 8, 8)])
def test_ina_never_slower_than_the_ring_on_full_bisection_and_within_its_bound(servers, gps, hosts):
    w = _dp(servers, gps=gps)
    ring = communication_time(w, _fabric(servers, hosts, latency=1e-6, plain=True)).total_s
    ina = communication_time(w, _fabric(servers, hosts, latency=1e-6)).total_s
    g = servers * gps
    assert ina <= ring
    assert ina >= S / B * (1 - 1e-12)  # S up and S down per NIC
    # the intra-server stage (NVLink, 300 GB/s) streams beside the NIC's S / B
    intra = 2 * (gps - 1) / gps * S / 300e9
    assert ina == pytest.approx(max(S / B, intra) + 1e-6, rel=1e-6), (g, ina)


def test_programmable_port_prices_have_sources_and_pass_the_schema():
    from topoopt.fabrics.cost import load_prices
    from topoopt.fabrics.price_schema import validate_price_table
    from traffic.errors import InputError

    table = load_prices()
    for gbps in (10, 25, 40, 100, 200, 400, 800):
        prog, fixed = table.unit("programmable_switch_port", gbps), table.unit("switch_port", gbps)
        assert prog[0] > fixed[0] and prog[1] > fixed[1]
        assert table.source_of("programmable_switch_port", gbps)
    ok = {"programmable_switch_port": {100: {"capex_usd": 300, "power_w": 9}}}
    assert validate_price_table(ok, "p.yaml")["programmable_switch_port"][100.0]["capex_usd"] == 300
    with pytest.raises(InputError, match="programmable_switch_port"):
        validate_price_table({"programmable_switch_port": {100: {"capex_usd": "3"}}}, "p.yaml")


runner = CliRunner()


@pytest.mark.parametrize("fabric", ["fat-tree-ina", "hybrid-ina"])
def test_cli_simulate_and_compare_take_the_ina_fabrics(fabric):
    r = runner.invoke(app, ["simulate", "vgg16-dp", "--fabric", fabric, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["fabric"] == fabric and out["comm_alone_s"] > 0
    r = runner.invoke(app, ["compare", "vgg16-dp", "--fabrics", f"fat-tree,{fabric}", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert fabric in json.dumps(doc)
