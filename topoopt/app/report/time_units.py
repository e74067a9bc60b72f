"""The unit of a column of times in a table: ms, or seconds once a value passes 10 s."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SECONDS_ABOVE_S", "time_unit"]

SECONDS_ABOVE_S = 10.0
"""A column of times is printed in seconds when any of its values exceeds this many seconds
(``60.433`` s, not ``60433.395`` ms)."""


def time_unit(*columns_s: Iterable[float]) -> tuple[str, float]:
    """``(unit, factor)`` for times given in seconds: ``("s", 1.0)`` when any finite value is
    above :data:`SECONDS_ABOVE_S`, else ``("ms", 1e3)``; several columns share one unit.

    Examples
    --------
    >>> time_unit([0.5, 7.6])
    ('ms', 1000.0)
    >>> time_unit([0.5], [60.4])
    ('s', 1.0)
    """
    import numpy as np  # here: the command line's start-up (``--help``) imports no numpy

    values = np.concatenate([np.asarray(list(c), dtype=float).ravel() for c in columns_s] or [[]])
    values = values[np.isfinite(values)]
    if values.size and float(np.max(np.abs(values))) > SECONDS_ABOVE_S:
        return "s", 1.0
    return "ms", 1e3
