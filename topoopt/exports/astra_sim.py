"""ASTRA-sim 2.x inputs for a workload on one of our fabrics.

ASTRA-sim's analytical network describes the cluster as dimensions, each a ``Ring``,
``FullyConnected`` or ``Switch`` of ``npus_count`` NPUs with a per-link ``bandwidth`` (GB/s,
1 GB = 1e9 bytes) and ``latency`` (ns). We write the closest such description of our fabric:

======================================  =======================================================
our fabric                               ASTRA-sim dimensions
======================================  =======================================================
every fabric, inside a server           ``Switch`` of ``gpus_per_server`` (NVSwitch-like)
ideal, fat-tree, leaf-spine, rail       ``Switch`` of the servers, bandwidth = per-server
                                        bandwidth (divided by the oversubscription, if any)
torus ``a x b x ...``                   one ``Ring`` per torus dimension, bandwidth = one port
direct, expander, topoopt, joint        ``Ring`` of the servers with ``degree / 2`` ports per
                                        direction (a union of ``degree/2`` rings, TopoOpt's
                                        construction)
hybrid                                  ``Switch`` for the electrical layer; the optical layer
                                        cannot be expressed
======================================  =======================================================

Everything that cannot be expressed (non-ring circuits, oversubscription inside a tier,
per-circuit routing) is listed in the returned notes, which the CLI writes to ``NOTE.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["AstraSimConfig", "astra_sim_config", "FAMILIES"]

FAMILIES = (
    "ideal",
    "fat-tree",
    "leaf-spine",
    "rail",
    "torus",
    "direct",
    "expander",
    "topoopt",
    "joint",
    "hybrid",
)
"""Fabric families :func:`astra_sim_config` maps."""


@dataclass(frozen=True)
class AstraSimConfig:
    """``network.yml`` and ``system.json`` texts plus notes on what was approximated."""

    network_yml: str
    system_json: str
    remote_memory_json: str
    dimensions: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def _dim(topology: str, npus: int, bandwidth_bytes_per_s: float, latency_s: float) -> dict:
    return {
        "topology": topology,
        "npus_count": int(npus),
        "bandwidth_GBps": bandwidth_bytes_per_s / 1e9,
        "latency_ns": latency_s * 1e9,
    }


def astra_sim_config(
    family: str,
    *,
    servers: int,
    gpus_per_server: int,
    degree: int,
    link_bandwidth: float,
    intra_bandwidth: float = 300e9,
    latency_s: float = 1e-6,
    oversubscription: float = 1.0,
    torus_dims: tuple[int, ...] | None = None,
) -> AstraSimConfig:
    """The closest ASTRA-sim description of a fabric (see the module docstring).

    Parameters are in bytes/s and seconds.

    Examples
    --------
    >>> c = astra_sim_config("direct", servers=16, gpus_per_server=8, degree=4,
    ...                      link_bandwidth=12.5e9)
    >>> print(c.network_yml.splitlines()[0])
    topology: [ Switch, Ring ]
    >>> [d["bandwidth_GBps"] for d in c.dimensions]
    [300.0, 25.0]
    """
    from traffic.errors import InputError

    if family not in FAMILIES:
        raise InputError("--fabric", family, f"one of {', '.join(FAMILIES)}")
    notes: list[str] = []
    dims = []
    if gpus_per_server > 1:
        dims.append(_dim("Switch", gpus_per_server, intra_bandwidth, 0.25e-6))
    per_server = degree * link_bandwidth
    if family in ("ideal", "fat-tree", "leaf-spine", "rail"):
        bw = per_server / max(oversubscription, 1.0)
        dims.append(_dim("Switch", servers, bw, latency_s))
        if oversubscription > 1:
            notes.append(
                f"{family}: oversubscription {oversubscription:g}:1 is expressed as a Switch "
                f"of 1/{oversubscription:g} the per-server bandwidth ({bw / 1e9:g} GB/s): "
                "ASTRA-sim's Switch has no tiers, so contention between racks is averaged out"
            )
        if family == "rail":
            notes.append("rail: rails are one Switch dimension; rail-only paths are not modelled")
    elif family == "torus":
        shape = tuple(torus_dims or ())
        if not shape:
            raise InputError("--dims", None, "the torus shape, e.g. 4x4")
        prod = 1
        for a in shape:
            prod *= a
        if prod != servers:
            raise InputError("--dims", "x".join(map(str, shape)), f"a shape of {servers} servers")
        for a in shape:
            dims.append(_dim("Ring", a, link_bandwidth, latency_s))
    elif family in ("direct", "expander", "topoopt", "joint"):
        rings = max(degree // 2, 1)
        dims.append(_dim("Ring", servers, rings * link_bandwidth, latency_s))
        notes.append(
            f"{family}: the optical circuits are expressed as {rings} parallel ring(s) of the "
            f"servers ({rings} x {link_bandwidth / 1e9:g} GB/s per direction). TopoOpt's "
            "all-reduce rings are exactly that; other circuits (MP matchings, a random "
            "expander, a joint design's strides and routing) are not: ASTRA-sim has no "
            "arbitrary-graph dimension, so all-to-all and pipeline traffic is approximated"
        )
        if degree % 2:
            notes.append(f"{family}: an odd degree ({degree}); one port per server is unused")
    else:  # hybrid
        dims.append(_dim("Switch", servers, per_server, latency_s))
        notes.append(
            "hybrid: only the electrical layer is written (a Switch of the servers); the "
            "optical circuits on top of it cannot be expressed as an ASTRA-sim dimension"
        )
    if len(dims) == 1 and gpus_per_server == 1:
        notes.append("one GPU per server: no intra-server dimension")

    def row(key, fmt):
        return f"{key}: [ " + ", ".join(fmt(d) for d in dims) + " ]"

    network = "\n".join(
        [
            row("topology", lambda d: d["topology"]),
            row("npus_count", lambda d: str(d["npus_count"])),
            row("bandwidth", lambda d: f"{d['bandwidth_GBps']:.6g}") + "  # GB/s",
            row("latency", lambda d: f"{d['latency_ns']:.6g}") + "  # ns",
        ]
    )
    n = len(dims)
    system = {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 10,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring"] * n,
        "all-gather-implementation": ["ring"] * n,
        "reduce-scatter-implementation": ["ring"] * n,
        "all-to-all-implementation": ["direct"] * n,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1600,
        "boost-mode": 0,
        "roofline-enabled": 0,
    }
    return AstraSimConfig(
        network_yml=network + "\n",
        system_json=json.dumps(system, indent=2, allow_nan=False) + "\n",
        remote_memory_json=json.dumps(
            {"memory-type": "NO_MEMORY_EXPANSION"}, indent=2, allow_nan=False
        )
        + "\n",
        dimensions=dims,
        notes=notes,
    )
