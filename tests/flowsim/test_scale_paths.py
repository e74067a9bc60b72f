"""The compiled steps that make large iterations cheap (issue 25), each against an independent
plain construction: sub-flow expansion of routes, the repeated-link check, unique-with-inverse
of pair keys, routes of a subset of pairs taken from a superset, refinement in one topological
order, refinement started from labels (exact whatever the labels), and the per-class simulation
of a builder expanded later."""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels import random_flowset
from test_symmetry import ring

from topoopt.fabrics import fat_tree
from topoopt.fabrics.routing import routes
from topoopt.flowsim._kernels import classes_kernel
from topoopt.flowsim._symmetry_kernels import (
    classes_in_order,
    csr_by_key,
    dense_ids,
    expand_routes,
    first_repeated_link,
    topological_order,
)
from topoopt.flowsim.network import (
    FlowBuilder,
    Network,
    _unique_inverse,
    simulate_builder,
    simulate_builder_classes,
)
from topoopt.flowsim.simulator import expand_classes, simulate
from topoopt.flowsim.symmetry import (
    equitable_partition,
    is_equitable,
    reduce_flows,
    simulate_reduced,
)


def test_expand_routes_against_a_plain_loop():
    ps = routes(fat_tree(4), "ecmp", pairs=[[0, 15], [0, 1], [3, 8]])
    flow_link = np.array([-1, 7, -1, -1, 2], np.int64)
    comm = np.array([0, -1, 2, 1, -1], np.int64)
    flow_ptr, path_ptr, links, weight = expand_routes(
        flow_link, comm, ps.commodity_ptr, ps.path_ptr, ps.path_links, ps.weight
    )
    want_paths, want_w = [], []
    for f in range(5):
        if flow_link[f] >= 0:
            want_paths.append([int(flow_link[f])])
            want_w.append(1.0)
            continue
        c = comm[f]
        for q in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1]):
            want_paths.append(ps.path_links[ps.path_ptr[q] : ps.path_ptr[q + 1]].tolist())
            want_w.append(float(ps.weight[q]))
    got = [links[path_ptr[p] : path_ptr[p + 1]].tolist() for p in range(path_ptr.size - 1)]
    assert got == want_paths and weight.tolist() == want_w
    assert np.diff(flow_ptr).tolist() == [4, 1, 4, 1, 1]  # 4 ECMP paths between pods


@pytest.mark.parametrize("seed", range(4))
def test_first_repeated_link_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, 40, 30)  # some paths longer than the pairwise limit (32)
    ptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    links = rng.integers(0, 60 if seed % 2 else 10_000, ptr[-1]).astype(np.int64)
    want = (-1, -1)
    for p in range(lens.size):
        row = links[ptr[p] : ptr[p + 1]].tolist()
        dups = sorted({x for x in row if row.count(x) > 1})
        if dups:
            want = (p, dups[0])
            break
    p, link = first_repeated_link(ptr, links)
    assert (int(p), int(link)) == want


@pytest.mark.parametrize("seed", range(3))
def test_unique_inverse_and_counting_sort_equal_numpy(seed):
    key = np.random.default_rng(seed).integers(0, 50, 400).astype(np.int64)
    u, inv = _unique_inverse(key)
    nu, ninv = np.unique(key, return_inverse=True)
    assert u.tolist() == nu.tolist() and inv.tolist() == ninv.reshape(-1).tolist()
    ptr, order = csr_by_key(key, 50)
    assert order.tolist() == np.argsort(key, kind="stable").tolist()
    assert ptr.tolist() == np.r_[0, np.cumsum(np.bincount(key, minlength=50))].tolist()


def test_routes_of_a_subset_come_from_the_superset_unchanged():
    fab = fat_tree(4)
    net = Network(fab, gpus_per_server=1)
    u, v = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    keep = u != v
    net.pair_routes(u[keep], v[keep])  # every pair: the memo's superset
    other = Network(fab, gpus_per_server=1)  # a second network on the same fabric
    src, dst = np.array([3, 0, 15, 3]), np.array([8, 15, 0, 8])
    ps, comm = other.pair_routes(src, dst)
    direct = routes(fab, "ecmp", pairs=[[0, 15], [3, 8], [15, 0]])
    for name in ("src", "dst", "commodity_ptr", "path_ptr", "path_links", "weight"):
        assert np.array_equal(getattr(ps, name), getattr(direct, name)), name
    assert comm.tolist() == [1, 0, 2, 1]


