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
2b. *Pipeline start.* For pipeline plans (fixed traffic along stage chains,
   :func:`~solvers.joint.pipeline_candidates.stage_chains`) the pipeline construction of the
   smallest :func:`~solvers.joint.driver.quick_score` (circuits along the chains, the ports left
   to the data-parallel partners, :func:`~solvers.joint.pipeline_candidates.pipeline_candidates`)
   is routed and simulated on its own re-fill budget, like a warm-start baseline, and kept as a
   finalist (on ``gpt3-175b-32`` at 4 ports the warm start alone uses the work limit: 37.27 s
   -> 35.53 s, the issue-29 hand design's circuits); the family's other splits are step 4's
   first candidates.
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
5b. *Congestion start.* The congestion search's design
   (:func:`solvers.joint.driver.congestion_search`, on its own work limit) is simulated and
   kept as a finalist: the result is never slower than it either.
5c. *Re-routing without one circuit.* The incumbent's least-loaded circuits are each left out,
   the rest routed by the LP, and that routing simulated on the intact circuits
   (:func:`solvers.joint.subset_routing.reroute_without_one`; the routings a single failure's
   re-optimisation would find, issue 29 item 6).
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
limit), the congestion objective decides (:func:`solvers.joint.driver.congestion_search`) and
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
from dataclasses import asdict, dataclass, field, replace

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
from solvers.joint.ocs_fit import (
    WORK_PER_CP_SAT_S,
    fit_circuits,
    layer_candidates,
    ocs_demand,
    placement_of,
    placement_time_s,
)
from solvers.joint.pipeline_candidates import pipeline_candidates
from solvers.joint.subset_routing import reroute_without_one
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design
from solvers.model.ocs_layers import PlacementWork
from solvers.model.ports import with_port_options
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.limits import check_time_limit, check_work_limit

__all__ = [
    "iteration_design",
    "IterationSearch",
    "priority_orders",
    "DEFAULT_ITERATION_WORK_LIMIT",
    "WORK_PER_SIMULATED_FLOW",
    "WARM_START",
]

DEFAULT_ITERATION_WORK_LIMIT = 40.0
"""Default work limit of :func:`iteration_design`, in work units: a deterministic count (LP work,
:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`, plus :data:`WORK_PER_SIMULATION`,
re-fills and :data:`WORK_PER_SIMULATED_FLOW` per simulation), not a time. What a unit costs
depends on the workload: measured on 2 shared cores (2026-12-02), about 0.06 s on
``gpt3-175b-32`` (the whole default search 2.9 s) and 0.6-0.7 s on the 16-server TopoOpt task
graphs (DLRM, CANDLE: 24-27 s). The 16-server task graphs take about 0.5-1 unit per candidate
(a routing LP and a simulation), so about 30-60 designs are simulated.

Not raised (issue 29 item 4, measured 2026-12-02 on 2 loaded cores): ``gpt3-175b-32`` at 4
ports gives 35.532 s at 40 units (15.7 s CPU) and 35.270 s at 200 (0.74 % faster, 48.9 s CPU,
3.1x); at 0.6-0.7 s a unit, 200 units on a 16-server task graph would take 120-140 s and
overrun the library's 60 s default time limit, so the clock, not the work limit, would decide
(not deterministic). The steps after the search (the congestion start, the re-routings without
one circuit) run on their own budgets and are counted in ``work_used`` on top."""

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

CONGESTION_START_SHARE = 0.5
"""The congestion start (step 2c) may use at most this share of the wall-clock cap (a cap only:
its work limit decides; when the clock cuts it the result says so)."""

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
        c = Circuits(circulant_circuits(n, strides), n).rows
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
        c = Circuits(c, n).rows
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

    The steps of :class:`IterationSearch` in order; each can also be called alone.

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
    s = IterationSearch(
        problem, time_limit_s, seed, threads, progress, work_limit, local_search, priorities
    )
    reason = s.cannot_simulate()
    if reason:
        return s.fallback(reason)
    s.bound()
    reason = s.warm_start()
    if reason:
        return s.fallback(reason)
    s.pipeline_start()
    s.try_priorities()
    s.windows()
    s.candidates()
    s.block_routing()
    s.refine()
    s.local_search()
    s.congestion_start()
    reroute_without_one(s)
    return s.finish()


