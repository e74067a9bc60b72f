"""Choosing a schedule: communication phases, per-phase circuit sets, exact evaluation.

:func:`reconfigure` chooses the circuit schedule of one training iteration for a switch whose
reconfiguration takes ``delay`` seconds:

1. **Static design.** The plan's static design (``joint`` by default) and its iteration
   (:func:`~solvers.reconfig.schedule.iteration_under_schedule` with one set), the reference
   run: its timeline and fabric flows.
2. **Communication phases** (:func:`comm_phases`): the reference timeline cut where the set of
   fabric communication labels in flight (``phase:class`` of every communication task of a
   class that crosses servers) changes; idle stretches join the phase before them, phases
   shorter than ``min_fraction`` of the iteration join a neighbour, and the shortest merge until
   at most ``max_phases`` are left. For a data-parallel job these are the forward and backward
   (plus gradient sync) phases; for a pipeline the 1F1B steady state and the gradient sync.
3. **Per-phase candidates.** Each phase's server traffic (the reference flows' bytes in flight
   during it, pro rata to time) is a one-phase :class:`~solvers.model.problem.DesignProblem` of
   fixed
   traffic, designed by every solver of ``solvers`` (names of :func:`solvers.registry.solve`,
   and ``demand``: :func:`~solvers.reconfig.demand.demand_circuits`). The static set is a
   candidate in every phase; sets that leave servers unconnected are dropped, equal ones
   merged.
4. **Schedules.** A choice of one candidate per phase, the circuits changing at the phase
   boundaries ``b`` of the reference, either ready at ``b`` (requested at ``b - h``) or
   requested at ``b`` (each clamped to start after the previous reconfiguration ends). Every
   choice is evaluated exactly when there are at most ``max_exhaustive`` of them, else by
   coordinate descent from the static schedule (each phase in turn takes its best candidate,
   until nothing improves). All-static is always evaluated. A simulation stops once past the
   best iteration so far (its horizon), or once a bound proves it will be (the late cut of
   :func:`~topoopt.flowsim.timevarying.simulate_epochs`, and the bound from a prefix shared by
   the schedules of one first set, :class:`~solvers.reconfig.schedule.SharedPrefix`); the
   exhaustive search simulates cheap schedules first (:func:`_cheapest_first`), with the same
   result. A schedule's last simulation goes through the exact symmetry quotient of its flows
   where there is one worth it (:class:`~solvers.reconfig.schedule.ScheduleReductions`, shared
   by the search's runs; ``info["reduction"]`` counts them): the same iteration, up to
   rounding, so every guarantee below holds as it is.
5. **Dark times.** A reconfiguration's circuits may stay dark longer than the switch needs, so a
   switch of delay ``X`` can run every schedule with any dark time ``h >= X``. The search runs
   step 4 for every ``h`` in ``{X} + {g in HOLD_GRID_S: g > X}`` and keeps the fastest.

Guarantees
----------
- *Never slower than static*: all-static is a candidate; ties go to it (no reconfiguration
  that does not pay).
- *Monotone in delay*: the best schedule at dark time ``h`` depends on ``h`` only (the phases and
  candidates come from the static run), and the result at delay ``X`` is the minimum over
  ``h in {X} + grid above X``. For ``X < Y`` with ``Y`` on the grid, that set contains every
  dark time of ``Y``'s, so ``iteration(X) <= iteration(Y)``; the delay sweeps of the docs and
  benchmarks are on the grid.
- *Lower bound*: ``max(compute-only iteration, max over servers of fabric bytes sent or
  received / (degree * B))``: the iteration with an infinitely fast network, and no circuit set
  lets a server send or receive faster than its ``degree`` ports.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from solvers.reconfig.schedule import (
    CircuitSet,
    Schedule,
    ScheduleReductions,
    ScheduleRun,
    SharedPrefix,
    connected,
    iteration_under_schedule,
)
from traffic.errors import InputError

__all__ = [
    "HOLD_GRID_S",
    "PHASE_MERGES",
    "Phase",
    "ReconfigResult",
    "comm_phases",
    "phase_traffic",
    "phase_candidates",
    "schedule_for",
    "search_schedules",
    "set_cost",
    "cached_value",
    "lower_bound",
    "reconfigure",
    "delay_sweep",
    "EXACT_FLOWS",
    "COARSE_BUCKETS",
    "TIME_LIMIT_S",
]

HOLD_GRID_S = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
"""Dark times (seconds) every search also tries above its delay (10 us to 100 ms)."""

TIME_LIMIT_S = 900.0
"""Wall-clock cap (seconds) of the static and per-phase design solves of :func:`reconfigure`
(the command line's ``--time-limit``, the other commands' default). Their work limit decides;
the 60 s of a bare solve cut `reconfig gpt3-175b`'s static ``joint`` design (about 27 s of CPU
idle) on a loaded machine, whose schedule then differed from the idle machine's."""

