"""The vectorised random regular graph behind large expanders, and the fabric fast paths it
needed (issue 30: ``fabric expander --servers 1000000 --degree 8`` took 112 s CPU)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from topoopt.fabrics import expander
from topoopt.fabrics.expander import NETWORKX_MAX_PORTS, expander_edges
from topoopt.fabrics.fabric import _lexsort2, _unique_rows
from topoopt.fabrics.metrics import _flow_graph, cut_bandwidth
from topoopt.fabrics.random_regular import random_regular_edges
from traffic.errors import InputError

SIZES = [(2, 1), (3, 2), (12, 2), (10, 3), (20, 4), (13, 8), (30, 27), (31, 20), (200, 7 * 2)]


def check_regular_simple_connected(e: np.ndarray, n: int, d: int) -> None:
    assert e.shape == (n * d // 2, 2)
    assert np.all(e[:, 0] < e[:, 1])  # no self-loop, rows u < v
    assert len({(int(a), int(b)) for a, b in e}) == len(e)  # no parallel edge
    assert np.bincount(e.ravel(), minlength=n).tolist() == [d] * n
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(e.tolist())
    assert nx.is_connected(g)


@pytest.mark.parametrize(("n", "d"), SIZES)
def test_regular_simple_connected_and_seeded(n, d):
    e = random_regular_edges(n, d, seed=3)
    check_regular_simple_connected(e, n, d)
    assert np.array_equal(e, random_regular_edges(n, d, seed=3))


def test_seeds_differ_and_dense_requests_use_the_complement():
    a, b = random_regular_edges(40, 5, 0), random_regular_edges(40, 5, 1)
    assert not np.array_equal(a, b)
    # 50 of 59 neighbours: drawn as the complement of a 9-regular graph, still 50-regular
    check_regular_simple_connected(random_regular_edges(60, 50, 2), 60, 50)


def test_refusals():
    with pytest.raises(InputError, match="perfect matching"):
        random_regular_edges(4, 1, 0)
    with pytest.raises(InputError):
        random_regular_edges(5, 3, 0)  # odd number of ports
    with pytest.raises(InputError):
        random_regular_edges(4, 4, 0)


def test_networkx_below_the_threshold_and_numpy_above():
    # below: networkx's own draw, as before (pinned results stay)
    g = nx.random_regular_graph(4, 16, seed=1)
    assert sorted(map(tuple, expander_edges(16, 4, 1).tolist())) == sorted(
        tuple(sorted(x)) for x in g.edges()
    )
    # above: the vectorised draw, regular and simple (n * d = 131,080 ports)
    n, d = NETWORKX_MAX_PORTS // 8 + 1, 8
    e = expander_edges(n, d, 0)
    assert np.array_equal(e, random_regular_edges(n, d, 0))
    assert np.bincount(e.ravel(), minlength=n).min() == d == np.bincount(e.ravel()).max()
    key = e[:, 0] * n + e[:, 1]
    assert np.unique(key).size == key.size


def test_cut_of_a_direct_connect_is_its_max_flow():
    """The servers-only shortcut of ``cut_bandwidth`` against scipy's max flow on the same
    integer capacities (the general path)."""
    f = expander(20, 4, seed=1, port_bandwidth=12.5e9)
    cap, unit = _flow_graph(f)
    n = f.n_nodes
    for side in (np.arange(10), np.array([0, 3, 5, 7, 11, 12, 13, 18, 19, 2])):
        mask = np.zeros(f.n_servers, bool)
        mask[side] = True
        other = np.flatnonzero(~mask)
        big = int(cap.sum()) + 1
        rows = np.r_[np.full(side.size, n), other]
        cols = np.r_[side, np.full(other.size, n + 1)]
        g = (cap + sp.csr_matrix((np.full(rows.size, big), (rows, cols)), shape=cap.shape)).tocsr()
        g.indices, g.indptr = g.indices.astype(np.int32), g.indptr.astype(np.int32)
        g.data = g.data.astype(np.int32)
        want = float(csgraph.maximum_flow(g, n, n + 1).flow_value) * unit
        assert cut_bandwidth(f, side) == want
        # and by hand: circuits crossing the cut, each one port of 12.5 GB/s
        e = expander_edges(20, 4, 1)
        assert want == 12.5e9 * int(np.sum(mask[e[:, 0]] != mask[e[:, 1]]))


def test_sort_helpers_equal_numpy():
    rng = np.random.default_rng(0)
    key = np.column_stack(
        [rng.integers(0, 5, 300), rng.integers(0, 5, 300), rng.integers(0, 2, 300),
         rng.integers(0, 3, 300)]
    )  # fmt: skip
    u, inv = np.unique(key, axis=0, return_inverse=True)
    u2, inv2 = _unique_rows(key, 5, 2, 3)
    assert np.array_equal(u, u2) and np.array_equal(inv.reshape(-1), inv2)
    major, minor = rng.integers(0, 50, 400), rng.integers(0, 7, 400)
    assert np.array_equal(np.lexsort((minor, major)), _lexsort2(major, minor, 7))


def test_the_bisection_bound_is_the_same_every_time():
    """The upper bound's spectral candidate is the Fiedler split of the servers' component,
    from a seeded start vector: the bound of one fabric no longer moves between calls
    (expander 64 x 4 gave 400, 375 and 775 GB/s in one process: its four cable-less patch-panel
    nodes made zero a five-fold eigenvalue, so ARPACK returned a random mix of component
    indicators). Checked against numpy's dense eigenvector (the split is at most its cut) and
    the exact bisection of a 16-server expander (the bound is at least it)."""
    from itertools import combinations

    from topoopt.fabrics.metrics import bisection

    fab = expander(64, 4, 0, 12.5e9)
    first = bisection(fab, "upper-bound").bandwidth
    assert all(bisection(fab, "upper-bound").bandwidth == first for _ in range(3))
    a = np.zeros((64, 64))
    for u, v in zip(fab.src.tolist(), fab.dst.tolist(), strict=True):
        if u < 64 and v < 64:
            a[u, v] = a[v, u] = 1.0
    w, vec = np.linalg.eigh(np.diag(a.sum(axis=1)) - a)
    assert w[1] > 1e-9 and w[2] - w[1] > 1e-6  # connected, a simple Fiedler value
    dense = cut_bandwidth(fab, np.argsort(vec[:, 1], kind="stable")[:32], _flow_graph(fab))
    assert first <= dense * (1 + 1e-9)
    small = expander(16, 4, 3, 12.5e9)
    graph = _flow_graph(small)
    exact = min(
        cut_bandwidth(small, np.array((0, *rest)), graph) for rest in combinations(range(1, 16), 7)
    )
    assert bisection(small, "upper-bound").bandwidth >= exact - 1e-6 * exact
