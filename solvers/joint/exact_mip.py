"""Exact joint design for small clusters: integer circuits, ring mixtures, routing in one MIP.

Formulation
-----------
Data: ``n`` servers, ``d`` ports of ``B`` bytes/s, at most ``K`` circuits per pair
(``K = problem.pair_cap``); phases ``p`` with fixed bytes ``D^p_st`` and ring groups ``G`` with
per-member ring bytes ``R_G``; ``C_G`` = every directed Hamiltonian cycle of ``G`` (``(g-1)!``);
``M`` an upper bound on the optimum (the objective of a known design).

Variables: ``y_{e,k}`` binary (pair ``e = {u, v}`` gets exactly ``k`` circuits, ``k = 1..K``);
``T_p >= 0`` seconds; ``w_{p,e,k} = T_p y_{e,k}`` (linearised); ``lambda_c >= 0`` the fraction
of its group's bytes ring ``c`` carries; ``f^p_{s,a} >= 0`` bytes from source ``s`` on arc ``a``
(both directions of every pair).

.. code-block:: text

    min  sum_p T_p
    (1) sum_{e ni u} sum_k k y_{e,k} <= d                      every server u      (ports)
    (2) sum_k y_{e,k} <= 1                                     every pair e        (one count)
    (3) sum_{c in C_G} lambda_c = 1                            every phase, group  (ring mix)
    (4) sum_{a out of v} f^p_{s,a} - sum_{a into v} f^p_{s,a}
          - sum_c R_G lambda_c ([v = s] m_{c,s.} - m_{c,sv})
          = [v = s] sum_t D^p_st - D^p_sv                     every p, source s, node v
    (5) sum_s f^p_{s,a} <= B sum_k k w_{p,e(a),k}              every phase, arc    (capacity)
    (6) w_{p,e,k} <= M y_{e,k}                                 \\
    (7) w_{p,e,k} <= T_p                                        } w = T_p y exactly, y binary
    (8) w_{p,e,k} >= T_p - M (1 - y_{e,k})                     /
    (9) T_p <= M                                                (valid: T_p <= sum T <= M)
    (10) sum_k k y_{e,k} >= P_e                                every pre-wired pair e

(5) is the bilinear ``load <= B x_e T_p`` made exact by the unary expansion of ``x_e``. This is
the whole joint problem (circuits, any weighted mixture of rings, any multi-path routing with
host forwarding) for the congestion objective of :mod:`solvers.model.congestion`; it is solved on
MathOpt with SCIP (``GSCIP``) and proves optimality on clusters of up to about 8 servers.

Reserved and pre-wired ports (:mod:`solvers.model.problem`): the right-hand side of (1) is server
``u``'s usable ports ``d_u = degree - reserved_u`` instead of ``d``, and (10) keeps at least the
``P_e`` pre-wired circuits on every pre-wired pair (``P_e <= K`` is checked by the problem).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.joint.rings import hamiltonian_cycles
from solvers.model.problem import DesignProblem
from solvers.routing_lp import solve_matrix_program
from traffic.errors import InputError

__all__ = ["ExactResult", "exact_design", "MAX_EXACT_SERVERS"]

MAX_EXACT_SERVERS = 10
"""Largest cluster :func:`exact_design` accepts (the MIP grows as ``n^3`` and ``(g-1)!``)."""


@dataclass(frozen=True, eq=False)
class ExactResult:
    """Outcome of the exact MIP.

    Attributes
    ----------
    circuits : numpy.ndarray or None
        ``[u, v, count]`` rows of the best design found (None if none).
    ring_candidates : list
        Per phase, per group: the candidate rings (all Hamiltonian cycles).
    ring_weights : list
        Per phase, per group: the MIP's ``lambda`` for each candidate.
    objective_s, bound_s : float
        The MIP's objective and proven bound, seconds.
    status : str
        ``optimal``, ``feasible`` or ``limit``/``infeasible``.
    solver : str
    wall_s : float
    limit : str
        The limit that stopped the MIP (``node``, ``time``, ...) or ``""``.

    A limit never raises: the MIP's incumbent (``circuits``, possibly None) comes back with
    ``status`` ``feasible`` (or ``limit`` without one) and :attr:`stopped_by` says why.
    """

    circuits: np.ndarray | None
    ring_candidates: list
    ring_weights: list
    objective_s: float
    bound_s: float
    status: str
    solver: str
    wall_s: float
    limit: str = ""

    @property
    def stopped_by(self) -> str:
        """``"optimal"``, ``"infeasible"``, ``"<limit> limit"`` (``"node limit"``, ``"time
        limit"``, ...) or the solver's error."""
        if self.limit:
            return f"{self.limit} limit"
        return self.status


def exact_design(
    problem: DesignProblem,
    upper_bound_s: float,
    time_limit: float = 60.0,
    solver: str = "scip",
    threads: int = 1,
    seed: int = 0,
    hint_circuits: np.ndarray | None = None,
    node_limit: int | None = None,
) -> ExactResult:
    """Solve the joint MIP (module docstring) for a small cluster.

    Parameters
    ----------
    problem : DesignProblem
        At most :data:`MAX_EXACT_SERVERS` servers.
    upper_bound_s : float
        ``M``: the objective of any feasible design (e.g. the TopoOpt baseline's).
    time_limit : float
        Seconds; the best design found so far is returned with status ``feasible``.
    solver : str
        MathOpt MIP solver (``scip``).
    threads, seed : int
        Passed to the solver (deterministic for a given pair).
    hint_circuits : numpy.ndarray, optional
        A starting design (rows ``[u, v, count]``).
    node_limit : int, optional
        Branch-and-bound nodes (a deterministic limit; ``time_limit`` is then a wall-clock cap,
        and ``limit`` of the result says which one stopped the search).

    Examples
    --------
    Three servers, 2 ports each, a one-way ring of 1-byte transfers: the triangle with 1/3 of each
    transfer sent the long way, 2/3 s (the LP-relaxation bound is tight here).

    >>> import numpy as np, scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> D = sp.csr_matrix((np.ones(3), ([0, 1, 2], [1, 2, 0])), shape=(3, 3))
    >>> r = exact_design(DesignProblem(3, 2, 1.0, (PhaseTraffic("p", [0], [], [], D),)), 2.0)
    >>> r.status, round(r.objective_s, 6), r.circuits.tolist()
    ('optimal', 0.666667, [[0, 1, 1], [0, 2, 1], [1, 2, 1]])

    With one of server 0's ports reserved and a cable 1-2 that must stay, no triangle fits:
    a path, and the long way round carries a whole transfer, 1 s.

    >>> q = DesignProblem(3, 2, 1.0, (PhaseTraffic("p", [0], [], [], D),), reserved=[1, 0, 0],
    ...                   prewired=[[1, 2, 1]])
    >>> r = exact_design(q, 2.0)
    >>> r.status, round(r.objective_s, 6), [1, 2, 1] in r.circuits.tolist()
    ('optimal', 1.0, True)
    """
    t0 = time.perf_counter()
    n, B = problem.n, problem.link_bandwidth
    if n > MAX_EXACT_SERVERS:
        raise InputError("servers", n, f"at most {MAX_EXACT_SERVERS} for the exact MIP")
    if not np.isfinite(upper_bound_s) or upper_bound_s <= 0:
        raise InputError("upper_bound_s", upper_bound_s, "a finite number of seconds > 0")
    K = problem.pair_cap
    P = problem.n_phases
    iu, iv = np.triu_indices(n, 1)
    E = iu.size
    a_src = np.concatenate([iu, iv])
    a_dst = np.concatenate([iv, iu])
    a_pair = np.concatenate([np.arange(E), np.arange(E)])
    A_ = 2 * E
    # scaling: bytes / U, seconds / T0 with T0 = U / B
    U = max(
        [float(ph.fixed.max()) for ph in problem.phases]
        + [float(ph.ring_bytes.max()) for ph in problem.phases if ph.n_groups]
        + [1e-300]
    )
    T0 = U / B
    M = upper_bound_s / T0 * (1 + 1e-6)

    # ---- variables (column index ranges)
    nv = 0

    def block(size):
        nonlocal nv
        start = nv
        nv += size
        return start

    cy = block(E * K)  # y[e, k-1]
    cT = block(P)
    cw = block(P * E * K)
    phase_blocks = []
    cands_all, ring_cols = [], []
    for ph in problem.phases:
        cands = [hamiltonian_cycles(ph.group(g)) for g in range(ph.n_groups)]
        lam0 = block(sum(len(c) for c in cands))
        sources = np.unique(
            np.concatenate([ph.fixed.tocoo().row.astype(np.int64), ph.group_servers])
        )
        f0 = block(sources.size * A_)
        phase_blocks.append((lam0, sources, f0))
        cands_all.append(cands)
        ring_cols.append(lam0)
    integers = np.zeros(nv, bool)
    integers[cy : cy + E * K] = True
    var_lb = np.zeros(nv)
    var_ub = np.full(nv, np.inf)
    var_ub[cy : cy + E * K] = 1.0
    var_ub[cT : cT + P] = M  # (9)

    rows, cols, vals, rlb, rub = [], [], [], [], []
    r = 0

    def add(rr, cc, vv):
        rows.append(np.asarray(rr, np.int64))
        cols.append(np.asarray(cc, np.int64))
        vals.append(np.asarray(vv, np.float64))

    kk = np.arange(1, K + 1)
    ycol = cy + np.arange(E)[:, None] * K + (kk - 1)[None, :]  # (E, K)
    # (1) ports
    for ends in (iu, iv):
        add(r + np.repeat(ends, K), ycol.ravel(), np.tile(kk, E))
    rlb.append(np.full(n, -np.inf))
    rub.append(problem.usable_ports().astype(np.float64))  # d, or d - reserved_u
    r += n
    # (2) one count per pair
    add(r + np.repeat(np.arange(E), K), ycol.ravel(), np.ones(E * K))
    rlb.append(np.full(E, -np.inf))
    rub.append(np.ones(E))
    r += E
    # (10) pre-wired pairs keep their circuits
    pre = problem.prewired_circuits()
    if pre.size:
        e_pre = np.searchsorted(iu * n + iv, pre[:, 0] * n + pre[:, 1])
        add(r + np.repeat(np.arange(e_pre.size), K), ycol[e_pre].ravel(), np.tile(kk, e_pre.size))
        rlb.append(pre[:, 2].astype(np.float64))
        rub.append(np.full(e_pre.size, np.inf))
        r += e_pre.size
    for p, ph in enumerate(problem.phases):
        lam0, sources, f0 = phase_blocks[p]
        cands = cands_all[p]
        S = sources.size
        spos = {int(s): i for i, s in enumerate(sources)}
        # (3) ring mix
        off = 0
        for g, cl in enumerate(cands):
            if ph.ring_bytes[g] > 0:
                add(np.full(len(cl), r), lam0 + off + np.arange(len(cl)), np.ones(len(cl)))
                rlb.append(np.ones(1))
                rub.append(np.ones(1))
                r += 1
            off += len(cl)
        # (4) conservation per source and node
        fcol = f0 + np.arange(S * A_)
        fs, fa = np.arange(S * A_) // A_, np.arange(S * A_) % A_
        add(r + fs * n + a_src[fa], fcol, np.ones(S * A_))
        add(r + fs * n + a_dst[fa], fcol, -np.ones(S * A_))
        rhs = np.zeros(S * n)
        fx = ph.fixed.tocoo()
        for s_, t_, b_ in zip(fx.row.tolist(), fx.col.tolist(), fx.data.tolist(), strict=True):
            rhs[spos[s_] * n + s_] += b_ / U
            rhs[spos[s_] * n + t_] -= b_ / U
        off = 0
        for g, cl in enumerate(cands):
            coef = ph.ring_bytes[g] / U
            for j, ring in enumerate(cl):
                if coef > 0:
                    a, b = ring, np.roll(ring, -1)
                    sp_ = np.array([spos[int(x)] for x in a])
                    add(r + sp_ * n + a, np.full(a.size, lam0 + off + j), np.full(a.size, -coef))
                    add(r + sp_ * n + b, np.full(a.size, lam0 + off + j), np.full(a.size, coef))
            off += len(cl)
        rlb.append(rhs)
        rub.append(rhs)
        r += S * n
        # (5) capacity: sum_s f - sum_k k w <= 0   (B T0 / U == 1 in scaled units)
        add(r + np.tile(np.arange(A_), S), fcol, np.ones(S * A_))
        wcol = cw + p * E * K + np.arange(E)[:, None] * K + (kk - 1)[None, :]  # (E, K)
        add(r + np.repeat(np.arange(A_), K), wcol[a_pair].ravel(), -np.tile(kk, A_).astype(float))
        rlb.append(np.full(A_, -np.inf))
        rub.append(np.zeros(A_))
        r += A_
        # (6) w - M y <= 0 ; (7) w - T <= 0 ; (8) w - T - M y >= -M
        w = wcol.ravel()
        y = ycol.ravel()
        m = w.size
        add(r + np.arange(m), w, np.ones(m))
        add(r + np.arange(m), y, np.full(m, -M))
        rlb.append(np.full(m, -np.inf))
        rub.append(np.zeros(m))
        r += m
        add(r + np.arange(m), w, np.ones(m))
        add(r + np.arange(m), np.full(m, cT + p), -np.ones(m))
        rlb.append(np.full(m, -np.inf))
        rub.append(np.zeros(m))
        r += m
        add(r + np.arange(m), w, np.ones(m))
        add(r + np.arange(m), np.full(m, cT + p), -np.ones(m))
        add(r + np.arange(m), y, np.full(m, -M))
        rlb.append(np.full(m, -M))
        rub.append(np.full(m, np.inf))
        r += m
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r, nv)
    )
    c = np.zeros(nv)
    c[cT : cT + P] = 1.0
    hint = None
    if hint_circuits is not None:
        hint = np.zeros(nv)
        hc = np.asarray(hint_circuits, np.int64).reshape(-1, 3)
        for u, v, k in hc.tolist():
            if 1 <= k <= K:
                u, v = min(u, v), max(u, v)
                e = int(np.flatnonzero((iu == u) & (iv == v))[0])
                hint[ycol[e, k - 1]] = 1.0
    res = solve_matrix_program(
        c, A, np.concatenate(rlb), np.concatenate(rub), var_lb, var_ub, integers=integers,
        solver=solver, time_limit=time_limit, threads=threads, seed=seed, hint=hint,
        relative_gap=1e-6, node_limit=node_limit,
    )  # fmt: skip
    circuits = None
    weights = []
    if res.x is not None:
        yv = np.rint(res.x[ycol]).astype(np.int64)  # (E, K)
        cnt = (yv * kk[None, :]).sum(axis=1)
        keep = cnt > 0
        circuits = np.stack([iu[keep], iv[keep], cnt[keep]], axis=1).astype(np.int64)
        for p in range(P):
            off = ring_cols[p]
            wp = []
            for cl in cands_all[p]:
                wp.append(np.maximum(res.x[off : off + len(cl)], 0.0))
                off += len(cl)
            weights.append(wp)
    bound = res.bound * T0 if np.isfinite(res.bound) else 0.0
    return ExactResult(
        circuits,
        cands_all,
        weights,
        res.objective * T0,
        max(bound, 0.0),
        res.status,
        solver,
        time.perf_counter() - t0,
        res.limit,
    )
