"""The list colouring's construction (:func:`colour_by_matchings`) and its matching
(:func:`priority_matching`): a maximum matching (networkx's blossom the peer), a valid partial
list edge colouring, deterministic, and complete wherever session 43's construction (networkx's
weighted blossom per colour, kept here as ``old_colour_by_matchings``) was complete."""

from __future__ import annotations

import networkx as nx
import numpy as np

from solvers.model.list_colouring import (
    ball_repair,
    colour_by_matchings,
    expand_circuits,
    kempe_repair,
    matching_bound,
    shift_repair,
)
from solvers.model.matching import priority_matching
from topoopt.fabrics import circulant_circuits
from topoopt.fabrics.circuits import Circuits


def old_colour_by_matchings(u, v, allowed, m: int, order=None) -> np.ndarray:
    """Session 43's construction, verbatim but for its name: per colour, networkx's maximum
    weight maximum-cardinality matching, weight ``1 + d - (colours left)``."""
    d = allowed.shape[0]
    port = np.full(u.size, -1, np.int64)
    left = allowed.copy()
    for i in range(d) if order is None else order:
        open_ = np.flatnonzero((port < 0) & left[i])
        if open_.size:
            options = left[:, open_].sum(axis=0)  # colours still open to it, this one too
            g = nx.Graph()
            g.add_nodes_from(range(m))
            for k, o in zip(open_.tolist(), options.tolist(), strict=True):  # most constrained
                a, b, wgt = int(u[k]), int(v[k]), 1 + int(d - o)
                if not g.has_edge(a, b) or g[a][b]["weight"] < wgt:
                    g.add_edge(a, b, weight=wgt, k=k)
            for a, b in sorted(tuple(sorted(e)) for e in nx.max_weight_matching(g, True)):
                port[g[a][b]["k"]] = i
        left[i] = False
    return kempe_repair(port, u, v, allowed, m, d)