PHASE_MERGES = ("shortest", "labels")
"""Rules by which :func:`comm_phases` joins the timeline's segments into phases."""

TIMINGS = ("ready", "request")
"""When a phase's circuits change: ``ready`` at its boundary ``b`` (requested ``b - h``), or
``request``\\ ed at ``b``."""


@dataclass(frozen=True)
class Phase:
    """A communication phase of the reference iteration: ``[start_s, end_s)`` and its labels."""

    name: str
    start_s: float
    end_s: float


def _net_classes(workload) -> set:
    gps = workload.gpus_per_server
    out = set()
    for d in workload.demands:
        if d.n_groups and d.group_size > 1:
            srv = d.groups // gps
            if np.any(srv.min(axis=1) != srv.max(axis=1)):
                out.add(d.cls)
    return out


def comm_phases(
    run: ScheduleRun,
    workload,
    *,
    max_phases: int = 4,
    min_fraction: float = 0.02,
    merge: str = "shortest",
) -> list[Phase]:
    """The communication phases of a reference run (module docstring, step 2).

    ``merge`` is the rule that joins segments (:data:`PHASE_MERGES`): ``"shortest"`` (the
    default) joins a segment shorter than ``min_fraction`` of the iteration to the one before
    it, then the shortest segment to its shorter neighbour until at most ``max_phases`` are
    left. ``"labels"`` first joins any two neighbours of one label set (nothing is lost), and
    joins a segment that must go (too short, or the shortest) to the neighbour of the most
    similar label set (fewest labels in one and not the other; a tie to the shorter, then to
    the one before): a pipeline's 1F1B stretch (forward and backward sends only) stays apart
    from the gradient sync that starts stage by stage at its end, which ``"shortest"`` may
    join to it (Mixtral 8x7B on 128 servers: its 1F1B phase carried the first stages' sync).

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan("vgg16-dp")
    >>> ring = [[i, (i + 1) % w.servers, 1] for i in range(w.servers)]
    >>> run = iteration_under_schedule(w, Schedule((CircuitSet(ring),), (0.0,)), 12.5e9, 0.0)
    >>> [p.name for p in comm_phases(run, w)]
    ['backward:dp']
    """
    if merge not in PHASE_MERGES:
        raise InputError("merge", merge, " or ".join(PHASE_MERGES))
    tl = run.result.timeline
    total = float(run.iteration_s)
    net = _net_classes(workload)
    keep = (
        ~tl["kind"].isin(["compute", "optimizer"]).to_numpy()
        & tl["class"].isin(sorted(net)).to_numpy()
        & (tl["finish_s"].to_numpy() > tl["start_s"].to_numpy())
    )
    rows = tl[keep]
    if rows.empty or total <= 0:
        return [Phase("iteration", 0.0, total)]
    labels = (rows["phase"].astype(str) + ":" + rows["class"].astype(str)).to_numpy()
    s = rows["start_s"].to_numpy(float)
    f = rows["finish_s"].to_numpy(float)
    pts = np.unique(np.concatenate([[0.0, total], s, f]))
    names = sorted(set(labels.tolist()))
    active = np.zeros((len(names), pts.size - 1), bool)
    for i, lab in enumerate(names):
        sel = labels == lab
        diff = np.zeros(pts.size, np.int64)
        np.add.at(diff, np.searchsorted(pts, s[sel]), 1)
        np.add.at(diff, np.searchsorted(pts, f[sel]), -1)
        active[i] = np.cumsum(diff)[:-1] > 0
    # maximal runs of one label set; idle runs join the run before (or after, at the start)
    segs: list[list] = []  # [start, end, frozenset]
    for j in range(pts.size - 1):
        labs = frozenset(names[i] for i in np.flatnonzero(active[:, j]))
        if segs and (labs == segs[-1][2] or not labs):
            segs[-1][1] = pts[j + 1]
        elif segs and not segs[-1][2]:
            segs[-1][1:] = [pts[j + 1], labs]
        else:
            segs.append([pts[j], pts[j + 1], labs])

    def join(i: int, j: int) -> None:  # segs[i] and segs[j] = segs[i + 1]
        segs[i] = [segs[i][0], segs[j][1], segs[i][2] | segs[j][2]]
        del segs[j]

    def equal_neighbours() -> bool:  # "labels": join two neighbours of one label set
        for i in range(len(segs) - 1):
            if segs[i][2] == segs[i + 1][2]:
                join(i, i + 1)
                return True
        return False

    def join_away(i: int, short_first: bool) -> None:  # segs[i] into a neighbour
        if i == 0:
            return join(0, 1)
        if i == len(segs) - 1:
            return join(i - 1, i)
        if merge == "labels":
            before = len(segs[i][2] ^ segs[i - 1][2])
            after = len(segs[i][2] ^ segs[i + 1][2])
            if before != after:
                return join(i - 1, i) if before < after else join(i, i + 1)
        if not short_first:
            return join(i - 1, i)
        lb, la = segs[i - 1][1] - segs[i - 1][0], segs[i + 1][1] - segs[i + 1][0]
        return join(i - 1, i) if lb <= la else join(i, i + 1)

    changed = True
    while changed and len(segs) > 1:
        changed = merge == "labels" and equal_neighbours()
        for i, (a, b, _) in enumerate(segs):
            if not changed and b - a < min_fraction * total:
                join_away(i, short_first=merge == "labels")
                changed = True
                break
    while len(segs) > max_phases:
        if merge == "labels" and equal_neighbours():
            continue
        lens = [b - a for a, b, _ in segs]
        join_away(int(np.argmin(lens)), short_first=True)
    segs[0][0] = 0.0
    segs[-1][1] = total
    return [Phase("+".join(sorted(lab)) or "idle", float(a), float(b)) for a, b, lab in segs]


