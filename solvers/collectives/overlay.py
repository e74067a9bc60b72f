"""The server overlay a collective schedule runs on: every ordered server pair as an arc.

A collective algorithm moves data between servers (the members, one per server); a transfer
``u -> v`` crosses the fabric on the routes the flow model uses for that pair
(:meth:`topoopt.flowsim.network.Network.pair_routes`, ECMP unless a routing is given). The
:class:`Overlay` keeps, per arc, the fraction of its bytes on each directed fabric link (a sparse
``(links, arcs)`` matrix), so a schedule's link loads are one sparse product and an LP over arcs
sees the real link capacities. On a direct-connect fabric an arc between neighbours is one
circuit; an arc between non-neighbours is forwarded by the servers in between, exactly as the flow
model forwards it.

:func:`server_links` gives the other view used by exact synthesis: the physical links between
servers (circuits, with their multiplicities), for fabrics where every link joins two servers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt.fabrics.fabric import Fabric
from topoopt.flowsim.network import Network
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = ["Overlay", "overlay", "ServerLinks", "server_links", "MAX_MEMBERS"]

MAX_MEMBERS = 64
"""Largest collective (servers) the tree-packing and synthesis algorithms accept."""


@dataclass(frozen=True, eq=False)
class Overlay:
    """All ordered server pairs of a fabric as arcs, with their link loads.

    Attributes
    ----------
    n : int
        Members (servers ``0 .. n-1``).
    src, dst : numpy.ndarray
        ``int64 (A,)`` endpoints of each arc (every ordered pair, ``u != v``).
    load : scipy.sparse.csr_matrix
        ``(L, A)``: fraction of an arc's bytes crossing each fabric link.
    capacity : numpy.ndarray
        ``(L,)`` bytes/s of each fabric link.
    latency : numpy.ndarray
        ``(A,)`` seconds: the largest path latency of each arc.
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    load: sp.csr_matrix
    capacity: np.ndarray
    latency: np.ndarray

    @property
    def n_arcs(self) -> int:
        return int(self.src.shape[0])

    def arc(self, u, v) -> np.ndarray:
        """Arc index of each pair ``(u, v)`` (``u != v``)."""
        u = np.asarray(u, np.int64)
        v = np.asarray(v, np.int64)
        return u * (self.n - 1) + v - (v > u)

    def link_seconds(self, arc_bytes: np.ndarray) -> float:
        """Time the busiest link needs for ``arc_bytes`` (bytes per arc), seconds."""
        per_link = self.load @ np.asarray(arc_bytes, np.float64)
        return float(np.max(per_link / self.capacity)) if per_link.size else 0.0


def overlay(fabric: Fabric, n: int | None = None, routing: PathSet | None = None) -> Overlay:
    """The overlay of the first ``n`` servers of ``fabric`` (default: all of them).

    Examples
    --------
    >>> from topoopt.fabrics import torus
    >>> ov = overlay(torus("4", 1e9))
    >>> ov.n_arcs, ov.load[:, ov.arc(0, 1)].nnz, float(ov.load[:, ov.arc(0, 2)].sum())
    (12, 1, 2.0)
    """
    n = fabric.n_servers if n is None else int(n)
    if not 2 <= n <= fabric.n_servers:
        raise InputError("servers", n, f"2 .. {fabric.n_servers} members")
    if n > MAX_MEMBERS:
        raise InputError("servers", n, f"at most {MAX_MEMBERS} members for tree packing/synthesis")
    u, v = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    keep = u != v
    src, dst = u[keep].astype(np.int64), v[keep].astype(np.int64)
    net = Network(fabric, gpus_per_server=1, routing=routing)
    ps, comm = net.pair_routes(src, dst)
    cp = ps.commodity_ptr
    paths = [np.arange(cp[c], cp[c + 1]) for c in comm]
    path_arc = np.repeat(np.arange(src.shape[0]), [p.shape[0] for p in paths])
    path_ids = np.concatenate(paths)
    lens = ps.path_ptr[path_ids + 1] - ps.path_ptr[path_ids]
    link_rows = np.concatenate(
        [ps.path_links[ps.path_ptr[p] : ps.path_ptr[p + 1]] for p in path_ids]
    )
    cols = np.repeat(path_arc, lens)
    vals = np.repeat(ps.weight[path_ids], lens)
    load = sp.csr_matrix((vals, (link_rows, cols)), shape=(fabric.n_links, src.shape[0]))
    plat = np.add.reduceat(fabric.latency[link_rows], np.r_[0, np.cumsum(lens)[:-1]])
    lat = np.zeros(src.shape[0])
    np.maximum.at(lat, path_arc, plat)
    return Overlay(n, src, dst, load, np.asarray(fabric.capacity, np.float64), lat)


@dataclass(frozen=True, eq=False)
class ServerLinks:
    """Physical links between servers: ``(u, v)`` arcs, parallel circuits and per-circuit rate.

    Attributes
    ----------
    n : int
    src, dst : numpy.ndarray
        ``int64`` endpoints of each directed server-to-server link (bundle).
    count : numpy.ndarray
        ``int64`` parallel circuits in the bundle.
    bandwidth : float
        Bytes/s of one circuit (the smallest over the bundles).
    latency : float
        Seconds per hop (the largest over the links).
    """

    n: int
    src: np.ndarray
    dst: np.ndarray
    count: np.ndarray
    bandwidth: float
    latency: float


def server_links(fabric: Fabric, n: int | None = None) -> ServerLinks:
    """The server-to-server links of a switchless fabric, among its first ``n`` servers.

    Raises
    ------
    InputError
        The fabric has switches (no server-level link graph).

    Examples
    --------
    >>> from topoopt.fabrics import torus
    >>> sl = server_links(torus("4", 1e9))
    >>> sl.src.tolist(), sl.dst.tolist(), sl.count.tolist(), sl.bandwidth
    ([0, 0, 1, 1, 2, 2, 3, 3], [1, 3, 0, 2, 1, 3, 0, 2], [1, 1, 1, 1, 1, 1, 1, 1], 1000000000.0)
    """
    n = fabric.n_servers if n is None else int(n)
    s, d = np.asarray(fabric.src), np.asarray(fabric.dst)
    if np.any((s >= fabric.n_servers) | (d >= fabric.n_servers)):
        raise InputError(
            "fabric",
            fabric.family,
            "a switchless fabric (direct, expander, torus) for exact synthesis",
        )
    keep = (s < n) & (d < n)
    per = fabric.capacity[keep] / fabric.multiplicity[keep]
    order = np.lexsort((d[keep], s[keep]))
    return ServerLinks(
        n,
        s[keep][order].astype(np.int64),
        d[keep][order].astype(np.int64),
        fabric.multiplicity[keep][order].astype(np.int64),
        float(per.min()) if per.size else 0.0,
        float(fabric.latency[keep].max()) if per.size else 0.0,
    )
