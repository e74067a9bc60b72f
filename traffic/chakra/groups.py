"""ASTRA-sim's comm-group file: which ranks make up each process group.

A JSON object ``{"<pg_name>": [rank, ...], ...}`` (ASTRA-sim's ``--comm-group-configuration``).
Chakra nodes name their group by ``pg_name``; the file gives its members, in ring order.

Examples
--------
>>> parse_comm_groups_text('{"1": [0, 1], "2": [2, 3]}', "comm_group.json")
{'1': (0, 1), '2': (2, 3)}
>>> parse_comm_groups_text('{"1": [0, 0]}', "g.json")
Traceback (most recent call last):
...
traffic.errors.InputError: g.json: group '1': got [0, 0]; allowed: distinct ranks >= 0
"""

from __future__ import annotations

import json
import os

from traffic.errors import InputError

__all__ = ["parse_comm_groups", "parse_comm_groups_text", "comm_groups_text"]

MAX_BYTES = 64 << 20
_ALLOWED = 'a JSON object {"<pg_name>": [rank, ...]}'


def parse_comm_groups_text(text: str, source: str) -> dict[str, tuple[int, ...]]:
    """Parse and check a comm-group document (strict JSON through :mod:`traffic.decode`; ranks
    distinct, non-negative integers)."""
    from traffic.decode import parse_json

    doc = parse_json(text, source)
    if not isinstance(doc, dict):
        raise InputError(source, type(doc).__name__, _ALLOWED)
    out: dict[str, tuple[int, ...]] = {}
    for k, v in doc.items():
        ok = (
            isinstance(v, list)
            and len(v) > 0
            and all(type(x) is int and 0 <= x < 1 << 31 for x in v)
            and len(set(v)) == len(v)
        )
        if not ok:
            shown = v if isinstance(v, list) and len(v) <= 8 else type(v).__name__
            raise InputError(f"{source}: group {k!r}", shown, "distinct ranks >= 0")
        out[k] = tuple(v)
    return out


def parse_comm_groups(path: str | os.PathLike) -> dict[str, tuple[int, ...]]:
    """Read a comm-group file (see :func:`parse_comm_groups_text`)."""
    from traffic.decode import decode_text, read_input

    text = decode_text(read_input(path, "comm_group.json", MAX_BYTES), str(path))
    return parse_comm_groups_text(text, str(path))


def comm_groups_text(groups: dict[str, tuple[int, ...]]) -> str:
    """The JSON text of a comm-group file."""
    doc = {k: [int(r) for r in v] for k, v in groups.items()}
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
