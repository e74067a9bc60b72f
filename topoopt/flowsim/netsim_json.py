"""The documented JSON interface of the flow model (``topoopt netsim``).

Input (capacities in bytes/s, sizes in bytes, times in seconds; ids are strings or integers)::

    {"links": [{"id": "a", "capacity": 1.25e10, "latency": 1e-6}, ...],
     "flows": [{"id": 0, "bytes": 1e6, "start": 0.0, "after": [ids],
                "paths": [{"links": ["a", "b"], "weight": 0.5}, ...]}, ...]}

- ``latency`` defaults to 0, ``start`` to 0, ``after`` to ``[]``;
- ``weight`` is the fraction of the flow on that path; when a flow gives no weight at all its
  paths share it equally; given weights must be positive and sum to 1 (within 1e-9);
- a path lists directed link ids in order, at least one, each at most once.

Output::

    {"flows": [{"id": 0, "start": 0.0, "finish": 8e-5}, ...], "makespan": 8e-5}

where ``start`` is when the flow actually started (after its ``after`` flows finished) and
``finish`` follows the semantics of :mod:`topoopt.flowsim.simulator` (last byte + path latency).
Any bad input raises :class:`~traffic.errors.InputError` naming the field (e.g.
``flows[3].paths[0].links[1]``), the value and what is allowed.

Two paths lead to the same :class:`NetsimCase`. The checked one validates field by field
(pydantic, :mod:`topoopt.flowsim.netsim_schema`), then the ids, weights and dependencies flow by
flow, and names the first error. The fast one (:func:`_fast_case`) reads the document by
columns (one list per field, the types checked over each list, the ranges with numpy) and
accepts only a document that the checked path accepts, with the same values; at the first doubt
(any bad or unusual value) it gives up and the checked path runs from the start, so every error
is the checked path's. ``tests/flowsim/test_netsim_json.py`` checks that both give the same
case on random documents and that the fast path refuses each kind of bad field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.simulator import SimResult, simulate
from traffic.decode import decode_text, parse_json, read_input
from traffic.errors import InputError
from traffic.limits import check_count

__all__ = ["NetsimCase", "parse_netsim", "load_netsim", "result_document", "run_netsim"]


@dataclass(frozen=True, eq=False)
class NetsimCase:
    """A parsed netsim document: the :class:`FlowSet` and the ids of its flows and links."""

    flows: FlowSet
    flow_ids: tuple[str | int, ...]
    link_ids: tuple[str | int, ...]


def parse_netsim(doc: Any) -> NetsimCase:
    """Validate a netsim document (already decoded from JSON) and build its :class:`FlowSet`.

    Raises
    ------
    InputError
        Unknown or duplicate ids, empty paths, negative sizes, bad weights, dependency cycles...

    Examples
    --------
    >>> case = parse_netsim({"links": [{"id": "up", "capacity": 100}],
    ...                      "flows": [{"id": "x", "bytes": 50, "paths": [{"links": ["up"]}]}]})
    >>> case.flow_ids, case.flows.size.tolist()
    (('x',), [50.0])
    >>> try:
    ...     parse_netsim({"links": [{"id": 1, "capacity": 1}],
    ...                   "flows": [{"id": 0, "bytes": 1, "paths": [{"links": [2]}]}]})
    ... except InputError as exc:
    ...     print(exc)
    flows[0].paths[0].links[0]: got 2; allowed: a link id from links[*].id
    """
    case = _fast_case(doc)
    if case is not None:
        return case
    from topoopt.flowsim.netsim_schema import validate_netsim  # pydantic: the checked path

    valid = validate_netsim(doc)  # field by field (topoopt.flowsim.netsim_schema)
    links, flows = valid.links, valid.flows
    link_index: dict[str | int, int] = {}
    for i, link in enumerate(links):
        if link.id in link_index:
            raise InputError(f"links[{i}].id", link.id, "an id not used by another link")
        link_index[link.id] = i
    cap = np.array([link.capacity for link in links], np.float64)
    lat = np.array([link.latency or 0.0 for link in links], np.float64)
    flow_index: dict[str | int, int] = {}
    for f, flow in enumerate(flows):
        if flow.id in flow_index:
            raise InputError(f"flows[{f}].id", flow.id, "an id not used by another flow")
        flow_index[flow.id] = f
    size = np.array([flow.bytes for flow in flows], np.float64)
    start = np.array([flow.start or 0.0 for flow in flows], np.float64)
    flow_ptr, path_ptr, path_links, weight = [0], [0], [], []
    dep_ptr, deps = [0], []
    for f, flow in enumerate(flows):
        for j, d in enumerate(flow.after):
            if d not in flow_index:
                raise InputError(f"flows[{f}].after[{j}]", d, "a flow id from flows[*].id")
            deps.append(flow_index[d])
        dep_ptr.append(len(deps))
        paths = flow.paths
        given = [p.weight is not None for p in paths]
        if any(given) and not all(given):
            j = given.index(False)
            raise InputError(
                f"flows[{f}].paths[{j}].weight", None, "a weight on every path or none"
            )
        for j, p in enumerate(paths):
            where = f"flows[{f}].paths[{j}]"
            for h, lid in enumerate(p.links):
                if lid not in link_index:
                    raise InputError(f"{where}.links[{h}]", lid, "a link id from links[*].id")
                path_links.append(link_index[lid])
            if len(set(p.links)) != len(p.links):
                raise InputError(f"{where}.links", p.links, "each link at most once per path")
            path_ptr.append(len(path_links))
            weight.append(p.weight if all(given) else 1.0 / len(paths))
        flow_ptr.append(len(weight))
    ids = tuple(flow_index)
    try:
        fs = FlowSet(
            capacity=cap,
            latency=lat,
            size=size,
            start=start,
            flow_ptr=flow_ptr,
            path_ptr=path_ptr,
            path_links=path_links,
            weight=weight,
            dep_ptr=dep_ptr,
            deps=deps,
        )
    except InputError as exc:
        if exc.field.endswith(".after") and isinstance(exc.value, list):
            raise InputError(exc.field, [ids[i] for i in exc.value], exc.allowed) from None
        raise
    return NetsimCase(flows=fs, flow_ids=ids, link_ids=tuple(link_index))


_LINK_KEYS = frozenset(("id", "capacity", "latency"))
_FLOW_KEYS = frozenset(("id", "bytes", "start", "after", "paths"))
_PATH_KEYS = frozenset(("links", "weight"))
_ID_TYPES = frozenset((int, str))
_NUMBER_TYPES = frozenset((int, float))
_MAX_ID_CHARS = 200  # netsim_schema.is_id


class _NotFast(Exception):
    """The fast path gives up (the checked path decides)."""


def _need(ok: bool) -> None:
    if not ok:
        raise _NotFast


def _only(kind: type, items: list) -> bool:
    """Every item of ``items`` exactly of type ``kind`` (no subclass)."""
    return set(map(type, items)) <= {kind}


def _check_ids(ids: list) -> None:
    """Every entry a string of at most 200 characters or an int64 integer (not a bool)."""
    types = set(map(type, ids))
    _need(types <= _ID_TYPES)
    if str in types:
        _need(max(len(x) for x in ids if type(x) is str) <= _MAX_ID_CHARS)
    if int in types:
        np.array([x for x in ids if type(x) is int], np.int64)  # OverflowError past int64


def _numbers(values: list, default: float | None = None) -> np.ndarray:
    """``float64`` of a column of numbers (ints or floats; ``None`` -> ``default`` if given),
    all finite."""
    if default is not None:
        values = [default if v is None else v for v in values]
    _need(set(map(type, values)) <= _NUMBER_TYPES)
    out = np.array(values, np.float64)  # an int past float64: OverflowError
    _need(bool(np.isfinite(out).all()))
    return out


def _fast_case(doc: Any) -> NetsimCase | None:
    """The case of ``doc`` by columns, or ``None`` where the checked path must decide (module
    docstring): accepted only if every field has the type and range the schema allows, every
    id is unique and known, weights are on every path of a flow or on none, and the
    :class:`FlowSet` accepts the arrays."""
    try:
        return _fast_case_or_raise(doc)
    except (_NotFast, KeyError, TypeError, ValueError, OverflowError):  # InputError is one
        return None


def _fast_case_or_raise(doc: Any) -> NetsimCase:
    from itertools import chain

    _need(type(doc) is dict and doc.keys() == {"links", "flows"})
    links, flows = doc["links"], doc["flows"]
    _need(type(links) is list and type(flows) is list)
    for key in ("links", "flows"):  # as netsim_schema.validate_netsim, before anything
        check_count(key, len(doc[key]), 512, key)
    # links: {id, capacity, latency?}
    _need(_only(dict, links) and set().union(*links) <= _LINK_KEYS)
    link_ids = [x["id"] for x in links]
    _check_ids(link_ids)
    link_index = dict(zip(link_ids, range(len(link_ids)), strict=True))
    _need(len(link_index) == len(link_ids))
    cap = _numbers([x["capacity"] for x in links])
    _need(bool((cap > 0).all()))
    lat = _numbers([x.get("latency") for x in links], 0.0) + 0.0  # -0.0 -> 0.0 (`or 0.0`)
    _need(bool((lat >= 0).all()))
    # flows: {id, bytes, start?, after?, paths}
    _need(_only(dict, flows) and set().union(*flows) <= _FLOW_KEYS)
    flow_ids = [x["id"] for x in flows]
    _check_ids(flow_ids)
    flow_index = dict(zip(flow_ids, range(len(flow_ids)), strict=True))
    _need(len(flow_index) == len(flow_ids))
    size = _numbers([x["bytes"] for x in flows])
    start = _numbers([x.get("start") for x in flows], 0.0) + 0.0  # as `flow.start or 0.0`
    _need(bool((size >= 0).all() and (start >= 0).all()))
    after = [x.get("after", []) for x in flows]
    _need(_only(list, after))
    flat_after = list(chain.from_iterable(after))
    _need(set(map(type, flat_after)) <= _ID_TYPES)  # and each one a flow id:
    deps = np.array(list(map(flow_index.__getitem__, flat_after)), np.int64)
    dep_ptr = np.zeros(len(flows) + 1, np.int64)
    np.cumsum(list(map(len, after)), out=dep_ptr[1:])
    # paths: a non-empty list of {links: non-empty list of link ids, weight?} per flow
    paths = [x["paths"] for x in flows]
    _need(_only(list, paths))
    n_paths = np.array(list(map(len, paths)), np.int64)
    _need(bool((n_paths >= 1).all()))
    flat_paths = list(chain.from_iterable(paths))
    _need(_only(dict, flat_paths) and set().union(*flat_paths) <= _PATH_KEYS)
    hops = [p["links"] for p in flat_paths]
    _need(_only(list, hops))
    n_hops = np.array(list(map(len, hops)), np.int64)
    _need(bool((n_hops >= 1).all()))
    flat_hops = list(chain.from_iterable(hops))
    _need(set(map(type, flat_hops)) <= _ID_TYPES)  # and each one a link id:
    path_links = np.array(list(map(link_index.__getitem__, flat_hops)), np.int64)
    raw_w = [p.get("weight") for p in flat_paths]
    given = np.array([w is not None for w in raw_w], np.int64)
    flow_ptr = np.zeros(len(flows) + 1, np.int64)
    np.cumsum(n_paths, out=flow_ptr[1:])
    per_flow = np.add.reduceat(given, flow_ptr[:-1]) if len(flows) else given[:0]
    _need(bool(((per_flow == 0) | (per_flow == n_paths)).all()))  # on every path or none
    weight = np.repeat(1.0 / n_paths, n_paths)
    if given.any():
        sel = np.flatnonzero(given)
        w = _numbers([raw_w[i] for i in sel])
        _need(bool(((w > 0) & (w <= 1)).all()))
        weight[sel] = w
    path_ptr = np.zeros(len(flat_paths) + 1, np.int64)
    np.cumsum(n_hops, out=path_ptr[1:])
    fs = FlowSet(
        capacity=cap, latency=lat, size=size, start=start, flow_ptr=flow_ptr,
        path_ptr=path_ptr, path_links=path_links, weight=weight, dep_ptr=dep_ptr, deps=deps,
    )  # fmt: skip
    return NetsimCase(flows=fs, flow_ids=tuple(flow_index), link_ids=tuple(link_index))


def load_netsim(path: str | Path) -> NetsimCase:
    """Read and parse a netsim JSON file.

    Raises
    ------
    InputError
        If the file is not strict JSON (:mod:`traffic.decode`) or not a valid netsim document
        (:mod:`topoopt.flowsim.netsim_schema`).
    """
    name = str(path)
    doc = parse_json(decode_text(read_input(path, "flow-set JSON"), name), name)
    return parse_netsim(doc)


def result_document(case: NetsimCase, result: SimResult) -> dict:
    """The output document ``{"flows": [{"id", "start", "finish"}], "makespan"}``."""
    return {
        "flows": [
            {"id": i, "start": s, "finish": f}
            for i, s, f in zip(
                case.flow_ids, result.start.tolist(), result.finish.tolist(), strict=True
            )
        ],
        "makespan": result.makespan,
    }


def run_netsim(doc: Any) -> dict:
    """Parse a netsim document, simulate it and return the output document.

    Examples
    --------
    One 100 B/s link with 0.5 s latency; ``b`` waits for ``a``:

    >>> out = run_netsim({"links": [{"id": 0, "capacity": 100.0, "latency": 0.5}],
    ...                   "flows": [{"id": "a", "bytes": 100, "paths": [{"links": [0]}]},
    ...                             {"id": "b", "bytes": 100, "after": ["a"],
    ...                              "paths": [{"links": [0]}]}]})
    >>> out["flows"][1], out["makespan"]
    ({'id': 'b', 'start': 1.5, 'finish': 3.0}, 3.0)
    """
    case = parse_netsim(doc)
    return result_document(case, simulate(case.flows, record_series=False))
