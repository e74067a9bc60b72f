"""GPU memory per rank of a plan: model states (parameters, gradients, optimizer) and activations.

Model states (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", SC'20, arXiv 1910.02054, section 3.1 and Figure 1): mixed-precision Adam keeps per
parameter a 2-byte fp16/bf16 weight, a 2-byte gradient and ``K = 12`` bytes of optimizer state
(fp32 master weight, first and second moment): ``(2 + 2 + K) Psi = 16 Psi`` bytes for ``Psi``
parameters. Over ``N_d`` data-parallel ranks:

======================  ==================================
baseline (DDP)          ``(2 + 2 + K) Psi``
ZeRO-1 (P_os)           ``2 Psi + 2 Psi + K Psi / N_d``
ZeRO-2 (P_os+g)         ``2 Psi + (2 + K) Psi / N_d``
ZeRO-3 (P_os+g+p)       ``(2 + 2 + K) Psi / N_d``
======================  ==================================

Megatron's distributed optimizer is ZeRO-1; FSDP ``full_shard`` is ZeRO-3, ``shard_grad_op``
ZeRO-2 and ``hybrid_shard`` ZeRO-3 inside a shard group (``options.hybrid_shard_size``, default the
data-parallel peers on one server). Here ``Psi`` is the rank's own share after tensor, pipeline
and expert parallelism (:func:`traffic.models.megatron.stage_parameters`), parameter and gradient
widths come from ``plan.precision`` (gradients: the element type the data-parallel reduction
sends, :func:`traffic.models.megatron.reduce_bytes` of ``options.grad_reduce_dtype``, so a bf16
Megatron run's fp32 gradient buffer counts 4 bytes, as the traffic model reduces 4-byte
elements) and ``N_d`` is the data-parallel group of the parameters
(``dp * cp`` for dense weights, the expert-data-parallel size for experts).

Activations (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023, arXiv 2205.05198, section 4 and Table 2), bytes per transformer layer for a
micro-batch of ``b`` sequences of ``s`` tokens, hidden ``h``, ``a`` heads, tensor-parallel ``t``,
16-bit activations:

==========================================  ===============================
no parallelism                              ``s b h (34 + 5 a s / h)``
tensor parallel                             ``s b h (10 + 24/t + 5 a s/(h t))``
tensor + sequence parallel                  ``s b h (34/t + 5 a s/(h t))``
tensor parallel + selective recompute       ``s b h (10 + 24/t)``
tensor + sequence + selective recompute     ``s b h (34/t)``
full recompute                              ``2 s b h`` (``/t`` with sequence parallelism)
==========================================  ===============================

Of the 34: attention 11 (QKV input 2, Q and K 4, V 2, softmax dropout mask folded into the
``5as/h`` term, projection input 2, dropout mask 1), MLP 19 (input 2, the ``4h``-wide first
output 8 and activation output 8, dropout mask 1), the two LayerNorm inputs 4; 10 of them are
not split by tensor parallelism (LayerNorm inputs, QKV and MLP inputs, dropout masks) unless
sequence parallelism splits them. We generalise the MLP to width ``f`` (``2 + 4f/h + 1``, gated
``2 + 6f/h + 1``), mixture-of-experts layers to ``k`` routed copies of each token (``k + shared``
MLPs), and context parallelism to ``s/cp`` tokens per rank. Activation bytes scale with
``precision.activation_bytes / 2``.

Pipeline schedule: stage ``i`` of ``p`` under 1F1B holds ``min(p - i, m)`` micro-batches in flight
(stage 0 holds ``p``: the activations of ``p * l/p = l`` layers); with ``v`` interleaved chunks
Megatron's warm-up is ``2(p-i-1) + (v-1)p`` chunk-forwards, so ``min(2(p-i-1) + (v-1)p + 1, m v)``
chunks of ``l/(p v)`` layers are in flight; stage 0 holds ``l (1 + (p-1)/(p v))`` layers'
worth (Korthikanti et al., section 4.2.3). Stage 0 adds the embedding's dropout mask ``s b h / t``
per micro-batch in flight; with ``p = 1`` the output layer adds ``4 s b h (1 + V/h) / t``
(section 4.3). Full recomputation also needs the activations of one layer being recomputed.

Recommendation models hold their embedding tables whole on the GPU that owns them (weights, and
``embedding_state_bytes`` per element of optimizer state, 0 for plain SGD as in the DLRM
reference) plus data-parallel MLPs under mixed-precision Adam; data-parallel models their
parameters under Adam (activations are not modelled for them: ``activations_modelled`` is False).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traffic.errors import InputError
from traffic.models import megatron
from traffic.plan import Plan

__all__ = [
    "ADAM_STATE_BYTES",
    "MemoryReport",
    "activation_bytes_per_layer",
    "in_flight_layers",
    "memory_per_gpu",
    "zero_model_state_bytes",
]

ADAM_STATE_BYTES = 12
"""``K`` of the ZeRO paper: fp32 master weight, momentum and variance, bytes per parameter."""


def zero_model_state_bytes(
    parameters: float,
    dp: int,
    stage: int = 0,
    *,
    parameter_bytes: int = 2,
    gradient_bytes: int = 2,
    optimizer_bytes: int = ADAM_STATE_BYTES,
) -> tuple[float, float, float]:
    """Bytes of (parameters, gradients, optimizer state) per rank under ZeRO ``stage``.

    Parameters
    ----------
    parameters : float
        ``Psi``: parameters the data-parallel group holds (one replica's worth).
    dp : int
        ``N_d``, the data-parallel group size the states are sharded over.
    stage : {0, 1, 2, 3}
        ZeRO stage (0: plain data parallelism).

    Examples
    --------
    The ZeRO paper's Figure 1 (7.5B parameters, ``N_d = 64``, ``K = 12``), in GB:

    >>> [round(sum(zero_model_state_bytes(7.5e9, 64, z)) / 1e9, 1) for z in range(4)]
    [120.0, 31.4, 16.6, 1.9]
    """
    if stage not in (0, 1, 2, 3):
        raise InputError("zero", stage, "0, 1, 2 or 3")
    if dp < 1:
        raise InputError("dp", dp, "a positive integer")
    psi = float(parameters)
    par = parameter_bytes * psi / (dp if stage >= 3 else 1)
    grad = gradient_bytes * psi / (dp if stage >= 2 else 1)
    opt = optimizer_bytes * psi / (dp if stage >= 1 else 1)
    return par, grad, opt


def activation_bytes_per_layer(
    seq: int,
    micro_batch: int,
    hidden: int,
    heads: int,
    *,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "none",
    ffn: int | None = None,
    gated: bool = False,
    mlp_copies: float = 1.0,
    activation_bytes: int = 2,
) -> float:
    """Activation bytes one transformer layer keeps for the backward pass (module docstring).

    Parameters
    ----------
    seq, micro_batch, hidden, heads : int
        ``s`` (tokens per rank after context parallelism), ``b``, ``h``, ``a``.
    tp : int
        Tensor-parallel size ``t``.
    sp : bool
        Sequence parallelism (splits the 10 replicated terms by ``t``).
    recompute : {"none", "selective", "full"}
        Selective drops the ``5as/h`` attention term; full keeps only the layer input.
    ffn : int, optional
        MLP width (default ``4h``); ``gated``: SwiGLU-style two input projections.
    mlp_copies : float
        MLPs a token passes through (``top_k + shared_experts`` for a MoE layer, else 1).
    activation_bytes : int
        Bytes per activation element (the formulas are for 2).

    Examples
    --------
    GPT-3 175B, ``t = 8`` (Korthikanti et al. Table 2 forms): ``sbh(10 + 24/8 + 5as/(ht))`` =
    23 ``sbh``; with sequence parallelism and selective recompute 34/8 ``sbh``:

    >>> sbh = 2048 * 1 * 12288
    >>> activation_bytes_per_layer(2048, 1, 12288, 96, tp=8) / sbh
    23.0
    >>> activation_bytes_per_layer(2048, 1, 12288, 96, tp=8, sp=True, recompute="selective") / sbh
    4.25
    """
    if recompute not in ("none", "selective", "full"):
        raise InputError("recompute", recompute, "none, selective or full")
    s, b, h, a, t = float(seq), float(micro_batch), float(hidden), float(heads), float(tp)
    sbh = s * b * h
    scale = activation_bytes / 2.0
    split_div = t if t > 1 else 1.0
    if recompute == "full":
        return scale * 2.0 * sbh / (split_div if sp else 1.0)
    f = float(4 * hidden if ffn is None else ffn)
    wide = (6.0 if gated else 4.0) * f / h  # first output + activation output, per h
    mlp_split = mlp_copies * wide  # 16 for a 4h GeLU MLP
    mlp_rep = 2.0 + 1.0 + (mlp_copies - 1.0) * 2.0  # input, dropout mask, k-1 dispatched copies
    replicated = 4.0 + 2.0 + 1.0 + mlp_rep  # LayerNorm inputs, QKV input, attention dropout mask
    split = 8.0 + mlp_split  # Q, K, V, projection input; the MLP's wide tensors
    attn = 5.0 * a * s / h if recompute == "none" else 0.0
    if sp:
        per = (replicated + split + attn) / split_div
    else:
        per = replicated + (split + attn) / split_div
    return scale * sbh * per


def in_flight_layers(layers_per_stage: int, pp: int, stage: int, micro_batches: int, vpp: int = 1):
    """Layer-micro-batches whose activations stage ``stage`` holds at its peak (1F1B schedule).

    Examples
    --------
    Stage 0 of 1F1B holds ``p`` micro-batches of its ``l/p`` layers (``l`` layers' worth); with
    ``v`` chunks ``l (1 + (p-1)/(p v))`` (Korthikanti et al. section 4.2.3):

    >>> in_flight_layers(12, pp=8, stage=0, micro_batches=64)
    96.0
    >>> in_flight_layers(12, pp=8, stage=0, micro_batches=64, vpp=3) == 96 * (1 + 7 / 24)
    True
    """
    p, i, m, v = int(pp), int(stage), int(micro_batches), int(vpp)
    if v == 1:
        return float(min(p - i, m) * layers_per_stage)
    chunks = min(2 * (p - i - 1) + (v - 1) * p + 1, m * v)
    return float(chunks) * layers_per_stage / v


@dataclass(frozen=True)
class MemoryReport:
    """Peak memory of the fullest GPU of a plan, bytes (fields per stage in ``per_stage``).

    Attributes
    ----------
    parameters_bytes, gradients_bytes, optimizer_bytes, activations_bytes : float
        Of the stage with the largest total.
    total_bytes : float
        Their sum.
    stage : int
        That stage.
    per_stage : tuple of float
        Total bytes of every pipeline stage.
    activations_modelled : bool
        False for data-parallel models known only by their parameter count.
    """

    parameters_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    total_bytes: float
    stage: int
    per_stage: tuple[float, ...]
    activations_modelled: bool = True

    def as_dict(self) -> dict:
        """Plain-JSON view."""
        return {
            "parameters_bytes": self.parameters_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "total_bytes": self.total_bytes,
            "stage": self.stage,
            "activations_modelled": self.activations_modelled,
        }


def _zero_stage(plan: Plan) -> tuple[int, int | None]:
    """ZeRO stage equivalent of the plan's sharding and, for hybrid_shard, the shard group."""
    par = plan.parallelism
    if par.fsdp == "full_shard":
        return 3, None
    if par.fsdp == "shard_grad_op":
        return 2, None
    if par.fsdp == "hybrid_shard":
        return 3, plan.options.hybrid_shard_size
    if par.distributed_optimizer:
        return 1, None
    return int(par.zero), None


def _states(plan: Plan, psi: float, group: int):
    """(parameters, gradients, optimizer) bytes of ``psi`` parameters sharded over ``group``."""
    stage, hybrid = _zero_stage(plan)
    n = group
    if plan.parallelism.fsdp == "hybrid_shard":  # ZeRO-3 inside the shard group only
        par = plan.parallelism
        on_server = max(1, plan.cluster.gpus_per_server // (par.tp * par.cp))
        n = min(group, hybrid or on_server)
    # the gradient buffer holds the elements the data-parallel reduction sends: one setting,
    # options.grad_reduce_dtype (Megatron keeps bf16 runs' main_grad buffer in fp32)
    return zero_model_state_bytes(
        psi,
        n,
        stage,
        parameter_bytes=plan.precision.parameter_bytes,
        gradient_bytes=megatron.reduce_bytes(plan),
    )


def memory_per_gpu(
    plan: Plan,
    *,
    table_gpus: np.ndarray | None = None,
    embedding_state_bytes: int = 0,
) -> MemoryReport:
    """Peak bytes per GPU of ``plan`` (module docstring), on its fullest pipeline stage.

    Parameters
    ----------
    plan : Plan
    table_gpus : numpy.ndarray, optional
        Recommendation models: the GPU holding each table (default round-robin, table ``k`` on
        GPU ``k mod N``, as :mod:`traffic.models.recsys`).
    embedding_state_bytes : int
        Optimizer bytes per embedding element (0: SGD).

    Examples
    --------
    >>> from traffic.plan import load_plan
    >>> r = memory_per_gpu(load_plan("gpt3-175b"))
    >>> round(r.total_bytes / 2**30, 1), r.stage
    (76.7, 0)
    """
    m, par = plan.model, plan.parallelism
    if m.kind == "recsys":
        return _recsys_memory(plan, table_gpus, embedding_state_bytes)
    if m.kind == "data_parallel":
        par_b, grad_b, opt_b = _states(plan, float(m.parameters), plan.dp)
        tot = par_b + grad_b + opt_b
        return MemoryReport(par_b, grad_b, opt_b, 0.0, tot, 0, (tot,), activations_modelled=False)
    t, p, cp, v = par.tp, par.pp, par.cp, par.vpp
    b = par.micro_batch_size
    s = int(m.seq_len) // cp
    h, a = int(m.hidden), int(m.heads)
    mb = plan.micro_batches
    beta = plan.precision.activation_bytes
    lay = megatron.stage_layout(m, p, v)
    params = megatron.stage_parameters(plan)
    acts: dict[int, tuple[float, float, float]] = {}

    def stage_acts(t: int) -> tuple[float, float, float]:
        """(dense layer, MoE layer, full-recompute work) activation bytes at TP size ``t``."""
        if t not in acts:
            sp = par.sp and t > 1
            kw = dict(tp=t, sp=sp, gated=m.gated_mlp, activation_bytes=beta)
            dense = activation_bytes_per_layer(s, b, h, a, recompute=par.recompute, ffn=m.ffn, **kw)
            moe = dense
            if m.is_moe:
                moe = activation_bytes_per_layer(
                    s,
                    b,
                    h,
                    a,
                    recompute=par.recompute,
                    ffn=m.moe_ffn,
                    mlp_copies=float(m.top_k + m.shared_experts),
                    **kw,
                )
            work = 0.0
            if par.recompute == "full":  # one layer re-materialised during its backward
                work = activation_bytes_per_layer(s, b, h, a, recompute="none", ffn=m.ffn, **kw)
            acts[t] = (dense, moe, work)
        return acts[t]

    etp = getattr(plan, "etp", None) or par.etp or 1  # plan.etp: Megatron's default (tp)
    edp = max(1, (t * cp * plan.dp) // (etp * par.ep))
    totals, parts = [], []
    for i in range(p):
        t = plan.stage_tp[i]  # stages of different TP sizes (parallelism.stage_tp)
        sp = par.sp and t > 1
        dense_act, moe_act, work = stage_acts(t)
        nl = lay.dense[i] + lay.moe[i]
        in_flight = in_flight_layers(nl, p, i, mb, v) if nl else 0.0
        mix = (lay.dense[i] * dense_act + lay.moe[i] * moe_act) / nl if nl else 0.0
        act = in_flight * mix + (work if nl else 0.0)
        sbh = float(s) * b * h
        if i == 0:  # the embedding's 1-byte dropout mask, per micro-batch in flight
            act += sbh * min(p, mb) / (t if sp else 1)
        if p == 1:  # output layer norm, output layer, cross-entropy (section 4.3)
            act += 4.0 * sbh * (beta / 2.0) * (1.0 + float(m.vocab) / h) / t
        pd, gd, od = _states(plan, params[i].dense, plan.dp * cp)
        pe, ge, oe = _states(plan, params[i].expert, edp) if params[i].expert else (0, 0, 0)
        part = (pd + pe, gd + ge, od + oe, act)
        parts.append(part)
        totals.append(sum(part))
    k = int(np.argmax(totals))
    pb, gb, ob, ab = parts[k]
    return MemoryReport(pb, gb, ob, ab, totals[k], k, tuple(totals))


def _recsys_memory(plan: Plan, table_gpus, state_bytes: int) -> MemoryReport:
    from traffic.models.recsys import mlp_parameters

    m = plan.model
    n = plan.gpus
    rows = np.array([t.rows for t in m.tables for _ in range(t.count)], dtype=np.float64)
    dims = np.array([t.dim for t in m.tables for _ in range(t.count)], dtype=np.float64)
    if table_gpus is None:
        table_gpus = np.arange(rows.size) % n
    table_gpus = np.asarray(table_gpus, dtype=np.int64)
    if table_gpus.shape != rows.shape or np.any(table_gpus < 0) or np.any(table_gpus >= n):
        raise InputError("table_gpus", table_gpus.tolist()[:8], f"{rows.size} GPU ids in [0, {n})")
    elems = np.bincount(table_gpus, weights=rows * dims, minlength=n)
    width = np.bincount(table_gpus, weights=dims, minlength=n)
    prec = plan.precision
    emb = elems * prec.parameter_bytes
    emb_opt = elems * state_bytes
    mlp = float(mlp_parameters(m))
    mp, mg, mo = zero_model_state_bytes(
        mlp, 1, 0, parameter_bytes=prec.parameter_bytes, gradient_bytes=prec.gradient_bytes
    )
    b = plan.parallelism.micro_batch_size
    beta = prec.activation_bytes
    # pooled vectors of every table for the local samples, the owner's lookups for all samples,
    # and the MLP layer outputs (kept for the backward pass)
    widths = sum(sum(mlp_w) for mlp_w in m.mlps)
    act = b * beta * (dims.sum() + widths) + b * n * beta * width
    totals = emb + emb_opt + mp + mg + mo + act
    k = int(np.argmax(totals))
    return MemoryReport(
        float(emb[k] + mp),
        float(mg),
        float(emb_opt[k] + mo),
        float(act[k]),
        float(totals[k]),
        0,
        (float(totals[k]),),
    )
