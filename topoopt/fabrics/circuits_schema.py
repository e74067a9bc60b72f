"""Circuit files (``fabric direct --circuits``) and circuit rows (pre-wired lists), validated.

A circuits file is either

- JSON: a list of rows ``[[u, v], [u, v, count], ...]`` or an object ``{"circuits": [rows]}``
  (no other key), read by the strict decoder (:mod:`traffic.decode`);
- text/CSV: one ``u v [count]`` row per line, commas or spaces between fields, ``#`` comments,
  and at most one header line of names (e.g. ``u,v,count``) before the first row.

Every value is a JSON integer (no ``true``, no ``1.0``, no ``"1"``): ``u`` and ``v`` are server
ids ``0 <= id < 2**31``, ``count`` defaults to 1 and is ``1 <= count < 2**31``; ``u != v``. A file
with no row is an error ("not circuits"), never an empty fabric. Server ids are checked against
the fabric by :func:`topoopt.fabrics.direct_connect.normalise_circuits` once the servers are
known.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from traffic.decode import decode_text, parse_json, read_input, validate
from traffic.errors import InputError

__all__ = [
    "MAX_ID",
    "CircuitRow",
    "CircuitsDocument",
    "rows_array",
    "parse_circuit_text",
    "load_circuits_file",
]

MAX_ID = 2**31 - 1
"""Largest server id and count in a circuit row."""

_Id = Annotated[int, Field(ge=0, le=MAX_ID)]
CircuitRow = Annotated[list[_Id], Field(min_length=2, max_length=3)]
"""``[u, v]`` or ``[u, v, count]`` with non-negative integers (count checked by
:func:`rows_array`)."""

_INT = re.compile(r"-?[0-9]{1,19}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ ]*")


class CircuitsDocument(BaseModel):
    """``{"circuits": [[u, v, count], ...]}`` (at least one row)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    circuits: Annotated[list[CircuitRow], Field(min_length=1)]


def rows_array(
    rows: list[list[int]], name: str, min_count: int = 1, where=None, distinct: bool = True
) -> np.ndarray:
    """Validated rows as ``int64 (m, 3)`` (a missing count is 1).

    ``where(i)`` names row ``i`` in messages (default ``f"{name} circuits[{i}]"``). Checked: ids
    and counts are in ``0..2**31-1``, ``u != v`` (if ``distinct``) and ``count >= min_count``.

    Examples
    --------
    >>> rows_array([[0, 1], [2, 1, 3]], "c.json").tolist()
    [[0, 1, 1], [2, 1, 3]]
    >>> rows_array([[0, 0, 1]], "c.json")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: c.json circuits[0]: got [0, 0, 1]; allowed: a circuit between two different servers
    """  # noqa: E501
    label = where or (lambda i: f"{name} circuits[{i}]")
    out = np.ones((len(rows), 3), np.int64)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    if out.size:
        if np.any(out < 0) or np.any(out > MAX_ID):
            i = int(np.flatnonzero(((out < 0) | (out > MAX_ID)).any(axis=1))[0])
            raise InputError(label(i), rows[i], f"integers 0..{MAX_ID}")
        same = np.flatnonzero(out[:, 0] == out[:, 1])
        if distinct and same.size:
            i = int(same[0])
            raise InputError(label(i), rows[i], "a circuit between two different servers")
        low = np.flatnonzero(out[:, 2] < min_count)
        if low.size:
            i = int(low[0])
            raise InputError(label(i), rows[i], f"a count >= {min_count}")
    return out


def parse_circuit_text(text: str, name: str, header: str | None = None) -> list[list[int]]:
    """Rows of a text/CSV circuit list (see the module docstring).

    ``header``: when given (e.g. ``"u,v,count"``), the first non-comment line must be exactly
    that header (case and spaces ignored) and every row has as many fields; otherwise a header
    of names is optional and rows have 2 or 3 fields.

    Examples
    --------
    >>> parse_circuit_text("# ring\\nu v count\\n0 1 2\\n1,2\\n", "c.txt")
    [[0, 1, 2], [1, 2]]
    """
    rows: list[list[int]] = []
    want = None if header is None else [h.strip().lower() for h in header.split(",")]
    seen_first = False
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [t for t in re.split(r"[,\s]+", line) if t] if "," not in line else line.split(",")
        parts = [t.strip() for t in parts]
        first, seen_first = not seen_first, True
        if want is not None and first:
            if [t.lower() for t in parts] != want:
                raise InputError(f"{name}:{lineno}", line, f"the header {header}")
            continue
        if all(_INT.fullmatch(t) for t in parts):
            nf = len(parts)
            if (want is not None and nf != len(want)) or (want is None and nf not in (2, 3)):
                fields = len(want) if want is not None else "2 or 3"
                raise InputError(f"{name}:{lineno}", line, f"{fields} integers per row")
            rows.append([int(t) for t in parts])
            continue
        if want is None and first and all(_NAME.fullmatch(t) for t in parts) and len(parts) <= 3:
            continue  # a header line of names
        raise InputError(f"{name}:{lineno}", line, "integers u v [count] (64-bit)")
    return rows


def load_circuits_file(path: str | os.PathLike) -> np.ndarray:
    """Read and validate a circuits file; ``int64 (m, 3)`` rows ``[u, v, count]``, m >= 1.

    Raises
    ------
    InputError
        Naming the file, the row or line, the value and what is allowed; a file holding no
        circuit (empty, only a header, ``[]``, another kind of document) is an error.
    """
    p = Path(path)
    name = str(p)
    text = decode_text(read_input(p, "circuits file"), name)
    if p.suffix.lower() == ".json" or text.lstrip().startswith(("[", "{")):
        data: Any = parse_json(text, name)
        if isinstance(data, list):
            data = {"circuits": data}
        elif not isinstance(data, dict):
            raise InputError(name, type(data).__name__, 'a list of circuits or {"circuits": [...]}')
        doc = validate(CircuitsDocument, data, name)
        return rows_array(doc.circuits, name)
    rows = parse_circuit_text(text, name)
    if not rows:
        raise InputError(name, "no circuit", "at least one row u v [count] (a circuits file)")
    return rows_array(rows, name, where=lambda i: f"{name} row {i + 1}")
