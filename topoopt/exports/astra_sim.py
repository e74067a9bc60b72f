"""ASTRA-sim 2.x inputs for a workload on one of our fabrics.

ASTRA-sim's analytical network describes the cluster as dimensions, each a ``Ring``,
``FullyConnected`` or ``Switch`` of ``npus_count`` NPUs with a per-link ``bandwidth`` and
``latency`` (ns). NPU ``r`` has address ``(r mod g, r div g)`` for ``g`` GPUs per server, so the
first dimension is a server's GPUs and the next ones are the servers.

**Bandwidth is per NPU.** ASTRA-sim gives every NPU its own link(s) of ``bandwidth`` in each
dimension (a ``Switch``: one link to the switch; a ``Ring``: one link to each neighbour), and a
collective on a scale-out dimension runs on all ``g`` NPUs of a server at once, each on its own
link. A server's NICs (``degree x B``, divided by the oversubscription) are shared by its ``g``
GPUs, so each NPU's scale-out link is the server's bandwidth divided by ``g``: the GPU's share
of the NIC bandwidth, as in topoopt's flow model.

**Unit.** ``astra-network-analytical`` (``bw_GBps_to_Bpns`` in ``common/NetworkFunction.cpp``,
up to at least commit 599a047, 2024-11, the one ASTRA-sim builds against) converts the
"GB/s" it reads with ``2**30`` bytes per GB, so we write bytes/s / 2**30 (``gb="GiB"``, the
default); pass ``gb="GB"`` for a build that converts with 1e9.

We write the closest such description of our fabric:

======================================  =======================================================
our fabric                               ASTRA-sim dimensions
======================================  =======================================================
every fabric, inside a server           ``Switch`` of ``gpus_per_server`` (NVSwitch-like)
ideal, fat-tree, leaf-spine, rail       ``Switch`` of the servers, bandwidth = per-server
                                        bandwidth / ``g`` (divided by the oversubscription)
torus ``a x b x ...``                   one ``Ring`` per torus dimension, bandwidth = one
                                        port / ``g`` per direction (two on a side of 2)
direct, expander, topoopt, joint        ``Ring`` of the servers, bandwidth = ``degree / 2``
                                        ports / ``g`` per direction (a union of ``degree/2``
                                        rings, TopoOpt's construction)
hybrid                                  ``Switch`` for the electrical layer; the optical layer
                                        cannot be expressed
======================================  =======================================================

Everything that cannot be expressed (non-ring circuits, oversubscription inside a tier,
per-circuit routing) is listed in the returned notes, which the CLI writes to ``NOTE.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = [
    "AstraSimConfig",
    "astra_sim_config",
    "FAMILIES",
    "GB_UNITS",
    "LOCAL_MEM_BW_GBPS",
    "links_per_npu",
]

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

GB_UNITS = {"GiB": float(2**30), "GB": 1e9}
"""Bytes per "GB" of ASTRA-sim's bandwidth field, by the convention of the build that reads it."""

LOCAL_MEM_BW_GBPS = 1_000_000
"""``local-mem-bw`` written to ``system.json``, GB/s (1e9 bytes/s, ``Sys.cc``). ASTRA-sim charges
every reduction step of a collective ``3 x chunk / local-mem-bw`` (one write, two reads:
``PacketBundle::call``) before the next step; at the 1600 GB/s of its examples that adds about
a third to a large all-reduce over a 300 GB/s NVSwitch. topoopt's model has no such cost, so
we make it negligible; set the GPU's HBM bandwidth (e.g. 3350 for an H100) to model it."""


def links_per_npu(topology: str, npus: int) -> int:
    """Links one NPU has in an ASTRA-sim dimension: a ``Switch`` 1, a bidirectional ``Ring`` 2
    (1 when it has only 2 NPUs), a ``FullyConnected`` ``npus - 1``.

    >>> links_per_npu("Switch", 16), links_per_npu("Ring", 4), links_per_npu("Ring", 2)
    (1, 2, 1)
    """
    if topology == "Switch":
        return 1
    if topology == "Ring":
        return 2 if npus > 2 else 1
    return npus - 1


