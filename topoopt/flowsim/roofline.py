"""Compute durations from a roofline: FLOPs over achieved throughput, bytes over memory bandwidth.

A matrix-multiply-bound task of ``F`` FLOPs takes ``F / (peak_flops * efficiency)`` seconds;
``efficiency`` plays the role of the model FLOPs utilisation (MFU) of the kernels. The optimizer
step is memory-bound: mixed-precision Adam reads and writes ``optimizer_bytes_per_parameter``
bytes per parameter (bf16 gradient read 2, fp32 master weight, first and second moment each read
and written 3 x 8, bf16 weight written 2: 28 bytes), so it takes ``P * 28 / memory_bandwidth``.

Defaults are an NVIDIA A100-SXM4-80GB: 312e12 FLOP/s dense bf16 tensor-core peak, 2.039e12 bytes/s
HBM2e bandwidth (NVIDIA A100 datasheet), efficiency 0.5 (Megatron-LM reaches 0.44 to 0.52 of peak
on GPT-3-class models, Narayanan et al. SC'21, Table 1). :data:`H100` is the SXM5 H100: 989e12
FLOP/s dense bf16 and 3.35e12 bytes/s HBM3.

A plan that names its GPU (``cluster.gpu``, :mod:`traffic.hardware`) carries the catalogue's
figures in ``Workload.info["gpu"]``; :func:`workload_gpu` turns them into a
:class:`RooflineParams` (the default A100 when the plan names none) and
:func:`workload_scale_up_bandwidth` gives the GPU's NVLink / Infinity Fabric egress for
intra-server transfers. ``gpu: a100-80gb`` reproduces the default exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from traffic.errors import InputError
from traffic.limits import MIN_EFFICIENCY

__all__ = [
    "RooflineParams",
    "A100",
    "H100",
    "compute_time",
    "forward_time",
    "optimizer_time",
    "workload_gpu",
    "plan_gpu",
    "workload_scale_up_bandwidth",
    "throughput_facts",
]


@dataclass(frozen=True)
class RooflineParams:
    """Throughput figures of one GPU (SI units).

    Attributes
    ----------
    peak_flops : float
        Peak dense FLOP/s at the training precision.
    efficiency : float
        Fraction of the peak the kernels achieve (MFU-like), in [0.001, 1].
    memory_bandwidth : float
        HBM bytes/s.
    optimizer_bytes_per_parameter : float
        Bytes the optimizer step moves per parameter.
    name : str
        Label for reports.

    Examples
    --------
    >>> RooflineParams().achieved_flops
    156000000000000.0
    """

    peak_flops: float = 312e12
    efficiency: float = 0.5
    memory_bandwidth: float = 2.039e12
    optimizer_bytes_per_parameter: float = 28.0
    name: str = "A100-SXM4-80GB bf16"

    def __post_init__(self) -> None:
        for f in ("peak_flops", "memory_bandwidth", "optimizer_bytes_per_parameter"):
            v = getattr(self, f)
            if not (isinstance(v, int | float) and np.isfinite(v) and v > 0):
                raise InputError(f"gpu.{f}", v, "a positive finite number")
        e = self.efficiency
        if not (isinstance(e, int | float) and MIN_EFFICIENCY <= e <= 1):
            raise InputError("gpu.efficiency", e, "a fraction in [0.001, 1]")

    @property
    def achieved_flops(self) -> float:
        """``peak_flops * efficiency``, FLOP/s."""
        return float(self.peak_flops * self.efficiency)


A100 = RooflineParams()
"""NVIDIA A100-SXM4-80GB, bf16 (the default)."""

H100 = RooflineParams(
    peak_flops=989e12, efficiency=0.5, memory_bandwidth=3.35e12, name="H100-SXM5 bf16"
)
"""NVIDIA H100-SXM5, bf16."""


def compute_time(flops, gpu: RooflineParams = A100):
    """Seconds to run ``flops`` FLOPs: ``flops / (peak_flops * efficiency)`` (array-friendly).

    >>> compute_time(1.56e12)
    0.01
    """
    f = np.asarray(flops, np.float64)
    if np.any(~np.isfinite(f)) or np.any(f < 0):
        raise InputError("flops", flops, "finite numbers >= 0")
    out = f / gpu.achieved_flops
    return float(out) if out.ndim == 0 else out


def forward_time(flops, memory_bytes=None, gpu: RooflineParams = A100):
    """Seconds of a forward task: its GEMM FLOPs at the achieved throughput plus the HBM bytes of
    its memory-bound kernels at the memory bandwidth (array-friendly).

    ``memory_bytes`` is ``Workload.info["forward_memory_bytes_per_microbatch_per_gpu"]``
    (:func:`traffic.models.megatron.forward_memory_bytes`, empty unless the plan sets
    ``options.memory_bound_kernels``); None or empty leaves :func:`compute_time`.

    >>> forward_time(1.56e12, 2.039e9)
    0.011
    """
    out = np.asarray(compute_time(flops, gpu), np.float64)
    if memory_bytes is not None and len(np.atleast_1d(memory_bytes)):
        b = np.asarray(memory_bytes, np.float64)
        if np.any(~np.isfinite(b)) or np.any(b < 0) or b.shape != out.shape:
            raise InputError("memory_bytes", memory_bytes, "finite numbers >= 0, one per task")
        out = out + b / gpu.memory_bandwidth
    return float(out) if out.ndim == 0 else out


def optimizer_time(parameters, gpu: RooflineParams = A100):
    """Seconds of the optimizer step for ``parameters`` parameters on one GPU (memory-bound).

    >>> round(optimizer_time(1e9) * 1e3, 3)
    13.732
    """
    p = np.asarray(parameters, np.float64)
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise InputError("parameters", parameters, "finite numbers >= 0")
    out = p * gpu.optimizer_bytes_per_parameter / gpu.memory_bandwidth
    return float(out) if out.ndim == 0 else out


def workload_gpu(workload) -> RooflineParams:
    """The roofline of the GPU a plan-derived workload names (:data:`A100` when none, at the
    plan's ``cluster.efficiency`` if it sets one).

    >>> from traffic.build import workload_from_plan
    >>> plan = {"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 1},
    ...         "cluster": {"servers": 16, "gpus_per_server": 8, "gpu": "h100-sxm"}}
    >>> g = workload_gpu(workload_from_plan(plan))
    >>> g.name, g.peak_flops, g.efficiency
    ('h100-sxm', 989000000000000.0, 0.43)
    """
    info = getattr(workload, "info", None) or {}
    g = info.get("gpu")
    if not g:
        return _default(info.get("default_gpu_efficiency"))
    return _params(g)


def plan_gpu(plan) -> RooflineParams:
    """The roofline of a plan's ``cluster.gpu`` (:data:`A100` when it names none, at the plan's
    ``cluster.efficiency`` if it sets one)."""
    spec = plan.cluster.gpu_spec
    if spec is None:
        return _default(plan.cluster.efficiency)
    return _params(
        {
            "peak_flops": spec.peak_flops,
            "efficiency": spec.efficiency,
            "memory_bandwidth": spec.memory_bandwidth,
            "name": plan.cluster.gpu_name,
        }
    )


def _default(efficiency: float | None) -> RooflineParams:
    """:data:`A100`, at ``efficiency`` when a plan without ``cluster.gpu`` sets one, with the
    figures of the hardware catalogue's ``a100-80gb`` (a ``TOPOOPT_HARDWARE`` file that
    overrides that entry applies here too, and a broken one is refused here too: it was read
    only for plans naming a GPU, so one name meant two GPUs in one environment)."""
    from traffic.hardware import load_catalogue

    spec = load_catalogue().gpus["a100-80gb"]
    base = A100
    if (spec.peak_flops, spec.memory_bandwidth, spec.efficiency) != (
        A100.peak_flops, A100.memory_bandwidth, A100.efficiency
    ):  # fmt: skip
        base = replace(
            A100, peak_flops=float(spec.peak_flops), efficiency=float(spec.efficiency),
            memory_bandwidth=float(spec.memory_bandwidth),
        )  # fmt: skip
    return base if efficiency is None else replace(base, efficiency=float(efficiency))


def _params(g) -> RooflineParams:
    return RooflineParams(
        peak_flops=float(g["peak_flops"]),
        efficiency=float(g["efficiency"]),
        memory_bandwidth=float(g["memory_bandwidth"]),
        name=str(g["name"]),
    )


def workload_scale_up_bandwidth(workload) -> float | None:
    """Bytes/s of one GPU's scale-up egress if the workload names its GPU, else None."""
    g = (getattr(workload, "info", None) or {}).get("gpu")
    return float(g["scale_up_bandwidth"]) if g else None


