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
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.simulator import SimResult, simulate
from traffic.errors import InputError

__all__ = ["NetsimCase", "parse_netsim", "load_netsim", "result_document", "run_netsim"]


@dataclass(frozen=True, eq=False)
class NetsimCase:
    """A parsed netsim document: the :class:`FlowSet` and the ids of its flows and links."""

    flows: FlowSet
    flow_ids: tuple[str | int, ...]
    link_ids: tuple[str | int, ...]


def _is_id(x: Any) -> bool:
    return isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))


def _number(x: Any, field: str, allowed: str, default: float | None = None) -> float:
    if x is None and default is not None:
        return default
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(float(x)):
        raise InputError(field, x, allowed)
    return float(x)


def _list(x: Any, field: str, allowed: str) -> list:
    if not isinstance(x, list):
        raise InputError(field, x, allowed)
    return x


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
    if not isinstance(doc, dict):
        raise InputError("netsim", type(doc).__name__, 'an object {"links": [...], "flows": [...]}')
    unknown = sorted(set(doc) - {"links", "flows"})
    if unknown:
        raise InputError("netsim", unknown[0], 'only the keys "links" and "flows"')
    links = _list(doc.get("links"), "links", "a list of {id, capacity, latency}")
    flows = _list(doc.get("flows"), "flows", "a list of {id, bytes, start, after, paths}")
    link_index: dict[str | int, int] = {}
    cap = np.empty(len(links))
    lat = np.empty(len(links))
    for i, link in enumerate(links):
        if not isinstance(link, dict):
            raise InputError(f"links[{i}]", link, "an object {id, capacity, latency}")
        bad = sorted(set(link) - {"id", "capacity", "latency"})
        if bad:
            raise InputError(f"links[{i}]", bad[0], "only the keys id, capacity, latency")
        lid = link.get("id")
        if not _is_id(lid):
            raise InputError(f"links[{i}].id", lid, "a string or an integer")
        if lid in link_index:
            raise InputError(f"links[{i}].id", lid, "an id not used by another link")
        link_index[lid] = i
        cap[i] = _number(link.get("capacity"), f"links[{i}].capacity", "a positive number (B/s)")
        if cap[i] <= 0:
            raise InputError(
                f"links[{i}].capacity", link.get("capacity"), "a positive number (B/s)"
            )
        lat[i] = _number(link.get("latency"), f"links[{i}].latency", "a number >= 0 (s)", 0.0)
        if lat[i] < 0:
            raise InputError(f"links[{i}].latency", link.get("latency"), "a number >= 0 (s)")
    flow_index: dict[str | int, int] = {}
    for f, flow in enumerate(flows):
        if not isinstance(flow, dict):
            raise InputError(f"flows[{f}]", flow, "an object {id, bytes, start, after, paths}")
        fid = flow.get("id")
        if not _is_id(fid):
            raise InputError(f"flows[{f}].id", fid, "a string or an integer")
        if fid in flow_index:
            raise InputError(f"flows[{f}].id", fid, "an id not used by another flow")
        flow_index[fid] = f
    size = np.empty(len(flows))
    start = np.empty(len(flows))
    flow_ptr, path_ptr, path_links, weight = [0], [0], [], []
    dep_ptr, deps = [0], []
    for f, flow in enumerate(flows):
        bad = sorted(set(flow) - {"id", "bytes", "start", "after", "paths"})
        if bad:
            raise InputError(f"flows[{f}]", bad[0], "only the keys id, bytes, start, after, paths")
        size[f] = _number(flow.get("bytes"), f"flows[{f}].bytes", "a number >= 0 (bytes)")
        if size[f] < 0:
            raise InputError(f"flows[{f}].bytes", flow.get("bytes"), "a number >= 0 (bytes)")
        start[f] = _number(flow.get("start"), f"flows[{f}].start", "a number >= 0 (s)", 0.0)
        if start[f] < 0:
            raise InputError(f"flows[{f}].start", flow.get("start"), "a number >= 0 (s)")
        after = _list(flow.get("after", []), f"flows[{f}].after", "a list of flow ids")
        for j, d in enumerate(after):
            if not _is_id(d) or d not in flow_index:
                raise InputError(f"flows[{f}].after[{j}]", d, "a flow id from flows[*].id")
            deps.append(flow_index[d])
        dep_ptr.append(len(deps))
        paths = _list(flow.get("paths"), f"flows[{f}].paths", "a non-empty list of paths")
        if not paths:
            raise InputError(f"flows[{f}].paths", paths, "a non-empty list of paths")
        given = [isinstance(p, dict) and "weight" in p for p in paths]
        if any(given) and not all(given):
            j = given.index(False)
            raise InputError(
                f"flows[{f}].paths[{j}].weight", None, "a weight on every path or none"
            )
        for j, p in enumerate(paths):
            where = f"flows[{f}].paths[{j}]"
            if not isinstance(p, dict):
                raise InputError(where, p, "an object {links, weight}")
            bad = sorted(set(p) - {"links", "weight"})
            if bad:
                raise InputError(where, bad[0], "only the keys links, weight")
            pl = _list(p.get("links"), f"{where}.links", "a non-empty list of link ids")
            if not pl:
                raise InputError(f"{where}.links", pl, "a non-empty list of link ids")
            for h, lid in enumerate(pl):
                if not _is_id(lid) or lid not in link_index:
                    raise InputError(f"{where}.links[{h}]", lid, "a link id from links[*].id")
                path_links.append(link_index[lid])
            if len(set(pl)) != len(pl):
                raise InputError(f"{where}.links", pl, "each link at most once per path")
            path_ptr.append(len(path_links))
            if all(given):
                w = _number(p["weight"], f"{where}.weight", "a number in (0, 1]")
                if not 0 < w <= 1:
                    raise InputError(f"{where}.weight", p["weight"], "a number in (0, 1]")
            else:
                w = 1.0 / len(paths)
            weight.append(w)
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


def load_netsim(path: str | Path) -> NetsimCase:
    """Read and parse a netsim JSON file.

    Raises
    ------
    InputError
        If the file is not valid JSON or not a valid netsim document.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(str(p), f"invalid JSON ({exc.msg} at line {exc.lineno})", "JSON") from None
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
