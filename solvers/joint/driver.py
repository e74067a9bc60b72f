"""The joint optimizer's anytime pipeline: check, warm start, improve, route, bound, Design.

Each step is a public function; :func:`congestion_search` chains them under a deterministic work
limit, with the wall-clock time limit only as a safety cap (see "Determinism" below).

1. :func:`check_problem` -- raise :class:`InputError` on a problem no design can serve.
2. :func:`warm_start` -- the TopoOpt baselines (``topoopt`` and ``topoopt-released``,
   :func:`solvers.baselines.topoopt_method.topoopt_design`); the best of them is the first
   incumbent, so the result is never worse than the baseline.
3. :func:`candidate_circuits` -- designs TopoOpt does not try: every degree split between
   AllReduce rings and MP matchings (TopoOpt rounds one split from byte ratios), rings on the
   optimal mean-hop strides (:func:`solvers.baselines.strides.best_strides`) instead of the
   geometric rule, and free ports filled. Each candidate is *routed by the LP*
   (:func:`route_design`), which also chooses the ring mixture of every mutable group (TopoOpt
   splits evenly and routes MP traffic on random shortest paths), and scored exactly.
4. :func:`solvers.joint.local_search.improve_by_swaps` -- degree-preserving 2-swaps that put a
   circuit on the hottest link, accepted when the routed objective drops.
5. For clusters of at most ``exact_max_servers`` servers,
   :func:`solvers.joint.exact_mip.exact_design` proves the optimum (warm-started with the
   incumbent as a hint and as the bound ``M``).
6. :func:`solvers.bounds.lower_bound` -- ideal switch and LP relaxation; the gap is
   ``(objective - bound) / objective``.
7. :func:`solvers.joint.flow_select.select_by_flow` -- when the problem knows its Workload, the
   finalists (the best routed candidates and both baselines, smallest objective first) are
   simulated by the flow model and the one with the shortest communication wins among those no
   slower than ``topoopt`` in communication or iteration time and no worse in the objective.
   The ``topoopt`` design is simulated right after the warm start; the flow model is used
   only when the problem has at most :data:`FLOW_MAX_PAIRS` server pairs with traffic.
8. :func:`solvers.joint.collective_choice.choose_collectives` -- when the flow model judged,
   each ring family of the result is tried as a Blink tree packing on the group's circuits and
   kept when the simulated iteration (communication without a compute model) is shorter;
   ``info["collective_choice"]`` records the times with rings and with what was picked.

Determinism
-----------
No decision depends on the clock. Steps 3-5 run while the work spent (:class:`WorkMeter`:
deterministic work units from LP nonzeros x iterations and model sizes,
:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`) plus the forecast of the next routing (the last
one's work) is within ``work_limit`` (:data:`DEFAULT_WORK_LIMIT`); the routing LPs are GLOP solved
to optimality or PDLP to :data:`ROUTING_LP_TOLERANCE` within :data:`LP_ITERATION_LIMIT` iterations;
the bound's PDLP is iteration-limited too; the exact MIP gets :data:`EXACT_WORK_SHARE` of the work
left, turned into SCIP's node, LP-iteration, cut-round and strong-branching limits
(:func:`solvers.joint.exact_mip.exact_limits`, at most :data:`EXACT_NODE_LIMIT` nodes), and its LP
iterations are charged; the flow-model judging (the ``topoopt`` baseline, then the objective's pick,
then the other finalists in order; finalists worse than the reference in the objective are not
simulated) shares :data:`FLOW_WORK_SHARE` times as many work units, counted in the flow model's
sub-flow re-fills (:data:`FLOW_WORK_PER_REFILL`): a simulation that needs more stops there and its
finalist is not chosen (if the baseline's own simulation does not fit, the objective decides). The
same problem, seed, thread count and work limit therefore give the same design on any machine and
under any load. Without a work limit, above :data:`CLOCK_SIZED_MIN_SERVERS` servers, the time limit
sizes the search, never a clock read (:func:`clock_sizing`): its units (:func:`clock_units`, a
quarter core of the time limit) must cover the forecast flow-model judging
(:func:`flow_judging_units`), else the objective decides and the search gets
:data:`CLOCK_SEARCH_SHARE` of them. ``time_limit_s`` caps the wall clock (the search keeps time for
about four flow simulations after the first one): when it cuts a step the best design so far is
returned with ``info["deterministic"] = False`` and ``info["stopped_by"] = "time limit"``; otherwise
``stopped_by`` is ``"optimal"``, ``"work limit"`` or ``"done"``.

Above ``lp_max_servers`` servers (default :data:`LP_MAX_SERVERS`) the routing LP is not run:
:func:`solvers.joint.lp_free.lp_free_search` routes the constructions in closed form
(:mod:`solvers.joint.fast_routing`, whose work counts its ring walks, distances and balancing)
and the same finalist judging applies; its default work limit is :data:`LP_FREE_WORK_LIMIT`
(the judging keeps the default re-fill budget).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from solvers.baselines.topoopt_method import allreduce_rings, mp_matchings, topoopt_design
from solvers.baselines.traffic_input import topoopt_traffic
from solvers.bounds import lower_bound
from solvers.joint.exact_mip import exact_design
from solvers.joint.flow_select import FLOW_SELECT_MAX_FLOWS, FlowScore, select_by_flow
from solvers.joint.flow_select import score as flow_score
from solvers.joint.local_search import improve_by_swaps
from solvers.joint.rings import circuit_rings, hamiltonian_cycles, stride_rings
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design, node_paths, ring_records
from solvers.model.ports import fill_free_ports, merge_prewired, with_port_options
from solvers.model.problem import DesignProblem
from solvers.routing_lp import SharedRouting, min_hop_paths, route_circuits
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError
from traffic.limits import check_time_limit, check_work_limit

__all__ = [
    "check_problem",
    "warm_start",
    "candidate_circuits",
    "ring_candidates_for",
    "quick_score",
    "route_design",
    "to_design",
    "congestion_search",
    "CongestionSearch",
    "WorkMeter",
    "default_work_limit",
    "clock_units",
    "flow_judging_units",
    "clock_sizing",
    "flow_model_pairs",
    "SELECT_BY",
    "WARM_START",
    "DEFAULT_WORK_LIMIT",
    "LP_FREE_WORK_LIMIT",
    "LP_ITERATION_LIMIT",
    "ROUTING_LP_TOLERANCE",
    "EXACT_NODE_LIMIT",
    "EXACT_WORK_SHARE",
    "STRIDE_MAX_SETS",
    "FLOW_MAX_PAIRS",
    "LP_MAX_SERVERS",
    "WORK_PER_REFILL",
    "FLOW_WORK_PER_REFILL",
    "FLOW_WORK_SHARE",
    "BOUND_WORK_SHARE",
    "CLOCK_CORE_SHARE",
    "CLOCK_SIZED_MIN_SERVERS",
    "FLOW_JUDGING_BASE_UNITS",
    "FLOW_JUDGING_UNITS_PER_SERVER",
    "CLOCK_SEARCH_SHARE",
]

Progress = Callable[[float, float], None]

SELECT_BY = ("flow", "objective")
"""How :func:`congestion_search` picks its result among the finalists."""

DEFAULT_WORK_LIMIT = 20.0
"""Default work limit of :func:`congestion_search`, in work units (a deterministic count of LP
work, :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`, about a second of one core per unit on
the routing LPs of 128 servers; the flow-model judging has its own re-fill budget,
:data:`FLOW_WORK_SHARE`). At 128 servers of
degree 8 a routing costs 2-8 units (PDLP iterations x nonzeros), so about 3-8 candidates and
swaps are routed, and the search with its flow-model judging fits the 60 s default time limit
on 2 cores; small clusters route every candidate and run the swap search to its end."""

LP_FREE_WORK_LIMIT = 8.0
"""Default work limit of :func:`congestion_search` above ``lp_max_servers`` servers (the LP-free
search, :mod:`solvers.joint.lp_free`), in the same units (about a second of one core each, the
LP-free routing's work counted as :mod:`solvers.joint.fast_routing` says). Sized so that the
default search, flow-model judging included, ends on its work limit in about 15 CPU s at
512-2,048 servers (at ``advise``'s 30 s the time limit sizes it smaller, :func:`clock_sizing`;
docs/performance.md,
"Session 38: joint determinism"): the wall clock is then only the safety cap it is meant to be,
and the same problem gives the same design under any load."""

CLOCK_CORE_SHARE = 0.25
"""Share of one core a search is counted on getting from its wall clock when no ``work_limit``
is given (:func:`clock_units`): a nice-0 process got 0.16-0.35 of a core on the 2-core reference
machine at load 5-9 (docs/performance.md, "Session 38: joint determinism"). One work unit is
about a CPU second, so ``time_limit_s`` seconds are ``CLOCK_CORE_SHARE * time_limit_s`` units."""

CLOCK_SIZED_MIN_SERVERS = 64
"""Above this many servers (where one flow simulation costs seconds) and without a
``work_limit``, the search is sized by its clock's units (:func:`clock_units`): the flow-model
judging runs only when they cover :func:`flow_judging_units`, and without it the search's work
limit is at most :data:`CLOCK_SEARCH_SHARE` of them. A rule on the inputs (size, time limit),
never on a measured time: the same inputs give the same design under any load."""

FLOW_JUDGING_BASE_UNITS = 4.0
"""Fixed part of :func:`flow_judging_units` (work units: the references' and finalists'
simulations each pay a process fork and the flow model's set-up)."""

FLOW_JUDGING_UNITS_PER_SERVER = 0.04
"""Per-server part of :func:`flow_judging_units`. The flow model's child processes took 4.4-6.4
CPU s at 128 servers and 4.9-15.3 at 512 in ``advise``'s clock-cut rows (DLRM, GPT-3 175B,
Mixtral); a whole judging costs more where the Blink pass runs (GPT-3 at 512 servers: 126 s),
so the forecast is a floor: it tells when the judging is out of the clock's reach, not that
it fits (docs/performance.md, "Session 38: joint determinism")."""

CLOCK_SEARCH_SHARE = 0.5
"""Without the flow-model judging (skipped for the clock's units), the search's default work
limit is at most this share of :func:`clock_units` (the rest: the warm start and the
candidates' construction, which are not metered)."""

WORK_PER_REFILL = 1e-7
"""Work units per sub-flow re-fill of the flow model (about 100 ns each on the reference machine;
:attr:`topoopt.flowsim.simulator.SimResult.refills`), as the iteration search
(:mod:`solvers.joint.iteration_search`) charges its simulations. The congestion search's
flow-model judging counts :data:`FLOW_WORK_PER_REFILL` instead."""

FLOW_WORK_PER_REFILL = 4e-8
"""Work units per sub-flow re-fill in the congestion search's flow-model judging (one unit is
about a CPU second). Measured on the judging's simulations at 128 servers (``advise --gpus
1024``, session 40): 6.3-7.4 ns a re-fill on DLRM's finalists (2.2e8 and 2.9e8 re-fills in 1.6
and 1.8 CPU s), 22.7 ns on Mixtral 8x7B's ``topoopt circuits`` (3.8e9 re-fills, 85.5 CPU s),
about 73 ns on GPT-3 175B's ``split d_ar=6`` (4e8 re-fills, 29 CPU s); not the 100 ns of
:data:`WORK_PER_REFILL`, at which the budget (1e8 re-fills) could not simulate DLRM's objective
pick (13.22 ms against the 17.57 ms TopoOpt design shipped instead). At 40 ns the default
judging gets 2.5e8 re-fills: DLRM's pick fits, and a finalist that does not fit costs GPT-3
about 11 CPU s more than at 1e8 (at 20 ns, 5e8 re-fills: 29 s more, 1.38x its advise run).
The cost of a re-fill varies tenfold between plans, so the budget is a deterministic cap,
not a time."""

BOUND_WORK_SHARE = 0.1
"""At most this share of ``work_limit`` goes to the LP-relaxation bound (its solves are
iteration-capped accordingly; when it does not finish, the ideal-switch and hop bounds stand)."""

FLOW_WORK_SHARE = 0.5
"""The flow-model judging of the finalists gets ``FLOW_WORK_SHARE * work_limit`` work units on
top of the search's ``work_limit``: ``FLOW_WORK_SHARE * work_limit / FLOW_WORK_PER_REFILL``
re-fills shared by the ``topoopt`` baseline's simulation and then the finalists' (2.5 x 10^8
by default, at every size: without a ``work_limit`` the share is of :data:`DEFAULT_WORK_LIMIT`,
also above ``lp_max_servers``)."""

LP_ITERATION_LIMIT = 20_000
"""Deterministic iteration limit of every PDLP solve of the search (routing and bound LPs)."""

ROUTING_LP_TOLERANCE = 1e-3
"""PDLP's relative and absolute optimality tolerance for the candidates' routing LPs (the
objective is recomputed from the decomposed paths, so the tolerance only affects the ranking)."""

EXACT_NODE_LIMIT = 20_000
"""Branch-and-bound node limit of the exact MIP (deterministic for a given thread count); the
work limit's share (:data:`EXACT_WORK_SHARE`) usually binds first."""

EXACT_WORK_SHARE = 0.5
"""The exact MIP's work limit: this share of the search's work left when it starts (the swap
search after it keeps the rest). Its LP iterations are charged to the search's work."""

LP_MAX_SERVERS = 128
"""Largest cluster whose candidates the routing LP routes; above it
:func:`solvers.joint.lp_free.lp_free_search` routes them in closed form. At 256 servers the LP
route cost the whole default work limit for one candidate and shipped the baseline (gpt3-175b
on 256 servers at 4 ports: 15.44 s objective, the TopoOpt design; LP-free: 3.90 s, issue 29
item 7)."""

FLOW_MAX_PAIRS = 50_000
"""Largest :func:`flow_model_pairs` for which the finalists are judged by the flow model (above,
a simulation takes about as long as the whole time limit; the objective decides)."""


def check_problem(problem: DesignProblem) -> None:
    """Raise :class:`InputError` when no design can carry ``problem``'s traffic."""
    if problem.degree < 2:
        raise InputError("degree", problem.degree, "at least 2 ports (a connected design)")
    if problem.n < 3:
        raise InputError("servers", problem.n, "at least 3 servers")
    if problem.has_port_options:  # a server with traffic needs a usable port
        n = problem.n
        busy = np.zeros(n, bool)
        for ph in problem.phases:
            busy |= (ph.out_bytes(n) > 0) | (ph.in_bytes(n) > 0)
        dead = np.flatnonzero(busy & (problem.usable_ports() < 1))
        if dead.size:
            i = int(dead[0])
            raise InputError(
                f"reserved (server {i})",
                int(problem.degree - problem.usable_ports()[i]),
                f"fewer than its {problem.degree} ports (it sends or receives traffic)",
            )


WARM_START = ("topoopt", "topoopt-released")
"""The baselines :func:`congestion_search` starts from and never ships slower than (in the flow
model when it judges, else in the objective)."""


def _flow_key(sc: FlowScore) -> tuple[float, float]:
    """What the flow-model guard compares: the iteration time (communication alone without a
    compute model), then communication."""
    first = sc.comm_s if math.isnan(sc.iteration_s) else sc.iteration_s
    return (first, sc.comm_s)


def warm_start(problem: DesignProblem, seed: int = 0) -> list[Design]:
    """The TopoOpt baselines, best first."""
    out = [topoopt_design(problem, v, seed=seed) for v in WARM_START]
    return sorted(out, key=lambda d: d.objective_s)


STRIDE_MAX_SETS = 400_000
"""Deterministic limit of each optimal-stride search of :func:`candidate_circuits`
(:func:`~solvers.baselines.strides.best_strides`'s ``max_sets``): 128 servers at 16 ports need
328,756 stride sets to proof (4.2 s of CPU); the old 5 s wall clock alone cut that search on a
loaded machine (at load 15, after 273,708 sets), so the circulant tried depended on the load."""


STRIDE_MAX_POINTS = STRIDE_MAX_SETS * 2625
"""Deterministic limit of each optimal-stride search in lattice points: a search of ``k =
d / 2`` strides gets at most ``STRIDE_MAX_POINTS // _ball(k, 3)`` stride sets (a set's bounds
cost about its ``L1`` ball of radius 3 in ``Z^k``: 33 us a set at 24 ports on 128 servers, 71 us
at 32, over 150 us at 40). Up to 24 ports (``_ball(12, 3) = 2,625``) this is
:data:`STRIDE_MAX_SETS`; above, fewer sets (32 ports: 174,552). Before it, 40 ports and more
ran each search to the 60 s wall-clock cap (64 ports: 12 such searches, 12 minutes)."""

STRIDE_LOOP_POINTS = 4 * STRIDE_MAX_POINTS
"""Deterministic limit of all the stride searches of one :func:`candidate_circuits`, in lattice
points (each search charged its set limit times ``_ball(k, 3)``, before it runs): the searches
from the most ring ports down stop once the next would pass it (deterministic: not a clock cut,
so not in ``capped``). Up to 24
ports every search runs (at most 3.64 times :data:`STRIDE_MAX_POINTS` in all at 24 ports, 0.82
at 16, on 128 to 2,048 servers); at 64 ports on 128 servers, the eight searches of 64 down to 50
ring ports."""


def stride_searches(n: int, top: int) -> list[tuple[int, int]]:
    """``(ring ports, stride-set limit)`` of the optimal-stride searches of
    :func:`candidate_circuits` on ``n`` servers with ``top`` ring ports at most: from ``top``
    down by 2 to 4, each limited to :data:`STRIDE_MAX_POINTS` lattice points, while all of them
    stay within :data:`STRIDE_LOOP_POINTS` (each charged its limit, or its number of canonical
    stride sets when fewer, times ``_ball(k, 3)``). A rule on ``n`` and ``top`` alone.

    >>> stride_searches(128, 8)
    [(8, 400000), (6, 400000), (4, 400000)]
    >>> stride_searches(128, 64)[:2], len(stride_searches(128, 64))
    ([(64, 22913), (62, 25163)], 7)
    """
    from solvers.baselines.strides import _ball, _classes

    out, spent, m = [], 0, int(_classes(n).size)
    for d_ar in range(top, 3, -2):
        k = d_ar // 2
        sets = max(1, min(STRIDE_MAX_SETS, STRIDE_MAX_POINTS // _ball(k, 3)))
        charge = min(sets, math.comb(max(m - 1, 0), k - 1)) * _ball(k, 3)
        if spent + charge > STRIDE_LOOP_POINTS:  # a work limit, not a clock cut
            break
        spent += charge
        out.append((d_ar, sets))
    return out


def candidate_circuits(
    problem: DesignProblem,
    deadline: float,
    stride_time: float = 60.0,
    strides: bool = True,
    capped: list | None = None,
) -> list[tuple[str, np.ndarray]]:
    """Circuit sets to route and compare (module docstring, step 3), cheapest first.

    ``strides=False`` leaves out the optimal-stride circulants. Their search stops on
    :data:`STRIDE_MAX_SETS` stride sets (deterministic); ``stride_time`` seconds is only a cap,
    and a search it cuts is named in ``capped`` (the caller's record of clock cuts).

    With reserved or pre-wired ports the constructions use ``d_free = min_i free_i`` ports
    (:meth:`DesignProblem.free_ports`), the pre-wired circuits are added and the ports left
    are filled up to ``degree - reserved_i`` (components joined first).
    """
    n, d = problem.n, problem.degree
    options = problem.has_port_options
    budget = problem.usable_ports() if options else d
    if options:
        d = problem.free_degree
    traffic = topoopt_traffic(problem)
    mp = traffic.mp

    def fill(c: np.ndarray) -> np.ndarray:
        if options:
            c = merge_prewired(c, problem)
        return fill_free_ports(c, n, budget, mp, problem.pair_cap, connect=options)

    out: list[tuple[str, np.ndarray]] = []
    top = d - d % 2
    for d_ar in range(top, 1, -2):
        if time.perf_counter() >= deadline:
            break
        ar, _, _ = allreduce_rings(traffic, d_ar)
        d_mp = d - d_ar
        parts = [ar]
        if d_mp and mp.nnz:
            parts.append(mp_matchings(mp, d_mp, n)[0])
        c = Circuits(np.vstack(parts), n).rows
        out.append((f"split d_ar={d_ar}", fill(c)))
    # all-server ring group (or no group): optimal mean-hop circulant for the ring ports
    whole = any(g.size == n for g in traffic.groups) or not traffic.groups
    left = deadline - time.perf_counter()
    if strides and whole and left > 1.0 and top >= 4:
        from solvers.baselines.strides import best_strides
        from topoopt.fabrics import circulant_circuits

        for d_ar, sets in stride_searches(n, top):
            try:
                res = best_strides(
                    n, d_ar, "mean-hops", time_limit_s=min(stride_time, left / 2),
                    max_sets=sets,
                )  # fmt: skip
            except InputError:
                continue
            if res.status == "time-limit" and capped is not None:
                capped.append(f"best strides at {d_ar} ports")
            c = circulant_circuits(n, res.strides)
            parts = [c]
            if d - d_ar and mp.nnz:
                parts.append(mp_matchings(mp, d - d_ar, n)[0])
            c = Circuits(np.vstack(parts), n).rows
            out.append(
                (f"best strides {list(res.strides)} + {d - d_ar} MP ports",
                 fill(c))
            )  # fmt: skip
            left = deadline - time.perf_counter()
            if left <= 1.0:
                break
    return out


def ring_candidates_for(
    problem: DesignProblem, circuits: Circuits, extra: Design | None = None, exact: bool = False
) -> list[list[list[np.ndarray]]]:
    """Candidate rings per phase and group: rings along circuits, stride 1 both ways, the
    baseline's rings, and (``exact``) every Hamiltonian cycle of groups of at most 6."""
    out = []
    for ph in problem.phases:
        per = []
        for g in range(ph.n_groups):
            m = ph.group(g)
            cands = circuit_rings(m, circuits, problem.n) + stride_rings(m, [1])
            if extra is not None:
                cands += [
                    np.asarray(r["order"], np.int64)
                    for r in extra.rings
                    if r["phase"] == ph.name and r["group"] == g
                ]
            if exact and m.size <= 6:
                cands += hamiltonian_cycles(m)
            uniq: dict[bytes, np.ndarray] = {}
            for r in cands:
                uniq.setdefault(r.tobytes(), r)
            per.append(list(uniq.values()))
        out.append(per)
    return out


def quick_score(problem: DesignProblem, circuits: np.ndarray) -> float:
    """A fast estimate of a design's time, to rank candidates before the LP routes them.

    Rings along circuits (or the ascending ring) carry each group evenly; every pair takes one
    fewest-hop path. ``inf`` when disconnected.
    """
    n = problem.n
    cc = Circuits(circuits, n)
    src, dst, cap = cc.links(problem.link_bandwidth)
    total = 0.0
    for ph in problem.phases:
        fx = ph.fixed.tocoo()
        s_parts = [fx.row.astype(np.int64)]
        t_parts = [fx.col.astype(np.int64)]
        b_parts = [fx.data]
        for g in range(ph.n_groups):
            m = ph.group(g)
            rings = circuit_rings(m, cc, n, limit=4) or [m]
            for o in rings:
                s_parts.append(o)
                t_parts.append(np.roll(o, -1))
                b_parts.append(np.full(o.size, ph.ring_bytes[g] / len(rings)))
        s_, t_, b_ = (np.concatenate(x) for x in (s_parts, t_parts, b_parts))
        key = s_ * n + t_
        uk, inv = np.unique(key, return_inverse=True)
        byts = np.bincount(inv, weights=b_)
        paths = min_hop_paths(n, src, dst, uk // n, uk % n)
        if any(p is None for p in paths):
            return np.inf
        lens = np.array([p.size for p in paths])
        loads = np.bincount(
            np.concatenate(paths), weights=np.repeat(byts, lens), minlength=cap.size
        )
        total += float((loads / cap).max())
    return total


def route_design(
    problem: DesignProblem,
    circuits: np.ndarray,
    time_limit: float = math.inf,
    extra: Design | None = None,
    exact: bool = False,
    iteration_limit: int = LP_ITERATION_LIMIT,
    lp_tolerance: float = ROUTING_LP_TOLERANCE,
) -> tuple[SharedRouting, float, np.ndarray]:
    """Route ``circuits`` with the LP; returns the routing, its exact objective and per-link
    utilisation (load / capacity / phase time, max over phases). ``inf`` when disconnected.

    Deterministic: GLOP solves small LPs to optimality, PDLP stops at ``lp_tolerance`` or
    ``iteration_limit``; ``time_limit`` (seconds) is a wall-clock cap only (the routing's
    ``limit`` is ``"time"`` when it cut a solve). The routing's ``work`` counts the LP work."""
    cc = Circuits(circuits, problem.n)
    c = cc.rows
    cands = ring_candidates_for(problem, cc, extra, exact)
    try:
        routed = route_circuits(
            problem, cc, cands, time_limit=time_limit, iteration_limit=iteration_limit,
            lp_tolerance=lp_tolerance,
        )  # fmt: skip
    except InputError:
        return None, np.inf, np.zeros(2 * c.shape[0])
    ev = evaluate_routing(problem, cc, routed.routings(), keep_loads=True)
    if not ev.feasible:
        return None, np.inf, np.zeros(2 * c.shape[0])
    _, _, cap = cc.links(problem.link_bandwidth)
    util = np.zeros(cap.size)
    for t, loads in zip(ev.phase_times, ev.link_loads, strict=True):
        if t > 0:
            util = np.maximum(util, loads / cap / t)
    return routed, ev.objective, util


def to_design(
    problem: DesignProblem,
    circuits: np.ndarray,
    routed: SharedRouting,
    lower_bound_s: float,
    solver: str,
    t0: float,
    info: dict,
    proven: bool = False,
) -> Design:
    """Package a routed design; the objective is recomputed by ``evaluate_routing``."""
    c = Circuits(circuits, problem.n)
    src, dst, _ = c.links(problem.link_bandwidth)
    have = set((src * problem.n + dst).tolist())
    rings = ring_records(problem, routed.rings, have)
    routing = node_paths(routed.paths, dst)
    ev = evaluate_routing(problem, c, routed.routings())
    if not ev.feasible:
        raise RuntimeError(
            "joint design failed its own feasibility check: " + "; ".join(ev.violations)
        )
    obj = ev.objective
    lb = min(lower_bound_s, obj)
    gap = (obj - lb) / obj if obj > 0 else 0.0
    status = "optimal" if proven or gap <= 1e-6 else "feasible"
    return Design(
        problem.n, problem.degree, problem.link_bandwidth, c, tuple(rings), routing, solver,
        status, obj, lb, gap, time.perf_counter() - t0, info,
    )  # fmt: skip


def _rebound(design: Design, lb: float, t0: float, info: dict, keep_info: bool = False) -> Design:
    """``design`` as the joint optimizer's result: solver ``joint``, bound, gap and wall time.

    ``keep_info``: the design is the optimizer's own (its info is replaced by ``info``);
    otherwise it is a baseline, whose info is kept under ``baseline_info``."""
    obj = design.objective_s
    lb = min(max(lb, design.lower_bound_s), obj)
    gap = (obj - lb) / obj if obj > 0 else 0.0
    status = design.status if keep_info and design.status == "optimal" else "feasible"
    status = "optimal" if gap <= 1e-6 else status
    extra = dict(info) if keep_info else {**info, "baseline_info": dict(design.info)}
    return Design(
        design.servers, design.degree, design.link_bandwidth, design.circuits, design.rings,
        design.routing, "joint", status, obj, lb, gap, time.perf_counter() - t0, extra,
    )  # fmt: skip


class WorkMeter:
    """Deterministic work spent by :func:`congestion_search` against its work limit.

    ``used`` grows by each step's deterministic work (LP nonzeros x iterations and model sizes,
    :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`); a routing is only started while the
    work used plus the last routing's work (its forecast) is within ``limit``.
    ``stopped`` records that the limit kept a step from running.
    """

    def __init__(self, limit: float) -> None:
        self.limit = float(limit)
        self.used = 0.0
        self.last = 0.0
        self.stopped = False

    def charge(self, work: float, step: bool = False) -> None:
        """Add ``work``; ``step``: it was a routing (the forecast of the next one's work)."""
        self.used += float(work)
        if step:
            self.last = float(work)

    def allows(self) -> bool:
        """True while the next routing, forecast to cost as much as the last one, fits."""
        if self.used < self.limit and self.used + self.last <= self.limit:
            return True
        self.stopped = True
        return False


def default_work_limit(problem: DesignProblem, lp_max_servers: int = LP_MAX_SERVERS) -> float:
    """The work limit of :func:`congestion_search` when none is given:
    :data:`DEFAULT_WORK_LIMIT`, or :data:`LP_FREE_WORK_LIMIT` above ``lp_max_servers`` servers
    (the LP-free search), a rule on the size alone (never on the clock).

    >>> from types import SimpleNamespace as P
    >>> default_work_limit(P(n=128)), default_work_limit(P(n=2048))
    (20.0, 8.0)
    """
    return LP_FREE_WORK_LIMIT if problem.n > lp_max_servers else DEFAULT_WORK_LIMIT


def clock_units(time_limit_s: float) -> float:
    """The work units ``time_limit_s`` seconds of wall clock are counted as on the loaded
    reference machine (:data:`CLOCK_CORE_SHARE` of a core; one unit is about a CPU second).
    The limit is counted in whole seconds, rounded up: a caller that passes the time left of
    its own limit (the iteration search's fallback hands over ``30 - 1e-4`` s) gets its
    nominal limit's units, whatever the clock read in between.

    >>> clock_units(30.0), clock_units(29.9999), clock_units(900.0)
    (7.5, 7.5, 225.0)
    """
    return CLOCK_CORE_SHARE * math.ceil(float(time_limit_s))


def flow_judging_units(problem: DesignProblem) -> float:
    """Forecast, in work units, of the flow-model judging of :func:`congestion_search` on
    ``problem`` (the warm starts' simulations, the finalists' and the Blink pass): linear in the
    servers (:data:`FLOW_JUDGING_BASE_UNITS`, :data:`FLOW_JUDGING_UNITS_PER_SERVER`).

    >>> from types import SimpleNamespace as P
    >>> round(flow_judging_units(P(n=128)), 6), round(flow_judging_units(P(n=512)), 6)
    (9.12, 24.48)
    """
    return FLOW_JUDGING_BASE_UNITS + FLOW_JUDGING_UNITS_PER_SERVER * problem.n


def clock_sizing(
    problem: DesignProblem, time_limit_s: float, lp_max_servers: int = LP_MAX_SERVERS
) -> tuple[float, bool]:
    """``(work_limit, flow_judging)`` of :func:`congestion_search` without a ``work_limit``: up to
    :data:`CLOCK_SIZED_MIN_SERVERS` servers, or when :func:`clock_units` of the time limit cover
    :func:`flow_judging_units`, :func:`default_work_limit` and the judging as before; else no
    judging (the objective decides) and at most :data:`CLOCK_SEARCH_SHARE` of the clock's units.
    A rule on the inputs alone.

    >>> from types import SimpleNamespace as P
    >>> clock_sizing(P(n=512), 30.0), clock_sizing(P(n=512), 600.0), clock_sizing(P(n=32), 5.0)
    ((3.75, False), (8.0, True), (20.0, True))
    """
    wl = default_work_limit(problem, lp_max_servers)
    units = clock_units(time_limit_s)
    if problem.n <= CLOCK_SIZED_MIN_SERVERS or units >= flow_judging_units(problem):
        return wl, True
    return min(wl, CLOCK_SEARCH_SHARE * units), False


def flow_model_pairs(problem: DesignProblem) -> int:
    """Server pairs with traffic summed over phases (fixed pairs + ring members): the size that
    decides, deterministically, whether :func:`congestion_search` judges finalists by the flow model
    (at most :data:`FLOW_MAX_PAIRS`)."""
    return int(
        sum(
            ph.fixed.nnz + sum(ph.group(g).size for g in range(ph.n_groups))
            for ph in problem.phases
        )
    )


def congestion_search(
    problem: DesignProblem,
    time_limit_s: float = 60.0,
    seed: int = 0,
    threads: int = 1,
    progress: Progress | None = None,
    exact_max_servers: int = 8,
    lp_max_servers: int = LP_MAX_SERVERS,
    local_search: bool = True,
    select_by: str = "flow",
    work_limit: float | None = None,
) -> Design:
    """The joint optimizer (module docstring): the best design found within a work limit.

    Parameters
    ----------
    problem : DesignProblem
    time_limit_s : float
        Wall-clock cap, seconds, always honoured: when it runs out the best design so far is
        returned (the baseline warm start always completes first) with
        ``info["deterministic"] = False``.
    seed : int
        Seed of the baseline's path draws (everything else is deterministic).
    threads : int
        Solver threads (the MIP; the LPs run single-threaded). The result is reproducible for a
        given ``(seed, threads)``.
    progress : callable, optional
        ``progress(incumbent_s, bound_s)`` on every new incumbent or bound.
    exact_max_servers : int
        Run the exact MIP up to this many servers.
    lp_max_servers : int
        Route with the LP up to this many servers (default :data:`LP_MAX_SERVERS`); above,
        the constructions are routed without an LP (:mod:`solvers.joint.lp_free`).
    local_search : bool
        Run the swap search.
    select_by : {"flow", "objective"}
        ``flow`` (default): when ``problem.workload`` is known and has at most
        :data:`FLOW_MAX_PAIRS` server pairs with traffic (:func:`flow_model_pairs`), the
        finalists (the best routed candidates and the baselines) are simulated by the flow model
        and the one with the shortest communication time wins
        (:mod:`solvers.joint.flow_select`). ``objective``: the smallest congestion objective
        wins.
    work_limit : float, optional
        Deterministic budget of the search in work units (LP work,
        :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`: about one second of one core per unit
        on large routing LPs), default :func:`default_work_limit` (20 up to ``lp_max_servers``
        servers, 8 above), sized down by a short ``time_limit_s`` above
        :data:`CLOCK_SIZED_MIN_SERVERS` servers (:func:`clock_sizing`). Candidates are
        routed, and swaps evaluated, while the work
        spent is below the limit; the work of a step is counted from its LP sizes and
        iterations, never from the clock, so the same problem, seed, thread count and work
        limit give the same design on any machine and under any load (as long as the wall-clock
        cap does not cut the search first). 0 keeps the baselines.

    Returns
    -------
    Design
        ``solver="joint"``, with status, objective, lower bound, gap and wall time; ``info``
        records the baseline objective, the candidate that won, the steps run, ``work_limit``,
        ``work_used``, ``stopped_by`` (``"optimal"``, ``"work limit"``, ``"time limit"`` or
        ``"done"``: every candidate and swap tried) and ``deterministic`` (False only when the
        wall-clock cap cut a step).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=6, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(6).reshape(1, 6), 6e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> d = congestion_search(p, time_limit_s=20)
    >>> d.status, round(d.objective_s / d.lower_bound_s, 6)
    ('optimal', 1.0)
    >>> d.info["stopped_by"], d.info["deterministic"]
    ('optimal', True)
    """
    s = CongestionSearch(
        problem, time_limit_s, seed, threads, progress, exact_max_servers, lp_max_servers,
        local_search, select_by, work_limit,
    )  # fmt: skip
    s.judge_reference()
    s.report()
    if problem.n_phases == 0:
        return s.baseline_only()
    if problem.n > lp_max_servers:
        from solvers.joint.lp_free import lp_free_search

        return lp_free_search(s, candidate_circuits(problem, math.inf, strides=False))
    if s.bound():
        return s.finish(s.bound_s)
    s.candidates()
    s.exact()
    s.local_search()
    if s.inc is None:
        s.info["steps"].append("baseline kept (no candidate improved on it)")
    return s.finish(s.bound_s)


@dataclass(eq=False)
class CongestionSearch:
    """The state of one congestion search (:func:`congestion_search` chains its steps).

    ``bases`` are the warm start (best first, ``base`` the best), ``inc_obj`` the incumbent's
    objective and ``inc`` the incumbent ``(circuits, routed, name, proven, util)`` once a
    candidate beat the baseline, ``pool`` every routed candidate ``(objective, order, name,
    circuits, routed)``, ``bound_s`` the lower bound, ``workload`` the workload the flow model
    judges with (None: the objective decides), ``known`` the flow scores so far, ``meter`` the
    work and ``capped`` the steps the wall clock cut.
    """

    problem: DesignProblem
    time_limit_s: float = 60.0
    seed: int = 0
    threads: int = 1
    progress: Progress | None = None
    exact_max_servers: int = 8
    lp_max_servers: int = LP_MAX_SERVERS
    search_swaps: bool = True
    select_by: str = "flow"
    work_limit: float | None = None
    t0: float = field(init=False)
    end: float = field(init=False)
    search_end: float = field(init=False)
    wl: float = field(init=False)
    meter: WorkMeter = field(init=False)
    capped: list = field(init=False, default_factory=list)
    info: dict = field(init=False, default_factory=dict)
    bases: list = field(init=False, default_factory=list)
    base: Design = field(init=False)
    inc_obj: float = field(init=False)
    inc: tuple | None = field(init=False, default=None)
    pool: list = field(init=False, default_factory=list)
    bound_s: float = field(init=False)
    workload: object = field(init=False, default=None)
    known: dict = field(init=False, default_factory=dict)
    flow_budget: int = field(init=False, default=0)
    flow_used: int = field(init=False, default=0)
    reference: str = field(init=False, default="topoopt")
    clock_judges: bool = field(init=False, default=True)
    _demand: object = field(init=False, default=None)
    _placed: object = field(init=False, default=None)

    def __post_init__(self) -> None:
        """Check the inputs, then step 2: the warm start (the first incumbent)."""
        self.t0 = time.perf_counter()
        time_limit = float(self.time_limit_s)
        self.end = self.t0 + time_limit
        check_problem(self.problem)
        if self.select_by not in SELECT_BY:
            raise InputError("select_by", self.select_by, f"one of {', '.join(SELECT_BY)}")
        check_time_limit("time_limit_s", self.time_limit_s)
        if self.work_limit is None:  # sized by the size and the time limit, not by a clock read
            wl, self.clock_judges = clock_sizing(self.problem, time_limit, self.lp_max_servers)
        else:
            wl, self.clock_judges = float(self.work_limit), True
        check_work_limit("work_limit", wl)
        self.wl = wl
        self.meter = WorkMeter(wl)
        self.info = {"seed": int(self.seed), "threads": int(self.threads), "work_limit": wl,
                     "steps": []}  # fmt: skip
        self.bases = warm_start(self.problem, self.seed)
        if self.problem.ocs is not None:
            self.fit_bases()
        self.base = self.bases[0]
        self.info["baseline"] = {b.solver: b.objective_s for b in self.bases}
        self.inc_obj = self.base.objective_s
        self.bound_s = self.base.lower_bound_s
        self.search_end = self.end

    def fit(self, c) -> np.ndarray:
        """``c`` as the problem's optical layer of finite-radix OCSes holds it
        (:func:`solvers.joint.ocs_fit.fit_circuits`: unchanged when it fits, else repaired);
        counted in ``info["ocs_search"]``. Unchanged without a layer."""
        from solvers.joint.ocs_fit import fit_circuits, ocs_demand

        if self.problem.ocs is None:
            return Circuits(c, self.problem.n).rows
        stats = self.info.setdefault("ocs_search", {"candidates_fitted": 0,
                                                    "candidates_repaired": 0})  # fmt: skip
        if self._demand is None:
            self._demand = ocs_demand(self.problem)
        rows, repaired = self.charged(
            lambda w, t: fit_circuits(self.problem, c, self._demand, t, w)
        )
        stats["candidates_fitted"] += 1
        stats["candidates_repaired"] += int(repaired)
        return rows

    def place(self, c):
        """``c``'s placement on the OCS layer (:func:`solvers.joint.ocs_fit.placement_of`;
        None when it does not fit), its CP-SAT work charged (:meth:`charged`)."""
        from solvers.joint.ocs_fit import placement_of

        return self.charged(lambda w, t: placement_of(self.problem, c, t, w))

    def charged(self, call):
        """``call(work, time_s)`` with the search's
        :class:`~solvers.model.ocs_layers.PlacementWork` and the deterministic time of one
        placement check (:func:`solvers.joint.ocs_fit.placement_time_s` of the work limit);
        the CP-SAT time it used is charged to the meter
        (:data:`solvers.joint.ocs_fit.WORK_PER_CP_SAT_S`), the total recorded in
        ``info["ocs_search"]["placement"]``."""
        from dataclasses import asdict

        from solvers.joint.ocs_fit import WORK_PER_CP_SAT_S, placement_time_s
        from solvers.model.ocs_layers import PlacementWork

        if self._placed is None:
            self._placed = PlacementWork()
        before = self._placed.deterministic_s
        out = call(self._placed, placement_time_s(self.wl))
        self.meter.charge(WORK_PER_CP_SAT_S * (self._placed.deterministic_s - before))
        stats = self.info.setdefault("ocs_search", {"candidates_fitted": 0,
                                                    "candidates_repaired": 0})  # fmt: skip
        stats["placement"] = {k: round(v, 6) if isinstance(v, float) else v
                              for k, v in asdict(self._placed).items()}  # fmt: skip
        return out

    def fit_bases(self) -> None:
        """Step 2 on finite-radix OCSes: each warm-start baseline whose circuits do not fit is
        replaced by its repaired circuits routed by the LP (above ``lp_max_servers``: without
        an LP, :func:`~solvers.joint.fast_routing.fast_route`; same solver name), best first; a
        baseline that does not route once repaired is dropped (kept when all are)."""
        problem, out = self.problem, []
        for b in self.bases:
            rows = self.fit(b.circuits)
            if np.array_equal(rows, b.circuits.rows):
                out.append(b)
                continue
            if problem.n_phases == 0:  # nothing to route: the circuits alone change
                info = {**dict(b.info), "ocs_repaired": True}
                out.append(replace(b, circuits=Circuits(rows, problem.n), info=info))
                continue
            if problem.n > self.lp_max_servers:  # as the LP-free search routes its candidates
                from solvers.joint.fast_routing import fast_route

                routed, _, _ = fast_route(problem, rows)
            else:
                left = max(self.end - time.perf_counter(), 1e-3)
                routed, _, _ = route_design(problem, rows, left)
            if routed is None:
                continue
            self.meter.charge(routed.work)
            d = to_design(problem, rows, routed, b.lower_bound_s, b.solver, self.t0, {})
            out.append(replace(d, info={**dict(b.info), "ocs_repaired": True}))
        if out:
            self.bases = sorted(out, key=lambda d: d.objective_s)

    def judge_reference(self) -> None:
        """Step 7, first part: whether the flow model judges the finalists (decided by the
        problem's size, never by the clock), and the warm-start baselines' flow scores: the
        fastest of them (iteration time, or communication without a compute model) is the
        ``reference`` no choice may be slower than. When one of them cannot be simulated
        (too large, over the flow work limit, cut by the clock) the objective decides, which
        no baseline beats either."""
        problem, info = self.problem, self.info
        workload = problem.workload if self.select_by == "flow" else None
        reserve = 0.0
        # the judging's own budget: a share of the work limit given, else of the default
        # DEFAULT_WORK_LIMIT at every size (LP_FREE_WORK_LIMIT bounds the search, not it)
        flow_wl = self.wl if self.work_limit is not None else DEFAULT_WORK_LIMIT
        self.flow_budget = flow_budget = int(FLOW_WORK_SHARE * flow_wl / FLOW_WORK_PER_REFILL)
        if workload is not None and problem.n_phases and not self.clock_judges:
            info["steps"].append(
                f"flow model skipped (the time limit of {math.ceil(self.time_limit_s)} s counts "
                f"{clock_units(self.time_limit_s):g} work units, the judging needs about "
                f"{flow_judging_units(problem):g}: raise --time-limit to judge by the flow model)"
            )
            workload = None
        if workload is not None and problem.n_phases:
            pairs = flow_model_pairs(problem)
            if pairs > FLOW_MAX_PAIRS:
                info["steps"].append(
                    f"flow model skipped ({pairs} server pairs with traffic > {FLOW_MAX_PAIRS})"
                )
                workload = None
        for name in WARM_START if workload is not None and problem.n_phases else ():
            b = next(b for b in self.bases if b.solver == name)
            ref = flow_score(
                name, b, problem, workload, self.end - time.perf_counter(),
                flow_budget - self.flow_used,
            )  # fmt: skip
            self.known[name] = ref
            self.flow_used += ref.refills
            if ref.timed_out:
                self.capped.append(f"flow model of {name}")
                workload = None
            elif ref.too_large:
                info["steps"].append(
                    f"flow model skipped ({name}'s iteration has more than "
                    f"{FLOW_SELECT_MAX_FLOWS:,} flows)"
                )
                workload = None
            elif ref.over_budget:
                info["steps"].append(
                    f"flow model skipped ({name}'s simulation needs more than the flow "
                    f"work limit of {flow_budget} re-fills)"
                )
                workload = None
            elif name == "topoopt":  # the wall-clock cap keeps time for about four more
                reserve = min(0.4 * float(self.time_limit_s), 4 * 1.3 * ref.wall_s)
            if workload is None:
                reserve = 0.0
                break
        if workload is not None and problem.n_phases:
            self.reference = min(WARM_START, key=lambda nm: _flow_key(self.known[nm]))
        self.workload = workload
        self.search_end = self.end - reserve  # the search's wall-clock cap

    def report(self) -> None:
        """Tell ``progress`` the incumbent and the bound."""
        if self.progress is not None:
            self.progress(self.inc_obj, self.bound_s)

    def cap_left(self, step: str) -> float | None:
        """Seconds the search may still use; None (and the step recorded) when the cap is up."""
        left = self.search_end - time.perf_counter()
        if left <= 0:
            self.capped.append(step)
            return None
        return left

    def baseline_only(self) -> Design:
        """Without phases: the baselines and the best of them with its free ports filled,
        judged (:meth:`finish`)."""
        self.info["steps"].append("baseline only (no phase with traffic)")
        self.fill_base_ports()
        b = lower_bound(self.problem, use_lp=False)
        self.info["bound_method"] = b.method
        return self.finish(max(self.bound_s, b.lower_bound_s))

    def fill_base_ports(self) -> None:
        """The best baseline with its free ports filled joins the warm start (first) when its
        objective is no higher; ``info["free_ports_filled"]`` counts the circuits added. On an
        OCS layer the free ports are joined on common OCSes
        (:func:`solvers.model.ocs_layers.repair_circuits` of the fitted baseline), so the
        result fits the layer."""
        problem, info, base = self.problem, self.info, self.base
        n = problem.n
        if problem.ocs is not None and not problem.has_port_options:
            # on the OCS layer: the baseline (fitted) keeps its placement and the free ports
            # are joined on common OCSes, heaviest demand first, so nothing is repaired later
            from solvers.joint.ocs_fit import ocs_demand
            from solvers.model.ocs_layers import repair_circuits

            if self._demand is None:
                self._demand = ocs_demand(problem)
            filled = self.charged(
                lambda w, t: repair_circuits(
                    base.circuits, problem.ocs, self._demand, problem.pair_cap, t, w
                )[0]
            )
        else:
            filled = fill_free_ports(
                base.circuits, n, problem.usable_ports(), topoopt_traffic(problem).mp,
                problem.pair_cap,
            )  # fmt: skip
        added = int(filled[:, 2].sum()) - base.circuits.total
        info["free_ports_filled"] = added
        if added:
            more = Design(
                n, problem.degree, problem.link_bandwidth, filled, base.rings, base.routing,
                base.solver, base.status, 0.0, 0.0, 0.0, 0.0, base.info,
            )  # fmt: skip
            ev = evaluate_routing(problem, filled, more.phase_routings(problem))
            if ev.feasible and ev.objective <= base.objective_s:
                self.base = Design(
                    n, problem.degree, problem.link_bandwidth, filled, base.rings, base.routing,
                    f"{base.solver} + free ports", base.status, ev.objective, base.lower_bound_s,
                    0.0, 0.0, base.info,
                )  # fmt: skip
                self.bases = [self.base, *self.bases]

    def bound(self) -> bool:
        """Step 6, run first: the LP relaxation when small enough (GLOP exact, PDLP
        iteration-capped). True when the baseline meets it (optimal: nothing to search)."""
        problem = self.problem
        left = self.cap_left("lower bound")
        if left is not None:
            b = lower_bound(
                problem, use_lp=True, time_limit=left, iteration_limit=LP_ITERATION_LIMIT,
                work_limit=BOUND_WORK_SHARE * self.wl,
            )  # fmt: skip
            if b.limit == "time":
                self.capped.append("lower bound")
        else:
            b = lower_bound(problem, use_lp=False)
        self.meter.charge(b.work)
        self.info["bound_work"] = b.work
        self.bound_s = max(self.bound_s, b.lower_bound_s)
        self.info["bound_method"] = b.method
        self.report()
        if self.inc_obj <= self.bound_s * (1 + 1e-9):
            self.info["steps"].append("baseline meets the lower bound: optimal")
            return True
        return False

    def route(self, c, step: str, exact: bool = False):
        """``route_design`` under the wall-clock cap, its work charged; None when the cap is up."""
        left = self.cap_left(step)
        if left is None:
            return None
        routed, val, util = route_design(self.problem, c, left, extra=self.base, exact=exact)
        if routed is not None:
            self.meter.charge(routed.work, step=True)
            if routed.limit == "time":
                self.capped.append(step)
            if routed.fallback:  # an LP stopped without a solution: fewest-hop paths instead
                why = routed.limit or routed.status
                self.info.setdefault("lp_fallbacks", []).append(
                    f"{step}: {routed.fallback} ({why})"
                )
        return routed, val, util

    def candidates(self) -> None:
        """Step 3: the baselines' circuits and the other splits (cheapest estimate first), each
        routed by the LP while the work limit allows."""
        problem, n, base = self.problem, self.problem.n, self.base
        tried = []
        others = [(f"{x.solver} circuits", x.circuits) for x in self.bases[1:]]
        others += candidate_circuits(problem, deadline=math.inf, capped=self.capped)
        if problem.ocs is not None:  # built on the OCSes from the start
            from solvers.joint.ocs_fit import layer_candidates

            others += layer_candidates(problem)
        scored = sorted(
            ((quick_score(problem, c), i, name, c) for i, (name, c) in enumerate(others)),
            key=lambda x: (x[0], x[1]),
        )
        cands = [(f"{base.solver} circuits", base.circuits)] + [(nm, c) for _, _, nm, c in scored]
        seen: set[bytes] = set()
        for name, c in cands:
            key = Circuits(c, n).rows.tobytes()
            if key in seen:
                continue
            seen.add(key)
            if not self.meter.allows():
                break
            if self.problem.ocs is not None:  # as the layer holds it (the clock checked first:
                if self.cap_left(f"fitting {name}") is None:  # a placement may take seconds)
                    break
                c = self.fit(c)
                if c.tobytes() != key and c.tobytes() in seen:
                    continue
                seen.add(c.tobytes())
            before = self.meter.used
            ts = time.perf_counter()
            got = self.route(c, f"routing {name}")
            if got is None:
                break
            routed, val, util = got
            tried.append({"candidate": name, "objective_s": val, "work": self.meter.used - before,
                          "wall_s": time.perf_counter() - ts})  # fmt: skip
            if np.isfinite(val):
                self.pool.append((val, len(self.pool), name, Circuits(c, n).rows, routed))
            # on finite-radix OCSes the warm start is LP-routed already (fit_bases): a
            # candidate that ties it is the incumbent the swap search starts from
            tie = self.inc is None and self.problem.ocs is not None
            if val < self.inc_obj * (1 - 1e-12) or (tie and val <= self.inc_obj * (1 + 1e-9)):
                self.inc_obj = min(val, self.inc_obj)
                self.inc = (Circuits(c, n).rows, routed, name, False, util)
                self.report()
                if self.inc_obj <= self.bound_s * (1 + 1e-9):
                    break
        self.info["candidates"] = tried

    def exact(self) -> None:
        """Step 5: the exact MIP for tiny clusters (SCIP under a node limit), warm-started with
        the incumbent."""
        n, info, meter = self.problem.n, self.info, self.meter
        if n > self.exact_max_servers or self.inc_obj <= self.bound_s * (1 + 1e-9):
            return
        if not meter.allows():
            return
        left = self.cap_left("exact MIP")
        if left is None:
            return
        hint = Circuits(self.inc[0], n) if self.inc is not None else self.base.circuits
        share = EXACT_WORK_SHARE * max(meter.limit - meter.used, 0.0)
        ex = exact_design(
            self.problem, self.inc_obj, time_limit=left, threads=self.threads, seed=self.seed,
            hint_circuits=hint, node_limit=EXACT_NODE_LIMIT, work_limit=share,
        )  # fmt: skip
        meter.charge(ex.work)
        info["exact"] = {"status": ex.status, "objective_s": ex.objective_s,
                         "bound_s": ex.bound_s, "limit": ex.limit,
                         "stopped_by": ex.stopped_by, "work": ex.work}  # fmt: skip
        if ex.limit == "work":  # not run: the warm start (the incumbent) came back
            return
        if ex.limit == "time":
            self.capped.append("exact MIP")
        elif ex.limit:
            meter.stopped = True
        if ex.status == "optimal":
            self.bound_s = max(self.bound_s, ex.bound_s * (1 - 1e-6))
        got = None
        ex_c = ex.circuits
        if ex_c is not None and self.problem.ocs is not None:  # the MIP places on the OCSes
            ex_c = self.fit(ex_c)  # (constraints 11-12): it fits, this only checks
            info["exact"]["repaired"] = not np.array_equal(ex_c, Circuits(ex.circuits, n).rows)
            if info["exact"]["repaired"]:
                ex = replace(ex, status="repaired for the OCS layer")
        if ex_c is not None:
            got = self.route(ex_c, "routing the exact MIP's design", exact=True)
        if got is not None:
            routed, val, util = got
            inc_obj = self.inc_obj
            if val < inc_obj * (1 - 1e-9) or (self.inc is None and val <= inc_obj * (1 + 1e-9)):
                self.inc_obj = val
                proven = ex.status == "optimal" and val <= ex.objective_s * (1 + 1e-6)
                self.inc = (ex_c, routed, "exact MIP", proven, util)
        self.report()

    def local_search(self) -> None:
        """Step 4: degree-preserving 2-swaps on the incumbent
        (:func:`solvers.joint.local_search.improve_by_swaps`)."""
        optimal = self.inc_obj <= self.bound_s * (1 + 1e-9)
        inc = self.inc
        if not self.search_swaps or optimal or inc is None:
            return
        last: dict = {}

        def evaluate(c):
            got = self.route(c, "swap search")
            last["eval"] = got
            return (np.inf, None) if got is None else got[1:]

        def improved(c, v):
            self.inc_obj = v
            last["best"] = last["eval"]
            self.report()

        def keep_going() -> bool:
            if not self.meter.allows():
                return False
            if time.perf_counter() >= self.search_end:
                self.capped.append("swap search")
                return False
            return True

        place = self.place if self.problem.ocs is not None else None  # swaps on one OCS

        best_c, best_v, evals = improve_by_swaps(
            inc[0], self.problem.n, self.problem.pair_cap, evaluate, (self.inc_obj, inc[4]),
            on_improve=improved, floor=self.problem.prewired_circuits(), keep_going=keep_going,
            placement=place, layer=self.problem.ocs,
        )  # fmt: skip
        self.info["local_search_evaluations"] = evals
        if "best" in last and not np.array_equal(best_c, inc[0]):
            routed, val, util = last["best"]
            self.inc = (best_c, routed, inc[2] + " + swaps", False, util)
            self.inc_obj = val

    def finalists(self, lb: float) -> list[tuple[str, Design]]:
        """The incumbent, the next best routed candidate, then the baselines, packaged; smallest
        objective first."""
        inc, base = self.inc, self.base
        finalists: list[tuple[str, Design, tuple | None]] = []
        if inc is not None:
            finalists.append((inc[2], None, inc))
        for val, _, name, c, routed in sorted(self.pool, key=lambda x: (x[0], x[1])):
            if len(finalists) >= 2 or val >= base.objective_s * (1 + 0.5):
                break
            if inc is not None and name == inc[2]:
                continue
            finalists.append((name, None, (c, routed, name, False, None)))
        finalists += [(b.solver, b, None) for b in self.bases]
        built = []
        for name, design, entry in finalists:
            if design is None:
                c, routed, nm, proven, _ = entry
                design = to_design(
                    self.problem, c, routed, lb, "joint", self.t0, self.info, proven=proven
                )
            built.append((name, design))
        built.sort(key=lambda x: x[1].objective_s)  # smallest objective first; stable
        return built

    def judge(self, built: list[tuple[str, Design]]) -> int:
        """Step 7: the finalists simulated by the flow model (when it judges), the fastest
        admissible one picked (:func:`~solvers.joint.flow_select.select_by_flow`); returns its
        index in ``built`` (which it sorts cheapest simulation first)."""
        problem, info, workload = self.problem, self.info, self.workload
        if workload is None or not problem.n_phases:
            info["selected_by"] = "optimizer objective"
            return 0
        # the objective's pick (built is sorted by objective) is simulated first, so the work
        # limit goes to it; then the cheapest first (fewest routing paths, then smallest
        # objective): if the wall-clock cap stops a long simulation, the quick ones are judged
        objective_pick = built[0][0]
        built.sort(key=lambda x: (x[1].routing.weight.size, x[1].objective_s))
        pick, scores = select_by_flow(
            built, problem, workload, self.end, self.known, reference=self.reference,
            max_refills=self.flow_budget - self.flow_used, pick=objective_pick,
        )  # fmt: skip
        if any(sc.timed_out for sc in scores):
            self.capped.append("flow model of the finalists")
        over = [sc.name for sc in scores if sc.over_budget]
        if over:
            info["flow_over_budget"] = over
        skipped = [sc.name for sc in scores if sc.skipped]
        if skipped:
            info["flow_skipped"] = skipped
        info["flow_refills"] = {sc.name: sc.refills for sc in scores}
        info["flow_comm_s"] = {sc.name: sc.comm_s for sc in scores}
        info["flow_iteration_s"] = {sc.name: sc.iteration_s for sc in scores}
        info["flow_wall_s"] = {sc.name: sc.wall_s for sc in scores}
        info["flow_reference"] = self.reference
        info["selected_by"] = (
            f"flow model (communication, no slower than {self.reference}, the fastest warm start)"
        )
        return pick

    def finish(self, lb: float) -> Design:
        """Finalists (best routed candidates, then the baselines), judged; the winner packaged,
        then step 8: Blink packings where they beat the rings
        (:func:`solvers.joint.collective_choice.choose_collectives`)."""
        from solvers.joint.collective_choice import choose_collectives

        problem, info, capped, inc = self.problem, self.info, self.capped, self.inc
        built = self.finalists(lb)
        name, chosen = built[self.judge(built)]
        info["winner"] = name
        info["work_used"] = round(self.meter.used, 6)
        if capped:
            info["stopped_by"] = "time limit"
            info["time_limit_cut"] = list(dict.fromkeys(capped))
        elif chosen.objective_s <= lb * (1 + 1e-6) or (inc is not None and inc[3]):
            info["stopped_by"] = "optimal"
        elif self.meter.stopped:
            info["stopped_by"] = "work limit"
        else:
            info["stopped_by"] = "done"
        info["deterministic"] = not capped
        if chosen.solver == "joint":
            if inc is not None and name == inc[2]:
                info["routing_solver"] = inc[1].solver
            out = with_port_options(_rebound(chosen, lb, self.t0, info, keep_info=True), problem)
        else:
            out = with_port_options(_rebound(chosen, lb, self.t0, info), problem)
        ring_times = None
        if name in info.get("flow_comm_s", {}):
            keys = ("flow_comm_s", "flow_iteration_s", "flow_refills")
            ring_times = tuple(info[k][name] for k in keys)
        picked, cinfo = choose_collectives(
            out, problem, self.workload, ring_times, deadline=self.end
        )
        extra = {"collective_choice": cinfo}
        if cinfo.get("time_limit"):  # the clock cut the Blink pass: say so
            extra.update(
                stopped_by="time limit", deterministic=False,
                time_limit_cut=list(dict.fromkeys([*capped, "collective choice"])),
            )  # fmt: skip
        return replace(picked, info={**picked.info, **extra})
