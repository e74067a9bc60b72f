"""``topoopt design --ocs-radix``: the design fits its optical layer of finite-radix OCSes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from solvers import check_ocs, design_fabric, load_design
from topoopt.app.cli.app import app
from topoopt.fabrics import OcsLayout, bill_of_materials
from traffic.errors import InputError

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


def _per_rail_ocs(s: int, p: int) -> int:
    """The OCS port ``p`` of server ``s`` lands on, by hand for 12 servers x 4 ports on OCSes of
    6 ports: ``k = 2`` OCSes per port index, boundaries shifted by ``12 // (2 x 4) = 1`` server
    from one port index to the next (OCS ``2p`` holds positions 0-5 of group ``p``, ``2p + 1``
    positions 6-11, server ``s`` at position ``(s + p) mod 12``)."""
    return 2 * p + ((s + p) % 12 >= 6)


def test_joint_design_never_joins_ports_without_a_common_ocs(tmp_path):
    """Issue 24.5: ``design --solver joint`` on a per-rail optical layer of finite radix. The
    search keeps the layer inside (its candidates fitted to the OCSes, swaps of two circuits
    on one OCS, circuits built on the OCSes): no repair afterwards, and the design is no worse
    than the unconstrained design repaired onto the layer (0.385 s, what stop 33 shipped;
    0.290 s now, 0.269 s unconstrained). Every circuit joins two ports of one OCS, each port
    used once, checked against the layout computed by hand, and the port rows are exactly the
    design's circuits."""
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    out = tmp_path / "d.json"
    args = ["design", str(plan), "--solver", "joint", "--degree", "4", "--ocs-radix", "6",
            "--ocs-layout", "per-rail", "--work-limit", "2", "--out", str(out),
            "--json"]  # fmt: skip
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    design = load_design(out)
    info = design.info["ocs"]
    assert (info["layout"], info["radix"], info["ocs"], info["ocs_port"]) == ("per-rail", 6, 8, 48)
    assert info["repair"] is None and design.solver == "joint"
    assert design.info["ocs_search"]["candidates_repaired"] > 0  # its raw candidates did not fit
    rows = info["ports"]
    assert len(rows) == design.circuits.total == 24  # 12 servers x 4 ports, all used
    ends = [(u, p) for u, p, _, _, _ in rows] + [(v, q) for _, _, v, q, _ in rows]
    assert len(set(ends)) == len(ends)  # every port holds at most one circuit
    assert all(0 <= p < 4 for _, p in ends)
    for u, p, v, q, o in rows:
        assert _per_rail_ocs(u, p) == _per_rail_ocs(v, q) == o, (u, p, v, q, o)
        assert p == q  # per-rail: a circuit stays on its port index (rail)
    counted: dict[tuple[int, int], int] = {}
    for u, _, v, _, _ in rows:
        key = (min(u, v), max(u, v))
        counted[key] = counted.get(key, 0) + 1
    assert counted == {(u, v): k for u, v, k in design.circuits.tolist()}
    # the unconstrained joint design of the same problem has a pair without a common OCS
    # or more circuits on an OCS than its servers' ports there (what the repair removed)
    free_out = tmp_path / "free.json"
    free = CliRunner().invoke(app, args[:6] + ["--work-limit", "2", "--out", str(free_out)])
    assert free.exit_code == 0, free.output
    unconstrained = load_design(free_out)
    with pytest.raises(InputError, match="OCS layer"):
        check_ocs(unconstrained.circuits, OcsLayout(12, 4, 6))
    # what the repair alone makes of it (stop 33's result), by the same congestion objective
    from solvers import DesignProblem, respect_ocs
    from traffic.load import load_workload

    problem = DesignProblem.from_workload(load_workload(str(plan)), 4, 12.5e9)
    repaired = respect_ocs(unconstrained, problem.with_options(ocs=OcsLayout(12, 4, 6)))
    assert repaired.solver == "joint + OCS repair"
    assert design.objective_s <= repaired.objective_s * (1 + 1e-9)
    assert unconstrained.objective_s <= design.objective_s * (1 + 1e-9)  # the layer only removes


def test_compare_puts_the_designed_fabrics_on_finite_radix_ocses():
    """``compare --ocs-radix 6``: topoopt, topoopt-best and joint on 12 servers x 4 ports are
    realised on 8 OCSes of 6 ports (per-rail: 2 per port index) and priced with all their
    ports; without the option, one patch panel of 12 ports per port index (compare's default
    device, 4 panels, 48 ports)."""
    import yaml

    from topoopt.app.studies.compare import compare
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    w = workload_from_plan(load_plan(yaml.safe_load(PLAN)))
    names = ["topoopt", "topoopt-best", "joint"]
    kw = {"degree": 4, "link_bandwidth": 12.5e9, "time_limit_s": 20.0, "work_limit": 2.0}
    res = compare(w, names, ocs_radix=6, **kw)
    assert (res.params["ocs_radix"], res.params["ocs_layout"]) == (6, "per-rail")
    layer = OcsLayout(12, 4, 6)
    for run in res.runs:
        if run.name == "ideal":
            continue
        bom = bill_of_materials(run.fabric)
        assert (bom["ocs"], bom["ocs_port"]) == (8, 48), run.name
        check_ocs(run.design, layer)
        ports = np.array(run.design.info["ocs"]["ports"])
        assert np.all(layer.ocs_of[ports[:, 0], ports[:, 1]] == ports[:, 4])
        assert np.all(layer.ocs_of[ports[:, 2], ports[:, 3]] == ports[:, 4])
    free = compare(w, ["topoopt"], **kw)
    run = next(r for r in free.runs if r.name == "topoopt")
    bom = bill_of_materials(run.fabric)
    assert (bom["patch_panel"], bom["patch_panel_port"]) == (4, 48) and "ocs" not in bom
    assert "ocs" not in run.design.info
    bad = CliRunner().invoke(app, ["compare", "dlrm", "--fabrics", "topoopt", "--ocs-radix", "1"])
    assert bad.exit_code == 2 and "ocs_radix: got 1" in bad.output
