"""The jobs file and the arrivals file of ``topoopt cluster`` (strict schemas, one-line errors).

Jobs file (YAML or JSON)::

    jobs:
      - name: recsys            # unique
        plan: dlrm              # an embedded plan, a plan/.fbuf file, or an inline plan mapping
      - name: vision
        plan: plans/vgg.yaml    # relative paths are taken from the jobs file's folder
        servers: [16, 17, 18, 19]   # optional explicit placement (the plan's server count)

A bare list of jobs is read as ``{"jobs": list}``.

Arrivals file: a time-ordered list of events, each an arrival (a job as above) or a departure
(the name of a running job); a bare list is read as ``{"events": list}``::

    events:
      - {time_s: 10.0, arrive: {name: late, plan: dlrm}}
      - {time_s: 20.0, depart: recsys}
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from traffic.decode import load_document, validate
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = [
    "JobModel",
    "JobsFile",
    "EventModel",
    "ArrivalsFile",
    "Job",
    "Event",
    "load_jobs",
    "load_arrivals",
    "resolve_job",
]

_Name = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
_Server = Annotated[int, Field(ge=0, le=2**31 - 1)]


class JobModel(BaseModel):
    """One job: a unique name, its plan, optionally its servers."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: _Name
    plan: Annotated[str, Field(min_length=1, max_length=4096)] | dict[str, Any]
    servers: Annotated[list[_Server], Field(min_length=1)] | None = None


class JobsFile(BaseModel):
    """The jobs file: ``{"jobs": [job, ...]}``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    jobs: Annotated[list[JobModel], Field(min_length=1, max_length=100_000)]


class EventModel(BaseModel):
    """One event: at ``time_s``, a job arrives or a running job departs."""

    model_config = ConfigDict(extra="forbid", strict=True)
    time_s: Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
    arrive: JobModel | None = None
    depart: _Name | None = None

    @model_validator(mode="after")
    def _one(self) -> EventModel:
        if (self.arrive is None) == (self.depart is None):
            raise ValueError("exactly one of arrive (a job) or depart (a job name)")
        return self


class ArrivalsFile(BaseModel):
    """The arrivals file: ``{"events": [event, ...]}`` in non-decreasing ``time_s``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    events: Annotated[list[EventModel], Field(min_length=1, max_length=100_000)]


@dataclass(frozen=True, eq=False)
class Job:
    """A job resolved: its name, workload and explicit servers (``None``: placed by us)."""

    name: str
    workload: Workload
    servers: np.ndarray | None = None

    @property
    def size(self) -> int:
        """Servers the job needs."""
        return int(self.workload.servers)


@dataclass(frozen=True, eq=False)
class Event:
    """An arrival (``job`` set) or a departure (``depart`` set) at ``time_s`` seconds."""

    time_s: float
    job: Job | None = None
    depart: str | None = None


def _plan_workload(plan: str | dict, base: Path, field: str, cache: dict) -> Workload:
    from traffic.build import workload_from_plan
    from traffic.load import load_workload
    from traffic.plan import embedded_plan_names, load_plan

    key = plan if isinstance(plan, str) else None
    if key is not None and key in cache:
        return cache[key]
    try:
        if isinstance(plan, dict):
            w = workload_from_plan(load_plan(plan))
        else:
            p = Path(plan)
            local = base / p
            if plan in embedded_plan_names() and not local.exists():
                w = load_workload(plan)
            elif not p.is_absolute() and local.exists():
                w = load_workload(local)
            else:
                w = load_workload(p)
    except InputError as exc:
        raise InputError(f"{field} ({exc.field})", exc.value, exc.allowed) from None
    if key is not None:
        cache[key] = w
    return w


