"""The fabric of a circuit set: ``n`` servers x ``d`` ports on optical devices, hosts forward.

:func:`circuit_fabric` is the builder behind :meth:`topoopt.fabrics.circuits.Circuits.to_fabric`
and :func:`topoopt.fabrics.direct_connect.direct_connect`. It takes a
:class:`~topoopt.fabrics.circuits.Circuits` value as it is (canonical rows, trusted) and does
not import that module, so the value can reach its fabric without an import circle: the
circuit type depends on this builder, the direct-connect family on both.

Port ``i`` of every server is patched into optical device ``i`` (a patch panel, reconfigured in
minutes, or an optical circuit switch, ~10 ms); a bundle of ``count`` parallel circuits is one
cable of capacity ``count x port_bandwidth`` bytes/s each way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from topoopt.fabrics.ocs_layout import OcsLayout
from topoopt.fabrics.torus import DEFAULT_OCS_DELAY
from traffic.errors import InputError

__all__ = ["DEVICES", "DEFAULT_PATCH_PANEL_DELAY", "reconfiguration_delay_for", "circuit_fabric"]

DEVICES = ("patch-panel", "ocs")
"""Optical devices realising the circuits."""

DEFAULT_PATCH_PANEL_DELAY = 300.0
"""Reconfiguration time of a (robotic) patch panel, seconds: "minutes", taken as 5 min."""


def reconfiguration_delay_for(device: str, delay: float | None = None) -> float:
    """Reconfiguration delay of ``device`` in seconds (``delay`` overrides the default).

    >>> reconfiguration_delay_for("ocs"), reconfiguration_delay_for("patch-panel")
    (0.01, 300.0)
    """
    if device not in DEVICES:
        raise InputError("device", device, f"one of {', '.join(DEVICES)}")
    if delay is not None:
        return check_float("reconfiguration_delay", delay, 0.0, strict=False)
    return DEFAULT_OCS_DELAY if device == "ocs" else DEFAULT_PATCH_PANEL_DELAY


def circuit_fabric(
    circuits,
    degree: int | None = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    device: str = "patch-panel",
    reconfiguration_delay: float | None = None,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
    family: str = "direct-connect",
    strides: list[int] | None = None,
    extra_params: dict | None = None,
    ocs_radix: int | None = None,
    ocs_layout: str = "per-rail",
) -> Fabric:
    """The direct-connect fabric of ``circuits`` (a :class:`~topoopt.fabrics.circuits.Circuits`).

    Parameters
    ----------
    circuits : Circuits
        The circuits on ``circuits.n`` servers (trusted: canonical rows).
    degree : int, optional
        Optical ports per server ``d`` (default: the most any server uses, at least 1).
    port_bandwidth : float
        Bytes/s of one port (one circuit), each direction.
    device : {"patch-panel", "ocs"}
        Device realising the circuits: ``d`` devices of ``n`` ports each.
    reconfiguration_delay : float, optional
        Seconds to rewire (default 10 ms for an OCS, 300 s for a patch panel).
    strides : list of int, optional
        Circulant strides the circuits were drawn from (recorded in ``params``).
    extra_params : dict, optional
        More ``params`` entries.
    ocs_radix : int, optional
        Ports of one OCS (``device="ocs"``; default: unbounded, ``d`` devices of ``n`` ports):
        the devices of :class:`~topoopt.fabrics.ocs_layout.OcsLayout` (``ocs_layout``
        ``per-rail`` or ``packed``), each counted with all its ports.
    ocs_layout : str
        Layout of the finite-radix OCSes.

    Raises
    ------
    InputError
        A server uses more than ``degree`` ports, a circuit between two servers that share no
        OCS of the layout, or a bad number.
    """
    n = check_int("servers", circuits.n)
    deg = circuits.degrees()
    d = max(int(deg.max(initial=0)), 1) if degree is None else check_int("degree", degree)
    over = np.flatnonzero(deg > d)
    if over.size:
        i = int(over[0])
        raise InputError(f"circuits.server[{i}]", int(deg[i]), f"at most {d} circuits (the degree)")
    b = check_float("port_bandwidth", port_bandwidth)
    delay = reconfiguration_delay_for(device, reconfiguration_delay)
    params: dict[str, Any] = {"servers": n, "degree": d, "port_bandwidth": b, "device": device}
    if strides is not None:
        params["strides"] = strides
    circ = circuits.rows
    params["circuits"] = int(circ[:, 2].sum())
    n_dev, dev_ports = d, n
    if ocs_radix is not None:
        if device != "ocs":
            raise InputError("ocs_radix", ocs_radix, "only with device ocs")
        layer = OcsLayout(n, d, ocs_radix, ocs_layout)
        ok = layer.reachable()[circ[:, 0], circ[:, 1]] if circ.size else np.ones(0, bool)
        if not ok.all():
            u, v = (int(x) for x in circ[int(np.argmin(ok)), :2])
            raise InputError(
                f"circuits (pair {u}-{v})", f"servers {u} and {v}",
                f"servers sharing an OCS of the {ocs_layout} layout of radix {ocs_radix}",
            )  # fmt: skip
        n_dev, dev_ports = layer.n_ocs, layer.radix
        params.update(ocs_radix=layer.radix, ocs_layout=layer.layout, ocs_devices=n_dev)
    params.update(extra_params or {})
    kind = np.array(["server"] * n + [device] * n_dev)
    return build_fabric(
        family,
        params,
        kind,
        np.r_[np.zeros(n), np.ones(n_dev)],
        np.r_[np.full(n, d), np.full(n_dev, dev_ports)],
        circ[:, 0],
        circ[:, 1],
        b,
        "optical",
        multiplicity=circ[:, 2],
        latency=latency,
        server_ports=d,
        server_optical_ports=d,
        port_bandwidth=b,
        optical_port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        reconfiguration_delay=delay,
    )
