"""Circuits on an optical layer of finite-radix OCSes (:class:`~topoopt.fabrics.OcsLayout`).

A circuit between servers ``u`` and ``v`` occupies one port of each on one OCS; server ``s`` has
``c[s, o]`` ports on OCS ``o`` (:meth:`OcsLayout.slots`). *Placing* circuits ``[u, v, k]`` is
choosing ``y[r, o] >= 0`` circuits of row ``r`` on each OCS ``o``:

1. ``sum_o y[r, o] = k_r`` for every row (every circuit is placed);
2. ``sum_{r : s in r} y[r, o] <= c[s, o]`` for every server ``s`` and OCS ``o`` (ports);
3. ``y[r, o] = 0`` unless both ends have a port on ``o`` (reachability).

With one OCS group per port index (``per-rail``) and ``n <= R`` this is a proper edge colouring
of the circuit multigraph with ``d`` colours, which a multigraph of maximum degree ``d`` does not
always have (a triangle with ``d = 2``). :func:`place_circuits` tries a greedy placement
(heaviest rows first, each circuit on the OCS with the most ports left at both ends), then a
constructive one (:func:`place_by_planes`: a list edge colouring with the port indices as
colours, one maximum matching per port index, most constrained circuits first, completed by
Kempe-chain flips; sound on every layout, as a circuit on port ``i`` of both ends sits on the OCS
both ports land on; with at most one port per server and OCS, as ``per-rail``, then an exact
colouring search with the OCSes as colours, :func:`colour_by_ocs`, which also refutes), and
only then solves 1-3 exactly with CP-SAT, hinted with the best partial
placement, on one worker with a fixed seed under a *deterministic* time limit and no wall-clock
limit (the status is always checked), so the same circuits get the same answer on any machine
and under any load. :func:`repair_circuits`
keeps the largest placeable subset (CP-SAT, 1 as ``<=``, maximise the placed circuits) and fills
the ports left free with circuits on common OCSes, heaviest demand first. :func:`check_ocs`
refuses a design whose circuits do not fit. A placement known by construction (a repair's, the
joint search's swaps) is remembered (:func:`remember_placement`) and checked rather than
searched for again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.ocs_layout import OcsLayout
from traffic.errors import InputError

__all__ = [
    "Placement",
    "place_circuits",
    "repair_circuits",
    "check_ocs",
    "remember_placement",
    "placement_holds",
    "place_by_planes",
    "colour_by_ocs",
    "PlacementWork",
]

TIME_LIMIT_S = 30.0
"""Deterministic time (CP-SAT's ``max_deterministic_time``, about seconds of one core) of one
CP-SAT placement; no wall-clock limit is set, so the answer does not depend on the machine."""

KNOWN_PLACEMENTS = 512
"""Placements remembered per process (:func:`remember_placement`), oldest dropped first."""

_KNOWN: dict[tuple, np.ndarray] = {}


def _known_key(rows: np.ndarray, layer: OcsLayout) -> tuple:
    return (layer.servers, layer.degree, layer.radix, layer.layout, rows.tobytes())


def remember_placement(circuits, layer: OcsLayout, placement: np.ndarray) -> None:
    """Remember that ``placement`` (rows ``[u, v, ocs, count]``) places ``circuits`` on
    ``layer`` (a repair's or a search's, which know it by construction): a later
    :func:`place_circuits` of the same circuits checks it (:func:`placement_holds`) and returns
    it instead of searching again (at 256 servers x 8 ports on 136-port OCSes CP-SAT may not
    decide within :data:`TIME_LIMIT_S` what a repair built)."""
    rows = Circuits(circuits, layer.servers).rows
    if len(_KNOWN) >= KNOWN_PLACEMENTS:
        _KNOWN.pop(next(iter(_KNOWN)))
    pl = np.asarray(placement, np.int64).reshape(-1, 4)
    lo, hi = np.minimum(pl[:, 0], pl[:, 1]), np.maximum(pl[:, 0], pl[:, 1])
    pl = np.column_stack([lo, hi, pl[:, 2:]])
    _KNOWN[_known_key(rows, layer)] = _merge(pl, layer)  # one row per (pair, OCS), sorted


def placement_holds(circuits, layer: OcsLayout, placement: np.ndarray) -> bool:
    """Whether ``placement`` (rows ``[u, v, ocs, count]``) places exactly ``circuits`` on
    ``layer``: constraints 1-3 of the module docstring, checked (no search).

    >>> layer = OcsLayout(4, 2, 2)
    >>> placement_holds([[0, 1, 1]], layer, np.array([[0, 1, 0, 1]]))
    True
    >>> placement_holds([[0, 1, 1]], layer, np.array([[0, 1, 2, 1]]))  # 1 has no port on OCS 2
    False
    """
    rows = Circuits(circuits, layer.servers).rows
    pl = np.asarray(placement, np.int64).reshape(-1, 4)
    if pl.size and (pl[:, 2].min() < 0 or pl[:, 2].max() >= layer.n_ocs or pl[:, 3].min() < 0):
        return False
    got = {}
    for u, v, _, k in pl.tolist():
        key = (min(u, v), max(u, v))
        got[key] = got.get(key, 0) + k
    want = {(u, v): k for u, v, k in rows.tolist()}
    if {k: v for k, v in got.items() if v} != want:  # (1)
        return False
    used = Placement(pl, "check").ports_used(layer)
    return bool(np.all(used <= _capacity(layer)))  # (2), and (3): no port, no capacity


@dataclass
class PlacementWork:
    """What placements cost (a running count, :func:`place_circuits` adds to it): ``checks``
    placements asked for (a remembered one not counted), ``constructive`` of them placed by
    :func:`place_by_planes`, ``cp_sat_calls`` CP-SAT solves and their ``deterministic_s``
    (CP-SAT's deterministic time, about seconds of one core: the work a search charges)."""

    checks: int = 0
    constructive: int = 0
    cp_sat_calls: int = 0
    deterministic_s: float = 0.0


class Placement:
    """Circuits placed on OCSes: ``rows`` ``int64 (m, 4)`` of ``[u, v, ocs, count]``; ``status``
    ``"greedy"``, ``"exact"`` (CP-SAT proved it), or for a repair ``"repaired"``."""

    def __init__(self, rows: np.ndarray, status: str):
        self.rows = np.asarray(rows, np.int64).reshape(-1, 4)
        self.status = status

    def ports_used(self, layer: OcsLayout) -> np.ndarray:
        """``int64 (servers, n_ocs)``: ports each server uses on each OCS."""
        out = np.zeros((layer.servers, layer.n_ocs), np.int64)
        r = self.rows
        np.add.at(out, (r[:, 0], r[:, 2]), r[:, 3])
        np.add.at(out, (r[:, 1], r[:, 2]), r[:, 3])
        return out

    def port_rows(self, layer: OcsLayout) -> np.ndarray:
        """``int64 (circuits, 5)``: one row ``[u, p, v, q, ocs]`` per circuit, port ``p`` of
        server ``u`` joined to port ``q`` of server ``v`` on OCS ``ocs``.

        Each server's ports on an OCS (:attr:`OcsLayout.ocs_of`) are handed out lowest first,
        to the placement rows in order (sorted by ``u``, ``v``, OCS); a placement that uses more
        ports of a server on an OCS than it has there is refused.

        Raises
        ------
        InputError
            A server short of ports on an OCS, or an OCS index outside the layer.

        Examples
        --------
        Two OCSes per port index (``per-rail``, ``k = 2``, ``shift = 1``): port 0 of servers
        0, 1 on OCS 0 and of 2, 3 on OCS 1; port 1 of servers 0, 3 on OCS 2 and of 1, 2 on
        OCS 3.

        >>> layer = OcsLayout(4, 2, 2)
        >>> layer.ocs_of.tolist()
        [[0, 2], [0, 3], [1, 3], [1, 2]]
        >>> pl = place_circuits([[0, 1, 1], [2, 3, 1], [0, 3, 1]], layer)
        >>> pl.port_rows(layer).tolist()
        [[0, 0, 1, 0, 0], [0, 1, 3, 1, 2], [2, 0, 3, 0, 1]]
        """
        n, d = layer.servers, layer.degree
        ocs_of = layer.ocs_of
        r = self.rows
        if r.size and (r[:, 2].min() < 0 or r[:, 2].max() >= layer.n_ocs):
            raise InputError("placement.ocs", int(r[:, 2].max()), f"0..{layer.n_ocs - 1}")
        free: dict[tuple[int, int], list[int]] = {}
        for s in range(n):
            for p in range(d - 1, -1, -1):  # popped from the end: lowest port first
                free.setdefault((s, int(ocs_of[s, p])), []).append(p)
        out = []
        for u, v, o, k in r.tolist():
            for _ in range(k):
                ends = []
                for s in (u, v):
                    ports = free.get((s, o))
                    if not ports:
                        raise InputError(
                            f"placement (server {s} on OCS {o})", "one port more",
                            f"at most its {int(np.sum(ocs_of[s] == o))} ports on that OCS",
                        )  # fmt: skip
                    ends.append(ports.pop())
                out.append([u, ends[0], v, ends[1], o])
        return np.asarray(out, np.int64).reshape(-1, 5)


def _capacity(layer: OcsLayout) -> np.ndarray:
    cap = np.zeros((layer.servers, layer.n_ocs), np.int64)
    s, o, c = layer.slots()
    cap[s, o] = c
    return cap


def _greedy(rows: np.ndarray, cap: np.ndarray):
    """Place heaviest rows first, each circuit on the OCS with most ports left at both ends;
    returns ``(placed [u, v, o, 1] rows, unplaced [u, v, k] rows, ports left)``."""
    free = cap.copy()
    placed, left = [], []
    order = np.lexsort((rows[:, 1], rows[:, 0], -rows[:, 2]))
    for u, v, k in rows[order].tolist():
        miss = 0
        for _ in range(k):
            both = np.minimum(free[u], free[v])
            o = int(np.argmax(both))
            if both[o] <= 0:
                miss += 1
                continue
            free[u, o] -= 1
            free[v, o] -= 1
            placed.append([u, v, o, 1])
        if miss:
            left.append([u, v, miss])
    return (
        np.asarray(placed, np.int64).reshape(-1, 4),
        np.array(left, np.int64) if left else np.zeros((0, 3), np.int64),
        free,
    )


@dataclass(frozen=True, eq=False)
class PlanePlacement:
    """:func:`place_by_planes`' result: ``rows`` ``[u, v, ocs, count]`` of the circuits it
    placed, and whether that is all of them (``complete``)."""

    rows: np.ndarray
    complete: bool


def place_by_planes(circuits, layer: OcsLayout) -> PlanePlacement:
    """A constructive placement: the circuits as a list edge colouring of the port indices
    (:mod:`solvers.model.list_colouring`), a circuit on port ``i`` of both ends sitting on the
    OCS both ports land on (allowed when they land on the same one). Port indices are taken
    one at a time (in order, then in reverse), each a maximum matching of the circuits left
    that may use it, the circuits with fewest port indices left preferred; the circuits left
    over are placed by Kempe-chain flips
    (:func:`solvers.model.list_colouring.colour_by_matchings`).
    Sound on every layout; ``complete`` False means only that this construction did not place
    them all (CP-SAT decides). Deterministic.

    Examples
    --------
    A square on two ports, one OCS per port index: two matchings.

    >>> pl = place_by_planes([[0, 1, 1], [1, 2, 1], [2, 3, 1], [0, 3, 1]], OcsLayout(4, 2, 8))
    >>> pl.complete, pl.rows.tolist()
    (True, [[0, 1, 0, 1], [0, 3, 1, 1], [1, 2, 1, 1], [2, 3, 0, 1]])
    """
    from solvers.model.list_colouring import colour_by_matchings, expand_circuits

    n, d = layer.servers, layer.degree
    units = layer.ocs_of.T  # (d, n): the OCS of every server's port i
    u, v = expand_circuits(Circuits(circuits, n))
    allowed = units[:, u] == units[:, v]
    best = None
    for order in (range(d), range(d - 1, -1, -1)):
        port = colour_by_matchings(u, v, allowed, n, order)
        if best is None or (port >= 0).sum() > (best >= 0).sum():
            best = port
        if np.all(best >= 0):
            break
    k = best >= 0
    rows = np.column_stack([u[k], v[k], units[best[k], u[k]], np.ones(int(k.sum()), np.int64)])
    return PlanePlacement(_merge(rows, layer), bool(np.all(k)))


COLOURING_STEPS = 2_000
"""Backtracking steps of :func:`colour_by_ocs` (deterministic; shared by its restarts)."""


@dataclass(frozen=True, eq=False)
class OcsColouring:
    """:func:`colour_by_ocs`' result: ``rows`` ``[u, v, ocs, count]`` of the circuits it
    placed, ``complete`` (all of them) and ``proven`` (complete, or no placement exists)."""

    rows: np.ndarray
    complete: bool
    proven: bool


def colour_by_ocs(circuits, layer: OcsLayout, steps: int = COLOURING_STEPS):
    """The placement as a list edge colouring with the OCSes as colours, searched exactly
    (:func:`solvers.model.list_colouring.assign_ports`, within ``steps``): exact when every
    server has at most one port on each OCS (``per-rail``), as a circuit then takes the one
    port of each end on its OCS; None on a layer where a server has two ports on one OCS.

    >>> tri = [[0, 1, 1], [1, 2, 1], [0, 2, 1]]
    >>> got = colour_by_ocs(tri, OcsLayout(3, 2, 8))  # two OCSes, one per port index
    >>> got.complete, got.proven
    (False, True)
    >>> colour_by_ocs(tri, OcsLayout(3, 3, 8)).rows.tolist()
    [[0, 1, 0, 1], [0, 2, 1, 1], [1, 2, 2, 1]]
    """
    from solvers.model.list_colouring import assign_ports

    n = layer.servers
    cap = _capacity(layer)
    if cap.max() > 1:
        return None
    # colour o allowed for u-v iff both have a port on OCS o: equal "units" there, else the
    # server's own negative id (never equal to another server's)
    units = np.where(cap.T > 0, 0, -1 - np.arange(n)[None, :])
    a = assign_ports(Circuits(circuits, n), units, steps=steps)
    k = a.port >= 0
    rows = np.column_stack([a.u[k], a.v[k], a.port[k], np.ones(int(k.sum()), np.int64)])
    return OcsColouring(_merge(rows, layer), a.complete, a.proven)


def _merge(rows: np.ndarray, layer: OcsLayout) -> np.ndarray:
    if not rows.size:
        return rows.reshape(0, 4)
    key = (rows[:, 0] * layer.servers + rows[:, 1]) * layer.n_ocs + rows[:, 2]
    u, inv = np.unique(key, return_inverse=True)
    cnt = np.bincount(inv, weights=rows[:, 3]).astype(np.int64)
    o = u % layer.n_ocs
    pair = u // layer.n_ocs
    return np.column_stack([pair // layer.servers, pair % layer.servers, o, cnt])


def _cp_sat(rows, cap, maximise: bool, time_limit_s: float, hint=None, work=None):
    """CP-SAT on constraints 1-3 (1 as ``<=`` and the placed count maximised when
    ``maximise``); returns ``(status, [u, v, o, y] rows)``, status ``optimal``, ``feasible``,
    ``infeasible`` or ``unknown``. One worker, seed 0, ``time_limit_s`` of deterministic time
    and no wall-clock limit: the same answer on any machine. ``hint``: ``[u, v, o, count]``
    rows of a partial placement (a solution hint); ``work`` (:class:`PlacementWork`) is
    charged the deterministic time used."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    y = {}
    at = {}  # (server, ocs) -> variables using one of its ports
    for r, (u, v, k) in enumerate(rows.tolist()):
        both = np.flatnonzero((cap[u] > 0) & (cap[v] > 0))
        for o in both.tolist():
            ub = min(k, int(cap[u, o]), int(cap[v, o]))
            x = m.NewIntVar(0, ub, f"y{r}_{o}")
            y[r, o] = x
            at.setdefault((u, o), []).append(x)
            at.setdefault((v, o), []).append(x)
        mine = [y[r, o] for o in both.tolist()]
        if maximise:
            m.Add(sum(mine) <= k)  # (1) as <=
        elif not mine:
            return "infeasible", np.zeros((0, 4), np.int64)
        else:
            m.Add(sum(mine) == k)  # (1)
    for (s, o), xs in at.items():
        m.Add(sum(xs) <= int(cap[s, o]))  # (2); (3) by construction of y
    if maximise:
        m.Maximize(sum(y.values()))
    if hint is not None and len(hint):
        given = {}
        for u, v, o, k in np.asarray(hint, np.int64).reshape(-1, 4).tolist():
            given[min(u, v), max(u, v), o] = given.get((min(u, v), max(u, v), o), 0) + k
        for (r, o), x in y.items():
            u, v = int(rows[r, 0]), int(rows[r, 1])
            ub = min(int(rows[r, 2]), int(cap[u, o]), int(cap[v, o]))
            m.AddHint(x, min(given.get((u, v, o), 0), ub))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    solver.parameters.max_deterministic_time = float(time_limit_s)
    st = solver.Solve(m)
    if work is not None:
        work.cp_sat_calls += 1
        work.deterministic_s += float(solver.deterministic_time)
    name = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible",
            cp_model.INFEASIBLE: "infeasible"}.get(st, "unknown")  # fmt: skip
    if name not in ("optimal", "feasible"):
        return name, np.zeros((0, 4), np.int64)
    out = [
        [rows[r, 0], rows[r, 1], o, solver.Value(x)]
        for (r, o), x in sorted(y.items())
        if solver.Value(x) > 0
    ]
    return name, np.asarray(out, np.int64).reshape(-1, 4)


def place_circuits(
    circuits, layer: OcsLayout, time_limit_s: float = TIME_LIMIT_S, work=None
) -> Placement | None:
    """Place ``circuits`` (``[u, v, count]`` rows) on ``layer``'s OCSes; None when they do not
    fit (proved by CP-SAT). Greedy, then :func:`place_by_planes`, then CP-SAT (module
    docstring) under ``time_limit_s`` of deterministic time; ``work``
    (:class:`PlacementWork`) counts the steps taken and CP-SAT's deterministic time.

    Raises
    ------
    InputError
        When CP-SAT neither places nor refutes them within ``time_limit_s`` of deterministic
        time.

    Examples
    --------
    A triangle needs three port indices; with two ports per server it does not fit one OCS
    group per port (``per-rail``), and it does on a single OCS holding every port (``packed``):

    >>> tri = [[0, 1, 1], [1, 2, 1], [0, 2, 1]]
    >>> place_circuits(tri, OcsLayout(3, 2, 8)) is None
    True
    >>> place_circuits(tri, OcsLayout(3, 2, 8, "packed")).rows.tolist()
    [[0, 1, 0, 1], [0, 2, 0, 1], [1, 2, 0, 1]]
    """
    rows = Circuits(circuits, layer.servers).rows
    known = _KNOWN.get(_known_key(rows, layer))
    if known is not None and placement_holds(rows, layer, known):
        return Placement(known, "known")
    cap = _capacity(layer)
    placed, left, _ = _greedy(rows, cap)
    if work is not None:
        work.checks += 1
    if not left.size:
        return Placement(_merge(placed, layer), "greedy")
    if not np.all(layer.reachable()[rows[:, 0], rows[:, 1]]):
        return None  # a pair without a common OCS (constraint 3)
    planes = place_by_planes(rows, layer)
    if planes.complete:
        if work is not None:
            work.constructive += 1
        return Placement(planes.rows, "constructive")
    if cap.max() <= 1:  # one port per server and OCS (per-rail): an exact colouring search
        got = colour_by_ocs(rows, layer)
        if got is not None and got.proven:
            if work is not None:
                work.constructive += 1
            return Placement(got.rows, "constructive") if got.complete else None
    best = planes.rows if planes.rows[:, 3].sum() > placed.shape[0] else _merge(placed, layer)
    status, got = _cp_sat(rows, cap, False, time_limit_s, hint=best, work=work)
    if status == "infeasible":
        return None
    if status == "unknown":
        raise InputError(
            f"circuits (OCS placement on {layer.n_ocs} OCSes)",
            int(rows[:, 2].sum()),
            f"a placement decided within {time_limit_s:g} s (CP-SAT stopped undecided)",
        )
    return Placement(_merge(got, layer), "exact")


def repair_circuits(
    circuits,
    layer: OcsLayout,
    demand: sp.spmatrix | None = None,
    pair_cap: int | None = None,
    time_limit_s: float = TIME_LIMIT_S,
    work: PlacementWork | None = None,
) -> tuple[np.ndarray, Placement]:
    """The largest placeable subset of ``circuits``, then the ports left free filled with
    circuits between servers sharing an OCS, heaviest symmetric ``demand`` first (ties: lowest
    pair), at most ``pair_cap`` circuits per pair (default ``degree``). Returns the circuits
    (canonical ``[u, v, count]``) and their placement. The subset kept is the largest of the
    greedy placement's, :func:`place_by_planes`' and CP-SAT's (``time_limit_s`` of
    deterministic time, charged to ``work``; not called when the construction placed all;
    CP-SAT's on a tie with the construction's).

    Examples
    --------
    >>> c, pl = repair_circuits([[0, 1, 1], [1, 2, 1], [0, 2, 1]], OcsLayout(4, 2, 8))
    >>> c.tolist(), pl.status
    ([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]], 'repaired')
    """
    n = layer.servers
    rows = Circuits(circuits, n).rows
    cap = _capacity(layer)
    placed, left, free = _greedy(rows, cap)
    if left.size:
        planes = place_by_planes(rows, layer)
        status, got = "constructive", planes.rows
        if not planes.complete:  # CP-SAT's largest subset, the construction's if larger
            status, got = _cp_sat(rows, cap, True, time_limit_s, work=work)
            if status not in ("optimal", "feasible") or planes.rows[:, 3].sum() > got[:, 3].sum():
                status, got = "constructive", planes.rows
        if got[:, 3].sum() > placed[:, 3].sum():
            placed = got
            free = cap - Placement(got, status).ports_used(layer)
    placed = _merge(placed, layer)
    pair_cap = layer.degree if pair_cap is None else int(pair_cap)
    dem = sp.csr_matrix((n, n)) if demand is None else sp.csr_matrix(demand)
    w = (dem + dem.T).toarray()
    count = np.zeros((n, n), np.int64)
    np.add.at(count, (placed[:, 0], placed[:, 1]), placed[:, 3])
    added = []
    for o in range(layer.n_ocs):  # one OCS at a time: its servers with free ports
        while True:
            idx = np.flatnonzero(free[:, o] > 0)
            if idx.size < 2:
                break
            sub = w[np.ix_(idx, idx)]
            ok = np.triu(count[np.ix_(idx, idx)] < pair_cap, 1)
            if not ok.any():
                break
            flat = int(np.argmax(np.where(ok, sub, -np.inf)))
            a, b = int(idx[flat // idx.size]), int(idx[flat % idx.size])
            free[a, o] -= 1
            free[b, o] -= 1
            count[a, b] += 1
            added.append([a, b, o, 1])
    allp = _merge(np.vstack([placed, np.asarray(added, np.int64).reshape(-1, 4)]), layer)
    c = Circuits(np.column_stack([allp[:, 0], allp[:, 1], allp[:, 3]]), n).rows
    remember_placement(c, layer, allp)  # known by construction: never searched for again
    return c, Placement(allp, "repaired")


def check_ocs(design, layer: OcsLayout, time_limit_s: float = TIME_LIMIT_S) -> Placement:
    """``design``'s circuits placed on ``layer``; :class:`InputError` when they do not fit.

    >>> check_ocs([[0, 1, 1], [1, 2, 1], [0, 2, 1]], OcsLayout(3, 2, 8))
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: circuits (OCS layer per-rail, radix 8): got 3; allowed: circuits that one OCS each can hold: both ends on ports of the same OCS, at most its ports per server (6 server ports on 2 OCSes)
    """  # noqa: E501
    circuits = getattr(design, "circuits", design)
    rows = Circuits(circuits, layer.servers).rows
    pl = place_circuits(rows, layer, time_limit_s)
    if pl is None:
        raise InputError(
            f"circuits (OCS layer {layer.layout}, radix {layer.radix})",
            int(rows[:, 2].sum()),
            "circuits that one OCS each can hold: both ends on ports of the same OCS, at most "
            f"its ports per server ({layer.servers * layer.degree} server ports on "
            f"{layer.n_ocs} OCSes)",
        )
    return pl
