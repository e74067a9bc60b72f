"""The joint search on an optical layer of finite-radix OCSes: every candidate it judges fits.

A circuit joins two ports of one OCS (:class:`~topoopt.fabrics.ocs_layout.OcsLayout`; the
constraints 1-3 of :mod:`solvers.model.ocs_layers`). The iteration search
(:mod:`solvers.joint.iteration_search`) keeps that constraint inside its search rather than
repairing its winner afterwards:

- :func:`fit_circuits`: every candidate circuit set (warm-start baselines, congestion
  candidates, circulants, block and pipeline constructions, the congestion search's design)
  is placed on the layer before it is routed and simulated; one that does not fit is replaced
  by its largest placeable subset with the ports left free joined on common OCSes, heaviest
  demand first (:func:`solvers.model.ocs_layers.repair_circuits`), so the flow model only ever
  ranks designs the layer can hold;
- :func:`layer_candidates`: circuit sets built on the layer from the start, one OCS at a time:
  a maximum-weight matching of the servers with a port on that OCS, a pair weighing its
  demand over ``(1 + circuits it has)^2`` (so traffic spreads over many pairs and the ring
  groups close), every port used; they join the searches' candidates;
- :func:`placement_of`: the OCS of every circuit of the incumbent, from which the swap search
  (:func:`solvers.joint.local_search.swap_candidates`, ``placement``) proposes only 2-swaps of
  two circuits on one OCS: circuits ``{u, x}`` and ``{v, y}`` on OCS ``o`` become ``{u, v}`` and
  ``{x, y}`` on the same four ports of ``o``, so every move keeps the design placeable.

:func:`solvers.ocs_repair.respect_ocs` stays the final safety net (it finds the design fits).

Determinism: a placement is greedy, constructive (:func:`solvers.model.ocs_layers.place_by_planes`)
or CP-SAT's under a deterministic time limit only (one worker, seed 0); a search gives each
check :func:`placement_time_s` of its work limit and charges CP-SAT's deterministic time to its
work meter (:data:`WORK_PER_CP_SAT_S`), counted in ``info["ocs_search"]["placement"]``
(:class:`~solvers.model.ocs_layers.PlacementWork`). So the same problem, seed and work limit
give the same design under any load.
"""

from __future__ import annotations

import numpy as np

from solvers.model.ocs_layers import (
    TIME_LIMIT_S,
    PlacementWork,
    place_circuits,
    remember_placement,
    repair_circuits,
)
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "fit_circuits",
    "placement_of",
    "ocs_demand",
    "layer_candidates",
    "placement_time_s",
    "SEARCH_PLACEMENT_TIME_S",
    "SEARCH_REPAIR_TIME_S",
    "PLACEMENT_WORK_SHARE",
    "WORK_PER_CP_SAT_S",
]

SEARCH_PLACEMENT_TIME_S = TIME_LIMIT_S
"""CP-SAT's deterministic time limit of one placement inside a search without a work limit
(the safety net's, :func:`solvers.ocs_repair.respect_ocs`); with one, :func:`placement_time_s`.
An undecided placement is treated as not fitting (the candidate is repaired)."""

SEARCH_REPAIR_TIME_S = 2.0
"""CP-SAT's deterministic time limit of a repair's largest placeable subset inside the search
(the greedy or constructive subset when CP-SAT finds no larger one; proving the largest can
take much longer)."""

PLACEMENT_WORK_SHARE = 0.1
"""A search gives one placement check this share of its work limit as CP-SAT's deterministic
time (:func:`placement_time_s`; 2 s at the congestion search's default 20 units)."""

WORK_PER_CP_SAT_S = 1.0
"""Work units a search is charged per second of CP-SAT's deterministic time (a work unit is
about a second of one core on the congestion search's routing LPs)."""


