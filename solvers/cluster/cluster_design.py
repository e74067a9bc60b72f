"""Every job of a shared cluster placed on disjoint servers and designed on the OCS layer.

Jobs are taken in file order. A job with explicit ``servers`` gets them; any other job gets the
best free window (:func:`solvers.cluster.placement.candidate_placements`) on which its design is
connected (:func:`solvers.cluster.job_design.design_job`; the next window is tried when one
cannot be connected). Explicit jobs are reserved before any other job is placed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from solvers.cluster.job_design import JobDesign, NotConnected, design_job
from solvers.cluster.jobs import Job
from solvers.cluster.ocs import OcsLayer
from solvers.cluster.placement import candidate_placements
from traffic.errors import InputError

__all__ = ["ClusterDesign", "design_cluster", "place_job", "totals"]


@dataclass(frozen=True, eq=False)
class ClusterDesign:
    """The jobs of a cluster, designed; ``jobs`` in file order. ``reduction``: the jobs were
    simulated through the symmetry reduction (and jobs designed later will be)."""

    layer: OcsLayer
    link_bandwidth: float
    solver: str
    jobs: tuple[JobDesign, ...]
    reduction: bool = True

    def used(self) -> np.ndarray:
        """Servers held by a job (boolean ``(N,)``)."""
        out = np.zeros(self.layer.servers, bool)
        for j in self.jobs:
            out[j.servers] = True
        return out


def place_job(
    job: Job,
    free: np.ndarray,
    layer: OcsLayer,
    link_bandwidth: float,
    *,
    solver: str = "topoopt",
    seed: int = 0,
    work_limit: float | None = None,
    cache: dict | None = None,
    tries: int = 32,
    reduction: bool = True,
) -> JobDesign | None:
    """``job`` designed on the best of its candidate windows among ``free`` servers
    (:func:`~solvers.cluster.job_design.design_job`, simulated through the symmetry reduction
    with ``reduction``).

    Returns ``None`` when none of the first ``tries`` windows connects it (or too few servers
    are free).
    """
    if job.servers is not None:
        cands = [job.servers] if np.all(np.isin(job.servers, free)) else []
    else:
        cands = candidate_placements(free, job.size, layer, tries)
    for servers in cands:
        try:
            return design_job(
                job.name, job.workload, servers, layer, link_bandwidth,
                solver=solver, seed=seed, work_limit=work_limit, cache=cache,
                reduction=reduction,
            )  # fmt: skip
        except NotConnected:
            continue
    return None


def design_cluster(
    jobs: Sequence[Job],
    layer: OcsLayer,
    link_bandwidth: float,
    *,
    solver: str = "topoopt",
    seed: int = 0,
    work_limit: float | None = None,
    cache: dict | None = None,
    progress: Callable[[str], None] | None = None,
    reduction: bool = True,
) -> ClusterDesign:
    """Place and design ``jobs`` on ``layer`` (module docstring); ``reduction``: simulate each
    job through the exact symmetry reduction (:func:`~solvers.cluster.job_design.design_job`).

    Raises
    ------
    InputError
        Jobs needing more servers than there are, overlapping explicit servers, or a job that
        cannot be connected on any window the OCS layer offers.

    Examples
    --------
    >>> from traffic.load import load_workload
    >>> w = load_workload("dlrm")
    >>> c = design_cluster([Job("a", w), Job("b", w)], OcsLayer.build(40, 4), 12.5e9)
    >>> [j.servers[[0, -1]].tolist() for j in c.jobs]
    [[0, 15], [16, 31]]
    """
    n = layer.servers
    need = sum(j.size for j in jobs)
    if need > n:
        raise InputError("--servers", n, f"at least the {need} servers the jobs need together")
    owner = np.full(n, -1, np.int64)
    for i, j in enumerate(jobs):
        if j.servers is None:
            continue
        if j.servers.max() >= n or np.any(owner[j.servers] >= 0):
            raise InputError(
                f"job {j.name}.servers", j.servers.tolist(), f"free server ids 0..{n - 1}"
            )
        owner[j.servers] = i
    cache = {} if cache is None else cache
    out: list[JobDesign | None] = [None] * len(jobs)
    order = [i for i, j in enumerate(jobs) if j.servers is not None]
    order += [i for i, j in enumerate(jobs) if j.servers is None]
    for i in order:
        j = jobs[i]
        free = np.flatnonzero(owner < 0) if j.servers is None else j.servers
        got = place_job(
            j, free, layer, link_bandwidth,
            solver=solver, seed=seed, work_limit=work_limit, cache=cache, reduction=reduction,
        )  # fmt: skip
        if got is None:
            raise InputError(
                f"job {j.name}",
                f"{j.size} servers",
                "a job the OCS layer can connect on free servers "
                f"({int((owner < 0).sum())} free; a larger --ocs-radix splits planes less)",
            )
        owner[got.servers] = i
        out[i] = got
        if progress is not None:
            progress(
                f"job {j.name}: servers {got.servers[0]}..{got.servers[-1]}, "
                f"{got.iteration_s * 1e3:.4g} ms (ideal {got.alone_ideal_s * 1e3:.4g} ms)"
            )
    jobs_out = tuple(x for x in out if x is not None)
    return ClusterDesign(layer, link_bandwidth, solver, jobs_out, reduction=reduction)


def totals(jobs: Sequence[JobDesign], servers: int) -> dict:
    """Cluster-wide figures: jobs, servers used, mean/p90 iteration and slowdown vs ideal.

    >>> totals([], 8)["servers_free"]
    8
    """
    it = np.array([j.iteration_s for j in jobs])
    sl = np.array([j.iteration_s / j.alone_ideal_s for j in jobs])
    used = int(sum(j.servers.size for j in jobs))
    out = {
        "jobs": len(jobs),
        "servers_used": used,
        "servers_free": servers - used,
        "circuits": int(sum(j.ports.shape[0] for j in jobs)),
        "repaired_circuits": int(sum(j.repaired for j in jobs)),
    }
    if len(jobs):
        out |= {
            "mean_iteration_s": float(it.mean()),
            "p90_iteration_s": float(np.quantile(it, 0.9)),
            "mean_alone_ideal_s": float(np.mean([j.alone_ideal_s for j in jobs])),
            "mean_slowdown": float(sl.mean()),
            "max_slowdown": float(sl.max()),
        }
    return out
