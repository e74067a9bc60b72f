"""The one exception type for bad input, shared by every topoopt package.

It lives in ``traffic`` because ``traffic`` is the bottom of the dependency chain
(traffic <- topoopt core <- solvers <- edges); ``topoopt.errors`` re-exports it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["InputError", "check", "check_finite", "one_line", "preview"]

PREVIEW_CHARS = 120
"""Longest value shown in an error message (longer ones are cut and end in ``...``)."""


_BREAKS = {c: repr(chr(c))[1:-1] for c in (*range(32), 127, 0x85, 0x2028, 0x2029)}


def one_line(text: str) -> str:
    r"""``text`` with line breaks and other control characters escaped (a field name or key
    from a file may hold any character; the message stays one line).

    >>> one_line("a\nb\tc")
    'a\\nb\\tc'
    """
    return text.translate(_BREAKS)


def preview(value: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short text of ``value`` for an error message, built without materialising it.

    Strings are quoted; lists, tuples and mappings are written item by item until ``limit``
    characters are reached, so a huge (or alias-shared, exponentially large) structure costs only
    what is shown. Large integers and arrays are summarised.

    Examples
    --------
    >>> preview("16"), preview(0), preview([0, 1]), preview({"a": (1,)})
    ("'16'", '0', '[0, 1]', "{'a': (1,)}")
    >>> x = [0]
    >>> for _ in range(200):
    ...     x = [x, x]  # 2**200 leaves
    >>> len(preview(x)) <= 120
    True
    >>> preview(10**5000)
    'an integer of 16610 bits'
    """
    parts: list[str] = []
    budget = [limit + 4]

    def put(s: str) -> bool:
        parts.append(s)
        budget[0] -= len(s)
        return budget[0] > 0

    def walk(v: Any, top: bool) -> bool:
        if type(v).__module__ == "numpy" and getattr(v, "shape", None) == ():
            v = v.item()  # a numpy scalar shows as its Python value
        if isinstance(v, str):
            return put(repr(v[: budget[0]]) if not top or len(v) > budget[0] else repr(v))
        if isinstance(v, bool) or v is None:
            return put(repr(v))
        if isinstance(v, int):
            if v.bit_length() > 256:
                return put(f"an integer of {v.bit_length()} bits")
            return put(str(v))
        if isinstance(v, float):
            return put(repr(v))
        if isinstance(v, dict):
            if not put("{"):
                return False
            for i, (k, x) in enumerate(v.items()):
                if (i and not put(", ")) or not walk(k, False) or not put(": "):
                    return False
                if not walk(x, False):
                    return False
            return put("}")
        if isinstance(v, list | tuple):
            if not put("[" if isinstance(v, list) else "("):
                return False
            for i, x in enumerate(v):
                if (i and not put(", ")) or not walk(x, False):
                    return False
            if isinstance(v, tuple) and len(v) == 1 and not put(","):
                return False
            return put("]" if isinstance(v, list) else ")")
        shape = getattr(v, "shape", None)
        if isinstance(shape, tuple) and shape and hasattr(v, "dtype"):
            if getattr(v, "size", 0) <= 16:
                return put(str(v.tolist()))
            return put(f"an array of shape {shape}")
        return put(str(v) if top else repr(v))

    walk(value, True)
    out = "".join(parts)
    if len(out) > limit:
        out = out[: limit - 3] + "..."
    return out


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
        text = f"{one_line(str(field))}: got {preview(value)}; allowed: {one_line(str(allowed))}"
        super().__init__(text)

    def __reduce__(self):
        # pickled by its three fields (a solver's worker process sends it back to its parent)
        return (type(self), (self.field, self.value, self.allowed))


def check(condition: bool, field: str, value: Any, allowed: str) -> None:
    """Raise :class:`InputError` unless ``condition`` holds (never an ``assert``)."""
    if not condition:
        raise InputError(field, value, allowed)


def check_finite(
    obj: Any, source: str, what: str = "result", skip: tuple[str, ...] = ("info",)
) -> None:
    """Raise :class:`InputError` naming ``source`` (the input) when a result holds a non-finite
    number (a time, cost or rate that is NaN or infinite), instead of printing ``null``.

    ``obj`` is a result document: mappings, lists, tuples, numbers and numpy arrays. Values under
    a key in ``skip`` (``info``: a solver's facts, where ``-inf`` means "no bound") are not
    checked; the JSON writers show them as ``null``.

    Examples
    --------
    >>> check_finite({"makespan": 1.0, "flows": [{"finish": 2.0}]}, "f.json")
    >>> check_finite({"objective_s": 1.0, "info": {"bound_s": float("-inf")}}, "plan.yaml")
    >>> check_finite({"makespan": float("inf")}, "f.json")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: f.json: got 'result.makespan = inf'; allowed: an input giving finite times, costs and rates
    """  # noqa: E501
    import numpy as np

    stack: list[tuple[Any, str]] = [(obj, what)]
    while stack:
        v, at = stack.pop()
        if isinstance(v, float | np.floating):
            if not np.isfinite(v):
                bad: Any = float(v)
                break
        elif isinstance(v, dict):
            items = [(k, x) for k, x in v.items() if k not in skip]
            stack.extend((x, f"{at}.{k}") for k, x in reversed(items))
        elif isinstance(v, list | tuple):
            stack.extend((x, f"{at}[{i}]") for i, x in reversed(list(enumerate(v))))
        elif isinstance(v, np.ndarray) and v.dtype.kind in "fc" and v.size:
            ok = np.isfinite(v)
            if not ok.all():
                i = int(np.flatnonzero(~ok.reshape(-1))[0])
                at, bad = f"{at}[{i}]", v.reshape(-1)[i]
                break
    else:
        return
    raise InputError(source, f"{at} = {bad}", "an input giving finite times, costs and rates")
