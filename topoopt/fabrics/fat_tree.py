"""Electrical Clos fabrics: k-ary three-tier fat-tree, two-tier leaf-spine, rail-optimised.

Oversubscription ``R`` at a layer means a switch there has ``R`` times more downlink than uplink
bandwidth: with ``h`` downlinks it gets ``ceil(h / R)`` uplinks (all links at one speed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = [
    "leaf_hosts",
    "fat_tree_radix",
    "fat_tree",
    "leaf_spine",
    "rail_optimized",
    "hosts_per_leaf",
    "ClosShape",
    "clos_shape",
    "clos_cables",
    "clos",
]


def hosts_per_leaf(radix: int, oversubscription: float) -> int:
    """Most downlinks ``h`` a ``radix``-port switch can take with ``h + ceil(h/R) <= radix``.

    >>> hosts_per_leaf(64, 1.0), hosts_per_leaf(64, 3.0), hosts_per_leaf(8, 1.0)
    (32, 48, 4)
    """
    h = int(math.floor(radix * oversubscription / (oversubscription + 1.0)))
    while h > 0 and h + math.ceil(h / oversubscription) > radix:
        h -= 1
    return h


def leaf_hosts(servers: int) -> int:
    """Servers per leaf switch of the leaf-spines that the hybrid designs are built on: 16, or
    half the servers when fewer, so that traffic crosses the spine (and an oversubscription
    bites) at every cluster size.

    >>> leaf_hosts(128), leaf_hosts(16), leaf_hosts(3)
    (16, 8, 2)
    """
    return max(2, min(16, servers // 2))


def fat_tree_radix(servers: int) -> int:
    """The smallest even ``k`` whose k-ary fat-tree holds ``servers`` hosts (``k^3 / 4 >= n``).

    >>> fat_tree_radix(16), fat_tree_radix(17), fat_tree_radix(1024)
    (4, 6, 16)
    """
    k = 2
    while k**3 // 4 < servers:
        k += 2
    return k


def fat_tree(
    k: int,
    servers: int | None = None,
    *,
    oversubscription: float = 1.0,
    agg_oversubscription: float = 1.0,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008) of ``k``-port switches.

    ``k`` pods of ``k/2`` edge and ``k/2`` aggregation switches, ``(k/2)^2`` core switches,
    ``k^3/4`` host ports. Servers fill edge ports in order (pod-major); with fewer servers the
    remaining host ports stay empty and every switch is still built.

    Oversubscription: each edge switch keeps ``k/2`` host ports but only ``u_e = ceil((k/2)/R_e)``
    uplinks, so each pod has ``u_e`` aggregation switches; each aggregation switch has ``k/2``
    edge downlinks and ``u_a = ceil((k/2)/R_a)`` core uplinks, so there are ``u_e * u_a`` cores.
    Aggregation switch ``j`` of every pod connects to cores ``j*u_a .. j*u_a + u_a - 1``.

    Parameters
    ----------
    k : int
        Switch radix, even, >= 2.
    servers : int, optional
        Number of servers, at most ``k^3/4`` (default: all).
    oversubscription : float
        Edge-layer oversubscription ``R_e >= 1``.
    agg_oversubscription : float
        Aggregation-layer oversubscription ``R_a >= 1``.
    port_bandwidth : float
        Bytes/s of every port and link.
    gpus_per_server, intra_server_bandwidth, latency
        As in :func:`topoopt.fabrics.ideal`.

    Returns
    -------
    Fabric
        Nodes: servers, then edge (layer 1), aggregation (layer 2), core (layer 3) switches.

    Examples
    --------
    >>> f = fat_tree(4)
    >>> f.n_servers, f.n_switches, f.n_physical_links
    (16, 20, 48)
    """
    k = check_int("k", k, minimum=2)
    if k % 2:
        raise InputError("k", k, "an even integer >= 2")
    half = k // 2
    full = k**3 // 4
    n = full if servers is None else check_int("servers", servers)
    if n > full:
        raise InputError("servers", n, f"at most k^3/4 = {full} for k = {k}")
    r_e = check_float("oversubscription", oversubscription, 1.0, strict=False)
    r_a = check_float("agg_oversubscription", agg_oversubscription, 1.0, strict=False)
    b = check_float("port_bandwidth", port_bandwidth)
    u_e = math.ceil(half / r_e)
    u_a = math.ceil(half / r_a)
    n_edge, n_agg, n_core = k * half, k * u_e, u_e * u_a
    e0, a0 = n, n + n_edge
    c0 = a0 + n_agg
    # hosts: server i on edge i // half
    hu = np.arange(n)
    hv = e0 + hu // half
    # edge e (pod p = e // half) -> agg j of pod p, j < u_e
    e = np.repeat(np.arange(n_edge), u_e)
    j = np.tile(np.arange(u_e), n_edge)
    eu, ev = e0 + e, a0 + (e // half) * u_e + j
    # agg (p, j) -> cores j*u_a + t
    a = np.repeat(np.arange(n_agg), u_a)
    t = np.tile(np.arange(u_a), n_agg)
    au, av = a0 + a, c0 + (a % u_e) * u_a + t
    kind = np.array(["server"] * n + ["switch"] * (n_edge + n_agg + n_core))
    layer = np.r_[np.zeros(n), np.ones(n_edge), np.full(n_agg, 2), np.full(n_core, 3)]
    ports = np.r_[np.ones(n), np.full(n_edge + n_agg + n_core, k)]
    return build_fabric(
        "fat-tree",
        {
            "k": k,
            "servers": n,
            "oversubscription": r_e,
            "agg_oversubscription": r_a,
            "port_bandwidth": b,
        },
        kind,
        layer,
        ports,
        np.r_[hu, eu, au],
        np.r_[hv, ev, av],
        b,
        "electrical",
        latency=latency,
        server_ports=1,
        port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
    )


@dataclass(frozen=True)
class ClosShape:
    """Switch counts and wiring of a one-, two- or three-tier Clos (:func:`clos_shape`).

    Servers have ``ports_per_server`` NIC ports. Bundled (``rails=False``): all of a server's
    ports go to its leaf, ``servers_per_leaf`` servers a leaf. Rails: port ``p`` of the servers
    of group ``g`` goes to leaf ``g * P + p``. Tier 2 is the spines (two tiers) or every pod's
    aggregation switches (three tiers, ``pods > 0``: ``uplinks`` per pod, one cable from each
    leaf of the pod to each; aggregation switch ``j`` of every pod reaches the ``C =
    cores_per_plane`` cores of plane ``j`` with ``core_bundle`` cables each).
    """

    servers: int
    ports_per_server: int
    rails: bool
    radix: int
    spine_radix: int
    servers_per_leaf: int
    leaves: int
    uplinks: int
    spines: int
    bundle: int
    pods: int = 0
    leaves_per_pod: int = 0
    cores_per_plane: int = 0
    core_bundle: int = 0

    @property
    def tiers(self) -> int:
        """Switch tiers: 1 (leaves only), 2 (leaf-spine) or 3 (leaf, aggregation, core)."""
        return 1 if self.spines == 0 else (3 if self.pods else 2)

    @property
    def host_ports_per_leaf(self) -> int:
        """Server ports on one (full) leaf."""
        return self.servers_per_leaf * (1 if self.rails else self.ports_per_server)

    @property
    def cores(self) -> int:
        """Tier-3 switches (0 below three tiers)."""
        return self.uplinks * self.cores_per_plane if self.pods else 0

    @property
    def switches(self) -> int:
        """Switches of every tier."""
        return self.leaves + self.spines + self.cores

    @property
    def agg_uplinks(self) -> int:
        """Core-facing cables of one aggregation switch (three tiers)."""
        return self.cores_per_plane * self.core_bundle

    @property
    def fabric_cables(self) -> int:
        """Switch-to-switch cables (members of bundles), every tier."""
        return self.leaves * self.uplinks + self.spines * self.agg_uplinks

    @property
    def host_cables(self) -> int:
        """Server-to-leaf cables (one per NIC port)."""
        return self.servers * self.ports_per_server

    @property
    def oversubscription(self) -> float:
        """Realised leaf oversubscription: host ports over uplinks of a full leaf (1 with one
        tier: no uplink, nothing to oversubscribe)."""
        return self.host_ports_per_leaf / self.uplinks if self.uplinks else 1.0

    def info(self) -> dict:
        """JSON-able counts per tier."""
        return {
            "tiers": self.tiers,
            "ports_per_server": self.ports_per_server,
            "rails": self.rails,
            "leaves": self.leaves,
            "spines": self.spines if self.tiers == 2 else 0,
            "aggregation": self.spines if self.tiers == 3 else 0,
            "cores": self.cores,
            "pods": self.pods,
            "servers_per_leaf": self.servers_per_leaf,
            "uplinks_per_leaf": self.uplinks,
            "bundle": self.bundle,
            "core_bundle": self.core_bundle,
            "oversubscription_realised": self.oversubscription,
        }


def clos_shape(
    servers: int,
    radix: int,
    oversubscription: float = 1.0,
    *,
    ports_per_server: int = 1,
    rails: bool = False,
    servers_per_leaf: int | None = None,
    spines: int | None = None,
    spine_radix: int | None = None,
    pack: bool = False,
) -> ClosShape:
    """The Clos :func:`leaf_spine` / :func:`rail_optimized` build: one, two or three tiers.

    1. Leaves take ``h`` servers (``servers_per_leaf``; default: all when their ports fit one
       switch, else :func:`hosts_per_leaf` host ports, divided by the ports per server when
       bundled) and ``u = ceil(h_ports / R)`` uplinks.
    2. One leaf group: no spine. Two tiers when the leaves fit the spine radix: ``u`` spines
       (one cable from every leaf to each), or ``spines`` spines with bundles of
       ``ceil(u / spines)`` cables, or with ``pack`` the fewest spines whose bundles fit.
    3. Otherwise three tiers (Al-Fares' k-ary fat-tree when ``servers = k^3/4``): pods of at
       most ``spine_radix // 2`` leaves, ``u`` aggregation switches a pod (full bisection at
       the aggregation layer), ``u`` core planes of ``C`` cores, each aggregation switch with
       ``C`` bundles of ``ceil(Lp / C)`` cables (the fewest cores whose ports allow it).

    Examples
    --------
    >>> s = clos_shape(16, 4)  # k = 4 fat-tree
    >>> s.tiers, s.leaves, s.spines, s.cores, s.pods
    (3, 8, 8, 4, 4)
    >>> s = clos_shape(2048, 64, ports_per_server=8)
    >>> s.tiers, s.leaves, s.spines, s.cores, s.core_bundle
    (3, 512, 512, 256, 4)
    """
    n = check_int("servers", servers)
    radix = check_int("radix", radix, minimum=2)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    p = check_int("ports_per_server", ports_per_server)
    sr = radix if spine_radix is None else check_int("spine_radix", spine_radix, minimum=2)
    per = 1 if rails else p  # ports a server puts on one leaf
    if servers_per_leaf is not None:
        s = check_int("leaf_hosts", servers_per_leaf)
    elif n * per <= radix:
        s = n
    else:
        s = hosts_per_leaf(radix, r) // per
    if s < 1 or s * per > radix:
        raise InputError("radix", radix, f"room for a server's {per} ports and an uplink")
    groups = math.ceil(n / s)
    leaves = groups * (p if rails else 1)
    if groups == 1:
        return ClosShape(n, p, rails, radix, sr, s, leaves, 0, 0, 0)
    hp = s * per
    u = math.ceil(hp / r)
    if hp + u > radix:
        raise InputError("hosts_per_leaf", s, f"h + ceil(h/R) <= radix {radix}")
    if spines is not None:
        b = -(-u // spines)
        if hp + spines * b > radix or leaves * b > sr:
            raise InputError(
                "spines", spines, f"room for {u} uplinks per leaf in equal bundles to every spine"
            )
        return ClosShape(n, p, rails, radix, sr, s, leaves, spines * b, spines, b)
    if leaves <= sr:
        if pack:
            for sp_ in range(1, u + 1):
                b = -(-u // sp_)
                if hp + sp_ * b <= radix and leaves * b <= sr:
                    return ClosShape(n, p, rails, radix, sr, s, leaves, sp_ * b, sp_, b)
        return ClosShape(n, p, rails, radix, sr, s, leaves, u, u, 1)
    lp_max = sr // 2
    pods = math.ceil(leaves / lp_max)
    if pods > sr:
        most = sr * lp_max * s // (p if rails else 1)
        raise InputError("servers", n, f"at most {most} for a three-tier Clos of radix {radix}")
    lp = math.ceil(leaves / pods)
    pods = math.ceil(leaves / lp)
    for c in range(-(-lp // max(1, sr // pods)), lp + 1):
        cb = -(-lp // c)
        if pods * cb <= sr and lp + c * cb <= sr:
            break
    return ClosShape(n, p, rails, radix, sr, s, leaves, u, pods * u, 1, pods, lp, c, cb)


def clos_cables(shape: ClosShape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cable endpoints and multiplicities of ``shape`` (nodes: servers, leaves, tier 2, tier 3)."""
    n, p, s = shape.servers, shape.ports_per_server, shape.servers_per_leaf
    l0 = n
    t0 = l0 + shape.leaves
    c0 = t0 + shape.spines
    if shape.rails:
        server = np.repeat(np.arange(n), p)
        hu, hv = server, l0 + (server // s) * p + np.tile(np.arange(p), n)
        hm = np.ones(hu.shape[0], np.int64)
    else:
        hu = np.arange(n)
        hv, hm = l0 + hu // s, np.full(n, p, np.int64)
    if shape.tiers == 1:
        return hu, hv, hm
    u = shape.uplinks
    if shape.tiers == 2:
        leaf = np.repeat(np.arange(shape.leaves), shape.spines)
        sp_ = np.tile(np.arange(shape.spines), shape.leaves)
        lm = np.full(leaf.shape[0], shape.bundle, np.int64)
        return np.r_[hu, l0 + leaf], np.r_[hv, t0 + sp_], np.r_[hm, lm]
    leaf = np.repeat(np.arange(shape.leaves), u)
    j = np.tile(np.arange(u), shape.leaves)
    lu, lv = l0 + leaf, t0 + (leaf // shape.leaves_per_pod) * u + j
    c = shape.cores_per_plane
    agg = np.repeat(np.arange(shape.spines), c)
    core = (agg % u) * c + np.tile(np.arange(c), shape.spines)
    au, av = t0 + agg, c0 + core
    am = np.full(agg.shape[0], shape.core_bundle, np.int64)
    return np.r_[hu, lu, au], np.r_[hv, lv, av], np.r_[hm, np.ones(lu.shape[0], np.int64), am]


def _clos_fabric(
    family: str, params: dict, shape: ClosShape, b: float, g: int, intra, latency
) -> Fabric:
    u, v, m = clos_cables(shape)
    n, sw = shape.servers, shape.switches
    kind = np.array(["server"] * n + ["switch"] * sw)
    layer = np.r_[
        np.zeros(n), np.ones(shape.leaves), np.full(shape.spines, 2), np.full(shape.cores, 3)
    ]
    node_ports = np.r_[
        np.full(n, shape.ports_per_server),
        np.full(shape.leaves, shape.radix),
        np.full(shape.spines + shape.cores, shape.spine_radix),
    ]
    params = {**params, "tiers": shape.tiers}
    if shape.ports_per_server > 1 and not shape.rails:
        params["ports_per_server"] = shape.ports_per_server
    return build_fabric(
        family,
        params,
        kind,
        layer,
        node_ports,
        u,
        v,
        b,
        "electrical",
        multiplicity=m,
        latency=latency,
        server_ports=shape.ports_per_server,
        port_bandwidth=b,
        gpus_per_server=g,
        intra_server_bandwidth=intra,
    )


def leaf_spine(
    servers: int,
    oversubscription: float = 1.0,
    *,
    radix: int = 64,
    leaf_hosts: int | None = None,
    spine_radix: int | None = None,
    spines: int | None = None,
    ports_per_server: int = 1,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Leaf-spine fabric for any server count: one, two or three tiers (:func:`clos_shape`).

    Leaves have ``radix`` ports: ``h`` servers (``leaf_hosts``; default :func:`hosts_per_leaf`
    host ports, or every server when they fit one leaf, which then needs no spine), each with
    ``ports_per_server`` NIC ports of ``port_bandwidth`` to its leaf, and
    ``u = ceil(h P / R)`` uplinks, one to each of ``u`` spines while the leaves fit the spine
    radix. ``spines`` packs the uplinks onto fewer spines instead: ``b = ceil(u / spines)``
    parallel cables from every leaf to every spine, needing ``h P + spines * b <= radix`` and
    ``leaves * b <= spine_radix`` (what a buyer does when leaves are few). With more leaves
    than the spine radix, a third tier (pods and cores, :func:`clos_shape`).

    Examples
    --------
    >>> f = leaf_spine(128, 1.0, radix=16)
    >>> f.n_switches, f.n_physical_links, int(f.node_ports[128:].sum())
    (24, 256, 384)
    >>> f = leaf_spine(16, radix=4)  # the k = 4 fat-tree's counts
    >>> f.params["tiers"], f.n_switches, f.n_physical_links
    (3, 20, 48)
    """
    n = check_int("servers", servers)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    b = check_float("port_bandwidth", port_bandwidth)
    sp_ = None if spines is None else check_int("spines", spines)
    shape = clos_shape(
        n, radix, r, ports_per_server=ports_per_server, servers_per_leaf=leaf_hosts,
        spines=sp_, spine_radix=spine_radix,
    )  # fmt: skip
    return _clos_fabric(
        "leaf-spine",
        {"servers": n, "oversubscription": r, "radix": shape.radix, "port_bandwidth": b},
        shape,
        b,
        gpus_per_server,
        intra_server_bandwidth,
        latency,
    )


def rail_optimized(
    servers: int,
    gpus_per_server: int = 8,
    oversubscription: float = 1.0,
    *,
    radix: int = 64,
    spine_radix: int | None = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Rail-optimised Clos: NIC ``i`` of every server (GPU ``i``'s) on rail ``i``.

    Each server has ``gpus_per_server`` NIC ports. Servers are cut into groups of ``h`` (all of
    them when they fit one switch); group ``g`` has one rail (leaf) switch per GPU index, leaf
    ``g * G + i`` takes NIC ``i`` of the group's servers. With more than one group, every leaf
    has ``ceil(h / R)`` uplinks, one to each spine (a third tier when the leaves outnumber the
    spine radix, :func:`clos_shape`).

    Examples
    --------
    >>> f = rail_optimized(16, gpus_per_server=4, radix=32)
    >>> f.n_switches, f.n_physical_links, f.server_ports.tolist()[:2]
    (4, 64, [4, 4])
    """
    n = check_int("servers", servers)
    g = check_int("gpus_per_server", gpus_per_server)
    if g > 65536:  # the Fabric's own bound, before one leaf per rail is built
        raise InputError("gpus_per_server", g, "an integer 1..65,536")
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    b = check_float("port_bandwidth", port_bandwidth)
    shape = clos_shape(n, radix, r, ports_per_server=g, rails=True, spine_radix=spine_radix)
    return _clos_fabric(
        "rail-optimized",
        {
            "servers": n,
            "gpus_per_server": g,
            "oversubscription": r,
            "radix": shape.radix,
            "port_bandwidth": b,
        },
        shape,
        b,
        g,
        intra_server_bandwidth,
        latency,
    )


def clos(
    shape: ClosShape,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    oversubscription: float = 1.0,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """The :class:`Fabric` of a :class:`ClosShape`, every port at ``port_bandwidth``: family
    ``rail-optimized`` for rails, else ``leaf-spine`` (``oversubscription``: the ratio asked,
    recorded in ``params`` next to the realised one).

    >>> f = clos(clos_shape(128, 64, ports_per_server=2, pack=True), 1e9)
    >>> f.family, f.n_switches, int(f.server_ports[0]), f.params["tiers"]
    ('leaf-spine', 12, 2, 2)
    """
    b = check_float("port_bandwidth", port_bandwidth)
    params = {
        "servers": shape.servers,
        "oversubscription": float(oversubscription),
        "oversubscription_realised": shape.oversubscription,
        "radix": shape.radix,
        "port_bandwidth": b,
    }
    if shape.rails:
        params["rails"] = shape.ports_per_server
    return _clos_fabric(
        "rail-optimized" if shape.rails else "leaf-spine",
        params,
        shape,
        b,
        gpus_per_server,
        intra_server_bandwidth,
        latency,
    )
