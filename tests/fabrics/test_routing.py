"""Routing: path validity, ECMP counts against closed forms and brute force, splits, explicit."""

from __future__ import annotations

import functools

import networkx as nx
import numpy as np
import pytest

from topoopt.fabrics import (
    direct_connect,
    expander,
    explicit_paths,
    fat_tree,
    hybrid,
    path_nodes,
    rail_optimized,
    routes,
    server_pairs,
)
from topoopt.fabrics.metrics import server_hops
from topoopt.fabrics.routing import route_link_counts, shortest_path_counts
from traffic.errors import InputError


def check_paths(f, ps):
    """Every path is a contiguous walk from its source to its destination, weights sum to 1."""
    comm = ps.path_commodity()
    for p in range(ps.n_paths):
        lk = ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]]
        assert f.src[lk[0]] == ps.src[comm[p]] and f.dst[lk[-1]] == ps.dst[comm[p]]
        assert np.all(f.dst[lk[:-1]] == f.src[lk[1:]])
    sums = np.add.reduceat(ps.weight, ps.commodity_ptr[:-1])
    assert np.allclose(sums, 1.0)


def test_fat_tree_ecmp_path_counts():
    k = 6
    f = fat_tree(k)
    ps = routes(f, "ecmp")
    check_paths(f, ps)
    counts = np.diff(ps.commodity_ptr)
    per_edge, per_pod = k // 2, k * k // 4
    same_edge = ps.src // per_edge == ps.dst // per_edge
    same_pod = ps.src // per_pod == ps.dst // per_pod
    assert np.all(counts[same_edge] == 1)
    assert np.all(counts[same_pod & ~same_edge] == k // 2)
    assert np.all(counts[~same_pod] == (k // 2) ** 2)
    hops = ps.path_lengths()[ps.commodity_ptr[:-1]]
    assert np.all(hops[same_edge] == 2) and np.all(hops[~same_pod] == 6)
    # all paths of a commodity are distinct
    for c in range(0, ps.n_commodities, 37):
        seqs = {
            tuple(ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]])
            for p in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1])
        }
        assert len(seqs) == counts[c]


def test_ecmp_matches_networkx_all_shortest_paths():
    f = expander(12, 3, seed=3)
    g = nx.Graph()
    g.add_edges_from(zip(f.src.tolist(), f.dst.tolist(), strict=True))
    ps = routes(f, "ecmp")
    check_paths(f, ps)
    for c in range(ps.n_commodities):
        s, t = int(ps.src[c]), int(ps.dst[c])
        ref = {tuple(p) for p in nx.all_shortest_paths(g, s, t)}
        got = {
            tuple(path_nodes(f, ps, p).tolist())
            for p in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1])
        }
        assert got == ref


def test_sigma_counts_against_networkx():
    f = direct_connect(16, 4)
    dist, sigma = shortest_path_counts(f, np.arange(16))
    g = nx.Graph(list(zip(f.src.tolist(), f.dst.tolist(), strict=True)))
    for t in range(0, 16, 5):
        for u in range(16):
            assert sigma[t, u] == sum(1 for _ in nx.all_shortest_paths(g, u, t))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_limited_ecmp(k):
    f = fat_tree(4)
    full = routes(f, "ecmp")
    ps = routes(f, "ecmp", k=k)
    check_paths(f, ps)
    assert np.array_equal(np.diff(ps.commodity_ptr), np.minimum(np.diff(full.commodity_ptr), k))
    assert np.allclose(
        ps.weight, 1.0 / np.repeat(np.diff(ps.commodity_ptr), np.diff(ps.commodity_ptr))
    )
    # inter-pod with k=2: the two paths use distinct aggregation switches (evenly spread ranks)
    c = int(ps.index(np.array([0]), np.array([15]), f.n_nodes)[0])
    if k == 2:
        aggs = {
            int(path_nodes(f, ps, p)[2])
            for p in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1])
        }
        assert len(aggs) == 2


def test_shortest_random_is_seeded_and_shortest():
    f = expander(20, 4, seed=1)
    a = routes(f, "shortest", seed=7)
    b = routes(f, "shortest", seed=7)
    check_paths(f, a)
    assert np.array_equal(a.path_links, b.path_links)
    hops = server_hops(f)
    assert np.array_equal(a.path_lengths(), hops[a.src, a.dst])


