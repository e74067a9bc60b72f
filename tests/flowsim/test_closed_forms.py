"""The simulator against closed forms written out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.flowsim import FlowSet, simulate

GB = 1e9


def test_two_flows_one_link():
    # 100 and 300 bytes on 100 B/s: both at 50 B/s until t=2 (100 B each), then 200 B at 100 B/s.
    fs = FlowSet.single_path([100.0], [0.0], size=[100, 300], start=[0, 0], paths=[[0], [0]])
    r = simulate(fs)
    np.testing.assert_allclose(r.finish, [2.0, 4.0], rtol=1e-15)
    assert r.makespan == 4.0
    np.testing.assert_allclose(r.link_bytes, [400.0])
    times, loads = r.link_load(0)
    # Load 100 B/s from 0 to 4, then 0.
    assert times[-1] == 4.0 and loads[-1] == 0.0
    np.testing.assert_allclose(loads[(times > 0) & (times < 4)], 100.0)
    assert np.isclose(np.sum(np.diff(times) * loads[:-1]), 400.0)


def test_two_flows_staggered_start():
    # B=10: a (30 B) alone for 1 s (10 B), then both at 5: a ends at 1 + 20/5 = 5,
    # b (40 B) had 20 B by then, alone: 5 + 20/10 = 7.
    fs = FlowSet.single_path([10.0], [0.0], size=[30, 40], start=[0, 1], paths=[[0], [0]])
    np.testing.assert_allclose(simulate(fs).finish, [5.0, 7.0], rtol=1e-15)


@pytest.mark.parametrize("n", [2, 3, 6])
@pytest.mark.parametrize("short_b", [3.0 * GB, 8.0 * GB, 20.0 * GB])
def test_parking_lot(n, short_b):
    # n links of capacity B in a line; one long flow of L bytes over all of them and one short
    # flow of s bytes per link. All get B/2 while both kinds live. The first kind to end does
    # so at 2 min(L, s)/B; the rest then runs alone at B: it ends at (L + s)/B.
    bw, long_b = 4.0 * GB, 8.0 * GB
    paths = [list(range(n))] + [[i] for i in range(n)]
    size = [long_b] + [short_b] * n
    fs = FlowSet.single_path([bw] * n, [0.0] * n, size=size, start=[0] * (n + 1), paths=paths)
    r = simulate(fs)
    first, last = 2 * min(long_b, short_b) / bw, (long_b + short_b) / bw
    expect_long = first if long_b <= short_b else last
    expect_short = first if short_b <= long_b else last
    np.testing.assert_allclose(r.finish[0], expect_long, rtol=1e-14)
    np.testing.assert_allclose(r.finish[1:], expect_short, rtol=1e-14)


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_ring_all_reduce_fluid(n):
    # One flow per ring edge of 2(n-1)/n * S; each ring edge is its own link of bandwidth B and
    # latency a: finish = 2(n-1)/n * S/B + a.
    s, bw, a = 1e9, 25e9, 3e-6
    per = 2 * (n - 1) / n * s
    fs = FlowSet.single_path(
        [bw] * n, [a] * n, size=[per] * n, start=[0] * n, paths=[[i] for i in range(n)]
    )
    np.testing.assert_allclose(simulate(fs).finish, 2 * (n - 1) / n * s / bw + a, rtol=1e-14)


@pytest.mark.parametrize("n", [3, 5])
def test_ring_all_reduce_step_synchronous(n):
    # 2(n-1) steps; in step k node i sends S/n to i+1 after receiving in step k-1:
    # finish = 2(n-1) * (S/(n B) + a).
    s, bw, a = 6e8, 10e9, 5e-6
    steps = 2 * (n - 1)
    paths, after = [], []
    for k in range(steps):
        for i in range(n):
            paths.append([i])
            after.append([] if k == 0 else [(k - 1) * n + (i - 1) % n])
    m = steps * n
    fs = FlowSet.single_path(
        [bw] * n, [a] * n, size=[s / n] * m, start=[0] * m, paths=paths, after=after
    )
    r = simulate(fs)
    np.testing.assert_allclose(r.makespan, steps * (s / (n * bw) + a), rtol=1e-13)
    np.testing.assert_allclose(r.start[-n:], (steps - 1) * (s / (n * bw) + a), rtol=1e-13)


@pytest.mark.parametrize("over", [1, 2, 4])
def test_permutation_on_oversubscribed_tree(over):
    # r racks of h hosts; host links B; each rack's uplink and downlink carry h*B/over.
    # Host i sends S to host (i + h) mod (r h): every flow leaves its rack, each uplink carries
    # h flows -> rate min(B, B/over) = B/over, so time = over * S/B.
    r_racks, h, bw, s = 4, 8, 10e9, 2e9
    n = r_racks * h
    # links: host up 0..n-1, host down n..2n-1, rack up 2n+j, rack down 2n+r+j
    cap = [bw] * (2 * n) + [h * bw / over] * (2 * r_racks)
    paths = []
    for i in range(n):
        d = (i + h) % n
        paths.append([i, 2 * n + i // h, 2 * n + r_racks + d // h, n + d])
    fs = FlowSet.single_path(cap, [0.0] * len(cap), size=[s] * n, start=[0] * n, paths=paths)
    res = simulate(fs)
    np.testing.assert_allclose(res.finish, over * s / bw, rtol=1e-14)
    np.testing.assert_allclose(res.makespan / (s / bw), over, rtol=1e-14)


def test_dependency_chain_with_latency():
    # f0 -> f1 -> f2 on links of different bandwidths and latencies; each alone:
    # finish_k = finish_{k-1} + S_k / B_k + a_k.
    cap, lat = [10.0, 20.0, 5.0], [0.1, 0.2, 0.3]
    size = [30.0, 40.0, 5.0]
    fs = FlowSet.single_path(
        cap, lat, size=size, start=[0, 0, 0], paths=[[0], [1], [2]], after=[[], [0], [1]]
    )
    r = simulate(fs)
    expect = np.cumsum([3.0 + 0.1, 2.0 + 0.2, 1.0 + 0.3])
    np.testing.assert_allclose(r.finish, expect, rtol=1e-15)
    np.testing.assert_allclose(r.start, [0.0, expect[0], expect[1]], rtol=1e-15)


def test_dependency_waits_for_its_own_start():
    # f1 may start only at 5 s although f0 finishes at 1 s.
    fs = FlowSet.single_path(
        [1.0], [0.0], size=[1, 2], start=[0, 5], paths=[[0], [0]], after=[[], [0]]
    )
    r = simulate(fs)
    np.testing.assert_allclose(r.start, [0, 5])
    np.testing.assert_allclose(r.finish, [1, 7])


def test_weighted_multipath_split():
    # Flow 0 of S split 1/4 over link 0 (B0) and 3/4 over link 1 (B1), latencies a0, a1;
    # flow 1 of T on link 1 from t=0. On link 1 both sub-flows get B1/2 while both live.
    s, t_bytes = 8e9, 2e9
    b0, b1 = 5e9, 4e9
    a0, a1 = 1e-3, 2e-3
    fs = FlowSet(
        capacity=[b0, b1],
        latency=[a0, a1],
        size=[s, t_bytes],
        start=[0, 0],
        flow_ptr=[0, 2, 3],
        path_ptr=[0, 1, 2, 3],
        path_links=[0, 1, 1],
        weight=[0.25, 0.75, 1.0],
    )
    r = simulate(fs)
    # Flow 1 (2 GB at 2 GB/s) ends at 1 s (+a1); the 6 GB part had 2 GB by then, 4 GB left at
    # 4 GB/s -> last byte 2 s, + a1. The 2 GB part on link 0 ends at 0.4 s + a0.
    np.testing.assert_allclose(r.path_finish, [0.4 + a0, 2.0 + a1, 1.0 + a1], rtol=1e-14)
    np.testing.assert_allclose(r.finish, [2.0 + a1, 1.0 + a1], rtol=1e-14)


def test_zero_size_flows_finish_at_start_plus_latency():
    fs = FlowSet.single_path(
        [1.0, 1.0],
        [0.25, 0.5],
        size=[0, 0, 2],
        start=[1.0, 0.0, 0.0],
        paths=[[0, 1], [1], [0]],
        after=[[], [], [1]],
    )
    r = simulate(fs)
    # f0: 1 + 0.75; f1: 0 + 0.5; f2 starts at 0.5, alone on link 0: 0.5 + 2 + 0.25.
    np.testing.assert_allclose(r.finish, [1.75, 0.5, 2.75])
    assert r.makespan == 2.75


def test_conservation_in_random_run():
    # Bytes integrate: the area under every link's load series equals its carried bytes.
    rng = np.random.default_rng(7)
    n_links, n = 6, 40
    paths = [
        sorted(rng.choice(n_links, rng.integers(1, 4), replace=False).tolist()) for _ in range(n)
    ]
    cap = rng.choice([1.0, 2.0, 4.0], n_links)
    fs = FlowSet.single_path(
        cap,
        np.zeros(n_links),
        size=rng.integers(1, 50, n),
        start=rng.uniform(0, 10, n),
        paths=paths,
    )
    r = simulate(fs)
    for link in range(n_links):
        times, loads = r.link_load(link)
        assert np.all(loads <= cap[link] * (1 + 1e-12))
        assert loads[-1] == pytest.approx(0.0, abs=1e-9)
        area = np.sum(np.diff(times) * loads[:-1])
        assert area == pytest.approx(r.link_bytes[link], rel=1e-9)
    assert np.all(r.finish >= r.start)


@pytest.mark.parametrize("ties", [False, True])
def test_processor_sharing_on_one_link(ties):
    # N flows on one link of capacity C, all at t=0: max-min is processor sharing, so they end
    # in size order; with sizes sorted s_1 <= ... <= s_N, between the (i-1)-th and the i-th
    # completion N - i + 1 flows share C, so t_i = t_{i-1} + (s_i - s_{i-1}) (N - i + 1) / C.
    # 20,000 flows: one event per distinct size, each costing log N in the group's heap (the
    # kernel's n log n case; before, every completion scanned the flows left).
    n, cap = 20_000, 1e10
    rng = np.random.default_rng(7)
    size = rng.permutation(np.arange(1, n + 1)) * 1e6 + rng.uniform(0.0, 1.0, n)
    if ties:  # equal sizes end together (one event per distinct size)
        size = np.round(size, -8) + 1e8
    fs = FlowSet.single_path(
        [cap], [0.0], size=size, start=np.zeros(n), paths=np.zeros((n, 1), np.int64)
    )
    r = simulate(fs, record_series=False)
    order = np.argsort(size, kind="stable")
    s = size[order]
    t = np.cumsum(np.diff(s, prepend=0.0) * (n - np.arange(n)) / cap)
    np.testing.assert_allclose(r.finish[order], t, rtol=1e-9)
    assert r.n_events == 1 + np.unique(size).size
