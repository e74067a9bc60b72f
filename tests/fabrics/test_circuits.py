"""``Circuits``: the one canonical circuit multigraph (issue 27).

Invariants on random inputs, every constructor (rows with and without a count, numpy arrays,
networkx graphs and multigraphs, another ``Circuits``) against a brute-force canonicaliser, the
views against networkx, and what is left of the three old canonicalisers (``normalise_circuits``
and the pre-wired reader's, now thin users of ``Circuits``; ``canonical_circuits`` is gone)
against the same oracle.
"""

from __future__ import annotations

from collections import Counter

import networkx as nx
import numpy as np
import pytest

from solvers.model.problem import _canonical_prewired
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.direct_connect import normalise_circuits
from traffic.errors import InputError


def oracle(rows, n):
    """Brute force: count every unordered pair, drop zeros, sort."""
    cnt: Counter = Counter()
    for r in rows:
        u, v = int(r[0]), int(r[1])
        k = int(r[2]) if len(r) > 2 else 1
        cnt[(min(u, v), max(u, v))] += k
    return [[u, v, k] for (u, v), k in sorted(cnt.items()) if k > 0]


def random_rows(rng, n, m, zeros=True):
    u = rng.integers(0, n, m)
    v = (u + rng.integers(1, n, m)) % n  # never a self loop
    k = rng.integers(0 if zeros else 1, 4, m)
    return np.stack([u, v, k], axis=1)


@pytest.mark.parametrize("seed", range(30))
def test_constructors_agree_with_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    rows = random_rows(rng, n, int(rng.integers(0, 40)))
    want = oracle(rows.tolist(), n)
    c = Circuits(rows, n)
    assert c.tolist() == want
    # invariants: u < v, each pair once, sorted, counts >= 1, read-only
    r = c.rows
    assert r.dtype == np.int64 and r.shape[1] == 3
    assert np.all(r[:, 0] < r[:, 1]) and np.all(r[:, 2] >= 1)
    keys = r[:, 0] * n + r[:, 1]
    assert np.all(np.diff(keys) > 0)
    with pytest.raises(ValueError):
        r[0:1, 2] = 9
    # other inputs of the same multigraph
    assert Circuits(rows.tolist(), n) == c
    assert Circuits(rows[:, [1, 0, 2]], n) == c  # orientation does not matter
    assert Circuits(c, n) is not c and Circuits(c, n) == c
    ones = np.repeat(rows[:, :2], rows[:, 2], axis=0)
    assert Circuits(ones, n) == c  # (u, v) rows, one circuit each
    g = nx.MultiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(map(tuple, ones.tolist()))
    assert Circuits(g, n) == c
    # what was left of the old canonicalisers gives the same rows
    assert _canonical_prewired(rows, n).tolist() == want
    nz = rows[rows[:, 2] > 0]
    assert normalise_circuits(nz, n).tolist() == want


@pytest.mark.parametrize("seed", range(10))
def test_views_agree_with_networkx(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 10))
    c = Circuits(random_rows(rng, n, int(rng.integers(0, 15)), zeros=False), n)
    g = nx.MultiGraph()
    g.add_nodes_from(range(n))
    for u, v, k in c.tolist():
        g.add_edges_from([(u, v)] * k)
    assert c.degrees().tolist() == [g.degree(i) for i in range(n)]
    assert c.total == g.number_of_edges()
    assert c.connected() == nx.is_connected(g)
    hops = c.hop_distances()
    sp = dict(nx.all_pairs_shortest_path_length(g))
    for a in range(n):
        for b in range(n):
            assert hops[a, b] == sp[a].get(b, np.inf)
    src, dst, cap = c.links(1e9)
    assert src.size == 2 * len(c) and np.all(cap[0::2] == c.rows[:, 2] * 1e9)
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    ids = c.link_of(a.ravel(), b.ravel())
    for x, y, i in zip(a.ravel(), b.ravel(), ids, strict=True):
        if g.has_edge(x, y) and x != y:
            assert src[i] == x and dst[i] == y
        else:
            assert i == -1
    other = Circuits(random_rows(rng, n, 5, zeros=False), n)
    assert c.merged(other).tolist() == oracle(c.tolist() + other.tolist(), n)


@pytest.mark.parametrize(
    "rows, field",
    [
        ([[0, 4, 1]], "circuits (row 0)"),  # server out of range
        ([[1, 1, 1]], "circuits (row 0)"),  # self loop
        ([[0, 1, -1]], "circuits (row 0) count"),
        ([[0, 1, 1.5]], "circuits"),  # not an integer
        ([[0, 1, 2, 3]], "circuits"),  # four columns
        ([["a", 1, 1]], "circuits"),
    ],
)
def test_bad_rows_are_one_input_error(rows, field):
    with pytest.raises(InputError) as e:
        Circuits(rows, 4)
    assert e.value.field == field


