"""The Fabric: nodes, directed links and ports of a cluster network, stored as arrays.

Conventions
-----------
- Nodes are numbered ``0 .. N-1``; servers come first, so server ``i`` is node ``i``; then
  electrical switches, optical circuit switches (OCS) and patch panels.
- Every physical cable (or optical circuit) is full duplex and appears as two directed links,
  ``2c`` (``u -> v``) and ``2c + 1`` (``v -> u``), both carrying ``cable == c``.
- Parallel cables/circuits between the same two nodes are bundled into one cable id whose
  ``multiplicity`` is their number and whose capacity is their summed bandwidth; the physical link
  count is ``multiplicity.sum() / 2`` (each direction carries the multiplicity).
- An optical circuit between two servers is a link of kind ``"optical"`` between the server nodes
  (between two switches on an OCS spine, :mod:`topoopt.fabrics.ocs_spine`); the OCS / patch
  panel it crosses is transparent to routing and appears as an (unlinked) node that the bill of
  materials counts.
- Units: capacity in bytes/s, latency in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.sparse import csgraph

from topoopt.csr import PairIndex
from traffic.errors import InputError
from traffic.limits import check_count

__all__ = [
    "NODE_KINDS",
    "LINK_KINDS",
    "MEDIA",
    "DEFAULT_LINK_LATENCY",
    "Fabric",
    "build_fabric",
    "check_int",
    "check_float",
]

NODE_KINDS = ("server", "switch", "ocs", "patch-panel")
"""Kinds of node: servers, electrical packet switches, optical circuit switches, patch panels."""

LINK_KINDS = ("electrical", "optical", "intra-server")
"""Kinds of link: electrically switched, optical circuit (via an OCS/patch panel), intra-server."""

MEDIA = ("fibre", "copper")
"""Physical medium of a cable: fibre (a transceiver at each end) or copper (DAC/backplane, none)."""

DEFAULT_LINK_LATENCY = 1e-6
"""Default latency of one link hop in seconds (1 us, the per-hop latency of the TopoOpt paper)."""


FABRIC_BYTES_PER_SERVER = 2048
"""Bytes of fabric arrays (nodes, links, ports, kinds) per server, with margin, for the memory
budget check (:func:`traffic.limits.check_count`) of ``servers`` and fat-tree ``k``."""

_SIZE_FIELDS = ("servers", "k")


def check_int(field: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int, or :class:`InputError` unless it is an integer >= ``minimum``.

    >>> check_int("k", 4, minimum=2)
    4
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InputError(field, value, f"an integer >= {minimum}")
    if field in _SIZE_FIELDS:  # refuse sizes beyond the memory budget before building arrays
        servers = int(value) ** 3 // 4 if field == "k" else int(value)
        check_count(field, servers, FABRIC_BYTES_PER_SERVER, "servers (fabric arrays)")
    return int(value)


def check_float(field: str, value: Any, minimum: float = 0.0, strict: bool = True) -> float:
    """``value`` as a finite float > ``minimum`` (>= when not ``strict``), else :class:`InputError`.

    >>> check_float("oversubscription", 2, minimum=1.0, strict=False)
    2.0
    """
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(field, value, "a number") from None
    ok = np.isfinite(f) and (f > minimum if strict else f >= minimum)
    if not ok:
        rel = ">" if strict else ">="
        raise InputError(field, value, f"a finite number {rel} {minimum:g}")
    return f


@dataclass(frozen=True, eq=False)
class Fabric:
    """A cluster network: nodes, directed links and server ports.

    Build fabrics with the family builders (:func:`topoopt.fabrics.fat_tree`,
    :func:`topoopt.fabrics.torus`, ...) or :func:`build_fabric`; the constructor validates.

    Attributes
    ----------
    family : str
        Family name, e.g. ``"fat-tree"``.
    params : dict
        The builder parameters (JSON-able), for reports.
    n_servers : int
        Number of servers; they are nodes ``0 .. n_servers-1``.
    node_kind : numpy.ndarray
        ``(N,)`` strings from :data:`NODE_KINDS`.
    node_layer : numpy.ndarray
        ``(N,)`` int: 0 for servers, 1.. for switch tiers (edge/leaf 1, aggregation/spine 2,
        core 3), used for drawing.
    node_ports : numpy.ndarray
        ``(N,)`` int: ports of each device (server NIC ports, switch radix, OCS/patch-panel ports).
    src, dst : numpy.ndarray
        ``(L,)`` int64 endpoints of each directed link.
    capacity : numpy.ndarray
        ``(L,)`` float64 bytes/s of each directed link (summed over a bundle).
    latency : numpy.ndarray
        ``(L,)`` float64 seconds of each directed link.
    link_kind : numpy.ndarray
        ``(L,)`` strings from :data:`LINK_KINDS`.
    cable : numpy.ndarray
        ``(L,)`` int64 physical cable id; both directions of a cable share it.
    multiplicity : numpy.ndarray
        ``(L,)`` int64 number of parallel physical cables/circuits in the bundle.
    medium : numpy.ndarray
        ``(L,)`` strings from :data:`MEDIA`.
    server_ports : numpy.ndarray
        ``(n_servers,)`` int: NIC ports of each server (electrical + optical).
    server_optical_ports : numpy.ndarray
        ``(n_servers,)`` int: of those, ports wired into the optical layer (OCS/patch panel).
    port_bandwidth : numpy.ndarray
        ``(n_servers,)`` float bytes/s of each server's electrical ports (all its ports when it has
        no optical ports).
    optical_port_bandwidth : float
        Bytes/s of one optical server port (0 when there is no optical layer).
    gpus_per_server : int
        Accelerators per server.
    intra_server_bandwidth : float or None
        NVLink-like bandwidth between GPUs of one server, bytes/s (None: not modelled).
    reconfiguration_delay : float or None
        Seconds to reconfigure the optical layer (None: no optical layer).
    coords : numpy.ndarray or None
        ``(n_servers, D)`` int torus coordinates of the servers (tori only).
    """

    family: str
    params: dict
    n_servers: int
    node_kind: np.ndarray
    node_layer: np.ndarray
    node_ports: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    link_kind: np.ndarray
    cable: np.ndarray
    multiplicity: np.ndarray
    medium: np.ndarray
    server_ports: np.ndarray
    server_optical_ports: np.ndarray
    port_bandwidth: np.ndarray
    optical_port_bandwidth: float = 0.0
    gpus_per_server: int = 1
    intra_server_bandwidth: float | None = None
    reconfiguration_delay: float | None = None
    coords: np.ndarray | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        def setarr(name, dtype):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype))

        for name in ("node_layer", "node_ports", "src", "dst", "cable", "multiplicity"):
            setarr(name, np.int64)
        for name in ("server_ports", "server_optical_ports"):
            setarr(name, np.int64)
        for name in ("capacity", "latency", "port_bandwidth"):
            setarr(name, np.float64)
        for name in ("node_kind", "link_kind", "medium"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=str))
        if self.coords is not None:
            setarr("coords", np.int64)
        object.__setattr__(self, "params", dict(self.params))
        n, s = self.node_kind.shape[0], int(self.n_servers)
        nl = self.src.shape[0]

        if s < 1:
            raise InputError("fabric.servers", s, "at least one server")
        g = self.gpus_per_server
        if isinstance(g, bool) or not isinstance(g, int | np.integer) or not 1 <= g <= 65536:
            raise InputError("gpus_per_server", g, "an integer 1..65,536")
        if n < s or not np.all(self.node_kind[:s] == "server"):
            raise InputError("fabric.node_kind", "servers not first", "servers are nodes 0..n-1")
        if np.any(self.node_kind[s:] == "server"):
            raise InputError("fabric.node_kind", "server after a switch", "servers first")
        bad = ~np.isin(self.node_kind, NODE_KINDS)
        if bad.any():
            raise InputError("fabric.node_kind", self.node_kind[bad][0], f"one of {NODE_KINDS}")
        for name in ("node_layer", "node_ports"):
            if getattr(self, name).shape != (n,):
                raise InputError(f"fabric.{name}", getattr(self, name).shape, f"shape ({n},)")
        for name in ("server_ports", "server_optical_ports", "port_bandwidth"):
            if getattr(self, name).shape != (s,):
                raise InputError(f"fabric.{name}", getattr(self, name).shape, f"shape ({s},)")
        for name in ("dst", "capacity", "latency", "link_kind", "cable", "multiplicity", "medium"):
            if getattr(self, name).shape != (nl,):
                raise InputError(f"fabric.{name}", getattr(self, name).shape, f"shape ({nl},)")
        if nl:
            for name in ("src", "dst"):
                arr = getattr(self, name)
                bad = (arr < 0) | (arr >= n)
                if bad.any():
                    allowed = f"a node id 0..{n - 1}"
                    raise InputError(f"fabric.links.{name}", int(arr[bad][0]), allowed)
            if np.any(self.src == self.dst):
                u = int(self.src[self.src == self.dst][0])
                raise InputError("fabric.links", f"self-loop at node {u}", "two distinct nodes")
            if not np.all(self.capacity > 0) or not np.all(np.isfinite(self.capacity)):
                raise InputError("fabric.links.capacity", self.capacity.min(), "finite > 0 bytes/s")
            if not np.all(self.latency >= 0):
                raise InputError("fabric.links.latency", self.latency.min(), ">= 0 seconds")
            if not np.all(self.multiplicity >= 1):
                raise InputError("fabric.links.multiplicity", self.multiplicity.min(), ">= 1")
            for name, allowed in (("link_kind", LINK_KINDS), ("medium", MEDIA)):
                arr = getattr(self, name)
                bad = ~np.isin(arr, allowed)
                if bad.any():
                    raise InputError(f"fabric.links.{name}", arr[bad][0], f"one of {allowed}")
            self._check_cables()
        self._check_degrees()

    def _check_cables(self) -> None:
        order = _lexsort2(self.cable, self.src, self.n_nodes)
        c = self.cable[order]
        if c.shape[0] % 2 or np.any(c[0::2] != c[1::2]) or np.any(np.diff(c[0::2]) == 0):
            raise InputError("fabric.links.cable", "unpaired", "two directed links per cable")
        a, b = order[0::2], order[1::2]
        same = (self.src[a] == self.dst[b]) & (self.dst[a] == self.src[b])
        same &= self.multiplicity[a] == self.multiplicity[b]
        same &= self.link_kind[a] == self.link_kind[b]
        if not same.all():
            cab = int(self.cable[a][~same][0])
            raise InputError("fabric.links.cable", cab, "two opposite directions of one link")
        key = self.src * self.n_nodes + self.dst
        if _has_repeats(key):
            raise InputError("fabric.links", "duplicate node pair", "bundle parallel links")

    def _check_degrees(self) -> None:
        s = self.n_servers
        if np.any(self.server_optical_ports < 0) or np.any(
            self.server_optical_ports > self.server_ports
        ):
            raise InputError("fabric.server_optical_ports", "out of range", "0..server_ports")
        opt = self.link_kind == "optical"
        ends_e = np.bincount(self.src[~opt], self.multiplicity[~opt], self.n_nodes)
        ends_o = np.bincount(self.src[opt], self.multiplicity[opt], self.n_nodes)
        e_ports = self.server_ports - self.server_optical_ports
        over = np.flatnonzero(ends_e[:s] > e_ports)
        if over.size:
            i = int(over[0])
            raise InputError(
                f"fabric.server[{i}].degree",
                int(ends_e[i]),
                f"at most its {int(e_ports[i])} electrical ports",
            )
        over = np.flatnonzero(ends_o[:s] > self.server_optical_ports)
        if over.size:
            i = int(over[0])
            raise InputError(
                f"fabric.server[{i}].degree",
                int(ends_o[i]),
                f"at most its {int(self.server_optical_ports[i])} optical ports",
            )
        # a circuit ends at a server or, on an OCS spine, at a switch (a port of the switch)
        dev = np.flatnonzero((ends_o > 0) & (self.node_kind != "switch"))
        dev = dev[dev >= s]
        if dev.size:
            i = int(dev[0])
            raise InputError(
                f"fabric.node[{i}]", "optical circuit", "circuits between servers or switches"
            )
        ends_e = ends_e + np.where(self.node_kind == "switch", ends_o, 0)
        over = np.flatnonzero(ends_e[s:] > self.node_ports[s:])
        if over.size:
            i = int(over[0]) + s
            raise InputError(
                f"fabric.node[{i}].degree",
                int(ends_e[i]),
                f"at most its {int(self.node_ports[i])} ports",
            )

    # ------------------------------------------------------------------ sizes
    @property
    def n_nodes(self) -> int:
        """Number of nodes (servers + switches + optical devices)."""
        return int(self.node_kind.shape[0])

    @property
    def n_links(self) -> int:
        """Number of directed links (two per cable/bundle)."""
        return int(self.src.shape[0])

    @property
    def n_cables(self) -> int:
        """Number of cable bundles (each is two directed links)."""
        return self.n_links // 2

    @property
    def n_physical_links(self) -> int:
        """Physical full-duplex links / circuits, a bundle counted once per member."""
        return int(self.multiplicity.sum() // 2)

    @property
    def n_switches(self) -> int:
        """Number of electrical switches."""
        return int(np.count_nonzero(self.node_kind == "switch"))

    @property
    def link_capacity(self) -> np.ndarray:
        """Capacity of each directed link, bytes/s (alias of :attr:`capacity`)."""
        return self.capacity

    @property
    def link_latency(self) -> np.ndarray:
        """Latency of each directed link, seconds (alias of :attr:`latency`)."""
        return self.latency

    @property
    def server_bandwidth(self) -> np.ndarray:
        """Total NIC bandwidth of each server (all ports), bytes/s."""
        e = (self.server_ports - self.server_optical_ports) * self.port_bandwidth
        return e + self.server_optical_ports * self.optical_port_bandwidth

    @property
    def n_gpus(self) -> int:
        """Number of accelerators in the fabric."""
        return self.n_servers * int(self.gpus_per_server)

    # ------------------------------------------------------------------ look-ups
    def link_ids(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Directed link id of each node pair ``(u[i], v[i])`` (vectorised); ``-1`` where absent.

        Examples
        --------
        >>> from topoopt.fabrics import ideal
        >>> f = ideal(4, degree=1, port_bandwidth=1e9)
        >>> f.link_ids([0, 4, 0], [4, 0, 1]).tolist()
        [0, 1, -1]
        """
        if "link_key" not in self._cache:
            self._cache["link_key"] = PairIndex(self.src, self.dst, self.n_nodes)
        return self._cache["link_key"](u, v)

    def adjacency(self, kinds: tuple[str, ...] | None = None) -> sp.csr_matrix:
        """Sparse ``(N, N)`` matrix whose entry ``(u, v)`` is the directed link id + 1.

        Parameters
        ----------
        kinds : tuple of str, optional
            Keep only links of these kinds (default: all).
        """
        keep = np.ones(self.n_links, bool) if kinds is None else np.isin(self.link_kind, kinds)
        ids = np.flatnonzero(keep)
        return sp.csr_matrix(
            (ids + 1.0, (self.src[ids], self.dst[ids])), shape=(self.n_nodes, self.n_nodes)
        )

    def components(self, kinds: tuple[str, ...] | None = None) -> np.ndarray:
        """Connected-component label of every node (over links of ``kinds``)."""
        _, labels = csgraph.connected_components(self.adjacency(kinds), directed=False)
        return labels

    def check_connected(self, kinds: tuple[str, ...] | None = None) -> None:
        """Raise :class:`InputError` unless every server can reach every other server."""
        labels = self.components(kinds)[: self.n_servers]
        if np.any(labels != labels[0]):
            i = int(np.flatnonzero(labels != labels[0])[0])
            raise InputError(
                "fabric",
                f"server {i} unreachable from server 0 ({self.family})",
                "a connected fabric where routes are requested",
            )

    # ------------------------------------------------------------------ views
    def links_frame(self) -> pd.DataFrame:
        """The directed link table as a DataFrame (one row per directed link)."""
        return pd.DataFrame(
            {
                "src": self.src,
                "dst": self.dst,
                "capacity": self.capacity,
                "latency": self.latency,
                "kind": self.link_kind,
                "cable": self.cable,
                "multiplicity": self.multiplicity,
                "medium": self.medium,
            }
        )

    def nodes_frame(self) -> pd.DataFrame:
        """The node table as a DataFrame (one row per node)."""
        return pd.DataFrame(
            {"kind": self.node_kind, "layer": self.node_layer, "ports": self.node_ports}
        )

    def to_networkx(self):
        """A ``networkx.DiGraph`` view: one edge per directed link with its attributes.

        Edge attributes: ``link`` (id), ``capacity``, ``latency``, ``kind``, ``cable``,
        ``multiplicity``. Node attributes: ``kind``, ``layer``.
        """
        import networkx as nx

        g = nx.DiGraph()
        for i in range(self.n_nodes):
            g.add_node(i, kind=str(self.node_kind[i]), layer=int(self.node_layer[i]))
        for lid in range(self.n_links):
            g.add_edge(
                int(self.src[lid]),
                int(self.dst[lid]),
                link=lid,
                capacity=float(self.capacity[lid]),
                latency=float(self.latency[lid]),
                kind=str(self.link_kind[lid]),
                cable=int(self.cable[lid]),
                multiplicity=int(self.multiplicity[lid]),
            )
        return g

    def summary(self) -> dict[str, Any]:
        """Size figures: servers, switches, optical devices, physical links, GPUs."""
        return {
            "family": self.family,
            "servers": self.n_servers,
            "gpus": self.n_gpus,
            "switches": self.n_switches,
            "ocs": int(np.count_nonzero(self.node_kind == "ocs")),
            "patch_panels": int(np.count_nonzero(self.node_kind == "patch-panel")),
            "links": self.n_physical_links,
            "directed_links": self.n_links,
        }


