"""Flow counts of plan-derived iterations: the structural count, the size guard and the bucket
coarsening (``simulate_iteration``'s ``max_flows`` and ``max_buckets``)."""

from __future__ import annotations

import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim import iteration
from topoopt.flowsim.iteration import TooManyFlows, simulate_iteration
from topoopt.flowsim.network import Network
from topoopt.flowsim.roofline import A100
from traffic.build import workload_from_plan
from traffic.errors import InputError

MODEL = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128, "global_batch": 16}
CLUSTER = {"servers": 4, "gpus_per_server": 2}
BUCKET = 1e5  # bytes: a small model asks hundreds of buckets, as GPT-3 does at 25 MB


def _workload(**par):
    return workload_from_plan({"model": MODEL, "parallelism": par, "cluster": CLUSTER})


def _fsdp():
    """tp2 dp4 FSDP full_shard, m = 4: per micro-batch all-gathers and reduce-scatters of the
    whole stage, bucketed by the last backward task."""
    return _workload(tp=2, dp=4, micro_batch_size=1, global_batch_size=16, fsdp="full_shard")


def _fabric(w, latency=None):
    kw = {} if latency is None else {"latency": latency}
    return ideal(w.servers, gpus_per_server=w.gpus_per_server, port_bandwidth=12.5e9, **kw)


@pytest.mark.parametrize(
    "w",
    [
        _fsdp(),
        _workload(tp=1, dp=8, micro_batch_size=2, global_batch_size=16, zero=2),
        _workload(tp=2, pp=2, vpp=2, dp=2, micro_batch_size=1, global_batch_size=16),
        _workload(tp=1, pp=2, cp=2, dp=2, micro_batch_size=1, global_batch_size=16),
        workload_from_plan("vgg16-dp"),
    ],
    ids=["fsdp", "zero2", "interleaved", "cp", "vgg16-dp"],
)
@pytest.mark.parametrize("max_buckets", [None, 3])
def test_flow_count_is_what_build_creates(w, max_buckets):
    """The count from the plan's structure equals the flows the model then builds."""
    net = Network(_fabric(w), w.gpus_per_server)
    model = iteration._PipelineModel(w, net, A100, BUCKET, "ring", "fluid", None, max_buckets)
    fb, _, _ = model.build(frozenset())
    assert model.n_flows() == fb.n


def test_flow_count_with_a_design_s_rings():
    """A design's workload (each collective split into rings, coupled channel by channel)."""
    from topoopt.app.studies.compare import build_fabric

    w = _fsdp()
    run = build_fabric("topoopt", w, 2, 12.5e9, seed=0)
    assert any("[ring" in d.name for d in run.workload.demands)
    net = Network(run.fabric, w.gpus_per_server, routing=run.routing)
    for max_buckets in (None, 5):
        model = iteration._PipelineModel(
            run.workload, net, A100, BUCKET, "ring", "fluid", None, max_buckets
        )
        fb, _, _ = model.build(frozenset())
        assert model.n_flows() == fb.n


def test_guard_raises_before_building(monkeypatch):
    """Above ``max_flows``: a one-line InputError naming the count, and nothing is built."""
    w = _fsdp()
    fab = _fabric(w)
    n = simulate_iteration(w, fab, bucket_bytes=BUCKET, exposed_by_class=False).info["flows"]
    ok = simulate_iteration(w, fab, bucket_bytes=BUCKET, exposed_by_class=False, max_flows=n)
    assert ok.info["flows"] == n

    def never(*a, **k):  # the guard must not build the flows it refuses
        raise AssertionError("built")

    monkeypatch.setattr(iteration._PipelineModel, "build", never)
    with pytest.raises(TooManyFlows) as e:
        simulate_iteration(w, fab, bucket_bytes=BUCKET, max_flows=n - 1)
    assert isinstance(e.value, InputError) and e.value.n_flows == n
    assert "\n" not in str(e.value) and f"{n:,} flows" in str(e.value)
    with pytest.raises(InputError, match="max_buckets"):
        simulate_iteration(w, fab, max_buckets=0)


def test_bucket_cap_exact_when_inactive_and_bounded_otherwise():
    """A cap at or above the bucket count changes nothing (same iteration to 1e-12, same flows);
    below it, fewer flows and an error within the docstring's bound ``1 / max_buckets`` of the
    iteration (links without latency: each bucket's latency is the bound's other term), falling
    as the cap rises."""
    w = _fsdp()
    fab = _fabric(w, latency=0.0)
    exact = simulate_iteration(w, fab, bucket_bytes=BUCKET, exposed_by_class=False)
    net = Network(fab, w.gpus_per_server)
    nb = int(iteration._PipelineModel(w, net, A100, BUCKET, "ring", "fluid").pieces.max())
    assert nb > 100 and not exact.info["buckets_capped"]
    same = simulate_iteration(w, fab, bucket_bytes=BUCKET, exposed_by_class=False, max_buckets=nb)
    assert not same.info["buckets_capped"] and same.info["flows"] == exact.info["flows"]
    assert same.iteration_s == pytest.approx(exact.iteration_s, rel=1e-12)
    errors = []
    for cap in (4, 16, 64):
        c = simulate_iteration(w, fab, bucket_bytes=BUCKET, exposed_by_class=False, max_buckets=cap)
        assert c.info["buckets_capped"] and c.info["flows"] < exact.info["flows"]
        assert c.compute_s == pytest.approx(exact.compute_s, rel=1e-12)
        err = abs(c.iteration_s - exact.iteration_s) / exact.iteration_s
        assert 0 < err <= 1.0 / cap
        errors.append(err)
    assert errors == sorted(errors, reverse=True)
