"""``design --fabric rail|rail-only`` (issue 24.3): the sizing, price and iteration of a switched
rail fabric, checked against hand counts of the price table."""

from __future__ import annotations

import json

import pytest

from topoopt.app.studies.compare import clos_candidates, compare
from topoopt.app.studies.switched_design import design_switched
from traffic.build import workload_from_plan


def _unit(item, gbps=None):
    from topoopt.fabrics.cost import load_prices

    return load_prices().unit(item, gbps)[0]


TINY = {  # 2 servers x 2 GPUs (one per NIC: rail routing on), a 2-stage pipeline
    "model": "llama2-7b",
    "cluster": {"servers": 2, "gpus_per_server": 2},
    "parallelism": {"tp": 1, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 4},
}


def test_rail_only_candidates_by_hand():
    """40 servers x 2 NICs of 400 G, rail-only (one Clos per rail), no simulation.

    - 64 x 400 G: the 40 ports of a rail fit one switch: 2 switches, 128 switch ports,
      80 NICs, 80 cables with a transceiver at both ends.
    - 32 x 400 G: two tiers per rail: leaves of at most 16 hosts at 1:1, so 3 leaves of 14
      hosts, 14 uplinks each; the fewest spines S with 14 + S b <= 32 and 3 b <= 32,
      b = ceil(14 / S): S = 1 gives b = 14 and 42 > 32, S = 2 gives b = 7. Per rail 5 switches
      (160 ports), 40 host + 42 leaf-spine cables; twice for 2 rails.
    """
    got = {m.radix: (p, r) for m, p, r in clos_candidates(40, 2, 400.0, 1.0, layout="rail-only")}
    assert set(got) == {32, 64, 128}
    nic, xcvr, fibre, port = (
        _unit("nic_port", 400),
        _unit("transceiver", 400),
        _unit("fibre"),
        _unit("switch_port", 400),
    )
    plan, rep = got[64]
    assert (plan.tiers, plan.switches) == (1, 1)  # one rail's
    assert rep.capex_usd == pytest.approx(80 * nic + 160 * xcvr + 80 * fibre + 128 * port)
    assert rep.capex_usd == 269_200.0  # 96,000 + 96,000 + 400 + 76,800
    plan, rep = got[32]
    assert (plan.tiers, plan.leaves, plan.spines, plan.bundle) == (2, 3, 2, 7)
    per_rail = 40 * nic + 2 * 82 * xcvr + 82 * fibre + 5 * 32 * port
    assert rep.capex_usd == pytest.approx(2 * per_rail)
    assert rep.capex_usd == 485_620.0


@pytest.mark.parametrize("layout", ["rail", "rail-only"])
def test_design_is_compares_row(layout):
    """The design is the fabric compare's row builds, simulated the same way: equal iteration
    and capex. One 32 x 100 G switch per rail (both layouts at one tier), by hand."""
    w = workload_from_plan(TINY)
    d = design_switched(w, layout, 2, 12.5e9)
    row = compare(w, [layout], degree=2, link_bandwidth=12.5e9).table.set_index("fabric")
    assert d.iteration.iteration_s == pytest.approx(row.loc[layout, "iteration_s"], rel=1e-12)
    assert d.capex_usd == row.loc[layout, "capex_usd"]
    want = (
        2 * 32 * _unit("switch_port", 100)
        + 4 * _unit("nic_port", 100)
        + 8 * _unit("transceiver", 100)
        + 4 * _unit("fibre")
    )
    assert d.capex_usd == pytest.approx(want) and want == 14_580.0
    info = d.run.cost_detail["fabric_info"]
    assert (info["switch"], info["tiers"], info["switches"]) == ("Tomahawk 32x100G", 1, 2)
    assert [c["chosen"] for c in d.candidates].count(True) == 1
    assert d.run.fabric.server_ports.tolist() == [2, 2]


def test_design_cli_names_gpu_nics_efficiency(tmp_path):
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({**TINY, "cluster": {**TINY["cluster"], "gpu": "h100-sxm"}}))
    args = ["design", str(plan), "--fabric", "rail-only", "--degree", "2", "--link-gbps", "100"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "rail-only design, 2 NICs x 100 Gbps per server, h100-sxm at efficiency 0.43" in r.stdout
    assert "Tomahawk 32x100G (chosen)" in r.stdout and "14,580" in r.stdout
    r = CliRunner().invoke(app, [*args, "--json"])
    doc = json.loads(r.stdout)  # the envelope merges a mapping at the top level
    assert (doc["gpu"], doc["efficiency"], doc["nics_per_server"], doc["nic_gbps"]) == (
        "h100-sxm",
        0.43,
        2,
        100.0,
    )
    assert doc["capex_usd"] == 14_580.0 and doc["fabric_info"]["server_gbps"] == 200.0
    assert doc["tflops_per_gpu"] > 0 and doc["verdict"]
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "d.json")])
    assert r.exit_code == 2 and "--out" in r.output and "optical or hybrid" in r.output
    # --prices sizes and prices it as compare's row does (design had no such option): every
    # switch port at 10x the default price, the same catalogue switch, a dearer fabric
    from topoopt.fabrics.cost import load_prices

    p = load_prices()
    dear = {"switch_port": {s: {**e, "capex_usd": 10 * e["capex_usd"]}
                            for s, e in p.data["switch_port"].items()}}  # fmt: skip
    table = tmp_path / "dear.yaml"
    table.write_text(json.dumps(dear))
    doc2 = json.loads(CliRunner().invoke(app, [*args, "--prices", str(table), "--json"]).stdout)
    assert doc2["prices"] == str(table) and doc["prices"] == "default"
    assert doc2["capex_usd"] > doc["capex_usd"]
    want = design_switched(
        workload_from_plan(json.loads(plan.read_text())), "rail-only", 2, 12.5e9,
        prices=load_prices(str(table)),
    )  # fmt: skip
    assert doc2["capex_usd"] == want.to_dict()["capex_usd"]


def test_too_many_nics_for_any_clos_names_the_degree_and_the_most_that_fit():
    """256 NICs on 128 servers at 100 G: no Clos of the catalogue cables them; the error names
    the degree and the most NICs per server that do fit, found by bisection, here against a scan
    of every degree."""
    from topoopt.app.studies.compare import clos_candidates, switched_clos
    from traffic.errors import InputError
    from traffic.load import load_workload

    wl = load_workload("gpt3-175b")
    fit = [
        d for d in range(1, 257)
        if any(p is not None for _, p, _ in clos_candidates(wl.servers, d, 100.0, 1.0))
    ]  # fmt: skip
    assert fit == list(range(1, fit[-1] + 1)) and fit[-1] < 256
    with pytest.raises(InputError, match=rf"^degree: got 256; allowed: at most {fit[-1]} NICs"):
        switched_clos("fat-tree", wl, 256, 12.5e9, 1.0)
    assert switched_clos("fat-tree", wl, fit[-1], 12.5e9, 1.0).fabric.server_ports[0] == fit[-1]
