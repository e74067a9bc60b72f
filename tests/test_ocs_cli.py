"""``topoopt design --ocs-radix``: the design fits its optical layer of finite-radix OCSes."""

from __future__ import annotations

import json

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
    joint search's own circuits do not fit this layer (``repair`` is recorded); the returned
    design's every circuit joins two ports of one OCS, each port used once, checked against the
    layout computed by hand, and the port rows are exactly the design's circuits."""
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
    assert info["repair"] is not None and design.solver == "joint + OCS repair"
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
    free = CliRunner().invoke(app, args[:6] + ["--work-limit", "2", "--json"])
    assert free.exit_code == 0, free.output
    with pytest.raises(InputError, match="OCS layer"):
        check_ocs(json.loads(free.stdout)["circuits"], OcsLayout(12, 4, 6))