def throughput_facts(workload, iteration_s: float, gpu: RooflineParams | None = None) -> dict:
    """What a result reports about the compute model and the throughput it predicts.

    Returns
    -------
    dict
        ``gpu`` (catalogue name; ``a100-80gb`` for the default), ``gpu_peak_tflops`` (dense
        BF16), ``efficiency``, ``model_flops_per_iteration`` (3 forward passes of the model,
        no recomputation: :func:`traffic.build.model_flops`), ``tflops_per_gpu`` (model FLOPs
        over ``iteration_s`` and the GPUs, TFLOP/s) and ``mfu`` (``tflops_per_gpu`` over the
        peak). The last three are None for a workload without a FLOP count (a task graph) or a
        zero iteration time.

    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan({"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 1},
    ...                         "cluster": {"servers": 16, "gpus_per_server": 8}})
    >>> f = throughput_facts(w, 100.0)  # 3.386e18 FLOPs over 128 GPUs in 100 s
    >>> f["gpu"], round(f["tflops_per_gpu"], 1), round(f["mfu"], 3)
    ('a100-80gb', 264.5, 0.848)
    """
    if getattr(workload, "taskgraph", None) is not None:  # its compute times are its own
        keys = ("gpu", "gpu_peak_tflops", "efficiency", "model_flops_per_iteration")
        return {k: None for k in (*keys, "tflops_per_gpu", "mfu")}
    g = gpu if gpu is not None else workload_gpu(workload)
    info = getattr(workload, "info", None) or {}
    name = info.get("gpu_name") or ("a100-80gb" if g is A100 else g.name)
    flops = info.get("model_flops_per_iteration")
    out = {
        "gpu": name,
        "gpu_peak_tflops": g.peak_flops / 1e12,
        "efficiency": g.efficiency,
        "model_flops_per_iteration": None if flops is None else float(flops),
        "tflops_per_gpu": None,
        "mfu": None,
    }
    if flops is not None and iteration_s > 0 and workload.gpus > 0:
        per_gpu = float(flops) / (float(iteration_s) * workload.gpus)
        out["tflops_per_gpu"] = per_gpu / 1e12
        out["mfu"] = per_gpu / g.peak_flops
    return out
