"""``topoopt collective``: the JSON contract and one-line errors (exit 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app

runner = CliRunner()

BASE = ["collective", "--fabric", "expander", "--servers", "8", "--degree", "3", "--seed", "1"]


def invoke(*args):
    return runner.invoke(app, [*map(str, args)])


def test_json_keys_and_values():
    r = invoke(*BASE, "--collective", "all-gather", "--size", "1e9", "--algorithm", "blink",
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert {"time_s", "lower_bound_s", "algorithm", "schedule"} <= set(doc)
    assert doc["algorithm"] == "blink"
    # 100 Gbps links, 3 per server: (n-1)/n * S / (3 * 12.5e9)
    assert doc["lower_bound_s"] == pytest.approx(7 / 8 * 1e9 / 37.5e9)
    assert doc["lower_bound_s"] <= doc["time_s"] <= 1.01 * doc["lower_bound_s"]
    assert doc["schedule"]["transfers"] > 0 and doc["schedule"]["members"] == 8


def test_ring_on_a_torus_is_the_closed_form():
    r = invoke("collective", "--fabric", "torus", "--dims", "4", "--link-gbps", "8",
               "--collective", "all-gather", "--size", "1e6", "--json")  # fmt: skip
    doc = json.loads(r.stdout)
    assert doc["algorithm"] == "ring"
    # the 4-ring both ways (two NCCL-like rings of S/2): (n-1)/n * (S/2) / B plus one hop
    assert doc["time_s"] == pytest.approx(3 / 4 * 0.5e6 / 1e9 + 1e-6)
    assert doc["schedule"]["rings"] == 2


def test_human_table():
    r = invoke("collective", "--fabric", "dgx1", "--gpus", "0,1,2,4,5", "--collective",
               "broadcast", "--size", "1e8", "--algorithm", "blink")  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "time / bound" in r.stdout and "blink" in r.stdout


@pytest.mark.parametrize(
    "args, field",
    [
        (["--collective", "all-gather", "--size", "1e6", "--algorithm", "bogus"], "--algorithm"),
        (["--collective", "gather", "--size", "1e6"], "--collective"),
        (["--collective", "all-gather", "--size", "0"], "--size"),
        (["--collective", "all-gather", "--size", "-5"], "--size"),
        (["--collective", "all-gather", "--size", "lots"], "--size"),
        (["--collective", "all-gather", "--size", "nan"], "--size"),
        (["--collective", "all-gather", "--size", "1e6", "--chunks", "0"], "--chunks"),
        (["--collective", "broadcast", "--size", "1e6", "--root", "9"], "root"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, field):
    r = invoke(*BASE, *args)
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0]
    assert r.stdout == ""


@pytest.mark.parametrize(
    "args, field",
    [
        (["--design", "/nonexistent/design.json"], "--design"),
        ([], "--fabric/--design"),
        (["--fabric", "expander", "--design", "x.json"], "--fabric/--design"),
        (["--fabric", "hypercube"], "--fabric"),
        (["--fabric", "expander", "--servers", "8"], "--degree"),
        (["--fabric", "expander", "--servers", "8", "--degree", "3", "--link-gbps", "-1"],
         "--link-gbps"),
        (["--fabric", "dgx1", "--gpus", "0,9"], "gpus"),
    ],
)  # fmt: skip
def test_bad_fabric_or_design_is_one_line_exit_2(args, field):
    r = invoke("collective", *args, "--collective", "all-gather", "--size", "1e6")
    assert r.exit_code == 2
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0]


def test_design_file(tmp_path):
    """A design.json (TopoOpt's method on DLRM) is realised with its circuits and routing."""
    from solvers.model.problem import DesignProblem
    from solvers.registry import solve
    from traffic.load import load_workload

    d = solve(DesignProblem.from_workload(load_workload("dlrm"), 4, 12.5e9), "topoopt", seed=0)
    path = tmp_path / "design.json"
    path.write_text(d.to_json())
    r = invoke("collective", "--design", path, "--collective", "all-reduce", "--size", "1e8",
               "--algorithm", "ring", "--json")  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schedule"]["members"] == d.servers
    assert doc["time_s"] >= doc["lower_bound_s"] > 0
    # the design sets its fabric: a fabric option beside it was ignored in silence
    for extra in (["--link-gbps", "1"], ["--degree", "2"], ["--oversubscription", "2"]):
        r = invoke("collective", "--design", path, "--collective", "all-reduce", "--size", "1e8",
                   *extra)  # fmt: skip
        assert r.exit_code == 2 and r.stderr.strip() == (
            f"error: {extra[0]}: got {float(extra[1]) if extra[0] != '--degree' else 2}; "
            "allowed: none with --design (the design sets its fabric)"
        )