def random_case(rng, most: int = 40):
    """Unit circuits ``(u, v)``, ``allowed`` ``(d, e)`` and ``m <= most``: ports of ``m``
    servers (``d`` each, a random share of them used) paired at random, on one to three units
    per plane (cut at random, or the cluster's shifted blocks), or a circulant."""
    m = int(rng.integers(3, most + 1))
    d = int(rng.integers(2, 7))
    kind = rng.integers(0, 3)
    if kind == 0 and m > 4:
        strides = rng.choice(np.arange(1, m // 2 + 1), size=min(d // 2, m // 2), replace=False)
        rows = circulant_circuits(m, strides.tolist())
    else:
        used = rng.random(m * d) < rng.uniform(0.6, 1.0)
        stubs = rng.permutation(np.repeat(np.arange(m), d)[used])
        stubs = stubs[: stubs.size // 2 * 2].reshape(-1, 2)
        stubs = stubs[stubs[:, 0] != stubs[:, 1]]
        rows = np.column_stack([stubs, np.ones(len(stubs), np.int64)])
    u, v = expand_circuits(Circuits(rows, m))
    p = int(rng.integers(1, 4))
    if rng.random() < 0.5:
        units = rng.integers(0, p, size=(d, m))
    else:  # OcsLayer.build's blocks, shifted plane by plane
        shift = m // (p * d) if p > 1 else 0
        units = (np.arange(m)[None, :] + np.arange(d)[:, None] * shift) % m * p // m
    return u, v, units[:, u] == units[:, v], m


def valid_partial(port, u, v, allowed, m) -> bool:
    """Every coloured circuit on an allowed colour, no server on a colour twice."""
    k = np.flatnonzero(port >= 0)
    if not allowed[port[k], k].all():
        return False
    ends = np.concatenate([u[k], v[k]]) * allowed.shape[0] + np.tile(port[k], 2)
    return np.unique(ends).size == ends.size


def test_priority_matching_is_a_maximum_matching():
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(2, 30))
        g = nx.gnp_random_graph(n, float(rng.uniform(0.05, 0.5)), seed=int(rng.integers(1 << 30)))
        edges = [tuple(e) for e in rng.permutation(np.array(list(g.edges()), int).reshape(-1, 2))]
        a = [x for x, _ in edges]
        b = [y for _, y in edges]
        got = priority_matching(n, a, b)
        ends = [a[j] for j in got] + [b[j] for j in got]
        assert len(set(ends)) == len(ends)  # a matching
        assert got.size == len(nx.max_weight_matching(g, maxcardinality=True))  # maximum
        assert np.array_equal(got, priority_matching(n, a, b))


def test_priority_matching_takes_the_preferred_edge_when_it_costs_nothing():
    # a triangle plus a pendant 2-3: any maximum matching has two edges; the first listed
    # edge (0-1) is kept with 2-3 rather than 0-2 / 1-2 with nothing else
    assert priority_matching(4, [0, 1, 0, 2], [1, 2, 2, 3]).tolist() == [0, 3]


def test_construction_is_valid_and_complete_wherever_the_old_one_was():
    rng = np.random.default_rng(44)
    complete = {"old": 0, "new": 0}
    for case in range(50):
        u, v, allowed, m = random_case(rng, 24)
        for order in (None, range(allowed.shape[0] - 1, -1, -1)):
            new = colour_by_matchings(u, v, allowed, m, order)
            assert valid_partial(new, u, v, allowed, m)
            if case % 5 == 0:  # deterministic
                assert np.array_equal(new, colour_by_matchings(u, v, allowed, m, order))
            old = old_colour_by_matchings(u, v, allowed, m, order)
            complete["old"] += bool(np.all(old >= 0))
            complete["new"] += bool(np.all(new >= 0))
            if np.all(old >= 0):
                assert np.all(new >= 0), (u.tolist(), v.tolist(), allowed.tolist())
    assert complete["new"] >= complete["old"] > 20  # cases that colour, and more besides


def test_the_2048_server_circulant_of_offsets_1_to_4_is_coloured_whole():
    """The case the old construction left 2 of 8,192 circuits out of (12.8 s): each offset's
    cycles are even, so 8 colours suffice; the construction finds such a colouring."""
    n = 2048
    u, v = expand_circuits(Circuits(circulant_circuits(n, [1, 2, 3, 4]), n))
    allowed = np.ones((8, u.size), bool)
    port = colour_by_matchings(u, v, allowed, n)
    assert np.all(port >= 0) and valid_partial(port, u, v, allowed, n)


def test_the_repairs_keep_what_is_coloured_valid_and_never_colour_less():
    """Random partial colourings (a greedy one with a third of it dropped): each repair returns
    a valid partial colouring with at least as many circuits."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        u, v, allowed, m = random_case(rng, 24)
        d = allowed.shape[0]
        port = np.full(u.size, -1, np.int64)
        for k in rng.permutation(u.size).tolist():
            used = np.concatenate(
                [port[(u == u[k]) | (v == u[k])], port[(u == v[k]) | (v == v[k])]]
            )
            ok = [c for c in range(d) if allowed[c, k] and c not in used]
            if ok:
                port[k] = ok[0]
        port[rng.random(u.size) < 0.3] = -1
        for repair in (kempe_repair, shift_repair, ball_repair):
            got = repair(port, u, v, allowed, m, d)
            assert valid_partial(got, u, v, allowed, m)
            assert (got >= 0).sum() >= (port >= 0).sum()


def test_matching_bound_is_a_bound_and_proves_odd_regular_graphs():
    """At least the circuits of any colouring found (on the random cases), and below the
    circuits of a regular multigraph with an odd number of servers on one unit a colour."""
    rng = np.random.default_rng(8)
    for _ in range(40):
        u, v, allowed, m = random_case(rng, 24)
        port = colour_by_matchings(u, v, allowed, m)
        assert matching_bound(u, v, allowed, m) >= (port >= 0).sum()
    for n, strides in ((7, [1, 2]), (9, [1, 3]), (2047, [1, 2, 3, 4])):
        u, v = expand_circuits(Circuits(circulant_circuits(n, strides), n))
        d = 2 * len(strides)
        assert matching_bound(u, v, np.ones((d, u.size), bool), n) == d * (n // 2) < u.size
