"""Direct-connect, expander and hybrid fabrics against the TopoOpt reference figures."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from topoopt.fabrics import (
    direct_connect,
    expander,
    geometric_strides,
    hybrid,
    load_circuits,
    normalise_circuits,
)
from topoopt.fabrics.metrics import server_hops
from traffic.errors import InputError

# /work/shared/reference/topoopt-method.md: geometric rule, all n servers in one group
REFERENCE = [
    (12, 4, [1, 5], 3, 1.818),
    (16, 4, [1, 5], 4, 2.133),
    (16, 8, [1, 3, 5, 9], 2, 1.467),
    (32, 8, [1, 3, 7, 15], 3, 2.000),
    (128, 4, [1, 13], 10, 5.622),
    (128, 6, [1, 7, 27], 6, 3.669),
    (128, 8, [1, 5, 13, 39], 5, 2.961),
]


@pytest.mark.parametrize(("n", "d", "strides", "diam", "mean"), REFERENCE)
def test_geometric_circulant_matches_reference(n, d, strides, diam, mean):
    assert geometric_strides(n, d // 2) == strides
    f = direct_connect(n, d)
    hops = server_hops(f)
    assert hops.max() == diam
    assert round(hops.sum() / (n * (n - 1)), 3) == mean


def test_parallel_circuits_bundle():
    f = direct_connect(4, 3, [(0, 1, 2), (1, 0), (2, 3, 3)], port_bandwidth=5.0)
    assert f.n_physical_links == 6  # a bundle counts per circuit
    assert f.n_links == 4
    lid = f.link_ids([0, 2], [1, 3])
    assert f.capacity[lid].tolist() == [15.0, 15.0] and f.multiplicity[lid].tolist() == [3, 3]
    assert np.count_nonzero(f.node_kind == "patch-panel") == 3
    assert f.reconfiguration_delay == 300.0
    assert direct_connect(4, 3, [(0, 1)], device="ocs").reconfiguration_delay == 0.01


@pytest.mark.parametrize(
    ("circuits", "match"),
    [
        ([(0, 1), (0, 2), (0, 3)], r"circuits.server\[0\]"),
        ([(0, 9)], "server ids"),
        ([(1, 1)], "two servers"),
        ([(0, 1, 0)], "count"),
        ([(0, 1.5)], "integer"),
    ],
)
def test_bad_circuits(circuits, match):
    with pytest.raises(InputError, match=match):
        direct_connect(4, 2, circuits)


def test_multigraph_input_and_files(tmp_path):
    g = nx.MultiGraph([(0, 1), (0, 1), (1, 2)])
    assert normalise_circuits(g, 3).tolist() == [[0, 1, 2], [1, 2, 1]]
    csv = tmp_path / "c.csv"
    csv.write_text("u,v,count\n0,1,2\n1 2\n# comment\n")
    assert load_circuits(csv).tolist() == [[0, 1, 2], [1, 2, 1]]
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"circuits": [[0, 1], [2, 3, 2]]}))
    assert load_circuits(js).tolist() == [[0, 1, 1], [2, 3, 2]]
    bad = tmp_path / "b.txt"
    bad.write_text("0 1\nx y\n")
    with pytest.raises(InputError, match="b.txt:2"):
        load_circuits(bad)


def test_expander_regular_and_seeded():
    a, b, c = expander(32, 4, seed=5), expander(32, 4, seed=5), expander(32, 4, seed=6)
    assert np.all(np.bincount(a.src, minlength=32) == 4) and np.all(a.multiplicity == 1)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    assert not (np.array_equal(a.src, c.src) and np.array_equal(a.dst, c.dst))
    with pytest.raises(InputError, match="degree"):
        expander(5, 3)


def test_hybrid_layers():
    f = hybrid(16, 2, radix=8, oversubscription=3.0, optical_port_bandwidth=50e9)
    assert np.all(f.server_ports == 3) and np.all(f.server_optical_ports == 2)
    opt = f.link_kind == "optical"
    assert np.all(f.src[opt] < 16) and np.all(f.dst[opt] < 16)
    assert np.all(f.capacity[opt] == 50e9)
    assert np.count_nonzero(f.node_kind == "ocs") == 2
    with pytest.raises(InputError, match="k"):
        hybrid(16, 2, electrical="fat-tree")


def test_fabric_validation_degree_over_ports():
    from topoopt.fabrics import build_fabric

    with pytest.raises(InputError, match="degree"):
        build_fabric(
            "x",
            {},
            ["server", "server"],
            [0, 0],
            [1, 1],
            [0],
            [1],
            1.0,
            "electrical",
            multiplicity=2,
            server_ports=1,
            port_bandwidth=1.0,
        )
    with pytest.raises(InputError, match="node ids"):
        build_fabric(
            "x",
            {},
            ["server"],
            [0],
            [1],
            [0],
            [3],
            1.0,
            "electrical",
            server_ports=1,
            port_bandwidth=1.0,
        )


def test_dense_expander_is_the_complement_of_a_sparse_draw():
    """Above 3/4 of the servers (from 32 servers), the expander is the complement of networkx's
    (n - 1 - d)-regular draw of the same seed (networkx's own dense draw: 25 s at 112 of 128);
    up to 3/4 it is networkx's draw, as before."""
    from topoopt.fabrics.expander import expander_edges

    def pairs(e):
        return sorted(map(tuple, np.sort(np.asarray(e), axis=1).tolist()))

    for n, d, seed in ((64, 56, 0), (128, 120, 5), (32, 30, 1)):
        e = expander_edges(n, d, seed)
        g = nx.complement(nx.random_regular_graph(n - 1 - d, n, seed=seed))
        assert pairs(e) == pairs(g.edges())
        assert np.bincount(e.ravel(), minlength=n).tolist() == [d] * n
    for n, d, seed in ((64, 48, 3), (16, 14, 0)):  # at most 3/4, or under 32 servers
        assert pairs(expander_edges(n, d, seed)) == pairs(
            nx.random_regular_graph(d, n, seed).edges()
        )
