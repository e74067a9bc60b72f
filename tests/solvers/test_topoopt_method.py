"""The TopoOpt baseline (TopologyFinder) and the expander baseline.

Invariants first (ports, rings are single cycles over their group, perfect matchings, routing
feasible and re-scored by solvers.model.congestion), then hand-computed values (the c/(c+1) discount
on 4 servers, the degree split) and brute force (coin change).
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from solvers.baselines.expander_design import expander_design, random_regular_circuits
from solvers.baselines.topoopt_method import (
    candidate_pairs,
    coin_change,
    degree_split,
    max_weight_matching,
    mp_matchings,
    sample_shortest_paths,
    topoopt_design,
)
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design, NodePaths
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError
from traffic.workload import Demand, Workload


def workload(n: int, gps: int = 2, mp_size: float = 1e8, ar_size: float = 4e8) -> Workload:
    """DP all-reduce over all servers, PP sends along servers, EP all-to-all in 4-server groups."""
    dp = np.arange(n * gps).reshape(n, gps).T
    pp = np.stack([np.arange(0, (n - 1) * gps, gps), np.arange(gps, n * gps, gps)], axis=1)
    ep = np.arange(n * gps).reshape(-1, 4 * gps)[:, ::gps]
    return Workload(
        gpus=n * gps,
        gpus_per_server=gps,
        demands=(
            Demand("all-reduce", dp, ar_size, "dp", "backward"),
            Demand("all-reduce", dp[:, : n // 2], ar_size / 4, "dp", "optimizer"),
            Demand("send", pp, mp_size / 10, "pp", "forward", count=4, mutable=False),
            Demand("all-to-all", ep, mp_size, "ep", "forward", count=2, mutable=False),
        ),
    )


def problem(n=16, d=8, **kw) -> DesignProblem:
    return DesignProblem.from_workload(workload(n, **kw), degree=d, link_bandwidth=12.5e9)


def check_design(p: DesignProblem, design: Design) -> None:
    """Invariants shared by every baseline."""
    assert np.all(design.port_usage() <= p.degree)
    # every ring is a single cycle over exactly its group's servers
    for r in design.rings:
        ph = next(x for x in p.phases if x.name == r["phase"])
        order = r["order"]
        assert sorted(order) == ph.group(r["group"]).tolist()
        assert len(set(order)) == len(order)
    # every routed path walks over circuits, from its source to its destination
    adj = {(int(u), int(v)) for u, v, _ in design.circuits} | {
        (int(v), int(u)) for u, v, _ in design.circuits
    }
    for k, plist in enumerate(design.routing.to_lists()):
        assert abs(sum(w for _, w in plist) - 1) < 1e-9
        for nodes, _ in plist:
            assert nodes[0] == design.routing.src[k] and nodes[-1] == design.routing.dst[k]
            assert all((a, b) in adj for a, b in itertools.pairwise(nodes))
    ev = evaluate_routing(p, design.circuits, design.phase_routings(p))
    assert ev.feasible, ev.violations
    assert design.objective_s == pytest.approx(ev.objective)
    assert design.lower_bound_s <= design.objective_s * (1 + 1e-12)
    back = Design.from_json(design.to_json())
    assert np.array_equal(back.circuits, design.circuits) and back.rings == tuple(
        {**r} for r in design.rings
    )
    assert back.objective_s == design.objective_s


@pytest.mark.parametrize("variant", ["topoopt", "topoopt-released"])
@pytest.mark.parametrize("n, d, mp_size", [(16, 8, 1e8), (16, 6, 4e9), (12, 5, 4e9), (8, 4, 0.0)])
def test_baseline_invariants(variant, n, d, mp_size):
    p = (
        problem(n, d, mp_size=mp_size)
        if mp_size
        else DesignProblem.from_workload(
            workload(n).select(classes=["dp"]), degree=d, link_bandwidth=12.5e9
        )
    )
    design = topoopt_design(p, variant, k_paths=3, seed=1)
    check_design(p, design)
    assert design.info["d_ar"] + design.info["d_mp"] <= d
    if variant == "topoopt-released":
        assert design.info["d_mp"] == 0


def test_ring_strides_are_the_geometric_rule_on_all_servers():
    p = DesignProblem.from_workload(
        workload(16).select(classes=["dp"]), degree=8, link_bandwidth=1e9
    )
    design = topoopt_design(p, "topoopt-released")
    assert design.info["strides"] == [1, 3, 5, 9]
    # the circuits are exactly C_16(1, 3, 5, 9): 4 rings, every server uses 8 ports
    want = nx.circulant_graph(16, [1, 3, 5, 9])
    got = nx.Graph([(int(u), int(v)) for u, v, _ in design.circuits])
    assert nx.utils.graphs_equal(want, got) and np.all(design.port_usage() == 8)
    # the full-group rings are single cycles i -> i + p (and reversed), weight 1/8 each
    rings = [r for r in design.rings if r["phase"] == "backward"]
    assert len(rings) == 8 and all(r["weight"] == pytest.approx(1 / 8) for r in rings)
    fwd = {r["stride"]: r["order"] for r in rings}
    assert fwd[5] == [(5 * i) % 16 for i in range(16)]


def test_degree_split_by_hand():
    # T_AR = 3, T_MP = 1, d = 8: 8 * 3/4 = 6 -> (6, 2); 8 * 1/2 = 4 -> (4, 4)
    assert degree_split(3.0, 1.0, 8) == (6, 2)
    assert degree_split(1.0, 1.0, 8) == (4, 4)
    # the released code's rule: round half up, odd -> +1. 8 * 0.4 = 3.2 -> 3 -> 4;
    # 5 * 0.9 = 4.5 -> 5 -> 6, capped at 4 (d=5 leaves 1 port for MP); 8/3 = 2.67 -> 3 -> 4
    # (the nearest even number would be 2); 8 * 0.3 = 2.4 -> 2
    assert degree_split(2.0, 3.0, 8) == (4, 4)
    assert degree_split(9.0, 1.0, 5) == (4, 1)
    assert degree_split(1.0, 2.0, 8) == (4, 4)
    assert degree_split(3.0, 7.0, 8) == (2, 6)
    # at least the +-1 ring; no MP traffic -> no matchings
    assert degree_split(0.0, 1.0, 6) == (2, 4)
    assert degree_split(1.0, 0.0, 7) == (6, 0)
    with pytest.raises(InputError, match="degree: got 1"):
        degree_split(1.0, 1.0, 1)


def test_matching_discount_on_four_servers_by_hand():
    # T01 = 10, T23 = 10, T02 = 6, T13 = 6. Port 1: {01, 23} (20 > 12), discount 1/2 -> 5, 5.
    # Port 2: {02, 13} (12 > 10) -- the discount changes the choice. Port 3: 02, 13 now 3, 3
    # and 01, 23 still 5, 5 -> {01, 23} again, c = 2: 5 * 2/3.
    t = sp.csr_matrix(([10.0, 10.0, 6.0, 6.0], ([0, 2, 0, 1], [1, 3, 2, 3])), shape=(4, 4))
    c1, w1 = mp_matchings(t, 1, 4)
    assert c1.tolist() == [[0, 1, 1], [2, 3, 1]]
    assert (w1[0, 1], w1[2, 3], w1[0, 2]) == (5.0, 5.0, 6.0)
    c2, w2 = mp_matchings(t, 2, 4)
    assert c2.tolist() == [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]]
    assert (w2[0, 1], w2[0, 2], w2[1, 3]) == (5.0, 3.0, 3.0)
    c3, w3 = mp_matchings(t, 3, 4)
    assert c3.tolist() == [[0, 1, 2], [0, 2, 1], [1, 3, 1], [2, 3, 2]]
    assert w3[0, 1] == pytest.approx(10 / 3) and w3[2, 3] == pytest.approx(10 / 3)


@pytest.mark.parametrize("n, ports", [(6, 1), (10, 3), (16, 5)])
def test_matchings_are_perfect_and_maximum(n, ports):
    rng = np.random.default_rng(n)
    dense = rng.integers(0, 5, (n, n)).astype(float) * (rng.random((n, n)) < 0.4)
    np.fill_diagonal(dense, 0)
    circuits, _ = mp_matchings(sp.csr_matrix(dense), ports, n)
    deg = np.bincount(circuits[:, 0], circuits[:, 2], n) + np.bincount(
        circuits[:, 1], circuits[:, 2], n
    )
    assert np.all(deg == ports)  # one perfect matching per port
    # first round is a maximum-weight perfect matching: compare with brute force on n = 6
    if n == 6:
        w = dense + dense.T
        first, _ = mp_matchings(sp.csr_matrix(dense), 1, n)
        got = sum(w[u, v] for u, v, _ in first)
        best = 0.0
        for perm in itertools.permutations(range(n)):
            pairs = [(perm[i], perm[i + 1]) for i in range(0, n, 2)]
            best = max(best, sum(w[a, b] for a, b in pairs))
        assert got == best


def test_odd_servers_with_matching_ports_is_an_input_error():
    with pytest.raises(InputError, match="servers: got 7"):
        mp_matchings(sp.csr_matrix(np.ones((7, 7))), 1, 7)
    w = Workload(
        gpus=7,
        gpus_per_server=1,
        demands=(
            Demand("all-reduce", np.arange(7).reshape(1, 7), 1e6, "dp", "backward"),
            Demand("send", np.array([[0, 3], [1, 5]]), 1e9, "pp", "forward", mutable=False),
        ),
    )
    p = DesignProblem.from_workload(w, degree=8, link_bandwidth=1e9)
    assert topoopt_design(p, "topoopt-released").info["d_mp"] == 0  # no matching: fine
    with pytest.raises(InputError, match="servers: got 7"):
        topoopt_design(p, "topoopt")


def brute_coin(target: int, coins: list[int], n: int, limit: int = 8) -> int:
    signed = sorted({c for p in coins for c in (p, -p)})
    for length in range(limit + 1):
        for combo in itertools.combinations_with_replacement(signed, length):
            if sum(combo) % n == target % n:
                return length
    return -1


@pytest.mark.parametrize("n, coins", [(12, [1, 5]), (16, [1, 3, 5]), (30, [1, 7]), (17, [2, 3])])
def test_coin_change_is_shortest(n, coins):
    for target in range(n):
        got = coin_change(target, coins, n)
        assert sum(got) % n == target
        assert all(abs(c) in coins for c in got)
        assert len(got) == brute_coin(target, coins, n)


def test_coin_change_unreachable():
    with pytest.raises(InputError, match="target: got 1"):
        coin_change(1, [2], 8)


def test_bad_degrees():
    with pytest.raises(InputError, match="degree: got 1"):
        topoopt_design(problem(8, 1))
    # a design using more ports than the servers have
    with pytest.raises(InputError, match="server 0"):
        Design(4, 2, 1e9, [[0, 1, 2], [0, 2, 1]], (), NodePaths.empty(), "x", "x", 0, 0, 0, 0)
    with pytest.raises(InputError, match="degree: got 8"):
        random_regular_circuits(8, 8)


def test_k_shortest_paths_are_shortest_and_distinct():
    circuits = np.array([[u, (u + 1) % 8, 1] for u in range(8)] + [[0, 4, 1]])  # ring + chord
    paths = sample_shortest_paths(Circuits(circuits, 8), [0, 2], [4, 6], k=6, seed=0)
    lists = paths.to_lists()
    assert [p[0] for p in lists[0]] == [[0, 4]]  # the chord is the only shortest path
    # 2 -> 6: lengths 4 via 3-4-5 or via 1-0-(7 or 4)... all shortest paths have 3 hops
    g = nx.Graph([(int(u), int(v)) for u, v, _ in circuits])
    want = sorted(nx.all_shortest_paths(g, 2, 6))
    got = sorted(nodes for nodes, _ in lists[1])
    assert set(map(tuple, got)) <= set(map(tuple, want)) and len(got) == len(set(map(tuple, got)))
    assert sum(w for _, w in lists[1]) == pytest.approx(1.0)


def test_expander_baseline():
    p = problem(16, 4)
    design = expander_design(p, seed=3)
    check_design(p, design)
    assert np.all(design.port_usage() == 4)
    again = expander_design(p, seed=3)
    assert np.array_equal(again.circuits, design.circuits)  # seeded


def test_seeded_and_deterministic():
    p = problem(16, 6, mp_size=4e9)
    a, b = topoopt_design(p, seed=5), topoopt_design(p, seed=5)
    assert a.to_json().split('"wall_s"')[0] == b.to_json().split('"wall_s"')[0]


# --------------------------------------------------------------------------- matchings at scale
def _brute_max_weight_matching(w: np.ndarray) -> float:
    """Best matching weight (not necessarily perfect) by enumeration over pairings."""
    n = w.shape[0]

    def best(free: tuple[int, ...]) -> float:
        if len(free) < 2:
            return 0.0
        a, rest = free[0], free[1:]
        out = best(rest)  # a unmatched
        for i, b in enumerate(rest):
            out = max(out, w[a, b] + best(rest[:i] + rest[i + 1 :]))
        return out

    return best(tuple(range(n)))


@pytest.mark.parametrize("seed", range(4))
def test_both_blossoms_reach_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = 8
    w = np.triu(rng.random((n, n)) * (rng.random((n, n)) < 0.6), 1)
    w = w + w.T
    iu, ju = np.nonzero(np.triu(w, 1) > 0)
    want = _brute_max_weight_matching(w)
    for matcher in ("rustworkx", "networkx"):
        pairs = max_weight_matching(n, iu, ju, w[iu, ju], matcher)
        nodes = [x for pr in pairs for x in pr]
        assert len(nodes) == len(set(nodes))  # a matching
        assert sum(w[a, b] for a, b in pairs) == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("n, ports", [(12, 3), (20, 4)])
def test_matchers_agree_on_weight_round_by_round(n, ports):
    # the two blossoms may break ties differently, but every round's matching weighs the same
    rng = np.random.default_rng(n)
    dense = rng.integers(1, 50, (n, n)).astype(float)
    np.fill_diagonal(dense, 0)
    w0 = dense + dense.T
    a, _ = mp_matchings(sp.csr_matrix(dense), 1, n, matcher="rustworkx")
    b, _ = mp_matchings(sp.csr_matrix(dense), 1, n, matcher="networkx")
    assert sum(w0[u, v] for u, v, _ in a) == sum(w0[u, v] for u, v, _ in b)
    c, _ = mp_matchings(sp.csr_matrix(dense), ports, n)
    deg = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
    assert np.all(deg == ports)


def test_candidate_pairs_keep_each_servers_heaviest_partners():
    rng = np.random.default_rng(5)
    n, k = 30, 4
    w = rng.random((n, n))
    w = w + w.T
    np.fill_diagonal(w, 0)
    iu, ju = candidate_pairs(w, k)
    kept = set(zip(iu.tolist(), ju.tolist(), strict=True))
    assert all(a < b for a, b in kept)
    for v in range(n):  # every server's k heaviest partners are candidates (independent sort)
        for u in sorted(range(n), key=lambda x: -w[v, x])[:k]:
            assert (min(u, v), max(u, v)) in kept
    assert len(kept) <= n * k
    assert len(list(zip(*candidate_pairs(w, None), strict=True))) == n * (n - 1) // 2


def test_sparsified_matchings_are_perfect_and_match_the_exact_ones_on_random_demand():
    # above EXACT_MATCHING_SERVERS the blossom sees each server's heaviest partners only; on
    # random dense demand the optimum uses heavy pairs, so the weight is the exact one
    rng = np.random.default_rng(2)
    n = 40
    dense = rng.random((n, n))
    np.fill_diagonal(dense, 0)
    w0 = dense + dense.T
    exact, _ = mp_matchings(sp.csr_matrix(dense), 1, n, partners=None)
    sparse, _ = mp_matchings(sp.csr_matrix(dense), 1, n, partners=8)
    assert sum(w0[u, v] for u, v, _ in sparse) == pytest.approx(
        sum(w0[u, v] for u, v, _ in exact), rel=1e-9
    )
    c, _ = mp_matchings(sp.csr_matrix(dense), 3, n, partners=2)
    deg = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
    assert np.all(deg == 3)  # completion keeps every round perfect


def test_matching_options_are_checked():
    t = sp.csr_matrix(np.ones((4, 4)))
    with pytest.raises(InputError, match="partners"):
        mp_matchings(t, 1, 4, partners=0)
    with pytest.raises(InputError, match="matcher"):
        mp_matchings(t, 1, 4, matcher="hungarian")


def test_path_draws_merge_duplicates_like_a_per_pair_unique():
    # the vectorised merge equals numpy.unique over each pair's draws (second implementation)
    rng = np.random.default_rng(0)
    n = 24
    c = np.array([[i, (i + s) % n, 1] for i in range(n) for s in (1, 5)], np.int64)
    src = rng.integers(0, n, 200)
    dst = (src + rng.integers(1, n, 200)) % n
    got = sample_shortest_paths(Circuits(c, n), src, dst, k=4, seed=7)
    dist = dict(nx.all_pairs_shortest_path_length(nx.Graph(c[:, :2].tolist())))
    lists = got.to_lists()
    for i in range(src.size):
        paths = [tuple(p) for p, _ in lists[i]]
        assert paths == sorted(set(paths))  # distinct, lexicographic
        assert all(len(p) - 1 == dist[src[i]][dst[i]] for p in paths)  # shortest
        assert sum(wt for _, wt in lists[i]) == pytest.approx(1.0)


def test_path_draws_of_over_a_hundred_hops_merge():
    """A ring of 301 servers: a pair 150 hops apart has one shortest path each way round
    only when the hops are fewer than half the ring (both ways otherwise). The merge's
    integer key would need ``302 ** 151`` (a float overflow: ``reconfig`` on DLRM's 256
    servers with 4 ports raised OverflowError); the row sort gives the same paths."""
    n = 301
    c = np.array([[i, (i + 1) % n, 1] for i in range(n)], np.int64)
    src = np.array([0, 0, 7, 150])
    dst = np.array([150, 151, 157, 0])
    got = sample_shortest_paths(Circuits(c, n), src, dst, k=8, seed=1)
    lists = got.to_lists()
    for i in range(src.size):
        paths = [tuple(p) for p, _ in lists[i]]
        assert len(paths) == 1 and len(paths[0]) == 151  # 150 hops, the short way round
        step = 1 if (dst[i] - src[i]) % n == 150 else -1
        assert paths[0] == tuple((src[i] + step * np.arange(151)) % n)
        assert lists[i][0][1] == 1.0


def two_tier_demand(n: int = 16) -> np.ndarray:
    """DLRM's embedding all-to-all on 16 servers: the first half holds the tables (2 units between
    each pair of them), every table server sends 1 unit to every other server."""
    h = n // 2
    t = np.zeros((n, n))
    t[:h, :] = 1.0
    t[:, :h] = 1.0
    t[:h, :h] = 2.0
    np.fill_diagonal(t, 0.0)
    return t


@pytest.mark.parametrize("matcher", ["rustworkx", "networkx"])
def test_matchings_wire_no_pair_without_demand_when_an_optimum_avoids_it(matcher):
    # Issue 13: on this demand every perfect matching covering the table servers with fresh pairs
    # weighs the same (each table server contributes 2 units), so round after round the blossom
    # could pair servers 8-15 among themselves (no demand) and stack circuits there: 7 parallel
    # circuits on 8-9, 10-11, ... at 8 ports. Among the maximum-weight matchings the tie-break
    # takes the pairs with demand, so no circuit is wasted and the cut gets circuits.
    t = two_tier_demand()
    w0 = t + t.T
    for ports in (1, 4, 6):
        c, _ = mp_matchings(sp.csr_matrix(t), ports, 16, matcher=matcher)
        assert np.all(w0[c[:, 0], c[:, 1]] > 0)  # every MP circuit carries demand
        assert c[:, 2].max() == 1  # fresh pairs exist, so none is stacked
        cross = c[(c[:, 0] < 8) != (c[:, 1] < 8), 2].sum()
        assert cross == 8 * ports  # servers 8-15 can only be matched across the cut
    first, _ = mp_matchings(sp.csr_matrix(t), 1, 16, matcher=matcher)
    # still a maximum-weight one: 8 cross pairs of 1 + 1 units, as 4 table pairs of 2 + 2 would
    assert sum(w0[u, v] for u, v, _ in first) == 16.0


def test_more_ports_nest_the_topology_when_the_allreduce_share_is_unchanged():
    # What the paper's TopologyFinder guarantees with more ports: the MP matchings are built
    # round by round, so with the same d_AR (same rings) the design at d is contained in the
    # design at d' > d; hop distances can then only shrink. Nothing is promised about the
    # routed time (the paths change), see docs/topoopt-baseline.md.
    w = workload(16, mp_size=4e9)
    designs = {
        d: topoopt_design(DesignProblem.from_workload(w, degree=d, link_bandwidth=12.5e9))
        for d in (4, 6, 8)
    }
    assert {d: x.info["d_ar"] for d, x in designs.items()} == {4: 2, 6: 2, 8: 2}
    for small, big in ((4, 6), (6, 8)):
        a = {(u, v): k for u, v, k in designs[small].circuits.tolist()}
        b = {(u, v): k for u, v, k in designs[big].circuits.tolist()}
        assert all(b.get(pair, 0) >= k for pair, k in a.items())
        ha = designs[small].circuits.hop_distances()
        hb = designs[big].circuits.hop_distances()
        assert np.all(hb <= ha) and np.isfinite(ha).all()


def test_sparsified_matching_keeps_the_heavy_pair_over_more_pairs():
    # candidates 0-1 (10), 0-2 (1), 1-3 (1): the heaviest matching is {0-1} (then 2-3 completes
    # it), not the larger {0-2, 1-3} that a maximum-cardinality blossom would return
    t = sp.csr_matrix(([10.0, 1.0, 1.0], ([0, 0, 1], [1, 2, 3])), shape=(4, 4))
    for partners in (None, 2):
        c, _ = mp_matchings(t, 1, 4, partners=partners)
        assert c.tolist() == [[0, 1, 1], [2, 3, 1]]


def pipeline_workload(blocks: bool, pp: int = 3, dp: int = 4) -> tuple[Workload, np.ndarray]:
    """DP all-reduce per stage, PP sends between stages; one GPU a server. ``blocks``: Megatron's
    default numbering (dp inside pp: stage s is servers ``s dp .. s dp + dp - 1``); else the
    coset numbering of TopoOpt's released code (server ``s + pp r``). Also returns the map from
    the block numbering to the coset one."""

    def server(s, r):
        return s * dp + r if blocks else s + pp * r

    groups = np.array([[server(s, r) for r in range(dp)] for s in range(pp)])
    sends = np.array([[server(s, r), server(s + 1, r)] for s in range(pp - 1) for r in range(dp)])
    relabel = np.array([s + pp * r for s in range(pp) for r in range(dp)])
    w = Workload(
        gpus=pp * dp,
        gpus_per_server=1,
        demands=(
            Demand("all-reduce", groups, 4e8, "dp", "backward"),
            Demand("send", sends, 1e8, "pp", "forward", count=4, mutable=False),
        ),
    )
    return w, relabel


def test_connectivity_ring_joins_pipeline_neighbours_when_stages_are_blocks():
    # Megatron's default numbering puts each stage's data-parallel group on consecutive servers.
    # The released TopoOpt numbers the servers so that its groups are cosets of Z_n, and its +-1
    # ring (over that numbering) joins member r of stage s to member r of stage s + 1. Before
    # the fix the ring ran over 0..n-1 in our numbering: it joined data-parallel neighbours the
    # group rings already join, and left one circuit between two stages for all dp pipeline
    # pairs (GPT-3 175B at 1,024 servers: 64 pairs on one circuit, 18.5 s against the random
    # expander's 13.5 s).
    w, _ = pipeline_workload(blocks=True)
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=12.5e9)
    design = topoopt_design(p, "topoopt-released")
    check_design(p, design)
    # the +-1 ring by hand: 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11 (stage by stage, replica r)
    ring = [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]
    got = {(int(u), int(v)) for u, v, _ in design.circuits}
    assert {(min(a, b), max(a, b)) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)} <= got
    hops = design.circuits.hop_distances()
    assert all(hops[s * 4 + r, (s + 1) * 4 + r] == 1 for s in range(2) for r in range(4))


def test_topoopt_design_does_not_depend_on_how_the_plan_numbers_the_servers():
    # The same job numbered as blocks (Megatron) and as cosets (TopoOpt's code): the block
    # design relabelled is the coset design, circuit for circuit, with the same objective.
    (wb, relabel), (wc, _) = pipeline_workload(blocks=True), pipeline_workload(blocks=False)
    pb = DesignProblem.from_workload(wb, degree=4, link_bandwidth=12.5e9)
    pc = DesignProblem.from_workload(wc, degree=4, link_bandwidth=12.5e9)
    db, dc = topoopt_design(pb, "topoopt-released"), topoopt_design(pc, "topoopt-released")
    moved = Circuits(
        np.column_stack([relabel[db.circuits.rows[:, :2]], db.circuits.rows[:, 2]]), 12
    )
    assert np.array_equal(moved.rows, dc.circuits.rows)
    assert db.objective_s == pytest.approx(dc.objective_s, rel=1e-12)
