"""The iteration objective: critical path, bound, exact MIP vs enumeration, warm-start guarantee,
determinism (issue #14)."""

from __future__ import annotations

import itertools
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from solvers.joint.critical_path import iteration_lower_bound, schedule
from solvers.joint.iteration_mip import iteration_mip
from solvers.joint.iteration_objective import iteration_time, task_times, window_problem
from solvers.model.design import Design, NodePaths
from solvers.model.problem import DesignProblem
from solvers.registry import solve
from topoopt.fabrics.circuits import Circuits
from traffic.workload import Demand, TaskGraph, Workload

ROOT = Path(__file__).resolve().parents[2]
TASKGRAPHS = next(
    (p for p in (ROOT / "tests" / "data" / "topoopt-taskgraphs",) if p.is_dir()), None
)  # the TopoOpt task graphs shipped with the tests (tests/data/README.md)


def _chain_workload(n, transfers, compute=1e-3):
    """A chain: compute on each transfer's source, then the transfer, ..., last compute.

    ``transfers``: list of (a, b, bytes). Totally ordered, so no two tasks ever overlap."""
    kinds, servers, runtime, size, demand = [], [], [], [], []
    for i, (a, _b, s) in enumerate(transfers):
        kinds += ["forward", "transfer"]
        servers += [a, -1]
        runtime += [compute, 0.0]
        size += [0.0, s]
        demand += [[-1, -1], [0, i]]
    kinds.append("backward")
    servers.append(transfers[-1][1])
    runtime.append(compute)
    size.append(0.0)
    demand.append([-1, -1])
    T = len(kinds)
    tg = TaskGraph(np.arange(T), np.array(kinds), np.array(servers), np.array(runtime),
                   np.array(size), np.column_stack([np.arange(T - 1), np.arange(1, T)]),
                   np.array(demand))  # fmt: skip
    groups = np.array([[a, b] for a, b, _ in transfers])
    return Workload(n, 1, (Demand("send", groups, 1.0, "mp", "forward"),), taskgraph=tg)


def _direct_design(circuits, n, d, B, pairs):
    """A design routing each ordered pair with traffic on its direct circuit."""
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    paths = [[([s, t], 1.0)] for s, t in zip(src, dst, strict=True)]
    c = np.asarray(circuits, np.int64).reshape(-1, 3)
    routing = NodePaths.from_lists(src, dst, paths)
    return Design(n, d, B, c, (), routing, "x", "feasible", 0.0, 0.0, 0.0, 0.0)