def placement_time_s(work_limit: float | None) -> float:
    """CP-SAT's deterministic time limit of one placement check in a search of ``work_limit``
    work units: :data:`PLACEMENT_WORK_SHARE` of it, at most :data:`SEARCH_PLACEMENT_TIME_S`
    (which is also the limit without a work limit) and at least 0.1 s.

    >>> placement_time_s(20.0), placement_time_s(1000.0), placement_time_s(None)
    (2.0, 30.0, 30.0)
    """
    if work_limit is None:
        return SEARCH_PLACEMENT_TIME_S
    return float(min(SEARCH_PLACEMENT_TIME_S, max(0.1, PLACEMENT_WORK_SHARE * work_limit)))


def ocs_demand(problem: DesignProblem):
    """The server demand that orders a repair's fill: the ring pair traffic of every phase plus
    its fixed traffic (what :func:`solvers.ocs_repair.respect_ocs` uses)."""
    from solvers.baselines.traffic_input import topoopt_traffic

    demand = topoopt_traffic(problem).mp
    for ph in problem.phases:
        demand = demand + ph.fixed
    return demand


def placement_of(
    problem: DesignProblem,
    circuits,
    time_s: float = SEARCH_PLACEMENT_TIME_S,
    work: PlacementWork | None = None,
) -> np.ndarray | None:
    """``int64 (m, 4)`` rows ``[u, v, ocs, count]`` placing ``circuits`` on ``problem.ocs``;
    ``None`` when they do not fit (or the placement is undecided within ``time_s`` of CP-SAT's
    deterministic time, charged to ``work``) or the problem has no layer."""
    layer = problem.ocs
    if layer is None:
        return None
    try:
        pl = place_circuits(circuits, layer, time_s, work=work)
    except InputError:
        return None
    return None if pl is None else pl.rows


def fit_circuits(
    problem: DesignProblem,
    circuits,
    demand=None,
    time_s: float = SEARCH_PLACEMENT_TIME_S,
    work: PlacementWork | None = None,
) -> tuple[np.ndarray, bool]:
    """``(rows, repaired)``: ``circuits`` (canonical rows) when they fit ``problem.ocs`` (or
    the problem has no layer), else the repaired circuits (module docstring) and True.
    ``demand``: the symmetric server demand that orders the fill (default: the problem's
    ring pair traffic plus its fixed traffic, as :func:`solvers.ocs_repair.respect_ocs`).
    ``time_s``: CP-SAT's deterministic time limit of the placement check; ``work``
    (:class:`~solvers.model.ocs_layers.PlacementWork`) is charged what CP-SAT used.

    Examples
    --------
    A triangle on two ports per server does not fit one OCS per port index (three port
    indices would be needed); the fit keeps two of its circuits and joins the free ports:

    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> from topoopt.fabrics import OcsLayout
    >>> ph = PhaseTraffic("x", [0], [], [], sp.csr_matrix((4, 4)))
    >>> p = DesignProblem(4, 2, 1e9, (ph,), ocs=OcsLayout(4, 2, 8))
    >>> rows, repaired = fit_circuits(p, [[0, 1, 1], [1, 2, 1], [0, 2, 1]])
    >>> repaired, rows.tolist()
    (True, [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]])
    >>> fit_circuits(p, rows)[1]
    False
    """
    rows = Circuits(circuits, problem.n).rows
    layer = problem.ocs
    if layer is None or placement_of(problem, rows, time_s, work) is not None:
        return rows, False
    dem = ocs_demand(problem) if demand is None else demand
    fixed, _ = repair_circuits(
        rows, layer, dem, problem.pair_cap, min(time_s, SEARCH_REPAIR_TIME_S), work
    )
    return Circuits(fixed, problem.n).rows, True


