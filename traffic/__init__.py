"""traffic: parallelization plans and imported traces become a symbolic :class:`Workload`."""

from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.expand import expand, gpu_matrix, server_matrix
from traffic.load import load_workload
from traffic.plan import Plan, embedded_plan_names, load_plan
from traffic.taskgraph import read_taskgraph
from traffic.workload import CLASSES, OPS, PHASES, Demand, TaskGraph, Workload

__all__ = [
    "CLASSES",
    "OPS",
    "PHASES",
    "Demand",
    "InputError",
    "Plan",
    "TaskGraph",
    "Workload",
    "embedded_plan_names",
    "expand",
    "gpu_matrix",
    "load_plan",
    "load_workload",
    "read_taskgraph",
    "server_matrix",
    "workload_from_plan",
]
