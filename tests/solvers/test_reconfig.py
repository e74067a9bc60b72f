"""Reconfiguration in time (issue 16, section 1): the schedule model, the search, the baselines.

Closed forms on two and three servers check the flow model across a reconfiguration through
the schedule model; a brute force over every per-phase choice checks the search; the CLI is
run as a user would.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from solvers.reconfig import (
    CircuitSet,
    Schedule,
    demand_circuits,
    iteration_under_schedule,
    realise_schedule,
    reconfigure,
)
from solvers.reconfig.baselines import LIVE_FACTOR, MAX_WINDOWS, baseline_schedule, run_baselines
from solvers.reconfig.schedule import connected, simulate_schedule
from solvers.reconfig.search import TIMINGS, schedule_for
from topoopt.fabrics.circuits import Circuits
from topoopt.flowsim.network import FlowBuilder, Network
from traffic.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
B = 10.0  # bytes/s per circuit in the closed forms

SMALL_PLAN = """\
# DLRM on 8 servers x 1 GPU: embedding all-to-alls (forward, backward) and the MLPs' all-reduce
model: dlrm
parallelism: {dp: 8, micro_batch_size: 512, global_batch_size: 4096}
precision: {activation_bytes: 4, gradient_bytes: 4, parameter_bytes: 4}
cluster: {servers: 8, gpus_per_server: 1}
"""


def _sim(schedule, n, flows, hold, all_dark=False):
    """Finish times (latency removed) of single flows ``(src, dst, bytes)`` under a schedule."""
    r = realise_schedule(schedule, n, B, hold, all_dark=all_dark)
    fb = FlowBuilder(Network(r.fabric, intra_bandwidth=1e9))
    src, dst, size = (np.array(x) for x in zip(*flows, strict=True))
    fb.add_ranks(src, dst, size)
    res = simulate_schedule(fb, r)
    return res.finish, float(r.fabric.latency.max())


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize(("t1", "hold"), [(1.0, 0.5), (2.0, 0.0), (0.5, 3.0)])
def test_added_circuit_closed_form(t1, hold):
    """One pair, one circuit, then two: the first keeps carrying while the second is set up."""
    s = 60.0
    sched = Schedule((CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])), (0.0, t1))
    finish, lat = _sim(sched, 2, [(0, 1, s)], hold)
    ready = t1 + hold
    expect = s / B if s <= B * ready else ready + (s - B * ready) / (2 * B)
    assert finish[0] - lat == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("all_dark", [False, True])
def test_pause_and_reroute_closed_form(all_dark):
    """Three servers. Set A: circuits 0-1, 1-2, 0-2; set B: two circuits 0-1 and 1-2 (0-2 gone).

    Flow X (0 -> 2, 100 B) runs on circuit 0-2 at B, pauses while 0-2 is taken down
    ``[t1, t1 + h)``, then continues on 0 -> 1 -> 2 (bottleneck 1-2, B) with what it had left.
    Flow Y (0 -> 1, 100 B) stays on circuit 0-1, which one circuit keeps alive: B throughout
    (after the change it shares 0-1's 2B with X: both get B). With ``all_dark`` every link is
    dark during the change and Y pauses too.
    """
    t1, h = 2.0, 3.0
    a = CircuitSet([[0, 1, 1], [1, 2, 1], [0, 2, 1]])
    b = CircuitSet([[0, 1, 2], [1, 2, 1]])
    finish, lat = _sim(Schedule((a, b), (0.0, t1)), 3, [(0, 2, 100.0), (0, 1, 100.0)], h, all_dark)
    x = t1 + h + (100.0 - B * t1) / B
    y = 100.0 / B + (h if all_dark else 0.0)
    assert finish[0] - 2 * lat == pytest.approx(x, rel=1e-12)  # two hops after the change
    assert finish[1] - lat == pytest.approx(y, rel=1e-12)


def test_back_to_back_reconfigurations_and_errors():
    """A -> B -> A with the second change exactly when the first ends; overlapping changes and a
    negative dark time are refused."""
    a, b = CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])
    r = realise_schedule(Schedule((a, b, a), (0.0, 1.0, 1.5)), 2, B, 0.5)
    assert [(t, cap[0] / B, k) for t, cap, k in r.epochs] == [
        (0.0, 1.0, 0),
        (1.0, 1.0, None),
        (1.5, 1.0, 1),  # set B's live period is empty: straight into the change back
        (2.0, 1.0, 2),
    ]
    with pytest.raises(InputError, match="after the previous reconfiguration"):
        realise_schedule(Schedule((a, b, a), (0.0, 1.0, 1.2)), 2, B, 0.5)
    with pytest.raises(InputError, match="delay"):
        realise_schedule(Schedule((a, b), (0.0, 1.0)), 2, B, -1.0)
    with pytest.raises(InputError, match="starts"):
        Schedule((a, b), (0.5, 1.0))


def _diamond_chain(m):
    """Servers ``3j`` joined to ``3j + 3`` through ``3j + 1`` and ``3j + 2``: ``2^j`` shortest
    paths from server 0 to server ``3j``."""
    c = []
    for j in range(m):
        s = 3 * j
        c += [[s, s + 1, 1], [s, s + 2, 1], [s + 1, s + 3, 1], [s + 2, s + 3, 1]]
    return c, 3 * m + 1


def test_ecmp_keeps_at_most_its_width_of_shortest_paths():
    # the memory of the search at 128 servers: a sparse set's shortest paths grow as 2^hops;
    # up to ECMP_MAX_PATHS a pair keeps them all (networkx's enumeration), above it that many
    import networkx as nx

    from solvers.reconfig.schedule import ECMP_MAX_PATHS
    from topoopt.fabrics.routing import path_nodes

    m = 7  # 2^6 = 64 paths from 0 to 18, 2^7 = 128 from 0 to 21
    assert 2 ** (m - 1) == ECMP_MAX_PATHS
    c, n = _diamond_chain(m)
    chain = CircuitSet(c)
    r = realise_schedule(Schedule((CircuitSet([*c, [1, 2, 1]]), chain), (0.0, 0.0)), n, B, 0.0)
    g = nx.Graph((u, v) for u, v, _ in c)
    for dst, total in ((18, 64), (21, 128)):
        ps = r.routes(1, np.array([[0, dst]]))
        got = [tuple(path_nodes(r.fabric, ps, p).tolist()) for p in range(ps.n_paths)]
        every = {tuple(p) for p in nx.all_shortest_paths(g, 0, dst)}
        assert len(every) == total and len(got) == len(set(got)) == min(total, ECMP_MAX_PATHS)
        assert set(got) <= every and np.allclose(ps.weight, 1.0 / len(got))
        # one path per stratum of consecutive ranks: the first hop splits evenly
        assert sum(p[1] == 1 for p in got) == len(got) // 2
    # the sub-flows of one flow 0 -> 21 (300 bytes): the first two links carry 2 B at most,
    # so 15 s is the least finish; the chosen 64 paths are within 4 % of it
    fb = FlowBuilder(Network(r.fabric, intra_bandwidth=1e9))
    fb.add_ranks(np.array([0]), np.array([21]), np.array([300.0]))
    finish = simulate_schedule(fb, r).finish[0] - 2 * m * float(r.fabric.latency.max())
    assert 15.0 - 1e-9 <= finish <= 15.0 * 1.04
    # the path table of that run: 64 paths of 14 links, refused one entry below its size
    assert simulate_schedule(fb, r, max_path_links=64 * 14).finish[0] == pytest.approx(
        finish + 2 * m * float(r.fabric.latency.max())
    )
    with pytest.raises(InputError, match="896 path-link entries") as exc:
        simulate_schedule(fb, r, max_path_links=64 * 14 - 1)
    assert exc.value.field == "schedule" and "at most 895" in str(exc.value)


def test_unconnected_set_is_an_error():
    a = CircuitSet([[0, 1, 1], [1, 2, 1]])
    b = CircuitSet([[0, 1, 1]])  # server 2 unreachable
    with pytest.raises(InputError, match="unconnected"):
        _sim(Schedule((a, b), (0.0, 1.0)), 3, [(0, 2, 100.0)], 0.0)


# ------------------------------------------------------------------ demand heuristic
@pytest.mark.parametrize("seed", range(4))
def test_demand_circuits_invariants(seed):
    rng = np.random.default_rng(seed)
    n, d = 10, 3
    m = rng.random((n, n)) * (rng.random((n, n)) < 0.3)
    c = demand_circuits(m, d, max_parallel=2)
    ports = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
    assert ports.max() <= d and c[:, 2].max() <= 2 and connected(Circuits(c, n), n)
    assert np.all(c[:, 0] < c[:, 1])
    # the pair of largest demand gets a circuit
    sym = np.maximum(m, m.T)
    np.fill_diagonal(sym, 0.0)
    u, v = np.unravel_index(np.argmax(sym), sym.shape)
    assert [min(u, v), max(u, v)] in c[:, :2].tolist()


# ------------------------------------------------------------------ the search
@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from traffic.load import load_workload

    path = tmp_path_factory.mktemp("reconfig") / "small.yaml"
    path.write_text(SMALL_PLAN)
    w = load_workload(str(path))
    kw = dict(static_solver="topoopt", solvers=("demand", "topoopt"))
    first = reconfigure(w, 4, 12.5e9, 1e-5, **kw)
    runs = {1e-5: first}
    for delay in (1e-4, 1e-3, 1e-1):
        runs[delay] = reconfigure(w, 4, 12.5e9, delay, static_design=first.static, **kw)
    return w, path, runs


def test_static_never_slower_monotone_bounded(small):
    _, _, runs = small
    delays = sorted(runs)
    its = [runs[d].iteration_s for d in delays]
    static = runs[delays[0]].static_iteration_s
    for d in delays:
        r = runs[d]
        assert r.static_iteration_s == static
        assert r.lower_bound_s <= r.iteration_s <= static
        assert r.dark_s >= d
    assert its == sorted(its)  # non-decreasing in delay
    assert runs[1e-5].reconfigurations > 0 and its[0] < 0.9 * static  # reconfiguring pays
    assert runs[1e-1].reconfigurations == 0 and its[-1] == static  # ... and then it does not
    # the best schedule at a dark time does not depend on the delay asked
    for d in delays:
        for h, v in runs[d].by_hold.items():
            assert runs[1e-5].by_hold[h] == v


def test_brute_force_best_schedule(small):
    """Every per-phase choice and timing, simulated here: the search's best at each dark time is
    the minimum, and every run's iteration respects the wrap rule and the lower bound."""
    w, _, runs = small
    r = runs[1e-5]
    from solvers.model.problem import DesignProblem
    from solvers.realise import design_workload

    wr = design_workload(w, r.static, DesignProblem.from_workload(w, 4, 12.5e9))
    compute = r.info["compute_s"]
    for h in (1e-5, 1e-4):
        best = r.static_iteration_s
        for choice in itertools.product(*[range(len(c)) for c in r.candidates]):
            for timing in TIMINGS:
                sched = schedule_for(choice, r.candidates, r.phases, h, timing)
                if sched.is_static():
                    continue
                run = iteration_under_schedule(wr, sched, 12.5e9, h, compute_s=compute)
                wrap = run.net_finish_s + h if sched.wraps() else 0.0
                assert run.iteration_s == max(run.makespan_s, wrap)
                assert run.iteration_s >= r.lower_bound_s
                best = min(best, run.iteration_s)
        assert r.by_hold[h] == best
    # coordinate descent (forced): never worse than static, never better than the optimum
    d = reconfigure(
        w, 4, 12.5e9, 1e-5, static_design=r.static, solvers=("demand", "topoopt"),
        max_exhaustive=0, holds=(),
    )  # fmt: skip
    assert r.by_hold[1e-5] <= d.iteration_s <= r.static_iteration_s


def test_baselines_follow_the_artifact_cycle(small):
    w, _, runs = small
    r = runs[1e-4]
    rows = run_baselines(r, w, 4, 12.5e9)
    assert [x["baseline"] for x in rows] == ["ocs-reconfig", "sipml"]
    cycle = max((LIVE_FACTOR + 1) * 1e-4, r.static_iteration_s / MAX_WINDOWS)
    for x in rows:
        assert x["cycle_s"] == pytest.approx(cycle)
        assert np.isfinite(x["iteration_s"]) and x["iteration_s"] >= r.lower_bound_s
    assert rows[0]["reconfigurations"] == rows[1]["reconfigurations"] > 0
    sched, _, dark = baseline_schedule("ocs-reconfig", r.reference, w.servers, 4, 1e-4)
    assert dark and all(np.diff(sched.starts) >= cycle * (1 - 1e-12))


def test_bad_delay_and_degree_in_library(small):
    w, _, runs = small
    with pytest.raises(InputError, match="delay"):
        reconfigure(w, 4, 12.5e9, -1.0)
    with pytest.raises(InputError, match="delay"):
        reconfigure(w, 4, 12.5e9, float("nan"))
    with pytest.raises(InputError, match="degree"):
        reconfigure(w, 1, 12.5e9, 1e-3)


# ------------------------------------------------------------------ CLI
def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "topoopt.app.cli", "reconfig", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--delay-us", "-5"], "--delay-us"),
        (["--degree", "0"], "--degree"),
        (["--degree", "1"], "degree"),
        (["--time-limit", "0"], "--time-limit"),
        (["--fabric", "ocs-spine", "--time-limit", "30"], "--time-limit"),
        (["--phase-merge", "longest"], "--phase-merge"),
        (["--fabric", "hybrid", "--phase-merge", "labels"], "--phase-merge"),
        (["--fabric", "ocs-spine", "--wrap-overlap"], "--wrap-overlap"),
    ],
)
def test_cli_bad_input_one_line_exit_2(args, needle):
    p = _cli("dlrm", *args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert p.stdout == ""


def test_128_server_plans_are_no_longer_refused_by_their_size():
    # reconfig refused plans above 64 servers (dlrm-128 ran a 24 GB machine out of memory: the
    # demand set's ECMP, test above); the embedded 128-server plans now reach the search's own
    # checks (here the degree, one line, before any work)
    from traffic.build import workload_from_plan

    w = workload_from_plan("dlrm-128")
    with pytest.raises(InputError, match="to connect 128 servers") as exc:
        reconfigure(w, 1, 12.5e9, 1e-2)
    assert exc.value.field == "degree"


def test_cli_json(small, tmp_path):
    _, path, runs = small
    out = tmp_path / "schedule.json"
    args = ["--degree", "4", "--link-gbps", "100", "--delay-us", "10", "--solver", "topoopt"]
    p = _cli(str(path), *args, "--phase-solvers", "demand,topoopt", "--json", "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    for key in (
        "iteration_s",
        "static_iteration_s",
        "reconfigurations",
        "schedule",
        "lower_bound_s",
    ):
        assert key in doc
    assert doc["iteration_s"] == runs[1e-5].iteration_s
    entries = doc["schedule"]
    wraps = entries[-1]["circuits"] != entries[0]["circuits"]
    assert doc["reconfigurations"] == len(entries) - 1 + wraps > 0
    assert all({"start_s", "phase", "circuits"} <= set(e) for e in doc["schedule"])
    # stdout's envelope (issue 28) and the verdict sentences
    envelope = {"topoopt_version", "command", "inputs", "warnings", "verdict"}
    from topoopt.app.cli.common import without_clock  # --out keeps its wall clock, --json not

    saved = without_clock(json.loads(out.read_text()))
    assert saved == {k: v for k, v in doc.items() if k not in envelope}
    # capex of what each schedule needs, priced by hand (issue 29 item 13): 8 servers x 4 ports
    # at 100 Gbps, each port a NIC port ($400, 9 W), a transceiver ($100, 3.5 W), a fibre ($5)
    # and a device port: an OCS's ($500, 0.75 W) to change circuits at 10 us, a patch panel's
    # ($100, 0 W) for the static design
    ports = 8 * 4
    assert doc["capex"]["chosen"]["device"] == "ocs"
    assert doc["capex"]["chosen"]["capex_usd"] == pytest.approx(ports * (400 + 100 + 5 + 500))
    assert doc["capex"]["chosen"]["power_w"] == pytest.approx(ports * (9 + 3.5 + 0.75))
    assert doc["capex"]["chosen"]["capex_by_component"]["ocs"] == pytest.approx(ports * 500)
    assert doc["capex"]["static"]["device"] == "patch-panel"
    assert doc["capex"]["static"]["capex_usd"] == pytest.approx(ports * (400 + 100 + 5 + 100))
    assert doc["capex"]["static"]["power_w"] == pytest.approx(ports * (9 + 3.5))
    assert doc["prices"] == "default"


def test_cli_table_prices_each_schedule(small, tmp_path):
    """The table has the capex column; with no reconfiguration the chosen schedule is priced on
    patch panels like the static one (a delay too long to pay)."""
    _, path, _ = small
    out = tmp_path / "schedule.json"
    args = ["--degree", "4", "--link-gbps", "100", "--delay-us", "1e8", "--solver", "topoopt"]
    p = _cli(str(path), *args, "--phase-solvers", "topoopt", "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["reconfigurations"] == 0
    assert doc["capex"]["chosen"] == doc["capex"]["static"]
    assert doc["capex"]["static"]["capex_usd"] == pytest.approx(32 * 605)
    assert "capex (USD)" in p.stdout and "19,360" in p.stdout and "patch-panel" in p.stdout


def test_evaluation_limit_keeps_the_incumbent(small):
    w, _, runs = small
    full = runs[1e-5]
    kw = dict(static_design=full.static, solvers=("demand", "topoopt"), holds=())
    none = reconfigure(w, 4, 12.5e9, 1e-5, max_evaluations=0, **kw)
    assert none.iteration_s == full.static_iteration_s and none.reconfigurations == 0
    assert none.info["stopped_by"] == "max_evaluations" and none.evaluations == 0
    few = reconfigure(w, 4, 12.5e9, 1e-5, max_evaluations=3, **kw)
    assert few.evaluations == 3
    assert full.by_hold[1e-5] <= few.iteration_s <= full.static_iteration_s


def test_delay_sweep_equals_separate_searches(small):
    from solvers.reconfig.search import delay_sweep

    w, _, runs = small
    full = runs[1e-5]
    delays = sorted(runs)
    df = delay_sweep(
        w, 4, 12.5e9, delays, baselines=False, static_design=full.static,
        solvers=("demand", "topoopt"),
    )  # fmt: skip
    assert df["delay_s"].tolist() == delays
    assert df["iteration_s"].tolist() == [runs[d].iteration_s for d in delays]
    assert df["reconfigurations"].tolist() == [runs[d].reconfigurations for d in delays]
    assert df["iteration_s"].is_monotonic_increasing


def test_flow_builder_refuses_a_simulation_beyond_the_memory_budget(monkeypatch):
    # gpt3-175b-fsdp on 128 servers: 38 million flows were built before 8 GB; refused instead
    import pickle

    from topoopt.fabrics import ideal
    from topoopt.flowsim.network import DEP_BYTES, FLOW_BYTES

    fb = FlowBuilder(Network(ideal(2, port_bandwidth=100.0, latency=0.0)))
    monkeypatch.setenv(
        "TOPOOPT_MEMORY_BUDGET_GB", str((10 * FLOW_BYTES + 4 * DEP_BYTES + 0.5) / 1e9)
    )
    a = fb.add_ranks(np.zeros(6, np.int64), np.ones(6, np.int64), 1.0)
    fb.add_ranks(np.zeros(4, np.int64), np.ones(4, np.int64), 1.0, after=a[:1])  # 10 flows, 4 deps
    with pytest.raises(InputError, match="11 flows and 4 dependencies") as exc:
        fb.add_ranks([0], [1], [1.0])
    assert exc.value.field == "plan" and "TOPOOPT_MEMORY_BUDGET_GB" in exc.value.allowed
    with pytest.raises(InputError, match="10 flows and 5 dependencies"):
        fb.add_deps([1], [0])
    assert fb.n == 10
    # a solver's worker process sends it back pickled
    back = pickle.loads(pickle.dumps(exc.value))
    assert (back.field, back.value, str(back)) == (exc.value.field, exc.value.value, str(exc.value))


def test_fsdp_plan_above_the_exact_flow_limit_is_searched_coarsened(monkeypatch):
    """A ZeRO-3 / FSDP plan whose iteration has more flows than EXACT_FLOWS: the search runs
    on coarsened gradient buckets and says so; with the limit above it, exact and not flagged;
    the coarsening at a bucket count the plan never reaches changes nothing."""
    import solvers.reconfig.search as search
    from solvers.reconfig.baselines import run_baselines
    from traffic.build import workload_from_plan

    model = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
             "global_batch": 16}  # fmt: skip
    w = workload_from_plan({
        "model": model,
        "parallelism": {"tp": 1, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16,
                        "fsdp": "full_shard"},
        "cluster": {"servers": 4, "gpus_per_server": 1},
    })  # fmt: skip
    kw = dict(static_solver="topoopt", solvers=("topoopt",), max_exhaustive=4)
    exact = search.reconfigure(w, 2, 12.5e9, 1e-5, **kw)
    assert exact.info["coarsened"] is False and exact.info["max_buckets"] is None
    monkeypatch.setattr(search, "EXACT_FLOWS", 1)
    monkeypatch.setattr(search, "COARSE_BUCKETS", 10**6)  # above every family's bucket count
    same = search.reconfigure(w, 2, 12.5e9, 1e-5, static_design=exact.static, **kw)
    assert same.info["coarsened"] is True and same.info["max_buckets"] == 10**6
    assert same.static_iteration_s == pytest.approx(exact.static_iteration_s, rel=1e-12)
    assert same.iteration_s == pytest.approx(exact.iteration_s, rel=1e-12)
    monkeypatch.setattr(search, "COARSE_BUCKETS", 1)
    coarse = search.reconfigure(w, 2, 12.5e9, 1e-5, static_design=exact.static, **kw)
    assert coarse.info["max_buckets"] == 1
    assert coarse.iteration_s <= coarse.static_iteration_s
    assert coarse.static_iteration_s != exact.static_iteration_s  # the coarsening acted
    rows = run_baselines(coarse, w, 2, 12.5e9)
    assert all(np.isfinite(r["iteration_s"]) for r in rows)


# ------------------------------------------------------------------ cheapest first
@pytest.mark.parametrize("seed", range(6))
def test_cheapest_first_chooses_as_the_canonical_order(seed):
    """Any cost order gives the canonical search's choice at every dark time (values drawn
    with ties, some equal to the static iteration; a run past its bound may come back inf or
    exact, as a simulation cut at its horizon does), with every schedule simulated once."""
    from solvers.reconfig.search import Phase, search_schedules

    rng = np.random.default_rng(seed)
    n = 5
    ring = [[i, (i + 1) % n, 1] for i in range(n)]
    cands = [
        [CircuitSet(ring, None, "static")]
        + [CircuitSet(ring + [[0, 2 + k, 1]], None, f"c{p}{k}") for k in range(2)]
        for p in range(3)
    ]
    phases = [Phase(f"p{p}", 1.0 * p, 1.0 * p + 1.0) for p in range(3)]
    static_s = 10.0
    truth: dict = {}

    def key(sched, h):
        return (h, tuple(s.label for s in sched.sets), sched.starts)

    def value_fn(calls):
        def value(sched, h, bound):
            if sched.is_static():
                return static_s
            k = key(sched, h)
            calls.append(k)
            v = truth.setdefault(k, float(rng.choice([9.0, 9.5, 10.0, 10.5, 11.0])))
            return v if v <= bound or rng.random() < 0.5 else np.inf

        return value

    static = Schedule((cands[0][0],), (0.0,), ("iteration",))
    holds = [0.1, 0.2]
    canon_calls: list = []
    canon = search_schedules(cands, phases, holds, value_fn(canon_calls), static_s, static, 64)
    cost = [rng.uniform(0.0, 3.0, len(c)).tolist() for c in cands]
    calls: list = []
    got = search_schedules(cands, phases, holds, value_fn(calls), static_s, static, 64, cost=cost)
    assert sorted(calls) == sorted(canon_calls)
    assert got[0] == canon[0] and got[2][0][0] == canon[2][0][0] and got[2][1] == canon[2][1]
    for h in holds:
        assert key(got[1][h], h) == key(canon[1][h], h)
    assert key(got[2][0][1], got[2][1]) == key(canon[2][0][1], canon[2][1])


@pytest.mark.parametrize("seed", range(4))
def test_prefix_bound_is_below_the_run(seed):
    """The bound from the bytes left at the first reconfiguration, taken in the run of another
    schedule of the same first set, is at most the run's last byte (random flows on 4
    servers, a ring then a ring with a chord, dark 0.2 s)."""
    from solvers.reconfig.schedule import prefix_bound, schedule_flowset
    from topoopt.flowsim.timevarying import simulate_epochs

    rng = np.random.default_rng(seed)
    n = 4
    ring = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)], None, "ring")
    chord = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)] + [[0, 2, 2]], None, "chord")
    src = rng.integers(0, n, 12)
    dst = (src + rng.integers(1, n, 12)) % n
    size = rng.uniform(5.0, 40.0, 12)
    t1 = float(rng.uniform(0.5, 2.0))
    runs = []
    for second, t in ((ring, t1 + 0.5), (chord, t1)):  # the first takes, the second uses
        r = realise_schedule(Schedule((ring, second), (0.0, t)), n, B, 0.2)
        if second is ring:  # no reconfiguration: one more set for a two-epoch realisation
            r = realise_schedule(Schedule((ring, chord), (0.0, t)), n, B, 0.2)
        fb = FlowBuilder(Network(r.fabric, intra_bandwidth=1e9))
        fb.add_ranks(src, dst, size)
        runs.append(schedule_flowset(fb, r))
    (fa, _, ea), (fb_, _, eb) = runs
    _, left = simulate_epochs(fa, ea, left_at=[t1])
    assert left.ok[0] and left.version[0] == 1
    taken = (fa.size, fa.multiplicity, ea[0].paths.flow_ptr, left.left[0])
    bound, pieces = prefix_bound(fb_, eb, taken)
    full = simulate_epochs(fb_, eb)
    last = float(np.nanmax(full.finish))
    assert pieces > 0 and t1 + 0.2 <= bound <= last * (1 + 1e-12)
    # taken before the first reconfiguration of that run: its own bytes give the same bound
    _, own = simulate_epochs(fb_, eb, left_at=[t1])
    assert prefix_bound(fb_, eb, (fb_.size, fb_.multiplicity, eb[0].paths.flow_ptr,
                                  own.left[0]))[0] == bound  # fmt: skip
    # the static engine's lower bounds of the bytes left (unreleased flows whole, others 0)
    # give a bound at most that one, and at least the last epoch's start
    from topoopt.flowsim.timevarying import unreleased_left

    lo = unreleased_left(fa, ea, [t1])
    assert np.all(lo.left[0] <= left.left[0] * (1 + 1e-12))
    loose, _ = prefix_bound(fb_, eb, (fa.size, fa.multiplicity, ea[0].paths.flow_ptr,
                                      lo.left[0]))  # fmt: skip
    assert t1 + 0.2 <= loose <= bound