@dataclass(eq=False)
class IterationSearch:
    """The state of one iteration search (:func:`iteration_design` chains its steps).

    Attributes set by the steps: ``bound_s`` (step 1), ``bases`` and ``base_it`` (step 2),
    ``finalists`` (every simulated design: ``(iteration, order, name, design)``) and ``best``
    (the incumbent, one of them), ``prio`` (the class order tried beside fair sharing),
    ``routings`` (step 3), ``cand_best`` (per candidate key: ``(iteration, kind, util, alpha,
    LP-routed design)``, steps 4-4b), ``meter`` (work), ``capped`` (steps the wall clock cut)
    and ``info``.
    """

    problem: DesignProblem
    time_limit_s: float = 60.0
    seed: int = 0
    threads: int = 1
    progress: Callable[[float, float], None] | None = None
    work_limit: float | None = None
    search_swaps: bool = True
    priorities: bool = False
    t0: float = field(init=False)
    end: float = field(init=False)
    wl: float = field(init=False)
    meter: _Meter = field(init=False)
    capped: list = field(init=False, default_factory=list)
    info: dict = field(init=False, default_factory=dict)
    compute_ref: float | None = field(init=False, default=None)
    cp_bound: float = field(init=False, default=-math.inf)
    ideal_it: float = field(init=False, default=math.inf)
    bound_s: float = field(init=False, default=-math.inf)
    sched: object = field(init=False, default=None)
    bases: list = field(init=False, default_factory=list)
    base_it: dict = field(init=False, default_factory=dict)
    finalists: list = field(init=False, default_factory=list)
    best: tuple = field(init=False, default=())
    prio: tuple = field(init=False, default=())
    routings: dict = field(init=False, default_factory=dict)
    tried: list = field(init=False, default_factory=list)
    uniq: list = field(init=False, default_factory=list)
    blocky: list = field(init=False, default_factory=list)
    block_keys: set = field(init=False, default_factory=set)
    pipeline: list = field(init=False, default_factory=list)
    cand_best: dict = field(init=False, default_factory=dict)
    congestion_design: Design | None = field(init=False, default=None)
    warm_work: float = field(init=False, default=0.0)
    fitted: dict = field(init=False, default_factory=dict)
    ocs_demand: object = field(init=False, default=None)
    placed: PlacementWork = field(init=False, default_factory=PlacementWork)

    def __post_init__(self) -> None:
        from solvers.joint.driver import check_problem

        self.t0 = time.perf_counter()
        time_limit = float(self.time_limit_s)
        check_time_limit("time_limit_s", self.time_limit_s)
        wl = DEFAULT_ITERATION_WORK_LIMIT if self.work_limit is None else float(self.work_limit)
        check_work_limit("work_limit", wl)
        check_problem(self.problem)
        self.wl = wl
        self.end = self.t0 + time_limit
        self.meter = _Meter(wl)
        self.info = {"objective": "iteration", "seed": int(self.seed), "work_limit": wl}
        if self.problem.ocs is not None:
            self.info["ocs_search"] = {"candidates_fitted": 0, "candidates_repaired": 0}

    @property
    def workload(self):
        """The problem's GPU-level workload (simulated by every step)."""
        return self.problem.workload

    @property
    def window_problem(self) -> DesignProblem:
        """The criticality-weighted window problem (step 3), else the phase problem."""
        return self.routings.get("windows", self.problem)

    def out_of_time(self) -> bool:
        """The work limit or the wall-clock cap stops the next step."""
        return not self.meter.allows() or time.perf_counter() >= self.end

    def cannot_simulate(self) -> str:
        """Why the flow model cannot judge this problem (then the congestion search decides),
        or ``""``."""
        if not has_compute_model(self.workload) or self.problem.n_phases == 0:
            return "the workload has no compute model: the iteration cannot be simulated"
        n = self.problem.n
        if n > ITERATION_MAX_SERVERS:
            return (
                f"{n} servers > {ITERATION_MAX_SERVERS}: one flow simulation takes about as long "
                "as the whole search budget"
            )
        return ""

    def fallback(self, reason: str) -> Design:
        """The congestion search's design (:func:`solvers.joint.driver.congestion_search`),
        ``info["objective"]`` ``"congestion"`` with ``reason``. It is the whole answer, so its
        wall-clock cap is all the time left (:data:`CONGESTION_START_SHARE` is the congestion
        start's, step 2c, which other steps follow): on a 2-core machine at load 13 the
        64-server Llama 3 70B plan's fallback needed 27 s of CPU and more than the half of the
        default 900 s cap in wall time, and the clock, not the work limit, ended it."""
        from solvers.joint.driver import congestion_search

        left = self.end - time.perf_counter()
        d = congestion_search(
            self.problem,
            time_limit_s=max(left, 1e-3),
            seed=self.seed,
            threads=self.threads,
            progress=self.progress,
            work_limit=None if self.work_limit is None else self.wl,
        )
        info = {**dict(d.info), "objective": "congestion", "objective_reason": reason}
        return replace(d, info=info, wall_s=time.perf_counter() - self.t0)

    def fit(self, c) -> tuple[np.ndarray, bool]:
        """``c`` on the problem's optical layer of finite-radix OCSes
        (:func:`~solvers.joint.ocs_fit.fit_circuits`: as it is when it fits, else repaired),
        cached; ``(c, False)`` without a layer."""
        rows = Circuits(c, self.problem.n).rows
        if self.problem.ocs is None:
            return rows, False
        key = rows.tobytes()
        if key not in self.fitted:
            if self.ocs_demand is None:
                self.ocs_demand = ocs_demand(self.problem)
            self.fitted[key] = self.charged(
                lambda w, t: fit_circuits(self.problem, rows, self.ocs_demand, t, w)
            )
            stats = self.info["ocs_search"]
            stats["candidates_fitted"] += 1
            stats["candidates_repaired"] += int(self.fitted[key][1])
        return self.fitted[key]

    def charged(self, call):
        """``call(work, time_s)`` with the search's
        :class:`~solvers.model.ocs_layers.PlacementWork` and the deterministic time of one
        placement check (:func:`~solvers.joint.ocs_fit.placement_time_s` of the work limit);
        the CP-SAT time it used is added to the work used
        (:data:`~solvers.joint.ocs_fit.WORK_PER_CP_SAT_S`; not a forecast of the next step),
        the total recorded in ``info["ocs_search"]["placement"]``."""
        before = self.placed.deterministic_s
        out = call(self.placed, placement_time_s(self.wl))
        self.meter.used += WORK_PER_CP_SAT_S * (self.placed.deterministic_s - before)
        self.info["ocs_search"]["placement"] = {
            k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self.placed).items()
        }
        return out

    def fit_design(self, d: Design, name: str) -> Design | None:
        """``d`` when its circuits fit the layer (or there is none), else its repaired
        circuits routed by the LP on the phase problem (named ``name``); None when they do
        not route."""
        rows, repaired = self.fit(d.circuits)
        if not repaired:
            return d
        d2, _ = self.routed_design(rows, self.problem, name)
        return None if d2 is None else replace(d2, solver=name)

    def simulate(self, design: Design, step: str, share: float = 1.0) -> float:
        """Flow-model iteration time under ``share`` of the work left; ``inf`` when it does
        not fit."""
        from solvers.joint.driver import WORK_PER_REFILL

        if time.perf_counter() >= self.end:
            self.capped.append(step)
            return math.inf
        budget = int(share * self.meter.left / WORK_PER_REFILL)
        it, refills, flows = iteration_time(
            design, self.problem, max_refills=budget, flows=True, compute_s=self.compute_ref
        )
        self.meter.charge(
            WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows * WORK_PER_SIMULATED_FLOW
        )
        return it

    def bound(self) -> None:
        """Step 1: the critical path at the shortest durations, and the ideal switch."""
        from solvers.joint.driver import WORK_PER_REFILL

        problem, workload = self.problem, self.workload
        cp_bound = -math.inf
        if workload.taskgraph is not None:
            cp_bound = iteration_lower_bound(workload, problem.degree, problem.link_bandwidth)
            cp_bound = cp_bound.makespan_s
        ideal_res, self.sched = ideal_reference(workload, problem.degree, problem.link_bandwidth)
        # the compute-only iteration does not depend on the fabric: simulated once (task graphs)
        if workload.taskgraph is not None:
            self.compute_ref = float(ideal_res.compute_s)
        self.meter.charge(
            ideal_res.info["refills"] * WORK_PER_REFILL
            + ideal_res.info["flows"] * WORK_PER_SIMULATED_FLOW
        )
        self.cp_bound = cp_bound
        self.ideal_it = float(ideal_res.iteration_s)
        self.bound_s = max(cp_bound, self.ideal_it)
        self.info.update(critical_path_bound_s=float(cp_bound), ideal_iteration_s=self.ideal_it)

    def warm_start(self) -> str:
        """Step 2: the baselines of :data:`WARM_START`, simulated; the fastest is the first
        incumbent. Returns why the flow model cannot judge (a simulation did not fit), or
        ``""``."""
        from solvers.baselines.expander_design import expander_design
        from solvers.baselines.topoopt_method import topoopt_design

        problem, seed = self.problem, self.seed
        bases = [topoopt_design(problem, v, seed=seed) for v in ("topoopt", "topoopt-released")]
        bases.append(expander_design(problem, seed=seed))
        self.bases = bases
        if problem.ocs is not None:  # the baselines as the layer holds them (repaired if not)
            fitted = [self.fit_design(b, f"{b.solver} [OCS-fitted]") for b in bases]
            self.bases = bases = [b for b in fitted if b is not None] or bases
        base_it = self.base_it
        cuts = len(self.capped)
        for b in bases:  # the first may take half the budget: larger problems fall back early
            share = FIRST_SIMULATION_SHARE if not base_it else 1.0
            base_it[b.solver] = self.simulate(b, f"flow model of {b.solver}", share)
            if not np.isfinite(base_it[b.solver]):
                break
        self.info["iteration_s"] = dict(base_it)
        if not all(np.isfinite(v) for v in base_it.values()):
            if len(self.capped) > cuts:  # the clock, not the work: said as a cut
                return "the time limit cut a warm-start baseline's simulation"
            return (
                "a warm-start baseline's simulation does not fit the work limit "
                f"({self.wl:g} units)"
            )
        for b in bases:
            self.finalists.append((base_it[b.solver], len(self.finalists), b.solver, b))
        self.warm_work = self.meter.used
        return ""

    def pipeline_start(self) -> None:
        """Step 2b: for pipeline plans, the pipeline construction of smallest
        :func:`~solvers.joint.driver.quick_score` on the phase problem
        (:func:`~solvers.joint.pipeline_candidates.pipeline_candidates`: circuits along the
        stage chains, the ports left to the data-parallel partners), routed by the LP on the
        phase problem and simulated on its own re-fill budget (:data:`FIRST_SIMULATION_SHARE`
        of the work limit, like a warm-start baseline: it runs even when the baselines'
        simulations used the work limit, as on ``gpt3-175b-32``), kept as a finalist; the
        other constructions of the family are step 4's first candidates."""
        from solvers.joint.driver import WORK_PER_REFILL, quick_score

        problem = self.problem
        self.pipeline = pipeline_candidates(problem)
        if not self.pipeline:
            return
        scores = [quick_score(problem, c) for _, c in self.pipeline]
        k = min(range(len(scores)), key=lambda i: (scores[i], i))
        nm, c = self.pipeline[k]
        c, repaired = self.fit(c)
        nm += " [OCS-fitted]" if repaired else ""
        self.info["pipeline_start"] = {"candidate": nm, "quick_score_s": scores[k]}
        if time.perf_counter() >= self.end:
            self.capped.append("pipeline start")
            return
        d, util = self.routed_design(c, problem, nm)
        if d is None:
            return
        budget = int(FIRST_SIMULATION_SHARE * self.wl / WORK_PER_REFILL)
        it, refills, flows = iteration_time(
            d, problem, max_refills=budget, flows=True, compute_s=self.compute_ref
        )
        self.meter.charge(
            WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows * WORK_PER_SIMULATED_FLOW
        )
        self.tried.append({"candidate": nm, "routing": "phases", "iteration_s": it})
        self.info["pipeline_start"]["iteration_s"] = it
        if np.isfinite(it):
            self.finalists.append((it, len(self.finalists), f"{nm} (phases routing)", d))
            self.cand_best[Circuits(c, problem.n).rows.tobytes()] = (
                it, "phases", util, 0.0, d,
            )  # fmt: skip

    def try_priorities(self) -> None:
        """Step 2 with ``priorities``: every baseline under each class order of
        :func:`priority_orders`; the order that gains most is tried beside fair sharing from
        here on (``prio``). Then the incumbent is the fastest finalist."""
        if self.priorities:
            by_order: dict[str, dict[str, float]] = {}
            gain = (1.0, ())
            for order in priority_orders(self.problem):
                label = ",".join(order)
                by_order[label] = {}
                for b in self.bases:
                    if self.out_of_time():
                        break
                    d = replace(b, priority=order)
                    it = self.simulate(d, f"flow model of {b.solver} [{label}]")
                    by_order[label][b.solver] = it
                    if np.isfinite(it):
                        self.finalists.append(
                            (it, len(self.finalists), f"{b.solver} [{label} first]", d)
                        )
                        if it / self.base_it[b.solver] < gain[0] * (1 - 1e-9):
                            gain = (it / self.base_it[b.solver], order)
            self.prio = gain[1]
            self.info["priority_iteration_s"] = by_order
            self.info["priority"] = list(self.prio)
        self.best = min(self.finalists, key=lambda x: (x[0], x[1]))
        if self.progress is not None:
            self.progress(self.best[0], self.bound_s)

    def congestion_start(self) -> None:
        """Step 5b: the congestion search's design
        (:func:`solvers.joint.driver.congestion_search`, its own default work limit), simulated
        (within :data:`FIRST_SIMULATION_SHARE` of the work limit, whatever is left) and kept
        as a finalist: the iteration search is then never slower than the congestion search in
        the flow model (on the demo's DLRM at 4 ports the congestion search's design was
        faster). It runs after the search, on its own budget, so the steps before it are
        unchanged; its work is counted in ``work_used``. Skipped (deterministically) when the
        warm start's simulations alone used the work limit: a problem that expensive to
        simulate (``gpt3-175b-32``) has no room for another search's."""
        from solvers.joint.driver import WORK_PER_REFILL, congestion_search

        if self.warm_work >= self.wl:  # deterministic: the warm start alone used the budget
            self.info["congestion_search"] = {
                "skipped": f"the warm start's simulations used the work limit ({self.wl:g} units)"
            }
            return
        if time.perf_counter() >= self.end:
            self.capped.append("congestion search")
            return
        left = self.end - time.perf_counter()
        d = congestion_search(
            self.problem,
            time_limit_s=max(min(left, CONGESTION_START_SHARE * float(self.time_limit_s)), 1e-3),
            seed=self.seed,
            threads=self.threads,
        )
        self.meter.charge(d.info.get("work_used", 0.0))
        self.info["congestion_search"] = {
            "winner": d.info.get("winner"), "work_used": d.info.get("work_used"),
            "deterministic": d.info.get("deterministic"),
        }  # fmt: skip
        if d.info.get("deterministic") is False:
            self.capped.append("congestion search")
        if self.problem.ocs is not None:  # its circuits as the OCS layer holds them
            fitted = self.fit_design(d, "congestion search [OCS-fitted]")
            if fitted is None:
                self.info["congestion_search"]["skipped"] = "its circuits do not route once fitted"
                return
            d = fitted if fitted is d else replace(fitted, info=dict(d.info))
        self.congestion_design = d
        budget = int(FIRST_SIMULATION_SHARE * self.wl / WORK_PER_REFILL)
        it, refills, flows = iteration_time(
            d, self.problem, max_refills=budget, flows=True, compute_s=self.compute_ref
        )
        self.meter.charge(
            WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows * WORK_PER_SIMULATED_FLOW
        )
        self.tried.append({"candidate": "congestion search", "routing": "its own",
                           "iteration_s": it})  # fmt: skip
        if np.isfinite(it):
            self.finalists.append((it, len(self.finalists), "congestion search", d))
        self.info["congestion_search"]["iteration_s"] = it

    def simulate_on_own_budget(self, design: Design) -> float:
        """The flow model's iteration of ``design`` within :data:`FIRST_SIMULATION_SHARE` of
        the work limit whatever is left (the steps after the search: 5b, 5c), charged."""
        from solvers.joint.driver import WORK_PER_REFILL

        budget = int(FIRST_SIMULATION_SHARE * self.wl / WORK_PER_REFILL)
        it, refills, flows = iteration_time(
            design, self.problem, max_refills=budget, flows=True, compute_s=self.compute_ref
        )
        self.meter.charge(
            WORK_PER_SIMULATION + refills * WORK_PER_REFILL + flows * WORK_PER_SIMULATED_FLOW
        )
        return it

    def windows(self) -> None:
        """Step 3: the criticality-weighted window problems (task graphs; the phase problem
        otherwise)."""
        problem, sched = self.problem, self.sched
        self.routings = {"phases": problem}
        if sched is not None:
            k = window_count(problem.n)
            self.routings["windows"] = window_problem(problem, sched, k)
            for k2 in sorted({max(2, k // 2), 3 * k // 2} - {k}):
                self.routings[f"windows/{k2}"] = window_problem(problem, sched, k2)
        windows = self.window_problem
        self.info["windows"] = windows.n_phases if windows is not problem else 0

    def routed_design(self, c, prob: DesignProblem, name: str) -> tuple[Design | None, np.ndarray]:
        """``c`` routed by the LP on ``prob`` (work charged), as a Design of the phase problem,
        and its per-link utilisation; None when the clock is up or it does not route."""
        from solvers.joint.driver import route_design, to_design

        left = self.end - time.perf_counter()
        if left <= 0:
            self.capped.append(f"routing {name}")
            return None, np.zeros(0)
        routed, val, util = route_design(prob, c, left, extra=self.bases[0])
        if routed is None:
            return None, util
        self.meter.charge(routed.work + WORK_PER_ROUTED_PHASE * prob.n_phases)
        if routed.limit == "time":
            self.capped.append(f"routing {name}")
        d = to_design(prob, c, routed, 0.0, "joint", self.t0, {})
        if prob is not self.problem:
            d = remap_rings(d, prob, self.problem)
        return d, util

    def simulate_and_keep(self, d: Design, name: str, label: str) -> float:
        """Simulate ``d`` (candidate ``name`` routed as ``label``), record it, keep it as a
        finalist (and the incumbent when faster); returns its iteration."""
        it = self.simulate(d, f"flow model of {name}")
        self.tried.append({"candidate": name, "routing": label, "iteration_s": it})
        if np.isfinite(it):
            self.finalists.append((it, len(self.finalists), f"{name} ({label} routing)", d))
            if it < self.best[0] * (1 - 1e-12):
                self.best = self.finalists[-1]
                if self.progress is not None:
                    self.progress(it, self.bound_s)
        return it

    def widen(self, d0: Design, name: str, kind: str, alphas) -> tuple[float, float]:
        """Simulate the LP-routed ``d0`` widened by each ``alpha``
        (:func:`~solvers.joint.iteration_objective.spread_routing`), keep; returns the best
        (iteration, alpha)."""
        out = (math.inf, 0.0)
        prio = self.prio
        for a in alphas:
            for order in ((), prio) if prio else ((),):
                if self.out_of_time():
                    break
                d = spread_routing(d0, a)
                label = kind if a <= 0 else f"{kind}, {a:g} two-hop spread"
                if order:
                    d = replace(d, priority=order)
                    label += f", {','.join(order)} first"
                it = self.simulate_and_keep(d, name, label)
                if it < out[0]:
                    out = (it, float(a))
        return out

    def consider(self, c, name: str, kinds=("phases", "windows"), alpha: float = 0.0) -> tuple:
        """Route ``c`` each way (widened by ``alpha``), simulate, keep; returns the best
        (iteration, kind, util, alpha, LP-routed design)."""
        out = (math.inf, "", np.zeros(0), alpha, None)
        for kind in kinds:
            if self.out_of_time():
                break
            d0, util = self.routed_design(c, self.routings[kind], name)
            if d0 is None:
                continue
            it, _ = self.widen(d0, name, kind, (alpha,))
            if it < out[0]:
                out = (it, kind, util, alpha, d0)
        return out

    def name_of(self, key: bytes) -> str:
        """The name of the candidate whose canonical circuits have bytes ``key``."""
        return next(nm for nm, cc in self.uniq if cc.tobytes() == key)

    def candidate_order(self) -> list[int]:
        """Step 4's candidates (``uniq``, deduplicated) and the order they are tried in: the
        shortest circulants, the named block constructions, then by estimate."""
        from solvers.joint.driver import candidate_circuits, quick_score

        problem, n, windows = self.problem, self.problem.n, self.window_problem
        raw = [(f"{b.solver} circuits", b.circuits) for b in self.bases]
        raw += candidate_circuits(problem, deadline=math.inf, capped=self.capped)
        if windows is not problem:
            raw += [
                (f"{nm} [windows]", c)
                for nm, c in candidate_circuits(windows, math.inf, capped=self.capped)
            ]
        circulants = circulant_candidates(problem, windows)
        raw += circulants
        self.blocky = block_constructions(problem)
        raw += [(nm, c) for nm, c, _ in self.blocky]
        raw += self.pipeline
        raw += layer_candidates(problem)  # built on the OCSes (none without a layer)
        seen: set[bytes] = set()
        uniq = self.uniq
        for nm, c in raw:
            c, repaired = self.fit(c)  # every candidate as the OCS layer holds it
            nm += " [OCS-fitted]" if repaired else ""
            key = c.tobytes()
            if key not in seen:
                seen.add(key)
                uniq.append((nm, c))
        order = sorted(range(len(uniq)), key=lambda i: (quick_score(windows, uniq[i][1]), i))
        # the circulants of fewest mean hops first (TopoOpt's criterion: every flow, critical or
        # not, crosses fewer links), then everything by its estimate
        short = {c.tobytes() for _, c in sorted_by_hops(circulants, n)[:SHORTEST_CIRCULANTS]}
        # then the block constructions first_block_candidates names (few, and built for plans
        # whose fixed traffic forms blocks); the other block constructions wait their turn
        self.block_keys = {
            self.fit(c)[0].tobytes() for _, c in first_block_candidates(problem) + self.pipeline
        } - short
        keys = self.block_keys
        return (
            [i for i in order if uniq[i][1].tobytes() in short]
            + [i for i in order if uniq[i][1].tobytes() in keys]
            + [i for i in order if uniq[i][1].tobytes() not in short | keys]
        )

    def candidates(self) -> None:
        """Step 4: the candidates (:meth:`candidate_order`) routed on the windows (the named
        block constructions on the phases), simulated, within :data:`CANDIDATE_SHARE` of the
        work limit."""
        order = self.candidate_order()
        meter = self.meter
        first = ("windows",) if self.window_problem is not self.problem else ("phases",)
        for i in order:
            nm, c = self.uniq[i]
            if c.tobytes() in self.cand_best:
                continue  # the pipeline start's, simulated already
            full = meter.used >= CANDIDATE_SHARE * meter.limit and len(self.cand_best) >= 2
            if full and c.tobytes() not in self.block_keys:
                break  # the rest of the budget: the best candidates' other routings, swaps
            if self.out_of_time():
                break
            # block constructions are routed on the phases: the window routing spreads their
            # fixed traffic over the blocks' few circuits across
            kinds = first if c.tobytes() not in self.block_keys else ("phases",)
            self.cand_best[c.tobytes()] = self.consider(c, nm, kinds=kinds)

    def block_routing(self) -> None:
        """Step 4b: the best block construction's rings balanced across the blocks' positions
        and its pairs across detoured through block mates (simulations only)."""
        problem, cand_best = self.problem, self.cand_best
        block_set = {  # a repaired construction has lost its blocks
            self.fit(c)[0].tobytes(): comps for _, c, comps in self.blocky if not self.fit(c)[1]
        }
        routed_blocks = sorted(
            (k for k in cand_best if k in block_set and cand_best[k][4] is not None),
            key=lambda k: (cand_best[k][0], k),
        )
        self.info["block_routing"] = None
        if not routed_blocks:
            return
        if cand_best[routed_blocks[0]][0] > (1 + BLOCK_ROUTING_MARGIN) * self.best[0]:
            return
        key = routed_blocks[0]
        it0, kind, util, a0, d0 = cand_best[key]
        nm = self.name_of(key)
        comps = block_set[key]
        balanced = balanced_block_rings(d0, problem, comps)
        ring_label, dr = ", balanced block rings", balanced
        if balanced.rings == d0.rings:
            ring_label, dr = "", d0
        got = (it0, None)
        for a, det in ((a, det) for a in BLOCK_SPREADS for det in BLOCK_DETOURS):
            if not ring_label and det <= 0:
                continue  # the LP's rings without detours: widened below
            if self.out_of_time():
                break
            d = block_detours(spread_routing(dr, a), problem, det, comps)
            label = kind + ring_label
            label += f", {a:g} two-hop spread" if a > 0 else ""
            label += f", {det:g} block detours" if det > 0 else ""
            if self.prio:
                d = replace(d, priority=self.prio)
                label += f", {','.join(self.prio)} first"
            it = self.simulate_and_keep(d, nm, label)
            if it < got[0]:
                got = (it, label)
        self.info["block_routing"] = {"candidate": nm, "best": got[1], "iteration_s": got[0]}
        if got[0] < it0:  # the swap search must beat it
            cand_best[key] = (got[0], kind, util, a0, d0)

    def refine(self) -> None:
        """Step 4, last part: the :data:`PHASE_ROUTED` best candidates routed on the other
        window counts, and their routings widened onto two-hop paths (:data:`SPREADS`)."""
        cand_best = self.cand_best
        if self.window_problem is not self.problem:
            top = sorted(cand_best, key=lambda k: (cand_best[k][0], k))[:PHASE_ROUTED]
            others = tuple(k for k in self.routings if k.startswith("windows/"))
            for key in top:
                if self.out_of_time():
                    break
                c = Circuits.from_key(key, self.problem.n)
                got = self.consider(c, self.name_of(key), kinds=others)
                if got[0] < cand_best[key][0]:
                    cand_best[key] = got
        # the best candidates' routings widened onto two-hop paths (simulations only)
        top = sorted(cand_best, key=lambda k: (cand_best[k][0], k))[:PHASE_ROUTED]
        for key in top:
            it0, kind, util, _, d0 = cand_best[key]
            if d0 is None:
                continue
            it, a = self.widen(d0, self.name_of(key), kind, SPREADS)
            if it < it0:
                cand_best[key] = (it, kind, util, a, d0)

    def local_search(self) -> None:
        """Step 5: degree-preserving 2-swaps from the best routed candidate, guided by the
        window routing's hottest links, accepted when the simulated iteration drops."""
        evals = 0
        cand_best, windows, problem = self.cand_best, self.window_problem, self.problem
        if self.search_swaps and cand_best:
            from solvers.joint.local_search import swap_candidates

            key = min(cand_best, key=lambda k: (cand_best[k][0], k))
            cur_it, kind, util, alpha, _ = cand_best[key]
            cur_c = Circuits.from_key(key, problem.n).rows
            if kind != "windows" and windows is not problem:
                _, util = self.routed_design(cur_c, windows, "local search guide")
            tabu: set[bytes] = set(cand_best)
            layer = problem.ocs is not None
            for _ in range(50):
                improved = False
                if util.size == 0:
                    break
                # on finite-radix OCSes: swaps of two circuits on one OCS only (the new circuits
                # take the same ports of that OCS), from the incumbent's placement
                placed = (
                    self.charged(lambda w, t, c=cur_c: placement_of(problem, c, t, w))
                    if layer
                    else None
                )
                if layer and placed is None:
                    break
                for cand in swap_candidates(
                    cur_c, problem.n, util, problem.pair_cap, floor=problem.prewired_circuits(),
                    placement=placed, layer=problem.ocs,
                ):  # fmt: skip
                    if self.out_of_time():
                        break
                    k2 = cand.tobytes()
                    if k2 in tabu:
                        continue
                    tabu.add(k2)
                    evals += 1
                    it, kd, u2, _, _ = self.consider(
                        cand, "swap", kinds=(kind or "phases",), alpha=alpha
                    )
                    if it < cur_it * (1 - 1e-9):
                        cur_c, cur_it = cand, it
                        if windows is not problem and kd != "windows":
                            _, u2 = self.routed_design(cand, windows, "local search guide")
                        util = u2
                        improved = True
                        break
                if not improved:
                    break
        self.info["local_search_evaluations"] = evals
        self.info["candidates"] = self.tried
        if time.perf_counter() >= self.end:
            self.capped.append("search")

    def finish(self) -> Design:
        """Step 6: the fastest finalist (baselines included), checked against the warm start,
        packaged; then the collectives (:meth:`collectives`)."""
        problem, info, capped = self.problem, self.info, self.capped
        it_best, _, name, chosen = min(self.finalists, key=lambda x: (x[0], x[1]))
        fastest_base = min(self.base_it.values())
        if not it_best <= fastest_base:
            raise RuntimeError(
                f"iteration search would ship {it_best} s, slower than its warm start "
                f"{fastest_base} s"
            )
        info["never_slower_than_warm_start"] = True
        info["winner"] = name
        info["work_used"] = round(self.meter.used, 6)
        ev = evaluate_routing(problem, chosen.circuits, chosen.phase_routings(problem))
        info["congestion_objective_s"] = float(ev.objective) if ev.feasible else None
        if capped:
            info["stopped_by"] = "time limit"
            info["time_limit_cut"] = list(dict.fromkeys(capped))
        elif self.meter.stopped:
            info["stopped_by"] = "work limit"
        else:
            info["stopped_by"] = "done"
        info["deterministic"] = not capped
        if chosen.solver != "joint":
            info["baseline_info"] = dict(chosen.info)
        bound = self.bound_s
        if chosen.priority:  # the ideal switch under the same priorities too (the lesser counts)
            from topoopt.fabrics.ideal import ideal_bound
            from topoopt.flowsim.iteration import simulate_iteration

            workload = self.workload
            fab = ideal_bound(
                problem.n, problem.degree, problem.link_bandwidth,
                gpus_per_server=workload.gpus_per_server,
            )  # fmt: skip
            ideal_p = simulate_iteration(
                workload, fab, exposed_by_class=False, compute_s=self.compute_ref,
                priority=chosen.priority,
            ).iteration_s  # fmt: skip
            info["ideal_priority_iteration_s"] = float(ideal_p)
            bound = max(self.cp_bound, min(self.ideal_it, float(ideal_p)))
        lb = min(bound, it_best)
        gap = (it_best - lb) / it_best if it_best > 0 else 0.0
        status = "optimal" if gap <= 1e-6 else "feasible"
        out = Design(
            chosen.servers, chosen.degree, chosen.link_bandwidth, chosen.circuits, chosen.rings,
            chosen.routing, "joint", status, it_best, lb, gap, time.perf_counter() - self.t0,
            info, priority=chosen.priority, collectives=chosen.collectives,
        )  # fmt: skip
        return with_port_options(self.collectives(out, it_best, lb), problem)

    def collectives(self, out: Design, it_best: float, lb: float) -> Design:
        """Step 6, last part: Blink packings where they beat the rings
        (:func:`solvers.joint.collective_choice.choose_collectives`)."""
        from solvers.joint.collective_choice import choose_collectives

        own = out.collectives  # the winner's packings (the congestion search's design has some)
        rings = replace(out, collectives=()) if own else out
        picked, cinfo = choose_collectives(rings, self.problem, self.workload, deadline=self.end)
        self.info["collective_choice"] = cinfo
        if cinfo.get("time_limit"):  # the clock cut the Blink pass: say so
            self.info.update(
                stopped_by="time limit", deterministic=False,
                time_limit_cut=list(dict.fromkeys([*self.capped, "collective choice"])),
            )  # fmt: skip
        t = cinfo.get("iteration_s", math.inf)
        if picked.collectives and (t < it_best or (own and t <= it_best)):
            it_best = cinfo["iteration_s"]  # what simulate --design gives the picked design
            lb = min(lb, it_best)
            gap = (it_best - lb) / it_best if it_best > 0 else 0.0
            # the bound assumes ring collectives: a packing may beat it, so no optimality claim
            cinfo["bound_note"] = "lower_bound_s assumes ring collectives (capped at the objective)"
            out = replace(
                picked, status="feasible", objective_s=it_best, lower_bound_s=lb, gap=gap,
                wall_s=time.perf_counter() - self.t0,
            )  # fmt: skip
        elif own:  # the pass did not find them again: the winner ships as it was simulated
            cinfo["kept"] = "the winner's own packings (as simulated)"
            cinfo["bound_note"] = "lower_bound_s assumes ring collectives (capped at the objective)"
            out = replace(out, status="feasible")
        return out
