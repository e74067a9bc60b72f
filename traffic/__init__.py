"""traffic: parallelization plans and imported traces become a symbolic :class:`Workload`."""

from traffic.errors import InputError
from traffic.workload import CLASSES, OPS, PHASES, Demand, TaskGraph, Workload

__all__ = ["InputError", "CLASSES", "OPS", "PHASES", "Demand", "TaskGraph", "Workload"]
