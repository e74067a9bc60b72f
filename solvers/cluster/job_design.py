"""One job's circuits on its own servers, realisable on the OCS layer, and its iteration time.

:func:`design_job` designs the job with a registered solver
(:func:`solvers.registry.solve`, default ``topoopt``: one-shot, deterministic, the paper's
TopologyFinder, cheap enough for dozens of jobs per event) on the job's servers, then gives
every circuit a plane (:func:`solvers.cluster.ocs.assign_ports`). When the solver's circuits are
not realisable on the units the job's ports land on, the design is *repaired*:

1. the best partial colouring is kept;
2. the freed ports are re-wired by a greedy fill that, plane by plane and inside one unit, first
   joins components and then links the pairs with the most traffic (at most ``pair_cap`` circuits
   a pair);
3. the solver runs again with all these circuits pre-wired and the ports left unused reserved
   (no port left free), so the rings and the routing are designed for the circuits that exist.

The job then runs on its own sub-fabric: circuits never leave a job, so jobs do not share links
and its iteration time is that of the job alone on these circuits
(:func:`solvers.realise.simulate_design`). ``alone_ideal_s`` is the job alone on an ideal switch
of the same per-server bandwidth (``degree * link_bandwidth``). Both simulations go through the
exact symmetry reduction (``reduction``, default on; :func:`~topoopt.flowsim.iteration.
simulate_iteration` coarsens it or turns it off where a repaired design breaks the symmetry, and
``JobDesign.reduction`` says which and why).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from solvers.cluster.ocs import OcsLayer, assign_ports
from solvers.model.design import Design
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from topoopt.flowsim.iteration import ITERATION_ONLY
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = [
    "JobDesign",
    "NotConnected",
    "design_job",
    "alone_ideal",
    "alone_ideal_s",
    "fill_ports",
    "unit_key",
]


class NotConnected(Exception):
    """The servers offered cannot connect the job on the OCS layer (try another placement)."""


@dataclass(frozen=True, eq=False)
class JobDesign:
    """One job designed on its servers.

    Attributes
    ----------
    name : str
    servers : numpy.ndarray
        Global server ids; local server ``k`` of the design is ``servers[k]``.
    workload : Workload
    problem : DesignProblem
    design : Design
        Over local servers ``0..m-1``.
    ports : numpy.ndarray
        ``int64 (E, 3)`` local rows ``[u, v, plane]``, one per unit circuit.
    repaired : int
        Unit circuits of the solver's first design that were not realisable and were re-wired.
    iteration_s, alone_ideal_s : float
        Flow-model iteration time on these circuits, and alone on an ideal switch.
    reduction : str
        ``on`` when both simulations went through the symmetry reduction, else ``off: why`` for
        the first that did not (``alone_ideal: `` before the ideal switch's reason;
        :func:`topoopt.flowsim.iteration.reduction_status`).
    """

    name: str
    servers: np.ndarray
    workload: Workload
    problem: DesignProblem
    design: Design
    ports: np.ndarray
    repaired: int
    iteration_s: float
    alone_ideal_s: float
    reduction: str = "off"

    def global_circuits(self, layer: OcsLayer) -> np.ndarray:
        """``(E, 4)`` rows ``[u, v, plane, unit]`` in global server ids (``u < v``)."""
        g = self.servers[self.ports[:, :2]]
        lo, hi = g.min(axis=1), g.max(axis=1)
        p = self.ports[:, 2]
        return np.stack([lo, hi, p, layer.units[p, lo]], axis=1)

    def circuit_set(self, layer: OcsLayer) -> Counter:
        """Multiset of ``(u, v, plane)`` global circuits (for counting changes)."""
        return Counter(tuple(r[:3]) for r in self.global_circuits(layer).tolist())

    def record(self, layer: OcsLayer, circuits: bool = True) -> dict:
        """The job as JSON-ready values (seconds, global server ids)."""
        out = {
            "name": self.name,
            "servers": self.servers.tolist(),
            "n_servers": int(self.servers.size),
            "iteration_s": self.iteration_s,
            "alone_ideal_s": self.alone_ideal_s,
            "slowdown": self.iteration_s / self.alone_ideal_s,
            "n_circuits": int(self.ports.shape[0]),
            "repaired_circuits": self.repaired,
            "reduction": self.reduction,
        }
        if circuits:
            out["circuits"] = self.global_circuits(layer).tolist()
        return out


def unit_key(units: np.ndarray) -> bytes:
    """The unit pattern of a job's servers up to renaming units (designs depend on nothing else).

    >>> unit_key(np.array([[3, 3, 5]])) == unit_key(np.array([[0, 0, 1]]))
    True
    """
    out = np.empty_like(units)
    for i, row in enumerate(units):
        _, first, inv = np.unique(row, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        out[i] = rank[inv]
    return out.astype(np.int64).tobytes() + bytes(str(units.shape), "ascii")


def _pair_weights(problem: DesignProblem) -> np.ndarray:
    """Symmetric ``(m, m)`` bytes between server pairs (fixed traffic; rings spread evenly)."""
    m = problem.n
    w = np.zeros((m, m))
    for ph in problem.phases:
        f = ph.fixed.toarray()
        w += f + f.T
        for g in range(ph.n_groups):
            s = ph.group(g)
            w[np.ix_(s, s)] += ph.ring_bytes[g] / max(s.size - 1, 1)
    np.fill_diagonal(w, 0.0)
    return w


def _components(m: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    g = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(m, m))
    return connected_components(g, directed=False)[1]


def fill_ports(
    ports: np.ndarray, units: np.ndarray, weights: np.ndarray, pair_cap: int
) -> np.ndarray:
    """Add circuits on free ports, inside units: join components first, then heaviest pairs.

    Parameters
    ----------
    ports : numpy.ndarray
        ``(E, 3)`` rows ``[u, v, plane]`` already wired.
    units : numpy.ndarray
        ``(D, m)`` unit of each server's port on each plane.
    weights : numpy.ndarray
        ``(m, m)`` symmetric traffic between pairs.
    pair_cap : int
        Most circuits on one pair.

    Returns
    -------
    numpy.ndarray
        ``ports`` with the added rows after them.

    Examples
    --------
    >>> units = np.zeros((2, 3), np.int64)
    >>> fill_ports(np.array([[0, 1, 0]]), units, np.ones((3, 3)), 1).tolist()
    [[0, 1, 0], [0, 2, 1]]
    """
    d, m = units.shape
    rows = [list(r) for r in np.asarray(ports, np.int64).reshape(-1, 3).tolist()]
    free = np.ones((m, d), bool)
    count = np.zeros((m, m), np.int64)
    for a, b, p in rows:
        free[a, p] = free[b, p] = False
        count[a, b] += 1
        count[b, a] += 1
    same = units[:, :, None] == units[:, None, :]  # (d, m, m)
    upper = np.triu(np.ones((m, m), bool), 1)
    wn = weights / (weights.max() + 1.0) if weights.size else weights
    while True:
        arr = np.asarray(rows, np.int64).reshape(-1, 3)
        comp = _components(m, arr[:, 0], arr[:, 1])
        ok = same & free.T[:, :, None] & free.T[:, None, :] & (upper & (count < pair_cap))[None]
        if not ok.any():
            break
        score = (comp[:, None] != comp[None, :]) * 2.0 + wn
        s = np.where(ok, score[None], -1.0)
        p, a, b = np.unravel_index(int(np.argmax(s)), s.shape)
        rows.append([int(a), int(b), int(p)])
        free[a, p] = free[b, p] = False
        count[a, b] += 1
        count[b, a] += 1
    return np.asarray(rows, np.int64).reshape(-1, 3)


def alone_ideal(workload: Workload, degree: int, link_bandwidth: float, reduction: bool = True):
    """The iteration (:class:`~topoopt.flowsim.iteration.IterationResult`) of ``workload``
    alone on an ideal switch of ``degree * link_bandwidth`` (:func:`topoopt.fabrics.ideal.
    ideal_bound`, the ideal row of ``compare``: one link's latency server to server, so no
    circuit design beats it for want of latency), through the symmetry reduction with
    ``reduction`` (exact)."""
    from topoopt.fabrics.ideal import ideal_bound
    from topoopt.flowsim.iteration import simulate_iteration

    fab = ideal_bound(
        workload.servers, degree, link_bandwidth, gpus_per_server=workload.gpus_per_server
    )
    return simulate_iteration(workload, fab, reduction=reduction, **ITERATION_ONLY)


def alone_ideal_s(
    workload: Workload, degree: int, link_bandwidth: float, reduction: bool = True
) -> float:
    """:func:`alone_ideal`'s iteration time, seconds."""
    return float(alone_ideal(workload, degree, link_bandwidth, reduction).iteration_s)


