"""One entry point from a user's source to a Workload: plan file, embedded plan, or trace."""

from __future__ import annotations

import os
from pathlib import Path

from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["load_workload", "with_gpu", "TRACE_SUFFIXES", "PLAN_SUFFIXES"]

TRACE_SUFFIXES = (".fbuf",)
PLAN_SUFFIXES = (".yaml", ".yml", ".json")


def load_workload(source: str | os.PathLike, gpu: str | None = None) -> Workload:
    """Read a Workload from a plan file (YAML/JSON), an embedded plan name, a TopoOpt task graph
    or a folder of Chakra execution traces.

    Parameters
    ----------
    source : str or path
        ``*.yaml``, ``*.yml`` or ``*.json``: a plan file; ``*.fbuf``: a TopoOpt task graph;
        a folder: Chakra traces ``NAME.<rank>.et`` (:func:`traffic.chakra.read_chakra`);
        otherwise the name of an embedded plan (``traffic/plans/NAME.yaml``).
    gpu : str, optional
        A GPU of the hardware catalogue replacing the plan's ``cluster.gpu`` (the GPU's default
        efficiency then applies, the plan's ``cluster.efficiency`` is dropped); a plan only.

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

        _no_gpu(gpu, "a Chakra trace folder")
        return read_chakra(path)
    suffix = path.suffix.lower()
    if suffix in TRACE_SUFFIXES:
        from traffic.taskgraph import read_taskgraph

        _no_gpu(gpu, "a task graph")
        return read_taskgraph(path)
    if suffix in PLAN_SUFFIXES:
        if not path.is_file():
            raise InputError("PLAN", str(source), "an existing plan file")
        return workload_from_plan(with_gpu(load_plan(path), gpu))
    if path.exists():
        raise InputError(
            "PLAN", str(source), f"a file ending in {', '.join(PLAN_SUFFIXES + TRACE_SUFFIXES)}"
        )
    names = embedded_plan_names()
    if str(source) not in names:
        raise InputError(
            "PLAN", str(source), f"a plan or .fbuf file, or an embedded plan: {', '.join(names)}"
        )
    return workload_from_plan(with_gpu(load_plan(embedded_plan_path(str(source))), gpu))


def _no_gpu(gpu: str | None, what: str) -> None:
    if gpu is not None:
        raise InputError("--gpu", gpu, f"a plan (not {what}: its compute times are its own)")


def with_gpu(plan, gpu: str | None, field: str = "--gpu"):
    """``plan`` with ``cluster.gpu`` replaced by the catalogue GPU ``gpu`` (None: unchanged).

    A ``gpu`` naming the plan's own GPU leaves the plan unchanged, its ``cluster.efficiency``
    (a calibration of that GPU) included; another GPU drops it (the catalogue's default
    efficiency of the new GPU applies).

    >>> from traffic.plan import load_plan
    >>> with_gpu(load_plan("gpt3-175b"), "h200").cluster.gpu
    'h200'
    """
    if gpu is None or (isinstance(plan.cluster.gpu, str) and gpu == plan.cluster.gpu):
        return plan
    from traffic.hardware import gpu_spec
    from traffic.plan import Cluster

    gpu_spec(gpu, field)
    c = plan.cluster
    cluster = Cluster(servers=c.servers, gpus_per_server=c.gpus_per_server, gpu=gpu)
    return plan.model_copy(update={"cluster": cluster})
