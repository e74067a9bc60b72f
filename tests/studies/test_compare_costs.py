"""Transparent costs in ``compare`` (issue 13): bandwidth per server, capex / power by
component, and the cost-equivalent fat-tree explaining itself."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from topoopt.app.studies.compare import compare
from topoopt.fabrics.cost import COMPONENTS, load_prices
from traffic.load import load_workload

B = 12.5e9  # 100 Gbps
D = 4
P = load_prices()
FABRICS = [
    "ideal",
    "fat-tree",
    "fat-tree-oversub",
    "fat-tree-cost-equivalent",
    "torus",
    "expander",
    "hybrid",
    "topoopt",
]


@pytest.fixture(scope="module")
def table():
    w = load_workload("dlrm")  # 16 servers x 8 GPUs
    assert w.servers == 16
    return compare(w, FABRICS, degree=D, link_bandwidth=B).table.set_index("fabric")


def test_server_bandwidth_by_hand(table):
    """Every fabric but the cost-equivalent fat-tree gets degree x B per server: the ideal
    switch (4 ports of B), the fat-trees (4 NICs of B), the 2-D torus (4 links of B), the
    expander and TopoOpt (4 circuits of B), the hybrid (2 NICs of B + 2 optical ports of B)."""
    for name in ("ideal", "fat-tree", "fat-tree-oversub", "torus", "expander", "hybrid", "topoopt"):
        assert table.loc[name, "server_bandwidth"] == pytest.approx(D * B, rel=1e-12), name
    eq = table.loc["fat-tree-cost-equivalent"]
    info = eq["fabric_info"]
    want = info["ports_per_server"] * info["link_gbps"] * 1e9 / 8
    assert eq["server_bandwidth"] == pytest.approx(want, rel=1e-12)
    assert eq["server_bandwidth"] <= D * B * (1 + 1e-12)  # never above the ideal's


def test_breakdowns_sum_to_the_totals(table):
    for name, row in table.iterrows():
        cb, pb = row["capex_breakdown"], row["power_breakdown"]
        assert set(cb) <= set(COMPONENTS) and set(pb) <= set(COMPONENTS), name
        assert sum(cb.values()) == pytest.approx(row["capex_usd"], rel=1e-12), name
        assert sum(pb.values()) == pytest.approx(row["power_w"], rel=1e-12), name


def test_fat_tree_breakdown_closed_form(table):
    """16 servers with 4 NICs of 100 Gbps: 64 ports, one 64 x 100G switch (issue 29.10: the
    old row was one 400G NIC per server on 2 leaves and a spine of 64 x 400G, 3 switches).
    64 cables, 128 transceivers, 64 switch ports, 64 NICs, all at 100 Gbps."""
    nic, tr, sw = P.unit("nic_port", 100), P.unit("transceiver", 100), P.unit("switch_port", 100)
    fib = P.unit("fibre")
    want = {
        "nic": 64 * nic[0],
        "transceiver": 128 * tr[0],
        "switch": 64 * sw[0],
        "cable": 64 * fib[0],
    }
    assert table.loc["fat-tree", "capex_breakdown"] == pytest.approx(want)
    assert table.loc["fat-tree", "fabric_info"]["switches"] == 1
    # the optical design: 64 NIC ports, transceivers, fibres and patch-panel ports of 100G
    nic, tr = P.unit("nic_port", 100), P.unit("transceiver", 100)
    want = {
        "nic": 64 * nic[0],
        "transceiver": 64 * tr[0],
        "cable": 64 * fib[0],
        "patch_panel": 64 * P.unit("patch_panel_port")[0],
    }
    assert table.loc["topoopt", "capex_breakdown"] == pytest.approx(want)


def test_cost_equivalent_explains_itself(table):
    eq = table.loc["fat-tree-cost-equivalent"]
    info = eq["fabric_info"]
    for key in ("tiers", "switch", "radix", "leaves", "spines", "link_gbps", "oversubscription"):
        assert key in info, key
    assert info["oversubscription"] == 1.0 and info["tiers"] in (1, 2, 3)
    # a buildable uniform Clos within the optical design's capex, priced as built
    assert eq["capex_usd"] <= table.loc["topoopt", "capex_usd"] * (1 + 1e-12)
    assert sum(eq["capex_breakdown"].values()) == pytest.approx(eq["capex_usd"], rel=1e-12)
    # the fluid mix (a bound, not bought): shares sum to 1, its speed the weighted one
    fluid = info["fluid_bound"]
    mix = fluid["mix"]
    assert sum(m["share"] for m in mix) == pytest.approx(1.0)
    assert fluid["server_gbps"] == pytest.approx(sum(m["share"] * m["server_gbps"] for m in mix))
    assert fluid["server_gbps"] >= info["server_gbps"] - 1e-9
    json.dumps(info)  # JSON-able as is


def test_cost_figures(table):
    from topoopt.app.report.cost_figures import breakeven_curve, cost_breakdown_bars

    t = table.reset_index()
    fig = cost_breakdown_bars(t, "capex")
    assert "ideal" in set(t["fabric"]) and not any("ideal" in x for x in fig.data[0].x)
    t = t[t["fabric"] != "ideal"]  # a bound, not a product: no bar (issue 28)
    assert fig.layout.barmode == "stack"
    # one stacked trace per component present; the stacks add up to each row's capex (M$)
    stacks = np.sum([np.asarray(tr.y) for tr in fig.data], axis=0)
    assert stacks == pytest.approx(t["capex_usd"].to_numpy() * 1e-6)
    assert {tr.name for tr in fig.data} <= set(COMPONENTS)
    assert "Gbps/server" in fig.data[0].x[0]
    power = cost_breakdown_bars(t, "power")
    assert np.sum([np.asarray(tr.y) for tr in power.data], axis=0) == pytest.approx(
        t["power_w"].to_numpy() * 1e-3
    )
    curve = pd.DataFrame(
        {
            "price_usd": [10.0, 100.0, 1000.0],
            "iteration_s": [0.01, 0.02, np.inf],
            "server_bandwidth": [5e10, 2e10, 0.0],
        }
    )
    be = breakeven_curve(curve, 0.015, 50.0)
    assert list(be.data[0].x) == [10.0, 100.0] and list(be.data[0].y) == [10.0, 20.0]
    assert list(be.data[1].y) == [15.0, 15.0]


def test_compare_cli_reports_costs_in_json_and_csv(tmp_path):
    import csv as csv_mod

    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    out = tmp_path / "t.csv"
    r = CliRunner().invoke(
        app,
        ["compare", "dlrm", "--fabrics", "ideal,fat-tree", "--degree", "4", "--json"]
        + ["--csv", str(out), "--prices", "topoopt-paper"],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["params"]["prices"] == "preset topoopt-paper"
    for row in doc["rows"]:
        assert row["server_bandwidth"] == pytest.approx(D * B)
        assert sum(row["capex_breakdown"].values()) == pytest.approx(row["capex_usd"])
    # topoopt-paper's 100G switch port ($187) prices the ideal switch's 4 x 100G ports
    ideal = next(x for x in doc["rows"] if x["fabric"] == "ideal")
    assert ideal["capex_breakdown"]["switch"] == pytest.approx(16 * 4 * 187.0)
    with out.open() as fh:
        rows = list(csv_mod.DictReader(fh))
    assert [x["fabric"] for x in rows] == ["ideal", "fat-tree"]
    for x, y in zip(rows, doc["rows"], strict=True):
        assert json.loads(x["capex_breakdown"]) == pytest.approx(y["capex_breakdown"])
        assert json.loads(x["fabric_info"])["family"] == y["fabric_info"]["family"]
        assert float(x["server_bandwidth"]) == pytest.approx(y["server_bandwidth"])


def test_compare_cli_json_mixes_designed_and_plain_fabrics():
    """A designed fabric beside plain ones: the plain rows' design columns are null (not NaN,
    which the strict writer refused: ``compare dlrm --json`` with its default fabrics exited 2)."""
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    r = CliRunner().invoke(
        app, ["compare", "dlrm", "--fabrics", "ideal,topoopt,fat-tree", "--degree", "4", "--json"]
    )
    assert r.exit_code == 0, r.output
    rows = {x["fabric"]: x for x in json.loads(r.stdout)["rows"]}
    for name in ("ideal", "fat-tree"):
        assert rows[name]["objective_s"] is None and rows[name]["solver"] is None
    assert rows["topoopt"]["objective_s"] > 0 and rows["topoopt"]["solver"] == "topoopt"
    assert rows["topoopt"]["iteration_s"] >= rows["ideal"]["iteration_s"]
