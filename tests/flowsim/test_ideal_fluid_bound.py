"""The ideal switch is the max-min fluid bound, not a makespan bound: two tiny cases where a rail
fabric finishes a dependent chain before it (docs/model.md, "The ideal switch is a fluid bound").

Both cases: servers of 2 GPUs, ports of ``b`` bytes/s, no latency, flows of ``S`` bytes, and a
compute task of ``T`` seconds that waits for the "pipeline" flows ``P``; the "data-parallel"
flows ``D`` have nothing after them. Finish times are derived by hand below and compared with
the simulator to 1e-12.
"""

from __future__ import annotations

import pytest

from topoopt.fabrics import ideal, rail_optimized
from topoopt.fabrics.fat_tree import clos_shape
from topoopt.fabrics.rail import rail_only
from topoopt.flowsim import simulate
from topoopt.flowsim.network import FlowBuilder, Network

B, S, T = 10.0, 40.0, 10.0  # bytes/s a port, bytes a flow, seconds of compute


def _makespan(net: Network, p_src, p_dst, d_src, d_dst) -> tuple[list[float], float]:
    fb = FlowBuilder(net)
    p = fb.add_ranks(p_src, p_dst, [S] * len(p_src))
    fb.add_ranks(d_src, d_dst, [S] * len(d_src))
    dev = fb.new_devices(1)
    fb.add_links(fb.device_link(dev), [T], after=p)  # compute after the pipeline flows
    r = simulate(fb.build())
    return r.finish.tolist(), r.makespan


def _ideal(servers: int) -> Network:
    f = ideal(servers, degree=2, port_bandwidth=B, latency=0.0)
    return Network(f, gpus_per_server=2, intra_bandwidth=1e9)


def test_pooling_the_ports_slows_a_lone_flow_behind_its_neighbours():
    # 2 servers; P: GPU 0 -> GPU 2 (rail 0); D, D': GPU 1 -> GPU 3 (rail 1).
    # Rails: P alone on NIC 0 at b: S/b = 4 s, compute to S/b + T = 14 s; D, D' at b/2: 2S/b = 8.
    # Ideal: one pooled link of 2b, three flows at 2b/3 each: all at 3S/(2b) = 6 s, then
    # compute: 3S/(2b) + T = 16 s. Max-min shares per flow, not per GPU, and P had one.
    f = rail_only(clos_shape(2, 8, pack=True), 2, B, latency=0.0)
    rail = Network(f, gpus_per_server=2, intra_bandwidth=1e9)
    fin, rail_s = _makespan(rail, [0], [2], [1, 1], [3, 3])
    assert fin == pytest.approx([S / B, 2 * S / B, 2 * S / B, S / B + T], rel=1e-12)
    fin, ideal_s = _makespan(_ideal(2), [0], [2], [1, 1], [3, 3])
    assert fin == pytest.approx([1.5 * S / B] * 3 + [1.5 * S / B + T], rel=1e-12)
    assert rail_s == pytest.approx(S / B + T) and ideal_s == pytest.approx(1.5 * S / B + T)
    assert rail_s < ideal_s


def test_a_flow_split_over_k_paths_takes_k_shares_of_its_nic():
    # The mechanism of GPT-3 175B's rail row at 2,048 and 4,096 GPUs (0.9999x the ideal):
    # 16 servers, rail-optimised Clos of radix 8 (groups of 4 servers, k = 4 spine paths between
    # groups, 1 path inside one). Server 0 sends P_i: GPU i -> server 4's GPU i (another group,
    # k sub-flows) and D_i: GPU i -> server 1's GPU i (same leaf, 1 sub-flow), i = 0, 1.
    # Rails: NIC i carries P_i's k sub-flows and D_i's one, each b/(k+1): P_i at k b/(k+1), done
    # at S(k+1)/(k b) = 5 s; D_i has S - 5 b/(k+1) = 30 bytes left, alone at b: 8 s; compute to
    # 5 + T = 15 s. Ideal (one path a pair): four flows on the pooled 2b, b/2 each: 2S/b = 8 s,
    # compute to 2S/b + T = 18 s. The ideal's makespan-optimal schedule (P first at b each, 4 s,
    # then D, 8 s) would end at S/b + T = 14 s: the ideal is a bound on that, not on max-min.
    f = rail_optimized(16, gpus_per_server=2, radix=8, port_bandwidth=B, latency=0.0)
    rail = Network(f, gpus_per_server=2, intra_bandwidth=1e9)
    k = 4
    assert [rail.rail_paths([0], [v], [0])[0].n_paths for v in (1, 4)] == [1, k]
    fin, rail_s = _makespan(rail, [0, 1], [8, 9], [0, 1], [2, 3])
    p_end = S * (k + 1) / (k * B)
    d_end = p_end + (S - p_end * B / (k + 1)) / B
    assert fin == pytest.approx([p_end, p_end, d_end, d_end, p_end + T], rel=1e-12)
    fin, ideal_s = _makespan(_ideal(16), [0, 1], [8, 9], [0, 1], [2, 3])
    assert fin == pytest.approx([2 * S / B] * 4 + [2 * S / B + T], rel=1e-12)
    assert (rail_s, ideal_s) == pytest.approx((15.0, 18.0), rel=1e-12)