def phase_traffic(flows: dict, phases: list[Phase], n: int) -> list[sp.csr_matrix]:
    """Server byte matrix of each phase: every fabric flow's bytes pro rata to its time in it."""
    s, f, b = flows["start"], flows["finish"], flows["bytes"]
    key = flows["src"] * n + flows["dst"]
    dur = f - s
    out = []
    for k, ph in enumerate(phases):
        ov = np.clip(np.minimum(f, ph.end_s) - np.maximum(s, ph.start_s), 0.0, None)
        frac = np.where(dur > 0, ov / np.where(dur > 0, dur, 1.0), 0.0)
        last = k == len(phases) - 1
        instant = (dur <= 0) & (s >= ph.start_s) & ((s < ph.end_s) | last)
        w = b * np.where(instant, 1.0, frac)
        m = np.bincount(key, weights=w, minlength=n * n).reshape(n, n)
        np.fill_diagonal(m, 0.0)
        out.append(sp.csr_matrix(m))
    return out


def phase_candidates(
    matrix: sp.csr_matrix,
    phase: Phase,
    degree: int,
    link_bandwidth: float,
    static: CircuitSet,
    solvers: tuple[str, ...],
    *,
    seed: int = 0,
    work_limit: float | None = None,
    max_parallel: int | None = None,
    time_limit_s: float = TIME_LIMIT_S,
) -> list[CircuitSet]:
    """The static set, then one set per solver for ``phase``'s traffic (connected, distinct);
    each solve under the wall-clock cap ``time_limit_s`` (:data:`TIME_LIMIT_S`)."""
    from solvers.model.problem import DesignProblem, PhaseTraffic
    from solvers.reconfig.demand import demand_circuits
    from solvers.registry import solve

    n = matrix.shape[0]
    out = [static]
    if matrix.nnz == 0:
        return out
    z = np.zeros(0, np.int64)
    prob = DesignProblem(
        n, degree, link_bandwidth, (PhaseTraffic(phase.name, [0], z, [], matrix),),
        max_parallel=max_parallel, name=phase.name,
    )  # fmt: skip
    for name in solvers:
        if name == "demand":
            cs = CircuitSet(demand_circuits(matrix, degree, max_parallel), None, "demand")
        else:
            try:
                d = solve(
                    prob, name, seed=seed, work_limit=work_limit, objective="congestion",
                    time_limit_s=time_limit_s,
                )  # fmt: skip
            except InputError:  # a solver refusing the problem (e.g. too few servers)
                continue
            cs = CircuitSet(d.circuits, d.routing, name)
        if not connected(cs.circuits, n) or any(cs.same_circuits(o) for o in out):
            continue
        out.append(CircuitSet(cs.circuits, cs.routing, f"{cs.label}:{phase.name}"))
    return out


def schedule_for(
    choice: tuple[int, ...],
    candidates: list[list[CircuitSet]],
    phases: list[Phase],
    hold_s: float,
    timing: str,
) -> Schedule:
    """The schedule taking ``candidates[p][choice[p]]`` in phase ``p`` (module docstring)."""
    sets, starts, names = [], [], []
    end = 0.0
    for p, c in enumerate(choice):
        cs = candidates[p][c]
        if sets and cs.same_circuits(sets[-1]):
            names[-1] = names[-1] + "+" + phases[p].name
            continue
        if not sets:
            t = 0.0
        else:
            b = phases[p].start_s
            t = max(b - hold_s if timing == "ready" else b, end, starts[-1])
            end = t + hold_s
        sets.append(cs)
        starts.append(t)
        names.append(phases[p].name)
    return Schedule(tuple(sets), tuple(starts), tuple(names))


