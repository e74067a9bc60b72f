"""Eager-1F1B (AlpaComm, MLSys 2023): the order, its memory rule, its makespan against a direct
recursion and a closed form, and the guarantee that it is never slower than 1F1B."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.fabrics import ideal
from topoopt.fabrics.fat_tree import leaf_spine
from topoopt.flowsim.iteration import SCHEDULES, pipeline_order, simulate_iteration
from topoopt.flowsim.roofline import RooflineParams
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.workload import Demand, Workload

GPU = RooflineParams(peak_flops=1e12, efficiency=1.0, memory_bandwidth=1e12)
runner = CliRunner()
SMALL = {"base": "gpt3-175b", "layers": 8, "hidden": 1024, "heads": 16, "ffn": 4096}
SMALL |= {"seq_len": 512, "vocab": 32000}


def chain(p: int, m: int, flops, send: float) -> Workload:
    """p stages of one GPU each on p servers, sends of ``send`` bytes between stages."""
    dem = []
    for a in range(p - 1):
        dem.append(Demand("send", [[a, a + 1]], send, "pp", "forward", m, False, stage=a))
        dem.append(Demand("send", [[a + 1, a]], send, "pp", "backward", m, False, stage=a + 1))
    info = {
        "micro_batches": m,
        "forward_flops_per_microbatch_per_gpu": [float(f) for f in flops],
        "parameters_per_gpu_per_stage": [0] * p,
    }
    return Workload(p, 1, tuple(dem), info=info, conventions={"vpp": 1})


def makespan(orders, tf, tb) -> float:
    """Makespan of per-stage task orders with instantaneous communication, by recursion."""
    p = len(orders)
    prev, end = {}, {}
    for i, o in enumerate(orders):
        for k, (ph, j) in enumerate(o):
            prev[(i, ph, j)] = (i, *o[k - 1]) if k else None

    def finish(key):
        if key not in end:
            i, ph, j = key
            start = 0.0 if prev[key] is None else finish(prev[key])
            if ph == 0 and i > 0:
                start = max(start, finish((i - 1, 0, j)))
            if ph == 1:
                start = max(start, finish((i + 1, 1, j)) if i < p - 1 else finish((i, 0, j)))
            end[key] = start + (tf[i] if ph == 0 else tb[i])
        return end[key]

    sys.setrecursionlimit(100000)
    return max(finish((i, 1, len(orders[i]) // 2 - 1)) for i in range(p))


def test_eager_order_is_alpas_overlap_friendly_table():
    # Alpa's OverlapFriendlyPipeDreamSchedule docstring, 3 meshes: mesh 0 runs 5 forwards
    # before its first backward, mesh 1 three, mesh 2 one (as 1F1B)
    o = [pipeline_order(3, 6, i, eager=True)[:, :2].tolist() for i in range(3)]
    assert o[0][:8] == [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0], [0, 5], [1, 1]]
    assert o[1][:6] == [[0, 0], [0, 1], [0, 2], [1, 0], [0, 3], [1, 1]]
    assert o[2] == pipeline_order(3, 6, 2)[:, :2].tolist()


@pytest.mark.parametrize(("p", "m"), [(2, 1), (3, 2), (4, 4), (4, 9), (5, 3)])
def test_eager_order_keeps_every_task_once_and_the_memory_rule(p, m):
    for i in range(p):
        o = pipeline_order(p, m, i, eager=True)
        assert sorted(map(tuple, o[:, :2].tolist())) == [(ph, j) for ph in (0, 1) for j in range(m)]
        # forwards and backwards each in micro-batch order
        assert o[o[:, 0] == 0, 1].tolist() == list(range(m))
        assert o[o[:, 0] == 1, 1].tolist() == list(range(m))
        inflight = np.cumsum(np.where(o[:, 0] == 0, 1, -1))
        assert inflight.max() == min(2 * (p - i) - 1, m)
        plain = np.cumsum(np.where(pipeline_order(p, m, i)[:, 0] == 0, 1, -1))
        assert plain.max() == min(p - i, m)


@pytest.mark.parametrize(("p", "m"), [(2, 3), (3, 5), (4, 6)])
def test_eager_makespan_matches_the_recursion_and_the_closed_form(p, m):
    rng = np.random.default_rng(p * 7 + m)
    flops = rng.uniform(0.5, 2.0, p) * 1e12
    w = chain(p, m, flops, 1.0)  # 1 byte: communication negligible
    fab = ideal(p, port_bandwidth=1e12, latency=0.0)
    r = simulate_iteration(w, fab, gpu=GPU, schedule="eager-1f1b", exposed_by_class=False)
    tf, tb = flops / 1e12, 2 * flops / 1e12
    for key, eager in (("eager_1f1b_s", True), ("1f1b_s", False)):
        orders = [pipeline_order(p, m, i, eager=eager)[:, :2].tolist() for i in range(p)]
        assert r.info[key] == pytest.approx(makespan(orders, tf, tb), rel=1e-9)
    # equal stages, nothing to overlap: both are (m + p - 1)(F + B)
    w = chain(p, m, [1e12] * p, 1.0)
    r = simulate_iteration(w, fab, gpu=GPU, schedule="eager-1f1b", exposed_by_class=False)
    assert r.info["eager_1f1b_s"] == pytest.approx((m + p - 1) * 3.0, rel=1e-9)
    assert r.info["1f1b_s"] == pytest.approx((m + p - 1) * 3.0, rel=1e-9)


def test_one_stage_has_nothing_to_overlap():
    w = workload_from_plan("vgg16-dp")
    fab = ideal(w.servers, gpus_per_server=w.gpus_per_server)
    a = simulate_iteration(w, fab, schedule="1f1b", exposed_by_class=False)
    b = simulate_iteration(w, fab, schedule="eager-1f1b", exposed_by_class=False)
    assert a.iteration_s == b.iteration_s and b.info["schedule_used"] == "eager-1f1b"


def test_eager_overlaps_slow_sends():
    # fast compute, sends as long as a forward: eager sends the next micro-batches early
    w = chain(3, 8, [1e12] * 3, 1e9)
    fab = ideal(3, port_bandwidth=1e9, latency=0.0)
    r = simulate_iteration(w, fab, gpu=GPU, schedule="eager-1f1b", exposed_by_class=False)
    assert r.info["eager_1f1b_s"] < r.info["1f1b_s"]
    assert r.info["schedule_used"] == "eager-1f1b" and r.iteration_s == r.info["eager_1f1b_s"]


@settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    p=st.integers(2, 5),
    m=st.integers(1, 8),
    flops=st.lists(st.floats(0.2, 2.0), min_size=5, max_size=5),
    send=st.floats(0.0, 3.0),
)
def test_eager_is_never_slower_than_1f1b_on_random_pipelines(p, m, flops, send):
    w = chain(p, m, np.asarray(flops[:p]) * 1e12, send * 1e9)
    fab = ideal(p, port_bandwidth=1e9)
    a = simulate_iteration(w, fab, gpu=GPU, schedule="1f1b", exposed_by_class=False)
    b = simulate_iteration(w, fab, gpu=GPU, schedule="eager-1f1b", exposed_by_class=False)
    assert b.iteration_s <= a.iteration_s
    assert b.info["1f1b_s"] == a.iteration_s
    assert b.iteration_s == min(b.info["eager_1f1b_s"], b.info["1f1b_s"])
    assert b.iteration_s >= b.compute_s > 0


@pytest.mark.parametrize("resharding", ["naive", "broadcast"])
def test_eager_on_a_stage_tp_plan(resharding):
    plan = {
        "model": dict(SMALL),
        "parallelism": {"stage_tp": [8, 8, 4, 4], "pp": 4, "dp": 2, "global_batch_size": 16},
        "options": {"resharding": resharding},
        "cluster": {"servers": 6, "gpus_per_server": 8},
    }
    w = workload_from_plan(plan)
    fab = leaf_spine(6, 1.0, port_bandwidth=1.25e9, gpus_per_server=8)
    a = simulate_iteration(w, fab, schedule="1f1b", exposed_by_class=False)
    b = simulate_iteration(w, fab, schedule="eager-1f1b", exposed_by_class=False)
    assert b.iteration_s <= a.iteration_s == b.info["1f1b_s"]
    assert b.info["eager_1f1b_s"] > 0


def test_schedule_errors():
    w = chain(2, 2, [1e12] * 2, 1.0)
    fab = ideal(2)
    with pytest.raises(InputError, match="one of 1f1b, interleaved, eager-1f1b"):
        simulate_iteration(w, fab, schedule="gpipe")
    wv = workload_from_plan(
        {
            "model": dict(SMALL),
            "parallelism": {"tp": 8, "pp": 2, "vpp": 2, "dp": 1},
            "cluster": {"servers": 2, "gpus_per_server": 8},
        }
    )
    fv = ideal(2, gpus_per_server=8)
    for s in ("1f1b", "eager-1f1b"):
        with pytest.raises(InputError, match="interleaved"):
            simulate_iteration(wv, fv, schedule=s, exposed_by_class=False)
    a = simulate_iteration(wv, fv, schedule="interleaved", exposed_by_class=False)
    b = simulate_iteration(wv, fv, exposed_by_class=False)
    assert a.iteration_s == b.iteration_s and SCHEDULES[1] == "interleaved"


def test_simulate_cli_schedule(tmp_path):
    path = tmp_path / "st.json"
    doc = {
        "model": dict(SMALL),
        "parallelism": {"stage_tp": [8, 8, 4, 4], "pp": 4, "dp": 2, "global_batch_size": 16},
        "options": {"resharding": "broadcast"},
        "cluster": {"servers": 6, "gpus_per_server": 8},
    }
    path.write_text(json.dumps(doc))
    r = runner.invoke(
        app,
        [
            "simulate",
            str(path),
            "--fabric",
            "fat-tree-oversub",
            "--schedule",
            "eager-1f1b",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["schedule"] == "eager-1f1b" and out["iteration_s"] <= out["1f1b_s"]
    r = runner.invoke(app, ["simulate", str(path), "--fabric", "ideal", "--schedule", "gpipe"])
    assert r.exit_code == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()  # one line: the option, the value, the choices
    assert line.startswith("error: ") and "--schedule" in line and "'gpipe'" in line, line
    assert all(f"'{c}'" in line for c in ("1f1b", "interleaved", "eager-1f1b")), line


@settings(
    max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    st.sampled_from([2, 4]).flatmap(
        lambda p: st.lists(st.sampled_from([1, 2, 4, 8]), min_size=p, max_size=p)
    ),
    st.integers(1, 2),
    st.booleans(),
    st.sampled_from(["naive", "broadcast"]),
)
def test_eager_is_never_slower_on_random_stage_tp_plans(stage_tp, dp, sp, resharding):
    gpus = dp * sum(stage_tp)
    gps = 4 if gpus % 4 == 0 else 2 if gpus % 2 == 0 else 1
    plan = {
        "model": dict(SMALL),
        "parallelism": {
            "stage_tp": stage_tp,
            "pp": len(stage_tp),
            "dp": dp,
            "sp": sp,
            "global_batch_size": 4 * dp,
        },
        "options": {"resharding": resharding},
        "cluster": {"servers": gpus // gps, "gpus_per_server": gps},
    }
    w = workload_from_plan(plan)
    fab = leaf_spine(w.servers, 1.0, port_bandwidth=1.25e9, gpus_per_server=gps)
    a = simulate_iteration(w, fab, schedule="1f1b", exposed_by_class=False)
    b = simulate_iteration(w, fab, schedule="eager-1f1b", exposed_by_class=False)
    assert b.iteration_s <= a.iteration_s == b.info["1f1b_s"]
    assert b.iteration_s >= b.compute_s > 0
