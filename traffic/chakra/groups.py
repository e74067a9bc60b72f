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
from pathlib import Path

from traffic.errors import InputError

__all__ = ["parse_comm_groups", "parse_comm_groups_text", "comm_groups_text"]

MAX_BYTES = 64 << 20
_ALLOWED = 'a JSON object {"<pg_name>": [rank, ...]}'


def _no_dupes(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise InputError("comm_group.json", f"key {k!r} twice", "unique group names")
        out[k] = v
    return out


def parse_comm_groups_text(text: str, source: str) -> dict[str, tuple[int, ...]]:
    """Parse and check a comm-group document (ranks distinct, non-negative integers)."""

    def bad_const(c):
        raise InputError(source, c, "finite numbers")

    try:
        doc = json.loads(text, object_pairs_hook=_no_dupes, parse_constant=bad_const)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(source, "malformed JSON", _ALLOWED) from None
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
    p = Path(path)
    try:
        if p.stat().st_size > MAX_BYTES:
            raise InputError(str(p), f"{p.stat().st_size} bytes", f"at most {MAX_BYTES} bytes")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(str(p), "not UTF-8 text", _ALLOWED) from None
    except OSError as e:
        raise InputError(str(p), f"unreadable ({e.strerror or e})", _ALLOWED) from None
    return parse_comm_groups_text(text, str(p))


def comm_groups_text(groups: dict[str, tuple[int, ...]]) -> str:
    """The JSON text of a comm-group file."""
    doc = {k: [int(r) for r in v] for k, v in groups.items()}
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"