def cached_value(
    static_iteration_s: float,
    evaluate: Callable[[Schedule, float, float], float],
    max_evaluations: int,
) -> tuple[Callable[[Schedule, float, float], float], dict]:
    """The ``value`` of :func:`search_schedules`: ``evaluate(schedule, h, bound)`` (a
    simulation cut past ``bound``) once per distinct schedule, at most ``max_evaluations``
    simulations per dark time (``inf`` beyond, the dark time noted in ``stopped``); all-static
    is ``static_iteration_s``. Only the iteration time is kept: a run (timeline, flows) is
    dropped at once, so the memory of the search is that of one simulation. A schedule slower
    than the bound (the incumbent at this dark time, which only falls) is never chosen, so its
    exact time is not needed (``inf``).

    Returns ``value`` and a dict whose ``evaluations`` (simulations run) and ``stopped`` (dark
    times the limit cut) the search fills.
    """
    cache: dict = {}
    spent: dict = {"evaluations": 0, "stopped": [], "per_hold": {}}

    def value(sched: Schedule, h: float, bound: float) -> float:
        if sched.is_static():
            return static_iteration_s
        key = (h, tuple(s.label for s in sched.sets), sched.starts)
        if key not in cache:
            per = spent["per_hold"]
            if per.get(h, 0) >= max_evaluations:
                if h not in spent["stopped"]:
                    spent["stopped"].append(h)
                return np.inf
            per[h] = per.get(h, 0) + 1
            spent["evaluations"] += 1
            it = evaluate(sched, h, bound)
            cache[key] = it if np.isfinite(it) else np.inf
        return cache[key]

    return value, spent


def search_schedules(
    candidates: list[list],
    phases: list[Phase],
    holds: list[float],
    value: Callable[[Schedule, float, float], float],
    static_iteration_s: float,
    static_schedule: Schedule,
    max_exhaustive: int,
    *,
    progress: Callable[[str], None] | None = None,
    cost: list[list[float]] | None = None,
) -> tuple[dict, dict, tuple]:
    """Steps 4-5 of the module docstring, for any kind of circuit set.

    ``value(schedule, h, bound)`` is the iteration of ``schedule`` at dark time ``h`` (``inf``
    past ``bound``, the incumbent). For every ``h`` of ``holds`` in order: every choice of one
    candidate per phase at both :data:`TIMINGS` when there are at most ``max_exhaustive``
    choices, else coordinate descent from all-static (three rounds at most); ties go to the
    incumbent (all-static first). Returns ``by_hold`` (dark time -> best iteration),
    ``by_hold_schedule`` (dark time -> its schedule) and ``((iteration, schedule), dark time)``
    of the fastest (the first dark time on a tie).

    With ``cost`` (``cost[p][c]``: an estimate of what candidate ``c`` of phase ``p`` costs to
    simulate), an exhaustive search simulates the schedules cheapest first
    (:func:`_cheapest_first`): the same choice, each schedule cut at the best found so far,
    which the cheap ones bring down early. Only for a ``value`` without a work limit that
    could stop the search (the limit of :func:`cached_value` would cut other schedules).
    """
    say = progress or (lambda m: None)

    def best_at(h: float):
        best = (static_iteration_s, static_schedule)

        def consider(choice):
            nonlocal best
            for timing in TIMINGS:
                sched = schedule_for(choice, candidates, phases, h, timing)
                it = value(sched, h, best[0])
                if it < best[0]:
                    best = (it, sched)

        total = int(np.prod([len(c) for c in candidates]))
        if total <= max_exhaustive and cost is not None:
            best = _cheapest_first(candidates, phases, h, value, best, cost)
        elif total <= max_exhaustive:
            for choice in itertools.product(*[range(len(c)) for c in candidates]):
                consider(choice)
        else:
            current = [0] * len(candidates)
            for _ in range(3):
                before = best[0]
                for p in range(len(candidates)):
                    for c in range(len(candidates[p])):
                        trial = list(current)
                        trial[p] = c
                        prev_best = best[0]
                        consider(tuple(trial))
                        if best[0] < prev_best:
                            current = trial
                if best[0] >= before:
                    break
        return best

    by_hold, by_hold_schedule = {}, {}
    chosen = None
    for h in holds:
        b = best_at(h)
        by_hold[h] = b[0]
        by_hold_schedule[h] = b[1]
        say(f"reconfig: dark {h * 1e6:.6g} us: {b[0] * 1e3:.4g} ms")
        if chosen is None or b[0] < chosen[0][0]:
            chosen = (b, h)
    return by_hold, by_hold_schedule, chosen


