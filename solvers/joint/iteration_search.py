"""The joint optimizer with the iteration objective: minimise the flow model's iteration time.

:func:`iteration_design` is what ``solve(problem, "joint", objective="iteration")`` runs (the
default). Users pay for iteration time, the critical path of a DAG of compute and communication,
so every design is judged by the flow model's simulated iteration
(:func:`solvers.joint.iteration_objective.iteration_time`), and the search is steered by the
critical path of the ideal switch's iteration (:mod:`solvers.joint.critical_path`).

Pipeline
--------
1. *Bound.* ``lower_bound_s = max(critical path with every task at its shortest possible
   duration on d ports of B, the ideal switch's simulated iteration)``
   (:func:`~solvers.joint.critical_path.iteration_lower_bound`,
   :func:`~solvers.joint.iteration_objective.ideal_reference`); ``gap = (T - bound) / T``.
   The ideal run's compute-only iteration is passed on to every later simulation (it does
   not depend on the fabric), which then runs once per design.
2. *Warm start.* The baselines ``topoopt``, ``topoopt-released`` and ``expander`` are built and
   simulated; the fastest is the first incumbent. It stays a finalist to the end, so the result
   is never slower than any of them in the flow model (checked explicitly before returning:
   ``info["never_slower_than_warm_start"]``).
3. *Criticality.* For task-graph workloads the ideal run's task durations give each transfer and
   all-reduce its slack; :func:`~solvers.joint.iteration_objective.window_problem` builds the
   criticality-weighted window problem (bytes in flight per window of the ideal iteration,
   weighted by ``dur / (dur + slack)``). Plan-derived workloads use the phase problem.
4. *Candidates.* The circuit sets of the congestion optimizer
   (:func:`solvers.joint.driver.candidate_circuits` on both the phase problem and the window
   problem), the baselines' circuits and the circulant stride sets
   (:func:`circulant_candidates`) and the block constructions
   (:func:`solvers.joint.block_candidates.block_candidates`): the :data:`SHORTEST_CIRCULANTS`
   circulants of fewest mean hops first, then the complete-block constructions (when none fits:
   the rings inside blocks of at most
   :data:`~solvers.joint.block_candidates.CYCLE_ENUMERATION` servers), then by
   :func:`~solvers.joint.driver.quick_score` on the windows. Each is
   routed by the routing LP on the window problem (ring orders carried back by
   :func:`~solvers.joint.iteration_objective.remap_rings`) and simulated, within
   :data:`CANDIDATE_SHARE` of the work limit (the block constructions named first are routed on
   the phase problem, and always). The :data:`PHASE_ROUTED` fastest are routed again
   on half and one and a half times as many windows, and simulated. (Plan-derived workloads:
   every candidate is routed on the phase problem.)
4b. *Block routing.* When the best block construction is within :data:`BLOCK_ROUTING_MARGIN` of
   the incumbent, it is simulated with its rings balanced across the blocks' positions
   (:func:`~solvers.joint.block_candidates.balanced_block_rings`), each two-hop spread of
   :data:`BLOCK_SPREADS` and each share of :data:`BLOCK_DETOURS` of its pairs across on detours
   through block mates (:func:`~solvers.joint.block_candidates.block_detours`): on TopoOpt's
   CANDLE task graphs this is what brings the iteration within 1.10x of the ideal switch at 8
   ports (with ``priorities``).
5. *Local search.* Degree-preserving 2-swaps on the incumbent's circuits
   (:func:`solvers.joint.local_search.swap_candidates`), guided by the window routing's hottest
   links (where critical bytes are most congested), each routed with the incumbent's routing
   kind and accepted when the simulated iteration drops.
6. *Collectives.* :func:`solvers.joint.collective_choice.choose_collectives` tries each ring
   family of the result as a Blink tree packing on the group's circuits and keeps it when the
   simulated iteration drops; ``objective_s`` is then the picked design's simulated iteration
   (``info["collective_choice"]`` has both times).

Determinism
-----------
Every step is charged deterministic work units: the routing LPs their LP work
(:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`) plus :data:`WORK_PER_ROUTED_PHASE` per
phase, each simulation ``WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows *
WORK_PER_SIMULATED_FLOW``. Steps run while the work used
plus the forecast of the next step (the last one's work) is within ``work_limit``
(:data:`DEFAULT_ITERATION_WORK_LIMIT`); one simulation may use at most the work left, in
re-fills (a longer one stops deterministically and its design is not chosen). The wall-clock
``time_limit_s`` is only a cap: when it cuts a step, ``info["deterministic"]`` is False.

When the flow model cannot judge (no compute model: a hand-made Workload or a problem without
one; more than :data:`ITERATION_MAX_SERVERS` servers, as the 128-server DLRM task graph; or the
warm start's first simulation needs more than :data:`FIRST_SIMULATION_SHARE` of the work
limit), the congestion objective decides (:func:`solvers.joint.driver.joint_design`) and
``info["objective"]`` says so with the reason.

Priorities
----------
By default the flow model shares every link max-min fairly between all flows, and the
optimizer assumes exactly that (criticality weighs what it wires and routes for, never the
order in which the network serves flows). With ``priorities=True`` per-class strict priority is
part of the design (``Design.priority``; the host-forwarding NICs' traffic classes): every
warm-start baseline is also simulated with each traffic class that crosses servers served first
(:func:`priority_orders`); the order that makes some baseline fastest, when it beats fair
sharing there, is tried beside fair sharing on every later candidate, swap and widening (each
simulated both ways, so the search sees about half as many designs within the same work). The
flow model simulates the chosen priorities exactly (:mod:`topoopt.flowsim.priorities`), and
every later simulation of the design uses them (:func:`solvers.realise.simulate_design`). The
ideal-switch part of the reported bound is then the lesser of the ideal switch's iteration
shared fairly and under the same priorities (``info["ideal_priority_iteration_s"]``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from solvers.joint.block_candidates import (
    balanced_block_rings,
    block_constructions,
    block_detours,
    first_block_candidates,
)
from solvers.joint.critical_path import iteration_lower_bound
from solvers.joint.iteration_objective import (
    has_compute_model,
    ideal_reference,
    iteration_time,
    remap_rings,
    spread_routing,
    window_count,
    window_problem,
)
from solvers.model.congestion import canonical_circuits, evaluate_routing
from solvers.model.design import Design
from solvers.model.ports import with_port_options
from solvers.model.problem import DesignProblem
from traffic.errors import InputError

__all__ = [
    "iteration_design",
    "priority_orders",
    "DEFAULT_ITERATION_WORK_LIMIT",
    "WORK_PER_SIMULATED_FLOW",
    "WARM_START",
]

DEFAULT_ITERATION_WORK_LIMIT = 40.0
"""Default work limit of :func:`iteration_design`, in work units (about one core-second each).
The 16-server TopoOpt task graphs take about 0.5-1 unit per candidate (a routing LP and a
simulation), so about 30-60 designs are simulated."""

WORK_PER_SIMULATED_FLOW = 1.5e-4
"""Work units per flow of a simulated iteration (building, realising and reading it off:
about 0.5 s for the 3,000 flows of the 16-server CANDLE task graph on the reference machine),
charged on top of the re-fills (:data:`solvers.joint.driver.WORK_PER_REFILL`)."""

PHASE_ROUTED = 2
"""The best candidates (by simulated iteration with the window routing) are also routed on
half and one and a half times as many windows (the routing LP's optimum is one of many
congestion-equivalent routings; the flow model tells them apart)."""

SHORTEST_CIRCULANTS = 2
"""The circulant candidates of fewest mean hops simulated first (:func:`sorted_by_hops`)."""

CANDIDATE_SHARE = 0.6
"""The candidates are simulated while the work used is below this share of the work limit; the
rest goes to the best ones' other routings and to the swap search."""

