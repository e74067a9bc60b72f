"""Determinism of ``joint``'s LP-free search (issue 25 item 5, session 38): the ring walks'
faster form against the plain one, the work the LP-free router charges against counts made
here, and the same design from the same work limit however the clock runs."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.joint import fast_routing as fr
from solvers.joint.driver import LP_FREE_WORK_LIMIT, congestion_search
from solvers.joint.rings import circuit_rings, walk_rings
from topoopt.fabrics.circuits import Circuits


def _plain_rings(members, circuits: Circuits, n: int, limit: int) -> list[np.ndarray]:
    """The walks as written before session 38 (every step re-counts each candidate's unvisited
    neighbours): the oracle of :func:`walk_rings`."""
    m = np.asarray(members, np.int64)
    if m.size < 3:
        return [m.copy()]
    inside = np.zeros(n, bool)
    inside[m] = True
    c = circuits.rows
    adj: dict[int, list[int]] = {int(u): [] for u in m}
    for u, v, _ in c[inside[c[:, 0]] & inside[c[:, 1]]].tolist():
        adj[u].append(v)
        adj[v].append(u)
    used, found, seen = set(), [], set()
    for start in m.tolist():
        if len(found) >= limit:
            break
        order, visited = [start], {start}
        while len(order) < m.size:
            cur = order[-1]
            nxt = [v for v in adj[cur] if v not in visited]
            if not nxt:
                break
            fresh = [v for v in nxt if (min(cur, v), max(cur, v)) not in used] or nxt
            fresh.sort(key=lambda v: (sum(1 for w in adj[v] if w not in visited), v))
            order.append(fresh[0])
            visited.add(fresh[0])
        if len(order) == m.size and start in adj[order[-1]]:
            o = np.roll(np.asarray(order, np.int64), -int(np.argmin(order)))
            if o.tobytes() in seen:
                continue
            rev = np.concatenate([o[:1], o[1:][::-1]])
            seen |= {o.tobytes(), rev.tobytes()}
            found += [o, rev]
            steps = zip(order, order[1:] + order[:1], strict=True)
            used |= {(min(a, b), max(a, b)) for a, b in steps}
    return found[:limit]


def test_walks_equal_the_plain_walks_on_random_graphs():
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(3, 24))
        u, v = rng.integers(0, n, (2, int(rng.integers(n, 4 * n))))
        ok = u != v
        c = Circuits(np.stack([u[ok], v[ok], np.ones(ok.sum(), np.int64)], 1), n)
        members = rng.permutation(n)[: int(rng.integers(3, n + 1))]
        limit = int(rng.integers(1, 9))
        want = _plain_rings(members, c, n, limit)
        got = circuit_rings(members, c, n, limit=limit)
        assert [r.tolist() for r in got] == [r.tolist() for r in want]


def test_segment_argmin_picks_what_a_sort_picks():
    """The linear-time segmented argmin of the Frank-Wolfe step against a full sort (by
    commodity, cost, then index: the cheapest path, the first on ties, NaN after every number),
    on random segments with ties, infinities and NaN."""
    rng = np.random.default_rng(3)
    for t in range(400):
        sizes = rng.integers(1, 6, int(rng.integers(1, 25)))
        cptr = np.concatenate([[0], np.cumsum(sizes)])
        comm = np.repeat(np.arange(sizes.size), sizes)
        cost = rng.integers(0, 4, int(cptr[-1])).astype(float)
        m = rng.random(cost.size)
        cost[m < (0.6 if t % 5 == 0 else 0.1)] = np.nan
        cost[(m > 0.6) & (m < 0.7)] = np.inf
        want = np.lexsort((np.arange(cost.size), cost, comm))[cptr[:-1]]
        assert fr._segment_argmin(cost, cptr, comm).tolist() == want.tolist()


@pytest.mark.parametrize("g", [4, 7, 10])
def test_walk_steps_on_a_cycle_count_every_neighbour_list_read(g):
    """A cycle of ``g`` circuits (degree 2): every start walks all ``g`` members and closes; a
    walk reads the start's list once and, for each of its ``g - 1`` steps, the current
    member's and the next member's lists: ``g * (2 + 4 (g - 1))`` entries; the first walk
    gives the cycle and its reverse, the others repeat it."""
    c = Circuits([[i, (i + 1) % g, 1] for i in range(g)], g)
    rings, steps = walk_rings(np.arange(g), c, g, limit=8)
    assert steps == g * (2 + 4 * (g - 1))
    assert [r.tolist() for r in rings] == [list(range(g)), [0, *range(g - 1, 0, -1)]]
    assert walk_rings(np.arange(g), c, g, limit=8, max_starts=1)[1] == 2 + 4 * (g - 1)


def test_fast_route_charges_walks_distances_and_balancing():
    """The work of :func:`fast_route` on a 3-cube carrying all-to-all bytes and an all-reduce
    over every server, from counts made here: the walk steps, ``n**2`` distances, and per
    round of the balancing the path-link entries and the smooth objective's link evaluations
    (a gradient and one per line-search step)."""
    import scipy.sparse as sp

    from solvers.model.congestion import phase_pairs
    from solvers.model.problem import DesignProblem, PhaseTraffic

    n = 8
    rows = [[u, u ^ (1 << b), 1] for u in range(n) for b in range(3) if u < u ^ (1 << b)]
    c = Circuits(rows, n)
    fixed = sp.csr_matrix(np.ones((n, n)) - np.eye(n)) * 1e6
    ph = PhaseTraffic("x", [0, n], np.arange(n), [8e6], fixed)
    problem = DesignProblem(n, 3, 1e9, (ph,))
    routed, _, _ = fr.fast_route(problem, c.rows)
    _, steps = walk_rings(np.arange(n), c, n, limit=fr.RING_LIMIT)
    # the candidate paths before balancing (the router drops unused ones afterwards)
    s, t, _ = phase_pairs(ph, fr.choose_rings(problem, c.rows)[0], n)
    keys = np.unique(s * n + t)
    paths, _ = fr.candidate_paths(c.rows, n, keys // n, keys % n)
    entries = paths.path_links.size
    links = 2 * len(rows)
    evals = fr.ROUNDS * (2 + 7)  # seven line-search steps (fast_routing._STEPS)
    want = (
        fr.WORK_PER_WALK_STEP * steps
        + fr.WORK_PER_DISTANCE * n * n
        + fr.WORK_PER_ENTRY * entries * (1 + evals)
        + fr.WORK_PER_LINK_TRIAL * links * evals
    )
    assert steps > 0
    assert routed.work == pytest.approx(want, rel=1e-12)


def _pipeline_problem():
    from tests.solvers.test_joint import workload_problems

    return dict(workload_problems())["pipeline"]


class _Clock:
    """A ``time`` module whose ``perf_counter`` jumps by uneven amounts (a machine under
    changing load), far from any time limit."""

    def __init__(self, seed: int) -> None:
        self.t, self.rng = 0.0, np.random.default_rng(seed)

    def perf_counter(self) -> float:
        self.t += float(self.rng.exponential(5.0))
        return self.t


@pytest.mark.parametrize("work", [0.0002, None])
def test_lp_free_search_gives_the_same_design_whatever_the_clock(monkeypatch, work):
    """Above ``lp_max_servers`` (here 4 on a 12-server pipeline problem) the search stops on its
    work limit (a tiny one, and the default, :data:`LP_FREE_WORK_LIMIT`): run under two clocks
    that jump unevenly, the circuits, routing, candidates and swaps are the same, and no clock
    cut is flagged."""
    import solvers.joint.driver as drv
    import solvers.joint.local_search as ls
    import solvers.joint.lp_free as lpf

    problem = _pipeline_problem()
    kw = {"time_limit_s": 1e6, "lp_max_servers": 4, "select_by": "objective", "work_limit": work}
    runs = []
    for seed in (1, 2):
        clock = _Clock(seed)
        for mod in (drv, ls, lpf):
            monkeypatch.setattr(mod, "time", clock)
        runs.append(congestion_search(problem, **kw))
    a, b = runs
    assert a.circuits.tolist() == b.circuits.tolist()
    assert a.routing.weight.tolist() == b.routing.weight.tolist()
    keys = ("candidates", "local_search_evaluations", "work_used", "stopped_by", "winner")
    strip = [{k: v for k, v in c.items() if k != "wall_s"} for c in a.info["candidates"]]
    assert strip == [{k: v for k, v in c.items() if k != "wall_s"} for c in b.info["candidates"]]
    assert all(a.info.get(k) == b.info.get(k) for k in keys if k != "candidates")
    assert a.info["deterministic"] and b.info["deterministic"]
    assert a.info["work_limit"] == (LP_FREE_WORK_LIMIT if work is None else work)
    if work is not None:  # the tiny limit binds
        assert a.info["stopped_by"] == "work limit"
        assert len(a.info["candidates"]) == 2  # 2.2e-5, then 6.7e-4 units: over 2e-4


class _Frozen:
    """A ``time`` module whose clock never moves (no wall-clock cap can fire)."""

    @staticmethod
    def perf_counter() -> float:
        return 0.0


def test_a_short_time_limit_sizes_the_search_not_the_clock(monkeypatch):
    """Without a ``work_limit``, above ``CLOCK_SIZED_MIN_SERVERS`` servers (here 4, on the
    12-server pipeline problem routed without an LP) a time limit whose units
    (``CLOCK_CORE_SHARE * time_limit_s``) do not cover the flow-model judging
    (``4 + 0.04 n`` = 4.48 units) skips the judging and caps the search at
    ``CLOCK_SEARCH_SHARE`` of them: 8 s give 0.5 * 0.25 * 8 = 1 unit. The design is the one an
    explicit ``work_limit=1`` judged by the objective gives; a long limit keeps the defaults."""
    import solvers.joint.driver as drv
    import solvers.joint.local_search as ls
    import solvers.joint.lp_free as lpf

    for mod in (drv, ls, lpf):
        monkeypatch.setattr(mod, "time", _Frozen)
    monkeypatch.setattr(drv, "CLOCK_SIZED_MIN_SERVERS", 4)
    problem = _pipeline_problem()
    assert drv.flow_judging_units(problem) == pytest.approx(4 + 0.04 * problem.n)
    short = congestion_search(problem, time_limit_s=8.0, lp_max_servers=4)
    assert short.info["work_limit"] == pytest.approx(0.5 * 0.25 * 8.0)
    assert any(s.startswith("flow model skipped (the time limit of 8 s") for s in
               short.info["steps"])  # fmt: skip
    assert short.info["selected_by"] == "optimizer objective"
    assert short.info["deterministic"]
    same = congestion_search(
        problem, time_limit_s=8.0, lp_max_servers=4, select_by="objective", work_limit=1.0
    )  # fmt: skip
    assert short.circuits.tolist() == same.circuits.tolist()
    assert short.routing.weight.tolist() == same.routing.weight.tolist()
    assert drv.clock_sizing(problem, 1e4, 4) == (LP_FREE_WORK_LIMIT, True)


def test_stride_searches_are_limited_by_lattice_points_not_the_clock(monkeypatch):
    """The optimal-stride candidates of ``joint``: up to 24 ring ports every search runs with
    STRIDE_MAX_SETS sets (as before); at 64 ports on 128 servers the searches (each was cut by
    the 60 s clock) get fewer sets, in proportion to a set's lattice ball, and stop once the
    loop's budget would pass. ``_ball`` against counting the points of Z^k."""
    import itertools
    import math

    from solvers.baselines.strides import _ball
    from solvers.joint import driver
    from traffic.load import load_workload

    for k in range(1, 5):
        pts = itertools.product(range(-3, 4), repeat=k)
        assert _ball(k, 3) == sum(1 for x in pts if sum(map(abs, x)) <= 3)
    for n in (128, 2048):
        assert driver.stride_searches(n, 24) == [
            (d, driver.STRIDE_MAX_SETS) for d in range(24, 3, -2)
        ]
    plan = driver.stride_searches(128, 64)
    assert [d for d, _ in plan] == list(range(64, 64 - 2 * len(plan), -2))
    assert all(s * _ball(d // 2, 3) <= driver.STRIDE_MAX_POINTS for d, s in plan)
    # charged at most the canonical sets there are: 31 classes besides stride 1 at 128 servers
    charge = [min(s, math.comb(31, d // 2 - 1)) * _ball(d // 2, 3) for d, s in plan]
    assert min(s for _, s in plan) < driver.STRIDE_MAX_SETS
    nxt = 64 - 2 * len(plan)
    more = min(driver.STRIDE_MAX_POINTS // _ball(nxt // 2, 3), math.comb(31, nxt // 2 - 1))
    more *= _ball(nxt // 2, 3)
    assert sum(charge) <= driver.STRIDE_LOOP_POINTS < sum(charge) + more

    # candidate_circuits runs exactly these searches
    from solvers.baselines import strides as st

    calls = []
    orig = st.best_strides

    def spy(n, d, objective, time_limit_s=None, max_sets=None):
        calls.append((d, max_sets))
        return orig(n, d, objective, time_limit_s=time_limit_s, max_sets=max_sets)

    monkeypatch.setattr(st, "best_strides", spy)
    wl = load_workload("dlrm")
    problem = driver.DesignProblem.from_workload(wl, degree=8, link_bandwidth=12.5e9)
    driver.candidate_circuits(problem, deadline=math.inf)
    assert calls == driver.stride_searches(wl.servers, 8)
