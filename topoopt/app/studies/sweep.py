"""Sweeps: the same comparison over plans, port counts and port bandwidths.

Every ``(plan, degree, link_bandwidth)`` point is one :func:`~topoopt.app.studies.compare.compare`
(all fabrics of a point share the TopoOpt design the cost-equivalent fat-tree is priced against),
run as one evaluation of :class:`topoopt.app.studies.engine.Engine`: in-process with ``workers=1``,
else as Ray tasks. Rows come back in the order of the points, whatever the worker count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from topoopt.app.studies.compare import FABRICS, compare
from topoopt.app.studies.engine import Engine
from traffic.workload import Workload

__all__ = ["SweepPoint", "sweep", "sweep_point"]


@dataclass(frozen=True)
class SweepPoint:
    """One point of a sweep (a picklable task)."""

    plan: str
    workload: Workload
    degree: int
    link_bandwidth: float
    fabrics: tuple[str, ...]
    time_limit_s: float
    seed: int


def sweep_point(pt: SweepPoint) -> pd.DataFrame:
    """The comparison table of one point, with ``plan``, ``degree`` and ``link_bandwidth``."""
    res = compare(
        pt.workload,
        pt.fabrics,
        pt.degree,
        pt.link_bandwidth,
        seed=pt.seed,
        time_limit_s=pt.time_limit_s,
    )
    return res.table.assign(plan=pt.plan, degree=pt.degree, link_bandwidth=pt.link_bandwidth)


def sweep(
    workload: Workload | Mapping[str, Workload],
    degrees: Sequence[int] = (4, 8),
    link_bandwidths: Sequence[float] = (5e9, 12.5e9, 25e9),
    fabrics: Sequence[str] = FABRICS,
    *,
    time_limit_s: float = 30.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    address: str | None = None,
) -> pd.DataFrame:
    """:func:`~topoopt.app.studies.compare.compare` for every ``(plan, degree, link_bandwidth)``.

    Parameters
    ----------
    workload : Workload or Mapping of str to Workload
        One workload, or several by plan name (the plan axis of the sweep).
    workers, address
        Where the points run (:class:`~topoopt.app.studies.engine.Engine`): 1 and no address runs
        them in this process; otherwise on Ray.
    progress : callable, optional
        Receives one line per point before it starts (in-process runs) or per batch (Ray).

    Returns
    -------
    pandas.DataFrame
        The comparison rows with ``plan``, ``degree`` and ``link_bandwidth`` (bytes/s) columns.
    """
    plans = workload if isinstance(workload, Mapping) else {workload.name: workload}
    points = [
        SweepPoint(name, w, int(d), float(b), tuple(fabrics), float(time_limit_s), int(seed))
        for name, w in plans.items()
        for d in degrees
        for b in link_bandwidths
    ]
    say = progress or (lambda _m: None)
    say(f"sweep: {len(points)} points x {len(fabrics)} fabrics")
    with Engine(workers, address, progress=progress is not None) as eng:
        frames = eng.map(sweep_point, points, label="sweep points")
    return pd.concat(frames, ignore_index=True)
