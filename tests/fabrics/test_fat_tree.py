"""Clos fabrics: structure against closed forms, bisection by exhaustive max-flow."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.fabrics import bisection, diameter, fat_tree, ideal, leaf_spine, rail_optimized
from topoopt.fabrics.fabric import Fabric
from traffic.errors import InputError


def check_invariants(f: Fabric) -> None:
    """Shared structural checks: cable pairing, degrees within ports, capacities per member."""
    a, b = np.arange(0, f.n_links, 2), np.arange(1, f.n_links, 2)
    assert np.array_equal(f.src[a], f.dst[b]) and np.array_equal(f.dst[a], f.src[b])
    assert np.array_equal(f.cable[a], f.cable[b])
    ends = np.bincount(f.src, f.multiplicity, f.n_nodes)
    assert np.all(ends[: f.n_servers] <= f.server_ports)
    assert np.all(ends[f.n_servers :] <= f.node_ports[f.n_servers :])


@pytest.mark.parametrize("k", [4, 6, 8])
def test_kary_counts(k):
    f = fat_tree(k, port_bandwidth=1.0)
    check_invariants(f)
    n = k**3 // 4
    assert f.n_servers == n
    assert f.n_switches == 5 * k * k // 4
    assert int(f.node_ports[f.node_kind == "switch"].sum()) == 5 * n  # 5N switch ports
    assert f.n_physical_links == 3 * n  # host-edge N, edge-agg N, agg-core N
    ends = np.bincount(f.src, f.multiplicity, f.n_nodes)
    assert np.all(ends[n:] == k)  # every switch port used
    assert diameter(f) == 6


def test_kary_partial_servers_keep_switches():
    f = fat_tree(4, servers=10)
    check_invariants(f)
    assert (f.n_servers, f.n_switches) == (10, 20)
    assert f.n_physical_links == 10 + 16 + 16


def test_kary_oversubscription_counts():
    f = fat_tree(8, oversubscription=2.0, agg_oversubscription=4.0)
    u_e, u_a = 2, 1  # ceil(4/2), ceil(4/4)
    assert f.n_switches == 32 + 8 * u_e + u_e * u_a
    assert f.n_physical_links == 128 + 32 * u_e + 8 * u_e * u_a
    check_invariants(f)


@pytest.mark.parametrize(("r_e", "r_a"), [(1.0, 1.0), (2.0, 1.0), (1.0, 2.0), (2.0, 2.0)])
def test_kary_bisection_closed_form_matches_exhaustive_maxflow(r_e, r_a):
    f = fat_tree(4, oversubscription=r_e, agg_oversubscription=r_a, port_bandwidth=1.0)
    cf = bisection(f, "closed-form")
    ex = bisection(f, "exact")
    assert cf.bandwidth == ex.bandwidth
    # independent value: (k/2) pods x u_e aggs x u_a uplinks
    assert cf.bandwidth == 2 * int(np.ceil(2 / r_e)) * int(np.ceil(2 / r_a))


def test_ideal():
    f = ideal(6, degree=3, port_bandwidth=2.0)
    check_invariants(f)
    assert f.n_physical_links == 18 and diameter(f) == 2
    assert bisection(f, "exact").bandwidth == bisection(f, "closed-form").bandwidth == 3 * 3 * 2.0


@pytest.mark.parametrize(("n", "radix", "r"), [(16, 8, 1.0), (12, 8, 3.0), (8, 4, 1.0)])
def test_leaf_spine_bisection(n, radix, r):
    f = leaf_spine(n, r, radix=radix, port_bandwidth=1.0)
    check_invariants(f)
    assert bisection(f, "closed-form").bandwidth == bisection(f, "exact").bandwidth


def test_leaf_spine_structure():
    f = leaf_spine(100, 3.0, radix=16)  # h = 12, u = 4, 9 leaves
    leaves = np.flatnonzero(f.node_layer == 1)
    spines = np.flatnonzero(f.node_layer == 2)
    assert (leaves.size, spines.size) == (9, 4)
    assert f.n_physical_links == 100 + 9 * 4
    assert diameter(f) == 4
    with pytest.raises(InputError, match="servers"):
        leaf_spine(10_000, 1.0, radix=16)


def test_rail_optimized():
    f = rail_optimized(16, gpus_per_server=2, radix=8, port_bandwidth=1.0)
    check_invariants(f)
    # groups of 4 servers (h=4, u=4): 4 groups x 2 rails = 8 leaves, 4 spines
    assert (np.count_nonzero(f.node_layer == 1), np.count_nonzero(f.node_layer == 2)) == (8, 4)
    assert f.n_physical_links == 32 + 8 * 4
    # rail i of server s sits on leaf (s // 4) * 2 + i
    for s in (0, 5, 15):
        nbrs = sorted(f.dst[f.src == s].tolist())
        assert nbrs == [16 + (s // 4) * 2, 16 + (s // 4) * 2 + 1]
    assert bisection(f, "closed-form").bandwidth == bisection(f, "exact").bandwidth == 16.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"k": 5}, "k"),
        ({"k": 4, "servers": 17}, "servers"),
        ({"k": 4, "oversubscription": 0.5}, "oversubscription"),
    ],
)
def test_bad_input(kwargs, field):
    with pytest.raises(InputError, match=field):
        fat_tree(**kwargs)
