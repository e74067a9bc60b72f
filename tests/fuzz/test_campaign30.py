"""The causes of issue 30's outside fuzz campaign, one test each (file kinds with a corpus got
their cases in ``corpus/`` too: circuits-text ``+0 2``, pre-wired header-only and ``[]``).

Cause numbers are the issue's: 1 no network flow, 2 strides on large N, 3 fabric sizes, 4 an
output that is an input, 5 plan files and TOPOOPT_MAX_INPUT_MB, 6 a self data dependency, 7
comm_size beyond 2**62, 8 --finalists, 9 collective --servers, 10 lenient numbers, 11 sloppy
lists and paths, 12 --schedule with pp = 1, 13 kinds that disagreed (docs/inputs.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from fuzz_kinds import COMMAND, RUNNER, SEEDS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "formats"))
from test_chakra import attr_bool, coll, node, trace, write  # noqa: E402

from traffic.chakra import read_chakra  # noqa: E402
from traffic.errors import InputError  # noqa: E402

PLAN = str(SEEDS / "plan.json")


def run(args: list[str]):
    return RUNNER.invoke(COMMAND, [str(a) for a in args])


def one_line(args: list[str]) -> str:
    r = run(args)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert r.stdout == "" and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def comp(nid: int, us: int, deps=()) -> bytes:
    return node(nid, 4, attr_bool("is_cpu_op", False), dur=us, data_deps=deps)


# ---- cause 1 (and 13: empty traces) ---------------------------------------------------------
def test_iteration_without_any_flow_takes_zero_seconds():
    """The crash itself: a task graph with no task (no flow) gave IndexError in reduceat."""
    from topoopt.fabrics import ideal
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.workload import TaskGraph, Workload

    e = np.zeros(0, np.int64)
    tg = TaskGraph(
        task_id=e,
        kind=np.zeros(0, str),
        server=e,
        runtime_s=np.zeros(0),
        size_bytes=np.zeros(0),
        edges=np.zeros((0, 2), np.int64),
        demand=np.zeros((0, 2), np.int64),
        device=e,
    )
    r = simulate_iteration(Workload(gpus=4, gpus_per_server=1, demands=(), taskgraph=tg), ideal(4))
    assert r.iteration_s == 0.0 and r.compute_s == 0.0


@pytest.mark.parametrize("ranks", [1, 8])
def test_compute_only_and_barrier_traces_time_their_compute(tmp_path, ranks):
    """No network flow (barriers, one rank): the iteration is the longest rank's compute."""
    per = [trace(coll(1, 9, 0), comp(2, 100 + 50 * r, deps=[1])) for r in range(ranks)]
    folder = write(tmp_path / "t", per)
    doc = json.loads(run(["simulate", folder, "--fabric", "ideal", "--json"]).stdout)
    assert doc["iteration_s"] == pytest.approx((100 + 50 * (ranks - 1)) * 1e-6)
    assert doc["comm_s"] == 0.0
    if ranks == 8:  # the commands of the campaign run too (ratio 1 on every fabric)
        r = run(["compare", folder, "--degree", "2", "--fabrics", "ideal,expander", "--json"])
        assert r.exit_code == 0, r.stderr
        assert [x["ratio_to_ideal"] for x in json.loads(r.stdout)["rows"]] == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["metadata-only", "barrier-only", "empty-compute"])
def test_traces_with_nothing_to_time_are_one_line(tmp_path, kind):
    nodes = {"metadata-only": (), "barrier-only": (coll(1, 9, 0),), "empty-compute": (comp(1, 0),)}
    folder = write(tmp_path / kind, [trace(*nodes[kind]) for _ in range(4)])
    for cmd in ("traffic", "simulate"):
        extra = ["--fabric", "ideal"] if cmd == "simulate" else []
        line = one_line([cmd, folder, *extra, "--json"])
        assert "no bytes moved and no compute time" in line


# ---- causes 6 and 7 -------------------------------------------------------------------------
def test_a_node_listing_itself_in_data_deps_is_refused(tmp_path):
    folder = write(tmp_path / "s", [trace(comp(1, 10, deps=[1]))])
    with pytest.raises(InputError, match=r"node 1.data_deps: got 'node 1 itself'"):
        read_chakra(folder)


def test_a_self_control_dependency_is_dropped_and_counted(tmp_path):
    """As a control cycle of two nodes (older converters): dropped, counted in info."""
    folder = write(tmp_path / "c", [trace(node(1, 4, attr_bool("is_cpu_op", False), deps=[1],
                                               dur=10))])  # fmt: skip
    w = read_chakra(folder)
    assert w.info["cyclic_control_dependencies_dropped"] == 1


