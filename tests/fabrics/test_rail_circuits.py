"""Rail-aligned circuits (topoopt.fabrics.rail_circuits, solvers.rail_design): the structure,
the bill of materials by hand, the NVLink charge in closed form, and a tiny simulation against
a brute-force max-min derivation."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from solvers.rail_design import backbone_cycle, design_rail_circuits, rail_demands
from topoopt.fabrics.cost import bill_of_materials, cost, load_prices
from topoopt.fabrics.rail import link_rails
from topoopt.fabrics.rail_circuits import nic_node, rail_circuit_rows, rail_circuits
from topoopt.flowsim import simulate
from topoopt.flowsim.network import FlowBuilder, Network
from traffic.errors import InputError
from traffic.workload import Demand, Workload


def _megatron(servers=6, g=2):
    """TP inside each server, one DP ring per GPU index across the servers, a pipeline send
    from every server to the next (GPU i -> GPU i): every rail's matrix the same."""
    ranks = np.arange(servers * g).reshape(servers, g)
    dp = Demand("all-reduce", ranks.T, 12.0, "dp", "backward")
    pp = Demand("send", np.column_stack([ranks[:-1].ravel(), ranks[1:].ravel()]), 3.0, "pp",
                "forward", mutable=False)  # fmt: skip
    tp = Demand("all-reduce", ranks, 50.0, "tp", "forward")
    return Workload(servers * g, g, (dp, pp, tp))