def test_host_forwarding_uses_only_circuits():
    f = hybrid(16, 2, radix=8, oversubscription=3.0)
    ps = routes(f, "host-forwarding")
    check_paths(f, ps)
    assert np.all(f.link_kind[ps.path_links] == "optical")
    both = routes(f, "ecmp", k=2)
    assert both.path_lengths().max() <= ps.path_lengths().max()


def test_explicit_paths_and_errors():
    f = direct_connect(4, 2, [(0, 1), (1, 2), (2, 3), (3, 0)])
    ps = explicit_paths(f, [[1, 2], [0, 1, 2], [0, 3, 2]], [1.0, 3.0, 1.0])
    assert ps.src.tolist() == [1, 0] and ps.dst.tolist() == [2, 2]
    assert ps.weight.tolist() == [1.0, 0.75, 0.25]
    check_paths(f, ps)
    with pytest.raises(InputError, match=r"paths\[0\]"):
        explicit_paths(f, [[0, 2]])
    with pytest.raises(InputError, match="method"):
        routes(f, "magic")


def test_disconnected_fabric_raises():
    f = direct_connect(4, 1, [(0, 1), (2, 3)])
    with pytest.raises(InputError, match="connected"):
        routes(f)
    with pytest.raises(InputError, match="connected"):
        f.check_connected()


def test_self_pair_and_pairs_argument():
    f = fat_tree(4)
    ps = routes(f, pairs=[[3, 3], [0, 5]])
    assert ps.path_lengths().tolist()[0] == 0 and ps.n_commodities == 2
    assert server_pairs(4).shape == (12, 2)


def test_ecmp_k_with_seed_takes_one_path_per_stratum_of_ranks():
    f = fat_tree(4)
    pairs = [[0, 15], [0, 1], [0, 2]]  # 4, 1 and 2 equal-cost paths
    every = routes(f, "ecmp", pairs=pairs)
    assert np.diff(every.commodity_ptr).tolist() == [4, 1, 2]

    def paths(ps, c):
        lo, hi = ps.commodity_ptr[c], ps.commodity_ptr[c + 1]
        return [tuple(ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]]) for p in range(lo, hi)]

    chosen = set()
    for seed in range(6):
        ps = routes(f, "ecmp", pairs=pairs, k=2, seed=seed)
        chosen.add(paths(ps, 0)[0])
        assert np.diff(ps.commodity_ptr).tolist() == [2, 1, 2]
        # pairs with at most k paths keep all of them, in rank order
        assert paths(ps, 1) == paths(every, 1) and paths(ps, 2) == paths(every, 2)
        got, ranks = paths(ps, 0), paths(every, 0)
        assert got[0] in ranks[:2] and got[1] in ranks[2:]
        assert routes(f, "ecmp", pairs=pairs, k=2, seed=seed).path_links.tolist() == (
            ps.path_links.tolist()
        )
    assert len(chosen) == 2  # the seed draws within the stratum
    # without a seed: the first rank of each stratum (as before)
    ps = routes(f, "ecmp", pairs=pairs, k=2)
    assert paths(ps, 0) == [paths(every, 0)[0], paths(every, 0)[2]]


