"""Routing on a fixed fabric: the min max-utilisation multi-commodity flow LP, per phase.

Formulation (one phase; arc-based, commodities aggregated by source)
--------------------------------------------------------------------
Data: directed links ``l = (a_l, b_l)`` with capacity ``cap_l`` (bytes/s); fixed pair demand
``D_st`` (bytes); ring groups ``G`` with per-member ring bytes ``R_G`` and candidate directed
rings ``c in C_G`` (ring ``c`` puts ``R_G`` on each of its successor pairs; ``m_{c,st}`` counts
its steps ``s -> t``). Variables: ``T >= 0`` (seconds), ``f_{s,l} >= 0`` bytes from source ``s``
on link ``l``, ``lambda_c >= 0`` the fraction of group ``G``'s bytes on ring ``c``.

.. code-block:: text

    min  T + eps * sum f                      (eps: tie-break towards short routes, <= 1e-5 T)
    (1) sum_{l: a_l = v} f_{s,l} - sum_{l: b_l = v} f_{s,l}
          - sum_c R_G(c) lambda_c ([v = s] sum_t m_{c,st} - m_{c,sv})
          = [v = s] sum_t D_st - D_sv                        for every source s, node v
    (2) sum_{c in C_G} lambda_c = 1                           for every ring group G
    (3) sum_s f_{s,l} - cap_l T <= 0                          for every link l
    f_{s,l} = 0 when a_l != s does not relay (no host forwarding through it)

Aggregating by source keeps the LP at ``sources x links`` columns (131k for 128 servers of
degree 8). Small LPs go to GLOP (simplex, exact), large ones to PDLP (first-order). Each source's
flow is then decomposed greedily into weighted paths (fewest hops first), and the time is
recomputed from the paths that are returned. The LP's dual bound (less the tie-break) is a proven
lower bound for the phase on this fabric with these ring candidates. A design carries one routing
for all phases: :func:`share_paths` re-optimises the path fractions jointly over the phases.

Budgets: a limit never raises. An LP that a limit (or the solver) stops before it has a solution
leaves its phase on fewest-hop paths (:data:`FALLBACK_PATHS`, ``fallback`` of the result), and
the result's ``limit`` names what stopped it (``time`` when the clock did).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import timedelta

import numpy as np
import scipy.sparse as sp
from numba import njit
from scipy.sparse import csgraph

from solvers.model.congestion import (
    PhaseRouting,
    RingSet,
    link_lookup,
    phase_pairs,
)
from solvers.model.problem import DesignProblem, PhaseTraffic
from topoopt.fabrics.circuits import Circuits, circuit_links
from topoopt.numba_cache import kernel_cache
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "LP_SOLVERS",
    "MAX_TIME_LIMIT_S",
    "MATHOPT_VERIFIED",
    "mathopt_fast_path",
    "run_mathopt",
    "run_mathopt_public",
    "MatrixResult",
    "solve_matrix_program",
    "RoutingResult",
    "FALLBACK_PATHS",
    "route_phase",
    "min_hop_paths",
    "SharedRouting",
    "share_paths",
    "merge_paths",
    "route_circuits",
    "route_fabric",
    "default_ring_candidates",
]

LP_SOLVERS = ("glop", "pdlp", "highs", "scip", "cp-sat")

WORK_PER_NNZ_ITERATION = {"glop": 2e-9, "pdlp": 7e-9, "scip": 4e-8}
"""Work units per constraint-matrix nonzero per LP iteration, by solver. One work unit is
about one second of one core of the reference machine (2 cores, measured on the routing LPs of
128 servers: PDLP 5-8 ns, GLOP's dual simplex about 2 ns per nonzero and iteration). SCIP's
figure is per LP iteration of its branch and bound, with the separation, propagation and
heuristics around them: 4.2e-8 on the joint exact MIP of an 8-server Mixtral plan (71,465 LP
iterations on 6,936 nonzeros in 20.8 s of CPU, issue 30's soak plan 173). Work counts are
deterministic (iterations do not depend on the clock), so limits on work reproduce."""

WORK_PER_NNZ = 1e-6
"""Work units per nonzero for building a model and reading off its solution."""

WORK_PER_FLOW_COLUMN = 2e-6
"""Work units per flow column (source x link) for decomposing a routing LP's flow into paths."""


def _solver_type(name: str):
    from ortools.math_opt.python import mathopt

    table = {
        "glop": mathopt.SolverType.GLOP,
        "pdlp": mathopt.SolverType.PDLP,
        "highs": mathopt.SolverType.HIGHS,
        "scip": mathopt.SolverType.GSCIP,
        "cp-sat": mathopt.SolverType.CP_SAT,
    }
    if name not in table:
        raise InputError("solver", name, f"one of {', '.join(LP_SOLVERS)}")
    return table[name]


@dataclass(frozen=True, eq=False)
class MatrixResult:
    """Outcome of :func:`solve_matrix_program`.

    Attributes
    ----------
    status : str
        ``optimal``, ``feasible`` (a limit stopped a MIP with an incumbent), ``infeasible``,
        ``unbounded``, ``limit`` (no solution) or ``error``.
    x : numpy.ndarray or None
        Primal values.
    duals : numpy.ndarray or None
        Row duals (MathOpt sign convention; LPs only).
    objective : float
        Primal objective (``inf`` without a solution).
    bound : float
        Best proven bound on the objective (``-inf`` when unknown).
    solver : str
    wall_s : float
    limit : str
        The limit that stopped the solve (``time``, ``iteration``, ``node``, ...), or ``""``
        when none did. Only ``time`` makes a result depend on the machine's speed.
    iterations : int
        Simplex + barrier + first-order iterations (deterministic for a given thread count).
    nodes : int
        Branch-and-bound nodes (MIPs).
    nnz : int
        Nonzeros of the constraint matrix.
    """

    status: str
    x: np.ndarray | None
    duals: np.ndarray | None
    objective: float
    bound: float
    solver: str
    wall_s: float
    limit: str = ""
    iterations: int = 0
    nodes: int = 0
    nnz: int = 0

    @property
    def work(self) -> float:
        """Deterministic work of the solve, in work units (:data:`WORK_PER_NNZ_ITERATION`)."""
        per = WORK_PER_NNZ_ITERATION.get(self.solver, WORK_PER_NNZ_ITERATION["pdlp"])
        return self.nnz * (per * max(self.iterations, 1) + WORK_PER_NNZ)

    @property
    def timed_out(self) -> bool:
        """True when the wall-clock limit stopped the solve (the result is then not
        reproducible on another machine or under another load)."""
        return self.limit == "time"


MAX_TIME_LIMIT_S = 1e9
"""A wall-clock limit at or above this many seconds (about 32 years) is no limit: MathOpt's
``timedelta`` cannot hold ``1e308`` seconds, and no solve is meant to stop there."""


def solve_matrix_program(
    c: np.ndarray,
    a: sp.spmatrix,
    row_lb: np.ndarray,
    row_ub: np.ndarray,
    var_lb: np.ndarray,
    var_ub: np.ndarray,
    integers: np.ndarray | None = None,
    solver: str = "glop",
    time_limit: float = 60.0,
    threads: int = 1,
    seed: int = 0,
    hint: np.ndarray | None = None,
    relative_gap: float | None = None,
    lp_tolerance: float | None = None,
    iteration_limit: int | None = None,
    node_limit: int | None = None,
    scip_params: dict | None = None,
) -> MatrixResult:
    """Minimise ``c @ x`` s.t. ``row_lb <= A x <= row_ub``, ``var_lb <= x <= var_ub`` on MathOpt.

    The model is handed to MathOpt as a ``ModelProto`` built from the numpy arrays (no Python
    object per variable, :func:`run_mathopt`), so LPs with 10^5 columns build in well under a
    second. A limit or a solver error never raises: the status says what happened and ``x`` is
    None when there is no solution. ``integers``
    marks integer columns, ``hint`` is a MIP starting point, ``relative_gap`` the MIP gap and
    ``lp_tolerance`` PDLP's optimality tolerance (absolute and relative).

    Deterministic limits: ``iteration_limit`` (simplex / PDLP iterations) and ``node_limit``
    (branch-and-bound nodes); ``scip_params`` (SCIP only) sets SCIP's own parameters by name,
    ``{"lp/iterlim": 2000, ...}``: an ``int`` goes to SCIP as a long integer when the name is in
    :data:`SCIP_LONG_PARAMS`, else as an integer, a ``float`` as a real (the per-LP iteration
    limits and the separation rounds that bound a MIP's work, :mod:`solvers.joint.exact_mip`).
    ``time_limit`` (seconds; ``inf`` for none) is a wall-clock cap: a
    result it stopped has ``limit == "time"`` and depends on the machine's speed. A single-thread
    simplex solved to optimality, PDLP under an iteration limit and SCIP under a node limit
    give the same answer on every run for the same ``threads``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> r = solve_matrix_program(np.array([1.0, 1.0]), sp.csr_matrix([[1.0, 2.0]]),
    ...     np.array([4.0]), np.array([np.inf]), np.zeros(2), np.full(2, np.inf))
    >>> r.status, round(r.objective, 6)
    ('optimal', 2.0)
    """
    from ortools.math_opt import model_pb2
    from ortools.math_opt.python import mathopt

    stype = _solver_type(solver)
    t0 = time.perf_counter()
    a = sp.csr_matrix(a, dtype=np.float64)
    a.sum_duplicates()
    a.eliminate_zeros()
    m, nv = a.shape
    proto = model_pb2.ModelProto()
    v = proto.variables
    v.ids.extend(range(nv))
    v.lower_bounds.extend(np.asarray(var_lb, np.float64).tolist())
    v.upper_bounds.extend(np.asarray(var_ub, np.float64).tolist())
    ints = np.zeros(nv, bool) if integers is None else np.asarray(integers, bool)
    v.integers.extend(ints.tolist())
    cc = np.asarray(c, np.float64)
    nz = np.flatnonzero(cc)
    proto.objective.linear_coefficients.ids.extend(nz.tolist())
    proto.objective.linear_coefficients.values.extend(cc[nz].tolist())
    lc = proto.linear_constraints
    lc.ids.extend(range(m))
    lc.lower_bounds.extend(np.asarray(row_lb, np.float64).tolist())
    lc.upper_bounds.extend(np.asarray(row_ub, np.float64).tolist())
    coo = a.tocoo()
    order = np.lexsort((coo.col, coo.row))
    mat = proto.linear_constraint_matrix
    mat.row_ids.extend(coo.row[order].tolist())
    mat.column_ids.extend(coo.col[order].tolist())
    mat.coefficients.extend(coo.data[order].tolist())

    kw: dict = {}
    if np.isfinite(time_limit) and float(time_limit) < MAX_TIME_LIMIT_S:
        kw["time_limit"] = timedelta(seconds=max(float(time_limit), 0.01))
    if iteration_limit is not None:
        kw["iteration_limit"] = int(iteration_limit)
    if node_limit is not None:
        kw["node_limit"] = int(node_limit)
    if stype.name != "HIGHS":  # HiGHS takes its thread count from globals only
        kw["threads"] = threads
    if stype.name not in ("GLOP", "PDLP"):
        kw["random_seed"] = int(seed)
    if relative_gap is not None:
        kw["relative_gap_tolerance"] = float(relative_gap)
    if lp_tolerance is not None and stype.name == "PDLP":
        from ortools.pdlp import solvers_pb2

        pd = solvers_pb2.PrimalDualHybridGradientParams()
        crit = pd.termination_criteria.simple_optimality_criteria
        crit.eps_optimal_absolute = float(lp_tolerance)
        crit.eps_optimal_relative = float(lp_tolerance)
        kw["pdlp"] = pd
    params = mathopt.SolveParameters(**kw)
    if scip_params and stype.name == "GSCIP":
        for key, value in sorted(scip_params.items()):
            if isinstance(value, float):
                params.gscip.real_params[key] = value
            elif key in SCIP_LONG_PARAMS:
                params.gscip.long_params[key] = int(value)
            else:
                params.gscip.int_params[key] = int(value)
    hint_values = np.asarray(hint, np.float64) if hint is not None and ints.any() else None
    try:
        res = run_mathopt(proto, stype, params, hint_values)
    except Exception as exc:  # solver refused the model (e.g. solver not in this build)
        return MatrixResult(
            "error: " + str(exc)[:200], None, None, np.inf, -np.inf, solver,
            time.perf_counter() - t0, nnz=int(a.nnz),
        )  # fmt: skip
    wall = time.perf_counter() - t0
    reason = res.termination.reason
    # TerminationReasonProto: 1 optimal, 2 infeasible, 3 unbounded, 4 inf-or-unb, 5 imprecise,
    # 9 feasible (limit), 6 no solution found (limit), 7 numerical error, 8 other error
    status = {1: "optimal", 2: "infeasible", 3: "unbounded", 4: "infeasible", 5: "feasible"}.get(
        reason, "feasible" if reason == 9 else ("limit" if reason == 6 else "error")
    )
    x = duals = None
    obj = np.inf
    if res.solutions and res.solutions[0].HasField("primal_solution"):
        ps = res.solutions[0].primal_solution
        x = np.zeros(nv)
        x[np.asarray(ps.variable_values.ids, np.int64)] = np.asarray(ps.variable_values.values)
        obj = float(cc @ x)
        if res.solutions[0].HasField("dual_solution"):
            ds = res.solutions[0].dual_solution
            duals = np.zeros(m)
            duals[np.asarray(ds.dual_values.ids, np.int64)] = np.asarray(ds.dual_values.values)
    elif status in ("optimal", "feasible"):
        status = "limit"
    bound = float(res.termination.objective_bounds.dual_bound)
    if status == "optimal" and not ints.any():
        bound = obj if not np.isfinite(bound) else bound
    limit = _LIMITS.get(res.termination.limit, "other") if reason in (6, 9) else ""
    if limit == "undetermined":  # GLOP does not say which limit stopped it
        limit = _which_limit(iteration_limit, node_limit, time_limit, wall)
    st = res.solve_stats
    iters = int(st.simplex_iterations + st.barrier_iterations + st.first_order_iterations)
    return MatrixResult(
        status, x, duals, obj, bound, solver, wall, limit, iters, int(st.node_count), int(a.nnz)
    )


def _which_limit(iteration_limit, node_limit, time_limit: float, wall: float) -> str:
    """The limit that must have stopped a solve whose solver reported an undetermined one (GLOP
    does, for its time and iteration limits alike): the clock when no deterministic limit was
    set or when the solve used up its time, else the deterministic one.

    >>> _which_limit(None, None, 5.0, 5.01), _which_limit(100, None, 5.0, 0.2)
    ('time', 'iteration')
    """
    if (iteration_limit is None and node_limit is None) or wall >= time_limit:
        return "time"
    return "iteration" if iteration_limit is not None else "node"


MATHOPT_VERIFIED = ("9.15",)
"""OR-Tools releases (``major.minor``) on which :func:`run_mathopt`'s direct call into MathOpt's
solver core was checked against the public ``mathopt.solve`` (``tests/solvers/test_budgets.py``
compares the two and fails when the installed release is not listed here)."""


def mathopt_fast_path() -> bool:
    """True when :func:`run_mathopt` may hand the ``ModelProto`` straight to MathOpt's solver
    core: the installed OR-Tools release is one of :data:`MATHOPT_VERIFIED` and the core module
    imports."""
    import ortools

    if ".".join(ortools.__version__.split(".")[:2]) not in MATHOPT_VERIFIED:
        return False
    try:
        from ortools.math_opt.core.python import solver  # noqa: F401
    except ImportError:
        return False
    return True


def run_mathopt(model, solver_type, params, hint: np.ndarray | None = None):
    """Solve a MathOpt ``ModelProto``; returns the ``SolveResultProto``.

    The one place where this package calls OR-Tools' MathOpt solvers. The public route,
    ``mathopt.Model.from_model_proto`` -> ``mathopt.solve`` -> ``SolveResult.to_proto``, turns
    every variable into a Python object and back: on a routing LP of 150k columns that costs
    5 s around a 1 s solve. So on a verified release (:func:`mathopt_fast_path`) the proto goes
    to ``ortools.math_opt.core.python.solver.solve`` directly, the call ``mathopt.solve`` makes
    itself; on any other release the public route is taken. ``tests/solvers/test_budgets.py``
    checks both routes give the same result and fails loudly when the release changes.

    Parameters
    ----------
    model : ortools.math_opt.model_pb2.ModelProto
    solver_type : mathopt.SolverType
    params : mathopt.SolveParameters
    hint : numpy.ndarray, optional
        A value for every variable (a MIP starting point).
    """
    from ortools.math_opt.python import mathopt

    if mathopt_fast_path():
        from ortools.math_opt.core.python import solver as core

        mp = mathopt.ModelSolveParameters().to_proto()
        if hint is not None:
            h = mp.solution_hints.add()
            h.variable_values.ids.extend(range(hint.size))
            h.variable_values.values.extend(hint.tolist())
        return core.solve(
            model,
            solver_type.value,
            mathopt.StreamableSolverInitArguments().to_proto(),
            params.to_proto(),
            mp,
            None,
            mathopt.CallbackRegistration().to_proto(),
            None,
            None,
        )
    return run_mathopt_public(model, solver_type, params, hint)


def run_mathopt_public(model, solver_type, params, hint: np.ndarray | None = None):
    """:func:`run_mathopt` through the public ``mathopt`` API only (slower on large models)."""
    from ortools.math_opt.python import mathopt

    m = mathopt.Model.from_model_proto(model)
    mp = mathopt.ModelSolveParameters()
    if hint is not None:
        values = {m.get_variable(i): float(x) for i, x in enumerate(hint.tolist())}
        mp = mathopt.ModelSolveParameters(solution_hints=[mathopt.SolutionHint(values)])
    return mathopt.solve(m, solver_type, params=params, model_params=mp).to_proto()


SCIP_LONG_PARAMS = frozenset(
    {"lp/iterlim", "lp/rootiterlim", "limits/nodes", "limits/totalnodes", "limits/stallnodes"}
)
"""SCIP parameters of type ``SCIP_Longint`` among those :func:`solve_matrix_program` sets
(SCIP refuses a long integer set as an integer and the reverse)."""

_LIMITS = {
    1: "undetermined", 2: "iteration", 3: "time", 4: "node", 5: "solution", 6: "memory",
    7: "objective", 8: "norm", 9: "interrupted", 10: "slow progress", 12: "cutoff",
}  # fmt: skip
"""MathOpt ``LimitProto`` values by name."""


@dataclass(frozen=True, eq=False)
class RoutingResult:
    """One routed phase.

    Attributes
    ----------
    time_s : float
        Max over links of load / capacity under the returned paths (recomputed), seconds.
    lower_bound_s : float
        Proven lower bound on the time of any routing of this phase on these links with these
        ring candidates (the LP's dual bound, less the tie-breaking term).
    status : str
        The LP's termination (``optimal``, ``feasible``, ...) or ``trivial`` (no traffic).
    paths : PathSet
        Weighted paths over the given link ids, one commodity per node pair with traffic.
    rings : RingSet
        The rings chosen, with their LP weights (empty without ring groups).
    link_loads : numpy.ndarray
        Bytes on each link under ``paths``.
    solver : str
    wall_s : float
    work : float
        Deterministic work units spent (LP iterations and model sizes, see
        :data:`WORK_PER_NNZ_ITERATION`).
    limit : str
        The LP limit that stopped the solve (``time`` makes the result machine-dependent), or
        ``""``.
    fallback : str
        ``""`` when the paths come from the LP's solution; :data:`FALLBACK_PATHS` when the LP
        stopped without one (a limit, or a solver error in ``status``) and every pair was put
        on its fewest-hop path instead (still a feasible routing).
    """

    time_s: float
    lower_bound_s: float
    status: str
    paths: PathSet
    rings: RingSet
    link_loads: np.ndarray
    solver: str
    wall_s: float
    work: float = 0.0
    limit: str = ""
    fallback: str = ""

    @property
    def routing(self) -> PhaseRouting:
        return PhaseRouting(self.rings, self.paths)


MIN_HOP_CHUNK_BYTES = 64 << 20
"""Memory for the distance and predecessor matrices of one batch of :func:`min_hop_paths`."""


def min_hop_paths(
    n_nodes: int,
    link_src: np.ndarray,
    link_dst: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    forward: np.ndarray | None = None,
) -> list[np.ndarray | None]:
    """One fewest-hop path (link ids) per ``(src, dst)``; None where unreachable.

    ``forward`` marks nodes allowed to relay (default all). Deterministic: scipy's BFS order.

    Examples
    --------
    >>> s = np.array([0, 1, 1, 2]); d = np.array([1, 0, 2, 1])
    >>> [p.tolist() for p in min_hop_paths(3, s, d, np.array([0]), np.array([2]))]
    [[0, 2]]
    """
    fwd = np.ones(n_nodes, bool) if forward is None else np.asarray(forward, bool)
    head = np.where(fwd[link_dst], link_dst, link_dst + n_nodes)
    size = 2 * n_nodes
    g = sp.csr_matrix((np.ones(link_src.size), (link_src, head)), shape=(size, size))
    lid = link_lookup(link_src, head, size)
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    tgt = np.where(fwd[dst], dst, dst + n_nodes)
    out: list[np.ndarray | None] = [None] * src.size
    if src.size == 0:
        return out
    # one Dijkstra per distinct source in a single call (the same per-source runs, hence the
    # same predecessor trees, as one call per source, without its per-call set-up), in chunks
    # of sources whose distance and predecessor matrices fit in MIN_HOP_CHUNK_BYTES
    sources, row = np.unique(src, return_inverse=True)
    chunk = max(1, MIN_HOP_CHUNK_BYTES // (12 * size))
    for c0 in range(0, sources.size, chunk):
        dist, pred = csgraph.shortest_path(
            g,
            directed=True,
            unweighted=True,
            indices=sources[c0 : c0 + chunk],
            return_predecessors=True,
        )
        mine = np.flatnonzero((row >= c0) & (row < c0 + chunk))
        r = row[mine] - c0
        reach = np.isfinite(dist[r, tgt[mine]])
        ok, r = mine[reach], r[reach]
        for i, p in zip(ok, _walk_paths(pred, r, lid, src[ok], tgt[ok]), strict=True):
            out[i] = p
    return out


def _walk_paths(pred, row, lid, src, targets) -> list[np.ndarray]:
    """Link-id paths from ``src[i]`` to ``targets[i]`` along the shortest-path tree in row
    ``row[i]`` of ``pred``: all pairs walked back together, one hop per round."""
    cur = targets.copy()
    alive = cur != src
    hops, owner, level = [], [], []
    lv = 0
    while alive.any():
        idx = np.flatnonzero(alive)
        prev = pred[row[idx], cur[idx]]
        hops.append(lid(prev, cur[idx]))
        owner.append(idx)
        level.append(np.full(idx.size, lv))
        cur[idx] = prev
        alive[idx] = prev != src[idx]
        lv += 1
    if not hops:
        return [np.zeros(0, np.int64)] * targets.size
    h, o, lvl = np.concatenate(hops), np.concatenate(owner), np.concatenate(level)
    order = np.lexsort((-lvl, o))
    h, o = h[order], o[order]
    b = np.searchsorted(o, np.arange(targets.size + 1))
    return np.split(h, b[1:-1])


_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)


@njit(cache=_CACHE)
def _decompose_kernel(s, res, out_ptr, out_link, tail, head, sinks, need, tol, max_rounds):
    """Compiled core of :func:`_decompose_source` (one source; ``res`` and ``need`` are updated).

    ``out_ptr``/``out_link``: CSR of each node's outgoing links (ascending link id); ``tail``,
    ``head``: each link's end nodes. Returns ``(sink index, bytes, path start)`` per path and the
    concatenated link ids of the paths (each path from ``s`` to its sink).
    """
    size = out_ptr.size - 1
    K = sinks.size
    cap = 4 * K + 16
    p_sink = np.empty(cap, np.int64)
    p_amt = np.empty(cap, np.float64)
    p_ptr = np.zeros(cap + 1, np.int64)
    links = np.empty(8 * cap, np.int64)
    n_p = 0
    pred = np.full(size, -1, np.int64)  # link into each node on the BFS tree
    seen = np.zeros(size, np.bool_)
    queue = np.empty(size, np.int64)
    walk = np.empty(size, np.int64)
    for _ in range(max_rounds):
        left = 0
        for i in range(K):
            if need[i] > tol:
                left += 1
        if left == 0:
            break
        # BFS from s over links still carrying flow (fewest hops; ascending link id order)
        seen[:] = False
        pred[:] = -1
        seen[s] = True
        queue[0] = s
        qh, qt = 0, 1
        while qh < qt:
            v = queue[qh]
            qh += 1
            for j in range(out_ptr[v], out_ptr[v + 1]):
                lk = out_link[j]
                w = head[lk]
                if res[lk] > 0.0 and not seen[w]:
                    seen[w] = True
                    pred[w] = lk
                    queue[qt] = w
                    qt += 1
        moved = False
        for i in range(K):
            t = sinks[i]
            if need[i] <= tol or not seen[t] or t == s:
                continue
            # walk the tree back from t; the path's bottleneck
            hops = 0
            v = t
            amt = need[i]
            while v != s:
                lk = pred[v]
                walk[hops] = lk
                hops += 1
                if res[lk] < amt:
                    amt = res[lk]
                v = tail[lk]
            if amt <= tol:
                continue
            if n_p == cap:  # grow the path buffers
                cap *= 2
                p_sink = _grow_int(p_sink, cap)
                p_amt = _grow_float(p_amt, cap)
                p_ptr = _grow_int(p_ptr, cap + 1)
            start = p_ptr[n_p]
            if start + hops > links.size:
                links = _grow_int(links, 2 * (start + hops))
            for h in range(hops):
                lk = walk[hops - 1 - h]
                links[start + h] = lk
                res[lk] -= amt
                if res[lk] < tol:
                    res[lk] = 0.0
            p_sink[n_p] = i
            p_amt[n_p] = amt
            p_ptr[n_p + 1] = start + hops
            n_p += 1
            need[i] -= amt
            moved = True
        if not moved:
            break
    return p_sink[:n_p], p_amt[:n_p], p_ptr[: n_p + 1], links[: p_ptr[n_p]]


@njit(cache=_CACHE)
def _grow_int(a, size):
    b = np.empty(size, np.int64)
    b[: a.size] = a
    return b


@njit(cache=_CACHE)
def _grow_float(a, size):
    b = np.empty(size, np.float64)
    b[: a.size] = a
    return b


def _decompose_source(s, f, sinks, need, out_ptr, out_link, link_src, head, cap_tol):
    """Greedy path decomposition of source ``s``'s aggregated flow ``f`` (bytes per link).

    Repeatedly takes the fewest-hop path (BFS over the links still carrying flow, links in
    ascending id order) to each unmet sink, in sink order, and moves
    ``min(need, residual on the path)`` onto it; stops when every sink is served or no path
    moves anything. Returns ``{sink: [(links, bytes)]}`` and the bytes left unplaced per sink
    (numerical noise of the LP). The loop is compiled (:func:`_decompose_kernel`).
    """
    res = np.where(f < cap_tol, 0.0, f).astype(np.float64)
    left = np.asarray(need, np.float64).copy()
    snk = np.asarray(sinks, np.int64)
    max_rounds = 4 * (out_ptr.size - 1)
    p_sink, p_amt, p_ptr, links = _decompose_kernel(
        int(s), res, out_ptr, out_link, link_src, head, snk, left, float(cap_tol), max_rounds
    )
    got: dict[int, list[tuple[np.ndarray, float]]] = {int(t): [] for t in snk}
    for j in range(p_sink.size):
        got[int(snk[p_sink[j]])].append((links[p_ptr[j] : p_ptr[j + 1]], float(p_amt[j])))
    return got, left


def _build_pathset(src, dst, plist) -> PathSet:
    """PathSet from per-commodity ``[(links, bytes)]`` lists (duplicate paths merged)."""
    cptr, pptr, seq, wts = [0], [0], [], []
    for pl in plist:
        merged: dict[bytes, list] = {}
        for links, amt in pl:
            key = np.asarray(links, np.int64).tobytes()
            if key in merged:
                merged[key][1] += amt
            else:
                merged[key] = [np.asarray(links, np.int64), amt]
        tot = sum(a for _, a in merged.values())
        for links, amt in merged.values():
            seq.append(links)
            wts.append(amt / tot if tot > 0 else 1.0 / len(merged))
            pptr.append(pptr[-1] + links.size)
        cptr.append(len(wts))
    flat = np.concatenate(seq) if seq else np.zeros(0, np.int64)
    return PathSet(np.asarray(src), np.asarray(dst), np.asarray(cptr), np.asarray(pptr), flat,
                   np.asarray(wts))  # fmt: skip


def default_ring_candidates(phase: PhaseTraffic) -> list[list[np.ndarray]]:
    """One ring per group in ascending member order, plus its reverse (what NCCL would use)."""
    return [[phase.group(g), phase.group(g)[::-1].copy()] for g in range(phase.n_groups)]


def _auto_solver(n_vars: int) -> str:
    return "glop" if n_vars <= 30_000 else "pdlp"


def route_phase(
    n_nodes: int,
    link_src: np.ndarray,
    link_dst: np.ndarray,
    capacity: np.ndarray,
    phase: PhaseTraffic | None = None,
    pair_src: np.ndarray | None = None,
    pair_dst: np.ndarray | None = None,
    pair_bytes: np.ndarray | None = None,
    ring_candidates: list[list[np.ndarray]] | None = None,
    forward: np.ndarray | None = None,
    solver: str = "auto",
    time_limit: float = 60.0,
    iteration_limit: int | None = None,
    lp_tolerance: float | None = None,
) -> RoutingResult:
    """Route one phase on directed links, minimising the max over links of load / capacity.

    Parameters
    ----------
    n_nodes : int
        Nodes of the fabric (servers first).
    link_src, link_dst, capacity : numpy.ndarray
        Directed links (unique ``(src, dst)`` pairs; bundle parallel links) and bytes/s.
    phase : PhaseTraffic, optional
        Traffic of the phase (fixed matrix and ring groups). Alternatively give pair demand
        directly with ``pair_src``, ``pair_dst``, ``pair_bytes``.
    ring_candidates : list of list of numpy.ndarray, optional
        Candidate directed ring orders per ring group of ``phase`` (default
        :func:`default_ring_candidates`); the LP chooses their mixture.
    forward : numpy.ndarray of bool, optional
        Nodes allowed to relay traffic (default: all).
    solver : str
        ``auto`` (GLOP for small LPs, PDLP for large ones), ``glop`` or ``pdlp``.
    time_limit : float
        Wall-clock cap on the LP, seconds (``inf``: none).
    iteration_limit : int, optional
        PDLP's iteration limit (a deterministic limit; GLOP always solves to optimality).
    lp_tolerance : float, optional
        PDLP's relative and absolute optimality tolerance (default PDLP's own, 1e-6).

    Returns
    -------
    RoutingResult
        Always a feasible routing: when a limit (the wall clock, the iteration limit) or the
        solver stops the LP before it has a solution, every pair goes on its fewest-hop path
        and the rings are chosen without the LP (``fallback`` says so, ``limit`` and
        ``status`` say why). A limit never raises.

    Raises
    ------
    InputError
        When a pair with traffic (or a candidate ring step) cannot be routed: a disconnected
        fabric.

    Examples
    --------
    A 4-cycle 0-1-2-3-0 of 1 byte/s links; 0 sends 2 bytes to 2: two 2-hop paths, 1 byte each.

    >>> s = np.array([0, 1, 1, 2, 2, 3, 3, 0]); d = np.array([1, 0, 2, 1, 3, 2, 0, 3])
    >>> r = route_phase(4, s, d, np.ones(8), pair_src=np.array([0]), pair_dst=np.array([2]),
    ...                 pair_bytes=np.array([2.0]))
    >>> round(r.time_s, 6), r.paths.n_paths, sorted(np.round(r.paths.weight, 6).tolist())
    (1.0, 2, [0.5, 0.5])
    """
    t0 = time.perf_counter()
    link_src = np.asarray(link_src, np.int64)
    link_dst = np.asarray(link_dst, np.int64)
    cap = np.asarray(capacity, np.float64)
    L = link_src.size
    if L and np.any(cap <= 0):
        raise InputError("links.capacity", float(cap.min()), "bytes/s > 0")
    if L and np.unique(link_src * n_nodes + link_dst).size != L:
        raise InputError("links", "duplicate directed pair", "one link per (src, dst); bundle them")
    fwd = np.ones(n_nodes, bool) if forward is None else np.asarray(forward, bool)

    # ---- data: fixed pairs and candidate rings
    if phase is not None:
        fx = phase.fixed.tocoo()
        fs, fd, fb = fx.row.astype(np.int64), fx.col.astype(np.int64), fx.data.astype(float)
        cands = ring_candidates if ring_candidates is not None else default_ring_candidates(phase)
        gbytes = phase.ring_bytes
        groups = [g for g in range(phase.n_groups) if gbytes[g] > 0]
    else:
        fs = np.asarray(pair_src, np.int64)
        fd = np.asarray(pair_dst, np.int64)
        fb = np.asarray(pair_bytes, np.float64)
        cands, gbytes, groups = [], np.zeros(0), []
    keep = (fb > 0) & (fs != fd)
    fs, fd, fb = fs[keep], fd[keep], fb[keep]
    ring_group: list[int] = []
    ring_orders: list[np.ndarray] = []
    for g in groups:
        if not cands[g]:
            raise InputError(f"ring_candidates[{g}]", "empty", "at least one ring per group")
        for order in cands[g]:
            ring_group.append(g)
            ring_orders.append(np.asarray(order, np.int64))
    C = len(ring_orders)
    gidx = {g: i for i, g in enumerate(groups)}
    G = len(groups)
    step_s = np.concatenate([o for o in ring_orders]) if C else np.zeros(0, np.int64)
    step_t = np.concatenate([np.roll(o, -1) for o in ring_orders]) if C else np.zeros(0, np.int64)
    step_c = np.repeat(np.arange(C), [o.size for o in ring_orders]).astype(np.int64)
    empty_paths = PathSet(*(np.zeros(0),) * 2, np.zeros(1), np.zeros(1), np.zeros(0), np.zeros(0))
    if fs.size == 0 and C == 0:
        return RoutingResult(
            0.0, 0.0, "trivial", empty_paths, RingSet.empty(), np.zeros(L), "none", 0.0
        )
    if L == 0:
        raise InputError("fabric", "no links", "a connected fabric where routes are requested")
    # connectivity: every pair with traffic (and every candidate ring step) must be routable
    want_s = np.concatenate([fs, step_s])
    want_t = np.concatenate([fd, step_t])
    pk = np.unique(want_s * n_nodes + want_t)
    mh = min_hop_paths(n_nodes, link_src, link_dst, pk // n_nodes, pk % n_nodes, fwd)
    for i, p in enumerate(mh):
        if p is None:
            raise InputError(
                "fabric",
                f"server {int(pk[i] // n_nodes)} cannot reach server {int(pk[i] % n_nodes)}",
                "a connected fabric where routes are requested",
            )

    # ---- model. Columns: f[s, l] (source-major) | lambda_c | T.  Rows: (1) | (2) | (3)
    sources = np.unique(want_s)
    S = sources.size
    spos = np.searchsorted(sources, np.arange(n_nodes)).clip(0, S - 1)
    U = max(float(fb.max()) if fb.size else 0.0, float(gbytes.max()) if G else 0.0)
    cap0 = float(cap.max())
    nf = S * L
    nv = nf + C + 1
    col = np.arange(nf)
    cs, cl = col // L, col % L
    # (1) conservation of source s at node v: out - in - sum_c coeff lambda_c = fixed supply
    r1_out = cs * n_nodes + link_src[cl]
    r1_in = cs * n_nodes + link_dst[cl]
    rows = [r1_out, r1_in]
    cols = [col, col]
    vals = [np.ones(nf), -np.ones(nf)]
    rhs1 = np.zeros(S * n_nodes)
    np.add.at(rhs1, spos[fs] * n_nodes + fs, fb / U)
    np.add.at(rhs1, spos[fs] * n_nodes + fd, -fb / U)
    if C:
        coef = gbytes[np.asarray(ring_group)[step_c]] / U
        # ring step s->t: supply +coef at (s, s), demand -coef at (s, t)
        rows += [spos[step_s] * n_nodes + step_s, spos[step_s] * n_nodes + step_t]
        cols += [nf + step_c, nf + step_c]
        vals += [-coef, coef]
        # (2) convexity
        rows.append(S * n_nodes + np.array([gidx[g] for g in ring_group]))
        cols.append(nf + np.arange(C))
        vals.append(np.ones(C))
    # (3) link capacity: sum_s f[s, l] - cap_l / cap0 * T <= 0
    r3 = S * n_nodes + G
    rows += [r3 + cl, r3 + np.arange(L)]
    cols += [col, np.full(L, nv - 1)]
    vals += [np.ones(nf), -cap / cap0]
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(S * n_nodes + G + L, nv),
    )
    row_lb = np.concatenate([rhs1, np.ones(G), np.full(L, -np.inf)])
    row_ub = np.concatenate([rhs1, np.ones(G), np.zeros(L)])
    var_ub = np.full(nv, np.inf)
    # non-forwarding nodes never relay: f[s, l] = 0 on links leaving v != s
    relay_ban = (~fwd[link_src[cl]]) & (link_src[cl] != sources[cs])
    var_ub[:nf][relay_ban] = 0.0
    eps = 1e-5 / L  # tie-break towards short routes: adds at most 1e-5 * T
    cvec = np.zeros(nv)
    cvec[:nf] = eps
    cvec[-1] = 1.0
    name = _auto_solver(nv) if solver == "auto" else solver
    res = solve_matrix_program(
        cvec, A, row_lb, row_ub, np.zeros(nv), var_ub, solver=name, time_limit=time_limit,
        iteration_limit=iteration_limit if name == "pdlp" else None, lp_tolerance=lp_tolerance,
    )  # fmt: skip
    T0 = U / cap0
    lb = max(float(res.bound), 0.0) / (1.0 + 1e-5) * T0 if np.isfinite(res.bound) else 0.0
    if res.x is None:  # a limit (or the solver) stopped the LP before any solution
        return _fallback_routing(
            phase, fs, fd, fb, groups, ring_group, ring_orders, n_nodes, pk, mh, cap, lb, res,
            t0,
        )  # fmt: skip

    # ---- read off: ring weights
    lam = np.maximum(res.x[nf : nf + C], 0.0)
    rings_out = []
    for g in groups:
        idx = [r for r in range(C) if ring_group[r] == g]
        lv = np.where(lam[idx] > 1e-6, lam[idx], 0.0)
        if lv.sum() <= 0:
            lv = np.zeros(len(idx))
            lv[0] = 1.0
        lv = lv / lv.sum()
        rings_out += [
            (g, float(lv[j]), ring_orders[r].tolist()) for j, r in enumerate(idx) if lv[j]
        ]
    rings = RingSet.from_lists(rings_out)
    # ---- paths: decompose each source's flow; leftovers (LP noise) go on fewest-hop paths
    if phase is not None:
        ps, pt, pb = phase_pairs(phase, rings, n_nodes)
    else:
        key = fs * n_nodes + fd
        uk, inv = np.unique(key, return_inverse=True)
        ps, pt, pb = uk // n_nodes, uk % n_nodes, np.bincount(inv, weights=fb)
    flows = np.maximum(res.x[:nf], 0.0).reshape(S, L) * U
    head = np.where(fwd[link_dst], link_dst, link_dst + n_nodes)
    size = 2 * n_nodes
    out_link = np.argsort(link_src, kind="stable").astype(np.int64)
    out_ptr = np.zeros(size + 1, np.int64)
    out_ptr[1:] = np.cumsum(np.bincount(link_src, minlength=size))
    plists: list[list] = [[] for _ in range(ps.size)]
    tol = 1e-9 * U
    for s in np.unique(ps):
        mine = np.flatnonzero(ps == s)
        sinks = np.where(fwd[pt[mine]], pt[mine], pt[mine] + n_nodes)
        got, left = _decompose_source(
            int(s), flows[spos[s]], sinks, pb[mine], out_ptr, out_link, link_src, head, tol
        )
        for j, i in enumerate(mine):
            plists[i] = list(got[int(sinks[j])])
            if left[j] > tol or not plists[i]:
                plists[i].append((mh[int(np.searchsorted(pk, ps[i] * n_nodes + pt[i]))], left[j]))
    paths = _build_pathset(ps, pt, plists)
    loads = paths.link_loads(pb, L)
    tval = float((loads / cap).max())
    work = res.work + WORK_PER_FLOW_COLUMN * nf
    return RoutingResult(
        tval, min(lb, tval), res.status, paths, rings, loads, name, time.perf_counter() - t0,
        work, res.limit,
    )  # fmt: skip


def _fallback_routing(
    phase, fs, fd, fb, groups, ring_group, ring_orders, n_nodes, pk, mh, cap, lb, res, t0
) -> RoutingResult:
    """The routing of a phase whose LP stopped without a solution: every pair on its fewest-hop
    path, each ring group either spread evenly over its candidate rings or on its first one
    (whichever gives the shorter time). Feasible whenever the fabric is connected."""
    L = cap.size
    best = None
    for spread in (True, False):
        rings_out = []
        for g in groups:
            idx = [r for r in range(len(ring_orders)) if ring_group[r] == g]
            use = idx if spread else idx[:1]
            rings_out += [(g, 1.0 / len(use), ring_orders[r].tolist()) for r in use]
        rings = RingSet.from_lists(rings_out)
        if phase is not None:
            ps, pt, pb = phase_pairs(phase, rings, n_nodes)
        else:
            uk, inv = np.unique(fs * n_nodes + fd, return_inverse=True)
            ps, pt, pb = uk // n_nodes, uk % n_nodes, np.bincount(inv, weights=fb)
        k = np.searchsorted(pk, ps * n_nodes + pt)
        paths = _build_pathset(ps, pt, [[(mh[int(i)], 1.0)] for i in k])
        loads = paths.link_loads(pb, L)
        tval = float((loads / cap).max()) if L else 0.0
        if best is None or tval < best[0]:
            best = (tval, paths, rings, loads)
        if not groups:
            break
    tval, paths, rings, loads = best
    return RoutingResult(
        tval, min(lb, tval), res.status, paths, rings, loads, res.solver,
        time.perf_counter() - t0, res.work, res.limit, FALLBACK_PATHS,
    )  # fmt: skip


FALLBACK_PATHS = "fewest-hop paths"
"""``fallback`` of a routing whose LP stopped without a solution (:func:`route_phase`)."""


@dataclass(frozen=True, eq=False)
class SharedRouting:
    """All phases routed with one set of paths (the same fractions in every phase).

    Attributes
    ----------
    paths : PathSet
        One commodity per node pair with traffic in any phase.
    rings : tuple of RingSet
        Per phase.
    phase_times : numpy.ndarray
        Seconds per phase under ``paths`` (recomputed).
    phase_lower_bounds : numpy.ndarray
        Per-phase LP bounds (valid for any routing, shared or not).
    status : str
    solver : str
    wall_s : float
    work : float
        Deterministic work units of every LP behind it (see :class:`RoutingResult`).
    limit : str
        ``time`` when the wall-clock cap stopped (or skipped) any of its LPs, else the first
        other limit hit, else ``""``.
    fallback : str
        ``""`` when every LP behind it gave a solution; otherwise what replaced the missing
        solution (:data:`FALLBACK_PATHS` for a phase, ``"first candidate paths"`` for the
        sharing LP).
    """

    paths: PathSet
    rings: tuple[RingSet, ...]
    phase_times: np.ndarray
    phase_lower_bounds: np.ndarray
    status: str
    solver: str
    wall_s: float
    work: float = 0.0
    limit: str = ""
    fallback: str = ""

    @property
    def time_s(self) -> float:
        return float(self.phase_times.sum())

    @property
    def lower_bound_s(self) -> float:
        return float(self.phase_lower_bounds.sum())

    def routings(self) -> tuple[PhaseRouting, ...]:
        return tuple(PhaseRouting(r, self.paths) for r in self.rings)


def share_paths(
    n_nodes: int,
    link_src: np.ndarray,
    capacity: np.ndarray,
    phases: list[PhaseTraffic],
    results: list[RoutingResult],
    solver: str = "auto",
    time_limit: float = 60.0,
    iteration_limit: int | None = None,
    lp_tolerance: float | None = None,
) -> SharedRouting:
    """One routing for every phase: the best path fractions over the per-phase LPs' paths.

    .. code-block:: text

        min  sum_p T_p
        (4) sum_{q in Q_k} y_q = 1                                 for every node pair k
        (5) sum_k D^p_k sum_{q in Q_k : l in q} y_q - cap_l T_p <= 0  for every phase p, link l

    ``Q_k`` is the union of the paths the per-phase routings use for ``k``; ``D^p_k`` the bytes of
    ``k`` in phase ``p`` with the phase's ring weights fixed. Never worse than using any one
    phase's fractions everywhere.
    """
    t0 = time.perf_counter()
    L = np.asarray(link_src).size
    cap = np.asarray(capacity, np.float64)
    P = len(phases)
    # commodities: union over phases
    dem = []
    for ph, r in zip(phases, results, strict=True):
        dem.append(phase_pairs(ph, r.rings, n_nodes))
    allk = np.unique(np.concatenate([s * n_nodes + t for s, t, _ in dem] + [np.zeros(0, np.int64)]))
    K = allk.size
    if K == 0:
        empty = results[0].paths if results else None
        return SharedRouting(empty, tuple(r.rings for r in results), np.zeros(P), np.zeros(P),
                             "trivial", "none", 0.0)  # fmt: skip
    Dk = np.zeros((P, K))
    for p, (s, t, b) in enumerate(dem):
        Dk[p, np.searchsorted(allk, s * n_nodes + t)] = b
    cand: list[dict[bytes, np.ndarray]] = [dict() for _ in range(K)]
    for r in results:
        ps = r.paths
        kk = np.searchsorted(allk, ps.src * n_nodes + ps.dst)
        for c in range(ps.n_commodities):
            for q in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1]):
                links = ps.path_links[ps.path_ptr[q] : ps.path_ptr[q + 1]]
                cand[kk[c]].setdefault(links.tobytes(), links)
    qk = np.concatenate([np.full(len(c), k) for k, c in enumerate(cand)])
    qlinks = [v for c in cand for v in c.values()]
    Q = len(qlinks)
    qlen = np.array([x.size for x in qlinks])
    flat = np.concatenate(qlinks)
    U = float(Dk.max())
    cap0 = float(cap.max())
    rows = [qk]
    cols = [np.arange(Q)]
    vals = [np.ones(Q)]
    qrep = np.repeat(np.arange(Q), qlen)
    for p in range(P):
        coef = Dk[p, qk[qrep]] / U
        nz = coef > 0
        rows.append(K + p * L + flat[nz])
        cols.append(qrep[nz])
        vals.append(coef[nz])
        rows.append(K + p * L + np.arange(L))
        cols.append(np.full(L, Q + p))
        vals.append(-cap / cap0)
    nv = Q + P
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(K + P * L, nv)
    )
    cvec = np.zeros(nv)
    cvec[Q:] = 1.0
    cvec[:Q] = 1e-6 * qlen / max(qlen.max(), 1) / K  # prefer short paths among equals
    row_lb = np.concatenate([np.ones(K), np.full(P * L, -np.inf)])
    row_ub = np.concatenate([np.ones(K), np.zeros(P * L)])
    name = _auto_solver(nv) if solver == "auto" else solver
    res = solve_matrix_program(
        cvec, A, row_lb, row_ub, np.zeros(nv), np.full(nv, np.inf), solver=name,
        time_limit=time_limit, iteration_limit=iteration_limit if name == "pdlp" else None,
        lp_tolerance=lp_tolerance,
    )  # fmt: skip
    y = np.maximum(res.x[:Q], 0.0) if res.x is not None else None
    plists: list[list] = [[] for _ in range(K)]
    if y is not None:
        tot = np.bincount(qk, weights=y, minlength=K)
        for q in range(Q):
            if y[q] > 1e-7 * max(tot[qk[q]], 1e-300):
                plists[qk[q]].append((qlinks[q], float(y[q])))
    for k in range(K):
        if not plists[k]:  # LP failed: first candidate
            plists[k].append((next(iter(cand[k].values())), 1.0))
    paths = _build_pathset(allk // n_nodes, allk % n_nodes, plists)
    times = np.array([float((paths.link_loads(Dk[p], L) / cap).max()) for p in range(P)])
    lbs = np.array([r.lower_bound_s for r in results])
    fallback = "" if y is not None else "first candidate paths"
    return SharedRouting(paths, tuple(r.rings for r in results), times, lbs, res.status, name,
                         time.perf_counter() - t0, res.work, res.limit, fallback)  # fmt: skip


def merge_paths(
    n_nodes: int,
    link_src: np.ndarray,
    capacity: np.ndarray,
    phases: list[PhaseTraffic],
    results: list[RoutingResult],
) -> SharedRouting:
    """One routing for every phase without an LP: each node pair keeps the paths of one phase.

    Tried: every pair in the phase where it is most critical (largest bytes / phase time), and,
    for each phase ``p``, phase ``p``'s paths wherever ``p`` has the pair; the best total (times
    recomputed) is returned.

    The cheap alternative to :func:`share_paths` for large instances.
    """
    t0 = time.perf_counter()
    L = np.asarray(link_src).size
    cap = np.asarray(capacity, np.float64)
    P = len(phases)
    dem = [phase_pairs(ph, r.rings, n_nodes) for ph, r in zip(phases, results, strict=True)]
    allk = np.unique(np.concatenate([s * n_nodes + t for s, t, _ in dem] + [np.zeros(0, np.int64)]))
    K = allk.size
    score = np.full((P, K), -1.0)
    Dk = np.zeros((P, K))
    for p, ((s, t, b), r) in enumerate(zip(dem, results, strict=True)):
        k = np.searchsorted(allk, s * n_nodes + t)
        Dk[p, k] = b
        score[p, k] = b / max(r.time_s, 1e-300)
    present = score >= 0
    owners = [np.argmax(score, axis=0)]  # per pair: the phase where it is most critical
    for p in range(P):  # or: phase p's routing wherever p has the pair
        owners.append(np.where(present[p], p, owners[0]))
    best = None
    for owner in owners:
        plists: list[list] = [[] for _ in range(K)]
        for p, r in enumerate(results):
            ps = r.paths
            kk = np.searchsorted(allk, ps.src * n_nodes + ps.dst)
            for c in np.flatnonzero(owner[kk] == p):
                for q in range(ps.commodity_ptr[c], ps.commodity_ptr[c + 1]):
                    links = ps.path_links[ps.path_ptr[q] : ps.path_ptr[q + 1]]
                    plists[kk[c]].append((links, float(ps.weight[q])))
        paths = _build_pathset(allk // n_nodes, allk % n_nodes, plists)
        times = np.array([float((paths.link_loads(Dk[p], L) / cap).max()) for p in range(P)])
        if best is None or times.sum() < best[1].sum():
            best = (paths, times)
    paths, times = best
    lbs = np.array([r.lower_bound_s for r in results])
    return SharedRouting(paths, tuple(r.rings for r in results), times, lbs, "merged", "none",
                         time.perf_counter() - t0)  # fmt: skip


def route_circuits(
    problem: DesignProblem,
    circuits,
    ring_candidates: list[list[list[np.ndarray]]] | None = None,
    solver: str = "auto",
    time_limit: float = 60.0,
    max_shared_columns: int = 20_000,
    iteration_limit: int | None = None,
    lp_tolerance: float | None = None,
) -> SharedRouting:
    """Route every phase of ``problem`` on a circuit design (host forwarding allowed).

    Each phase is routed by :func:`route_phase`; with several phases the paths are then shared (a
    design carries one routing): the better of :func:`merge_paths` and, when the per-phase
    routings have at most ``max_shared_columns`` paths in all, :func:`share_paths`. Link ids are
    those of :func:`solvers.model.congestion.circuit_links` on the canonical circuits.
    ``ring_candidates[p][g]`` lists candidate orders for group ``g`` of phase ``p``.

    Every decision here is deterministic: ``time_limit`` (seconds) is only a wall-clock cap on
    the whole call (each LP gets what is left of it; a result it cut has ``limit == "time"``),
    ``iteration_limit`` and ``lp_tolerance`` go to every PDLP solve (:func:`route_phase`).

    Examples
    --------
    A triangle of 1 byte/s circuits; 3 bytes from 0 to 2 split 2 direct / 1 via server 1.

    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import DesignProblem, PhaseTraffic
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix(([3.0], ([0], [2])), shape=(3, 3)))
    >>> prob = DesignProblem(3, 2, 1.0, (ph,))
    >>> round(route_circuits(prob, [[0, 1, 1], [1, 2, 1], [0, 2, 1]]).time_s, 6)
    1.5
    """
    t0 = time.perf_counter()
    c = Circuits(circuits, problem.n).rows
    src, dst, cap = circuit_links(c, problem.link_bandwidth)
    results = []
    lp = {"iteration_limit": iteration_limit, "lp_tolerance": lp_tolerance}
    for i, ph in enumerate(problem.phases):
        left = max(time_limit - (time.perf_counter() - t0), 0.01)
        cands = ring_candidates[i] if ring_candidates is not None else None
        results.append(
            route_phase(problem.n, src, dst, cap, phase=ph, ring_candidates=cands, solver=solver,
                        time_limit=left, **lp)
        )  # fmt: skip
    work = sum(r.work for r in results)
    limit = _first_limit([r.limit for r in results])
    fallback = next((r.fallback for r in results if r.fallback), "")
    if len(results) == 1:
        r = results[0]
        return SharedRouting(r.paths, (r.rings,), np.array([r.time_s]),
                             np.array([r.lower_bound_s]), r.status, r.solver, r.wall_s, work,
                             limit, fallback)  # fmt: skip
    merged = merge_paths(problem.n, src, cap, list(problem.phases), results)
    merged = replace(merged, work=work, limit=limit, fallback=fallback)
    n_cols = sum(r.paths.n_paths for r in results)
    if n_cols > max_shared_columns:
        return merged
    left = time_limit - (time.perf_counter() - t0)
    if left <= 0:  # the cap cut the call short: the result depends on the clock
        return replace(merged, limit="time")
    shared = share_paths(problem.n, src, cap, list(problem.phases), results, solver, left, **lp)
    work += shared.work
    limit = _first_limit([limit, shared.limit])
    best = shared if shared.time_s <= merged.time_s else merged
    return replace(best, work=work, limit=limit, fallback=fallback or best.fallback)


def _first_limit(limits: list[str]) -> str:
    """``time`` if any limit is (the clock decided), else the first non-empty one."""
    if "time" in limits:
        return "time"
    return next((x for x in limits if x), "")


def route_fabric(
    fabric,
    problem: DesignProblem,
    host_forwarding: bool | None = None,
    solver: str = "auto",
    time_limit: float = 60.0,
) -> list[RoutingResult]:
    """Route every phase of ``problem`` on a :class:`topoopt.fabrics.fabric.Fabric`.

    Parameters
    ----------
    fabric : Fabric
        Any fabric (fat-tree, torus, hybrid, direct-connect); server ``i`` is node ``i``.
    problem : DesignProblem
        Its ``n`` must equal ``fabric.n_servers`` (degree and bandwidth are not used).
    host_forwarding : bool, optional
        May servers relay traffic? Default: yes when the fabric has optical circuits or no
        switches (direct-connect, torus), no otherwise (fat-trees).

    Returns
    -------
    list of RoutingResult
        One per phase; path link ids are the fabric's.
    """
    if problem.n != fabric.n_servers:
        raise InputError("problem.n", problem.n, f"the fabric's {fabric.n_servers} servers")
    if host_forwarding is None:
        host_forwarding = bool(np.any(fabric.link_kind == "optical")) or fabric.n_switches == 0
    fwd = np.ones(fabric.n_nodes, bool)
    if not host_forwarding:
        fwd[: fabric.n_servers] = False
    t0 = time.perf_counter()
    out = []
    for i, ph in enumerate(problem.phases):
        left = time_limit - (time.perf_counter() - t0)
        share = max(left / (problem.n_phases - i), 0.5)
        out.append(
            route_phase(fabric.n_nodes, fabric.src, fabric.dst, fabric.capacity, phase=ph,
                        forward=fwd, solver=solver, time_limit=share)
        )  # fmt: skip
    return out
