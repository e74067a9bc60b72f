"""``topoopt cosearch`` as a user meets it: one JSON document with the documented keys, a
report, and one line with exit code 2 for bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

PLAN = """\
model: {layers: 4, hidden: 256, heads: 4, vocab: 512, seq_len: 128}
parallelism: {tp: 2, pp: 2, global_batch_size: 16}
cluster: {servers: 4, gpus_per_server: 2}
"""


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "topoopt.app.cli", "cosearch", *map(str, args)],
        capture_output=True,
        text=True,
    )


def test_json_contract_and_report(tmp_path):
    plan = tmp_path / "tiny.yaml"
    plan.write_text(PLAN)
    html = tmp_path / "report.html"
    r = cli(
        plan,
        "--degree",
        2,
        "--fabric",
        "topoopt",
        "--max-evaluations",
        8,
        "--pareto-fabrics",
        "ideal",
        "--gpu-memory-gb",
        1,
        "--json",
        "--html",
        html,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # exactly one document
    assert {"backend", "workers", "evaluated", "best", "pareto", "candidates"} <= set(doc)
    assert doc["backend"] == "local" and doc["workers"] == 1
    assert 0 < doc["evaluated"] <= 8
    best = doc["best"]
    assert {"plan", "fabric", "iteration_s", "capex_usd", "memory_per_gpu_bytes", "design"} <= set(
        best
    )
    assert {"tp", "pp", "dp", "cp", "vpp", "micro_batch_size", "sharding", "recompute"} <= set(
        best["plan"]
    )
    assert best["fabric"] == "topoopt" and best["design"]["circuits"]
    assert best["memory_per_gpu_bytes"] <= 1e9
    p = best["plan"]
    assert p["tp"] * p["pp"] * p["dp"] * p["cp"] == 8
    assert doc["reference"]["iteration_s"] >= best["iteration_s"]
    assert doc["pareto"] and all("capex_usd" in r for r in doc["pareto"])
    text = html.read_text()
    for div in ("cosearch-pareto", "cosearch-traffic", "cosearch-design", "cosearch-candidates"):
        assert f'id="{div}"' in text


@pytest.mark.parametrize(
    "args, field",
    [
        (["no-such-model"], "MODEL"),
        (["gpt3-175b", "--gpu-memory-gb", "0"], "--gpu-memory-gb"),
        (["gpt3-175b", "--fabric", "mesh"], "fabric"),
        (["gpt3-175b", "--workers", "0"], "--workers"),
        (["gpt3-175b", "--max-evaluations", "1"], "max_evaluations"),
        (["gpt3-175b", "--gpu-memory-gb", "1", "--servers", "2"], "gpu_memory_gb"),
    ],
)
def test_bad_input_one_line_exit_2(args, field, capfd):
    from topoopt.app.cli.app import app

    r = CliRunner().invoke(app, ["cosearch", *args])
    out, err = capfd.readouterr()
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and out == ""
    lines = (r.stderr + err).strip().splitlines()
    assert lines[-1].startswith("error:") and field in lines[-1]
    assert "Traceback" not in r.stderr + err


def test_a_fallen_back_joint_search_is_a_warning_everywhere(tmp_path):
    """``--work-limit 0.001``: the ``joint`` searches cannot afford one simulation and fall back
    to the congestion objective. One warning line per such evaluation on stderr, the same lines
    in the JSON envelope, on the records that carry them, and in the report."""
    import re

    from topoopt.app.cli.app import app

    plan, html = tmp_path / "tiny.yaml", tmp_path / "report.html"
    plan.write_text(PLAN)
    r = CliRunner().invoke(
        app,
        ["cosearch", str(plan), "--degree", "2", "--fabric", "joint", "--max-evaluations", "6",
         "--finalists", "1", "--pareto-fabrics", "ideal", "--gpu-memory-gb", "1",
         "--work-limit", "0.001", "--json", "--html", str(html)],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    said = [s for s in r.stderr.splitlines() if s.startswith("warning: ")]
    assert said and doc["warnings"] == said  # once each, in the same order
    joint = [f for f in doc["fabrics"] if f["fabric"] == "joint"]
    # every joint record carries its line (labelled with its plan), and only those
    assert {f["search_warning"] for f in joint} == set(said)
    assert all(f["label"] in f["search_warning"] for f in joint)
    assert all(f["search_warning"] is None for f in doc["fabrics"] if f["fabric"] != "joint")
    best = doc["best"]  # what the line says is what the design records
    assert best["design"]["objective"] == "congestion" and best["search_warning"] in said
    assert "the congestion objective decided" in best["search_warning"]
    assert "work limit (0.001 units)" in best["search_warning"]
    block = re.search(r'<div id="warnings">(.*?)</div>', html.read_text(), re.S)
    assert block and all(s.replace("'", "&#x27;") in block.group(1) for s in said)
