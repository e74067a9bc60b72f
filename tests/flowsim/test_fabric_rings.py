"""NCCL-like rings on direct fabrics (issue 29 item 14): edge-disjoint Hamiltonian cycles, both
directions, against the closed-form ring time."""

import numpy as np
import pytest

from solvers.collectives.run import run_collective
from topoopt.app.studies.compare import build_fabric
from topoopt.fabrics import expander, ideal, torus
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.fabric_rings import fabric_rings, hamiltonian_factors, ring_workload
from traffic.workload import Demand, Workload

B = 12.5e9


def _check_cycles(fab, cycles):
    """Every cycle visits every server once along cables; no cable used more often than it
    exists (bundles count their multiplicity)."""
    n = fab.n_servers
    have = {}
    for s, d, m in zip(fab.src.tolist(), fab.dst.tolist(), fab.multiplicity.tolist(), strict=True):
        if s < n and d < n and s < d:
            have[(s, d)] = have.get((s, d), 0) + m
    used = {}
    for c in cycles:
        assert sorted(c.tolist()) == list(range(n))
        for a, b in zip(c.tolist(), np.roll(c, -1).tolist(), strict=True):
            k = (min(a, b), max(a, b))
            assert k in have, f"{k} is not a cable"
            used[k] = used.get(k, 0) + 1
    assert all(used[k] <= have[k] for k in used)


@pytest.mark.parametrize(
    ("dims", "expect"), [("4x4", 2), ("8x4", 2), ("4x3", 2), ("8x4x4", 3), ("16", 1)]
)
def test_torus_hamiltonian_decomposition(dims, expect):
    fab = torus(dims, B)
    cyc = hamiltonian_factors(fab)
    assert len(cyc) == expect  # a full decomposition: every port on a ring
    _check_cycles(fab, cyc)
    assert fabric_rings(fab).shape == (2 * expect, fab.n_servers)


def test_expander_cycles_are_edge_disjoint():
    fab = expander(32, 8, 0, B)
    cyc = hamiltonian_factors(fab)
    assert len(cyc) >= 2
    _check_cycles(fab, cyc)


def test_switched_fabric_keeps_rank_order():
    assert fabric_rings(ideal(5, 1, B)).tolist() == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize("dims", ["4x4", "8x4", "16"])
def test_torus_ring_all_reduce_meets_its_bound(dims):
    # 2k rings (k Hamiltonian cycles, both ways) of S/(2k) each: every directed cable carries
    # 2(n-1)/n * S/(2k) bytes, so T = 2(n-1)/n * S / (2 D B) with D dimensions (2D ports of B);
    # one ring in rank order took 4x that on the 4x4 torus
    S = 1e9
    fab = torus(dims, B)
    n, D = fab.n_servers, len(dims.split("x"))
    closed = 2 * (n - 1) / n * S / (2 * D * B)
    r = run_collective(fab, "all-reduce", S, "ring")
    assert r.lower_bound_s == pytest.approx(closed, rel=1e-9)
    assert r.time_s == pytest.approx(closed, rel=1e-3)  # plus link latencies only


def test_compare_torus_pure_dp_equals_the_ideal_switch():
    # pure DP over 16 servers on the 2-D torus of 4 ports: the same 4B per server as the ideal
    # switch, so the two rings both ways give the ideal's communication time (old: 4x)
    S = 4e8
    w = Workload(16, 1, (Demand("all-reduce", [list(range(16))], S, "dp", "backward"),))
    run = build_fabric("torus", w, 4, B)
    assert run.fabric.params["dims"] in ([4, 4], (4, 4))
    t = communication_time(run.workload, run.fabric).total_s
    closed = 2 * 15 / 16 * S / (4 * B)
    assert t == pytest.approx(closed, rel=1e-3)
    t_ideal = communication_time(w, build_fabric("ideal", w, 4, B).fabric).total_s
    assert t == pytest.approx(t_ideal, rel=1e-3)


def test_ring_workload_partial_groups_run_both_ways():
    # two groups of 4 servers each on a 4x2 torus: not all servers, so rank order and its
    # reverse, half the bytes each; wire bytes unchanged
    fab = torus("4x2", B)
    w = Workload(8, 1, (Demand("all-reduce", [[0, 1, 2, 3], [4, 5, 6, 7]], 1e6, "dp", "backward"),))
    rw = ring_workload(w, fab)
    assert [d.groups.tolist() for d in rw.demands] == [
        [[0, 1, 2, 3], [4, 5, 6, 7]],
        [[3, 2, 1, 0], [7, 6, 5, 4]],
    ]
    assert rw.total_wire_bytes() == pytest.approx(w.total_wire_bytes())


