"""Sizes first in every command that simulates the iteration (issue 30, "what to build" 1), and
the memory budget shared by co-search's workers (issue 30, memory at 16,384 GPUs).

``design``, ``reconfig``, ``breakeven``, ``whatif`` and ``cluster`` ran for minutes on a plan of
1,000,000 servers (lifting the design problem, placing jobs) before any limit was checked. They
now estimate the iteration's flows first (:func:`topoopt.flowsim.work.check_work`): here a flow
cap of 10 makes the small seed plan too large, and a design problem builder that fails proves
nothing was lifted before the refusal.

Co-search: the budget ``TOPOOPT_MEMORY_BUDGET_GB`` is divided among the workers; an evaluation
whose estimate exceeds its share is skipped before its fabric is built, and a search none of
whose plans fits is refused before any bound or evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fuzz_kinds import COMMAND, RUNNER, SEEDS

PLAN = str(SEEDS / "plan.json")  # VGG-16 data parallel, 8 servers


def one_line(args: list[str]) -> str:
    r = RUNNER.invoke(COMMAND, [str(a) for a in args])
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def _design_file(tmp_path) -> str:
    """A design of the seed plan (4 ports), made before the cap is lowered."""
    out = tmp_path / "design.json"
    r = RUNNER.invoke(
        COMMAND, ["design", PLAN, "--degree", "4", "--solver", "topoopt", "--out", str(out)]
    )
    assert r.exit_code == 0, r.stderr
    return str(out)


def test_every_simulating_command_checks_the_size_first(tmp_path, monkeypatch):
    design = _design_file(tmp_path)
    jobs = tmp_path / "jobs.json"
    plan_doc = json.loads(Path(PLAN).read_text())
    jobs.write_text(json.dumps({"jobs": [{"name": "a", "plan": plan_doc}]}))
    import solvers
    import solvers.model.problem as problem_mod
    import topoopt.app.studies.compare as compare_mod

    def fail(*a, **k):
        raise AssertionError("work started before the size check")

    monkeypatch.setattr(problem_mod.DesignProblem, "from_workload", classmethod(fail))
    monkeypatch.setattr(solvers.DesignProblem, "from_workload", classmethod(fail))
    monkeypatch.setattr(compare_mod, "build_fabric", fail)
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", "10")
    for args, cap in (
        (["design", PLAN, "--degree", "4"], 30),  # the design's simulation: reduced
        (["design", PLAN, "--degree", "4", "--no-reduction"], 10),
        (["design", PLAN, "--degree", "4", "--priorities"], 10),  # priorities: no quotient
        (["reconfig", PLAN, "--degree", "4"], 10),
        (["breakeven", PLAN, "--degree", "4"], 30),  # through the symmetry reduction: 3 x
        (["whatif", PLAN, "--design", design, "--fail-links", "1"], 30),
        (["cluster", str(jobs), "--servers", "8", "--degree", "2"], 30),
        (["cluster", str(jobs), "--servers", "8", "--degree", "2", "--no-reduction"], 10),
        (["compare", PLAN, "--degree", "4"], 30),
        (["compare", PLAN, "--degree", "4", "--no-reduction"], 10),
    ):
        line = one_line(args)
        assert "flows" in line and f"at most {cap} flows" in line, (args[0], line)
        assert "TOPOOPT_MAX_FLOWS" in line, (args[0], line)


def test_a_cosearch_too_large_for_its_workers_is_refused_before_any_evaluation(monkeypatch):
    """The seed's first plan estimated: one worker's share of a 20 kB budget is below it; the
    line names the estimate, the share and both ways to raise it."""
    import topoopt.app.studies.cosearch.search as search_mod

    def fail(*a, **k):
        raise AssertionError("bounds computed before the size check")

    monkeypatch.setattr(search_mod, "candidate_bounds", fail)
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "0.00004")  # 40 kB: 8 GPUs x 4 kB fit
    line = one_line(
        ["cosearch", "vgg16", "--servers", "8", "--gpus-per-server", "1", "--degree", "4"]
    )
    assert "GB of arrays for one evaluation" in line and "a worker" in line, line
    assert "TOPOOPT_MEMORY_BUDGET_GB" in line and "--workers" in line, line


def test_an_evaluation_beyond_its_share_is_skipped_before_its_fabric():
    """``evaluate`` with a share below the iteration's estimate: no fabric is built (its price
    is infinite), the record says why; with no share the same task is simulated."""
    from topoopt.app.studies.cosearch.evaluate import EvalTask, evaluate, workload_for
    from topoopt.app.studies.cosearch.space import plan_space
    from topoopt.flowsim.work import estimate_work
    from traffic.zoo import ZOO

    base = {
        "model": {"name": "vgg16", **ZOO["vgg16"], "global_batch": 32},
        "cluster": {"servers": 8, "gpus_per_server": 1},
    }
    space = plan_space(base, 80e9)
    cand = space.candidates[0]
    _, w = workload_for(space.base, cand)
    need = estimate_work(w).array_bytes
    task = EvalTask(0, space.base, cand, "fat-tree", 4, 12.5e9, memory_share_bytes=need / 2)
    rec = evaluate(task)
    assert rec["skipped"].startswith("too large: about") and "share" in rec["skipped"]
    assert math.isinf(rec["iteration_s"]) and math.isinf(rec["capex_usd"])
    ok = evaluate(EvalTask(0, space.base, cand, "fat-tree", 4, 12.5e9, memory_share_bytes=None))
    assert ok["skipped"] is None and math.isfinite(ok["iteration_s"])
    assert math.isfinite(ok["capex_usd"])
    shared = evaluate(
        EvalTask(0, space.base, cand, "fat-tree", 4, 12.5e9, memory_share_bytes=2 * need + 1e9)
    )
    assert shared["iteration_s"] == ok["iteration_s"]  # a share that holds it changes nothing


def test_the_share_is_the_budget_over_the_workers(monkeypatch):
    from topoopt.app.studies.cosearch.search import SearchConfig, _Runner

    class Eng:
        workers = 4

    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "8")
    assert _Runner(None, SearchConfig(), Eng()).memory_share == pytest.approx(2e9)


def test_compare_checks_each_fabric_on_its_paths(monkeypatch):
    """``compare`` checks each fabric's simulation once its flows are routed, on the exact
    sub-flows (a flow's share on each of its paths), before their arrays exist: a fabric beyond
    the budget is a row naming the estimate and the variable, and the ideal switch is simulated.
    Here the sub-flow check alone sees a 1 MB budget: the ideal switch's 446 flows (at most
    900 + 300 B each, 0.54 MB) fit, the torus's 1,158 flows on 1,147 sub-flows (1.39 MB) do not
    (without the reduction). With it (the default) the torus's refused sub-flows go through
    the grouped quotient (``compare`` reads no per-path times): the row runs, and equals the
    row at the default budget."""
    import topoopt.flowsim.subflow_guard as guard
    from topoopt.app.studies.compare import compare
    from traffic.load import load_workload

    w = load_workload(PLAN)
    full = compare(w, ["ideal", "torus"], 4, 12.5e9).table.set_index("fabric")
    monkeypatch.setattr(guard, "memory_budget_bytes", lambda: 1e6)
    rows = compare(w, ["ideal", "torus"], 4, 12.5e9, reduction=False).table.set_index("fabric")
    assert math.isfinite(rows.loc["ideal", "iteration_s"])
    err = rows.loc["torus", "error"]
    assert "1,147 sub-flows of 1,158 flows" in err and "GB of arrays" in err, err
    assert "TOPOOPT_MEMORY_BUDGET_GB" in err
    grouped = compare(w, ["ideal", "torus"], 4, 12.5e9).table.set_index("fabric")
    assert "error" not in grouped or not isinstance(grouped.loc["torus", "error"], str)
    got, want = grouped.loc["torus", "iteration_s"], full.loc["torus", "iteration_s"]
    assert got == pytest.approx(want, rel=1e-9)


def test_a_split_into_billions_of_micro_ops_is_one_line():
    """``simulate --split-allreduce 1`` on VGG-16 asked 7.7 billion micro-op flows and ended in
    ``MemoryError`` ('more memory than this machine has'); the pieces are counted before they
    exist, against TOPOOPT_MAX_FLOWS and the budget."""
    line = one_line(["simulate", PLAN, "--fabric", "ideal", "--split-allreduce", "1", "--json"])
    n = int(line.split("about ")[1].split(" flows")[0].replace(",", ""))
    # ring all-reduce of VGG-16's 138,357,544 fp32 gradients on 8 GPUs: each sends
    # 2 (8 - 1) / 8 of them, one piece a byte; the few hundred flows not split come on top
    grad = 2 * (8 - 1) * 138_357_544 * 4
    assert grad <= n <= grad + 1000, (n, grad)
    assert "--split-allreduce" in line and "TOPOOPT_MAX_FLOWS" in line, line


def test_strides_without_a_time_limit_refuse_a_proof_beyond_the_cap():
    """``strides 1000000 8`` (no limit: run to proof) ran for hours; the sets a proof would
    enumerate, C(phi(n)/2 - 1, d/2 - 1), are counted first: 200,000 classes for n = 10^6, so
    C(199,999, 3) = 1.33e15 sets. With --time-limit it answers (test_campaign30)."""
    from math import comb

    from solvers.baselines.strides import MAX_SETS_TO_PROOF

    line = one_line(["strides", "1000000", "8"])
    assert f"about {float(comb(199_999, 3)):.3g} stride sets" in line, line
    assert "--time-limit" in line and f"{MAX_SETS_TO_PROOF:,}" in line, line
    r = RUNNER.invoke(COMMAND, ["strides", "128", "8", "--json"])  # C(31, 3) = 4,495: proven
    assert r.exit_code == 0 and json.loads(r.stdout)["status"] == "optimal"


def test_a_rail_fabric_of_a_million_gpus_a_server_is_refused_before_its_leaves(monkeypatch):
    """``fabric rail --servers 16 --gpus-per-server 1000000`` built a million rail leaves (54 s
    CPU) before the Fabric refused the GPU count; now checked first."""
    import importlib

    fat_tree = importlib.import_module("topoopt.fabrics.fat_tree")  # the module, not the function

    def fail(*a, **k):
        raise AssertionError("leaves built before the check")

    monkeypatch.setattr(fat_tree, "_clos_fabric", fail)
    line = one_line(["fabric", "rail", "--servers", "16", "--gpus-per-server", "1000000"])
    assert "gpus_per_server: got 1000000" in line and "1..65,536" in line, line


def test_a_jobs_file_of_many_repeated_plans_is_refused_before_reading_them(tmp_path):
    """advise on 100,000 jobs naming one plan took 82 s of CPU (each plan read, then a
    quadratic duplicate scan) to say 'each plan once'; the names are checked first."""
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"plan": "vgg16-dp", "weight": 1}] * 100_000))
    line = one_line(["advise", str(jobs), "--json"])
    assert "jobs.plan: got 'vgg16-dp'" in line and "each plan once" in line, line


def test_a_collective_is_sized_before_its_fabric_schedule_and_routes(monkeypatch):
    """``collective --fabric ideal --servers 100000`` answered its one line only after a
    MemoryError (the ECMP route count's 100,000 x 100,001 distance matrix, 74.5 GiB); the
    expander of 1,000,000 servers after building it. Now the transfers and the route arrays
    (``5 x 8 x n x N`` bytes) are estimated from the counts before anything is built."""
    import importlib

    from solvers.collectives.sizes import ROUTE_ARRAYS, check_collective_size

    fb = importlib.import_module("topoopt.fabrics")
    sched = importlib.import_module("solvers.collectives.schedule")

    def fail(*a, **k):
        raise AssertionError("built before the size check")

    for name in ("ideal", "expander"):
        monkeypatch.setattr(fb, name, fail)
    monkeypatch.setattr(sched, "template_schedule", fail)
    base = ["collective", "--collective", "all-reduce", "--size", "1GB"]
    line = one_line([*base, "--fabric", "ideal", "--servers", "100000"])
    est = ROUTE_ARRAYS * 8 * 100_000 * 100_000 / 1e9  # 400 GB
    assert f"ECMP routes to 100,000 destinations over 100,000 nodes (about {est:,.0f} GB" in line
    assert "TOPOOPT_MEMORY_BUDGET_GB" in line, line
    line = one_line([*base, "--fabric", "expander", "--servers", "1000000", "--degree", "8"])
    assert "about 1,000,000 transfers" not in line and "1,000,000 destinations" in line, line
    line = one_line([*base, "--fabric", "ideal", "--servers", "3000", "--algorithm", "direct"])
    assert f"about {3000 * 2999:,} transfers for a direct all-reduce" in line, line
    assert "TOPOOPT_MAX_FLOWS" in line, line
    # the library entry checks the built fabric's node count (a design's routes: no route term)
    check_collective_size("all-reduce", "ring", 1_000, 1_001)  # 0.04 GB: within the budget
    check_collective_size("all-reduce", "ring", 100_000, 100_001, routed=False)


def test_cosearch_with_no_plan_that_fits_is_one_line(tmp_path):
    """GPT-3's shape with 1,000,000 layers on 2 x 2 GPUs of 80 GB: no plan of the space fits
    (memory, or nothing to shard), and the refusal is the only stderr line (the "0 plans fit"
    count used to come first: two lines)."""
    doc = {"model": {"base": "gpt3-175b", "layers": 10**6},
           "parallelism": {"tp": 2, "pp": 2, "dp": 1, "micro_batch_size": 1,
                           "global_batch_size": 4},
           "cluster": {"servers": 2, "gpus_per_server": 2}}  # fmt: skip
    plan = tmp_path / "layers.json"
    plan.write_text(json.dumps(doc))
    line = one_line(["cosearch", plan, "--json"])
    assert "room for at least one plan" in line and "'memory':" in line


def test_whatif_sweep_samples_are_capped_before_any_simulation(tmp_path, monkeypatch):
    """``whatif --sweep --samples 1000000000`` ran for ever (two simulations and a
    re-optimisation a sample); the samples are capped at 100, where the sweep's seeds
    ``seed * 1000 + 10 i + k`` stop being distinct, before the first simulation."""
    import topoopt.app.studies.whatif as wi

    design = _design_file(tmp_path)

    def fail(*a, **k):
        raise AssertionError("simulated before the check")

    monkeypatch.setattr(wi, "_iteration_s", fail)
    for n in (101, 10**9, 0):
        line = one_line(["whatif", PLAN, "--design", design, "--sweep", "--samples", n])
        assert line == f"error: --samples: got {n}; allowed: an integer in 1..100"
    assert wi.MAX_SWEEP_SAMPLES == 100 and len({10 * i + 2 for i in range(100)}) == 100
