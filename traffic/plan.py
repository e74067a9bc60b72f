"""Plan files: the parallelization plan of a training job, validated.

A plan has four required sections and one optional one; unknown fields are errors::

    model: gpt3-175b          # a zoo name, or a mapping of shape fields (optionally `base: NAME`)
    parallelism: {tp: 8, pp: 16, dp: 8, ep: 1, etp: 1, cp: 1, sp: false, vpp: 1,
                  stage_tp: null,     # or one TP size per stage, e.g. [8, 8, 4, 4]
                  stage_layers: null, # or one layer count per stage, e.g. [7, 8, ..., 8, 7]
                  micro_batch_size: 1, global_batch_size: 1536, recompute: none,
                  zero: 0, fsdp: null, distributed_optimizer: false, order: tp-cp-ep-dp-pp}
    precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
    cluster: {servers: 128, gpus_per_server: 8,
              gpu: h100-sxm,          # optional: a catalogue name or an inline spec
              efficiency: 0.45}       # optional: overrides the GPU's default efficiency
    options: {...}            # counting conventions, see :class:`Options`

:func:`load_plan` reads YAML or JSON (or takes a mapping), validates every field with pydantic and
then checks the relations between fields (:func:`check_plan`). Every problem is reported as one
:class:`~traffic.errors.InputError` naming the field, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from traffic.decode import (
    decode_text,
    first_error,
    known_fields,
    parse_json,
    parse_yaml,
    read_input,
)
from traffic.errors import InputError
from traffic.hardware import GpuSpec, gpu_names, gpu_spec, load_catalogue
from traffic.limits import MAX_YAML_BYTES, MIN_EFFICIENCY, check_plan_size, max_input_bytes
from traffic.placement import DIMENSIONS, parse_order
from traffic.zoo import ZOO, ModelSpec, zoo_names

__all__ = [
    "Cluster",
    "InlineGpu",
    "Options",
    "Parallelism",
    "Plan",
    "Precision",
    "check_plan",
    "load_plan",
    "embedded_plan_path",
    "embedded_plan_names",
]

_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


def _positive_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0


_BYTES = Field(default=2, ge=1, le=8)


class Parallelism(BaseModel):
    """Parallel degrees and training schedule.

    ``dp`` defaults to ``GPUs / (tp * pp * cp)``; ``global_batch_size`` defaults to the model's
    ``global_batch``. ``zero`` (0..3) and ``fsdp`` are alternatives to each other and to
    ``distributed_optimizer`` (which is ZeRO-1 as Megatron implements it).

    ``stage_layers`` gives each pipeline stage its own number of consecutive layers (summing to
    the model's, ``vpp = 1``; Llama 3 405B puts 126 layers on 16 stages as 7, 8 x 14, 7); by
    default every stage holds ``layers / pp``.

    ``stage_tp`` gives each pipeline stage its own tensor-parallel size (one entry per stage, as
    AlpaComm's meshes of different shardings): stage ``i`` then holds ``stage_tp[i] * cp * dp``
    GPUs, so the GPU count is ``dp * cp * sum(stage_tp)``; ``tp`` defaults to (and must equal)
    ``max(stage_tp)``. Without it every stage uses ``tp``.
    """

    model_config = _STRICT

    tp: PositiveInt = 1
    stage_tp: tuple[PositiveInt, ...] | None = None
    stage_layers: tuple[PositiveInt, ...] | None = None
    pp: PositiveInt = 1
    dp: PositiveInt | None = None
    ep: PositiveInt = 1
    etp: PositiveInt | None = None
    cp: PositiveInt = 1
    sp: bool = False
    vpp: PositiveInt = 1
    micro_batch_size: PositiveInt = 1
    global_batch_size: PositiveInt | None = None
    recompute: Literal["none", "selective", "full"] = "none"
    # an int range, not Literal[0, 1, 2, 3]: a strict Literal still matches true and 1.0
    zero: int = Field(0, ge=0, le=3)
    fsdp: Literal["full_shard", "shard_grad_op", "hybrid_shard"] | None = None
    distributed_optimizer: bool = False
    order: str = "tp-cp-ep-dp-pp"

    @model_validator(mode="before")
    @classmethod
    def _tp_from_stage_tp(cls, data: Any) -> Any:
        # tp defaults to the largest stage's TP size (checked against it in check_plan)
        if isinstance(data, Mapping) and "tp" not in data:
            v = data.get("stage_tp")
            if isinstance(v, list | tuple) and v and all(_positive_int(x) for x in v):
                return {**data, "tp": max(v)}
        return data

    @field_validator("stage_tp", mode="before")
    @classmethod
    def _stage_tp(cls, v: Any) -> Any:
        if v is None:
            return v
        if not (isinstance(v, list | tuple) and v and all(_positive_int(x) for x in v)):
            raise ValueError("a list of positive integers, one tensor-parallel size per stage")
        return tuple(v)

    @field_validator("stage_layers", mode="before")
    @classmethod
    def _stage_layers(cls, v: Any) -> Any:
        if v is None:
            return v
        if not (isinstance(v, list | tuple) and v and all(_positive_int(x) for x in v)):
            raise ValueError("a list of positive integers, one layer count per stage")
        return tuple(v)

    @field_validator("order")
    @classmethod
    def _order(cls, v: str) -> str:
        try:
            parse_order(v)
        except InputError as e:
            raise ValueError(e.allowed) from None
        return v


class Precision(BaseModel):
    """Bytes per element of activations, gradients and parameters (1..8)."""

    model_config = _STRICT

    activation_bytes: int = _BYTES
    gradient_bytes: int = _BYTES
    parameter_bytes: int = _BYTES


class InlineGpu(GpuSpec):
    """A GPU spelled out in the plan (:class:`~traffic.hardware.GpuSpec`, sources optional)."""

    label: str = "inline GPU"
    source: str = "inline in the plan"
    efficiency_source: str = "inline in the plan"


class Cluster(BaseModel):
    """Servers, GPUs per server and the GPU; GPU ``r`` sits on server ``r // gpus_per_server``.

    ``gpu`` is a name of the hardware catalogue (:mod:`traffic.hardware`: ``a100-80gb``,
    ``h100-sxm``, ``h200``, ``b200``, ``gb200``, ``mi300x``, ...) or an inline spec with the
    catalogue's fields; ``efficiency`` (in [0.001, 1]) overrides its default compute efficiency.
    Without ``gpu`` the compute model is the long-standing default, an A100-SXM4-80GB at
    efficiency 0.5 (the catalogue's ``a100-80gb``; ``efficiency`` overrides the 0.5 there too),
    and intra-server links keep the fabric's bandwidth; with ``gpu`` they run at the GPU's
    scale-up (NVLink) bandwidth.
    """

    model_config = _STRICT

    servers: PositiveInt
    gpus_per_server: PositiveInt
    gpu: str | InlineGpu | None = None
    efficiency: float | None = Field(default=None, ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v: Any) -> Any:
        if isinstance(v, str):
            names = gpu_names(load_catalogue())
            if v not in names:
                raise ValueError("a GPU of the catalogue: " + ", ".join(names))
        elif isinstance(v, Mapping):
            return InlineGpu.model_validate(dict(v))
        return v

    @property
    def gpu_spec(self) -> GpuSpec | None:
        """The named or inline GPU with ``efficiency`` applied (None: the default A100)."""
        g = self.gpu
        if g is None:
            return None
        spec = gpu_spec(g) if isinstance(g, str) else g
        if self.efficiency is not None:
            spec = spec.model_copy(update={"efficiency": self.efficiency})
        return spec

    @property
    def gpu_name(self) -> str:
        """The catalogue name, ``inline`` for an inline spec, ``a100-80gb`` by default."""
        g = self.gpu
        return "a100-80gb" if g is None else (g if isinstance(g, str) else "inline")


class Options(BaseModel):
    """Counting conventions. Each is echoed in ``Workload.conventions``.

    Attributes
    ----------
    sp_regather : bool, default True
        With sequence parallelism, Megatron's backward re-gathers each linear layer's input for
        the weight gradient: 6 all-gathers + 4 reduce-scatters per layer per micro-batch (False:
        4 + 4).
    grad_reduce_dtype : {"auto", "gradient", "fp32", "bf16", "fp16"}, default "auto"
        Element type of the data-parallel gradient reduction: ``gradient`` uses
        ``precision.gradient_bytes``; ``auto`` follows Megatron-LM: ``fp32`` for a transformer
        with 2-byte (bf16) parameters under Megatron's DDP or distributed optimizer, else
        ``gradient`` (:func:`traffic.models.megatron.grad_reduce_dtype`). Set ``fp16`` for an
        fp16 run.
    tied_embeddings : bool or None, default None
        Override the model's tying of input and output embeddings.
    edge_extras : bool, default True
        Count the vocab-parallel embedding (1 all-reduce forward; with SP a reduce-scatter forward
        and an all-gather backward), the LM-head input (1 all-reduce backward; with SP an
        all-gather forward, a reduce-scatter backward and, with ``sp_regather``, a re-gather) and
        the 3 fp32 cross-entropy all-reduces of ``b*s`` elements.
    pp_scatter_gather : bool, default True
        SC'21 scatter/gather for pipeline sends without SP: each TP rank sends ``1/t`` of the
        activation and the receiving stage all-gathers it over its TP group. Megatron-LM does
        this by default whenever ``tp > 1`` (``--no-scatter-gather-tensors-in-pipeline`` turns
        it off); with SP the activation is split anyway. False: every TP rank sends it all.
    vocab_pad_multiple : int, default 128
        Megatron pads the vocabulary to a multiple of ``vocab_pad_multiple * tp``.
    capacity_factor : float or None, default None
        MoE token capacity factor; None means dropless.
    expert_load : list of float or None, default None
        Relative load of each expert (length ``experts``); None means uniform routing.
    defer_grad_sync : bool, default False
        ZeRO-2/3 and FSDP: reduce gradients once per iteration (``no_sync`` during gradient
        accumulation) instead of every micro-batch.
    hybrid_shard_size : int or None, default None
        FSDP ``hybrid_shard`` shard group size; None means the data-parallel peers on one server.
    memory_bound_kernels : {"none", "scores", "flash"}, default "none"
        Compute model of a transformer's kernels. ``none``: a task takes its GEMM FLOPs over the
        achieved throughput (the long-standing roofline). ``scores`` / ``flash``: it also streams
        the HBM bytes of the memory-bound kernels between the GEMMs (layer norms, bias-dropout-
        residual adds, activations, cross-entropy; ``scores`` adds the materialised attention
        scores and their softmax and dropout, as attention without a fused kernel;
        ``flash`` keeps them on chip) at the GPU's memory bandwidth
        (:func:`traffic.models.megatron.forward_memory_bytes`).
    overlap_grad_reduce : bool, default True
        Start each data-parallel gradient bucket as soon as the last backward pass has produced
        it (PyTorch DDP, Megatron's ``--overlap-grad-reduce``). False: the buckets start after
        the whole backward pass (Megatron-LM's ``--DDP-impl local`` of 2021).
    resharding : {"naive", "broadcast"}, default "naive"
        Cross-mesh resharding between adjacent stages of different ``stage_tp``
        (:mod:`traffic.models.resharding`): send/recv, or AlpaComm's broadcast-based,
        load-balanced resharding. Stages of equal TP size use the plain pipeline send.
    """

    model_config = _STRICT

    sp_regather: bool = True
    grad_reduce_dtype: Literal["auto", "gradient", "fp32", "bf16", "fp16"] = "auto"
    tied_embeddings: bool | None = None
    edge_extras: bool = True
    pp_scatter_gather: bool = True
    vocab_pad_multiple: PositiveInt = 128
    capacity_factor: PositiveFloat | None = None
    expert_load: tuple[float, ...] | None = None
    defer_grad_sync: bool = False
    hybrid_shard_size: PositiveInt | None = None
    resharding: Literal["naive", "broadcast"] = "naive"
    memory_bound_kernels: Literal["none", "scores", "flash"] = "none"
    overlap_grad_reduce: bool = True

    @field_validator("expert_load", mode="before")
    @classmethod
    def _load(cls, v: Any) -> Any:
        if isinstance(v, list):
            v = tuple(v)
        if isinstance(v, tuple):
            ok = all(isinstance(x, int | float) and not isinstance(x, bool) and x >= 0 for x in v)
            if not ok or not v or sum(v) <= 0:
                raise ValueError("a list of non-negative loads, one per expert, not all zero")
            return tuple(float(x) for x in v)
        return v


class Plan(BaseModel):
    """A validated parallelization plan (see the module docstring).

    Examples
    --------
    >>> plan = load_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 8},
    ...                   "cluster": {"servers": 128, "gpus_per_server": 8}})
    >>> plan.model.layers, plan.global_batch, plan.micro_batches
    (96, 1536, 192)
    """

    model_config = _STRICT

    model: ModelSpec
    parallelism: Parallelism
    precision: Precision = Precision()
    cluster: Cluster
    options: Options = Options()
    _source: str = PrivateAttr(default="")

    def __repr__(self) -> str:
        """One line: model, the parallel degrees that are not 1, the cluster (every field is in
        ``model_dump()``; pydantic's own repr ran to 1,200 characters).

        Examples
        --------
        >>> load_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 8},
        ...            "cluster": {"servers": 128, "gpus_per_server": 8}})
        Plan('gpt3-175b', tp 8 pp 16 dp 8, 128 servers x 8 GPUs)
        """
        p = self.parallelism
        degrees = [f"{k} {getattr(p, k)}" for k in ("tp", "pp", "dp", "ep", "cp")]
        shown = " ".join(d for d in degrees if not d.endswith(" 1") and not d.endswith("None"))
        gpu = f", {self.cluster.gpu}" if isinstance(self.cluster.gpu, str) else ""
        return (
            f"Plan({self.model.name!r}, {shown or 'one GPU per replica'}, "
            f"{self.cluster.servers} servers x {self.cluster.gpus_per_server} GPUs{gpu})"
        )

    @field_validator("model", mode="before")
    @classmethod
    def _resolve_model(cls, v: Any) -> Any:
        if isinstance(v, str):
            if v not in ZOO:
                raise ValueError("one of " + ", ".join(zoo_names()))
            return {"name": v, **ZOO[v]}
        if isinstance(v, Mapping):
            d = dict(v)
            base = d.pop("base", None)
            if base is not None:
                if not isinstance(base, str) or base not in ZOO:
                    raise ValueError("model.base must be one of " + ", ".join(zoo_names()))
                merged = {"name": base, **ZOO[base]}
                merged.update(d)
                for key in ("kv_heads", "head_dim", "ffn", "moe_ffn"):
                    # shape-derived defaults follow the overridden shape unless the base set them
                    if key not in d and key not in ZOO[base]:
                        merged.pop(key, None)
                if "name" not in d:
                    merged["name"] = f"{base} (modified)" if d else base
                return merged
            return d
        return v

    @property
    def gpus(self) -> int:
        """Number of GPUs: ``servers * gpus_per_server``."""
        return self.cluster.servers * self.cluster.gpus_per_server

    @property
    def dp(self) -> int:
        """Data-parallel size (given, or ``GPUs / (tp * pp * cp)``; with ``stage_tp``
        ``GPUs / (sum(stage_tp) * cp)``)."""
        par = self.parallelism
        if par.dp is not None:
            return par.dp
        return self.gpus // (sum(self.stage_tp) * par.cp)

    @property
    def stage_tp(self) -> tuple[int, ...]:
        """Tensor-parallel size of each pipeline stage (``parallelism.stage_tp``, else ``tp``
        for every stage).

        Examples
        --------
        >>> load_plan({"model": "gpt3-175b", "parallelism": {"stage_tp": [8, 8, 4, 4], "pp": 4,
        ...            "dp": 1}, "cluster": {"servers": 3, "gpus_per_server": 8}}).stage_tp
        (8, 8, 4, 4)
        """
        par = self.parallelism
        return par.stage_tp if par.stage_tp is not None else (par.tp,) * par.pp

    @property
    def uniform_tp(self) -> bool:
        """Whether every stage has the same tensor-parallel size."""
        return len(set(self.stage_tp)) == 1

    @property
    def global_batch(self) -> int:
        """Global batch (sequences or samples) per iteration."""
        gb = self.parallelism.global_batch_size or self.model.global_batch
        return int(gb) if gb is not None else 0

    @property
    def micro_batches(self) -> int:
        """``m = B / (b * d)``: micro-batches per pipeline per iteration."""
        return self.global_batch // (self.parallelism.micro_batch_size * self.dp)

    @property
    def etp(self) -> int:
        """Expert tensor-parallel size: given, else ``tp`` for a MoE model (Megatron-LM's
        default, ``--expert-tensor-parallel-size`` unset) and 1 for a dense one."""
        e = self.parallelism.etp
        if e is not None:
            return e
        return self.parallelism.tp if self.model.is_moe else 1

    @property
    def tied(self) -> bool:
        """Whether input and output embeddings are tied (model value unless overridden)."""
        o = self.options.tied_embeddings
        return self.model.tied_embeddings if o is None else o

    @property
    def source(self) -> str:
        """File name the plan came from ("" for a mapping)."""
        return self._source


def _from_validation_error(err: ValidationError, prefix: str = "") -> InputError:
    first = first_error(err.errors(include_url=False))  # a misspelled field, not a missing one
    loc = tuple(first["loc"])
    field = ".".join(str(p) for p in loc) or "plan"
    if prefix:
        field = f"{prefix}.{field}" if loc else prefix
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    value = first.get("input")
    if first["type"] == "extra_forbidden":
        known = known_fields(Plan, loc) or "the documented fields"
        msg = f"no such field; known fields: {known}"
        value = loc[-1] if loc else value
    elif first["type"] == "missing":
        msg = "a required field"
        value = None
    return InputError(field, value, msg)


def check_plan(plan: Plan) -> Plan:
    """Check the relations between fields; return the plan unchanged.

    Raises
    ------
    InputError
        For the first violated relation: degrees whose product is not the GPU count, heads or
        layers not divisible, experts not divisible by ``ep``, batch not divisible, options that
        contradict each other, fields required by the model kind, ...
    """
    m, par, opt = plan.model, plan.parallelism, plan.options
    gpus = plan.gpus
    t, p, cp = par.tp, par.pp, par.cp
    spec = plan.cluster.gpu_spec
    if spec is not None and plan.cluster.gpus_per_server > spec.scale_up_domain:
        raise InputError(
            "cluster.gpus_per_server",
            plan.cluster.gpus_per_server,
            f"at most the scale-up domain of {plan.cluster.gpu_name} ({spec.scale_up_domain} "
            "GPUs): a server's GPUs share one NVLink / Infinity Fabric domain",
        )
    if par.stage_tp is not None:
        _check_stage_tp(plan)
    elif par.dp is None:
        if gpus % (t * p * cp):
            raise InputError(
                "parallelism", f"tp*pp*cp = {t * p * cp}", f"a divisor of the GPU count {gpus}"
            )
    elif t * p * par.dp * cp != gpus:
        raise InputError(
            "parallelism",
            f"tp*pp*dp*cp = {t}*{p}*{par.dp}*{cp} = {t * p * par.dp * cp}",
            f"equal to the GPU count servers*gpus_per_server = {gpus}",
        )
    d = plan.dp
    explicit = par.order.split("-")
    if not plan.uniform_tp and "pp" in explicit and explicit[-1] != "pp":
        raise InputError(
            "parallelism.order",
            par.order,
            "an order with pp last (outermost) when stage_tp sizes differ (stages are blocks)",
        )
    for name in DIMENSIONS:
        size = {"tp": t, "pp": p, "dp": d, "cp": cp, "ep": par.ep}[name]
        if name not in explicit and size > 1:
            raise InputError("parallelism.order", par.order, f"an order that names {name}")
    if par.zero and par.fsdp:
        raise InputError("parallelism.fsdp", par.fsdp, f"null when zero = {par.zero} (pick one)")
    if par.distributed_optimizer and (par.zero or par.fsdp):
        raise InputError(
            "parallelism.distributed_optimizer", True, "false when zero or fsdp is set (pick one)"
        )
    gb = plan.global_batch
    if gb == 0:
        raise InputError(
            "parallelism.global_batch_size", None, "a positive integer (the model has no default)"
        )
    b = par.micro_batch_size
    if gb % (b * d):
        raise InputError(
            "parallelism.global_batch_size",
            gb,
            f"a multiple of micro_batch_size*dp = {b}*{d} = {b * d}",
        )
    if not (m.kind == "transformer" and m.is_moe):  # the experts' routing options: ignored
        for name in ("expert_load", "capacity_factor"):  # on a model without experts
            value = getattr(opt, name)
            if value is not None:
                shown = list(value) if isinstance(value, tuple) else value
                raise InputError(f"options.{name}", shown, "none for a model without experts")
    if m.kind != "transformer":
        for name in ("tp", "pp", "cp", "ep", "etp", "vpp"):
            if (getattr(par, name) or 1) != 1:
                raise InputError(
                    f"parallelism.{name}", getattr(par, name), f"1 for a {m.kind} model"
                )
        if par.sp:
            raise InputError("parallelism.sp", True, f"false for a {m.kind} model")
        if par.stage_layers is not None:
            raise InputError("parallelism.stage_layers", list(par.stage_layers), "null")
        if m.kind == "recsys":
            if not m.tables:
                raise InputError("model.tables", [], "at least one table")
            if par.zero or par.fsdp or par.distributed_optimizer:
                raise InputError(
                    "parallelism.zero" if par.zero else "parallelism.fsdp",
                    par.zero or par.fsdp or "distributed_optimizer",
                    "no sharded data parallelism for a recsys model (embeddings are sharded)",
                )
        if m.kind == "data_parallel" and m.parameters is None:
            raise InputError("model.parameters", None, "a positive integer for data_parallel")
        _check_hybrid(plan)
        return plan
    for name in ("layers", "hidden", "heads", "vocab", "seq_len"):
        if getattr(m, name) is None:
            raise InputError(f"model.{name}", None, "a positive integer (required)")
    if m.head_dim is None:
        raise InputError("model.head_dim", None, f"given, since hidden {m.hidden} % heads != 0")
    if m.heads % m.kv_heads:
        raise InputError("model.kv_heads", m.kv_heads, f"a divisor of heads = {m.heads}")
    if par.stage_tp is not None:
        for dim, n in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn)):
            if any(n % x for x in par.stage_tp):
                raise InputError(
                    "parallelism.stage_tp",
                    list(par.stage_tp),
                    f"{p} sizes (one per stage), each a divisor of the model's {dim} = {n} "
                    f"(heads = {m.heads}, kv_heads = {m.kv_heads}, ffn = {m.ffn})",
                )
    if m.heads % t:
        raise InputError("parallelism.tp", t, f"a divisor of the model's heads = {m.heads}")
    if m.kv_heads % t:
        raise InputError("parallelism.tp", t, f"a divisor of the model's kv_heads = {m.kv_heads}")
    if m.ffn % t:
        raise InputError("parallelism.tp", t, f"a divisor of the model's ffn = {m.ffn}")
    if par.vpp > 1 and p == 1:
        raise InputError("parallelism.vpp", par.vpp, "1 when pp = 1 (interleaving needs pp > 1)")
    if par.stage_layers is not None:
        sl = par.stage_layers
        if len(sl) != p:
            raise InputError("parallelism.stage_layers", list(sl), f"one count per stage ({p})")
        if sum(sl) != m.layers:
            raise InputError(
                "parallelism.stage_layers", list(sl), f"counts summing to layers = {m.layers}"
            )
        if par.vpp > 1:
            raise InputError("parallelism.vpp", par.vpp, "1 with stage_layers")
    elif m.layers % (p * par.vpp):
        raise InputError(
            "model.layers",
            m.layers,
            f"a multiple of pp*vpp = {p}*{par.vpp} = {p * par.vpp}",
        )
    if m.seq_len % cp:
        raise InputError("model.seq_len", m.seq_len, f"a multiple of cp = {cp}")
    for x in plan.stage_tp:
        if par.sp and x > 1 and (m.seq_len // cp) % x:
            raise InputError(
                "model.seq_len",
                m.seq_len,
                f"a multiple of cp*tp = {cp * x} with sequence parallelism",
            )
    if m.dense_layers > m.layers:
        raise InputError("model.dense_layers", m.dense_layers, f"at most layers = {m.layers}")
    if m.top_k > m.experts:
        raise InputError("model.top_k", m.top_k, f"at most experts = {m.experts}")
    if not m.is_moe and (par.ep > 1 or (par.etp or 1) > 1):
        name = "ep" if par.ep > 1 else "etp"
        raise InputError(f"parallelism.{name}", getattr(par, name), "1 for a dense model")

    if m.experts % par.ep:
        raise InputError(
            "parallelism.ep", par.ep, f"a divisor of the model's experts = {m.experts}"
        )
    if m.is_moe:
        if (t * cp * d) % (plan.etp * par.ep):
            raise InputError(
                "parallelism.ep",
                par.ep,
                f"etp*ep dividing tp*cp*dp = {t * cp * d} (the ranks of one stage)",
            )
        if m.shared_experts and m.moe_ffn % t:
            raise InputError("parallelism.tp", t, f"a divisor of moe_ffn = {m.moe_ffn}")
        if m.moe_ffn % plan.etp:
            raise InputError("parallelism.etp", plan.etp, f"a divisor of moe_ffn = {m.moe_ffn}")
        if (b * m.seq_len) % (t * cp):
            raise InputError(
                "parallelism.micro_batch_size",
                b,
                f"a value making b*seq_len divisible by tp*cp = {t * cp} (tokens per GPU)",
            )
    if opt.expert_load is not None and len(opt.expert_load) != m.experts:
        raise InputError(
            "options.expert_load", len(opt.expert_load), f"{m.experts} loads (one per expert)"
        )
    _check_hybrid(plan)
    return plan


def _check_stage_tp(plan: Plan) -> None:
    """``parallelism.stage_tp``: one size per stage, ``tp = max``, GPUs ``dp*cp*sum``."""
    m, par = plan.model, plan.parallelism
    st, p, cp = list(par.stage_tp), par.pp, par.cp
    gpus = plan.gpus
    if len(st) != p:
        raise InputError(
            "parallelism.stage_tp", st, f"exactly pp = {p} sizes (one per pipeline stage)"
        )
    if par.tp != max(st):
        raise InputError(
            "parallelism.tp", par.tp, f"max(stage_tp) = {max(st)} (or leave tp out) with stage_tp"
        )
    if len(set(st)) > 1:
        if m.kind != "transformer" or m.is_moe:
            raise InputError(
                "parallelism.stage_tp", st, "equal sizes (differing ones need a dense transformer)"
            )
        for name, value, ok in (("cp", cp, 1), ("vpp", par.vpp, 1)):
            if value != ok:
                raise InputError(f"parallelism.{name}", value, f"{ok} when stage_tp sizes differ")
    n = sum(st) * cp
    if par.dp is None:
        if gpus % n:
            raise InputError(
                "parallelism.stage_tp",
                st,
                f"sizes with sum(stage_tp)*cp = {n} dividing the GPU count {gpus} "
                f"(stage i holds stage_tp[i]*cp*dp GPUs)",
            )
    elif n * par.dp != gpus:
        raise InputError(
            "parallelism",
            f"dp*cp*sum(stage_tp) = {par.dp}*{cp}*{sum(st)} = {n * par.dp}",
            f"equal to the GPU count servers*gpus_per_server = {gpus}",
        )


def _check_hybrid(plan: Plan) -> None:
    par, opt = plan.parallelism, plan.options
    if opt.hybrid_shard_size is not None and par.fsdp != "hybrid_shard":
        raise InputError("options.hybrid_shard_size", opt.hybrid_shard_size, "null unless hybrid")
    if par.fsdp == "hybrid_shard" and opt.hybrid_shard_size is not None:
        n = plan.dp * par.cp
        if n % opt.hybrid_shard_size:
            raise InputError(
                "options.hybrid_shard_size",
                opt.hybrid_shard_size,
                f"a divisor of the data-parallel group size {n}",
            )


def _parse_text(text: str, name: str) -> Any:
    # strict decoding (traffic.decode): duplicate keys, NaN, int64, depth, alias bombs refused
    return parse_json(text, name) if name.lower().endswith(".json") else parse_yaml(text, name)


def load_plan(source: str | Path | Mapping[str, Any]) -> Plan:
    """Read and validate a plan from a YAML/JSON file or a mapping.

    Parameters
    ----------
    source : str, pathlib.Path or Mapping
        A file path (``.json`` is parsed as JSON, anything else as YAML, which also reads JSON),
        the name of an embedded plan (see :func:`embedded_plan_names`), or the plan as a mapping.

    Returns
    -------
    Plan

    Raises
    ------
    InputError
        One line naming the field, the value and what is allowed; for a syntax error the field is
        the file name and the value says the line.

    Examples
    --------
    >>> load_plan("gpt3-175b").parallelism.tp
    8
    """
    name = ""
    if isinstance(source, Mapping):
        data: Any = dict(source)
    else:
        path = Path(source)
        if not path.exists() and isinstance(source, str) and source in embedded_plan_names():
            path = embedded_plan_path(source)
        name = path.name
        if not path.exists():
            raise InputError("plan", str(source), "an existing plan file")
        data = _parse_text(
            decode_text(
                read_input(path, "plan file", min(MAX_YAML_BYTES, max_input_bytes())), name
            ),
            name,
        )
    if not isinstance(data, Mapping):
        raise InputError(
            name or "plan", type(data).__name__, "a mapping with model, parallelism..."
        )
    try:
        plan = Plan.model_validate(dict(data))
    except ValidationError as e:
        raise _from_validation_error(e) from None
    plan._source = name
    check_plan_size(plan)
    return check_plan(plan)


_PLANS_DIR = Path(__file__).resolve().parent / "plans"


def embedded_plan_names() -> list[str]:
    """Names (file stems) of the example plans shipped in ``traffic/plans``."""
    return sorted(p.stem for p in _PLANS_DIR.glob("*.yaml"))


def embedded_plan_path(name: str) -> Path:
    """Path of an embedded example plan, by stem (``"gpt3-175b"``) or file name.

    Examples
    --------
    >>> embedded_plan_path("dlrm").name
    'dlrm.yaml'
    """
    stem = name[:-5] if name.endswith(".yaml") else name
    if stem not in embedded_plan_names():
        raise InputError("plan", name, "one of " + ", ".join(embedded_plan_names()))
    return _PLANS_DIR / f"{stem}.yaml"