def test_search_equals_the_plain_search(small, monkeypatch):
    """The search as it runs (the late cut, cheapest first, the shared prefix), with every
    schedule first decided by the static engine after its last epoch (``REST_PATHS_PER_FLOW``
    0) and every first set's bytes left bounded first by the static engine's run of it
    (``LOOSE_PATHS_PER_FLOW`` 0), against the plain one (no late cut, the canonical order
    under an evaluation limit that could bind but is not reached, no time wanted by the shared
    prefix, no static engine): the same JSON but the wall time; and the prefix bound and the
    static engine did cut."""
    import solvers.reconfig.schedule as schedule
    import solvers.reconfig.search as search
    import topoopt.flowsim.timevarying as tv
    from solvers.reconfig.schedule import SharedPrefix

    w, _, runs = small
    full = runs[1e-5]
    kw = dict(static_design=full.static, solvers=("demand", "topoopt"), holds=(1e-3, 1e-1))
    made = []

    class Spy(SharedPrefix):
        def __init__(self, wanted):
            super().__init__(wanted)
            made.append(self)

    monkeypatch.setattr(search, "SharedPrefix", Spy)
    monkeypatch.setattr(schedule, "REST_PATHS_PER_FLOW", 0.0)
    monkeypatch.setattr(schedule, "LOOSE_PATHS_PER_FLOW", 0.0)
    from_template, cuts = [], []  # the cuts made before an iteration was built
    tf, pc = schedule.template_flowset, schedule._prefix_cut

    def template_flowset(*args):
        from_template.append(tf(*args))
        return from_template[-1]

    def prefix_cut(p, hz, label, flows, epochs):
        cut = pc(p, hz, label, flows, epochs)
        cuts.append(cut and any(flows is g[0] for g in from_template if g))
        return cut

    monkeypatch.setattr(schedule, "template_flowset", template_flowset)
    monkeypatch.setattr(schedule, "_prefix_cut", prefix_cut)
    a = reconfigure(w, 4, 12.5e9, 1e-5, **kw)
    assert made[0].taken and made[0].pruned > 0 and made[0].rest_cut > 0
    assert made[0].loose  # lower bounds taken from the static engine's runs of first sets
    assert any(cuts)  # some schedule was cut from the template's flows
    monkeypatch.setattr(schedule, "REST_PATHS_PER_FLOW", np.inf)
    monkeypatch.setattr(schedule, "LOOSE_PATHS_PER_FLOW", np.inf)
    real = tv.simulate_epochs
    monkeypatch.setattr(tv, "simulate_epochs", lambda *x, **k: real(*x, **{**k, "late_cut": False}))
    monkeypatch.setattr(search, "SharedPrefix", lambda wanted: SharedPrefix({}))
    total = int(np.prod([len(c) for c in full.candidates]))
    b = reconfigure(w, 4, 12.5e9, 1e-5, max_evaluations=len(TIMINGS) * total - 1, **kw)
    assert b.info["stopped_by"] == "none"  # the limit was not reached
    da, db = a.to_dict(), b.to_dict()
    for k in ("wall_s", "reduction"):  # records of the work done
        da.pop(k), db.pop(k)
    assert da == db


