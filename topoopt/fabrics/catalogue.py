"""Switch catalogue and the Clos fabric a buyer builds from it for a given cluster size.

A :class:`SwitchModel` is one orderable switch configuration (radix x port speed of a merchant
ASIC, breakout modes included; the default list is ``switch_catalogue`` in ``prices.yaml``).
:func:`plan_clos` sizes the cheapest full-bisection (or ``R``:1 oversubscribed) Clos of one model
for ``n`` servers, the way a buyer would:

- one tier when ``n <= radix``: a single switch;
- two tiers otherwise: ``L = ceil(n / h_max)`` leaves with the servers spread evenly
  (``h = ceil(n / L)`` each, ``h_max`` from :func:`topoopt.fabrics.fat_tree.hosts_per_leaf`),
  ``u = ceil(h / R)`` uplinks per leaf, and as few spines ``S`` as the ports allow: every leaf
  has a bundle of ``b = ceil(u / S)`` parallel cables to every spine (bundles as in Solnushkin,
  arXiv:1301.6179), the smallest ``S`` with ``h + S b <= radix`` and ``L b <= radix``. Spines
  are bought for their ports, never one mostly-empty spine per uplink (the cliff of issue 13:
  128 servers on 64-port switches used to buy 32 spines with 4 of 64 ports used);
- larger clusters (``L > radix``, a third tier) are out of scope: :func:`plan_clos` returns
  ``None`` and the model is skipped.

The plan is closed-form (no fabric is built) so cost curves over thousands of cluster sizes are
cheap; :meth:`ClosPlan.fabric` builds the :class:`~topoopt.fabrics.fabric.Fabric` it describes and
:func:`plan_bill_of_materials` gives the same counts as
:func:`topoopt.fabrics.cost.bill_of_materials` of that fabric (tests check it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topoopt.fabrics.fabric import Fabric, check_float, check_int
from topoopt.fabrics.fat_tree import hosts_per_leaf, leaf_spine

__all__ = [
    "SwitchModel",
    "ClosPlan",
    "plan_clos",
    "plan_bill_of_materials",
    "packed_spines",
    "speed_label",
]


def speed_label(gbps: float) -> str:
    """Bill-of-materials label of a line rate: ``100G``, ``137.5G``.

    >>> speed_label(100.0), speed_label(137.5)
    ('100G', '137.5G')
    """
    return f"{round(float(gbps), 6):.12g}G"


@dataclass(frozen=True)
class SwitchModel:
    """One orderable switch configuration: ``radix`` ports at ``gbps`` each."""

    name: str
    radix: int
    gbps: float
    source: str = ""


@dataclass(frozen=True)
class ClosPlan:
    """A one- or two-tier Clos of one :class:`SwitchModel` for ``servers`` servers.

    ``spines == 0`` means one tier (``leaves == 1``, the servers on one switch).
    """

    servers: int
    model: SwitchModel
    oversubscription: float
    leaves: int
    hosts_per_leaf: int
    uplinks: int
    spines: int

    @property
    def tiers(self) -> int:
        """Switch tiers: 1 (one switch) or 2 (leaf-spine)."""
        return 1 if self.spines == 0 else 2

    @property
    def bundle(self) -> int:
        """Parallel cables between one leaf and one spine (0 with one tier)."""
        return self.uplinks // self.spines if self.spines else 0

    @property
    def switches(self) -> int:
        """Switches bought."""
        return self.leaves + self.spines

    @property
    def switch_ports(self) -> int:
        """Switch ports paid for (whole switches, empty ports included)."""
        return self.switches * self.model.radix

    @property
    def fabric_cables(self) -> int:
        """Leaf-spine cables (host cables not included)."""
        return self.leaves * self.uplinks if self.spines else 0

    def fabric(self, port_bandwidth: float, gpus_per_server: int = 1) -> Fabric:
        """The leaf-spine :class:`Fabric` of this plan with every port at ``port_bandwidth``.

        >>> m = SwitchModel("64x100G", 64, 100.0)
        >>> f = plan_clos(128, m).fabric(12.5e9)
        >>> f.n_switches, f.n_physical_links
        (6, 256)
        """
        return leaf_spine(
            self.servers,
            self.oversubscription,
            radix=self.model.radix,
            leaf_hosts=self.hosts_per_leaf,
            spines=self.spines or None,
            port_bandwidth=port_bandwidth,
            gpus_per_server=gpus_per_server,
        )

    def info(self) -> dict:
        """JSON-able description (for reports)."""
        return {
            "tiers": self.tiers,
            "switch": self.model.name,
            "radix": self.model.radix,
            "switch_gbps": self.model.gbps,
            "leaves": self.leaves,
            "spines": self.spines,
            "hosts_per_leaf": self.hosts_per_leaf,
            "uplinks_per_leaf": self.uplinks if self.spines else 0,
            "bundle": self.bundle,
            "switch_ports": self.switch_ports,
            "oversubscription": self.oversubscription,
        }


def plan_clos(servers: int, model: SwitchModel, oversubscription: float = 1.0) -> ClosPlan | None:
    """The buyer's Clos of ``model`` switches for ``servers`` servers (module docstring), or
    ``None`` when it would need a third tier.

    Examples
    --------
    >>> m = SwitchModel("64x100G", 64, 100.0)
    >>> p = plan_clos(128, m)
    >>> p.tiers, p.leaves, p.hosts_per_leaf, p.uplinks, p.spines, p.bundle, p.switch_ports
    (2, 4, 32, 32, 2, 16, 384)
    >>> plan_clos(64, m).switch_ports, plan_clos(65, m).leaves, plan_clos(65, m).spines
    (64, 3, 2)
    >>> plan_clos(2049, m) is None
    True
    """
    n = check_int("servers", servers)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    radix = int(model.radix)
    if n <= radix:
        return ClosPlan(n, model, r, 1, n, 0, 0)
    h_max = hosts_per_leaf(radix, r)
    if h_max < 1:
        return None
    leaves = math.ceil(n / h_max)
    if leaves > radix:
        return None
    h = math.ceil(n / leaves)
    leaves = math.ceil(n / h)
    u = math.ceil(h / r)
    for spines in range(1, u + 1):
        bundle = -(-u // spines)
        if h + spines * bundle <= radix and leaves * bundle <= radix:
            return ClosPlan(n, model, r, leaves, h, spines * bundle, spines)
    raise AssertionError("unreachable: spines = u always fits")  # pragma: no cover


def plan_bill_of_materials(plan: ClosPlan, gbps: float) -> dict[str, int]:
    """Component counts of ``plan`` built at ``gbps`` per port, keyed as
    :func:`topoopt.fabrics.cost.bill_of_materials` keys them (every cable fibre, one NIC port per
    server).

    >>> m = SwitchModel("64x100G", 64, 100.0)
    >>> plan_bill_of_materials(plan_clos(128, m), 100.0)["transceiver_100G"]
    512
    """
    g = speed_label(gbps)
    cables = plan.servers + plan.fabric_cables
    return {
        f"nic_port_{g}": plan.servers,
        f"transceiver_{g}": 2 * cables,
        "fibre": cables,
        f"switch_{plan.model.radix}x{g}": plan.switches,
        f"switch_port_{g}": plan.switch_ports,
    }


def packed_spines(
    servers: int, oversubscription: float = 1.0, radix: int = 64, leaf_hosts: int | None = None
) -> int | None:
    """The fewest spines for ``leaf_spine(servers, oversubscription, radix=radix,
    leaf_hosts=leaf_hosts, spines=...)``: uplinks in equal bundles, every switch within
    ``radix``; ``None`` when one leaf holds every server (no spine).

    >>> packed_spines(128, 1.0, 64, 16), packed_spines(128, 4.0, 64, 16), packed_spines(8)
    (2, 1, None)
    """
    n = check_int("servers", servers)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    h = leaf_hosts or (radix if n <= radix else hosts_per_leaf(radix, r))
    groups = math.ceil(n / h)
    if groups == 1:
        return None
    u = math.ceil(h / r)
    for spines in range(1, u + 1):
        b = -(-u // spines)
        if h + spines * b <= radix and groups * b <= radix:
            return spines
    return None
