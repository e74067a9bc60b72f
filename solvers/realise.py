"""From a :class:`~solvers.model.design.Design` to what the flow model simulates.

A design is judged by the flow model, not by the optimizer's own objective. Three pieces turn it
into a simulation input:

- :func:`design_fabric`: the direct-connect fabric of its circuits (parallel circuits bundled);
- :func:`design_routing`: its weighted server paths as a :class:`~topoopt.paths.PathSet` over that
  fabric's directed links (pairs it does not route fall back to the fabric's own routes in the
  flow model);
- :func:`design_workload`: the Workload with every mutable ordered collective (all-reduce,
  reduce-scatter, all-gather) re-written to follow the design's rings. A group with ``r`` rings of
  weights ``w_1..w_r`` becomes ``r`` families of size ``w_k * S`` whose rows list the members in
  ring ``k``'s server order (each server's GPUs contiguous, ascending rank), marked ``ordered``.
  Bytes are conserved: ``sum_k w_k = 1``. A collective the design runs by another schedule
  (``design.collectives``, :mod:`solvers.joint.collective_choice`) instead keeps one family
  whose rows list the members in ascending server order and carry the schedule
  (:attr:`traffic.workload.Demand.schedule`); only rows with one GPU per server qualify.

:func:`realise_design` gives all three at once, and :func:`simulate_design` chains them into
:func:`topoopt.flowsim.iteration.simulate_iteration`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np

from solvers.model.design import Design
from solvers.model.problem import DesignProblem
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.workload import Demand, Workload

__all__ = [
    "design_fabric",
    "design_routing",
    "design_workload",
    "realise_design",
    "simulate_design",
]

_ORDERED_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def design_fabric(
    design: Design,
    *,
    gpus_per_server: int = 1,
    device: str = "patch-panel",
    intra_server_bandwidth: float | None = None,
    latency: float | None = None,
) -> Fabric:
    """The direct-connect fabric of ``design`` (``degree`` ports of ``link_bandwidth``).

    A design made for an optical layer of finite-radix OCSes (``info["ocs"]``,
    :func:`solvers.ocs_repair.respect_ocs`) is realised on those OCSes: their count and ports
    are the fabric's devices."""
    kw = {} if latency is None else {"latency": latency}
    ocs = (design.info or {}).get("ocs")
    if ocs:
        kw.update(ocs_radix=int(ocs["radix"]), ocs_layout=str(ocs["layout"]))
        device = "ocs"
    return design.circuits.to_fabric(
        design.degree,
        design.link_bandwidth,
        device=device,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        **kw,
    )


def design_routing(design: Design, fabric: Fabric) -> PathSet:
    """The design's server paths on ``fabric``'s directed link ids."""
    if fabric.n_servers != design.servers:
        raise InputError("fabric.servers", fabric.n_servers, f"{design.servers} (the design's)")
    return design.routing.to_pathset(fabric.src, fabric.dst, fabric.n_nodes)


def _ring_table(design: Design, problem: DesignProblem):
    """(phase, sorted server tuple) -> list of (server order, weight)."""
    groups = {}
    for ph in problem.phases:
        for k in range(ph.n_groups):
            groups[(ph.name, k)] = tuple(int(x) for x in np.sort(ph.group(k)))
    table: dict[tuple[str, tuple[int, ...]], list] = defaultdict(list)
    for r in design.rings:
        key = (r["phase"], int(r["group"]))
        if key not in groups:
            continue
        table[(r["phase"], groups[key])].append(
            (np.asarray(r["order"], np.int64), float(r["weight"]))
        )
    return table


def _schedule_table(design: Design, problem: DesignProblem):
    """(phase, sorted server tuple, collective) -> ``(k, 3)`` schedule of ``design.collectives``."""
    out = {}
    for c in getattr(design, "collectives", ()):
        ph = next((p for p in problem.phases if p.name == c["phase"]), None)
        if ph is None or int(c["group"]) >= ph.n_groups:
            continue
        key = tuple(int(x) for x in np.sort(ph.group(int(c["group"]))))
        sched = np.column_stack([c["src"], c["dst"], c["fraction"]]).astype(np.float64)
        out[(c["phase"], key, c["collective"])] = sched
    return out


