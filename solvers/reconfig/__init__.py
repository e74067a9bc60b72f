"""Reconfiguration in time: circuit schedules, their exact simulation, the schedule search.

- :mod:`solvers.reconfig.schedule`: the model. A :class:`Schedule` is a sequence of
  :class:`CircuitSet` with start times; :func:`realise_schedule` turns it into one union
  direct-connect fabric and the capacity / path epochs of
  :func:`topoopt.flowsim.timevarying.simulate_epochs`; :func:`iteration_under_schedule` runs a
  training iteration under it.
- :mod:`solvers.reconfig.demand`: the demand-driven circuit heuristic of the TopoOpt artifact's
  reconfigurable baseline (our own implementation of its algorithm).
- :mod:`solvers.reconfig.search`: the communication phases of an iteration, per-phase circuit
  sets, :func:`reconfigure`, which picks the fastest schedule (never slower than the static
  design, non-decreasing in the reconfiguration delay on the dark-time grid), and
  :func:`delay_sweep`.
- :mod:`solvers.reconfig.baselines`: OCS-reconfig and SiP-ML-like demand-driven schedules.
"""

from solvers.reconfig.baselines import BASELINES, baseline_schedule, run_baselines
from solvers.reconfig.demand import demand_circuits
from solvers.reconfig.schedule import (
    CircuitSet,
    Schedule,
    ScheduleRun,
    iteration_under_schedule,
    realise_schedule,
)
from solvers.reconfig.search import (
    HOLD_GRID_S,
    PHASE_MERGES,
    ReconfigResult,
    comm_phases,
    delay_sweep,
    reconfigure,
)

__all__ = [
    "BASELINES",
    "HOLD_GRID_S",
    "PHASE_MERGES",
    "CircuitSet",
    "ReconfigResult",
    "Schedule",
    "ScheduleRun",
    "baseline_schedule",
    "comm_phases",
    "delay_sweep",
    "demand_circuits",
    "iteration_under_schedule",
    "realise_schedule",
    "reconfigure",
    "run_baselines",
]
