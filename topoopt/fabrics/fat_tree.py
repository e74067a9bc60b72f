"""Electrical Clos fabrics: k-ary three-tier fat-tree, two-tier leaf-spine, rail-optimised.

Oversubscription ``R`` at a layer means a switch there has ``R`` times more downlink than uplink
bandwidth: with ``h`` downlinks it gets ``ceil(h / R)`` uplinks (all links at one speed).
"""

from __future__ import annotations

import math

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

__all__ = ["fat_tree", "leaf_spine", "rail_optimized", "hosts_per_leaf"]


def hosts_per_leaf(radix: int, oversubscription: float) -> int:
    """Most downlinks ``h`` a ``radix``-port switch can take with ``h + ceil(h/R) <= radix``.

    >>> hosts_per_leaf(64, 1.0), hosts_per_leaf(64, 3.0), hosts_per_leaf(8, 1.0)
    (32, 48, 4)
    """
    h = int(math.floor(radix * oversubscription / (oversubscription + 1.0)))
    while h > 0 and h + math.ceil(h / oversubscription) > radix:
        h -= 1
    return h


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


def _two_tier(
    n: int,
    ports_per_server: int,
    radix: int,
    r: float,
    h: int | None,
    spine_radix: int | None,
    spines: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int, int]:
    """Leaves of ``h`` server ports, one uplink per (leaf, spine); rails when ports > 1.

    With ``spines``, every leaf instead has a bundle of ``ceil(u / spines)`` parallel cables to
    each of ``spines`` spines (spines sized by ports, not one per uplink; ``u`` rounds up to a
    multiple of ``spines``).

    Returns host-cable (u, v) arrays, leaf-spine cable (u, v) arrays, leaves, spines, uplinks.
    Leaf ``g * P + p`` serves port ``p`` of the servers of group ``g``.
    """
    if h is None:
        h = radix if n <= radix else hosts_per_leaf(radix, r)
    if h < 1:
        raise InputError("radix", radix, "room for at least one host and one uplink")
    groups = math.ceil(n / h)
    leaves = groups * ports_per_server
    server = np.repeat(np.arange(n), ports_per_server)
    rail = np.tile(np.arange(ports_per_server), n)
    host_u, host_v = server, n + (server // h) * ports_per_server + rail
    if groups == 1:
        return host_u, host_v, np.zeros(0, np.int64), np.zeros(0, np.int64), leaves, 0, 0
    u = math.ceil(h / r)
    if h + u > radix:
        raise InputError("hosts_per_leaf", h, f"h + ceil(h/R) <= radix {radix}")
    spine_radix = radix if spine_radix is None else spine_radix
    if leaves > spine_radix:
        raise InputError(
            "servers",
            n,
            f"at most {spine_radix // ports_per_server * h} for a two-tier fabric of radix "
            f"{radix} (leaves {leaves} > spine radix {spine_radix}); use a fat-tree",
        )
    n_sp = u if spines is None else spines
    bundle = -(-u // n_sp)
    if h + n_sp * bundle > radix or leaves * bundle > spine_radix:
        raise InputError(
            "spines", spines, f"room for {u} uplinks per leaf in equal bundles to every spine"
        )
    u = n_sp * bundle
    leaf = np.repeat(np.arange(leaves), u)
    sp = np.tile(np.repeat(np.arange(n_sp), bundle), leaves)
    return host_u, host_v, n + leaf, n + leaves + sp, leaves, n_sp, u


def leaf_spine(
    servers: int,
    oversubscription: float = 1.0,
    *,
    radix: int = 64,
    leaf_hosts: int | None = None,
    spine_radix: int | None = None,
    spines: int | None = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Two-tier leaf-spine fabric for any server count.

    Leaves have ``radix`` ports: ``h`` host ports (default :func:`hosts_per_leaf`, or all
    ``radix`` when every server fits on one leaf, which then needs no spine) and
    ``u = ceil(h / R)`` uplinks, one to each of ``u`` spines. Needs ``leaves <= spine_radix``.
    ``spines`` packs the uplinks onto fewer spines instead: ``b = ceil(u / spines)`` parallel
    cables from every leaf to every spine (``spines * b >= u`` uplinks), needing
    ``h + spines * b <= radix`` and ``leaves * b <= spine_radix`` (what a buyer does when
    leaves are few: no spine bought for 4 of its 64 ports).

    Examples
    --------
    >>> f = leaf_spine(128, 1.0, radix=16)
    >>> f.n_switches, f.n_physical_links, int(f.node_ports[128:].sum())
    (24, 256, 384)
    """
    n = check_int("servers", servers)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    radix = check_int("radix", radix, minimum=2)
    b = check_float("port_bandwidth", port_bandwidth)
    h = None if leaf_hosts is None else check_int("leaf_hosts", leaf_hosts)
    sr = None if spine_radix is None else check_int("spine_radix", spine_radix, minimum=2)
    sp = None if spines is None else check_int("spines", spines)
    hu, hv, lu, lv, leaves, n_sp, up = _two_tier(n, 1, radix, r, h, sr, sp)
    return _clos_fabric(
        "leaf-spine",
        {"servers": n, "oversubscription": r, "radix": radix, "port_bandwidth": b},
        n,
        1,
        leaves,
        n_sp,
        radix,
        sr,
        hu,
        hv,
        lu,
        lv,
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
    """Rail-optimised two-tier fabric: NIC ``i`` of every server (GPU ``i``'s) on rail ``i``.

    Each server has ``gpus_per_server`` NIC ports. Servers are cut into groups of ``h`` (all of
    them when they fit one switch); group ``g`` has one rail (leaf) switch per GPU index, leaf
    ``g * G + i`` takes NIC ``i`` of the group's servers. With more than one group, every leaf
    has ``ceil(h / R)`` uplinks, one to each spine.

    Examples
    --------
    >>> f = rail_optimized(16, gpus_per_server=4, radix=32)
    >>> f.n_switches, f.n_physical_links, f.server_ports.tolist()[:2]
    (4, 64, [4, 4])
    """
    n = check_int("servers", servers)
    g = check_int("gpus_per_server", gpus_per_server)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    radix = check_int("radix", radix, minimum=2)
    b = check_float("port_bandwidth", port_bandwidth)
    sr = None if spine_radix is None else check_int("spine_radix", spine_radix, minimum=2)
    hu, hv, lu, lv, leaves, spines, up = _two_tier(n, g, radix, r, None, sr)
    return _clos_fabric(
        "rail-optimized",
        {
            "servers": n,
            "gpus_per_server": g,
            "oversubscription": r,
            "radix": radix,
            "port_bandwidth": b,
        },
        n,
        g,
        leaves,
        spines,
        radix,
        sr,
        hu,
        hv,
        lu,
        lv,
        b,
        g,
        intra_server_bandwidth,
        latency,
    )


def _clos_fabric(
    family, params, n, ports, leaves, spines, radix, sr, hu, hv, lu, lv, b, g, intra, latency
) -> Fabric:
    kind = np.array(["server"] * n + ["switch"] * (leaves + spines))
    layer = np.r_[np.zeros(n), np.ones(leaves), np.full(spines, 2)]
    node_ports = np.r_[np.full(n, ports), np.full(leaves, radix), np.full(spines, sr or radix)]
    return build_fabric(
        family,
        params,
        kind,
        layer,
        node_ports,
        np.r_[hu, lu],
        np.r_[hv, lv],
        b,
        "electrical",
        latency=latency,
        server_ports=ports,
        port_bandwidth=b,
        gpus_per_server=g,
        intra_server_bandwidth=intra,
    )
