"""Blink tree packing, SCCL/TACCL-style synthesis, cut bounds and schedules, against closed forms,
brute force and the published DGX-1 figures."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from solvers.collectives import blink as blink_mod
from solvers.collectives.blink import Packing, pack_trees
from solvers.collectives.bounds import cut_bound
from solvers.collectives.overlay import overlay, server_links
from solvers.collectives.rings import best_ring
from solvers.collectives.run import run_collective
from solvers.collectives.schedule import Tree, template_schedule, time_schedule, tree_schedule
from solvers.collectives.synthesis import (
    bandwidth_cost_bound,
    sccl_feasible,
    sccl_pareto,
    sccl_schedule,
    taccl_schedule,
)
from solvers.collectives.topologies import DGX1_NVLINKS, dgx1
from topoopt.fabrics import direct_connect, expander, fat_tree, ideal, torus
from traffic.errors import InputError

B = 12.5e9  # 100 Gbps
S = 1e9


def _close(a, b, rel=1e-6):
    return a == pytest.approx(b, rel=rel)


# ---------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("n", [4, 6])
def test_ring_all_gather_on_a_ring_is_the_closed_form(n):
    f = torus(str(n), B, latency=0.0)
    t, _ = time_schedule(template_schedule("all-gather", n, S, "ring"), f)
    assert _close(t, (n - 1) / n * S / B)
    # the bidirectional ring halves it and reaches the cut bound (2 links in per server)
    b = cut_bound(f, "all-gather", S)
    assert _close(b.seconds, (n - 1) / n * S / (2 * B))
    r = run_collective(f, "all-gather", S, "blink")
    assert _close(r.time_s, b.seconds)


def test_ideal_switch_ring_and_blink_hit_the_bound():
    f = ideal(8, 1, B, latency=0.0)
    b = cut_bound(f, "all-reduce", S)
    assert _close(b.seconds, 2 * 7 / 8 * S / B)  # 2(n-1) S over n servers of B each
    for alg in ("ring", "blink"):
        assert _close(run_collective(f, "all-reduce", S, alg).time_s, b.seconds)


def test_star_all_reduce_and_broadcast_take_s_over_b():
    """A star (hub 0, 5 leaves): every leaf sends S up and gets S back, so all-reduce takes
    S/B (the per-server bound), and a broadcast from a leaf S/B too."""
    f = direct_connect(6, 5, [(0, v) for v in range(1, 6)], B, latency=0.0)
    for coll, root in (("all-reduce", 0), ("broadcast", 3)):
        b = cut_bound(f, coll, S, root=root)
        assert _close(b.seconds, S / B)
        r = run_collective(f, coll, S, "blink", root=root)
        assert _close(r.time_s, S / B, rel=1e-4)


def test_pipelined_chain_broadcast_closed_form():
    """Broadcast along the path 0-1-2-3 in C chunks: (C + h - 1) / C * S / B (h = 3 hops)."""
    f = direct_connect(4, 2, [(0, 1), (1, 2), (2, 3)], B, latency=0.0)
    tree = Tree(0, (-1, 0, 1, 2), 1.0)
    for c in (1, 4, 10):
        s = tree_schedule("broadcast", 4, S, [tree], algorithm="blink", chunks=c)
        assert _close(time_schedule(s, f)[0], (c + 2) / c * S / B)


def test_subset_cut_is_tighter_on_a_barbell():
    """Two triangles joined by one link: the cut between them bounds the all-gather."""
    edges = [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)]
    f = direct_connect(6, 3, edges, B, latency=0.0)
    b = cut_bound(f, "all-gather", S)
    assert _close(b.per_node_s, 5 / 6 * S / (2 * B))
    assert _close(b.subset_s, 3 / 6 * S / B)  # half the data crosses one link into each side
    assert b.seconds == b.subset_s
    r = run_collective(f, "all-gather", S, "blink")
    assert r.time_s >= b.seconds * (1 - 1e-9)
    assert _close(r.time_s, b.seconds, rel=1e-4)  # trees reach it


# ---------------------------------------------------------------------------- brute force
def _brute_min_steps(links, n, chunks, collective="all-gather", max_steps=6):
    """Fewest one-round steps of an all-gather/broadcast by exhaustive search over which chunk
    every link sends each step (the same k-synchronous model, enumerated)."""
    if collective == "broadcast":
        start = tuple(frozenset(range(chunks)) if v == 0 else frozenset() for v in range(n))
        total = chunks
    else:
        start = tuple(frozenset(range(v * chunks, (v + 1) * chunks)) for v in range(n))
        total = n * chunks
    arcs = list(zip(links.src.tolist(), links.dst.tolist(), links.count.tolist(), strict=True))
    frontier = {start}
    for k in range(1, max_steps + 1):
        nxt = set()
        for st in frontier:
            options = []
            for u, v, m in arcs:
                can = sorted(st[u] - st[v])
                opts = [()]
                for j in range(1, min(m, len(can)) + 1):
                    opts += list(itertools.combinations(can, j))
                options.append(opts)
            for choice in itertools.product(*options):
                new = [set(x) for x in st]
                for (_, v, _), sent in zip(arcs, choice, strict=True):
                    new[v].update(sent)
                nxt.add(tuple(frozenset(x) for x in new))
        if any(all(len(x) == total for x in st) for st in nxt):
            return k
        frontier = nxt
    return None


@pytest.mark.parametrize(
    "edges, n, chunks",
    [
        ([(0, 1), (1, 2)], 3, 1),
        ([(0, 1), (1, 2)], 3, 2),
        ([(0, 1), (1, 2), (2, 3), (0, 3)], 4, 1),
        ([(0, 1), (1, 2), (2, 3)], 4, 1),
        ([(0, 1), (0, 2), (0, 3)], 4, 1),
    ],
)
def test_exact_synthesis_matches_enumeration(edges, n, chunks):
    sl = server_links(direct_connect(n, 3, edges, B))
    for coll in ("all-gather", "broadcast"):
        k_min = _brute_min_steps(sl, n, chunks, coll)
        assert k_min is not None
        assert sccl_feasible(sl, coll, chunks, k_min, k_min).status == "feasible"
        if k_min > 1:
            assert sccl_feasible(sl, coll, chunks, k_min - 1, k_min - 1).status == "infeasible"


def test_exact_schedule_is_valid_and_timed_by_rounds():
    """Replay a synthesized all-gather: every chunk sent by a holder, everything delivered; the
    step-synchronous flow-model time is R chunk-times plus K hop latencies."""
    f = expander(8, 3, 0, B)
    sl = server_links(f)
    res = sccl_feasible(sl, "all-gather", 3, 7, 7)
    assert res.status == "feasible"
    has = [{v * 3 + j for j in range(3)} for v in range(8)]
    for step in range(7):
        sent = [(c, s, d) for c, s, d, k in res.sends if k == step]
        for c, s, _ in sent:
            assert c in has[s]
        for c, _, d in sent:
            has[d].add(c)
    assert all(len(h) == 24 for h in has)
    sched = sccl_schedule(sl, "all-gather", S, res)
    t, _ = time_schedule(sched, f)
    assert _close(t, 7 * (S / 24) / B + 7 * 1e-6)


# ---------------------------------------------------------------------------- acceptance
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 3, 7])
def test_synthesis_within_10_percent_of_the_cut_bound_on_3_regular_graphs(seed):
    f = expander(8, 3, seed, B)
    for coll, factor in (("all-gather", 1.0), ("all-reduce", 2.0)):
        bound = factor * 7 / 8 * S / (3 * B)  # (n-1)/n S over 3 links in, twice for all-reduce
        r = run_collective(f, coll, S, "synthesize")
        assert _close(r.lower_bound_s, bound)
        assert bound * (1 - 1e-9) <= r.time_s <= 1.10 * bound


FABRICS = {
    "expander-8x3": lambda: expander(8, 3, 5, B),
    "torus-3x3": lambda: torus("3x3", B),
    "fat-tree-k4": lambda: fat_tree(4, 8, port_bandwidth=B),
    "dgx1-partial": lambda: dgx1([0, 1, 2, 4, 5]),
    "direct-8x4": lambda: direct_connect(8, 4, None, B),
}


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_blink_is_never_slower_than_ring(name):
    f = FABRICS[name]()
    for coll in ("all-gather", "reduce-scatter", "all-reduce", "broadcast"):
        ring = run_collective(f, coll, S, "ring").time_s
        r = run_collective(f, coll, S, "blink")
        assert r.time_s <= ring * (1 + 1e-9)
        assert r.time_s >= r.lower_bound_s * (1 - 1e-9)


def test_blink_falls_back_to_the_ring_and_says_so(monkeypatch):
    """A packing slower than the ring (forced: chains that jump across the 6-ring, every arc
    two or three hops) returns the ring."""
    f = torus("6", B)

    def jumping(ov, collective, root=0, **_):
        trees = []
        for r in range(6):
            order = [(r + k) % 6 for k in (0, 3, 1, 4, 2, 5)]
            parent = [-1] * 6
            for a, b in itertools.pairwise(order):
                parent[b] = a
            trees.append(Tree(r, tuple(parent), 1.0))
        return Packing(tuple(trees), 1.0, 1.0, 1, "optimal", 6)

    monkeypatch.setattr("solvers.collectives.run.pack_trees", jumping)
    r = run_collective(f, "all-gather", S, "blink")
    ring = run_collective(f, "all-gather", S, "ring")
    assert r.time_s == ring.time_s and r.algorithm == "blink"
    assert r.schedule.info["selected"] == "ring" and "faster" in r.schedule.info["reason"]


def test_packing_bound_brackets_the_rate():
    ov = overlay(expander(10, 3, 2, B))
    p = pack_trees(ov, "all-gather")
    assert p.status in ("optimal", "converged") and p.rate <= p.upper_bound * (1 + 1e-6)
    # fluid time equals the busiest link's bytes
    s = tree_schedule("all-gather", 10, S, list(p.trees), algorithm="blink")
    arcs = np.zeros(ov.n_arcs)
    for (u, v), b in s.arc_bytes().items():
        arcs[ov.arc(u, v)] += b
    assert _close(ov.link_seconds(arcs), (S / 10) / p.rate, rel=1e-6)
    assert blink_mod.LP_ITERATION_LIMIT > 0


def test_taccl_routing_is_integral_and_conserves_bytes():
    ov = overlay(expander(8, 3, 1, B))
    s = taccl_schedule(ov, "all-gather", S, chunks_per_root=4)
    assert s.info["routing_status"] in ("optimal", "time-limit")
    assert s.info["chunks_per_root"] == 4 and s.info["sketch_trees"] >= 8
    assert _close(float(s.flows.bytes.sum()), 7 * S)  # (n-1) arcs per tree, S/n per root


# ---------------------------------------------------------------------------- published
def test_dgx1_topology_matches_the_nvlink_matrix():
    assert (DGX1_NVLINKS == DGX1_NVLINKS.T).all() and (DGX1_NVLINKS.sum(axis=1) == 6).all()
    sl = server_links(dgx1())
    assert int(sl.count.sum()) == 48 and sl.bandwidth == 25e9


def test_sccl_dgx1_all_gather_latency_and_bandwidth_optimal():
    """SCCL (Cai et al., PPoPP 2021, Sec. 2) on the DGX-1: the latency-optimal all-gather takes
    2 steps (1 chunk, 2 rounds); the bandwidth-optimal one has R/C = 7/6, with 6 chunks (3
    steps, 7 rounds)."""
    sl = server_links(dgx1())
    assert sccl_feasible(sl, "all-gather", 1, 1, 1).status == "infeasible"
    assert sccl_feasible(sl, "all-gather", 1, 2, 2).status == "feasible"
    from fractions import Fraction

    assert bandwidth_cost_bound(sl, "all-gather") == Fraction(7, 6)
    one_round = sccl_pareto(sl, "all-gather", max_chunks=2, max_steps=3)  # R = K
    assert [(p.steps, p.chunks, p.rounds) for p in one_round] == [(2, 1, 2), (3, 2, 3)]
    frontier = sccl_pareto(sl, "all-gather", max_chunks=6, max_steps=3, slack=4)
    assert [(p.steps, p.chunks, p.rounds) for p in frontier] == [(2, 2, 3), (3, 6, 7)]
    res = frontier[-1]
    f = dgx1()
    t, _ = time_schedule(sccl_schedule(sl, "all-gather", S, res), f)
    # 7 rounds of S/48-byte chunks on one NVLink: exactly the cut bound, plus 3 hops
    assert _close(t, cut_bound(f, "all-gather", S).seconds + 3e-6)
    # the tree packing reaches the same bandwidth optimum
    assert _close(run_collective(f, "all-gather", S, "blink").time_s, 7 / 6 * (S / 8) / 25e9, 1e-3)


def test_blink_beats_the_best_ring_on_a_partial_dgx1():
    """Blink (Wang et al., MLSys 2020): on a DGX-1 allocation where rings cannot use all links,
    packing trees is faster. GPUs 0,1,2,4,5: the best of all 12 rings broadcasts at one NVLink,
    the trees at two."""
    f = dgx1([0, 1, 2, 4, 5])
    ring = best_ring(overlay(f), "broadcast", S)
    assert ring.rings_tried == 24
    r = run_collective(f, "broadcast", S, "blink")
    assert _close(ring.seconds, S / 25e9)
    assert _close(r.time_s, S / 50e9, rel=1e-4)


def test_rank_flows_hook_times_like_the_schedule():
    """The iteration-model hook: a synthesized (step-synchronous) schedule expanded to ranks and
    simulated through a FlowBuilder takes the schedule's own time."""
    from solvers.collectives.schedule import schedule_rank_flows
    from topoopt.flowsim import simulate
    from topoopt.flowsim.network import FlowBuilder, Network

    f = expander(8, 3, 0, B)
    sl = server_links(f)
    sched = sccl_schedule(sl, "all-reduce", S, sccl_feasible(sl, "all-gather", 1, 3, 3))
    t, _ = time_schedule(sched, f)
    fb = FlowBuilder(Network(f, gpus_per_server=1))
    schedule_rank_flows(sched, np.arange(8)).add_to(fb)
    assert _close(simulate(fb.build()).makespan, t)


