"""`topoopt traffic`: JSON keys, output files, and bad input (one line, exit 2, no output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_bad_plans import CASES
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from traffic.expand import server_matrix
from traffic.load import load_workload

ROOT = Path(__file__).resolve().parents[2]
FBUF = ROOT / "tests" / "data" / "topoopt-taskgraphs" / "100dlrm_16.fbuf"
runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_json_keys_and_values_gpt3():
    r = run("traffic", "gpt3-175b", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in (
        "gpus",
        "servers",
        "parameters",
        "bytes_by_class",
        "inter_server_bytes",
        "intra_server_bytes",
        "conventions",
    ):
        assert key in doc
    assert doc["gpus"] == 1024 and doc["servers"] == 128
    # GPT-3: 12*l*h^2 + 13*l*h + (V+s)*h + 2h (final norm), V = 51,200 (the zoo's padded V)
    l, h, v, s = 96, 12288, 51200, 2048
    assert doc["parameters"] == 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h
    # TP: 4 all-reduces of b*s*h*2 bytes per layer per micro-batch, ring 2(t-1)/t*S per rank,
    # 6 layers per stage, m = 1536 / 8 = 192 micro-batches, 1024 ranks (edge extras on top)
    tp_layers = 4 * 6 * 192 * 1024 * 2 * 7 / 8 * (1 * 2048 * 12288 * 2)
    assert doc["bytes_by_class"]["tp"] >= tp_layers
    assert doc["bytes_by_class"]["tp"] < tp_layers * 1.05
    assert doc["intra_server_bytes"] + doc["inter_server_bytes"] == pytest.approx(
        sum(doc["bytes_by_class"].values())
    )
    assert doc["conventions"]["recompute"] == "none"


def test_table_output_names_classes():
    r = run("traffic", "dlrm")
    assert r.exit_code == 0, r.stderr
    assert "embedding" in r.stdout and "inter-server" in r.stdout


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".json"])
def test_out_matrix_matches_library(tmp_path, suffix):
    out = tmp_path / f"m{suffix}"
    r = run("traffic", "vgg16-dp", "--out", out, "--level", "server")
    assert r.exit_code == 0, r.stderr
    want = server_matrix(load_workload("vgg16-dp")).tocoo()
    if suffix == ".csv":
        frame = pd.read_csv(out)
    elif suffix == ".parquet":
        frame = pd.read_parquet(out)
    else:
        frame = pd.DataFrame(
            {k: v for k, v in json.loads(out.read_text()).items() if k in ("src", "dst", "bytes")}
        )
    got = np.zeros(want.shape)
    got[frame["src"], frame["dst"]] = frame["bytes"]
    np.testing.assert_allclose(got, want.toarray())
    # an existing output is not overwritten without --force
    r = run("traffic", "vgg16-dp", "--out", out)
    assert r.exit_code == 2 and "--force" in r.stderr
    assert run("traffic", "vgg16-dp", "--out", out, "--force").exit_code == 0


def test_html_heatmap(tmp_path):
    html = tmp_path / "t.html"
    r = run("traffic", "mixtral-8x7b", "--html", html)
    assert r.exit_code == 0, r.stderr
    text = html.read_text()
    assert 'id="traffic-heatmap"' in text and "Plotly.newPlot" in text
    # same input, same file
    html2 = tmp_path / "t2.html"
    run("traffic", "mixtral-8x7b", "--html", html2)
    assert html2.read_bytes() == html.read_bytes()


def test_taskgraph_source():
    r = run("traffic", FBUF, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["servers"] == 16 and doc["parameters"] is None
    assert doc["bytes_by_class"]["mp"] == 1073741824  # sum of type-5 xfersize in the file


@pytest.mark.parametrize("label,text,field,hint", CASES, ids=[c[0] for c in CASES])
def test_bad_plans_exit_2_one_line_no_output(tmp_path, label, text, field, hint):
    plan = tmp_path / "plan.yaml"
    plan.write_text(text)
    out, html = tmp_path / "m.csv", tmp_path / "m.html"
    r = run("traffic", plan, "--out", out, "--html", html)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert not out.exists() and not html.exists()
    assert list(tmp_path.iterdir()) == [plan]


def test_real_process_exit_codes(tmp_path):
    exe = [sys.executable, "-m", "topoopt.app.cli", "traffic"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: gpt-5\nparallelism: {}\ncluster: {servers: 1, gpus_per_server: 8}\n")
    r = subprocess.run([*exe, str(bad), "--json"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: model:")
    r = subprocess.run([*exe, "no-such-plan"], capture_output=True, text=True)
    assert r.returncode == 2 and "PLAN" in r.stderr
    r = subprocess.run([*exe, "vgg16-dp", "--json"], capture_output=True, text=True)
    assert r.returncode == 0
    assert json.loads(r.stdout)["servers"] > 0
    trunc = tmp_path / "cut.fbuf"
    trunc.write_bytes(FBUF.read_bytes()[:5000])
    r = subprocess.run([*exe, str(trunc)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cut.fbuf" in r.stderr
