"""The compiled kernels against independent plain-Python implementations.

- the two compiled fillings (rounds of local bottlenecks; one bottleneck link at a time, as the
  simulator re-fills) against textbook
  progressive filling one water level at a time, on random instances with warm-start capacities
  and many ties;
- the event loop (partial re-fills after completions and arrivals, batched events, load
  resyncs) against a from-scratch simulator that recomputes every active sub-flow's rate by
  level-by-level filling at every event, on random event sequences (staggered starts, weighted
  multipath, zero-byte flows, dependencies, latencies).
"""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.flowsim import FlowSet, simulate
from topoopt.flowsim._kernels import (
    LQ_CROWD,
    RESYNC_EVERY,
    fill_kernel,
    fill_links_mult,
)
from traffic.errors import InputError


# ---------------------------------------------------------------------- references
def level_filling(paths: list[list[int]], cap: list[float]) -> list[float]:
    """Progressive filling one water level at a time: raise every unfrozen flow by the largest
    common increment, freeze the flows of every link that is full."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    left = [float(c) for c in cap]
    while not all(frozen):
        users = [
            [f for f, p in enumerate(paths) if not frozen[f] and link in p]
            for link in range(len(cap))
        ]
        inc = min(left[link] / len(u) for link, u in enumerate(users) if u)
        for f in range(len(paths)):
            if not frozen[f]:
                rate[f] += inc
        for link, u in enumerate(users):
            left[link] -= inc * len(u)
        full = [link for link, u in enumerate(users) if u and left[link] <= 1e-12 * cap[link]]
        for link in full:
            for f in users[link]:
                frozen[f] = True
    return rate


def reference_simulation(fs: FlowSet, rtol: float = 1e-12) -> tuple[np.ndarray, np.ndarray]:
    """Event by event, every active sub-flow's rate recomputed from scratch; returns
    ``(start, finish)`` per flow with the semantics of :mod:`topoopt.flowsim.simulator`."""
    n_f = fs.n_flows
    fptr, pptr = fs.flow_ptr.tolist(), fs.path_ptr.tolist()
    plinks = fs.path_links.tolist()
    pbytes = fs.path_bytes().tolist()
    plat = fs.path_latency().tolist()
    deps = [fs.deps[fs.dep_ptr[f] : fs.dep_ptr[f + 1]].tolist() for f in range(n_f)]
    release = [float(fs.start[f]) if not deps[f] else None for f in range(n_f)]
    finish: list[float | None] = [None] * n_f
    started = [False] * n_f
    left = list(pbytes)
    last = [None] * len(pbytes)
    active: list[int] = []
    rates: dict[int, float] = {}
    t = 0.0
    while True:
        t_c = min((t + left[p] / rates[p] for p in active), default=np.inf)
        due = [release[f] for f in range(n_f) if not started[f] and release[f] is not None]
        t_a = min(due, default=np.inf)
        t_next = min(t_c, t_a)
        if t_next == np.inf:
            break
        for p in active:
            left[p] -= rates[p] * (t_next - t)
        t = t_next
        cut = t + rtol * abs(t)
        ended = [p for p in active if left[p] <= rates[p] * (cut - t)] if t_c <= cut else []
        # arrivals may cascade through zero-byte flows and their dependents
        while True:
            for p in ended:
                last[p] = t
            active = [p for p in active if p not in ended]
            for f in range(n_f):
                if (
                    finish[f] is None
                    and started[f]
                    and all(last[p] is not None for p in range(fptr[f], fptr[f + 1]))
                ):
                    finish[f] = max(last[p] + plat[p] for p in range(fptr[f], fptr[f + 1]))
            for f in range(n_f):
                if release[f] is None and all(finish[d] is not None for d in deps[f]):
                    release[f] = max([float(fs.start[f])] + [finish[d] for d in deps[f]])
            new = [
                f
                for f in range(n_f)
                if not started[f] and release[f] is not None and release[f] <= cut
            ]
            if not new:
                break
            ended = []
            for f in new:
                started[f] = True
                for p in range(fptr[f], fptr[f + 1]):
                    if pbytes[p] <= 0:
                        ended.append(p)
                    else:
                        active.append(p)
        sub = [plinks[pptr[p] : pptr[p + 1]] for p in active]
        rates = dict(zip(active, level_filling(sub, fs.capacity.tolist()), strict=True))
    return np.array(release, float), np.array(finish, float)


# ---------------------------------------------------------------------- fillings
def random_instance(rng, n_links, n_flows, max_hops, caps=(1.0, 2.0, 3.0, 5.0, 7.5, 10.0)):
    cap = rng.choice(caps, n_links)
    paths = [
        sorted(rng.choice(n_links, rng.integers(1, max_hops + 1), replace=False).tolist())
        for _ in range(n_flows)
    ]
    ptr = np.zeros(n_flows + 1, np.int64)
    np.cumsum([len(p) for p in paths], out=ptr[1:])
    return paths, cap, ptr, np.concatenate([np.asarray(p, np.int64) for p in paths])


def run_fill(kind, ptr, links, rows, cap):
    rem, out = cap.astype(float).copy(), np.empty(rows.shape[0])
    if kind == "rounds":
        steps = fill_kernel(ptr, links, rows, rem, out)
    else:
        steps = fill_links_mult(ptr, links, rows, np.ones(ptr.shape[0] - 1, np.int64), rem, out)
    return out, rem, steps


KINDS = ["rounds", "links"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(25))
def test_fillings_match_level_filling(kind, seed):
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(1, 10))
    # few capacity values and short paths: many exact ties between links and levels
    caps = (4.0, 8.0) if seed % 3 == 0 else (1.0, 2.0, 3.0, 5.0, 7.5, 10.0)
    paths, cap, ptr, links = random_instance(
        rng, n_links, int(rng.integers(1, 25)), min(n_links, 4), caps
    )
    rows = np.arange(len(paths), dtype=np.int64)
    out, rem, steps = run_fill(kind, ptr, links, rows, cap)
    expect = level_filling(paths, cap.tolist())
    np.testing.assert_allclose(out, expect, rtol=1e-12)
    load = np.zeros(n_links)
    for p, r in zip(paths, expect, strict=True):
        load[p] += r
    np.testing.assert_allclose(rem, np.maximum(cap - load, 0.0), atol=1e-9)
    assert 1 <= steps <= len(paths)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(10))
def test_fillings_on_a_subset_with_left_over_capacity(kind, seed):
    """Only some rows, on capacities other flows left (the simulator's warm start)."""
    rng = np.random.default_rng(500 + seed)
    paths, cap, ptr, links = random_instance(rng, 7, 30, 3)
    rows = np.sort(rng.choice(30, 12, replace=False)).astype(np.int64)
    left = cap * rng.uniform(0.2, 1.0, cap.shape[0])
    out, _, _ = run_fill(kind, ptr, links, rows, left)
    np.testing.assert_allclose(
        out, level_filling([paths[r] for r in rows], left.tolist()), rtol=1e-12
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(12))
def test_fillings_order_shares_a_hair_apart_and_far_apart(kind, seed):
    """Capacities within 1e-5 of each other (many links in one bucket of the re-fill's queue:
    the smallest share must still go first) or spread over 40 factors of 2 (more than its
    buckets: coarser buckets, and the heap for shares that grow past them)."""
    rng = np.random.default_rng(900 + seed)
    paths, _, ptr, links = random_instance(rng, 12, 40, 4)
    if seed % 2 == 0:
        cap = 1.0 + rng.uniform(0.0, 1e-5, 12)
    else:
        cap = 10.0 ** rng.uniform(-6.0, 6.0, 12)
    out, _, _ = run_fill(kind, ptr, links, np.arange(40, dtype=np.int64), cap)
    np.testing.assert_allclose(out, level_filling(paths, cap.tolist()), rtol=1e-12)


@pytest.mark.parametrize(("spread", "n_one"), [(0.0, 3000), (1e-7, 4500)])
def test_links_filling_with_thousands_of_links_at_one_share(spread, n_one):
    """Thousands of links whose shares are equal (ties, taken in a batch) or within 1e-7 of
    each other (one bucket holding more than ``LQ_CROWD`` links: the heap takes over), beside a
    mesh of links with various shares: the same rates as the rounds filling."""
    assert (n_one > LQ_CROWD) if spread else (n_one < LQ_CROWD)
    rng = np.random.default_rng(31)
    n_links = n_one + 1500  # the first n_one carry one flow each, the others two-link flows
    cap = np.concatenate([1.0 + spread * rng.random(n_one), rng.choice([0.7, 1.3, 2.0], 1500)])
    mesh = np.arange(n_one, n_links)
    paths = [[i] for i in range(n_one)]
    paths += [sorted(rng.choice(mesh, 2, replace=False).tolist()) for _ in range(2000)]
    ptr = np.zeros(len(paths) + 1, np.int64)
    np.cumsum([len(p) for p in paths], out=ptr[1:])
    links = np.concatenate([np.asarray(p, np.int64) for p in paths])
    rows = np.arange(len(paths), dtype=np.int64)
    by_links, _, _ = run_fill("links", ptr, links, rows, cap)
    by_rounds, _, _ = run_fill("rounds", ptr, links, rows, cap)
    np.testing.assert_allclose(by_links, by_rounds, rtol=1e-12)
    assert by_links.min() < by_links.max()  # not all one level: the order mattered


def test_fillings_on_a_chain_of_levels():
    # Flow i crosses link i (capacity 1 + i/2) and link i+1: every round of local bottlenecks
    # freezes one flow (link 0 first, then the next level...), every link saturates in turn.
    n = 40
    paths = [[i, i + 1] for i in range(n)]
    cap = np.array([1.0 + 0.5 * i for i in range(n + 1)])
    ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    links = np.array(paths, np.int64).ravel()
    expect = level_filling(paths, cap.tolist())
    for kind in KINDS:
        out, _, _ = run_fill(kind, ptr, links, np.arange(n, dtype=np.int64), cap)
        np.testing.assert_allclose(out, expect, rtol=1e-12)


# ---------------------------------------------------------------------- event loop
def random_flowset(rng, n_links, n_flows, *, multipath, zero, deps, latency, stagger):
    cap = rng.choice([1.0, 2.0, 4.0, 5.0], n_links)
    lat = rng.choice([0.0, 0.01, 0.05], n_links) if latency else np.zeros(n_links)
    flow_ptr, path_ptr, plinks, weight = [0], [0], [], []
    for _ in range(n_flows):
        k = 2 if multipath and rng.random() < 0.4 else 1
        w = [0.25, 0.75] if k == 2 else [1.0]
        for j in range(k):
            p = sorted(
                rng.choice(n_links, rng.integers(1, min(4, n_links + 1)), replace=False).tolist()
            )
            plinks += p
            path_ptr.append(len(plinks))
            weight.append(w[j])
        flow_ptr.append(len(weight))
    # few distinct sizes and starts: many simultaneous completions and arrivals
    size = rng.choice([2.0, 4.0, 6.0, 10.0, 0.0 if zero else 3.0], n_flows)
    start = np.where(rng.random(n_flows) < stagger, rng.choice([0.5, 1.0, 2.5], n_flows), 0.0)
    after = [[] for _ in range(n_flows)]
    if deps:
        for f in range(1, n_flows):
            if rng.random() < 0.3:
                after[f] = sorted(set(rng.integers(0, f, rng.integers(1, 3)).tolist()))
    dep_ptr = np.zeros(n_flows + 1, np.int64)
    np.cumsum([len(a) for a in after], out=dep_ptr[1:])
    return FlowSet(
        capacity=cap,
        latency=lat,
        size=size,
        start=start,
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=plinks,
        weight=weight,
        dep_ptr=dep_ptr,
        deps=np.array(sum(after, []), np.int64),
    )


@pytest.fixture(params=["default", "tiny row space"])
def row_space(request, monkeypatch):
    """The event loop with its default room for group rows, and with the least it accepts, so
    that rows are dropped and built again from their members all the time."""
    import topoopt.flowsim.simulator as simulator

    if request.param == "tiny row space":
        monkeypatch.setattr(simulator, "ROW_SPACE", 1)
    return request.param


@pytest.mark.parametrize("seed", range(24))
def test_event_loop_matches_from_scratch_simulation(seed, row_space):
    rng = np.random.default_rng(2000 + seed)
    fs = random_flowset(
        rng,
        int(rng.integers(2, 9)),
        int(rng.integers(5, 45)),
        multipath=seed % 2 == 0,
        zero=seed % 3 == 0,
        deps=seed % 4 < 2,
        latency=seed % 5 < 3,
        stagger=[0.0, 0.3, 0.8][seed % 3],
    )
    res = simulate(fs)
    start, finish = reference_simulation(fs)
    np.testing.assert_allclose(res.start, start, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.finish, finish, rtol=1e-10, atol=1e-12)
    lean = simulate(fs, record_series=False)
    np.testing.assert_array_equal(lean.finish, res.finish)
    assert lean.series_time.shape == (0,)


@pytest.mark.parametrize("seed", range(3))
def test_event_loop_with_many_links_matches_from_scratch_simulation(seed):
    """Many links and flows: at an event the re-filled groups' rows are sometimes longer than
    the kept ones' (the free capacity is then built from the kept groups) and sometimes
    shorter (the re-filled groups' load is given back): both end at the reference."""
    rng = np.random.default_rng(3000 + seed)
    fs = random_flowset(
        rng, 24, 60, multipath=seed != 1, zero=False, deps=seed == 2, latency=True,
        stagger=[0.0, 0.5, 0.3][seed],
    )  # fmt: skip
    res = simulate(fs)
    start, finish = reference_simulation(fs)
    np.testing.assert_allclose(res.start, start, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.finish, finish, rtol=1e-10, atol=1e-12)


def test_event_loop_over_many_events_with_load_resyncs(row_space):
    """More events than RESYNC_EVERY, one completion at a time, on a few shared links."""
    rng = np.random.default_rng(77)
    n = 2 * RESYNC_EVERY + 50
    n_links = 12
    paths = [
        sorted(rng.choice(n_links, rng.integers(1, 4), replace=False).tolist()) for _ in range(n)
    ]
    fs = FlowSet.single_path(
        rng.choice([1.0, 3.0, 10.0], n_links),
        np.zeros(n_links),
        size=rng.uniform(1.0, 20.0, n),
        start=np.where(rng.random(n) < 0.5, 0.0, rng.uniform(0.0, 30.0, n)),
        paths=paths,
    )
    res = simulate(fs)
    assert res.n_events > RESYNC_EVERY
    _, finish = reference_simulation(fs)
    np.testing.assert_allclose(res.finish, finish, rtol=1e-10)


def test_series_loads_are_the_reference_allocation():
    """The change log gives, at every event time, exactly the sum of the max-min rates."""
    rng = np.random.default_rng(9)
    n_links, n = 4, 12
    paths = [
        sorted(rng.choice(n_links, rng.integers(1, 3), replace=False).tolist()) for _ in range(n)
    ]
    fs = FlowSet.single_path(
        [2.0, 3.0, 5.0, 7.0],
        [0.0] * n_links,
        size=rng.integers(1, 9, n).astype(float),
        start=rng.choice([0.0, 0.5, 1.5], n),
        paths=paths,
    )
    res = simulate(fs)
    for t in np.unique(res.series_time):
        on = [f for f in range(n) if res.start[f] <= t < res.finish[f]]
        rates = level_filling([paths[f] for f in on], fs.capacity.tolist()) if on else []
        expect = np.zeros(n_links)
        for f, r in zip(on, rates, strict=True):
            expect[paths[f]] += r
        for link in range(n_links):
            times, loads = res.link_load(link)
            now = loads[np.searchsorted(times, t, side="right") - 1]
            assert now == pytest.approx(expect[link], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(15))
def test_arrival_rate_is_the_water_level_over_old_rates(seed):
    """The simulator's arrival threshold: a new flow's max-min rate is the smallest, over its
    links, level x with sum_f min(old rate_f, x) + x = capacity; every flow whose old rate is
    below it keeps its rate. Checked with from-scratch allocations before and after."""
    rng = np.random.default_rng(900 + seed)
    n_links = 6
    paths, cap, _, _ = random_instance(rng, n_links, 14, 3)
    old = np.array(level_filling(paths, cap.tolist()))
    new_path = sorted(rng.choice(n_links, rng.integers(1, 4), replace=False).tolist())
    new = np.array(level_filling(paths + [new_path], cap.tolist()))
    levels = []
    for link in new_path:
        on = np.array([old[f] for f, p in enumerate(paths) if link in p])
        # bisection on the increasing function g(x) = sum min(r, x) + x
        lo, hi = 0.0, float(cap[link])
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if np.minimum(on, mid).sum() + mid < cap[link] else (lo, mid)
        levels.append(lo)
    assert new[-1] == pytest.approx(min(levels), rel=1e-9)
    below = old < new[-1] * (1 - 1e-9)
    np.testing.assert_allclose(new[:-1][below], old[below], rtol=1e-12)


def four_flows() -> FlowSet:
    """X on link 0, Y on links 0 and 1, Z on link 1, W on link 2 (10, 2 and 0.5 B/s)."""
    return FlowSet.single_path(
        [10.0, 2.0, 0.5],
        [0.0, 0.0, 0.0],
        size=[27.0, 100.0, 1.0, 100.0],
        start=[0.0] * 4,
        paths=[[0], [0, 1], [1], [2]],
    )


def test_refills_count_only_the_sub_flows_whose_rate_can_change():
    """Link 0 (10 B/s): X, Y; link 1 (2 B/s): Y, Z; link 2 (0.5 B/s): W alone.

    t = 0: all four are filled (Y = Z = 1, X = 9, W = 0.5). Z (1 B) ends at t = 1: only the
    sub-flows at rate >= 1 (X, Y) are re-filled (Y = 2, X = 8); W (0.5) keeps its rate. X (27 B,
    9 sent) ends at 1 + 18 / 8 = 3.25 and Y (100 B) at 3.25 + (100 - 1 - 4.5) / 2 = 50.5, and
    W at 200: nothing else is at or above their rates, so nothing more is re-filled: 4 + 2.
    """
    res = simulate(four_flows())
    np.testing.assert_allclose(res.finish, [3.25, 50.5, 1.0, 200.0], rtol=1e-12)
    assert res.refills == 6


def test_work_limit_stops_a_simulation_deterministically():
    """The case above needs 6 re-fills: a limit of 6 runs it to the end, 5 stops it (at the
    completion of Z, the 4 + 2 re-fills), whatever the machine."""
    from topoopt.flowsim import WorkLimitExceeded

    fs = four_flows()
    assert simulate(fs, max_refills=6).refills == 6
    with pytest.raises(WorkLimitExceeded) as err:
        simulate(fs, max_refills=5)
    assert (err.value.refills, err.value.limit) == (6, 5)
    with pytest.raises(WorkLimitExceeded):
        simulate(fs, max_refills=3)  # the first event alone needs 4
    with pytest.raises(InputError, match="max_refills"):
        simulate(fs, max_refills=-1)


def test_a_kept_flow_above_a_falling_level_is_re_filled():
    """Links A (4 B/s): P, Z; B (10 B/s): P, C, Q; D (7 B/s): C, E.

    t = 0: A fills first (P = Z = 2), then D (C = E = 3.5), then B (Q = 10 - 2 - 3.5 = 4.5).
    Z (2 B) ends at t = 1; A's group (P) and, through P's row, B's (Q) are re-filled. On the
    room C leaves at 3.5, B would fill at (10 - 3.5) / 2 = 3.25 < 3.5: C (D's group) has to be
    re-filled too, and the allocation from scratch is P = C = Q = 10/3 on B, E = 7 - 10/3 = 11/3
    on D. E (100 B, 3.5 sent) ends at 1 + 96.5 / (11/3) (with C kept at 3.5 it would end at
    1 + 96.5 / 3.5); everything matches the from-scratch simulation."""
    fs = FlowSet.single_path(
        [4.0, 10.0, 7.0],
        [0.0, 0.0, 0.0],
        size=[100.0, 2.0, 100.0, 100.0, 100.0],
        start=[0.0] * 5,
        paths=[[0, 1], [0], [1, 2], [1], [2]],  # P, Z, C, Q, E
    )
    res = simulate(fs)
    assert res.finish[1] == pytest.approx(1.0, rel=1e-15)
    assert res.finish[4] == pytest.approx(1.0 + 96.5 * 3.0 / 11.0, rel=1e-12)
    times, loads = res.link_load(0)
    assert loads[np.searchsorted(times, 1.0, side="right") - 1] == pytest.approx(10.0 / 3.0)
    start, finish = reference_simulation(fs)
    np.testing.assert_allclose(res.finish, finish, rtol=1e-12)