@pytest.mark.parametrize(
    "make",
    [lambda: fat_tree(4), lambda: expander(16, 3, seed=1), lambda: rail_optimized(16, 4, radix=8)],
)
def test_route_link_counts_equal_the_listed_paths(make, monkeypatch):
    """route_link_counts against the paths routes() lists: per pair, every link's number of
    crossing paths and its position on them; the same in chunks of a few pairs."""
    f = make()
    sw = np.flatnonzero(f.node_kind != "server")
    sw_pairs = np.column_stack([sw, sw[::-1]])
    dist, _ = shortest_path_counts(f, sw_pairs[:, 1])
    sw_pairs = sw_pairs[np.isfinite(dist[np.arange(sw.size), sw_pairs[:, 0]])]
    pairs = np.vstack([server_pairs(f.n_servers)[::7], sw_pairs])
    ptr, link, count, hop = route_link_counts(f, pairs)
    ps = routes(f, "ecmp", pairs=pairs)
    comm = np.repeat(ps.path_commodity(), np.diff(ps.path_ptr))
    pos = np.arange(ps.path_links.size) - np.repeat(ps.path_ptr[:-1], np.diff(ps.path_ptr))
    key, cnt = np.unique(comm * f.n_links + ps.path_links, return_counts=True)
    per = np.bincount(key // f.n_links, minlength=len(pairs))
    assert np.array_equal(ptr, np.r_[0, np.cumsum(per)])
    assert np.array_equal(link, key % f.n_links) and np.array_equal(count, cnt)
    first = np.unique(comm * f.n_links + ps.path_links, return_index=True)[1]
    assert np.array_equal(hop, pos[first])
    # every path count is the sum over the links at hop 0
    at0 = hop == 0
    pair_of = np.repeat(np.arange(len(pairs)), np.diff(ptr))
    per_pair = np.bincount(pair_of[at0], weights=count[at0], minlength=len(pairs))
    assert np.array_equal(per_pair, np.diff(ps.commodity_ptr) * (pairs[:, 0] != pairs[:, 1]))
    import topoopt.fabrics.routing as routing

    monkeypatch.setattr(routing, "CHUNK_CANDIDATES", 40)
    for got, want in zip(route_link_counts(f, pairs), (ptr, link, count, hop), strict=True):
        assert np.array_equal(got, want)
    # by hop: the same entries per pair, (hop, link) ascending; in chunks too
    o = np.lexsort((link, hop, pair_of))
    for chunk in (40, 1 << 23):
        monkeypatch.setattr(routing, "CHUNK_CANDIDATES", chunk)
        got = route_link_counts(f, pairs, by_hop=True)
        for a, b in zip(got, (ptr, link[o], count[o], hop[o]), strict=True):
            assert np.array_equal(a, b)
    # the entries' estimate: exact on the Clos fabrics, near on the expander (123 of 124)
    est = routing.route_link_entries(f, pairs)
    assert est == ptr[-1] if f.family != "expander" else abs(est / ptr[-1] - 1) < 0.05


def _diamond_chain(layers: int):
    """Server 0, ``layers`` layers of two servers each joined to both of the next layer, then a
    sink: ``2**layers`` shortest paths from 0 to the sink, ``layers + 1`` hops each."""
    from topoopt.fabrics import direct_connect

    n = 2 * layers + 2
    sink = n - 1
    rows = [[0, 1, 1], [0, 2, 1]]
    for i in range(layers - 1):
        a, b = 1 + 2 * i, 2 + 2 * i
        rows += [[a, a + 2, 1], [a, b + 2, 1], [b, a + 2, 1], [b, b + 2, 1]]
    rows += [[2 * layers - 1, sink, 1], [2 * layers, sink, 1]]
    return direct_connect(n, 4, np.array(rows), 1.0), sink


def _path_of_rank(fab, src: int, dst: int, rank: int, hops: int) -> list[int]:
    """Brute force with Python integers: the path of the given rank among the shortest ones,
    successors in link-id order at every node (the ranking ``routes`` documents)."""
    g = nx.DiGraph()
    for e, (u, v) in enumerate(zip(fab.src.tolist(), fab.dst.tolist(), strict=True)):
        g.add_edge(u, v, link=e)
    dist = nx.single_source_shortest_path_length(g.reverse(), dst)

    @functools.lru_cache(None)
    def count(u):  # exact shortest-path counts to dst
        if u == dst:
            return 1
        return sum(count(v) for v in g.successors(u) if dist.get(v) == dist[u] - 1)

    out, u = [], src
    for _ in range(hops):
        succ = sorted((g[u][v]["link"], v) for v in g.successors(u) if dist.get(v) == dist[u] - 1)
        for link, v in succ:
            c = count(v)
            if rank < c:
                out.append(link)
                u = v
                break
            rank -= c
    assert u == dst
    return out


@pytest.mark.parametrize("layers", [20, 60, 80])
def test_ecmp_sample_past_float_precision(layers):
    """A pair with 2^60 or 2^80 shortest paths (past the 2^52 of a float's exact integers: a
    sparse circuit set's pairs tens of hops apart, `reconfig` on DLRM 256 x 4) keeps k of
    them, one per stratum, the same as exact integer ranking; 2^20 checks the exact path."""
    from topoopt.fabrics.routing import routes

    fab, sink = _diamond_chain(layers)
    ps = routes(fab, "ecmp", pairs=np.array([[0, sink]]), k=64)
    assert ps.commodity_ptr.tolist() == [0, 64]
    total = 2**layers
    for i in range(64):
        got = ps.path_links[ps.path_ptr[i] : ps.path_ptr[i + 1]].tolist()
        assert got == _path_of_rank(fab, 0, sink, i * total // 64, layers + 1)
