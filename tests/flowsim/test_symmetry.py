"""The symmetry reduction (topoopt.flowsim.symmetry): the class finder against an independent
pure-Python refinement and graph automorphisms, the equitability check, and reduced == unreduced
per flow, sub-flow and link on flow sets, plans and fabrics (with the fall-back when symmetry
breaks)."""

from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest
from networkx.algorithms.isomorphism import GraphMatcher
from test_kernels import random_flowset

from topoopt.app.studies.compare import build_fabric
from topoopt.app.studies.simulate import simulate_plan
from topoopt.fabrics import ideal
from topoopt.flowsim._symmetry_kernels import (
    class_dep_rows,
    csr_by_key,
    dense_ids,
    uniform_counts,
    uniform_sets,
)
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.simulator import simulate
from topoopt.flowsim.symmetry import (
    Partition,
    equitable_partition,
    is_equitable,
    reduce_flows,
    simulate_reduced,
)
from traffic.build import workload_from_plan


# ---------------------------------------------------------------------- instances
def ring(n, *, hops=2, cap=None, size=4.0, multipath=False, deps=False):
    """``n`` servers in a ring, one link each way between neighbours (links ``0..n-1``
    clockwise, ``n..2n-1`` counter-clockwise) and a NIC up/down link per server; flow ``i``
    goes ``hops`` steps clockwise (or half each way with ``multipath``); with ``deps`` a second
    round of flows waits for the flow ending at its source."""
    cw = list(range(n))
    ccw = list(range(n, 2 * n))
    up = list(range(2 * n, 3 * n))
    dn = list(range(3 * n, 4 * n))
    capacity = np.full(4 * n, 10.0) if cap is None else np.asarray(cap, float)
    latency = np.r_[np.full(2 * n, 1e-3), np.full(2 * n, 2e-4)]
    flow_ptr, path_ptr, links, weight, sizes, after = [0], [0], [], [], [], []
    rounds = 2 if deps else 1
    for r in range(rounds):
        for i in range(n):
            paths = [[up[i]] + [cw[(i + k) % n] for k in range(hops)] + [dn[(i + hops) % n]]]
            if multipath:
                back = [ccw[(i - k) % n] for k in range(n - hops)]
                paths.append([up[i]] + back + [dn[(i + hops) % n]])
            for p in paths:
                links += p
                path_ptr.append(len(links))
                weight.append(1.0 / len(paths))
            flow_ptr.append(len(weight))
            sizes.append(size * (1 + r))
            after.append([] if r == 0 else [(i - hops) % n])
    dep_ptr = np.zeros(len(after) + 1, np.int64)
    np.cumsum([len(a) for a in after], out=dep_ptr[1:])
    return FlowSet(
        capacity=capacity,
        latency=latency,
        size=sizes,
        start=np.zeros(len(sizes)),
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=links,
        weight=weight,
        dep_ptr=dep_ptr,
        deps=[d for a in after for d in a],
    )