def _cheapest_first(
    candidates: list[list],
    phases: list[Phase],
    h: float,
    value: Callable[[Schedule, float, float], float],
    static: tuple,
    cost: list[list[float]],
) -> tuple:
    """The exhaustive search of :func:`search_schedules` at dark time ``h``, cheapest first.

    The canonical search keeps the first schedule, in the order of ``itertools.product`` over
    the choices and :data:`TIMINGS` within a choice (all-static ``static`` before all), of the
    least iteration: an iteration ``m``. Here every schedule is simulated once, in the order of
    its choice's summed ``cost``, then of its first reconfiguration, latest first, then the
    canonical order, each cut past the least iteration found so far (``value``'s bound: exact
    when at most the bound, else possibly ``inf``). Every bound is at least ``m``, so every
    schedule of iteration ``m`` is simulated exactly and the first of them in the canonical
    order is the canonical search's choice; ``m`` equal to the static iteration keeps
    all-static, as there.
    """
    runs = []
    for choice in itertools.product(*[range(len(c)) for c in candidates]):
        key = float(sum(cost[p][c] for p, c in enumerate(choice)))
        for timing in TIMINGS:
            sched = schedule_for(choice, candidates, phases, h, timing)
            t1 = sched.starts[1] if len(sched.starts) > 1 else np.inf
            runs.append((key, -t1, len(runs), sched))
    bound = static[0]
    found = {}
    # cheapest first; on a tie the latest first reconfiguration first (its run takes the bytes
    # left at the earlier ones of its first set: :class:`~solvers.reconfig.schedule.SharedPrefix`)
    for _, _, i, sched in sorted(runs, key=lambda r: r[:3]):
        it = value(sched, h, bound)
        found[i] = (it, sched)
        bound = min(bound, it)
    best = static
    for i in range(len(runs)):  # canonical order: the first of the least iteration
        if found[i][0] < best[0]:
            best = found[i]
    return best


def set_cost(cs: CircuitSet) -> float:
    """Paths per routed server pair of a circuit set's routing (``1`` without one): the
    estimate of its simulation cost by which :func:`reconfigure` orders its search (the
    sub-flows a set's flows split into drive the events and re-fills)."""
    r = cs.routing
    if r is None or r.src.shape[0] == 0:
        return 1.0
    return float(r.weight.shape[0]) / float(r.src.shape[0])


def lower_bound(run: ScheduleRun, n: int, degree: int, link_bandwidth: float) -> float:
    """``max(compute-only, busiest server's fabric bytes / (degree * B))`` (module docstring)."""
    fl = run.flows
    out = np.bincount(fl["src"], weights=fl["bytes"], minlength=n)
    inn = np.bincount(fl["dst"], weights=fl["bytes"], minlength=n)
    ports = max(float(out.max(initial=0.0)), float(inn.max(initial=0.0)))
    return max(float(run.result.compute_s), ports / (degree * link_bandwidth))


