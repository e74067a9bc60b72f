"""Exact iteration-optimal circuits for tiny task graphs (a MIP over circuits and start times).

For a task graph whose transfers travel on their direct circuits only (each pair's parallel
circuits bundled into one link of ``k B`` bytes/s, one hop of latency ``L``), and whose tasks never
compete for a device or a link (every server's compute tasks and every pair's transfers are
ordered by the graph), the flow model's iteration time is the longest path with durations
``runtime`` (compute) and ``S / (k_ab B) + L`` (a transfer of ``S`` bytes between ``a`` and
``b``). :func:`iteration_mip` minimises it exactly over the circuit multigraphs of ``d`` ports:

.. code-block:: text

    data:  pairs p = {a, b} with traffic, cap = pair_cap; transfer t on pair p(t), S_t bytes;
           compute task t with runtime r_t; edges (u, v) of the task graph
    vars:  y_{p,k} in {0, 1} (k = 1..cap: pair p has k circuits), x_{u,v} in {0..cap} (pairs
           without traffic), s_t >= 0 start times, M makespan
    min  M
    (1) sum_k y_{p,k} = 1                                      every pair with traffic
    (2) sum_{p ∋ i} sum_k k y_{p,k} + sum_{q ∋ i} x_q <= d      every server i
    (3) dur_t = r_t (compute) or sum_k y_{p(t),k} S_t / (k B) + L (transfer)
    (4) s_v >= s_u + dur_u                                     every edge (u, v)
    (5) M >= s_t + dur_t                                       every task t

Pairs without traffic never shorten the iteration, so the optimum leaves them at 0 (``x`` is kept
only so that the port constraint reads as in the paper's model). SCIP solves it; the test suite
checks its answer against brute-force enumeration of every circuit multigraph simulated by the
flow model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["IterationMIPResult", "iteration_mip"]


@dataclass(frozen=True)
class IterationMIPResult:
    """The optimum: circuits (on the pairs with traffic), makespan, solver status."""

    circuits: Circuits
    makespan_s: float
    status: str


def iteration_mip(
    workload: Workload,
    degree: int,
    link_bandwidth: float,
    pair_cap: int | None = None,
    latency_s: float = 1e-6,
    time_limit_s: float = 60.0,
) -> IterationMIPResult:
    """Solve the MIP of the module docstring for ``workload.taskgraph`` (transfers and compute
    tasks; all-reduces are not modelled and raise).

    Examples
    --------
    Two transfers 0 -> 1 (8 GB) then 1 -> 2 (2 GB) on 1 GB/s ports, 2 ports per server: server
    1 needs a circuit to each of 0 and 2, so each pair gets one (8 s + 2 s).

    >>> from traffic.workload import Demand, TaskGraph
    >>> tg = TaskGraph(np.arange(2), np.array(["transfer", "transfer"]), np.array([-1, -1]),
    ...     np.zeros(2), np.array([8e9, 2e9]), np.array([[0, 1]]), np.array([[0, 0], [0, 1]]))
    >>> w = Workload(3, 1, (Demand("send", np.array([[0, 1], [1, 2]]), 1.0, "mp", "forward"),),
    ...     taskgraph=tg)
    >>> r = iteration_mip(w, 2, 1e9, latency_s=0.0)
    >>> r.circuits.tolist(), round(r.makespan_s, 9), r.status
    ([[0, 1, 1], [1, 2, 1]], 10.0, 'optimal')
    """
    from ortools.linear_solver import pywraplp

    tg = workload.taskgraph
    if tg is None:
        raise InputError("workload", workload.name or "unnamed", "a Workload with a task graph")
    if np.any(np.isin(tg.kind, ("all-reduce",)) & (tg.demand[:, 0] >= 0)):
        raise InputError("taskgraph", "all-reduce tasks", "transfers and compute tasks only")
    cap = int(degree if pair_cap is None else min(pair_cap, degree))
    gps = workload.gpus_per_server
    T = tg.n_tasks
    B = float(link_bandwidth)
    pair_of = np.full(T, -1, np.int64)
    pairs: dict[tuple[int, int], int] = {}
    for t in np.flatnonzero(tg.kind == "transfer").tolist():
        f, r = (int(x) for x in tg.demand[t])
        a, b = (int(x) for x in workload.demands[f].groups[r] // gps)
        if a == b:
            continue
        key = (min(a, b), max(a, b))
        pair_of[t] = pairs.setdefault(key, len(pairs))
    solver = pywraplp.Solver.CreateSolver("SCIP")
    if solver is None:  # pragma: no cover - OR-Tools ships SCIP
        raise RuntimeError("SCIP is not available in this OR-Tools build")
    solver.SetTimeLimit(int(time_limit_s * 1e3))
    keys = list(pairs)
    y = {(p, k): solver.BoolVar(f"y_{p}_{k}") for p in range(len(keys)) for k in range(1, cap + 1)}
    for p in range(len(keys)):  # (1)
        solver.Add(sum(y[p, k] for k in range(1, cap + 1)) == 1)
    n = workload.servers
    for i in range(n):  # (2)
        mine = [p for p, (a, b) in enumerate(keys) if i in (a, b)]
        if mine:
            solver.Add(sum(k * y[p, k] for p in mine for k in range(1, cap + 1)) <= degree)
    start = [solver.NumVar(0.0, solver.infinity(), f"s_{t}") for t in range(T)]
    dur = []
    for t in range(T):  # (3)
        if pair_of[t] >= 0:
            S = float(tg.size_bytes[t])
            p = int(pair_of[t])
            dur.append(sum(y[p, k] * (S / (k * B)) for k in range(1, cap + 1)) + latency_s)
        elif tg.kind[t] in ("forward", "backward", "update", "comm"):
            dur.append(float(tg.runtime_s[t]))
        else:
            dur.append(0.0)
    for u, v in tg.edges.tolist():  # (4)
        solver.Add(start[v] >= start[u] + dur[u])
    M = solver.NumVar(0.0, solver.infinity(), "M")
    for t in range(T):  # (5)
        solver.Add(M >= start[t] + dur[t])
    solver.Minimize(M)
    status = solver.Solve()
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        raise InputError("degree", degree, "enough ports for a circuit on every pair with traffic")
    rows = []
    for p, (a, b) in enumerate(keys):
        k = next(k for k in range(1, cap + 1) if y[p, k].solution_value() > 0.5)
        rows.append([a, b, k])
    circuits = Circuits(rows, n)
    st = "optimal" if status == pywraplp.Solver.OPTIMAL else "feasible"
    return IterationMIPResult(circuits, float(M.solution_value()), st)
