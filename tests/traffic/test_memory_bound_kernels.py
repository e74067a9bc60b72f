"""Memory-bound kernels (``options.memory_bound_kernels``) and un-overlapped gradient buckets
(``options.overlap_grad_reduce: false``): hand counts and closed forms on tiny plans."""

from __future__ import annotations

import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.roofline import A100
from traffic.build import workload_from_plan
from traffic.models.megatron import forward_memory_bytes, plan_padded_vocab
from traffic.plan import load_plan

GPT = {"base": "gpt3-175b", "layers": 4, "hidden": 256, "heads": 4, "seq_len": 128,
       "global_batch": 8}  # fmt: skip


def _plan(kernels, *, tp=1, pp=1, dp=1, sp=False, servers=1, gps=1, model=GPT, **opt):
    return load_plan(
        {"model": model, "parallelism": {"tp": tp, "pp": pp, "dp": dp, "sp": sp,
         "micro_batch_size": 2, "recompute": "full"},
         "options": {"memory_bound_kernels": kernels, **opt},
         "cluster": {"servers": servers, "gpus_per_server": gps}}
    )  # fmt: skip


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("kernels", ["scores", "flash"])
def test_gpt_bytes_are_the_hand_count(kernels, sp):
    # per layer and token, a = 2 bytes: 2 layer norms 4ah, 2 bias-dropout-adds 2(3a+1)h
    # (replicated over TP without SP), bias-GeLU 2a(4h)/t, scores (5a+1) s heads/t
    p = _plan(kernels, tp=2, pp=2, sp=sp, gps=4)
    a, h, s, heads, t, tok = 2, 256, 128, 4, 2, 2 * 128
    wide = (4 * a * h + 2 * (3 * a + 1) * h) / (t if sp else 1)
    scores = (5 * a + 1) * s * heads / t if kernels == "scores" else 0
    layer = wide + 2 * a * 4 * h / t + scores
    ce = (a + 8) * plan_padded_vocab(p) / t
    assert forward_memory_bytes(p) == pytest.approx([tok * 2 * layer, tok * (2 * layer + ce)])


def test_gated_mlp_counts_both_inputs_and_none_is_empty():
    llama = {"base": "llama3-8b", "layers": 2, "seq_len": 64, "global_batch": 2}
    p = _plan("flash", model=llama)
    m, a, tok = p.model, 2, 2 * 64
    layer = 4 * a * m.hidden + 2 * (3 * a + 1) * m.hidden + 3 * a * m.ffn
    ce = (a + 8) * plan_padded_vocab(p)
    assert forward_memory_bytes(p) == pytest.approx([tok * (2 * layer + ce)])
    assert forward_memory_bytes(_plan("none", model=llama)) == []
    assert (
        workload_from_plan(_plan("none")).info["forward_memory_bytes_per_microbatch_per_gpu"] == []
    )


def test_compute_grows_by_the_bytes_at_hbm_bandwidth():
    # one GPU, no communication: each micro-batch runs forward + backward with recomputation,
    # 1 + 3 forward-equivalents, so the compute grows by m * 4 * B / memory bandwidth exactly
    fab = ideal(1, gpus_per_server=1)
    base = simulate_iteration(workload_from_plan(_plan("none")), fab)
    w = workload_from_plan(_plan("scores"))
    mem = simulate_iteration(w, fab)
    B = w.info["forward_memory_bytes_per_microbatch_per_gpu"][0]
    m = w.info["micro_batches"]
    assert m == 4
    assert mem.compute_s - base.compute_s == pytest.approx(m * 4 * B / A100.memory_bandwidth,
                                                           rel=1e-9)  # fmt: skip
    assert mem.iteration_s == pytest.approx(mem.compute_s, rel=1e-12)


def test_unoverlapped_buckets_follow_the_backward():
    # data parallel over 2 servers on the ideal switch at B bytes/s per server: a 2-member ring
    # all-reduce of S bytes takes 2 (n-1)/n S / B = S / B; without overlap it is all exposed
    bw = 10e9
    fab = ideal(2, 1, bw, latency=0.0)
    plans = {o: _plan("none", dp=2, servers=2, overlap_grad_reduce=o) for o in (True, False)}
    res = {o: simulate_iteration(workload_from_plan(p), fab) for o, p in plans.items()}
    w = workload_from_plan(plans[False])
    S = sum(d.size * d.count for d in w.demands if d.cls == "dp")
    assert res[False].compute_s == pytest.approx(res[True].compute_s, rel=1e-12)
    assert res[False].iteration_s == pytest.approx(res[False].compute_s + S / bw, rel=1e-9)
    assert res[True].iteration_s < res[False].iteration_s
    assert w.conventions["overlap_grad_reduce"] is False
