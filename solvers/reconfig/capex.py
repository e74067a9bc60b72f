"""Capex and power of what a circuit schedule needs: the optical devices and the rest of its
direct-connect fabric.

A schedule that keeps one circuit set all iteration (``reconfigurations == 0``: the static
design, or a search that chose not to reconfigure) is wired once per job, on patch panels
(``patch_panel_port``: rewired in minutes, :data:`~topoopt.fabrics.direct_connect.
DEFAULT_PATCH_PANEL_DELAY`). A schedule that changes circuits during the iteration needs a
switch that rewires within its dark time: an optical circuit switch (``ocs_port``; the SiP-ML-like
baseline's per-port silicon-photonic switch is priced as one too, the price table has no entry
of its own). The price table's OCS is a 3-D MEMS one (about 10 ms): a faster switch may cost more
than its ``ocs_port``, so below that delay the figure is a lower bound.

Either way the fabric is ``degree`` devices of ``servers`` ports, one transceiver, fibre and NIC
port per server port (:func:`topoopt.fabrics.direct_connect.direct_connect`), priced by the
bill-of-materials rules of every fabric (:func:`topoopt.fabrics.cost.cost`).
"""

from __future__ import annotations

from topoopt.fabrics.cost import PriceTable, cost
from topoopt.fabrics.direct_connect import direct_connect

__all__ = ["device_for", "schedule_cost"]


def device_for(reconfigurations: int) -> str:
    """Optical device a schedule with ``reconfigurations`` per iteration needs.

    >>> device_for(0), device_for(2)
    ('patch-panel', 'ocs')
    """
    return "ocs" if int(reconfigurations) > 0 else "patch-panel"


def schedule_cost(
    circuits,
    servers: int,
    degree: int,
    link_bandwidth: float,
    reconfigurations: int,
    prices: PriceTable | None = None,
    gpus_per_server: int = 1,
) -> dict:
    """``{"device", "capex_usd", "power_w", "capex_by_component"}`` of a schedule's fabric.

    Parameters
    ----------
    circuits : array_like
        Any circuit set of the schedule (``(u, v, count)`` rows): the devices, ports and cables
        are the same for every set of ``degree`` ports per server.
    servers, degree : int
    link_bandwidth : float
        Bytes/s of one port.
    reconfigurations : int
        Per iteration (:func:`device_for`).
    prices : PriceTable, optional
        Default: the packaged table.
    gpus_per_server : int

    Examples
    --------
    >>> c = schedule_cost([(0, 1), (1, 2), (2, 3), (3, 0)], 4, 2, 12.5e9, 1)
    >>> c["device"], c["capex_by_component"]["ocs"]
    ('ocs', 4000.0)
    """
    device = device_for(reconfigurations)
    fabric = direct_connect(
        servers, degree, circuits, link_bandwidth, device=device, gpus_per_server=gpus_per_server
    )
    r = cost(fabric, prices)
    return {
        "device": device,
        "capex_usd": r.capex_usd,
        "power_w": r.power_w,
        "capex_by_component": r.capex_by_component,
    }
