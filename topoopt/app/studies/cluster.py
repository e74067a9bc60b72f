"""``topoopt cluster``: jobs of a jobs file placed, designed and simulated on a shared OCS cluster.

The result document (``--json``) is built here (``docs/clusters.md`` describes every field):

- ``jobs``: per job ``name``, ``servers`` (global ids), ``n_servers``, ``iteration_s``,
  ``alone_ideal_s``, ``slowdown``, ``n_circuits``, ``repaired_circuits``, ``reduction``
  (``on``, or ``off: why``: :attr:`solvers.cluster.job_design.JobDesign.reduction`) and
  ``circuits`` (rows ``[u, v, plane, unit]``);
- ``totals``: cluster-wide figures (:func:`solvers.cluster.cluster_design.totals`);
- ``capex_usd``, ``power_w``: the cluster's optical layer as built (:func:`layer_capex`);
- with arrivals, ``events``: per event the changed circuits and the running jobs after it;
- ``params``: ``reduction`` (the jobs were simulated through the exact symmetry reduction,
  the default; ``--no-reduction`` simulates every flow).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from solvers import OcsLayer, design_cluster, load_arrivals, load_jobs
from solvers import cluster_totals as totals
from solvers import play_arrivals as play
from topoopt.flowsim.work import check_work
from topoopt.units import bytes_per_s_to_gbps
from traffic.errors import InputError

__all__ = ["check_events", "layer_capex", "run_cluster"]


def check_events(jobs: list, events: list, servers: int, name: str) -> None:
    """Check the events against the jobs running before each one, from the names and sizes
    alone, so that a bad event is refused before any placement, design or simulation (the
    same lines :func:`solvers.play_arrivals` would give mid-run): a departure of a job that is
    not running, an arrival under a running job's name, an arrival larger than the servers
    free then (the cluster's ``servers`` minus the running jobs' sizes). Whether an arrival's
    explicit servers are free depends on where the tool placed the others: checked in play.

    Raises
    ------
    InputError
        For the first bad event, naming ``{name} events[i]``'s field, its value and what is
        allowed.

    Examples
    --------
    >>> from types import SimpleNamespace as E
    >>> job = E(name="a", size=4)
    >>> check_events([job], [E(depart="a", job=None, time_s=1.0)], 8, "ev.yaml")
    >>> check_events([job], [E(depart="b", job=None, time_s=1.0)], 8, "ev.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: ev.yaml events[0].depart: got 'b'; allowed: a running job (a)
    """
    size = {j.name: j.size for j in jobs}  # the running jobs, in order
    for i, ev in enumerate(events):
        where = f"{name} events[{i}]"
        names = list(size)
        if ev.depart is not None:
            if ev.depart not in size:
                raise InputError(
                    f"{where}.depart", ev.depart, f"a running job ({', '.join(names) or 'none'})"
                )
            del size[ev.depart]
            continue
        job = ev.job
        if job.name in size:
            raise InputError(f"{where}.arrive.name", job.name, "a name no running job has")
        free = servers - sum(size.values())
        if job.size > free:
            raise InputError(
                f"{where}.arrive",
                f"{job.name}: {job.size} servers",
                f"a job of at most the {free} servers free at {ev.time_s:g} s",
            )
        size[job.name] = job.size


def layer_capex(servers: int, degree: int, link_bandwidth: float, radix: int) -> dict[str, Any]:
    """``capex_usd`` and ``power_w`` of the shared cluster's network: ``servers x degree`` NIC
    ports of ``link_bandwidth`` with their transceivers and fibres, and the OCSes of the layer
    (:class:`solvers.OcsLayer`: plane ``i`` of ``ceil(servers / radix)`` OCSes of ``radix``
    ports, the ``per-rail`` layout of :class:`topoopt.fabrics.ocs_layout.OcsLayout`), each bought
    whole (:func:`topoopt.fabrics.cost.cost`, default price table). The jobs' circuits do not
    change it. A port speed the table does not price gives ``None`` and the reason in
    ``capex_error``.

    Examples
    --------
    >>> layer_capex(32, 4, 12.5e9, 12)["capex_usd"]  # 128 x (400 + 100 + 5) + 12 x 12 x 500
    136640.0
    """
    from topoopt.fabrics.cost import cost
    from topoopt.fabrics.direct_connect import direct_connect

    empty = np.zeros((0, 3), np.int64)
    fab = direct_connect(servers, degree, empty, link_bandwidth, device="ocs", ocs_radix=radix)
    try:
        r = cost(fab)
    except InputError as e:  # a port speed the price table has no item for: no price, no failure
        return {"capex_usd": None, "power_w": None, "capex_error": str(e)}
    return {"capex_usd": float(r.capex_usd), "power_w": float(r.power_w)}


def run_cluster(
    jobs_path: str | os.PathLike,
    servers: int,
    degree: int,
    link_bandwidth: float,
    *,
    ocs_radix: int | None = None,
    arrivals: str | os.PathLike | None = None,
    solver: str = "topoopt",
    seed: int = 0,
    work_limit: float | None = None,
    progress: Callable[[str], None] | None = None,
    reduction: bool = True,
) -> dict[str, Any]:
    """The ``topoopt cluster`` result document (module docstring). ``reduction``: simulate every
    job through the exact symmetry reduction (sizes are then checked against its flow cap,
    :func:`topoopt.flowsim.work.check_work` with ``reduced``).

    Examples
    --------
    >>> import json, tempfile
    >>> doc = {"jobs": [{"name": "a", "plan": "dlrm"}, {"name": "b", "plan": "dlrm"}]}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write(json.dumps(doc))
    >>> r = run_cluster(f.name, 32, 4, 12.5e9)
    >>> [j["servers"][0] for j in r["jobs"]], r["totals"]["servers_free"]
    ([0, 16], 0)
    """
    layer = OcsLayer.build(servers, degree, ocs_radix)
    jobs = load_jobs(jobs_path, servers)
    for j in jobs:  # before any placement, design or simulation
        check_work(j.workload, f"simulation of job {j.name!r}", reduced=reduction)
    events = load_arrivals(arrivals) if arrivals is not None else None
    if events is not None:  # a bad event is one line before any work (not mid-run)
        check_events(jobs, events, servers, Path(arrivals).name)
    cache: dict = {}
    cl = design_cluster(
        jobs, layer, link_bandwidth,
        solver=solver, seed=seed, work_limit=work_limit, cache=cache, progress=progress,
        reduction=reduction,
    )  # fmt: skip
    out: dict[str, Any] = {
        "servers": servers,
        "degree": degree,
        "link_gbps": bytes_per_s_to_gbps(link_bandwidth),
        "ocs_radix": layer.radix,
        "ocs_units_per_plane": layer.units_per_plane,
        "solver": solver,
        "jobs": [j.record(layer) for j in cl.jobs],
        "totals": totals(cl.jobs, servers),
        **layer_capex(servers, degree, link_bandwidth, layer.radix),
    }
    if events is not None:
        records, states = play(
            cl, events, name=Path(arrivals).name, seed=seed, work_limit=work_limit,
            cache=cache, progress=progress,
        )  # fmt: skip
        for rec, state in zip(records, states, strict=True):
            rec["jobs"] = [j.record(layer, circuits=False) for j in state]
            rec["totals"] = totals(state, servers)
        out["events"] = records
        out["final_jobs"] = [j.record(layer) for j in states[-1]]
    out["params"] = {"reduction": bool(reduction)}
    return out
