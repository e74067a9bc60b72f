"""Per-phase circuits of the OCS spine (issue 26, item 2).

A closed form on four one-leaf pods checks the realisation (union fabric, dark epochs, per-set
routes); a small pipeline job checks the search against a brute force over its choices, the
static run against the spine's own simulation, and a huge delay keeping the static circuits.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from solvers.reconfig.schedule import Schedule, simulate_schedule
from solvers.reconfig.search import TIMINGS, schedule_for
from solvers.reconfig.spine import (
    SpineSet,
    iteration_under_spine_schedule,
    realise_spine_schedule,
    reconfigure_spine,
    spine_fabric,
    static_spine_circuits,
)
from topoopt.fabrics.ocs_spine import engineer_circuits, ocs_spine, ocs_spine_shape, pod_demand
from topoopt.flowsim.network import FlowBuilder, Network
from traffic.errors import InputError

# four pods, each one leaf of 4 servers (1 NIC) and one aggregation switch with 4 uplinks, on
# one 16-port OCS: every pod has 4 ports on the OCS
SHAPE = ocs_spine_shape(16, 8, pods=4, ocs_radix=16)
B, X = 10.0, 30.0  # bytes/s of a port or circuit; bytes of each flow


def _set(src_pod: int, dst_pod: int) -> np.ndarray:
    d = np.zeros((4, 4))
    d[src_pod, dst_pod] = 1.0
    return engineer_circuits(d, SHAPE.ocs_ports)


def _finish(schedule: Schedule, hold: float) -> tuple[float, float]:
    """Two phases: servers 0-3 (pod 0) send X each to 4-7 (pod 1), then to 8-11 (pod 2)."""
    r = realise_spine_schedule(schedule, SHAPE, B, hold, latency=0.0)
    fb = FlowBuilder(Network(r.fabric, intra_bandwidth=1e9))
    first = fb.add_ranks(np.arange(4), np.arange(4, 8), X)
    fb.add_ranks(np.arange(4), np.arange(8, 12), X, after=first)
    f = simulate_schedule(fb, r).finish
    return float(f[:4].max()), float(f[4:].max())


def test_engineered_sets_are_what_the_closed_form_assumes():
    a, b = _set(0, 1), _set(0, 2)
    # a floor circuit per pair, each pod's fourth port to the demanded pair (and its mirror)
    assert a[0].tolist() == [[0, 2, 1, 1], [2, 0, 1, 1], [1, 1, 0, 2], [1, 1, 2, 0]]
    assert b[0].tolist() == [[0, 1, 2, 1], [1, 0, 1, 2], [2, 1, 0, 1], [1, 2, 1, 0]]
    # both demands at once: the tie goes to the lowest pair, so the static set is set a
    both = np.zeros((4, 4))
    both[0, 1] = both[0, 2] = 1.0
    assert np.array_equal(engineer_circuits(both, SHAPE.ocs_ports), a)


@pytest.mark.parametrize("hold", [0.0, 2.0, 5.0])
def test_per_phase_circuits_closed_form(hold):
    """Static (set a): phase 1 at 2B (4X / 2B = 6 s), phase 2 over one circuit at B (12 s):
    18 s. Requested at 6 s: phase 2 at B during the dark time ``h`` (the circuit pods 0 and 2
    keep), then at 2B: done at 6 + h + (4X - B h) / 2B = 12 + h / 2. Ready at 6 s (requested
    at 6 - h): phase 1 at B from 6 - h, done at 6 + h; phase 2 at 2B: 12 + h."""
    a, b = SpineSet(_set(0, 1), "a"), SpineSet(_set(0, 2), "b")
    static = _finish(Schedule((a,), (0.0,)), hold)
    assert static == pytest.approx((4 * X / (2 * B), 4 * X / (2 * B) + 4 * X / B))
    request = _finish(Schedule((a, b), (0.0, 6.0)), hold)
    assert request == pytest.approx((6.0, 12.0 + hold / 2))
    ready = _finish(Schedule((a, b), (0.0, 6.0 - hold)), hold)
    assert ready == pytest.approx((6.0 + hold, 12.0 + hold))
    # per-phase beats static by 6 - h / 2 (before the wrap back to set a: + h)
    assert static[1] - request[1] == pytest.approx(6.0 - hold / 2)


def test_realisation_refuses_bad_circuits():
    c = _set(0, 1)
    c[0, 0, 1] = c[0, 1, 0] = 4  # pod 0 has 4 ports on the OCS: 4 + 1 + 1 circuits
    with pytest.raises(InputError, match="at most its 4 ports"):
        realise_spine_schedule(Schedule((SpineSet(c),), (0.0,)), SHAPE, B, 0.0)
    with pytest.raises(InputError, match="delay"):
        realise_spine_schedule(Schedule((SpineSet(_set(0, 1)),), (0.0,)), SHAPE, B, -1.0)


SMALL_PP = """\
# a pipeline of 2 stages (servers 0-7, 8-15) and 8 replicas: the 1F1B phases carry pod 0-2 and
# 1-3 traffic, the gradient sync pod 0-1 and 2-3 traffic
model: {base: llama3-8b, layers: 4}
parallelism: {tp: 1, pp: 2, dp: 8, micro_batch_size: 1, global_batch_size: 32}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 16, gpus_per_server: 1}
"""
KW = dict(radix=8, ports_per_server=1, pods=4, ocs_radix=16, holds=())


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from traffic.load import load_workload

    path = tmp_path_factory.mktemp("spine") / "small_pp.yaml"
    path.write_text(SMALL_PP)
    return load_workload(str(path))


def test_search_is_the_brute_force_minimum_and_static_at_a_huge_delay(small):
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.expand import expand

    w = small
    h = 1e-5
    r = reconfigure_spine(w, 12.5e9, h, **KW)
    # the static run is the spine's own simulation, its circuits engineered from the ring
    # pair traffic of the whole iteration
    pod_of = np.arange(16) // 4
    d = pod_demand(expand(w, "ring", "server").matrix(), pod_of, 4)
    fab = ocs_spine(16, 8, pods=4, ocs_radix=16, demand=d, port_bandwidth=12.5e9)
    assert np.array_equal(static_spine_circuits(w, SHAPE), engineer_circuits(d, SHAPE.ocs_ports))
    it = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    assert r.static_iteration_s == pytest.approx(it, rel=1e-9)
    # the phases carry different pod pairs: some phase has its own engineered set
    assert max(len(c) for c in r.candidates) == 2
    # every choice and timing, simulated here: the search's best is their minimum, and it beats
    # the static circuits with reconfigurations
    best = r.static_iteration_s
    for choice in itertools.product(*[range(len(c)) for c in r.candidates]):
        for timing in TIMINGS:
            sched = schedule_for(choice, r.candidates, r.phases, h, timing)
            if sched.is_static():
                continue
            run = iteration_under_spine_schedule(w, sched, SHAPE, 12.5e9, h)
            assert run.iteration_s == max(run.makespan_s, run.net_finish_s + h)  # wraps
            best = min(best, run.iteration_s)
    assert r.iteration_s == pytest.approx(best, rel=1e-12)
    assert r.reconfigurations > 0 and r.iteration_s < r.static_iteration_s
    assert r.lower_bound_s <= r.iteration_s
    # a delay longer than the iteration: no reconfiguration pays
    slow = reconfigure_spine(w, 12.5e9, 10.0, **KW)
    assert slow.reconfigurations == 0 and slow.iteration_s == slow.static_iteration_s
    assert slow.static_iteration_s == r.static_iteration_s


def test_spine_fabric_with_circuits_equals_demand_route():
    d = np.array([[0, 3, 1, 0], [3, 0, 0, 2], [1, 0, 0, 0], [0, 2, 0, 0]], float)
    f1 = ocs_spine(16, 8, pods=4, ocs_radix=16, demand=d, port_bandwidth=B)
    f2 = spine_fabric(SHAPE, B, circuits=engineer_circuits(d, SHAPE.ocs_ports))
    assert np.array_equal(f1.src, f2.src) and np.array_equal(f1.capacity, f2.capacity)
    with pytest.raises(InputError, match="one of demand, circuits, links"):
        ocs_spine(16, 8, pods=4, ocs_radix=16, demand=d, circuits=engineer_circuits(d, [[4] * 4]))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--pods", "4"], "--pods"),
        (["--fabric", "ocs-spine", "--baselines"], "--baselines"),
        (["--fabric", "spine"], "--fabric"),
        # the direct-connect search's options, even at their default values
        (["--fabric", "ocs-spine", "--solver", "joint"], "--solver: got 'joint'"),
        (["--fabric", "ocs-spine", "--phase-solvers", "demand"], "--phase-solvers: got 'demand'"),
        (["--fabric", "ocs-spine", "--work-limit", "5"], "--work-limit: got 5.0"),
        (["--fabric", "ocs-spine", "--seed", "0"], "--seed: got 0"),
    ],
)
def test_cli_bad_spine_options_one_line_exit_2(args, needle, tmp_path):
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    out = tmp_path / "s.json"
    r = CliRunner().invoke(app, ["reconfig", "vgg16-dp", *args, "--out", str(out)])
    assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_spine_json():
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    args = ["reconfig", "vgg16-dp", "--fabric", "ocs-spine", "--degree", "8", "--link-gbps", "100"]
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["fabric"] == "ocs-spine" and doc["pods"] >= 2
    assert doc["iteration_s"] <= doc["static_iteration_s"]
    assert doc["capex"]["chosen"] == doc["capex"]["static"]
    shape = (doc["ocses"], doc["pods"], doc["pods"])
    assert np.asarray(doc["schedule"][0]["circuits"]).shape == shape
