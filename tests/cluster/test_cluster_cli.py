"""``topoopt cluster`` through ``python -m topoopt.app.cli``: the JSON document, the HTML report,
and
bad input as one line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from realisable import check_cluster_circuits, unit_edges
from test_cluster_design import tiny_plan

from solvers.cluster.ocs import OcsLayer, assign_ports
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

SEEDS = Path(__file__).resolve().parents[1] / "fuzz" / "seeds"
JOBS = SEEDS / "cluster-jobs.yaml"
ARRIVALS = SEEDS / "cluster-arrivals.yaml"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "topoopt.app.cli", "cluster", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_json_html_and_arrivals(tmp_path):
    html = tmp_path / "cluster.html"
    p = run(
        str(JOBS), "--servers", "8", "--degree", "2", "--link-gbps", "100",
        "--arrivals", str(ARRIVALS), "--json", "--html", str(html),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert set(jobs) == {"vision", "small"}
    assert jobs["small"]["servers"] == [5, 6, 7]  # the explicit placement
    assert jobs["vision"]["servers"] == [0, 1, 2, 3]
    for j in doc["jobs"]:
        assert j["iteration_s"] > 0 and j["alone_ideal_s"] > 0
        assert j["slowdown"] == pytest.approx(j["iteration_s"] / j["alone_ideal_s"])
    layer = OcsLayer.build(8, 2)
    check_cluster_circuits(
        {n: j["circuits"] for n, j in jobs.items()},
        {n: j["servers"] for n, j in jobs.items()},
        layer.units,
    )
    # 3 servers on 2 ports: TopoOpt's triangle is not realisable, one circuit is given up
    assert jobs["small"]["repaired_circuits"] == 1 and jobs["small"]["n_circuits"] == 2
    assert doc["totals"]["servers_used"] == 7
    # the layer as built: 8 servers x 2 ports of 100 G (NIC port, transceiver, fibre: 400 + 100
    # + 5 USD) and 2 planes of one 8-port OCS (500 USD a port)
    assert doc["capex_usd"] == 8 * 2 * (400 + 100 + 5) + 2 * 8 * 500
    assert [e["event"] for e in doc["events"]] == ["depart", "arrive", "depart"]
    assert [e["changed_circuits"] for e in doc["events"]] == [0, 0, 0]
    late = doc["final_jobs"][0]
    assert late["name"] == "late" and late["servers"] == [0, 1, 2, 3, 4]
    assert doc["events"][1]["added_circuits"] == late["n_circuits"]
    assert doc["events"][0]["removed_circuits"] == jobs["vision"]["n_circuits"]
    # the reported circuits of the late job are realisable by an independent assignment
    rows = [[u, v, 1] for u, v, _, _ in late["circuits"]]
    local = np.searchsorted(late["servers"], np.asarray(rows)[:, :2])
    local_c = Circuits(np.hstack([local, np.ones((len(rows), 1), int)]), 5)
    a = assign_ports(local_c, np.zeros((2, 5), int))
    assert a.complete and len(unit_edges(rows)) == late["n_circuits"]
    text = html.read_text()
    assert "cluster-iteration" in text and "cluster-changes" in text and "vision" in text


def _write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("doc", "args", "needle"),
    [
        (  # overlapping explicit placements
            {
                "jobs": [
                    {"name": "a", "plan": tiny_plan(3), "servers": [0, 1, 2]},
                    {"name": "b", "plan": tiny_plan(3), "servers": [2, 3, 4]},
                ]
            },
            ["--servers", "8"],
            "servers no other job holds",
        ),
        (  # more servers than the cluster has
            {"jobs": [{"name": "a", "plan": "dlrm"}, {"name": "b", "plan": "dlrm"}]},
            ["--servers", "20"],
            "at least the 32 servers",
        ),
        (  # a misspelled key: named as unknown (not "jobs[0].plan: got None")
            {"jobs": [{"name": "a", "plann": "dlrm"}]},
            ["--servers", "20"],
            "jobs[0].plann: got 'plann'; allowed: no such field; known fields: name, plan, servers",
        ),
        (  # duplicate names
            {"jobs": [{"name": "a", "plan": "dlrm"}, {"name": "a", "plan": "dlrm"}]},
            ["--servers", "40"],
            "a name no other job has",
        ),
        ({"jobs": [{"name": "a", "plan": "nope"}]}, ["--servers", "40"], "embedded plan"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, doc, args, needle):
    # in-process (the subprocess path is the next test's): click's runner on the typer app
    import typer
    from click.testing import CliRunner

    from topoopt.app.cli.app import app

    r = CliRunner().invoke(
        typer.main.get_command(app),
        ["cluster", str(_write(tmp_path / "jobs.json", doc)), *args, "--json"],
    )
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr


def test_malformed_overlapping_and_bad_departure_through_the_cli(tmp_path):
    over = {
        "jobs": [
            {"name": "a", "plan": tiny_plan(3), "servers": [0, 1, 2]},
            {"name": "b", "plan": tiny_plan(3), "servers": [2, 3, 4]},
        ]
    }
    p = run(str(_write(tmp_path / "over.json", over)), "--servers", "8", "--json")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and "server 2 is jobs[0] a's" in p.stderr
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs: [{name: a, plan: dlrm}\n")
    p = run(str(bad), "--servers", "16")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    ev = _write(tmp_path / "ev.json", {"events": [{"time_s": 1.0, "depart": "ghost"}]})
    html = tmp_path / "c.html"
    p = run(
        str(JOBS), "--servers", "8", "--degree", "2", "--arrivals", str(ev), "--json",
        "--html", str(html),
    )  # fmt: skip
    assert p.returncode == 2 and p.stdout == "" and not html.exists()
    assert p.stderr == (
        "error: ev.json events[0].depart: got 'ghost'; allowed: a running job (vision, small)\n"
    )


def _arrival(name: str, n: int) -> dict:
    return {"name": name, "plan": tiny_plan(n)}


@pytest.mark.parametrize(
    ("events", "line"),
    [
        (
            [{"time_s": 1.0, "depart": "small"}, {"time_s": 2.0, "depart": "small"}],
            "events[1].depart: got 'small'; allowed: a running job (vision)",
        ),
        (
            [{"time_s": 1.0, "arrive": _arrival("vision", 1)}],
            "events[0].arrive.name: got 'vision'; allowed: a name no running job has",
        ),
        (  # 7 of the 8 servers held: one free
            [{"time_s": 1.5, "arrive": _arrival("late", 2)}],
            "events[0].arrive: got 'late: 2 servers'; allowed: a job of at most the 1 servers "
            "free at 1.5 s",
        ),
    ],
)
def test_a_bad_event_is_refused_before_any_work(tmp_path, monkeypatch, events, line):
    """Names and sizes of the events are checked before any placement or design (a check that
    came mid-run printed progress lines before its error on a slow machine)."""
    import topoopt.app.studies.cluster as study

    def no_work(*args, **kwargs):
        raise AssertionError("the cluster was designed before the events were checked")

    monkeypatch.setattr(study, "design_cluster", no_work)
    ev = _write(tmp_path / "ev.json", {"events": events})
    with pytest.raises(InputError) as info:
        study.run_cluster(JOBS, 8, 2, 12.5e9, arrivals=ev, progress=no_work)
    assert str(info.value) == f"ev.json {line}"
