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
    (11) sum_o z_{e,o} = sum_k k y_{e,k}                       every pair e        (OCS layer)
    (12) sum_{e ni u} z_{e,o} <= c_{u,o}                        every server u, OCS o

(5) is the bilinear ``load <= B x_e T_p`` made exact by the unary expansion of ``x_e``. This is
the whole joint problem (circuits, any weighted mixture of rings, any multi-path routing with
host forwarding) for the congestion objective of :mod:`solvers.model.congestion`; it is solved on
MathOpt with SCIP (``GSCIP``) and proves optimality on clusters of up to about 8 servers.

Reserved and pre-wired ports (:mod:`solvers.model.problem`): the right-hand side of (1) is server
``u``'s usable ports ``d_u = degree - reserved_u`` instead of ``d``, and (10) keeps at least the
``P_e`` pre-wired circuits on every pre-wired pair (``P_e <= K`` is checked by the problem).

An optical layer of finite-radix OCSes (``problem.ocs``, :mod:`solvers.model.ocs_layers`):
``z_{e,o} >= 0`` integer circuits of pair ``e`` on OCS ``o``, defined only where both ends have
ports on ``o`` (``c_{u,o}`` of them, bounded by ``min(K, c_{u,o}, c_{v,o})``): (11) places every
circuit on one OCS, (12) keeps each server within its ports on each OCS. (1) follows from (12)
summed over the OCSes when every port is usable, and stays for reserved ports. So the MIP only
proposes designs the layer holds (no repair afterwards), and its optimum is the optimum on the
layer.

