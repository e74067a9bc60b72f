"""Flow multiplicity: a class of ``m`` identical flows simulated as one flow counted ``m`` times.

Every check compares against the same problem with each class expanded into ``m`` separate flows
(the model the simulator was already verified on), against closed forms on small cases, and
against SimGrid (on the expanded flows), plus the aggregation of the flow builders."""

from __future__ import annotations

import numpy as np
import pytest
from test_simgrid_agreement import build as build_graph
from test_simgrid_agreement import make_case, run_peer

from topoopt.fabrics import expander, ideal
from topoopt.flowsim import FlowSet, simulate
from topoopt.flowsim._kernels import (
    fill_kernel,
    fill_kernel_mult,
    fill_links_mult,
)
from topoopt.flowsim.collectives import collective_flows, communication_time
from topoopt.flowsim.flowset import identical_classes
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.max_min import fill_rates, max_min_rates
from topoopt.flowsim.netsim_json import parse_netsim
from traffic.build import workload_from_plan
from traffic.errors import InputError


# ---------------------------------------------------------------------- random classes
def random_classes(rng, *, n_links, n_classes, multipath, deps, staggered, zero=0.0):
    """A random FlowSet whose flows carry multiplicities 1..5."""
    cap = rng.choice([1.0, 2.0, 4.0, 5.0, 10.0], n_links) * 1e3
    lat = rng.choice([0.0, 1e-3], n_links)
    flow_paths, weights = [], []
    for _ in range(n_classes):
        k = int(rng.integers(1, 3)) if multipath else 1
        ps = []
        for _ in range(k):
            hops = int(rng.integers(1, min(3, n_links) + 1))
            ps.append(rng.choice(n_links, hops, replace=False).tolist())
        flow_paths.append(ps)
        weights.append([1.0] if k == 1 else ([0.25, 0.75] if rng.random() < 0.5 else [0.5, 0.5]))
    size = rng.integers(1, 50, n_classes) * 100.0
    size[rng.random(n_classes) < zero] = 0.0
    start = rng.uniform(0.0, 0.2, n_classes) if staggered else np.zeros(n_classes)
    start[rng.random(n_classes) < 0.5] = 0.0
    after = []
    for c in range(n_classes):
        if deps and c > 0 and rng.random() < 0.4:
            after.append(sorted(rng.choice(c, int(rng.integers(1, min(c, 3) + 1)), False).tolist()))
        else:
            after.append([])
    n_paths = [len(p) for p in flow_paths]
    paths = [p for ps in flow_paths for p in ps]
    flow_ptr = np.concatenate([[0], np.cumsum(n_paths)])
    path_ptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])])
    dep_ptr = np.concatenate([[0], np.cumsum([len(a) for a in after])])
    return FlowSet(
        capacity=cap,
        latency=lat,
        size=size,
        start=start,
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=np.concatenate([np.asarray(p, np.int64) for p in paths]),
        weight=np.concatenate([np.asarray(w) for w in weights]),
        dep_ptr=dep_ptr,
        deps=np.array([d for a in after for d in a], np.int64),
        multiplicity=rng.integers(1, 6, n_classes),
    )


def member_paths(fs: FlowSet, class_of: np.ndarray) -> np.ndarray:
    """Path ids of the class of each member path, in the expanded set's path order."""
    return np.concatenate(
        [np.arange(fs.flow_ptr[c], fs.flow_ptr[c + 1]) for c in class_of.tolist()]
    ).astype(np.int64)