def test_cpm_matches_networkx_longest_path():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 30))
        e = np.array([(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.2])
        e = e.reshape(-1, 2)
        dur = rng.random(n)
        cp = schedule(n, e, dur)
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        for u, v in e.tolist():
            g.add_edge(u, v, weight=dur[u])
        for v in range(n):  # a sink per node carries the node's own duration
            g.add_edge(v, ("end", v), weight=dur[v])
        want = nx.dag_longest_path_length(g)
        assert cp.makespan_s == pytest.approx(want, rel=1e-12)
        assert np.all(cp.slack_s >= 0)
        assert np.all(cp.earliest_finish_s <= cp.latest_finish_s + 1e-12)
        assert cp.critical.any()


@pytest.mark.parametrize(
    "case",
    [
        (3, 2, [(0, 1, 6e9), (1, 2, 2e9), (0, 1, 1e9)]),
        (4, 2, [(0, 1, 4e9), (1, 2, 4e9), (2, 3, 3e9), (3, 0, 1e9)]),
        (4, 3, [(0, 1, 8e9), (0, 2, 1e9), (2, 3, 5e9), (1, 3, 2e9)]),
    ],
)
def test_mip_equals_enumeration_by_the_flow_model(case):
    """Every circuit multigraph on the pairs with traffic, simulated by the flow model with
    direct routes: the fastest equals the MIP's optimum (value and makespan of its circuits)."""
    n, d, transfers = case
    B = 1e9
    w = _chain_workload(n, transfers)
    p = DesignProblem.from_workload(w, degree=d, link_bandwidth=B)
    pairs = sorted({(min(a, b), max(a, b)) for a, b, _ in transfers})
    best = np.inf
    for ks in itertools.product(range(1, d + 1), repeat=len(pairs)):
        deg = np.zeros(n, int)
        for (a, b), k in zip(pairs, ks, strict=True):
            deg[a] += k
            deg[b] += k
        if deg.max() > d:
            continue
        c = [[a, b, k] for (a, b), k in zip(pairs, ks, strict=True)]
        it, _ = iteration_time(_direct_design(c, n, d, B, pairs), p)
        best = min(best, it)
    mip = iteration_mip(w, d, B)
    assert mip.status == "optimal"
    assert mip.makespan_s == pytest.approx(best, rel=1e-9)
    got, _ = iteration_time(_direct_design(mip.circuits, n, d, B, pairs), p)
    assert got == pytest.approx(best, rel=1e-9)


def test_lower_bound_is_below_every_enumerated_design():
    n, d, B = 4, 2, 1e9
    w = _chain_workload(n, [(0, 1, 4e9), (1, 2, 4e9), (2, 3, 3e9)])
    p = DesignProblem.from_workload(w, degree=d, link_bandwidth=B)
    lb = iteration_lower_bound(w, d, B).makespan_s
    # the bound: compute + every transfer at d * B
    assert lb == pytest.approx(4e-3 + 11e9 / (d * B), rel=1e-12)
    pairs = [(0, 1), (1, 2), (2, 3)]
    for ks in itertools.product((1, 2), repeat=3):
        c = [[a, b, k] for (a, b), k in zip(pairs, ks, strict=True)]
        deg = np.bincount([x for a, b, k in c for x in [a] * k + [b] * k], minlength=n)
        if deg.max() > d:
            continue
        it, _ = iteration_time(_direct_design(c, n, d, B, pairs), p)
        assert it >= lb * (1 - 1e-12)


@pytest.fixture(scope="module")
def candle16():
    if TASKGRAPHS is None:
        pytest.skip("TopoOpt task graphs not found")
    from traffic.load import load_workload

    w = load_workload(str(TASKGRAPHS / "100candle_16.fbuf"))
    return w, DesignProblem.from_workload(w, degree=8, link_bandwidth=12.5e9)


def _ring_workload(n=6, mp_bytes=50e6, ar_bytes=100e6):
    """Forward on every server, a transfer to its successor, backward there, then one
    all-reduce over all servers (a sink): compute, MP and DP traffic in one small DAG."""
    kinds = ["forward"] * n + ["transfer"] * n + ["backward"] * n + ["all-reduce"]
    servers = list(range(n)) + [-1] * n + [(i + 1) % n for i in range(n)] + [-1]
    runtime = [1e-3] * n + [0.0] * n + [2e-3] * n + [0.0]
    size = [0.0] * n + [mp_bytes] * n + [0.0] * n + [ar_bytes]
    demand = [[-1, -1]] * n + [[0, i] for i in range(n)] + [[-1, -1]] * n + [[1, 0]]
    e = [[i, n + i] for i in range(n)] + [[n + i, 2 * n + i] for i in range(n)]
    e += [[2 * n + i, 3 * n] for i in range(n)]
    T = len(kinds)
    tg = TaskGraph(np.arange(T), np.array(kinds), np.array(servers), np.array(runtime),
                   np.array(size), np.array(e), np.array(demand))  # fmt: skip
    sends = np.array([[i, (i + 1) % n] for i in range(n)])
    return Workload(n, 1, (
        Demand("send", sends, mp_bytes, "mp", "forward"),
        Demand("all-reduce", np.arange(n).reshape(1, n), ar_bytes, "dp", "backward"),
    ), name="ring-dag", taskgraph=tg)  # fmt: skip


def test_never_slower_than_warm_start_bound_valid_and_deterministic():
    from solvers.baselines.expander_design import expander_design
    from solvers.baselines.topoopt_method import topoopt_design
    from solvers.realise import simulate_design

    w = _ring_workload()
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=1e9)
    a = solve(p, "joint", time_limit_s=600, work_limit=1, seed=1)
    assert a.info["objective"] == "iteration" and a.info["deterministic"]
    # every warm-start baseline, simulated here independently: the design is no slower
    bases = [topoopt_design(p, "topoopt", seed=1), topoopt_design(p, "topoopt-released", seed=1),
             expander_design(p, seed=1)]  # fmt: skip
    for b in bases:
        t = simulate_design(w, b, p, exposed_by_class=False).iteration_s
        assert a.info["iteration_s"][b.solver] == pytest.approx(t, rel=1e-12)
        assert a.objective_s <= t
    assert a.info["never_slower_than_warm_start"]
    again = simulate_design(w, a, p, exposed_by_class=False).iteration_s
    assert again == pytest.approx(a.objective_s, rel=1e-12)
    # the bound: critical path at d*B and the ideal switch, below the design
    cp = iteration_lower_bound(w, 3, 1e9).makespan_s
    assert a.info["critical_path_bound_s"] == pytest.approx(cp, rel=1e-12)
    # closed form: 1 ms + 50 MB / 3 GB/s + 2 ms + 2 * 5/6 * 100 MB / 3 GB/s
    assert cp == pytest.approx(3e-3 + 50e6 / 3e9 + 2 * 5 / 6 * 100e6 / 3e9, rel=1e-12)
    assert a.lower_bound_s == pytest.approx(max(cp, a.info["ideal_iteration_s"]), rel=1e-12)
    assert a.lower_bound_s <= a.objective_s
    assert a.gap == pytest.approx((a.objective_s - a.lower_bound_s) / a.objective_s)
    # same seed and work limit: the same design
    b = solve(p, "joint", time_limit_s=600, work_limit=1, seed=1)
    assert np.array_equal(a.circuits, b.circuits) and b.objective_s == a.objective_s
    assert a.info["work_used"] == b.info["work_used"] and a.info["winner"] == b.info["winner"]


