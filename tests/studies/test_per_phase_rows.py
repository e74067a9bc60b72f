"""Per-phase circuits in ``compare`` and ``advise`` (``--per-phase``, ``--delay-us``): the
``ocs-spine`` and ``hybrid`` rows equal what ``reconfig --fabric ...`` reports on the same job,
are never slower than the static rows, are flagged in the row and the verdict; bad option values
are one line and exit 2. The hybrid's static controls (the search's demand circuits held static)
are ``compare``'s hybrid row with other circuits.

The job: a 2-stage pipeline of 4 replicas on 8 servers, 4 ports of 100 G (the hybrid: 2 NICs and
2 optical ports), 10 us delay; the hybrid reconfigures three times an iteration.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app

TINY = """\
model: {base: llama3-8b, layers: 2}
parallelism: {tp: 1, pp: 2, dp: 4, micro_batch_size: 1, global_batch_size: 4}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 8, gpus_per_server: 1}
"""
B = 12.5e9
DELAY = 1e-5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The plan's path, its workload and ``reconfig``'s results (spine, hybrid) at 10 us."""
    from topoopt.app.studies.hybrid_reconfig import hybrid_reconfig
    from topoopt.app.studies.spine_reconfig import spine_reconfig
    from traffic.load import load_workload

    path = tmp_path_factory.mktemp("per_phase") / "tiny.yaml"
    path.write_text(TINY)
    w = load_workload(str(path))
    spine, _ = spine_reconfig(w, 4, B, DELAY)
    # compare's hybrid LP clock (30 s) for the phase sets too; the tiny LPs end far sooner
    hyb, _ = hybrid_reconfig(w, 4, B, DELAY, time_limit_s=30.0)
    return path, w, {"ocs-spine": spine, "hybrid": hyb}


def test_compare_rows_are_reconfigs_and_never_slower(tiny):
    from topoopt.app.studies.compare import compare, json_rows

    _, w, ref = tiny
    fabs = ["ocs-spine", "hybrid"]
    res = compare(w, fabs, 4, B, per_phase_delay_s=DELAY, time_limit_s=30.0)
    rows = {r["fabric"]: r for r in json_rows(res.table)}
    for f in fabs:
        r, rc = rows[f], ref[f]
        assert r["per_phase"] is True and r["reconfig_delay_s"] == DELAY
        # exactly reconfig's figures: the static circuits' and the chosen schedule's
        assert r["static_iteration_s"] == rc.static_iteration_s
        assert r["iteration_s"] == rc.iteration_s <= r["static_iteration_s"]
        assert r["reconfigurations"] == rc.reconfigurations
        assert r["schedule"] == [cs.label for cs in rc.schedule.sets]
    h = rows["hybrid"]
    assert h["reconfigurations"] == 3 and h["iteration_s"] < h["static_iteration_s"]
    assert isinstance(h["reconfigurations"], int)
    # the chosen schedule's exposed time: its iteration (dark times included) less compute
    compute = ref["hybrid"].info["compute_s"]
    assert h["exposed_comm_s"] == pytest.approx(h["iteration_s"] - compute, rel=1e-12)
    assert rows["ideal"]["per_phase"] is None  # only the per-phase rows carry the flag
    assert res.params["per_phase_delay_s"] == DELAY
    # the static rows are reconfig's static runs (tests/solvers/test_reconfig_spine.py and
    # test_reconfig_hybrid.py: compare's static rows are those runs, to the bit)
    from topoopt.app.studies.compare import per_phase_sentence

    s = per_phase_sentence(res.table)
    assert s.startswith("Per-phase circuits at a 10 us OCS delay")
    assert "ocs-spine keeps its static circuits" in s and "3 reconfigurations" in s


