"""The OCS spine: structure and bill of materials against hand counts, circuits within ports."""

import numpy as np
import pytest

from topoopt.fabrics.cost import bill_of_materials, cost, load_prices
from topoopt.fabrics.ocs_spine import engineer_circuits, ocs_spine, ocs_spine_shape
from traffic.errors import InputError


def test_four_pods_structure_and_bom_by_hand():
    # 64 servers x 1 port, radix 16: 8 servers a leaf (8 down + 8 up), 8 leaves, 4 pods of 2;
    # 2 aggregation switches a pod with bundles of 4 (2 x 2 x 4 = 16 down, 16 up per pod)
    f = ocs_spine(64, 16, pods=4, port_bandwidth=12.5e9)
    assert f.n_switches == 8 + 4 * 2
    assert int((f.node_kind == "ocs").sum()) == 1  # 4 pods x 16 uplinks = 64 <= 136 ports
    bom = bill_of_materials(f)
    host, leaf_agg, circuits = 64, 8 * 2 * 4, 4 * 16 // 2
    assert bom["nic_port_100G"] == 64
    assert bom["transceiver_100G"] == 2 * host + 2 * leaf_agg + 2 * circuits
    assert bom["fibre"] == host + leaf_agg + 2 * circuits  # agg -> OCS -> agg: two fibres
    assert bom["switch_port_100G"] == 16 * 16
    assert bom["ocs_port"] == 136
    assert not any(k.startswith("switch_") and "x100G" in k and "16x" not in k for k in bom)
    p = load_prices()
    hand = (
        64 * p.unit("nic_port", 100)[0]
        + bom["transceiver_100G"] * p.unit("transceiver", 100)[0]
        + bom["fibre"] * p.unit("fibre")[0]
        + 256 * p.unit("switch_port", 100)[0]
        + 136 * p.unit("ocs_port")[0]
    )
    assert cost(f, p).capex_usd == pytest.approx(hand)
    # every aggregation switch uses all 16 ports: 8 leaf cables and 8 circuits
    ends = np.bincount(f.src, f.multiplicity, f.n_nodes)
    assert ends[64 + 8 : 64 + 16].tolist() == [16] * 8
    f.check_connected()


def test_circuits_follow_demand_within_ports():
    d = np.zeros((4, 4))
    d[0, 1], d[2, 3] = 10.0, 5.0
    sh = ocs_spine_shape(64, 16, pods=4)
    x = engineer_circuits(d, sh.ocs_ports)[0]
    assert (x == x.T).all() and np.diag(x).sum() == 0
    assert x.sum(axis=1).tolist() == [16] * 4  # every uplink used
    # the floor gives every pair one circuit; the rest goes to the pairs with demand
    assert x[0, 2] == x[0, 3] == x[1, 2] == x[1, 3] == 1
    assert x[0, 1] == x[2, 3] == 14


def test_several_ocs_respect_their_ports():
    rng = np.random.default_rng(3)
    d = rng.random((5, 5))
    ports = np.array([[3, 3, 3, 3, 3], [3, 3, 3, 3, 3], [1, 2, 1, 2, 1]])
    x = engineer_circuits(d, ports)
    assert (x.sum(axis=2) <= ports).all()
    assert (x == x.transpose(0, 2, 1)).all()
    assert (x.sum(axis=0)[~np.eye(5, dtype=bool)] >= 1).all()  # every pair has a circuit


def test_many_pods_need_several_ocs():
    # 1,024 servers of 8 ports, radix 64: 4 servers a leaf, 256 leaves, 8 pods of 32 leaves
    sh = ocs_spine_shape(1024, 64, ports_per_server=8)
    assert (sh.leaves, sh.pods, sh.leaves_per_pod) == (256, 8, 32)
    assert sh.pod_uplinks.tolist() == [1024] * 8  # non-blocking: uplinks = host ports
    assert sh.ports_per_ocs_per_pod == 136 // 8
    assert sh.ocses == -(-1024 // 17)
    assert (sh.ocs_ports.sum(axis=0) == sh.pod_uplinks).all()
    assert (sh.ocs_ports.sum(axis=1) <= 136).all()


def test_refusals_are_one_line():
    with pytest.raises(InputError, match="pods"):
        ocs_spine_shape(16, 16, pods=1)
    with pytest.raises(InputError, match="pod_demand"):
        engineer_circuits(np.ones((3, 3)), np.ones((1, 4), np.int64))
