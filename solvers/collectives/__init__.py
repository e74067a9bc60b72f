"""Collective algorithms beyond rings: Blink tree packing, SCCL/TACCL-style synthesis, bounds.

Modules: :mod:`~solvers.collectives.overlay` (server pairs and their link loads),
:mod:`~solvers.collectives.bounds` (cut lower bounds), :mod:`~solvers.collectives.schedule` (the
common schedule type and its flows), :mod:`~solvers.collectives.blink` (tree packing LP),
:mod:`~solvers.collectives.synthesis` (exact CP-SAT and MILP-routed synthesis),
:mod:`~solvers.collectives.topologies` (the DGX-1), :mod:`~solvers.collectives.run` (one
collective on one fabric, as ``topoopt collective`` runs it). See ``docs/collectives.md``.
"""

from solvers.collectives.bounds import COLLECTIVES, Bound, cut_bound
from solvers.collectives.run import ALGORITHMS, CollectiveResult, run_collective
from solvers.collectives.schedule import Schedule, Tree, time_schedule
from solvers.collectives.sizes import check_collective_size, collective_transfers

__all__ = [
    "ALGORITHMS",
    "COLLECTIVES",
    "Bound",
    "CollectiveResult",
    "Schedule",
    "Tree",
    "cut_bound",
    "run_collective",
    "check_collective_size",
    "collective_transfers",
    "time_schedule",
]
