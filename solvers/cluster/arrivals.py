"""Arrivals and departures: re-optimise for each arriving job, changing few running circuits.

Events are played in order on the cluster of the jobs file (running from time 0):

- a *departure* frees the job's servers and circuits; nothing else changes;
- an *arrival* is first placed on the free servers only
  (:func:`solvers.cluster.cluster_design.place_job`): every running job keeps its servers, its
  circuits and their planes, so no running circuit changes. When no free window can connect the
  new job (the free servers are fragmented across OCS units), one running job is moved: each
  running job in turn gives its servers up, the new job is placed, the moved job is placed again
  on what is left, and the move that tears down the fewest running circuits wins. Only when no
  single move works is the whole cluster re-planned from scratch
  (:func:`solvers.cluster.cluster_design.design_cluster`, running jobs in their order, the new
  one last); jobs that land on the same servers with the same unit pattern get the same
  circuits. ``replanned`` says that placing on free servers alone was impossible.

``changed_circuits`` of an event counts the circuits of jobs running both before and after it
that are torn down (a circuit is a global server pair and plane ``(u, v, plane)``; each is
replaced by one in ``added_circuits``, which also counts the arriving job's own circuits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from solvers.cluster.cluster_design import ClusterDesign, design_cluster, place_job
from solvers.cluster.job_design import JobDesign
from solvers.cluster.jobs import Event, Job
from traffic.errors import InputError

__all__ = ["play", "changed_circuits"]


def changed_circuits(before: Sequence[JobDesign], after: Sequence[JobDesign], layer) -> dict:
    """Circuits torn down and added between two states, over the jobs present in both.

    Returns ``{"removed": r, "added": a, "moved_jobs": [...]}`` (multiset differences of
    ``(u, v, plane)`` per job).
    """
    b = {j.name: j for j in before}
    a = {j.name: j for j in after}
    removed = added = 0
    moved = []
    for name in b.keys() & a.keys():
        cb, ca = b[name].circuit_set(layer), a[name].circuit_set(layer)
        r, ad = sum((cb - ca).values()), sum((ca - cb).values())
        removed += r
        added += ad
        if r or ad or not np.array_equal(b[name].servers, a[name].servers):
            moved.append(name)
    return {"removed": removed, "added": added, "moved_jobs": sorted(moved)}


def _move_one(running, job, used, layer, bw, solver, seed, work_limit, cache, reduction=True):
    """Place ``job`` by moving one running job: the move that tears down the fewest circuits.

    Returns ``(jobs after, the new job's design)`` or ``None`` when no single move works.
    """
    best = None
    for k, old in enumerate(running):
        free = np.flatnonzero(~used | np.isin(np.arange(layer.servers), old.servers))
        kw = {
            "solver": solver, "seed": seed, "work_limit": work_limit, "cache": cache,
            "reduction": reduction,
        }  # fmt: skip
        got = place_job(job, free, layer, bw, **kw)
        if got is None:
            continue
        rest = free[~np.isin(free, got.servers)]
        again = place_job(Job(old.name, old.workload, None), rest, layer, bw, **kw)
        if again is None:
            continue
        after = [*running[:k], again, *running[k + 1 :], got]
        torn = changed_circuits(running, after, layer)["removed"]
        if best is None or torn < best[0]:
            best = (torn, after, got)
    return None if best is None else (best[1], best[2])


def play(
    start: ClusterDesign,
    events: Sequence[Event],
    *,
    name: str = "arrivals",
    seed: int = 0,
    work_limit: float | None = None,
    cache: dict | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict], list[list[JobDesign]]]:
    """Play ``events`` from ``start`` (module docstring).

    Returns
    -------
    records : list of dict
        Per event: ``time_s``, ``event``, ``job``, ``changed_circuits``, ``added_circuits``,
        ``removed_circuits`` (the departed job's), ``moved_jobs``, ``replanned``, ``running``.
    states : list of list of JobDesign
        The running jobs after each event.

    Raises
    ------
    InputError
        A departure of a job that is not running, an arrival under a running job's name, or an
        arrival that does not fit on the cluster.
    """
    layer, bw, solver, reduction = start.layer, start.link_bandwidth, start.solver, start.reduction
    cache = {} if cache is None else cache
    running: list[JobDesign] = list(start.jobs)
    records: list[dict] = []
    states: list[list[JobDesign]] = []
    for i, ev in enumerate(events):
        where = f"{name} events[{i}]"
        names = [j.name for j in running]
        rec: dict = {"time_s": ev.time_s}
        if ev.depart is not None:
            if ev.depart not in names:
                raise InputError(
                    f"{where}.depart", ev.depart, f"a running job ({', '.join(names) or 'none'})"
                )
            gone = running[names.index(ev.depart)]
            running = [j for j in running if j.name != ev.depart]
            rec |= {
                "event": "depart", "job": ev.depart, "changed_circuits": 0, "added_circuits": 0,
                "removed_circuits": int(gone.ports.shape[0]), "moved_jobs": [],
                "replanned": False,
            }  # fmt: skip
        else:
            job = ev.job
            assert job is not None
            if job.name in names:
                raise InputError(f"{where}.arrive.name", job.name, "a name no running job has")
            used = np.zeros(layer.servers, bool)
            for j in running:
                used[j.servers] = True
            free = np.flatnonzero(~used)
            if job.size > free.size:
                raise InputError(
                    f"{where}.arrive",
                    f"{job.name}: {job.size} servers",
                    f"a job of at most the {free.size} servers free at {ev.time_s:g} s",
                )
            if job.servers is not None and used[job.servers].any():
                raise InputError(
                    f"{where}.arrive.servers", job.servers.tolist(), "servers no running job holds"
                )
            got = place_job(
                job, free, layer, bw,
                solver=solver, seed=seed, work_limit=work_limit, cache=cache, reduction=reduction,
            )  # fmt: skip
            replanned = got is None
            moved_one = None
            if got is None:
                moved_one = _move_one(
                    running, job, used, layer, bw, solver, seed, work_limit, cache, reduction
                )
            if got is not None:
                after = [*running, got]
            elif moved_one is not None:
                after, got = moved_one
            else:
                keep = [Job(j.name, j.workload, None) for j in running]
                again = design_cluster(
                    [*keep, job], layer, bw,
                    solver=solver, seed=seed, work_limit=work_limit, cache=cache,
                    reduction=reduction,
                )  # fmt: skip
                after = list(again.jobs)
                got = after[-1]
            diff = changed_circuits(running, after, layer)
            running = after
            rec |= {
                "event": "arrive",
                "job": job.name,
                "changed_circuits": diff["removed"],
                "added_circuits": diff["added"] + int(got.ports.shape[0]),
                "removed_circuits": 0,
                "moved_jobs": diff["moved_jobs"],
                "replanned": replanned,
            }
        rec["running"] = [j.name for j in running]
        records.append(rec)
        states.append(list(running))
        if progress is not None:
            progress(
                f"t={ev.time_s:g} s {rec['event']} {rec['job']}: "
                f"{rec['changed_circuits']} running circuits changed"
            )
    return records, states
