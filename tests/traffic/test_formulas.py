"""Exact bytes for worked cases, with the arithmetic written out from the papers' formulas.

Sources of the formulas: Narayanan et al. SC'21 (Megatron PTD-P), Korthikanti et al. 2022
(sequence parallelism), Rajbhandari et al. SC'20 (ZeRO) / Zhao et al. 2023 (FSDP), the
conventions note for MoE and DLRM. Nothing below is copied from the code's output.
"""

import math

import numpy as np
import pytest

from traffic.build import workload_from_plan

GPT3 = dict(l=96, h=12288, s=2048, V=51200)


def gpt3_plan(**par):
    base = dict(tp=8, pp=16, dp=8, micro_batch_size=1, global_batch_size=1536)
    base.update(par)
    return {
        "model": "gpt3-175b",
        "parallelism": base,
        "cluster": {"servers": 128, "gpus_per_server": 8},
        "options": {"edge_extras": False},
    }


def fam(w, name=None, cls=None, stage=None, phase=None, op=None):
    out = [
        d
        for d in w.demands
        if (name is None or d.name == name)
        and (cls is None or d.cls == cls)
        and (stage is None or d.stage == stage)
        and (phase is None or d.phase == phase)
        and (op is None or d.op == op)
    ]
    return out


@pytest.mark.parametrize("sg", [None, False])
def test_gpt3_ptdp_tp_pp_dp(sg):
    l, h, s, V = GPT3["l"], GPT3["h"], GPT3["s"], GPT3["V"]
    t, p, d, b, B = 8, 16, 8, 1, 1536
    doc = gpt3_plan()
    if sg is not None:
        doc["options"]["pp_scatter_gather"] = sg
    w = workload_from_plan(doc)
    sg = True if sg is None else sg  # Megatron's default (SC'21 section 4.1)
    assert w.conventions["pp_scatter_gather"] is sg
    m = B // (b * d)
    assert m == 192 and w.info["micro_batches"] == 192
    per_stage = l // p
    assert per_stage == 6 and w.info["layers_per_stage"] == [6] * 16
    S = b * s * h * 2
    assert S == 50_331_648
    # TP: 4 all-reduces per layer per micro-batch: 2 forward + 2 backward
    for i in range(p):
        for ph in ("forward", "backward"):
            (f,) = fam(w, cls="tp", stage=i, phase=ph)
            assert (f.op, f.size, f.count, f.group_size, f.n_groups) == (
                "all-reduce", S, 2 * per_stage * m, t, d)  # fmt: skip
    # PP: b*s*h*2 per boundary per micro-batch each way from each of the t*d ranks; with the
    # SC'21 scatter/gather each rank sends 1/t of it and the receiving stage's TP group (d
    # groups of t) all-gathers the whole tensor
    sends = fam(w, cls="pp", op="send")
    assert len(sends) == 2 * (p - 1)
    S_pp = S // t if sg else S
    assert all(f.size == S_pp and f.count == m and f.n_groups == t * d for f in sends)
    gathers = fam(w, cls="pp", op="all-gather")
    assert len(gathers) == (2 * (p - 1) if sg else 0)
    assert all((f.size, f.count, f.group_size, f.n_groups) == (S, m, t, d) for f in gathers)
    (f01,) = fam(w, name="pp send 0->1")
    assert f01.groups[:, 1].tolist() == (f01.groups[:, 0] + t * d).tolist()
    # DP: exact per-stage parameters per TP rank (12h^2/t + 7h/t + 6h per layer), reduced in
    # fp32 (4 bytes): Megatron reduces bf16 (2-byte) runs' gradients in fp32 by default
    assert w.conventions["grad_reduce_dtype"] == "fp32"
    assert w.conventions["grad_reduce_bytes"] == 4
    layer = 12 * h * h // t + 7 * h // t + 6 * h
    assert layer == 226_576_896
    mid = per_stage * layer
    first = mid + V * h // t + s * h
    last = mid + V * h // t + 2 * h
    expect = [first] + [mid] * (p - 2) + [last]
    got = [f.size / 4 for f in sorted(fam(w, cls="dp"), key=lambda f: f.stage)]
    assert got == expect
    assert first == 1_463_270_400 and last == 1_438_129_152
    # tied embeddings: V*h/t gradient elements (fp32), first <-> last stage
    (emb,) = fam(w, cls="embedding")
    assert emb.size == V * h // t * 4 == 314_572_800
    assert emb.groups[0].tolist() == [0, (p - 1) * t * d]
    # whole model: 12lh^2 + 13lh + (V + s)h, plus the final LayerNorm 2h
    assert w.parameters == 12 * l * h * h + 13 * l * h + (V + s) * h + 2 * h
    # total wire bytes per iteration, all classes, summed over groups
    tp_total = p * d * (2 * 4 * per_stage * m) * (t - 1) * S
    pp_total = 2 * (p - 1) * t * d * m * S_pp
    if sg:  # all-gather: each of the t members sends (t-1)/t * S
        pp_total += 2 * (p - 1) * d * m * (t - 1) * S
    dp_total = t * sum(2 * (d - 1) * n * 4 for n in expect)
    emb_total = t * d * 2 * 1 * emb.size
    assert w.total_wire_bytes() == tp_total + pp_total + dp_total + emb_total


