"""Critical path of an iteration's task graph: earliest/latest times, slack, criticality, bound.

The critical path method (CPM) on the dependency graph of one training iteration
(:class:`traffic.workload.TaskGraph`, imported TopoOpt task graphs), with one duration per task:

.. code-block:: text

    ES_v = max_{(u, v)} EF_u   (0 without predecessors)        EF_v = ES_v + dur_v
    LF_u = min_{(u, v)} LS_v   (makespan without successors)   LS_u = LF_u - dur_u
    slack_v = LS_v - ES_v >= 0          makespan = max_v EF_v

Both passes run level by level over the graph (Kahn's algorithm), vectorised per level; a cycle
raises :class:`~traffic.errors.InputError`.

Two uses in the joint optimizer (:mod:`solvers.joint.iteration_objective`):

- *Lower bound.* With every task at its shortest possible duration on any design of ``d``
  ports of ``B`` bytes/s per server (:func:`lower_durations`: compute its runtime, a transfer of
  ``S`` bytes ``S / (d B)`` because all its sub-flows leave the source through its ``d`` ports,
  an all-reduce over ``m`` servers ``2 (m-1)/m S / (d B)`` because the ring algorithm makes each
  member send that much), the makespan is a valid lower bound on the flow model's iteration
  time: sharing a device or a link, path latency and waiting only lengthen tasks
  (:func:`iteration_lower_bound`).
- *Criticality.* With the durations the flow model gives the tasks on the ideal switch, the slack
  of a transfer says how much it may slow down before the iteration does; its criticality is
  ``dur / (dur + slack)`` (1 on the critical path, towards 0 with much slack)
  (:func:`criticality`).

Examples
--------
A chain 0 -> 1 -> 3 and a side branch 0 -> 2 -> 3:

>>> import numpy as np
>>> cp = schedule(4, np.array([[0, 1], [1, 3], [0, 2], [2, 3]]), np.array([1.0, 3.0, 1.0, 1.0]))
>>> cp.makespan_s, cp.slack_s.tolist()
(5.0, [0.0, 0.0, 2.0, 0.0])
>>> criticality(cp).round(3).tolist()
[1.0, 1.0, 0.333, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from traffic.errors import InputError
from traffic.workload import Workload

__all__ = [
    "Schedule",
    "schedule",
    "lower_durations",
    "iteration_lower_bound",
    "criticality",
]


@dataclass(frozen=True, eq=False)
class Schedule:
    """CPM times of every task (seconds, aligned with the task graph's tasks).

    Attributes
    ----------
    duration_s, earliest_start_s, earliest_finish_s, latest_finish_s, slack_s : numpy.ndarray
    makespan_s : float
        Length of the longest path.
    """

    duration_s: np.ndarray
    earliest_start_s: np.ndarray
    earliest_finish_s: np.ndarray
    latest_finish_s: np.ndarray
    slack_s: np.ndarray
    makespan_s: float

    @property
    def critical(self) -> np.ndarray:
        """Tasks on a longest path (slack within 1e-9 of the makespan)."""
        return self.slack_s <= 1e-9 * max(self.makespan_s, 1e-300)


def _levels(n: int, u: np.ndarray, v: np.ndarray) -> list[np.ndarray]:
    """Kahn's algorithm: the tasks by level (all predecessors in earlier levels)."""
    out_adj = sp.csr_matrix((np.ones(u.size), (u, v)), shape=(n, n))
    indeg = np.bincount(v, minlength=n)
    frontier = np.flatnonzero(indeg == 0)
    levels = []
    seen = 0
    while frontier.size:
        levels.append(frontier)
        seen += frontier.size
        lo, hi = out_adj.indptr[frontier], out_adj.indptr[frontier + 1]
        lens = hi - lo
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(
            lens.sum()
        )
        succ = out_adj.indices[idx]
        dec = np.bincount(succ, minlength=n)
        indeg = indeg - dec
        touched = np.unique(succ)
        frontier = touched[indeg[touched] == 0]
    if seen < n:
        raise InputError("taskgraph", f"{n - seen} tasks on a cycle", "an acyclic task graph")
    return levels


def schedule(n_tasks: int, edges: np.ndarray, duration_s: np.ndarray) -> Schedule:
    """CPM forward and backward passes (module docstring).

    Parameters
    ----------
    n_tasks : int
    edges : numpy.ndarray
        ``(E, 2)`` task indices ``[before, after]``.
    duration_s : numpy.ndarray
        ``(n_tasks,)`` non-negative durations.

    Returns
    -------
    Schedule
    """
    dur = np.asarray(duration_s, np.float64)
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    u, v = e[:, 0], e[:, 1]
    levels = _levels(n_tasks, u, v)
    order = np.concatenate(levels) if levels else np.zeros(0, np.int64)
    pos = np.empty(n_tasks, np.int64)
    pos[order] = np.arange(n_tasks)
    lvl = np.empty(n_tasks, np.int64)
    for k, f in enumerate(levels):
        lvl[f] = k
    # edges grouped by the level of their head (forward) / tail (backward)
    es = np.zeros(n_tasks)
    by_head = np.argsort(lvl[v], kind="stable")
    head_cuts = np.searchsorted(lvl[v][by_head], np.arange(len(levels) + 1))
    for k in range(len(levels)):
        ee = by_head[head_cuts[k] : head_cuts[k + 1]]
        if ee.size:
            np.maximum.at(es, v[ee], es[u[ee]] + dur[u[ee]])
    ef = es + dur
    makespan = float(ef.max(initial=0.0))
    lf = np.full(n_tasks, makespan)
    by_tail = np.argsort(-lvl[u], kind="stable")
    tail_lvl = lvl[u][by_tail]
    for k in range(len(levels) - 1, -1, -1):
        lo = np.searchsorted(-tail_lvl, -k, side="left")
        hi = np.searchsorted(-tail_lvl, -k, side="right")
        ee = by_tail[lo:hi]
        if ee.size:
            np.minimum.at(lf, u[ee], lf[v[ee]] - dur[v[ee]])
    slack = np.maximum(lf - ef, 0.0)
    return Schedule(dur, es, ef, lf, slack, makespan)


def lower_durations(workload: Workload, degree: int, link_bandwidth: float) -> np.ndarray:
    """Shortest possible duration of every task of ``workload.taskgraph`` on any fabric whose
    servers have ``degree`` ports of ``link_bandwidth`` bytes/s (module docstring), seconds."""
    tg = workload.taskgraph
    if tg is None:
        raise InputError("workload", workload.name or "unnamed", "a Workload with a task graph")
    rate = float(degree) * float(link_bandwidth)
    dur = np.where(np.isin(tg.kind, ("forward", "backward", "update", "comm")), tg.runtime_s, 0.0)
    tr = tg.kind == "transfer"
    dur = np.where(tr, tg.size_bytes / rate, dur)
    ar = np.flatnonzero((tg.kind == "all-reduce") & (tg.demand[:, 0] >= 0))
    if ar.size:
        gps = workload.gpus_per_server
        m = np.array(
            [np.unique(workload.demands[f].groups[r] // gps).size for f, r in tg.demand[ar]]
        )
        per = np.where(m > 1, 2.0 * (m - 1) / np.maximum(m, 1), 0.0)
        dur[ar] = per * tg.size_bytes[ar] / rate
    return np.maximum(dur, 0.0)


def iteration_lower_bound(workload: Workload, degree: int, link_bandwidth: float) -> Schedule:
    """CPM with :func:`lower_durations`: its ``makespan_s`` bounds the iteration time of every
    design of ``degree`` ports of ``link_bandwidth`` bytes/s from below.

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, TaskGraph, Workload
    >>> tg = TaskGraph(np.arange(3), np.array(["forward", "transfer", "backward"]),
    ...     np.array([0, -1, 1]), np.array([1e-3, 0.0, 2e-3]), np.array([0.0, 4e9, 0.0]),
    ...     np.array([[0, 1], [1, 2]]), np.array([[-1, -1], [0, 0], [-1, -1]]))
    >>> w = Workload(2, 1, (Demand("send", np.array([[0, 1]]), 4e9, "mp", "forward"),),
    ...     taskgraph=tg)
    >>> round(iteration_lower_bound(w, 4, 1e9).makespan_s, 6)  # 1 ms + 4 GB / 4 GB/s + 2 ms
    1.003
    """
    tg = workload.taskgraph
    return schedule(tg.n_tasks, tg.edges, lower_durations(workload, degree, link_bandwidth))


def criticality(cp: Schedule) -> np.ndarray:
    """``dur / (dur + slack)`` per task: 1 on a longest path, towards 0 with much slack
    (0 for zero-length tasks off the critical path)."""
    den = cp.duration_s + cp.slack_s
    out = np.where(den > 0, cp.duration_s / np.where(den > 0, den, 1.0), 0.0)
    return np.where(cp.critical, 1.0, out)
