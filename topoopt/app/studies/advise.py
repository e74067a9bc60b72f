"""``topoopt advise JOBS``: which network to buy for these jobs at this scale, and why.

For every job (one plan, or a jobs file of plans with weights, :func:`load_jobs`), scaled to
the cluster asked (:func:`scale_plan`), every fabric family of :data:`FAMILIES` is built and the
job simulated on it with ``compare``'s machinery
(:func:`topoopt.app.studies.compare.build_fabric`, the flow model's iteration, the same price
table and BOM rules), plus the ideal switch as a bound. Fabrics without a routing of their own
are routed by ECMP over every shortest path and simulated through the symmetry quotient
(exact); only when those sub-flows exceed the memory budget are the routes capped at
:data:`ECMP_PATHS` paths a pair, and the row says so (:func:`_simulate`). One
evaluation is one (job, fabric) pair; they run on the study engine
(:class:`topoopt.app.studies.engine.Engine`: in-process, or Ray with ``workers`` /
``address``).

Then, per job (:func:`judge`):

- **Pareto**: the rows no other row beats on capex, power and iteration time at once.
- **Equal capex**: the budget is ``budget_usd``, else the capex of the full-bisection Clos
  (``fat-tree``, what a buyer gets by default). Among the rows within the budget (plus
  :data:`RTOL`), the fastest wins, and of rows at the same time (within :data:`SAME_TIME`) the
  cheapest; its margin is over the runner-up.
- **Equal iteration**: the target is ``target_iteration_s``, else the full-bisection Clos's
  iteration time. Among the rows at most the target (plus :data:`RTOL`), the cheapest wins;
  ``capex_ratio`` is the runner-up's capex over the winner's.
- **Per dollar and per watt**: ``iterations_per_s_per_musd`` (per M$ of network) and
  ``iterations_per_s_per_kw`` (per kW of network).
- **Break-even optical port price** (:func:`breakeven_port_price`): the OCS / patch-panel port
  price at which each optical family's iterations per second per dollar equal the best
  electrical family's. Prices do not change a fabric's iteration time, so the tie is closed
  form: ``p* = p0 + (T_E C_E / T_O - C_O) / N_O`` for the optical row's ``N_O`` device ports at
  price ``p0`` (this is :mod:`topoopt.app.studies.breakeven`'s question with the fabric fixed;
  that study re-buys the cost-equivalent fat-tree at every price instead).
- **Verdict** (:func:`verdict_sentences`): one sentence per job with the winners and the
  reason: what binds the runner-up (its largest critical-path class and busiest link), the
  bandwidth per server, the switch tiers, the optics' share of the capex, and how far the
  ideal switch is (when it is within a few per cent, the network is not what limits the job).

The ideal switch is a bound on every row, as in ``compare``: a designed row (``joint``) may
rewrite the job's collectives (e.g. a Blink tree packing for an all-gather) or give its traffic
classes a priority, and that rewritten workload can run faster on the ideal switch than the
plan's rings. So each designed row's evaluation also simulates its own workload and priority on
the ideal switch (``ideal_own_s``), and the job's ideal is the fastest of those and the plan's
own (``ideal_iteration_s``; ``ideal_collectives`` names the row whose collectives it ran, None
for the plan's).

With ``phase_routing`` (``advise --phase-routing``) the ``joint`` evaluation also routes its
design per communication phase on the same circuits (:func:`solvers.phase_routing`: the hosts'
routing tables change at the phase boundaries, detours over the ports a phase leaves idle; no
reconfiguration, so the same capex and power) and adds the row :data:`PHASE_ROUTED`, family
``direct``, judged like every other row. It is an option, not a default row, for its CPU (20-100
s a row at 1,024-4,096 GPUs, on top of the design and its simulation); it comes from the same
evaluation so the design is built once (:func:`_phase_routed`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, RootModel

from traffic.errors import InputError

__all__ = [
    "FAMILIES",
    "FAMILY_OF",
    "RTOL",
    "ECMP_PATHS",
    "CAP_ERROR",
    "PHASE_ROUTED",
    "Job",
    "AdviseResult",
    "load_jobs",
    "ideal_bounds",
    "scale_plan",
    "evaluate",
    "release_memory",
    "judge",
    "pareto_rows",
    "equal_capex",
    "equal_iteration",
    "breakeven_port_price",
    "verdict_sentences",
    "capped_sentences",
    "advise",
    "cosearch_screen",
    "lowest_bounds",
    "plan_shape",
    "fastest_per_fabric",
    "COSEARCH_FINALISTS",
    "json_document",
    "judge_mix",
    "mix_sentences",
]

FAMILIES: dict[str, tuple[str, ...]] = {
    "clos": ("fat-tree", "fat-tree-oversub"),
    "rail": ("rail",),
    "rail-only": ("rail-only",),
    "torus": ("torus",),
    "direct": ("joint",),
    "hybrid": ("hybrid",),
    "ocs-spine": ("ocs-spine",),
}
"""Family -> the ``compare`` fabrics that represent it (``clos``: full bisection, at the tiers
the size needs, and oversubscribed)."""

FAMILY_OF = {fab: fam for fam, fabs in FAMILIES.items() for fab in fabs}
OPTICAL = ("direct", "hybrid", "ocs-spine")
"""Families with optical circuit devices."""

PHASE_ROUTED = "joint-phased"
"""The row of ``joint``'s design with per-phase routing (``phase_routing``; module docstring)."""

RTOL = 0.02
"""A row is within a budget (a target) when it exceeds it by at most this fraction."""

SAME_TIME = 0.0005
"""Two iteration times within this fraction are the same time (the verdict prints "the same time
as"): at equal capex such a tie goes to the cheaper row (:func:`equal_capex`)."""

ECMP_PATHS = 32
"""ECMP paths a server pair (a rail switch pair on a rail fabric) when every path does not fit
in the memory budget (:func:`_simulate`): a hashed one per stratum of the equal-cost paths
(:class:`topoopt.flowsim.network.Network`, ``simulate --max-paths``). An approximation: the
row's ``paths_exact`` is False and ``paths_warning`` says so. 32 is the usual ECMP group width
of a switch; at 2,048 GPUs on the rail-optimised Clos it errs by 5e-6 at 16 paths and 3e-4 at 8
(docs/performance.md), but on Mixtral 8x7B's 8-pod OCS spine at 32,768 GPUs the 32 paths give
3.86668 s against 4.32229 s over every path (-10.5 %, docs/verdicts.md): no bound either way.
On the same plan at 4,096 GPUs (4 pods, where every path fits) 32 paths give 3.849791 s against
3.904427 s (-1.4 %), 8 paths -1.4 %, 2 paths +13.1 %, with the same bytes on every link: the
pipeline sends on the critical path, split over every path, end with their slowest sub-flow
(docs/verdicts.md, "Why the cap is faster"). :func:`capped_sentences` says which judgements a
capped row could turn within :data:`CAP_ERROR`."""

CAP_ERROR = 0.105
"""The largest error of an :data:`ECMP_PATHS` cap measured (docs/verdicts.md: Mixtral 8x7B's
32,768-GPU OCS spine, -10.5 % against every path): not a bound, the scale of the doubt
:func:`capped_sentences` puts on a capped row in words."""


class _JobEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    plan: str = Field(min_length=1)
    weight: PositiveFloat = Field(1.0, allow_inf_nan=False)


class _JobsFile(RootModel[list[_JobEntry]]):
    root: list[_JobEntry] = Field(min_length=1)


JOB_SHAPE = "a mapping {plan: PLAN, weight: W}"
"""One entry of a jobs file, in the user's words (the messages of :func:`_job_entries`)."""

_FIELD_ALLOWED = {
    "plan": "a plan file (relative to the jobs file) or an embedded plan name, as text",
    "weight": "a finite number > 0 (the job's share of the mix; default 1)",
}
"""What each field of a jobs file's entry allows, in the user's words."""


def _job_entries(data: list, where: str) -> list[_JobEntry]:
    """The entries of a jobs file's list (``where``: the file), each error one
    :class:`InputError` naming the field as the user wrote it (``FILE: jobs[1].weight``) and
    what is allowed in the user's words, not the schema's class (``[1]`` was refused as "a
    valid dictionary or instance of _JobEntry").

    >>> _job_entries([{"plan": "dlrm", "weight": 2}], "jobs.yaml")[0].weight
    2.0
    >>> _job_entries([1], "jobs.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    traffic.errors.InputError: jobs.yaml: jobs[0]: got 1; allowed: a mapping {plan: PLAN, ...
    >>> _job_entries([{"plan": "dlrm", "weight": 0}], "jobs.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    traffic.errors.InputError: jobs.yaml: jobs[0].weight: got 0; allowed: a finite number > 0 ...
    """
    from pydantic import ValidationError

    from traffic.decode import field_path, first_error, known_fields, validation_error

    shape = f"{JOB_SHAPE} (PLAN {_FIELD_ALLOWED['plan']}; W {_FIELD_ALLOWED['weight']})"
    if not data:
        raise InputError(f"{where}: jobs", data, f"a list of at least one job, each {shape}")
    for i, e in enumerate(data):
        if not isinstance(e, dict):
            raise InputError(f"{where}: jobs[{i}]", e, shape)
    try:
        return _JobsFile.model_validate(data).root
    except ValidationError as exc:
        err = validation_error(exc, where)
        first = first_error(exc.errors(include_url=False, include_context=False))
        loc = tuple(first["loc"])
        key = loc[-1] if loc else None
        allowed = err.allowed
        if first["type"] == "extra_forbidden":  # a misspelled field: named, not the missing one
            allowed = f"no such field; known fields: {known_fields(_JobsFile, loc)}"
        elif first["type"] != "missing" and key in _FIELD_ALLOWED:
            allowed = _FIELD_ALLOWED[key]
        elif first["type"] == "missing":
            allowed = f"a required field: {_FIELD_ALLOWED.get(key, allowed)}"
        raise InputError(f"{where}: jobs{field_path(loc)}", err.value, allowed) from None


@dataclass(frozen=True)
class Job:
    """One job of the mix: a validated plan, its name and weight."""

    name: str
    plan: Any
    weight: float = 1.0


def _plan(source: str, field_name: str):
    from traffic.plan import load_plan

    try:
        return load_plan(source)
    except InputError as e:
        if field_name == "JOBS":
            raise
        raise InputError(field_name, source, f"a plan file or embedded plan name ({e})") from None


