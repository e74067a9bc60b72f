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
    "compute_durations",
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


def compute_durations(w, gpu=None) -> dict | None:
    """Each rank's compute seconds as topoopt's iteration model prices them, for the trace.

    ``forward``: ``F_s / (peak x efficiency)`` per micro-batch for a rank of stage ``s``
    (:func:`topoopt.flowsim.roofline.forward_time` of the plan's
    ``forward_flops_per_microbatch_per_gpu``); ``backward``: twice that (three times with full
    recomputation); ``optimizer``: :func:`topoopt.flowsim.roofline.optimizer_time` of the stage's
    parameters per GPU. A rank's stage is that of the sends it sources and the collectives it
    joins (as in :mod:`topoopt.flowsim.iteration`). ``None`` for a workload that is not built
    from a plan (a task graph or a trace: their compute is not priced by a roofline). ``gpu``
    (a :class:`~topoopt.flowsim.roofline.RooflineParams`; default: the plan's GPU at its
    efficiency, :func:`~topoopt.flowsim.roofline.workload_gpu`, as the iteration model).

    >>> from traffic import load_workload
    >>> c = compute_durations(load_workload("vgg16-dp"))
    >>> c["micro_batches"], bool(c["backward"][0] == 2 * c["forward"][0])
    (1, True)
    """
    import numpy as np

    from topoopt.flowsim.roofline import forward_time, optimizer_time, workload_gpu

    gpu = gpu or workload_gpu(w)
    info, conv = dict(w.info), dict(w.conventions)
    flops = info.get("forward_flops_per_microbatch_per_gpu")
    if not flops or w.taskgraph is not None:
        return None
    flops = np.atleast_1d(np.asarray(flops, np.float64))
    p = flops.shape[0]
    stage = np.full(w.gpus, -1, np.int64)
    for d in w.demands:
        if d.stage is None or d.cls == "embedding":
            continue
        r = d.groups[:, 0] if d.op == "send" else d.groups.ravel()
        stage[r] = d.stage
    stage[stage < 0] = 0
    stage = np.minimum(stage, p - 1)
    mem = info.get("forward_memory_bytes_per_microbatch_per_gpu") or None
    t_f = np.asarray(forward_time(flops, mem, gpu)).reshape(-1)
    mult = 3.0 if conv.get("recompute") == "full" else 2.0
    params = info.get("parameters_per_gpu_per_stage")
    if not params:  # as the iteration model: the stage's gradient bytes / bytes per gradient
        gb = float(conv.get("grad_reduce_bytes", 2) or 2)
        params = [0.0] * p
        for d in w.demands:
            if d.cls == "dp" and d.phase == "backward" and d.op != "all-to-all":
                params[min(d.stage or 0, p - 1)] += d.size * d.count / gb
    t_opt = np.asarray(optimizer_time(np.asarray(params, np.float64), gpu)).reshape(-1)
    return {
        "micro_batches": int(info.get("micro_batches", 1)),
        "forward": t_f[stage],
        "backward": mult * t_f[stage],
        "optimizer": t_opt[np.minimum(stage, t_opt.shape[0] - 1)],
        "stage": stage,
        "gpu": gpu.name,
        "efficiency": float(gpu.efficiency),
    }


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
    leaf_servers: int | None = None,
) -> AstraSimConfig:
    """The closest ASTRA-sim description of a fabric (see the module docstring).

    Parameters are in bytes/s and seconds; ``gb`` names the bytes per "GB" of the ASTRA-sim
    build that reads the file (:data:`GB_UNITS`). Every dimension's ``bandwidth_bytes_per_s``
    is one NPU's own link. ``leaf_servers`` (an oversubscribed two-tier fat-tree or leaf-spine
    whose leaves hold that many servers each, dividing ``servers``): a ``Switch`` of a leaf's
    servers at the full per-server bandwidth, then a ``Switch`` of the leaves at 1 /
    ``oversubscription`` of it (the leaf's uplinks shared by its NPUs), instead of one
    ``Switch`` at the oversubscribed bandwidth for every pair of servers.

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
    tiered = (
        family in ("fat-tree", "leaf-spine")
        and oversubscription > 1
        and leaf_servers is not None
        and 1 < leaf_servers < servers
        and servers % leaf_servers == 0
    )
    if tiered:
        leaves = servers // leaf_servers
        dim("Switch", leaf_servers, per_server, latency_s)
        dim("Switch", leaves, per_server / oversubscription, latency_s)
        notes.append(
            f"{family}: {leaves} leaves of {leaf_servers} servers: a Switch of a leaf's servers "
            f"at the full per-server bandwidth, then a Switch of the leaves at 1/"
            f"{oversubscription:g} of it ({per_server / oversubscription / g / 1e9:g} GB/s per "
            "NPU: the leaf's uplinks shared by its NPUs); the spine layer's own switches are "
            "not modelled"
        )
    elif family in ("ideal", "fat-tree", "leaf-spine", "rail"):
        bw = per_server / max(oversubscription, 1.0)
        dim("Switch", servers, bw, latency_s)
        if oversubscription > 1:
            notes.append(
                f"{family}: oversubscription {oversubscription:g}:1 is expressed as a Switch "
                f"of 1/{oversubscription:g} the per-server bandwidth "
                f"({bw / g / 1e9:g} GB/s per NPU): "
                "ASTRA-sim's Switch has no tiers, so contention between racks is averaged out: "
                "every step of a ring collective pays the oversubscribed bandwidth, even "
                "between servers of one rack, where topoopt's ring stays below the leaf "
                "(3.1x topoopt's time for a 768-GPU data-parallel all-reduce at 4:1)"
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
