"""Symmetric per-phase routes (solvers/joint/route_symmetry.py): the automorphisms found against
every permutation of a few small structures, the average against a plain dictionary Reynolds
average, routes of one orbit as images of each other, and the quotient's iteration of a
symmetric routing schedule against the plain run."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.joint.phase_routing import merge_routing, route_phase
from solvers.joint.route_symmetry import automorphisms, symmetrize
from solvers.model.design import NodePaths


def _circulant(n: int, offsets, mult=None) -> list[list[int]]:
    """Circuits ``i -- i + o (mod n)`` for every offset (multiplicity ``mult[o]``, default 1)."""
    mult = mult or {}
    rows = {(min(i, (i + o) % n), max(i, (i + o) % n)): mult.get(o, 1)
            for i in range(n) for o in offsets}  # fmt: skip
    return [[a, b, m] for (a, b), m in sorted(rows.items())]


def _ring_static(n: int) -> NodePaths:
    return NodePaths.from_lists(
        list(range(n)),
        [(i + 1) % n for i in range(n)],
        [[([i, (i + 1) % n], 1.0)] for i in range(n)],
    )


def _traffic(n: int, pairs, nbytes) -> sp.csr_matrix:
    s, d = zip(*pairs, strict=True)
    return sp.csr_matrix((np.asarray(nbytes, float), (s, d)), shape=(n, n))


def _as_dict(r: NodePaths, g=None) -> dict:
    """``{(src, dst): sorted [(nodes, weight)]}`` of ``r`` mapped by ``g`` (a list)."""
    g = list(range(10**6)) if g is None else list(g)
    out = {}
    for k, paths in enumerate(r.to_lists()):
        key = (g[int(r.src[k])], g[int(r.dst[k])])
        out[key] = sorted((tuple(g[x] for x in p), w) for p, w in paths)
    return out


def _brute_force(n, circuits, static=None, traffics=()) -> set:
    """Every permutation of the servers keeping the circuits (with multiplicities), the static
    routing and the traffic (exactly: the cases' bytes are exact)."""
    own_c = sorted((min(a, b), max(a, b), m) for a, b, m in circuits)
    own_t = [dict(sp.dok_matrix(t).items()) for t in traffics]
    own_s = _as_dict(static) if static is not None else None
    out = set()
    for g in itertools.permutations(range(n)):
        if sorted((min(g[a], g[b]), max(g[a], g[b]), m) for a, b, m in circuits) != own_c:
            continue
        if any({(g[i], g[j]): v for (i, j), v in t.items()} != t for t in own_t):
            continue
        if own_s is not None and _as_dict(static, g) != own_s:
            continue
        out.add(g)
    return out


CASES = {
    "ring": (6, _circulant(6, [1]), None, []),  # the dihedral group, 12
    "ring traffic": (
        6,
        _circulant(6, [1]),
        None,
        [_traffic(6, [(i, (i + 1) % 6) for i in range(6)], [1.0] * 6)],
    ),  # fmt: skip
    "chords, static ring": (6, _circulant(6, [1, 2]), _ring_static(6), []),
    "two rings": (
        6,
        _circulant(6, [1, 3], {3: 2}),
        None,
        [_traffic(6, [(0, 3), (1, 4), (2, 5)], [2.0, 2.0, 2.0])],
    ),  # fmt: skip
    "halves": (6, _circulant(6, [1]), None, [_traffic(6, [(0, 1), (3, 4)], [1.0, 1.0])]),
    "none": (
        6,
        [[0, 1, 1], [1, 2, 1], [2, 3, 2], [3, 4, 1], [4, 5, 1], [0, 5, 1], [0, 3, 1]],
        None,
        [_traffic(6, [(0, 2)], [1.0])],
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", list(CASES))
def test_automorphisms_are_every_permutation_that_keeps_the_structure(name):
    """On six servers the group found is the set of all 720 permutations that keep the
    circuits, the static routing and the traffic (brute force), identity first."""
    n, c, static, traffics = CASES[name]
    group = automorphisms(n, c, static, traffics)
    assert group[0].tolist() == list(range(n))
    found = {tuple(g) for g in group.tolist()}
    assert len(found) == len(group)
    assert found == _brute_force(n, c, static, traffics)


def _reynolds(r: NodePaths, group) -> dict:
    """The average over ``group`` with dictionaries and exact sums (math.fsum)."""
    terms: dict = {}
    for g in group.tolist():
        for pair, paths in _as_dict(r, g).items():
            for p, w in paths:
                terms.setdefault(pair, {}).setdefault(p, []).append(w)
    return {pair: sorted((p, math.fsum(ws) / len(group)) for p, ws in d.items())
            for pair, d in terms.items()}  # fmt: skip


def test_symmetrize_is_the_reynolds_average_and_exactly_invariant():
    """Random weights on every pair's candidate paths of a circulant: the average equals the
    dictionary Reynolds average (to 1e-15) and is invariant under every element to the last
    bit (the image of each pair's routes is its image pair's routes)."""
    from solvers.joint.fast_routing import candidate_paths
    from solvers.model.design import node_paths
    from topoopt.fabrics.circuits import circuit_links

    n = 8
    c = np.array(_circulant(n, [1, 3]))
    pairs = [(i, (i + o) % n) for i in range(n) for o in (1, 2)]
    src, dst = np.array(pairs).T
    paths, _ = candidate_paths(c, n, src, dst)
    rng = np.random.default_rng(7)
    w = rng.random(paths.n_paths)
    w /= np.bincount(paths.path_commodity(), w)[paths.path_commodity()]
    _, ldst, _ = circuit_links(c, 1.0)
    r = node_paths(paths.__class__(paths.src, paths.dst, paths.commodity_ptr, paths.path_ptr,
                                   paths.path_links, w), ldst)  # fmt: skip
    group = automorphisms(n, c, None, [_traffic(n, pairs, [1.0] * len(pairs))])
    assert len(group) == 8  # the rotations (the traffic is directed)
    avg = symmetrize(r, group)
    assert avg.src.tolist() == r.src.tolist() and avg.dst.tolist() == r.dst.tolist()
    got, want = _as_dict(avg), _reynolds(r, group)
    assert got.keys() == want.keys()
    for pair in want:
        assert [p for p, _ in got[pair]] == [p for p, _ in want[pair]]
        np.testing.assert_allclose([x for _, x in got[pair]], [x for _, x in want[pair]],
                                   rtol=1e-15, atol=0)  # fmt: skip
    for g in group.tolist():
        assert _as_dict(avg, g) == got  # bitwise weights


def test_symmetrize_refuses_a_pair_set_that_is_not_invariant():
    r = NodePaths.from_lists([0], [1], [[([0, 1], 1.0)]])
    assert symmetrize(r, np.array([[0, 1, 2], [1, 2, 0], [2, 0, 1]])) is None


def test_route_phase_with_the_group_routes_an_orbit_by_images():
    """A circulant of 8 servers (offsets 1 and 3), 1 GB from every server to the next two, the
    static table each neighbour on its circuit (the pairs at distance 2 left out). Without the
    group the routes of the pairs differ beyond a rotation (ties broken by index); with it
    every pair's routes are the rotation of its class's first pair's, weights to the last bit,
    and the congestion is no higher (the average of a routing's images: convexity)."""
    n = 8
    c = _circulant(n, [1, 3])
    static = _ring_static(n)
    pairs = [(i, (i + o) % n) for i in range(n) for o in (1, 2)]
    m = _traffic(n, pairs, [1e9] * len(pairs))
    group = automorphisms(n, c, static, [m])
    assert sorted(map(tuple, group.tolist())) == [tuple((i + k) % n for i in range(n))
                                                  for k in range(n)]  # fmt: skip

    def rotated(r):  # per pair, its routes rotated to start at server 0
        d = _as_dict(r)
        return {(s, t): sorted((tuple((x - s) % n for x in p), w) for p, w in v)
                for (s, t), v in d.items()}  # fmt: skip

    plain, s0, s_plain = route_phase(c, n, 1e9, m, static)
    sym, s0b, s_sym = route_phase(c, n, 1e9, m, static, group=group)
    assert s0 == s0b and s_sym <= s_plain * (1 + 1e-12) and s_sym < s0
    rp, rs = rotated(plain), rotated(sym)
    assert len({str(rp[(i, (i + 1) % n)]) for i in range(n)}) > 1  # not images of each other
    for o in (1, 2):
        assert len({str(rs[(i, (i + o) % n)]) for i in range(n)}) == 1
    # the pairs at distance 2 (not in the static table) keep their own labels when merged
    merged = merge_routing(static, sym, n)
    assert sorted(zip(merged.src.tolist(), merged.dst.tolist(), strict=True)) == sorted(pairs)
    assert _as_dict(merged)[(0, 2)] == _as_dict(sym)[(0, 2)]


def test_symmetric_phase_routing_quotient_equals_the_plain_run():
    """A pipeline (pp 2, dp 4) on 8 servers of degree 4: with ``symmetric`` the routing
    schedule chosen runs through the symmetry quotient (on, fewer classes than flows) and its
    iteration equals the plain run's (reduction off) to 1e-12; never slower than static."""
    from solvers import DesignProblem, design_fabric, design_workload, solve
    from solvers.joint.phase_routing import phase_routing, simulate_routing_schedule
    from traffic.build import workload_from_plan

    plan = {
        "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
                  "global_batch": 16},
        "parallelism": {"tp": 1, "pp": 2, "dp": 4, "micro_batch_size": 1,
                        "global_batch_size": 16},
        "cluster": {"servers": 8, "gpus_per_server": 1},
    }  # fmt: skip
    wl = workload_from_plan(plan)
    problem = DesignProblem.from_workload(wl, degree=4, link_bandwidth=12.5e9)
    design = solve(problem, "topoopt", seed=0)
    fab = design_fabric(design, gpus_per_server=1)
    w = design_workload(wl, design, problem)
    res = phase_routing(w, design, fab, symmetric=True)
    assert res.info["group"] > 1 and any(res.choice)
    assert res.iteration_s < res.static_iteration_s
    red = res.info["reduction"]["".join("R" if x else "S" for x in res.choice)]
    assert red["status"] == "on" and red["flow_classes"] < red["flows"]
    starts = [p.start_s for p in res.phases]
    args = (w, fab, design.circuits.rows, res.routings, starts)
    plain = simulate_routing_schedule(*args, reduction=False)
    assert plain.iteration_s == pytest.approx(res.iteration_s, rel=1e-12)
