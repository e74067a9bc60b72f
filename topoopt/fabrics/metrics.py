"""Fabric metrics: bisection bandwidth and diameter in server hops.

Bisection bandwidth is the minimum, over partitions of the servers into halves ``S`` and ``T``
(``|S| = floor(n/2)``), of the maximum flow from ``S`` to ``T`` (switches may sit on either side),
in bytes/s in one direction. Methods:

- ``closed-form``: per family where known (all host ports filled, balanced halves):

  ============== ========================================================================
  ideal          ``floor(n/2) d B``
  fat-tree       ``(k/2) u_e u_a B`` (pod-aligned halves; ``= N B / 2`` without
                 oversubscription, ``u_e = ceil((k/2)/R_e)``, ``u_a = ceil((k/2)/R_a)``)
  leaf-spine     ``(L/2) min(h, u) B`` for ``L`` even leaves of ``h`` hosts, ``u`` uplinks;
                 one leaf: ``floor(n/2) B``
  rail-optimized ``G`` times the leaf-spine figure (``G`` rails)
  torus/tpu-v4   ``2 (n / d_max) c`` with ``d_max`` the largest size (even), ``c`` the
                 capacity to one neighbour (untwisted)
  ============== ========================================================================

- ``exact``: every balanced partition, one max-flow each (servers <= 20);
- ``upper-bound``: the best of a few candidate partitions (spectral split, index halves, seeded
  random halves), each exact by max-flow; an upper bound on the bisection.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from scipy.sparse.linalg import ArpackNoConvergence, eigsh

from topoopt.fabrics.fabric import Fabric
from traffic.errors import InputError
from traffic.limits import check_memory

__all__ = [
    "Bisection",
    "bisection",
    "bisection_bandwidth",
    "closed_form_bisection",
    "cut_bandwidth",
    "server_hops",
    "diameter",
    "DIAMETER_WORK",
]


@dataclass(frozen=True)
class Bisection:
    """A bisection bandwidth (bytes/s, one direction) and how it was obtained."""

    bandwidth: float
    method: str


def closed_form_bisection(fabric: Fabric) -> float | None:
    """The family's closed-form bisection bandwidth, or None when no closed form applies.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> closed_form_bisection(fat_tree(4, port_bandwidth=1.0))
    8.0
    """
    p, n = fabric.params, fabric.n_servers
    fam = fabric.family
    if n < 2:
        return 0.0
    if fam == "ideal":
        return (n // 2) * p["degree"] * p["port_bandwidth"]
    if fam == "fat-tree":
        k = p["k"]
        if n != k**3 // 4:
            return None
        u_e = math.ceil(k / 2 / p["oversubscription"])
        u_a = math.ceil(k / 2 / p["agg_oversubscription"])
        return (k // 2) * u_e * u_a * p["port_bandwidth"]
    if fam in ("leaf-spine", "rail-optimized"):
        rails = p.get("rails", p.get("gpus_per_server", 1)) if fam == "rail-optimized" else 1
        per = p.get("ports_per_server", 1)  # a server's NICs on its one leaf
        b = p["port_bandwidth"]
        leaves_total = int(np.count_nonzero(fabric.node_layer == 1))
        groups = leaves_total // rails
        if groups == 1:
            return (n // 2) * rails * per * b
        if p.get("tiers", 2) > 2:
            return None  # three tiers: pods need not split evenly (use the max-flow methods)
        h = -(-n // groups)
        if n != groups * h or groups % 2:
            return None
        u = math.ceil(h * per / p["oversubscription"])
        return (groups // 2) * rails * min(h * per, u) * b
    if fam in ("torus", "tpu-v4"):
        if p.get("twist") is not None:
            return None
        dims = p["dims"]
        dmax = max(dims)
        if dmax % 2 or dmax < 2:
            return None
        neighbour = int(np.prod(dims[: dims.index(dmax)]))  # server at unit coordinate
        lid = fabric.link_ids([0], [neighbour])[0]
        c = float(fabric.capacity[lid]) if dmax > 2 else float(fabric.capacity[lid]) / 2
        return 2 * (n // dmax) * c
    return None


def _flow_graph(fabric: Fabric) -> tuple[sp.csr_matrix, float]:
    """Integer capacity matrix (in units of ``unit`` bytes/s) with 2 extra nodes: source, sink."""
    per = fabric.capacity / fabric.multiplicity
    unit = float(per.min()) if per.size else 1.0
    scaled = fabric.capacity / unit
    if np.any(np.abs(scaled - np.round(scaled)) > 1e-9 * np.maximum(1, scaled)):
        unit /= 1000.0
        scaled = fabric.capacity / unit
    n = fabric.n_nodes
    cap = sp.csr_matrix(
        (np.round(scaled).astype(np.int64), (fabric.src, fabric.dst)), shape=(n + 2, n + 2)
    )
    return cap, unit


def cut_bandwidth(fabric: Fabric, side: np.ndarray, _graph=None) -> float:
    """Max flow (bytes/s) from the servers in ``side`` to all other servers (switches free).

    >>> from topoopt.fabrics import ideal
    >>> cut_bandwidth(ideal(4, 2, 1.0), np.array([0]))
    2.0
    """
    cap, unit = _flow_graph(fabric) if _graph is None else _graph
    n, s = fabric.n_nodes, fabric.n_servers
    side = np.asarray(side, np.int64)
    mask = np.zeros(s, bool)
    mask[side] = True
    if fabric.src.size and int(fabric.src.max()) < s:
        # links between servers only (direct-connect; idle optical devices aside): every node
        # with a link is tied to the source or the sink, so max flow = min cut = the capacity
        # of the links leaving ``side``, in the same integer units
        coo = cap.tocoo()
        inner = (coo.row < s) & (coo.col < s)
        r, c = np.minimum(coo.row, s - 1), np.minimum(coo.col, s - 1)
        return float(coo.data[inner & mask[r] & ~mask[c]].sum()) * unit
    other = np.flatnonzero(~mask)
    big = int(cap.sum()) + 1
    rows = np.r_[np.full(side.size, n), other]
    cols = np.r_[side, np.full(other.size, n + 1)]
    extra = sp.csr_matrix((np.full(rows.size, big), (rows, cols)), shape=cap.shape)
    g = (cap + extra).tocsr()
    g.indices = g.indices.astype(np.int32)
    g.indptr = g.indptr.astype(np.int32)
    g.data = g.data.astype(np.int32) if big < 2**31 else g.data
    return float(csgraph.maximum_flow(g, n, n + 1).flow_value) * unit


def _exact(fabric: Fabric) -> float:
    s = fabric.n_servers
    half = s // 2
    graph = _flow_graph(fabric)
    best = math.inf
    if s % 2 == 0:
        combos = ((0,) + c for c in itertools.combinations(range(1, s), half - 1))
    else:
        combos = itertools.combinations(range(s), half)
    for c in combos:
        best = min(best, cut_bandwidth(fabric, np.array(c), graph))
    return best


SPECTRAL_NONZEROS = 200_000
"""Largest Laplacian (nonzeros) given a spectral split in :func:`bisection`'s upper bound: its
shift-invert factorisation took 30 s at 5,000 servers x 64 ports (320,000 links) and minutes at
20,000; beyond it the index and random halves remain."""


def _upper_bound(fabric: Fabric, seed: int = 0, tries: int = 4) -> float:
    s = fabric.n_servers
    half = s // 2
    graph = _flow_graph(fabric)
    cands = [np.arange(half)]
    # spectral split: Fiedler vector of the server-to-server hop-1 Laplacian (switches included)
    a = fabric.adjacency()
    a = sp.csr_matrix((np.ones(a.nnz), a.indices, a.indptr), shape=a.shape)
    a = ((a + a.T) > 0).astype(np.float64)
    # the servers' connected component only: a node without a cable (a direct fabric's patch
    # panels) adds a zero eigenvalue, and the "Fiedler" vector of a multiple zero was a random
    # mix of component indicators (expander 64 x 4: 5 zeros, splits of 250 to 725 Gbps)
    _, comp = csgraph.connected_components(a, directed=False)
    keep = np.flatnonzero(comp == comp[0]) if s else np.zeros(0, np.int64)
    lap = csgraph.laplacian(a[keep][:, keep].tocsr())
    if 3 < lap.shape[0] and lap.nnz <= SPECTRAL_NONZEROS and keep.size >= s:
        # shift-invert (a sparse LU) from a seeded start vector: ARPACK's own is random, so
        # the split moved between runs of the same fabric
        v0 = np.random.default_rng([seed, 1]).random(lap.shape[0])
        try:
            _, vec = eigsh(lap.tocsc(), k=2, sigma=-1e-3, which="LM", v0=v0)
            fiedler = np.zeros(a.shape[0])
            fiedler[keep] = vec[:, -1]
            cands.append(np.argsort(fiedler[:s], kind="stable")[:half])
        except (ArpackNoConvergence, RuntimeError, ValueError):
            pass  # the spectral candidate is optional; the others remain
    rng = np.random.default_rng(seed)
    for _ in range(tries):
        cands.append(rng.permutation(s)[:half])
    return min(cut_bandwidth(fabric, c, graph) for c in cands)


def bisection(fabric: Fabric, method: str = "auto", *, seed: int = 0) -> Bisection:
    """Bisection bandwidth of ``fabric`` (bytes/s, one direction).

    Parameters
    ----------
    method : {"auto", "closed-form", "exact", "upper-bound"}
        ``auto``: the closed form when the family has one, else exact for <= 16 servers, else an
        upper bound.

    Examples
    --------
    >>> from topoopt.fabrics import torus
    >>> bisection(torus("4x4", port_bandwidth=1.0))
    Bisection(bandwidth=8.0, method='closed-form')
    >>> bisection(torus("4x4", port_bandwidth=1.0), "exact").bandwidth
    8.0
    """
    if method not in ("auto", "closed-form", "exact", "upper-bound"):
        raise InputError("method", method, "auto, closed-form, exact or upper-bound")
    if method in ("auto", "closed-form"):
        cf = closed_form_bisection(fabric)
        if cf is not None:
            return Bisection(float(cf), "closed-form")
        if method == "closed-form":
            raise InputError("method", method, f"exact or upper-bound for {fabric.family}")
        method = "exact" if fabric.n_servers <= 16 else "upper-bound"
    if method == "exact":
        if fabric.n_servers > 20:
            raise InputError("method", "exact", "upper-bound for more than 20 servers")
        return Bisection(_exact(fabric), "exact")
    return Bisection(_upper_bound(fabric, seed), "upper-bound")


def bisection_bandwidth(fabric: Fabric, method: str = "auto") -> float:
    """Bisection bandwidth in bytes/s (see :func:`bisection`)."""
    return bisection(fabric, method).bandwidth


def server_hops(fabric: Fabric, kinds: tuple[str, ...] | None = None) -> np.ndarray:
    """``(n, n)`` hop counts between servers (links crossed, switches included)."""
    n, nodes = fabric.n_servers, fabric.n_nodes
    check_memory("servers", 8.0 * n * nodes, f"{n:,} x {nodes:,} hop counts (all pairs)")
    a = fabric.adjacency(kinds)
    rows = np.arange(fabric.n_servers)
    d = csgraph.shortest_path(a, directed=True, unweighted=True, indices=rows)
    return np.atleast_2d(d)[:, : fabric.n_servers]


DIAMETER_WORK = 1_000_000_000
"""Most link visits of an exact diameter (one breadth-first search per server: servers x links;
about 4 s here). Beyond it :func:`diameter` refuses before any search."""


def diameter(fabric: Fabric, kinds: tuple[str, ...] | None = None) -> int:
    """Largest server-to-server hop count (links crossed).

    Raises :class:`InputError` when some server cannot reach another, or when the searches
    would visit more than :data:`DIAMETER_WORK` links (checked first).

    >>> from topoopt.fabrics import fat_tree
    >>> diameter(fat_tree(4))
    6
    """
    work = float(fabric.n_servers) * float(fabric.adjacency(kinds).nnz)
    if work > DIAMETER_WORK:
        raise InputError(
            "diameter",
            f"{fabric.n_servers:,} searches x {fabric.adjacency(kinds).nnz:,} links "
            f"(about {work:.2g} link visits)",
            f"at most {DIAMETER_WORK:.0e} link visits (not computed)",
        )
    d = server_hops(fabric, kinds)
    if not np.all(np.isfinite(d)):
        fabric.check_connected(kinds)
    return int(d.max()) if d.size else 0
