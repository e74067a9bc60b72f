"""Optical layers of finite-radix OCS devices: which OCS every server port lands on.

A direct-connect design joins server ports with circuits; an optical circuit switch (OCS) of
radix ``R`` joins any two of its own ``R`` ports, never a port of another OCS. With ``n d``
server ports and ``R < n d`` the layer needs several OCSes, and a circuit can join port ``p`` of
server ``u`` to port ``q`` of server ``v`` only when both land on the same OCS.

Layouts (:class:`OcsLayout`):

``per-rail`` (the default; TPU v4's OCS layer, Jouppi et al. ISCA'23: port ``p`` of every block
    on OCS group ``p``): port ``p`` of every server lands in group ``p`` (one group per port /
    NIC index, a rail), of ``k = ceil(n / R)`` OCSes. Server ``s`` sits at position
    ``(s + p shift) mod n`` of group ``p``, ``shift = n // (k d)`` (0 when ``k = 1``), and its
    port ``p`` lands on OCS ``p k + floor(position k / n)`` (OCSes of ``floor(n/k)`` or
    ``ceil(n/k) <= R`` ports): the plane layout of the shared cluster's
    :class:`solvers.cluster.ocs.OcsLayer`, whose units are these OCSes. With ``n <= R``
    (``k = 1``) every port reaches every server's port of the same index; with ``k > 1`` the
    shift moves the OCS boundaries from port to port. ``d k`` OCSes.
``packed``: the ``n d`` ports in server-major order fill OCSes of ``R`` ports one after
    another (port ``p`` of server ``s`` on OCS ``(s d + p) // R``): the fewest devices,
    ``ceil(n d / R)``, and a server reaches only the servers that share one of its (one or
    two) OCSes.

Price: an OCS is bought whole, so :meth:`OcsLayout.bom` counts ``ocs`` devices and every one of
their ports (``ocs_port``, the BOM rule of :func:`topoopt.fabrics.cost.bill_of_materials`).
Whether a set of circuits fits a layer is a placement problem (a constrained edge colouring),
solved by :func:`solvers.model.ocs_layers.place_circuits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from traffic.errors import InputError

__all__ = ["LAYOUTS", "OcsLayout"]

LAYOUTS = ("per-rail", "packed")
"""Port-to-OCS layouts of :class:`OcsLayout`."""


def _positive(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise InputError(name, v, "a positive integer")
    return int(v)


@dataclass(frozen=True)
class OcsLayout:
    """``n`` servers with ``degree`` ports each on OCSes of ``radix`` ports (module docstring).

    Examples
    --------
    >>> layer = OcsLayout(300, 8, 136)
    >>> layer.ocs_per_group, layer.n_ocs, layer.bom()
    (3, 24, {'ocs': 24, 'ocs_port': 3264})
    >>> layer.ocs_of[[0, 99, 100, 299], 0].tolist()
    [0, 0, 1, 2]
    >>> OcsLayout(300, 8, 136, "packed").n_ocs
    18
    """

    servers: int
    degree: int
    radix: int
    layout: Literal["per-rail", "packed"] = "per-rail"

    def __post_init__(self) -> None:
        n = _positive("servers", self.servers)
        d = _positive("degree", self.degree)
        r = _positive("ocs_radix", self.radix)
        if r < 2:
            raise InputError("ocs_radix", r, "at least 2 ports (a circuit joins two)")
        if self.layout not in LAYOUTS:
            raise InputError("ocs_layout", self.layout, "one of " + ", ".join(LAYOUTS))
        for f, v in (("servers", n), ("degree", d), ("radix", r)):
            object.__setattr__(self, f, v)

    @property
    def ocs_per_group(self) -> int:
        """OCSes per port group (``per-rail``: ``ceil(n / R)``; ``packed``: all of them)."""
        if self.layout == "packed":
            return self.n_ocs
        return -(-self.servers // self.radix)

    @property
    def n_ocs(self) -> int:
        """OCS devices of the layer."""
        if self.layout == "packed":
            return -(-self.servers * self.degree // self.radix)
        return self.degree * self.ocs_per_group

    @property
    def ocs_of(self) -> np.ndarray:
        """``int64 (servers, degree)``: the OCS port ``p`` of server ``s`` lands on."""
        n, d = self.servers, self.degree
        s = np.arange(n)[:, None]
        p = np.arange(d)[None, :]
        if self.layout == "packed":
            return (s * d + p) // self.radix
        k = self.ocs_per_group
        shift = n // (k * d) if k > 1 else 0
        return p * k + ((s + p * shift) % n) * k // n

    def slots(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(server, ocs, ports)``: how many ports each server has on each OCS it touches
        (sorted by server, then OCS)."""
        n = self.servers
        key = (np.arange(n)[:, None] * self.n_ocs + self.ocs_of).ravel()
        u, cnt = np.unique(key, return_counts=True)
        return u // self.n_ocs, u % self.n_ocs, cnt.astype(np.int64)

    def reachable(self) -> np.ndarray:
        """``bool (servers, servers)``: pairs with a common OCS (a circuit may join them;
        a server with two ports on one OCS may loop, which designs never use)."""
        n = self.servers
        inc = np.zeros((n, self.n_ocs), bool)
        s, o, _ = self.slots()
        inc[s, o] = True
        out = (inc.astype(np.int64) @ inc.T.astype(np.int64)) > 0
        np.fill_diagonal(out, False)
        return out

    def bom(self) -> dict[str, int]:
        """OCS devices and their ports (every port of a bought device is counted)."""
        return {"ocs": self.n_ocs, "ocs_port": self.n_ocs * self.radix}

    def max_ports_used(self) -> int:
        """The most server ports any one OCS holds (at most ``radix``)."""
        return int(np.bincount(self.ocs_of.ravel(), minlength=self.n_ocs).max())