def assert_same_simulation(small, class_of, res_small, res_big):
    np.testing.assert_allclose(res_small.start[class_of], res_big.start, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(res_small.finish[class_of], res_big.finish, rtol=1e-12, atol=1e-15)
    mp = member_paths(small, class_of)
    np.testing.assert_allclose(
        res_small.path_last_byte[mp], res_big.path_last_byte, rtol=1e-12, atol=1e-15
    )
    np.testing.assert_allclose(res_small.link_bytes, res_big.link_bytes, rtol=1e-12)
    assert res_small.makespan == pytest.approx(res_big.makespan, rel=1e-12)


CASES = [
    {"multipath": False, "deps": False, "staggered": False},
    {"multipath": False, "deps": False, "staggered": True},
    {"multipath": True, "deps": False, "staggered": True},
    {"multipath": False, "deps": True, "staggered": False},
    {"multipath": True, "deps": True, "staggered": True},
]


@pytest.mark.parametrize("kind", range(len(CASES)))
@pytest.mark.parametrize("seed", range(8))
def test_multiplicity_equals_expanded_copies(kind, seed):
    rng = np.random.default_rng(100 * kind + seed)
    small = random_classes(
        rng,
        n_links=int(rng.integers(2, 9)),
        n_classes=int(rng.integers(2, 30)),
        zero=0.1 if seed % 2 else 0.0,
        **CASES[kind],
    )
    big, class_of = small.expand()
    assert big.n_flows == small.n_members == int(small.multiplicity.sum())
    assert (big.multiplicity == 1).all()
    res_small, res_big = simulate(small), simulate(big)
    assert_same_simulation(small, class_of, res_small, res_big)
    # the load records: same change times and links, loads summed over the members
    for link in range(small.n_links):
        t_s, v_s = res_small.link_load(link)
        t_b, v_b = res_big.link_load(link)
        np.testing.assert_allclose(t_s, t_b, rtol=1e-12)
        np.testing.assert_allclose(v_s, v_b, rtol=1e-9, atol=1e-9 * small.capacity[link])


@pytest.mark.parametrize("seed", range(6))
def test_aggregate_recovers_the_classes_and_the_simulation(seed):
    rng = np.random.default_rng(7000 + seed)
    small = random_classes(
        rng, n_links=6, n_classes=25, multipath=True, deps=True, staggered=True, zero=0.1
    )
    big, class_of = small.expand()
    agg, found = big.aggregate()
    # members of one class are always merged; different classes only if they are identical
    for c in range(small.n_flows):
        assert np.unique(found[class_of == c]).size == 1
    assert agg.n_members == big.n_flows
    assert agg.n_flows <= small.n_flows
    np.testing.assert_array_equal(np.bincount(found), agg.multiplicity)
    assert_same_simulation(agg, found, simulate(agg), simulate(big))
    # idempotent: an aggregated set has nothing left to merge
    again, ids = agg.aggregate()
    assert again.n_flows == agg.n_flows and (ids == np.arange(agg.n_flows)).all()


def test_dependents_on_a_subset_of_a_class():
    """Four equal flows A0..A3 share a 100 B/s link (25 B/s each, 100 B: done at 4 s). B waits
    for A0 only and C for A1 and A2: both are released at 4 s, share the link (50 B/s each) and
    finish at 4 + 100/50 = 6 s. Merged: A is one class of 4, B and C one class of 2 after it."""
    fs = FlowSet.single_path(
        [100.0],
        [0.0],
        size=[100.0] * 6,
        start=[0.0] * 6,
        paths=[[0]] * 6,
        after=[[], [], [], [], [0], [1, 2]],
    )
    agg, class_of = fs.aggregate()
    assert class_of.tolist() == [0, 0, 0, 0, 1, 1]
    assert agg.multiplicity.tolist() == [4, 2] and agg.deps.tolist() == [0]
    res = simulate(agg)
    assert res.finish.tolist() == [4.0, 6.0]
    np.testing.assert_allclose(res.link_bytes, [600.0])
    assert simulate(fs).finish.tolist() == res.finish[class_of].tolist()


def test_closed_form_with_multiplicity_and_a_single_flow():
    """Class of 3 and one flow on one 40 B/s link: 10 B/s each. The class (10 B each) ends at
    1 s; the single flow (40 B) then has 30 B left alone: 1 + 30/40 = 1.75 s."""
    fs = FlowSet.single_path(
        [40.0], [0.0], size=[10.0, 40.0], start=[0.0, 0.0], paths=[[0], [0]]
    ).with_multiplicity([3, 1])
    res = simulate(fs)
    assert res.finish.tolist() == [1.0, 1.75]
    assert res.link_bytes.tolist() == [70.0]
    times, loads = res.link_load(0)
    assert times.tolist() == [0.0, 0.0, 1.0, 1.75] and loads.tolist() == [0.0, 40.0, 40.0, 0.0]


def test_arrival_threshold_with_multiplicity():
    """An arrival while classes are running: class X (m=4, 1 B/s cap path) and Y (m=1) on a
    10 B/s link, then Z (m=2) arrives. Checked against the expanded copies, whose threshold uses
    the unweighted water level."""
    fs = FlowSet(
        capacity=[10.0, 1.0],
        latency=[0.0, 0.0],
        size=[1.0, 30.0, 10.0],
        start=[0.0, 0.0, 0.5],
        flow_ptr=[0, 1, 2, 3],
        path_ptr=[0, 2, 3, 4],
        path_links=[0, 1, 0, 0],
        weight=[1.0, 1.0, 1.0],
        multiplicity=[4, 1, 2],
    )
    # X: 4 members on the 1 B/s link -> 0.25 B/s each; Y gets 10 - 1 = 9 B/s. At 0.5 s Z (2
    # members) arrives: Y and Z share 9 B/s, 3 B/s each.
    res = simulate(fs)
    big, class_of = fs.expand()
    np.testing.assert_allclose(res.finish[class_of], simulate(big).finish, rtol=1e-12)
    # X: 1 B at 0.25 B/s -> 4 s. Y: 4.5 B by 0.5 s, then 3 B/s: 25.5 B left -> Z (10 B) ends
    # first at 0.5 + 10/3; then Y alone gets 9 B/s until X ends at 4 s, then 10 B/s.
    t_z = 0.5 + 10.0 / 3.0
    y_left = 30.0 - 4.5 - 10.0 - 9.0 * (4.0 - t_z)
    assert res.finish[2] == pytest.approx(t_z, rel=1e-12)
    assert res.finish[0] == pytest.approx(4.0, rel=1e-12)
    assert res.finish[1] == pytest.approx(4.0 + y_left / 10.0, rel=1e-12)


# ---------------------------------------------------------------------- fillings with weights
def expanded_rows(ptr, links, mult):
    """CSR of every row repeated ``mult`` times (members consecutive)."""
    rows = np.repeat(np.arange(mult.shape[0]), mult)
    paths = [links[ptr[r] : ptr[r + 1]] for r in rows.tolist()]
    eptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64)
    return eptr, np.concatenate(paths).astype(np.int64), rows