def test_degree_and_min_count():
    with pytest.raises(InputError, match=r"circuits.server\[0\].*at most 2"):
        Circuits([[0, 1, 2], [0, 2, 1]], 3, degree=2)
    assert Circuits([[0, 1, 2]], 3, degree=[2, 2, 0]).total == 2
    with pytest.raises(InputError, match="an integer >= 1"):
        Circuits([[0, 1, 0]], 3, min_count=1)
    assert len(Circuits([[0, 1, 0]], 3)) == 0 and Circuits((), 0).connected()
    with pytest.raises(InputError):
        Circuits(Circuits([[0, 1, 1]], 3), 4)  # another cluster size


@pytest.mark.parametrize("seed", range(5))
def test_to_fabric_is_the_hand_counted_direct_connect_fabric(seed):
    """n servers + d devices, one bundled link per row and direction of count x B bytes/s, the
    counts in ``params``; the same fabric ``direct_connect`` builds from the raw rows."""
    from topoopt.fabrics.direct_connect import direct_connect

    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(3, 10))
    c = Circuits(random_rows(rng, n, int(rng.integers(1, 20)), zeros=False), n)
    d, b = int(c.degrees().max()) + int(rng.integers(0, 3)), 1e9 * (seed + 1)
    f = c.to_fabric(d, b, device="ocs")
    assert f.n_nodes == n + d and f.n_servers == n
    assert f.params["circuits"] == int(sum(k for _, _, k in c)) == c.total
    assert f.params["degree"] == d and f.params["device"] == "ocs"
    # every directed link joins two servers with circuits; its capacity is count x B
    want = {}
    for u, v, k in c.tolist():
        want[(u, v)] = want[(v, u)] = k * b
    got = {(int(s), int(t)): float(cap) for s, t, cap in zip(f.src, f.dst, f.capacity, strict=True)}
    assert got == pytest.approx(want)
    assert f.reconfiguration_delay == pytest.approx(0.01)
    raw = direct_connect(n, d, c.rows[::-1, [1, 0, 2]], b, device="ocs")
    assert raw.params == f.params and np.array_equal(raw.capacity, f.capacity)
    # degree defaults to the busiest server; a degree below it is one InputError
    assert c.to_fabric().params["degree"] == int(c.degrees().max())
    with pytest.raises(InputError, match="at most"):
        c.to_fabric(int(c.degrees().max()) - 1)


def test_key_round_trip_and_server_count_default():
    c = Circuits([[3, 1, 2], [0, 1, 1]], 5)
    assert Circuits.from_key(c.key, 5) == c and Circuits([[0, 1, 1]], 5).key != c.key
    assert Circuits([[3, 1, 2], [0, 1, 1]]).n == 4  # one more than the largest id
    assert Circuits().n == 1 and len(Circuits()) == 0
    assert list(c) == [(0, 1, 1), (1, 3, 2)]


def test_a_design_holds_and_writes_a_circuits_value():
    """``Design.circuits`` is a ``Circuits`` built once, kept by ``replace`` and the JSON round
    trip, and written as the same rows ``[u, v, count]``."""
    import json
    from dataclasses import replace

    from solvers.model.design import Design, NodePaths

    d = Design(4, 2, 1e9, [[1, 0, 1], [2, 3, 1], [0, 1, 1]], (), NodePaths.empty(),
               "x", "feasible", 0.0, 0.0, 0.0, 0.0, prewired=[[3, 2, 1]])  # fmt: skip
    assert isinstance(d.circuits, Circuits) and d.circuits.tolist() == [[0, 1, 2], [2, 3, 1]]
    assert isinstance(d.prewired, Circuits) and d.prewired.tolist() == [[2, 3, 1]]
    assert replace(d, status="optimal").circuits.rows is d.circuits.rows  # shared, not redone
    doc = json.loads(d.to_json())
    assert doc["circuits"] == [[0, 1, 2], [2, 3, 1]] and doc["prewired"] == [[2, 3, 1]]
    back = Design.from_json(d.to_json())
    assert back.circuits == d.circuits and back.prewired == d.prewired
    assert back.to_json() == d.to_json()


def test_pickle_round_trip_keeps_the_value_frozen():
    """Ray ships designs between processes: a pickled Circuits comes back equal and frozen."""
    import pickle

    c = Circuits([[2, 0, 1], [1, 2, 3]], 4)
    back = pickle.loads(pickle.dumps(c))
    assert back == c and back.n == 4 and back.rows.tolist() == [[0, 2, 1], [1, 2, 3]]
    assert not back.rows.flags.writeable
    with pytest.raises(AttributeError):
        back.n = 5
