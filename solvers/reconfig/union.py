"""Per-phase circuits of a fabric whose other links never change: the union fabric and the search.

The OCS spine (:mod:`solvers.reconfig.spine`: pod-to-pod circuits between aggregation switches)
and the hybrid's optical half (:mod:`solvers.reconfig.hybrid_phase`: circuits between servers)
change only their circuits at phase boundaries; every other link keeps its capacity. Both run
the same steps, held here once:

- **Realisation** (:func:`union_epochs`): the circuit counts of every set, ``(m, m)`` symmetric
  matrices over the ``m`` circuit endpoints (aggregation switches, or servers) numbered from
  node ``offset``; one union fabric with, per endpoint pair, the most circuits any set gives it
  (built by the caller from ``(u, v, count)``); under set ``k`` an optical link of pair ``(u,
  v)`` has ``count_k(u, v) * B`` (zero when set ``k`` has no circuit there); then the epochs of
  :func:`~solvers.reconfig.schedule.schedule_epochs` (a dark time keeps ``min(count_j,
  count_k)`` circuits lit and the old paths). :class:`RealisedUnion` holds the result and caches
  each set's routes (the caller's ``_set_routes``).
- **The search** (:func:`reconfigure_union`), steps 1-4 of both modules' docstrings: the static
  set's reference run (exact up to :data:`~solvers.reconfig.search.EXACT_FLOWS` flows, else
  coarsened), its phases and per-phase byte matrices, the candidates (the static set first,
  then the caller's sets of the phase), the dark-time grid, the cached evaluations and
  :func:`~solvers.reconfig.search.search_schedules`; the static schedule is a candidate, so the
  result is never slower than the static circuits.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.reconfig.schedule import Schedule, ScheduleRun, schedule_epochs
from solvers.reconfig.search import (
    COARSE_BUCKETS,
    EXACT_FLOWS,
    HOLD_GRID_S,
    ReconfigResult,
    cached_value,
    comm_phases,
    lower_bound,
    phase_traffic,
    search_schedules,
)
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = ["RealisedUnion", "check_hold", "union_epochs", "reconfigure_union"]


def check_hold(hold_s) -> float:
    """The dark time of a realisation, seconds (finite, ``>= 0``).

    >>> check_hold(0.5)
    0.5
    """
    h = float(hold_s)
    if not (np.isfinite(h) and h >= 0):
        raise InputError("delay", hold_s, "a finite number of seconds >= 0")
    return h


def union_epochs(
    schedule: Schedule,
    counts: list[np.ndarray],
    build: Callable[[np.ndarray, np.ndarray, np.ndarray], Fabric],
    offset: int,
    bandwidth: float,
    hold_s: float,
    all_dark: bool = False,
) -> tuple[Fabric, np.ndarray, tuple]:
    """The union fabric, the ``(sets, links)`` capacities and the epochs of ``schedule``.

    Parameters
    ----------
    schedule : Schedule
    counts : list of (m, m) int arrays
        Symmetric circuit counts of every set of the schedule, between endpoints ``offset ..
        offset + m - 1`` of the fabric.
    build : callable
        ``build(u, v, count)`` (endpoint indices ``u < v`` from 0): the fabric with these
        circuits, its optical links between nodes ``offset + u`` and ``offset + v``.
    offset : int
        Node id of endpoint 0.
    bandwidth : float
        Bytes/s of one circuit.
    hold_s : float
        Dark time of a reconfiguration (:func:`check_hold`).
    all_dark : bool
        As :func:`~solvers.reconfig.schedule.schedule_epochs`.

    Examples
    --------
    Two servers joined by one circuit in set 0 and two in set 1, as a direct-connect fabric:

    >>> from solvers.reconfig.schedule import CircuitSet
    >>> from topoopt.fabrics.direct_connect import direct_connect
    >>> s = Schedule((CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])), (0.0, 1.0))
    >>> one, two = np.array([[0, 1], [1, 0]]), np.array([[0, 2], [2, 0]])
    >>> build = lambda u, v, c: direct_connect(2, 2, np.column_stack([u, v, c]), 1.0)
    >>> fab, caps, ep = union_epochs(s, [one, two], build, 0, 1.0, 0.5)
    >>> caps.tolist(), [(t, k) for t, _, k in ep]
    ([[1.0, 1.0], [2.0, 2.0]], [(0.0, 0), (1.0, None), (1.5, 1)])
    """
    h = check_hold(hold_s)
    union = np.maximum.reduce(counts)
    iu, iv = np.nonzero(np.triu(union))
    fab = build(iu, iv, union[iu, iv])
    opt = np.flatnonzero(fab.link_kind == "optical")
    caps = np.tile(fab.capacity, (len(counts), 1))
    for k, m in enumerate(counts):
        caps[k, opt] = m[fab.src[opt] - offset, fab.dst[opt] - offset] * float(bandwidth)
    return fab, caps, schedule_epochs(schedule, caps, h, all_dark)


@dataclass(frozen=True, eq=False)
class RealisedUnion(ABC):
    """A schedule on its union fabric: the interface of
    :class:`~solvers.reconfig.schedule.RealisedSchedule` that
    :func:`~solvers.reconfig.schedule.simulate_schedule` reads (``fabric``, ``epochs``,
    ``routes``). Subclasses give ``_set_routes(k, pairs)``, the routes of entry ``k``'s set on
    union link ids, cached here per set and pairs."""

    fabric: Fabric
    capacity: np.ndarray
    epochs: tuple
    schedule: Schedule
    hold_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "_routes", {})

    def routes(self, k: int, pairs: np.ndarray) -> PathSet:
        """Routes of ``pairs`` under entry ``k``'s set, on union link ids."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        cs = self.schedule.sets[k]
        key = (cs.circuits.tobytes(), id(getattr(cs, "routing", None)), pairs.tobytes())
        if key not in self._routes:
            self._routes[key] = self._set_routes(k, pairs)
        return self._routes[key]

    @abstractmethod
    def _set_routes(self, k: int, pairs: np.ndarray) -> PathSet:
        """The routes of ``pairs`` under entry ``k``'s set, on union link ids (per fabric kind:
        :class:`~solvers.reconfig.spine.RealisedSpine`,
        :class:`~solvers.reconfig.hybrid_phase.RealisedHybrid`)."""