def assert_same(a, b, tol=1e-9):
    """Per flow, per sub-flow and per link, within ``tol`` relative to the makespan."""
    scale = max(a.makespan, 1e-30)
    for name in ("start", "finish", "path_start", "path_last_byte", "path_finish"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.shape == y.shape, name
        assert np.max(np.abs(x - y), initial=0.0) <= tol * scale, name
    assert np.allclose(a.link_bytes, b.link_bytes, rtol=tol, atol=0.0)
    assert abs(a.makespan - b.makespan) <= tol * scale


def brute_partition(fs: FlowSet):
    """Coarsest equitable partition by plain refinement with exact tuples (no hashing, no
    topological pass): the oracle for :func:`equitable_partition`."""
    pf = fs.path_flow().tolist()
    pp = fs.path_ptr
    plinks = [fs.path_links[pp[p] : pp[p + 1]].tolist() for p in range(fs.n_paths)]
    lpaths = [[] for _ in range(fs.n_links)]
    for p, ls in enumerate(plinks):
        for lk in ls:
            lpaths[lk] += [p] * int(fs.multiplicity[pf[p]])
    fpaths = [list(range(fs.flow_ptr[f], fs.flow_ptr[f + 1])) for f in range(fs.n_flows)]
    fdeps = [fs.deps[fs.dep_ptr[f] : fs.dep_ptr[f + 1]].tolist() for f in range(fs.n_flows)]

    def dense(keys):
        ids = {}
        return [ids.setdefault(k, len(ids)) for k in keys]

    lc = dense([(fs.capacity[i], fs.latency[i]) for i in range(fs.n_links)])
    pc = dense([fs.weight[p] for p in range(fs.n_paths)])
    fc = dense([(fs.size[f], fs.start[f], fs.multiplicity[f]) for f in range(fs.n_flows)])
    while True:
        nl = dense([(lc[i], tuple(sorted(pc[p] for p in lpaths[i]))) for i in range(fs.n_links)])
        npc = dense(
            [(pc[p], fc[pf[p]], tuple(sorted(lc[x] for x in plinks[p]))) for p in range(fs.n_paths)]
        )
        nf = dense(
            [
                (fc[f], tuple(sorted(pc[p] for p in fpaths[f])), frozenset(fc[d] for d in fdeps[f]))
                for f in range(fs.n_flows)
            ]
        )
        if (max(nl) + 1, max(npc) + 1, max(nf) + 1) == (max(lc) + 1, max(pc) + 1, max(fc) + 1):
            return np.array(nf), np.array(npc), np.array(nl)
        lc, pc, fc = nl, npc, nf


def same_partition(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    pairs = {(int(x), int(y)) for x, y in zip(a, b, strict=True)}
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


# ---------------------------------------------------------------------- the class finder
@pytest.mark.parametrize(
    "fs",
    [
        ring(6),
        ring(5, hops=1, multipath=True),
        ring(4, deps=True),
        ring(6, cap=np.r_[5.0, np.full(23, 10.0)]),  # one slow link: symmetry broken
        ring(4).with_multiplicity([2, 2, 1, 2]),
    ],
    ids=["ring", "ring-multipath", "ring-deps", "ring-slow-link", "ring-multiplicity"],
)
def test_classes_match_plain_refinement(fs):
    part = equitable_partition(fs)
    f, p, lk = brute_partition(fs)
    assert same_partition(part.flow, f)
    assert same_partition(part.path, p)
    assert same_partition(part.link, lk)
    assert is_equitable(fs, part)


@pytest.mark.parametrize("seed", range(6))
def test_classes_match_plain_refinement_random(seed):
    rng = np.random.default_rng(seed)
    fs = random_flowset(
        rng, 6, 12, multipath=True, zero=False, deps=True, latency=True, stagger=0.3
    )
    part = equitable_partition(fs)
    f, p, lk = brute_partition(fs)
    assert same_partition(part.flow, f) and same_partition(part.link, lk)
    assert same_partition(part.path, p)
    assert is_equitable(fs, part)


def test_ring_classes_are_the_automorphism_orbits():
    """On a ring every link of a kind is in one orbit of the incidence graph's automorphisms
    (rotations); colour refinement finds exactly these orbits."""
    fs = ring(4)
    part = equitable_partition(fs)
    g = nx.Graph()
    for lk in range(fs.n_links):
        g.add_node(("l", lk), c=("l", fs.capacity[lk], fs.latency[lk]))
    for p in range(fs.n_paths):
        g.add_node(("p", p), c=("p", fs.weight[p], fs.size[p]))
        for lk in fs.path_links[fs.path_ptr[p] : fs.path_ptr[p + 1]]:
            g.add_edge(("p", p), ("l", int(lk)))
    orbit = {}
    gm = GraphMatcher(g, g, node_match=lambda a, b: a["c"] == b["c"])
    for iso in gm.isomorphisms_iter():
        for u, v in iso.items():
            orbit.setdefault(u, set()).add(v)
    link_orbits = [min(o[1] for o in orbit[("l", lk)]) for lk in range(fs.n_links)]
    assert same_partition(part.link, link_orbits)
    # clockwise, counter-clockwise (unused) and NIC links (up and down are interchangeable)
    assert part.n_link_classes == 3 and part.n_flow_classes == 1


def test_check_rejects_a_partition_that_is_not_equitable():
    fs = ring(4, cap=np.r_[5.0, np.full(15, 10.0)])
    part = equitable_partition(fs)
    coarse = Partition(
        flow=np.zeros(fs.n_flows, np.int64),
        path=np.zeros(fs.n_paths, np.int64),
        link=np.array([0] * 4 + [1] * 4 + [2] * 4 + [3] * 4, np.int64),
        rounds=0,
    )
    assert is_equitable(fs, part) and not is_equitable(fs, coarse)


# ---------------------------------------------------------------------- reduced == unreduced
@pytest.mark.parametrize(
    "fs",
    [
        ring(8),
        ring(6, hops=3, multipath=True),
        ring(6, deps=True),
        ring(6, cap=np.r_[5.0, np.full(23, 10.0)]),
        ring(5).with_multiplicity([3, 3, 3, 3, 3]),
    ],
    ids=["ring", "multipath", "deps", "slow-link", "multiplicity"],
)
def test_reduced_equals_unreduced_on_rings(fs):
    red = reduce_flows(fs)
    a = simulate(fs)
    b = simulate_reduced(fs, reduction=red)
    assert_same(a, b)
    # loads: every link's piecewise-constant load matches at every change time
    for lk in range(fs.n_links):
        ta, la = a.link_load(lk)
        tb, lb = b.link_load(lk)
        grid = np.union1d(ta, tb)
        va = la[np.searchsorted(ta, grid, side="right") - 1]
        vb = lb[np.searchsorted(tb, grid, side="right") - 1]
        assert np.allclose(va, vb, rtol=1e-9, atol=1e-9)


def test_ring_quotient_counts_members_per_link():
    """Hand count: ring(6) with two clockwise hops has 1 flow class and 3 link classes
    (clockwise, unused counter-clockwise, NIC up or down); each clockwise link carries 2 flows
    (d = 2), each NIC link 1, and a flow crosses two links of each: the quotient has one
    sub-flow on 2 links, counting 2 and 1."""
    red = reduce_flows(ring(6))
    assert red.info["status"] == "on"
    assert red.flows.n_flows == 1 and red.flows.n_links == 3
    by_link = dict(zip(red.flows.path_links.tolist(), red.emult.tolist(), strict=True))
    caps = red.flows.capacity
    assert sorted(by_link.values()) == [1, 2]
    assert np.allclose(caps, 10.0)
    # latency: two ring hops and two NIC links
    assert np.isclose(red.plat[0], 2 * 1e-3 + 2 * 2e-4)
    # 6 flows of 4 B, 2 per ring link of 10 B/s: 0.8 s of transfer
    assert np.isclose(simulate_reduced(ring(6)).finish[0], 0.8 + 2.4e-3)


@pytest.mark.parametrize("seed", range(8))
def test_reduced_equals_unreduced_random(seed):
    """Irregular flow sets: the reduction coarsens (often to nothing) and stays exact."""
    rng = np.random.default_rng(100 + seed)
    fs = random_flowset(rng, 8, 40, multipath=True, zero=True, deps=True, latency=True, stagger=0.3)
    assert_same(simulate(fs), simulate_reduced(fs))


def test_no_symmetry_turns_off():
    fs = FlowSet.single_path(
        [1.0, 2.0], [0.0, 0.0], size=[1.0, 1.0], start=[0.0, 0.0], paths=[[0], [1]]
    )
    red = reduce_flows(fs)
    assert red.info["status"] == "off" and "no symmetry" in red.info["reason"]
    assert simulate_reduced(fs).reduction["status"] == "off"


# ---------------------------------------------------------------------- plans and fabrics
def _both(w, fab, **kw):
    a = simulate_iteration(w, fab, exposed_by_class=False, reduction=False, **kw)
    b = simulate_iteration(w, fab, exposed_by_class=False, reduction=True, **kw)
    assert_same(a.sim, b.sim)
    assert abs(a.iteration_s - b.iteration_s) <= 1e-9 * a.iteration_s
    assert abs(a.compute_s - b.compute_s) <= 1e-9 * a.compute_s
    return a, b


@pytest.mark.parametrize("plan", ["vgg16-dp", "dlrm", "mixtral-8x7b"])
def test_plans_on_the_ideal_switch(plan):
    w = workload_from_plan(plan)
    _, b = _both(w, ideal(w.servers, gpus_per_server=w.gpus_per_server))
    info = b.info["reduction"]
    assert info["status"] == "on" and info["flow_classes"] < info["flows"]


@pytest.mark.parametrize("kind", ["fat-tree", "torus", "expander"])
def test_dp_plan_on_fabrics(kind):
    w = workload_from_plan("vgg16-dp")
    run = build_fabric(kind, w, 4, 12.5e9)
    _both(run.workload, run.fabric, routing=run.routing)


def test_failed_link_coarsens_and_stays_exact():
    w = workload_from_plan("vgg16-dp")
    fab = build_fabric("fat-tree", w, 4, 12.5e9).fabric
    cap = fab.capacity.copy()
    cap[0] *= 0.5  # a degraded cable
    bad = dataclasses.replace(fab, capacity=cap, _cache={})
    whole = _both(w, fab)[1].info["reduction"]
    broken = _both(w, bad)[1].info["reduction"]
    assert broken["status"] == "off" or broken["flow_classes"] > whole["flow_classes"]


def test_no_reduction_is_reported():
    res = simulate_plan("vgg16-dp", fabric="ideal", reduction=False)
    assert res["reduction"] == {"status": "off", "reason": "not asked (--no-reduction)"}
    on = simulate_plan("vgg16-dp", fabric="ideal")  # on by default
    assert on["reduction"]["status"] == "on"
    assert abs(on["iteration_s"] - res["iteration_s"]) <= 1e-9 * res["iteration_s"]


# ---------------------------------------------------------------------- compiled helpers
@pytest.mark.parametrize("seed", range(3))
def test_counting_sort_csr_equals_stable_argsort(seed):
    keys = np.random.default_rng(seed).integers(0, 7, 200)
    ptr, order = csr_by_key(keys, 9)  # two key values never occur
    assert order.tolist() == np.argsort(keys, kind="stable").tolist()
    assert ptr.tolist() == [0, *np.cumsum(np.bincount(keys, minlength=9)).tolist()]


def test_dense_ids_number_by_first_occurrence():
    keys = np.random.default_rng(4).integers(0, 30, 500).astype(np.uint64)
    first = {}
    want = [first.setdefault(int(k), len(first)) for k in keys]
    assert dense_ids(keys).tolist() == want


@pytest.mark.parametrize("seed", range(8))
def test_uniform_counts_against_brute_force(seed):
    """Random CSR rows, classes and weights: the compiled test says yes exactly when every
    member's weighted count table of item classes equals its class's first member's."""
    rng = np.random.default_rng(seed)
    n_u, n_items, n_vc = 6, 5, 3
    lens = rng.integers(0, 4, n_u)
    ptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    items = rng.integers(0, n_items, ptr[-1]).astype(np.int64)
    weight = rng.integers(1, 3, n_items).astype(np.int64)  # per item
    v_class = rng.integers(0, n_vc, n_items).astype(np.int64)
    u_class = rng.integers(0, 2, n_u).astype(np.int64)
    if seed % 2:  # make it uniform: every member copies its class's first member's row
        first = {}
        rows = []
        for u in range(n_u):
            r = first.setdefault(int(u_class[u]), u)
            rows.append(items[ptr[r] : ptr[r + 1]].tolist())
        ptr = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
        items = np.array([i for r in rows for i in r], np.int64)

    def table(u):
        t = {}
        for k in range(ptr[u], ptr[u + 1]):
            c = int(v_class[items[k]])
            t[c] = t.get(c, 0) + int(weight[items[k]])
        return t

    first = {}
    want = all(table(first.setdefault(int(u_class[u]), u)) == table(u) for u in range(n_u))
    assert uniform_counts(ptr, items, weight, u_class, v_class, 2, n_vc) == want
    sets = all(set(table(first[int(u_class[u])])) == set(table(u)) for u in range(n_u))
    assert uniform_sets(ptr, items, u_class, v_class, 2, n_vc) == sets
    if seed % 2:
        assert want


@pytest.mark.parametrize("seed", range(3))
def test_class_dependency_rows_are_sorted_unique_classes_of_the_representative(seed):
    rng = np.random.default_rng(seed)
    n_f, n_c = 12, 4
    class_of = rng.integers(0, n_c, n_f)
    class_of[:n_c] = np.arange(n_c)  # every class has a member
    rep = np.array([int(np.flatnonzero(class_of == c)[0]) for c in range(n_c)])
    rows = [rng.integers(0, n_f, rng.integers(0, 5)).tolist() for _ in range(n_f)]
    dep_ptr = np.r_[0, np.cumsum([len(r) for r in rows])].astype(np.int64)
    deps = np.array([d for r in rows for d in r], np.int64)
    ptr, cls = class_dep_rows(class_of, rep, dep_ptr, deps)
    for c in range(n_c):
        want = sorted({int(class_of[d]) for d in rows[rep[c]]})
        assert cls[ptr[c] : ptr[c + 1]].tolist() == want


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_quotient_in_chunks_is_the_quotient_in_one_pass(monkeypatch, chunk):
    """_quotient_incidence counts the quotient's link classes QUOTIENT_CHUNK sub-flows at a
    time: the same quotient, bit for bit, as in one pass (a ring, and three copies of random
    flow sets with multipath, zero-byte flows, latencies and dependencies: quotients of about 40
    sub-flows), and the same simulation."""
    import topoopt.flowsim.symmetry as symmetry

    def copies(fs, n):  # n disjoint copies of fs: its quotient is fs's own (or smaller)
        nl, nf, ne = fs.n_links, fs.n_flows, fs.path_links.size
        cat = np.concatenate
        return FlowSet(
            capacity=np.tile(fs.capacity, n), latency=np.tile(fs.latency, n),
            size=np.tile(fs.size, n), start=np.tile(fs.start, n),
            flow_ptr=cat([[0]] + [fs.flow_ptr[1:] + i * fs.n_paths for i in range(n)]),
            path_ptr=cat([[0]] + [fs.path_ptr[1:] + i * ne for i in range(n)]),
            path_links=cat([fs.path_links + i * nl for i in range(n)]),
            weight=np.tile(fs.weight, n),
            dep_ptr=cat([[0]] + [fs.dep_ptr[1:] + i * fs.deps.size for i in range(n)]),
            deps=cat([fs.deps + i * nf for i in range(n)]),
        )  # fmt: skip

    rng = np.random.default_rng(7)
    cases = [ring(12, multipath=True)] + [
        copies(random_flowset(rng, 8, 30, multipath=True, zero=True, deps=True, latency=True,
                              stagger=0.3), 3)
        for _ in range(3)
    ]  # fmt: skip
    for fs in cases:
        one = reduce_flows(fs)
        monkeypatch.setattr(symmetry, "QUOTIENT_CHUNK", chunk)
        many = reduce_flows(fs)
        monkeypatch.undo()
        assert one.info["status"] == "on"
        for name in ("flow_ptr", "path_ptr", "path_links", "weight", "size", "dep_ptr", "deps"):
            np.testing.assert_array_equal(getattr(one.flows, name), getattr(many.flows, name))
        np.testing.assert_array_equal(one.emult, many.emult)
        np.testing.assert_array_equal(one.plat, many.plat)
        np.testing.assert_array_equal(one.qpath, many.qpath)
        assert_same(simulate_reduced(fs, reduction=one), simulate_reduced(fs, reduction=many))
