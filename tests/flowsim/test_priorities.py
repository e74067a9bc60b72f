"""Lina priorities in the iteration model (:mod:`topoopt.flowsim.priorities`).

- class levels from task labels, priority parsing and its errors;
- micro-op splitting: closed forms (a chain on one link, with latency; dependents wait for the
  last micro-op; multiplicity kept), and results mapped back to the original flows;
- a priority order that puts every flow at one level is the plain simulation;
- the direction on an MoE plan over an oversubscribed fat-tree: priority to ``ep`` lowers the
  exposed communication, priority to ``dp`` raises it (docs/priorities.md has the figures);
- the CLI: ``--priority`` in the JSON, bad classes one line and exit 2.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.studies.compare import build_fabric
from topoopt.fabrics import ideal
from topoopt.flowsim import FlowSet, simulate
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.priorities import (
    check_priority,
    priority_levels,
    split_flows,
    unsplit_result,
)
from topoopt.flowsim.timevarying import simulate_epochs
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.load import load_workload

MOE_PLAN = "mixtral-8x7b-32x4"  # embedded: traffic/plans/mixtral-8x7b-32x4.yaml


def test_levels_from_labels():
    labels = np.array(["ep+tp", "dp", "compute", "", "tp", "pp", "ep"], dtype=object)
    assert priority_levels(labels, ("ep",)).tolist() == [0, 1, 1, 1, 1, 1, 0]
    assert priority_levels(labels, ("tp", "ep")).tolist() == [0, 2, 2, 2, 0, 2, 1]
    assert priority_levels(labels, ("dp", "pp")).tolist() == [2, 0, 2, 2, 2, 1, 2]


@pytest.mark.parametrize("bad", ["", "ep,ep", "ep,bogus", "EP", 3, ["ep", 1]])
def test_bad_priority_is_an_input_error(bad):
    with pytest.raises(InputError) as err:
        check_priority(bad)
    assert err.value.field == "priority"


def test_split_chain_on_one_link_with_latency():
    # 25 bytes at 10 B/s, 0.1 s latency: whole, 2.5 + 0.1 s. In 3 micro-ops of 25/3 bytes,
    # each starting when the previous one has arrived: 3 * (25/30 + 0.1) s. The dependent
    # 5-byte flow starts at the last micro-op's finish.
    fs = FlowSet.single_path(
        [10.0], [0.1], size=[25.0, 5.0], start=[0.0, 0.0], paths=[[0], [0]], after=[[], [0]]
    )
    small, owner = split_flows(fs, np.array([True, False]), 10.0)
    assert owner.tolist() == [0, 0, 0, 1] and small.deps.tolist() == [0, 1, 2]
    res = unsplit_result(simulate(small), fs, owner)
    chain = 3 * (25 / 30 + 0.1)
    np.testing.assert_allclose(res.finish, [chain, chain + 0.5 + 0.1], rtol=1e-12)
    np.testing.assert_allclose(res.start, [0.0, chain], rtol=1e-12)
    np.testing.assert_allclose(res.link_bytes, [30.0])
    whole = simulate(fs)
    np.testing.assert_allclose(whole.finish, [2.6, 3.2], rtol=1e-12)


def test_split_keeps_paths_weights_multiplicity_and_small_flows():
    fs = FlowSet(
        capacity=[4.0, 4.0, 4.0],
        latency=[0.0, 0.0, 0.0],
        size=[8.0, 3.0],
        start=[0.5, 0.0],
        flow_ptr=[0, 2, 3],
        path_ptr=[0, 2, 3, 4],
        path_links=[0, 1, 2, 2],
        weight=[0.25, 0.75, 1.0],
        multiplicity=[2, 1],
    )
    small, owner = split_flows(fs, np.array([True, True]), 4.0)
    # flow 0 (8 bytes) in 2 micro-ops, flow 1 (3 bytes) is not above the micro-op size
    assert owner.tolist() == [0, 0, 1] and small.size.tolist() == [4.0, 4.0, 3.0]
    assert small.multiplicity.tolist() == [2, 2, 1] and small.start.tolist() == [0.5, 0.5, 0.0]
    assert small.path_links.tolist() == [0, 1, 2, 0, 1, 2, 2]
    assert small.weight.tolist() == [0.25, 0.75, 0.25, 0.75, 1.0]
    # flow 0's finish is set by its path on link 2 (6 bytes per member), which its micro-ops
    # keep busy without a gap (no latency): the split changes no finish time
    res = unsplit_result(simulate(small), fs, owner)
    np.testing.assert_allclose(res.finish, simulate(fs).finish, rtol=1e-12)
    with pytest.raises(InputError):
        split_flows(fs, np.array([True, True]), 0.0)


def test_one_level_is_the_plain_simulation():
    w = workload_from_plan("vgg16-dp")
    fab = ideal(w.servers, gpus_per_server=w.gpus_per_server)
    plain = simulate_iteration(w, fab, exposed_by_class=False)
    # no flow of vgg16-dp is expert-parallel: every flow is at the one lowest level
    one = simulate_iteration(w, fab, exposed_by_class=False, priority="ep")
    assert one.iteration_s == pytest.approx(plain.iteration_s, rel=1e-12)
    assert one.comm_s == pytest.approx(plain.comm_s, rel=1e-12)


def test_priority_engine_on_one_fabric_link():
    # the class levels reach the engine: two flows on one link, the high one first
    fs = FlowSet.single_path([1.0], [0.0], size=[1.0, 1.0], start=[0.0, 0.0], paths=[[0], [0]])
    lev = priority_levels(np.array(["dp", "ep+tp"], dtype=object), ("ep",))
    assert simulate_epochs(fs, priority=lev).finish.tolist() == [2.0, 1.0]


@pytest.fixture(scope="module")
def moe_on_oversubscribed_fat_tree():
    w = load_workload(str(MOE_PLAN))
    return build_fabric("fat-tree-oversub", w, 8, 12.5e9, oversubscription=4.0, seed=0)


def test_ep_priority_lowers_exposed_communication(moe_on_oversubscribed_fat_tree):
    run = moe_on_oversubscribed_fat_tree

    def exposed(**kw):
        it = simulate_iteration(
            run.workload, run.fabric, routing=run.routing, exposed_by_class=False, **kw
        )
        return it.exposed_comm_s, it.compute_s

    base, compute = exposed()
    ep, compute_ep = exposed(priority="ep")
    dp, _ = exposed(priority="dp")
    assert compute_ep == compute  # priorities only reorder communication
    assert ep < base * (1 - 1e-3)  # measured: 1.1998 s -> 1.1884 s
    assert dp > base * (1 + 1e-3)  # measured: 1.2107 s


def test_cli_priority_option(tmp_path):
    runner = CliRunner()
    args = ["simulate", "vgg16-dp", "--fabric", "ideal", "--json"]
    r = runner.invoke(app, [*args, "--priority", "dp", "--split-allreduce", "4000000"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout[r.stdout.index("{") :])
    assert doc["priority"] == ["dp"] and doc["split_allreduce_bytes"] == 4e6
    bad = runner.invoke(app, [*args, "--priority", "ep,bogus"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines()[-1].startswith("error:")
    bad = runner.invoke(app, [*args, "--split-allreduce", "-1"])
    assert bad.exit_code == 2