def test_structure_equal_nic_indices_and_degrees():
    wl = _megatron(6, 2)
    d = design_rail_circuits(wl, 4)
    f = rail_circuits(d.circuits, 6, rails=2, ports_per_nic=4, nic_bandwidth=10.0,
                      gpus_per_server=2)  # fmt: skip
    n, g = 6, 2
    # every circuit joins NIC k of one server to NIC k of another, the same circuits per rail
    opt = f.link_kind == "optical"
    a, b = f.src[opt] - n, f.dst[opt] - n
    assert np.all(a // n == b // n) and np.all(a % n != b % n)
    rows = rail_circuit_rows(f)
    per_rail = [rows[rows[:, 0] == k][:, 1:].tolist() for k in range(g)]
    assert per_rail[0] == per_rail[1] == d.circuits.rows.tolist()
    # lanes: each NIC uses at most 4, and the backbone makes every rail connected
    lanes = np.bincount(f.src[opt], f.multiplicity[opt], f.n_nodes)[n : n + n * g]
    assert lanes.max() <= 4 and lanes.min() >= 2
    for k in range(g):
        gr = nx.MultiGraph()
        gr.add_nodes_from(range(n))
        gr.add_edges_from((u, v) for _, u, v, c in rows[rows[:, 0] == k] for _ in range(c))
        assert nx.is_connected(gr)
    # one host link per server and rail each way, named by link_rails; circuits are no rail link
    lr = link_rails(f)
    host = f.link_kind == "intra-server"
    assert np.all(lr[~host] == -1)
    up = host & (f.src < n)
    pairs = sorted(zip(f.src[up].tolist(), lr[up].tolist(), strict=True))
    assert pairs == list(itertools.product(range(n), range(g)))
    assert np.all(f.dst[up] == nic_node(n, f.src[up], lr[up]))
    # the DP rings (12 B x 2 (n-1)/n per neighbour) and the pipeline all direct at 4 lanes
    assert d.rails_identical and d.gap == 0.0


def test_bill_of_materials_by_hand():
    f = rail_circuits([(0, 1), (1, 2), (2, 0)], 3, rails=8, ports_per_nic=2, nic_bandwidth=50e9)
    # 3 servers x 8 NICs: 24 NIC ports and 24 400 G modules; 2 lanes a NIC: 48 fibres and
    # 48 patch-panel ports on 8 panels (one a rail); no switch for the NIC nodes
    assert bill_of_materials(f) == {
        "nic_port_400G": 24, "transceiver_400G": 24, "fibre": 48, "patch_panel": 8,
        "patch_panel_port": 48,
    }  # fmt: skip
    t = load_prices()
    hand = sum(
        k * np.array(t.unit(item, gbps))
        for item, gbps, k in [
            ("nic_port", 400.0, 24), ("transceiver", 400.0, 24), ("fibre", None, 48),
            ("patch_panel_port", None, 48),
        ]
    )  # fmt: skip
    r = cost(f, t)
    assert (r.capex_usd, r.power_w) == pytest.approx(tuple(hand), rel=1e-12)
    o = rail_circuits([(0, 1), (1, 2), (2, 0)], 3, rails=8, ports_per_nic=2, device="ocs")
    assert bill_of_materials(o)["ocs_port"] == 48 and bill_of_materials(o)["ocs"] == 8


def test_refusals():
    with pytest.raises(InputError, match="ports_per_nic"):
        rail_circuits([(0, 1)], 2, rails=2, ports_per_nic=1)
    with pytest.raises(InputError, match="ports_per_nic"):
        rail_circuits([(0, 1), (0, 1), (0, 1)], 2, rails=2, ports_per_nic=2)


def _pair_net(nic=10.0, nvlink=4.0):
    # 2 servers, 2 rails, 2 lanes a NIC of 5 B/s, both lanes between the two NICs of a rail
    f = rail_circuits([(0, 1, 2)], 2, rails=2, ports_per_nic=2, nic_bandwidth=nic, latency=0.0,
                      gpus_per_server=2)  # fmt: skip
    return Network(f, gpus_per_server=2, intra_bandwidth=nvlink)


def test_cross_rail_flow_takes_the_nvlink_hop():
    # A: GPU 0 -> GPU 3 (server 1, GPU 1): NIC 0 out (10), the rail-0 bundle (2 x 5), NIC 0
    # in, then GPU (1, 0)'s NVLink (4). C: GPU 0 -> GPU 2 (same rail). They share the host
    # link of NIC 0: max-min gives A 4 and C 6; C ends at 40/6 s, A then alone at 4: 10 s.
    net = _pair_net()
    assert net.rail_routing
    fb = FlowBuilder(net)
    fb.add_ranks([0, 0], [3, 2], [40.0, 40.0])
    assert simulate(fb.build()).finish.tolist() == pytest.approx([10.0, 40.0 / 6.0], rel=1e-12)
    ps, k = net.rail_paths([0], [1], [0 * 2 + 1])
    links = ps.path_links[ps.path_ptr[0] : ps.path_ptr[1]]
    assert links[-1] == net.n_fabric_links + 2 + 0  # the egress link of GPU (1, 0)


def _max_min_finish(paths, caps, sizes):
    """Brute force: every path of a flow a sub-flow of ``weight x size`` bytes (the flow
    model's multipath rule), progressive filling over the active sub-flows epoch by epoch, a
    flow done when its last sub-flow is (an independent oracle for the flow model)."""
    subs = [(f, w * sizes[f], links) for f, pl in enumerate(paths) for w, links in pl]
    left = np.array([s for _, s, _ in subs], float)
    t, done = 0.0, np.zeros(len(subs))
    active = set(range(len(subs)))
    while active:
        rate, frozen, cap = dict.fromkeys(active, 0.0), set(), dict(caps)
        while len(frozen) < len(active):
            free = [s for s in active if s not in frozen]
            users = {e: sum(e in subs[s][2] for s in free) for e in cap}
            inc = min(cap[e] / k for e, k in users.items() if k)
            for s in free:
                rate[s] += inc
            for e, k in users.items():
                cap[e] -= inc * k
            frozen |= {s for s in free if any(cap[e] <= 1e-12 for e in subs[s][2])}
        dt = min(left[s] / rate[s] for s in active)
        t += dt
        for s in list(active):
            left[s] -= rate[s] * dt
            if left[s] <= 1e-9:
                done[s] = t
                active.discard(s)
    return np.array([max(done[s] for s in range(len(subs)) if subs[s][0] == f)
                     for f in range(len(paths))])  # fmt: skip


def test_tiny_simulation_against_brute_force():
    # 4 servers, 2 rails, a ring 0-1-2-3-0 on every rail, 2 lanes of 5 B/s, NIC 10, NVLink 4
    n, g = 4, 2
    ring = [(0, 1), (1, 2), (2, 3), (3, 0)]
    f = rail_circuits(ring, n, rails=g, ports_per_nic=2, nic_bandwidth=10.0, latency=0.0,
                      gpus_per_server=g)  # fmt: skip
    net = Network(f, gpus_per_server=g, intra_bandwidth=4.0)
    flows = [(0, 4, 40.0), (2, 6, 40.0), (1, 5, 30.0), (0, 7, 20.0)]  # (src rank, dst rank, B)
    fb = FlowBuilder(net)
    fb.add_ranks([a for a, _, _ in flows], [b for _, b, _ in flows], [s for *_, s in flows])
    got = simulate(fb.build()).finish
    # the oracle: server-level rail graph, every shortest path of the rail equally weighted,
    # host links of 10 at both ends, the destination GPU i's NVLink when the rails differ
    ring_g = nx.Graph(ring)
    caps = {("lane", k, u, v): 5.0 for k in range(g) for a, b in ring for u, v in ((a, b), (b, a))}
    caps |= {(d, k, s): 10.0 for d in ("up", "down") for k in range(g) for s in range(n)}
    caps |= {("nv", r): 4.0 for r in range(n * g)}
    paths = []
    for a, b, _ in flows:
        (u, i), (v, j) = divmod(a, g), divmod(b, g)
        sps = list(nx.all_shortest_paths(ring_g, u, v))
        pl = []
        for p in sps:
            links = [("up", i, u), ("down", i, v)]
            links += [("lane", i, x, y) for x, y in itertools.pairwise(p)]
            if i != j:
                links.append(("nv", v * g + i))
            pl.append((1.0 / len(sps), links))
        paths.append(pl)
    want = _max_min_finish(paths, caps, [s for *_, s in flows])
    assert got.tolist() == pytest.approx(want.tolist(), rel=1e-9)


def test_rail_demands_and_backbone():
    wl = _megatron(4, 2)
    dem = rail_demands(wl)
    from traffic.expand import expand

    pt = expand(wl, "ring", "server")
    inter = sp.csr_matrix(pt.matrix())
    inter.setdiag(0)
    assert sum(m.sum() for m in dem) == pytest.approx(inter.sum(), rel=1e-12)
    assert (dem[0] != dem[1]).nnz == 0
    # a ring's weights give the ring back; no weights: the servers in order
    w = sp.csr_matrix(([1.0] * 4, ([0, 1, 2, 3], [2, 3, 1, 0])), shape=(4, 4))
    cyc = backbone_cycle(w + w.T, 4)
    assert sorted(map(sorted, cyc.tolist())) == [[0, 2], [0, 3], [1, 2], [1, 3]]
    assert backbone_cycle(sp.csr_matrix((3, 3)), 3).tolist() == [[0, 1], [1, 2], [2, 0]]