def _has_repeats(x: np.ndarray) -> bool:
    """Whether an int array holds a value twice (a sort: ``np.unique``'s hash was 12 s at 8e6)."""
    y = np.sort(x, kind="stable")
    return bool(np.any(y[1:] == y[:-1]))


def _lexsort2(major: np.ndarray, minor: np.ndarray, minor_bound: int) -> np.ndarray:
    """``np.lexsort((minor, major))`` for ints in ``[0, minor_bound)`` as one int64 key (the
    identity when already in order, as :func:`build_fabric` makes them)."""
    if major.size and (int(major.max()) + 1) * minor_bound >= 2**62:
        return np.lexsort((minor, major))
    key = major.astype(np.int64) * minor_bound + minor
    if np.all(key[1:] >= key[:-1]):
        return np.arange(key.size)
    return np.argsort(key, kind="stable")


def _unique_rows(key: np.ndarray, n: int, kinds: int, meds: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, axis=0, return_inverse=True)`` of ``(lo, hi, kind, medium)`` rows, by
    one int64 code (same order: lexicographic rows), falling back when it would overflow."""
    if n * n * kinds * meds >= 2**62:
        uniq, inv = np.unique(key, axis=0, return_inverse=True)
        return uniq, inv.reshape(-1)
    code = ((key[:, 0] * n + key[:, 1]) * kinds + key[:, 2]) * meds + key[:, 3]
    order = np.argsort(code, kind="stable")
    cs = code[order]
    new = np.r_[True, cs[1:] != cs[:-1]]
    inv = np.empty(code.size, np.int64)
    inv[order] = np.cumsum(new) - 1
    return key[order[new]], inv


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)``, without the sort when all values are equal."""
    if values.size and bool(np.all(values == values.flat[0])):
        return np.asarray([values.flat[0]]), np.zeros(values.shape, np.int64)
    return np.unique(values, return_inverse=True)


