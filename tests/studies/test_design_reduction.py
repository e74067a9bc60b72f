"""``topoopt design`` simulates the design's iteration through the exact symmetry reduction, as
``simulate --design`` does: the reduced document equals ``--no-reduction``'s, its ``reduction``
says whether the reduction was used and why not (a design's class priorities turn it off), and
``params.reduction`` says which was asked. The searches' own flow-model judging is unchanged."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import typer
from click.testing import CliRunner

from solvers import DesignProblem, solve
from topoopt.app.cli.app import app
from topoopt.app.studies.simulate import design_iteration_within
from traffic.build import workload_from_plan

PLAN = {  # tensor, pipeline and data parallel on 8 servers of 2 GPUs: replicas and stages repeat
    "model": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 1024, "seq_len": 256},
    "parallelism": {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 8},
    "cluster": {"servers": 8, "gpus_per_server": 2},
}
SMALL = {  # the same on 4 servers: the joint search is cheap there
    **PLAN,
    "parallelism": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 2},
    "cluster": {"servers": 4, "gpus_per_server": 2},
}
OFF = "off: not asked (--no-reduction)"


def _design(plan, *args: str) -> dict:
    r = CliRunner().invoke(typer.main.get_command(app), ["design", str(plan), "--json", *args])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    folder = tmp_path_factory.mktemp("design_reduction")
    for name, doc in (("plan", PLAN), ("small", SMALL)):
        (folder / f"{name}.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("plan", ("--solver", "topoopt", "--degree", "4")),
        ("small", ("--solver", "joint", "--degree", "2", "--work-limit", "1")),
        ("plan", ("--fabric", "rail", "--degree", "2")),
    ],
    ids=["topoopt", "joint", "rail"],
)
def test_the_reduced_design_document_equals_the_plain_one(plans, name, args):
    plan = plans / f"{name}.json"
    red, plain = _design(plan, *args), _design(plan, *args, "--no-reduction")
    key = "iteration_s" if "--fabric" in args else "simulated_iteration_s"
    x, y = red[key], plain[key]
    assert math.isfinite(y) and abs(x - y) <= 1e-9 * y, (x, y)
    assert red["reduction"] == "on" and plain["reduction"] == OFF
    assert red["params"] == {"reduction": True, "efficiency": None}
    assert plain["params"] == {"reduction": False, "efficiency": None}
    if key == "simulated_iteration_s":  # the search is the same: same circuits, same objective
        assert red["circuits"] == plain["circuits"] and red["objective_s"] == plain["objective_s"]
        assert red["solver"] == args[1] and red["info"] == plain["info"]


def test_a_design_with_priorities_is_simulated_plainly_and_says_why():
    """Strict class priorities run on the epoch engine, which has no quotient: the reduction
    turns itself off and says so, with the plain model's iteration time."""
    w = workload_from_plan(PLAN)
    d = solve(DesignProblem.from_workload(w, 4, 12.5e9), "topoopt", seed=0)
    on_s, on = design_iteration_within(w, d, math.inf)
    plain_s, off = design_iteration_within(w, d, math.inf, reduction=False)
    assert on == "on" and off == OFF and abs(on_s - plain_s) <= 1e-9 * plain_s
    ranked = replace(d, priority=("tp",))
    got_s, why = design_iteration_within(w, ranked, math.inf)
    assert why == "off: priorities / split all-reduce (epoch engine)"
    want_s, _ = design_iteration_within(w, ranked, math.inf, reduction=False)
    assert got_s == want_s
