"""GraphML of a fabric (or of a design realised as a fabric), for networkx, Gephi, yEd, igraph.

One node per device, typed ``host`` (server), ``switch``, ``ocs`` or ``patch-panel``; one
undirected edge per cable bundle between two devices, with ``capacity`` (bytes/s per direction,
summed over the bundle), ``count`` (parallel cables or optical circuits), ``kind``
(``electrical``, ``optical``, ``intra-server``) and ``latency`` (s). An optical circuit is an
edge between the two hosts it joins (the OCS or patch panel it crosses is transparent to
routing); the OCS and patch-panel nodes are present, unlinked, so the device count is complete.

Examples
--------
>>> from topoopt.fabrics import fat_tree
>>> g = fabric_graph(fat_tree(4))
>>> g.number_of_nodes(), g.number_of_edges(), g.nodes[0]["type"], g.nodes[16]["type"]
(36, 48, 'host', 'switch')
"""

from __future__ import annotations

import numpy as np

__all__ = ["NODE_TYPE", "fabric_graph", "write_graphml"]

NODE_TYPE = {"server": "host", "switch": "switch", "ocs": "ocs", "patch-panel": "patch-panel"}
"""Fabric node kind -> GraphML node ``type``."""


def fabric_graph(fabric):
    """An undirected ``networkx.Graph``: one edge per cable bundle (see the module docstring)."""
    import networkx as nx

    g = nx.Graph(family=fabric.family, servers=int(fabric.n_servers))
    for i, kind in enumerate(fabric.node_kind.tolist()):
        g.add_node(
            i,
            type=NODE_TYPE[kind],
            layer=int(fabric.node_layer[i]),
            ports=int(fabric.node_ports[i]),
        )
    # one direction of each cable: the even link ids 2c (u -> v)
    fwd = np.flatnonzero(np.arange(fabric.n_links) % 2 == 0)
    for lid in fwd.tolist():
        u, v = int(fabric.src[lid]), int(fabric.dst[lid])
        g.add_edge(
            u,
            v,
            capacity=float(fabric.capacity[lid]),
            count=int(fabric.multiplicity[lid]),
            kind=str(fabric.link_kind[lid]),
            latency=float(fabric.latency[lid]),
        )
    return g


def write_graphml(fabric, path) -> None:
    """Write :func:`fabric_graph` of ``fabric`` as GraphML to ``path`` (a path or binary file)."""
    import networkx as nx

    nx.write_graphml(fabric_graph(fabric), path)
