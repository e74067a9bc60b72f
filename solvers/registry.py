"""The solvers by name: one call, ``solve(problem, name, ...)``, for the CLI and the studies; and
``design.json`` read back into a design (:func:`load_design`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from solvers.hybrid_design import HybridDesign
from solvers.model.design import Design, design_fields
from solvers.model.design_schema import HybridDocument, validate_design_document
from solvers.model.problem import DesignProblem
from topoopt.units import duration_text
from traffic.decode import decode_text, parse_json, read_input
from traffic.errors import InputError

__all__ = [
    "SOLVERS",
    "OBJECTIVES",
    "SEARCH_COLUMNS",
    "solve",
    "search_summary",
    "search_warning",
    "load_design",
    "check_design_rings",
]

SOLVERS = ("topoopt", "topoopt-released", "expander", "joint")
"""Solver names accepted by :func:`solve`."""

OBJECTIVES = ("iteration", "congestion")
"""What the ``joint`` solver minimises (:func:`solve`'s ``objective``)."""

SEARCH_COLUMNS = ("search_objective", "search_reason", "deterministic", "stopped_by")
"""What :func:`search_summary` reports about a search (a ``compare`` row's columns)."""


def search_summary(design: Design) -> dict:
    """The objective a search actually used, why it fell back (None: it did not), whether the
    result is deterministic (no wall-clock cut) and what stopped it; ``{}`` for a one-shot
    baseline.

    Examples
    --------
    >>> from types import SimpleNamespace as D
    >>> search_summary(D(info={"objective": "congestion", "objective_reason": "too large",
    ...                        "deterministic": True, "stopped_by": "work limit"}))
    {'search_objective': 'congestion', 'search_reason': 'too large', 'deterministic': True, \
'stopped_by': 'work limit'}
    >>> search_summary(D(info={}))
    {}
    """
    info = dict(design.info or {})
    if "deterministic" not in info:
        return {}
    keys = ("objective", "objective_reason", "deterministic", "stopped_by")
    return {col: info.get(k) for col, k in zip(SEARCH_COLUMNS, keys, strict=True)}


def search_warning(design: Design, label: str = "joint") -> str | None:
    """One line for stderr when the search fell back to another objective or the wall clock
    cut it (the result then depends on the machine's speed); None otherwise.

    Examples
    --------
    >>> from types import SimpleNamespace as D
    >>> search_warning(D(info={"objective": "congestion", "objective_reason": "no compute model",
    ...                        "deterministic": False, "time_limit_cut": ["swap search"]}))
    'warning: joint: the congestion objective decided (no compute model); the time limit cut \
swap search (not deterministic: raise --time-limit)'
    """
    info = dict(design.info or {})
    parts = []
    if info.get("objective_reason"):
        parts.append(f"the {info.get('objective')} objective decided ({info['objective_reason']})")
    if info.get("deterministic") is False:
        cut = ", ".join(info.get("time_limit_cut") or ["the search"])
        parts.append(f"the time limit cut {cut} (not deterministic: raise --time-limit)")
    return f"warning: {label}: " + "; ".join(parts) if parts else None


def solve(
    problem: DesignProblem,
    name: str = "joint",
    *,
    time_limit_s: float = 60.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    work_limit: float | None = None,
    objective: str = "iteration",
    priorities: bool = False,
) -> Design:
    """Design the optical circuits of ``problem`` with solver ``name``.

    Parameters
    ----------
    problem : DesignProblem
    name : str
        One of :data:`SOLVERS`: ``topoopt`` (the paper's TopologyFinder), ``topoopt-released``
        (the released code: all ports to AllReduce rings), ``expander`` (random regular,
        seeded), ``joint`` (our optimizer, warm-started from ``topoopt``).
    time_limit_s : float
        Wall-clock cap of the ``joint`` optimizer (the baselines are one-shot); when it cuts the
        search the design says so (``info["deterministic"]`` False).
    seed : int
        Seed of every random choice.
    progress : callable, optional
        Receives one-line progress messages (incumbent, bound) during long solves.
    work_limit : float, optional
        Deterministic work budget of the ``joint`` search, in work units (about a second of one
        core each; default with the congestion objective
        :func:`solvers.joint.driver.default_work_limit`:
        :data:`~solvers.joint.driver.DEFAULT_WORK_LIMIT` (20) up to ``LP_MAX_SERVERS`` (128)
        servers, :data:`~solvers.joint.driver.LP_FREE_WORK_LIMIT` (8) above, where the search
        routes without an LP). The same problem, seed and work limit give the same design on
        any machine.
    objective : {"iteration", "congestion"}
        What ``joint`` minimises (the baselines ignore it). ``iteration`` (default): the flow
        model's iteration time, steered by the critical path
        (:func:`solvers.joint.iteration_search.iteration_design`; default work limit
        :data:`~solvers.joint.iteration_search.DEFAULT_ITERATION_WORK_LIMIT`); it falls back to
        ``congestion`` when the problem has no compute model (``info["objective"]`` says
        which ran). ``congestion``: the per-phase congestion objective
        (:func:`solvers.joint.driver.congestion_search`), finalists judged by the flow model.
    priorities : bool
        ``joint --objective iteration`` only: per-class strict priority may be part of the
        design (``Design.priority``; :func:`solvers.joint.iteration_search.iteration_design`).

    Returns
    -------
    Design
        For ``joint``, ``info["trace"]`` lists the incumbent and the bound over wall time.
        When ``problem.ocs`` is set, the design fits that optical layer (its circuits placed on
        the OCSes, repaired and routed again when the method's did not fit:
        :func:`solvers.ocs_repair.respect_ocs`; ``info["ocs"]`` says which).
    """
    design = _method_design(
        problem, name, time_limit_s=time_limit_s, seed=seed, progress=progress,
        work_limit=work_limit, objective=objective, priorities=priorities,
    )  # fmt: skip
    if problem.ocs is not None:
        from solvers.ocs_repair import respect_ocs

        design = respect_ocs(design, problem)
    return design


def _method_design(
    problem: DesignProblem,
    name: str,
    *,
    time_limit_s: float,
    seed: int,
    progress: Callable[[str], None] | None,
    work_limit: float | None,
    objective: str,
    priorities: bool,
) -> Design:
    """The design of solver ``name`` (:func:`solve` without the optical-layer repair)."""
    if objective not in OBJECTIVES:
        raise InputError("objective", objective, f"one of {', '.join(OBJECTIVES)}")
    if name == "topoopt" or name == "topoopt-released":
        from solvers.baselines.topoopt_method import topoopt_design

        return topoopt_design(problem, name, seed=seed)
    if name == "expander":
        from solvers.baselines.expander_design import expander_design

        return expander_design(problem, seed=seed)
    if name == "joint":
        from solvers.joint import congestion_search

        trace: list[dict] = []
        t0 = time.perf_counter()

        def report(incumbent_s: float, bound_s: float) -> None:
            trace.append(
                {
                    "t": time.perf_counter() - t0,
                    "objective_s": float(incumbent_s),
                    "lower_bound_s": float(bound_s),
                }
            )
            if progress is not None:
                progress(
                    f"joint: incumbent {duration_text(incumbent_s)}, "
                    f"lower bound {duration_text(bound_s)}"
                )

        if objective == "iteration":
            from solvers.joint.iteration_search import iteration_design

            design = iteration_design(
                problem,
                time_limit_s=time_limit_s,
                seed=seed,
                progress=report,
                work_limit=work_limit,
                priorities=priorities,
            )
        else:
            design = congestion_search(
                problem,
                time_limit_s=time_limit_s,
                seed=seed,
                progress=report,
                work_limit=work_limit,
            )
            design = replace(design, info={**dict(design.info), "objective": "congestion"})
        trace.append(
            {
                "t": design.wall_s,
                "objective_s": design.objective_s,
                "lower_bound_s": design.lower_bound_s,
            }
        )
        return replace(design, info={**dict(design.info), "trace": trace})
    raise InputError("solver", name, f"one of {', '.join(SOLVERS)}")


def _refuse(field: str, value, allowed: str) -> None:
    raise InputError(field, value, allowed)


def _first_true(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_design_rings(design, problem, name: str = "design.json") -> None:
    """Check a design's rings against the problem it is simulated with: every ring's phase is a
    phase of ``problem``, its group index exists there, and its members are the group's servers.

    Raises
    ------
    InputError
        Naming the ring (``design.json rings[3]``), the value and what is allowed.
    """
    phases = {ph.name: ph for ph in problem.phases}
    for key in ("rings", "collectives"):
        for i, r in enumerate(getattr(design, key, ())):
            ph = phases.get(r["phase"])
            if ph is None:
                _refuse(f"{name} {key}[{i}].phase", r["phase"], f"one of {', '.join(phases)}")
            g = int(r["group"])
            if g >= ph.n_groups:
                _refuse(f"{name} {key}[{i}].group", g, f"a group index 0..{ph.n_groups - 1}")
            want = np.unique(np.asarray(ph.group(g), np.int64)).tolist()
            if list(r["members"]) != want:
                _refuse(f"{name} {key}[{i}].members", r["members"], f"{want} (the group's servers)")


def load_design(path: str | os.PathLike):
    """Read ``design.json`` (optical or hybrid) strictly; a :class:`~solvers.model.design.Design` or
    :class:`~solvers.hybrid_design.HybridDesign`.

    Raises
    ------
    InputError
        Naming the file and the field (module docstring).
    """
    name = str(path)
    data = parse_json(decode_text(read_input(path, "design.json"), name), name)
    doc = validate_design_document(data, name)
    fields = design_fields(doc)
    if isinstance(doc, HybridDocument):
        spec = doc.electrical.model_dump(exclude_none=True)
        d = HybridDesign(**fields, electrical=spec, device=doc.device)
        n_nodes = d.fabric().n_nodes
        nodes = d.routing.nodes
        if nodes.size and nodes.max() >= n_nodes:
            i = _first_true(nodes >= n_nodes)
            _refuse(
                f"{name} routing.nodes[{i}]", int(nodes[i]), f"a fabric node id 0..{n_nodes - 1}"
            )
        return d
    return Design(**fields)
