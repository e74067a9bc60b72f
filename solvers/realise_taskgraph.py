"""Design rings for a Workload that carries a task graph (imported TopoOpt traces).

A task-graph Workload refers to its demands by ``(family, row)`` from every communication task
(:class:`traffic.workload.TaskGraph`), so the demand list cannot simply be re-cut as
:func:`solvers.realise.design_workload` does for plan workloads. :func:`ring_taskgraph_workload`
rebuilds both together:

- every mutable all-reduce / reduce-scatter / all-gather row whose server set has rings in the
  design becomes one row per ring ``k`` (members in ring ``k``'s server order, each server's GPUs
  contiguous, ascending rank), in ``ordered`` families of size ``w_k * S`` (families are keyed by
  the original family, the ring's index and its weight, so all rows of a family share one size);
- the task that ran that row becomes ``k`` parallel tasks (same predecessors, same successors,
  sizes ``w_k * S``): bytes are conserved because the weights sum to one;
- every other row and task keeps its meaning, re-indexed.

Examples
--------
>>> import numpy as np
>>> from traffic.workload import Demand, TaskGraph, Workload
>>> tg = TaskGraph(np.array([0, 1]), np.array(["forward", "all-reduce"]), np.array([0, -1]),
...     np.array([1e-3, 0.0]), np.array([0.0, 8.0]), np.array([[0, 1]]),
...     np.array([[-1, -1], [0, 0]]))
>>> w = Workload(3, 1, (Demand("all-reduce", np.array([[0, 1, 2]]), 8.0, "dp", "backward"),),
...     taskgraph=tg)
>>> table = {("backward", (0, 1, 2)): [(np.array([0, 2, 1]), 0.25), (np.array([0, 1, 2]), 0.75)]}
>>> out = ring_taskgraph_workload(w, table, single=False)
>>> [(d.groups.tolist(), d.size, d.ordered) for d in out.demands]
[([[0, 2, 1]], 2.0, True), ([[0, 1, 2]], 6.0, True)]
>>> out.taskgraph.demand.tolist(), out.taskgraph.size_bytes.tolist(), out.taskgraph.edges.tolist()
([[-1, -1], [0, 0], [1, 0]], [0.0, 2.0, 6.0], [[0, 1], [0, 2]])
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np

from traffic.workload import Demand, TaskGraph, Workload

__all__ = ["ring_taskgraph_workload"]

_ORDERED_OPS = ("all-reduce", "reduce-scatter", "all-gather")


def _ordered_row(row: np.ndarray, order: np.ndarray, gps: int, n: int, gpus: int) -> np.ndarray:
    pos = np.full(n, n, np.int64)
    pos[order] = np.arange(order.shape[0])
    key = pos[row // gps] * (gpus + 1) + row
    return row[np.argsort(key, kind="stable")]


def ring_taskgraph_workload(workload: Workload, table: dict, single: bool) -> Workload:
    """The task-graph Workload whose ring collectives follow the design's rings.

    Parameters
    ----------
    workload : Workload
        With ``taskgraph`` set.
    table : dict
        ``(phase, sorted server tuple) -> [(server order, weight), ...]`` of the design.
    single : bool
        The design's problem has one phase ``"iteration"`` (look rings up under that name).

    Returns
    -------
    Workload
        New demands and task graph (module docstring).
    """
    tg = workload.taskgraph
    gps, gpus, n = workload.gpus_per_server, workload.gpus, workload.servers
    # (old family, old row) -> list of (new family, new row, weight)
    remap: dict[int, list[list[tuple[int, int, float]]]] = {}
    out: list[Demand] = []
    for f, d in enumerate(workload.demands):
        ringed = d.mutable and d.op in _ORDERED_OPS and d.group_size > 1 and d.n_groups
        if not ringed:
            remap[f] = [[(len(out), r, 1.0)] for r in range(d.n_groups)]
            out.append(d)
            continue
        phase = "iteration" if single else d.phase
        rows = np.sort(d.groups, axis=1)
        buckets: dict[tuple, list[tuple[int, np.ndarray]]] = defaultdict(list)
        plain: list[int] = []
        per_row: list[list[tuple[tuple, int]]] = [[] for _ in range(d.n_groups)]
        for r in range(d.n_groups):
            key = tuple(np.unique(rows[r] // gps).tolist())
            rings = table.get((phase, key))
            if not rings:
                plain.append(r)
                continue
            for j, (order, weight) in enumerate(rings):
                bkey = (j, float(weight), len(rings))
                per_row[r].append((bkey, len(buckets[bkey])))
                buckets[bkey].append((r, _ordered_row(rows[r], order, gps, n, gpus)))
        fam_of: dict[tuple, int] = {}
        for bkey, items in buckets.items():
            j, weight, k = bkey
            fam_of[bkey] = len(out)
            out.append(
                replace(
                    d,
                    groups=np.stack([x[1] for x in items]),
                    size=d.size * weight,
                    ordered=True,
                    name=f"{d.name} [ring {j + 1}/{k}]",
                )
            )
        plain_fam = -1
        if plain:
            plain_fam = len(out)
            out.append(replace(d, groups=rows[plain]))
        plain_pos = {r: i for i, r in enumerate(plain)}
        entries: list[list[tuple[int, int, float]]] = []
        for r in range(d.n_groups):
            if r in plain_pos:
                entries.append([(plain_fam, plain_pos[r], 1.0)])
            else:
                entries.append([(fam_of[b], i, b[1]) for b, i in per_row[r]])
        remap[f] = entries
    # tasks: a ringed row's task becomes one task per ring (same edges)
    T = tg.n_tasks
    demand = tg.demand.copy()
    size = tg.size_bytes.astype(np.float64).copy()
    extra_src: list[int] = []  # original task of each added task
    extra_dem: list[tuple[int, int]] = []
    extra_size: list[float] = []
    for t in np.flatnonzero(tg.demand[:, 0] >= 0).tolist():
        f, r = int(tg.demand[t, 0]), int(tg.demand[t, 1])
        ent = remap[f][r]
        base = float(tg.size_bytes[t])
        demand[t] = ent[0][:2]
        size[t] = base * ent[0][2]
        for nf, nr, w in ent[1:]:
            extra_src.append(t)
            extra_dem.append((nf, nr))
            extra_size.append(base * w)
    if not extra_src:
        return replace(workload, demands=tuple(out), taskgraph=replace(tg, demand=demand))
    src = np.asarray(extra_src, np.int64)
    new_ids = T + np.arange(src.size)
    copies: dict[int, list[int]] = defaultdict(list)
    for t, k in zip(src.tolist(), new_ids.tolist(), strict=True):
        copies[t].append(k)
    edges = [tg.edges]
    for a, b in tg.edges.tolist():
        if a in copies or b in copies:
            pairs = [(x, y) for x in [a, *copies.get(a, ())] for y in [b, *copies.get(b, ())]]
            edges.append(np.asarray(pairs[1:], np.int64).reshape(-1, 2))
    new_tg = TaskGraph(
        task_id=np.concatenate([tg.task_id, tg.task_id.max(initial=0) + 1 + np.arange(src.size)]),
        kind=np.concatenate([tg.kind, tg.kind[src]]),
        server=np.concatenate([tg.server, tg.server[src]]),
        runtime_s=np.concatenate([tg.runtime_s, tg.runtime_s[src]]),
        size_bytes=np.concatenate([size, np.asarray(extra_size)]),
        edges=np.concatenate(edges).reshape(-1, 2),
        demand=np.concatenate([demand, np.asarray(extra_dem, np.int64).reshape(-1, 2)]),
    )
    return replace(workload, demands=tuple(out), taskgraph=new_tg)
