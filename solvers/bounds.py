"""Lower bounds on the communication time of any circuit design for a :class:`DesignProblem`.

Three bounds, the highest is reported:

Ideal switch
    Each server has ``d`` ports of ``B`` bytes/s each way, so in phase ``p`` it needs at least
    ``max(out_u, in_u) / (d B)`` seconds to push its bytes out and take its bytes in, whatever the
    circuits, the ring orders (every ring member sends and receives the same ring bytes in any
    order) and the routing (forwarding only adds load):
    ``T_ideal = sum_p max_u max(out_pu, in_pu) / (d B)``. This is the time of a non-blocking
    switch with ``d B`` per server.

Hop counting (Moore)
    In any graph of degree ``<= d`` a server has at most ``d (d-1)^(h-1)`` others at distance
    ``h``, so sorting its fixed destinations by bytes (largest nearest) lower-bounds
    ``sum_t D_ut dist(u, t)``; every routed byte crosses at least ``dist`` links, ring bytes at
    least one, and all links together carry at most ``n d B`` bytes/s:
    ``T_p >= (sum_u sum_i D_u,(i) h_i + sum_u R_u) / (n d B)``. Tight-ish for all-to-all traffic
    where every pair cannot be a neighbour.

LP relaxation (fractional circuits)
    Circuit counts become real ``x_e >= 0`` on every server pair ``e = {u, v}``; fixed traffic is
    a multi-commodity flow (aggregated by source) and each phase's ring traffic a circulation in
    which every member sends and receives at least its ring bytes (any set of rings, in any order,
    routed any way, is such a circulation). The capacity ``B x_e T_p`` is bilinear when one ``x``
    serves all phases, so the relaxation lets each phase pick its own ``x`` and substitutes
    ``z_e = x_e T_p`` -- still a relaxation, now linear:

    .. code-block:: text

        per phase p:  min T
        (B1) sum_{e ni u} z_e <= d T                                   for every server u
        (B2) z_e <= cap_pair T                                         for every pair e
        (B3) sum_{a out of v} f_{s,a} - sum_{a into v} f_{s,a}
               = [v = s] sum_t D_st - D_sv                             for every source s, node v
        (B4) sum_{a out of u} g_a = sum_{a into u} g_a >= R_u          for every server u
        (B5) sum_s f_{s,(u,v)} + g_{(u,v)} <= B z_{uv}                 for every ordered pair

    ``T_LP = sum_p T_p``. It beats the ideal switch when traffic is one-directional (a pipeline's
    sends use one direction of a full-duplex circuit: ``T_LP = 2 T_ideal`` for a one-way ring
    pattern) and never falls below it. Its size is ``sources x n(n-1)`` columns per phase, so it
    is skipped above ``max_columns`` (reported in ``method``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.model.problem import DesignProblem, PhaseTraffic
from solvers.routing_lp import WORK_PER_NNZ, WORK_PER_NNZ_ITERATION, solve_matrix_program

__all__ = [
    "Bounds",
    "ideal_switch_bound",
    "moore_distances",
    "hop_count_bound",
    "lp_relaxation_bound",
    "lower_bound",
]


def ideal_switch_bound(problem: DesignProblem) -> np.ndarray:
    """Per-phase ideal-switch times, seconds: ``max_u max(out_u, in_u) / (d B)``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> ph = PhaseTraffic("p", [0, 4], [0, 1, 2, 3], [6.0],
    ...                   sp.csr_matrix(([4.0], ([0], [1])), shape=(4, 4)))
    >>> ideal_switch_bound(DesignProblem(4, 2, 1.0, (ph,))).tolist()  # (6 + 4) / (2 * 1)
    [5.0]
    """
    n, dB = problem.n, problem.degree * problem.link_bandwidth
    return np.array(
        [max(ph.out_bytes(n).max(), ph.in_bytes(n).max()) / dB for ph in problem.phases]
    )


def moore_distances(m: int, d: int) -> np.ndarray:
    """Least distances of ``m`` other servers in a graph of degree ``<= d``, nearest first.

    Examples
    --------
    >>> moore_distances(10, 3).tolist()  # 3 at one hop, 6 at two, the rest at three
    [1, 1, 1, 2, 2, 2, 2, 2, 2, 3]
    """
    out = np.empty(m, np.int64)
    pos, h, layer = 0, 1, d
    while pos < m:
        take = min(layer, m - pos) if layer > 0 else m - pos
        out[pos : pos + take] = h
        pos += take
        h += 1
        layer = layer * (d - 1) if d > 1 else 0
    return out


def hop_count_bound(problem: DesignProblem) -> np.ndarray:
    """Per-phase hop-counting (Moore) bounds, seconds (see the module docstring).

    Examples
    --------
    A uniform all-to-all of 1 byte per pair on 10 servers with 3 ports of 1 byte/s: each server
    has at best 3 others at one hop and 6 at two, 15 byte-hops per server against 3 bytes/s of
    links per server: 5 s (the ideal switch says 3 s; the Petersen graph attains 5 s).

    >>> import numpy as np, scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> D = sp.csr_matrix(np.ones((10, 10)) - np.eye(10))
    >>> hop_count_bound(DesignProblem(10, 3, 1.0, (PhaseTraffic("a", [0], [], [], D),))).tolist()
    [5.0]
    """
    n, d = problem.n, problem.degree
    cap = n * d * problem.link_bandwidth
    out = []
    for ph in problem.phases:
        fx = sp.csr_matrix(ph.fixed)
        total = float(ph.ring_out_bytes(n).sum())
        counts = np.diff(fx.indptr)
        for u in np.flatnonzero(counts):
            row = np.sort(fx.data[fx.indptr[u] : fx.indptr[u + 1]])[::-1]
            total += float(row @ moore_distances(row.size, d))
        out.append(total / cap)
    return np.asarray(out)


def _phase_lp(
    problem: DesignProblem,
    ph: PhaseTraffic,
    solver: str,
    time_limit: float,
    iteration_limit: int | None = None,
    work_limit: float | None = None,
):
    """``(bound_s, solver name, columns, MatrixResult or None)`` of one phase's relaxation.

    ``work_limit`` (work units) caps the solver's iterations at what that much work allows for
    this LP's size (:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`); the LP is skipped when
    not even one iteration fits."""
    n, d, B = problem.n, problem.degree, problem.link_bandwidth
    out_b, in_b = ph.out_bytes(n), ph.in_bytes(n)
    U = float(max(out_b.max(), in_b.max()))
    if U <= 0:
        return 0.0, "trivial", 0, None
    T0 = U / (d * B)
    fx = ph.fixed.tocoo()
    sources = np.unique(fx.row).astype(np.int64)
    S = sources.size
    spos = np.searchsorted(sources, np.arange(n)).clip(0, max(S - 1, 0))
    iu, iv = np.triu_indices(n, 1)
    E = iu.size
    a_src = np.concatenate([iu, iv])  # arc a < E: u->v of pair a; a >= E: v->u of pair a - E
    a_dst = np.concatenate([iv, iu])
    a_pair = np.concatenate([np.arange(E), np.arange(E)])
    A_ = a_src.size
    R = ph.ring_out_bytes(n) / U
    has_ring = bool(R.max() > 0)
    # columns: z (E) | f (S * A_) | g (A_ if rings) | T
    nf = S * A_
    ng = A_ if has_ring else 0
    cz, cf, cg, cT = 0, E, E + nf, E + nf + ng
    nv = cT + 1
    rows, cols, vals, lb, ub = [], [], [], [], []
    r = 0
    # (B1) sum_{e ni u} z_e - T <= 0
    rows += [r + iu, r + iv, r + np.arange(n)]
    cols += [cz + np.arange(E), cz + np.arange(E), np.full(n, cT)]
    vals += [np.ones(E), np.ones(E), -np.ones(n)]
    lb.append(np.full(n, -np.inf))
    ub.append(np.zeros(n))
    r += n
    # (B2) z_e - (cap_pair / d) T <= 0   (z scaled so that the degree row reads z <= T)
    rows += [r + np.arange(E), r + np.arange(E)]
    cols += [cz + np.arange(E), np.full(E, cT)]
    vals += [np.ones(E), np.full(E, -problem.pair_cap / d)]
    lb.append(np.full(E, -np.inf))
    ub.append(np.zeros(E))
    r += E
    # (B3) conservation per source
    if S:
        col = np.arange(nf)
        cs, ca = col // A_, col % A_
        rows += [r + cs * n + a_src[ca], r + cs * n + a_dst[ca]]
        cols += [cf + col, cf + col]
        vals += [np.ones(nf), -np.ones(nf)]
        rhs = np.zeros(S * n)
        np.add.at(rhs, spos[fx.row] * n + fx.row, fx.data / U)
        np.add.at(rhs, spos[fx.row] * n + fx.col, -fx.data / U)
        lb.append(rhs)
        ub.append(rhs)
        r += S * n
    # (B4) circulation, out >= R
    if has_ring:
        ga = np.arange(A_)
        rows += [r + a_src, r + a_dst]
        cols += [cg + ga, cg + ga]
        vals += [np.ones(A_), -np.ones(A_)]
        lb.append(np.zeros(n))
        ub.append(np.zeros(n))
        r += n
        rows.append(r + a_src)
        cols.append(cg + ga)
        vals.append(np.ones(A_))
        lb.append(R)
        ub.append(np.full(n, np.inf))
        r += n
    # (B5) arc load <= z  (in units of U per T0: B z_e T0 / U == z_e after scaling)
    if S:
        col = np.arange(nf)
        rows.append(r + col % A_)
        cols.append(cf + col)
        vals.append(np.ones(nf))
    if has_ring:
        rows.append(r + np.arange(A_))
        cols.append(cg + np.arange(A_))
        vals.append(np.ones(A_))
    rows.append(r + np.arange(A_))
    cols.append(cz + a_pair)
    vals.append(-np.ones(A_))
    lb.append(np.full(A_, -np.inf))
    ub.append(np.zeros(A_))
    r += A_
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv)
    )
    c = np.zeros(nv)
    c[cT] = 1.0
    name = ("glop" if nv <= 40_000 else "pdlp") if solver == "auto" else solver
    its = iteration_limit if name == "pdlp" else None
    if work_limit is not None:
        per = WORK_PER_NNZ_ITERATION.get(name, WORK_PER_NNZ_ITERATION["pdlp"])
        fit = int((work_limit / max(A.nnz, 1) - WORK_PER_NNZ) / per)
        if fit < 1:
            return 0.0, f"{name}:skipped (work limit)", nv, None
        its = fit if its is None else min(its, fit)
    res = solve_matrix_program(
        c,
        A,
        np.concatenate(lb),
        np.concatenate(ub),
        np.zeros(nv),
        np.full(nv, np.inf),
        solver=name,
        time_limit=time_limit,
        iteration_limit=its,
    )
    if res.status != "optimal" or not np.isfinite(res.bound):
        return 0.0, f"{name}:{res.status}", nv, res
    return max(res.bound, 0.0) * T0, name, nv, res


def lp_relaxation_bound(
    problem: DesignProblem,
    solver: str = "auto",
    time_limit: float = 60.0,
    max_columns: int = 400_000,
    iteration_limit: int | None = None,
    stats: dict | None = None,
    work_limit: float | None = None,
) -> tuple[np.ndarray | None, str]:
    """Per-phase fractional-circuit LP bounds, seconds (see the module docstring).

    Returns ``(None, reason)`` when the LP would exceed ``max_columns`` or a solve did not
    finish; otherwise ``(per-phase seconds, solver names)``. ``time_limit`` is a wall-clock cap
    on the whole call (each phase's LP gets what is left); ``iteration_limit`` bounds PDLP
    deterministically (GLOP solves to optimality); ``work_limit`` (work units, over all phases)
    caps the iterations of either solver deterministically. ``stats``, when given, receives ``work``
    (deterministic work units, :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`) and ``limit``
    (``time`` when the cap stopped a solve).
    """
    n = problem.n
    t0 = time.perf_counter()
    stats = {} if stats is None else stats
    stats.setdefault("work", 0.0)
    stats.setdefault("limit", "")
    cols = sum(np.unique(ph.fixed.tocoo().row).size * n * (n - 1) + n * n for ph in problem.phases)
    if cols > max_columns:
        return None, f"skipped ({cols} columns > {max_columns})"
    out, names = [], []
    for ph in problem.phases:
        left = max(time_limit - (time.perf_counter() - t0), 0.01)
        wl = None if work_limit is None else work_limit - stats["work"]
        val, name, _, res = _phase_lp(problem, ph, solver, left, iteration_limit, wl)
        if res is not None:
            stats["work"] += res.work
            if res.limit and stats["limit"] != "time":
                stats["limit"] = res.limit
        if ":" in name:
            return None, f"not solved ({name})"
        out.append(val)
        names.append(name)
    return np.asarray(out), "+".join(sorted(set(names))) or "none"


@dataclass(frozen=True, eq=False)
class Bounds:
    """Lower bounds on the communication time.

    Attributes
    ----------
    ideal_s : numpy.ndarray
        Per-phase ideal-switch bounds, seconds.
    hops_s : numpy.ndarray
        Per-phase hop-counting bounds, seconds.
    lp_s : numpy.ndarray or None
        Per-phase LP-relaxation bounds, seconds (None when skipped).
    lower_bound_s : float
        The highest of ``sum(ideal_s)``, ``sum(hops_s)`` and ``sum(lp_s)``.
    method : str
        Which bound won and how the LP went.
    wall_s : float
    work : float
        Deterministic work units of the LP relaxation (0 when not run).
    limit : str
        ``time`` when the wall-clock cap stopped the LP (the bound then depends on the clock),
        another limit's name, or ``""``.
    """

    ideal_s: np.ndarray
    hops_s: np.ndarray
    lp_s: np.ndarray | None
    lower_bound_s: float
    method: str
    wall_s: float
    work: float = 0.0
    limit: str = ""


def lower_bound(
    problem: DesignProblem,
    use_lp: bool = True,
    solver: str = "auto",
    time_limit: float = 60.0,
    max_columns: int = 400_000,
    iteration_limit: int | None = None,
    work_limit: float | None = None,
) -> Bounds:
    """The highest of the ideal-switch, hop-counting and LP-relaxation bounds.

    ``time_limit`` is a wall-clock cap on the LP relaxation, ``iteration_limit`` a deterministic
    limit on its PDLP solves and ``work_limit`` on all its solves, in work units (see
    :func:`lp_relaxation_bound`).

    Examples
    --------
    A one-way ring of transfers 0 -> 1 -> 2 -> 0, 1 byte each, two ports of 1 byte/s: the ideal
    switch needs 0.5 s, but circuits are full duplex and one direction would idle: the LP proves
    2/3 s (the triangle of circuits achieves it, sending 1/3 of each transfer the long way).

    >>> import numpy as np, scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> D = sp.csr_matrix((np.ones(3), ([0, 1, 2], [1, 2, 0])), shape=(3, 3))
    >>> b = lower_bound(DesignProblem(3, 2, 1.0, (PhaseTraffic("p", [0], [], [], D),)))
    >>> float(b.ideal_s.sum()), round(b.lower_bound_s, 6), b.method.split()[0]
    (0.5, 0.666667, 'lp')
    """
    t0 = time.perf_counter()
    ideal = ideal_switch_bound(problem)
    lp, how = (None, "not requested")
    stats: dict = {"work": 0.0, "limit": ""}
    if use_lp:
        lp, how = lp_relaxation_bound(
            problem, solver, time_limit, max_columns, iteration_limit, stats, work_limit
        )
    hops = hop_count_bound(problem)
    ti, th = float(ideal.sum()), float(hops.sum())
    tl = float(lp.sum()) if lp is not None else -np.inf
    best = max(ti, th, tl)
    if tl >= best and tl > ti:
        method = f"lp relaxation ({how})"
    elif th > ti:
        method = f"hop counting (lp: {how})"
    else:
        method = f"ideal switch (lp: {how})"
    return Bounds(
        ideal, hops, lp, best, method, time.perf_counter() - t0, stats["work"], stats["limit"]
    )
