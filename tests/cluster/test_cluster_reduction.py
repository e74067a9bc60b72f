"""``topoopt cluster`` simulates every job through the exact symmetry reduction (on its circuits
and alone on the ideal switch): the reduced document equals ``--no-reduction``'s, each job says
whether the reduction was used and why not, and ``params.reduction`` says which was asked."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from click.testing import CliRunner

from solvers.cluster.job_design import _job_reduction
from topoopt.app.cli.app import app

SEEDS = Path(__file__).resolve().parents[1] / "fuzz" / "seeds"
JOBS = SEEDS / "cluster-jobs.yaml"  # vgg16 on 4 servers (placed) and on 3 (given, repaired)
ARRIVALS = SEEDS / "cluster-arrivals.yaml"
TIMES = ("iteration_s", "alone_ideal_s", "slowdown")
OFF = "off: not asked (--no-reduction)"


def _cluster(*flags: str) -> dict:
    args = ["cluster", str(JOBS), "--servers", "8", "--degree", "2", "--json", *flags]
    r = CliRunner().invoke(typer.main.get_command(app), [*args, "--arrivals", str(ARRIVALS)])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    return _cluster(), _cluster("--no-reduction")


def _job_rows(doc: dict) -> list[dict]:
    """Every job record of the document: at time 0, after each event, at the end."""
    rows = [*doc["jobs"], *doc["final_jobs"]]
    for ev in doc["events"]:
        rows += ev["jobs"]
    return rows


def test_every_job_time_equals_the_plain_model(both):
    red, plain = both
    a, b = _job_rows(red), _job_rows(plain)
    assert [j["name"] for j in a] == [j["name"] for j in b] and len(a) >= 5
    for x, y in zip(a, b, strict=True):
        assert x["servers"] == y["servers"] and x.get("circuits") == y.get("circuits")
        for key in TIMES:
            assert abs(x[key] - y[key]) <= 1e-9 * abs(y[key]), (x["name"], key)


def test_each_job_says_whether_the_reduction_was_used(both):
    red, plain = both
    # the repaired 3-server job ("small": a path of 2 circuits, not a ring) is reduced too
    assert {j["reduction"] for j in _job_rows(red)} == {"on"}
    assert {j["reduction"] for j in _job_rows(plain)} == {OFF}
    assert red["params"] == {"reduction": True} and plain["params"] == {"reduction": False}
    assert next(j for j in red["jobs"] if j["name"] == "small")["repaired_circuits"] == 1


def test_a_job_names_the_simulation_that_ran_plain():
    """``on`` only when both simulations were reduced; otherwise the first off one and why."""

    def it(status: str, reason: str | None = None) -> SimpleNamespace:
        info = {"status": status} if reason is None else {"status": status, "reason": reason}
        return SimpleNamespace(info={"reduction": info})

    on, none = it("on"), it("off", "no symmetry: every flow is its own class")
    assert _job_reduction(on, on) == "on"
    assert _job_reduction(none, on) == "off: no symmetry: every flow is its own class"
    assert _job_reduction(none, it("off", "x")) == "off: no symmetry: every flow is its own class"
    assert _job_reduction(on, none) == "off: alone_ideal: no symmetry: every flow is its own class"
    assert _job_reduction(on, it("off")) == "off: alone_ideal"
