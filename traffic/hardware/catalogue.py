"""Load the hardware catalogue: the packaged ``catalogue.yaml`` plus an optional user file.

:func:`load_catalogue` reads the packaged file (cached) and, when given a path or when the
environment variable ``TOPOOPT_HARDWARE`` names one, a user file of the same schema
(:mod:`traffic.hardware.schema`) whose entries are added, or replace the packaged entry of the
same name in the same section. :func:`gpu_spec` resolves a GPU name. Every problem is one
:class:`~traffic.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import ValidationError

from traffic.decode import load_document, validation_error
from traffic.errors import InputError
from traffic.hardware.schema import CatalogueFile, GpuSpec, NicSpec, OpticalSpec, SwitchSpec

__all__ = [
    "CATALOGUE_PATH",
    "SECTIONS",
    "Catalogue",
    "parse_catalogue",
    "load_catalogue",
    "gpu_spec",
    "gpu_names",
]

CATALOGUE_PATH = Path(__file__).with_name("catalogue.yaml")
"""The packaged catalogue."""

SECTIONS = ("gpus", "nics", "switches", "optical")
"""The sections of a catalogue."""


@dataclass(frozen=True)
class Catalogue:
    """Entries by section and name (read-only mappings)."""

    gpus: Mapping[str, GpuSpec] = field(default_factory=dict)
    nics: Mapping[str, NicSpec] = field(default_factory=dict)
    switches: Mapping[str, SwitchSpec] = field(default_factory=dict)
    optical: Mapping[str, OpticalSpec] = field(default_factory=dict)

    def merged(self, other: CatalogueFile) -> Catalogue:
        """This catalogue with ``other``'s entries added (same name: ``other`` wins)."""
        parts = {s: MappingProxyType({**getattr(self, s), **getattr(other, s)}) for s in SECTIONS}
        return Catalogue(**parts)


def parse_catalogue(data: Any, name: str) -> CatalogueFile:
    """Validate one decoded catalogue document (errors name ``name`` and the field)."""
    try:
        return CatalogueFile.model_validate(data)
    except ValidationError as e:
        raise validation_error(e, name, CatalogueFile) from None


@lru_cache(maxsize=1)
def _packaged() -> Catalogue:
    doc = parse_catalogue(load_document(CATALOGUE_PATH, "hardware catalogue"), CATALOGUE_PATH.name)
    return Catalogue().merged(doc)


def load_catalogue(user_file: str | os.PathLike | None = None) -> Catalogue:
    """The packaged catalogue, merged with ``user_file`` (default: ``$TOPOOPT_HARDWARE``).

    Examples
    --------
    >>> c = load_catalogue()
    >>> c.gpus["h100-sxm"].bf16_tflops, c.gpus["gb200"].scale_up_domain
    (989.0, 72)
    """
    cat = _packaged()
    if user_file is None:
        env = os.environ.get("TOPOOPT_HARDWARE", "").strip()
        user_file = env or None
    if user_file is None:
        return cat
    path = Path(user_file)
    if not path.is_file():
        raise InputError("TOPOOPT_HARDWARE", str(user_file), "an existing hardware catalogue file")
    return cat.merged(parse_catalogue(load_document(path, "hardware catalogue"), str(path)))


def gpu_names(catalogue: Catalogue | None = None) -> list[str]:
    """Sorted GPU names of ``catalogue`` (default: :func:`load_catalogue`)."""
    return sorted((catalogue or load_catalogue()).gpus)


def gpu_spec(name: str, field: str = "cluster.gpu", catalogue: Catalogue | None = None) -> GpuSpec:
    """The catalogue's GPU ``name``.

    Raises
    ------
    InputError
        ``field: got NAME; allowed: one of ...`` for an unknown name.
    """
    cat = catalogue or load_catalogue()
    if not isinstance(name, str) or name not in cat.gpus:
        raise InputError(field, name, f"a GPU of the catalogue: {', '.join(sorted(cat.gpus))}")
    return cat.gpus[name]