@pytest.mark.parametrize("kind", ["rounds", "links"])
@pytest.mark.parametrize("seed", range(12))
def test_weighted_fillings_equal_expanded_filling(kind, seed):
    rng = np.random.default_rng(300 + seed)
    n_l, n_f = int(rng.integers(1, 8)), int(rng.integers(1, 20))
    cap = rng.choice([4.0, 8.0, 3.0, 10.0], n_l)
    paths = [rng.choice(n_l, int(rng.integers(1, min(n_l, 3) + 1)), False) for _ in range(n_f)]
    ptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64)
    links = np.concatenate(paths).astype(np.int64)
    mult = rng.integers(1, 5, n_f).astype(np.int64)
    rows = np.sort(rng.choice(n_f, int(rng.integers(1, n_f + 1)), False)).astype(np.int64)
    rem, out = cap.copy(), np.empty(rows.shape[0])
    if kind == "rounds":
        fill_kernel_mult(ptr, links, rows, mult, rem, out)
    else:
        fill_links_mult(ptr, links, rows, mult, rem, out)
    # the same rows expanded into copies, unweighted
    eptr, elinks, owner = expanded_rows(ptr, links, mult)
    erows = np.flatnonzero(np.isin(owner, rows)).astype(np.int64)
    erem, eout = cap.copy(), np.empty(erows.shape[0])
    fill_kernel(eptr, elinks, erows, erem, eout)
    expect = eout[np.searchsorted(owner[erows], rows)]
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    np.testing.assert_allclose(rem, erem, rtol=1e-9, atol=1e-9)
    # every member of a class got the same rate
    for r, v in zip(rows.tolist(), expect.tolist(), strict=True):
        np.testing.assert_allclose(eout[owner[erows] == r], v, rtol=1e-12)


