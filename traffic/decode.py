"""Strict decoding of every input file: bytes -> text -> JSON/YAML values -> a pydantic model.

Every loader of the project (plans, designs, flow sets, circuits, pre-wired lists, price tables,
and every future kind) reads its file through this module, so all inputs share one set of rules:

- the file is read with a size cap (:func:`traffic.limits.max_input_bytes`); a missing file, a
  folder or a device is an error naming the path;
- text must be UTF-8 without NUL bytes (binary data is refused, naming the file and the offset);
- JSON: duplicate keys, ``NaN``/``Infinity`` (and numbers that overflow to infinity), integers
  beyond int64 and nesting deeper than :data:`~traffic.limits.MAX_DEPTH` are refused;
- YAML: the same, plus duplicate keys in a mapping, tags outside plain JSON-like values
  (timestamps, sets, binary, Python objects) and alias bombs. Aliases are legal YAML, so the
  composer counts every node at its *expanded* size while it reads (an alias costs as much as
  what it points to) and stops past :data:`~traffic.limits.MAX_YAML_NODES`: a 500-byte bomb
  that would expand to 10^9 values is refused after reading it once, without expanding it;
- :func:`validate` runs a pydantic model and turns its first error into one
  :class:`~traffic.errors.InputError` naming the field path (``routing.src[3]``).

Every error is an :class:`~traffic.errors.InputError` whose field starts with the file name.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from traffic.errors import InputError
from traffic.limits import (
    INT64_MAX,
    MAX_DEPTH,
    MAX_YAML_BYTES,
    max_input_bytes,
)

__all__ = [
    "read_input",
    "decode_text",
    "parse_json",
    "parse_yaml",
    "load_document",
    "check_values",
    "validate",
    "field_path",
    "first_error",
    "known_fields",
    "validation_error",
]

if TYPE_CHECKING:  # pydantic is imported where a model is validated (a light start-up)
    from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound="BaseModel")

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def read_input(path: str | os.PathLike, what: str, max_bytes: int | None = None) -> bytes:
    """The bytes of the input file ``path`` (``what`` names the kind, for messages).

    Raises
    ------
    InputError
        Missing, a folder or a device, unreadable, or larger than ``max_bytes`` (default
        :func:`traffic.limits.max_input_bytes`).

    Examples
    --------
    >>> read_input("no-such-file.json", "design.json")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: no-such-file.json: got 'no such file'; allowed: an existing design.json
    """  # noqa: E501
    p = Path(path)
    cap = max_input_bytes() if max_bytes is None else int(max_bytes)
    try:
        st = p.stat()
        if stat.S_ISDIR(st.st_mode):
            raise InputError(str(p), "a folder", f"a {what} file")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            raise InputError(str(p), "a device", f"a {what} file")
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read, a socket fail it
            raise InputError(str(p), "a FIFO or socket", f"a regular {what} file")
        if st.st_size > cap:
            raise InputError(str(p), f"{st.st_size:,} bytes", f"a {what} of at most {cap:,} bytes")
        with open(p, "rb") as fh:
            data = fh.read(cap + 1)
    except FileNotFoundError:
        raise InputError(str(p), "no such file", f"an existing {what}") from None
    except (PermissionError, IsADirectoryError, OSError) as exc:
        raise InputError(str(p), f"unreadable ({exc.strerror or exc})", f"a {what}") from None
    if len(data) > cap:
        raise InputError(str(p), f"more than {cap:,} bytes", f"a {what} of at most {cap:,} bytes")
    return data


def decode_text(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a leading byte-order mark is dropped).

    Raises
    ------
    InputError
        NUL bytes (binary data) or bytes that are not UTF-8, naming ``name`` and the offset.

    Examples
    --------
    >>> decode_text(b"a: 1", "p.yaml")
    'a: 1'
    >>> decode_text(b"a: \\xff", "p.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: p.yaml: got 'byte 0xff at offset 3'; allowed: a UTF-8 text file
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(name, f"binary data (a NUL byte at offset {nul})", "a UTF-8 text file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start]
        raise InputError(
            name, f"byte 0x{bad:02x} at offset {exc.start}", "a UTF-8 text file"
        ) from None
    return text[1:] if text.startswith("\ufeff") else text


def _json_depth(raw: bytes, a: np.ndarray | None = None) -> int:
    r"""Deepest ``[``/``{`` nesting of JSON text, brackets inside strings not counted; vectorised.

    A quote is a string delimiter unless an odd run of backslashes precedes it. Only the quotes
    and brackets are kept (and the backslashes, when there are any), so the scan is a few passes
    over the bytes.

    >>> _json_depth(b'{"a": [[1], "]]]["], "b": {}}'), _json_depth(b'["\\\\", ["\\"]"]]')
    (3, 2)
    """
    a = np.frombuffer(raw, np.uint8) if a is None else a
    special = (a == ord("[")) | (a == ord("{")) | (a == ord("]")) | (a == ord("}"))
    special |= a == ord('"')
    escapes = b"\\" in raw
    if escapes:
        special |= a == ord("\\")
    pos = np.flatnonzero(special)
    c = a[pos]
    if not c.size:
        return 0
    quote = c == ord('"')
    if escapes:
        bs = c == ord("\\")
        k = np.arange(c.size)
        # a backslash run: consecutive backslashes at consecutive byte positions
        joined = np.zeros(c.size, bool)
        joined[1:] = bs[1:] & bs[:-1] & (np.diff(pos) == 1)
        run_start = np.maximum.accumulate(np.where(bs & ~joined, k, 0))
        run_len = k - run_start + 1
        before = np.zeros(c.size, np.int64)  # backslashes right before element k
        adj = np.zeros(c.size, bool)
        adj[1:] = bs[:-1] & (np.diff(pos) == 1)
        before[1:] = np.where(adj[1:], run_len[:-1], 0)
        quote &= before % 2 == 0
    inside = (np.cumsum(quote) % 2).astype(bool) & ~quote
    step = ((c == ord("[")) | (c == ord("{"))).astype(np.int32)
    step -= ((c == ord("]")) | (c == ord("}"))).astype(np.int32)
    step[inside] = 0
    return int(np.cumsum(step).max())


def _number_risks(a: np.ndarray) -> tuple[bool, bool]:
    """Whether the bytes hold a run of >= 19 digits (an integer that may leave int64) and an
    exponent of >= 3 digits or a run of >= 300 digits (a number that may overflow)."""
    d = (a >= ord("0")) & (a <= ord("9"))
    edges = np.flatnonzero(np.diff(np.concatenate(([False], d, [False])).astype(np.int8)))
    longest = int((edges[1::2] - edges[::2]).max()) if edges.size else 0
    e = np.flatnonzero((a == ord("e")) | (a == ord("E")))
    big_exp = False
    if e.size:
        sign = (e + 1 < a.size) & np.isin(a[np.minimum(e + 1, a.size - 1)], (ord("+"), ord("-")))
        first = e + 1 + sign
        ok = first + 2 < a.size
        f = first[ok]
        big_exp = bool(np.any(d[f] & d[f + 1] & d[f + 2]))
    return longest >= 19, big_exp or longest >= 300


def parse_json(text: str, name: str) -> Any:
    """Strict JSON: no duplicate keys, NaN, Infinity, integers beyond int64, deep nesting.

    Examples
    --------
    >>> parse_json('{"a": [1, 2.5]}', "x.json")
    {'a': [1, 2.5]}
    >>> for bad in ('{"a": 1, "a": 2}', '[NaN]', '[1e999]', '[9223372036854775808]', '[' * 40):
    ...     try:
    ...         parse_json(bad, "x.json")
    ...     except InputError as exc:
    ...         print(exc)
    x.json: got 'duplicate key "a"'; allowed: each key once per object
    x.json: got 'NaN'; allowed: strict JSON numbers (no NaN or Infinity)
    x.json: got '1e999'; allowed: a finite number
    x.json: got '9223372036854775808'; allowed: an integer within int64 (|x| < 2**63)
    x.json: got 'nesting depth 40'; allowed: at most 32 nested lists/objects
    """
    raw = text.encode("utf-8", "surrogatepass")
    arr = np.frombuffer(raw, np.uint8)
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        depth = _json_depth(raw, arr)
        if depth > MAX_DEPTH:
            raise InputError(
                name, f"nesting depth {depth}", f"at most {MAX_DEPTH} nested lists/objects"
            )
    long_int, big_float = _number_risks(arr)

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):
            seen: set[str] = set()
            for k, _ in items:
                if k in seen:
                    raise InputError(name, f'duplicate key "{k}"', "each key once per object")
                seen.add(k)
        return out

    def constant(s: str) -> Any:
        raise InputError(name, s, "strict JSON numbers (no NaN or Infinity)")

    def integer(s: str) -> int:
        digits = s.lstrip("-")
        if len(digits) > 19 or not -INT64_MAX - 1 <= int(s) <= INT64_MAX:
            raise InputError(name, s, "an integer within int64 (|x| < 2**63)")
        return int(s)

    def real(s: str) -> float:
        f = float(s)
        if f in (float("inf"), float("-inf")):
            raise InputError(name, s, "a finite number")
        return f

    hooks: dict[str, Any] = {}
    if long_int:  # only then can an integer leave int64 (slow path)
        hooks["parse_int"] = integer
    if big_float:  # only then can a number overflow to infinity (slow path)
        hooks["parse_float"] = real
    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, **hooks)
    except json.JSONDecodeError as exc:
        where = f"invalid JSON ({exc.msg}) at line {exc.lineno} column {exc.colno}"
        raise InputError(name, where, "a JSON document") from None
    except RecursionError:
        raise InputError(name, "too deep", f"at most {MAX_DEPTH} nested lists/objects") from None
    if _SURROGATE.search(raw):
        check_values(data, name)
    return data


def parse_yaml(text: str, name: str) -> Any:
    """Strict YAML (see the module docstring): plain values only, no duplicate keys, bounded
    depth and expanded size (alias bombs are refused while reading).

    Examples
    --------
    >>> parse_yaml("a: [1, 2]", "p.yaml")
    {'a': [1, 2]}
    >>> bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\\n"
    >>> for i in range(1, 10):
    ...     bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\\n"
    >>> len(bomb) < 600
    True
    >>> parse_yaml(bomb, "p.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: p.yaml line 6: got 'a document expanding to more than 1,000,000 values (aliases)'; allowed: a document without alias bombs
    >>> parse_yaml("a: 1:30", "p.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: p.yaml line 1: got '1:30'; allowed: a plain number (YAML 1.1 base-60 numbers such as 1:30 are refused; quote text)
    >>> parse_yaml("a: 1\\na: 2\\n", "p.yaml")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: p.yaml line 2: got "duplicate key 'a'"; allowed: each key once per mapping
    """  # noqa: E501
    from traffic.strict_yaml import compose_yaml  # PyYAML: loaded for YAML inputs only

    data = compose_yaml(text, name)
    check_values(data, name)
    return data


def check_values(data: Any, name: str) -> None:
    """Check a decoded document holds only JSON-like values: dicts with plain keys, lists,
    strings, booleans, None, int64 integers and finite floats.

    Raises
    ------
    InputError
        Naming ``name`` and the path of the first bad value.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        v, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(name, f"nesting depth {depth}", f"at most {MAX_DEPTH} levels")
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(
                    _at(name, where), "a lone surrogate", "valid Unicode text"
                ) from None
            continue
        if isinstance(v, int):
            if not -INT64_MAX - 1 <= v <= INT64_MAX:
                raise InputError(_at(name, where), v, "an integer within int64 (|x| < 2**63)")
            continue
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise InputError(_at(name, where), v, "a finite number")
            continue
        if isinstance(v, list):
            stack.extend((x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v))
            continue
        if isinstance(v, dict):
            for k, x in v.items():
                if not (isinstance(k, str | int | float) or k is None):
                    raise InputError(_at(name, where), k, "plain keys (strings or numbers)")
                stack.append((k, where, depth + 1))
                stack.append((x, f"{where}.{k}" if where else str(k), depth + 1))
            continue
        raise InputError(
            _at(name, where), type(v).__name__, "plain values (numbers, strings, lists, mappings)"
        )


def _at(name: str, where: str) -> str:
    return f"{name} {where}" if where else name


def load_document(
    path: str | os.PathLike, what: str, fmt: str | None = None, max_bytes: int | None = None
) -> Any:
    """Read, decode and parse the JSON or YAML file ``path``.

    ``fmt`` is ``"json"`` or ``"yaml"``; by default ``.json`` files are JSON and every other
    suffix YAML. Errors name ``str(path)``.
    """
    name = str(path)
    kind = fmt or ("json" if Path(path).suffix.lower() == ".json" else "yaml")
    cap = max_bytes
    if kind == "yaml":
        cap = min(MAX_YAML_BYTES, max_input_bytes() if max_bytes is None else max_bytes)
    text = decode_text(read_input(path, what, cap), name)
    return parse_json(text, name) if kind == "json" else parse_yaml(text, name)


def field_path(loc: tuple) -> str:
    """A pydantic error location as a field path: ``("flows", 3, "paths")`` ->
    ``"flows[3].paths"``.

    >>> field_path(("routing", "src", 3))
    'routing.src[3]'
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def first_error(errors: list[dict]) -> dict:
    """The error of pydantic's list ``errors`` to report: the first one, except that an unknown
    field wins over a missing field of the same object. A renamed or misspelled field is both
    (``{"bytse": 1}`` lacks ``bytes``) and pydantic lists the missing one first, so the message
    would send the user looking for a field they did write.

    >>> first_error([{"type": "missing", "loc": ("flows", 0, "bytes")},
    ...              {"type": "extra_forbidden", "loc": ("flows", 1, "x")},
    ...              {"type": "extra_forbidden", "loc": ("flows", 0, "bytse")}])["loc"]
    ('flows', 0, 'bytse')
    """
    first = errors[0]
    if first["type"] == "missing":
        parent = tuple(first["loc"])[:-1]
        for err in errors:
            if err["type"] == "extra_forbidden" and tuple(err["loc"])[:-1] == parent:
                return err
    return first


def _members(ann: Any) -> list:
    """The types an annotation may hold: ``Annotated`` unwrapped, unions flattened."""
    from types import UnionType
    from typing import Annotated, Union, get_args, get_origin

    origin = get_origin(ann)
    if origin is Annotated:
        return _members(get_args(ann)[0])
    if origin is Union or origin is UnionType:
        return [m for a in get_args(ann) for m in _members(a)]
    return [ann]


def _step(ann: Any, part: Any) -> Any:
    """The annotation one location ``part`` (a field, a list index, a mapping key or a union
    member's tag) below ``ann``, or ``None``."""
    from collections.abc import Mapping, Sequence
    from typing import get_args, get_origin

    from pydantic import BaseModel, RootModel

    for m in _members(ann):
        if isinstance(m, type) and issubclass(m, BaseModel):
            fields = m.model_fields
            if part == m.__name__:  # pydantic's tag of a union member
                return m
            if isinstance(part, str) and part in fields:
                return fields[part].annotation
            if issubclass(m, RootModel):  # its errors' locations skip "root"
                return _step(fields["root"].annotation, part)
            continue
        origin, args = get_origin(m), get_args(m)
        if origin is None or not args:
            continue
        if isinstance(origin, type) and issubclass(origin, Mapping) and len(args) == 2:
            return args[1]  # any key of a mapping
        if isinstance(part, int) and isinstance(origin, type) and issubclass(origin, Sequence):
            return args[0]
    return None


def known_fields(model: Any, loc: tuple) -> str | None:
    """The fields (by the names a file uses) of the model that holds the last part of the error
    location ``loc`` under ``model`` (a pydantic model class), or ``None`` if not found.

    >>> from traffic.plan import Plan
    >>> known_fields(Plan, ("precision", "activation_bytse"))
    'activation_bytes, gradient_bytes, parameter_bytes'
    """
    from pydantic import BaseModel

    ann = model
    for part in loc[:-1]:
        ann = _step(ann, part)
        if ann is None:
            return None
    owners = [m for m in _members(ann) if isinstance(m, type) and issubclass(m, BaseModel)]
    if not owners:
        return None
    fields = owners[0].model_fields
    return ", ".join(f.alias or name for name, f in fields.items())


def validate(model: type[M], data: Any, name: str, context: Any = None) -> M:
    """``model.model_validate(data)``, its first error as one :class:`InputError`.

    The field is ``name`` followed by the error's path; the value is the offending input (shown
    cut short); allowed is pydantic's message (or the model's own, from a ``ValueError``).
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise validation_error(exc, name, model) from None


def validation_error(exc: ValidationError, name: str, model: Any = None) -> InputError:
    """The error of a pydantic ``ValidationError`` to report (:func:`first_error`) as an
    :class:`InputError`; an unknown field lists the known ones of its object when ``model``
    (the validated class) is given."""
    first = first_error(exc.errors(include_url=False, include_context=False))
    loc = tuple(first["loc"])
    path = field_path(loc)
    field = f"{name} {path}" if path else name
    msg = str(first["msg"])
    for lead in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(lead)
    value = first.get("input")
    kind = first["type"]
    if kind == "extra_forbidden":
        msg, value = "no such field", loc[-1] if loc else value
        known = known_fields(model, loc) if model is not None and loc else None
        if known:
            msg += f"; known fields: {known}"
    elif kind == "missing":
        msg, value = "a required field", None
    else:
        msg = msg.removeprefix("Input should be ")
    return InputError(field, value, msg)