def build_fabric(
    family: str,
    params: Mapping[str, Any],
    node_kind: np.ndarray,
    node_layer: np.ndarray,
    node_ports: np.ndarray,
    cable_u: np.ndarray,
    cable_v: np.ndarray,
    cable_bandwidth: np.ndarray,
    cable_kind: np.ndarray | str,
    *,
    multiplicity: np.ndarray | int = 1,
    medium: np.ndarray | str = "fibre",
    latency: np.ndarray | float = DEFAULT_LINK_LATENCY,
    server_ports: np.ndarray,
    server_optical_ports: np.ndarray | int = 0,
    port_bandwidth: np.ndarray | float,
    optical_port_bandwidth: float = 0.0,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    reconfiguration_delay: float | None = None,
    coords: np.ndarray | None = None,
) -> Fabric:
    """Build a :class:`Fabric` from a list of cables (undirected, full duplex).

    Cables with the same endpoints (in either order) and kind are bundled first: their
    multiplicities and bandwidths add up.

    Parameters
    ----------
    cable_u, cable_v : array_like of int
        Endpoints of each cable.
    cable_bandwidth : array_like of float
        Bandwidth of ONE member cable in each direction, bytes/s.
    cable_kind : str or array_like of str
        Link kind of each cable.
    multiplicity : int or array_like of int
        Parallel members of each cable.

    Returns
    -------
    Fabric

    Examples
    --------
    >>> f = build_fabric("pair", {}, ["server", "server"], [0, 0], [2, 2], [0, 0], [1, 1],
    ...                  [5.0, 5.0], "electrical", server_ports=[2, 2], port_bandwidth=5.0)
    >>> f.n_links, f.capacity.tolist(), f.n_physical_links
    (2, [10.0, 10.0], 2)
    """
    node_kind = np.asarray(node_kind, dtype=str)
    n = node_kind.shape[0]
    u = np.asarray(cable_u, np.int64)
    v = np.asarray(cable_v, np.int64)
    m = u.shape[0]
    bw = np.broadcast_to(np.asarray(cable_bandwidth, np.float64), (m,))
    kind = np.broadcast_to(np.asarray(cable_kind, dtype=str), (m,))
    mult = np.broadcast_to(np.asarray(multiplicity, np.int64), (m,))
    med = np.broadcast_to(np.asarray(medium, dtype=str), (m,))
    lat = np.broadcast_to(np.asarray(latency, np.float64), (m,))
    bad = (u < 0) | (u >= n) | (v < 0) | (v >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError("fabric.links", f"({int(u[i])}, {int(v[i])})", f"node ids 0..{n - 1}")
    if np.any(mult < 1):
        raise InputError("fabric.links.multiplicity", int(mult.min()), "an integer >= 1")
    # bundle parallel cables of the same kind (and medium) between the same node pair
    lo, hi = np.minimum(u, v), np.maximum(u, v)
    kinds, kind_code = _codes(kind)
    meds, med_code = _codes(med)
    key = np.stack([lo, hi, kind_code.reshape(-1), med_code.reshape(-1)], axis=1)
    if m:
        uniq, inv = _unique_rows(key, n, kinds.size, meds.size)
    else:
        uniq, inv = np.zeros((0, 4), np.int64), np.zeros(0, np.int64)
    c = uniq.shape[0]
    b_mult = np.bincount(inv, weights=mult, minlength=c).astype(np.int64)
    b_cap = np.bincount(inv, weights=mult * bw, minlength=c)
    first = np.full(c, -1, np.int64)
    first[inv[::-1]] = np.arange(m)[::-1]
    b_lat = lat[first] if c else np.zeros(0)
    if c:
        pair = uniq[:, 0] * n + uniq[:, 1]
        if _has_repeats(pair):
            raise InputError("fabric.links", "two link kinds on one node pair", "one kind per pair")
    bu, bv = uniq[:, 0], uniq[:, 1]
    src = np.empty(2 * c, np.int64)
    dst = np.empty(2 * c, np.int64)
    src[0::2], dst[0::2], src[1::2], dst[1::2] = bu, bv, bv, bu
    rep = np.repeat(np.arange(c), 2)
    s = int(np.count_nonzero(node_kind == "server"))
    return Fabric(
        family=family,
        params=dict(params),
        n_servers=s,
        node_kind=node_kind,
        node_layer=np.asarray(node_layer),
        node_ports=np.asarray(node_ports),
        src=src,
        dst=dst,
        capacity=b_cap[rep],
        latency=b_lat[rep],
        link_kind=kinds[uniq[:, 2]][rep] if c else np.zeros(0, str),
        cable=rep,
        multiplicity=b_mult[rep],
        medium=meds[uniq[:, 3]][rep] if c else np.zeros(0, str),
        server_ports=np.broadcast_to(np.asarray(server_ports, np.int64), (s,)),
        server_optical_ports=np.broadcast_to(np.asarray(server_optical_ports, np.int64), (s,)),
        port_bandwidth=np.broadcast_to(np.asarray(port_bandwidth, np.float64), (s,)),
        optical_port_bandwidth=float(optical_port_bandwidth),
        gpus_per_server=int(gpus_per_server),
        intra_server_bandwidth=intra_server_bandwidth,
        reconfiguration_delay=reconfiguration_delay,
        coords=coords,
    )