def test_all_to_all_synthesis_closed_form_and_never_slower_than_direct():
    """4-server ring, 1 GB/s links: 4 MB all-to-all needs 16 MB of link traffic on 8 GB/s (the
    subset cut of two adjacent servers says the same): 2 ms; on an expander the routing LP
    (relaying through members) beats the fabric's ECMP routes."""
    f = torus("4", 1e9, latency=0.0)
    r = run_collective(f, "all-to-all", 4e6, "synthesize")
    assert _close(r.lower_bound_s, 2e-3) and _close(r.time_s, 2e-3)
    g = expander(16, 4, 1, B)
    syn = run_collective(g, "all-to-all", S, "synthesize")
    direct = run_collective(g, "all-to-all", S, "direct")
    assert syn.time_s < direct.time_s and syn.time_s >= syn.lower_bound_s
    b = run_collective(g, "all-to-all", S, "blink")  # no tree form: the direct schedule
    assert b.time_s == direct.time_s and b.schedule.info["selected"] == "direct"
    for name in ("ring", "tree", "halving-doubling"):  # one flow per pair under any name
        with pytest.raises(InputError, match="direct, blink or synthesize for an all-to-all"):
            run_collective(g, "all-to-all", S, name)


def test_edmonds_matches_networkx_on_random_digraphs():
    """The dense Chu-Liu/Edmonds of the pricing step against networkx's (a peer
    implementation): same optimal cost, and a valid arborescence, on 200 random digraphs."""
    import networkx as nx

    from solvers.collectives.blink import edmonds

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 9))
        c = rng.integers(0, 5, size=(n, n)).astype(float)
        c[rng.random((n, n)) < 0.3] = np.inf
        r = int(rng.integers(0, n))
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_weighted_edges_from(
            (u, v, c[u, v]) for u in range(n) for v in range(n)
            if u != v and v != r and np.isfinite(c[u, v])
        )  # fmt: skip
        try:
            ref = sum(c[u, v] for u, v in nx.minimum_spanning_arborescence(g).edges())
        except nx.NetworkXException:
            ref = None
        try:
            p = edmonds(c, r)
        except InputError:
            assert ref is None
            continue
        assert ref is not None and _close(sum(c[p[v], v] for v in range(n) if v != r), ref)
        for v in range(n):  # every node reaches the root
            seen, u = set(), v
            while u != r:
                assert u not in seen
                seen.add(u)
                u = p[u]