def test_max_min_rates_with_multiplicity():
    """Class of 3 and one flow on a 12 B/s link; the single flow also crosses a 2 B/s link:
    it gets 2 B/s, the 3 members (12 - 2) / 3 each."""
    import scipy.sparse as sp

    inc = sp.csr_matrix(np.array([[1, 0], [1, 1]]))
    rates = max_min_rates(inc, [12.0, 2.0], multiplicity=[3, 1])
    np.testing.assert_allclose(rates, [10.0 / 3.0, 2.0], rtol=1e-15)
    ptr, links = np.array([0, 1, 3]), np.array([0, 0, 1])
    r, left, _ = fill_rates(ptr, links, np.arange(2), np.array([12.0, 2.0]), multiplicity=[3, 1])
    np.testing.assert_allclose(r, [10.0 / 3.0, 2.0])
    np.testing.assert_allclose(left, [0.0, 0.0], atol=1e-12)
    with pytest.raises(InputError, match="multiplicity"):
        max_min_rates(inc, [12.0, 2.0], multiplicity=[0, 1])


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("value", "match"),
    [
        ([0, 1], r"flows\[0\]\.multiplicity"),
        ([1, 2.5], r"flows\[1\]\.multiplicity"),
        ([1, -3], r"flows\[1\]\.multiplicity"),
        ([1], r"flows\.multiplicity.*shape"),
        ([True, True], r"flows\.multiplicity.*integers"),
        (["a", "b"], r"flows\.multiplicity.*integers"),
        ([1, np.nan], r"flows\[1\]\.multiplicity"),
    ],
)
def test_bad_multiplicity_is_an_input_error(value, match):
    fs = FlowSet.single_path([1.0], [0.0], size=[1.0, 1.0], start=[0.0, 0.0], paths=[[0], [0]])
    with pytest.raises(InputError, match=match):
        fs.with_multiplicity(value)


def test_integral_floats_are_accepted_and_default_is_ones():
    fs = FlowSet.single_path([1.0], [0.0], size=[1.0, 1.0], start=[0.0, 0.0], paths=[[0], [0]])
    assert fs.multiplicity.tolist() == [1, 1] and fs.multiplicity.dtype == np.int64
    assert fs.with_multiplicity([2.0, 3.0]).multiplicity.tolist() == [2, 3]


def test_identical_classes_by_hand():
    # f0, f1 equal; f2 another route; f3 waits on f0, f4 on f1: same dependency class -> merged;
    # f5 waits on f2: not; f6 other size.
    route = [0, 0, 1, 0, 0, 0, 0]
    size = [5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 6.0]
    dep_ptr = [0, 0, 0, 0, 1, 2, 3, 3]
    deps = [0, 1, 2]
    assert identical_classes(route, size, [0.0] * 7, dep_ptr, deps).tolist() == [
        0,
        0,
        1,
        2,
        2,
        3,
        4,
    ]