def test_comm_size_beyond_the_iteration_cap_is_refused(tmp_path):
    """2 ranks x (2**63 - 1) bytes: 1.8e19 > 2**62, the plans' cap; 2**60 each passes."""
    big = write(tmp_path / "big", [trace(coll(1, 0, 2**63 - 1)) for _ in range(2)])
    with pytest.raises(InputError, match=r"2\*\*62"):
        read_chakra(big)
    ok = write(tmp_path / "ok", [trace(coll(1, 0, 2**60)) for _ in range(2)])
    assert read_chakra(ok).demands[0].size == 2**60


# ---- cause 4 ---------------------------------------------------------------------------------
def test_an_output_never_replaces_an_input(tmp_path):
    plan, circ, flows = (tmp_path / n for n in ("p.json", "c.json", "f.json"))
    plan.write_bytes((SEEDS / "plan.json").read_bytes())
    circ.write_bytes((SEEDS / "circuits.json").read_bytes())
    flows.write_bytes((SEEDS / "flows.json").read_bytes())
    before = {p: p.read_bytes() for p in (plan, circ, flows)}
    cases = [
        ["design", plan, "--degree", "2", "--solver", "topoopt", "--out", plan],
        ["traffic", plan, "--out", plan],
        ["compare", plan, "--degree", "2", "--fabrics", "ideal", "--csv", plan],
        ["reconfig", plan, "--degree", "2", "--out", plan],
        ["netsim", flows, "--out", flows],
        ["fabric", "direct", "--servers", "8", "--degree", "4", "--circuits", circ, "--html", circ],
        ["export", plan, "--format", "simai", "--out", plan],
        # through another spelling of the same file
        ["traffic", plan, "--out", tmp_path / "." / "p.json"],
    ]
    for args in cases:
        line = one_line([*args, "--force"])
        assert "not an input of this command" in line, line
    assert {p: p.read_bytes() for p in before} == before
    # a folder export onto its own input folder (--force replaces earlier exports only)
    assert run(["export", plan, "--format", "chakra", "--out", tmp_path / "et"]).exit_code == 0
    one_line(["export", tmp_path / "et", "--format", "chakra", "--out", tmp_path / "et", "--force"])
    assert sorted(p.name for p in (tmp_path / "et").iterdir())[0] == ".topoopt-export"


# ---- cause 5 ---------------------------------------------------------------------------------
def test_plan_files_obey_the_input_size_limit(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    big.write_text((SEEDS / "plan.json").read_text() + " " * 2_000_000)
    monkeypatch.setenv("TOPOOPT_MAX_INPUT_MB", "1")
    assert "at most 1,000,000 bytes" in one_line(["traffic", big, "--json"])
    for bad in ("abc", "-1", "nan", "1e400"):
        monkeypatch.setenv("TOPOOPT_MAX_INPUT_MB", bad)
        assert "TOPOOPT_MAX_INPUT_MB" in one_line(["traffic", PLAN, "--json"])
    monkeypatch.setenv("TOPOOPT_MAX_INPUT_MB", "4")
    assert run(["traffic", big, "--json"]).exit_code == 0


# ---- causes 8-12 -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args,words",
    [
        (["cosearch", "vgg16", "--servers", "8", "--finalists", "0"], "--finalists"),
        (["cosearch", "vgg16", "--servers", "8", "--finalists", "-100"], "--finalists"),
        (["cosearch", "vgg16", "--servers", "8", "--pareto-fabrics", ""], "--pareto-fabrics"),
        (["collective", "--fabric", "torus", "--dims", "4x4", "--servers", "8",
          "--collective", "all-reduce", "--size", "1e6"], "16, the servers of --fabric torus"),
        (["fabric", "expander", "--servers", "8", "--degree", "2.0"], "'2.0' is not an integer"),
        (["fabric", "ideal", "--servers", "8", "--link-gbps", "1_00"], "'1_00' is not a decimal"),
        (["compare", PLAN, "--degree", "2", "--fabrics", ""], "none empty"),
        (["compare", PLAN, "--degree", "2", "--fabrics", "ideal,,fat-tree"], "none empty"),
        (["simulate", PLAN, "--fabric", "ideal", "--schedule", "interleaved"], "pp = 1"),
    ],
)  # fmt: skip
def test_option_values_are_checked_as_typed(args, words):
    assert words in one_line(args)


