"""Every command as a user meets it: --help, --json that parses, exit codes, stdout holds only
data and progress goes to stderr, bad input gives one line and exit 2 (typer's runner and real
subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from solvers.problem import DesignProblem
from topoopt.cli.app import app
from traffic.load import load_workload

runner = CliRunner()
COMMANDS = ["traffic", "fabric", "netsim", "strides", "design", "simulate", "compare", "demo"]
FABRIC_KINDS = [
    "ideal",
    "fat-tree",
    "leaf-spine",
    "rail",
    "torus",
    "tpu-v4",
    "direct",
    "expander",
    "hybrid",
]


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "topoopt.cli", *map(str, args)], capture_output=True, text=True
    )


def test_root_help_lists_every_command():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for c in COMMANDS:
        assert c in r.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_every_command(command):
    r = runner.invoke(app, [command, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.stdout


@pytest.mark.parametrize("kind", FABRIC_KINDS)
def test_help_of_every_fabric_kind(kind):
    r = runner.invoke(app, ["fabric", kind, "--help"])
    assert r.exit_code == 0, r.output


BAD = [
    (["traffic", "no-such-plan"], "PLAN"),
    (["traffic", "gpt3-175b", "--algorithm", "zigzag"], "algorithm"),
    (["fabric", "fat-tree", "--k", "5"], "k"),
    (["fabric", "direct", "--servers", "8", "--degree", "0"], "degree"),
    (["strides", "128", "5"], "5"),
    (["design", "dlrm", "--degree", "0", "--solver", "topoopt"], "degree"),
    (["design", "dlrm", "--solver", "magic"], "solver"),
    (["simulate", "dlrm"], "--design/--fabric"),
    (["simulate", "dlrm", "--fabric", "mesh"], "fabric"),
    (["compare", "dlrm", "--fabrics", "ideal,warp-drive"], "fabrics"),
    (["netsim", "missing.json"], "missing.json"),
]


@pytest.mark.parametrize("args,field", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_one_line_exit_2(args, field, tmp_path):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    assert field in r.stderr
    # our own errors are exactly one line; typer's usage errors are a small box naming the option
    assert len(lines) == 1 or "Usage" in r.stderr


def test_json_parses_and_progress_goes_to_stderr(tmp_path):
    design = tmp_path / "design.json"
    r = cli(
        "design",
        "dlrm",
        "--degree",
        "4",
        "--solver",
        "joint",
        "--time-limit",
        "5",
        "--out",
        design,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in (
        "servers",
        "degree",
        "link_bandwidth",
        "circuits",
        "rings",
        "routing",
        "solver",
        "status",
        "objective_s",
        "lower_bound_s",
        "gap",
        "wall_s",
    ):
        assert key in doc
    # the bound is at least the ideal switch's (written out here), the gap is (objective - bound)
    # / objective
    prob = DesignProblem.from_workload(load_workload("dlrm"), 4, 12.5e9)
    n = prob.n
    ideal = sum(
        max(ph.out_bytes(n).max(), ph.in_bytes(n).max()) / (4 * 12.5e9) for ph in prob.phases
    )
    assert doc["lower_bound_s"] >= ideal * (1 - 1e-9)
    assert doc["gap"] == pytest.approx(
        (doc["objective_s"] - doc["lower_bound_s"]) / doc["objective_s"], abs=1e-12
    )
    assert "joint:" in r.stderr or "wrote" in r.stderr
    assert json.loads(design.read_text())["objective_s"] == doc["objective_s"]

    r = cli("simulate", "dlrm", "--design", design, "--json")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)
    assert sim["iteration_s"] >= sim["compute_s"] > 0
    assert set(sim["exposed_comm_s_by_class"]) == {"dp", "embedding"}

    csv = tmp_path / "cmp.csv"
    r = cli(
        "compare",
        "vgg16-dp",
        "--fabrics",
        "ideal,fat-tree,expander",
        "--degree",
        "4",
        "--json",
        "--csv",
        csv,
    )
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert [x["fabric"] for x in rows] == ["ideal", "fat-tree", "expander"]
    assert rows[0]["ratio_to_ideal"] == 1.0
    assert csv.read_text().startswith("fabric,")
    assert "[1/3] ideal" in r.stderr

    r = cli("fabric", "expander", "--servers", "16", "--degree", "4", "--seed", "3", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["servers"] == 16

    r = cli("strides", "64", "4", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "optimal"


def test_hybrid_design_and_simulation(tmp_path):
    out, html = tmp_path / "hybrid.json", tmp_path / "hybrid.html"
    r = cli(
        "design",
        "dlrm",
        "--fabric",
        "hybrid",
        "--degree",
        "2",
        "--oversubscription",
        "4",
        "--time-limit",
        "5",
        "--out",
        out,
        "--html",
        html,
        "--json",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["electrical"]["family"] == "leaf-spine" and doc["degree"] == 2
    assert doc["gap"] == pytest.approx(
        (doc["objective_s"] - doc["lower_bound_s"]) / doc["objective_s"], abs=1e-12
    )
    assert 'id="design-circuits"' in html.read_text()
    r = cli("simulate", "dlrm", "--design", out, "--json")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)
    assert sim["fabric"] == "hybrid" and sim["iteration_s"] >= sim["compute_s"] > 0