def design_workload(workload: Workload, design: Design, problem: DesignProblem) -> Workload:
    """The Workload whose ordered collectives follow the design's rings (module docstring).

    Parameters
    ----------
    workload : Workload
        The GPU-level workload the design was made for.
    design : Design
    problem : DesignProblem
        The server-level problem the design solved (its phases name the rings' groups).

    Returns
    -------
    Workload
        Same demands, with each mutable all-reduce / reduce-scatter / all-gather family split
        into one ``ordered`` family per ring (groups without rings in the design are kept).
    """
    if workload.servers != design.servers:
        raise InputError("workload.servers", workload.servers, f"{design.servers} (the design's)")
    table = _ring_table(design, problem)
    scheds = _schedule_table(design, problem)
    single = [ph.name for ph in problem.phases] == ["iteration"]
    if workload.taskgraph is not None and scheds:
        raise InputError("design.collectives", len(scheds), "none for a task-graph workload")
    if workload.taskgraph is not None:  # tasks refer to (family, row): rebuild both together
        from solvers.realise_taskgraph import ring_taskgraph_workload

        return ring_taskgraph_workload(workload, table, single)
    gps = workload.gpus_per_server
    n = design.servers
    out: list[Demand] = []
    for d in workload.demands:
        if not (d.mutable and d.op in _ORDERED_OPS and d.group_size > 1 and d.n_groups):
            out.append(d)
            continue
        phase = "iteration" if single else d.phase
        rows = np.sort(d.groups, axis=1)
        servers = rows // gps
        keys = [tuple(np.unique(s).tolist()) for s in servers]
        by_key: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for i, k in enumerate(keys):
            by_key[k].append(i)
        plain: list[int] = []
        for key, idx in by_key.items():
            sched = scheds.get((phase, key, d.op))
            if sched is not None and len(key) == d.group_size:  # one GPU per server per row
                out.append(replace(d, groups=rows[idx], schedule=sched, name=f"{d.name} [blink]"))
                continue
            rings = table.get((phase, key))
            if not rings:
                plain.extend(idx)
                continue
            sub_rows = rows[idx]
            sub_srv = servers[idx]
            for j, (order, weight) in enumerate(rings):
                pos = np.full(n, n, np.int64)
                pos[order] = np.arange(order.shape[0])
                sort_key = pos[sub_srv] * (workload.gpus + 1) + sub_rows
                ordered_rows = np.take_along_axis(sub_rows, np.argsort(sort_key, axis=1), axis=1)
                out.append(
                    replace(
                        d,
                        groups=ordered_rows,
                        size=d.size * weight,
                        ordered=True,
                        name=f"{d.name} [ring {j + 1}/{len(rings)}]",
                    )
                )
        if plain:
            out.append(replace(d, groups=rows[np.sort(plain)]))
    return replace(workload, demands=tuple(out))


def realise_design(
    workload: Workload,
    design: Design,
    problem: DesignProblem,
    *,
    device: str = "patch-panel",
    intra_server_bandwidth: float | None = None,
) -> tuple[Fabric, PathSet, Workload]:
    """The fabric, the routing and the ring-ordered workload of ``design``: what
    :func:`topoopt.flowsim.iteration.simulate_iteration` takes (``workload``, ``fabric``,
    ``routing=``)."""
    fabric = design_fabric(
        design,
        gpus_per_server=workload.gpus_per_server,
        device=device,
        intra_server_bandwidth=intra_server_bandwidth,
    )
    return fabric, design_routing(design, fabric), design_workload(workload, design, problem)


def simulate_design(
    workload: Workload,
    design: Design,
    problem: DesignProblem,
    *,
    device: str = "patch-panel",
    intra_server_bandwidth: float | None = None,
    **kwargs,
):
    """Simulate one iteration of ``workload`` on ``design`` with the flow model.

    Keyword arguments go to :func:`topoopt.flowsim.iteration.simulate_iteration`; a design with
    class priorities (``design.priority``) is simulated with them unless ``priority`` is given.
    """
    from topoopt.flowsim.iteration import simulate_iteration

    fabric, routing, realised = realise_design(
        workload, design, problem, device=device, intra_server_bandwidth=intra_server_bandwidth
    )
    if kwargs.get("priority") is None and getattr(design, "priority", ()):
        kwargs["priority"] = design.priority
    return simulate_iteration(realised, fabric, routing=routing, **kwargs)
