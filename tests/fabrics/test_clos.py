"""Clos of one, two or three tiers (issue 24.4): structure, bill of materials and bisection
against hand counts for k-ary fat-trees and a leaf-spine-spine at 2,048 servers."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.fabrics import fat_tree, leaf_spine
from topoopt.fabrics.catalogue import SwitchModel, plan_bill_of_materials, plan_clos
from topoopt.fabrics.cost import bill_of_materials
from topoopt.fabrics.fat_tree import clos_shape
from topoopt.fabrics.metrics import cut_bandwidth

B = 12.5e9


def _per_tier(f):
    return [int(np.count_nonzero(f.node_layer == t)) for t in (1, 2, 3)]


@pytest.mark.parametrize("k", [4, 8])
def test_k_ary_fat_tree_by_hand(k):
    """``k^3/4`` servers on ``k``-port switches need three tiers: ``k^2/2`` edge, ``k^2/2``
    aggregation and ``k^2/4`` core switches (Al-Fares et al. 2008), ``3 k^3/4`` cables, each
    with two transceivers; pod-aligned halves cut ``k^3/8`` links (full bisection)."""
    n = k**3 // 4
    f = leaf_spine(n, radix=k, port_bandwidth=B)
    assert f.params["tiers"] == 3
    assert _per_tier(f) == [k * k // 2, k * k // 2, k * k // 4]
    cables = 3 * n
    want = {
        "nic_port_100G": n,
        "transceiver_100G": 2 * cables,
        "fibre": cables,
        f"switch_{k}x100G": 5 * k * k // 4,
        "switch_port_100G": 5 * k**3 // 4,
    }
    assert bill_of_materials(f) == want
    assert bill_of_materials(fat_tree(k, port_bandwidth=B)) == want  # Al-Fares' builder
    pod = k * k // 4  # servers per pod: servers fill pods in order
    assert n // 2 % pod == 0  # the first half of the servers: whole pods
    assert cut_bandwidth(f, np.arange(n // 2)) == pytest.approx(n // 2 * B)


def test_leaf_spine_spine_2048_servers_by_hand():
    """2,048 servers with 8 NICs each (16,384 ports) on 64-port switches: 4 servers (32 ports)
    and 32 uplinks a leaf, 512 leaves; pods of 32 leaves (an aggregation switch has 32 down, 32
    up): 16 pods of 32 aggregation switches = 512; 32 core planes, every aggregation switch
    sends its 32 uplinks as 8 bundles of 4, so a core takes 16 pods x 4 = 64 cables: 8 cores a
    plane, 256 cores. Cables: 16,384 host + 16,384 leaf-aggregation + 16,384
    aggregation-core."""
    n, p = 2048, 8
    s = clos_shape(n, 64, ports_per_server=p)
    assert (s.tiers, s.servers_per_leaf, s.uplinks, s.leaves) == (3, 4, 32, 512)
    assert (s.pods, s.leaves_per_pod, s.spines, s.cores_per_plane, s.core_bundle) == (
        16, 32, 512, 8, 4,
    )  # fmt: skip
    f = leaf_spine(n, ports_per_server=p, port_bandwidth=B)
    assert _per_tier(f) == [512, 512, 256]
    assert f.server_ports.tolist() == [p] * n and f.server_bandwidth[0] == p * B
    deg = np.bincount(f.src, f.multiplicity, f.n_nodes)
    assert deg[n:].max() == 64 and deg[n:].min() == 64  # every switch port used
    cables = 3 * 16384
    assert bill_of_materials(f) == {
        "nic_port_100G": 16384,
        "transceiver_100G": 2 * cables,
        "fibre": cables,
        "switch_64x100G": 1280,
        "switch_port_100G": 1280 * 64,
    }
    # pods 0..7 against 8..15: full bisection
    assert cut_bandwidth(f, np.arange(n // 2)) == pytest.approx(n * p * B / 2)


def test_bisection_with_several_nics_per_server():
    """128 servers x 2 NICs on 64-port switches (8 leaves of 16 servers, 32 uplinks each):
    the closed form counts both NICs, (8 / 2) x 32 B, as the max-flow cut of the halves does."""
    from topoopt.fabrics.metrics import closed_form_bisection

    f = plan_clos(128, SwitchModel("64x100G", 64, 100.0), ports_per_server=2).fabric(B)
    assert closed_form_bisection(f) == pytest.approx(4 * 32 * B)
    assert cut_bandwidth(f, np.arange(64)) == pytest.approx(4 * 32 * B)
    assert closed_form_bisection(leaf_spine(16, radix=4, port_bandwidth=B)) is None  # 3 tiers


def test_three_tier_plans_match_their_fabric():
    m = SwitchModel("64x100G", 64, 100.0)
    for n, p in ((2049, 1), (1100, 2), (600, 8)):
        plan = plan_clos(n, m, ports_per_server=p)
        assert plan.tiers == 3
        fab = plan.fabric(B)
        assert plan_bill_of_materials(plan, 100.0) == bill_of_materials(fab)
        deg = np.bincount(fab.src, fab.multiplicity, fab.n_nodes)
        assert deg[n:].max() <= 64
        assert fab.check_connected() is None


def test_oversubscription_is_realised_and_priced():
    """R:1 at the leaves, at most R and the ratio built reported (issue 29.12: 16:1 used to
    act as 8:1 silently). 1,024 servers x 1 port on 64-port switches, 16:1: 60 host ports a
    leaf (60 + ceil(60/16) <= 64) -> 18 leaves of 57 servers (spread evenly), ceil(57/16) = 4
    uplinks; 72 cables exceed one spine, so 2 spines with bundles of 2: 20 switches, 14.25:1.
    8:1: 56 hosts -> 19 leaves of 54, 7 uplinks rounded to 3 spines x bundles of 3 = 9: 22
    switches, 6:1. The fewer uplinks are priced: fewer switch ports at 16:1."""
    m = SwitchModel("64x100G", 64, 100.0)
    p16, p8 = plan_clos(1024, m, 16.0), plan_clos(1024, m, 8.0)
    assert (p16.leaves, p16.hosts_per_leaf, p16.uplinks, p16.spines) == (18, 57, 4, 2)
    assert (p8.leaves, p8.hosts_per_leaf, p8.uplinks, p8.spines) == (19, 54, 9, 3)
    assert p16.shape.oversubscription == pytest.approx(57 / 4)
    assert p8.shape.oversubscription == pytest.approx(6.0)
    assert (p16.switch_ports, p8.switch_ports) == (20 * 64, 22 * 64)
    f = p16.fabric(B)
    assert f.params["oversubscription"] == 16.0
    assert f.params["oversubscription_realised"] == pytest.approx(57 / 4)


def test_rails_and_rail_only_by_hand():
    """128 servers x 4 NICs on 64-port switches. Rail-optimised: groups of 32 servers, one
    leaf per (group, rail) = 16 leaves of 32 hosts and 32 uplinks, 512 uplinks packed on 8
    spines (bundles of 4; 16 leaves x 4 = 64 ports): 24 switches joining every rail.
    Rail-only: each rail its own 128-server Clos (4 leaves, 2 spines), 4 of them: 24
    switches, and no switch reaches two rails (the switch graph falls in 4 pieces)."""
    from scipy.sparse.csgraph import connected_components

    from topoopt.fabrics.rail import rail_only

    m = SwitchModel("64x100G", 64, 100.0)
    plan = plan_clos(128, m, ports_per_server=4, rails=True)
    assert (plan.leaves, plan.hosts_per_leaf, plan.uplinks, plan.spines) == (16, 32, 32, 8)
    f = plan.fabric(B)
    assert f.family == "rail-optimized" and plan_bill_of_materials(
        plan, 100.0
    ) == bill_of_materials(f)
    # rail r of group g is leaf g * 4 + r: server 0's four ports on four distinct leaves
    host = (f.src == 0) & (f.dst >= 128)
    assert sorted(f.dst[host].tolist()) == [128, 129, 130, 131]
    one = plan_clos(128, m)
    ro = rail_only(one.shape, 4, B)
    assert ro.n_switches == 4 * one.switches == 24
    bom = bill_of_materials(ro)
    assert bom == {k: 4 * v for k, v in plan_bill_of_materials(one, 100.0).items()}
    sw = np.flatnonzero(ro.node_kind == "switch")
    adj = ro.adjacency()[sw][:, sw]
    assert connected_components(adj, directed=False)[0] == 4
    assert ro.check_connected() is None  # every server still reaches every other (any rail)