def test_advise_row_is_reconfigs_and_the_verdict_says_so(tiny):
    import pandas as pd

    from topoopt.app.studies.advise import evaluate, verdict_sentences
    from topoopt.fabrics.cost import load_prices
    from traffic.plan import load_plan

    path, _, ref = tiny
    task = {
        "job": "tiny", "plan": load_plan(str(path)), "weight": 1.0, "fabric": "hybrid",
        "degree": 4, "link_bandwidth": B, "oversubscription": 4.0, "seed": 0,
        "time_limit_s": 30.0, "prices": load_prices(), "per_phase_delay_s": DELAY,
    }  # fmt: skip
    row = evaluate(task)
    rc = ref["hybrid"]
    assert row["per_phase"] is True and row["per_phase_warning"] is None
    assert row["static_iteration_s"] == rc.static_iteration_s
    assert row["iteration_s"] == rc.iteration_s < rc.static_iteration_s
    assert row["reconfigurations"] == 3 and row["dark_s"] == DELAY
    assert row["iterations_per_s_per_musd"] == pytest.approx(
        1e6 / (rc.iteration_s * row["capex_usd"]), rel=1e-12
    )
    rows = pd.DataFrame([row])
    judged = {"equal_capex": {"winner": "hybrid", "runner_up": None, "budget_usd": 1e9},
              "equal_iteration": {"winner": None}}  # fmt: skip
    text = verdict_sentences("tiny", rows, judged, None)
    from topoopt.app.studies.advise import AdviseResult, json_document

    static = {"job": "tiny", "fabric": "fat-tree", "iteration_s": 1.0}  # no per-phase columns
    doc = json_document(AdviseResult(pd.DataFrame([static, row]), {}, {}, []))
    assert doc["rows"][0]["per_phase"] is None and doc["rows"][1]["reconfigurations"] == 3
    assert isinstance(doc["rows"][1]["reconfigurations"], int)
    assert "hybrid with per-phase circuits (10 us OCS delay)" in text[0]
    assert any(s.startswith("tiny: per-phase circuits at a 10 us OCS delay") for s in text)


@pytest.mark.parametrize("command", ["compare", "advise"])
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--delay-us", "10"], "--delay-us: got 10.0; allowed: only with --per-phase"),
        (["--per-phase", "--delay-us", "-1"], "--delay-us: got -1.0"),
        (["--per-phase", "--delay-us", "nan"], "--delay-us: got nan"),
        (["--per-phase", "--delay-us", "inf"], "--delay-us: got inf"),
    ],
)
def test_bad_per_phase_options_one_line_exit_2(command, args, needle, tmp_path):
    r = CliRunner().invoke(app, [command, "vgg16-dp", *args, "--json"])
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_per_phase_refuses_priorities():
    from topoopt.app.studies.compare import compare
    from traffic.build import workload_from_plan
    from traffic.errors import InputError

    w = workload_from_plan("vgg16-dp")
    with pytest.raises(InputError, match="none with per-phase circuits"):
        compare(w, ["hybrid"], 4, B, per_phase_delay_s=0.0, priority="dp")
    with pytest.raises(InputError, match="per_phase_delay_s"):
        compare(w, ["hybrid"], 4, B, per_phase_delay_s=-1.0)


def test_static_controls_are_compares_hybrid_with_other_circuits(tiny):
    from solvers.reconfig.hybrid_phase import optical_circuits
    from topoopt.app.studies.compare import build_fabric, hybrid_run
    from topoopt.app.studies.hybrid_reconfig import static_controls
    from topoopt.flowsim.iteration import simulate_iteration

    _, w, ref = tiny
    rc = ref["hybrid"]
    # hybrid_run with the circulant's own circuits is compare's hybrid row, to the bit
    row = build_fabric("hybrid", w, 4, B, time_limit_s=30.0)
    again = hybrid_run("hybrid", w, 4, B, time_limit_s=30.0, circuits=optical_circuits(row.fabric))
    for a in ("src", "dst", "capacity", "link_kind"):
        assert np.array_equal(getattr(row.fabric, a), getattr(again.fabric, a))
    it = simulate_iteration(again.workload, again.fabric, routing=again.routing,
                            exposed_by_class=False).iteration_s  # fmt: skip
    assert it == rc.static_iteration_s
    rows = static_controls(w, 4, B, rc, time_limit_s=30.0)
    labels = [r["circuits"] for r in rows]
    phase_sets = {cs.label for c in rc.candidates for cs in c[1:]}
    assert labels[0] == "demand:iteration" and set(labels[1:-1]) == phase_sets
    assert labels[-1] == "union"  # the chosen schedule changes circuits: its union is tried
    for r in rows:
        assert r["fits"] == (r["ports_used"] <= 2)
        assert (r["iteration_s"] is not None) == r["fits"]
        if r["fits"]:  # a static hybrid: not below the search's lower bound
            assert r["iteration_s"] >= rc.lower_bound_s
    # the union of three sets of 2 ports a server needs more than the 2 optical ports
    assert not rows[-1]["fits"] and rows[-1]["ports_used"] > 2
    json.dumps(rows, allow_nan=False)