def test_collective_design_with_other_servers(tmp_path):
    design = SEEDS / "design.json"
    n = json.loads(design.read_text())["servers"]
    line = one_line(["collective", "--design", design, "--servers", n + 8, "--collective",
                     "all-reduce", "--size", "1e6"])  # fmt: skip
    assert f"{n}, the servers of --design" in line
    ok = run(["collective", "--design", design, "--servers", n, "--collective", "all-reduce",
              "--size", "1e6", "--json"])  # fmt: skip
    assert ok.exit_code == 0, ok.stderr


def test_an_output_path_ending_in_a_slash_is_refused(tmp_path):
    out = tmp_path / "m.csv"
    line = one_line(["compare", PLAN, "--degree", "2", "--fabrics", "ideal", "--csv", f"{out}/"])
    assert "no trailing /" in line and not out.exists()
    r = run(["compare", PLAN, "--degree", "2", "--fabrics", "ideal", "--csv", out])
    assert r.exit_code == 0 and out.is_file()


def test_strict_number_texts():
    from topoopt.app.cli.option_text import FLOAT_TEXT, INTEGER_TEXT

    assert all(INTEGER_TEXT.fullmatch(t) for t in ("0", "-3", "65536"))
    assert not any(INTEGER_TEXT.fullmatch(t) for t in ("2.0", "1_0", "+1", "\u0663", "1e3"))
    assert all(FLOAT_TEXT.fullmatch(t) for t in ("100", "1e2", "0.5", ".5", "1.", "-2E-3", "inf"))
    assert not any(FLOAT_TEXT.fullmatch(t) for t in ("1_00", "0x10", "1e", "\u0663", ""))


# ---- cause 13: one rule for headers ----------------------------------------------------------
def test_fail_ports_header_ignores_case_as_every_header(tmp_path):
    from topoopt.app.studies.whatif import read_failure_file

    p = tmp_path / "f.csv"
    p.write_text("Server,PORTS\n3,2\n")
    assert read_failure_file(p)["ports"].tolist() == [[3, 2]]
    p.write_text("server,ports\n+3,2\n")
    with pytest.raises(InputError):
        read_failure_file(p)


# ---- cause 2: strides on large N ------------------------------------------------------------
def test_strides_stop_inside_the_time_limit(monkeypatch):
    """A limit that runs out before the first stride set is evaluated: one line naming
    --time-limit (before: minutes of a Python loop over every unit of Z_n); a limit that lets
    the first evaluation finish: the geometric set is the incumbent, status time-limit."""
    import solvers.baselines.strides as st

    with pytest.raises(InputError, match="--time-limit"):
        st.best_strides(2_000_003, 8, time_limit_s=1e-6)
    r = st.best_strides(200_003, 8, time_limit_s=0.5)
    geo, diam, mean = r.geometric
    assert r.status == "time-limit" and list(geo) == st.geometric_strides(200_003, 8)
    assert (diam, mean) == st.circulant_stats(200_003, list(geo))
    assert r.value <= (mean if r.objective == "mean-hops" else diam)