@pytest.mark.slow
def test_iteration_objective_on_candle16(candle16):
    """A real task graph: never slower than the warm start, bound below the design."""
    w, p = candle16
    a = solve(p, "joint", objective="iteration", time_limit_s=600, work_limit=6)
    assert a.info["objective"] == "iteration"
    base = a.info["iteration_s"]
    assert set(base) == {"topoopt", "topoopt-released", "expander"}
    assert a.objective_s <= min(base.values())
    assert a.info["critical_path_bound_s"] <= a.info["ideal_iteration_s"] <= a.objective_s
    assert a.lower_bound_s == pytest.approx(a.info["ideal_iteration_s"], rel=1e-12)


def test_task_times_and_windows(candle16):
    from solvers.joint.iteration_objective import ideal_reference

    w, p = candle16
    res, sched = ideal_reference(w, 8, 12.5e9)
    start, finish = task_times(res, w.taskgraph)
    tr = w.taskgraph.kind == "transfer"
    assert np.all(finish[tr] >= start[tr])
    assert np.all(np.isfinite(finish[tr]))
    assert sched.makespan_s <= res.iteration_s * (1 + 1e-9)
    pw = window_problem(p, sched, n_windows=4)
    assert 1 <= pw.n_phases <= 4
    # every pair with fixed traffic and every ring group keeps some bytes
    orig = sum(ph.fixed for ph in p.phases)
    win = sum(ph.fixed for ph in pw.phases)
    assert set(zip(*orig.nonzero(), strict=True)) == set(zip(*win.nonzero(), strict=True))
    groups = {tuple(ph.group(g).tolist()) for ph in p.phases for g in range(ph.n_groups)}
    wgroups = {tuple(ph.group(g).tolist()) for ph in pw.phases for g in range(ph.n_groups)}
    assert groups == wgroups
    # bytes are weighted by criticality in [floor, 1]: never more than the original
    assert sum(ph.total_bytes() for ph in pw.phases) <= sum(ph.total_bytes() for ph in p.phases)


def test_objective_keyword_is_checked_and_falls_back_without_compute_model():
    from traffic.errors import InputError

    w = Workload(6, 1, (Demand("all-reduce", np.arange(6).reshape(1, 6), 6e6, "dp", "backward"),))
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    with pytest.raises(InputError, match="objective"):
        solve(p, "joint", objective="makespan")
    d = solve(p, "joint", time_limit_s=20)
    assert d.info["objective"] == "congestion" and "compute model" in d.info["objective_reason"]
    c = solve(p, "joint", time_limit_s=20, objective="congestion")
    assert c.info["objective"] == "congestion" and np.array_equal(c.circuits, d.circuits)


def test_cli_objective_option():
    import json

    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    runner = CliRunner()
    r = runner.invoke(app, ["design", "dlrm", "--degree", "4", "--objective", "makespan"])
    assert r.exit_code == 2 and "objective" in r.output
    args = ["design", "dlrm", "--degree", "4", "--objective", "congestion", "--work-limit", "0"]
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["info"]["objective"] == "congestion"


