"""The schema of the hardware catalogue (``catalogue.yaml`` and user files), strict pydantic.

A catalogue is a mapping with an optional ``version`` and four optional sections, each a mapping
from an entry name (lower-case letters, digits, ``-`` ``_`` ``.``) to an entry:

- ``gpus``: :class:`GpuSpec` (dense BF16 / FP8 peak, HBM, scale-up bandwidth and domain, the
  default compute efficiency);
- ``nics``: :class:`NicSpec`;
- ``switches``: :class:`SwitchSpec` (a switch box: radix x port speed of one ASIC);
- ``optical``: :class:`OpticalSpec` (optical circuit switches and patch panels).

Units are in the field names (TFLOP/s, GB, TB/s, GB/s, Gbps, Tb/s, USD, W, s); numbers must be
numbers (``"989 TFLOPS"`` is an error, so is ``true``). Every entry carries the ``source`` of its
figures (a datasheet name or URL, as text) and priced entries a ``price_source``. Unknown fields
are errors.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from traffic.limits import MIN_EFFICIENCY

__all__ = [
    "GpuSpec",
    "NicSpec",
    "SwitchSpec",
    "OpticalSpec",
    "CatalogueFile",
    "ENTRY_NAME",
]

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


def _si(x: float, exponent: int) -> float:
    """``x * 10**exponent`` rounded once (``2.039 TB/s`` is exactly ``2.039e12`` bytes/s), also
    when ``x`` prints with an exponent of its own (``1e-05``: it was ``'1e-05e12'``, a
    ``ValueError``).

    >>> _si(2.039, 12) == 2.039e12, _si(1e-05, 12) == 1e7, _si(0.1, 9) == 1e8
    (True, True, True)
    """
    return float(Decimal(repr(float(x))).scaleb(exponent))


ENTRY_NAME = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""Pattern of an entry name (``h100-sxm``, ``cx7-400g``)."""

_Source = Annotated[str, StringConstraints(min_length=3, max_length=2000)]
_Label = Annotated[str, StringConstraints(min_length=1, max_length=200)]
_Pos = Annotated[float, Field(ge=1e-3, le=1e9, allow_inf_nan=False)]
"""A device quantity in its unit (TFLOP/s, GB, TB/s, GB/s, Gbps, Tbps): 1e-3 to 1e9 (1e-300 TFLOP/s
overflowed the iteration time to 1e+298 s)."""
_Money = Annotated[float, Field(ge=0, le=1e12, allow_inf_nan=False)]
_Name = Annotated[str, StringConstraints(pattern=ENTRY_NAME)]


class GpuSpec(BaseModel):
    """One accelerator.

    Attributes
    ----------
    label : str
        Product name for reports.
    bf16_tflops, fp8_tflops : float
        Dense (no 2:4 sparsity) tensor-core peak, TFLOP/s; ``fp8_tflops`` is None without FP8.
    hbm_gb, hbm_tb_per_s : float
        HBM capacity (GB, 10^9 bytes) and bandwidth (TB/s).
    scale_up_gb_per_s : float
        NVLink / Infinity Fabric egress bandwidth of one GPU, one direction, GB/s.
    scale_up_domain : int
        GPUs one scale-up fabric joins (8 on HGX, 72 on NVL72).
    efficiency : float
        Default fraction of the BF16 peak the kernels reach, in (0, 1].
    source, efficiency_source : str
        Where the figures and the efficiency come from.
    nic_gbps : float, optional
        Scale-out NIC bandwidth per GPU of the vendor's reference server (DGX H100: one 400 G
        ConnectX-7 per GPU), Gbps: what ``--link-gbps`` should be to model that server (the
        commands say so when it is left at its default); ``nic_source`` is where it comes from.
    """

    model_config = _STRICT

    label: _Label
    bf16_tflops: _Pos
    fp8_tflops: _Pos | None = None
    hbm_gb: _Pos
    hbm_tb_per_s: _Pos
    scale_up_gb_per_s: _Pos
    scale_up_domain: Annotated[int, Field(ge=1, le=1_000_000)]
    efficiency: Annotated[float, Field(ge=MIN_EFFICIENCY, le=1, allow_inf_nan=False)]
    source: _Source
    efficiency_source: _Source
    nic_gbps: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = None
    nic_source: _Source | None = None

    @property
    def peak_flops(self) -> float:
        """Dense BF16 peak, FLOP/s."""
        return _si(self.bf16_tflops, 12)

    @property
    def memory_bandwidth(self) -> float:
        """HBM bandwidth, bytes/s."""
        return _si(self.hbm_tb_per_s, 12)

    @property
    def memory_bytes(self) -> float:
        """HBM capacity, bytes."""
        return _si(self.hbm_gb, 9)

    @property
    def scale_up_bandwidth(self) -> float:
        """Scale-up egress of one GPU, one direction, bytes/s."""
        return _si(self.scale_up_gb_per_s, 9)


class NicSpec(BaseModel):
    """One network interface (one port of ``gbps``), priced."""

    model_config = _STRICT

    label: _Label
    gbps: _Pos
    capex_usd: _Money
    power_w: _Money
    source: _Source
    price_source: _Source


class SwitchSpec(BaseModel):
    """One orderable switch box: ``radix`` ports of ``gbps`` on an ASIC of ``tbps`` Tb/s."""

    model_config = _STRICT

    label: _Label
    asic: _Label
    tbps: _Pos
    radix: Annotated[int, Field(ge=2, le=100_000)]
    gbps: _Pos
    capex_usd: _Money
    power_w: _Money
    source: _Source
    price_source: _Source

    @model_validator(mode="after")
    def _fits_asic(self) -> SwitchSpec:
        if self.radix * self.gbps > self.tbps * 1000 * (1 + 1e-9):
            raise ValueError(
                f"radix x gbps = {self.radix * self.gbps:g} Gbps at most the ASIC's "
                f"tbps x 1000 = {self.tbps * 1000:g} Gbps"
            )
        return self


class OpticalSpec(BaseModel):
    """An optical circuit switch (``kind: ocs``) or a patch panel (``kind: patch-panel``)."""

    model_config = _STRICT

    label: _Label
    kind: Literal["ocs", "patch-panel"]
    ports: Annotated[int, Field(ge=2, le=1_000_000)]
    capex_usd: _Money
    power_w: _Money
    reconfig_s: Annotated[float, Field(gt=0, le=1e7, allow_inf_nan=False)]
    source: _Source
    price_source: _Source


class CatalogueFile(BaseModel):
    """One catalogue document (the packaged one or a user's), every section optional."""

    model_config = _STRICT

    version: Literal[1] = 1
    gpus: dict[_Name, GpuSpec] = Field(default_factory=dict)
    nics: dict[_Name, NicSpec] = Field(default_factory=dict)
    switches: dict[_Name, SwitchSpec] = Field(default_factory=dict)
    optical: dict[_Name, OpticalSpec] = Field(default_factory=dict)
