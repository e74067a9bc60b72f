"""The ``topoopt fabric`` command: JSON report, HTML drawing, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.fabrics import bisection, cost, direct_connect, fat_tree, torus

runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["fabric", *args])


def test_fat_tree_json_matches_library():
    r = run("fat-tree", "--k", "4", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    f = fat_tree(4)
    assert out["servers"] == 16 and out["switches"] == 20 and out["links"] == 48
    assert out["bisection_bandwidth"] == bisection(f).bandwidth == 8 * 12.5e9
    assert out["diameter"] == 6
    assert out["bom"] == cost(f).bom and out["capex_usd"] == cost(f).capex_usd
    assert out["power_w"] == cost(f).power_w


@pytest.mark.parametrize(
    ("args", "servers", "links"),
    [
        (["ideal", "--servers", "8", "--degree", "2"], 8, 16),
        (
            ["leaf-spine", "--servers", "40", "--oversubscription", "3", "--radix", "16"],
            40,
            40 + 4 * 4,
        ),
        (["torus", "--dims", "4x4x2"], 32, 96),
        (["tpu-v4", "--dims", "4x4x8"], 128, 384),
        (["expander", "--servers", "16", "--degree", "4", "--seed", "2"], 16, 32),
        (["hybrid", "--servers", "16", "--optical-degree", "2", "--radix", "8"], 16, 16 + 16 + 16),
        (["rail", "--servers", "4", "--gpus-per-server", "2", "--radix", "8"], 4, 8),
    ],
)
def test_kinds(args, servers, links):
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["servers"], out["links"]) == (servers, links)
    for key in ("switches", "bisection_bandwidth", "diameter", "bom", "capex_usd", "power_w"):
        assert key in out


def test_direct_with_circuits_file(tmp_path):
    c = tmp_path / "c.txt"
    c.write_text("0 1 2\n1 2\n2 3\n3 0\n")
    r = run("direct", "--servers", "4", "--degree", "3", "--circuits", str(c), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    f = direct_connect(4, 3, [(0, 1, 2), (1, 2), (2, 3), (3, 0)])
    assert out["links"] == 5 and out["switches"] == 0 and out["patch_panels"] == 3
    assert out["bisection_bandwidth"] == bisection(f, "exact").bandwidth
    assert out["bisection_method"] == "exact"


def test_errors_exit_2(tmp_path):
    r = run("fat-tree", "--k", "3")
    assert r.exit_code == 2 and "k: got 3" in r.stderr
    c = tmp_path / "c.txt"
    c.write_text("0 1\n0 2\n0 3\n")
    r = run("direct", "--servers", "4", "--degree", "2", "--circuits", str(c))
    assert r.exit_code == 2 and "circuits.server[0]" in r.stderr
    r = run("direct", "--servers", "4", "--degree", "2", "--circuits", str(tmp_path / "none"))
    assert r.exit_code == 2


def test_html(tmp_path):
    out = tmp_path / "f.html"
    r = run("torus", "--dims", "4x4", "--html", str(out))
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert 'id="topoopt-fabric"' in text
    r2 = run("torus", "--dims", "4x4", "--html", str(out))
    assert r2.exit_code == 2  # refuses to overwrite
    r3 = run("torus", "--dims", "4x4", "--html", str(out), "--force")
    assert r3.exit_code == 0 and out.read_text() == text  # reproducible


def test_figure_structure():
    from topoopt.app.report.fabric_figure import fabric_figure

    fig = fabric_figure(torus("4x4"))
    names = [t.name for t in fig.data]
    assert names == ["electrical links (32)", "server (16)"]
    fig = fabric_figure(direct_connect(8, 2, device="ocs"))
    assert [t.name for t in fig.data] == ["optical links (8)", "server (8)", "ocs (2)"]
    fig = fabric_figure(fat_tree(4))
    # one line segment (3 coordinates incl. the gap) per cable
    assert len(fig.data[0].x) == 3 * 48