def _job_source(jobs_file: Path, plan: str) -> str:
    """What a jobs file's ``plan`` names: a plan file (a ``.yaml``, ``.yml`` or ``.json`` path,
    relative to the jobs file, normalised so that ``a/../job.yaml`` and ``job.yaml`` are one
    plan), else an embedded plan name as written."""
    import os

    if Path(plan).suffix.lower() in (".yaml", ".yml", ".json"):
        return os.path.normpath(jobs_file.parent / plan)
    return plan


def load_jobs(source: str | Path) -> list[Job]:
    """The jobs of ``source``: a plan (file or embedded name), or a jobs file (YAML: a list of
    ``{plan, weight}``; ``plan`` a plan file, relative to the jobs file, or an embedded name;
    ``weight`` > 0, default 1).

    Raises
    ------
    InputError
        One line naming the field (``jobs[i].plan``, ``jobs[i].weight``, ...).
    """
    from traffic.decode import load_document

    path = Path(source)
    if path.suffix.lower() in (".yaml", ".yml", ".json") and path.is_file():
        data = load_document(path, "jobs file")
        if isinstance(data, dict) and "plan" in data and "model" not in data:
            raise InputError(  # one job written as a mapping, not a list: not a plan file
                str(path), {k: data[k] for k in list(data)[:2]},
                f"a jobs file: a list of jobs, each {JOB_SHAPE} (YAML: one '- plan: ...' a "
                "job); or a plan file (with model:)",
            )  # fmt: skip
        if isinstance(data, list):
            entries = _job_entries(data, str(path))
            srcs = [_job_source(path, e.plan) for e in entries]
            seen: set[str] = set()  # each plan once, checked before any plan is read
            for e, src in zip(entries, srcs, strict=True):
                if src in seen:
                    name = Path(e.plan).stem
                    raise InputError("jobs.plan", name, "each plan once (give it a weight instead)")
                seen.add(src)
            names = [Path(e.plan).stem for e in entries]
            if len(set(names)) < len(names):  # two plans, one file name (a/job.yaml, b/job.yaml,
                names = [e.plan for e in entries]  # or dlrm and dlrm.yaml): named as written
            return [
                Job(nm, _plan(src, f"jobs[{i}].plan"), e.weight)
                for i, (nm, src, e) in enumerate(zip(names, srcs, entries, strict=True))
            ]
    plan = _plan(str(source), "JOBS")
    return [Job(Path(str(source)).stem, plan, 1.0)]


def scale_plan(
    plan,
    gpus: int | None = None,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
):
    """``plan`` on ``gpus`` GPUs: ``servers = gpus / gpus_per_server``, ``dp`` re-derived from
    the model-parallel degrees, and the global batch scaled with ``dp`` (weak scaling: every
    replica keeps its micro-batches), on the catalogue GPU ``gpu`` (None: the plan's) at the
    kernel efficiency ``efficiency`` (None: the plan's ``cluster.efficiency``, else the GPU's;
    :func:`traffic.load.with_efficiency`); then the ``KEY=VALUE`` ``settings`` (``--set``,
    :func:`traffic.load.with_settings`) on the plan as it runs (a global batch set so is the
    scaled plan's).

    >>> from traffic.plan import load_plan
    >>> p = scale_plan(load_plan("gpt3-175b"), 4096)
    >>> p.cluster.servers, p.dp, p.global_batch
    (512, 32, 6144)
    >>> s = ["parallelism.global_batch_size=2048"]
    >>> p = scale_plan(load_plan("gpt3-175b"), 4096, settings=s)
    >>> p.dp, p.global_batch, p.micro_batches
    (32, 2048, 64)
    """
    from traffic.load import with_settings

    return with_settings(_scaled(plan, gpus, gpu, efficiency), settings)


def _scaled(plan, gpus: int | None, gpu: str | None, efficiency: float | None):
    from traffic.load import with_efficiency, with_gpu, with_gpus

    return with_gpus(with_efficiency(with_gpu(plan, gpu), efficiency), gpus)


def _binding(fabric: str, it) -> tuple[str | None, str | None]:
    """The largest critical-path class and the busiest network link of an iteration."""
    cls = link = None
    by_class = getattr(it, "comm_by_class", None) or {}
    if by_class:
        c, sec = max(by_class.items(), key=lambda kv: kv[1])
        if sec > 0:
            cls = f"{c} ({sec:.4g} s on the critical path)"
    links = getattr(it, "links", None)
    if links is not None and len(links) and "utilisation" in links:
        net = links[links["kind"] != "intra"] if "kind" in links else links
        if len(net):
            r = net.loc[net["utilisation"].idxmax()]
            link = (
                f"node {int(r['src'])} -> {int(r['dst'])}, busy "
                f"{100 * float(r['utilisation']):.0f} % of the iteration"
            )
    return cls, link