def _ring_demand(problem: DesignProblem, neighbours: bool) -> np.ndarray:
    """Dense symmetric server demand of the ring groups: each group's ring bytes on every pair
    of its members (spread: ``2 / m`` of them each) or on the pairs adjacent in its order
    (``neighbours``)."""
    n = problem.n
    out = np.zeros((n, n))
    for ph in problem.phases:
        for g in range(ph.n_groups):
            m = np.asarray(ph.group(g), np.int64)
            if m.size < 2:
                continue
            b = float(ph.ring_bytes[g])
            if neighbours:
                a, c = m, np.roll(m, -1)
                np.add.at(out, (a, c), b)
                np.add.at(out, (c, a), b)
            else:
                out[np.ix_(m, m)] += 2.0 * b / m.size
    np.fill_diagonal(out, 0.0)
    return out


def layer_candidates(problem: DesignProblem) -> list[tuple[str, np.ndarray]]:
    """Circuit sets built on ``problem.ocs`` (module docstring), every one placeable: the
    fixed and model-parallel demand plus the ring groups' bytes spread over their members
    (``OCS matchings``) or on the neighbours of their orders (``OCS matchings, ring order``).
    Empty without a layer or with port options (reserved or pre-wired ports).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> from topoopt.fabrics import OcsLayout
    >>> ph = PhaseTraffic("x", [0], [], [], sp.csr_matrix(np.ones((6, 6))))

    Six servers of two ports on OCSes of 3 ports (``per-rail``): port 0 of servers 0-2 on OCS
    0 and of 3-5 on OCS 1, port 1 of 0, 1, 5 on OCS 2 and of 2, 3, 4 on OCS 3; three ports
    each hold one circuit, so four circuits, one per OCS, every one placeable:

    >>> p = DesignProblem(6, 2, 1e9, (ph,), ocs=OcsLayout(6, 2, 3))
    >>> p.ocs.ocs_of.T.tolist()
    [[0, 0, 0, 1, 1, 1], [2, 2, 3, 3, 3, 2]]
    >>> nm, c = layer_candidates(p)[0]
    >>> nm, c.tolist(), placement_of(p, c)[:, 2].tolist()
    ('OCS matchings', [[0, 2, 1], [0, 5, 1], [2, 4, 1], [3, 5, 1]], [0, 2, 3, 1])
    """
    from solvers.baselines.topoopt_method import max_weight_matching

    layer = problem.ocs
    if layer is None or problem.has_port_options:
        return []
    n = problem.n
    base = ocs_demand(problem)
    base = np.asarray((base + base.T).todense()) if hasattr(base, "todense") else base + base.T
    cap0 = np.zeros((n, layer.n_ocs), np.int64)
    srv, ocs, ports = layer.slots()
    cap0[srv, ocs] = ports
    out = []
    for name, neighbours in (("OCS matchings", False), ("OCS matchings, ring order", True)):
        dem = base + _ring_demand(problem, neighbours)
        floor = 1e-6 * max(float(dem.max()), 1.0)  # every port used, lightest pairs last
        count = np.zeros((n, n), np.int64)
        cap = cap0.copy()
        rows, placed = [], []
        for o in range(layer.n_ocs):
            while True:
                idx = np.flatnonzero(cap[:, o] > 0)
                if idx.size < 2:
                    break
                iu, ju = np.triu_indices(idx.size, 1)
                a, b = idx[iu], idx[ju]
                ok = count[a, b] < problem.pair_cap
                if not ok.any():
                    break
                a, b = a[ok], b[ok]
                w = dem[a, b] / (1.0 + count[a, b]) ** 2 + floor
                got = max_weight_matching(n, a, b, w, perfect=True)
                if not got:
                    break
                for x, y in got:
                    x, y = min(x, y), max(x, y)
                    cap[x, o] -= 1
                    cap[y, o] -= 1
                    count[x, y] += 1
                    rows.append([x, y, 1])
                    placed.append([x, y, o, 1])
        if rows:
            c = Circuits(np.asarray(rows, np.int64), n).rows
            remember_placement(c, layer, placed)  # placed by construction: never searched
            out.append((name, c))
    return out