def test_known_compute_time_skips_a_simulation_not_the_result():
    from solvers.baselines.topoopt_method import topoopt_design
    from solvers.realise import simulate_design

    w = _ring_workload()
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=1e9)
    d = topoopt_design(p)
    full = simulate_design(w, d, p, exposed_by_class=False)
    quick = simulate_design(w, d, p, exposed_by_class=False, compute_s=full.compute_s)
    assert quick.iteration_s == full.iteration_s and quick.compute_s == full.compute_s
    assert quick.info["refills"] < full.info["refills"] or full.info["refills"] == 0


def test_two_hop_spread_matches_enumerated_paths():
    """Widest two-hop routing: every path of at most two hops, weighted by its parallel
    circuits on the scarcer hop, against networkx's simple paths (cutoff 2)."""
    from solvers.joint.iteration_objective import two_hop_spread

    rng = np.random.default_rng(3)
    n = 7
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.5]
    c = np.array([[i, j, int(rng.integers(1, 3))] for i, j in pairs], np.int64)
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from((int(a), int(b), int(k)) for a, b, k in c)
    src, dst = zip(*[(u, v) for u in range(n) for v in range(n) if u != v], strict=True)
    got = two_hop_spread(Circuits(c, n), n, np.array(src), np.array(dst))
    for (u, v), paths in zip(zip(src, dst, strict=True), got, strict=True):
        want = {}
        for path in nx.all_simple_paths(g, u, v, cutoff=2):
            want[tuple(path)] = min(g[a][b]["weight"] for a, b in itertools.pairwise(path))
        total = sum(want.values())
        assert {tuple(p): w for p, w in paths} == pytest.approx(
            {p: w / total for p, w in want.items()}
        )


def test_spread_routing_makes_a_lone_transfer_as_fast_as_its_paths():
    """The mechanism behind widening: on K4 (one circuit per pair, B bytes/s), a lone transfer
    of S bytes on its direct circuit takes S / B; spread on its three link-disjoint paths (direct
    and two two-hop) it takes S / (3 B), what an ideal switch of 3 ports gives it. A blend with
    share a takes max((1 - a + a/3) S, (a/3) S) / B on the direct and two-hop paths."""
    from solvers.joint.iteration_objective import spread_routing

    n, B, S, comp = 4, 1e9, 3e9, 1e-3
    w = _chain_workload(n, [(0, 1, S)], compute=comp)
    p = DesignProblem.from_workload(w, degree=3, link_bandwidth=B)
    k4 = [[i, j, 1] for i in range(n) for j in range(i + 1, n)]
    direct = _direct_design(k4, n, 3, B, [(0, 1)])
    base = iteration_time(direct, p)[0]
    for a in (0.0, 0.3, 1.0):
        d = spread_routing(direct, a)
        lists = d.routing.to_lists()
        assert all(sum(wt for _, wt in pl) == pytest.approx(1.0) for pl in lists)
        it = iteration_time(d, p)[0]
        share = max(1 - a + a / 3, a / 3)
        # the compute and the path latencies are the same in both runs: compare the transfer
        assert it - base == pytest.approx((share - 1) * S / B, rel=1e-6)


def test_the_congestion_fallback_may_use_all_the_time_left(monkeypatch):
    """When the flow model cannot judge, the congestion search is the whole answer: its clock
    cap is the time left, not the congestion start's share of it (issue 30: the 64-server
    Llama 3 70B plan's fallback was cut at half the default cap on a loaded machine)."""
    import solvers.joint.driver as drv
    from solvers.joint.iteration_search import CONGESTION_START_SHARE

    caps = []
    real = drv.congestion_search

    def spy(problem, time_limit_s=60.0, **kw):
        caps.append(time_limit_s)
        return real(problem, time_limit_s=time_limit_s, **kw)

    monkeypatch.setattr(drv, "congestion_search", spy)
    w = Workload(6, 1, (Demand("all-reduce", np.arange(6).reshape(1, 6), 6e6, "dp", "backward"),))
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    d = solve(p, "joint", time_limit_s=1000.0)
    assert d.info["objective"] == "congestion" and len(caps) == 1
    assert CONGESTION_START_SHARE * 1000.0 < caps[0] <= 1000.0
