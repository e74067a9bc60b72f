"""Rail-only fabrics (Wang et al., "Rail-only: a low-cost high-performance network for training
LLMs with trillion parameters", arXiv:2307.12169): rails with no spine across them.

NIC ``p`` of every server (GPU ``p``'s) is on rail ``p``; each rail is its own Clos of one port
per server (one switch when the servers fit it), and no switch joins two rails. Traffic between
GPUs on different rails crosses a server's scale-up fabric (NVLink): the flow model routes GPU
``i``'s traffic on rail ``i`` and ends a flow to GPU ``j != i`` with the destination GPU ``i``'s
NVLink egress (:class:`topoopt.flowsim.network.Network`, ``rail_routing``; :func:`link_rails`
names the rail of every server link). The rail-optimised Clos,
:func:`topoopt.fabrics.fat_tree.rail_optimized`, adds the spine that makes a rail reach every
other; :func:`topoopt.fabrics.rail_circuits.rail_circuits` replaces each rail's switch by
circuits between the rail's NICs (its NIC nodes stand where a rail-only fabric has its rail
switches).
"""

from __future__ import annotations

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.fat_tree import ClosShape, clos_cables
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = ["rail_only", "RAIL_FAMILIES", "rail_count", "link_rails"]

RAIL_FAMILIES = ("rail-only", "rail-optimized", "rail-circuits")
"""Fabric families whose server port ``i`` (NIC ``i``, GPU ``i``'s) sits on rail ``i``."""


def rail_count(fabric: Fabric) -> int:
    """Rails of a rail fabric (NICs per server); 0 for any other family."""
    if fabric.family in ("rail-only", "rail-circuits"):
        return int(fabric.params["rails"])
    if fabric.family == "rail-optimized":  # rail_optimized() or clos(..., rails=True)
        p = fabric.params
        return int(p["gpus_per_server"] if "gpus_per_server" in p else p["rails"])
    return 0


def link_rails(fabric: Fabric) -> np.ndarray:
    """``int64 (n_links,)``: the rail (NIC index) of every link between a server and its rail
    switch, either direction; ``-1`` for the other links.

    ``rail-only``: the switches of rail ``k`` are the ``k``-th block of ``n_switches / rails``
    (:func:`rail_only`); ``rail-optimized``: leaf ``g G + i`` is rail ``i`` of group ``g``
    (:func:`topoopt.fabrics.fat_tree.rail_optimized`). Every server has one link to each rail
    (checked).

    >>> from topoopt.fabrics.fat_tree import clos_shape
    >>> f = rail_only(clos_shape(8, 64, pack=True), 4, 1e9)
    >>> r = link_rails(f); r[(f.src == 0)].tolist()
    [0, 1, 2, 3]
    """
    g = rail_count(fabric)
    if g < 1:
        raise InputError(
            "fabric.family", fabric.family, "a rail fabric: " + ", ".join(RAIL_FAMILIES)
        )
    n = fabric.n_servers
    node = np.full(fabric.n_nodes, -1, np.int64)
    sw = np.arange(n, fabric.n_nodes)
    if fabric.family in ("rail-only", "rail-circuits"):  # rail-circuits: NIC k of u: n + k n + u
        node[sw] = (sw - n) // (fabric.n_switches // g)
    else:
        leaf = sw[fabric.node_layer[sw] == 1]
        node[leaf] = (leaf - n) % g
    out = np.full(fabric.n_links, -1, np.int64)
    up = fabric.src < n
    down = fabric.dst < n
    out[up] = node[fabric.dst[up]]
    out[down] = node[fabric.src[down]]
    ends = np.where(up, fabric.src, fabric.dst)
    for m in (up, down):
        key = ends[m] * g + out[m]
        if np.any(out[m] < 0) or np.unique(key).size != n * g or key.size != n * g:
            raise InputError("fabric", fabric.family, "one link per server and rail each way")
    return out


def rail_only(
    rail: ClosShape,
    rails: int,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """``rails`` copies of the one-port Clos ``rail``, server port ``p`` on copy ``p``.

    Parameters
    ----------
    rail : ClosShape
        One rail: a Clos of one port per server (:func:`topoopt.fabrics.fat_tree.clos_shape`).
    rails : int
        Rails = NICs per server.

    Examples
    --------
    >>> from topoopt.fabrics.fat_tree import clos_shape
    >>> f = rail_only(clos_shape(128, 64, pack=True), 4, 1e9)
    >>> f.family, f.n_switches, int(f.server_ports[0]), f.n_physical_links
    ('rail-only', 24, 4, 1024)
    """
    if rail.ports_per_server != 1 or rail.rails:
        raise InputError("rail", rail.ports_per_server, "a Clos of one port per server")
    p = check_int("rails", rails)
    b = check_float("port_bandwidth", port_bandwidth)
    n, sw = rail.servers, rail.switches
    u, v, m = clos_cables(rail)
    off = np.repeat(np.arange(p) * sw, u.shape[0])
    uu, vv = np.tile(u, p), np.tile(v, p)
    uu = np.where(uu >= n, uu + off, uu)
    vv = np.where(vv >= n, vv + off, vv)
    layer1 = np.r_[np.ones(rail.leaves), np.full(rail.spines, 2), np.full(rail.cores, 3)]
    ports1 = np.r_[
        np.full(rail.leaves, rail.radix), np.full(rail.spines + rail.cores, rail.spine_radix)
    ]
    return build_fabric(
        "rail-only",
        {
            "servers": n,
            "rails": p,
            "radix": rail.radix,
            "port_bandwidth": b,
            "tiers": rail.tiers,
        },
        np.array(["server"] * n + ["switch"] * (p * sw)),
        np.r_[np.zeros(n), np.tile(layer1, p)],
        np.r_[np.full(n, p), np.tile(ports1, p)],
        uu,
        vv,
        b,
        "electrical",
        multiplicity=np.tile(m, p),
        latency=latency,
        server_ports=p,
        port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
    )
