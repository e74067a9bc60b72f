"""`topoopt demo`: runs end to end, writes the report atomically, stdout holds only data."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_json_and_report(tmp_path):
    out = tmp_path / "demo.html"
    r = subprocess.run(
        [sys.executable, "-m", "topoopt.cli", "demo", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is exactly one JSON document
    plans = {row["plan"]: row for row in doc["traffic"]}
    assert set(plans) == {"dlrm", "gpt3-175b"}
    assert plans["gpt3-175b"]["gpus"] == 1024
    assert "traffic of dlrm" in r.stderr  # progress goes to stderr
    html = out.read_text()
    assert html.count("Plotly.newPlot") == 4 and 'id="dlrm-heatmap"' in html
    assert oct(out.stat().st_mode & 0o777) != "0o600"
    # a second run refuses to overwrite without --force, and leaves the file alone
    r2 = subprocess.run(
        [sys.executable, "-m", "topoopt.cli", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r2.returncode == 2 and r2.stderr.count("\n") == 1 and "--force" in r2.stderr
    assert out.read_text() == html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.html"]