def test_geometric_rule_and_bfs_match_their_slow_forms():
    """The vectorised rule equals select_permutations, the sort-free BFS the plain one."""
    import solvers.baselines.strides as st
    from topoopt.fabrics.direct_connect import select_permutations

    for n in (4099, 10_000, 65_536):
        for d in (2, 4, 8, 12):
            assert st.geometric_strides(n, d) == select_permutations(st.totient_perms(n), d // 2)
    n, s = 1000, [1, 7, 101]
    dist = st.circulant_distances(n, s)
    ref = np.full(n, -1)
    ref[0], frontier, level = 0, [0], 0
    while frontier:
        level += 1
        nxt = sorted({(v + o) % n for v in frontier for o in s + [-x for x in s]} - {
            v for v in range(n) if ref[v] >= 0})  # fmt: skip
        ref[nxt] = level
        frontier = nxt
    assert dist.tolist() == ref.tolist()


# ---- cause 3: fabric sizes -------------------------------------------------------------------
def test_diameter_refuses_before_searching_beyond_its_work(monkeypatch):
    """600 servers x 2,400 links = 1.44e6 visits: computed under the limit, refused above it
    (20,000 x 64 ports is 2.6e10: minutes of searches before)."""
    import topoopt.fabrics.metrics as m
    from topoopt.fabrics import expander

    f = expander(600, 4, 0)
    assert f.adjacency().nnz == 2400 and m.diameter(f) >= 5  # Moore: 1 + 4 + 12 + 36 + 108 < 600
    monkeypatch.setattr(m, "DIAMETER_WORK", 600 * 2400 - 1)
    with pytest.raises(InputError, match="1.4e\\+06 link visits"):
        m.diameter(f)


# ---- issue 30, "what to build" 1: sizes answered within seconds ------------------------------
def _vgg_dp(tmp_path: Path, servers: int, gps: int = 1) -> Path:
    g = servers * gps
    p = tmp_path / f"vgg{servers}.yaml"
    p.write_text(
        f"model: vgg16\nparallelism: {{dp: {g}, micro_batch_size: 16, global_batch_size: "
        f"{16 * g}}}\nprecision: {{activation_bytes: 4, gradient_bytes: 4, parameter_bytes: 4}}\n"
        f"cluster: {{servers: {servers}, gpus_per_server: {gps}}}\n"
    )
    return p


def test_flow_estimate_matches_the_flow_model_on_data_parallel_plans(tmp_path):
    """VGG-16's 553,430,176-byte gradient in 25 MB buckets: 23 buckets, each a reduce-scatter
    and an all-gather flow per GPU, plus 2 compute pieces: 48 flows per GPU; the count before
    any fabric adds the barriers and optimizer steps, and equals what the flow model builds."""
    from topoopt.fabrics import ideal
    from topoopt.flowsim.iteration import TooManyFlows, simulate_iteration
    from topoopt.flowsim.work import estimate_work
    from traffic.load import load_workload

    w = load_workload(str(_vgg_dp(tmp_path, 16, 8)))
    est = estimate_work(w).flows
    assert 48 * 128 <= est <= 1.1 * 48 * 128
    with pytest.raises(TooManyFlows) as exc:
        simulate_iteration(w, ideal(16, gpus_per_server=8), max_flows=1)
    assert exc.value.n_flows == est


def test_a_million_servers_are_refused_before_any_fabric(tmp_path, monkeypatch):
    """The case of the issue: VGG-16 data parallel on 1,000,000 servers, simulate --fabric
    ideal, gave nothing in 120 s. Now one line with the estimate, the cap and the variable that
    raises it, before a fabric is built (a fabric builder that fails proves it)."""
    import topoopt.app.studies.compare as compare_mod
    import topoopt.app.studies.simulate as simulate_mod

    def no_build(*a, **k):
        raise AssertionError("a fabric was built")

    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "8")  # the default (conftest: 2)
    monkeypatch.setattr(simulate_mod, "build_fabric", no_build, raising=False)
    monkeypatch.setattr(compare_mod, "build_fabric", no_build)
    plan = _vgg_dp(tmp_path, 1_000_000)
    # simulate and compare go through the symmetry reduction (its cap: REDUCED_FLOW_FACTOR x
    # the flows); compare --no-reduction has the plain one
    for args, cap in (
        (["simulate", plan, "--fabric", "ideal", "--json"], "12,000,000"),
        (["compare", plan, "--json"], "12,000,000"),
        (["compare", plan, "--json", "--no-reduction"], "4,000,000"),
    ):
        line = one_line(args)
        assert "about 50,000,046 flows" in line and f"at most {cap}" in line, line
        assert "TOPOOPT_MAX_FLOWS" in line
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", "1e9")  # raised: the next limit is the memory's
    line = one_line(["simulate", plan, "--fabric", "ideal"])
    assert "GB of arrays" in line and "TOPOOPT_MEMORY_BUDGET_GB" in line, line
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "5000")  # raised: then the fabric's
    assert "a fabric was built" in str(run(["simulate", plan, "--fabric", "ideal"]).exception)


def test_compare_checks_the_size_first(tmp_path, monkeypatch):
    """4,096 servers: before, compare worked 57 s (the designed fabrics) before refusing a size.
    Clos now builds at any size (three tiers), so what is checked first is the flow budget: over
    it, one line before any fabric is built or any design searched."""
    import topoopt.app.studies.compare as compare_mod

    built = []
    real = compare_mod.build_fabric

    def recording(name, *a, **k):
        built.append(name)
        return real(name, *a, **k)

    monkeypatch.setattr(compare_mod, "build_fabric", recording)
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", "10000")
    line = one_line(["compare", _vgg_dp(tmp_path, 4096), "--json"])
    assert "TOPOOPT_MAX_FLOWS" in line and "flows" in line
    assert built == []  # refused before any fabric, no design searched


def test_strides_of_a_hundred_million_answer_inside_the_limit(monkeypatch):
    """strides 100000000 8 --time-limit 5 ran past 300 s; now the limit cuts the listing of the
    stride classes (one slice of 10^7 gcds past it at most). 64 bytes per server: 6.4 GB, within
    the default budget (the fuzz conftest's 2 GB refuses it first)."""
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "8")
    line = one_line(["strides", "100000000", "8", "--time-limit", "0.01", "--json"])
    assert line.startswith("error: --time-limit: got 0.01") and "n=100,000,000" in line
