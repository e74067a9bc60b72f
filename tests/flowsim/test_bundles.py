"""Route bundles (issue 25: exact rail fabrics at 16,384 GPUs): the quotient built from the
routes equals the unreduced model, the exact check agrees with the plain one on the expanded
model, and broken symmetry turns the reduction off.
"""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.fabrics.fat_tree import fat_tree, leaf_spine, rail_optimized
from topoopt.flowsim import simulate
from topoopt.flowsim.bundles import (
    BundlePartition,
    BundleSet,
    bundle_partition,
    bundle_partition_rounds,
    is_bundle_equitable,
    reduce_bundles,
    simulate_bundles,
)
from topoopt.flowsim.network import FlowBuilder, Network, simulate_builder
from topoopt.flowsim.symmetry import Partition, is_equitable

FABRICS = {  # rail fabrics (rail routing), and single-homed servers (server-pair ECMP)
    "two tiers": (lambda: rail_optimized(16, 4, radix=8), 4),
    "three tiers": (lambda: rail_optimized(32, 2, radix=8), 2),
    "fat-tree k=4": (lambda: fat_tree(4), 2),
    "leaf-spine": (lambda: leaf_spine(24, 2.0, radix=8), 2),
}


def _builder(name, seed, *, regular):
    """Rank flows on a small rail fabric, with dependencies and same-rail families: regular
    (every server sends the same pattern, a ring by server) or random."""
    make, g = FABRICS[name]
    net = Network(make(), gpus_per_server=g)
    ns = net.fabric.n_servers
    fb = FlowBuilder(net)
    rng = np.random.default_rng(seed)
    if regular:
        shift = int(rng.integers(1, ns))
        srv = np.arange(ns)
        a = fb.add_ranks(srv * g, ((srv + shift) % ns) * g, 3e6)  # GPU 0 -> 0
        b = fb.add_ranks(srv * g + g - 1, ((srv + 2 * shift) % ns) * g, 5e6, after=[int(a[0])])
        fb.add_ranks(srv * g, ((srv + 1) % ns) * g, 2e6, same_rail=True, after=[int(b[-1])])
        dev = fb.new_devices(ns)
        fb.add_links(fb.device_link(dev), np.full(ns, 1e-3), after=[int(a[1])])
    else:
        n = 40
        src = rng.integers(0, ns * g, n)
        dst = rng.integers(0, ns * g, n)
        size = rng.integers(1, 9, n) * 1e6
        same = rng.random(n) < 0.3
        ids = fb.add_ranks(src, dst, size, same_rail=same)
        fb.add_deps(ids[10:20], ids[:10])
    return fb


