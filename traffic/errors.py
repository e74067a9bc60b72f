"""The one exception type for bad input, shared by every topoopt package.

It lives in ``traffic`` because ``traffic`` is the bottom of the dependency chain
(traffic <- topoopt core <- solvers <- edges); ``topoopt.errors`` re-exports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["InputError", "check"]


class InputError(ValueError):
    """Bad user input, reported as one line naming the field, the value and what is allowed.

    Parameters
    ----------
    field : str
        Dotted path of the offending field, e.g. ``"parallelism.tp"`` or ``"plan.yaml"``.
    value : Any
        The value that was given.
    allowed : str
        What would have been accepted, in words.

    Examples
    --------
    >>> str(InputError("parallelism.tp", 0, "a positive integer"))
    'parallelism.tp: got 0; allowed: a positive integer'
    """

    def __init__(self, field: str, value: Any, allowed: str):
        self.field = field
        self.value = value
        self.allowed = allowed
        shown = repr(value) if isinstance(value, str) else str(value)
        if len(shown) > 120:
            shown = shown[:117] + "..."
        super().__init__(f"{field}: got {shown}; allowed: {allowed}")


def check(condition: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`InputError` unless ``condition`` holds (never an ``assert``)."""
    if not condition:
        raise InputError(field, value, allowed)
