"""Sweeps: the same comparison over port counts and port bandwidths."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from topoopt.studies.compare import FABRICS, compare
from traffic.workload import Workload

__all__ = ["sweep"]


def sweep(
    workload: Workload,
    degrees: Sequence[int] = (4, 8),
    link_bandwidths: Sequence[float] = (5e9, 12.5e9, 25e9),
    fabrics: Sequence[str] = FABRICS,
    *,
    time_limit_s: float = 30.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """:func:`~topoopt.studies.compare.compare` for every ``(degree, link_bandwidth)``.

    Returns
    -------
    pandas.DataFrame
        The comparison rows with ``degree`` and ``link_bandwidth`` (bytes/s) columns added.
    """
    frames = []
    for d in degrees:
        for b in link_bandwidths:
            res = compare(
                workload, fabrics, d, b, seed=seed, time_limit_s=time_limit_s, progress=progress
            )
            frames.append(res.table.assign(degree=d, link_bandwidth=b))
    return pd.concat(frames, ignore_index=True)
