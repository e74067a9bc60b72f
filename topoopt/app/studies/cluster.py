"""``topoopt cluster``: jobs of a jobs file placed, designed and simulated on a shared OCS cluster.

The result document (``--json``) is built here (``docs/clusters.md`` describes every field):

- ``jobs``: per job ``name``, ``servers`` (global ids), ``n_servers``, ``iteration_s``,
  ``alone_ideal_s``, ``slowdown``, ``n_circuits``, ``repaired_circuits`` and ``circuits``
  (rows ``[u, v, plane, unit]``);
- ``totals``: cluster-wide figures (:func:`solvers.cluster.cluster_design.totals`);
- ``capex_usd``, ``power_w``: the cluster's optical layer as built (:func:`layer_capex`);
- with arrivals, ``events``: per event the changed circuits and the running jobs after it.
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

__all__ = ["layer_capex", "run_cluster"]


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
) -> dict[str, Any]:
    """The ``topoopt cluster`` result document (module docstring).

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
        check_work(j.workload, f"simulation of job {j.name!r}")
    events = load_arrivals(arrivals) if arrivals is not None else None
    cache: dict = {}
    cl = design_cluster(
        jobs, layer, link_bandwidth,
        solver=solver, seed=seed, work_limit=work_limit, cache=cache, progress=progress,
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
    return out
