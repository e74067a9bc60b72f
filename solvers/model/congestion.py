"""The objective every optical-design solver minimises, recomputed without any solver.

Congestion model
----------------
A design is a circuit multigraph on the ``n`` servers (rows ``[u, v, count]``: ``count`` parallel
circuits between ``u < v``; each circuit gives ``B`` bytes/s in *each* direction) plus, for every
phase, (a) the directed rings each mutable group runs on, with the fraction of the group's bytes
carried by each ring, and (b) weighted paths for every server pair that exchanges bytes (fixed
traffic and ring steps alike; a ring step between circuit neighbours is normally a one-hop path,
otherwise it is forwarded by hosts, a "virtual ring").

Links: the circuits between ``u < v`` are bundled into directed link ``2c`` (``u -> v``) and
``2c + 1`` (``v -> u``) of capacity ``count * B``, ``c`` the row index of the canonical circuit
table (sorted, merged): the convention of :class:`topoopt.fabrics.fabric.Fabric`.

The communication time is

    T = sum over phases p of ( max over links l of load[p, l] / cap[l] ),

the time the most congested link needs to drain the phase (bytes / bytes/s = seconds).
:func:`evaluate_routing` recomputes it and checks feasibility (degree, pair cap, rings are
permutations of their group, path continuity, weights summing to one, every demand routed) -- the
``instance.evaluate(solution)`` habit of the OR-Tools samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solvers.model.problem import DesignProblem, PhaseTraffic
from topoopt.csr import PairIndex
from topoopt.fabrics.circuits import Circuits, circuit_degrees, circuit_links
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "RingSet",
    "PhaseRouting",
    "Evaluation",
    "link_lookup",
    "ring_steps",
    "phase_pairs",
    "pair_link_loads",
    "node_paths_to_pathset",
    "pathset_to_node_paths",
    "evaluate_routing",
]

_TOL = 1e-6


def link_lookup(src: np.ndarray, dst: np.ndarray, n: int):
    """A vectorised ``(u, v) -> directed link id`` function (``-1`` where there is no link).

    Examples
    --------
    >>> f = link_lookup(np.array([0, 1]), np.array([1, 0]), 3)
    >>> f(np.array([1, 0, 2]), np.array([0, 1, 0])).tolist()
    [1, 0, -1]
    """
    return PairIndex(src, dst, n)


@dataclass(frozen=True, eq=False)
class RingSet:
    """Directed rings of the mutable groups of one phase (CSR).

    Attributes
    ----------
    group : numpy.ndarray
        ``int64 (R,)``: ring group (index into the phase's groups) each ring serves.
    weight : numpy.ndarray
        ``float64 (R,)``: fraction of its group's bytes the ring carries (sum 1 per group).
    ptr : numpy.ndarray
        ``int64 (R+1,)``: ring ``r`` visits ``nodes[ptr[r]:ptr[r+1]]`` in order, then returns.
    nodes : numpy.ndarray
        ``int64`` server ids.
    """

    group: np.ndarray
    weight: np.ndarray
    ptr: np.ndarray
    nodes: np.ndarray

    def __post_init__(self) -> None:
        for name in ("group", "ptr", "nodes"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), np.int64))
        object.__setattr__(self, "weight", np.asarray(self.weight, np.float64))
        r = self.group.shape[0]
        if (
            self.weight.shape != (r,)
            or self.ptr.shape != (r + 1,)
            or self.ptr[-1] != len(self.nodes)
        ):
            raise InputError("rings", (r, self.weight.shape, self.ptr.shape), "aligned CSR arrays")

    @classmethod
    def from_lists(cls, rings: list[tuple[int, float, list[int]]]) -> RingSet:
        """Build from ``(group, weight, order)`` triples.

        Examples
        --------
        >>> RingSet.from_lists([(0, 0.5, [0, 1, 2]), (0, 0.5, [2, 1, 0])]).ptr.tolist()
        [0, 3, 6]
        """
        ptr = np.zeros(len(rings) + 1, np.int64)
        ptr[1:] = np.cumsum([len(r[2]) for r in rings]) if rings else []
        nodes = np.concatenate([np.asarray(r[2], np.int64) for r in rings]) if rings else []
        return cls(
            np.asarray([r[0] for r in rings], np.int64),
            np.asarray([r[1] for r in rings], np.float64),
            ptr,
            np.asarray(nodes, np.int64),
        )

    @classmethod
    def empty(cls) -> RingSet:
        return cls(np.zeros(0), np.zeros(0), np.zeros(1), np.zeros(0))

    @property
    def n_rings(self) -> int:
        return int(self.group.shape[0])

    def order(self, r: int) -> np.ndarray:
        """Server order of ring ``r``."""
        return self.nodes[self.ptr[r] : self.ptr[r + 1]]

    def to_lists(self) -> list[tuple[int, float, list[int]]]:
        return [
            (int(self.group[r]), float(self.weight[r]), self.order(r).tolist())
            for r in range(self.n_rings)
        ]


@dataclass(frozen=True, eq=False)
class PhaseRouting:
    """How one phase's traffic runs over the circuits: rings + weighted paths over link ids."""

    rings: RingSet
    paths: PathSet


@dataclass(frozen=True, eq=False)
class Evaluation:
    """The recomputed objective of a design and what is wrong with it, if anything.

    Attributes
    ----------
    phase_times : numpy.ndarray
        Seconds per phase (max over links of load / capacity).
    objective : float
        Sum of the phase times, seconds.
    feasible : bool
        No violation found.
    violations : tuple of str
        One line per violated constraint family.
    link_loads : tuple of numpy.ndarray
        Bytes on each directed link, per phase.
    """

    phase_times: np.ndarray
    objective: float
    feasible: bool
    violations: tuple[str, ...]
    link_loads: tuple[np.ndarray, ...] = field(default=())


def ring_steps(phase: PhaseTraffic, rings: RingSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, bytes)`` of every ring step (successor pairs, weights applied).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> ph = PhaseTraffic("p", [0, 3], [0, 1, 2], [30.0], sp.csr_matrix((3, 3)))
    >>> s, d, b = ring_steps(ph, RingSet.from_lists([(0, 1.0, [0, 2, 1])]))
    >>> s.tolist(), d.tolist(), b.tolist()
    ([0, 2, 1], [2, 1, 0], [30.0, 30.0, 30.0])
    """
    if rings.n_rings == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    lengths = np.diff(rings.ptr)
    src = rings.nodes
    nxt = np.arange(1, src.size + 1)
    ends = rings.ptr[1:] - 1
    nxt[ends] = rings.ptr[:-1]
    dst = src[nxt]
    b = np.repeat(rings.weight * phase.ring_bytes[rings.group], lengths)
    keep = src != dst
    return src[keep], dst[keep], b[keep]


def phase_pairs(
    phase: PhaseTraffic, rings: RingSet, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Summed ``(src, dst, bytes)`` server-pair demand of a phase: fixed + ring steps.

    Pairs come sorted by ``src * n + dst``; zero-byte pairs are dropped.
    """
    fx = phase.fixed.tocoo()
    rs, rd, rb = ring_steps(phase, rings)
    src = np.concatenate([fx.row.astype(np.int64), rs])
    dst = np.concatenate([fx.col.astype(np.int64), rd])
    b = np.concatenate([fx.data, rb])
    key = src * n + dst
    uk, inv = np.unique(key, return_inverse=True)
    tot = np.bincount(inv, weights=b, minlength=uk.size)
    keep = tot > 0
    return uk[keep] // n, uk[keep] % n, tot[keep]


def pair_link_loads(
    paths: PathSet, src: np.ndarray, dst: np.ndarray, byts: np.ndarray, n: int, n_links: int
) -> tuple[np.ndarray, np.ndarray]:
    """Link loads of pair demand routed on ``paths``; also the demand left unrouted (bytes)."""
    k = paths.index(src, dst, n)
    missing = k < 0
    cb = np.zeros(paths.n_commodities)
    np.add.at(cb, k[~missing], byts[~missing])
    return paths.link_loads(cb, n_links), byts[missing]


def node_paths_to_pathset(
    src: np.ndarray,
    dst: np.ndarray,
    paths: list[list[tuple[list[int], float]]],
    lookup,
) -> PathSet:
    """Convert per-commodity node-sequence paths to a :class:`PathSet` over link ids.

    ``paths[k]`` lists ``(nodes, weight)`` of commodity ``(src[k], dst[k])``; ``lookup`` maps node
    pairs to link ids (see :func:`link_lookup`). A hop without a link raises :class:`InputError`.
    """
    cptr = [0]
    pptr = [0]
    seq: list[np.ndarray] = []
    wts: list[float] = []
    for plist in paths:
        for nodes, w in plist:
            nodes = np.asarray(nodes, np.int64)
            ids = lookup(nodes[:-1], nodes[1:])
            if np.any(ids < 0):
                bad = int(np.flatnonzero(ids < 0)[0])
                raise InputError(
                    "routing", f"hop {int(nodes[bad])}->{int(nodes[bad + 1])}", "hops over circuits"
                )
            seq.append(ids)
            wts.append(float(w))
            pptr.append(pptr[-1] + ids.size)
        cptr.append(len(wts))
    links = np.concatenate(seq) if seq else np.zeros(0, np.int64)
    return PathSet(src, dst, np.asarray(cptr), np.asarray(pptr), links, np.asarray(wts))


def pathset_to_node_paths(
    paths: PathSet, link_src: np.ndarray, link_dst: np.ndarray
) -> list[list[tuple[list[int], float]]]:
    """The inverse of :func:`node_paths_to_pathset`: node sequences with weights per commodity."""
    out = []
    for k in range(paths.n_commodities):
        plist = []
        for p in range(paths.commodity_ptr[k], paths.commodity_ptr[k + 1]):
            ids = paths.path_links[paths.path_ptr[p] : paths.path_ptr[p + 1]]
            nodes = [int(paths.src[k])] + link_dst[ids].tolist()
            plist.append((nodes, float(paths.weight[p])))
        out.append(plist)
    return out


def _check_paths(paths: PathSet, link_src, link_dst, n_links: int) -> list[str]:
    bad = []
    if paths.path_links.size and (paths.path_links.min() < 0 or paths.path_links.max() >= n_links):
        return ["routing: a path uses a link id that is not a circuit"]
    lens = paths.path_lengths()
    comm = paths.path_commodity()
    if np.any(lens == 0):
        bad.append("routing: an empty path")
        return bad
    first = paths.path_links[paths.path_ptr[:-1]]
    last = paths.path_links[paths.path_ptr[1:] - 1]
    if np.any(link_src[first] != paths.src[comm]) or np.any(link_dst[last] != paths.dst[comm]):
        bad.append("routing: a path does not start at its source or end at its destination")
    pl = paths.path_links
    inner = np.ones(pl.size, bool)
    inner[paths.path_ptr[1:] - 1] = False
    idx = np.flatnonzero(inner)
    if np.any(link_dst[pl[idx]] != link_src[pl[idx + 1]]):
        bad.append("routing: a path is not a walk over the circuits (flow not conserved)")
    if np.any(paths.weight < -_TOL):
        bad.append("routing: a negative path weight")
    wsum = np.bincount(comm, weights=paths.weight, minlength=paths.n_commodities)
    if np.any(np.abs(wsum - 1.0) > 1e-4):
        bad.append("routing: path weights of a commodity do not sum to 1 (flow not conserved)")
    return bad


def _check_rings(phase: PhaseTraffic, rings: RingSet) -> list[str]:
    bad = []
    if rings.n_rings and (rings.group.min() < 0 or rings.group.max() >= phase.n_groups):
        return [f"rings[{phase.name}]: a ring names a group that does not exist"]
    wsum = np.bincount(rings.group, weights=rings.weight, minlength=phase.n_groups)
    need = phase.ring_bytes > 0
    if np.any(np.abs(wsum[need] - 1.0) > 1e-4) or np.any(rings.weight < -_TOL):
        bad.append(f"rings[{phase.name}]: ring weights of a group do not sum to 1")
    for r in range(rings.n_rings):
        if not np.array_equal(np.sort(rings.order(r)), phase.group(int(rings.group[r]))):
            bad.append(f"rings[{phase.name}]: ring {r} is not a permutation of its group")
            break
    return bad


def evaluate_routing(
    problem: DesignProblem,
    circuits,
    routings: tuple[PhaseRouting, ...] | list[PhaseRouting],
    keep_loads: bool = False,
) -> Evaluation:
    """Recompute the communication time of circuits + per-phase routing and check feasibility.

    Parameters
    ----------
    problem : DesignProblem
    circuits : array-like
        ``[u, v, count]`` rows (canonicalised here).
    routings : sequence of PhaseRouting
        One per phase of ``problem``; path link ids index :func:`circuit_links` of the
        canonical circuit table.
    keep_loads : bool
        Return the per-phase link loads too.

    Returns
    -------
    Evaluation
        Infinite phase times where demand is left unrouted.
    """
    n, d = problem.n, problem.degree
    c = Circuits(circuits, n).rows
    src, dst, cap = circuit_links(c, problem.link_bandwidth)
    bad: list[str] = []
    deg = circuit_degrees(c, n)
    if np.any(deg > d):
        i = int(np.argmax(deg))
        bad.append(f"degree: server {i} uses {int(deg[i])} ports > {d}")
    if c.size and c[:, 2].max() > problem.pair_cap:
        bad.append(f"pair cap: {int(c[:, 2].max())} parallel circuits > {problem.pair_cap}")
    if len(routings) != problem.n_phases:
        raise InputError("routing", len(routings), f"one routing per phase ({problem.n_phases})")
    times = np.zeros(problem.n_phases)
    loads_out = []
    for i, (ph, rt) in enumerate(zip(problem.phases, routings, strict=True)):
        bad += _check_rings(ph, rt.rings)
        if ph.n_groups and ph.ring_bytes.max() > 0 and rt.rings.n_rings == 0:
            bad.append(f"rings[{ph.name}]: no ring for a mutable group")
        bad += _check_paths(rt.paths, src, dst, src.size)
        s, t, b = phase_pairs(ph, rt.rings, n)
        loads, missing = pair_link_loads(rt.paths, s, t, b, n, src.size)
        if missing.size and missing.sum() > 0:
            bad.append(f"routing[{ph.name}]: {missing.size} pairs with traffic have no path")
            times[i] = np.inf
        else:
            times[i] = float((loads / cap).max()) if src.size else (0.0 if b.size == 0 else np.inf)
        loads_out.append(loads)
    return Evaluation(
        times,
        float(times.sum()),
        not bad,
        tuple(bad),
        tuple(loads_out) if keep_loads else (),
    )