def reconfigure_union(
    workload,
    static,
    simulate: Callable[..., ScheduleRun],
    phase_sets: Callable[[object, object], list],
    delay_s: float,
    *,
    static_fabric: Fabric,
    ports: int,
    port_bandwidth: float,
    info: dict,
    label: tuple[str, str],
    max_phases: int = 4,
    max_exhaustive: int = 64,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
    t0: float | None = None,
) -> ReconfigResult:
    """The fastest schedule of a union fabric's circuit sets at delay ``delay_s`` (module
    docstring, the search).

    Parameters
    ----------
    workload : Workload
        As simulated on the static fabric.
    static : circuit set
        The static set (``same_circuits``, ``circuits``).
    simulate : callable
        ``simulate(schedule, hold_s, *, compute_s=None, horizon=None, max_buckets=None,
        max_flows=None)``: one iteration under a schedule of these sets (a
        :class:`~solvers.reconfig.schedule.ScheduleRun`).
    phase_sets : callable
        ``phase_sets(matrix, phase)``: the sets of a phase besides the static one, from its
        server byte matrix (a non-empty ``scipy.sparse`` matrix).
    delay_s : float
        Reconfiguration delay, seconds (checked by the caller).
    static_fabric : Fabric
        The result's ``static``.
    ports, port_bandwidth
        The lower bound's ports per server and bytes/s per port
        (:func:`~solvers.reconfig.search.lower_bound`).
    info : dict
        The result's first ``info`` keys (the search's own follow).
    label : (str, str)
        The progress line of the static run: its name (``"spine"``, ``"hybrid"``) and what
        follows its time (e.g. ``" (4 pods)"``).
    max_phases, max_exhaustive, max_evaluations, holds, progress
        As :func:`solvers.reconfig.search.reconfigure`.
    t0 : float, optional
        ``time.perf_counter()`` at the caller's start (``info["wall_s"]``).
    """
    from topoopt.flowsim.iteration import TooManyFlows

    t0 = time.perf_counter() if t0 is None else t0
    say = progress or (lambda m: None)
    delay = float(delay_s)
    n = workload.servers
    one = Schedule((static,), (0.0,), ("iteration",))
    max_buckets = None
    try:  # exact up to EXACT_FLOWS flows, else coarsened (as reconfigure)
        ref = simulate(one, 0.0, max_flows=EXACT_FLOWS)
    except TooManyFlows as e:
        max_buckets = COARSE_BUCKETS
        say(f"reconfig: {e.n_flows:,} flows exactly; gradient buckets coarsened to "
            f"{COARSE_BUCKETS} per channel")  # fmt: skip
        ref = simulate(one, 0.0, max_buckets=max_buckets)
    compute_s = float(ref.result.compute_s)
    name, suffix = label
    say(f"reconfig: static {name} iteration {ref.iteration_s * 1e3:.4g} ms{suffix}")
    phases = comm_phases(ref, workload, max_phases=max_phases)
    cands = []
    for m, ph in zip(phase_traffic(ref.flows, phases, n), phases, strict=True):
        cands.append([static, *(phase_sets(m, ph) if m.nnz else [])])
    say(f"reconfig: {len(phases)} phases, candidates {[len(c) for c in cands]}")
    grid = tuple(sorted(HOLD_GRID_S if holds is None else holds))
    hold_list = [delay] + [g for g in grid if g > delay * (1 + 1e-9)]

    def evaluate(sched: Schedule, h: float, bound: float) -> float:
        return simulate(
            sched, h, compute_s=compute_s, horizon=bound, max_buckets=max_buckets
        ).iteration_s

    value, spent = cached_value(ref.iteration_s, evaluate, max_evaluations)
    by_hold, by_hold_schedule, chosen = search_schedules(
        cands, phases, hold_list, value, ref.iteration_s, one, max_exhaustive, progress=say
    )
    (it, sched), dark = chosen
    if sched.is_static():
        dark = delay
    return ReconfigResult(
        iteration_s=float(it),
        static_iteration_s=float(ref.iteration_s),
        reconfigurations=sched.reconfigurations(),
        schedule=sched,
        delay_s=delay,
        dark_s=float(dark),
        lower_bound_s=float(lower_bound(ref, n, int(ports), float(port_bandwidth))),
        phases=phases,
        candidates=cands,
        by_hold=by_hold,
        by_hold_schedule=by_hold_schedule,
        evaluations=spent["evaluations"],
        static=static_fabric,
        reference=ref,
        info={
            **info,
            "compute_s": compute_s,
            "stopped_by": "max_evaluations" if spent["stopped"] else "none",
            "wall_s": time.perf_counter() - t0,
            "coarsened": max_buckets is not None,
            "max_buckets": max_buckets,
        },
    )
