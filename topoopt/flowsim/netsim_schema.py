"""The schema of a flow-set JSON document (``topoopt netsim``), as strict pydantic models.

See :mod:`topoopt.flowsim.netsim_json` for the format. The models check every field alone
(types, finiteness, ranges, unknown keys); :func:`validate_netsim` adds the relations
(:func:`topoopt.flowsim.netsim_json.parse_netsim` then checks ids, weights and dependencies).
Errors name the field path (``flows[3].paths[0].links[1]``), the value and what is allowed, with
the wording of :data:`ALLOWED`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from traffic.decode import field_path, first_error, known_fields
from traffic.errors import InputError
from traffic.limits import INT64_MAX, check_count

__all__ = [
    "ALLOWED",
    "LinkDocument",
    "PathDocument",
    "FlowDocument",
    "NetsimDocument",
    "is_id",
    "validate_netsim",
]

ALLOWED = {
    "netsim": 'an object {"links": [...], "flows": [...]}',
    "links": "a list of {id, capacity, latency}",
    "flows": "a list of {id, bytes, start, after, paths}",
    "link": "an object {id, capacity, latency}",
    "flow": "an object {id, bytes, start, after, paths}",
    "path": "an object {links, weight}",
    "id": "a string or an integer (strings of at most 200 characters)",
    "capacity": "a positive finite number (B/s)",
    "latency": "a finite number >= 0 (s)",
    "bytes": "a finite number >= 0 (bytes)",
    "start": "a finite number >= 0 (s)",
    "after": "a list of flow ids",
    "paths": "a non-empty list of paths",
    "path_links": "a non-empty list of link ids",
    "weight": "a number in (0, 1]",
}
"""What each field allows, in words (used in every error message)."""


def is_id(x: Any) -> bool:
    """A flow or link id: a string of at most 200 characters, or an int64 integer (no bool)."""
    if isinstance(x, str):
        return len(x) <= 200
    return isinstance(x, int) and not isinstance(x, bool) and -INT64_MAX - 1 <= x <= INT64_MAX


def _id(x: Any) -> Any:
    if not is_id(x):
        raise ValueError(ALLOWED["id"])
    return x


Id = Annotated[Any, AfterValidator(_id)]
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
_Finite = Field(ge=0, allow_inf_nan=False)


class LinkDocument(BaseModel):
    """``{"id", "capacity" (B/s), "latency" (s, default 0)}``."""

    model_config = _STRICT

    id: Id
    capacity: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    latency: Annotated[float, _Finite] | None = None


class PathDocument(BaseModel):
    """``{"links": [ids], "weight": fraction (optional)}``."""

    model_config = _STRICT

    links: Annotated[list[Id], Field(min_length=1)]
    weight: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None


class FlowDocument(BaseModel):
    """``{"id", "bytes", "start" (s, default 0), "after": [ids], "paths": [...]}``."""

    model_config = _STRICT

    id: Id
    bytes: Annotated[float, _Finite]
    start: Annotated[float, _Finite] | None = None
    after: list[Id] = []
    paths: Annotated[list[PathDocument], Field(min_length=1)]


class NetsimDocument(BaseModel):
    """``{"links": [...], "flows": [...]}``."""

    model_config = _STRICT

    links: list[LinkDocument]
    flows: list[FlowDocument]


def _allowed(loc: tuple, kind: str) -> tuple[str, str]:
    """(field path, allowed words) of a pydantic error location."""
    names = [p for p in loc if isinstance(p, str)]
    last = names[-1] if names else "netsim"
    owner = {"links": "link", "flows": "flow", "paths": "path"}
    if kind == "extra_forbidden":  # the words of traffic.decode.validation_error
        return field_path(loc), f"no such field; known fields: {known_fields(NetsimDocument, loc)}"
    if kind in ("model_type", "model_attributes_type", "dict_type") and isinstance(loc[-1], int):
        return field_path(loc), ALLOWED[owner.get(last, "netsim")]
    if last == "links" and "paths" in names:
        last = "path_links"
    if last in ("links", "flows") and not isinstance(loc[-1], int):
        return field_path(loc), ALLOWED[last]
    return field_path(loc) or "netsim", ALLOWED.get(last, ALLOWED["netsim"])


def validate_netsim(doc: Any) -> NetsimDocument:
    """The netsim document ``doc`` (decoded JSON) validated field by field.

    Raises
    ------
    InputError
        For the first bad field (path, value, :data:`ALLOWED` words).
    """
    if not isinstance(doc, dict):
        raise InputError("netsim", type(doc).__name__, ALLOWED["netsim"])
    for key in ("links", "flows"):
        if isinstance(doc.get(key), list):
            check_count(key, len(doc[key]), 512, key)
    try:
        return NetsimDocument.model_validate(doc)
    except ValidationError as exc:
        # a misspelled key is reported as unknown, not as the field it misses (first_error)
        err = first_error(exc.errors(include_url=False, include_context=False))
        loc = tuple(err["loc"])
        field, allowed = _allowed(loc, err["type"])
        value = loc[-1] if err["type"] == "extra_forbidden" else err.get("input")
        if err["type"] == "missing":
            value = None
        raise InputError(field, value, allowed) from None
