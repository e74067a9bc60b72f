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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traffic.errors import InputError

__all__ = ["RooflineParams", "A100", "H100", "compute_time", "optimizer_time"]


@dataclass(frozen=True)
class RooflineParams:
    """Throughput figures of one GPU (SI units).

    Attributes
    ----------
    peak_flops : float
        Peak dense FLOP/s at the training precision.
    efficiency : float
        Fraction of the peak the kernels achieve (MFU-like), in (0, 1].
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
        if not (isinstance(e, int | float) and 0 < e <= 1):
            raise InputError("gpu.efficiency", e, "a fraction in (0, 1]")

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
