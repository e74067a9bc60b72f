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
3. *route*: keep the design's own routing where its hops survive the repair
   (:func:`kept_routing`: a commodity keeps the paths whose every hop is still a circuit, their
   weights rescaled to sum to one; one whose paths all broke takes one fewest-hop path), so
   equal flows keep equal paths and the flow model's symmetry reduction keeps its classes
   (a design whose circuits the repair leaves as they are is returned with its routing and
   objective unchanged, no LP). When the repair changed circuits, the repaired circuits are
   also routed by the routing LP of the joint optimizer
   (:func:`solvers.joint.driver.route_design`, whose splits are the solver's and break the
   symmetry) and the LP's routing replaces the kept one only when its congestion objective is
   strictly lower (or the kept one leaves a commodity without a path); the design is then
   packaged by :func:`solvers.joint.driver.to_design`. The objective is
   recomputed; the lower bound of the unconstrained problem stays a bound (the layer only
   removes designs).

Every design :func:`solvers.solve` returns for such a problem passes
:func:`solvers.model.ocs_layers.check_ocs`.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design, NodePaths
from solvers.model.ocs_layers import check_ocs, place_circuits, repair_circuits
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = ["broken_paths", "kept_routing", "respect_ocs"]


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


def broken_paths(routing: NodePaths, circuits: Circuits) -> np.ndarray:
    """``bool (P,)``: the paths of ``routing`` with a hop that is no circuit of ``circuits``."""
    u, v = routing.hops()
    hop_ok = circuits.link_of(u, v) >= 0
    path_of_hop = np.repeat(np.arange(routing.n_paths), routing.path_lengths())
    broken = np.zeros(routing.n_paths, bool)
    np.logical_or.at(broken, path_of_hop, ~hop_ok)
    return broken


def kept_routing(routing: NodePaths, circuits: Circuits) -> NodePaths | None:
    """``routing`` on the repaired ``circuits``: every commodity keeps its paths whose hops are
    all circuits of ``circuits``, their weights rescaled to sum to one; a commodity whose paths
    all broke takes one fewest-hop path (:func:`solvers.routing_lp.min_hop_paths`). ``None``
    when a commodity's servers are disconnected.

    Equal commodities (images of one another under a symmetry of the design that the repair
    spared) keep equal paths, so the flow model's classes survive except around the changed
    circuits.

    Examples
    --------
    A ring 0-1-2-3 repaired into a path 0-1-2-3 plus 0-2 (circuit 3-0 removed):

    >>> r = NodePaths.from_lists([0, 3], [1, 0], [[([0, 1], 1.0)], [([3, 0], 1.0)]])
    >>> c = Circuits([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 2, 1]], 4)
    >>> kept_routing(r, c).to_lists()
    [[([0, 1], 1.0)], [([3, 2, 0], 1.0)]]
    """
    from solvers.routing_lp import min_hop_paths

    n = circuits.n
    src, dst, _ = circuits.links(1.0)
    broken = broken_paths(routing, circuits)
    if not broken.any():
        return routing
    keep_w = np.where(broken, 0.0, routing.weight)
    com = routing.path_commodity()
    total = np.bincount(com, keep_w, routing.n_commodities)
    dead = np.flatnonzero(total <= 0)
    fresh = min_hop_paths(n, src, dst, routing.src[dead], routing.dst[dead])
    if any(p is None for p in fresh):
        return None
    fresh_nodes = {
        int(k): [int(routing.src[k])] + dst[p].tolist() for k, p in zip(dead, fresh, strict=True)
    }
    out = []
    for k, pl in enumerate(routing.to_lists()):
        if k in fresh_nodes:
            out.append([(fresh_nodes[k], 1.0)])
            continue
        first = int(routing.commodity_ptr[k])
        out.append([
            (nodes, w / total[k])
            for j, (nodes, w) in enumerate(pl) if not broken[first + j]
        ])  # fmt: skip
    return NodePaths.from_lists(routing.src, routing.dst, out)


def _with_kept_routing(
    design: Design, problem: DesignProblem, circuits: np.ndarray, routing: NodePaths
) -> Design | None:
    """``design`` on the repaired ``circuits`` with ``routing`` (:func:`kept_routing`), its
    objective recomputed; ``None`` when the routing is infeasible there."""
    cc = Circuits(circuits, problem.n)
    out = replace(design, circuits=cc, routing=routing)
    ev = evaluate_routing(problem, cc, out.phase_routings(problem))
    if not ev.feasible:
        return None
    lb = design.lower_bound_s
    gap = (ev.objective - lb) / ev.objective if ev.objective > 0 else 0.0
    return replace(out, objective_s=float(ev.objective), gap=float(max(gap, 0.0)))


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
    changed = int(
        len(set(map(tuple, design.circuits.tolist())) ^ set(map(tuple, circuits.tolist())))
    )
    kept = kept_routing(design.routing, Circuits(circuits, problem.n))
    out = None if kept is None else _with_kept_routing(design, problem, circuits, kept)
    routed = None
    if out is None or changed:  # the LP too; the kept routing stays unless the LP beats it
        routed, objective, _ = route_design(problem, circuits)
    if out is not None and (routed is None or out.objective_s <= objective):
        repaired = {
            "circuits_before": design.circuits.total,
            "circuits_after": int(np.asarray(circuits)[:, 2].sum()),
            "objective_before_s": float(design.objective_s),
            # the design's own paths where their hops survive, fewest hops where none does
            "objective": "kept routing",
            "changed_pairs": changed,
            # commodities that lost a path to the repair
            "rerouted_commodities": int(np.unique(design.routing.path_commodity()[
                broken_paths(design.routing, out.circuits)]).size),
            "lp_objective_s": None if routed is None else float(objective),
        }  # fmt: skip
        info = {
            **dict(design.info),
            "ocs": _layer_info(problem, placement, repaired),
            "steps_after": ["OCS layer: circuits repaired, the routing kept where it survives"],
        }
        out = replace(out, solver=f"{design.solver} + OCS repair", info=info,
                      wall_s=time.perf_counter() - t0)  # fmt: skip
        check_ocs(out, layer)
        return out
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
        "changed_pairs": changed,
        "kept_objective_s": None if out is None else float(out.objective_s),
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
