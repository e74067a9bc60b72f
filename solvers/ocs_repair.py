"""A design made to fit its problem's optical layer of finite-radix OCSes (post-check + repair).

:func:`respect_ocs` is applied by :func:`solvers.solve` to every method's design when the problem
has an :class:`~topoopt.fabrics.ocs_layout.OcsLayout` (``DesignProblem.ocs``):

1. *check*: place the circuits on the OCSes (:func:`solvers.model.ocs_layers.place_circuits`);
   a design that fits is returned as it is, its placement recorded in ``info["ocs"]`` (with
   ``ports``: one ``[u, p, v, q, ocs]`` row per circuit,
   :meth:`solvers.model.ocs_layers.Placement.port_rows`);
2. *repair*: otherwise (or when CP-SAT cannot decide the placement in time) keep the largest
   placeable subset of its circuits and fill the ports left free with circuits on common
   OCSes, heaviest traffic first
   (:func:`solvers.model.ocs_layers.repair_circuits`);
3. *route*: route the repaired circuits with the routing LP of the joint optimizer
   (:func:`solvers.joint.driver.route_design`) and package the design with its objective
   recomputed (:func:`solvers.joint.driver.to_design`); the lower bound of the unconstrained
   problem stays a bound (the layer only removes designs).

Every design :func:`solvers.solve` returns for such a problem passes
:func:`solvers.model.ocs_layers.check_ocs`.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from solvers.model.design import Design
from solvers.model.ocs_layers import check_ocs, place_circuits, repair_circuits
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = ["respect_ocs"]


def _layer_info(problem: DesignProblem, placement, repaired: dict | None) -> dict:
    layer = problem.ocs
    return {
        "layout": layer.layout,
        "radix": layer.radix,
        **layer.bom(),
        "placement": placement.status,
        "repair": repaired,
        # one row [u, p, v, q, ocs] per circuit: the ports it joins and the OCS that holds it
        "ports": placement.port_rows(layer).tolist(),
    }


def respect_ocs(design: Design, problem: DesignProblem) -> Design:
    """``design`` if its circuits fit ``problem.ocs``, else the repaired and re-routed design
    (module docstring). A problem without ``ocs`` returns ``design`` unchanged."""
    layer = problem.ocs
    if layer is None:
        return design
    try:
        placed = place_circuits(design.circuits, layer)
    except InputError:  # CP-SAT undecided (256 x 8 ports on 136-port OCSes): repaired, whose
        placed = None  # placement is known by construction
    if placed is not None:
        fits = _layer_info(problem, placed, None)
        return replace(design, info={**dict(design.info), "ocs": fits})
    from solvers.baselines.traffic_input import topoopt_traffic
    from solvers.joint.driver import route_design, to_design

    t0 = time.perf_counter() - design.wall_s
    demand = topoopt_traffic(problem).mp
    for ph in problem.phases:
        demand = demand + ph.fixed
    circuits, placement = repair_circuits(design.circuits, layer, demand, problem.pair_cap)
    if problem.n_phases == 0:  # no traffic: nothing to route, the circuits alone change
        info = {**dict(design.info), "ocs": _layer_info(problem, placement, {
            "circuits_before": design.circuits.total,
            "circuits_after": int(np.asarray(circuits)[:, 2].sum()),
        })}  # fmt: skip
        return replace(design, circuits=Circuits(circuits, problem.n),
                       solver=f"{design.solver} + OCS repair", info=info)  # fmt: skip
    routed, objective, _ = route_design(problem, circuits)
    if routed is None:
        raise InputError(
            f"design (OCS layer {layer.layout}, radix {layer.radix})",
            design.solver,
            "circuits that connect the servers with traffic once placed on the OCSes "
            "(the repaired circuits leave some disconnected: a larger radix or the "
            "per-rail layout)",
        )
    repaired = {
        "circuits_before": design.circuits.total,
        "circuits_after": int(np.asarray(circuits)[:, 2].sum()),
        "objective_before_s": float(design.objective_s),
        # the repaired design is routed by the LP and scored by the congestion objective
        "objective": "congestion",
        "changed_pairs": int(
            len(set(map(tuple, design.circuits.tolist())) ^ set(map(tuple, circuits.tolist())))
        ),
    }
    info = {
        **dict(design.info),
        "ocs": _layer_info(problem, placement, repaired),
        "steps_after": ["OCS layer: circuits repaired and routed again"],
    }
    out = to_design(
        problem, circuits, routed, design.lower_bound_s,
        f"{design.solver} + OCS repair", t0, info,
    )  # fmt: skip
    check_ocs(out, layer)
    return out
