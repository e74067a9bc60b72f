"""Rail-aligned circuits: NIC ``i`` of a server is wired only to NIC ``i`` of other servers.

A rail-only network (:mod:`topoopt.fabrics.rail`) gives every rail (NIC index) its own switch;
this family gives every rail its own circuit graph instead, through its own optical device (a
patch panel or an OCS: the ``per-rail`` layout of :class:`~topoopt.fabrics.ocs_layout.OcsLayout`,
one device per NIC index). Each NIC of ``B`` bytes/s is broken out into ``ports_per_nic`` lanes of
``B / ports_per_nic`` (one 400 G port, 2 x 200 G or 4 x 100 G), each lane one circuit to the same
NIC index of another server, so each rail is a circuit multigraph of degree ``ports_per_nic``.

**The flow model's view.** Node ``n + k n + u`` is NIC ``k`` of server ``u`` (kind ``switch``,
layer 1: it forwards between its lanes, as a host forwards on a direct-connect fabric), joined to
its server by a host link of ``B`` (kind ``intra-server``, latency 0) and to its circuit peers by
optical links of ``count x B / ports_per_nic``. This is the shape of a rail-only fabric whose rail
switch is split into one small "switch" per server, so the rail routing of
:class:`topoopt.flowsim.network.Network` applies unchanged: GPU ``i``'s traffic enters rail ``i``
at its own NIC, stays on rail ``i`` (rails share no link), and a flow to GPU ``j != i`` ends with
the destination GPU ``i``'s NVLink egress (:func:`topoopt.fabrics.rail.link_rails` names each host
link's rail). All rails carry the same circuits (:func:`rail_circuits`): then a path that leaves a
rail at an intermediate server and comes back is never a shortest one (it costs two more host
hops than staying on the rail, whose graph is the same), so shortest-path routing never changes
rails inside the network, which the rail routing relies on.

**The bill of materials** (:func:`rail_circuits_bill_of_materials`, priced by
:func:`topoopt.fabrics.cost.cost`): per server ``rails`` NIC ports of ``B`` and ``rails``
transceivers of ``B`` (a breakout uses the NIC's own DR4-class module: the lanes are split in the
fibre, MPO to LC), per NIC ``ports_per_nic`` fibres and ``ports_per_nic`` device ports (every lane
is its own circuit: breakout multiplies the patch-panel or OCS ports, not the optics), and one
device per rail. The NIC nodes are a modelling device: no switch is priced.
"""

from __future__ import annotations

import numpy as np

from topoopt.fabrics.catalogue import speed_label
from topoopt.fabrics.circuit_fabric import DEVICES, reconfiguration_delay_for
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from traffic.errors import InputError

__all__ = [
    "FAMILY",
    "BREAKOUTS",
    "rail_circuits",
    "nic_node",
    "rail_circuit_rows",
    "rail_circuits_bill_of_materials",
]

FAMILY = "rail-circuits"
"""The family name of the fabrics :func:`rail_circuits` builds."""

BREAKOUTS = (2, 4)
"""Lanes a NIC may be broken out into (``ports_per_nic``): 2 x 200 G or 4 x 100 G of a 400 G
NIC. One lane (the NIC whole) makes every rail a matching, which joins a server to one peer per
rail: a ring or a pipeline needs degree 2, so one lane is refused."""


def nic_node(fabric_or_servers, server, rail) -> np.ndarray:
    """Node id of NIC ``rail`` of ``server`` (``n + rail n + server``).

    >>> nic_node(4, [0, 3], [1, 1]).tolist()
    [8, 11]
    """
    n = fabric_or_servers.n_servers if isinstance(fabric_or_servers, Fabric) else fabric_or_servers
    return n + np.asarray(rail, np.int64) * n + np.asarray(server, np.int64)


def rail_circuit_rows(fabric: Fabric) -> np.ndarray:
    """``int64 (E, 4)``: ``(rail, u, v, count)`` of every circuit bundle of a rail-circuits
    fabric, ``u < v`` servers, sorted.

    >>> f = rail_circuits([(0, 1), (1, 2), (2, 0)], 3, rails=2, ports_per_nic=2)
    >>> rail_circuit_rows(f).tolist()[:3]
    [[0, 0, 1, 1], [0, 0, 2, 1], [0, 1, 2, 1]]
    """
    if fabric.family != FAMILY:
        raise InputError("fabric.family", fabric.family, FAMILY)
    n = fabric.n_servers
    first = np.arange(0, fabric.n_links, 2)
    opt = first[fabric.link_kind[first] == "optical"]
    a, b = fabric.src[opt] - n, fabric.dst[opt] - n
    rail = a // n
    if np.any(rail != b // n):
        raise InputError("fabric", "a circuit between two rails", "circuits within one rail")
    u, v = np.minimum(a % n, b % n), np.maximum(a % n, b % n)
    rows = np.column_stack([rail, u, v, fabric.multiplicity[opt]]).astype(np.int64)
    return rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]


