"""The hardware catalogue: accelerators, NICs, switch boxes, optical switches and patch panels.

The data is ``catalogue.yaml`` (packaged, a ``source`` for every figure); the schema is
:mod:`traffic.hardware.schema`; :mod:`traffic.hardware.catalogue` loads it and merges a user
file of the same schema (``TOPOOPT_HARDWARE=FILE``).
"""

from traffic.hardware.catalogue import (
    CATALOGUE_PATH,
    SECTIONS,
    Catalogue,
    gpu_names,
    gpu_spec,
    load_catalogue,
    parse_catalogue,
)
from traffic.hardware.schema import CatalogueFile, GpuSpec, NicSpec, OpticalSpec, SwitchSpec

__all__ = [
    "CATALOGUE_PATH",
    "SECTIONS",
    "Catalogue",
    "CatalogueFile",
    "GpuSpec",
    "NicSpec",
    "OpticalSpec",
    "SwitchSpec",
    "gpu_names",
    "gpu_spec",
    "load_catalogue",
    "parse_catalogue",
]