# ---------------------------------------------------------------------- SimGrid
@pytest.mark.parametrize(
    ("name", "n_flows", "split"), [("fat_tree4", 60, 0.3), ("torus4x4", 50, 0.4)]
)
def test_multiplicity_agrees_with_simgrid(name, n_flows, split, tmp_path):
    """Some flows of a random case copied 1..4 times: SimGrid simulates every copy, we simulate
    the aggregated set (the copies merge into classes)."""
    seed = 4242 + n_flows
    graph, hosts = build_graph(name, seed)
    case = make_case(graph, hosts, n_flows, seed, split)
    rng = np.random.default_rng(seed)
    flows = []
    for flow in case["flows"]:
        for k in range(int(rng.integers(1, 5))):
            flows.append({**flow, "id": f"{flow['id']}-{k}"})
    case = {"links": case["links"], "flows": flows}
    parsed = parse_netsim(case)
    agg, class_of = parsed.flows.aggregate()
    assert agg.n_flows <= n_flows < len(flows)
    ours = simulate(agg, record_series=False).finish[class_of]
    theirs = run_peer(case, tmp_path)
    index = {f["id"]: i for i, f in enumerate(theirs["flows"])}
    b = np.array([theirs["flows"][index[i]]["finish"] for i in parsed.flow_ids])
    rel = np.abs(ours - b) / b
    assert rel.max() <= 1e-9, f"max relative difference {rel.max():.3e}"


def signature_classes(route, size, start, after):
    """Brute force: a flow's signature is its (route, size, start) and the set of its
    dependencies' signatures; flows with equal signatures form a class (numbered by first)."""
    memo: dict[int, tuple] = {}

    def sig(f):
        if f not in memo:
            memo[f] = (route[f], size[f], start[f], frozenset(sig(d) for d in after[f]))
        return memo[f]

    first: dict[tuple, int] = {}
    return [first.setdefault(sig(f), len(first)) for f in range(len(route))]


@pytest.mark.parametrize("seed", range(20))
def test_identical_classes_equal_brute_force_signatures(seed):
    rng = np.random.default_rng(9000 + seed)
    n = int(rng.integers(1, 60))
    route = rng.integers(0, 3, n).tolist()
    size = rng.choice([1.0, 2.0], n).tolist()
    start = rng.choice([0.0, 0.5], n, p=[0.8, 0.2]).tolist()
    # a random DAG over a random permutation (dependencies not only on lower ids)
    perm = rng.permutation(n)
    pos = np.argsort(perm)
    after = []
    for f in range(n):
        earlier = perm[: pos[f]]
        k = int(rng.integers(0, min(len(earlier), 3) + 1)) if len(earlier) else 0
        after.append(sorted(rng.choice(earlier, k, replace=False).tolist()) if k else [])
    dep_ptr = np.concatenate([[0], np.cumsum([len(a) for a in after])])
    deps = np.array([d for a in after for d in a], np.int64)
    got = identical_classes(route, size, start, dep_ptr, deps)
    assert got.tolist() == signature_classes(route, size, start, after)


def test_identical_classes_reject_a_cycle():
    with pytest.raises(InputError, match="acyclic"):
        identical_classes([0, 0], [1.0, 1.0], [0.0, 0.0], [0, 1, 2], [1, 0])


# ---------------------------------------------------------------------- the flow builders
def small_fabrics(w):
    return {
        "ideal": ideal(w.servers, 4, 12.5e9, gpus_per_server=w.gpus_per_server),
        "expander": expander(w.servers, 4, 0, 12.5e9, gpus_per_server=w.gpus_per_server),
    }


@pytest.mark.parametrize("plan", ["vgg16-dp", "dlrm", "gpt3-175b-32"])
def test_communication_time_is_the_same_with_and_without_aggregation(plan):
    w = workload_from_plan(plan)
    for name, fabric in small_fabrics(w).items():
        a = communication_time(w, fabric, aggregate=True, record_series=True)
        b = communication_time(w, fabric, aggregate=False, record_series=True)
        assert a.total_s == pytest.approx(b.total_s, rel=1e-12), name
        np.testing.assert_allclose(a.sim.finish, b.sim.finish, rtol=1e-12)
        np.testing.assert_allclose(a.sim.start, b.sim.start, rtol=1e-12)
        np.testing.assert_allclose(a.sim.path_finish, b.sim.path_finish, rtol=1e-12)
        np.testing.assert_allclose(a.sim.link_bytes, b.sim.link_bytes, rtol=1e-12)
        np.testing.assert_allclose(
            a.by_phase["duration_s"], b.by_phase["duration_s"], rtol=1e-12, atol=1e-15
        )
        assert b.sim.simulated_flows == b.sim.finish.shape[0]
        assert a.sim.simulated_flows <= b.sim.simulated_flows
        if plan == "dlrm":
            assert a.sim.simulated_flows * 10 < b.sim.simulated_flows