def test_template_flowset_equals_the_built_one(small):
    """The flow classes of one schedule's iteration, with the links past the fabric's shifted
    to another union fabric (larger or smaller), give every other schedule's epochs array for
    array and its flows' sizes, multiplicities, starts and dependencies (the server-pair flows'
    own paths, which no epoch uses, aside): so the shared prefix's bound is the same figure."""
    import solvers.reconfig.schedule as schedule
    from solvers.model.problem import DesignProblem
    from solvers.realise import design_workload

    w0, _, runs = small
    full = runs[1e-5]
    w = design_workload(w0, full.static, DesignProblem.from_workload(w0, 4, 12.5e9))
    cands, phases = full.candidates, full.phases
    got = []

    class Trap(schedule._Hook):
        def __call__(self, fb, limit):
            got.append((self.realised, *schedule._schedule_flowset(fb, self.realised)))
            raise schedule._PastHorizon

    for choice in itertools.product(*[range(len(c)) for c in cands]):
        for timing in TIMINGS:
            sc = schedule_for(choice, cands, phases, 1e-3, timing)
            if sc.is_static():
                continue
            r = schedule.realise_schedule(sc, w.servers, 12.5e9, 1e-3,
                                          gpus_per_server=w.gpus_per_server)  # fmt: skip
            schedule.run_iteration(w, sc, r.fabric, None, Trap(r), 1e-3)
    sizes = {r.fabric.n_links for r, *_ in got}
    assert len(sizes) > 1  # union fabrics of different sizes: the shift both ways
    for template in {x[-1].n_fabric: x[-1] for x in got}.values():
        for r, flows, _, epochs, _ in got:
            ft, et = schedule.template_flowset(template, r)
            for a in ("size", "multiplicity", "start", "dep_ptr", "deps", "capacity", "latency"):
                assert np.array_equal(getattr(ft, a), getattr(flows, a)), a
            assert len(et) == len(epochs)
            for x, y in zip(et, epochs, strict=True):
                assert x.start_s == y.start_s and np.array_equal(x.capacity, y.capacity)
                assert (x.paths is None) == (y.paths is None)
                if x.paths is not None:
                    for k in ("flow_ptr", "path_ptr", "path_links", "weight"):
                        assert np.array_equal(getattr(x.paths, k), getattr(y.paths, k)), k


