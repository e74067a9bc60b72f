"""The optical layer of a hybrid fabric, designed given its electrical part, routed over both.

A hybrid fabric (:func:`topoopt.fabrics.hybrid.add_optical_layer`) keeps an electrical packet
fabric (leaf-spine or fat-tree, possibly oversubscribed) and gives every server ``d`` optical
ports of ``B_o`` bytes/s whose circuits join servers directly. :func:`hybrid_design` chooses the
circuits and one weighted routing of all traffic over both layers: the routing decides which
bytes take a circuit, which take the switches, and which mix them (a host forwards between a
circuit and its NIC).

Formulation
-----------
Data: the electrical links ``E`` (fixed capacities), servers ``u`` with electrical NIC bandwidth
``B_e(u)``, per phase ``p`` the fixed pair bytes ``D^p_st`` and ring groups ``G`` with per-member
ring bytes ``R_G``. Decisions: integer circuit counts ``x_uv``; ring orders; per server pair
``k`` a distribution ``y_q`` over walks ``q`` on the combined fabric (one routing for every
phase, as a design carries one). With the rings fixed, ``D^p_k`` is the pair's bytes in phase
``p`` (fixed + ring steps).

.. code-block:: text

    min  sum_p T_p
    (1) sum_v x_uv <= d - r_u                                  for every server u
    (2) x_uv <= pair_cap                                       for every pair {u, v}
    (3) sum_{q in Q_k} y_q = 1,  y >= 0                         for every server pair k
    (4) sum_k D^p_k sum_{q in Q_k, q ni l} y_q <= cap_l T_p     for every phase p, link l
        cap_l = B_o x_uv on the circuit link u -> v, the electrical capacity elsewhere
    (5) x_uv >= w_uv                                           for every pre-wired pair {u, v}

The objective is the congestion model of :mod:`solvers.model.congestion` on the combined fabric.

Reserved and pre-wired ports
----------------------------
The port options of :class:`solvers.model.problem.DesignProblem` (``reserved``, ``prewired``) apply
to
the *optical* ports: ``d`` is the ``optical_degree`` argument (not ``problem.degree``), server
``u`` may wire ``usable_u = d - r_u`` optical ports (``r_u`` = ``problem.reserved[u]``, 0 when
``None``), and the pre-wired circuits ``w_uv`` count against them (constraint (5)); what is left
to the search is ``free_u = usable_u - sum_v w_uv``. :func:`hybrid_design` refuses
(:class:`InputError` naming the field) ``r_u > d`` and a server whose pre-wired circuits exceed
its usable optical ports (a pre-wired pair then fits ``pair_cap`` too). The electrical NICs are not
affected. A design of a problem with options records them (``reserved_ports``, ``prewired``
in ``design.json``, as optical designs do); without options the search is unchanged.

Method
------
For fixed circuits, :func:`route_hybrid` solves (3)-(4) as a path LP (GLOP) over candidate
walks: the electrical ECMP paths, the direct circuit, two-circuit walks, and mixed walks (a
circuit to a neighbour then the switches, or the switches to a neighbour then its circuit);
on small fabrics the per-phase arc LP (:func:`solvers.routing_lp.route_phase`, host forwarding
allowed, candidate rings along the circuits plus ascending order and its reverse) chooses the
rings and adds its optimal walks to the candidates, so the shared routing is then the best mix of
per-phase optima. On large fabrics the rings follow circuits where a Hamiltonian cycle of
circuits exists, else ascending order; both options are routed and the better kept.

The circuits (constraints (1)-(2)) are searched:

1. route the electrical fabric alone; each pair's *bottleneck weight* is its bytes over the
   phase time, times the largest utilisation (load / capacity / phase time) on its paths: the
   pairs that load the electrical bottleneck most;
2. candidates: greedy b-matching (circuits one at a time on the heaviest pair with free ports,
   weight discounted ``c / (c + 1)`` after its ``c``-th circuit; or at most one circuit per
   pair, "spread") on the bottleneck weights and on the plain demand, started from the
   pre-wired circuits (their counts enter the discount and the pair cap) on the per-server free
   ports; the geometric circulant circuits (what :func:`topoopt.fabrics.hybrid.hybrid` builds by
   default; with port options: built on the uniform ``min_u free_u``, then the pre-wired
   circuits added and the ports still free filled by demand) and the TopoOpt method's circuits
   (:func:`solvers.baselines.topoopt_method.topoopt_design` with ``d`` ports, which honours the
   options)
   as baselines; each routed with :func:`route_hybrid`;
3. degree-preserving local search from the best until no move among the 16 heaviest pairs
   improves (a local optimum): for a heavy pair ``(a, c)`` without enough circuits, a free port
   is used, else the least used circuits ``(a, b)`` and ``(c, e)`` become ``(a, c)`` and
   ``(b, e)`` (never taking a pre-wired pair below its count, nor a server above ``usable_u``
   or a pair above ``pair_cap``); re-routed, kept when the objective drops.

The result is the best design evaluated, so it is never worse than either baseline.

Determinism: the LPs are bounded by work, not by the clock. Every path LP gets a GLOP iteration
limit from a work budget (work units, :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`: the
LP's nonzeros times its iterations), the arc LPs (at most ``arc_lp_max_columns`` columns) are
solved to optimality and charged their iterations, and an LP that the work limit stops leaves
the deterministic fall-back split (:func:`_fallback_split`). A path LP whose work limit buys
fewer simplex iterations than it has rows (GPT-3 175B's at 16,384 GPUs: 41,840 rows, 658,508
nonzeros, optimal after 14,844 iterations, 17 s of CPU) is not given to GLOP: it takes the
fall-back split at once, or, with :data:`FIRST_ORDER_STEPS` above 0, a first-order method
(:func:`_first_order_split`, each step charged its walk-link entries) started from it.
The search stops at a local optimum or when its work limit (:data:`HYBRID_WORK_LIMIT`) is used
up, so the result depends only on the inputs, the seed and the work limit. The time limit is a
safety net on the wall clock: when it stops the search or cuts an LP, ``info["deterministic"]``
is False and ``info["time_limit_cut"]`` says what it cut (``info["stopped_by"]``: ``"time
limit"``, ``"work limit"`` or ``"local optimum"``).

Lower bound (valid for any circuits and routing): per phase the larger of

- server bound: ``max_u max(out_u, in_u) / (B_e(u) + usable_u B_o)`` (forwarding only adds
  load);
- edge-switch cut bound: for each electrical switch with servers ``S`` below it, the bytes that
  must leave (enter) ``S`` -- fixed bytes across the cut, plus ``R_G`` for every ring group
  with members on both sides (a ring crosses a cut at least once each way) -- over the switch's
  uplink capacity plus ``sum_{u in S} usable_u B_o``.

Units: bytes, bytes/s, seconds.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers.model.congestion import (
    RingSet,
    phase_pairs,
)
from solvers.model.design import (
    Design,
    design_document,
    node_paths,
    parse_design_document,
    ring_records,
)
from solvers.model.ports import check_prewired_present
from solvers.model.problem import DesignProblem, PhaseTraffic, check_within_ports
from solvers.routing_lp import (
    WORK_PER_NNZ,
    WORK_PER_NNZ_ITERATION,
    route_phase,
    solve_matrix_program,
)
from topoopt.fabrics.circuits import Circuits, circuit_degrees
from topoopt.fabrics.direct_connect import circulant_circuits, geometric_strides
from topoopt.fabrics.fabric import Fabric
from topoopt.fabrics.fat_tree import fat_tree, leaf_spine
from topoopt.fabrics.hybrid import add_optical_layer
from topoopt.fabrics.routing import routes
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.limits import check_time_limit

__all__ = [
    "ELECTRICAL_FAMILIES",
    "HybridDesign",
    "HybridRouting",
    "build_electrical",
    "electrical_spec",
    "hybrid_lower_bound",
    "route_hybrid",
    "evaluate_hybrid",
    "baseline_circuits",
    "hybrid_design",
    "ROUTE_WORK_LIMIT",
    "HYBRID_WORK_LIMIT",
]

ROUTE_WORK_LIMIT = 20.0
"""Default work limit of one :func:`route_hybrid` call, in work units (about CPU seconds of the
reference machine, :data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`; the joint search's
default is 20 too). Each path LP's GLOP iteration limit is derived from it and the LP's
nonzeros, so where it binds the routing is the deterministic fall-back, not the clock's; a path
LP for which it buys fewer iterations than rows takes the fall-back at once (or the first-order
method, :func:`_first_order_steps`)."""

HYBRID_WORK_LIMIT = 200.0
"""Default work limit of :func:`hybrid_design` (all its routings; each routing gets at most
:data:`ROUTE_WORK_LIMIT` of what is left): the local search stops when it is used up."""

ELECTRICAL_FAMILIES = ("leaf-spine", "fat-tree")
"""Electrical families a :class:`HybridDesign` can rebuild."""

_SPEC_KEYS = {
    "leaf-spine": (
        "servers", "oversubscription", "radix", "leaf_hosts", "spine_radix", "port_bandwidth",
        "gpus_per_server", "intra_server_bandwidth", "latency", "ports_per_server",
    ),
    "fat-tree": (
        "k", "servers", "oversubscription", "agg_oversubscription", "port_bandwidth",
        "gpus_per_server", "intra_server_bandwidth", "latency",
    ),
}  # fmt: skip

Progress = Callable[[float, float], None]


# --------------------------------------------------------------------------- electrical part
def build_electrical(spec: Mapping[str, Any]) -> Fabric:
    """Build the electrical fabric described by ``spec`` (``{"family": ..., **builder kwargs}``).

    Examples
    --------
    >>> f = build_electrical({"family": "leaf-spine", "servers": 8, "oversubscription": 4.0,
    ...                       "leaf_hosts": 4})
    >>> f.n_servers, f.n_switches
    (8, 3)
    """
    if not isinstance(spec, Mapping) or "family" not in spec:
        raise InputError("electrical", spec, "a mapping with a 'family' key")
    family = spec["family"]
    if family not in _SPEC_KEYS:
        raise InputError("electrical.family", family, f"one of {', '.join(ELECTRICAL_FAMILIES)}")
    kw = {k: v for k, v in spec.items() if k != "family" and v is not None}
    bad = sorted(set(kw) - set(_SPEC_KEYS[family]))
    if bad:
        raise InputError(f"electrical.{bad[0]}", kw[bad[0]], f"one of {_SPEC_KEYS[family]}")
    if family == "leaf-spine":
        return leaf_spine(**kw)
    return fat_tree(**kw)


def electrical_spec(fabric: Fabric) -> dict[str, Any]:
    """The spec :func:`build_electrical` rebuilds ``fabric`` from (checked by rebuilding it).

    Raises
    ------
    InputError
        When ``fabric`` is not a leaf-spine or fat-tree that the builders reproduce exactly.
    """
    if fabric.family not in _SPEC_KEYS:
        raise InputError("electrical", fabric.family, f"one of {', '.join(ELECTRICAL_FAMILIES)}")
    lat = np.unique(fabric.latency)
    if lat.size > 1:
        raise InputError("electrical.latency", "non-uniform", "one latency on every link")
    spec: dict[str, Any] = {"family": fabric.family}
    for k in _SPEC_KEYS[fabric.family]:
        if k in fabric.params:
            spec[k] = fabric.params[k]
    spec["gpus_per_server"] = int(fabric.gpus_per_server)
    spec["intra_server_bandwidth"] = fabric.intra_server_bandwidth
    spec["latency"] = float(lat[0]) if lat.size else 1e-6
    if fabric.family == "leaf-spine":
        n = fabric.n_servers
        e = fabric.src < n
        leaf_of = np.full(n, -1)
        leaf_of[fabric.src[e]] = fabric.dst[e]
        spec["leaf_hosts"] = int(np.count_nonzero(leaf_of == leaf_of[0]))
        spines = np.flatnonzero(fabric.node_layer == 2)
        if spines.size and int(fabric.node_ports[spines[0]]) != int(spec["radix"]):
            spec["spine_radix"] = int(fabric.node_ports[spines[0]])
    rebuilt = build_electrical(spec)
    same = rebuilt.n_nodes == fabric.n_nodes and rebuilt.n_links == fabric.n_links
    same = same and all(
        np.array_equal(getattr(rebuilt, a), getattr(fabric, a))
        for a in ("src", "dst", "capacity", "latency", "node_ports")
    )
    if not same:
        raise InputError(
            "electrical", fabric.family, "a fabric built by leaf_spine/fat_tree (or pass a spec)"
        )
    return spec


# --------------------------------------------------------------------------- the design object
@dataclass(frozen=True, eq=False, kw_only=True, repr=False)  # Design's one-line repr
class HybridDesign(Design):
    """An optical layer over a given electrical fabric, its rings, its routing and its scores: a
    :class:`~solvers.model.design.Design` whose circuits are the optical layer, plus the
    electrical fabric it sits on.

    Attributes
    ----------
    (those of :class:`~solvers.model.design.Design`, with ``degree`` the optical ports per server
    and ``link_bandwidth`` one optical port's bytes/s), and

    routing : NodePaths
        Weighted walks of every server pair with traffic, as node sequences on the combined
        fabric (servers, then switches: the electrical fabric's node ids).
    electrical : dict
        The electrical fabric's spec (:func:`build_electrical`); keyword-only.
    device : str
        Optical device kind (``"ocs"`` or ``"patch-panel"``); keyword-only.
    reserved_ports : numpy.ndarray, optional
        ``int64 (servers,)`` optical ports held back at each server, when the problem had port
        options (module docstring); ``None`` otherwise.
    prewired : numpy.ndarray, optional
        ``int64 (k, 3)`` canonical pre-wired circuits the design keeps, when the problem had
        port options; ``None`` otherwise.

    Raises
    ------
    InputError
        A server uses more than ``degree - reserved`` optical ports, or a pre-wired pair has
        fewer circuits than pre-wired.
    """

    electrical: Mapping[str, Any]
    device: str = "ocs"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "electrical", dict(self.electrical))
        if self.reserved_ports is not None:
            usable = self.degree - self.reserved_ports
            check_within_ports(
                "circuits", self.port_usage(), usable, self.degree, ports="optical ports"
            )
        if self.prewired is not None:
            check_prewired_present(self.circuits, self.prewired)

    def electrical_fabric(self) -> Fabric:
        """The electrical part alone."""
        return build_electrical(self.electrical)

    def fabric(self) -> Fabric:
        """The combined fabric (rebuilt deterministically from the spec and the circuits)."""
        return _combined(self.electrical_fabric(), self.degree, self.circuits,
                         self.link_bandwidth, self.device)  # fmt: skip

    def routing_pathset(self, fabric: Fabric | None = None) -> PathSet:
        """The routing as a :class:`PathSet` on ``fabric`` (default :meth:`fabric`)."""
        f = self.fabric() if fabric is None else fabric
        return self.routing.to_pathset(f.src, f.dst, f.n_nodes)

    def phase_rings(self, problem: DesignProblem) -> tuple[RingSet, ...]:
        """The rings of each phase of ``problem``."""
        out = []
        for ph in problem.phases:
            mine = [r for r in self.rings if r["phase"] == ph.name]
            out.append(RingSet.from_lists([(r["group"], r["weight"], r["order"]) for r in mine]))
        return tuple(out)

    def evaluate(self, problem: DesignProblem) -> np.ndarray:
        """Per-phase times recomputed on :meth:`fabric` (see :func:`evaluate_hybrid`)."""
        f = self.fabric()
        return evaluate_hybrid(problem, f, self.routing_pathset(f), self.phase_rings(problem))

    def to_dict(self) -> dict[str, Any]:
        return {
            **design_document(self),
            "electrical": dict(self.electrical),
            "device": self.device,
        }

    @classmethod
    def from_json(cls, text: str) -> HybridDesign:
        """Read ``design.json`` text written by :meth:`to_json`.

        Raises
        ------
        InputError
            Not JSON, or a key is missing.
        """
        fields, d = parse_design_document(text, "a hybrid design document")
        if "electrical" not in d:
            raise InputError("design.json", "missing 'electrical'", "a hybrid design document")
        return cls(**fields, electrical=d["electrical"], device=str(d.get("device", "ocs")))


def _port_options(problem: DesignProblem, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Usable optical ports per server (``d - reserved``) and the pre-wired circuits, checked
    against the optical degree ``d`` (module docstring).

    A pre-wired pair then also fits ``pair_cap = min(max_parallel, d)``: the problem already
    holds it to ``max_parallel``, and a count above ``d >= usable`` fails the server check.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix((4, 4)))
    >>> p = DesignProblem(4, 4, 1.0, (ph,), reserved=[1, 0, 0, 0], prewired=[[0, 1, 1]])
    >>> usable, pre = _port_options(p, 2)
    >>> usable.tolist(), pre.tolist()
    ([1, 2, 2, 2], [[0, 1, 1]])
    >>> try:
    ...     _port_options(p.with_options(prewired=[[0, 1, 2]]), 2)
    ... except InputError as exc:
    ...     print(exc.field, exc.value)
    prewired (server 0) 2 ports
    """
    n = problem.n
    reserved = np.zeros(n, np.int64) if problem.reserved is None else problem.reserved
    if np.any(reserved > d):
        i = int(np.argmax(reserved))
        raise InputError(
            f"reserved (server {i})", int(reserved[i]), f"at most optical_degree = {d} ports"
        )
    usable = (d - reserved).astype(np.int64)
    pre = problem.prewired_circuits()
    check_within_ports(
        "prewired", problem.prewired_degrees(), usable, d, "ports", "optical ports",
        "optical_degree",
    )  # fmt: skip
    return usable, pre


def _combined(electrical: Fabric, d: int, circuits, b_opt: float, device: str) -> Fabric:
    c = Circuits(circuits, electrical.n_servers).rows
    if d == 0:  # no optical layer: the electrical fabric itself
        return electrical
    lat = float(electrical.latency[0]) if electrical.n_links else 1e-6
    return add_optical_layer(electrical, d, c, b_opt, device=device, latency=lat)


# --------------------------------------------------------------------------- bounds
def hybrid_lower_bound(
    problem: DesignProblem, electrical: Fabric, optical_degree: int, optical_bandwidth: float
) -> np.ndarray:
    """Per-phase lower bounds (seconds) valid for any circuits and routing (module docstring).

    Server ``u`` counts ``max(optical_degree - reserved_u, 0)`` optical ports
    (``problem.reserved``).

    Examples
    --------
    8 servers on two leaves of 4 with one uplink each (4:1); each server sends 1 GB across:
    the cut bound ``4 GB / (1 + 4 d) GB/s`` beats the server bound ``1 / (1 + d)``.

    >>> import scipy.sparse as sp
    >>> D = sp.csr_matrix((np.full(8, 1e9), (np.arange(8), (np.arange(8) + 4) % 8)), (8, 8))
    >>> p = DesignProblem(8, 1, 1e9, (PhaseTraffic("p", [0], [], [], D),))
    >>> e = leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=1e9)
    >>> hybrid_lower_bound(p, e, 2, 1e9).round(6).tolist()
    [0.444444]
    """
    n = problem.n
    d, bo = int(optical_degree), float(optical_bandwidth)
    ports = np.full(n, float(d))
    if problem.reserved is not None:
        ports = np.maximum(d - problem.reserved, 0).astype(np.float64)
    out_cap = np.bincount(electrical.src, electrical.capacity, electrical.n_nodes)[:n]
    in_cap = np.bincount(electrical.dst, electrical.capacity, electrical.n_nodes)[:n]
    # edge switches and their servers
    hs = electrical.src < n
    edge_of = np.full(n, -1, np.int64)
    edge_of[electrical.src[hs]] = electrical.dst[hs]
    edges = np.unique(edge_of[edge_of >= 0])
    member = sp.csr_matrix(
        (np.ones(n), (np.arange(n), np.searchsorted(edges, np.maximum(edge_of, 0)))),
        shape=(n, edges.size),
    )
    member = member.multiply((edge_of >= 0)[:, None]).tocsr()
    opt_ports = member.T @ ports  # optical ports below each edge switch
    up = np.isin(electrical.src, edges) & (electrical.dst >= n)
    down = np.isin(electrical.dst, edges) & (electrical.src >= n)
    up_cap = np.bincount(np.searchsorted(edges, electrical.src[up]), electrical.capacity[up],
                         edges.size)  # fmt: skip
    down_cap = np.bincount(np.searchsorted(edges, electrical.dst[down]),
                           electrical.capacity[down], edges.size)  # fmt: skip
    out = []
    for ph in problem.phases:
        t_srv = max(
            (ph.out_bytes(n) / (out_cap + ports * bo)).max(initial=0.0),
            (ph.in_bytes(n) / (in_cap + ports * bo)).max(initial=0.0),
        )
        D = ph.fixed
        inside = np.asarray((member.T @ D @ member).diagonal()).ravel()
        leave = np.asarray(member.T @ D.sum(axis=1)).ravel() - inside
        enter = np.asarray(member.T @ D.sum(axis=0).T).ravel() - inside
        for g in range(ph.n_groups):
            cnt = np.bincount(np.searchsorted(edges, edge_of[ph.group(g)]), minlength=edges.size)
            split = (cnt > 0) & (cnt < ph.group(g).size)
            leave += ph.ring_bytes[g] * split
            enter += ph.ring_bytes[g] * split
        with np.errstate(divide="ignore", invalid="ignore"):
            t_out = np.where(leave > 0, leave / (up_cap + opt_ports * bo), 0.0)
            t_in = np.where(enter > 0, enter / (down_cap + opt_ports * bo), 0.0)
        t_cut = float(max(t_out.max(initial=0.0), t_in.max(initial=0.0)))
        out.append(max(float(t_srv), t_cut))
    return np.asarray(out)


# --------------------------------------------------------------------------- routing
@dataclass(frozen=True, eq=False)
class HybridRouting:
    """One routing of every phase on a combined fabric.

    Attributes
    ----------
    paths : PathSet
        Walks on the fabric's link ids, one commodity per server pair with traffic.
    rings : tuple of RingSet
        Per phase.
    phase_times : numpy.ndarray
        Seconds per phase under ``paths`` (recomputed from the loads).
    status, solver : str
    work : float
        Deterministic work of the routing's LPs, in work units
        (:data:`solvers.routing_lp.WORK_PER_NNZ_ITERATION`).
    limit : str
        ``""`` when every LP finished, ``"work"`` when the work limit stopped one (the result
        is still deterministic), ``"time"`` when the wall clock did (it is then not).
    """

    paths: PathSet
    rings: tuple[RingSet, ...]
    phase_times: np.ndarray
    status: str
    solver: str
    work: float = 0.0
    limit: str = ""

    @property
    def time_s(self) -> float:
        return float(self.phase_times.sum())


def evaluate_hybrid(
    problem: DesignProblem, fabric: Fabric, paths: PathSet, rings: tuple[RingSet, ...]
) -> np.ndarray:
    """Per-phase congestion times (seconds) of ``paths`` and ``rings`` on ``fabric``.

    Raises
    ------
    InputError
        A pair with traffic has no path, or a path is not a walk from its source to its
        destination on the fabric, or its weights do not sum to one.
    """
    nn, L = fabric.n_nodes, fabric.n_links
    pl = paths.path_links
    if pl.size and (pl.min() < 0 or pl.max() >= L):
        raise InputError("routing", "a link id outside the fabric", f"ids 0..{L - 1}")
    comm = paths.path_commodity()
    first, last = pl[paths.path_ptr[:-1]], pl[paths.path_ptr[1:] - 1]
    inner = np.ones(pl.size, bool)
    inner[paths.path_ptr[1:] - 1] = False
    idx = np.flatnonzero(inner)
    if (
        np.any(paths.path_lengths() == 0)
        or np.any(fabric.src[first] != paths.src[comm])
        or np.any(fabric.dst[last] != paths.dst[comm])
        or np.any(fabric.dst[pl[idx]] != fabric.src[pl[idx + 1]])
    ):
        raise InputError("routing", "a path that is not a walk", "walks from source to destination")
    wsum = np.bincount(comm, paths.weight, paths.n_commodities)
    if np.any(np.abs(wsum - 1.0) > 1e-6) or np.any(paths.weight < -1e-9):
        raise InputError("routing.weight", "not a distribution", "weights >= 0 summing to 1")
    times = []
    for ph, rs in zip(problem.phases, rings, strict=True):
        s, t, b = phase_pairs(ph, rs, problem.n)
        k = paths.index(s, t, nn)
        if np.any(k < 0):
            i = int(np.flatnonzero(k < 0)[0])
            raise InputError("routing", f"no path for {int(s[i])}->{int(t[i])}", "every pair")
        cb = np.bincount(k, b, paths.n_commodities)
        times.append(float((paths.link_loads(cb, L) / fabric.capacity).max(initial=0.0)))
    return np.asarray(times)


def _optical_neighbours(fabric: Fabric) -> list[np.ndarray]:
    n = fabric.n_servers
    o = fabric.link_kind == "optical"
    order = np.argsort(fabric.src[o], kind="stable")
    s, t = fabric.src[o][order], fabric.dst[o][order]
    ptr = np.searchsorted(s, np.arange(n + 1))
    return [t[ptr[u] : ptr[u + 1]] for u in range(n)]


def _paths_of(ps: PathSet) -> list[list[np.ndarray]]:
    out = []
    for k in range(ps.n_commodities):
        out.append(
            [
                ps.path_links[ps.path_ptr[q] : ps.path_ptr[q + 1]]
                for q in range(ps.commodity_ptr[k], ps.commodity_ptr[k + 1])
            ]
        )
    return out


def _via_keys(
    fabric: Fabric, pair_src: np.ndarray, pair_dst: np.ndarray, max_via: int
) -> tuple[list[tuple[int, str, int]], np.ndarray]:
    """The mixed walks' vias ``(pair index, "ce" or "ec", neighbour)`` and the electrical pair
    keys ``u * n_nodes + v`` they need (one ECMP path each), in candidate order."""
    nn = fabric.n_nodes
    nb = _optical_neighbours(fabric)
    vias: list[tuple[int, str, int]] = []
    for i, (u, v) in enumerate(zip(pair_src.tolist(), pair_dst.tolist(), strict=True)):
        for w in nb[u][:max_via].tolist():
            if w != v:
                vias.append((i, "ce", w))
        for w in nb[v][:max_via].tolist():
            if w != u:
                vias.append((i, "ec", w))
    keys = [
        w * nn + int(pair_dst[i]) if kind == "ce" else int(pair_src[i]) * nn + w
        for i, kind, w in vias
    ]
    return vias, np.asarray(keys, np.int64)


def _electrical_walks(
    fabric: Fabric, keys: np.ndarray, k_of: np.ndarray, table: dict | None = None
) -> dict[int, list[np.ndarray]]:
    """ECMP paths on the electrical links of the pairs ``keys`` (``u * n_nodes + v``), at most
    ``k_of`` a pair, added to ``table`` (new when None) for the keys it lacks (a key listed twice:
    its first ``k_of``). A pair's paths do not depend on the other pairs asked
    (:func:`topoopt.fabrics.routing.routes` without a seed) and come in rank order, so the first
    of ``k`` paths is the one path of ``k = 1``: one table serves several candidate sets (the two
    ring options of a large routing), a via's leg taking the first path of its key."""
    nn = fabric.n_nodes
    el: dict[int, list[np.ndarray]] = {} if table is None else table
    keys, first = np.unique(np.asarray(keys, np.int64), return_index=True)
    k_of = np.asarray(k_of, np.int64)[first]
    miss = np.fromiter((k not in el for k in keys.tolist()), bool, keys.size)
    keys, k_of = keys[miss], k_of[miss]
    for kk in np.unique(k_of):
        sel = keys[k_of == kk]
        ps = routes(fabric, "ecmp", np.column_stack([sel // nn, sel % nn]), k=int(kk),
                    kinds=("electrical",))  # fmt: skip
        for key, plist in zip(sel.tolist(), _paths_of(ps), strict=True):
            el[key] = plist
    return el


def _electrical_needs(
    fabric: Fabric, pair_src: np.ndarray, pair_dst: np.ndarray, k_ecmp: int, max_via: int
) -> tuple[np.ndarray, np.ndarray]:
    """The electrical pair keys the candidates of these pairs need and the paths each: ``k_ecmp``
    for a pair itself, one for a via's electrical leg (the pair's own ``k_ecmp`` when the leg is
    also a pair)."""
    nn = fabric.n_nodes
    own = pair_src * nn + pair_dst
    _, via = _via_keys(fabric, pair_src, pair_dst, max_via)
    keys = np.unique(np.r_[own, via])
    return keys, np.where(np.isin(keys, own), k_ecmp, 1)


def _candidate_paths(
    fabric: Fabric,
    pair_src: np.ndarray,
    pair_dst: np.ndarray,
    k_ecmp: int,
    max_via: int,
    el: dict[int, list[np.ndarray]] | None = None,
) -> list[list[np.ndarray]]:
    """Candidate walks (link ids) per server pair (module docstring, "Method").

    ``el``: a table of electrical ECMP paths (:func:`_electrical_walks`) that holds the pairs'
    needs (:func:`_electrical_needs`); default: built here."""
    nn = fabric.n_nodes
    K = pair_src.size
    cands: list[list[np.ndarray]] = [[] for _ in range(K)]
    has_e = bool(np.any(fabric.link_kind == "electrical"))
    nb = _optical_neighbours(fabric)
    vias, via_keys = _via_keys(fabric, pair_src, pair_dst, max_via)
    if not has_e:
        el = {}
    elif el is None:
        el = _electrical_walks(fabric, *_electrical_needs(fabric, pair_src, pair_dst, k_ecmp,
                                                          max_via))  # fmt: skip
    lid = fabric.link_ids
    direct = lid(pair_src, pair_dst).astype(np.int64)
    optical = (direct >= 0) & (fabric.link_kind[np.maximum(direct, 0)] == "optical")
    common = [np.intersect1d(nb[u], nb[v])[:max_via]
              for u, v in zip(pair_src.tolist(), pair_dst.tolist(), strict=True)]  # fmt: skip
    cn = np.array([c.size for c in common], np.int64)
    cw = np.concatenate(common + [np.zeros(0, np.int64)]).astype(np.int64)
    ci = np.repeat(np.arange(K), cn)
    first = lid(pair_src[ci], cw).astype(np.int64)
    second = lid(cw, pair_dst[ci]).astype(np.int64)
    cptr = np.r_[0, np.cumsum(cn)]
    for i, (u, v) in enumerate(zip(pair_src.tolist(), pair_dst.tolist(), strict=True)):
        cands[i] += el.get(u * nn + v, [])
        if optical[i]:
            cands[i].append(direct[i : i + 1].copy())
        for j in range(cptr[i], cptr[i + 1]):
            cands[i].append(np.array([first[j], second[j]], np.int64))
    if vias:
        vi = np.array([i for i, _, _ in vias], np.int64)
        vw = np.array([w for _, _, w in vias], np.int64)
        ce = np.array([kind == "ce" for _, kind, _ in vias])
        hop = np.where(ce, lid(pair_src[vi], vw), lid(vw, pair_dst[vi])).astype(np.int64)
        own = set((pair_src * nn + pair_dst).tolist())
        for j, (i, kind, _) in enumerate(vias):
            key = int(via_keys[j])
            legs = el.get(key, []) if key in own else el.get(key, [])[:1]
            h = hop[j : j + 1]
            if kind == "ce":
                cands[i] += [np.concatenate([h, t]) for t in legs]
            else:
                cands[i] += [np.concatenate([t, h]) for t in legs]
    return cands


def _ring_options(problem: DesignProblem, circuits: Circuits) -> list[list[list[np.ndarray]]]:
    """Per phase, per group: candidate rings (along circuits first, then ascending/reverse)."""
    from solvers.joint.rings import circuit_rings

    out = []
    for ph in problem.phases:
        groups = []
        for g in range(ph.n_groups):
            m = ph.group(g)
            along = circuit_rings(m, circuits, problem.n, limit=4) if len(circuits) else []
            plain = [m.copy(), np.concatenate([m[:1], m[1:][::-1]])] if m.size > 2 else [m.copy()]
            uniq: dict[bytes, np.ndarray] = {}
            for r in along + plain:
                uniq.setdefault(np.asarray(r, np.int64).tobytes(), np.asarray(r, np.int64))
            groups.append(list(uniq.values()))
        out.append(groups)
    return out


def _equal_rings(ph: PhaseTraffic, orders: list[np.ndarray]) -> RingSet:
    return RingSet.from_lists(
        [(g, 1.0 / len(orders[g]), o.tolist()) for g in range(ph.n_groups) for o in orders[g]]
    )


def _fallback_split(fabric: Fabric, Dk, qk, qrep, flat, K: int) -> tuple[np.ndarray, str]:
    """Candidate weights ``y`` when the path LP gives no solution (its time limit on a large
    fabric: DLRM's all-to-all at 512 servers has 130,816 pairs): the best, by the LP's own
    objective ``sum_p max_l load_l / cap_l``, of three deterministic splits of each pair's bytes:

    - ``every walk``: equally over all of the pair's candidate walks (both layers);
    - ``electrical ECMP``: equally over its electrical paths (all walks when it has none);
    - ``first walk``: all on its first candidate (its first electrical ECMP path when it has
      one; this alone was the fall-back before, and it put a leaf's whole traffic on one spine).

    Returns ``(y, name)``; ``y`` per candidate, normalised per pair by the caller.

    Examples
    --------
    Two servers on one leaf and one circuit, 2 bytes from 0 to 1 over two candidate walks (the
    switch, links 2 and 5; the circuit, link 0): over every walk the busiest link carries 1
    byte, on the switch alone 2.

    >>> from topoopt.fabrics.hybrid import add_optical_layer
    >>> f = add_optical_layer(leaf_spine(2, port_bandwidth=1.0), 1, [[0, 1, 1]], 1.0)
    >>> flat, qrep = np.array([2, 5, 0]), np.array([0, 0, 1])  # walk 0: 2, 5; walk 1: 0
    >>> y, name = _fallback_split(f, np.array([[2.0]]), np.array([0, 0]), qrep, flat, 1)
    >>> name, y.tolist()
    ('every walk', [1.0, 1.0])
    """
    Q, L = qk.size, fabric.n_links
    electric = np.bincount(qrep, weights=fabric.link_kind[flat] != "electrical", minlength=Q) == 0
    has_e = np.bincount(qk, weights=electric, minlength=K) > 0
    first = np.zeros(Q)
    first[np.searchsorted(qk, np.arange(K))] = 1.0
    options = {
        "every walk": np.ones(Q),
        "electrical ECMP": np.where(electric | ~has_e[qk], 1.0, 0.0),
        "first walk": first,
    }
    cap = fabric.capacity

    def objective(y):
        share = y / np.bincount(qk, y, K)[qk]
        return sum(
            float((np.bincount(flat, (Dk[p, qk] * share)[qrep], minlength=L) / cap).max())
            for p in range(Dk.shape[0])
        )

    name = min(options, key=lambda k: objective(options[k]))  # ties: the order above
    return options[name], name


BETA0, BETA_GROWTH, ETA0, ETA_DECAY = 8.0, 16.0, 1.0, 0.02
"""Schedule of :func:`_first_order_split`: the soft maximum's sharpness rises geometrically
from ``BETA0`` to ``BETA0 * BETA_GROWTH``, the step from ``ETA0`` falls to ``ETA0 * ETA_DECAY``."""

FIRST_ORDER_STEPS = 0
"""Most steps of :func:`_first_order_split` in one path LP; 0 (the default): none, such an LP
takes the fall-back split (:func:`_fallback_split`) without GLOP. Off because its routing
costs the simulation far more than it gains there: ``advise``'s ``hybrid`` row of the embedded
GPT-3 175B plan at 16,384 GPUs (global batch 24,576) simulated 10.48444 s with 200 steps
against the fall-back's 10.51557 s (0.30 % faster) for 1,795 s of CPU and 7.17 GB against
145 s and 2.85 GB (about 10 unequal walks a pair, 80,182 paths). On that LP
(two ring options, 107,404 and 101,766 walks; GLOP's optima 0.94241 and 0.75023 s after 14,844
simplex iterations, 17 s of CPU, for the first) 100 steps end 1.6 and 2.0 % above the optima,
200 steps 1.1 and 1.3 %, 400 steps 0.9 and 1.3 % (about 1 s of CPU a 100 steps)."""

FIRST_ORDER_MIN_STEPS = 10
"""Fewer steps than this are not worth taking: the LP goes to GLOP (and its fall-back)."""

FIRST_ORDER_WORK_PER_ENTRY = 1e-8
"""Work units per walk-link entry per phase per step of :func:`_first_order_split` (measured
9.7e-9 CPU seconds on GPT-3 175B's path LP at 16,384 GPUs: 200 steps over 517,456 entries and
2 phases in 2.0 s)."""


def _first_order_split(
    fabric: Fabric,
    Dk: np.ndarray,
    qk: np.ndarray,
    qrep: np.ndarray,
    flat: np.ndarray,
    K: int,
    y0: np.ndarray,
    iterations: int,
) -> tuple[np.ndarray, int]:
    """Candidate weights ``y`` minimising the path LP's objective ``sum_p max_l load_pl / cap_l``
    by a first-order method: ``iterations`` multiplicative-weights steps from ``y0`` (weights per
    candidate, normalised per pair), the best iterate by the objective kept (so never worse than
    ``y0``). Returns ``(y, iterations done)``.

    Each step takes the soft maximum of every phase's utilisations (weights
    ``exp(beta (u_pl / max_l u_pl - 1))``, normalised; ``beta`` rises from 8 to 128 over the
    steps, so the soft maximum tightens onto the maximum), prices each walk with its gradient
    ``g_q = sum_p D_pk sum_{l in q} w_pl / cap_l``, and moves each pair's weights by
    ``y_q <- y_q exp(-eta (g_q / min_{q' of k} g_q' - 1))`` (``eta = 1``): walks dearer than the
    pair's cheapest lose weight geometrically. Plain numpy on the candidates' link lists, no
    clock: the result depends only on the inputs and ``iterations``.

    Examples
    --------
    Two servers on one leaf and one circuit (1 byte/s each way): 2 bytes from 0 to 1, first all on
    the switch (2 s); the steps move half onto the circuit (1 s, the optimum).

    >>> from topoopt.fabrics.hybrid import add_optical_layer
    >>> f = add_optical_layer(leaf_spine(2, port_bandwidth=1.0), 1, [[0, 1, 1]], 1.0)
    >>> flat, qrep = np.array([2, 5, 0]), np.array([0, 0, 1])  # walk 0: 2, 5; walk 1: 0
    >>> y, done = _first_order_split(f, np.array([[2.0]]), np.array([0, 0]), qrep, flat, 1,
    ...                              np.array([1.0, 0.0]), 50)
    >>> done, np.round(y, 3).tolist()
    (50, [0.5, 0.5])
    """
    P, L, Q = Dk.shape[0], fabric.n_links, qk.size
    cap = fabric.capacity
    start = np.searchsorted(qk, np.arange(K))
    qD = Dk[:, qk]  # (P, Q): each walk's pair bytes per phase

    def share(y):
        tot = np.bincount(qk, y, K)
        return np.where(tot[qk] > 0, y / np.where(tot[qk] > 0, tot[qk], 1.0), 0.0)

    def utilisation(y):
        return [np.bincount(flat, (qD[p] * y)[qrep], L) / cap for p in range(P)]

    y = share(np.maximum(np.asarray(y0, np.float64), 0.0))
    best_y, best_f = y.copy(), sum(float(x.max(initial=0.0)) for x in utilisation(y))
    T = int(iterations)
    # start inside the simplex (a walk at weight 0 could never gain): 1/10 spread evenly
    y = share(0.9 * y + 0.1 * share(np.ones(Q)))
    for it in range(T + 1):
        u = utilisation(y)
        m = [float(x.max(initial=0.0)) for x in u]
        f = sum(m)
        if f < best_f * (1 - 1e-12):
            best_y, best_f = y.copy(), f
        if it == T:
            break
        frac = it / max(T - 1, 1)
        beta, eta = BETA0 * BETA_GROWTH**frac, ETA0 * ETA_DECAY**frac
        g = np.zeros(Q)
        for p in range(P):
            if m[p] <= 0:
                continue
            w = np.exp(beta * (u[p] / m[p] - 1.0))
            w /= w.sum()
            g += qD[p] * np.bincount(qrep, (w / cap)[flat], Q)
        at = np.searchsorted(start, np.arange(Q), "right") - 1
        gmin = np.minimum.reduceat(g, start)[at]
        gmax = np.maximum.reduceat(g, start)[at]
        rel = np.where(gmax > 0, (g - gmin) / np.where(gmax > 0, gmax, 1.0), 0.0)
        y = share(y * np.exp(-eta * rel))
    return best_y, int(iterations)


def _path_lp(
    fabric: Fabric,
    problem: DesignProblem,
    rings: tuple[RingSet, ...],
    extra: list[dict[int, list[np.ndarray]]],
    k_ecmp: int,
    max_via: int,
    time_limit: float,
    work_limit: float = math.inf,
    el: dict[int, list[np.ndarray]] | None = None,
) -> HybridRouting:
    """The path LP (constraints (3)-(4)) over the candidate walks, rings fixed.

    GLOP's iteration limit is what ``work_limit`` (work units) buys on this LP's nonzeros
    (at least one iteration); ``time_limit`` is a wall-clock cap only. When either stops the
    LP without a solution the split is :func:`_fallback_split` (deterministic) and ``limit``
    names the limit (``"work"`` or ``"time"``). ``el``: the electrical paths' table
    (:func:`_candidate_paths`)."""
    nn, L = fabric.n_nodes, fabric.n_links
    dem, keys = _demand_keys(problem, rings, nn)
    K, P = keys.size, problem.n_phases
    if K == 0:
        empty = PathSet(np.zeros(0), np.zeros(0), np.zeros(1), np.zeros(1), np.zeros(0),
                        np.zeros(0))  # fmt: skip
        return HybridRouting(empty, rings, np.zeros(P), "trivial", "none")
    Dk = np.zeros((P, K))
    for p, (s, t, b) in enumerate(dem):
        Dk[p, np.searchsorted(keys, s * nn + t)] = b
    cands = _candidate_paths(fabric, keys // nn, keys % nn, k_ecmp, max_via, el)
    for ex in extra:
        for key, plist in ex.items():
            i = int(np.searchsorted(keys, key))
            if i < K and keys[i] == key:
                cands[i] += plist
    qlinks: list[np.ndarray] = []
    qk: list[int] = []
    for i, plist in enumerate(cands):
        seen: set[bytes] = set()
        for q in plist:
            b = q.tobytes()
            if b not in seen:
                seen.add(b)
                qlinks.append(q)
                qk.append(i)
        if not seen:
            raise InputError("fabric", f"no route {keys[i] // nn}->{keys[i] % nn}",
                             "a connected fabric")  # fmt: skip
    qk_a = np.asarray(qk, np.int64)
    Q = qk_a.size
    qlen = np.array([q.size for q in qlinks])
    flat = np.concatenate(qlinks)
    qrep = np.repeat(np.arange(Q), qlen)
    U = float(Dk.max())
    cap = fabric.capacity
    cap0 = float(cap.max())
    rows, cols, vals = [qk_a], [np.arange(Q)], [np.ones(Q)]
    for p in range(P):  # (4)
        coef = Dk[p, qk_a[qrep]] / U
        nz = coef > 0
        rows += [K + p * L + flat[nz], K + p * L + np.arange(L)]
        cols += [qrep[nz], np.full(L, Q + p)]
        vals += [coef[nz], -cap / cap0]
    A = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(K + P * L, Q + P),
    )
    c = np.zeros(Q + P)
    c[Q:] = 1.0
    c[:Q] = 1e-6 * qlen / qlen.max() / K  # tie-break: fewer hops among equals
    iters = _iteration_limit(work_limit, A.nnz)
    steps = _first_order_steps(work_limit, A.nnz, flat.size * P, iters, K + P * L)
    if steps:  # too large for the simplex within the work limit: the first-order method
        y, split = _fallback_split(fabric, Dk, qk_a, qrep, flat, K)
        y, _ = _first_order_split(fabric, Dk, qk_a, qrep, flat, K, y, steps)
        status, solver, limit = f"first-order ({steps} steps from {split})", "first-order", ""
        work = WORK_PER_NNZ * A.nnz + FIRST_ORDER_WORK_PER_ENTRY * flat.size * P * steps
    elif iters is not None and iters < K + P * L:  # too large: the fall-back, without GLOP
        y, split = _fallback_split(fabric, Dk, qk_a, qrep, flat, K)
        status, solver, limit = f"fallback (limit, work limit): {split}", "glop", "work"
        work = WORK_PER_NNZ * A.nnz
    else:
        res = solve_matrix_program(
            c, A, np.r_[np.ones(K), np.full(P * L, -np.inf)],
            np.r_[np.ones(K), np.zeros(P * L)], np.zeros(Q + P), np.full(Q + P, np.inf),
            solver="glop", time_limit=time_limit, iteration_limit=iters,
        )  # fmt: skip
        solver, work = "glop", res.work
        limit = {"iteration": "work", "time": "time"}.get(res.limit, res.limit)
        if res.x is None or res.status not in ("optimal", "feasible"):  # no feasible point
            y, split = _fallback_split(fabric, Dk, qk_a, qrep, flat, K)
            status = f"fallback ({res.status}, {limit or 'solver'} limit): {split}"
        else:
            y = np.maximum(res.x[:Q], 0.0)
            status = res.status
    tot = np.bincount(qk_a, y, K)
    keep = y > 1e-7 * tot[qk_a]
    y = np.where(keep, y, 0.0)
    tot = np.bincount(qk_a, y, K)
    sel = np.flatnonzero(keep)
    cptr = np.zeros(K + 1, np.int64)
    cptr[1:] = np.cumsum(np.bincount(qk_a[sel], minlength=K))
    pptr = np.zeros(sel.size + 1, np.int64)
    pptr[1:] = np.cumsum(qlen[sel])
    paths = PathSet(keys // nn, keys % nn, cptr, pptr,
                    np.concatenate([qlinks[q] for q in sel]), y[sel] / tot[qk_a[sel]])  # fmt: skip
    times = np.array([float((paths.link_loads(Dk[p], L) / cap).max()) for p in range(P)])
    return HybridRouting(paths, rings, times, status, solver, work, limit)


def _first_order_steps(
    work_limit: float, nnz: int, entries: int, iteration_limit: int | None, rows: int
) -> int:
    """Steps of :func:`_first_order_split` for a path LP, 0 where GLOP takes it: GLOP when the
    work limit buys at least one simplex iteration per row (``iteration_limit >= rows``; the
    path LPs measured took 0.26-0.35 iterations a row to their optimum: Mixtral 8x7B at 1,024
    GPUs 913 on 3,544 rows, GPT-3 175B at 16,384 GPUs 14,844 on 41,840) or is unlimited, and
    when what is left after building the model (``WORK_PER_NNZ * nnz``) buys fewer than
    :data:`FIRST_ORDER_MIN_STEPS` steps of ``entries`` (walk-link entries times phases) each;
    else what the work buys, at most :data:`FIRST_ORDER_STEPS`.

    >>> _first_order_steps(10.0, 658_508, 1_034_912, 7_092, 41_840)   # GPT-3 175B, 16,384 GPUs
    0
    >>> _first_order_steps(10.0, 42_898, 85_000, 116_055, 3_544)      # Mixtral, 1,024 GPUs
    0
    >>> _first_order_steps(math.inf, 658_508, 1_034_912, None, 41_840)
    0
    """
    if iteration_limit is None or iteration_limit >= rows:
        return 0
    left = float(work_limit) - WORK_PER_NNZ * nnz
    steps = int(left / (FIRST_ORDER_WORK_PER_ENTRY * max(int(entries), 1))) if left > 0 else 0
    return min(steps, FIRST_ORDER_STEPS) if steps >= FIRST_ORDER_MIN_STEPS else 0


def _demand_keys(problem: DesignProblem, rings: tuple[RingSet, ...], nn: int):
    """Per phase the pairs' ``(src, dst, bytes)`` under ``rings``, and the sorted pair keys
    ``src * nn + dst`` of every phase."""
    dem = [phase_pairs(ph, rs, problem.n) for ph, rs in zip(problem.phases, rings, strict=True)]
    keys = np.unique(np.concatenate([s * nn + t for s, t, _ in dem] + [np.zeros(0, np.int64)]))
    return dem, keys


def _iteration_limit(work_limit: float, nnz: int) -> int | None:
    """GLOP's iteration limit for ``work_limit`` work units on an LP of ``nnz`` nonzeros
    (None: no limit); at least 1.

    >>> _iteration_limit(1.0, 1000)   # (1 - 1e-3) / (1000 * 2e-9)
    499500
    >>> _iteration_limit(0.0, 1000), _iteration_limit(math.inf, 1000)
    (1, None)
    """
    if not math.isfinite(work_limit):
        return None
    nnz = max(int(nnz), 1)
    left = max(float(work_limit) - WORK_PER_NNZ * nnz, 0.0)
    return max(int(left / (WORK_PER_NNZ_ITERATION["glop"] * nnz) * (1 + 1e-12)), 1)


def _worst_limit(limits) -> str:
    """``"time"`` if any solve was cut by the clock, else ``"work"`` if any by the work limit."""
    limits = set(limits)
    return "time" if "time" in limits else ("work" if "work" in limits else "")


def route_hybrid(
    problem: DesignProblem,
    fabric: Fabric,
    time_limit: float = 60.0,
    arc_lp_max_columns: int = 30_000,
    k_ecmp: int = 8,
    max_via: int = 8,
    work_limit: float | None = None,
) -> HybridRouting:
    """Route every phase of ``problem`` on ``fabric`` with one shared routing (module docstring).

    Parameters
    ----------
    problem : DesignProblem
        ``problem.n`` must equal ``fabric.n_servers``.
    fabric : Fabric
        Any fabric with servers first; circuits are its ``optical`` links.
    time_limit : float
        Wall-clock cap on the LPs, seconds: a safety net only (a routing it cut has
        ``limit == "time"`` and depends on the machine's speed and load).
    arc_lp_max_columns : int
        Run the per-phase arc LP (rings chosen by the LP, optimal walks added as candidates) when
        sources x links is at most this.
    k_ecmp, max_via : int
        Electrical ECMP paths per pair; circuit neighbours tried for mixed walks.
    work_limit : float, optional
        Deterministic budget of the LPs, work units (default :data:`ROUTE_WORK_LIMIT`;
        ``inf``: none). The per-phase arc LPs (GLOP on at most ``arc_lp_max_columns`` columns,
        solved to optimality) run only while work is left; each path LP gets an iteration
        limit from the work left (the large case's two ring options get half each). An LP the
        limit stops leaves the deterministic fall-back split (``status`` says so, ``limit`` is
        ``"work"``).

    Returns
    -------
    HybridRouting
        ``work`` the LPs' work units, ``limit`` which limit stopped one (``""``: none).

    Examples
    --------
    Two servers on one leaf (1 byte/s NICs) and one 1 byte/s circuit: 2 bytes from 0 to 1 split
    evenly, 1 s.

    >>> import scipy.sparse as sp
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix(([2.0], ([0], [1])), shape=(2, 2)))
    >>> prob = DesignProblem(2, 1, 1.0, (ph,))
    >>> f = add_optical_layer(leaf_spine(2, port_bandwidth=1.0), 1, [[0, 1, 1]], 1.0)
    >>> round(route_hybrid(prob, f).time_s, 6)
    1.0
    """
    t0 = time.perf_counter()
    if problem.n != fabric.n_servers:
        raise InputError("problem.n", problem.n, f"the fabric's {fabric.n_servers} servers")
    wl = ROUTE_WORK_LIMIT if work_limit is None else float(work_limit)
    if math.isnan(wl) or wl < 0:
        raise InputError("work_limit", work_limit, "work units >= 0 (inf: none)")
    opt = fabric.link_kind == "optical"
    circ = np.column_stack([fabric.src[opt], fabric.dst[opt], fabric.multiplicity[opt]])
    circuits = Circuits(circ[circ[:, 0] < circ[:, 1]], problem.n)
    circ = circuits.rows
    options = _ring_options(problem, circuits)
    fwd = np.ones(fabric.n_nodes, bool)
    if not opt.any():
        fwd[: fabric.n_servers] = fabric.n_switches == 0
    n_src = max([np.unique(np.r_[ph.fixed.tocoo().row, ph.group_servers]).size
                 for ph in problem.phases] + [0])  # fmt: skip
    if n_src * fabric.n_links <= arc_lp_max_columns and wl > 0:
        results = []
        for ph, cands in zip(problem.phases, options, strict=True):
            left = max(time_limit - (time.perf_counter() - t0), 1.0) / max(problem.n_phases, 1)
            results.append(
                route_phase(fabric.n_nodes, fabric.src, fabric.dst, fabric.capacity, phase=ph,
                            ring_candidates=cands or None, forward=fwd, solver="glop",
                            time_limit=left)
            )  # fmt: skip
        nn = fabric.n_nodes
        extra = []
        for r in results:
            ps = r.paths
            extra.append(dict(zip((ps.src * nn + ps.dst).tolist(), _paths_of(ps), strict=True)))
        rings = tuple(r.rings for r in results)
        left = max(time_limit - (time.perf_counter() - t0), 1.0)
        arc_work = sum(r.work for r in results)
        arc_limit = _worst_limit("time" if r.limit == "time" else "" for r in results)
        r = _path_lp(fabric, problem, rings, extra, k_ecmp, max_via, left,
                     max(wl - arc_work, 0.0))  # fmt: skip
        return replace(r, work=r.work + arc_work, limit=_worst_limit((r.limit, arc_limit)))
    # large: rings along circuits where they exist, else ascending/reverse; keep the better
    best = None
    along_first = tuple(
        _equal_rings(ph, [[c for c in cands if _follows(c, circ, problem.n)] or cands[-2:]
                          for cands in groups])
        for ph, groups in zip(problem.phases, options, strict=True)
    )  # fmt: skip
    plain = tuple(
        _equal_rings(ph, [cands[-2:] for cands in groups])
        for ph, groups in zip(problem.phases, options, strict=True)
    )
    options_r = (along_first, plain) if circ.size else (plain,)
    el = None  # the electrical paths of both options' candidates, found once
    if bool(np.any(fabric.link_kind == "electrical")):
        nn = fabric.n_nodes
        needs = [_electrical_needs(fabric, k // nn, k % nn, k_ecmp, max_via)
                 for k in (_demand_keys(problem, rs, nn)[1] for rs in options_r)]  # fmt: skip
        keys = np.concatenate([k for k, _ in needs])
        k_of = np.concatenate([kk for _, kk in needs])
        order = np.argsort(-k_of, kind="stable")  # a key asked with k_ecmp and 1: k_ecmp
        el = _electrical_walks(fabric, keys[order], k_of[order])
    routed = []
    for rings in options_r:
        left = max(time_limit - (time.perf_counter() - t0), 1.0)
        r = _path_lp(fabric, problem, rings, [], k_ecmp, max_via, left, wl / len(options_r), el)
        routed.append(r)
        if best is None or r.time_s < best.time_s - 1e-12 * max(best.time_s, 1e-300):
            best = r
    return replace(best, work=sum(r.work for r in routed),
                   limit=_worst_limit(r.limit for r in routed))  # fmt: skip


def _follows(order: np.ndarray, circuits: np.ndarray, n: int) -> bool:
    if order.size < 3 or circuits.size == 0:
        return False
    have = set((circuits[:, 0] * n + circuits[:, 1]).tolist())
    a, b = order, np.roll(order, -1)
    return all(k in have for k in (np.minimum(a, b) * n + np.maximum(a, b)).tolist())


# --------------------------------------------------------------------------- circuits
def _plain_demand(problem: DesignProblem) -> sp.csr_matrix:
    """``(n, n)`` bytes over all phases: fixed bytes plus the ring steps in ascending order."""
    n = problem.n
    total = sp.csr_matrix((n, n))
    for ph in problem.phases:
        s, t, b = [ph.fixed.tocoo().row], [ph.fixed.tocoo().col], [ph.fixed.tocoo().data]
        for g in range(ph.n_groups):
            m = ph.group(g)
            s.append(m)
            t.append(np.roll(m, -1))
            b.append(np.full(m.size, float(ph.ring_bytes[g])))
        total = total + sp.csr_matrix(
            (np.concatenate(b), (np.concatenate(s), np.concatenate(t))), shape=(n, n)
        )
    return total.tocsr()


def baseline_circuits(
    problem: DesignProblem,
    optical_degree: int,
    optical_bandwidth: float,
    seed: int = 0,
    demand: sp.spmatrix | None = None,
) -> dict[str, np.ndarray]:
    """The two baselines' circuits: ``circulant`` (geometric strides, as
    :func:`topoopt.fabrics.hybrid.hybrid` builds) and ``topoopt`` (TopoOpt's TopologyFinder with
    ``optical_degree`` ports). A baseline that does not apply (fewer than 2 ports, too few
    servers, an odd server count where TopoOpt needs perfect matchings) is left out.

    With reserved or pre-wired ports (module docstring) the circulant is built on the uniform
    free degree ``min_u free_u``, the pre-wired circuits are added
    (:func:`solvers.model.design.merge_prewired`) and the ports still free are filled by ``demand``
    (default: fixed bytes plus ascending ring steps of every phase) with
    :func:`solvers.joint.local_search.fill_free_ports`; TopoOpt honours the options itself.

    Examples
    --------
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix((6, 6)))
    >>> p = DesignProblem(6, 2, 1.0, (ph,), prewired=[[0, 3, 1]])
    >>> c = baseline_circuits(p, 2, 1.0)["circulant"]
    >>> c.tolist()  # free degree 1: no ring; 0-3 kept, free ports filled (no demand: lowest pair)
    [[0, 1, 1], [0, 3, 1], [1, 2, 1], [2, 3, 1], [4, 5, 2]]
    """
    n, d = problem.n, int(optical_degree)
    out: dict[str, np.ndarray] = {}
    if d >= 2 and n >= 3:
        if problem.has_port_options:
            from solvers.model.ports import fill_free_ports, merge_prewired

            sub = problem.with_options(degree=d, link_bandwidth=optical_bandwidth)
            pair_cap = sub.pair_cap
            usable, _ = _port_options(problem, d)
            fd = int((usable - problem.prewired_degrees()).min())
            strides = geometric_strides(n, fd // 2) if fd >= 2 else []
            c = merge_prewired(Circuits(circulant_circuits(n, strides), n).rows, sub)
            dem = _plain_demand(problem) if demand is None else demand
            out["circulant"] = fill_free_ports(c, n, usable, dem, pair_cap)
        else:
            out["circulant"] = Circuits(circulant_circuits(n, geometric_strides(n, d // 2)), n).rows
        from solvers.baselines.topoopt_method import topoopt_design

        try:
            sub = problem.with_options(degree=d, link_bandwidth=optical_bandwidth)
            out["topoopt"] = topoopt_design(sub, seed=seed).circuits
        except InputError:
            pass
    return out


def _greedy_b_matching(
    weight: np.ndarray, d: int | np.ndarray, pair_cap: int, start: np.ndarray | None = None
) -> np.ndarray:
    """Circuits one at a time on the heaviest pair with free ports (weight discounted
    ``c / (c + 1)`` after its ``c``-th circuit); ties by pair index. Deterministic.

    ``d``: ports per server (one number or ``(n,)``); ``start``: circuits already there (the
    pre-wired ones), kept, counted against ``d`` and ``pair_cap`` and in the discount.

    Examples
    --------
    One port each; server 0 wants 1 most, then 1-3, then 2-3. Pre-wiring 0-2 takes 0's port:

    >>> w = np.zeros((4, 4))
    >>> w[0, 1], w[1, 3], w[2, 3] = 4.0, 2.0, 1.0
    >>> _greedy_b_matching(w, 1, 1).tolist()
    [[0, 1, 1], [2, 3, 1]]
    >>> _greedy_b_matching(w, 1, 1, start=np.array([[2, 0, 1]])).tolist()
    [[0, 2, 1], [1, 3, 1]]
    """
    n = weight.shape[0]
    w = np.triu(weight + weight.T, 1)
    count: dict[tuple[int, int], int] = {}
    free = np.broadcast_to(np.asarray(d, np.int64), (n,)).copy()
    if start is not None and len(start):
        start = Circuits(start, n).rows
        count = {(int(u), int(v)): int(k) for u, v, k in start.tolist()}
        free -= circuit_degrees(start, n).astype(np.int64)
    iu, ju = np.nonzero(w > 0)
    heap = [
        (-float(w[i, j]) / (count.get((int(i), int(j)), 0) + 1), int(i), int(j))
        for i, j in zip(iu, ju, strict=True)
    ]
    heapq.heapify(heap)
    while heap:
        negw, i, j = heapq.heappop(heap)
        c = count.get((i, j), 0)
        if free[i] == 0 or free[j] == 0 or c >= pair_cap:
            continue
        count[(i, j)] = c + 1
        free[i] -= 1
        free[j] -= 1
        heapq.heappush(heap, (negw * (c + 1) / (c + 2), i, j))
    rows = [[i, j, c] for (i, j), c in sorted(count.items())]
    return Circuits(rows, n).rows


def _pair_weights(
    problem: DesignProblem, fabric: Fabric, routing: HybridRouting, bottleneck: bool
) -> np.ndarray:
    """Dense ``(n, n)``: per pair, bytes / phase time, times (if ``bottleneck``) the largest
    utilisation its walks meet (weighted by the walk fractions), summed over phases."""
    n, nn, L = problem.n, fabric.n_nodes, fabric.n_links
    ps = routing.paths
    W = np.zeros((n, n))
    for ph, rs, T in zip(problem.phases, routing.rings, routing.phase_times, strict=True):
        if T <= 0:
            continue
        s, t, b = phase_pairs(ph, rs, n)
        if not bottleneck:
            np.add.at(W, (s, t), b / T)
            continue
        k = ps.index(s, t, nn)
        loads = ps.link_loads(np.bincount(k, b, ps.n_commodities), L)
        util = loads / fabric.capacity / T
        pmax = np.maximum.reduceat(util[ps.path_links], ps.path_ptr[:-1]) if ps.n_paths else []
        share = np.bincount(ps.path_commodity(), ps.weight * pmax, ps.n_commodities)
        np.add.at(W, (s, t), b / T * share[k] ** 2)
    return W


def _circuit_use(fabric: Fabric, problem: DesignProblem, routing: HybridRouting) -> dict:
    """Max over phases and both directions of load / capacity / phase time, per circuit pair."""
    L = fabric.n_links
    ps = routing.paths
    use = np.zeros(L)
    for ph, rs, T in zip(problem.phases, routing.rings, routing.phase_times, strict=True):
        if T <= 0:
            continue
        s, t, b = phase_pairs(ph, rs, problem.n)
        k = ps.index(s, t, fabric.n_nodes)
        use = np.maximum(use, ps.link_loads(np.bincount(k, b, ps.n_commodities), L)
                         / fabric.capacity / T)  # fmt: skip
    opt = np.flatnonzero((fabric.link_kind == "optical") & (fabric.src < fabric.dst))
    out = {}
    for lid in opt.tolist():
        u, v = int(fabric.src[lid]), int(fabric.dst[lid])
        out[(u, v)] = float(max(use[lid], use[lid ^ 1]))
    return out


# --------------------------------------------------------------------------- the solver
def _check(problem, electrical, optical_degree, optical_bandwidth, time_limit_s):
    if isinstance(electrical, Fabric):
        spec = electrical_spec(electrical)
        efab = electrical
    else:
        spec = dict(electrical) if isinstance(electrical, Mapping) else electrical
        efab = build_electrical(spec)
    if efab.n_servers != problem.n:
        raise InputError("electrical.servers", efab.n_servers, f"{problem.n} (the problem's)")
    if isinstance(optical_degree, bool) or not isinstance(optical_degree, int | np.integer):
        raise InputError("optical_degree", optical_degree, "an integer >= 0")
    if optical_degree < 0:
        raise InputError("optical_degree", optical_degree, "an integer >= 0")
    b = problem.link_bandwidth if optical_bandwidth is None else optical_bandwidth
    try:
        b = float(b)
    except (TypeError, ValueError):
        raise InputError("optical_bandwidth", optical_bandwidth, "bytes/s > 0") from None
    if not math.isfinite(b) or b <= 0:
        raise InputError("optical_bandwidth", optical_bandwidth, "a finite number of bytes/s > 0")
    try:
        tl = float(time_limit_s)
    except (TypeError, ValueError):
        raise InputError("time_limit_s", time_limit_s, "seconds > 0") from None
    check_time_limit("time_limit_s", tl)
    return spec, efab, int(optical_degree), b, tl


def hybrid_design(
    problem: DesignProblem,
    electrical: Fabric | Mapping[str, Any],
    optical_degree: int,
    optical_bandwidth: float | None = None,
    time_limit_s: float = 60.0,
    seed: int = 0,
    progress: Progress | None = None,
    *,
    device: str = "ocs",
    work_limit: float | None = None,
) -> HybridDesign:
    """Design the optical layer over ``electrical`` and route everything (module docstring).

    Parameters
    ----------
    problem : DesignProblem
        The traffic (its ``degree`` and ``link_bandwidth`` are not used: see below). Its
        ``reserved`` and ``prewired`` ports apply to the ``optical_degree`` optical ports
        (module docstring, "Reserved and pre-wired ports").
    electrical : Fabric or mapping
        A leaf-spine / fat-tree built by :mod:`topoopt.fabrics.fat_tree`, or its spec for
        :func:`build_electrical`.
    optical_degree : int
        Optical ports per server ``d`` (0: electrical only).
    optical_bandwidth : float, optional
        Bytes/s of one optical port (default ``problem.link_bandwidth``).
    time_limit_s : float
        Wall-clock cap, a safety net: the baselines are always evaluated, the local search
        stops at the limit, and a design the clock cut (the search or one of its LPs) has
        ``info["deterministic"] = False``.
    seed : int
        Seed of the TopoOpt baseline's random path draws.
    progress : callable, optional
        ``progress(incumbent_s, bound_s)`` after each improvement.
    device : str
        Optical device of the combined fabric (``"ocs"`` or ``"patch-panel"``).
    work_limit : float, optional
        Deterministic budget of the whole search in work units (default
        :data:`HYBRID_WORK_LIMIT`; ``inf``: none): every routing gets at most
        :data:`ROUTE_WORK_LIMIT` of the work left (its LPs' iteration limits), and the local
        search stops when it is used up (``info["stopped_by"] = "work limit"``, still
        deterministic).

    Returns
    -------
    HybridDesign
        ``info`` holds the objective of the electrical fabric alone and of each baseline. With
        port options it contains the pre-wired circuits, uses at most ``optical_degree -
        reserved_u`` ports at each server and records both (``reserved_ports``, ``prewired``).

    Raises
    ------
    InputError
        A bad argument; reserved ports above ``optical_degree``; pre-wired circuits above the
        usable optical ports of a server.

    Examples
    --------
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(8, 1, (Demand("all-to-all", np.arange(8)[None], 8e6, "mp", "forward",
    ...                            mutable=False),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> e = leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=1e9)
    >>> d = hybrid_design(p, e, 2, time_limit_s=5)
    >>> d.objective_s <= min(d.info["baselines_s"].values()) + 1e-12, int(d.port_usage().max()) <= 2
    (True, True)
    """
    t0 = time.perf_counter()
    spec, efab, d, b_opt, limit = _check(problem, electrical, optical_degree, optical_bandwidth,
                                         time_limit_s)  # fmt: skip
    deadline = t0 + limit
    wl = HYBRID_WORK_LIMIT if work_limit is None else float(work_limit)
    if math.isnan(wl) or wl < 0:
        raise InputError("work_limit", work_limit, "work units >= 0 (inf: none)")
    used = 0.0
    limits: set[str] = set()
    n = problem.n
    pair_cap = d if problem.max_parallel is None else min(problem.max_parallel, d)
    usable, pre = _port_options(problem, d)
    lb = float(hybrid_lower_bound(problem, efab, d, b_opt).sum())

    def route(fab: Fabric) -> HybridRouting:
        nonlocal used
        r = route_hybrid(problem, fab, max(deadline - time.perf_counter(), 1.0),
                         work_limit=min(ROUTE_WORK_LIMIT, max(wl - used, 0.0)))  # fmt: skip
        used += r.work
        limits.add(r.limit)
        return r

    # 1. the electrical fabric alone
    routed_e = route(efab)
    info: dict[str, Any] = {"electrical_only_s": routed_e.time_s, "baselines_s": {},
                            "candidates_s": {}, "moves_tried": 0, "moves_kept": 0}  # fmt: skip
    candidates: dict[str, np.ndarray] = {}
    if d > 0:
        candidates.update(baseline_circuits(problem, d, b_opt, seed))
        for name, bott in (("matching-bottleneck", True), ("matching-demand", False)):
            W = _pair_weights(problem, efab, routed_e, bott)
            candidates[name] = _greedy_b_matching(W, usable, pair_cap, pre)
            if pair_cap > 1:  # spread: one circuit per pair, so more pairs get a direct hop
                candidates[name + "-spread"] = _greedy_b_matching(W, usable, 1, pre)
    else:
        candidates["none"] = np.zeros((0, 3), np.int64)
    best_name, best_c, best = None, None, None
    for name, c in candidates.items():
        f = _combined(efab, d, c, b_opt, device) if d else efab
        r = route(f) if d else routed_e
        if name in ("circulant", "topoopt"):
            info["baselines_s"][name] = r.time_s
        info["candidates_s"][name] = r.time_s
        if best is None or r.time_s < best[1].time_s:
            best_name, best_c, best = name, Circuits(c, n).rows, (f, r)
            if progress is not None:
                progress(r.time_s, lb)
    info["start"] = best_name
    # 3. degree-preserving local search
    tried: set[bytes] = {best_c.tobytes()}
    improved = d > 0
    cut = False  # the wall-clock limit stopped the search (the only non-deterministic stop)
    spent = False  # the work limit stopped it (deterministic)
    while improved:
        if time.perf_counter() >= deadline:
            cut = True
            break
        if used >= wl:
            spent = True
            break
        improved = False
        f, r = best
        use = _circuit_use(f, problem, r)
        W = _pair_weights(problem, f, r, True)
        W = np.triu(W + W.T, 1)
        cnt = np.zeros((n, n), np.int64)
        cnt[best_c[:, 0], best_c[:, 1]] = best_c[:, 2]
        W = np.where(cnt < pair_cap, W / (cnt + 1.0), 0.0)
        order = np.argsort(-W, axis=None, kind="stable")[:16]
        for flat in order.tolist():
            if time.perf_counter() >= deadline:
                cut = True
                break
            if used >= wl:
                spent = True
                break
            a, c = divmod(flat, n)
            if W[a, c] <= 0:
                break
            move = _swap_in(best_c, a, c, use, n, usable, pre, pair_cap)
            if move is None or move.tobytes() in tried:
                continue
            tried.add(move.tobytes())
            info["moves_tried"] += 1
            f2 = _combined(efab, d, move, b_opt, device)
            r2 = route(f2)
            if r2.time_s < best[1].time_s * (1 - 1e-9):
                best_c, best = move, (f2, r2)
                info["moves_kept"] += 1
                improved = True
                if progress is not None:
                    progress(r2.time_s, lb)
                break
    f, r = best
    obj = float(evaluate_hybrid(problem, f, r.paths, r.rings).sum())
    have = set((best_c[:, 0] * n + best_c[:, 1]).tolist()) | set(
        (best_c[:, 1] * n + best_c[:, 0]).tolist()
    )
    lbv = min(lb, obj)
    gap = (obj - lbv) / obj if obj > 0 else 0.0
    info.update({"lower_bound": "server + edge-switch cut", "path_lp_status": r.status,
                 "seed": seed, "time_limit_s": limit, "work_limit": wl, "work_used": used,
                 "lp_limits": sorted(x for x in limits if x),
                 "stopped_by": "time limit" if cut else ("work limit" if spent
                                                         else "local optimum"),
                 "deterministic": not cut and "time" not in limits})  # fmt: skip
    if not info["deterministic"]:
        info["time_limit_cut"] = (["the local search"] if cut else []) + (
            ["a routing LP"] if "time" in limits else [])  # fmt: skip
    options: dict[str, Any] = {}
    if problem.reserved is not None or problem.prewired is not None:
        options["reserved_ports"] = d - usable
        options["prewired"] = pre
        info["prewired_circuits"] = pre.total
    return HybridDesign(
        servers=n, degree=d, link_bandwidth=b_opt, circuits=best_c,
        rings=tuple(ring_records(problem, r.rings, have)), routing=node_paths(r.paths, f.dst),
        electrical=spec, solver="hybrid", status="optimal" if gap <= 1e-6 else "feasible",
        objective_s=obj, lower_bound_s=lbv, gap=gap, wall_s=time.perf_counter() - t0,
        device=device, info=info, **options,
    )  # fmt: skip


def _swap_in(
    circuits: np.ndarray,
    a: int,
    c: int,
    use: dict,
    n: int,
    d: int | np.ndarray,
    floor: Circuits | None = None,
    pair_cap: int | None = None,
):
    """Circuits with one more ``(a, c)``: a free port is used, else the least used circuits
    ``(a, b)`` and ``(c, e)`` become ``(a, c)`` and ``(b, e)``. None when impossible.

    ``d``: ports per server (one number or ``(n,)``); ``floor``: rows ``[u, v, count]`` (the
    pre-wired circuits) no pair is taken below; ``pair_cap``: most circuits on one pair.

    Examples
    --------
    The 4-cycle 0-2-1-3 with two ports each; to add 0-1 the least used circuits at 0 and 1 make
    room, unless 0-2 is pre-wired (then 0-3 and 1-2 become 0-1 and 2-3):

    >>> c = np.array([[0, 2, 1], [1, 2, 1], [1, 3, 1], [0, 3, 1]])
    >>> use = {(0, 2): 0.1, (0, 3): 0.5, (1, 2): 0.2, (1, 3): 0.4}
    >>> _swap_in(c, 0, 1, use, 4, 2).tolist()
    [[0, 1, 1], [0, 3, 1], [1, 3, 1]]
    >>> _swap_in(c, 0, 1, use, 4, 2, floor=Circuits([[0, 2, 1]], 4)).tolist()
    [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]]
    """
    deg = circuit_degrees(circuits, n)
    dd = np.broadcast_to(np.asarray(d, np.int64), (n,))
    rows = {(int(u), int(v)): int(k) for u, v, k in circuits.tolist()}
    keep = {}
    if floor is not None and len(floor):
        keep = {(int(u), int(v)): int(k) for u, v, k in floor.tolist()}

    def least(x: int, avoid: int):
        mine = [
            (use.get(p, 0.0), p)
            for p in rows
            if x in p and avoid not in p and rows[p] > keep.get(p, 0)
        ]
        return min(mine)[1] if mine else None

    drop = []
    other = []
    for x, y in ((a, c), (c, a)):
        if deg[x] < dd[x]:
            continue
        p = least(x, y)
        if p is None:
            return None
        drop.append(p)
        other.append(p[0] if p[1] == x else p[1])
    for p in drop:
        rows[p] -= 1
    key = (min(a, c), max(a, c))
    rows[key] = rows.get(key, 0) + 1
    if len(other) == 2 and other[0] != other[1]:
        k2 = (min(other), max(other))
        rows[k2] = rows.get(k2, 0) + 1
    out = Circuits([[u, v, k] for (u, v), k in rows.items() if k > 0], n).rows
    if np.any(circuit_degrees(out, n) > dd):
        return None
    if pair_cap is not None and out.size and out[:, 2].max() > pair_cap:
        return None
    return out
