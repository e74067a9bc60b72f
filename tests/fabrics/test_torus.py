"""Tori, twisted tori and TPU-v4-style cubes: structure, bisection, diameter, dimension order."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from topoopt.fabrics import bisection, cost, diameter, path_nodes, routes, torus, tpu_v4_torus
from topoopt.fabrics.metrics import server_hops
from traffic.errors import InputError


def reference_torus_graph(dims, twist=None):
    """Independent construction: coordinates as tuples, neighbours by modular arithmetic."""
    g = nx.MultiGraph()
    for c in itertools.product(*[range(d) for d in dims]):
        for i, d in enumerate(dims):
            if d < 2:
                continue
            nxt = list(c)
            nxt[i] = (c[i] + 1) % d
            if twist is not None and c[i] == d - 1:
                for j, dj in enumerate(dims):
                    nxt[j] = (nxt[j] + twist[i][j]) % dj if j != i else nxt[j]
            g.add_edge(c, tuple(nxt))
    return g


def node_id(c, dims):
    return int(np.ravel_multi_index(c, dims, order="F"))


@pytest.mark.parametrize("dims", [(8,), (4, 4), (2, 4), (3, 4, 2), (4, 4, 4)])
def test_structure_and_diameter(dims):
    f = torus(dims, port_bandwidth=1.0)
    n = int(np.prod(dims))
    active = sum(d >= 2 for d in dims)
    assert f.n_servers == n and f.n_switches == 0
    assert f.n_physical_links == n * active
    assert np.all(np.bincount(f.src, f.multiplicity, n) == 2 * active)
    assert diameter(f) == sum(d // 2 for d in dims)
    ref = reference_torus_graph(dims)
    assert ref.number_of_edges() == f.n_physical_links
    for u, v in ref.edges():
        assert f.link_ids([node_id(u, dims)], [node_id(v, dims)])[0] >= 0


@pytest.mark.parametrize("dims", [(8,), (4, 4), (2, 4), (4, 2, 2)])
def test_bisection_closed_form_vs_exhaustive(dims):
    f = torus(dims, port_bandwidth=1.0)
    cf = bisection(f, "closed-form").bandwidth
    assert cf == 2 * np.prod(dims) / max(dims)
    assert bisection(f, "exact").bandwidth == cf


def test_twisted_torus_distances_match_reference():
    dims = (8, 4)
    f = torus(dims, twist=True)
    assert f.params["twist"] == [[0, 0], [4, 0]]
    ref = reference_torus_graph(dims, f.params["twist"])
    lengths = dict(nx.all_pairs_shortest_path_length(nx.Graph(ref)))
    hops = server_hops(f)
    for u in lengths:
        for v, d in lengths[u].items():
            assert hops[node_id(u, dims), node_id(v, dims)] == d
    assert diameter(f) < diameter(torus(dims))  # the twist shortens the torus


def test_dimension_order():
    dims = (5, 4, 3)
    f = torus(dims)
    ps = routes(f, "dimension-order")
    assert ps.n_commodities == 60 * 59 and np.all(ps.weight == 1.0)
    coords = f.coords
    for p in range(0, ps.n_paths, 97):
        nodes = path_nodes(f, ps, p)
        c = coords[nodes]
        changed = np.argmax(np.diff(c, axis=0) != 0, axis=1)  # dimension moved at each hop
        assert np.all(np.diff(changed) >= 0)  # dimension 0 first, then 1, then 2
        delta = (c[-1] - c[0]) % dims
        assert len(nodes) - 1 == np.minimum(delta, dims - delta).sum()
    with pytest.raises(InputError, match="untwisted torus"):
        routes(torus((8, 4), twist=True), "dimension-order")


def test_tpu_v4_cube():
    f = tpu_v4_torus("4x4x4")
    opt = f.link_kind == "optical"
    # links leaving a cube: 16 per dimension (wrap-around through the OCS)
    assert f.multiplicity[opt].sum() // 2 == 48
    assert f.multiplicity[~opt].sum() // 2 == 3 * 64 - 48
    assert int(f.server_optical_ports.sum()) == 96  # 6 faces x 16 chips
    assert np.count_nonzero(f.node_kind == "ocs") == 48
    bom = cost(f).bom
    assert bom["ocs_port"] == 48 * 136 and bom["transceiver_400G"] == 96
    assert (
        bom["copper_cable"] == 144 and bom["integrated_port_400G"] == 6 * 64
    )  # all ICI ports, on the die
    # same graph as a plain 4x4x4 torus
    hops = server_hops(f)
    assert np.array_equal(hops, server_hops(torus("4x4x4")))
    assert bisection(f).bandwidth == bisection(torus("4x4x4", 50e9)).bandwidth


def test_tpu_v4_bad_dims():
    with pytest.raises(InputError, match="multiples of 4"):
        tpu_v4_torus("4x4x6")
    with pytest.raises(InputError, match="dims"):
        torus("4x4x4x4")
