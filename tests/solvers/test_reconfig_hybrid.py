"""Per-phase circuits of a hybrid fabric's optical half (issue 26, MixNet's closest model).

The static run is ``compare``'s ``hybrid`` simulation exactly; per-phase circuits are never
slower than static, keep the static circuits at a delay longer than the iteration, and the chosen
schedule re-simulated gives the reported time.
"""

from __future__ import annotations

import numpy as np
import pytest

from solvers.reconfig.hybrid_phase import (
    HybridSet,
    electrical_part,
    iteration_under_hybrid_schedule,
    optical_circuits,
    reconfigure_hybrid,
)
from topoopt.fabrics.hybrid import add_optical_layer
from traffic.errors import InputError

SMALL_PP = """\
# a pipeline of 2 stages (servers 0-7, 8-15) and 8 replicas: the 1F1B phases carry stage-to-stage
# pairs, the gradient sync ring pairs within a stage
model: {base: llama3-8b, layers: 4}
parallelism: {tp: 1, pp: 2, dp: 8, micro_batch_size: 1, global_batch_size: 32}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 16, gpus_per_server: 1}
"""
B = 12.5e9


@pytest.fixture(scope="module")
def hybrid_run(tmp_path_factory):
    from topoopt.app.studies.compare import build_fabric
    from traffic.load import load_workload

    path = tmp_path_factory.mktemp("hybrid") / "small_pp.yaml"
    path.write_text(SMALL_PP)
    # compare's hybrid row at 4 ports: 2 NICs on a 4:1 leaf-spine, 2 optical ports (a ring)
    return build_fabric("hybrid", load_workload(str(path)), 4, B)


def test_electrical_part_is_the_inverse_of_add_optical_layer(hybrid_run):
    f = hybrid_run.fabric
    e = electrical_part(f)
    assert e.family == "leaf-spine" and not np.any(e.link_kind == "optical")
    g = add_optical_layer(e, 2, optical_circuits(f), B)
    for a in ("src", "dst", "capacity", "latency", "multiplicity", "node_ports", "link_kind"):
        assert np.array_equal(getattr(f, a), getattr(g, a)), a
    # the geometric circulant of one stride: a ring of 16 single circuits
    assert optical_circuits(f)[:, 2].tolist() == [1] * 16
    with pytest.raises(InputError, match="a hybrid fabric"):
        electrical_part(e)


def test_per_phase_never_slower_than_static(hybrid_run):
    from topoopt.flowsim.iteration import simulate_iteration

    w, f = hybrid_run.workload, hybrid_run.fabric
    it = simulate_iteration(w, f, routing=hybrid_run.routing, exposed_by_class=False).iteration_s
    r = reconfigure_hybrid(w, f, hybrid_run.routing, 1e-5, holds=())
    assert r.static_iteration_s == it  # compare's own simulation, the same numbers
    assert r.lower_bound_s <= r.iteration_s <= r.static_iteration_s
    # the phases' demand circuits differ from the ring: every phase has its own set
    assert all(len(c) == 2 for c in r.candidates)
    assert all(isinstance(s, HybridSet) for s in r.schedule.sets)
    # the chosen schedule simulated again gives the reported time
    again = iteration_under_hybrid_schedule(w, r.schedule, f, r.dark_s)
    assert again.iteration_s == pytest.approx(r.iteration_s, rel=1e-12)
    assert r.reconfigurations > 0 and r.iteration_s < r.static_iteration_s
    # (a delay longer than the iteration keeps the static circuits: test_cli_hybrid_json)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--degree", "2"], "--degree: got 2"),
        (["--pods", "4"], "--pods"),
        (["--baselines"], "--baselines"),
        (["--seed", "0"], "--seed: got 0"),
        (["--work-limit", "5"], "--work-limit"),
    ],
)
def test_cli_bad_hybrid_options_one_line_exit_2(args, needle, tmp_path):
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    out = tmp_path / "s.json"
    cmd = ["reconfig", "vgg16-dp", "--fabric", "hybrid", *args, "--out", str(out)]
    r = CliRunner().invoke(app, cmd)
    assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_hybrid_json(hybrid_run, tmp_path):
    import json

    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    plan = tmp_path / "small_pp.yaml"
    plan.write_text(SMALL_PP)
    args = ["reconfig", str(plan), "--fabric", "hybrid", "--degree", "4", "--link-gbps", "100"]
    r = CliRunner().invoke(app, [*args, "--delay-us", "1e7", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["fabric"] == "hybrid" and doc["optical_degree"] == 2
    # a 10 s delay keeps compare's circuits: compare's hybrid iteration and price
    assert doc["iteration_s"] == doc["static_iteration_s"] and doc["reconfigurations"] == 0
    assert doc["capex"]["chosen"] == doc["capex"]["static"]
    assert doc["capex"]["static"]["capex_usd"] == pytest.approx(hybrid_run.capex_usd, rel=1e-12)
    assert doc["schedule"][0]["circuits"] == optical_circuits(hybrid_run.fabric).tolist()
