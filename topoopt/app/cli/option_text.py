"""Option values as they were typed, before typer converts them.

- Numbers: ``--degree 2.0`` is not an integer and ``--link-gbps 1_00`` is not a number. typer
  converts through pydantic's lax mode, which takes ``"2.0"`` as the integer 2, and Python's
  ``float``, which reads ``"1_00"`` as 100. :func:`strict_numbers` checks the text of every
  integer and float parameter first, so such a value is a one-line usage error (exit 2).
- Output paths: ``pathlib.Path("m.csv/")`` is ``m.csv``, so the trailing ``/`` of
  ``--out m.csv/`` (a folder was meant) is lost. The text of every output parameter is kept in
  :data:`OUTPUT_TEXT` for :func:`topoopt.app.cli.common.prepare_output`.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

import typer

__all__ = ["INTEGER_TEXT", "FLOAT_TEXT", "OUTPUT_PARAMETERS", "OUTPUT_TEXT", "strict_numbers"]

OUTPUT_PARAMETERS = frozenset({"out", "html", "csv", "graphml"})
"""Parameters that name an output file or folder (never read as inputs)."""

OUTPUT_TEXT: dict[str, str | None] = {}
"""Output parameter name -> its text as typed, of the command being parsed."""

INTEGER_TEXT = re.compile(r"-?[0-9]+")
"""An integer option: decimal digits, optionally after a minus sign."""

FLOAT_TEXT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|-?(inf|nan)", re.I)
"""A float option: decimal digits with an optional point and exponent (``inf`` and ``nan`` are
read, then refused by :func:`topoopt.app.cli.common.check_edge_units` naming the option)."""


def _number_kind(annotation: Any) -> type | None:
    if annotation is bool:
        return None
    if annotation in (int, float):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = {_number_kind(a) for a in typing.get_args(annotation) if a is not type(None)}
        if len(kinds) == 1:
            return kinds.pop()
    return None


def _check(param: Any, kind: type, value: Any) -> None:
    texts = value if isinstance(value, list | tuple) else [value]
    pattern = INTEGER_TEXT if kind is int else FLOAT_TEXT
    for text in texts:
        if isinstance(text, str) and not pattern.fullmatch(text.strip()):
            name = "an integer (digits)" if kind is int else "a decimal number (e.g. 100 or 1e2)"
            raise typer.BadParameter(f"{text!r} is not {name}", param=param)


def strict_numbers(cmd: Any) -> None:
    """Check the text of every integer and float parameter of ``cmd`` before typer converts it,
    and keep the text of its output parameters (module docstring)."""
    for p in getattr(cmd, "params", ()):
        if p.name in OUTPUT_PARAMETERS:
            keep = p.process_value

            def process_output(ctx, value, _name=p.name, _keep=keep):
                OUTPUT_TEXT[_name] = value if isinstance(value, str) else None
                return _keep(ctx, value)

            p.process_value = process_output
            continue
        desc = getattr(p, "type_descriptor", None)
        kind = _number_kind(getattr(desc, "annotation", None))
        if kind is None:
            continue
        convert = p.process_value

        def process_value(ctx, value, _p=p, _kind=kind, _convert=convert):
            _check(_p, _kind, value)
            return _convert(ctx, value)

        p.process_value = process_value