def _close(a, b):
    return np.allclose(a, b, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("regular", [True, False])
def test_bundles_expand_to_the_builders_flow_model(name, regular):
    fb = _builder(name, 3, regular=regular)
    bs, class_of = fb.build_bundles(listed=True)
    fs, class_ref = fb.build_classes()
    assert np.array_equal(class_of, class_ref)
    ex = bs.to_flowset()
    assert ex.n_flows == fs.n_flows and ex.n_paths == fs.n_paths == bs.n_paths
    for f in range(fs.n_flows):

        def rows(s, f=f):
            paths = range(s.flow_ptr[f], s.flow_ptr[f + 1])
            return sorted(
                (tuple(sorted(s.path_links[s.path_ptr[p] : s.path_ptr[p + 1]].tolist())),
                 round(float(s.weight[p]), 15))
                for p in paths
            )  # fmt: skip

        assert rows(ex) == rows(fs)
    assert np.array_equal(ex.dep_ptr, fs.dep_ptr) and np.array_equal(ex.deps, fs.deps)
    assert np.array_equal(ex.multiplicity, fs.multiplicity)
    # the default bundles hold the routes as link counts: the same bundles, and each route's
    # counts are its listed paths' (route_link_counts against the listing in test_routing)
    bc, class_c = fb.build_bundles()
    assert np.array_equal(class_c, class_of) and bc.route_counts is not None
    for name_ in ("flow_ptr", "fix_ptr", "fix_links", "route", "count", "weight", "route_ptr"):
        assert np.array_equal(getattr(bc, name_), getattr(bs, name_)), name_
    from topoopt.flowsim.bundles import _route_links

    def by_link(ul):  # (route, link, paths crossing it) rows, in (route, link) order
        ptr, lk, cnt = ul
        r = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
        o = np.lexsort((lk, r))
        return np.column_stack([r[o], lk[o], cnt[o]])

    assert np.array_equal(by_link(_route_links(bc)), by_link(_route_links(bs)))
    with pytest.raises(ValueError, match="link counts"):
        bc.to_flowset()


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("regular", [True, False])
def test_bundle_quotient_equals_the_unreduced_model(name, regular):
    fb = _builder(name, 5, regular=regular)
    bs, _ = fb.build_bundles()  # routes as link counts
    listed, _ = fb.build_bundles(listed=True)
    red = reduce_bundles(bs)
    assert red.info["status"] == "on", red.info
    assert red.info["method"] == "route bundles"
    red_l = reduce_bundles(listed)
    assert red_l.info["status"] == "on" and _close(
        simulate_bundles(listed, red_l).finish, simulate_bundles(bs, red).finish
    )
    got = simulate_bundles(bs, red)
    ref = simulate(listed.to_flowset())
    assert _close(got.finish, ref.finish) and _close(got.start, ref.start)
    assert _close(got.link_bytes, ref.link_bytes)
    # every path of a bundle has its bundle's times
    b_of = np.repeat(np.arange(bs.n_bundles), bs.count)
    assert _close(got.path_finish[b_of], ref.path_finish)
    assert _close(got.path_last_byte[b_of], ref.path_last_byte)
    assert got.makespan == pytest.approx(ref.makespan, rel=1e-12)
    # the builder goes through the bundles and agrees with the unreduced builder
    sim = simulate_builder(fb, reduction=True)
    plain = simulate_builder(fb, reduction=False)
    assert sim.reduction["method"] == "route bundles"
    assert _close(sim.finish, plain.finish) and _close(sim.link_bytes, plain.link_bytes)
    if regular:  # the ring by server is symmetric: far fewer classes than flows
        assert red.info["flow_classes"] < bs.n_flows
    # starting labels only split: the refinement's own classes give them back, in no more
    # rounds; random labels still give an exact quotient
    part = red.partition
    again = reduce_bundles(bs, start_flow=part.flow, start_link=part.link)
    assert np.array_equal(again.partition.flow, part.flow)
    assert again.info["rounds"] <= red.info["rounds"]
    rng = np.random.default_rng(1)
    rand = reduce_bundles(bs, start_flow=rng.integers(0, 3, bs.n_flows))
    assert _close(simulate_bundles(bs, rand).finish, ref.finish)


@pytest.mark.parametrize("name", sorted(FABRICS))
@pytest.mark.parametrize("regular", [True, False])
def test_incremental_refinement_equals_the_round_by_round_one(name, regular):
    """The incremental refinement (stable ids, only the neighbours of moved elements re-hashed)
    reaches the round-by-round one's fixed point: the same classes, numbered alike, from the
    plain start, from random starting labels and with routes listed or as link counts."""
    fb = _builder(name, 11, regular=regular)
    rng = np.random.default_rng(2)
    for bs in (fb.build_bundles()[0], fb.build_bundles(listed=True)[0]):
        starts = [{}, {"start_flow": rng.integers(0, 3, bs.n_flows),
                       "start_link": rng.integers(0, 2, bs.n_links)}]  # fmt: skip
        for kw in starts:
            inc, ref = bundle_partition(bs, **kw), bundle_partition_rounds(bs, **kw)
            for c in ("flow", "bundle", "link"):
                assert np.array_equal(getattr(inc, c), getattr(ref, c)), c
        assert is_bundle_equitable(bs, bundle_partition(bs))


def _expanded_partition(bs, part):
    b_of = np.repeat(np.arange(bs.n_bundles), bs.count)
    return Partition(flow=part.flow, path=part.bundle[b_of], link=part.link, rounds=0)


@pytest.mark.parametrize("name", sorted(FABRICS))
def test_exact_check_agrees_with_the_plain_check_on_the_expanded_model(name):
    fb = _builder(name, 7, regular=True)
    bs, _ = fb.build_bundles(listed=True)
    bc, _ = fb.build_bundles()  # the same bundles, routes as link counts
    fs = bs.to_flowset()
    part = bundle_partition(bs)
    assert is_bundle_equitable(bs, part) and is_equitable(fs, _expanded_partition(bs, part))
    rng = np.random.default_rng(0)
    # the refinement's own partition, then merges and splits of one class (the discrete
    # partition is not a candidate: the paths of a bundle cross different links)
    cases = [part]
    for k in range(12):
        kind = ("flow", "bundle", "link")[k % 3]
        cls = {c: getattr(part, c).copy() for c in ("flow", "bundle", "link")}
        n = int(cls[kind].max()) + 1
        if k < 6 and n >= 2:  # merge two classes
            a, b = rng.choice(n, 2, replace=False)
            cls[kind][cls[kind] == b] = a
        else:  # split a class in two at random
            members = np.flatnonzero(cls[kind] == rng.integers(n))
            cls[kind][members[rng.random(members.size) < 0.5]] = n
        cls[kind] = np.unique(cls[kind], return_inverse=True)[1].reshape(-1)
        cases.append(BundlePartition(cls["flow"], cls["bundle"], cls["link"], 0))
    said = [is_bundle_equitable(bs, p) for p in cases]
    plain = [is_equitable(fs, _expanded_partition(bs, p)) for p in cases]
    assert all(p for s, p in zip(said, plain, strict=True) if s)  # never accepts wrongly
    said_c = [is_bundle_equitable(bc, p) for p in cases]
    assert said_c[0] and all(p for s, p in zip(said_c, plain, strict=True) if s)
    assert said == plain  # and here never stricter
    assert said[0] and not all(said)


def _two_routes(cap):
    """Two flows on one bundle each over the same two-path route; ``cap``: the link capacities
    (the second path's middle link slower breaks the symmetry between the paths)."""
    return BundleSet(
        capacity=np.asarray(cap, float), latency=np.zeros(6), size=np.array([1.0, 3.0]),
        start=np.zeros(2), flow_ptr=np.array([0, 1, 2]), fix_ptr=np.array([0, 1, 2]),
        fix_links=np.array([0, 1]), route=np.array([0, 0]), count=np.array([2, 2]),
        weight=np.array([0.5, 0.5]), route_ptr=np.array([0, 2]),
        path_ptr=np.array([0, 2, 4]), path_links=np.array([2, 3, 4, 5]),
    )  # fmt: skip


def test_a_route_whose_paths_differ_turns_the_reduction_off():
    ok = _two_routes([4.0, 4.0, 1.0, 1.0, 1.0, 1.0])
    red = reduce_bundles(ok)
    assert red.info["status"] == "on"
    assert _close(simulate_bundles(ok, red).finish, simulate(ok.to_flowset()).finish)
    # closed form: two paths (one per flow) share each 1 B/s middle link, 0.5 B/s each;
    # flow 0's paths (0.5 B each) end at 1 s, then flow 1's (1.5 B, 0.5 B sent) at 1 B/s: 2 s
    assert simulate_bundles(ok, red).finish.tolist() == pytest.approx([1.0, 2.0])
    broken = _two_routes([4.0, 4.0, 1.0, 1.0, 1.0, 0.5])
    red = reduce_bundles(broken)
    assert red.info["status"] == "off" and "not interchangeable" in red.info["reason"]
    assert simulate_bundles(broken, red) is None


def test_bundles_only_for_ecmp_routes_by_switch_pairs():
    make, g = FABRICS["two tiers"]
    fab = make()
    nets = [
        Network(fab, gpus_per_server=g, max_paths=2),
        Network(fab, gpus_per_server=g, method="shortest"),
        Network(fab, gpus_per_server=g, rail_routing=False),  # servers on several switches
    ]
    for net in nets:
        fb = FlowBuilder(net)
        fb.add_ranks([0], [g * 3], 1e6)
        assert fb.build_bundles() is None


def test_a_slower_core_link_falls_back_to_the_sub_flow_model():
    """One spine link of the leaf-spine at half capacity: the paths of a bundle through it
    are no longer interchangeable, the route-bundle check refuses, and the builder simulates
    through the sub-flow model instead (still equal to the unreduced model)."""
    from dataclasses import replace

    make, g = FABRICS["leaf-spine"]
    fab = make()
    ns = fab.n_servers
    cap = fab.capacity.copy()
    core = np.flatnonzero((fab.src >= ns) & (fab.dst >= ns))[0]
    cap[core] /= 2
    net = Network(replace(fab, capacity=cap), gpus_per_server=g)
    fb = FlowBuilder(net)
    srv = np.arange(ns)
    fb.add_ranks(srv * g, ((srv + 7) % ns) * g, 3e6)
    bs, _ = fb.build_bundles()
    red = reduce_bundles(bs)
    assert red.info["status"] == "off"
    sim = simulate_builder(fb, reduction=True)
    assert sim.reduction.get("method") != "route bundles"
    plain = simulate_builder(fb, reduction=False)
    assert _close(sim.finish, plain.finish) and _close(sim.link_bytes, plain.link_bytes)


def test_network_keeps_switch_route_counts_per_pair():
    """Network._switch_routes computes only the pairs it has not seen, and answers every
    request as route_link_counts would."""
    from topoopt.fabrics.routing import route_link_counts

    net = Network(fat_tree(4), gpus_per_server=2)
    sw = np.flatnonzero(net.fabric.node_kind != "server")
    p1 = np.column_stack([sw[:6], sw[::-1][:6]])
    p2 = np.column_stack([sw[3:9], sw[::-1][3:9]])[::-1]  # overlaps p1, another order
    for p in (p1, p2, p1):
        got = net._switch_routes(p, True)
        for a, b in zip(got, route_link_counts(net.fabric, p, by_hop=True), strict=True):
            assert np.array_equal(a, b)


def test_bundle_guard_estimate_is_within_a_factor_of_the_measured_peak():
    """check_bundles' estimate against the resident memory a route-bundle simulation adds
    (Linux: the peak ``VmHWM`` reset through ``/proc/self/clear_refs``) on 102,400 flows of
    rings by server on a rail fabric: within a factor of 2 either way (measured 0.78)."""
    import os

    from topoopt.flowsim import network

    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc")

    def status(key):
        with open("/proc/self/status") as fh:
            for ln in fh:
                if ln.startswith(key):
                    return int(ln.split()[1]) * 1024
        pytest.skip(f"no {key} in /proc/self/status")

    def rings(reps, g=8):
        net = Network(rail_optimized(64, g, radix=16), gpus_per_server=g)
        fb = FlowBuilder(net)
        gpu = np.arange(net.fabric.n_servers * g)
        prev = None
        for k in range(reps):  # a chain of rings by server, shifts 1-3, 1 or 2 MB
            dst = ((gpu // g + 1 + k % 3) % net.fabric.n_servers) * g + gpu % g
            ids = fb.add_ranks(gpu, dst, 1e6 * (1 + k % 2), after=None if prev is None else [prev])
            prev = int(ids[-1])
        return fb

    seen = []
    real = network.check_bundles

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    simulate_builder(rings(2), reduction=True)  # compiled and routed once
    fb = rings(200)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(network, "check_bundles", spy)
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            pytest.skip("cannot reset the peak resident memory")
        before = status("VmRSS")
        sim = simulate_builder(fb, reduction=True)
        peak = status("VmHWM") - before
    assert sim.reduction["method"] == "route bundles" and len(seen) == 1
    assert 0.5 <= seen[0] / peak <= 2.0, (seen[0], peak)


def test_route_counts_are_refused_before_they_are_computed(monkeypatch):
    """route_link_entries equals the entries route_link_counts returns (leaf pairs of a rail
    Clos, and a fat-tree's server pairs), and with the budget set below
    ROUTE_COUNT_PEAK_BYTES x entries the route-bundle path refuses random rank-to-rank flows
    in _switch_routes, before route_link_counts runs on the pairs (a spy sees it called only
    on route_link_entries' few representatives, one pair per distance and path count)."""
    from topoopt.fabrics import routing
    from topoopt.flowsim.subflow_guard import ROUTE_COUNT_PEAK_BYTES
    from traffic.errors import InputError

    fab = rail_optimized(64, 4, radix=16)
    leaf = np.flatnonzero(fab.node_kind != "server")[:32]
    pairs = np.array([(a, b) for a in leaf for b in leaf if a != b], np.int64)
    want = int(routing.route_link_counts(fab, pairs)[0][-1])
    assert routing.route_link_entries(fab, pairs) == want
    ft = fat_tree(4)
    sp = np.array([(a, b) for a in range(16) for b in range(16)], np.int64)
    assert routing.route_link_entries(ft, sp) == int(routing.route_link_counts(ft, sp)[0][-1])

    rng = np.random.default_rng(0)
    g, n = 4, 64 * 4
    src = rng.integers(0, n, 400)
    dst = (src + rng.integers(1, n, 400)) % n

    def builder():
        fb = FlowBuilder(Network(rail_optimized(64, g, radix=16), gpus_per_server=g))
        fb.add_ranks(src, dst, 1e6)
        return fb

    bs, _ = builder().build_bundles()  # within the default budget: built
    entries = bs.route_counts[1].size
    calls = []
    real = routing.route_link_counts

    def spy(fabric, pairs, **kw):
        calls.append(len(pairs))
        return real(fabric, pairs, **kw)

    monkeypatch.setattr(routing, "route_link_counts", spy)
    gb = 0.5 * ROUTE_COUNT_PEAK_BYTES * entries / 1e9
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", f"{gb:.9f}")
    with pytest.raises(InputError, match=r"^flows: got '\d[\d,]* switch pairs to route"):
        builder().build_bundles()
    assert calls and max(calls) <= 4 < len(bs.route_counts[0]) - 1, calls


def _override_builder(weights):
    """Rank flows on a circulant direct-connect fabric of 8 servers (strides 1 and 3, two GPUs
    a server) routed by an override: offset 2 over two two-hop paths, offset 4 over three,
    with the path weights ``weights(u, offset)`` (a design's weighted multi-path routing; pairs
    the override lacks are routed by ECMP, equal weights)."""
    from topoopt.fabrics.direct_connect import direct_connect
    from topoopt.paths import PathSet

    fab = direct_connect(8, 4)
    assert fab.params["strides"] == [1, 3]
    link = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(fab.src, fab.dst, strict=True))}
    via = {2: [[1, 2], [3, 2]], 4: [[1, 4], [3, 4], [7, 4]]}  # hops as offsets from u
    src, dst, cptr, pptr, links, w = [], [], [0], [0], [], []
    for u in range(8):
        for off, paths in via.items():
            src.append(u)
            dst.append((u + off) % 8)
            for p, ws in zip(paths, weights(u, off), strict=True):
                nodes = [u] + [(u + h) % 8 for h in p]
                links += [link[(a, b)] for a, b in zip(nodes[:-1], nodes[1:], strict=True)]
                pptr.append(len(links))
                w.append(ws)
            cptr.append(len(w))
    net = Network(fab, gpus_per_server=2, routing=PathSet(src, dst, cptr, pptr, links, w))
    fb = FlowBuilder(net)
    srv = np.arange(8)
    a = fb.add_ranks(srv * 2, ((srv + 2) % 8) * 2 + 1, 3e6)
    b = fb.add_ranks(srv * 2 + 1, ((srv + 4) % 8) * 2, 5e6, after=[int(a[0])])
    c = fb.add_ranks(srv * 2, ((srv + 1) % 8) * 2, 2e6, after=[int(b[-1])])  # ECMP, one hop
    fb.add_ranks(srv * 2, srv * 2 + 1, 1e6, after=c)  # inside a server
    dev = fb.new_devices(8)
    fb.add_links(fb.device_link(dev), np.full(8, 1e-3), after=[int(a[1])])
    return fb


@pytest.mark.parametrize("regular", [True, False])
def test_listed_bundles_of_a_routing_override_equal_the_sub_flow_model(regular):
    """Issue 25/26 (``joint`` at 16,384 GPUs): a design's listed, weighted routes go through
    route bundles (one route per pair and path weight) instead of a sub-flow per path; the
    expanded bundles are the builder's flow model, and the quotient equals the unreduced
    simulation. Regular: every server's weights alike (the quotient has few classes);
    otherwise random weights per pair (fewer symmetries, still exact)."""
    rng = np.random.default_rng(7)

    def weights(u, off):
        if regular:
            return [0.7, 0.3] if off == 2 else [0.5, 0.25, 0.25]
        w = rng.integers(1, 5, 2 if off == 2 else 3).astype(float)
        return (w / w.sum()).tolist()

    fb = _override_builder(weights)
    bs, class_of = fb.build_bundles()
    fs, class_ref = fb.build_classes()
    assert np.array_equal(class_of, class_ref) and bs.route_counts is None
    ex = bs.to_flowset()
    assert ex.n_flows == fs.n_flows and ex.n_paths == fs.n_paths
    # a bundle per sub-flow, each pair's paths listed once (not once per flow)
    assert bs.n_bundles == fs.n_paths and bs.path_links.size < fs.path_links.size

    def rows(s, f):
        return sorted(
            (tuple(s.path_links[s.path_ptr[p] : s.path_ptr[p + 1]].tolist()),
             round(float(s.weight[p]), 15))
            for p in range(s.flow_ptr[f], s.flow_ptr[f + 1])
        )  # fmt: skip

    assert all(rows(ex, f) == rows(fs, f) for f in range(fs.n_flows))
    assert np.array_equal(ex.multiplicity, fs.multiplicity)
    sim = simulate_builder(fb, reduction=True)
    plain = simulate_builder(fb, reduction=False)
    assert sim.reduction["status"] == "on" and sim.reduction["method"] == "route bundles"
    assert _close(sim.finish, plain.finish) and _close(sim.start, plain.start)
    assert _close(sim.link_bytes, plain.link_bytes)
    assert sim.makespan == pytest.approx(plain.makespan, rel=1e-12)
    if regular:  # the eight servers are alike: one class per flow family
        assert sim.reduction["flow_classes"] * 8 <= sim.reduction["flows"]


def test_listed_bundles_over_the_budget_fall_back_to_the_sub_flow_model(monkeypatch):
    """Six paths a pair (the offset-4 routes, each listed twice at half weight): route
    bundles cost 300 + 6 x 300 bytes a flow, the sub-flow model 900 + 6 x 150
    (subflow_guard); between the two the builder takes the sub-flow model, exactly."""
    from topoopt.fabrics.direct_connect import direct_connect
    from topoopt.paths import PathSet

    fab = direct_connect(8, 4)
    link = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(fab.src, fab.dst, strict=True))}
    hops = [[0, 1, 4], [0, 3, 4], [0, 7, 4]] * 2
    links = [link[(a, b)] for h in hops for a, b in zip(h[:-1], h[1:], strict=True)]
    ps = PathSet([0], [4], [0, 6], np.arange(0, 13, 2), links, np.full(6, 1 / 6))
    fb = FlowBuilder(Network(fab, gpus_per_server=1, routing=ps))
    fb.add_ranks([0], [4], 6e6)
    assert fb.build_bundles() is not None
    plain = simulate_builder(fb, reduction=False)  # 900 + 6 x 300 bytes, in the default budget
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", str(1950e-9))  # 2,100 > 1,950 > 1,800 bytes
    assert fb.build_bundles() is None
    sim = simulate_builder(fb, reduction=True)
    assert sim.reduction.get("method") != "route bundles"
    assert _close(sim.finish, plain.finish) and sim.finish[0] > 0
