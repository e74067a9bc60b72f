"""Plan -> Workload: the symbolic traffic of one training iteration.

:func:`workload_from_plan` dispatches on the model kind: transformers go through
:mod:`traffic.models.megatron` (+ context parallel, MoE, ZeRO/FSDP), recommendation models through
:mod:`traffic.models.recsys` and the rest through :mod:`traffic.models.data_parallel`. The
Workload carries the model's parameter count, every counting convention used
(``Workload.conventions``) and facts for the iteration model (``Workload.info``): micro-batches
``m``, layers per stage, parameters per GPU per stage and the forward FLOPs per GPU per
micro-batch of each stage (:func:`traffic.models.megatron.forward_flops`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from traffic.models import megatron
from traffic.models.context_parallel import cp_demands
from traffic.models.data_parallel import data_parallel_demands
from traffic.models.moe import moe_demands
from traffic.models.recsys import dims_per_gpu, mlp_parameters, recsys_demands, recsys_parameters
from traffic.models.sharded_dp import sharded_demands
from traffic.placement import StagedRankGrid, rank_grids
from traffic.plan import Plan, check_plan, load_plan
from traffic.workload import Demand, Workload

__all__ = ["workload_from_plan", "model_flops"]


def _conventions(plan: Plan) -> dict[str, Any]:
    par, opt, m = plan.parallelism, plan.options, plan.model
    c: dict[str, Any] = {
        "size_convention": "nccl-tests (all-reduce buffer, all-gather output, "
        "reduce-scatter input, all-to-all whole send buffer)",
        "model_kind": m.kind,
        "order": par.order,
        "micro_batches": plan.micro_batches,
        "global_batch": plan.global_batch,
        "grad_reduce_dtype": megatron.grad_reduce_dtype(plan),
        "grad_reduce_bytes": megatron.reduce_bytes(plan),
        "sharding": par.fsdp or (f"zero{par.zero}" if par.zero else None),
        "distributed_optimizer": par.distributed_optimizer,
        "defer_grad_sync": opt.defer_grad_sync,
        "overlap_grad_reduce": opt.overlap_grad_reduce,
    }
    if m.kind == "transformer":
        c.update(
            recompute=par.recompute,
            sequence_parallel=par.sp and par.tp > 1,
            sp_embedding_output=(
                None
                if not (par.sp and par.tp > 1 and opt.edge_extras)
                else "all-reduce, then split (learned positions)"
                if m.position == "learned"
                else "reduce-scatter"
            ),
            sp_regather=opt.sp_regather,
            tied_embeddings=plan.tied,
            edge_extras=opt.edge_extras,
            pp_scatter_gather=opt.pp_scatter_gather,
            vocab_pad_multiple=opt.vocab_pad_multiple,
            padded_vocab=megatron.plan_padded_vocab(plan),
            dp_group="dp-cp",
            tp_blocks="2 per dense layer; 1 + shared_experts per MoE layer",
            vpp=par.vpp,
            memory_bound_kernels=opt.memory_bound_kernels,
        )
        if par.stage_tp is not None:
            c.update(stage_tp=list(plan.stage_tp), resharding=opt.resharding)
        if m.is_moe:
            c.update(
                moe_routing="capacity" if opt.capacity_factor is not None else "dropless",
                capacity_factor=opt.capacity_factor,
                expert_load="uniform" if opt.expert_load is None else list(opt.expert_load),
                expert_grid="etp-ep-edp-pp",
                etp=plan.etp,
            )
        if par.fsdp == "hybrid_shard":
            c["hybrid_shard_size"] = opt.hybrid_shard_size or "GPUs of a server"
    elif m.kind == "recsys":
        c.update(embedding_sharding="table-wise, round-robin", mlp_sync="all-reduce")
    return c


def _transformer(plan: Plan) -> tuple[list[Demand], int, dict[str, Any]]:
    par = plan.parallelism
    m = plan.model
    dense, expert = rank_grids(par.tp, par.pp, plan.dp, par.cp, par.ep, plan.etp, par.order)
    if not plan.uniform_tp:  # stages of different TP sizes: blocks of ranks (dense, cp = 1)
        dense = StagedRankGrid.from_sizes(plan.stage_tp, dp=plan.dp, order=par.order)
    demands = megatron.tp_demands(plan, dense)
    demands += cp_demands(plan, dense)
    demands += moe_demands(plan, expert)
    demands += megatron.pp_demands(plan, dense)
    sharded = par.zero or par.fsdp
    if sharded:
        rb = megatron.reduce_bytes(plan)
        params = megatron.stage_parameters(plan)
        for i in range(par.pp):
            demands += sharded_demands(
                plan, dense.groups("dp-cp", pp=i), params[i].dense, i, "dp", rb
            )
            if params[i].expert:
                demands += sharded_demands(
                    plan, expert.groups("dp", pp=i), params[i].expert, i, "expert dp", rb
                )
        demands += megatron.embedding_demands(plan, dense)
    else:
        demands += megatron.dp_demands(plan, dense, expert if m.is_moe else None)
    lay = megatron.stage_layout(m, par.pp, par.vpp, par.stage_layers)
    sp = megatron.stage_parameters(plan)
    info = {
        "micro_batches": plan.micro_batches,
        "layers_per_stage": list(lay.layers),
        "moe_layers_per_stage": list(lay.moe),
        "parameters_per_gpu_per_stage": [p.dense + p.expert for p in sp],
        "forward_flops_per_microbatch_per_gpu": megatron.forward_flops(plan),
        "forward_memory_bytes_per_microbatch_per_gpu": megatron.forward_memory_bytes(plan),
        "flops_formula": "per layer 2*(b*s/cp)*W/t + 4*b*(s/cp)*s*heads*head_dim/t "
        "(GPT: 24bsh^2 + 4bs^2h); last stage + 2*b*(s/cp)*h*V/t",
    }
    return demands, megatron.model_parameters(m, plan.tied), info


def _compute_facts(plan: Plan, info: dict[str, Any]) -> dict[str, Any]:
    """The GPU the plan names and the model FLOPs of one iteration (see :func:`model_flops`)."""
    spec = plan.cluster.gpu_spec
    gpu = None
    if spec is not None:
        gpu = {
            "name": plan.cluster.gpu_name,
            "label": spec.label,
            "peak_flops": spec.peak_flops,
            "efficiency": float(spec.efficiency),
            "memory_bandwidth": spec.memory_bandwidth,
            "memory_bytes": spec.memory_bytes,
            "scale_up_bandwidth": spec.scale_up_bandwidth,
            "scale_up_domain": int(spec.scale_up_domain),
        }
    model, hardware = model_flops(plan, info["forward_flops_per_microbatch_per_gpu"])
    facts = {
        "gpu": gpu,
        "gpu_name": plan.cluster.gpu_name,
        "model_flops_per_iteration": model,
        "hardware_flops_per_iteration": hardware,
    }
    if spec is None and plan.cluster.efficiency is not None:  # the default A100's efficiency
        facts["default_gpu_efficiency"] = float(plan.cluster.efficiency)
    return facts


def model_flops(plan: Plan, forward_per_gpu: list[float]) -> tuple[float, float]:
    """Model FLOPs of one iteration, and the FLOPs the GPUs run (with recomputation).

    The model count is forward + backward = 3 forward passes of every micro-batch:
    ``3 * m * dp * sum_i F_i * t_i * cp`` with ``F_i`` the per-GPU forward FLOPs of stage ``i``
    (:func:`traffic.models.megatron.forward_flops`), ``t_i`` its TP size and ``m`` the
    micro-batches. For a transformer this is the PaLM count (Chowdhery et al. 2022, app. B)
    ``6 * N * D + 12 * L * (heads * head_dim) * s * D`` over ``D`` tokens, with ``N`` the matrix
    parameters a token passes through (attention, MLP or active experts, and the padded LM head;
    no embedding lookup, norms or biases); for a GPT layer it equals Narayanan et al. (SC'21)
    eq. 3 without recomputation, ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``. With full
    recomputation the hardware count adds one forward of the layers (eq. 3 as printed,
    ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``), otherwise the two counts are equal.
    Recommendation and data-parallel models: ``3 * forward * global batch``.
    """
    par = plan.parallelism
    tp = plan.stage_tp if plan.model.kind == "transformer" else (1,) * len(forward_per_gpu)
    cp = par.cp if plan.model.kind == "transformer" else 1
    passes = float(plan.micro_batches) * float(plan.dp) * float(cp)
    fwd = math.fsum(f * t for f, t in zip(forward_per_gpu, tp, strict=True)) * passes
    model = 3.0 * fwd
    if plan.model.kind == "transformer" and par.recompute == "full":
        m = plan.model
        tokens = par.micro_batch_size * int(m.seq_len) / par.cp
        logits = 2.0 * tokens * int(m.hidden) * float(megatron.plan_padded_vocab(plan)) * passes
        return model, model + fwd - logits  # the layers run forward again, the LM head does not
    return model, model


def workload_from_plan(plan: Plan | Mapping[str, Any] | str | Path, name: str = "") -> Workload:
    """Build the :class:`~traffic.workload.Workload` of one iteration of a plan.

    Parameters
    ----------
    plan : Plan, Mapping, str or pathlib.Path
        A validated plan, or anything :func:`~traffic.plan.load_plan` accepts.
    name : str, optional
        Workload name; defaults to the plan's file name or model name.

    Examples
    --------
    >>> w = workload_from_plan("gpt3-175b")
    >>> w.gpus, w.servers, w.info["micro_batches"], w.info["layers_per_stage"][0]
    (1024, 128, 192, 6)
    >>> sorted(w.bytes_by_class())
    ['dp', 'embedding', 'pp', 'tp']
    """
    if not isinstance(plan, Plan):
        plan = load_plan(plan)
    else:
        check_plan(plan)
    m, par = plan.model, plan.parallelism
    if m.kind == "transformer":
        demands, params, info = _transformer(plan)
    else:
        dense, _ = rank_grids(1, 1, plan.gpus, order=par.order)
        info = {"micro_batches": plan.micro_batches, "layers_per_stage": [], "stages": 1}
        b = par.micro_batch_size
        if m.kind == "recsys":
            demands = recsys_demands(plan, dense)
            params = recsys_parameters(m)
            dims = dims_per_gpu(m, plan.gpus)
            info.update(
                embedding_dims_per_gpu=dims.tolist() if dims.size <= 4096 else None,
                forward_flops_per_microbatch_per_gpu=[2.0 * b * mlp_parameters(m)],
                flops_formula="2 * b * MLP parameters (embedding lookups and interaction "
                "not counted)",
            )
        else:
            demands = data_parallel_demands(plan, dense)
            params = int(m.parameters)
            info.update(
                forward_flops_per_microbatch_per_gpu=[b * float(m.forward_flops_per_sample)],
                flops_formula="b * forward_flops_per_sample",
            )
    info.update(_compute_facts(plan, info))
    label = name or plan.source or m.name
    return Workload(
        gpus=plan.gpus,
        gpus_per_server=plan.cluster.gpus_per_server,
        demands=tuple(demands),
        name=label,
        parameters=int(params),
        conventions=_conventions(plan),
        info=info,
    )