TP_PLAN = """model: {base: gpt3-175b, layers: 8, hidden: 1024, heads: 16, seq_len: 512,
        vocab: 32000}
parallelism: {tp: 2, pp: 2, dp: 4, micro_batch_size: 2, global_batch_size: 32, sp: true}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 8, gpus_per_server: 2}
"""


def test_isolated_durations_shared_across_fabrics(tmp_path):
    """The intra-server collectives' isolated durations (TP 2 inside a server) shared by the
    runs of one search (``isolated``): computed once, then every run on another fabric (a
    ring, a ring with chords, their union under a schedule) gives the run without the shared
    cache to the last bit (iteration, makespan, every task's start and finish)."""
    from traffic.load import load_workload

    path = tmp_path / "tp.yaml"
    path.write_text(TP_PLAN)
    w = load_workload(str(path))
    n = w.servers
    ring = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)], None, "ring")
    chords = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)]
                        + [[i, i + n // 2, 1] for i in range(n // 2)], None, "chords")  # fmt: skip
    shared: dict = {}
    sizes = []
    compute = None  # as the search runs schedules: with the static run's compute-only time
    for sched, h in (
        (Schedule((ring,), (0.0,)), 0.0),
        (Schedule((chords,), (0.0,)), 0.0),
        (Schedule((ring, chords), (0.0, 0.01)), 1e-3),
    ):
        got = iteration_under_schedule(w, sched, 12.5e9, h, compute_s=compute, isolated=shared)
        sizes.append(len(shared))
        plain = iteration_under_schedule(w, sched, 12.5e9, h, compute_s=compute)
        compute = plain.result.compute_s
        assert got.iteration_s == plain.iteration_s and got.makespan_s == plain.makespan_s
        for col in ("start_s", "finish_s"):
            a = got.result.timeline[col].to_numpy()
            assert np.array_equal(a, plain.result.timeline[col].to_numpy())
    assert sizes[0] > 0 and sizes == [sizes[0]] * 3  # filled once, then only read


def test_a_reconfiguring_schedule_without_compute_s_runs_its_compute_only_plainly():
    """``iteration_under_schedule`` without ``compute_s`` simulates the compute-only iteration
    itself; under a schedule that reconfigures, that run has no flow on the fabric (it raised
    "need at least one array to concatenate": no server pair to route). It now runs plainly:
    its compute time is the static schedule's, and the iteration is the one given that time."""
    from traffic.build import workload_from_plan

    w = workload_from_plan("vgg16-dp")
    n = w.servers
    one = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)])
    two = CircuitSet([[i, (i + 1) % n, 2] for i in range(n)])
    sched = Schedule((one, two), (0.0, 0.05))
    alone = iteration_under_schedule(w, sched, 12.5e9, 0.001)
    static = iteration_under_schedule(w, Schedule((one,), (0.0,)), 12.5e9, 0.0)
    given = iteration_under_schedule(w, sched, 12.5e9, 0.001, compute_s=static.result.compute_s)
    assert alone.reconfigurations == 2
    assert alone.result.compute_s == static.result.compute_s
    assert alone.iteration_s == given.iteration_s