def _brute_four_cycles(fab):
    """Every 4-cycle of the simple graph under the cables, by trying every 4 servers."""
    from itertools import combinations, permutations

    n = fab.n_servers
    adj = set()
    for s, d in zip(fab.src.tolist(), fab.dst.tolist(), strict=True):
        if s < n and d < n and s != d:
            adj |= {(s, d), (d, s)}
    out = set()
    for four in combinations(range(n), 4):
        for a, b, c, d in permutations(four):
            if a < c and b < d and {(a, b), (b, c), (c, d), (d, a)} <= adj:
                out.add((a, b, c, d))
    return out


@pytest.mark.parametrize("make", [lambda: expander(12, 4, seed=1, port_bandwidth=B),
                                  lambda: torus("2x4", B)])  # fmt: skip
def test_four_cycles_and_their_cables_against_brute_force(make, monkeypatch):
    from topoopt.flowsim import fabric_rings as fr

    fab = make()
    u, v = fr._server_edges(fab)
    sq = fr._four_cycles(fab.n_servers, u, v)
    assert len(sq) == len(set(sq)) and set(sq) == _brute_four_cycles(fab)
    turns, simple = fr._orientations(fab.n_servers, u, v, sq)
    assert turns.shape == (2 * len(sq), 4)
    for (w, x, y, z), cab in zip(turns.tolist(), simple, strict=True):
        pairs = [(w, x), (y, z), (x, y), (z, w)]
        ids = [[e for e in range(u.size) if {u[e], v[e]} == set(p)] for p in pairs]
        # one cable on each pair: those cables, in order; a bundle on any pair: None
        assert cab == (tuple(i[0] for i in ids) if all(len(i) == 1 for i in ids) else None)
    # above the limit the 4-cycles are not listed (the rotation-extension alone runs)
    monkeypatch.setattr(fr, "_MAX_SQUARES", len(sq) - 1)
    assert fr._four_cycles(fab.n_servers, u, v) == []


def test_dense_expander_decomposes_fully_and_without_the_search(monkeypatch):
    """16 ports on 128 servers: 8 edge-disjoint Hamiltonian cycles, the most there can be (the
    4-cycle search, a few seconds before it read owners directly; it took 85 s at 32 ports).
    Without the search (over its 4-cycle limit), the rotation-extension still finds rings."""
    from topoopt.flowsim import fabric_rings as fr

    fab = expander(128, 16, seed=3, port_bandwidth=B)
    cyc = hamiltonian_factors(fab)
    assert len(cyc) == 8
    _check_cycles(fab, cyc)
    monkeypatch.setattr(fr, "_MAX_SQUARES", 0)
    fab = expander(64, 8, seed=0, port_bandwidth=B)
    cyc = hamiltonian_factors(fab)
    _check_cycles(fab, cyc)
    # no 4-cycle listed, so no exchange: the rings are the rotation-extension's own, its last
    # and the cables it left made Hamiltonian by the alternating walks
    u, v = fr._server_edges(fab)
    alone = fr._sequential(fab.n_servers, u, v, 0)
    assert len(alone) == 3 and len(cyc) == 4
    assert all(np.array_equal(a, b) for a, b in zip(cyc[:2], alone[:2], strict=True))


@pytest.mark.parametrize(("n", "d", "seed"), [(64, 4, 0), (256, 4, 1), (128, 8, 0)])
def test_the_last_ring_by_alternating_walks(n, d, seed, monkeypatch):
    """Random regular fabrics ended one Hamiltonian cycle short (few 4-cycles to exchange on):
    4 ports on 64 servers had one ring of two. The alternating walks between the last cycle and
    the cables left complete the decomposition, the most rings there can be; without walks
    (a zero budget) the decomposition is the one before, one short; the same rings twice."""
    from topoopt.flowsim import fabric_rings as fr

    fab = expander(n, d, seed=seed, port_bandwidth=B)
    cyc = hamiltonian_factors(fab)
    assert len(cyc) == d // 2
    _check_cycles(fab, cyc)
    again = hamiltonian_factors(expander(n, d, seed=seed, port_bandwidth=B))
    assert all(np.array_equal(a, b) for a, b in zip(cyc, again, strict=True))
    monkeypatch.setattr(fr, "_PAIR_WALKS", 0)
    short = hamiltonian_factors(expander(n, d, seed=seed, port_bandwidth=B))
    assert len(short) == d // 2 - 1
    _check_cycles(fab, short)
    assert all(np.array_equal(a, b) for a, b in zip(cyc[:-2], short[:-1], strict=True))


