"""The schema of a user price table (``--prices FILE``), as strict pydantic models.

A price table is a YAML mapping (read by the strict decoder of :mod:`traffic.decode`: no
duplicate keys, no alias bombs, no NaN or infinite numbers) whose keys are

- ``version``: an integer (optional);
- a speed-keyed section (:data:`SPEED_ITEMS`: ``nic_port``, ``transceiver``,
  ``switch_port``, ``programmable_switch_port`` for switches that aggregate in the network,
  ``docs/ina.md``): a mapping from a line rate in
  Gbps (a number, or a string holding one, ``0 < speed <= 10**6``) to an entry;
- a flat item (:data:`FLAT_ITEMS`): an entry;
- ``switch_catalogue``: a non-empty list of ``{name, radix, gbps, source}`` switch models.

An entry is ``{capex_usd, power_w, source}``: finite numbers ``0 <= x <= 10**12`` and an optional
text. Every other key, and every wrong type (``"100"`` for a price, ``true`` for a radix), is an
error naming the file and the field path.
"""

from __future__ import annotations

import math
import os
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from traffic.decode import load_document, validation_error
from traffic.errors import InputError

__all__ = [
    "SPEED_ITEMS",
    "FLAT_ITEMS",
    "SECTIONS",
    "MAX_PRICE",
    "MAX_GBPS",
    "PriceEntry",
    "SwitchModel",
    "validate_price_table",
    "load_price_file",
]

SPEED_ITEMS = ("nic_port", "transceiver", "switch_port", "programmable_switch_port")
"""Price-table sections keyed by line rate (Gbps)."""

FLAT_ITEMS = (
    "integrated_port",
    "patch_panel_port",
    "ocs_port",
    "fibre",
    "copper_cable",
    "accelerator",
)
"""Price-table entries with one unit price."""

SECTIONS = ("version", *SPEED_ITEMS, *FLAT_ITEMS, "switch_catalogue")
"""Every key a price table may have (the vocabulary is owned here; :mod:`topoopt.fabrics.cost`
prices with it)."""

MAX_PRICE = 1e12
"""Largest capex (USD) or power (W) of one entry."""

MAX_GBPS = 1e6
"""Largest line rate of a price-table speed, Gbps."""

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
_Amount = Annotated[float, Field(ge=0, le=MAX_PRICE, allow_inf_nan=False)]
_SPEED = re.compile(r"[0-9]+(\.[0-9]+)?")


class PriceEntry(BaseModel):
    """Unit capex (USD) and power (W) of one component."""

    model_config = _STRICT

    capex_usd: _Amount
    power_w: _Amount
    source: Annotated[str, Field(max_length=2000)] | None = None


class SwitchModel(BaseModel):
    """A switch configuration of the catalogue: name, radix (ports) and port speed (Gbps)."""

    model_config = _STRICT

    name: Annotated[str, Field(min_length=1, max_length=200)]
    radix: Annotated[int, Field(ge=2, le=65536)]
    gbps: Annotated[float, Field(gt=0, le=MAX_GBPS, allow_inf_nan=False)]
    source: Annotated[str, Field(max_length=2000)] | None = None


_ENTRY = TypeAdapter(PriceEntry)
_CATALOGUE = TypeAdapter(Annotated[list[SwitchModel], Field(min_length=1)])


def _speed(key: Any, field: str) -> float:
    if isinstance(key, bool):
        raise InputError(field, key, f"a speed in Gbps, 0 < speed <= {MAX_GBPS:g}")
    if isinstance(key, str) and _SPEED.fullmatch(key.strip()):
        key = float(key)
    if not isinstance(key, int | float) or not 0 < key <= MAX_GBPS or not math.isfinite(key):
        raise InputError(field, key, f"a speed in Gbps, 0 < speed <= {MAX_GBPS:g}")
    return float(key)


def _fail(exc: ValidationError, name: str, where: str, model: Any) -> InputError:
    err = validation_error(exc, "", model)  # model: the type validated (for the known fields)
    sub = err.field.strip()
    sep = "" if sub.startswith("[") or not sub else "."
    return InputError(f"{name} {where}{sep}{sub}", err.value, err.allowed)


def _entry(value: Any, name: str, where: str) -> dict[str, Any]:
    try:
        e = _ENTRY.validate_python(value)
    except ValidationError as exc:
        raise _fail(exc, name, where, PriceEntry) from None
    return e.model_dump(exclude_none=True)


def validate_price_table(data: Any, name: str) -> dict[str, Any]:
    """A decoded price table checked against the schema (module docstring); plain values.

    Returns
    -------
    dict
        Section -> ``{speed (float): entry}``, item -> entry, ``switch_catalogue`` -> list of
        switch models, all as plain dicts (what :func:`topoopt.fabrics.cost.load_prices` merges).

    Examples
    --------
    >>> validate_price_table({"fibre": {"capex_usd": 5, "power_w": 0}}, "p.yaml")
    {'fibre': {'capex_usd': 5.0, 'power_w': 0.0}}
    >>> validate_price_table({"fibre": {"capex_usd": "5", "power_w": 0}}, "p.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: p.yaml fibre.capex_usd: got '5'; allowed: a valid number
    """
    if data is None:  # an empty file (or one of comments): "got 'NoneType'" said nothing
        raise InputError(name, "an empty file", "a YAML mapping of price entries")
    if not isinstance(data, dict):
        raise InputError(name, type(data).__name__, "a YAML mapping of price entries")
    out: dict[str, Any] = {}
    for key, val in data.items():
        field = f"{name} {key}"
        if key == "version":
            if isinstance(val, bool) or not isinstance(val, int) or not 0 <= val <= 1000:
                raise InputError(field, val, "an integer 0..1000")
        elif key in SPEED_ITEMS:
            if not isinstance(val, dict) or not val:
                raise InputError(field, val, "a non-empty mapping speed_gbps -> entry")
            sec: dict[float, dict] = {}
            for s, e in val.items():
                sp = _speed(s, field)
                if sp in sec:
                    raise InputError(field, s, "each speed once")
                sec[sp] = _entry(e, name, f"{key}.{s}")
            out[key] = sec
        elif key in FLAT_ITEMS:
            out[key] = _entry(val, name, str(key))
        elif key == "switch_catalogue":
            try:
                models = _CATALOGUE.validate_python(val)
            except ValidationError as exc:
                raise _fail(exc, name, str(key), list[SwitchModel]) from None
            out[key] = [m.model_dump(exclude_none=True) for m in models]
        else:
            raise InputError(name, key, f"entries among {', '.join(SECTIONS)}")
    return out


def load_price_file(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a YAML price table (errors name the file and the field)."""
    name = str(path)
    return validate_price_table(load_document(path, "price table", fmt="yaml"), name)
