"""Every fabric of ``compare`` at today's NICs (issue 24.3: one NIC per port, 8 x 400 G and
8 x 800 G), the switched rows priced at the catalogue (issue 29.10), one pricing for compare and
cosearch (29.9), and a fabric that cannot be built as a row that says why (29.19)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from topoopt.app.studies.compare import FABRICS, build_fabric, compare
from topoopt.fabrics.cost import bill_of_materials, cost, load_prices
from traffic.workload import Workload

P = load_prices()


def _ring_workload(n: int) -> Workload:
    """llama2-7b on ``n`` servers of one GPU: pipeline of 2 stages, data parallel n / 2."""
    from traffic.build import workload_from_plan

    par = {"tp": 1, "pp": 2, "dp": n // 2, "micro_batch_size": 1, "global_batch_size": n}
    return workload_from_plan(
        {"model": "llama2-7b", "parallelism": par, "cluster": {"servers": n, "gpus_per_server": 1}}
    )


def _unit(item, gbps=None):
    return P.unit(item, gbps)[0]


# the fat-tree of 16 servers x 8 NICs, by hand: (NICs, transceivers, fibres, switch ports,
# switch, tiers). 400 G: 128 ports fit one 128 x 400 G switch (Tomahawk 5), one cable a NIC.
# 800 G: the 51.2 Tb/s ASIC has 64 ports of 800 G, so two tiers of 64-port switches: 4 leaves
# of 4 servers (32 ports down, 32 up), 2 spines of 64 ports (16 uplinks from each leaf);
# 128 host cables + 128 leaf-spine cables, a transceiver at both ends, 6 x 64 switch ports.
FAT_TREE_8_NICS = {
    400: (128, 256, 128, 128, "Tomahawk 5 128x400G", 1),
    800: (128, 512, 256, 384, "Tomahawk 5 64x800G", 2),
}


RAIL_CIRCUITS = ("rail-circuits", "rail-circuits-2")


@pytest.mark.parametrize("gbps", [400, 800])
def test_every_fabric_at_8_nics_of_400g_and_800g(gbps):
    """``--degree 8 --link-gbps 400`` (and 800) on every fabric (it failed on fat-tree,
    fat-tree-oversub and hybrid with ``prices.nic_port: got 3200.0``): each row is finite,
    every fabric but the torus (a 3-D torus uses 6 of the 8 ports) and the cost-equivalent
    fat-tree (it buys what its budget affords) has 8 NICs of ``gbps`` per server, and the
    fat-tree is priced by the hand count of ``FAT_TREE_8_NICS``."""
    n, d = 16, 8
    bw = gbps * 1e9 / 8
    w = _ring_workload(n)
    res = compare(w, FABRICS, degree=d, link_bandwidth=bw, time_limit_s=5.0, work_limit=2.0)
    t = res.table.set_index("fabric")
    assert set(t.index) == set(FABRICS)
    # rail-aligned circuits wire NIC i to NIC i: one NIC (rail) per GPU, so servers of one GPU
    # with 8 NICs are refused in one line naming the degree (every other fabric runs)
    errors = t["error"].dropna()
    assert set(errors.index) == set(RAIL_CIRCUITS)
    assert all(e.startswith("degree: got 8; allowed: 1: one NIC (rail) per GPU") for e in errors)
    t = t.drop(index=list(RAIL_CIRCUITS))
    assert np.isfinite(t["iteration_s"].to_numpy(float)).all()
    runs = {r.name: r for r in res.runs}
    for name in t.index:
        if name in ("torus", "fat-tree-cost-equivalent"):
            continue
        bom = bill_of_materials(runs[name].fabric)
        nics = {k: v for k, v in bom.items() if k.startswith("nic_port_")}
        assert nics == {f"nic_port_{gbps}G": n * d}, name
        assert t.loc[name, "server_bandwidth"] == pytest.approx(d * bw), name
    for name in ("fat-tree", "fat-tree-oversub"):
        f = runs[name].fabric
        assert f.server_ports.tolist() == [d] * n and np.all(f.port_bandwidth == bw)
        host = f.src < n
        assert np.all(f.multiplicity[host] == d) and np.all(f.capacity[host] == d * bw)
    nic, xcvr, fibre, ports, switch, tiers = FAT_TREE_8_NICS[gbps]
    want = (
        nic * _unit("nic_port", gbps)
        + xcvr * _unit("transceiver", gbps)
        + fibre * _unit("fibre")
        + ports * _unit("switch_port", gbps)
    )
    assert t.loc["fat-tree", "capex_usd"] == pytest.approx(want, rel=1e-12)
    info = t.loc["fat-tree", "fabric_info"]
    assert (info["switch"], info["tiers"]) == (switch, tiers)
    eq = t.loc["fat-tree-cost-equivalent"]
    assert eq["capex_usd"] <= t.loc["topoopt", "capex_usd"] * (1 + 1e-12)
    assert eq["capex_usd"] == pytest.approx(cost(runs["fat-tree-cost-equivalent"].fabric).capex_usd)


@pytest.mark.parametrize(
    ("degree", "gbps", "want"),
    [
        # 32 x 400G ports: one 32 x 400G switch (the old row bought three 64-port switches and
        # 16-host leaves "so that traffic crosses the spine": 230,720 USD)
        (1, 400, 32 * 1200 + 64 * 600 + 32 * 5 + 32 * 600),
        # 4 x 100G NICs a server, 128 ports: one 128 x 100G switch
        (4, 100, 128 * 400 + 256 * 100 + 128 * 5 + 128 * 190),
    ],
)
def test_fat_tree_row_is_the_catalogue_price(degree, gbps, want):
    w = _ring_workload(32)
    run = build_fabric("fat-tree", w, degree, gbps * 1e9 / 8)
    assert run.capex_usd == pytest.approx(want, rel=1e-12)
    assert run.capex_usd == pytest.approx(cost(run.fabric).capex_usd, rel=1e-12)
    assert run.fabric.n_switches == 1 and run.cost_detail["fabric_info"]["tiers"] == 1


def test_cosearch_prices_the_cost_equivalent_fat_tree_as_compare_does():
    """One price for one fabric (issue 29.9: cosearch re-priced the cost-equivalent fat-tree
    from its arrays, $91,251 against compare's $77,440)."""
    from topoopt.app.studies.cosearch import evaluate as ev
    from topoopt.app.studies.cosearch.space import Candidate

    base = {"model": "llama2-7b", "cluster": {"servers": 4, "gpus_per_server": 8}}
    par = {"tp": 8, "pp": 1, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16}
    cand = Candidate(tuple(sorted(par.items())), None, "tp8 dp4")
    rec = ev.evaluate(ev.EvalTask(0, base, cand, "fat-tree-cost-equivalent", 4, 12.5e9))
    _, w = ev.workload_for(base, cand)
    run = build_fabric("fat-tree-cost-equivalent", w, 4, 12.5e9)
    assert rec["capex_usd"] == run.capex_usd == cost(run.fabric).capex_usd
    assert rec["power_w"] == run.power_w


def test_a_fabric_that_cannot_be_built_gets_a_row():
    """``compare dlrm --degree 2``: the seeded random 2-regular expander on 16 servers is
    disjoint cycles; its row says why and the other fabrics run (the whole command failed)."""
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    r = CliRunner().invoke(
        app, ["compare", "dlrm", "--fabrics", "ideal,expander,fat-tree", "--degree", "2", "--json"]
    )
    assert r.exit_code == 0, r.output
    rows = {x["fabric"]: x for x in json.loads(r.stdout)["rows"]}
    assert "unreachable" in rows["expander"]["error"]
    assert rows["expander"]["iteration_s"] is None and rows["expander"]["capex_usd"] is None
    for name in ("ideal", "fat-tree"):
        assert math.isfinite(rows[name]["iteration_s"]) and rows[name].get("error") is None


def test_a_table_with_no_product_built_still_prints(tmp_path):
    """Only the ideal switch built (a torus of one port): the table and its CSV, the row's
    reason, exit 0 (the highlight looked for the fastest product among none: a ValueError
    traceback after the CSV was written)."""
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    csv = tmp_path / "c.csv"
    argv = ["compare", "dlrm", "--fabrics", "ideal,torus", "--degree", "1", "--csv", str(csv)]
    r = CliRunner().invoke(app, argv)
    assert r.exit_code == 0, r.output[-2000:]
    assert "torus: not built: degree: got 1" in r.stderr and "ideal" in r.stdout
    assert csv.read_text().count("\n") == 3  # the header and the two rows


def test_a_catalogue_without_the_link_speed_is_said(tmp_path):
    """A price table whose switch catalogue has no model at the NICs' speed: the Clos rows are
    priced as a 64-port switch at that speed, per port (documented), and now the row's note and
    a warning line say so (it was silent); the default table, which has 100G switches, says
    nothing."""
    from topoopt.app.studies.compare import fabric_warning

    w = _ring_workload(16)
    table = tmp_path / "p.yaml"
    table.write_text('switch_catalogue: [{name: "slow", radix: 64, gbps: 10}]\n')
    run = build_fabric("fat-tree", w, 4, 12.5e9, prices=load_prices(str(table)))
    said = "no switch of the price table's catalogue runs at 100 Gbps: priced as 64x100G"
    assert run.note.startswith(said) and fabric_warning(run).startswith(f"fat-tree: {said}")
    assert run.cost_detail["fabric_info"]["switch"] == "64x100G (priced per port)"
    assert fabric_warning(build_fabric("fat-tree", w, 4, 12.5e9)) is None
