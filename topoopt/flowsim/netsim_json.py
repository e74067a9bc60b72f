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

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.netsim_schema import validate_netsim
from topoopt.flowsim.simulator import SimResult, simulate
from traffic.decode import decode_text, parse_json, read_input
from traffic.errors import InputError

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
