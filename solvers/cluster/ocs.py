"""The physical OCS layer of a shared cluster, and which circuit multigraphs it can realise.

Wiring model
------------
``N`` servers have ``D`` optical ports each. Port ``i`` of every server is cabled to OCS *plane*
``i`` (``i = 0..D-1``). An OCS unit of radix ``R`` connects at most ``R`` ports, so plane ``i``
is made of ``P = ceil(N / R)`` units ("pods"). Server ``s`` sits at position
``p_i(s) = (s + i * shift) mod N`` of plane ``i`` and its port ``i`` lands on unit
``floor(p_i(s) * P / N)`` of that plane (units of ``floor(N/P)`` or ``ceil(N/P) <= R`` ports).
The shift ``shift = N // (P * D)`` (``0`` when ``P = 1``) moves the unit boundaries from plane to
plane by a ``1/D`` of a unit, the cross wiring idea: a server set cut by a unit boundary on one
plane is whole on the others, so a job larger than ``R``, or one straddling a boundary, can
still be connected.

A circuit ``u-v`` on plane ``i`` joins port ``i`` of ``u`` to port ``i`` of ``v``; it exists only
when both ports land on the same unit. A circuit multigraph (rows ``[u, v, count]``) is thus
*realisable* iff its edges can be coloured with the plane indices ``0..D-1`` so that every server
uses every colour at most once (one port per plane) and every edge of colour ``i`` joins two
servers of one unit of plane ``i``. This is a list edge colouring: NP-hard in general (already
with one unit per plane: an odd ring on ``D = 2`` ports needs three colours and is not
realisable), small for one job. :func:`assign_ports` (:mod:`solvers.model.list_colouring`,
shared with the designs' optical layers) searches it exactly, most constrained edge first with
backtracking, within a deterministic step budget shared by a few restarts (seeded edge orders);
each partial colouring is completed greedily and by Kempe-chain flips (two planes swapped along
an alternating path, as in Vizing's proof), and otherwise the best partial colouring is returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.model.list_colouring import (
    DEFAULT_STEPS,
    PortAssignment,
    assign_ports,
    expand_circuits,
)
from traffic.errors import InputError

__all__ = ["OcsLayer", "PortAssignment", "assign_ports", "expand_circuits", "DEFAULT_STEPS"]


@dataclass(frozen=True, eq=False)
class OcsLayer:
    """``servers`` servers with ``degree`` ports, plane ``i`` split into units of ``radix`` ports.

    Attributes
    ----------
    servers, degree, radix : int
    units : numpy.ndarray
        ``int64 (degree, servers)``: the unit of plane ``i`` that server ``s``'s port ``i`` lands
        on (module docstring).

    Examples
    --------
    >>> layer = OcsLayer.build(8, 2, 4)
    >>> layer.units_per_plane, layer.units.tolist()
    (2, [[0, 0, 0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 0, 0]])
    """

    servers: int
    degree: int
    radix: int
    units: np.ndarray

    @classmethod
    def build(cls, servers: int, degree: int, radix: int | None = None) -> OcsLayer:
        """The layer of the module docstring; ``radix=None`` is one unit per plane (``R = N``)."""
        for field, v, lo in (("--servers", servers, 1), ("--degree", degree, 1)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < lo:
                raise InputError(field, v, f"an integer >= {lo}")
        n, d = int(servers), int(degree)
        r = n if radix is None else radix
        if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 2:
            raise InputError("--ocs-radix", radix, "an integer >= 2 (ports of one OCS unit)")
        r = min(int(r), n)
        p = math.ceil(n / r)
        shift = n // (p * d) if p > 1 else 0
        s = np.arange(n, dtype=np.int64)
        pos = (s[None, :] + np.arange(d, dtype=np.int64)[:, None] * shift) % n
        units = pos * p // n
        return cls(n, d, r, units)

    @property
    def units_per_plane(self) -> int:
        """OCS units per plane (``P``)."""
        return int(self.units.max()) + 1 if self.units.size else 0

    def unit_sizes(self) -> np.ndarray:
        """``(degree, P)`` ports cabled to each unit."""
        p = self.units_per_plane
        return np.stack([np.bincount(row, minlength=p) for row in self.units])

    def restrict(self, servers: np.ndarray) -> np.ndarray:
        """``(degree, m)`` unit of each port of the listed servers (a job's local view)."""
        return self.units[:, np.asarray(servers, np.int64)]
