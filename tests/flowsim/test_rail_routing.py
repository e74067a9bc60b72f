"""Rail routing: GPU i's traffic leaves on NIC i, and a flow to GPU j != i on a rail-only fabric
crosses the destination server's scale-up fabric from GPU i to GPU j (hand-computed cases)."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.fabrics import rail_optimized
from topoopt.fabrics.fat_tree import clos_shape
from topoopt.fabrics.rail import link_rails, rail_only
from topoopt.flowsim import simulate
from topoopt.flowsim.network import FlowBuilder, Network
from traffic.errors import InputError


def _net(nic=10.0, nvlink=4.0, **kw):
    f = rail_only(clos_shape(2, 8, pack=True), 2, nic, latency=0.0)
    return Network(f, gpus_per_server=2, intra_bandwidth=nvlink, **kw)


def test_cross_rail_flow_takes_the_nvlink_hop():
    # ranks 0, 1 on server 0 and 2, 3 on server 1; NIC 10 B/s, NVLink 4 B/s.
    # A: GPU 0 -> GPU 3 (other rail): NIC 0 out, rail 0, NIC 0 in, NVLink (1,0)->(1,1): at most 4.
    # C: GPU 0 -> GPU 2 (same rail): NIC 0 out and in. They share NIC 0 (capacity 10): max-min
    # gives A 4 (its NVLink) and C 6; C ends at 40/6 s, then A alone still at 4: 10 s.
    net = _net()
    assert net.rail_routing
    fb = FlowBuilder(net)
    fb.add_ranks([0, 0], [3, 2], [40.0, 40.0])
    fin = simulate(fb.build()).finish
    assert fin.tolist() == pytest.approx([10.0, 40.0 / 6.0], rel=1e-12)


def test_each_gpu_uses_its_own_nic():
    # GPU 0 -> GPU 2 and GPU 1 -> GPU 3: one rail each, 10 B/s each, no NVLink: 4 s both.
    # Two flows from GPU 0 share NIC 0: 8 s; without rails (spread on both NICs) it would be
    # 4 s: the rails are what make it 8.
    fb = FlowBuilder(_net())
    fb.add_ranks([0, 1], [2, 3], [40.0, 40.0])
    assert simulate(fb.build()).finish.tolist() == pytest.approx([4.0, 4.0])
    fb = FlowBuilder(_net())
    fb.add_ranks([0, 0], [2, 2], [40.0, 40.0])
    assert simulate(fb.build()).finish.tolist() == pytest.approx([8.0, 8.0])
    fb = FlowBuilder(_net(rail_routing=False))
    fb.add_ranks([0, 0], [2, 2], [40.0, 40.0])
    assert simulate(fb.build()).finish.tolist() == pytest.approx([4.0, 4.0])


def test_paths_by_hand_on_both_rail_fabrics():
    net = _net()
    lr = link_rails(net.fabric)
    ps, k = net.rail_paths([0, 0, 0], [1, 1, 1], [0, 1, 3])  # rails 0->0, 0->1, 1->1
    for c, (i, j) in zip(k, [(0, 0), (0, 1), (1, 1)], strict=True):
        for p in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1]):
            links = ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]]
            assert lr[links[0]] == i
            if i == j:
                assert links.size == 2 and lr[links[-1]] == j
            else:  # the hop: the egress link of GPU (1, i), intra link Lf + 1 * 2 + i
                assert lr[links[-2]] == i and links[-1] == net.n_fabric_links + 2 + i
    # a rail-optimised Clos with a spine reaches NIC j directly: no hop
    f = rail_optimized(32, gpus_per_server=4, radix=16)
    net = Network(f, gpus_per_server=4)
    lr = link_rails(f)
    ps, k = net.rail_paths([0], [31], [0 * 4 + 3])
    links = [ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]] for p in range(ps.n_paths)]
    assert all(lr[x[0]] == 0 and lr[x[-1]] == 3 and x[-1] < f.n_links for x in links)
    assert np.isclose(ps.weight.sum(), 1.0)


def test_rail_routing_needs_a_rail_fabric():
    from topoopt.fabrics import ideal

    with pytest.raises(InputError, match="rail_routing"):
        Network(ideal(2), gpus_per_server=2, rail_routing=True)
    assert not Network(ideal(2), gpus_per_server=2).rail_routing


def test_iteration_on_rails_merges_exactly():
    # tp 2 inside a server, dp rings that cross rails (ranks 2 -> 4 is GPU 2 -> GPU 0), pipeline
    # sends on one rail: merging identical flows (rail-aware) gives the unmerged iteration
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    w = workload_from_plan(
        {"model": {"base": "llama3-8b", "layers": 4, "global_batch": 8, "seq_len": 512},
         "parallelism": {"tp": 2, "pp": 2, "dp": 4},
         "cluster": {"servers": 4, "gpus_per_server": 4}}
    )  # fmt: skip
    f = rail_only(clos_shape(4, 8, pack=True), 4, 12.5e9)
    a = simulate_iteration(w, f, exposed_by_class=False)
    b = simulate_iteration(w, f, exposed_by_class=False, aggregate=False)
    assert a.iteration_s == pytest.approx(b.iteration_s, rel=1e-9)
    assert a.iteration_s > a.compute_s


def test_same_rail_families_merge_into_one_flow_exactly():
    # tp 4 fills a server: pipeline sends and dp rings join GPU i to GPU i, one family per rail.
    # On rails each GPU uses its own NIC; merged into one flow per family spread evenly over
    # the rails (SAME_RAIL) this is the old server-level model exactly, with as many flows.
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    w = workload_from_plan(
        {"model": {"base": "llama3-8b", "layers": 4, "global_batch": 8, "seq_len": 512},
         "parallelism": {"tp": 4, "pp": 2, "dp": 2},
         "cluster": {"servers": 4, "gpus_per_server": 4}}
    )  # fmt: skip
    f = rail_only(clos_shape(4, 8, pack=True), 4, 12.5e9)
    on = simulate_iteration(w, f, exposed_by_class=False)
    off = simulate_iteration(w, f, exposed_by_class=False, rail_routing=False)
    assert on.iteration_s == pytest.approx(off.iteration_s, rel=1e-9)
    assert on.info["flows"] == off.info["flows"]