def _simulate(run, priority, max_buckets, max_paths: int):
    """Simulate ``run``'s workload on its fabric: ``(iteration, cap, reason)``.

    The fabric's own routing when it has one (a design); otherwise every shortest path (the
    flow model's ECMP), through the symmetry quotient, per-flow times only (``path_times``
    off: advise reads the flows' times and the links' bytes). When those sub-flows exceed the
    memory budget (:func:`topoopt.flowsim.subflow_guard.check_subflows` refuses them once
    routed, before their arrays exist) or the pairs' paths the routing's path limit (field
    ``k``: DLRM's all-to-all on the 16,384-GPU torus), again with at most ``max_paths`` ECMP
    paths a pair (per rail switch pair on a rail fabric), then ``max_paths // 4`` (Llama 3
    405B on the 16,384-GPU rail-optimised Clos: 33.3 M sub-flows at 32, 12.1 GB): ``cap`` is
    the cap used, else None (exact), and ``reason`` what refused every path (None when
    exact). The last refusal is raised (the row's error)."""
    from topoopt.flowsim.iteration import simulate_iteration

    kw = {
        "routing": run.routing, "exposed_by_class": False, "priority": priority,
        "max_buckets": max_buckets, "reduction": True, "path_times": False,
    }  # fmt: skip
    caps = [None, int(max_paths)] + ([int(max_paths) // 4] if max_paths >= 4 else [])
    reason = None
    for cap in caps[:-1]:
        try:
            it = simulate_iteration(run.workload, run.fabric, max_paths=cap, **kw)
            return it, cap, reason
        except InputError as e:
            if e.field not in ("flows", "k") or run.routing is not None:
                raise
            what = "the routing's path limit" if e.field == "k" else "the memory budget"
            reason = reason or f"over {what} ({e})"
    it = simulate_iteration(run.workload, run.fabric, max_paths=caps[-1], **kw)
    return it, caps[-1], reason


def _rounding(run, it, cap, priority, max_buckets, runs: int, seed: int) -> dict:
    """The row's iteration simulated ``runs`` more times with every fabric link's bandwidth
    scaled by ``1 + e`` (:func:`topoopt.flowsim.conditioning.check`), as :func:`_simulate` ran
    it (the same routes, path cap, buckets and priorities): the check's ``COLUMNS``."""
    from topoopt.flowsim.conditioning import check, columns
    from topoopt.flowsim.iteration import simulate_iteration

    return columns(
        check(
            run.fabric, it.iteration_s, runs, seed,
            lambda f: simulate_iteration(
                run.workload, f, routing=run.routing, exposed_by_class=False,
                priority=priority, max_buckets=max_buckets, reduction=True, path_times=False,
                max_paths=cap,
            ).iteration_s,
        )
    )  # fmt: skip


def rounding_sentences(job: str, rows: pd.DataFrame, judged: dict) -> list[str]:
    """What ``rounding_check`` says about one job's judgements: the rows rounding alone moves by
    more than :data:`~topoopt.flowsim.conditioning.WELL_CONDITIONED`, and whether the
    equal-capex margin or a row's place against the equal-iteration limit is within that noise
    (the winner's and the runner-up's spreads added; a row's spread plus the target row's).
    Empty without the check.

    >>> t = pd.DataFrame({"fabric": ["fat-tree", "torus", "joint"],
    ...     "iteration_s": [1.0, 1.015, 1.2], "capex_usd": [10.0, 4.0, 3.0],
    ...     "rounding_spread": [1e-14, 0.012, 3e-14],
    ...     "rounding_conditioned": ["well", "ill", "well"]})
    >>> j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    >>> for s in rounding_sentences("llama", t, j):
    ...     print(s)
    llama: rounding alone moves torus by up to 1.2 % (its digits past that are noise); the other rows agree to 3.0e-14.
    llama: torus is within its rounding noise of the equal-iteration limit (1.5 % over the target, allowed 2 %): it may fall on either side.
    """  # noqa: E501
    if "rounding_conditioned" not in rows:
        return []
    done = rows[rows["rounding_conditioned"].isin(["well", "ill"])]
    if done.empty:
        return []
    from topoopt.app.report.verdict import noisy_rows

    spread = dict(zip(done["fabric"], done["rounding_spread"].astype(float), strict=True))
    noisy = noisy_rows(done)
    if noisy is None:
        return [
            f"{job}: rounding moves no row by more than {max(spread.values()):.1e}"
            " (the rounding check): no judgement turns on it."
        ]
    out = [f"{job}: {noisy}."]
    ec = judged.get("equal_capex") or {}
    if ec.get("runner_up") is not None and ec.get("margin") is not None:
        noise = spread.get(ec["winner"], 0.0) + spread.get(ec["runner_up"], 0.0)
        if abs(float(ec["margin"])) <= noise:
            out.append(
                f"{job}: at equal capex {ec['winner']} leads {ec['runner_up']} by "
                f"{100 * float(ec['margin']):.2g} %, within their rounding noise "
                f"({100 * noise:.2g} %): a tie."
            )
    ei = judged.get("equal_iteration") or {}
    target = ei.get("target_iteration_s")
    if target:
        ref = _default_ref(rows)
        base = spread.get(ref["fabric"], 0.0) if ref is not None else 0.0
        limit = float(target) * (1 + RTOL)
        for _, r in done.iterrows():
            over = float(r["iteration_s"]) / float(target) - 1
            if abs(float(r["iteration_s"]) / limit - 1) <= float(r["rounding_spread"]) + base:
                out.append(
                    f"{job}: {r['fabric']} is within its rounding noise of the equal-iteration "
                    f"limit ({100 * over:.2g} % over the target, allowed {100 * RTOL:g} %): it "
                    "may fall on either side."
                )
    return out


def capped_sentences(
    job: str, rows: pd.DataFrame, judged: dict, budget_usd=None, target_iteration_s=None
) -> list[str]:
    """What the rows with capped routes (``paths_exact`` False: :func:`_simulate`) do to one
    job's judgements: for each, its iteration moved anywhere within :data:`CAP_ERROR` either
    way (:func:`_cap_factors`) and the equal-capex and equal-iteration winners judged again (the
    default budget and target move with it when it is their reference row); one sentence a
    capped row, naming the winners it could make, or saying that none changes. Empty without a
    capped row.

    >>> t = pd.DataFrame({"fabric": ["fat-tree", "ocs-spine", "joint"],
    ...     "family": ["clos", "ocs-spine", "direct"], "iteration_s": [1.0, 1.05, 1.5],
    ...     "capex_usd": [10.0, 8.0, 3.0], "paths_exact": [True, False, True],
    ...     "max_paths": [None, 32, None]})
    >>> j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    >>> for s in capped_sentences("mixtral", t, j):
    ...     print(s)
    mixtral: ocs-spine's routes are capped at 32 ECMP paths a pair, an approximation (the cap's largest measured error is 10.5 %, not a bound); within that error the equal-capex winner could be ocs-spine instead of fat-tree and the equal-iteration winner could be ocs-spine instead of fat-tree.
    """  # noqa: E501
    if "paths_exact" not in rows or rows.empty:
        return []
    capped = rows[rows["paths_exact"].eq(False) & rows["iteration_s"].notna()]
    now = {
        "equal-capex": (judged.get("equal_capex") or {}).get("winner"),
        "equal-iteration": (judged.get("equal_iteration") or {}).get("winner"),
    }
    out = []
    for idx, r in capped.iterrows():
        could: dict[str, set] = {k: set() for k in now}
        for f in _cap_factors(rows, float(r["iteration_s"]), judged):
            moved = rows.copy()
            moved.loc[idx, "iteration_s"] = float(r["iteration_s"]) * f
            alt = {
                "equal-capex": equal_capex(moved, budget_usd)["winner"],
                "equal-iteration": equal_iteration(moved, target_iteration_s)["winner"],
            }
            for k, w in alt.items():
                if w != now[k]:
                    could[k].add(str(w))
        cap = r.get("max_paths")
        head = (
            f"{job}: {r['fabric']}'s routes are capped at "
            f"{int(cap) if pd.notna(cap) else 'a few'} ECMP paths a pair, an approximation (the "
            f"cap's largest measured error is {100 * CAP_ERROR:g} %, not a bound); "
        )
        turns = [
            f"the {k} winner could be {' or '.join(sorted(v))} instead of {now[k]}"
            for k, v in could.items()
            if v
        ]
        out.append(
            head
            + (
                "within that error " + " and ".join(turns)
                if turns
                else "no winner changes within that error"
            )
            + "."
        )
    return out


def _cap_factors(rows: pd.DataFrame, t: float, judged: dict) -> list[float]:
    """Factors of a row's iteration ``t`` within :data:`CAP_ERROR` at which to judge again so
    that every winner it can make is seen: the two ends and a point inside each piece between
    the factors where ``t`` crosses another row's time, that time over ``1 + RTOL`` or times
    ``1 + RTOL``, or the equal-iteration limit (the winners are constant on each piece)."""
    lo, hi = 1 - CAP_ERROR, 1 + CAP_ERROR
    others = rows["iteration_s"].to_numpy(float)
    target = (judged.get("equal_iteration") or {}).get("target_iteration_s")
    marks = np.concatenate(
        [others, others / (1 + RTOL), others * (1 + RTOL)]
        + ([np.array([float(target) * (1 + RTOL)])] if target else [])
    )
    cuts = np.unique(np.concatenate([[lo, hi], marks[(marks > lo * t) & (marks < hi * t)] / t]))
    return [lo, hi, *((cuts[:-1] + cuts[1:]) / 2).tolist()]


def release_memory() -> bool:
    """Collect the garbage and give the C heap's free pages back to the system (glibc's
    ``malloc_trim``), after each of :func:`evaluate`'s rows: True where it could trim.

    The arrays of a row are freed when it ends, but glibc keeps freed heap memory of
    allocations under its mmap threshold (which grows to 32 MB as arrays are freed) in the
    process, so the next row starts with it resident. Measured 2026-12-06, DLRM at 4,096 GPUs:
    after the ``hybrid`` row 1.09 GB stayed resident with 3 MB of Python objects traced
    (tracemalloc), 0.32 GB after the trim, and the ``ocs-spine`` row after it then peaked at
    1.28 GB instead of 1.77 GB. Also before a row's per-phase routing (:func:`_phase_routed`),
    whose runs otherwise start on the row's own freed heap: Mixtral 8x7B's ``joint`` row at
    2,048 GPUs, measured 2026-12-07, peaked at 0.993 GB without it and 0.815 GB with it.
    Elsewhere (no glibc) only the collection runs."""
    import ctypes
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


def evaluate(task: dict) -> dict:
    """One (job, fabric) evaluation (:func:`_evaluate_row`), then :func:`release_memory`, so
    that a process running row after row (the local engine, a Ray worker) does not start each
    row with the last one's freed memory resident."""
    try:
        return _evaluate_row(task)
    finally:
        release_memory()


def _evaluate_row(task: dict) -> dict:
    """One (job, fabric) evaluation: build, simulate, price; a row (module docstring).

    ``task``: ``job``, ``plan``, ``weight``, ``fabric`` and the ``compare`` parameters
    (``degree``, ``link_bandwidth``, ``oversubscription``, ``seed``, ``time_limit_s``,
    ``prices``). A fabric that cannot be built gives a row with ``error``. ``search_warning``
    is the line of :func:`solvers.search_warning` when the fabric's design search fell back to
    another objective or was cut by the wall clock (None otherwise): the row carries it, so it
    reaches the command from any worker (Ray) as from the local engine.
    """
    from topoopt.app.studies.compare import (
        PER_PHASE_FABRICS,
        build_fabric,
        cost_columns,
        fabric_warning,
    )
    from topoopt.fabrics.cost import bill_of_materials
    from topoopt.flowsim.roofline import throughput_facts
    from topoopt.flowsim.work import check_work
    from traffic.build import workload_from_plan

    t0 = time.perf_counter()
    cand = task.get("candidate")
    if cand is None:
        wl = workload_from_plan(task["plan"])
    else:  # a co-searched plan (recommendation models: with its table placement)
        from topoopt.app.studies.cosearch.evaluate import workload_for

        _, wl = workload_for(task["base"], cand)
    nm = task["fabric"]
    row: dict[str, Any] = {
        "job": task["job"],
        "plan": task.get("plan_label", task["job"]),
        "weight": task["weight"],
        "family": FAMILY_OF.get(nm, "ideal"),
        "fabric": nm,
        "gpus": wl.gpus,
        "servers": wl.servers,
        "search_warning": None,
    }
    try:
        run = build_fabric(
            nm, wl, task["degree"], task["link_bandwidth"],
            oversubscription=task["oversubscription"], seed=task["seed"],
            time_limit_s=task["time_limit_s"], prices=task["prices"],
            work_limit=task.get("work_limit"),
        )  # fmt: skip
        if run.fabric.n_servers > 1:
            run.fabric.check_connected()
        searched = run.design
        if searched is None and run.search_info:  # a routing without a design (hybrid)
            from types import SimpleNamespace

            searched = SimpleNamespace(info=run.search_info)
        if searched is not None:  # the search fell back or the clock cut it: say which row
            from solvers import search_warning

            row["search_warning"] = search_warning(searched, f"{task['job']} / {nm}")
        own = getattr(run.design, "priority", ()) or None
        buckets = None
        if cand is not None:  # a co-searched plan: gradient buckets at most 256 a channel on
            # every fabric, as the co-search screens (it changes only ZeRO / FSDP channels
            # asking more; measured error at most 6.9e-4), flagged in the row
            from topoopt.app.studies.cosearch.evaluate import SCREEN_MAX_BUCKETS

            buckets = SCREEN_MAX_BUCKETS
        # flows first (before any route); the sub-flows are checked with their exact counts
        # once routed (topoopt.flowsim.subflow_guard), as compare does
        check_work(run.workload, f"simulation on {nm}", max_buckets=buckets, reduced=own is None)
        it, cap, why = _simulate(run, own, buckets, task.get("ecmp_paths", ECMP_PATHS))
        row["paths_exact"] = cap is None
        row["max_paths"] = cap
        row["paths_warning"] = (
            None
            if cap is None
            else f"{task['job']} / {nm}: every ECMP path is {why}, so the routes are capped "
            f"at {cap} paths a pair (a hashed one per stratum): an approximation, without the "
            "symmetry reduction (docs/performance.md gives its error)"
        )
        row["coarsened"] = bool(it.info.get("buckets_capped"))
        row["ideal_own_s"] = _ideal_own(task, run, wl, own, buckets)
        runs = int(task.get("rounding_check", 0))
        pp = task.get("per_phase_delay_s") is not None and nm in PER_PHASE_FABRICS
        if runs and not pp:  # a per-phase row's schedule search is not repeated
            row.update(_rounding(run, it, cap, own, buckets, runs, int(task["seed"])))
    except InputError as e:
        row.update(error=str(e), wall_s=time.perf_counter() - t0)
        return row
    cols = cost_columns(run, task["prices"])
    capex, power = float(run.capex_usd), float(run.power_w)
    comp = cols["capex_breakdown"]
    optics = sum(comp.get(k, 0.0) for k in ("transceiver", "ocs", "patch_panel"))
    bom = bill_of_materials(run.fabric)
    info = cols["fabric_info"]
    pp = task.get("per_phase_delay_s")
    if pp is not None and nm in PER_PHASE_FABRICS:
        it = _per_phase(row, run, it, task, float(pp))
    cls, link = _binding(nm, it)
    t = float(row.get("iteration_s", it.iteration_s))
    row.update(
        iteration_s=t,
        comm_s=float(it.comm_s),
        exposed_comm_s=float(row.get("exposed_comm_s", it.exposed_comm_s)),
        capex_usd=capex,
        power_w=power,
        iterations_per_s_per_musd=1e6 / (t * capex) if capex > 0 else math.inf,
        iterations_per_s_per_kw=1e3 / (t * power) if power > 0 else math.inf,
        server_gbps=float(cols["server_bandwidth"]) * 8 / 1e9,
        tiers=info.get("tiers"),
        optics_share=optics / capex if capex > 0 else 0.0,
        optical_ports=int(bom.get("ocs_port", 0) + bom.get("patch_panel_port", 0)),
        optical_item="ocs_port" if bom.get("ocs_port") else "patch_panel_port",
        binding_class=cls,
        binding_link=link,
        mfu=throughput_facts(run.workload, t).get("mfu"),
        note=run.note or None,
        fabric_warning=fabric_warning(run, f"{task['job']} / {nm}"),
        wall_s=time.perf_counter() - t0,
    )
    if task.get("phase_routing") and nm == "joint" and run.design is not None:
        phased = _phase_routed(row, run, task)
        if phased is not None:
            row["phased"] = phased  # split into its own row by advise (_split_phased)
    return row


def _phase_routed(row: dict, run, task: dict) -> dict | None:
    """The :data:`PHASE_ROUTED` row of the ``joint`` row ``row`` (``advise``'s ``phase_routing``):
    ``run``'s design routed per phase on its circuits (:func:`solvers.phase_routing`, never
    slower than the static routing), the same capex, power and bill of materials.

    The row's ``iteration_s`` and ``comm_s`` (communication on the critical path) are the
    chosen routing schedule's when some phase takes its own routing, else the ``joint`` row's;
    ``static_iteration_s`` is the static routing's iteration
    on the same engine (the reference the choice is made against), ``phase_routes`` names each
    phase and whether it took its own routing (``wall_s``: its own wall time, a clock field); the
    binding class and link are the chosen schedule's (:func:`_binding`); ``phase_routing_reduction``
    what the symmetry reduction of the chosen schedule's run found (``status`` on / off,
    ``reason``, flows and flow classes). When the routing cannot
    run (e.g. over the memory budget) there is no such row and ``row`` gets
    ``phase_routing_warning``."""
    from solvers import phase_routing
    from topoopt.flowsim.roofline import throughput_facts

    t0 = time.perf_counter()
    release_memory()  # the row's freed heap back before the routing's runs (below)
    try:
        res = phase_routing(run.workload, run.design, run.fabric)
    except InputError as e:
        row["phase_routing_warning"] = (
            f"{task['job']} / {PHASE_ROUTED}: per-phase routing not evaluated (no such row): {e}"
        )
        return None
    routed = any(res.choice)
    cls, link = _binding(PHASE_ROUTED, res.chosen.result) if routed else (None, None)
    t = float(res.iteration_s) if routed else float(row["iteration_s"])
    capex, power = float(row["capex_usd"]), float(row["power_w"])
    out = {
        **row,
        "fabric": PHASE_ROUTED,
        "search_warning": None,  # said once, on the joint row
        "paths_warning": None,
        "fabric_warning": None,
        "iteration_s": t,
        "comm_s": float(res.chosen.result.comm_s) if routed else row["comm_s"],
        "exposed_comm_s": (
            t - float(res.reference.result.compute_s) if routed else row["exposed_comm_s"]
        ),
        "iterations_per_s_per_musd": 1e6 / (t * capex) if capex > 0 else math.inf,
        "iterations_per_s_per_kw": 1e3 / (t * power) if power > 0 else math.inf,
        "binding_class": cls if routed else row["binding_class"],
        "binding_link": link if routed else row["binding_link"],
        "mfu": throughput_facts(run.workload, t).get("mfu"),
        "note": "joint's circuits, routing tables changed per communication phase",
        "phase_routing": True,
        "static_iteration_s": float(res.static_iteration_s),
        "phase_routes": [
            f"{p.name}: {'own' if c else 'static'}"
            for p, c in zip(res.phases, res.choice, strict=True)
        ],
        # the chosen schedule's symmetry reduction (on: its quotient's classes; off: why)
        "phase_routing_reduction": res.info["reduction"].get(
            "".join("R" if c else "S" for c in res.choice)
        ),
        "wall_s": time.perf_counter() - t0,
    }
    if routed:  # the rounding check ran the static routing, not this schedule
        from topoopt.flowsim.conditioning import COLUMNS

        out.update(dict.fromkeys(k for k in COLUMNS if k in row))
    return out


def _split_phased(rows: list[dict]) -> list[dict]:
    """``rows`` with each ``joint`` row's :data:`PHASE_ROUTED` row (:func:`_phase_routed`,
    carried under ``phased``) taken out and placed right after it."""
    out = []
    for r in rows:
        phased = r.pop("phased", None) if isinstance(r, dict) else None
        out.append(r)
        if phased is not None:
            out.append(phased)
    return out


def _per_phase(row: dict, run, it, task: dict, delay_s: float):
    """The ``ocs-spine`` / ``hybrid`` row with per-phase circuits charged the OCS delay
    (``advise``'s ``per_phase_delay_s``; :func:`topoopt.app.studies.compare.per_phase_run`, the
    static circuits always a candidate): the iteration the row reports (the chosen schedule's,
    or ``it`` when the static circuits stay or are faster); ``row`` gains ``per_phase``,
    ``reconfig_delay_s``, ``static_iteration_s``, ``reconfigurations``, ``dark_s``,
    ``schedule`` and, for a reconfiguring schedule, its ``iteration_s`` and ``exposed_comm_s``
    (the dark times included). A search that cannot run (e.g. over the memory budget) keeps
    the static row, ``per_phase`` False and the reason in ``per_phase_warning``."""
    from topoopt.app.studies.compare import per_phase_run

    row.update(
        per_phase=True, reconfig_delay_s=delay_s, static_iteration_s=float(it.iteration_s),
        reconfigurations=0, dark_s=delay_s, schedule=["static"], per_phase_warning=None,
    )  # fmt: skip
    try:
        res, chosen = per_phase_run(
            run, task["degree"], task["link_bandwidth"], delay_s,
            time_limit_s=task["time_limit_s"],
        )  # fmt: skip
    except InputError as e:
        row.update(
            per_phase=False, reconfigurations=None, dark_s=None, schedule=None,
            per_phase_warning=f"{task['job']} / {row['fabric']}: per-phase circuits not "
            f"evaluated, static circuits kept: {e}",
        )  # fmt: skip
        return it
    if chosen is None or not chosen.iteration_s < it.iteration_s:
        return it
    t = float(chosen.iteration_s)
    row.update(
        iteration_s=t, exposed_comm_s=t - float(chosen.result.compute_s),
        reconfigurations=res.reconfigurations, dark_s=res.dark_s,
        schedule=[cs.label for cs in res.schedule.sets],
    )  # fmt: skip
    return chosen.result


def _ideal_own(task: dict, run, wl, own, buckets) -> float | None:
    """A designed row's own workload (its collectives) and class priority simulated on the ideal
    switch (module docstring), or None when the row runs the plan's workload without a
    priority (the ideal row already ran exactly that) or is not designed."""
    from topoopt.app.studies.compare import build_fabric
    from topoopt.flowsim.iteration import simulate_iteration

    if run.design is None or task["fabric"] == "ideal" or (run.workload is wl and own is None):
        return None
    ideal = build_fabric("ideal", wl, task["degree"], task["link_bandwidth"], seed=task["seed"])
    it = simulate_iteration(
        run.workload, ideal.fabric, routing=ideal.routing, exposed_by_class=False, priority=own,
        max_buckets=buckets, reduction=True, path_times=False,
    )  # fmt: skip
    return float(it.iteration_s)


def ideal_bounds(records: Sequence[dict]) -> tuple[dict, dict]:
    """Per job, the ideal switch's iteration time, a bound on every row (module docstring):
    the fastest of the ideal row's and every row's ``ideal_own_s``; and whose collectives
    reached it (None: the plan's own).

    >>> recs = [{"job": "a", "fabric": "ideal", "iteration_s": 2.0},
    ...         {"job": "a", "fabric": "joint", "iteration_s": 1.9, "ideal_own_s": 1.8},
    ...         {"job": "b", "fabric": "ideal", "iteration_s": 1.0},
    ...         {"job": "b", "fabric": "joint", "iteration_s": 1.2, "ideal_own_s": 1.1}]
    >>> ideal_bounds(recs)
    ({'a': 1.8, 'b': 1.0}, {'a': 'joint', 'b': None})
    """
    ideal: dict[str, float | None] = {}
    who: dict[str, str | None] = {}
    for r in records:
        if r["fabric"] == "ideal":
            ideal[r["job"]] = r.get("iteration_s")
            who[r["job"]] = None
    for r in records:
        t, j = r.get("ideal_own_s"), r["job"]
        if t is None or not math.isfinite(t) or r["fabric"] == "ideal":
            continue
        if ideal.get(j) is None or t < ideal[j]:
            ideal[j], who[j] = float(t), r["fabric"]
    return ideal, who


def pareto_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows no other row beats on capex, power and iteration time together (at least as
    good on all three, better on one).

    >>> t = pd.DataFrame({"capex_usd": [1, 2, 2], "power_w": [1, 1, 2], "iteration_s": [3, 2, 2]})
    >>> pareto_rows(t).index.tolist()
    [0, 1]
    """
    x = rows[["capex_usd", "power_w", "iteration_s"]].to_numpy(float)
    le = (x[:, None, :] <= x[None, :, :]).all(axis=2)
    lt = (x[:, None, :] < x[None, :, :]).any(axis=2)
    dominated = (le & lt).any(axis=0)
    return rows[~dominated]


def _default_ref(rows: pd.DataFrame) -> pd.Series | None:
    ref = rows[rows["fabric"] == "fat-tree"]
    return ref.iloc[0] if len(ref) else None


def _runner_up(ranked: pd.DataFrame) -> pd.Series | None:
    """The best row of another family than the winner's (the next row without families) that
    is not the winner's network under another name: a row with the winner's capex, power and
    iteration time to 1e-9 (at 128 servers ``rail`` and ``rail-only`` are one switch per rail
    both) is skipped, so the ratio printed is against a different purchase.

    >>> t = pd.DataFrame({"fabric": ["rail", "rail-only", "fat-tree"],
    ...                   "family": ["rail", "rail-only", "clos"], "capex_usd": [3.0, 3.0, 5.0],
    ...                   "power_w": [1.0, 1.0, 2.0], "iteration_s": [1.0, 1.0, 1.0]})
    >>> _runner_up(t)["fabric"]
    'fat-tree'
    """
    if len(ranked) < 2:
        return None
    other = ranked.iloc[1:]
    if "family" in ranked:
        other = other[other["family"] != ranked["family"].iloc[0]]
    cols = [c for c in ("capex_usd", "power_w", "iteration_s") if c in ranked]
    if cols and len(other):
        w = ranked[cols].iloc[0].to_numpy(float)
        x = other[cols].to_numpy(float)
        same = np.all(np.abs(x - w) <= 1e-9 * np.maximum(np.abs(w), 1e-300), axis=1)
        other = other[~same]
    return other.iloc[0] if len(other) else None


def equal_capex(rows: pd.DataFrame, budget_usd: float | None = None) -> dict:
    """The fastest row within the budget (module docstring): ``budget_usd``, ``winner``,
    ``runner_up`` (the best row of another family), ``margin`` (1 - winner's iteration /
    runner-up's), ``within`` (fabrics).

    >>> t = pd.DataFrame({"fabric": ["fat-tree", "rail-only", "joint"],
    ...                   "capex_usd": [10.0, 6.0, 12.0], "iteration_s": [2.0, 2.5, 1.0]})
    >>> r = equal_capex(t)
    >>> r["winner"], r["runner_up"], round(r["margin"], 3), r["within"]
    ('fat-tree', 'rail-only', 0.2, ['fat-tree', 'rail-only'])
    >>> t.loc[1, "iteration_s"] = 2.0 * (1 + 1e-15)  # the same time: the cheaper row
    >>> r = equal_capex(t)
    >>> r["winner"], r["runner_up"], r["margin"] < 0
    ('rail-only', 'fat-tree', True)
    """
    if budget_usd is None:
        ref = _default_ref(rows)
        budget_usd = float(ref["capex_usd"]) if ref is not None else float(rows["capex_usd"].max())
    ok = rows[rows["capex_usd"] <= budget_usd * (1 + RTOL)].sort_values(
        ["iteration_s", "capex_usd"], kind="stable"
    )
    if len(ok):  # the same time (:data:`SAME_TIME`) goes to the cheaper row: a design 2e-15 s
        # faster than the torus was "bought" at 1.2x its capex
        t = ok["iteration_s"].astype(float)
        tied = ok[t * (1 - SAME_TIME) < float(t.iloc[0])]
        first = tied.sort_values(["capex_usd", "iteration_s"], kind="stable").index[0]
        ok = pd.concat([ok.loc[[first]], ok.drop(index=first)])
    out: dict[str, Any] = {"budget_usd": float(budget_usd), "within": ok["fabric"].tolist()}
    out["winner"] = ok["fabric"].iloc[0] if len(ok) else None
    r = _runner_up(ok)
    out["runner_up"] = None if r is None else r["fabric"]
    out["margin"] = (
        None if r is None else 1 - float(ok["iteration_s"].iloc[0]) / float(r["iteration_s"])
    )
    return out


def equal_iteration(rows: pd.DataFrame, target_iteration_s: float | None = None) -> dict:
    """The cheapest row at most the target iteration time (module docstring):
    ``target_iteration_s``, ``winner``, ``runner_up`` (the cheapest row of another family),
    ``capex_ratio`` (runner-up's capex over the winner's), ``within``.

    >>> t = pd.DataFrame({"fabric": ["fat-tree", "rail-only", "joint"],
    ...                   "capex_usd": [10.0, 6.0, 12.0], "iteration_s": [2.0, 2.01, 1.0]})
    >>> r = equal_iteration(t)
    >>> r["winner"], r["runner_up"], round(r["capex_ratio"], 3)
    ('rail-only', 'fat-tree', 1.667)
    """
    if target_iteration_s is None:
        ref = _default_ref(rows)
        target_iteration_s = (
            float(ref["iteration_s"]) if ref is not None else float(rows["iteration_s"].max())
        )
    ok = rows[rows["iteration_s"] <= target_iteration_s * (1 + RTOL)].sort_values(
        ["capex_usd", "iteration_s"], kind="stable"
    )
    out: dict[str, Any] = {
        "target_iteration_s": float(target_iteration_s),
        "within": ok["fabric"].tolist(),
    }
    out["winner"] = ok["fabric"].iloc[0] if len(ok) else None
    r = _runner_up(ok)
    out["runner_up"] = None if r is None else r["fabric"]
    # None where the winner costs nothing (one server: its GPUs talk over NVLink, no network
    # to buy), as where no other family qualifies: no finite ratio to report
    w_capex = float(ok["capex_usd"].iloc[0]) if len(ok) else 0.0
    out["capex_ratio"] = None if r is None or w_capex <= 0 else float(r["capex_usd"]) / w_capex
    return out


def breakeven_port_price(optical: pd.Series, electrical: pd.Series, port_price: float) -> float:
    """The optical device port price at which ``optical``'s iterations per second per dollar
    equal ``electrical``'s (module docstring); negative: no price does.

    >>> o = pd.Series({"iteration_s": 1.0, "capex_usd": 150.0, "optical_ports": 10})
    >>> e = pd.Series({"iteration_s": 2.0, "capex_usd": 100.0})
    >>> breakeven_port_price(o, e, 5.0)  # 150 - 10 x 5 + 10 p = 2 x 100 / 1
    10.0
    """
    n = float(optical["optical_ports"])
    if n <= 0:
        return math.nan
    tie = float(electrical["iteration_s"]) * float(electrical["capex_usd"])
    tie /= float(optical["iteration_s"])
    return port_price + (tie - float(optical["capex_usd"])) / n


def _describe(r: pd.Series) -> str:
    tiers = r.get("tiers")
    tier = "" if tiers is None or pd.isna(tiers) else f", {int(tiers)} switch tier(s)"
    plan = r.get("plan")  # co-searched rows name their plan (the job's own otherwise)
    on = ""
    if isinstance(plan, str) and plan != r.get("job"):
        given = plan.startswith("given ")
        on = f" with the given plan ({plan[6:]})" if given else f" with plan {plan}"
    if isinstance(r.get("per_phase"), bool | np.bool_) and r.get("per_phase"):
        on += f" with per-phase circuits ({float(r['reconfig_delay_s']) * 1e6:,.6g} us OCS delay)"
    if isinstance(r.get("phase_routing"), bool | np.bool_) and r.get("phase_routing"):
        on += " (joint's circuits, routing tables changed per phase)"
    return (
        f"{r['fabric']}{on} ({r['family']}, {float(r['server_gbps']):.0f} Gbps per server{tier}, "
        f"optics {100 * float(r['optics_share']):.0f} % of {float(r['capex_usd']) / 1e6:.3f} M$)"
    )


def verdict_sentences(job: str, rows: pd.DataFrame, judged: dict, ideal_s: float | None) -> list:
    """The verdict of one job: equal capex, equal iteration, the reason (module docstring).

    >>> t = pd.DataFrame({"fabric": ["fat-tree", "rail-only"], "family": ["clos", "rail-only"],
    ...     "capex_usd": [10e6, 6e6], "iteration_s": [2.0, 2.5], "server_gbps": [800, 800],
    ...     "tiers": [2, 1], "optics_share": [0.5, 0.4], "binding_class": ["tp (1 s)", None],
    ...     "binding_link": [None, None]})
    >>> j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    >>> print(verdict_sentences("gpt", t, j, 1.9)[0])  # doctest: +NORMALIZE_WHITESPACE
    gpt: at equal capex (at most 10.000 M$ + 2 %) buy fat-tree (clos, 800 Gbps per server, 2 switch
    tier(s), optics 50 % of 10.000 M$): 2 s per iteration, 20.0 % less than rail-only (2.5 s).
    """
    out = []
    ec, ei = judged["equal_capex"], judged["equal_iteration"]
    by = rows.set_index("fabric", drop=False)
    if ec["winner"] is not None:
        w = by.loc[ec["winner"]]
        s = (
            f"{job}: at equal capex (at most {ec['budget_usd'] / 1e6:.3f} M$ "
            f"+ {100 * RTOL:.0f} %) buy "
            f"{_describe(w)}: "
            f"{float(w['iteration_s']):.4g} s per iteration"
        )
        if ec["runner_up"] is not None:
            r = by.loc[ec["runner_up"]]
            cheaper = float(r["capex_usd"]) / float(w["capex_usd"]) if w["capex_usd"] > 0 else 0
            if ec["margin"] < SAME_TIME:  # "0.0 % less" says nothing: a tie of time (e.g.
                # rail and fat-tree both at the ideal switch's), decided by the capex
                s += f", the same time as {ec['runner_up']} ({float(r['iteration_s']):.4g} s)"
                if cheaper >= 1.005:
                    s += f" for {cheaper:.2f}x less capex"
                elif cheaper * 1.005 <= 1:
                    s += f", which costs {1 / cheaper:.2f}x less"
                else:
                    s += " and capex"
            else:
                s += (
                    f", {100 * ec['margin']:.1f} % less than {ec['runner_up']} "
                    f"({float(r['iteration_s']):.4g} s)"
                )
        out.append(s + ".")
    elif len(rows) and ec.get("budget_usd") is not None:  # a budget below every row: say so
        c = rows.loc[rows["capex_usd"].idxmin()]
        out.append(
            f"{job}: no fabric fits the budget of {ec['budget_usd'] / 1e6:.3f} M$ "
            f"(+ {100 * RTOL:.0f} %): the cheapest is {c['fabric']} at "
            f"{float(c['capex_usd']) / 1e6:.3f} M$."
        )
    if ei["winner"] is not None:
        w = by.loc[ei["winner"]]
        s = (
            f"{job}: at equal iteration time (at most {ei['target_iteration_s']:.4g} s "
            f"+ {100 * RTOL:.0f} %) the "
            f"cheapest is {ei['winner']} at {float(w['capex_usd']) / 1e6:.3f} M$"
        )
        if ei["runner_up"] is not None:
            ru = by.loc[ei["runner_up"]]
            if ei["capex_ratio"] is None:  # the winner costs nothing: no ratio
                s += (
                    f": no network to buy, where {ei['runner_up']} costs "
                    f"{float(ru['capex_usd']) / 1e6:.3f} M$"
                )
            elif ei["capex_ratio"] < 1.005:  # "1.00x cheaper" says nothing: the same price
                faster = 1 - float(w["iteration_s"]) / float(ru["iteration_s"])
                s += (
                    f", the same capex as {ei['runner_up']} "
                    f"({float(ru['capex_usd']) / 1e6:.3f} M$) and {100 * faster:.1f} % faster"
                )
            else:
                s += f", {ei['capex_ratio']:.2f}x cheaper than {ei['runner_up']}"
        out.append(s + ".")
    elif len(rows) and ei.get("target_iteration_s") is not None:  # a target below every row
        f = rows.loc[rows["iteration_s"].idxmin()]
        s = (
            f"{job}: no fabric reaches {ei['target_iteration_s']:.4g} s per iteration "
            f"(+ {100 * RTOL:.0f} %): the fastest is {f['fabric']} at "
            f"{float(f['iteration_s']):.4g} s"
        )
        if ideal_s and ideal_s > ei["target_iteration_s"] * (1 + RTOL):
            s += f", and even the ideal switch takes {ideal_s:.4g} s"
        out.append(s + ".")
    ref = ec["runner_up"] or ec["winner"]
    if ref is not None:
        r = by.loc[ref]
        parts = [
            p
            for p in (
                isinstance(r.get("binding_class"), str)
                and f"its largest critical-path class is {r['binding_class']}",
                isinstance(r.get("binding_link"), str)
                and f"its busiest link is {r['binding_link']}",
            )
            if isinstance(p, str)
        ]
        if parts:
            out.append(f"{job}: on {ref}, " + " and ".join(parts) + ".")
    if ideal_s and len(rows):
        best = float(rows["iteration_s"].min())
        cheap = rows.loc[rows["capex_usd"].idxmin()]
        gap = float(cheap["iteration_s"]) / ideal_s - 1
        s = (
            f"{job}: the ideal switch (a bound) takes {ideal_s:.4g} s; the fastest product "
            f"{best / ideal_s:.3f}x that"
        )
        if best < ideal_s:  # a fluid bound, not a makespan bound: say why a product beats it
            s += (
                f" ({100 * (1 - best / ideal_s):.3g} % sooner: max-min sharing on its links, "
                "not a better network, docs/model.md)"
            )
        s += f", the cheapest ({cheap['fabric']}) {1 + gap:.3f}x"
        if gap < 0.05 and cheap["fabric"] == ei["winner"]:
            s += ": the network is not what limits this job, so the cheapest network wins"
        elif gap < 0.05 and ei["winner"] is not None:  # the cheapest misses the target
            over = float(cheap["iteration_s"]) / ei["target_iteration_s"] - 1
            s += (
                ": the network costs this job little, yet the cheapest is "
                f"{100 * over:.1f} % over the equal-iteration target, so {ei['winner']} wins there"
            )
        out.append(s + ".")
    from topoopt.app.studies.compare import per_phase_sentence

    if (pp := per_phase_sentence(rows)) is not None:
        out.append(f"{job}: {pp[0].lower()}{pp[1:]}")
    for line in judged.get("breakeven", []):
        out.append(f"{job}: {line}")
    return out


def judge(rows: pd.DataFrame, budget_usd=None, target_iteration_s=None, prices=None) -> dict:
    """Pareto, equal capex, equal iteration and break-even prices of one job's rows."""
    from topoopt.fabrics.cost import load_prices

    table = load_prices() if prices is None else prices
    ok = rows[rows["iteration_s"].notna()] if "iteration_s" in rows else rows.iloc[0:0]
    out = {
        "pareto": pareto_rows(ok)["fabric"].tolist() if len(ok) else [],
        "equal_capex": equal_capex(ok, budget_usd),
        "equal_iteration": equal_iteration(ok, target_iteration_s),
        "breakeven": [],
        "breakeven_usd": {},
    }
    elec = ok[~ok["family"].isin(OPTICAL)]
    if len(elec):
        e = elec.loc[elec["iterations_per_s_per_musd"].idxmax()]
        for _, o in ok[ok["family"].isin(OPTICAL)].iterrows():
            if not o["optical_ports"]:
                continue
            p0 = table.unit(o["optical_item"])[0]
            p = breakeven_port_price(o, e, p0)
            out["breakeven_usd"][o["fabric"]] = p
            dev = "OCS" if o["optical_item"] == "ocs_port" else "patch-panel"
            if p < 0:
                out["breakeven"].append(
                    f"{o['fabric']} does not reach {e['fabric']}'s iterations per second per "
                    f"dollar at any {dev} port price (even free ports leave it behind; today "
                    f"${p0:,.0f})."
                )
            else:
                out["breakeven"].append(
                    f"{o['fabric']} ties {e['fabric']} in iterations per second per dollar at a "
                    f"{dev} port price of ${p:,.0f} (today ${p0:,.0f}; "
                    f"{'it wins now' if p >= p0 else 'cheaper ports needed'})."
                )
    return out


def judge_mix(rows: pd.DataFrame, weights: dict[str, float], ideal: dict, budget_usd=None):
    """The mix of a jobs file of several jobs, as one purchase: each job's ``weight`` is its
    share of the cluster's time, so a fabric's figure is the weighted mean of the jobs'
    slowdowns over their ideal switch, ``sum_i w_i t_i / ideal_i / sum_i w_i`` (1: as fast as
    the ideal switch on every job), and its capex and power the largest of its rows (one
    network must carry every job). Fabrics not built for every job are left out.

    Returns None for one job; else ``weights``, ``rows`` (``fabric``, ``family``,
    ``capex_usd``, ``power_w``, ``slowdown``), ``pareto`` and the equal-capex and
    equal-slowdown judgements (:func:`equal_capex`, :func:`equal_iteration` on the slowdown:
    the budget is ``budget_usd`` or the full-bisection Clos's capex, the target the Clos's
    slowdown; a target in seconds does not apply to a mix).

    >>> t = pd.DataFrame({"job": ["a", "a", "b", "b"], "fabric": ["fat-tree", "torus"] * 2,
    ...     "family": ["clos", "torus"] * 2, "capex_usd": [10.0, 4.0, 10.0, 4.0],
    ...     "power_w": [2.0, 1.0, 2.0, 1.0], "iteration_s": [1.0, 1.0, 2.0, 3.0]})
    >>> m = judge_mix(t, {"a": 3.0, "b": 1.0}, {"a": 1.0, "b": 2.0})
    >>> [(r["fabric"], r["slowdown"]) for r in m["rows"]]  # torus: (3 x 1 + 1 x 1.5) / 4
    [('fat-tree', 1.0), ('torus', 1.125)]
    >>> m["equal_capex"]["winner"], m["equal_slowdown"]["winner"]
    ('fat-tree', 'fat-tree')
    """
    if len(weights) < 2 or "iteration_s" not in rows:
        return None
    ok = rows[rows["iteration_s"].notna() & rows["job"].isin(list(weights))]
    total = float(sum(weights.values()))
    out = []
    for fab, g in ok.groupby("fabric", sort=False):
        if set(g["job"]) != set(weights) or any(not ideal.get(j) for j in weights):
            continue
        slow = sum(
            weights[j] * float(t) / float(ideal[j])
            for j, t in zip(g["job"], g["iteration_s"], strict=True)
        )
        out.append({
            "fabric": fab, "family": g["family"].iloc[0], "capex_usd": float(g["capex_usd"].max()),
            "power_w": float(g["power_w"].max()), "iteration_s": slow / total,
        })  # fmt: skip
    if not out:
        return None
    frame = pd.DataFrame(out)
    ec = equal_capex(frame, budget_usd)
    ei = equal_iteration(frame)
    ei["target_slowdown"] = ei.pop("target_iteration_s")
    return {
        "weights": dict(weights),
        "rows": [
            {
                **{k: r[k] for k in ("fabric", "family", "capex_usd", "power_w")},
                "slowdown": r["iteration_s"],
            }
            for r in out
        ],  # fmt: skip
        "pareto": pareto_rows(frame)["fabric"].tolist(),
        "equal_capex": ec,
        "equal_slowdown": ei,
    }


def mix_sentences(mix: dict | None) -> list[str]:
    """The verdict of the mix (:func:`judge_mix`): what to buy at equal capex and the cheapest
    at equal slowdown, in one sentence each.

    >>> m = {"weights": {"a": 3.0, "b": 1.0}, "rows": [
    ...     {"fabric": "fat-tree", "capex_usd": 10e6, "slowdown": 1.0},
    ...     {"fabric": "torus", "capex_usd": 4e6, "slowdown": 1.01}],
    ...     "equal_capex": {"winner": "fat-tree", "budget_usd": 10e6, "runner_up": "torus"},
    ...     "equal_slowdown": {"winner": "torus", "target_slowdown": 1.0, "runner_up": "fat-tree",
    ...                        "capex_ratio": 2.5}}
    >>> for line in mix_sentences(m):  # doctest: +NORMALIZE_WHITESPACE
    ...     print(line)
    mix (a 3, b 1; each weight the job's share of the cluster's time): at equal capex (at most
    10.000 M$, + 2 %) buy fat-tree: 1.000x the ideal switch's time, weighted (torus 1.010x).
    mix: at equal slowdown (at most 1.000x, + 2 %) the cheapest is torus at 4.000 M$, 2.50x
    cheaper than fat-tree.
    """
    if mix is None:
        return []
    by = {r["fabric"]: r for r in mix["rows"]}
    ws = ", ".join(f"{j} {w:g}" for j, w in mix["weights"].items())
    out = []
    ec, ei = mix["equal_capex"], mix["equal_slowdown"]
    if ec["winner"] is not None:
        s = (
            f"mix ({ws}; each weight the job's share of the cluster's time): at equal capex (at "
            f"most {ec['budget_usd'] / 1e6:.3f} M$, + {100 * RTOL:.0f} %) buy {ec['winner']}: "
            f"{by[ec['winner']]['slowdown']:.3f}x the ideal switch's time, weighted"
        )
        if ec["runner_up"] is not None:
            s += f" ({ec['runner_up']} {by[ec['runner_up']]['slowdown']:.3f}x)"
        out.append(s + ".")
    else:
        c = min(mix["rows"], key=lambda r: r["capex_usd"])
        out.append(
            f"mix ({ws}): no fabric fits the budget of {ec['budget_usd'] / 1e6:.3f} M$ (+ "
            f"{100 * RTOL:.0f} %): the cheapest is {c['fabric']} at {c['capex_usd'] / 1e6:.3f} M$."
        )
    if ei["winner"] is not None:
        s = (
            f"mix: at equal slowdown (at most {ei['target_slowdown']:.3f}x, + {100 * RTOL:.0f} %)"
            f" the cheapest is {ei['winner']} at {by[ei['winner']]['capex_usd'] / 1e6:.3f} M$"
        )
        if ei["runner_up"] is not None and ei["capex_ratio"] is not None:
            s += f", {ei['capex_ratio']:.2f}x cheaper than {ei['runner_up']}"
        out.append(s + ".")
    return out


@dataclass
class AdviseResult:
    """Rows, the judgement per job, the verdict sentences and the parameters."""

    rows: pd.DataFrame
    ideal: dict[str, float]
    judged: dict[str, dict]
    verdict: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    candidates: pd.DataFrame | None = None
    """With ``cosearch``: every (job, plan, fabric) evaluation, the ideal switch included."""
    ideal_collectives: dict[str, str | None] = field(default_factory=dict)
    """Per job, the row whose collectives the ideal bound ran (None: the plan's own)."""
    mix: dict | None = None
    """With several jobs, the mix judged as one purchase (:func:`judge_mix`)."""

    def warnings(self) -> list[str]:
        """The rows' warnings, in row order: one line per affected (job, fabric) and kind, the
        search warnings first (``search_warning``: a design search fell back or was cut by the
        clock), then the capped routes (``paths_warning``: :func:`_simulate`), then the rings
        that miss cables or a Clos not at the oversubscription asked (``fabric_warning``:
        :func:`~topoopt.app.studies.compare.fabric_warning`)."""
        out = []
        for col in (
            "search_warning",
            "paths_warning",
            "fabric_warning",
            "per_phase_warning",
            "phase_routing_warning",
        ):
            if col in self.rows:
                out += [w for w in self.rows[col] if isinstance(w, str) and w]
        return out


COSEARCH_FINALISTS = 3
"""Co-searched plans evaluated on every family besides the job's own plan (``--finalists``);
``3 x`` as many are screened on the ideal switch first (``--screen``)."""


def cosearch_screen(plan, degree: int, link_bandwidth: float, screen: int):
    """The plans ``advise --cosearch`` screens on the ideal switch: of the ``screen`` shapes
    (:func:`plan_shape`: the parallel degrees) of lowest bound among the candidates of
    :func:`~topoopt.app.studies.cosearch.space.plan_space` (every valid plan of the model on this
    cluster that fits the GPU's memory, from the catalogue), each shape's plan of lowest
    ``max(compute-only, ideal-switch)`` bound
    (:func:`~topoopt.app.studies.cosearch.search.candidate_bounds`), ties by the network bound
    (the plan asking least of the network first), then by key. Without shapes the screen of
    GPT-3 175B on 1,024 GPUs was three variants of one plan (sequence parallelism, rank order),
    all 14.19 s on the ideal switch.

    Returns ``(base, candidates, facts)``: the search's base mapping, the screened candidates
    in that order, and ``facts`` (``space``, ``rejected``, ``bounded``: how many plans' traffic
    was built to rank them, and ``next_bound_s``, the bound of the first plan left out).
    """
    from topoopt.app.studies.cosearch.space import plan_space

    spec = plan.cluster.gpu_spec
    memory = float(spec.memory_bytes) if spec is not None else 80e9
    space = plan_space(plan, memory)
    if not len(space):
        raise InputError(
            "--cosearch", plan.model.name, f"a plan that fits {memory / 1e9:g} GB a GPU "
            f"(cut: {space.rejected})",
        )  # fmt: skip
    bounds, net = lowest_bounds(space, int(degree), float(link_bandwidth), screen + 1)
    order = sorted(bounds, key=lambda i: (bounds[i], net[i], space.candidates[i].key))
    first: dict[tuple, int] = {}  # each shape's lowest-bound plan, shapes by that bound
    for i in order:
        first.setdefault(plan_shape(space.candidates[i]), i)
    shapes = list(first.values())
    picked = [space.candidates[i] for i in shapes[:screen]]
    facts = {
        "space": len(space),
        "rejected": dict(space.rejected),
        "bounded": len(bounds),
        "bounds_s": [float(bounds[i]) for i in shapes[:screen]],
        "next_bound_s": float(bounds[shapes[screen]]) if len(shapes) > screen else None,
    }
    return space.base, picked, facts


def plan_shape(c) -> tuple:
    """What makes two candidates different plans to screen: the parallel degrees (tp, pp, dp,
    cp, ep) of a transformer; the data-parallel degree, micro-batch and the number of servers
    holding tables otherwise. Options that keep the shape (sequence parallelism, recomputation,
    sharding, rank order) are the co-search's refinements, not a new plan to screen.

    >>> from topoopt.app.studies.cosearch.space import Candidate
    >>> plan_shape(Candidate((("dp", 4), ("pp", 2), ("sp", True), ("tp", 8))))
    (8, 2, 4, 1, 1)
    """
    p = c.par
    if "tp" in p:
        return tuple(int(p.get(k, 1)) for k in ("tp", "pp", "dp", "cp", "ep"))
    ts = c.table_servers
    return (int(p["dp"]), int(p["micro_batch_size"]), 0 if ts is None else len(set(ts)))


def lowest_bounds(space, degree: int, link_bandwidth: float, k: int, shape=None):
    """The ``max(compute-only, ideal-switch)`` bound
    (:func:`~topoopt.app.studies.cosearch.search.candidate_bounds`) and the ideal-switch
    (network) bound of every candidate that can be the lowest-bound plan of one of the ``k``
    shapes (:func:`plan_shape`) of lowest bound (ties included): two dicts by index; the others
    are skipped. :func:`cosearch_screen` breaks
    ties of the bound (frequent: large models are compute-bound on the ideal switch) by the
    network bound.

    The compute-only bound needs no traffic and is at most the full bound, so the candidates are
    taken by compute bound, and once it exceeds the ``k``-th lowest of the shapes' lowest full
    bounds found, no later candidate can enter them: the result is that of
    :func:`candidate_bounds` over the whole space, ties included, while only a few workloads are
    built (Mixtral 8x7B on 1,024 GPUs: hours of traffic expansion otherwise).
    """
    from topoopt.app.studies.cosearch.evaluate import compute_bound, network_bound, workload_for

    comp = [compute_bound(p) for p in space.plans]
    shape = plan_shape if shape is None else shape
    out: dict[int, float] = {}
    net: dict[int, float] = {}
    best: dict[tuple, float] = {}  # the lowest bound of each shape found so far
    kth = math.inf
    for i in sorted(range(len(comp)), key=lambda i: (comp[i], space.candidates[i].key)):
        if comp[i] > kth:
            break
        _, w = workload_for(space.base, space.candidates[i])
        net[i] = network_bound(w, degree, link_bandwidth)
        out[i] = max(comp[i], net[i])
        sh = shape(space.candidates[i])
        best[sh] = min(best.get(sh, math.inf), out[i])
        if len(best) >= k:
            kth = sorted(best.values())[k - 1]
    return out, net


def plan_label(plan) -> str:
    """``tp8 pp16 dp8 b1``: the plan labelled as the co-search labels its candidates
    (:func:`topoopt.app.studies.cosearch.space._label`), so a given plan and a co-searched one
    read alike."""
    from topoopt.app.studies.cosearch.space import _label

    return _label({**plan.parallelism.model_dump(), "dp": plan.dp}, None)


def fastest_per_fabric(records: Sequence[dict]) -> list[dict]:
    """Per (job, fabric), the evaluated plan with the least iteration time (rows that could
    not be built or simulated count as slowest; ties: the earlier record, so the given plan).

    >>> recs = [{"job": "a", "fabric": "x", "plan": "p", "iteration_s": 2.0},
    ...         {"job": "a", "fabric": "x", "plan": "q", "iteration_s": 1.0},
    ...         {"job": "a", "fabric": "y", "plan": "p", "iteration_s": 3.0},
    ...         {"job": "a", "fabric": "y", "plan": "q", "error": "too big"}]
    >>> [(r["fabric"], r["plan"]) for r in fastest_per_fabric(recs)]
    [('x', 'q'), ('y', 'p')]
    """
    best: dict[tuple[str, str], dict] = {}
    for r in records:
        k = (r["job"], r["fabric"])
        t = r.get("iteration_s")
        t = math.inf if t is None or not math.isfinite(t) else t
        cur = best.get(k)
        if cur is None or t < cur[0]:
            best[k] = (t, r)
    return [r for _, r in best.values()]


def _check_options(degree, link_bandwidth, oversubscription, time_limit_s) -> None:
    """The options every row uses, checked before any work: a bad one was refused by each
    row in turn (``--oversubscription 0``: the rows of fat-tree-oversub and hybrid "not built",
    the others judged without them, exit 0), or by none (``--degree 0``: every row failed, then
    a ``KeyError`` traceback; ``--time-limit -1``).

    >>> _check_options(8, 50e9, 4.0, 30.0)
    >>> _check_options(8, 50e9, 0.5, 30.0)
    Traceback (most recent call last):
    traffic.errors.InputError: --oversubscription: got 0.5; allowed: a finite number >= 1
    """
    from traffic.limits import check_server_ports

    check_server_ports("--degree", degree)
    real = (int, float, np.integer, np.floating)
    for name, v, ok, what in (
        ("--link-gbps", link_bandwidth, lambda x: x > 0, "a finite number of Gbps > 0"),
        ("--oversubscription", oversubscription, lambda x: x >= 1, "a finite number >= 1"),
        ("--time-limit", time_limit_s, lambda x: x > 0, "a finite number of seconds > 0"),
    ):
        if isinstance(v, bool) or not isinstance(v, real) or not math.isfinite(v) or not ok(v):
            shown = v * 8 / 1e9 if name == "--link-gbps" and isinstance(v, real) else v
            raise InputError(name, shown, what)


def advise(
    jobs: Sequence[Job],
    *,
    gpus: int | None = None,
    gpu: str | None = None,
    efficiency: float | None = None,
    settings: Sequence[str] = (),
    degree: int = 8,
    link_bandwidth: float = 50e9,
    budget_usd: float | None = None,
    target_iteration_s: float | None = None,
    oversubscription: float = 4.0,
    seed: int = 0,
    time_limit_s: float = 30.0,
    prices=None,
    work_limit: float | None = None,
    workers: int = 1,
    address: str | None = None,
    progress: bool = True,
    on_done: Callable[[dict], None] | None = None,
    cosearch: bool = False,
    finalists: int = COSEARCH_FINALISTS,
    screen: int | None = None,
    per_phase_delay_s: float | None = None,
    phase_routing: bool = False,
    rounding_check: int = 0,
) -> AdviseResult:
    """Evaluate every family on every job and judge them (module docstring).

    With ``cosearch``, the ``screen`` plans of the job's model with the lowest bounds
    (:func:`cosearch_screen`; default ``3 * finalists``) are simulated on the ideal switch, the
    ``finalists`` fastest there on every family, and each family's row is its fastest of them and
    the job's own plan (ties: the job's own). ``on_done(row)`` is called with each evaluation's
    row as it finishes (in this process; e.g. to save it before the next one).

    ``per_phase_delay_s`` (seconds; None: static circuits) evaluates the ``ocs-spine`` and
    ``hybrid`` rows with per-phase circuits charged this OCS delay (:func:`_per_phase`), flagged
    in the row (``per_phase``) and in the verdict. ``phase_routing`` adds the row
    :data:`PHASE_ROUTED` (``joint``'s design routed per phase, :func:`_phase_routed`) next to
    every ``joint`` row. ``rounding_check`` simulates every static row this many more times with
    its fabric's link bandwidths scaled by ``1 + e`` (:func:`_rounding`): the rows add
    :data:`topoopt.flowsim.conditioning.COLUMNS` and the verdict :func:`rounding_sentences`."""
    from topoopt.app.studies.engine import Engine
    from topoopt.fabrics.cost import load_prices
    from topoopt.flowsim.conditioning import check_runs
    from topoopt.flowsim.work import check_work
    from traffic.build import workload_from_plan

    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd > 0):
        raise InputError("--budget", budget_usd, "a positive number of USD")
    if target_iteration_s is not None and not (
        math.isfinite(target_iteration_s) and target_iteration_s > 0
    ):
        raise InputError("--target-iteration-s", target_iteration_s, "a positive number of s")
    if per_phase_delay_s is not None:
        d = per_phase_delay_s
        if isinstance(d, bool) or not isinstance(d, int | float) or not math.isfinite(d) or d < 0:
            raise InputError("per_phase_delay_s", d, "a finite number of seconds >= 0")
    _check_options(degree, link_bandwidth, oversubscription, time_limit_s)
    rounding_check = check_runs(rounding_check)
    table = load_prices() if prices is None else prices
    t0 = time.perf_counter()
    scaled = [
        Job(j.name, scale_plan(j.plan, gpus, gpu, efficiency, settings), j.weight) for j in jobs
    ]
    for j in scaled:  # one server: its GPUs talk over NVLink, no network to price or compare
        c = j.plan.cluster
        if c.servers < 2:
            raise InputError(
                "--gpus" if gpus is not None else f"{j.name}: cluster.servers",
                gpus if gpus is not None else c.servers,
                f"at least 2 servers ({2 * c.gpus_per_server} GPUs): on one server the GPUs "
                "talk over NVLink and there is no network to choose",
            )
    fabrics = ("ideal", *FAMILY_OF)
    for j in scaled:  # sizes first: a refusal before minutes of work (the rows simulate
        # through the symmetry reduction, so its cap; a row with priorities of its own is
        # checked again with the plain one, _row)
        check_work(
            workload_from_plan(j.plan), f"simulation (x {len(fabrics)} fabrics)", reduced=True
        )
    common = {
        "degree": int(degree), "link_bandwidth": float(link_bandwidth),
        "oversubscription": float(oversubscription), "seed": int(seed),
        "time_limit_s": float(time_limit_s), "prices": table,
        "work_limit": None if work_limit is None else float(work_limit),
    }  # fmt: skip
    if per_phase_delay_s is not None:
        common["per_phase_delay_s"] = float(per_phase_delay_s)
    if not isinstance(phase_routing, bool | np.bool_):
        raise InputError("phase_routing", phase_routing, "true or false")
    if phase_routing:
        common["phase_routing"] = True
    if rounding_check:
        common["rounding_check"] = rounding_check
    if isinstance(finalists, bool) or not isinstance(finalists, int) or finalists < 1:
        raise InputError("--finalists", finalists, "an integer >= 1")
    screen = 3 * finalists if screen is None else screen
    if isinstance(screen, bool) or not isinstance(screen, int) or screen < finalists:
        raise InputError("--screen", screen, f"an integer >= --finalists ({finalists})")
    searched: dict[str, dict] = {}
    tasks, screens = [], []
    for j in scaled:
        if not cosearch:
            tasks += [
                {"job": j.name, "plan": j.plan, "weight": j.weight, "fabric": f, **common}
                for f in fabrics
            ]
            continue
        base, cands, facts = cosearch_screen(j.plan, degree, link_bandwidth, screen)
        searched[j.name] = facts
        given = "given " + plan_label(j.plan)
        tasks += [  # the job's own plan first: it wins the ties
            {
                "job": j.name,
                "plan": j.plan,
                "weight": j.weight,
                "fabric": f,
                "plan_label": given,
                **common,
            }  # fmt: skip
            for f in fabrics
        ]
        screens += [
            {
                "job": j.name,
                "plan": None,
                "weight": j.weight,
                "fabric": "ideal",
                "base": base,
                "candidate": c,
                "plan_label": c.label,
                **common,
            }  # fmt: skip
            for c in cands
        ]
    with Engine(workers=workers, address=address, progress=progress) as eng:
        report = None if on_done is None else (lambda _k, r: on_done(r))
        out = eng.map(
            evaluate, tasks + screens, label="advise: (job, fabric) evaluations", on_result=report
        )
        if cosearch:  # the finalists: the screen's fastest on the ideal switch, on every family
            finals = []
            pairs = list(zip(screens, out[len(tasks) :], strict=True))
            for name, facts in searched.items():
                done = [(t, r) for t, r in pairs if t["job"] == name]
                bounds = facts.pop("bounds_s")
                facts["screened"] = [
                    {"plan": r["plan"], "bound_s": b, "ideal_s": r.get("iteration_s"),
                     "error": r.get("error")}
                    for (_, r), b in zip(done, bounds, strict=True)
                ]  # fmt: skip
                ok = [k for k, (_, r) in enumerate(done) if r.get("iteration_s") is not None]
                best = sorted(sorted(ok, key=lambda k: done[k][1]["iteration_s"])[:finalists])
                facts["finalists"] = [done[k][1]["plan"] for k in best]
                finals += [
                    {**done[k][0], "fabric": f} for k in best for f in fabrics if f != "ideal"
                ]
            out += eng.map(
                evaluate, finals, label="advise: finalists on every family", on_result=report
            )
    out = _split_phased(out)
    candidates = pd.DataFrame(out) if cosearch else None
    if cosearch:
        out = fastest_per_fabric(out)
    for j in scaled:  # a job no fabric carries has no table to judge: one line, not a traceback
        mine = [r for r in out if r["job"] == j.name and r["fabric"] != "ideal"]
        if mine and all(r.get("iteration_s") is None for r in mine):
            first = next((r for r in mine if isinstance(r.get("error"), str)), mine[0])
            raise InputError(
                j.name, "no fabric built",
                f"a job some fabric can carry ({first['fabric']}: {first.get('error')})",
            )  # fmt: skip
    ideal, ideal_who = ideal_bounds(out)
    rows = pd.DataFrame([r for r in out if r["fabric"] != "ideal"])
    judged, verdict = {}, []
    for j in scaled:
        jr = rows[rows["job"] == j.name]
        judged[j.name] = judge(jr, budget_usd, target_iteration_s, table)
        ok = jr[jr["iteration_s"].notna()] if "iteration_s" in jr else jr.iloc[0:0]
        verdict += verdict_sentences(j.name, ok, judged[j.name], ideal.get(j.name))
        verdict += rounding_sentences(j.name, ok, judged[j.name])
        verdict += capped_sentences(j.name, ok, judged[j.name], budget_usd, target_iteration_s)
    shapes = {j.name: (j.plan.cluster.servers, j.plan.cluster.gpus_per_server) for j in scaled}
    mix = None
    if len(set(shapes.values())) == 1:  # one cluster: the mix is one purchase
        mix = judge_mix(rows, {j.name: j.weight for j in scaled}, ideal, budget_usd)
        verdict += mix_sentences(mix)
    else:  # jobs on clusters of other sizes are not one network to buy
        verdict.append(
            "mix: not judged as one purchase: the jobs run on different clusters ("
            + ", ".join(f"{k} {n} servers x {g} GPUs" for k, (n, g) in shapes.items())
            + "); give --gpus and plans of one server size."
        )
    gpu_name = gpu_efficiency = None
    if len(rows):
        from topoopt.flowsim.roofline import throughput_facts

        facts = throughput_facts(workload_from_plan(scaled[0].plan), 0.0)
        gpu_name, gpu_efficiency = facts["gpu"], facts["efficiency"]
    params = {
        "gpus": gpus,
        "gpu": gpu_name,
        "efficiency": gpu_efficiency,
        "settings": [str(x) for x in settings or ()],
        "degree": int(degree),
        "link_gbps": float(link_bandwidth) * 8 / 1e9,
        "budget_usd": budget_usd,
        "target_iteration_s": target_iteration_s,
        "oversubscription": float(oversubscription),
        "seed": int(seed),
        "time_limit_s": float(time_limit_s),
        "work_limit": None if work_limit is None else float(work_limit),
        "prices": table.source,
        "jobs": [{"name": j.name, "weight": j.weight, "gpus": j.plan.gpus} for j in scaled],
        "families": {k: list(v) for k, v in FAMILIES.items()},
        "cosearch": (
            {"finalists": int(finalists), "screen": int(screen), "jobs": searched}
            if cosearch
            else False
        ),
        "ecmp_paths": ECMP_PATHS,
    }
    if per_phase_delay_s is not None:
        params["per_phase_delay_s"] = float(per_phase_delay_s)
    if phase_routing:
        params["phase_routing"] = True
    if rounding_check:
        params["rounding_check"] = rounding_check
    res = AdviseResult(rows, ideal, judged, verdict, params, time.perf_counter() - t0)
    res.mix = mix
    res.candidates = candidates
    res.ideal_collectives = ideal_who
    return res


def json_document(res: AdviseResult) -> dict:
    """The ``--json`` document: ``verdict``, ``rows``, ``pareto``, ``equal_capex``,
    ``equal_iteration`` (per job), ``breakeven_usd``, ``ideal_iteration_s``, ``params``."""
    rows = res.rows.replace({np.nan: None}).to_dict(orient="records")
    for row in rows:  # a count (a float in a column with NaN: the static rows have none)
        if isinstance(row.get("reconfigurations"), float):
            row["reconfigurations"] = int(row["reconfigurations"])
    extra = {}
    if res.mix is not None:  # several jobs: the mix as one purchase
        extra["mix"] = res.mix
    if res.candidates is not None:  # --cosearch: every plan on every fabric
        extra["candidates"] = res.candidates.replace({np.nan: None}).to_dict(orient="records")
    return {
        "verdict": res.verdict,
        "rows": rows,
        "pareto": {j: v["pareto"] for j, v in res.judged.items()},
        "equal_capex": {j: v["equal_capex"] for j, v in res.judged.items()},
        "equal_iteration": {j: v["equal_iteration"] for j, v in res.judged.items()},
        "breakeven_usd": {j: v["breakeven_usd"] for j, v in res.judged.items()},
        "ideal_iteration_s": res.ideal,
        "ideal_collectives": res.ideal_collectives,
        "params": res.params,
        **extra,
        "wall_s": res.wall_s,
    }
