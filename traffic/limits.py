"""Size limits of every input: bytes read, nesting, YAML nodes, and a memory budget for arrays.

Every limit is checked before the work it guards, so a file that asks for more than the machine
can hold is refused with the estimate and the limit instead of a ``MemoryError`` mid-run.

Environment variables (read at each check, so a test or a user can change them):

``TOPOOPT_MEMORY_BUDGET_GB``
    Bytes of arrays one request may ask for, in GB (10^9 bytes); default :data:`DEFAULT_BUDGET_GB`
    (about a third of the 24 GB machine this project is developed on, leaving room for the copies
    numpy and the solvers make).
``TOPOOPT_MAX_INPUT_MB``
    Largest input file read, in MB (10^6 bytes); default :data:`DEFAULT_MAX_INPUT_MB`.
``TOPOOPT_MAX_FLOWS``
    Most flows the iteration model may build for one simulation, counted from the Workload's
    structure before anything is expanded (:func:`topoopt.flowsim.work.check_work`); default
    :data:`DEFAULT_MAX_FLOWS`.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

from traffic.errors import InputError

__all__ = [
    "DEFAULT_BUDGET_GB",
    "EFFICIENCY_ALLOWED",
    "MIN_EFFICIENCY",
    "DEFAULT_MAX_INPUT_MB",
    "MAX_DEPTH",
    "MAX_SERVER_PORTS",
    "SERVER_PORTS_ALLOWED",
    "check_server_ports",
    "MAX_YAML_NODES",
    "MAX_YAML_BYTES",
    "INT64_MAX",
    "memory_budget_bytes",
    "max_input_bytes",
    "check_memory",
    "check_count",
    "check_plan_size",
    "iteration_bytes_estimate",
    "DEFAULT_MAX_FLOWS",
    "FLOW_PEAK_BYTES",
    "max_flows",
]

DEFAULT_BUDGET_GB = 8.0
"""Default memory budget of one request, GB."""

DEFAULT_MAX_INPUT_MB = 256.0
"""Default cap on the size of an input file, MB."""

MAX_DEPTH = 32
"""Deepest nesting of lists/objects accepted in a JSON or YAML document."""

MAX_YAML_NODES = 1_000_000
"""Most YAML nodes a document may expand to (aliases counted at their full expanded size)."""

MAX_YAML_BYTES = 16_000_000
"""Largest YAML file read (YAML is parsed in pure Python, about 1 MB/s)."""

INT64_MAX = 2**63 - 1


MAX_SERVER_PORTS = 256
"""Network ports one server can have (``--degree``, a design's ``degree``): the largest switch
radix of the price table's catalogue (Tomahawk 4/5 at 256 ports), so one server's ports still fit
one switch. Real servers have 8 (a DGX H100: one 400 G NIC per GPU) to 72 (a GB200 NVL72 rack as
one server), twice that with breakout cables."""

SERVER_PORTS_ALLOWED = (
    f"an integer from 1 to {MAX_SERVER_PORTS} (network ports per server: 8 on a DGX H100, 72 on "
    "a GB200 NVL72 rack)"
)
"""What a server's port count allows, in words (:data:`MAX_SERVER_PORTS`)."""


def check_server_ports(field: str, value: Any) -> int:
    """``value`` as a server's network port count: an integer 1 to :data:`MAX_SERVER_PORTS`,
    refused before any work (3,000 ports on 128 servers ran for minutes before an error or a
    result).

    >>> check_server_ports("--degree", 8)
    8
    >>> check_server_ports("--degree", 3000)
    Traceback (most recent call last):
    traffic.errors.InputError: --degree: got 3000; allowed: an integer from 1 to 256 (network ports per server: 8 on a DGX H100, 72 on a GB200 NVL72 rack)
    """  # noqa: E501
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or not 1 <= int(value) <= MAX_SERVER_PORTS:
        raise InputError(field, value, SERVER_PORTS_ALLOWED)
    return int(value)


MAX_TIME_LIMIT_S = 1e6
"""Longest time limit a search takes, seconds (11.6 days): a waiting pipe's poll takes its
timeout in milliseconds as a C ``int`` (24.8 days), so ``--time-limit 1e9`` ended in
``OverflowError: timeout is too large`` (and ``1e300`` in one from the int64 nanoseconds)."""

MIN_EFFICIENCY = 1e-3
"""Smallest kernel efficiency (fraction of a GPU's peak FLOP/s) a plan, a GPU or ``--efficiency``
may give: 0.1 % of peak. Below it the compute times are physically meaningless (``1e-300`` gave
a 4.76e+297 s iteration, a float overflow in the link utilisation and 300-digit table rows)."""

EFFICIENCY_ALLOWED = "a fraction of the GPU's peak FLOP/s in [0.001, 1]"
"""What an efficiency out of range is told (:data:`MIN_EFFICIENCY` to 1)."""

MAX_WORK_LIMIT = 1e9
"""Largest deterministic work limit, units (one unit took 0.06 s on the reference machine: about
two years of work)."""


def check_time_limit(field: str, value: Any) -> float:
    """``value`` as a search's time limit: a number of seconds in ``(0, MAX_TIME_LIMIT_S]``.

    >>> check_time_limit("--time-limit", 900)
    900.0
    >>> check_time_limit("--time-limit", 1e300)
    Traceback (most recent call last):
    traffic.errors.InputError: --time-limit: got 1e+300; allowed: a number of seconds > 0 and at most 1,000,000 (11.6 days)
    """  # noqa: E501
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not 0 < float(value) <= MAX_TIME_LIMIT_S:
        raise InputError(
            field, value, f"a number of seconds > 0 and at most {MAX_TIME_LIMIT_S:,.0f} (11.6 days)"
        )
    return float(value)


def check_work_limit(field: str, value: Any) -> float:
    """``value`` as a deterministic work limit: a number of units in ``[0, MAX_WORK_LIMIT]``.

    >>> check_work_limit("--work-limit", 5)
    5.0
    >>> check_work_limit("--work-limit", 1e300)
    Traceback (most recent call last):
    traffic.errors.InputError: --work-limit: got 1e+300; allowed: a number of work units >= 0 and at most 1,000,000,000 (one unit: about 0.06 s)
    """  # noqa: E501
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not 0 <= float(value) <= MAX_WORK_LIMIT:
        raise InputError(
            field,
            value,
            f"a number of work units >= 0 and at most {MAX_WORK_LIMIT:,.0f} (one unit: about "
            "0.06 s)",
        )
    return float(value)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        val = float(raw)
    except ValueError:
        raise InputError(name, raw, "a positive number (environment variable)") from None
    if not math.isfinite(val) or val <= 0:
        raise InputError(name, raw, "a positive number (environment variable)")
    return val


def memory_budget_bytes() -> int:
    """The memory budget in bytes (``TOPOOPT_MEMORY_BUDGET_GB``, default 8 GB).

    >>> memory_budget_bytes() > 0
    True
    """
    return int(_env_float("TOPOOPT_MEMORY_BUDGET_GB", DEFAULT_BUDGET_GB) * 1e9)


def max_input_bytes() -> int:
    """The largest input file read, bytes (``TOPOOPT_MAX_INPUT_MB``, default 256 MB)."""
    return int(_env_float("TOPOOPT_MAX_INPUT_MB", DEFAULT_MAX_INPUT_MB) * 1e6)


def check_memory(field: str, estimate_bytes: float, what: str) -> None:
    """Refuse a request whose arrays would exceed the memory budget.

    Parameters
    ----------
    field : str
        The input field that sets the size (e.g. ``"cluster.servers"``).
    estimate_bytes : float
        Bytes the request's arrays would take (an estimate, computed without allocating).
    what : str
        The sizes behind the estimate, e.g. ``"1,000,000,000 servers x 8 GPUs"``.

    Raises
    ------
    InputError
        Naming the field, the estimate and the limit.

    Examples
    --------
    >>> check_memory("servers", 1e6, "1,000 servers")
    >>> check_memory("servers", 1e15, "10^9 servers")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: servers: got '10^9 servers (about 1,000,000 GB of arrays)'; allowed: at most 8 GB of arrays (TOPOOPT_MEMORY_BUDGET_GB)
    """  # noqa: E501
    budget = memory_budget_bytes()
    if not math.isfinite(estimate_bytes) or estimate_bytes > budget:
        est = f"{estimate_bytes / 1e9:,.0f}" if math.isfinite(estimate_bytes) else "unbounded"
        raise InputError(
            field,
            f"{what} (about {est} GB of arrays)",
            f"at most {budget / 1e9:g} GB of arrays (TOPOOPT_MEMORY_BUDGET_GB)",
        )


def check_count(field: str, count: int, bytes_each: float, what: str) -> None:
    """:func:`check_memory` for ``count`` items of ``bytes_each`` bytes each."""
    check_memory(field, float(count) * float(bytes_each), f"{count:,} {what}")


INT32_MAX = 2**31 - 1
MAX_ITERATION_BYTES = 2**62
"""Largest byte count of one iteration summed over the GPUs (int64 with headroom)."""

BYTES_PER_GPU = 4096
"""Bytes of arrays per GPU a plan may lead to: the workload build alone measured ~110 at 10^6
GPUs; fabrics, flows and routing of a simulation take more, hence the margin (an 8 GB budget
admits about 2 million GPUs)."""


def check_plan_size(plan: Any) -> None:
    """Refuse a validated plan whose sizes overflow int64 or the memory budget.

    Checked, before any array is built: every integer field of the model, parallelism and
    cluster is at most ``2**31 - 1``; ``servers * gpus_per_server * BYTES_PER_GPU`` fits the
    memory budget; and the wire bytes of one iteration (:func:`iteration_bytes_estimate`, within
    2x of the built Workload's ``total_wire_bytes``) stay below ``2**62``.

    Raises
    ------
    InputError
        Naming the field (``cluster.servers``, ``model.layers``, ...), the estimate and the limit.
    """
    for section in ("model", "parallelism", "cluster"):
        obj = getattr(plan, section)
        for name in type(obj).model_fields:
            v = getattr(obj, name)
            if isinstance(v, int) and not isinstance(v, bool) and v > INT32_MAX:
                raise InputError(f"{section}.{name}", v, f"at most {INT32_MAX:,}")
    gpus = plan.cluster.servers * plan.cluster.gpus_per_server
    if gpus > INT32_MAX:
        raise InputError(
            "cluster",
            f"{plan.cluster.servers:,} servers x {plan.cluster.gpus_per_server:,} GPUs",
            f"at most {INT32_MAX:,} GPUs",
        )
    check_count("cluster.servers", gpus, BYTES_PER_GPU, "GPUs")
    opt = plan.options
    if opt.capacity_factor is not None and not opt.capacity_factor <= 1e6:
        raise InputError("options.capacity_factor", opt.capacity_factor, "a number in (0, 1e6]")
    if opt.expert_load is not None and not max(opt.expert_load) < 1e300 / len(opt.expert_load):
        # each below 1e300 / experts, so their sum is finite (math.fsum raised OverflowError on
        # [1e308, 1e308]: a traceback)
        raise InputError(
            "options.expert_load", list(opt.expert_load), "loads summing to less than 1e300"
        )
    gpus_f = float(gpus)
    total = iteration_bytes_estimate(plan)
    if not total < MAX_ITERATION_BYTES:
        raise InputError(
            "model",
            f"about {total:.3g} bytes moved per iteration over {gpus_f:,.0f} GPUs",
            f"less than 2**62 = {MAX_ITERATION_BYTES:.3g} bytes (iteration_bytes_estimate)",
        )


def iteration_bytes_estimate(plan: Any) -> float:
    """Wire bytes of one iteration summed over the GPUs, from the plan's sizes alone.

    Closed forms of the families :mod:`traffic.models` builds (bandwidth-optimal wire bytes,
    :func:`traffic.workload.wire_bytes_per_collective`), in floating point so that nothing
    overflows, without building a group. With ``m`` micro-batches per pipeline, ``d, t, p, c``
    the DP, TP, PP and CP sizes, ``A = b (s/c) h`` activation bytes of one micro-batch:

    - TP: ``4`` all-reduces of ``A`` per layer and micro-batch (``6`` with full recomputation;
      with SP the 10 or 6 all-gathers / reduce-scatters move the same bytes within 25 %):
      ``k * 2 (t-1) A * L * m * d * c``;
    - PP: a send of ``A`` (``A/t`` with SP or scatter/gather) forward and backward per stage
      boundary and micro-batch from every TP rank: ``2 (p-1) m d c t A``;
    - DP: the gradient all-reduce of the dense parameters over ``d c`` GPUs,
      ``2 (dc-1) P_dense g`` (``g`` bytes per gradient element, 4 under Megatron's fp32 reduce
      of bf16 parameters), the experts' over ``d/ep``; ZeRO-2/3 and FSDP repeat their
      collectives every micro-batch unless ``defer_grad_sync``;
    - EP: 4 all-to-alls (dispatch, combine, forward and backward) of ``top_k A`` per MoE layer
      and micro-batch on every GPU; CP: the K/V all-gather and its reduce-scatter;
    - recommendation and data-parallel models: the gradient all-reduce of every parameter,
      plus for embedding tables the looked-up rows of every sample, forward and backward.

    Examples
    --------
    GPT-3 175B, tp 8, pp 16, dp 128, global batch 24,576 on 16,384 GPUs: about 7e15 bytes (7.16e15
    built)
    (issue 24's false refusal estimated 7.81e18).

    >>> from traffic.plan import load_plan
    >>> p = load_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 128,
    ...                "global_batch_size": 24576}, "cluster": {"servers": 2048,
    ...                "gpus_per_server": 8}})
    >>> f"{iteration_bytes_estimate(p):.2e}"
    '6.86e+15'
    """
    m, par, prec, opt = plan.model, plan.parallelism, plan.precision, plan.options
    f = float
    gpus = f(plan.cluster.servers) * f(plan.cluster.gpus_per_server)
    gb = f(prec.gradient_bytes)
    if m.kind != "transformer" or not (m.layers and m.hidden):
        params = f(m.parameters or 0)
        for mlp in getattr(m, "mlps", ()):
            params += sum(f(a) * f(b) for a, b in zip(mlp, mlp[1:], strict=False))
        lookups = 0.0
        for tab in getattr(m, "tables", ()):
            lookups += f(tab.dim) * f(tab.count)
        batch = f(plan.global_batch or 1)
        return 2.0 * params * gb * gpus + 2.0 * batch * lookups * f(prec.activation_bytes)
    t, p, c = f(par.tp), f(par.pp), f(par.cp)
    d = max(gpus / (t * p * c), 1.0)
    micro = max(f(plan.global_batch) / (f(par.micro_batch_size) * d), 1.0)
    h, layers = f(m.hidden), f(m.layers)
    s = f(m.seq_len or 1)
    ab = f(prec.activation_bytes)
    act = f(par.micro_batch_size) * (s / c) * h * ab
    k = 6.0 if par.recompute == "full" else 4.0
    tp = k * 2.0 * (t - 1.0) * act * layers * micro * d * c
    send = act / t if (par.sp or opt.pp_scatter_gather) else act
    pp = 2.0 * (p - 1.0) * micro * d * c * t * send
    heads = f(m.heads or 1)
    hd = f(m.head_dim or (m.hidden // (m.heads or 1)))
    kv = f(m.kv_heads or m.heads or 1)
    ffn = f(m.ffn or 4 * m.hidden)
    fin = 2.0 if m.gated_mlp else 1.0
    experts = f(max(m.experts, 1))
    moe_layers = max(layers - f(m.dense_layers), 0.0) if experts > 1 else 0.0
    moe_ffn = f(m.moe_ffn or m.ffn or 4 * m.hidden)
    attn = h * (heads + 2.0 * kv) * hd + heads * hd * h
    dense_p = layers * attn + (layers - moe_layers) * (fin + 1.0) * h * ffn
    dense_p += f(m.vocab or 0) * h * (1.0 if m.tied_embeddings else 2.0)
    expert_p = moe_layers * (experts + f(m.shared_experts)) * (fin + 1.0) * h * moe_ffn
    rb = 4.0 if (not (par.zero or par.fsdp) and prec.parameter_bytes == 2) else gb
    if opt.grad_reduce_dtype in ("bf16", "fp16"):
        rb = 2.0
    elif opt.grad_reduce_dtype == "fp32":
        rb = 4.0
    elif opt.grad_reduce_dtype == "gradient":
        rb = gb
    ep = f(par.ep)
    dp_bytes = 2.0 * (d * c - 1.0) * dense_p * rb + 2.0 * max(d / ep - 1.0, 0.0) * expert_p * rb
    if (par.zero >= 2 or par.fsdp) and not opt.defer_grad_sync:
        dp_bytes *= micro  # the reduce-scatter (and ZeRO-3 / FSDP gathers) per micro-batch
        if par.zero == 3 or par.fsdp in ("full_shard", "hybrid_shard"):
            dp_bytes *= 1.5  # two parameter all-gathers beside the gradient reduce-scatter
    ep_bytes = 4.0 * moe_layers * micro * f(m.top_k) * act * d * c * t if experts > 1 else 0.0
    cp_bytes = 0.0
    if c > 1:
        kv_act = f(par.micro_batch_size) * (s / c) * 2.0 * kv * hd * ab
        cp_bytes = 2.0 * (c - 1.0) * kv_act * layers * micro * d * t
    return tp + pp + dp_bytes + ep_bytes + cp_bytes


FLOW_PEAK_BYTES = 900.0
"""Peak bytes per flow of one iteration simulation (:data:`topoopt.flowsim.work.FLOW_PEAK_BYTES`,
measured there; here so that the flow model's own checks can use it without importing work)."""

DEFAULT_MAX_FLOWS = 4_000_000
"""Default cap on a simulation's estimated flows: about 3 minutes of the flow model here (1.6
million flows of VGG-16 on 32,000 GPUs took 124 s, 400,000 took 17 s)."""


def max_flows() -> int:
    """The flow cap (``TOPOOPT_MAX_FLOWS``, default :data:`DEFAULT_MAX_FLOWS`)."""
    return int(_env_float("TOPOOPT_MAX_FLOWS", DEFAULT_MAX_FLOWS))