@dataclass(frozen=True)
class AstraSimConfig:
    """``network.yml`` and ``system.json`` texts plus notes on what was approximated."""

    network_yml: str
    system_json: str
    remote_memory_json: str
    dimensions: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    gb: str = "GiB"


def _dim(
    topology: str, npus: int, bandwidth_bytes_per_s: float, latency_s: float, gb: float
) -> dict:
    """One dimension: ``bandwidth`` is what network.yml says (bytes/s / ``gb``)."""
    return {
        "topology": topology,
        "npus_count": int(npus),
        "bandwidth_bytes_per_s": float(bandwidth_bytes_per_s),
        "bandwidth": bandwidth_bytes_per_s / gb,
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
    gb: str = "GiB",
) -> AstraSimConfig:
    """The closest ASTRA-sim description of a fabric (see the module docstring).

    Parameters are in bytes/s and seconds; ``gb`` names the bytes per "GB" of the ASTRA-sim
    build that reads the file (:data:`GB_UNITS`). Every dimension's ``bandwidth_bytes_per_s``
    is one NPU's own link.

    Examples
    --------
    >>> c = astra_sim_config("direct", servers=16, gpus_per_server=8, degree=4,
    ...                      link_bandwidth=12.5e9)
    >>> print(c.network_yml.splitlines()[0])
    topology: [ Switch, Ring ]
    >>> [d["bandwidth_bytes_per_s"] / 1e9 for d in c.dimensions]  # per NPU: 2 x 12.5 / 8
    [300.0, 3.125]
    >>> round(c.dimensions[1]["bandwidth"], 4)  # in GiB/s
    2.9104
    """
    from traffic.errors import InputError

    if family not in FAMILIES:
        raise InputError("--fabric", family, f"one of {', '.join(FAMILIES)}")
    if gb not in GB_UNITS:
        raise InputError("--gb", gb, " or ".join(GB_UNITS))
    g = max(int(gpus_per_server), 1)
    unit = GB_UNITS[gb]
    notes: list[str] = []
    dims = []

    def dim(topology, npus, server_bw, lat):
        dims.append(_dim(topology, npus, server_bw / g, lat, unit))

    if gpus_per_server > 1:
        dims.append(_dim("Switch", gpus_per_server, intra_bandwidth, 0.25e-6, unit))
    per_server = degree * link_bandwidth
    if family in ("ideal", "fat-tree", "leaf-spine", "rail"):
        bw = per_server / max(oversubscription, 1.0)
        dim("Switch", servers, bw, latency_s)
        if oversubscription > 1:
            notes.append(
                f"{family}: oversubscription {oversubscription:g}:1 is expressed as a Switch "
                f"of 1/{oversubscription:g} the per-server bandwidth "
                f"({bw / g / 1e9:g} GB/s per NPU): "
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
            # a side of 2: both ports of the dimension reach the one neighbour (one link)
            dim("Ring", a, link_bandwidth * (2 if a == 2 else 1), latency_s)
    elif family in ("direct", "expander", "topoopt", "joint"):
        rings = max(degree // 2, 1)
        dim("Ring", servers, rings * link_bandwidth, latency_s)
        notes.append(
            f"{family}: the optical circuits are expressed as {rings} parallel ring(s) of the "
            f"servers ({rings} x {link_bandwidth / 1e9:g} GB/s per direction per server, / {g} "
            "per NPU). TopoOpt's "
            "all-reduce rings are exactly that; other circuits (MP matchings, a random "
            "expander, a joint design's strides and routing) are not: ASTRA-sim has no "
            "arbitrary-graph dimension, so all-to-all and pipeline traffic is approximated"
        )
        if degree % 2:
            notes.append(f"{family}: an odd degree ({degree}); one port per server is unused")
    else:  # hybrid
        dim("Switch", servers, per_server, latency_s)
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
            row("bandwidth", lambda d: f"{d['bandwidth']:.12g}")
            + f"  # per NPU link, 'GB/s' read as {gb}/s ({'2**30' if gb == 'GiB' else '1e9'} B)",
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
        "local-mem-bw": LOCAL_MEM_BW_GBPS,
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
        gb=gb,
    )
