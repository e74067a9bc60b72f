"""Reconfiguration in time: circuit schedules, their exact simulation, the schedule search.

- :mod:`solvers.reconfig.schedule`: the model. A :class:`Schedule` is a sequence of
  :class:`CircuitSet` with start times; :func:`realise_schedule` turns it into one union
  direct-connect fabric and the capacity / path epochs of
  :func:`topoopt.flowsim.timevarying.simulate_epochs`; :func:`iteration_under_schedule` runs a
  training iteration under it.
- :mod:`solvers.reconfig.demand`: the demand-driven circuit heuristic of the TopoOpt artifact's
  reconfigurable baseline, written from its description.
- :mod:`solvers.reconfig.search`: the communication phases of an iteration, per-phase circuit
  sets, and :func:`reconfigure`, which picks the fastest schedule (never slower than the static
  design, non-increasing in the reconfiguration delay on the hold grid).
- :mod:`solvers.reconfig.baselines`: OCS-reconfig and SiP-ML-like demand-driven schedules.
"""

from solvers.reconfig.baselines import BASELINES, baseline_schedule
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
    ReconfigResult,
    comm_phases,
    reconfigure,
)

__all__ = [
    "BASELINES",
    "HOLD_GRID_S",
    "CircuitSet",
    "ReconfigResult",
    "Schedule",
    "ScheduleRun",
    "baseline_schedule",
    "comm_phases",
    "demand_circuits",
    "iteration_under_schedule",
    "realise_schedule",
    "reconfigure",
]
