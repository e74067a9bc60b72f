"""The ideal fabric: one non-blocking switch, the bound every design is measured against."""

from __future__ import annotations

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)

__all__ = ["ideal", "ideal_bound", "DEFAULT_PORT_BANDWIDTH"]

DEFAULT_PORT_BANDWIDTH = 12.5e9
"""Default bandwidth of one port: 100 Gbps = 12.5e9 bytes/s."""


def ideal(
    servers: int,
    degree: int = 1,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """One non-blocking switch joining ``servers`` servers with ``degree`` ports each.

    Each server's bandwidth is ``degree * port_bandwidth``; the switch has ``servers * degree``
    ports (a hypothetical radix: the ideal switch is a bound, not a product).

    Parameters
    ----------
    servers : int
        Number of servers (>= 1).
    degree : int
        Ports per server (>= 1).
    port_bandwidth : float
        Bytes/s of one port, each direction.
    gpus_per_server : int
        Accelerators per server.
    intra_server_bandwidth : float, optional
        Bytes/s between GPUs of one server.
    latency : float
        Seconds per link.

    Returns
    -------
    Fabric
        ``servers + 1`` nodes, one cable bundle of ``degree`` links per server.

    Examples
    --------
    >>> f = ideal(8, degree=4, port_bandwidth=1e9)
    >>> f.n_servers, f.n_switches, f.n_physical_links, float(f.capacity[0])
    (8, 1, 32, 4000000000.0)
    """
    n = check_int("servers", servers)
    d = check_int("degree", degree)
    b = check_float("port_bandwidth", port_bandwidth)
    g = check_int("gpus_per_server", gpus_per_server)
    kind = np.array(["server"] * n + ["switch"])
    layer = np.r_[np.zeros(n, np.int64), 1]
    ports = np.r_[np.full(n, d), n * d]
    return build_fabric(
        "ideal",
        {"servers": n, "degree": d, "port_bandwidth": b},
        kind,
        layer,
        ports,
        np.arange(n),
        np.full(n, n),
        b,
        "electrical",
        multiplicity=d,
        latency=latency,
        server_ports=d,
        port_bandwidth=b,
        gpus_per_server=g,
        intra_server_bandwidth=intra_server_bandwidth,
    )


def ideal_bound(
    servers: int,
    degree: int = 1,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
) -> Fabric:
    """The ideal switch as the bound that designs are compared with: :func:`ideal` whose
    server-to-server latency (two links, through the switch) is one link's, the least any fabric
    offers (a direct circuit), so no fabric is faster for want of latency.

    Examples
    --------
    >>> float(ideal_bound(4, 2, 1e9).latency[0]) == DEFAULT_LINK_LATENCY / 2
    True
    """
    return ideal(
        servers,
        degree,
        port_bandwidth,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        latency=DEFAULT_LINK_LATENCY / 2,
    )
