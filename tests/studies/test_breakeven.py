"""``topoopt breakeven``: the tie price found by bisection reproduces a tie, and the order of the
two fabrics flips on either side of it (issue 13)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.studies.breakeven import MODES, breakeven
from topoopt.app.studies.compare import FabricRun, compare
from topoopt.fabrics import direct_connect
from topoopt.fabrics.cost import cost, cost_equivalent_fat_tree, load_prices
from topoopt.flowsim.iteration import simulate_iteration
from traffic.errors import InputError
from traffic.load import load_workload

B, D = 12.5e9, 4
P = load_prices()


@pytest.fixture(scope="module")
def workload():
    return load_workload("dlrm")


@pytest.fixture(scope="module")
def optical(workload):
    """The TopoOpt design through ``compare`` (an independent path to its iteration time)."""
    res = compare(workload, ["topoopt"], degree=D, link_bandwidth=B)
    run = next(r for r in res.runs if r.name == "topoopt")
    t = float(res.table.set_index("fabric").loc["topoopt", "iteration_s"])
    return run.fabric, t


def _fat_tree_time(workload, optical_fabric, mode, factor):
    """T_ft(factor) recomputed from the public pieces: scaled prices -> the optical design's
    capex -> the cost-equivalent fat-tree -> its simulated iteration."""
    p = P.scaled(MODES[mode], factor)
    eq = cost_equivalent_fat_tree(
        cost(optical_fabric, p).capex_usd,
        workload.servers,
        prices=p,
        max_bandwidth=D * B,
        gpus_per_server=workload.gpus_per_server,
        fluid_mix=True,
    )
    return simulate_iteration(workload, eq.fabric, exposed_by_class=False).iteration_s


@pytest.fixture(scope="module")
def circulant(workload):
    """A solver-free optical fabric: the geometric circulant on a patch panel (ECMP routing)."""
    fab = direct_connect(16, D, port_bandwidth=B, gpus_per_server=workload.gpus_per_server)
    t = simulate_iteration(workload, fab, exposed_by_class=False).iteration_s
    return FabricRun("circulant", fab, workload), (fab, t)


@pytest.mark.parametrize(
    ("mode", "which"),
    [("electrical", "topoopt"), ("electrical", "circulant"), ("optical", "circulant")],
)
def test_breakeven_is_a_tie_and_the_order_flips(workload, optical, circulant, mode, which):
    if which == "topoopt":
        fab, t_opt = optical
        r = breakeven(workload, D, B, mode=mode)
    else:
        run, (fab, t_opt) = circulant
        r = breakeven(workload, D, B, mode=mode, optical=run)
        assert r.design == "circulant"
    assert r.status == "tie"
    assert r.optical_iteration_s == pytest.approx(t_opt, rel=1e-12)
    lo, hi = r.bracket
    assert lo < r.factor < hi and hi / lo <= 1 + 1e-3
    # a tie at the price found: both iteration times within 1 %
    t_tie = _fat_tree_time(workload, fab, mode, r.factor)
    assert t_tie == pytest.approx(t_opt, rel=1e-2)
    assert r.tie_iteration_s == pytest.approx(t_tie, rel=1e-12)
    # the order flips on either side (5 % away): dearer switch ports (or cheaper optical ports)
    # make the fat-tree slower than the optical design, and the other way round
    below, above = (_fat_tree_time(workload, fab, mode, r.factor * s) for s in (0.95, 1.05))
    if mode == "electrical":
        assert below < t_opt < above
    else:
        assert below > t_opt > above
    # the price reported is the varied item's unit price at the tie
    item = "switch_port" if mode == "electrical" else "patch_panel_port"
    gbps = 100 if mode == "electrical" else None
    assert r.price_usd == pytest.approx(r.factor * P.unit(item, gbps)[0], rel=1e-12)
    # the curve is monotone in the price (the search relies on it)
    c = r.curve[np.isfinite(r.curve["iteration_s"])]
    d = np.diff(c["iteration_s"].to_numpy())
    assert (d >= -1e-12).all() if mode == "electrical" else (d <= 1e-12).all()


def test_breakeven_rejects_bad_input(workload):
    with pytest.raises(InputError, match="design_fabric"):
        breakeven(workload, D, B, design_fabric="fat-tree")
    with pytest.raises(InputError, match="mode"):
        breakeven(workload, D, B, mode="photonic")


def test_breakeven_cli_json_and_html(tmp_path):
    out = tmp_path / "be.html"
    r = CliRunner().invoke(
        app, ["breakeven", "dlrm", "--degree", "4", "--json", "--html", str(out)]
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["status"] == "tie" and doc["price_item"] == "switch_port_100G"
    assert doc["bracket_prices_usd"][0] < doc["price_usd"] < doc["bracket_prices_usd"][1]
    assert len(doc["curve"]) >= 9 and all("iteration_s" in p for p in doc["curve"])
    assert 'id="breakeven-curve"' in out.read_text()
    bad = CliRunner().invoke(app, ["breakeven", "dlrm", "--prices", "no-such-table"])
    assert bad.exit_code == 2 and "prices" in bad.output
