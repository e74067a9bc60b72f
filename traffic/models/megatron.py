"""Megatron-style PTD-P transformers: exact parameter counts and the traffic of one iteration.

Symbols as in the conventions note: ``b`` micro-batch size, ``s`` sequence length, ``h`` hidden,
``l`` layers, ``V`` padded vocabulary, ``t/p/d`` tensor/pipeline/data parallel sizes, ``cp``
context parallel, ``v`` virtual stages per device, ``m = B/(b*d)`` micro-batches, ``beta`` bytes
per element. ``S`` follows nccl-tests (buffer for all-reduce, output for all-gather, input for
reduce-scatter).

Tensor parallel
    A layer has two TP *blocks* (attention, MLP); a MoE layer has one (attention) plus one per
    shared-expert MLP, its routed experts communicating through expert parallelism instead.
    Per block per micro-batch, with ``S = b*(s/cp)*h*beta_act``: without SP one all-reduce forward
    and one backward (full recomputation repeats the forward one in the backward pass); with SP
    an all-gather and a reduce-scatter forward, a reduce-scatter and an all-gather backward plus a
    re-gather all-gather when ``sp_regather`` (GPT layer: 6 all-gathers + 4 reduce-scatters). With
    SP the gradients of the parameters replicated across TP (norms, row-parallel biases, router)
    are all-reduced over TP once per iteration.
Embedding with SP (``edge_extras``)
    As Megatron-core's ``LanguageModelEmbedding``: a model without learned absolute positions
    (``position: rope`` or ``none``) reduce-scatters the vocab-parallel embedding output straight
    into the sequence-parallel region (``reduce_scatter_embeddings``); a model with learned
    positions (GPT) all-reduces it, adds the positions and splits the sequence (no traffic).
    Both all-gather the gradient in the backward pass. ``S = b*(s/cp)*h*beta_act`` either way.
Pipeline parallel
    Per micro-batch per stage boundary ``b*(s/cp)*h*beta_act`` forward and the same backward from
    every (tp, cp, dp) rank to its peer in the next stage; ``1/t`` of it with SP or with
    ``pp_scatter_gather`` (then the receiving stage all-gathers it over TP). With ``v`` chunks per
    device chunk ``c`` lives on stage ``c mod p`` and a micro-batch crosses ``p*v-1`` boundaries
    each way; boundaries between the same two stages are one family whose count is ``m`` times
    their number. With ``stage_tp`` (stages of different TP sizes) every per-stage formula uses
    its stage's size, and adjacent stages whose sizes differ reshard the activation and its
    gradient (:mod:`traffic.models.resharding`, ``options.resharding``).
Data parallel
    Once per iteration per stage over the ``dp x cp`` group: an all-reduce of the stage's
    gradients (``P_stage * beta_reduce``), or with the distributed optimizer a reduce-scatter of
    gradients plus an all-gather of parameters (``P_stage * beta_param``). Expert parameters sync
    over the expert-data-parallel group. Tied embeddings: the first and last stage all-reduce
    the word-embedding gradient (``V*h/t`` elements) once per iteration when ``p > 1``.

Parameters per TP rank of one GPT layer: ``12h^2/t + 7h/t + 6h`` (general form in
:func:`layer_parameters`). Whole GPT-3-style model: ``12lh^2 + 13lh + (V + s)h`` plus the final
LayerNorm's ``2h``.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, lcm

import numpy as np

from traffic.models.resharding import reshard_demands
from traffic.placement import RankGrid, StagedRankGrid, stage_meshes
from traffic.plan import Plan
from traffic.workload import Demand
from traffic.zoo import ModelSpec

__all__ = [
    "LayerParams",
    "StageLayout",
    "padded_vocab",
    "plan_padded_vocab",
    "layer_parameters",
    "model_parameters",
    "stage_layout",
    "stage_parameters",
    "grad_reduce_dtype",
    "reduce_bytes",
    "forward_flops",
    "forward_memory_bytes",
    "tp_demands",
    "pp_demands",
    "dp_demands",
]


def padded_vocab(vocab: int, tp: int, multiple: int = 128) -> int:
    """Megatron's padded vocabulary: the next multiple of ``multiple * tp``.

    Examples
    --------
    >>> padded_vocab(50257, 8), padded_vocab(51200, 8), padded_vocab(32000, 8)
    (51200, 51200, 32768)
    """
    q = multiple * tp
    return ceil(vocab / q) * q


def plan_padded_vocab(plan: Plan) -> int:
    """The plan's padded vocabulary: padded for ``lcm(stage_tp)`` (``tp`` when uniform), so
    every stage's vocab shard is whole.

    Examples
    --------
    >>> from traffic.plan import load_plan
    >>> plan_padded_vocab(load_plan("gpt3-175b"))
    51200
    """
    return padded_vocab(int(plan.model.vocab), lcm(*plan.stage_tp), plan.options.vocab_pad_multiple)


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one layer held by one rank.

    Attributes
    ----------
    dense : int
        Non-expert parameters (attention, dense MLP or shared experts, norms, router), synced
        over the ``dp x cp`` group.
    expert : int
        Routed-expert parameters (``E/ep`` experts split ``etp`` ways), synced over the
        expert-data-parallel group.
    replicated : int
        Of ``dense``, those replicated across TP (norms, row-parallel biases, router).
    """

    dense: int
    expert: int
    replicated: int