@dataclass(frozen=True, eq=False)
class ReconfigResult:
    """What :func:`reconfigure` chose (seconds).

    Attributes
    ----------
    iteration_s : float
        Iteration under the chosen schedule (``<= static_iteration_s``).
    static_iteration_s : float
        Iteration of the static design.
    reconfigurations : int
        Per iteration (the wrap back to the first set included).
    schedule : Schedule
    delay_s, dark_s : float
        The switch's delay and the dark time of the chosen schedule (``>= delay_s``).
    lower_bound_s : float
    phases : list of Phase
    candidates : list of list of CircuitSet
    by_hold : dict
        Dark time -> best iteration found with it.
    by_hold_schedule : dict
        Dark time -> the schedule of that iteration.
    evaluations : int
        Schedules simulated.
    static : Design
    baselines : list of dict
        Filled by :func:`solvers.reconfig.baselines.run_baselines` when asked.
    info : dict
    """

    iteration_s: float
    static_iteration_s: float
    reconfigurations: int
    schedule: Schedule
    delay_s: float
    dark_s: float
    lower_bound_s: float
    phases: list
    candidates: list
    by_hold: dict
    by_hold_schedule: dict
    evaluations: int
    static: object
    reference: ScheduleRun
    baselines: list = field(default_factory=list)
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The ``--json`` document of ``topoopt reconfig``."""
        s = self.schedule
        return {
            "iteration_s": self.iteration_s,
            "static_iteration_s": self.static_iteration_s,
            "reconfigurations": self.reconfigurations,
            "schedule": [
                {
                    "start_s": t,
                    "phase": ph,
                    "source": cs.label,
                    "circuits": cs.circuits.tolist(),
                }
                for cs, t, ph in zip(s.sets, s.starts, s.phases, strict=True)
            ],
            "lower_bound_s": self.lower_bound_s,
            "delay_s": self.delay_s,
            "dark_s": self.dark_s,
            "phases": [
                {"name": p.name, "start_s": p.start_s, "end_s": p.end_s} for p in self.phases
            ],
            "candidates_per_phase": [len(c) for c in self.candidates],
            "by_dark_s": [{"dark_s": h, "iteration_s": v} for h, v in sorted(self.by_hold.items())],
            "evaluations": self.evaluations,
            "baselines": self.baselines,
            **self.info,
        }


EXACT_FLOWS = 5_000_000
"""Iterations of at most this many flows are simulated exactly; above, every schedule's
iteration (static, chosen and the baselines) runs with :data:`COARSE_BUCKETS` gradient buckets
per channel (``simulate_iteration``'s ``max_buckets``; ``info["coarsened"]``): ZeRO-3 / FSDP
plans on 128 servers, whose per-micro-batch collectives of 25 MB buckets are tens of millions
of flows. The co-search measured the coarsening's error at 256 buckets below 7e-4
(``docs/cosearch.md``)."""

COARSE_BUCKETS = 256
"""Gradient buckets per channel of a coarsened reconfiguration search (:data:`EXACT_FLOWS`)."""


def _check_delay(delay_s) -> float:
    if isinstance(delay_s, bool) or not isinstance(delay_s, int | float | np.floating):
        raise InputError("delay", delay_s, "a finite number of seconds >= 0")
    d = float(delay_s)
    if not (np.isfinite(d) and d >= 0):
        raise InputError("delay", delay_s, "a finite number of seconds >= 0")
    return d


def reconfigure(
    workload,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    static_design=None,
    static_solver: str = "joint",
    solvers: tuple[str, ...] = ("joint", "topoopt", "demand"),
    seed: int = 0,
    work_limit: float | None = None,
    time_limit_s: float = TIME_LIMIT_S,
    max_phases: int = 4,
    phase_merge: str = "shortest",
    wrap_overlap: bool = False,
    max_exhaustive: int = 64,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    reduction: bool = True,
) -> ReconfigResult:
    """The fastest circuit schedule for ``workload`` at reconfiguration delay ``delay_s``.

    Parameters
    ----------
    workload : Workload
        A plan-derived workload.
    degree : int
        Optical ports per server.
    link_bandwidth : float
        Bytes/s per port.
    delay_s : float
        Reconfiguration delay of the switch, seconds (``>= 0``).
    static_design : Design, optional
        The static design (default: ``static_solver`` on the plan's problem).
    static_solver : str
        Solver of the static design (:data:`solvers.registry.SOLVERS`).
    solvers : tuple of str
        Per-phase designers: solver names and ``demand``.
    seed : int
    work_limit : float, optional
        Work limit of every ``joint`` solve.
    time_limit_s : float
        Wall-clock cap of every design solve (default :data:`TIME_LIMIT_S`): with a work limit
        the work decides and the clock only guards a stuck search, so a loaded machine gives
        the same schedule as an idle one.
    max_phases : int
        At most this many communication phases.
    phase_merge : str
        How the reference timeline's segments join into phases (``merge`` of
        :func:`comm_phases`: ``"shortest"`` or ``"labels"``).
    wrap_overlap : bool
        The wrap back to the first set may overlap the next iteration until its first fabric
        flow (:func:`~solvers.reconfig.schedule.iteration_under_schedule`).
    max_exhaustive : int
        Evaluate every per-phase choice up to this many, else coordinate descent.
    max_evaluations : int
        Deterministic work limit: schedules simulated per dark time (default 128: an exhaustive
        search of ``max_exhaustive`` choices at two timings is never cut; in a fixed order, so the
        best at a dark time still depends on it only); a search it stops keeps its incumbent
        (``info["stopped_by"]``).
    holds : tuple of float, optional
        The dark-time grid (default :data:`HOLD_GRID_S`).
    progress : callable, optional
        One-line messages.
    reduction : bool
        Simulate the schedules' last runs through their exact symmetry quotient where there is
        one (:class:`~solvers.reconfig.schedule.ScheduleReductions`; the same result;
        ``info["reduction"]`` counts the runs reduced). ``False``: every run plain.

    Returns
    -------
    ReconfigResult

    Raises
    ------
    InputError
        A negative or non-finite delay, an impossible degree, an unknown solver.

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan("vgg16-dp")
    >>> r = reconfigure(w, 2, 12.5e9, 1e-3, static_solver="topoopt", solvers=("demand",))
    >>> r.lower_bound_s <= r.iteration_s <= r.static_iteration_s
    True
    """
    from solvers.model.problem import DesignProblem
    from solvers.realise import design_workload
    from solvers.registry import SOLVERS, solve

    delay = _check_delay(delay_s)
    if isinstance(degree, bool) or not isinstance(degree, int | np.integer) or degree < 1:
        raise InputError("degree", degree, "an integer >= 1")
    for name in (static_solver, *solvers):
        if name not in SOLVERS and not (name == "demand" and name != static_solver):
            raise InputError("solver", name, f"one of {', '.join(SOLVERS)} (or demand per phase)")
    say = progress or (lambda m: None)
    t0 = time.perf_counter()
    n = workload.servers
    if n > 2 and degree < 2:
        raise InputError("degree", degree, f"at least 2 ports per server to connect {n} servers")
    if static_design is not None and (static_design.servers != n or static_design.degree != degree):
        raise InputError(
            "static_design", f"{static_design.servers} x {static_design.degree}", f"{n} x {degree}"
        )
    problem = DesignProblem.from_workload(workload, int(degree), link_bandwidth)
    if static_design is None:
        say(f"reconfig: static design ({static_solver})")
        static_design = solve(
            problem, static_solver, seed=seed, work_limit=work_limit, time_limit_s=time_limit_s
        )
    w = design_workload(workload, static_design, problem)
    static = CircuitSet(static_design.circuits, static_design.routing, "static")
    from topoopt.flowsim.iteration import TooManyFlows

    max_buckets = None
    isolated: dict = {}  # the intra-server collectives' durations, shared by every run of w
    try:  # exact up to EXACT_FLOWS flows (counted before any is built), else coarsened
        ref = iteration_under_schedule(
            w, Schedule((static,), (0.0,), ("iteration",)), link_bandwidth, 0.0,
            max_flows=EXACT_FLOWS, isolated=isolated,
        )  # fmt: skip
    except TooManyFlows as e:
        max_buckets = COARSE_BUCKETS
        say(f"reconfig: {e.n_flows:,} flows exactly; gradient buckets coarsened to "
            f"{COARSE_BUCKETS} per channel")  # fmt: skip
        ref = iteration_under_schedule(
            w, Schedule((static,), (0.0,), ("iteration",)), link_bandwidth, 0.0,
            max_buckets=max_buckets, isolated=isolated,
        )  # fmt: skip
    compute_s = float(ref.result.compute_s)
    say(f"reconfig: static iteration {ref.iteration_s * 1e3:.4g} ms")
    phases = comm_phases(ref, workload, max_phases=max_phases, merge=phase_merge)
    mats = phase_traffic(ref.flows, phases, n)
    cands = [
        phase_candidates(m, ph, int(degree), link_bandwidth, static, tuple(solvers), seed=seed,
                         work_limit=work_limit, time_limit_s=time_limit_s)
        for m, ph in zip(mats, phases, strict=True)
    ]  # fmt: skip
    say(f"reconfig: {len(phases)} phases, candidates {[len(c) for c in cands]}")
    grid = tuple(sorted(HOLD_GRID_S if holds is None else holds))
    hold_list = [delay] + [g for g in grid if g > delay * (1 + 1e-9)]
    if isinstance(max_evaluations, bool) or int(max_evaluations) != max_evaluations:
        raise InputError("max_evaluations", max_evaluations, "an integer >= 0")

    # the first reconfiguration of every schedule the search may simulate, per first set
    wanted: dict = {}
    for h in hold_list:
        for choice in itertools.product(*[range(len(c)) for c in cands]):
            for timing in TIMINGS:
                sc = schedule_for(choice, cands, phases, h, timing)
                if not sc.is_static():
                    wanted.setdefault(sc.sets[0].label, set()).add(float(sc.starts[1]))
    shared = SharedPrefix({k: tuple(sorted(v)) for k, v in wanted.items()})
    reductions = ScheduleReductions()

    def evaluate(sched: Schedule, h: float, bound: float) -> float:
        t = time.process_time()
        pruned, rest_cut = shared.pruned, shared.rest_cut
        it = iteration_under_schedule(
            w, sched, link_bandwidth, h, compute_s=compute_s, horizon=bound,
            max_buckets=max_buckets, prefix=shared, isolated=isolated,
            reduction=reductions if reduction else False, wrap_overlap=wrap_overlap,
        ).iteration_s  # fmt: skip
        sets = " / ".join(f"{cs.label.split(':')[0]}@{t0:.6g}" for cs, t0 in
                          zip(sched.sets, sched.starts, strict=True))  # fmt: skip
        got = f"{it:.9g} s" if np.isfinite(it) else f"past {bound:.9g} s"
        if shared.pruned > pruned:
            got += " (shared prefix bound)"
        if shared.rest_cut > rest_cut:
            got += " (static engine after the last epoch)"
        say(f"reconfig: dark {h * 1e6:.6g} us, {sets}: {got} ({time.process_time() - t:.3g} s CPU)")
        return it

    value, spent = cached_value(ref.iteration_s, evaluate, max_evaluations)
    static_schedule = Schedule((static,), (0.0,), ("iteration",))
    # cheapest first when the work limit cannot cut the exhaustive search (the same choice)
    total = int(np.prod([len(c) for c in cands]))
    order_free = total <= max_exhaustive and len(TIMINGS) * total <= max_evaluations
    cost = [[set_cost(cs) for cs in c] for c in cands] if order_free else None
    by_hold, by_hold_schedule, chosen = search_schedules(
        cands, phases, hold_list, value, ref.iteration_s, static_schedule, max_exhaustive,
        progress=say, cost=cost,
    )  # fmt: skip
    (it, sched), dark = chosen
    if sched.is_static():
        dark = delay
    lb = lower_bound(ref, n, int(degree), link_bandwidth)
    return ReconfigResult(
        iteration_s=float(it),
        static_iteration_s=float(ref.iteration_s),
        reconfigurations=sched.reconfigurations(),
        schedule=sched,
        delay_s=delay,
        dark_s=float(dark),
        lower_bound_s=float(lb),
        phases=phases,
        candidates=cands,
        by_hold=by_hold,
        by_hold_schedule=by_hold_schedule,
        evaluations=spent["evaluations"],
        static=static_design,
        reference=ref,
        info={
            "static_solver": static_design.solver,
            "phase_solvers": list(solvers),
            "phase_merge": phase_merge,
            "wrap_overlap": wrap_overlap,
            "compute_s": compute_s,
            "stopped_by": "max_evaluations" if spent["stopped"] else "none",
            "wall_s": time.perf_counter() - t0,
            "coarsened": max_buckets is not None,
            "max_buckets": max_buckets,
            "reduction": reductions.summary(),
        },
    )


def delay_sweep(
    workload,
    degree: int,
    link_bandwidth: float,
    delays_s=HOLD_GRID_S,
    *,
    baselines: bool = True,
    progress: Callable[[str], None] | None = None,
    **kwargs,
):
    """Iteration time against reconfiguration delay: one row per delay (a DataFrame).

    One :func:`reconfigure` at the smallest delay with the dark-time grid ``HOLD_GRID_S`` plus
    ``delays_s`` gives the best schedule at every dark time; the result at delay ``X`` is the
    best over dark times ``>= X`` (what :func:`reconfigure` at ``X`` returns with that grid), so
    the column ``iteration_s`` is non-decreasing. Columns: ``delay_s``, ``iteration_s``,
    ``static_iteration_s``, ``reconfigurations``, ``dark_s``, ``lower_bound_s``, ``stopped_by``
    (the search's work limit, ``"none"`` when it was not reached) and, with
    ``baselines``, ``<baseline>_s`` and ``<baseline>_reconfigurations`` per baseline.
    Keyword arguments go to :func:`reconfigure`.
    """
    import pandas as pd

    from solvers.model.problem import DesignProblem
    from solvers.realise import design_workload
    from solvers.reconfig.baselines import BASELINES, run_baseline

    delays = sorted(_check_delay(d) for d in delays_s)
    if not delays:
        raise InputError("delays", delays_s, "one or more delays")
    grid = tuple(sorted(set(HOLD_GRID_S) | set(delays)))
    r = reconfigure(
        workload, degree, link_bandwidth, delays[0], holds=grid, progress=progress, **kwargs
    )
    w = None
    if baselines:
        problem = DesignProblem.from_workload(workload, int(degree), link_bandwidth)
        w = design_workload(workload, r.static, problem)
    rows = []
    for d in delays:
        hs = [h for h in r.by_hold if h >= d * (1 - 1e-9)]
        h = min(hs, key=lambda x: (r.by_hold[x], x))
        sched = r.by_hold_schedule[h]
        row = {
            "delay_s": d,
            "iteration_s": r.by_hold[h],
            "static_iteration_s": r.static_iteration_s,
            "reconfigurations": sched.reconfigurations(),
            "dark_s": h if not sched.is_static() else d,
            "lower_bound_s": r.lower_bound_s,
            "stopped_by": r.info["stopped_by"],
        }
        if baselines:
            for kind in BASELINES:
                b = run_baseline(kind, w, r.reference, int(degree), link_bandwidth, d)
                row[f"{kind}_s"] = b["iteration_s"]
                row[f"{kind}_reconfigurations"] = b["reconfigurations"]
        if progress:
            progress(f"sweep: delay {d * 1e6:g} us: {row['iteration_s'] * 1e3:.4g} ms")
        rows.append(row)
    return pd.DataFrame(rows)