def test_the_walks_leave_an_irregular_rest_alone():
    """Cables left that are not a 2-factor (one server with four, one with none): unchanged."""
    from topoopt.flowsim import fabric_rings as fr

    ring = np.arange(6)
    u = np.array([0, 1, 2, 3, 4, 5, 0, 0, 2, 3, 4, 5])
    v = np.array([1, 2, 3, 4, 5, 0, 2, 3, 4, 5, 2, 3])
    assert fr._complete(6, u, v, [ring], 0) == [ring]


def test_cycle_count_walk_against_scipy_components():
    """The search's compiled cycle count (a walk when every node has degree 2, else union-find)
    of the edges one factor owns, against scipy's connected components of those edges alone,
    on random 2-factors with double cables, on random edge sets, on edge sets leaving nodes
    isolated, and on the union of two random factors (degree 4: union-find)."""
    from topoopt.flowsim import fabric_rings as fr
    from topoopt.flowsim._ring_kernels import factor_cycles

    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(3, 30))
        perm, perm2 = rng.permutation(n), rng.permutation(n)
        a = np.concatenate([np.arange(n), rng.integers(0, n, 3)])
        b = np.concatenate([perm, rng.integers(0, n, 3)])
        for u, v in (  # perm: 2-cycles are double cables
            (np.arange(n), perm),
            (a, b),
            (np.arange(n - 2), perm[: n - 2]),
            (np.tile(np.arange(n), 2), np.concatenate([perm, perm2])),
        ):
            owner = rng.integers(0, 3, u.size)  # other factors' edges are ignored
            for p in range(3):
                f = owner == p
                want = fr._components(n, u[f], v[f])
                assert factor_cycles(n, u, v, owner, p) == want
            assert factor_cycles(n, u, v, np.zeros(u.size, np.int64), 0) == fr._components(n, u, v)


def test_search_stops_at_its_exchange_limit(monkeypatch):
    """Past _MAX_TRIES exchanges the factors are taken as they are: still edge-disjoint
    Hamiltonian cycles, fewer of them (a torus with bundles: 128 ports on 128 servers tried
    535,626 exchanges, 86 s; 10 s with the limit)."""
    from topoopt.flowsim import fabric_rings as fr

    counted = []
    real = fr.factor_cycles

    def spy(n, u, v, owner, p):
        counted.append(n)
        return real(n, u, v, owner, p)

    monkeypatch.setattr(fr, "factor_cycles", spy)
    fab = torus("8x4", B)
    full = hamiltonian_factors(fab)
    _check_cycles(fab, full)
    assert len(full) == 2 and len(counted) > 2  # Kotzig: two rings, found by exchanges
    counted.clear()
    monkeypatch.setattr(fr, "_MAX_TRIES", 0)
    monkeypatch.setattr(fr, "_PAIR_WALKS", 0)  # nor the last pair's walks
    cut = hamiltonian_factors(torus("8x4", B))
    _check_cycles(fab, cut)
    assert len(counted) == 2  # the two factors' first counts, then no exchange tried


def test_ring_facts_say_when_the_rings_miss_cables(monkeypatch):
    """A torus whose rings use every cable says so; one above the search's server limit runs
    rank order and its reverse, and every edge says that handicap: the row's note, a warning
    line of ``simulate``, and a slower iteration than with its rings (the same plan and
    fabric)."""
    import topoopt.flowsim.fabric_rings as fr
    from topoopt.app.studies.simulate import simulate_plan
    from topoopt.flowsim.fabric_rings import ring_facts

    full = ring_facts(torus("4x4", B))
    assert (full["rings"], full["possible"], full["full"]) == (2, 2, True)
    assert "every server-to-server cable" in full["note"]
    odd = ring_facts(expander(8, 3, 0, B))  # three cables a server: one ring on two of them
    assert (odd["rings"], odd["possible"], odd["full"]) == (1, 1, True)
    assert "on 2 of a server's 3 cables" in odd["note"]
    with_rings = simulate_plan("vgg16-dp", fabric="torus", degree=4)
    assert "fabric_warning" not in with_rings
    monkeypatch.setattr(fr, "_MAX_SERVERS", 8)  # vgg16-dp's 16 servers: past the limit
    none = ring_facts(torus("4x4", B))
    assert (none["rings"], none["full"]) == (0, False)
    assert "above 8 servers the search is not run" in none["note"]
    without = simulate_plan("vgg16-dp", fabric="torus", degree=4)
    assert without["fabric_warning"].startswith("torus: rings: no Hamiltonian cycle (above 8")
    assert without["iteration_s"] > with_rings["iteration_s"]
