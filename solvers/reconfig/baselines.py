"""The TopoOpt paper's reconfigurable baselines, as demand-driven schedules.

Both follow the TopoOpt artifact's reconfigurable fabric (``DynFlatScheduler`` of
hipersys-team's ``ffsim-opera``, branches ``ffsim`` and ``clean``, read for their behaviour): a
cycle of a *live period* of ``4 x delay`` then a reconfiguration of ``delay``, forever; at each
reconfiguration the circuits are recomputed from the demand not yet served, with the demand
heuristic (:func:`solvers.reconfig.demand.demand_circuits`). Here:

- The demand at a reconfiguration instant ``t`` is the bytes the reference run (the static
  design's iteration) still had to send at ``t``: each fabric flow in flight at ``t`` counts its
  bytes pro rata to the time it had left. A reconfiguration with no demand keeps the circuits.
  The first circuit set serves the flows of the first cycle.
- ``ocs-reconfig``: every fabric link carries nothing while the switch reconfigures (the
  artifact pauses all flows and drains the queues first; the drain is not modelled).
- ``sipml``: SiP-ML-like fast reconfiguration: the same cycle, but only the circuits that change
  go dark (a per-port silicon-photonic switch: circuits that stay keep carrying).
- A cycle is ``5 x delay``. When the reference iteration ``T`` would need more than
  ``max_windows`` cycles, the cycle is ``T / max_windows`` (the live period longer than the
  artifact's; reported as ``cycle_s``).

Neither chooses not to reconfigure: they are reported next to the schedule
:func:`~solvers.reconfig.search.reconfigure` chooses.
"""

from __future__ import annotations

import numpy as np

from solvers.reconfig.demand import demand_circuits
from solvers.reconfig.schedule import CircuitSet, Schedule, ScheduleRun, iteration_under_schedule
from traffic.errors import InputError

__all__ = [
    "BASELINES",
    "LIVE_FACTOR",
    "MAX_WINDOWS",
    "baseline_schedule",
    "run_baseline",
    "run_baselines",
]

BASELINES = ("ocs-reconfig", "sipml")
"""Names of the baselines."""

LIVE_FACTOR = 4
"""Live period after each reconfiguration, in delays (the artifact's ``n_nondelay``)."""

MAX_WINDOWS = 64
"""At most this many reconfiguration cycles per iteration."""


def _remaining(flows: dict, t: float, n: int, upto: float | None = None) -> np.ndarray:
    """Server matrix of the bytes the reference flows have left at ``t`` (pro rata to time);
    with ``upto``, also the flows starting in ``[t, upto)``."""
    s, f, b = flows["start"], flows["finish"], flows["bytes"]
    dur = f - s
    active = (s <= t) & (f > t) & (dur > 0)
    w = np.where(active, b * (f - t) / np.where(dur > 0, dur, 1.0), 0.0)
    if upto is not None:
        w = w + np.where((s >= t) & (s < upto), b, 0.0)
    m = np.bincount(flows["src"] * n + flows["dst"], weights=w, minlength=n * n).reshape(n, n)
    np.fill_diagonal(m, 0.0)
    return m


def baseline_schedule(
    kind: str,
    reference: ScheduleRun,
    n: int,
    degree: int,
    delay_s: float,
    *,
    max_windows: int = MAX_WINDOWS,
) -> tuple[Schedule, float, bool]:
    """The schedule of baseline ``kind`` (module docstring).

    Returns
    -------
    (Schedule, cycle_s, all_dark)

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan("vgg16-dp")
    >>> ring = [[i, (i + 1) % w.servers, 1] for i in range(w.servers)]
    >>> ref = iteration_under_schedule(w, Schedule((CircuitSet(ring),), (0.0,)), 12.5e9, 0.0)
    >>> s, cycle, dark = baseline_schedule("ocs-reconfig", ref, w.servers, 2, 1e-3)
    >>> cycle, dark, s.reconfigurations()  # one ring all-reduce: the demand never changes
    (0.005, True, 0)
    """
    if kind not in BASELINES:
        raise InputError("baseline", kind, f"one of {', '.join(BASELINES)}")
    delay = float(delay_s)
    total = float(reference.iteration_s)
    cycle = max((LIVE_FACTOR + 1) * delay, total / max_windows) if total > 0 else 1.0
    if cycle <= 0:  # delay 0: one cycle per window of the iteration
        cycle = total / max_windows
    fl = reference.flows
    first = demand_circuits(_remaining(fl, 0.0, n, upto=cycle) + 1e-9, degree)
    sets = [CircuitSet(first, None, f"{kind}:0")]
    starts = [0.0]
    j = 1
    while j * cycle < total:
        t = j * cycle
        m = _remaining(fl, t, n)
        if m.sum() > 0:
            c = demand_circuits(m, degree)
            if not CircuitSet(c).same_circuits(sets[-1]):
                sets.append(CircuitSet(c, None, f"{kind}:{j}"))
                starts.append(t)
        j += 1
    phases = tuple(f"cycle {k}" for k in range(len(sets)))
    return Schedule(tuple(sets), tuple(starts), phases), cycle, kind == "ocs-reconfig"


def run_baseline(
    kind: str,
    workload,
    reference: ScheduleRun,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    max_windows: int = MAX_WINDOWS,
    max_buckets: int | None = None,
) -> dict:
    """One baseline's iteration: ``{"baseline", "iteration_s", "reconfigurations", "cycle_s",
    "delay_s"}`` (``workload`` ring-ordered as the reference's)."""
    sched, cycle, dark = baseline_schedule(
        kind, reference, workload.servers, degree, delay_s, max_windows=max_windows
    )
    run = iteration_under_schedule(
        workload, sched, link_bandwidth, delay_s,
        compute_s=float(reference.result.compute_s), all_dark=dark, max_buckets=max_buckets,
    )  # fmt: skip
    return {
        "baseline": kind,
        "iteration_s": float(run.iteration_s),
        "reconfigurations": int(run.reconfigurations),
        "cycle_s": float(cycle),
        "delay_s": float(delay_s),
    }


def run_baselines(result, workload, degree: int, link_bandwidth: float, kinds=BASELINES) -> list:
    """Every baseline at ``result``'s delay, for a :class:`~solvers.reconfig.ReconfigResult`."""
    from solvers.model.problem import DesignProblem
    from solvers.realise import design_workload

    problem = DesignProblem.from_workload(workload, int(degree), link_bandwidth)
    w = design_workload(workload, result.static, problem)
    mb = result.info.get("max_buckets")  # the coarsening the search used, if any
    return [
        run_baseline(k, w, result.reference, degree, link_bandwidth, result.delay_s, max_buckets=mb)
        for k in kinds
    ]