ITERATION_MAX_SERVERS = 64
"""Above this many servers the congestion objective decides (a deterministic size rule: a
flow simulation of the 128-server DLRM task graph's TopoOpt design takes about 20 s, the whole
60 s budget holds three)."""

MAX_CIRCULANTS = 40
"""At most this many circulant stride sets are candidates (:func:`circulant_candidates`)."""

FIRST_SIMULATION_SHARE = 0.5
"""The warm start's first simulation (``topoopt``) may use at most this share of the work
limit; when it needs more, the problem is too large for the flow model to steer the search and
the congestion objective decides (the 128-server DLRM task graph: about 4.6e8 re-fills)."""

WORK_PER_SIMULATION = 0.05
"""Fixed work units of one simulated iteration (realising the design, two event loops)."""

WORK_PER_ROUTED_PHASE = 0.03
"""Work units per phase of a routing, on top of its LP work (building the model, path
decomposition): the window problem has up to 16 phases, so this is most of a small routing."""

SPREADS = (0.25, 0.5, 1.0)
"""The :data:`PHASE_ROUTED` best candidates' routings are also simulated with these shares of
every pair's bytes moved onto its widest two-hop paths
(:func:`~solvers.joint.iteration_objective.spread_routing`); the swap search keeps the
incumbent's share."""

