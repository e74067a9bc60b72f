"""Every command as a user meets it: --help, --json that parses, exit codes, stdout holds only
data and progress goes to stderr, bad input gives one line and exit 2 (typer's runner and real
subprocesses)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from solvers.model.problem import DesignProblem
from topoopt.app.cli.app import app
from topoopt.app.cli.help_style import fill_code_defaults
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
        [sys.executable, "-m", "topoopt.app.cli", *map(str, args)], capture_output=True, text=True
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


def _all_commands():
    """(path, click command) of every command and group, walked from the application."""
    import typer.main

    out = []

    def walk(cmd, path):
        out.append((path, cmd))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


ALL = _all_commands()
WIDE = {"COLUMNS": "200", "TERMINAL_WIDTH": "200"}


def _flat(text: str) -> str:
    """Help text without whitespace and panel borders (rich wraps long help lines)."""
    return "".join(ch for ch in text if not ch.isspace() and ch not in "│╭╮╰╯─")


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) or "root" for p, _ in ALL])
def test_help_reads_as_written(path, cmd):
    r = runner.invoke(app, [*path, "--help"], env=WIDE)
    assert r.exit_code == 0, r.output
    text = r.stdout
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    # metavars: PLAN, not {plan}; no <bool>/<str>/<int>/<float>/<path> anywhere
    assert "{" not in usage and "<" not in usage, usage
    for tag in ("<bool>", "<str>", "<int>", "<float>", "<path>"):
        assert tag not in text, (tag, text)
    for p in cmd.params:
        if p.param_type_name == "argument":
            assert p.name.upper() in usage.split(), (p.name, usage)
        # help texts print as written: rich markup must not eat "[u,v,count]" and the like
        if getattr(p, "help", None):
            written = fill_code_defaults(p.help).replace("\\[", "[")  # defaults from the code
            assert "@@" not in text and _flat(written) in _flat(text), (p.name, written)
    flags = [p for p in cmd.params if getattr(p, "is_flag", False)]
    for f in flags:
        line = next(x for x in text.splitlines() if f.opts[0] in x.split())
        assert "BOOLEAN" not in line and "<" not in line, line


def test_help_keeps_brackets_and_lists_fabrics_in_full():
    from topoopt.app.cli.commands.compare import ALL_FABRICS
    from topoopt.app.studies.compare import FABRICS

    assert tuple(ALL_FABRICS) == tuple(FABRICS)
    r = runner.invoke(app, ["design", "--help"], env=WIDE)
    assert "[u,v,count]" in _flat(r.stdout)
    r = runner.invoke(app, ["fabric", "direct", "--help"], env=WIDE)
    assert "'uv[count]'" in _flat(r.stdout)
    for command in ("compare", "simulate"):
        r = runner.invoke(app, [command, "--help"], env=WIDE)
        section = r.stdout[r.stdout.index("--fabric") : r.stdout.index("--degree")]
        words = set(re.findall(r"[a-z][a-z0-9-]*", section))
        assert set(FABRICS) <= words, set(FABRICS) - words
        assert "…" not in r.stdout  # no default cut short
    r = runner.invoke(app, ["design", "--help"], env=WIDE)
    assert "[optical|hybrid|rail|rail-only]" in r.stdout
    assert "[topoopt|topoopt-released|expander|joint]" in r.stdout


def _unit_options():
    """(command path, required filler args, option, unit) for every *_gbps / *_ms / *_us
    option."""
    out = []
    for path, cmd in ALL:
        if getattr(cmd, "commands", None):
            continue
        filler = []
        for p in cmd.params:
            if not p.required:
                continue
            value = {"INTEGER": "8", "FLOAT": "1.0"}.get(p.metavar, "dlrm")
            if p.metavar.startswith("["):  # a choice: its first value
                value = p.metavar.strip("[]").split("|")[0]
            filler += [value] if p.param_type_name == "argument" else [p.opts[0], value]
        for p in cmd.params:
            for suffix, unit in (("_gbps", "Gbps"), ("_ms", "ms"), ("_us", "us")):
                if p.name.endswith(suffix):
                    out.append((path, filler, p.opts[0], unit))
    return out


UNIT_OPTIONS = _unit_options()


@pytest.mark.parametrize(
    "path,filler,option,unit", UNIT_OPTIONS, ids=[f"{' '.join(u[0])} {u[2]}" for u in UNIT_OPTIONS]
)
def test_errors_speak_the_users_units(path, filler, option, unit):
    r = runner.invoke(app, [*path, *filler, option, "-100"])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        f"error: {option}: got -100.0; allowed: a finite number of {unit} "
        + (">= 0" if unit in ("ms", "us") else "> 0")
    ]


def test_unit_options_are_found():
    found = {(" ".join(p), o) for p, _, o, _ in UNIT_OPTIONS}
    assert {("compare", "--link-gbps"), ("design", "--electrical-gbps")} <= found
    assert ("fabric hybrid", "--optical-gbps") in found
    assert ("fabric tpu-v4", "--delay-us") in found  # one name and unit for the delay
    assert ("reconfig", "--delay-us") in found
    assert len(found) >= 15


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
    ):
        assert key in doc
    assert "wall_s" not in doc  # a wall-clock field: only with topoopt --timings
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


def _fake_demo(**kwargs):
    """A stand-in for run_demo: a few progress lines, one comparison row, no solving."""
    import pandas as pd

    from topoopt.app.studies.demo import DemoResult

    say, step = kwargs["progress"], kwargs["on_step"]
    say("traffic of dlrm")
    step("traffic dlrm")
    say("[1/9] ideal: building [u,v,count]")
    row = {"plan": "dlrm", "degree": 4, "fabric": "ideal", "iteration_s": 0.01, "comm_s": 0.005}
    row.update(exposed_comm_s=0.002, capex_usd=1e6, power_w=1e3, ratio_to_ideal=1.0)
    return DemoResult(pd.DataFrame([{"plan": "dlrm"}]), pd.DataFrame([row]), {}, [])


def test_demo_progress_lines_are_plain_and_wrote_is_said_once(tmp_path, monkeypatch):
    import topoopt.app.studies.demo as demo

    monkeypatch.setattr(demo, "run_demo", _fake_demo)
    out = tmp_path / "demo.html"
    r = runner.invoke(app, ["demo", "--out", str(out)], env=WIDE)
    assert r.exit_code == 0, r.output
    err = r.stderr.splitlines()
    # progress lines exactly as written: no time column, no "demo.py:49" source location
    assert "traffic of dlrm" in err and "[1/9] ideal: building [u,v,count]" in err
    assert not [ln for ln in err if re.search(r"\w+\.py:\d+", ln)], err
    assert [ln for ln in err if str(out) in ln] == [f"wrote {out}"]
    assert str(out) not in r.stdout  # said once, on stderr
    assert "ideal" in r.stdout
    page = out.read_text()
    assert page.index('<table class="summary">') < page.index("</body>")


def test_real_demo_progress_has_no_source_locations(demo_run):
    err = demo_run.proc.stderr
    assert "traffic of dlrm" in err
    assert not re.search(r"demo\.py:\d+|\w+\.py:\d+\s*$", err, re.M), err[-2000:]
    assert err.count(f"wrote {demo_run.report}") == 1


@pytest.mark.parametrize(
    "args,caption,cell",
    [
        (["fabric", "fat-tree", "--k", "4"], "Fabric", '<td class="num">16</td>'),
        (["traffic", "dlrm"], "Bytes per iteration, by class", "<td>embedding</td>"),
    ],
    ids=["fabric", "traffic"],
)
def test_html_pages_start_with_a_summary_table(tmp_path, args, caption, cell):
    out = tmp_path / "page.html"
    r = runner.invoke(app, [*args, "--html", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    top = page.index(f'<table class="summary"><caption>{caption}</caption>')
    assert top < page.index('<section class="figure">')
    assert cell in page[top : page.index("</table>", top)]


def test_simulate_prices_a_nic_faster_than_the_table_with_prices(tmp_path):
    """1.6 Tbps NICs (past the default table's 800 G) were refused by every `simulate`, which had
    no --prices: now the error says what lifts it, and a table listing 1,600 G prices the
    fabric with it (16 servers x 8 ports: the NICs and transceivers at the YAML's prices)."""
    base = ["simulate", "dlrm", "--fabric", "torus", "--link-gbps", "1600", "--json"]
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and r.stdout == ""
    assert "prices.nic_port: got 1600.0" in r.stderr and "--prices YAML" in r.stderr
    table = tmp_path / "fast.yaml"
    table.write_text(
        "nic_port:\n  1600: {capex_usd: 2400, power_w: 30, source: test}\n"
        "transceiver:\n  1600: {capex_usd: 1600, power_w: 25, source: test}\n"
    )
    r = runner.invoke(app, [*base, "--prices", str(table)])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["capex_breakdown"]["nic"] == 16 * 8 * 2400.0
    assert doc["capex_breakdown"]["transceiver"] == 16 * 8 * 1600.0


def test_brackets_in_the_users_text_print_as_written(tmp_path):
    """Names, ids and paths are the user's text: "[/bold]" in a job name, a netsim link id or a
    ``--set`` value was read by rich as a closing tag (MarkupError, a traceback after the HTML
    report was written) and "[red]" in a path vanished from the title."""
    r = runner.invoke(app, ["traffic", "vgg16-dp", "--set", "model.name=x[/bold]"])
    assert r.exit_code == 0, r.output[-2000:]
    assert "vgg16-dp.yaml with model.name=x[/bold]: traffic per iteration" in r.stdout
    sim = tmp_path / "net.json"
    sim.write_text(json.dumps({
        "links": [{"id": "[/bold]", "capacity": 1e10}],
        "flows": [{"id": "[red]f", "bytes": 1e6, "paths": [{"links": ["[/bold]"]}]}],
    }))  # fmt: skip
    r = runner.invoke(app, ["netsim", str(sim)])
    assert r.exit_code == 0, r.output[-2000:]
    assert "[red]f" in r.stdout and "makespan: 0.1 ms" in r.stdout
    plan = tmp_path / "[red]"
    plan.mkdir()
    (plan / "p.yaml").write_text(
        "model: vgg16\nparallelism: {dp: 8, micro_batch_size: 16, global_batch_size: 128}\n"
        "cluster: {servers: 4, gpus_per_server: 2}\n"
    )
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text('jobs:\n  - {name: "[/bold]x[red]", plan: "[red]/p.yaml"}\n')
    html = tmp_path / "r.html"
    argv = ["cluster", str(jobs), "--servers", "4", "--degree", "2", "--html", str(html)]
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, r.output[-2000:]
    assert "the slowest job is [/bold]x[red]: " in r.stdout and html.exists()
