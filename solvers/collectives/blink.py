"""Blink: a fractional packing of arborescences found by column generation over an OR-Tools LP.

Blink (Wang et al., "Blink: Fast and Generic Collectives for Distributed ML", MLSys 2020) packs
spanning trees so that a collective uses every link of an irregular topology, where rings leave
links idle. Here the trees are arborescences over the server overlay
(:mod:`solvers.collectives.overlay`): an arc ``u -> v`` loads the fabric links of the pair's
routes.

The LP (GLOP through ``pywraplp``, an iteration limit on every solve, its status checked):
``maximise lambda`` subject to ``sum_k x[r, k] >= lambda`` for every root ``r`` and direction
(out-trees broadcast the root's data, in-trees reduce data to it), and
``sum x[r, k] * load_k(l) <= capacity_l`` on every fabric link ``l``. ``lambda`` is the rate
(bytes/s) at which every root's data moves; a collective of ``D`` bytes per root then takes
``D / lambda`` in the fluid limit. Columns are generated: given the duals ``y`` of the link rows
and ``mu`` of the root rows, the best new tree of root ``r`` is the minimum-cost arborescence
(Chu-Liu/Edmonds on a dense matrix, :func:`edmonds`) with arc costs
``sum_l y_l load(l, arc)``; it enters when its reduced cost ``mu_r - cost`` is positive. Every
iteration also gives the Lagrangian upper bound ``lambda <= y . capacity / sum_r mincost_r``,
so the packing's gap is known when the column limit stops the loop.

Roots and directions per collective: broadcast (one root, out-trees), all-gather (every member,
out-trees), reduce-scatter (every member, in-trees), all-reduce (every member, in-trees then
out-trees: reduce each shard to its owner, then broadcast it, both packings sharing the links).
The initial columns are the ring's (the path ``r, r+1, ..`` from every root, which is the fluid
ring) and the fewest-hop trees, so the packing starts at the ring's rate or better.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.collectives.overlay import Overlay
from solvers.collectives.schedule import Tree
from traffic.errors import InputError

__all__ = [
    "Packing",
    "PackingStopped",
    "pack_trees",
    "roots_and_directions",
    "edmonds",
    "LP_ITERATION_LIMIT",
]

LP_ITERATION_LIMIT = 200_000
"""Simplex iterations allowed per LP solve (deterministic limit)."""

_EPS = 1e-9


@dataclass(frozen=True)
class Packing:
    """A fractional tree packing.

    Attributes
    ----------
    trees : tuple of Tree
        Trees with positive weight; ``share`` is the fraction of its root's data.
    rate : float
        ``lambda``, bytes/s per root and direction.
    upper_bound : float
        Lagrangian bound on the best rate (``rate <= upper_bound``).
    iterations : int
        Column-generation rounds.
    status : str
        ``optimal`` (no improving column), ``converged`` (the Lagrangian bound within
        ``gap_tol`` of the rate), ``column-limit`` (stopped by the round limit), ``lp-limit``
        (a master LP stopped on its iteration limit: the packing of the last optimal one).
    columns : int
        Trees generated.
    """

    trees: tuple[Tree, ...]
    rate: float
    upper_bound: float
    iterations: int
    status: str
    columns: int

    @property
    def gap(self) -> float:
        return max(0.0, 1.0 - self.rate / self.upper_bound) if self.upper_bound > 0 else 0.0


def roots_and_directions(collective: str, n: int, root: int = 0) -> list[tuple[int, bool]]:
    """``(root, inward)`` commodities of a collective's packing.

    >>> roots_and_directions("broadcast", 4, 2), len(roots_and_directions("all-reduce", 4))
    ([(2, False)], 8)
    """
    if collective == "broadcast":
        return [(root, False)]
    if collective == "all-gather":
        return [(r, False) for r in range(n)]
    if collective == "reduce-scatter":
        return [(r, True) for r in range(n)]
    if collective == "all-reduce":
        return [(r, True) for r in range(n)] + [(r, False) for r in range(n)]
    raise InputError("collective", collective, "broadcast, all-gather, reduce-scatter, all-reduce")


def _tree_arcs(ov: Overlay, parent: np.ndarray, inward: bool) -> np.ndarray:
    v = np.flatnonzero(parent >= 0)
    p = parent[v]
    return ov.arc(v, p) if inward else ov.arc(p, v)


def edmonds(cost: np.ndarray, root: int) -> np.ndarray:
    """Minimum-cost arborescence out of ``root`` of a dense cost matrix (Chu-Liu/Edmonds).

    ``cost[u, v]`` is the cost of arc ``u -> v`` (``inf`` when absent). Returns the parent of
    every node (``-1`` at the root). Each level picks every node's cheapest incoming arc; a
    cycle among them is contracted (arcs into it cost their excess over the cycle arc they
    replace) and the contracted problem solved, then expanded. Ties go to the lowest node id.

    Examples
    --------
    >>> c = np.array([[np.inf, 1.0, 5.0], [np.inf, np.inf, 1.0], [np.inf, 1.0, np.inf]])
    >>> edmonds(c, 0).tolist()
    [-1, 0, 1]
    """
    w = np.array(cost, dtype=np.float64)
    n = w.shape[0]
    np.fill_diagonal(w, np.inf)
    w[:, root] = np.inf
    parent = np.argmin(w, axis=0)
    parent[root] = -1
    if np.any(~np.isfinite(w[parent[np.arange(n) != root], np.flatnonzero(np.arange(n) != root)])):
        raise InputError("overlay", "a node no arc reaches", "a connected overlay")
    # a cycle of the cheapest incoming arcs
    state = np.zeros(n, np.int64)  # 0 unseen, 1 on the current walk, 2 done
    cycle = None
    for s0 in range(n):
        walk, v = [], s0
        while v >= 0 and state[v] == 0:
            state[v] = 1
            walk.append(v)
            v = parent[v]
        if v >= 0 and state[v] == 1:
            cycle = walk[walk.index(v) :]
        for u in walk:
            state[u] = 2
        if cycle is not None:
            break
    if cycle is None:
        return parent.astype(np.int64)
    in_c = np.zeros(n, bool)
    in_c[cycle] = True
    rest = np.flatnonzero(~in_c)
    m = rest.shape[0]
    idx = np.full(n, -1, np.int64)
    idx[rest] = np.arange(m)
    cyc = np.asarray(cycle, np.int64)
    w2 = np.full((m + 1, m + 1), np.inf)
    w2[:m, :m] = w[np.ix_(rest, rest)]
    excess = w[np.ix_(rest, cyc)] - w[parent[cyc], cyc][None, :]  # arcs into the cycle
    entry = np.argmin(excess, axis=1)
    w2[:m, m] = excess[np.arange(m), entry]
    leave = np.argmin(w[np.ix_(cyc, rest)], axis=0)  # arcs out of the cycle
    w2[m, :m] = w[cyc[leave], rest]
    sub = edmonds(w2, int(idx[root]) if not in_c[root] else m)
    out = parent.astype(np.int64).copy()
    for j, v in enumerate(rest):
        p = sub[j]
        out[v] = -1 if p < 0 else (cyc[leave[j]] if p == m else rest[p])
    p = sub[m]
    if p >= 0:  # the arc into the cycle replaces one cycle arc
        u = rest[p]
        out[cyc[entry[p]]] = u
    return out


def _min_arborescence(ov: Overlay, cost: np.ndarray, root: int, inward: bool) -> np.ndarray:
    """Parent array of a minimum-cost arborescence out of (or into) ``root``."""
    w = np.full((ov.n, ov.n), np.inf)
    if inward:  # an in-tree to r is an out-tree from r in the reversed overlay
        w[ov.dst, ov.src] = cost
    else:
        w[ov.src, ov.dst] = cost
    return edmonds(w, root)


def _fewest_hop_tree(ov: Overlay, root: int, inward: bool) -> np.ndarray:
    hops = np.asarray(ov.load.sum(axis=0)).ravel()  # links per arc: a proxy of hop count
    return _min_arborescence(ov, hops + 1e-6 * np.arange(ov.n_arcs), root, inward)


def _ring_tree(n: int, root: int, inward: bool) -> np.ndarray:
    order = (root + np.arange(n)) % n
    parent = np.full(n, -1, np.int64)
    parent[order[1:]] = order[:-1]
    if inward:  # the reduce chain r+1 -> r+2 -> ... -> r (ring reduce-scatter direction)
        order = (root + 1 + np.arange(n)) % n
        parent = np.full(n, -1, np.int64)
        parent[order[:-1]] = order[1:]
    return parent


class PackingStopped(RuntimeError):
    """The tree-packing LP stopped without an optimum (GLOP's iteration limit: status 4,
    ABNORMAL, ...) before any packing was found; callers keep their rings."""

    def __init__(self, status: int):
        super().__init__(f"tree-packing LP stopped with status {status}")
        self.status = status


def _solve_status(solver) -> int:
    """``solver.Solve()`` (one place, so that a test can stand in for a limit)."""
    return solver.Solve()


class _Master:
    """The restricted master LP, kept between rounds: new trees enter as new columns (GLOP
    re-solves from its previous basis)."""

    def __init__(self, cap: np.ndarray, n_commodities: int):
        from ortools.linear_solver import pywraplp

        self.pywraplp = pywraplp
        self.solver = pywraplp.Solver.CreateSolver("GLOP")
        if self.solver is None:  # pragma: no cover - GLOP ships with OR-Tools
            raise RuntimeError("OR-Tools GLOP is not available")
        self.solver.SetSolverSpecificParametersAsString(
            f"max_number_of_iterations: {LP_ITERATION_LIMIT}"
        )
        inf = self.solver.infinity()
        self.cap = cap
        self.lam = self.solver.NumVar(0.0, inf, "lambda")
        self.rows: dict[int, object] = {}
        self.com = []
        for _ in range(n_commodities):  # lambda - sum_k x[c, k] <= 0
            ct = self.solver.Constraint(-inf, 0.0)
            ct.SetCoefficient(self.lam, 1.0)
            self.com.append(ct)
        self.xs = []
        self.solver.Objective().SetCoefficient(self.lam, 1.0)
        self.solver.Objective().SetMaximization()

    def add(self, c: int, col: _Col) -> None:
        x = self.solver.NumVar(0.0, self.solver.infinity(), f"x{len(self.xs)}")
        for l_id, val in zip(col.indices.tolist(), col.data.tolist(), strict=True):
            row = self.rows.get(l_id)
            if row is None:
                row = self.rows[l_id] = self.solver.Constraint(
                    -self.solver.infinity(), float(self.cap[l_id])
                )
            row.SetCoefficient(x, val)
        self.com[c].SetCoefficient(x, -1.0)
        self.xs.append(x)

    def solve(self):
        status = _solve_status(self.solver)
        if status != self.pywraplp.Solver.OPTIMAL:
            raise PackingStopped(status)
        y = np.zeros(self.cap.shape[0])
        for l_id, ct in self.rows.items():
            y[l_id] = max(0.0, ct.dual_value())
        mu = np.array([max(0.0, ct.dual_value()) for ct in self.com])
        x = np.array([v.solution_value() for v in self.xs])
        return self.lam.solution_value(), x, y, mu


def pack_trees(
    ov: Overlay,
    collective: str,
    *,
    root: int = 0,
    max_rounds: int = 60,
    tol: float = 1e-6,
    gap_tol: float = 1e-6,
) -> Packing:
    """Column generation for the tree packing of ``collective`` on ``ov`` (module docstring).

    Parameters
    ----------
    ov : Overlay
    collective : str
        broadcast, all-gather, reduce-scatter or all-reduce.
    root : int
        Root of a broadcast.
    max_rounds : int
        Column-generation rounds (the deterministic work limit); the packing found so far is
        returned when it is reached (``status == "column-limit"``).
    tol : float
        Relative reduced cost under which a column does not enter.
    gap_tol : float
        Stop when the Lagrangian bound is within this fraction of the rate
        (``status == "converged"``).

    Examples
    --------
    On a 4-server ring of 1 GB/s links, the best all-gather rate is ``2 GB/s / 3`` per root
    (each server's 2 GB/s ingress receives 3 shards): the bidirectional ring.

    >>> from topoopt.fabrics import torus
    >>> from solvers.collectives.overlay import overlay
    >>> p = pack_trees(overlay(torus("4", 1e9)), "all-gather")
    >>> round(p.rate / 1e9, 6), p.status
    (0.666667, 'optimal')
    """
    n = ov.n
    commodities = roots_and_directions(collective, n, root)
    cols: list[tuple[int, np.ndarray]] = []
    keys: set[tuple[int, bytes]] = set()

    scale = float(ov.capacity.max())  # the LP in units of the largest capacity (well scaled)
    cap = ov.capacity / scale
    master = _Master(cap, len(commodities))

    def add(c: int, parent: np.ndarray) -> bool:
        key = (c, parent.tobytes())
        if key in keys:
            return False
        keys.add(key)
        cols.append((c, parent))
        arcs = _tree_arcs(ov, parent, commodities[c][1])
        ld = np.asarray(ov.load[:, arcs].sum(axis=1)).ravel()
        nz = np.flatnonzero(ld)
        master.add(c, _Col(nz, ld[nz]))
        return True

    for c, (r, inward) in enumerate(commodities):
        add(c, _ring_tree(n, r, inward))
        add(c, _fewest_hop_tree(ov, r, inward))
    status, upper, rounds = "column-limit", np.inf, 0
    lam, x = 0.0, np.zeros(0)
    for it in range(1, max_rounds + 1):
        rounds = it
        try:
            lam, x, y, mu = master.solve()
        except PackingStopped:
            if it == 1:  # no packing at all: the caller falls back to rings
                raise
            status, rounds = "lp-limit", it - 1  # the last optimal master's packing
            break
        arc_cost = ov.load.T @ y
        added, mincost = 0, 0.0
        for c, (r, inward) in enumerate(commodities):
            parent = _min_arborescence(ov, arc_cost, r, inward)
            cost = float(arc_cost[_tree_arcs(ov, parent, inward)].sum())
            mincost += cost
            if mu[c] - cost > tol * max(mu[c], _EPS) and add(c, parent):
                added += 1
        if mincost > _EPS:
            upper = min(upper, float(y @ cap) / mincost)
        if added == 0:
            status = "optimal"
            break
        if upper <= lam * (1 + gap_tol):
            status = "converged"
            break
    if status == "optimal":
        upper = min(upper, lam) if np.isfinite(upper) else lam
    trees = []
    for (c, parent), w in zip(cols[: len(x)], x, strict=True):
        if w > _EPS * max(lam, 1.0):
            r, inward = commodities[c]
            trees.append((c, r, inward, parent, w))
    tot = np.zeros(len(commodities))
    for c, _, _, _, w in trees:
        tot[c] += w
    out = tuple(
        Tree(r, tuple(int(v) for v in parent), float(w / tot[c]), inward)
        for c, r, inward, parent, w in trees
    )
    return Packing(
        out, float(lam) * scale, float(max(upper, lam)) * scale, rounds, status, len(cols)
    )


@dataclass(frozen=True)
class _Col:
    indices: np.ndarray
    data: np.ndarray