def _mlp(h: int, f: int, split: int, gated: bool, bias: bool) -> tuple[int, int]:
    """(parameters per rank, replicated) of one MLP of width ``f`` split ``split`` ways."""
    fin = (2 if gated else 1) * f // split
    w = h * fin + (f // split) * h
    b = fin + h if bias else 0
    return w + b, (h if bias else 0)


def layer_parameters(
    model: ModelSpec, tp: int = 1, moe: bool = False, ep: int = 1, etp: int = 1
) -> LayerParams:
    """Exact parameters per rank of one layer.

    Attention: fused QKV ``h * (heads + 2*kv_heads) * head_dim / t`` (+ the same number of biases
    / h), output projection ``heads*head_dim/t * h`` (+ bias ``h``, replicated); two norms (``2h``
    each for LayerNorm, ``h`` for RMSNorm; replicated). MLP: ``h*f/t`` (twice when gated) in and
    ``f/t*h`` out, biases ``f/t`` (twice when gated) and ``h`` (replicated). A MoE layer replaces
    the MLP by a router (``h*E``, replicated), ``shared_experts`` MLPs of width ``moe_ffn`` split
    over TP, and ``E/ep`` routed experts of width ``moe_ffn`` split over ``etp``.

    Examples
    --------
    GPT-3 175B, ``t = 8``: ``12h^2/t + 7h/t + 6h``

    >>> from traffic.zoo import get_model
    >>> h = 12288
    >>> layer_parameters(get_model("gpt3-175b"), tp=8).dense == 12*h*h//8 + 7*h//8 + 6*h
    True
    """
    h, hd = int(model.hidden), int(model.head_dim)
    qkv = (int(model.heads) + 2 * int(model.kv_heads)) * hd // tp
    attn = h * qkv + (model.attn_dim // tp) * h
    rep = 0
    if model.bias:
        attn += qkv + h
        rep += h
    norm = 2 * (2 * h if model.norm == "layernorm" else h)
    rep += norm
    dense = attn + norm
    expert = 0
    if moe:
        router = h * int(model.experts)
        dense += router
        rep += router
        for _ in range(model.shared_experts):
            n, r = _mlp(h, int(model.moe_ffn), tp, model.gated_mlp, model.bias)
            dense += n
            rep += r
        n, _ = _mlp(h, int(model.moe_ffn), etp, model.gated_mlp, model.bias)
        expert = (int(model.experts) // ep) * n
    else:
        n, r = _mlp(h, int(model.ffn), tp, model.gated_mlp, model.bias)
        dense += n
        rep += r
    return LayerParams(dense=dense, expert=expert, replicated=rep)


def _final_norm(model: ModelSpec) -> int:
    return 2 * int(model.hidden) if model.norm == "layernorm" else int(model.hidden)


def model_parameters(model: ModelSpec, tied: bool | None = None) -> int:
    """Whole-model parameter count (unpadded vocabulary, no parallelism).

    Examples
    --------
    >>> from traffic.zoo import get_model
    >>> model_parameters(get_model("llama2-7b"))
    6738415616
    """
    tied = model.tied_embeddings if tied is None else tied
    h, v = int(model.hidden), int(model.vocab)
    total = v * h + (int(model.seq_len) * h if model.position == "learned" else 0)
    n_moe = model.moe_layers
    dense_layer = layer_parameters(model, moe=False)
    total += (int(model.layers) - n_moe) * dense_layer.dense
    if n_moe:
        lp = layer_parameters(model, moe=True)
        total += n_moe * (lp.dense + lp.expert)
    total += _final_norm(model)
    if not tied:
        total += v * h
    return total


@dataclass(frozen=True)
class StageLayout:
    """Layers of each pipeline stage: ``dense[i]`` dense-MLP and ``moe[i]`` MoE layers."""

    dense: tuple[int, ...]
    moe: tuple[int, ...]

    @property
    def layers(self) -> tuple[int, ...]:
        """All layers per stage."""
        return tuple(a + b for a, b in zip(self.dense, self.moe, strict=True))


def stage_layout(
    model: ModelSpec, pp: int, vpp: int = 1, stage_layers: tuple[int, ...] | None = None
) -> StageLayout:
    """Layers per stage: chunk ``c`` of ``l/(p*v)`` consecutive layers lives on stage ``c mod p``.

    The first ``dense_layers`` layers of a MoE model have a dense MLP. ``stage_layers``
    (``parallelism.stage_layers``, ``vpp = 1``) gives each stage its own count of consecutive
    layers instead, e.g. Llama 3 405B's 126 layers on 16 stages as ``[7, 8, ..., 8, 7]``.

    >>> from traffic.zoo import get_model
    >>> stage_layout(get_model("llama3-405b"), 4, stage_layers=(31, 32, 32, 31))
    StageLayout(dense=(31, 32, 32, 31), moe=(0, 0, 0, 0))

    Examples
    --------
    >>> from traffic.zoo import get_model
    >>> stage_layout(get_model("deepseek-v3").model_copy(update={"layers": 64}), pp=4, vpp=2)
    StageLayout(dense=(3, 0, 0, 0), moe=(13, 16, 16, 16))
    """
    per_chunk = int(model.layers) // (pp * vpp)
    sizes = [per_chunk] * (pp * vpp) if stage_layers is None else [int(x) for x in stage_layers]
    starts = [sum(sizes[:c]) for c in range(len(sizes))]
    first_moe = model.dense_layers if model.is_moe else int(model.layers)
    dense = [0] * pp
    moe = [0] * pp
    for c in range(len(sizes)):
        per_chunk = sizes[c]
        lo, hi = starts[c], starts[c] + per_chunk
        nd = max(0, min(hi, first_moe) - lo)
        dense[c % pp] += nd
        moe[c % pp] += per_chunk - nd
    return StageLayout(dense=tuple(dense), moe=tuple(moe))


def stage_parameters(plan: Plan) -> list[LayerParams]:
    """Exact parameters per rank of each pipeline stage (not ``P/(t*p)``).

    Stage 0 adds the word embedding ``V*h/t`` (padded ``V``) and ``s*h`` learned positions; the
    last stage adds the final norm and the output layer ``V*h/t`` (a tied copy when ``p > 1``;
    nothing extra when tied and ``p = 1``).
    """
    m, par = plan.model, plan.parallelism
    p = par.pp
    lay = stage_layout(m, p, par.vpp, par.stage_layers)
    h = int(m.hidden)
    vp = plan_padded_vocab(plan)
    out = []
    for i in range(p):
        t = plan.stage_tp[i]
        dl = layer_parameters(m, t)
        ml = layer_parameters(m, t, moe=True, ep=par.ep, etp=plan.etp) if m.is_moe else dl
        dense = lay.dense[i] * dl.dense + lay.moe[i] * ml.dense
        rep = lay.dense[i] * dl.replicated + lay.moe[i] * ml.replicated
        expert = lay.moe[i] * ml.expert
        if i == 0:
            dense += vp * h // t + (int(m.seq_len) * h if m.position == "learned" else 0)
        if i == p - 1:
            dense += _final_norm(m)
            rep += _final_norm(m)
            if not plan.tied or p > 1:
                dense += vp * h // t
        out.append(LayerParams(dense=dense, expert=expert, replicated=rep))
    return out


def grad_reduce_dtype(plan: Plan) -> str:
    """The element type of the gradient reduction: ``options.grad_reduce_dtype``, with ``auto``
    resolved as Megatron-LM does.

    ``auto`` (the default) is ``fp32`` for a transformer trained with 2-byte parameters (taken as
    bf16) under Megatron's data parallelism (DDP or the distributed optimizer): Megatron
    accumulates and all-reduces bf16 runs' gradients in fp32 (``accumulate_allreduce_grads_in_fp32``
    is forced on with ``--bf16``). Otherwise (fp32 training, fp16 set explicitly, ZeRO/FSDP,
    recommendation and plain data-parallel models) it is ``gradient``:
    ``precision.gradient_bytes``. A 2-byte fp16 run reduces in fp16: set ``fp16``.

    Examples
    --------
    >>> from traffic.plan import load_plan
    >>> p = load_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 8},
    ...                "cluster": {"servers": 128, "gpus_per_server": 8}})
    >>> grad_reduce_dtype(p), reduce_bytes(p)
    ('fp32', 4)
    """
    dt = plan.options.grad_reduce_dtype
    if dt != "auto":
        return dt
    par = plan.parallelism
    megatron_dp = not (par.zero or par.fsdp)
    if plan.model.kind == "transformer" and megatron_dp and plan.precision.parameter_bytes == 2:
        return "fp32"
    return "gradient"


def reduce_bytes(plan: Plan) -> int:
    """Bytes per element of the data-parallel gradient reduction (:func:`grad_reduce_dtype`)."""
    dt = grad_reduce_dtype(plan)
    return {"fp32": 4, "bf16": 2, "fp16": 2}.get(dt, plan.precision.gradient_bytes)


def forward_flops(plan: Plan) -> list[float]:
    """Forward FLOPs per GPU per micro-batch of each stage.

    Per layer ``2 * tokens * W / t + 4 * b * (s/cp) * s * heads*head_dim / t`` with ``tokens =
    b*s/cp`` and ``W`` the layer's matrix weights (attention, MLP; for MoE the router, shared and
    ``top_k`` routed experts); the last stage adds the logits ``2*b*(s/cp)*h*V/t``. For a GPT
    layer this is Megatron's ``24bsh^2 + 4bs^2h`` (Narayanan et al. SC'21, eq. 3, whose
    ``96Bslh^2(1 + s/6h + V/16lh)`` counts 4 forward-equivalents per layer with recomputation
    and 3 for the logits).
    """
    m, par = plan.model, plan.parallelism
    cp, b = par.cp, par.micro_batch_size
    s, h = int(m.seq_len), int(m.hidden)
    tokens = b * s / cp
    hd = int(m.head_dim)
    attn_w = h * (int(m.heads) + 2 * int(m.kv_heads)) * hd + m.attn_dim * h
    fin = 2 if m.gated_mlp else 1
    mlp_w = (fin + 1) * h * int(m.ffn)
    moe_w = h * int(m.experts) + (m.shared_experts + m.top_k) * (fin + 1) * h * int(m.moe_ffn)
    core = 4.0 * b * (s / cp) * s * m.attn_dim
    lay = stage_layout(m, par.pp, par.vpp, par.stage_layers)
    vp = plan_padded_vocab(plan)
    out = []
    for i in range(par.pp):
        t = plan.stage_tp[i]
        dense_layer = (2.0 * tokens * (attn_w + mlp_w) + core) / t
        moe_layer = (2.0 * tokens * (attn_w + moe_w) + core) / t
        f = lay.dense[i] * dense_layer + lay.moe[i] * moe_layer
        if i == par.pp - 1:
            f += 2.0 * tokens * h * vp / t
        out.append(f)
    return out


def forward_memory_bytes(plan: Plan) -> list[float]:
    """HBM bytes of the memory-bound kernels of one forward micro-batch per GPU, per stage.

    The GEMMs are compute-bound (:func:`forward_flops`); the kernels between them stream their
    tensors through HBM once each way. Per layer and token (``a`` = activation bytes, ``t`` the
    stage's TP size, ``h`` hidden, ``f`` the MLP width):

    - two layer norms, each reading and writing ``h``: ``4 a h``;
    - two fused bias-dropout-residual adds, each reading the input and the residual, writing the
      sum and a 1-byte dropout mask: ``2 (3a + 1) h``;
    - the fused bias-activation of the MLP, reading its ``(1 + gated) f / t`` inputs and writing
      ``f / t``: ``(2 + gated) a f / t``;
    - with ``options.memory_bound_kernels: scores`` (attention without a fused kernel, as
      Megatron-LM of 2021) the ``heads / t`` rows of ``s`` attention scores per token
      (``s / cp`` keys with context parallelism) are written by the score GEMM, read and written
      by the fused scale-mask-softmax and by the dropout (plus its 1-byte mask):
      ``(5a + 1) s heads / t``; ``flash`` keeps them on chip (0).

    The ``h``-wide terms are divided by ``t`` with sequence parallelism (each rank holds ``s/t``
    tokens there), else replicated on every TP rank. MoE layers count their ``top_k`` routed and
    shared experts' activations. The last stage adds the vocabulary-parallel cross-entropy over
    its ``V / t`` logits per token: the logits read once and an fp32 softmax written and read
    (``(a + 8) V / t``). Empty when the option is ``none``.

    Examples
    --------
    >>> from traffic.plan import load_plan
    >>> p = load_plan({"model": {"base": "gpt3-175b", "layers": 1, "hidden": 64, "heads": 2,
    ...                          "seq_len": 8, "vocab": 128},
    ...                "parallelism": {"tp": 1, "pp": 1, "dp": 1},
    ...                "options": {"memory_bound_kernels": "scores", "edge_extras": True},
    ...                "cluster": {"servers": 1, "gpus_per_server": 1}})
    >>> tok = 8
    >>> tok * (64 * (4 * 2 + 2 * 7) + 2 * 2 * 256 + 11 * 8 * 2) + tok * 10 * 128
    31104
    >>> forward_memory_bytes(p)
    [31104.0]
    """
    opt = plan.options
    kind = opt.memory_bound_kernels
    if kind == "none":
        return []
    m, par = plan.model, plan.parallelism
    a = plan.precision.activation_bytes
    cp, b = par.cp, par.micro_batch_size
    s, h = int(m.seq_len), int(m.hidden)
    tokens = b * s / cp
    gated = 1 if m.gated_mlp else 0
    heads = int(m.heads)
    lay = stage_layout(m, par.pp, par.vpp, par.stage_layers)
    vp = plan_padded_vocab(plan)
    out = []
    for i in range(par.pp):
        t = plan.stage_tp[i]
        wide = h * (4 * a + 2 * (3 * a + 1)) / (t if par.sp else 1)
        scores = (5 * a + 1) * (s / cp) * heads / t if kind == "scores" else 0.0
        dense = wide + scores + (2 + gated) * a * int(m.ffn) / t
        experts = (m.top_k + m.shared_experts) * (2 + gated) * a * int(m.moe_ffn) / t
        moe = wide + scores + experts
        per_token = lay.dense[i] * dense + lay.moe[i] * moe
        if i == par.pp - 1:
            per_token += (a + 8) * vp / t
        out.append(float(tokens * per_token))
    return out


def tp_demands(plan: Plan, grid: RankGrid | StagedRankGrid) -> list[Demand]:
    """Tensor-parallel (and sequence-parallel) collectives of every stage; see module notes."""
    m, par, opt = plan.model, plan.parallelism, plan.options
    if max(plan.stage_tp) == 1:
        return []
    b, s, h, cp = par.micro_batch_size, int(m.seq_len), int(m.hidden), par.cp
    nmb = plan.micro_batches
    size = b * (s // cp) * h * plan.precision.activation_bytes
    full = par.recompute == "full"
    lay = stage_layout(m, par.pp, par.vpp, par.stage_layers)
    moe_blocks = 1 + m.shared_experts
    params = stage_parameters(plan)
    out: list[Demand] = []
    for i in range(par.pp):
        if plan.stage_tp[i] == 1:
            continue
        g = grid.groups("tp", pp=i)
        blocks = 2 * lay.dense[i] + moe_blocks * lay.moe[i]
        first, last = i == 0, i == par.pp - 1
        if not par.sp:
            fwd, bwd = blocks, blocks * (2 if full else 1)
            if opt.edge_extras:
                fwd += 1 if first else 0  # vocab-parallel embedding output
                bwd += 1 if last else 0  # LM-head input gradient
            out += [
                Demand(
                    "all-reduce",
                    g,
                    size,
                    "tp",
                    "forward",
                    fwd * nmb,
                    True,
                    "tp all-reduce",
                    stage=i,
                ),
                Demand(
                    "all-reduce",
                    g,
                    size,
                    "tp",
                    "backward",
                    bwd * nmb,
                    True,
                    "tp all-reduce" + (" (incl. recompute)" if full else ""),
                    stage=i,
                ),
            ]
        else:
            ag_f = rs_f = blocks
            rs_b = blocks + (blocks if full else 0)
            ag_b = blocks * (2 if opt.sp_regather else 1) + (blocks if full else 0)
            ar_f = 0
            if opt.edge_extras:
                if first:  # embedding output into the SP region, its gradient gathered back
                    if m.position == "learned":  # all-reduce, add positions, split (no comm)
                        ar_f += 1
                    else:  # reduce-scatter straight into the SP region
                        rs_f += 1
                    ag_b += 1
                if last:  # LM head: gather input, reduce-scatter its gradient (+ re-gather)
                    ag_f += 1
                    rs_b += 1
                    ag_b += 1 if opt.sp_regather else 0
            for op, ph, c in (
                ("all-gather", "forward", ag_f),
                ("reduce-scatter", "forward", rs_f),
                ("all-gather", "backward", ag_b),
                ("reduce-scatter", "backward", rs_b),
            ):
                out.append(Demand(op, g, size, "tp", ph, c * nmb, True, f"sp {op}", stage=i))
            if ar_f:
                out.append(
                    Demand(
                        "all-reduce",
                        g,
                        size,
                        "tp",
                        "forward",
                        ar_f * nmb,
                        True,
                        "sp embedding all-reduce (learned positions)",
                        stage=i,
                    )
                )
            out.append(
                Demand(
                    "all-reduce",
                    g,
                    params[i].replicated * reduce_bytes(plan),
                    "tp",
                    "backward",
                    1,
                    True,
                    "sp replicated-parameter gradients",
                    stage=i,
                )
            )
        if opt.edge_extras and last:
            ce = b * (s // cp) * 4
            out.append(
                Demand(
                    "all-reduce",
                    g,
                    ce,
                    "tp",
                    "forward",
                    3 * nmb,
                    True,
                    "vocab-parallel cross-entropy (fp32)",
                    stage=i,
                )
            )
    return out


def pp_demands(plan: Plan, grid: RankGrid) -> list[Demand]:
    """Pipeline sends of every stage boundary, forward and backward; see module notes."""
    m, par, opt = plan.model, plan.parallelism, plan.options
    p, v, t = par.pp, par.vpp, par.tp
    if p == 1:
        return []
    if not plan.uniform_tp:
        return _staged_pp_demands(plan, grid)
    b, s, h, cp = par.micro_batch_size, int(m.seq_len), int(m.hidden), par.cp
    nmb = plan.micro_batches
    full = b * (s // cp) * h * plan.precision.activation_bytes
    split = t > 1 and (par.sp or opt.pp_scatter_gather)
    size = full // t if split else full
    pg = grid.groups("pp")
    times: dict[tuple[int, int], int] = {}
    for c in range(p * v - 1):
        key = (c % p, (c + 1) % p)
        times[key] = times.get(key, 0) + 1
    out: list[Demand] = []
    for (a, z), k in sorted(times.items()):
        out.append(
            Demand(
                "send",
                pg[:, [a, z]],
                size,
                "pp",
                "forward",
                k * nmb,
                False,
                f"pp send {a}->{z}",
                stage=a,
            )
        )
        out.append(
            Demand(
                "send",
                pg[:, [z, a]],
                size,
                "pp",
                "backward",
                k * nmb,
                False,
                f"pp send {z}->{a}",
                stage=z,
            )
        )
        if split and not par.sp:
            for dst, ph in ((z, "forward"), (a, "backward")):
                out.append(
                    Demand(
                        "all-gather",
                        grid.groups("tp", pp=dst),
                        full,
                        "pp",
                        ph,
                        k * nmb,
                        True,
                        "pp scatter-gather re-assembly",
                        stage=dst,
                    )
                )
    return out


def _staged_pp_demands(plan: Plan, grid: StagedRankGrid) -> list[Demand]:
    """Pipeline traffic when stages have different TP sizes (``vpp = 1``, ``cp = 1``): the
    plain send (and scatter-gather) between stages of equal size, cross-mesh resharding
    (:mod:`traffic.models.resharding`, ``options.resharding``) between stages that differ."""
    m, par, opt = plan.model, plan.parallelism, plan.options
    b, s, h = par.micro_batch_size, int(m.seq_len), int(m.hidden)
    beta = plan.precision.activation_bytes
    nmb = plan.micro_batches
    full = b * s * h * beta
    gps = plan.cluster.gpus_per_server
    out: list[Demand] = []
    for a in range(par.pp - 1):
        z = a + 1
        ta, tz = plan.stage_tp[a], plan.stage_tp[z]
        ma, mz = stage_meshes(grid, a), stage_meshes(grid, z)
        for src, dst, ph, s_st, d_st in ((ma, mz, "forward", a, z), (mz, ma, "backward", z, a)):
            if ta == tz:
                split = ta > 1 and (par.sp or opt.pp_scatter_gather)
                out.append(
                    Demand(
                        "send",
                        np.column_stack([src.ravel(), dst.ravel()]),
                        full // ta if split else full,
                        "pp",
                        ph,
                        nmb,
                        False,
                        f"pp send {s_st}->{d_st}",
                        stage=s_st,
                    )
                )
                if split and not par.sp:
                    out.append(
                        Demand(
                            "all-gather",
                            dst,
                            full,
                            "pp",
                            ph,
                            nmb,
                            True,
                            "pp scatter-gather re-assembly",
                            stage=d_st,
                        )
                    )
                continue
            out += reshard_demands(
                src,
                dst,
                b * s * h,
                beta,
                bool(par.sp),
                opt.resharding,
                gps,
                phase=ph,
                count=nmb,
                stage=s_st,
                dst_stage=d_st,
                name=f"pp reshard {s_st}->{d_st} tp {src.shape[1]}->{dst.shape[1]}",
            )
    return out


def dp_demands(plan: Plan, grid: RankGrid, expert: RankGrid | None = None) -> list[Demand]:
    """Data-parallel gradient sync (DDP or distributed optimizer) and tied-embedding sync."""
    par = plan.parallelism
    params = stage_parameters(plan)
    rb, pb = reduce_bytes(plan), plan.precision.parameter_bytes
    out: list[Demand] = []
    for i in range(par.pp):
        sets = [("dp", grid.groups("dp-cp", pp=i), params[i].dense)]
        if expert is not None and params[i].expert:
            sets.append(("expert dp", expert.groups("dp", pp=i), params[i].expert))
        for label, g, n in sets:
            if g.shape[1] == 1:
                continue
            if par.distributed_optimizer:
                out.append(
                    Demand(
                        "reduce-scatter",
                        g,
                        n * rb,
                        "dp",
                        "backward",
                        1,
                        True,
                        f"{label} gradient reduce-scatter",
                        stage=i,
                    )
                )
                out.append(
                    Demand(
                        "all-gather",
                        g,
                        n * pb,
                        "dp",
                        "optimizer",
                        1,
                        True,
                        f"{label} parameter all-gather",
                        stage=i,
                    )
                )
            else:
                out.append(
                    Demand(
                        "all-reduce",
                        g,
                        n * rb,
                        "dp",
                        "backward",
                        1,
                        True,
                        f"{label} gradient all-reduce",
                        stage=i,
                    )
                )
    out += embedding_demands(plan, grid)
    return out


def embedding_demands(plan: Plan, grid: RankGrid) -> list[Demand]:
    """Tied word-embedding gradient all-reduce between the first and last stage (``p > 1``)."""
    m, par = plan.model, plan.parallelism
    if not plan.tied or par.pp == 1:
        return []
    if not plan.uniform_tp:
        return _staged_embedding_demands(plan, grid)
    vp = padded_vocab(int(m.vocab), par.tp, plan.options.vocab_pad_multiple)
    g = grid.groups("pp")[:, [0, par.pp - 1]]
    size = vp * int(m.hidden) // par.tp * reduce_bytes(plan)
    return [
        Demand(
            "all-reduce",
            g,
            size,
            "embedding",
            "backward",
            1,
            True,
            "tied embedding gradient all-reduce",
            stage=0,
        )
    ]


def _staged_embedding_demands(plan: Plan, grid: StagedRankGrid) -> list[Demand]:
    """Tied embeddings when the first and last stage have different TP sizes: vocab rows
    ``[k V/t, (k+1) V/t)`` on TP rank ``k`` of each; every (first-stage rank, last-stage rank)
    pair of one replica whose rows overlap all-reduces the overlap's gradient (one family per
    overlap size)."""
    m, par = plan.model, plan.parallelism
    vp = plan_padded_vocab(plan)
    t0, tl = plan.stage_tp[0], plan.stage_tp[-1]
    m0, ml = stage_meshes(grid, 0), stage_meshes(grid, par.pp - 1)
    rb = reduce_bytes(plan)
    fam: dict[int, list[np.ndarray]] = {}
    for j in range(t0):
        for k in range(tl):
            n = min((j + 1) * vp // t0, (k + 1) * vp // tl) - max(j * vp // t0, k * vp // tl)
            if n > 0:
                fam.setdefault(n, []).append(np.column_stack([m0[:, j], ml[:, k]]))
    return [
        Demand(
            "all-reduce",
            np.concatenate(fam[n]),
            n * int(m.hidden) * rb,
            "embedding",
            "backward",
            1,
            True,
            "tied embedding gradient all-reduce (row overlap)",
            stage=0,
        )
        for n in sorted(fam)
    ]