def _job_reduction(on_circuits, ideal) -> str:
    """``JobDesign.reduction`` of the job's two simulations (its docstring)."""
    from topoopt.flowsim.iteration import reduction_status

    mine, theirs = reduction_status(on_circuits), reduction_status(ideal)
    if mine != "on":
        return mine
    if theirs == "on":
        return "on"
    why = theirs.removeprefix("off").removeprefix(": ")
    return f"off: alone_ideal: {why}" if why else "off: alone_ideal"


def _solve(problem, solver: str, seed: int, work_limit: float | None) -> Design:
    from solvers.registry import solve

    return solve(problem, solver, seed=seed, work_limit=work_limit)


def design_job(
    name: str,
    workload: Workload,
    servers: np.ndarray,
    layer: OcsLayer,
    link_bandwidth: float,
    *,
    solver: str = "topoopt",
    seed: int = 0,
    work_limit: float | None = None,
    cache: dict | None = None,
    reduction: bool = True,
) -> JobDesign:
    """Design ``workload`` on ``servers`` of ``layer`` (module docstring).

    ``cache`` (a dict) keeps designs by (workload, unit pattern): jobs of one plan on servers
    with the same unit pattern get the same circuits, and are simulated once. ``reduction``:
    simulate through the exact symmetry reduction (module docstring).

    Raises
    ------
    NotConnected
        When no realisable design on these servers connects them.
    InputError
        When the solver refuses the job (too few servers or ports).

    Examples
    --------
    >>> from traffic.load import load_workload
    >>> w = load_workload("dlrm")
    >>> j = design_job("a", w, np.arange(16), OcsLayer.build(16, 4), 12.5e9)
    >>> j.repaired, j.ports.shape, j.iteration_s >= j.alone_ideal_s > 0
    (0, (32, 3), True)
    """
    servers = np.asarray(servers, np.int64)
    units = layer.restrict(servers)
    key = (id(workload), unit_key(units), solver, seed, work_limit, link_bandwidth, reduction)
    if cache is not None and key in cache:
        hit = cache[key]
        if isinstance(hit, NotConnected):
            raise NotConnected(f"job {name}: {hit}")
        return JobDesign(name, servers, *hit)
    d = layer.degree
    try:
        problem = DesignProblem.from_workload(workload, d, link_bandwidth)
        design = _solve(problem, solver, seed, work_limit)
    except InputError as exc:
        raise InputError(f"job {name}: {exc.field}", exc.value, exc.allowed) from None
    a = assign_ports(design.circuits, units)
    repaired = 0
    if a.complete:
        ports = a.coloured()
    else:
        kept = a.coloured()
        ports = fill_ports(kept, units, _pair_weights(problem), problem.pair_cap)
        m = servers.size
        if m > 1 and np.unique(_components(m, ports[:, 0], ports[:, 1])).size > 1:
            exc = NotConnected("its servers cannot be connected on their OCS units")
            if cache is not None:
                cache[key] = exc
                cache.setdefault("_workloads", []).append(workload)  # keeps id(workload) unique
            raise NotConnected(f"job {name}: {exc}")
        ones = np.ones((ports.shape[0], 1), np.int64)
        wired = Circuits(np.hstack([ports[:, :2], ones]), m).rows
        deg = np.bincount(ports[:, :2].ravel(), minlength=m)
        problem = DesignProblem.from_workload(
            workload, d, link_bandwidth, reserved=d - deg, prewired=wired
        )
        design = _solve(problem, solver, seed, work_limit)
        if not np.array_equal(design.circuits.rows, wired):
            a2 = assign_ports(design.circuits, units)  # pragma: no cover - solvers keep prewired
            if not a2.complete:
                raise NotConnected(f"job {name}: the re-solved design is not realisable")
            ports = a2.coloured()
        before = Counter(zip(a.u.tolist(), a.v.tolist(), strict=True))
        after = Counter((int(x), int(y)) for x, y in ports[:, :2].tolist())
        repaired = sum((before - after).values())
    from solvers.realise import simulate_design

    on_circuits = simulate_design(workload, design, problem, reduction=reduction, **ITERATION_ONLY)
    ideal = alone_ideal(workload, d, link_bandwidth, reduction)
    value = (
        workload, problem, design, ports, repaired, float(on_circuits.iteration_s),
        float(ideal.iteration_s), _job_reduction(on_circuits, ideal),
    )  # fmt: skip
    if cache is not None:
        cache[key] = value
    return JobDesign(name, servers, *value)