def test_route_memo_lets_go_of_the_routes_with_their_fabric():
    # advise builds one fabric after another in one process: the last fabric's routes (GBs at
    # 16,384 GPUs) must not stay in the module-level memo once that fabric is gone
    import gc
    import weakref

    from topoopt.flowsim import network as nw

    fab = fat_tree(4)
    net = Network(fab, gpus_per_server=1)
    ps, _ = net.pair_routes(np.array([0, 3]), np.array([15, 8]))
    assert nw._SHARED_ROUTES.ps is ps  # held while the fabric lives
    gone = weakref.ref(ps)
    del fab, net, ps
    gc.collect()
    assert nw._SHARED_ROUTES.ps is None and gone() is None
    fab2 = fat_tree(4)  # a new fabric routes again and is memoised as before
    ps2, _ = Network(fab2, gpus_per_server=1).pair_routes(np.array([1]), np.array([9]))
    assert nw._SHARED_ROUTES.ps is ps2


@pytest.mark.parametrize("seed", range(4))
def test_classes_in_one_topological_order_equal_the_kernel(seed):
    fs = random_flowset(
        np.random.default_rng(seed), 10, 40, multipath=True, zero=False, deps=True,
        latency=False, stagger=False,
    )  # fmt: skip
    rng = np.random.default_rng(seed + 10)
    base = rng.integers(0, 3, (fs.n_flows, 2)).astype(np.int64)
    rptr, rflows = fs.dependents()
    order, visited = topological_order(fs.dep_ptr, rptr, rflows)
    assert visited == fs.n_flows
    pos = np.empty(fs.n_flows, np.int64)
    pos[order] = np.arange(fs.n_flows)
    owner = np.repeat(np.arange(fs.n_flows), np.diff(fs.dep_ptr))
    assert np.all(pos[fs.deps] < pos[owner])  # dependencies first
    a = dense_ids(classes_in_order(base, order, fs.dep_ptr, fs.deps))
    b, _ = classes_kernel(base, fs.dep_ptr, fs.deps, rptr, rflows)
    assert a.tolist() == dense_ids(b.view(np.uint64)).tolist()


@pytest.mark.parametrize("seed", range(4))
def test_refinement_from_any_labels_is_equitable_and_exact(seed):
    """Labels only split the start: the partition is still equitable (checked) and the reduced
    simulation equals the unreduced one; labels equal to the plain classes change nothing."""
    fs = ring(8, hops=2, multipath=seed % 2 == 1, deps=True)
    plain = equitable_partition(fs)
    same = equitable_partition(fs, start_flow=plain.flow, start_link=plain.link)
    assert same.flow.tolist() == plain.flow.tolist()
    assert same.link.tolist() == plain.link.tolist()
    assert same.rounds <= plain.rounds
    if seed < 2:  # labels kept by the rotation by two servers: some symmetry is left
        lab_f, lab_l = np.arange(fs.n_flows) % 2, np.arange(fs.n_links) % 2
    else:  # random labels: often no symmetry left (then the reduction is off), still exact
        rng = np.random.default_rng(seed)
        lab_f, lab_l = rng.integers(0, 2, fs.n_flows), rng.integers(0, 2, fs.n_links)
    part = equitable_partition(fs, start_flow=lab_f, start_link=lab_l)
    assert is_equitable(fs, part)
    for c in range(part.n_flow_classes):  # a class never mixes labels
        assert np.unique(lab_f[part.flow == c]).size == 1
    for c in range(part.n_link_classes):
        assert np.unique(lab_l[part.link == c]).size == 1
    red = reduce_flows(fs, start_flow=lab_f, start_link=lab_l)
    if seed < 2:
        assert red.info["status"] == "on" and red.flows.n_flows < fs.n_flows
    want = simulate(fs)
    got = simulate_reduced(fs, reduction=red)
    np.testing.assert_allclose(got.finish, want.finish, rtol=1e-9)
    np.testing.assert_allclose(got.link_bytes, want.link_bytes, rtol=1e-9)


def test_builder_classes_expanded_later_equal_simulate_builder():
    from topoopt.fabrics import ideal

    net = Network(ideal(4, port_bandwidth=100.0, latency=0.0), gpus_per_server=2)
    fb = FlowBuilder(net)
    a = fb.add_ranks([0, 1, 2, 3], [4, 5, 6, 7], 100.0)
    fb.add_ranks([4, 5], [0, 1], 50.0, after=a[:2])
    labels: dict = {}
    sim, flows, class_of = simulate_builder_classes(fb, reduction=True, class_labels=labels)
    whole = simulate_builder(fb)
    later = expand_classes(sim, flows, class_of)
    np.testing.assert_allclose(later.finish, whole.finish, rtol=1e-12)
    np.testing.assert_allclose(later.path_finish, whole.path_finish, rtol=1e-12)
    assert labels["flow"].shape == (fb.n,)  # the first reduced run left its classes
    again = simulate_builder(fb, reduction=True, class_labels=labels)  # started from them
    np.testing.assert_allclose(again.finish, whole.finish, rtol=1e-12)