Work limit
----------
SCIP has no limit on its total LP iterations, and a node limit alone does not bound a node: on
the soak's plan 173 (Mixtral, 8 servers of degree 4, 1,376 rows) the root alone ran 103 cut
rounds and 48 strong-branching LPs, 71,465 LP iterations and 21 s of CPU, and the 20,000 nodes of
the old limit took more than 10 minutes. Under a ``work_limit`` (work units,
:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`, SCIP's figure) :func:`exact_limits` turns the
units into LP iterations (``work / (nnz * per-iteration work)``) and then into SCIP's own
deterministic limits, forecasting one LP solve at ``rows`` iterations: the root's cut rounds
(:data:`ROOT_CUT_ROUNDS`), strong branching (:data:`STRONG_BRANCH_LPS` LPs' worth of iterations
beyond SCIP's share of the node LPs), at most ``2 rows`` iterations per LP after the root (``4
rows`` at the root), one cut round per node and ``(iterations - root forecast) / (2 rows)``
nodes. When the work cannot pay for the root, the MIP is not built into a solve at all: the warm
start comes back at once (status ``feasible``, limit ``work``). The work the solve spent (its LP
iterations times the nonzeros) is :attr:`ExactResult.work`; the clock stays a cap only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.joint.rings import hamiltonian_cycles
from solvers.model.problem import DesignProblem
from solvers.routing_lp import WORK_PER_NNZ, WORK_PER_NNZ_ITERATION, solve_matrix_program
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "ExactResult",
    "ExactLimits",
    "exact_design",
    "exact_limits",
    "MAX_EXACT_SERVERS",
    "ROOT_CUT_ROUNDS",
    "STRONG_BRANCH_LPS",
]

ROOT_CUT_ROUNDS = 5
"""Separation rounds at the root under a work limit (SCIP's default is unlimited: 103 rounds on
the soak's plan 173); one round at every other node."""

STRONG_BRANCH_LPS = 10
"""Strong branching's LP solves in the root's forecast: SCIP's offset of strong-branching
iterations (``branching/relpscost/sbiterofs``, default 100,000) becomes this many ``rows``."""


@dataclass(frozen=True)
class ExactLimits:
    """SCIP's deterministic limits for one work budget (:func:`exact_limits`).

    Attributes
    ----------
    nodes : int
        Branch-and-bound nodes (``limits/totalnodes``).
    lp_iterations, root_lp_iterations : int
        Iterations of one LP solve after the root and at the root (``lp/iterlim``,
        ``lp/rootiterlim``).
    strong_branch_iterations : int
        ``branching/relpscost/sbiterofs``.
    forecast_work : float
        The work the forecast pays for (at most the budget).
    """

    nodes: int
    lp_iterations: int
    root_lp_iterations: int
    strong_branch_iterations: int
    forecast_work: float

    def scip_params(self) -> dict:
        """The limits as SCIP parameters (:func:`solvers.routing_lp.solve_matrix_program`)."""
        return {
            "lp/iterlim": self.lp_iterations,
            "lp/rootiterlim": self.root_lp_iterations,
            "separating/maxroundsroot": ROOT_CUT_ROUNDS,
            "separating/maxrounds": 1,
            "branching/relpscost/sbiterofs": self.strong_branch_iterations,
        }


def exact_limits(work_limit: float, rows: int, nnz: int) -> ExactLimits | None:
    """SCIP's limits on a MIP of ``rows`` rows and ``nnz`` nonzeros for ``work_limit`` work units
    (module docstring, "Work limit"), or None when the units cannot pay for the root.

    The forecast: ``rows`` iterations per LP solve; the root ``ROOT_CUT_ROUNDS + 1`` solves plus
    ``STRONG_BRANCH_LPS`` for strong branching; every later node two.

    Examples
    --------
    1,000 rows and 10,000 nonzeros: a unit pays for 2,500 iterations of SCIP (4e-8 units per
    nonzero and iteration), the root 16,000 of them and a node 2,000.

    >>> exact_limits(10.0, 1000, 10_000).nodes    # (25,000 - 16,000) / 2,000
    4
    >>> exact_limits(6.0, 1000, 10_000) is None   # 15,000 iterations: not the root
    True
    """
    per_iteration = max(int(nnz), 1) * WORK_PER_NNZ_ITERATION["scip"]
    budget = max(float(work_limit) - WORK_PER_NNZ * nnz, 0.0) / per_iteration
    unit = max(int(rows), 1)
    root = (ROOT_CUT_ROUNDS + 1 + STRONG_BRANCH_LPS) * unit
    nodes = int((budget - root) // (2 * unit))
    if nodes < 1:
        return None
    forecast = (root + 2 * unit * nodes) * per_iteration + WORK_PER_NNZ * nnz
    return ExactLimits(nodes, 2 * unit, 4 * unit, STRONG_BRANCH_LPS * unit, forecast)


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
        The limit that stopped the MIP (``node``, ``time``, ``work``: the work limit could not
        pay for the root and the warm start came back unsolved) or ``""``.
    work : float
        Work units spent: LP iterations x nonzeros (SCIP's
        :data:`~solvers.routing_lp.WORK_PER_NNZ_ITERATION`) plus the model's build (0 when
        the work limit stopped it before the solve).

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
    work: float = 0.0

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
    hint_circuits: Circuits | None = None,
    node_limit: int | None = None,
    work_limit: float | None = None,
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
    hint_circuits : Circuits, optional
        A starting design.
    node_limit : int, optional
        Branch-and-bound nodes (a deterministic limit; ``time_limit`` is then a wall-clock cap,
        and ``limit`` of the result says which one stopped the search).
    work_limit : float, optional
        Work units (module docstring, "Work limit"): SCIP's node, per-LP iteration, cut-round
        and strong-branching limits derived from it (:func:`exact_limits`; the node limit is
        the smaller of the two). When it cannot pay for the root, ``hint_circuits`` (the warm
        start) comes back at once with ``objective_s`` ``upper_bound_s``, status ``feasible``
        (``limit`` without a hint) and ``limit`` ``"work"``.

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
    n = problem.n
    if n > MAX_EXACT_SERVERS:
        raise InputError("servers", n, f"at most {MAX_EXACT_SERVERS} for the exact MIP")
    if not np.isfinite(upper_bound_s) or upper_bound_s <= 0:
        raise InputError("upper_bound_s", upper_bound_s, "a finite number of seconds > 0")
    m = _ExactModel(problem, upper_bound_s)
    m.define_variables()
    m.define_port_constraints()
    m.define_count_constraints()
    m.define_prewired_constraints()
    m.define_ocs_constraints()
    for p, ph in enumerate(problem.phases):
        m.define_ring_mix_constraints(p, ph)
        m.define_conservation_constraints(p, ph)
        m.define_capacity_constraints(p)
        m.define_linearisation_constraints(p)
    A, c, lo, hi = m.matrix()
    params = None
    if work_limit is not None:
        if not np.isfinite(work_limit) or work_limit < 0:
            raise InputError("work_limit", work_limit, "a finite number of work units >= 0")
        lim = exact_limits(work_limit, A.shape[0], A.nnz)
        if lim is None:  # the units cannot pay for the root: the warm start, unsolved
            rows = None if hint_circuits is None else Circuits(hint_circuits, n).rows
            return ExactResult(
                rows, m.cands_all, [], float(upper_bound_s) if rows is not None else np.inf,
                0.0, "feasible" if rows is not None else "limit", solver,
                time.perf_counter() - t0, "work",
            )  # fmt: skip
        node_limit = lim.nodes if node_limit is None else min(int(node_limit), lim.nodes)
        params = lim.scip_params()
    res = solve_matrix_program(
        c, A, lo, hi, m.var_lb, m.var_ub, integers=m.integers, solver=solver,
        time_limit=time_limit, threads=threads, seed=seed, hint=m.hint(hint_circuits),
        relative_gap=1e-6, node_limit=node_limit, scip_params=params,
    )  # fmt: skip
    circuits, weights = m.solution(res.x)
    bound = res.bound * m.T0 if np.isfinite(res.bound) else 0.0
    per = WORK_PER_NNZ_ITERATION.get(solver, WORK_PER_NNZ_ITERATION["scip"])
    return ExactResult(
        circuits,
        m.cands_all,
        weights,
        res.objective * m.T0,
        max(bound, 0.0),
        res.status,
        solver,
        time.perf_counter() - t0,
        res.limit,
        (res.iterations * per + WORK_PER_NNZ) * A.nnz,
    )


class _ExactModel:
    """The MIP of the module docstring as a sparse matrix program, built one constraint family
    at a time (each ``define_*`` method adds the rows of its numbered constraints).

    Scaling: bytes / ``U``, seconds / ``T0`` with ``T0 = U / B``, so ``B T0 / U == 1``.
    """

    def __init__(self, problem: DesignProblem, upper_bound_s: float) -> None:
        n, B = problem.n, problem.link_bandwidth
        self.problem, self.n = problem, n
        self.K = problem.pair_cap
        self.P = problem.n_phases
        self.iu, self.iv = np.triu_indices(n, 1)
        self.E = E = self.iu.size
        self.a_src = np.concatenate([self.iu, self.iv])
        self.a_dst = np.concatenate([self.iv, self.iu])
        self.a_pair = np.concatenate([np.arange(E), np.arange(E)])
        self.A_ = 2 * E
        self.U = max(
            [float(ph.fixed.max()) for ph in problem.phases]
            + [float(ph.ring_bytes.max()) for ph in problem.phases if ph.n_groups]
            + [1e-300]
        )
        self.T0 = self.U / B
        self.M = upper_bound_s / self.T0 * (1 + 1e-6)
        self.kk = np.arange(1, self.K + 1)
        self.nv = 0
        self.rows, self.cols, self.vals, self.rlb, self.rub = [], [], [], [], []
        self.r = 0

    def block(self, size: int) -> int:
        """Reserve ``size`` variable columns; returns the first."""
        start = self.nv
        self.nv += size
        return start

    def add(self, rr, cc, vv) -> None:
        """Add the coefficients ``vv`` at rows ``rr``, columns ``cc``."""
        self.rows.append(np.asarray(rr, np.int64))
        self.cols.append(np.asarray(cc, np.int64))
        self.vals.append(np.asarray(vv, np.float64))

    def bounds(self, lo, hi, count: int) -> None:
        """The row bounds of the ``count`` rows just added."""
        self.rlb.append(lo)
        self.rub.append(hi)
        self.r += count

    def define_variables(self) -> None:
        """Columns: ``y[e, k-1]``, ``T_p``, ``w[p, e, k-1]``, then per phase the ring weights
        ``lambda`` and the flows ``f`` of each source; integrality and bounds ((9))."""
        problem, E, K, P = self.problem, self.E, self.K, self.P
        self.cy = self.block(E * K)  # y[e, k-1]
        self.cT = self.block(P)
        self.cw = self.block(P * E * K)
        self.phase_blocks = []
        self.cands_all, self.ring_cols = [], []
        for ph in problem.phases:
            cands = [hamiltonian_cycles(ph.group(g)) for g in range(ph.n_groups)]
            lam0 = self.block(sum(len(c) for c in cands))
            sources = np.unique(
                np.concatenate([ph.fixed.tocoo().row.astype(np.int64), ph.group_servers])
            )
            f0 = self.block(sources.size * self.A_)
            self.phase_blocks.append((lam0, sources, f0))
            self.cands_all.append(cands)
            self.ring_cols.append(lam0)
        nv = self.nv
        self.integers = np.zeros(nv, bool)
        self.integers[self.cy : self.cy + E * K] = True
        self.var_lb = np.zeros(nv)
        self.var_ub = np.full(nv, np.inf)
        self.var_ub[self.cy : self.cy + E * K] = 1.0
        self.var_ub[self.cT : self.cT + P] = self.M  # (9)
        self.ycol = self.cy + np.arange(E)[:, None] * K + (self.kk - 1)[None, :]  # (E, K)

    def define_port_constraints(self) -> None:
        """(1) ports: ``sum_e sum_k k y_{e,k} <= d_u`` (usable ports)."""
        r, K, E, kk = self.r, self.K, self.E, self.kk
        for ends in (self.iu, self.iv):
            self.add(r + np.repeat(ends, K), self.ycol.ravel(), np.tile(kk, E))
        ports = self.problem.usable_ports().astype(np.float64)  # d, or d - reserved_u
        self.bounds(np.full(self.n, -np.inf), ports, self.n)

    def define_ocs_constraints(self) -> None:
        """(11)-(12) on an optical layer of finite-radix OCSes (module docstring): the columns
        ``z[e, o]`` (integers) are added after the others; nothing without a layer."""
        layer = self.problem.ocs
        self.zcol = None
        if layer is None:
            return
        from solvers.model.ocs_layers import _capacity

        cap = _capacity(layer)  # (n, n_ocs) ports of each server on each OCS
        both = np.minimum(cap[self.iu], cap[self.iv])  # (E, n_ocs)
        e_z, o_z = np.nonzero(both > 0)
        z0 = self.block(e_z.size)
        self.z_pairs, self.z_ocs = e_z, o_z
        self.zcol = z0 + np.arange(e_z.size)
        self.integers = np.concatenate([self.integers, np.ones(e_z.size, bool)])
        self.var_lb = np.concatenate([self.var_lb, np.zeros(e_z.size)])
        ub = np.minimum(both[e_z, o_z], self.K).astype(np.float64)
        self.var_ub = np.concatenate([self.var_ub, ub])
        r, E, K = self.r, self.E, self.K
        self.add(r + e_z, self.zcol, np.ones(e_z.size))  # (11)
        self.add(r + np.repeat(np.arange(E), K), self.ycol.ravel(), -np.tile(self.kk, E))
        self.bounds(np.zeros(E), np.zeros(E), E)
        r, n_ocs = self.r, layer.n_ocs
        for ends in (self.iu, self.iv):  # (12): row server * n_ocs + OCS
            self.add(r + ends[e_z] * n_ocs + o_z, self.zcol, np.ones(e_z.size))
        self.bounds(np.full(self.n * n_ocs, -np.inf), cap.ravel().astype(np.float64),
                    self.n * n_ocs)  # fmt: skip

    def define_count_constraints(self) -> None:
        """(2) one count per pair: ``sum_k y_{e,k} <= 1``."""
        E, K = self.E, self.K
        self.add(self.r + np.repeat(np.arange(E), K), self.ycol.ravel(), np.ones(E * K))
        self.bounds(np.full(E, -np.inf), np.ones(E), E)

    def define_prewired_constraints(self) -> None:
        """(10) pre-wired pairs keep their circuits: ``sum_k k y_{e,k} >= P_e``."""
        pre = self.problem.prewired_circuits().rows
        if not pre.size:
            return
        n, K = self.n, self.K
        e_pre = np.searchsorted(self.iu * n + self.iv, pre[:, 0] * n + pre[:, 1])
        self.add(
            self.r + np.repeat(np.arange(e_pre.size), K), self.ycol[e_pre].ravel(),
            np.tile(self.kk, e_pre.size),
        )  # fmt: skip
        self.bounds(pre[:, 2].astype(np.float64), np.full(e_pre.size, np.inf), e_pre.size)

    def define_ring_mix_constraints(self, p: int, ph) -> None:
        """(3) ring mix: ``sum_c lambda_c = 1`` for every group of phase ``p`` with bytes."""
        lam0 = self.phase_blocks[p][0]
        off = 0
        for g, cl in enumerate(self.cands_all[p]):
            if ph.ring_bytes[g] > 0:
                self.add(
                    np.full(len(cl), self.r), lam0 + off + np.arange(len(cl)), np.ones(len(cl))
                )
                self.bounds(np.ones(1), np.ones(1), 1)
            off += len(cl)

    def define_conservation_constraints(self, p: int, ph) -> None:
        """(4) flow conservation per source and node of phase ``p``, rings included."""
        n, A_, U, r = self.n, self.A_, self.U, self.r
        lam0, sources, f0 = self.phase_blocks[p]
        S = sources.size
        spos = {int(s): i for i, s in enumerate(sources)}
        fcol = f0 + np.arange(S * A_)
        fs, fa = np.arange(S * A_) // A_, np.arange(S * A_) % A_
        self.add(r + fs * n + self.a_src[fa], fcol, np.ones(S * A_))
        self.add(r + fs * n + self.a_dst[fa], fcol, -np.ones(S * A_))
        rhs = np.zeros(S * n)
        fx = ph.fixed.tocoo()
        for s_, t_, b_ in zip(fx.row.tolist(), fx.col.tolist(), fx.data.tolist(), strict=True):
            rhs[spos[s_] * n + s_] += b_ / U
            rhs[spos[s_] * n + t_] -= b_ / U
        off = 0
        for g, cl in enumerate(self.cands_all[p]):
            coef = ph.ring_bytes[g] / U
            for j, ring in enumerate(cl):
                if coef > 0:
                    a, b = ring, np.roll(ring, -1)
                    sp_ = np.array([spos[int(x)] for x in a])
                    col = np.full(a.size, lam0 + off + j)
                    self.add(r + sp_ * n + a, col, np.full(a.size, -coef))
                    self.add(r + sp_ * n + b, col, np.full(a.size, coef))
            off += len(cl)
        self.bounds(rhs, rhs, S * n)

    def wcol(self, p: int) -> np.ndarray:
        """Columns of ``w[p, e, k-1]``, shape ``(E, K)``."""
        E, K = self.E, self.K
        return self.cw + p * E * K + np.arange(E)[:, None] * K + (self.kk - 1)[None, :]

    def define_capacity_constraints(self, p: int) -> None:
        """(5) capacity: ``sum_s f - sum_k k w <= 0`` on every arc (``B T0 / U == 1``)."""
        A_, K, r = self.A_, self.K, self.r
        f0 = self.phase_blocks[p][2]
        S = self.phase_blocks[p][1].size
        self.add(r + np.tile(np.arange(A_), S), f0 + np.arange(S * A_), np.ones(S * A_))
        wk = self.wcol(p)[self.a_pair].ravel()
        self.add(r + np.repeat(np.arange(A_), K), wk, -np.tile(self.kk, A_).astype(float))
        self.bounds(np.full(A_, -np.inf), np.zeros(A_), A_)

    def define_linearisation_constraints(self, p: int) -> None:
        """(6) ``w - M y <= 0``; (7) ``w - T <= 0``; (8) ``w - T - M y >= -M``."""
        w, y, M = self.wcol(p).ravel(), self.ycol.ravel(), self.M
        m = w.size
        T = np.full(m, self.cT + p)
        self.add(self.r + np.arange(m), w, np.ones(m))
        self.add(self.r + np.arange(m), y, np.full(m, -M))
        self.bounds(np.full(m, -np.inf), np.zeros(m), m)
        self.add(self.r + np.arange(m), w, np.ones(m))
        self.add(self.r + np.arange(m), T, -np.ones(m))
        self.bounds(np.full(m, -np.inf), np.zeros(m), m)
        self.add(self.r + np.arange(m), w, np.ones(m))
        self.add(self.r + np.arange(m), T, -np.ones(m))
        self.add(self.r + np.arange(m), y, np.full(m, -M))
        self.bounds(np.full(m, -M), np.full(m, np.inf), m)

    def matrix(self) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
        """``(A, c, row lower, row upper)``: the objective ``min sum_p T_p``."""
        A = sp.csr_matrix(
            (np.concatenate(self.vals), (np.concatenate(self.rows), np.concatenate(self.cols))),
            shape=(self.r, self.nv),
        )
        c = np.zeros(self.nv)
        c[self.cT : self.cT + self.P] = 1.0
        return A, c, np.concatenate(self.rlb), np.concatenate(self.rub)

    def hint(self, hint_circuits: Circuits | None) -> np.ndarray | None:
        """The ``y`` of a starting design (and on an OCS layer its ``z``, from its placement
        when it has one), or None."""
        if hint_circuits is None:
            return None
        hint = np.zeros(self.nv)
        for u, v, k in hint_circuits.tolist():
            if 1 <= k <= self.K:
                e = int(np.flatnonzero((self.iu == u) & (self.iv == v))[0])
                hint[self.ycol[e, k - 1]] = 1.0
        if self.zcol is not None:
            from solvers.model.ocs_layers import place_circuits

            try:
                pl = place_circuits(hint_circuits, self.problem.ocs)
            except InputError:
                pl = None
            key = {(int(e), int(o)): j for j, (e, o) in enumerate(zip(self.z_pairs, self.z_ocs,
                                                                      strict=True))}  # fmt: skip
            for u, v, o, k in [] if pl is None else pl.rows.tolist():
                e = int(np.flatnonzero((self.iu == min(u, v)) & (self.iv == max(u, v)))[0])
                hint[self.zcol[key[e, o]]] += k
        return hint

    def solution(self, x: np.ndarray | None) -> tuple[np.ndarray | None, list]:
        """The circuits and the ring weights of a solution ``x`` (None, [] without one)."""
        circuits = None
        weights = []
        if x is None:
            return circuits, weights
        kk, iu, iv = self.kk, self.iu, self.iv
        yv = np.rint(x[self.ycol]).astype(np.int64)  # (E, K)
        cnt = (yv * kk[None, :]).sum(axis=1)
        keep = cnt > 0
        circuits = np.stack([iu[keep], iv[keep], cnt[keep]], axis=1).astype(np.int64)
        for p in range(self.P):
            off = self.ring_cols[p]
            wp = []
            for cl in self.cands_all[p]:
                wp.append(np.maximum(x[off : off + len(cl)], 0.0))
                off += len(cl)
            weights.append(wp)
        return circuits, weights
