"""Expander baseline: a seeded random d-regular direct-connect graph (TopoOpt paper baseline)."""

from __future__ import annotations

import networkx as nx

from topoopt.fabrics.direct_connect import direct_connect
from topoopt.fabrics.fabric import DEFAULT_LINK_LATENCY, Fabric, check_int
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = ["expander"]


def expander(
    servers: int,
    degree: int,
    seed: int = 0,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    device: str = "patch-panel",
    reconfiguration_delay: float | None = None,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Random ``degree``-regular simple graph over ``servers`` servers, as optical circuits.

    Drawn by :func:`networkx.random_regular_graph` with ``seed`` (no parallel circuits, no
    self-loops); the same seed gives the same fabric. Needs ``degree < servers`` and
    ``servers * degree`` even.

    Examples
    --------
    >>> f = expander(16, 4, seed=1)
    >>> f.family, f.n_physical_links, sorted(set(f.multiplicity.tolist()))
    ('expander', 32, [1])
    """
    n = check_int("servers", servers, minimum=2)
    d = check_int("degree", degree)
    s = check_int("seed", seed, minimum=0)
    if d >= n or (n * d) % 2:
        raise InputError("degree", d, f"< servers ({n}) with servers * degree even")
    g = nx.random_regular_graph(d, n, seed=s)
    return direct_connect(
        n,
        d,
        list(g.edges()),
        port_bandwidth,
        device=device,
        reconfiguration_delay=reconfiguration_delay,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        latency=latency,
        family="expander",
        extra_params={"seed": s},
    )
