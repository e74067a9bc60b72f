"""Expander baseline: a seeded random d-regular direct-connect graph (TopoOpt paper baseline)."""

from __future__ import annotations

import numpy as np

from topoopt.fabrics.direct_connect import direct_connect
from topoopt.fabrics.fabric import DEFAULT_LINK_LATENCY, Fabric, check_int
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from topoopt.fabrics.random_regular import is_connected, random_regular_edges
from traffic.errors import InputError

__all__ = [
    "expander",
    "expander_edges",
    "DENSE_MIN_SERVERS",
    "NETWORKX_MAX_PORTS",
    "NETWORKX_REDRAWS",
]

NETWORKX_MAX_PORTS = 2**17
"""Up to this many ports (``servers * degree`` = 131,072), the graph is networkx's draw (the
expanders of every result published before 2026-12-06 stay the same); above it, the vectorised
pairing of :mod:`topoopt.fabrics.random_regular` (networkx's pure-Python draw was most of the
112 s CPU of ``fabric expander --servers 1000000 --degree 8``)."""

DENSE_MIN_SERVERS = 32
"""From this many servers, a degree above three quarters of the servers is drawn as the
complement of networkx's ``(servers - 1 - degree)``-regular draw: networkx's own draw of a dense
graph slows sharply (128 servers: 0.23 s at 96 ports, 5.6 s at 104, 25 s at 112)."""

NETWORKX_REDRAWS = 100
"""networkx draws, with seeds ``seed, seed + 1, ...``, before a degree >= 3 request without a
connected draw is refused."""


def expander_edges(servers: int, degree: int, seed: int = 0) -> np.ndarray:
    """The expander's circuits as ``(m, 2)`` server pairs (the rule of :func:`expander`)."""
    import networkx as nx

    n, d, s = servers, degree, seed
    if n * d > NETWORKX_MAX_PORTS:
        return random_regular_edges(n, d, s)
    dense = n >= DENSE_MIN_SERVERS and 4 * d > 3 * n
    for k in range(NETWORKX_REDRAWS):
        if dense:  # the complement of a uniform (n - 1 - d)-regular draw is a uniform d-regular one
            g = nx.complement(nx.random_regular_graph(n - 1 - d, n, seed=s + k))
        else:
            g = nx.random_regular_graph(d, n, seed=s + k)
        e = np.asarray(list(g.edges()), dtype=np.int64).reshape(-1, 2)
        if d < 3 or is_connected(n, e[:, 0], e[:, 1]):
            return e
    raise InputError(
        "degree",
        d,
        f"a degree with a connected {d}-regular graph on {n} servers (seeds "
        f"{s}..{s + NETWORKX_REDRAWS - 1} all disconnected)",
    )


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

    No parallel circuits, no self-loops; the same seed gives the same fabric. Needs
    ``degree < servers`` and ``servers * degree`` even. Two generators, by size:

    - up to :data:`NETWORKX_MAX_PORTS` ports (``servers * degree <= 131,072``):
      :func:`networkx.random_regular_graph` with ``seed`` (the expanders of earlier results stay
      as they were); from :data:`DENSE_MIN_SERVERS` servers, a degree above ``3/4`` of them is
      the complement of networkx's draw of degree ``servers - 1 - degree``. At degree >= 3 a
      disconnected draw (rare) is replaced by the draw of ``seed + 1``, ``seed + 2``, ...;
      degrees 1 and 2 keep networkx's draw, which may be
      disjoint cycles (its flows are then unreachable and ``compare`` says so in the row);
    - above: the vectorised pairing model with repair of
      :func:`topoopt.fabrics.random_regular.random_regular_edges` (a few seconds at 1,000,000
      servers x 8), always connected: degree 2 is a random Hamiltonian cycle, degree 1 refused.

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
    return direct_connect(
        n,
        d,
        expander_edges(n, d, s),
        port_bandwidth,
        device=device,
        reconfiguration_delay=reconfiguration_delay,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        latency=latency,
        family="expander",
        extra_params={"seed": s},
    )
