"""The per-GPU memory model against published figures and closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from traffic.memory import (
    activation_bytes_per_layer,
    in_flight_layers,
    memory_per_gpu,
    zero_model_state_bytes,
)
from traffic.models.megatron import stage_parameters
from traffic.plan import load_plan


def test_zero_paper_figure1_and_table1():
    """Rajbhandari et al., "ZeRO" (SC'20, arXiv 1910.02054), Figure 1: 7.5B parameters, N_d = 64,
    K = 12: 120 GB baseline, 31.4 GB P_os, 16.6 GB P_os+g, 1.9 GB P_os+g+p; Table 1 (7.5B model
    rows): N_d = 4 -> 52.5 / 41.3 / 30, N_d = 16 -> 35.6 / 21.6 / 7.5, N_d = 1024 -> 30.1 / 15.1
    / 0.12 GB; section 3.1: mixed-precision Adam needs 16 Psi bytes."""
    gb = [round(sum(zero_model_state_bytes(7.5e9, 64, z)) / 1e9, 1) for z in range(4)]
    assert gb == [120.0, 31.4, 16.6, 1.9]
    table = {4: (52.5, 41.3, 30.0), 16: (35.6, 21.6, 7.5), 1024: (30.1, 15.1, 0.12)}
    for nd, want in table.items():
        got = [sum(zero_model_state_bytes(7.5e9, nd, z)) / 1e9 for z in (1, 2, 3)]
        assert got == pytest.approx(want, abs=0.06)
    assert sum(zero_model_state_bytes(1.0, 1, 0)) == 16.0


def test_korthikanti_table2_forms():
    """Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models"
    (MLSys'23, arXiv 2205.05198), Table 2: activation bytes per layer
    sbh(34 + 5as/h) without parallelism, sbh(10 + 24/t + 5as/(ht)) with TP,
    sbh(34/t + 5as/(ht)) with TP+SP, sbh(10 + 24/t) TP + selective, 34sbh/t TP+SP+selective,
    2sbh with full recomputation; checked on random shapes."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        s, b, h, a = (int(x) for x in rng.integers([64, 1, 64, 1], [4096, 8, 16384, 128]))
        t = int(rng.choice([1, 2, 4, 8]))
        sbh = s * b * h
        f = activation_bytes_per_layer
        assert f(s, b, h, a) == pytest.approx(sbh * (34 + 5 * a * s / h))
        assert f(s, b, h, a, tp=t) == pytest.approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)))
        assert f(s, b, h, a, tp=t, sp=True) == pytest.approx(sbh * (34 / t + 5 * a * s / (h * t)))
        assert f(s, b, h, a, tp=t, recompute="selective") == pytest.approx(sbh * (10 + 24 / t))
        assert f(s, b, h, a, tp=t, sp=True, recompute="selective") == pytest.approx(34 * sbh / t)
        assert f(s, b, h, a, tp=t, recompute="full") == pytest.approx(2 * sbh)


def test_korthikanti_headline_ratios():
    """Korthikanti et al. section 4.2.2: selective recomputation saves 70% of the activation
    memory of GPT-3 (5as/h = 80) and 65% of MT-NLG 530B (5as/h = 64), no tensor parallelism;
    abstract / section 6: sequence parallelism with selective recomputation cuts activation
    memory about 5x against tensor parallelism alone, for the Table 3 configurations (s = 2048,
    t = 8; 175B: a = 96, h = 12288; 530B: a = 128, h = 20480; 1T: a = 160, h = 25600)."""
    f = activation_bytes_per_layer
    gpt3 = 1 - f(2048, 1, 12288, 96, recompute="selective") / f(2048, 1, 12288, 96)
    mtnlg = 1 - f(2048, 1, 20480, 128, recompute="selective") / f(2048, 1, 20480, 128)
    assert round(gpt3, 2) == 0.70 and round(mtnlg, 2) == 0.65
    for h, a in ((12288, 96), (20480, 128), (25600, 160)):
        ratio = f(2048, 1, h, a, tp=8) / f(2048, 1, h, a, tp=8, sp=True, recompute="selective")
        assert 4.9 < ratio < 5.5