def rail_circuits(
    circuits,
    servers: int,
    *,
    rails: int,
    ports_per_nic: int,
    nic_bandwidth: float = 50e9,
    device: str = "patch-panel",
    reconfiguration_delay: float | None = None,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
    extra_params: dict | None = None,
) -> Fabric:
    """The rail-circuits fabric: ``circuits`` (one rail's, on ``servers`` servers) on every rail.

    Parameters
    ----------
    circuits : Circuits or array_like
        ``(u, v[, count])`` circuits of one rail; every server at most ``ports_per_nic``.
    servers : int
    rails : int
        NICs per server (one per GPU: the flow model's rail routing needs ``rails`` =
        ``gpus_per_server``).
    ports_per_nic : int
        Lanes per NIC, one of :data:`BREAKOUTS`.
    nic_bandwidth : float
        Bytes/s of one NIC each way (400 G = 50e9); a lane carries ``nic_bandwidth /
        ports_per_nic``.
    device : {"patch-panel", "ocs"}
        One device per rail, of ``servers x ports_per_nic`` ports.

    Examples
    --------
    >>> f = rail_circuits([(0, 1), (1, 2), (2, 3), (3, 0)], 4, rails=2, ports_per_nic=2,
    ...                   nic_bandwidth=50e9)
    >>> f.n_servers, f.n_switches, int((f.link_kind == "optical").sum()) // 2
    (4, 8, 8)
    >>> sorted(set((f.capacity[f.link_kind == "optical"] / 1e9).tolist()))
    [25.0]
    """
    n = check_int("servers", servers, minimum=2)
    g = check_int("rails", rails)
    d = check_int("ports_per_nic", ports_per_nic)
    if d not in BREAKOUTS:
        raise InputError(
            "ports_per_nic", d,
            f"one of {', '.join(map(str, BREAKOUTS))} (one lane makes each rail a matching)",
        )  # fmt: skip
    b = check_float("nic_bandwidth", nic_bandwidth)
    if device not in DEVICES:
        raise InputError("device", device, f"one of {', '.join(DEVICES)}")
    delay = reconfiguration_delay_for(device, reconfiguration_delay)
    circ = circuits if isinstance(circuits, Circuits) else Circuits(circuits, n, min_count=1)
    if circ.n != n:
        raise InputError("circuits.servers", circ.n, f"{n} (the servers)")
    deg = circ.degrees()
    if np.any(deg > d):
        i = int(np.argmax(deg))
        raise InputError(f"circuits.server[{i}]", int(deg[i]), f"at most {d} (ports_per_nic)")
    rows = circ.rows
    lane = b / d
    k = np.repeat(np.arange(g), rows.shape[0])
    cu = np.tile(rows[:, 0], g) + n + k * n
    cv = np.tile(rows[:, 1], g) + n + k * n
    srv = np.tile(np.arange(n), g)
    hk = np.repeat(np.arange(g), n)
    m_c, m_h = cu.size, srv.size
    params = {
        "servers": n, "rails": g, "ports_per_nic": d, "nic_bandwidth": b, "port_bandwidth": lane,
        "device": device, "circuits": int(rows[:, 2].sum()) * g,
        "circuits_per_rail": int(rows[:, 2].sum()),
    }  # fmt: skip
    params.update(extra_params or {})
    kind = np.array(["server"] * n + ["switch"] * (n * g) + [device] * g)
    return build_fabric(
        FAMILY,
        params,
        kind,
        np.r_[np.zeros(n), np.ones(n * g), np.full(g, 2)],
        np.r_[np.full(n, g), np.full(n * g, 1 + d), np.full(g, n * d)],
        np.r_[srv, cu],
        np.r_[srv + n + hk * n, cv],
        np.r_[np.full(m_h, b), np.full(m_c, lane)],
        np.array(["intra-server"] * m_h + ["optical"] * m_c),
        multiplicity=np.r_[np.ones(m_h, np.int64), np.tile(rows[:, 2], g)],
        latency=np.r_[np.zeros(m_h), np.full(m_c, latency)],
        server_ports=g,
        port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        reconfiguration_delay=delay,
    )


def rail_circuits_bill_of_materials(fabric: Fabric) -> dict[str, int]:
    """Component -> count of a rail-circuits fabric (module docstring): ``nic_port_<B>`` and
    ``transceiver_<B>`` per NIC, ``fibre`` and ``patch_panel_port`` (``ocs_port``) per lane,
    ``patch_panel`` (``ocs``) per rail.

    >>> f = rail_circuits([(0, 1, 2)], 2, rails=8, ports_per_nic=2, nic_bandwidth=50e9)
    >>> rail_circuits_bill_of_materials(f)
    {'nic_port_400G': 16, 'transceiver_400G': 16, 'fibre': 32, 'patch_panel': 8, 'patch_panel_port': 32}
    """  # noqa: E501
    p = fabric.params
    n, g, d = int(p["servers"]), int(p["rails"]), int(p["ports_per_nic"])
    speed = speed_label(round(float(p["nic_bandwidth"]) * 8.0 / 1e9, 6))
    key = "patch_panel" if p["device"] == "patch-panel" else "ocs"
    return {
        f"nic_port_{speed}": n * g,
        f"transceiver_{speed}": n * g,
        "fibre": n * g * d,
        key: g,
        f"{key}_port": n * g * d,
    }