def resolve_job(model: JobModel, base: Path, field: str, cache: dict | None = None) -> Job:
    """The :class:`Job` of a validated ``model`` (plan loaded; errors name ``field``)."""
    w = _plan_workload(model.plan, base, f"{field}.plan", {} if cache is None else cache)
    servers = None
    if model.servers is not None:
        servers = np.asarray(model.servers, np.int64)
        if servers.size != w.servers:
            raise InputError(
                f"{field}.servers", model.servers, f"{w.servers} servers (the plan's count)"
            )
        if np.unique(servers).size != servers.size:
            raise InputError(f"{field}.servers", model.servers, "distinct server ids")
    return Job(model.name, w, servers)


def _check_jobs(jobs: list[Job], name: str, servers: int | None, where: str = "jobs") -> None:
    seen: dict[str, int] = {}
    for i, j in enumerate(jobs):
        if j.name in seen:
            raise InputError(
                f"{name} {where}[{i}].name",
                j.name,
                f"a name no other job has (jobs[{seen[j.name]}])",
            )
        seen[j.name] = i
    if servers is None:
        return
    total = sum(j.size for j in jobs)
    if total > servers:
        raise InputError(
            "--servers", servers, f"at least the {total} servers the jobs of {name} need together"
        )
    owner = np.full(servers, -1, np.int64)
    for i, j in enumerate(jobs):
        if j.servers is None:
            continue
        if j.servers.max() >= servers:
            raise InputError(
                f"{name} {where}[{i}].servers", j.servers.tolist(), f"ids 0..{servers - 1}"
            )
        clash = owner[j.servers]
        if np.any(clash >= 0):
            k = int(clash[clash >= 0][0])
            s = int(j.servers[clash >= 0][0])
            raise InputError(
                f"{name} {where}[{i}].servers",
                j.servers.tolist(),
                f"servers no other job holds (server {s} is jobs[{k}] {jobs[k].name}'s)",
            )
        owner[j.servers] = i


def load_jobs(path: str | os.PathLike, servers: int | None = None) -> list[Job]:
    """Read, validate and resolve a jobs file (module docstring).

    Checks: unique names, plans that load, explicit servers of the plan's count, distinct, below
    ``servers`` and held by one job each, and at most ``servers`` servers needed in total.

    Examples
    --------
    >>> import json, tempfile
    >>> doc = {"jobs": [{"name": "a", "plan": "dlrm"}, {"name": "a", "plan": "dlrm"}]}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     _ = f.write(json.dumps(doc))
    >>> load_jobs(f.name, 64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    traffic.errors.InputError: ... jobs[1].name: got 'a'; allowed: a name no other job has (jobs[0])
    """
    name = Path(path).name
    data = load_document(path, "jobs file")
    doc = validate(JobsFile, {"jobs": data} if isinstance(data, list) else data, name)
    base = Path(path).resolve().parent
    cache: dict = {}
    jobs = [resolve_job(m, base, f"{name} jobs[{i}]", cache) for i, m in enumerate(doc.jobs)]
    _check_jobs(jobs, name, servers)
    return jobs


def load_arrivals(path: str | os.PathLike) -> list[Event]:
    """Read, validate and resolve an arrivals file (module docstring).

    Checks what the file alone decides: times non-decreasing, plans that load, explicit servers
    of the plan's count. Names against the running jobs are checked when the events are played
    (:func:`solvers.cluster.arrivals.play`).
    """
    name = Path(path).name
    data = load_document(path, "arrivals file")
    doc = validate(ArrivalsFile, {"events": data} if isinstance(data, list) else data, name)
    base = Path(path).resolve().parent
    cache: dict = {}
    out: list[Event] = []
    last = -math.inf
    for i, e in enumerate(doc.events):
        if e.time_s < last:
            raise InputError(
                f"{name} events[{i}].time_s", e.time_s, f"a time >= the previous event's {last}"
            )
        last = e.time_s
        if e.arrive is not None:
            job = resolve_job(e.arrive, base, f"{name} events[{i}].arrive", cache)
            out.append(Event(float(e.time_s), job=job))
        else:
            out.append(Event(float(e.time_s), depart=e.depart))
    return out
