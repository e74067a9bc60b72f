"""Hybrid fabrics: an electrical packet fabric plus an optical circuit layer over the servers.

Each server keeps its electrical NIC port(s) and gains ``optical_degree`` optical ports wired to
``optical_degree`` optical devices; circuits join servers directly. Traffic may use either layer:
routing over all links lets shortest paths pick a circuit when one exists (see
:func:`topoopt.fabrics.routing.routes` and its ``kinds`` argument to restrict a layer). The
per-job OCS-partitioned torus is :func:`topoopt.fabrics.torus.tpu_v4_torus`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from topoopt.fabrics.direct_connect import (
    circulant_circuits,
    geometric_strides,
    normalise_circuits,
    reconfiguration_delay_for,
)
from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.fat_tree import fat_tree, leaf_spine
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = ["hybrid", "add_optical_layer"]


def add_optical_layer(
    electrical: Fabric,
    optical_degree: int,
    circuits: Any = None,
    optical_port_bandwidth: float | None = None,
    *,
    device: str = "ocs",
    reconfiguration_delay: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Add ``optical_degree`` optical ports per server and the given circuits to ``electrical``.

    Parameters
    ----------
    electrical : Fabric
        A fabric without an optical layer (e.g. :func:`leaf_spine` or :func:`fat_tree`).
    optical_degree : int
        Optical ports per server.
    circuits : optional
        Circuits over the servers (see :func:`normalise_circuits`); default: the circulant graph
        of ``optical_degree // 2`` geometric strides.
    optical_port_bandwidth : float, optional
        Bytes/s of one optical port (default: the servers' electrical port bandwidth).

    Returns
    -------
    Fabric
        Family ``"hybrid"``; the electrical nodes keep their ids, ``optical_degree`` devices of
        ``n`` ports are appended.
    """
    if np.any(electrical.server_optical_ports) or np.any(electrical.link_kind == "optical"):
        raise InputError("electrical", electrical.family, "a fabric without an optical layer")
    n = electrical.n_servers
    d = check_int("optical_degree", optical_degree)
    b_opt = (
        float(electrical.port_bandwidth[0])
        if optical_port_bandwidth is None
        else check_float("optical_port_bandwidth", optical_port_bandwidth)
    )
    delay = reconfiguration_delay_for(device, reconfiguration_delay)
    strides = None
    if circuits is None:
        if n < 2 or d < 2:
            raise InputError("circuits", None, "given explicitly when servers < 2 or degree < 2")
        strides = geometric_strides(n, d // 2)
        circuits = circulant_circuits(n, strides)
    circ = normalise_circuits(circuits, n, d)
    e = np.arange(0, electrical.n_links, 2)
    m = electrical.multiplicity[e]
    kind = np.r_[electrical.node_kind, np.array([device] * d)]
    layer = np.r_[electrical.node_layer, np.full(d, electrical.node_layer.max() + 1)]
    ports = electrical.node_ports.copy()
    ports[:n] += d
    params = {
        "electrical": electrical.family,
        **{f"electrical_{k}": v for k, v in electrical.params.items()},
        "optical_degree": d,
        "optical_port_bandwidth": b_opt,
        "device": device,
        "circuits": int(circ[:, 2].sum()),
    }
    if strides is not None:
        params["strides"] = strides
    return build_fabric(
        "hybrid",
        params,
        kind,
        layer,
        np.r_[ports, np.full(d, n)],
        np.r_[electrical.src[e], circ[:, 0]],
        np.r_[electrical.dst[e], circ[:, 1]],
        np.r_[electrical.capacity[e] / m, np.full(circ.shape[0], b_opt)],
        np.r_[electrical.link_kind[e], np.array(["optical"] * circ.shape[0])],
        multiplicity=np.r_[m, circ[:, 2]],
        medium=np.r_[electrical.medium[e], np.array(["fibre"] * circ.shape[0])],
        latency=np.r_[electrical.latency[e], np.full(circ.shape[0], latency)],
        server_ports=electrical.server_ports + d,
        server_optical_ports=d,
        port_bandwidth=electrical.port_bandwidth,
        optical_port_bandwidth=b_opt,
        gpus_per_server=electrical.gpus_per_server,
        intra_server_bandwidth=electrical.intra_server_bandwidth,
        reconfiguration_delay=delay,
    )


def hybrid(
    servers: int,
    optical_degree: int,
    *,
    electrical: str = "leaf-spine",
    oversubscription: float = 1.0,
    k: int | None = None,
    radix: int = 64,
    ports_per_server: int = 1,
    circuits: Any = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    optical_port_bandwidth: float | None = None,
    device: str = "ocs",
    reconfiguration_delay: float | None = None,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """An electrical leaf-spine or fat-tree (possibly oversubscribed) plus an optical layer.

    Parameters
    ----------
    servers : int
        Number of servers.
    optical_degree : int
        Optical ports per server.
    electrical : {"leaf-spine", "fat-tree"}
        Electrical family; ``fat-tree`` needs ``k``.
    oversubscription : float
        Oversubscription of the electrical fabric at the leaf/edge layer.
    ports_per_server : int
        Electrical NIC ports (NICs) per server, each of ``port_bandwidth`` (leaf-spine only).

    Examples
    --------
    >>> f = hybrid(16, 2, radix=8, oversubscription=3.0)
    >>> f.family, int(f.server_ports[0]), int((f.link_kind == "optical").sum() // 2)
    ('hybrid', 3, 16)
    """
    if electrical == "leaf-spine":
        base = leaf_spine(
            servers,
            oversubscription,
            radix=radix,
            ports_per_server=ports_per_server,
            port_bandwidth=port_bandwidth,
            gpus_per_server=gpus_per_server,
            intra_server_bandwidth=intra_server_bandwidth,
            latency=latency,
        )
    elif electrical == "fat-tree":
        if k is None:
            raise InputError("k", None, "the fat-tree radix (an even integer) for a fat-tree")
        base = fat_tree(
            k,
            servers,
            oversubscription=oversubscription,
            port_bandwidth=port_bandwidth,
            gpus_per_server=gpus_per_server,
            intra_server_bandwidth=intra_server_bandwidth,
            latency=latency,
        )
    else:
        raise InputError("electrical", electrical, "leaf-spine or fat-tree")
    return add_optical_layer(
        base,
        optical_degree,
        circuits,
        optical_port_bandwidth,
        device=device,
        reconfiguration_delay=reconfiguration_delay,
        latency=latency,
    )