def test_pipeline_in_flight_matches_korthikanti():
    """Korthikanti et al. section 4.2.3: the first stage of 1F1B holds p micro-batches, i.e. L
    layers' worth whatever p; interleaving with m chunks multiplies it by (1 + (p-1)/(pm))."""
    for p in (2, 4, 8, 16):
        for v in (1, 2, 3):
            L = p * v * 2
            got = in_flight_layers(L // p, p, 0, 4 * p, v)
            assert got == pytest.approx(L * (1 + (p - 1) / (p * v)) if v > 1 else L)
    # later stages hold fewer; too few micro-batches cap the warm-up
    assert in_flight_layers(6, 16, 15, 100) == 6
    assert in_flight_layers(6, 16, 0, 3) == 18


def _plan(options=None, **par):
    doc = {
        "model": "gpt3-175b",
        "parallelism": {"micro_batch_size": 1, **par},
        "cluster": {"servers": 16, "gpus_per_server": 8},
    }
    if options:
        doc["options"] = options
    return load_plan(doc)


def test_memory_per_gpu_sums_independent_derivation():
    """GPT-3 175B tp8 pp16 dp1 on 128 GPUs: stage 0 holds its exact parameters x 18 bytes (2-byte
    weight, Megatron's fp32 gradient buffer of a bf16 run, 12 bytes of Adam state; 16 with
    2-byte gradients, the ZeRO paper's count) and 16 micro-batches x 6 layers x 23 sbh of
    activations plus the embedding dropout mask."""
    plan = _plan(tp=8, pp=16, dp=1)
    r = memory_per_gpu(plan)
    psi0 = stage_parameters(plan)[0].dense
    sbh = 2048 * 12288
    assert r.stage == 0
    assert r.parameters_bytes + r.gradients_bytes + r.optimizer_bytes == 18 * psi0
    r16 = memory_per_gpu(_plan({"grad_reduce_dtype": "gradient"}, tp=8, pp=16, dp=1))
    assert r16.parameters_bytes + r16.gradients_bytes + r16.optimizer_bytes == 16 * psi0
    assert r.activations_bytes == pytest.approx(96 * 23 * sbh + 16 * sbh)
    assert r.total_bytes < 80 * 2**30  # the hand plan fits an 80 GB A100 (81,920 MiB)


def test_sharding_divides_states():
    """ZeRO stages and FSDP modes shard what the ZeRO paper says, over dp * cp ranks (one
    gradient width for all, so that only the sharding differs)."""
    o = {"grad_reduce_dtype": "bf16"}
    base = memory_per_gpu(_plan(o, tp=8, pp=4, dp=4))
    z1 = memory_per_gpu(_plan(o, tp=8, pp=4, dp=4, distributed_optimizer=True))
    z3 = memory_per_gpu(_plan(o, tp=8, pp=4, dp=4, fsdp="full_shard"))
    z2 = memory_per_gpu(_plan(o, tp=8, pp=4, dp=4, zero=2))
    assert z1.optimizer_bytes == pytest.approx(base.optimizer_bytes / 4)
    assert z1.parameters_bytes == base.parameters_bytes
    assert z2.gradients_bytes == pytest.approx(base.gradients_bytes / 4)
    assert z2.parameters_bytes == base.parameters_bytes
    assert z3.parameters_bytes == pytest.approx(base.parameters_bytes / 4)
    assert z3.activations_bytes == base.activations_bytes


def test_recsys_memory_follows_placement():
    """DLRM: a GPU holds its tables whole (rows x dim x 4 bytes for fp32); stacking two tables
    on one GPU doubles that GPU's embedding bytes."""
    plan = load_plan("dlrm")
    rr = memory_per_gpu(plan)
    table = 10**7 * 128 * 4
    assert rr.parameters_bytes == pytest.approx(table + 4139393 * 4)
    where = np.arange(64) % 128
    where[1] = 0
    two = memory_per_gpu(plan, table_gpus=where)
    assert two.parameters_bytes - rr.parameters_bytes == pytest.approx(table)


@pytest.mark.parametrize("dtype", ["auto", "fp32", "bf16", "gradient"])
@pytest.mark.parametrize("par", [{}, {"zero": 2}, {"distributed_optimizer": True}])
def test_gradient_memory_and_traffic_use_one_width(dtype, par):
    """Issue 29 item 16: the gradient buffer counted in memory has the width the data-parallel
    reduction sends (traffic conventions.grad_reduce_bytes); the old model counted 2 bytes
    while the traffic reduced 4 (bf16 Megatron runs reduce in fp32)."""
    from traffic.build import workload_from_plan

    plan = _plan({"grad_reduce_dtype": dtype}, tp=8, pp=4, dp=4, **par)
    beta = workload_from_plan(plan).conventions["grad_reduce_bytes"]
    assert beta == {"fp32": 4, "bf16": 2, "gradient": 2}.get(dtype, 2 if par.get("zero") else 4)
    r = memory_per_gpu(plan)
    psi = stage_parameters(plan)[r.stage].dense
    shard = 4 if par.get("zero", 0) >= 2 else 1
    assert r.gradients_bytes == beta * psi / shard
