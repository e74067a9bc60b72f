"""``topoopt design --ocs-radix``: the design fits its optical layer of finite-radix OCSes."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from solvers import check_ocs, design_fabric, load_design
from topoopt.app.cli.app import app
from topoopt.fabrics import OcsLayout, bill_of_materials

PLAN = """model: {base: llama3-8b, layers: 8, global_batch: 48, seq_len: 1024}
parallelism: {tp: 2, pp: 2, dp: 12}
cluster: {servers: 12, gpus_per_server: 4}
"""


def test_design_with_a_finite_radix_fits_and_is_priced(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    out = tmp_path / "d.json"
    args = ["design", str(plan), "--solver", "topoopt", "--degree", "4", "--ocs-radix", "6"]
    r = CliRunner().invoke(app, [*args, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["info"]["ocs"]["ocs"] == 8 and doc["info"]["ocs"]["layout"] == "per-rail"
    design = load_design(out)
    check_ocs(design, OcsLayout(12, 4, 6))
    bom = bill_of_materials(design_fabric(design))
    assert (bom["ocs"], bom["ocs_port"]) == (8, 48)
    bad = CliRunner().invoke(app, [*args[:-1], "1"])
    assert bad.exit_code == 2 and "ocs_radix: got 1" in bad.output