def test_a_routing_limit_is_not_reported_as_unconnected_servers(monkeypatch):
    """A set's ECMP routes refused by the router's own limit (on DLRM's 256 servers at 4 ports
    the paths of long demand-circuit routes) were reported as 'servers 0 and 1 unconnected'
    though every server was connected; now the router's line is the error. A set that really
    leaves a communicating pair apart still says which."""
    import topoopt.fabrics.routing as routing_mod

    n = 6
    ring = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)])
    two = CircuitSet([[0, 1, 1], [1, 2, 1], [2, 0, 1], [3, 4, 1], [4, 5, 1], [5, 3, 1]])
    r = realise_schedule(Schedule((ring, two), (0.0, 1.0)), n, 10.0, 0.1)
    pairs = np.array([[0, 3], [1, 2]])

    def limit(*a, **k):
        raise InputError("k", None, "a path count under 50,000,000")

    with monkeypatch.context() as m:
        m.setattr(routing_mod, "routes", limit)
        with pytest.raises(InputError) as e:
            r.routes(0, pairs)
        assert e.value.field == "k"
        with pytest.raises(InputError) as e:  # two triangles: 0 and 3 are apart
            r.routes(1, pairs)
        assert "servers 0 and 3 unconnected" in str(e.value)
    with pytest.raises(InputError, match="servers 0 and 3 unconnected"):
        r.routes(1, pairs)  # the router itself finds no path


@pytest.mark.parametrize("given", [None, 123.0])
def test_every_design_solve_gets_the_time_cap(small, monkeypatch, given):
    """The static and per-phase solves run under ``reconfigure``'s wall-clock cap (default
    TIME_LIMIT_S, the CLI's 900 s), not a bare solve's 60 s, which cut the static `joint`
    design of gpt3-175b on a loaded machine: the work limit decides the design."""
    import solvers.registry as registry
    from solvers.reconfig.search import TIME_LIMIT_S

    w, _, _ = small
    seen = []
    real = registry.solve

    def spy(problem, name, **kw):
        seen.append((name, kw.get("time_limit_s")))
        return real(problem, name, **kw)

    monkeypatch.setattr(registry, "solve", spy)
    kw = {} if given is None else {"time_limit_s": given}
    reconfigure(w, 4, 12.5e9, 1e-5, static_solver="topoopt", solvers=("topoopt",),
                max_evaluations=0, holds=(), **kw)  # fmt: skip
    want = TIME_LIMIT_S if given is None else given
    assert TIME_LIMIT_S == 900.0
    assert [n for n, _ in seen] == ["topoopt"] * len(seen) and len(seen) >= 2  # static + phases
    assert all(t == want for _, t in seen)