def test_gpt3_flops_match_megatron_formula():
    l, h, s, V = GPT3["l"], GPT3["h"], GPT3["s"], GPT3["V"]
    t, b = 8, 1
    w = workload_from_plan(gpt3_plan())
    f = w.info["forward_flops_per_microbatch_per_gpu"]
    layers_fwd = 24 * b * s * l * h * h * (1 + s / (6 * h))
    logits_fwd = 2 * b * s * h * V
    assert sum(f) * t == pytest.approx(layers_fwd + logits_fwd, rel=1e-12)
    # SC'21 eq. (3) with recomputation: 96 B s l h^2 (1 + s/6h + V/16lh) = 4 x layers + 3 x logits
    paper = 96 * b * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    assert 4 * (sum(f) * t - logits_fwd) + 3 * logits_fwd == pytest.approx(paper, rel=1e-12)


def test_gpt3_sequence_parallel_and_recompute():
    h, s = GPT3["h"], GPT3["s"]
    t, m, per_stage = 8, 192, 6
    S = s * h * 2
    w = workload_from_plan(gpt3_plan(sp=True))
    ag = sum(f.count for f in fam(w, op="all-gather", stage=3))
    rs = sum(f.count for f in fam(w, op="reduce-scatter", stage=3))
    assert (ag, rs) == (6 * per_stage * m, 4 * per_stage * m)
    assert {f.size for f in fam(w, op="all-gather")} == {S}
    # with SP each TP rank sends 1/t of the activation to its pipeline peer
    assert {f.size for f in fam(w, cls="pp")} == {S // t}
    # replicated parameters (2 LayerNorms 4h, 2 row-parallel biases 2h) all-reduced over TP,
    # from the fp32 main gradients
    (rep,) = fam(w, name="sp replicated-parameter gradients", stage=3)
    assert rep.size == per_stage * 6 * h * 4
    # without re-gather: 4 all-gathers + 4 reduce-scatters per layer
    w2 = workload_from_plan({**gpt3_plan(sp=True), "options": {"edge_extras": False,
                                                               "sp_regather": False}})  # fmt: skip
    assert sum(f.count for f in fam(w2, op="all-gather", stage=3)) == 4 * per_stage * m
    # full recomputation: 6 all-reduces per layer per micro-batch without SP
    w3 = workload_from_plan(gpt3_plan(recompute="full"))
    assert sum(f.count for f in fam(w3, cls="tp", stage=5)) == 6 * per_stage * m
    w4 = workload_from_plan(gpt3_plan(recompute="selective"))
    assert sum(f.count for f in fam(w4, cls="tp", stage=5)) == 4 * per_stage * m


def test_gpt3_edge_extras_counted():
    h, s, m = GPT3["h"], GPT3["s"], 192
    plan = gpt3_plan()
    plan["options"] = {"edge_extras": True}
    w = workload_from_plan(plan)
    (f0,) = fam(w, cls="tp", stage=0, phase="forward")
    assert f0.count == 12 * m + m  # + embedding all-reduce
    (b15,) = fam(w, cls="tp", stage=15, phase="backward", name="tp all-reduce")
    assert b15.count == 12 * m + m  # + LM-head input gradient
    (ce,) = fam(w, name="vocab-parallel cross-entropy (fp32)")
    assert (ce.size, ce.count) == (s * 4, 3 * m)
    assert w.conventions["edge_extras"] is True and h == 12288


def test_interleaved_pipeline_boundaries():
    # p = 4, v = 3: chunks c = 0..11 on stage c mod 4; 11 boundaries each way
    plan = {
        "model": {"layers": 12, "hidden": 64, "heads": 4, "vocab": 256, "seq_len": 32},
        "parallelism": {"tp": 1, "pp": 4, "dp": 1, "vpp": 3, "global_batch_size": 8},
        "cluster": {"servers": 1, "gpus_per_server": 4},
    }
    w = workload_from_plan(plan)
    fwd = {f.name: f.count for f in fam(w, cls="pp", phase="forward")}
    m = 8
    assert fwd == {"pp send 0->1": 3 * m, "pp send 1->2": 3 * m, "pp send 2->3": 3 * m,
                   "pp send 3->0": 2 * m}  # fmt: skip
    assert sum(fwd.values()) == (4 * 3 - 1) * m
    assert {f.size for f in fam(w, cls="pp")} == {1 * 32 * 64 * 2}


def test_public_gpt13b_trace_sizes():
    # GPT-13B: h=5120, s=2048, b=1, bf16, TP8: every TP all-reduce 20,971,520 bytes, 4 per layer
    plan = {
        "model": {"layers": 40, "hidden": 5120, "heads": 40, "vocab": 50304, "seq_len": 2048},
        "parallelism": {"tp": 8, "global_batch_size": 1},
        "cluster": {"servers": 1, "gpus_per_server": 8},
        "options": {"edge_extras": False},
    }
    w = workload_from_plan(plan)
    assert {f.size for f in fam(w, cls="tp")} == {20_971_520}
    assert sum(f.count for f in fam(w, cls="tp")) == 4 * 40
    plan["parallelism"]["sp"] = True
    w = workload_from_plan(plan)
    assert sum(f.count for f in fam(w, op="all-gather")) == 6 * 40
    assert sum(f.count for f in fam(w, op="reduce-scatter")) == 4 * 40


def test_distributed_optimizer_and_fp32_reduce():
    h = GPT3["h"]
    plan = gpt3_plan(distributed_optimizer=True)
    plan["options"] = {"edge_extras": False, "grad_reduce_dtype": "fp32"}
    w = workload_from_plan(plan)
    layer = 12 * h * h // 8 + 7 * h // 8 + 6 * h
    (rs,) = fam(w, cls="dp", stage=4, op="reduce-scatter")
    (ag,) = fam(w, cls="dp", stage=4, op="all-gather")
    assert (rs.size, ag.size, ag.phase) == (6 * layer * 4, 6 * layer * 2, "optimizer")


def test_llama_stage_parameters_gqa_gated_rmsnorm_untied():
    # llama3-8b, t=2, p=2: V=128256 padded to a multiple of 128*2 = 128256 (already divisible)
    plan = {
        "model": "llama3-8b",
        "parallelism": {"tp": 2, "pp": 2, "dp": 2, "global_batch_size": 8},
        "cluster": {"servers": 1, "gpus_per_server": 8},
        "options": {"edge_extras": False},
    }
    w = workload_from_plan(plan)
    h, f, nh, kv, hd, V, t = 4096, 14336, 32, 8, 128, 128256, 2
    layer = h * (nh + 2 * kv) * hd // t + nh * hd // t * h + 3 * h * f // t + 2 * h
    sizes = [d.size / 4 for d in sorted(fam(w, cls="dp"), key=lambda d: d.stage)]  # fp32
    assert sizes == [16 * layer + V * h // t, 16 * layer + h + V * h // t]
    assert fam(w, cls="embedding") == []  # untied: no embedding sync
    assert w.parameters == 8_030_261_248  # published Llama 3 8B count


def test_fsdp_full_shard_and_hybrid():
    # llama2-7b, pure FSDP over 16 GPUs (2 servers x 8), B=32, b=1 -> m = 2
    P = 6_738_415_616  # published parameter count
    psi = 2 * P  # bf16 bytes
    n, m = 16, 2
    base = {
        "model": "llama2-7b",
        "parallelism": {"dp": 16, "global_batch_size": 32, "fsdp": "full_shard"},
        "cluster": {"servers": 2, "gpus_per_server": 8},
    }
    w = workload_from_plan(base)
    sizes = sorted((d.op, d.phase, d.size, d.count) for d in w.demands)
    assert sizes == [("all-gather", "backward", psi, m), ("all-gather", "forward", psi, m),
                     ("reduce-scatter", "backward", psi, m)]  # fmt: skip
    # 3 psi per GPU per micro-batch, times (n-1)/n, summed over n GPUs
    assert w.total_wire_bytes() == 3 * (n - 1) * psi * m
    defer = {**base, "options": {"defer_grad_sync": True}}
    assert workload_from_plan(defer).total_wire_bytes() == (2 * m + 1) * (n - 1) * psi
    sgo = {**base, "parallelism": {**base["parallelism"], "fsdp": "shard_grad_op"}}
    assert workload_from_plan(sgo).total_wire_bytes() == 2 * (n - 1) * psi * m
    for z, total in ((1, 2 * (n - 1) * psi), (2, (m + 1) * (n - 1) * psi),
                     (3, 3 * (n - 1) * psi * m)):  # fmt: skip
        zp = {**base, "parallelism": {"dp": 16, "global_batch_size": 32, "zero": z}}
        assert workload_from_plan(zp).total_wire_bytes() == total
    # HYBRID_SHARD: full_shard inside each server (8), all-reduce of psi/8 across the 2 servers
    hyb = {**base, "parallelism": {**base["parallelism"], "fsdp": "hybrid_shard"}}
    w = workload_from_plan(hyb)
    (ar,) = fam(w, op="all-reduce")
    assert (ar.size, ar.group_size, ar.n_groups, ar.count) == (psi / 8, 2, 8, m)
    assert ar.groups[0].tolist() == [0, 8]
    intra = 2 * 3 * (8 - 1) * psi * m  # two shard groups of 8
    inter = 8 * 2 * (2 - 1) * (psi / 8) * m
    assert w.total_wire_bytes() == intra + inter


def mixtral(**opts):
    return {
        "model": {"base": "mixtral-8x7b", "seq_len": 4096},
        "parallelism": {
            "tp": 2,
            "pp": 4,
            "dp": 16,
            "ep": 8,
            "etp": 1,
            "sp": True,
            "global_batch_size": 512,
            "distributed_optimizer": True,
        },  # fmt: skip
        "cluster": {"servers": 16, "gpus_per_server": 8},
        "options": opts,
    }


def test_moe_dropless_capacity_and_expert_dp():
    h, k, E, s, t, b, ep = 4096, 2, 8, 4096, 2, 1, 8
    m = 512 // (b * 16)
    T = b * s // t
    assert (T, m) == (2048, 32)
    S = T * k * h * 2
    assert S == 33_554_432
    w = workload_from_plan(mixtral())
    a2a = fam(w, cls="ep")
    assert len(a2a) == 4 * 2  # 4 stages x (forward, backward)
    assert all(f.size == S and f.count == 2 * 8 * m and f.group_size == ep for f in a2a)
    assert all(not f.mutable for f in a2a)
    # ep wire: per group (ep-1)*S; groups per stage = 32 ranks / 8
    assert w.bytes_by_class()["ep"] == 4 * 2 * 4 * (ep - 1) * S * 2 * 8 * m
    # capacity factor 1.25: C = ceil(T*k/E*CF) = ceil(640) = 640 tokens per expert
    C = math.ceil(T * k / E * 1.25)
    wc = workload_from_plan(mixtral(capacity_factor=1.25))
    assert {f.size for f in fam(wc, cls="ep")} == {E * C * h * 2} == {41_943_040}
    # expert parameters per rank: one expert of 3*h*ffn per layer, 8 layers per stage,
    # reduce-scattered (fp32 gradients) over the expert-data-parallel group of 2*16/8 = 4 ranks
    (ers,) = fam(w, name="expert dp gradient reduce-scatter", stage=1)
    assert (ers.size, ers.group_size) == (8 * 3 * h * 14336 * 4, 4)
    # non-expert per TP rank per layer: attention + 2 RMSNorms + router (h*E)
    attn = h * (32 + 2 * 8) * 128 // t + 32 * 128 // t * h
    (drs,) = fam(w, name="dp gradient reduce-scatter", stage=1)
    assert drs.size == 8 * (attn + 2 * h + h * E) * 4


def test_moe_skewed_load_peer_bytes():
    T, k, h = 2048, 2, 4096
    plan = mixtral(expert_load=[5, 1, 1, 1, 1, 1, 1, 1])
    plan["parallelism"]["ep"] = 4  # EP rank j holds experts 2j, 2j+1
    w = workload_from_plan(plan)
    share = np.array([6, 2, 2, 2]) / 12
    (disp,) = fam(w, name="moe dispatch", stage=0, phase="forward")
    expect = np.tile(T * k * h * 2 * share, (4, 1))
    np.fill_diagonal(expect, 0)
    np.testing.assert_allclose(disp.peer_bytes, expect, rtol=0, atol=1e-6)
    (comb,) = fam(w, name="moe combine", stage=0, phase="forward")
    np.testing.assert_allclose(comb.peer_bytes, expect.T, rtol=0, atol=1e-6)
    assert disp.size == pytest.approx(expect.sum(axis=1).max())
    # rank 1 sends 1/2 of its tokens to rank 0: T*k*h*2 / 2 bytes
    assert disp.peer_bytes[1, 0] == T * k * h * 2 / 2


def test_context_parallel_ring():
    # llama3-70b-like, t=8, cp=2: K/V chunk 2*b*(s/cp)*(h_kv/t)*2 with h_kv = 8*128
    plan = {
        "model": "llama3-70b",
        "parallelism": {"tp": 8, "cp": 2, "pp": 4, "dp": 1, "global_batch_size": 4},
        "cluster": {"servers": 8, "gpus_per_server": 8},
    }
    w = workload_from_plan(plan)
    size = 2 * 1 * (8192 // 2) * (8 * 128 // 8) * 2
    (f,) = fam(w, cls="cp", stage=0, phase="forward")
    (bw,) = fam(w, cls="cp", stage=0, phase="backward")
    layers, m = 20, 4
    assert (f.size, f.count, bw.count) == (size, (2 - 1) * layers * m, 2 * (2 - 1) * layers * m)
    # cp ring pairs: rank = tp + 8*cp: [0, 8] and [8, 0]
    assert f.groups[:2].tolist() == [[0, 8], [8, 0]]
    # with cp the TP activations are s/cp tokens long
    sizes = {d.size for d in fam(w, cls="tp", phase="forward", name="tp all-reduce")}
    assert sizes == {1 * (8192 // 2) * 8192 * 2}


def test_dlrm_embedding_all_to_all_and_mlp():
    # 128 GPUs, 64 tables of 128 dims: GPUs 0..63 hold one table, 64..127 none.
    # 512 samples per GPU, fp32: GPU i<64 sends 512*128*4 bytes to each other GPU.
    w = workload_from_plan("dlrm")
    per_peer = 512 * 128 * 4
    assert per_peer == 262_144
    fwd, bwd = fam(w, cls="embedding", phase="forward"), fam(w, cls="embedding", phase="backward")
    (fwd,), (bwd,) = fwd, bwd
    assert fwd.peer_bytes[0, 1] == per_peer and fwd.peer_bytes[64, 0] == 0
    assert bwd.peer_bytes[1, 0] == per_peer
    assert fwd.size == 127 * per_peer
    mlp = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 128 + 128)
    mlp += (2208 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 512 + 512) + (512 * 256 + 256)
    mlp += 256 + 1
    assert mlp == 4_139_393
    (ar,) = fam(w, cls="dp")
    assert (ar.size, ar.group_size) == (mlp * 4, 128)
    assert w.parameters == 64 * 10**7 * 128 + mlp
    total = 2 * 64 * 127 * per_peer + 2 * 127 * mlp * 4
    assert w.total_wire_bytes() == total


def test_dlrm_all_to_all_is_stored_sparse_and_expands_as_the_dense_matrix():
    # the dense matrices built by hand: GPU i < 64 (one table each) sends 262,144 bytes to
    # every other GPU forward; backward is the transpose. Stored sparse: 64 x 127 entries each
    import scipy.sparse as sp

    from topoopt.flowsim.work import held_matrix_bytes
    from traffic.errors import InputError
    from traffic.expand import collective_template
    from traffic.workload import Demand, peer_pairs, peer_row

    w = workload_from_plan("dlrm")
    (fwd,) = fam(w, cls="embedding", phase="forward")
    (bwd,) = fam(w, cls="embedding", phase="backward")
    dense = np.zeros((128, 128))
    dense[:64, :] = 512 * 128 * 4
    np.fill_diagonal(dense, 0.0)
    for d, m in ((fwd, dense), (bwd, dense.T)):
        assert sp.issparse(d.peer_bytes) and d.peer_bytes.nnz == 64 * 127
        assert np.array_equal(d.peer_bytes.toarray(), m)
        i, j = np.nonzero(m)  # the dense matrix's flows, in the same order
        s, t, b = collective_template("all-to-all", 128, d.size, peer_bytes=d.peer_bytes)
        assert np.array_equal(s, i) and np.array_equal(t, j) and np.array_equal(b, m[i, j])
        assert s.dtype == t.dtype == np.int64
        assert np.array_equal(peer_row(d.peer_bytes, 64), m[64])
    # 2 x (64 x 127 entries x (8 + 4) bytes + 129 row pointers x 4 bytes), not 2 x 128^2 x 8
    assert held_matrix_bytes(w) == 2 * (64 * 127 * 12 + 129 * 4)
    # a sparse matrix given out of order, with duplicates and stored zeros, is made canonical
    # (the same pairs as its dense form) and checked as the dense one is
    raw = sp.coo_matrix(([2.0, 1.0, 0.0, 3.0], ([1, 0, 2, 0], [0, 2, 1, 2])), shape=(3, 3))
    d = Demand("all-to-all", np.array([[0, 1, 2]]), 4.0, "embedding", "forward", peer_bytes=raw)
    assert [a.tolist() for a in peer_pairs(d.peer_bytes)] == [[0, 1], [2, 0], [4.0, 2.0]]
    for bad in (sp.csr_matrix(-np.eye(3)[::-1]), sp.csr_matrix(np.eye(3))):
        with pytest.raises(InputError, match="peer_bytes"):
            Demand("all-to-all", np.array([[0, 1, 2]]), 1.0, "embedding", "forward",
                   peer_bytes=bad)  # fmt: skip


def test_pure_data_parallel_vgg16():
    w = workload_from_plan("vgg16-dp")
    (ar,) = w.demands
    P = 138_357_544
    assert (ar.op, ar.size, ar.group_size) == ("all-reduce", 4 * P, 128)
    # per GPU 2(n-1)/n * P * beta
    assert w.total_wire_bytes() / 128 == pytest.approx(2 * 127 / 128 * P * 4, rel=1e-15)


def test_candle_uno_and_bert_parameter_counts():
    from traffic.zoo import get_model

    w4192 = 4192
    enc = (942 + 2 * 5270 + 2 * 2048) * w4192 + 5 * 7 * w4192**2
    top = (2 + 5 * w4192) * w4192 + 3 * w4192**2 + w4192
    assert get_model("candle-uno").parameters == enc + top == 820_948_704
    h, V = 1024, 30522
    emb = V * h + 512 * h + 2 * h + 2 * h
    layer = (
        (3 * h * h + 3 * h) + (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h) + 2 * h
    )
    assert get_model("bert-large").parameters == emb + 24 * layer + h * h + h


def test_sp_embedding_output_follows_the_position_embedding():
    """Megatron-core's LanguageModelEmbedding with SP: learned absolute positions (GPT) all-reduce
    the vocab-parallel output (then add positions and split the sequence: no traffic); without
    them (RoPE) the output is reduce-scattered into the SP region. Both all-gather the gradient
    back. S = b*s*h*2 either way."""
    l, h, s, t, p, m = 8, 256, 128, 4, 2, 4
    blocks = 2 * (l // p)  # attention + MLP per layer
    S = 1 * s * h * 2

    def plan(position):
        return {
            "model": {
                "layers": l,
                "hidden": h,
                "heads": 8,
                "vocab": 1000,
                "seq_len": s,
                "position": position,
            },  # fmt: skip
            "parallelism": {"tp": t, "pp": p, "dp": 1, "sp": True, "global_batch_size": m},
            "cluster": {"servers": 2, "gpus_per_server": 4},
        }

    def counts(w):
        out = {}
        for f in fam(w, cls="tp", stage=0):
            if f.name.startswith("sp ") and f.name != "sp replicated-parameter gradients":
                key = (f.op, f.phase)
                out[key] = out.get(key, 0) + f.count
                assert f.size == S
        return out

    layers_only = {
        ("all-gather", "forward"): blocks * m,
        ("reduce-scatter", "forward"): blocks * m,
        ("all-gather", "backward"): 2 * blocks * m,  # with the re-gather
        ("reduce-scatter", "backward"): blocks * m,
    }
    wg = workload_from_plan(plan("learned"))
    assert wg.conventions["sp_embedding_output"] == "all-reduce, then split (learned positions)"
    assert workload_from_plan(plan("rope")).conventions["sp_embedding_output"] == "reduce-scatter"
    gpt = counts(wg)
    assert gpt == {**layers_only, ("all-reduce", "forward"): m,
                   ("all-gather", "backward"): 2 * blocks * m + m}  # fmt: skip
    for position in ("rope", "none"):
        rope = counts(workload_from_plan(plan(position)))
        assert rope == {**layers_only, ("reduce-scatter", "forward"): blocks * m + m,
                        ("all-gather", "backward"): 2 * blocks * m + m}  # fmt: skip
    # the embedded GPT-3 plan with SP: one embedding all-reduce per micro-batch on stage 0
    w = workload_from_plan(gpt3_plan(sp=True) | {"options": {"edge_extras": True}})
    (ar,) = fam(w, name="sp embedding all-reduce (learned positions)")
    assert (ar.stage, ar.phase, ar.size, ar.count) == (0, "forward", 2048 * 12288 * 2, 192)


def test_megatron_defaults_grad_reduce_dtype_and_etp():
    """grad_reduce_dtype "auto": fp32 for a bf16 (2-byte) transformer under Megatron's DDP or
    distributed optimizer, else the gradient bytes; etp defaults to tp for MoE models."""

    def conv(**kw):
        plan = gpt3_plan()
        plan["precision"] = kw.pop("precision", {})
        plan["parallelism"].update(kw.pop("par", {}))
        plan["options"] = {"edge_extras": False, **kw}
        c = workload_from_plan(plan).conventions
        return c["grad_reduce_dtype"], c["grad_reduce_bytes"]

    bf16 = {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2}
    fp32 = {"activation_bytes": 4, "gradient_bytes": 4, "parameter_bytes": 4}
    assert conv(precision=bf16) == ("fp32", 4)
    assert conv(precision=bf16, par={"distributed_optimizer": True}) == ("fp32", 4)
    assert conv(precision=fp32) == ("gradient", 4)
    assert conv(precision=bf16, grad_reduce_dtype="fp16") == ("fp16", 2)
    assert conv(precision=bf16, grad_reduce_dtype="gradient") == ("gradient", 2)
    assert conv(precision=bf16, par={"zero": 1}) == ("gradient", 2)  # not Megatron's DP
    # MoE: etp = tp = 2 by default; the expert grid is (etp=2, ep=8, edp=32/16=2)
    h, T, k = 4096, 4096 // 2, 2
    plan = mixtral()
    del plan["parallelism"]["etp"]
    w = workload_from_plan(plan)
    assert w.conventions["etp"] == 2
    # one expert's 3*h*ffn split over etp = 2, 8 layers per stage, fp32, over edp = 2 ranks
    (ers,) = fam(w, name="expert dp gradient reduce-scatter", stage=1)
    assert (ers.size, ers.group_size) == (8 * 3 * h * 14336 // 2 * 4, 2)
    # the etp all-gather of the tokens an EP rank receives (T*k under uniform routing)
    ag = fam(w, name="etp all-gather", stage=1, phase="forward")
    assert {(f.size, f.group_size) for f in ag} == {(2 * T * k * h * 2, 2)}
    assert workload_from_plan(mixtral()).conventions["etp"] == 1  # given: kept