BLOCK_SPREADS = (0.5, 1.0)
"""Two-hop spreads (:func:`~solvers.joint.iteration_objective.spread_routing`) of the block
routing step: the best block construction, its rings balanced
(:func:`~solvers.joint.block_candidates.balanced_block_rings`), is simulated with each, times
each of :data:`BLOCK_DETOURS`."""

BLOCK_ROUTING_MARGIN = 0.10
"""The block routing step runs when the best block construction's simulated iteration is within
this share of the incumbent's (its variants gained 5-9 % on TopoOpt's CANDLE task graphs; a
construction further behind does not pay for its simulations)."""

BLOCK_DETOURS = (0.0, 0.5)
"""Shares of the pairs across blocks moved onto detours through block mates
(:func:`~solvers.joint.block_candidates.block_detours`) in the block routing step."""

WARM_START = ("topoopt", "topoopt-released", "expander")
"""The baselines the iteration search starts from and never ships slower than."""


def circulant_candidates(problem: DesignProblem, rank_by: DesignProblem) -> list:
    """Circulant circuit sets ``{i, i + p}`` on ``d / 2`` strides ``p`` in ``1..n/2`` (TopoOpt's
    family, every stride set rather than the geometric rule), connected, without port options;
    when there are more than :data:`MAX_CIRCULANTS`, the ones with the smallest
    :func:`solvers.joint.driver.quick_score` on ``rank_by``.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from solvers.model.problem import PhaseTraffic
    >>> ph = PhaseTraffic("x", [0], [], [], sp.csr_matrix(np.ones((6, 6))))
    >>> p = DesignProblem(6, 4, 1e9, (ph,))
    >>> [nm for nm, _ in circulant_candidates(p, p)]
    ['circulant [1, 2]', 'circulant [1, 3]', 'circulant [2, 3]']
    """
    import itertools

    from solvers.joint.driver import quick_score
    from topoopt.fabrics import circulant_circuits

    n, d = problem.n, problem.degree
    if problem.has_port_options or d < 2 or n < 4:
        return []
    k = d // 2
    pool = range(1, n // 2 + 1)
    if math.comb(len(pool), k) > 50 * MAX_CIRCULANTS:
        return []
    out = []
    for strides in itertools.combinations(pool, k):
        if math.gcd(n, *strides) != 1:
            continue  # disconnected
        c = canonical_circuits(circulant_circuits(n, strides), n)
        if c[:, 2].max() > problem.pair_cap:
            continue
        out.append((f"circulant {list(strides)}", c))
    if len(out) > MAX_CIRCULANTS:
        scored = sorted(range(len(out)), key=lambda i: (quick_score(rank_by, out[i][1]), i))
        out = [out[i] for i in sorted(scored[:MAX_CIRCULANTS])]
    return out


def sorted_by_hops(candidates: list, n: int) -> list:
    """``(name, circuits)`` candidates by the mean hop count over ordered server pairs of their
    circuit graph (stable: ties keep their order); disconnected ones last.

    Examples
    --------
    >>> from topoopt.fabrics import circulant_circuits
    >>> c = [("ring", circulant_circuits(8, [1])), ("chords", circulant_circuits(8, [1, 3]))]
    >>> [nm for nm, _ in sorted_by_hops(c, 8)]
    ['chords', 'ring']
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import shortest_path

    def mean_hops(c: np.ndarray) -> float:
        c = canonical_circuits(c, n)
        a = sp.coo_matrix((np.ones(c.shape[0]), (c[:, 0], c[:, 1])), shape=(n, n))
        dist = shortest_path(a.tocsr(), unweighted=True, directed=False)
        off = ~np.eye(n, dtype=bool)
        return float(dist[off].mean()) if np.all(np.isfinite(dist)) else math.inf

    keys = [mean_hops(c) for _, c in candidates]
    return [candidates[i] for i in sorted(range(len(candidates)), key=lambda i: (keys[i], i))]


class _Meter:
    """Deterministic work spent, against a limit (forecast: the last step's work)."""

    def __init__(self, limit: float) -> None:
        self.limit, self.used, self.last, self.stopped = float(limit), 0.0, 0.0, False

    def charge(self, work: float) -> None:
        self.used += float(work)
        self.last = float(work)

    def allows(self) -> bool:
        if self.used + self.last <= self.limit and self.used < self.limit:
            return True
        self.stopped = True
        return False

    @property
    def left(self) -> float:
        return max(self.limit - self.used, 0.0)


def priority_orders(problem: DesignProblem) -> list[tuple[str, ...]]:
    """The class priorities ``priorities=True`` tries: each traffic class whose demands cross
    servers, served first (in :data:`traffic.workload.CLASSES` order); none with fewer than two
    such classes (one class alone has nothing to be served before).

    Examples
    --------
    >>> from solvers.model.problem import DesignProblem
    >>> from traffic.load import load_workload
    >>> w = load_workload("tests/data/topoopt-taskgraphs/100candle_16.fbuf")
    >>> priority_orders(DesignProblem.from_workload(w, degree=8, link_bandwidth=12.5e9))
    [('dp',), ('mp',)]
    """
    from traffic.workload import CLASSES

    w = problem.workload
    if w is None:
        return []
    gps = w.gpus_per_server
    crossing = set()
    for d in w.demands:
        if d.count <= 0 or d.group_size < 2 or not d.n_groups:
            continue
        srv = np.asarray(d.groups) // gps
        if (srv != srv[:, :1]).any():
            crossing.add(d.cls)
    present = [c for c in CLASSES if c in crossing]
    return [(c,) for c in present] if len(present) >= 2 else []


def iteration_design(
    problem: DesignProblem,
    time_limit_s: float = 60.0,
    seed: int = 0,
    threads: int = 1,
    progress: Callable[[float, float], None] | None = None,
    work_limit: float | None = None,
    local_search: bool = True,
    priorities: bool = False,
) -> Design:
    """The joint optimizer under the iteration objective (module docstring).

    Parameters
    ----------
    problem : DesignProblem
        Its ``workload`` (set by :meth:`DesignProblem.from_workload`) is simulated.
    time_limit_s : float
        Wall-clock cap, seconds.
    seed : int
        Seed of the baselines' random choices.
    threads : int
        Solver threads of the congestion fallback's MIP.
    progress : callable, optional
        ``progress(incumbent_s, bound_s)`` on every new incumbent.
    work_limit : float, optional
        Deterministic budget in work units (default :data:`DEFAULT_ITERATION_WORK_LIMIT`).
    local_search : bool
        Run the swap search.
    priorities : bool
        Per-class strict priority may be part of the design (module docstring, Priorities).

    Returns
    -------
    Design
        ``solver="joint"``; ``objective_s`` is the flow model's iteration time, ``lower_bound_s``
        the iteration bound, ``gap`` between them. ``info``: ``objective`` (``"iteration"``),
        ``iteration_s`` per warm-start baseline, ``ideal_iteration_s``,
        ``critical_path_bound_s``, ``candidates`` (name, routing, iteration), ``winner``,
        ``never_slower_than_warm_start``, ``work_limit``, ``work_used``, ``stopped_by``,
        ``deterministic``, ``congestion_objective_s`` (the design's per-phase congestion
        objective, for comparison); with ``priorities``, ``priority_iteration_s`` (each
        baseline under each order tried) and ``priority`` (the order searched, or none).
    """
    from solvers.baselines.expander_design import expander_design
    from solvers.baselines.topoopt_method import topoopt_design
    from solvers.joint.driver import WORK_PER_REFILL, check_problem, joint_design

    t0 = time.perf_counter()
    time_limit = float(time_limit_s)
    if not np.isfinite(time_limit) or time_limit <= 0:
        raise InputError("time_limit_s", time_limit_s, "a finite number of seconds > 0")
    wl = DEFAULT_ITERATION_WORK_LIMIT if work_limit is None else float(work_limit)
    if not np.isfinite(wl) or wl < 0:
        raise InputError("work_limit", work_limit, "a finite number of work units >= 0")
    check_problem(problem)
    end = t0 + time_limit
    workload = problem.workload

    def fallback(reason: str) -> Design:
        d = joint_design(
            problem,
            time_limit_s=max(end - time.perf_counter(), 1e-3),
            seed=seed,
            threads=threads,
            progress=progress,
            work_limit=None if work_limit is None else wl,
        )
        info = {**dict(d.info), "objective": "congestion", "objective_reason": reason}
        return replace(d, info=info, wall_s=time.perf_counter() - t0)

    if not has_compute_model(workload) or problem.n_phases == 0:
        return fallback("the workload has no compute model: the iteration cannot be simulated")

    n = problem.n
    if n > ITERATION_MAX_SERVERS:
        return fallback(
            f"{n} servers > {ITERATION_MAX_SERVERS}: one flow simulation takes about as long as "
            "the whole search budget"
        )
    meter = _Meter(wl)
    capped: list[str] = []
    info: dict = {"objective": "iteration", "seed": int(seed), "work_limit": wl}

    def simulate(design: Design, step: str, share: float = 1.0) -> float:
        """Flow-model iteration time under ``share`` of the work left; ``inf`` when it does
        not fit."""
        if time.perf_counter() >= end:
            capped.append(step)
            return math.inf
        budget = int(share * meter.left / WORK_PER_REFILL)
        it, refills, flows = iteration_time(
            design, problem, max_refills=budget, flows=True, compute_s=compute_ref
        )
        meter.charge(
            WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows * WORK_PER_SIMULATED_FLOW
        )
        return it

    # ---- 1. bound: critical path at the shortest durations, and the ideal switch
    cp_bound = -math.inf
    sched = None
    if workload.taskgraph is not None:
        cp_bound = iteration_lower_bound(workload, problem.degree, problem.link_bandwidth)
        cp_bound = cp_bound.makespan_s
    ideal_res, sched = ideal_reference(workload, problem.degree, problem.link_bandwidth)
    # the compute-only iteration does not depend on the fabric: simulated once (task graphs)
    compute_ref = float(ideal_res.compute_s) if workload.taskgraph is not None else None
    meter.charge(
        ideal_res.info["refills"] * WORK_PER_REFILL
        + ideal_res.info["flows"] * WORK_PER_SIMULATED_FLOW
    )
    ideal_it = float(ideal_res.iteration_s)
    bound = max(cp_bound, ideal_it)
    info.update(critical_path_bound_s=float(cp_bound), ideal_iteration_s=ideal_it)

    # ---- 2. warm start: the baselines, simulated
    bases = [topoopt_design(problem, v, seed=seed) for v in ("topoopt", "topoopt-released")]
    bases.append(expander_design(problem, seed=seed))
    base_it = {}
    for b in bases:  # the first may take half the budget: larger problems fall back early
        share = FIRST_SIMULATION_SHARE if not base_it else 1.0
        base_it[b.solver] = simulate(b, f"flow model of {b.solver}", share)
        if not np.isfinite(base_it[b.solver]):
            break
    info["iteration_s"] = dict(base_it)
    if not all(np.isfinite(v) for v in base_it.values()):
        return fallback(
            "a warm-start baseline's simulation does not fit the work limit "
            f"({wl:g} units) or the time limit"
        )

    finalists: list[tuple[float, int, str, Design]] = []  # (iteration, order, name, design)
    for b in bases:
        finalists.append((base_it[b.solver], len(finalists), b.solver, b))
    prio: tuple[str, ...] = ()  # the class order tried beside fair sharing from here on
    if priorities:
        by_order: dict[str, dict[str, float]] = {}
        gain = (1.0, ())
        for order in priority_orders(problem):
            label = ",".join(order)
            by_order[label] = {}
            for b in bases:
                if not meter.allows() or time.perf_counter() >= end:
                    break
                it = simulate(replace(b, priority=order), f"flow model of {b.solver} [{label}]")
                by_order[label][b.solver] = it
                if np.isfinite(it):
                    finalists.append((it, len(finalists), f"{b.solver} [{label} first]",
                                      replace(b, priority=order)))  # fmt: skip
                    if it / base_it[b.solver] < gain[0] * (1 - 1e-9):
                        gain = (it / base_it[b.solver], order)
        prio = gain[1]
        info["priority_iteration_s"] = by_order
        info["priority"] = list(prio)
    best = min(finalists, key=lambda x: (x[0], x[1]))
    if progress is not None:
        progress(best[0], bound)

    # ---- 3. criticality windows
    routings: dict[str, DesignProblem] = {"phases": problem}
    if sched is not None:
        k = window_count(n)
        routings["windows"] = window_problem(problem, sched, k)
        for k2 in sorted({max(2, k // 2), 3 * k // 2} - {k}):
            routings[f"windows/{k2}"] = window_problem(problem, sched, k2)
    windows = routings.get("windows", problem)
    info["windows"] = windows.n_phases if windows is not problem else 0

    from solvers.joint.driver import candidate_circuits, quick_score, route_design, to_design

    def routed_design(c, prob: DesignProblem, name: str) -> tuple[Design | None, np.ndarray]:
        left = end - time.perf_counter()
        if left <= 0:
            capped.append(f"routing {name}")
            return None, np.zeros(0)
        routed, val, util = route_design(prob, c, left, extra=bases[0])
        if routed is None:
            return None, util
        meter.charge(routed.work + WORK_PER_ROUTED_PHASE * prob.n_phases)
        if routed.limit == "time":
            capped.append(f"routing {name}")
        d = to_design(prob, c, routed, 0.0, "joint", t0, {})
        if prob is not problem:
            d = remap_rings(d, prob, problem)
        return d, util

    tried: list[dict] = []

    def simulate_and_keep(d: Design, name: str, label: str) -> float:
        """Simulate ``d`` (candidate ``name`` routed as ``label``), record it, keep it as a
        finalist (and the incumbent when faster); returns its iteration."""
        nonlocal best
        it = simulate(d, f"flow model of {name}")
        tried.append({"candidate": name, "routing": label, "iteration_s": it})
        if np.isfinite(it):
            finalists.append((it, len(finalists), f"{name} ({label} routing)", d))
            if it < best[0] * (1 - 1e-12):
                best = finalists[-1]
                if progress is not None:
                    progress(it, bound)
        return it

    def widen(d0: Design, name: str, kind: str, alphas) -> tuple[float, float]:
        """Simulate the LP-routed ``d0`` widened by each ``alpha``
        (:func:`~solvers.joint.iteration_objective.spread_routing`), keep; returns the best
        (iteration, alpha)."""
        out = (math.inf, 0.0)
        for a in alphas:
            for order in ((), prio) if prio else ((),):
                if not meter.allows() or time.perf_counter() >= end:
                    break
                d = spread_routing(d0, a)
                label = kind if a <= 0 else f"{kind}, {a:g} two-hop spread"
                if order:
                    d = replace(d, priority=order)
                    label += f", {','.join(order)} first"
                it = simulate_and_keep(d, name, label)
                if it < out[0]:
                    out = (it, float(a))
        return out

    def consider(c, name: str, kinds=("phases", "windows"), alpha: float = 0.0) -> tuple:
        """Route ``c`` each way (widened by ``alpha``), simulate, keep; returns the best
        (iteration, kind, util, alpha, LP-routed design)."""
        out = (math.inf, "", np.zeros(0), alpha, None)
        for kind in kinds:
            if not meter.allows() or time.perf_counter() >= end:
                break
            d0, util = routed_design(c, routings[kind], name)
            if d0 is None:
                continue
            it, _ = widen(d0, name, kind, (alpha,))
            if it < out[0]:
                out = (it, kind, util, alpha, d0)
        return out

    # ---- 4. candidates: routed on the windows first (cheapest estimate first), then the best
    # few on the phases and on other window counts too
    raw = [(f"{b.solver} circuits", b.circuits) for b in bases]
    raw += candidate_circuits(problem, deadline=math.inf)
    if windows is not problem:
        raw += [(f"{nm} [windows]", c) for nm, c in candidate_circuits(windows, math.inf)]
    circulants = circulant_candidates(problem, windows)
    raw += circulants
    blocky = block_constructions(problem)
    raw += [(nm, c) for nm, c, _ in blocky]
    seen: set[bytes] = set()
    uniq = []
    for nm, c in raw:
        c = canonical_circuits(c, n)
        key = c.tobytes()
        if key not in seen:
            seen.add(key)
            uniq.append((nm, c))
    order = sorted(range(len(uniq)), key=lambda i: (quick_score(windows, uniq[i][1]), i))
    # the circulants of fewest mean hops first (TopoOpt's criterion: every flow, critical or
    # not, crosses fewer links), then everything by its estimate
    short = {c.tobytes() for _, c in sorted_by_hops(circulants, n)[:SHORTEST_CIRCULANTS]}
    # then the block constructions first_block_candidates names (few, and built for plans whose
    # fixed traffic forms blocks); the other block constructions wait their estimate's turn
    block_keys = {
        canonical_circuits(c, n).tobytes() for _, c in first_block_candidates(problem)
    } - short
    order = (
        [i for i in order if uniq[i][1].tobytes() in short]
        + [i for i in order if uniq[i][1].tobytes() in block_keys]
        + [i for i in order if uniq[i][1].tobytes() not in short | block_keys]
    )
    first = ("windows",) if windows is not problem else ("phases",)
    cand_best: dict[bytes, tuple] = {}
    for i in order:
        nm, c = uniq[i]
        full = meter.used >= CANDIDATE_SHARE * meter.limit and len(cand_best) >= 2
        if full and c.tobytes() not in block_keys:
            break  # the rest of the budget: the best candidates' other routings, swaps
        if not meter.allows() or time.perf_counter() >= end:
            break
        # block constructions are routed on the phases: the window routing spreads their fixed
        # traffic over the blocks' few circuits across
        kinds = first if c.tobytes() not in block_keys else ("phases",)
        cand_best[c.tobytes()] = consider(c, nm, kinds=kinds)
    # ---- 4b. the best block construction's rings balanced across the blocks' positions and
    # its pairs across detoured through block mates (simulations only)
    block_set = {canonical_circuits(c, n).tobytes(): comps for _, c, comps in blocky}
    routed_blocks = sorted(
        (k for k in cand_best if k in block_set and cand_best[k][4] is not None),
        key=lambda k: (cand_best[k][0], k),
    )
    info["block_routing"] = None
    if routed_blocks and cand_best[routed_blocks[0]][0] <= (1 + BLOCK_ROUTING_MARGIN) * best[0]:
        key = routed_blocks[0]
        it0, kind, util, a0, d0 = cand_best[key]
        nm = next(nm for nm, cc in uniq if cc.tobytes() == key)
        comps = block_set[key]
        balanced = balanced_block_rings(d0, problem, comps)
        ring_label, dr = ", balanced block rings", balanced
        if balanced.rings == d0.rings:
            ring_label, dr = "", d0
        got = (it0, None)
        for a, det in ((a, det) for a in BLOCK_SPREADS for det in BLOCK_DETOURS):
            if not ring_label and det <= 0:
                continue  # the LP's rings without detours: widened below
            if not meter.allows() or time.perf_counter() >= end:
                break
            d = block_detours(spread_routing(dr, a), problem, det, comps)
            label = kind + ring_label
            label += f", {a:g} two-hop spread" if a > 0 else ""
            label += f", {det:g} block detours" if det > 0 else ""
            if prio:
                d = replace(d, priority=prio)
                label += f", {','.join(prio)} first"
            it = simulate_and_keep(d, nm, label)
            if it < got[0]:
                got = (it, label)
        info["block_routing"] = {"candidate": nm, "best": got[1], "iteration_s": got[0]}
        if got[0] < it0:  # the swap search must beat it
            cand_best[key] = (got[0], kind, util, a0, d0)

    if windows is not problem:
        top = sorted(cand_best, key=lambda k: (cand_best[k][0], k))[:PHASE_ROUTED]
        others = tuple(k for k in routings if k.startswith("windows/"))
        for key in top:
            if not meter.allows() or time.perf_counter() >= end:
                break
            c = np.frombuffer(key, np.int64).reshape(-1, 3)
            nm = next(nm for nm, cc in uniq if cc.tobytes() == key)
            got = consider(c, nm, kinds=others)
            if got[0] < cand_best[key][0]:
                cand_best[key] = got
    # the best candidates' routings widened onto two-hop paths (simulations only)
    top = sorted(cand_best, key=lambda k: (cand_best[k][0], k))[:PHASE_ROUTED]
    for key in top:
        it0, kind, util, _, d0 = cand_best[key]
        if d0 is None:
            continue
        nm = next(nm for nm, cc in uniq if cc.tobytes() == key)
        it, a = widen(d0, nm, kind, SPREADS)
        if it < it0:
            cand_best[key] = (it, kind, util, a, d0)

    # ---- 5. local search from the best routed candidate
    evals = 0
    if local_search and cand_best:
        from solvers.joint.local_search import swap_candidates

        key = min(cand_best, key=lambda k: (cand_best[k][0], k))
        cur_it, kind, util, alpha, _ = cand_best[key]
        cur_c = np.frombuffer(key, np.int64).reshape(-1, 3)
        if kind != "windows" and windows is not problem:
            _, util = routed_design(cur_c, windows, "local search guide")
        tabu: set[bytes] = set(cand_best)
        for _ in range(50):
            improved = False
            if util.size == 0:
                break
            for cand in swap_candidates(
                cur_c, n, util, problem.pair_cap, floor=problem.prewired_circuits()
            ):
                if not meter.allows() or time.perf_counter() >= end:
                    break
                k2 = cand.tobytes()
                if k2 in tabu:
                    continue
                tabu.add(k2)
                evals += 1
                it, kd, u2, _, _ = consider(cand, "swap", kinds=(kind or "phases",), alpha=alpha)
                if it < cur_it * (1 - 1e-9):
                    cur_c, cur_it = cand, it
                    if windows is not problem and kd != "windows":
                        _, u2 = routed_design(cand, windows, "local search guide")
                    util = u2
                    improved = True
                    break
            if not improved:
                break
    info["local_search_evaluations"] = evals
    info["candidates"] = tried
    if time.perf_counter() >= end:
        capped.append("search")

    # ---- finish: the fastest finalist (baselines included), checked against the warm start
    it_best, _, name, chosen = min(finalists, key=lambda x: (x[0], x[1]))
    fastest_base = min(base_it.values())
    if not it_best <= fastest_base:
        raise RuntimeError(
            f"iteration search would ship {it_best} s, slower than its warm start {fastest_base} s"
        )
    info["never_slower_than_warm_start"] = True
    info["winner"] = name
    info["work_used"] = round(meter.used, 6)
    ev = evaluate_routing(problem, chosen.circuits, chosen.phase_routings(problem))
    info["congestion_objective_s"] = float(ev.objective) if ev.feasible else None
    if capped:
        info["stopped_by"] = "time limit"
        info["time_limit_cut"] = list(dict.fromkeys(capped))
    elif meter.stopped:
        info["stopped_by"] = "work limit"
    else:
        info["stopped_by"] = "done"
    info["deterministic"] = not capped
    if chosen.solver != "joint":
        info["baseline_info"] = dict(chosen.info)
    if chosen.priority:  # the ideal switch under the same priorities too (the lesser counts)
        from topoopt.fabrics import ideal
        from topoopt.flowsim.iteration import simulate_iteration

        fab = ideal(
            n, problem.degree, problem.link_bandwidth, gpus_per_server=workload.gpus_per_server
        )
        ideal_p = simulate_iteration(
            workload, fab, exposed_by_class=False, compute_s=compute_ref, priority=chosen.priority
        ).iteration_s
        info["ideal_priority_iteration_s"] = float(ideal_p)
        bound = max(cp_bound, min(ideal_it, float(ideal_p)))
    lb = min(bound, it_best)
    gap = (it_best - lb) / it_best if it_best > 0 else 0.0
    status = "optimal" if gap <= 1e-6 else "feasible"
    out = Design(
        chosen.servers, chosen.degree, chosen.link_bandwidth, chosen.circuits, chosen.rings,
        chosen.routing, "joint", status, it_best, lb, gap, time.perf_counter() - t0, info,
        priority=chosen.priority,
    )  # fmt: skip
    # Blink packings where they beat the rings (solvers.joint.collective_choice)
    from solvers.joint.collective_choice import choose_collectives

    picked, cinfo = choose_collectives(out, problem, workload)
    info["collective_choice"] = cinfo
    if picked.collectives and cinfo["iteration_s"] < it_best:
        it_best = cinfo["iteration_s"]  # what simulate --design gives the picked design
        lb = min(lb, it_best)
        gap = (it_best - lb) / it_best if it_best > 0 else 0.0
        # the bound assumes ring collectives: a packing may beat it, so no optimality claim
        cinfo["bound_note"] = "lower_bound_s assumes ring collectives (capped at the objective)"
        out = replace(
            picked, status="feasible", objective_s=it_best, lower_bound_s=lb, gap=gap,
            wall_s=time.perf_counter() - t0,
        )  # fmt: skip
    return with_port_options(out, problem)
