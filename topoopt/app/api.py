"""The Python API: the command line's work as functions, for notebooks and scripts.

``import topoopt`` offers these names lazily (:func:`topoopt.__getattr__`), so importing the
package stays as light as the core. Keyword arguments use the command line's units (Gbps per
port); results are in SI units (seconds, bytes, bytes/s, USD, W). A ``plan`` is an embedded plan's
name, a plan file (YAML/JSON, a TopoOpt ``.fbuf`` task graph or a folder of Chakra traces), a
plan as a dict, or a :class:`~traffic.workload.Workload`.

Examples
--------
>>> import topoopt
>>> w = topoopt.load_workload("dlrm")
>>> w
Workload('dlrm.yaml', 128 GPUs on 16 servers, 3 demand families, 8.47e+09 bytes per iteration)
>>> table = topoopt.compare("vgg16-dp", fabrics=["ideal", "fat-tree"], degree=4, link_gbps=100)
>>> list(table["fabric"]), bool((table["iteration_s"] > 0).all())
(['ideal', 'fat-tree'], True)
>>> r = topoopt.simulate("vgg16-dp", fabric="ideal", degree=4, link_gbps=100)
>>> bool(r.iteration_s == table.set_index("fabric").loc["ideal", "iteration_s"])
True
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from topoopt.units import gbps_to_bytes_per_s
from traffic.workload import Workload

__all__ = [
    "load_plan",
    "load_workload",
    "simulate",
    "compare",
    "design",
    "cosearch",
    "Simulation",
]


def load_plan(plan: str | os.PathLike | Mapping[str, Any]):
    """A validated :class:`~traffic.plan.Plan` from an embedded plan's name, a plan file or a
    dict (the strict schema of ``docs/inputs.md``)."""
    from traffic.plan import load_plan as _load

    return _load(plan)


def load_workload(
    plan,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    gpus: int | None = None,
) -> Workload:
    """The :class:`~traffic.workload.Workload` (symbolic collectives, transfers, compute) of
    ``plan`` (module docstring); ``gpu`` (a hardware-catalogue name such as ``"h100-sxm"``)
    replaces the plan's ``cluster.gpu`` (and drops its ``cluster.efficiency`` unless it names
    the same GPU); ``efficiency`` (in [0.001, 1], a fraction of the GPU's peak FLOP/s) then sets
    ``cluster.efficiency``, the kernel efficiency of the compute model; ``gpus`` then scales
    the plan to that many GPUs (servers and ``dp`` re-derived, the global batch with ``dp``:
    :func:`traffic.load.with_gpus`, the CLI's ``--gpus``); ``settings``
    (``["parallelism.vpp=8", ...]``, the CLI's ``--set``) then set plan fields as if the file
    said so (:func:`traffic.load.with_settings`).

    >>> import topoopt
    >>> g = topoopt.load_workload("gpt3-175b", gpu="h100-sxm", efficiency=0.523).info["gpu"]
    >>> g["name"], g["efficiency"]
    ('h100-sxm', 0.523)
    """
    if isinstance(plan, Workload):
        from traffic.errors import InputError

        given = (("gpu", gpu), ("efficiency", efficiency), ("settings", settings), ("gpus", gpus))
        for name, value in given:
            if value not in (None, (), []):
                raise InputError(name, value, "a plan name, file or dict (a Workload has its GPU)")
        return plan
    if isinstance(plan, Mapping):
        from traffic.build import workload_from_plan
        from traffic.load import with_efficiency, with_gpu, with_gpus, with_settings
        from traffic.plan import load_plan as _load

        plan = with_efficiency(with_gpu(_load(plan), gpu, "gpu"), efficiency, "efficiency")
        plan = with_gpus(plan, gpus, "gpus")
        return workload_from_plan(with_settings(plan, settings, "settings"))
    from traffic.load import load_workload as _load_workload

    return _load_workload(plan, gpu=gpu, efficiency=efficiency, settings=settings, gpus=gpus)


@dataclass(frozen=True)
class Simulation:
    """One simulated iteration (what ``topoopt simulate --json`` prints), with the headline
    numbers as attributes and every field in :attr:`data`."""

    data: Mapping[str, Any] = field(repr=False)

    @property
    def iteration_s(self) -> float:
        return float(self.data["iteration_s"])

    @property
    def compute_s(self) -> float:
        return float(self.data["compute_s"])

    @property
    def exposed_comm_s(self) -> float:
        return float(self.data["exposed_comm_s"])

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def __repr__(self) -> str:
        d = self.data
        return (
            f"Simulation({d.get('workload')!r} on {d.get('fabric')!r}: "
            f"iteration {self.iteration_s:.4g} s, compute {self.compute_s:.4g} s, "
            f"exposed communication {self.exposed_comm_s:.4g} s)"
        )

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(self.data.get(k)))}</td></tr>"
            for k in ("workload", "fabric", "iteration_s", "compute_s", "exposed_comm_s")
        )
        return f"<table>{rows}</table>"


def simulate(
    plan,
    fabric: str = "ideal",
    *,
    design: str | os.PathLike | None = None,
    degree: int = 8,
    link_gbps: float = 100.0,
    oversubscription: float = 4.0,
    seed: int = 0,
    schedule: str | None = None,
    priority: str | None = None,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    gpus: int | None = None,
) -> Simulation:
    """Simulate one iteration of ``plan`` on a fabric kind (``ideal``, ``fat-tree``, ``torus``,
    ``joint``, ... as ``topoopt simulate --fabric``) or on a ``design.json``, with ``degree``
    ports of ``link_gbps`` per server; ``gpu`` names the accelerator (``h100-sxm``, ...) and
    ``efficiency`` its kernel efficiency, ``settings`` plan fields (:func:`load_workload`)."""
    from topoopt.app.studies.simulate import simulate_plan

    return Simulation(
        simulate_plan(
            load_workload(plan, gpu, efficiency, settings, gpus),
            design=design,
            fabric=None if design is not None else fabric,
            degree=degree,
            link_bandwidth=gbps_to_bytes_per_s(link_gbps),
            oversubscription=oversubscription,
            seed=seed,
            schedule=schedule,
            priority=priority,
        )
    )


def compare(
    plan,
    fabrics: Sequence[str] | None = None,
    *,
    degree: int = 8,
    link_gbps: float = 100.0,
    oversubscription: float = 4.0,
    seed: int = 0,
    time_limit_s: float = 900.0,
    work_limit: float | None = None,
    prices=None,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    gpus: int | None = None,
) -> pd.DataFrame:
    """``plan`` on each of ``fabrics`` (default: every fabric of ``topoopt compare``): a
    DataFrame with one row per fabric and the columns of
    :func:`topoopt.app.studies.compare.compare` (``fabric``, ``iteration_s``, ``comm_s``,
    ``exposed_comm_s``, ``capex_usd``, ``power_w``, ``ratio_to_ideal``, ``tflops_per_gpu``,
    ``mfu``, ...); ``gpu`` names the accelerator (``h100-sxm``, ...), ``efficiency`` its
    kernel efficiency and ``settings`` plan fields (:func:`load_workload`)."""
    from topoopt.app.studies.compare import FABRICS
    from topoopt.app.studies.compare import compare as _compare

    res = _compare(
        load_workload(plan, gpu, efficiency, settings, gpus),
        FABRICS if fabrics is None else tuple(fabrics),
        degree,
        gbps_to_bytes_per_s(link_gbps),
        oversubscription=oversubscription,
        seed=seed,
        time_limit_s=time_limit_s,
        prices=prices,
        work_limit=work_limit,
    )
    return res.table.reset_index(drop=True)


def design(
    plan,
    solver: str = "joint",
    *,
    degree: int = 8,
    link_gbps: float = 100.0,
    seed: int = 0,
    time_limit_s: float = 900.0,
    work_limit: float | None = None,
    objective: str = "iteration",
    priorities: bool = False,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    gpus: int | None = None,
):
    """The optical circuits and routing of ``plan`` by ``solver`` (``joint``, ``topoopt``,
    ``topoopt-released``, ``expander``): a :class:`solvers.Design` (``to_json()`` writes
    ``design.json``); ``gpu``, ``efficiency`` and ``settings`` as in :func:`load_workload`."""
    from solvers import DesignProblem, solve

    w = load_workload(plan, gpu, efficiency, settings, gpus)
    problem = DesignProblem.from_workload(
        w, degree=degree, link_bandwidth=gbps_to_bytes_per_s(link_gbps)
    )
    return solve(
        problem,
        solver,
        time_limit_s=time_limit_s,
        seed=seed,
        work_limit=work_limit,
        objective=objective,
        priorities=priorities,
    )


def cosearch(
    plan,
    fabric: str = "joint",
    *,
    gpu_memory_gb: float = 80.0,
    degree: int = 8,
    link_gbps: float = 100.0,
    max_evaluations: int = 40,
    seed: int = 0,
    workers: int = 1,
    address: str | None = None,
):
    """Search the plans of ``plan``'s model and cluster that fit ``gpu_memory_gb`` per GPU for
    the fastest on ``fabric`` (``topoopt cosearch``); a
    :class:`~topoopt.app.studies.cosearch.search.SearchResult` (``best``, ``pareto``, ``rows``).
    ``workers > 1`` or an ``address`` evaluate on Ray; results do not depend on the count.
    ``search_warnings()`` lists the evaluations whose design search fell back to another
    objective or was cut by the clock (each record's ``search_warning``)."""
    from topoopt.app.studies.cosearch.search import SearchConfig
    from topoopt.app.studies.cosearch.search import cosearch as _cosearch
    from topoopt.app.studies.cosearch.space import plan_space
    from topoopt.app.studies.engine import Engine

    base = load_plan(plan)
    cfg = SearchConfig(
        fabric=fabric,
        degree=degree,
        link_bandwidth=gbps_to_bytes_per_s(link_gbps),
        max_evaluations=max_evaluations,
        seed=seed,
    )
    space = plan_space(base, gpu_memory_gb * 1e9)
    with Engine(workers, address) as eng:
        return _cosearch(space, cfg, eng)
