"""traffic: parallelization plans and imported traces become a symbolic :class:`Workload`.

The door's names are imported on first use (``traffic.load_plan``, ``from traffic import
Workload``): ``import traffic.errors``, which every topoopt module does, then costs only that
module, not the plan schemas, the model zoo, pydantic, yaml or scipy.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the door's names, for type checkers (loaded lazily below)
    from traffic.build import workload_from_plan
    from traffic.errors import InputError
    from traffic.expand import expand, gpu_matrix, server_matrix
    from traffic.load import load_workload
    from traffic.plan import Plan, embedded_plan_names, load_plan
    from traffic.taskgraph import read_taskgraph
    from traffic.workload import CLASSES, OPS, PHASES, Demand, TaskGraph, Workload

__all__ = [
    "CLASSES",
    "OPS",
    "PHASES",
    "Demand",
    "InputError",
    "Plan",
    "TaskGraph",
    "Workload",
    "embedded_plan_names",
    "expand",
    "gpu_matrix",
    "load_plan",
    "load_workload",
    "read_taskgraph",
    "server_matrix",
    "workload_from_plan",
]

_HOME = {
    "CLASSES": "workload",
    "OPS": "workload",
    "PHASES": "workload",
    "Demand": "workload",
    "InputError": "errors",
    "Plan": "plan",
    "TaskGraph": "workload",
    "Workload": "workload",
    "embedded_plan_names": "plan",
    "expand": "expand",
    "gpu_matrix": "expand",
    "load_plan": "plan",
    "load_workload": "load",
    "read_taskgraph": "taskgraph",
    "server_matrix": "expand",
    "workload_from_plan": "build",
}
"""The submodule that defines each name of :data:`__all__`."""


def __getattr__(name: str):
    """A door name, imported from its submodule on first use (then kept here)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'traffic' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"traffic.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Door(types.ModuleType):
    """The package's module type: ``traffic.expand`` stays the function :func:`expand` (as
    when the door imported it eagerly) after the submodule ``traffic.expand`` is loaded, which
    would otherwise bind the module under that name."""

    def __setattr__(self, name: str, value) -> None:
        if name in _HOME and isinstance(value, types.ModuleType):
            return  # a submodule named like a door name (``expand``): keep the name lazy
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Door
