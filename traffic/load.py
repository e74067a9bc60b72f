"""One entry point from a user's source to a Workload: plan file, embedded plan, or trace."""

from __future__ import annotations

import os
from pathlib import Path

from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["load_workload", "TRACE_SUFFIXES", "PLAN_SUFFIXES"]

TRACE_SUFFIXES = (".fbuf",)
PLAN_SUFFIXES = (".yaml", ".yml", ".json")


def load_workload(source: str | os.PathLike) -> Workload:
    """Read a Workload from a plan file (YAML/JSON), an embedded plan name, a TopoOpt task graph
    or a folder of Chakra execution traces.

    Parameters
    ----------
    source : str or path
        ``*.yaml``, ``*.yml`` or ``*.json``: a plan file; ``*.fbuf``: a TopoOpt task graph;
        a folder: Chakra traces ``NAME.<rank>.et`` (:func:`traffic.chakra.read_chakra`);
        otherwise the name of an embedded plan (``traffic/plans/NAME.yaml``).

    Raises
    ------
    InputError
        Unknown plan name, unreadable or malformed file, invalid plan.
    """
    from traffic.build import workload_from_plan
    from traffic.plan import embedded_plan_names, embedded_plan_path, load_plan

    path = Path(source)
    if path.is_dir():
        from traffic.chakra import read_chakra

        return read_chakra(path)
    suffix = path.suffix.lower()
    if suffix in TRACE_SUFFIXES:
        from traffic.taskgraph import read_taskgraph

        return read_taskgraph(path)
    if suffix in PLAN_SUFFIXES:
        if not path.is_file():
            raise InputError("PLAN", str(source), "an existing plan file")
        return workload_from_plan(load_plan(path))
    if path.exists():
        raise InputError(
            "PLAN", str(source), f"a file ending in {', '.join(PLAN_SUFFIXES + TRACE_SUFFIXES)}"
        )
    names = embedded_plan_names()
    if str(source) not in names:
        raise InputError(
            "PLAN", str(source), f"a plan or .fbuf file, or an embedded plan: {', '.join(names)}"
        )
    return workload_from_plan(load_plan(embedded_plan_path(str(source))))