@pytest.mark.parametrize("plan", ["vgg16-dp", "dlrm", "gpt3-175b-32"])
def test_simulate_iteration_is_the_same_with_and_without_aggregation(plan):
    w = workload_from_plan(plan)
    fabrics = small_fabrics(w)
    if plan == "gpt3-175b-32":
        fabrics = {"expander": fabrics["expander"]}  # the largest case: one fabric keeps it fast
    for name, fabric in fabrics.items():
        kw = {"exposed_by_class": plan == "dlrm", "record_series": False}
        a = simulate_iteration(w, fabric, aggregate=True, **kw)
        b = simulate_iteration(w, fabric, aggregate=False, **kw)
        assert a.iteration_s == pytest.approx(b.iteration_s, rel=1e-12), name
        assert a.compute_s == pytest.approx(b.compute_s, rel=1e-12)
        assert a.comm_s == pytest.approx(b.comm_s, rel=1e-12)
        for c, v in b.exposed_by_class.items():
            assert a.exposed_by_class[c] == pytest.approx(v, rel=1e-9, abs=1e-15)
        np.testing.assert_allclose(
            a.timeline["finish_s"].to_numpy(), b.timeline["finish_s"].to_numpy(), rtol=1e-12
        )
        np.testing.assert_allclose(
            a.links["bytes"].to_numpy(), b.links["bytes"].to_numpy(), rtol=1e-12
        )
        assert a.info["flows"] == b.info["flows"] == b.info["simulated_flows"]
        assert a.info["simulated_flows"] <= b.info["flows"]


def test_bad_aggregate_switch():
    w = workload_from_plan("vgg16-dp")
    fabric = ideal(w.servers, gpus_per_server=w.gpus_per_server)
    with pytest.raises(InputError, match="aggregate"):
        communication_time(w, fabric, aggregate="yes")
    with pytest.raises(InputError, match="aggregate"):
        simulate_iteration(w, fabric, aggregate=1)


def test_dlrm_128_flow_count_drops_by_the_expected_factor():
    """DLRM on 128 servers x 4 GPUs: the embedding all-to-alls send equal bytes from 64 owner GPUs
    to every GPU, the MLP all-reduce is a ring. Within a phase every flow waits only for the
    previous phase's barrier, so a class is one (source server, destination server, bytes) for
    network flows and one (source GPU, bytes) for intra-server flows (one NVLink egress per GPU),
    plus one barrier per phase. The count below is derived from the rank-level flows alone."""
    w = workload_from_plan("dlrm-128")
    gps = w.gpus_per_server
    fabric = expander(w.servers, 4, 0, 12.5e9, gpus_per_server=gps)
    expect, total = 0, 0
    for ph in ("forward", "backward", "optimizer"):
        cf = collective_flows(w, phases=[ph])
        if cf.n_flows == 0:
            continue
        ss, ds = cf.src // gps, cf.dst // gps
        inter = ss != ds
        key_inter = np.unique(np.column_stack([ss, ds, cf.size.view(np.int64)])[inter], axis=0)
        key_intra = np.unique(np.column_stack([cf.src, cf.size.view(np.int64)])[~inter], axis=0)
        expect += key_inter.shape[0] + key_intra.shape[0] + 1
        total += cf.n_flows + 1
    ct = communication_time(w, fabric)
    assert ct.sim.finish.shape[0] == total
    assert ct.sim.simulated_flows == expect
    # 64 owner GPUs x 511 peers per all-to-all: the server pairs are 16 x 127 per all-to-all
    assert total / expect > 10
