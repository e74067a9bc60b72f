"""The result of every optical-design solver: circuits, rings, routing, and how good it is.

A :class:`Design` is independent of any fabric's link numbering: its routing is a list of paths
written as server-node sequences (:class:`NodePaths`, CSR arrays), one set of paths per server
pair that carries traffic, the same in every phase. :meth:`Design.phase_routings` turns it into
the per-phase :class:`solvers.model.congestion.PhaseRouting` (link-id paths) that
:func:`solvers.model.congestion.evaluate_routing` reads, and :meth:`Design.to_json` /
:meth:`Design.from_json` read and write ``design.json``.

Designs of a problem with reserved or pre-wired ports (:mod:`solvers.model.problem`) record them
(``reserved_ports``, ``prewired``); :func:`check_ports` checks a design against them and
:func:`merge_prewired` adds the pre-wired circuits to a construction.

Units: bytes/s for ``link_bandwidth``, seconds for ``objective_s``, ``lower_bound_s``,
``wall_s``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.model.congestion import (
    PhaseRouting,
    RingSet,
    link_lookup,
)
from solvers.model.design_schema import validate_design_document
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from topoopt.paths import PathSet
from traffic.decode import parse_json
from traffic.errors import InputError

__all__ = [
    "NodePaths",
    "Design",
    "design_document",
    "parse_design_document",
    "design_fields",
    "node_paths",
    "ring_records",
]


@dataclass(frozen=True, eq=False)
class NodePaths:
    """Weighted paths between server pairs, as server-node sequences (CSR).

    Attributes
    ----------
    src, dst : numpy.ndarray
        ``int64 (K,)``: commodity ``k`` is the ordered server pair ``(src[k], dst[k])``.
    commodity_ptr : numpy.ndarray
        ``int64 (K+1,)``: paths of commodity ``k`` are ``commodity_ptr[k]:commodity_ptr[k+1]``.
    path_ptr : numpy.ndarray
        ``int64 (P+1,)``: path ``p`` visits ``nodes[path_ptr[p]:path_ptr[p+1]]`` (source first,
        destination last, so a path of ``h`` hops has ``h + 1`` nodes).
    nodes : numpy.ndarray
        ``int64`` server ids.
    weight : numpy.ndarray
        ``float64 (P,)``: fraction of the commodity on each path (sum 1 per commodity).

    Examples
    --------
    >>> p = NodePaths.from_lists([0], [2], [[([0, 1, 2], 1.0)]])
    >>> p.path_lengths().tolist(), p.to_lists()
    ([2], [[([0, 1, 2], 1.0)]])
    """

    src: np.ndarray
    dst: np.ndarray
    commodity_ptr: np.ndarray
    path_ptr: np.ndarray
    nodes: np.ndarray
    weight: np.ndarray

    def __post_init__(self) -> None:
        for name in ("src", "dst", "commodity_ptr", "path_ptr", "nodes"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), np.int64))
        object.__setattr__(self, "weight", np.ascontiguousarray(self.weight, np.float64))
        k, p = self.src.shape[0], self.weight.shape[0]
        if self.dst.shape != (k,) or self.commodity_ptr.shape != (k + 1,):
            raise InputError("routing.commodity_ptr", self.commodity_ptr.shape, f"({k + 1},)")
        if self.commodity_ptr[-1] != p or self.path_ptr.shape != (p + 1,):
            raise InputError("routing.path_ptr", self.path_ptr.shape, f"({p + 1},)")
        if self.path_ptr[-1] != self.nodes.shape[0]:
            raise InputError("routing.nodes", self.nodes.shape, "path_ptr[-1] nodes")
        if p and np.any(np.diff(self.path_ptr) < 2):
            raise InputError("routing.path_ptr", "a path of < 2 nodes", "paths of >= 1 hop")

    @classmethod
    def empty(cls) -> NodePaths:
        z = np.zeros(0, np.int64)
        return cls(z, z, np.zeros(1, np.int64), np.zeros(1, np.int64), z, np.zeros(0))

    @classmethod
    def from_lists(cls, src, dst, paths: list[list[tuple[list[int], float]]]) -> NodePaths:
        """Build from per-commodity lists of ``(nodes, weight)``."""
        cptr = np.zeros(len(paths) + 1, np.int64)
        cptr[1:] = np.cumsum([len(pl) for pl in paths]) if paths else []
        flat = [(list(nodes), float(w)) for pl in paths for nodes, w in pl]
        pptr = np.zeros(len(flat) + 1, np.int64)
        pptr[1:] = np.cumsum([len(n) for n, _ in flat]) if flat else []
        nodes = np.concatenate([np.asarray(n, np.int64) for n, _ in flat]) if flat else []
        return cls(src, dst, cptr, pptr, np.asarray(nodes, np.int64), [w for _, w in flat])

    def to_lists(self) -> list[list[tuple[list[int], float]]]:
        """Per-commodity lists of ``(nodes, weight)``."""
        out = []
        for k in range(self.n_commodities):
            out.append(
                [
                    (
                        self.nodes[self.path_ptr[p] : self.path_ptr[p + 1]].tolist(),
                        float(self.weight[p]),
                    )
                    for p in range(self.commodity_ptr[k], self.commodity_ptr[k + 1])
                ]
            )
        return out

    @property
    def n_commodities(self) -> int:
        return int(self.src.shape[0])

    @property
    def n_paths(self) -> int:
        return int(self.weight.shape[0])

    def path_lengths(self) -> np.ndarray:
        """Hops of every path."""
        return np.diff(self.path_ptr) - 1

    def path_commodity(self) -> np.ndarray:
        """Commodity of every path."""
        return np.repeat(np.arange(self.n_commodities), np.diff(self.commodity_ptr))

    def hops(self) -> tuple[np.ndarray, np.ndarray]:
        """``(u, v)`` of every hop of every path, in path order (vectorised)."""
        last = np.zeros(self.nodes.shape[0], bool)
        last[self.path_ptr[1:] - 1] = True
        idx = np.flatnonzero(~last)
        return self.nodes[idx], self.nodes[idx + 1]

    def to_pathset(self, link_src: np.ndarray, link_dst: np.ndarray, n: int) -> PathSet:
        """The same paths over directed link ids (``link_src``/``link_dst`` of a link table).

        Raises
        ------
        InputError
            If a hop joins two servers with no link between them.
        """
        u, v = self.hops()
        ids = link_lookup(link_src, link_dst, n)(u, v)
        if np.any(ids < 0):
            bad = int(np.flatnonzero(ids < 0)[0])
            raise InputError("routing", f"hop {int(u[bad])}->{int(v[bad])}", "hops over circuits")
        return PathSet(
            self.src,
            self.dst,
            self.commodity_ptr,
            self.path_ptr - np.arange(self.path_ptr.shape[0]),
            ids,
            self.weight,
        )

    def to_dict(self) -> dict[str, list]:
        return {
            "src": self.src.tolist(),
            "dst": self.dst.tolist(),
            "commodity_ptr": self.commodity_ptr.tolist(),
            "path_ptr": self.path_ptr.tolist(),
            "nodes": self.nodes.tolist(),
            "weight": self.weight.tolist(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodePaths:
        try:
            return cls(
                *(d[k] for k in ("src", "dst", "commodity_ptr", "path_ptr", "nodes")), d["weight"]
            )
        except KeyError as exc:
            raise InputError(
                "design.routing", f"missing {exc.args[0]!r}", "the NodePaths keys"
            ) from None


@dataclass(frozen=True, eq=False)
class Design:
    """An optical design: the circuits, the rings of mutable groups, the routing, the scores.

    Attributes
    ----------
    servers : int
    degree : int
        Ports per server.
    link_bandwidth : float
        Bytes/s of one circuit, each direction.
    circuits : Circuits
        The circuits (:class:`topoopt.fabrics.circuits.Circuits`: canonical rows
        ``[u, v, count]``, ``u < v``, sorted and merged); the constructor takes anything
        :class:`~topoopt.fabrics.circuits.Circuits` does and keeps the value.
    rings : tuple of dict
        One per directed ring: ``{"phase": name, "group": index in that phase,
        "members": sorted servers, "order": servers in ring order, "stride": int or None,
        "weight": fraction of the group's bytes, "virtual": bool (steps forwarded by hosts)}``.
    routing : NodePaths
        Paths of every server pair that carries bytes (fixed traffic and ring steps).
    solver, status : str
    objective_s, lower_bound_s, gap, wall_s : float
    info : dict
        Solver-specific facts (degree split, strides, seeds, ...), JSON-ready.
    reserved_ports : numpy.ndarray, optional
        ``int64 (n,)`` ports per server the problem reserved (``None``: no option given).
    prewired : Circuits, optional
        Pre-wired circuits of the problem (``None``: no option given).
    collectives : tuple of dict
        Schedules picked instead of the rings for some collectives (default none):
        ``{"phase", "group", "collective", "algorithm": "blink", "members": sorted servers,
        "src", "dst": positions in members, "fraction": bytes per byte of S, "info": dict}``
        (:mod:`solvers.joint.collective_choice`; simulated through
        :func:`solvers.realise.design_workload`).
    priority : tuple of str
        Traffic classes served first, highest first (default none: every link shared max-min
        fairly by all flows). A design that sets it is simulated with these strict priority
        levels (:func:`topoopt.flowsim.priorities.priority_levels`; the hosts' or NICs'
        per-class queues, which host-forwarded direct-connect fabrics have). Chosen by the joint
        optimizer's ``priorities`` option (:mod:`solvers.joint.iteration_search`).
    """

    servers: int
    degree: int
    link_bandwidth: float
    circuits: Circuits
    rings: tuple[dict, ...]
    routing: NodePaths
    solver: str
    status: str
    objective_s: float
    lower_bound_s: float
    gap: float
    wall_s: float
    info: Mapping[str, Any] = field(default_factory=dict)
    reserved_ports: np.ndarray | None = None
    prewired: Circuits | None = None
    collectives: tuple[dict, ...] = ()
    priority: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = int(self.servers)
        object.__setattr__(self, "collectives", tuple(self.collectives))
        object.__setattr__(self, "priority", tuple(self.priority))
        object.__setattr__(self, "circuits", Circuits(self.circuits, n))
        if self.reserved_ports is not None:
            r = np.asarray(self.reserved_ports, np.int64).reshape(-1)
            if r.shape != (n,):
                raise InputError("reserved_ports", f"{r.size} values", f"{n} values")
            object.__setattr__(self, "reserved_ports", r)
        if self.prewired is not None:
            object.__setattr__(self, "prewired", Circuits(self.prewired, n, field="prewired"))
        object.__setattr__(self, "rings", tuple(self.rings))
        deg = self.port_usage()
        if np.any(deg > self.degree):
            i = int(np.argmax(deg))
            raise InputError(f"circuits (server {i})", int(deg[i]), f"<= {self.degree} ports")

    def __repr__(self) -> str:
        """One line: solver, status, size, objective, bound and gap (circuits, rings and routes
        are in :meth:`to_dict`; a design of 16 servers printed them as 12,000 characters).

        Examples
        --------
        >>> Design(4, 2, 12.5e9, [[0, 1, 1], [2, 3, 1]], (), NodePaths.from_lists([], [], []), "joint",
        ...        "optimal", 0.0123, 0.0123, 0.0, 0.5)
        Design('joint', optimal: 4 servers x 2 ports, 2 circuits, 0 rings; objective 0.0123 s, lower bound 0.0123 s, gap 0.00 %)
        """  # noqa: E501
        gap = f"{100 * self.gap:.2f} %" if np.isfinite(self.gap) else "unknown"
        return (
            f"{type(self).__name__}({self.solver!r}, {self.status}: {self.servers} servers x "
            f"{self.degree} ports, {self.circuits.total} circuits, {len(self.rings)} rings; "
            f"objective {self.objective_s:.4g} s, lower bound {self.lower_bound_s:.4g} s, "
            f"gap {gap})"
        )

    def _repr_html_(self) -> str:
        """A small HTML table of the one-line facts (Jupyter shows it for a design)."""
        import html

        rows = {
            "solver": self.solver,
            "status": self.status,
            "servers": self.servers,
            "ports per server": self.degree,
            "Gbps per port": f"{self.link_bandwidth * 8 / 1e9:g}",
            "circuits": self.circuits.total,
            "rings": len(self.rings),
            "objective (s)": f"{self.objective_s:.6g}",
            "lower bound (s)": f"{self.lower_bound_s:.6g}",
            "wall (s)": f"{self.wall_s:.3g}",
        }
        cells = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in rows.items()
        )
        return f"<table>{cells}</table>"

    def port_usage(self) -> np.ndarray:
        """Ports used at each server."""
        return self.circuits.degrees()

    def phase_routings(self, problem: DesignProblem) -> tuple[PhaseRouting, ...]:
        """Per-phase rings and link-id paths for
        :func:`solvers.model.congestion.evaluate_routing`."""
        src, dst, _ = self.circuits.links(self.link_bandwidth)
        paths = self.routing.to_pathset(src, dst, self.servers)
        out = []
        for ph in problem.phases:
            mine = [r for r in self.rings if r["phase"] == ph.name]
            rings = RingSet.from_lists([(r["group"], r["weight"], r["order"]) for r in mine])
            out.append(PhaseRouting(rings, paths))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return design_document(self)

    def to_json(self) -> str:
        """``design.json`` text (one JSON document)."""
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)  # strict JSON

    @classmethod
    def from_json(cls, text: str) -> Design:
        """Read ``design.json`` text.

        Raises
        ------
        InputError
            Not JSON, or a key is missing.
        """
        fields, _ = parse_design_document(text, "a design document")
        return cls(**fields)


def _finite_or_null(obj: Any) -> Any:
    """``info`` as strict JSON: a fact that is undefined (NaN: e.g. an iteration time without a
    compute model) or unbounded (-inf: no bound) is written as ``null``; numpy values become plain.

    >>> _finite_or_null({"a": float("nan"), "b": [1.5, float("-inf")], "c": np.int64(2)})
    {'a': None, 'b': [1.5, None], 'c': 2}
    """
    if isinstance(obj, dict):
        return {k: _finite_or_null(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_null(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _finite_or_null(obj.tolist())
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        return f if np.isfinite(f) else None
    return obj


def design_document(design) -> dict[str, Any]:
    """The ``design.json`` keys every design type shares (servers ... wall_s, info), plus
    ``reserved_ports`` and ``prewired`` when the design records them."""
    doc = {
        "servers": int(design.servers),
        "degree": int(design.degree),
        "link_bandwidth": float(design.link_bandwidth),
        "circuits": design.circuits.tolist(),
        "rings": [dict(r) for r in design.rings],
        "routing": design.routing.to_dict(),
        "solver": design.solver,
        "status": design.status,
        "objective_s": float(design.objective_s),
        "lower_bound_s": float(design.lower_bound_s),
        "gap": float(design.gap),
        "wall_s": float(design.wall_s),
        "info": _finite_or_null(dict(design.info)),
    }
    for key in ("reserved_ports", "prewired"):
        value = getattr(design, key, None)
        if value is not None:
            doc[key] = value.tolist()
    if getattr(design, "collectives", ()):  # absent when none: older files stay identical
        doc["collectives"] = [_finite_or_null(dict(c)) for c in design.collectives]
    if getattr(design, "priority", ()):  # absent when none: older files stay identical
        doc["priority"] = list(design.priority)
    return doc


def parse_design_document(
    text: str, what: str, name: str = "design.json"
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The shared fields of ``design.json`` text as constructor keywords, and the whole document.

    The text is decoded strictly and validated by the schema of :mod:`solvers.model.design_schema`
    (a hybrid design when it has an ``electrical`` key).

    Raises
    ------
    InputError
        Not strict JSON, or a field missing, unknown, of the wrong type, out of range or
        inconsistent (``what`` names the expected document, ``name`` the file).
    """
    d = parse_json(text, name)
    if not isinstance(d, dict):
        raise InputError(name, type(d).__name__, what)
    hybrid = "electrical" in d or "hybrid" in what  # a hybrid document was asked for
    doc = validate_design_document(d, name, hybrid)
    return design_fields(doc), d


def design_fields(doc) -> dict[str, Any]:
    """Constructor keywords of :class:`Design` from a validated
    :class:`solvers.model.design_schema.DesignDocument` (arrays as numpy)."""
    r = doc.routing
    fields: dict[str, Any] = {
        "servers": doc.servers,
        "degree": doc.degree,
        "link_bandwidth": doc.link_bandwidth,
        "circuits": Circuits(doc.circuits, doc.servers),
        "rings": tuple(ring.model_dump() for ring in doc.rings),
        "routing": NodePaths(
            r.src, r.dst, r.commodity_ptr, r.path_ptr, np.asarray(r.nodes, np.int64), r.weight
        ),
        "solver": doc.solver,
        "status": doc.status,
        "objective_s": doc.objective_s,
        "lower_bound_s": doc.lower_bound_s,
        "gap": doc.gap,
        "wall_s": doc.wall_s,
        "info": dict(doc.info),
    }
    if doc.reserved_ports is not None:
        fields["reserved_ports"] = np.asarray(doc.reserved_ports, np.int64)
    if doc.prewired is not None:
        fields["prewired"] = Circuits(doc.prewired, doc.servers, field="prewired")
    if doc.collectives is not None:
        fields["collectives"] = tuple(c.model_dump() for c in doc.collectives)
    if getattr(doc, "priority", None) is not None:
        fields["priority"] = tuple(doc.priority)
    return fields


def node_paths(paths: PathSet, link_dst: np.ndarray) -> NodePaths:
    """A link-level :class:`~topoopt.paths.PathSet` as server-level :class:`NodePaths` (each
    path's source, then the head of each of its links, ``link_dst``)."""
    lens = paths.path_lengths()
    pptr = np.zeros(paths.n_paths + 1, np.int64)
    pptr[1:] = np.cumsum(lens + 1)
    nodes = np.empty(int(pptr[-1]), np.int64)
    nodes[pptr[:-1]] = paths.src[paths.path_commodity()]
    mask = np.ones(nodes.size, bool)
    mask[pptr[:-1]] = False
    nodes[mask] = link_dst[paths.path_links]
    return NodePaths(paths.src, paths.dst, paths.commodity_ptr, pptr, nodes, paths.weight)


def ring_records(problem: DesignProblem, ring_sets, have: set[int]) -> list[dict]:
    """design.json ``rings`` entries of one :class:`~solvers.model.congestion.RingSet` per phase;
    ``have`` holds ``u * n + v`` for every circuit direction, so a ring with a step that has
    no circuit is marked ``virtual`` (it is forwarded over other circuits)."""
    out = []
    n = problem.n
    for ph, rs in zip(problem.phases, ring_sets, strict=True):
        for r in range(rs.n_rings):
            o = rs.order(r)
            steps = (o * n + np.roll(o, -1)).tolist()
            out.append(
                {
                    "phase": ph.name,
                    "group": int(rs.group[r]),
                    "members": ph.group(int(rs.group[r])).tolist(),
                    "order": o.tolist(),
                    "stride": None,
                    "weight": float(rs.weight[r]),
                    "virtual": bool(any(x not in have for x in steps)),
                }
            )
    return out
