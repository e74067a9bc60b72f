"""Switch catalogue and the Clos fabric a buyer builds from it for a given cluster size.

A :class:`SwitchModel` is one orderable switch configuration (radix x port speed of a merchant
ASIC, breakout modes included; the default list is ``switch_catalogue`` in ``prices.yaml``).
:func:`plan_clos` sizes the cheapest full-bisection (or ``R``:1 oversubscribed) Clos of one model
for ``n`` servers of ``P`` NIC ports each (one NIC per port, every port at the model's speed),
the way a buyer would (:func:`topoopt.fabrics.fat_tree.clos_shape` holds the geometry):

- one tier when the ``n P`` ports fit one switch (``n`` with rails: one switch per rail);
- two tiers otherwise: ``L = ceil(n / s_max)`` leaves with the servers spread evenly
  (``s = ceil(n / L)`` each; ``s_max P`` host ports from
  :func:`topoopt.fabrics.fat_tree.hosts_per_leaf`), ``u = ceil(s P / R)`` uplinks per leaf
  (so at most ``R``:1; the ratio built, :attr:`ClosShape.oversubscription`, is reported),
  and as few spines ``S`` as the ports allow: every leaf has a bundle of ``b = ceil(u / S)``
  parallel cables to every spine (bundles as in Solnushkin, arXiv:1301.6179), the smallest
  ``S`` with ``s P + S b <= radix`` and ``L b <= radix``. Spines are bought for their ports,
  never one mostly-empty spine per uplink;
- three tiers when the leaves outnumber the radix: pods of at most ``radix / 2`` leaves with
  ``u`` aggregation switches each and ``u`` planes of cores (Al-Fares' k-ary fat-tree at
  ``n = k^3 / 4``), cores bundled as above. Beyond three tiers :func:`plan_clos` returns
  ``None`` and the model is skipped.

Every tier is priced by the same rules (:func:`plan_bill_of_materials`): a NIC per server port,
a transceiver at both ends of every cable, a fibre per cable, every switch bought whole.
The plan is closed-form (no fabric is built) so cost curves over thousands of cluster sizes are
cheap; :meth:`ClosPlan.fabric` builds the :class:`~topoopt.fabrics.fabric.Fabric` it describes and
:func:`plan_bill_of_materials` gives the same counts as
:func:`topoopt.fabrics.cost.bill_of_materials` of that fabric (tests check it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topoopt.fabrics.fabric import Fabric, check_float, check_int
from topoopt.fabrics.fat_tree import ClosShape, clos, clos_shape, hosts_per_leaf
from traffic.errors import InputError

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
    """A one-, two- or three-tier Clos of one :class:`SwitchModel` (its :class:`ClosShape`).

    ``oversubscription`` is the ratio asked; :attr:`ClosShape.oversubscription` the one built.
    """

    model: SwitchModel
    oversubscription: float
    shape: ClosShape

    @property
    def servers(self) -> int:
        """Servers served."""
        return self.shape.servers

    @property
    def ports_per_server(self) -> int:
        """NIC ports (= NICs) per server."""
        return self.shape.ports_per_server

    @property
    def tiers(self) -> int:
        """Switch tiers: 1 (one switch, or one per rail), 2 or 3."""
        return self.shape.tiers

    @property
    def leaves(self) -> int:
        """Leaf switches."""
        return self.shape.leaves

    @property
    def hosts_per_leaf(self) -> int:
        """Servers per leaf (per leaf group with rails)."""
        return self.shape.servers_per_leaf

    @property
    def uplinks(self) -> int:
        """Uplink cables per leaf (0 with one tier)."""
        return self.shape.uplinks

    @property
    def spines(self) -> int:
        """Tier-2 switches: spines, or aggregation switches of every pod (0 with one tier)."""
        return self.shape.spines

    @property
    def cores(self) -> int:
        """Tier-3 switches (0 below three tiers)."""
        return self.shape.cores

    @property
    def bundle(self) -> int:
        """Parallel cables between one leaf and one tier-2 switch (0 with one tier)."""
        return self.shape.bundle

    @property
    def switches(self) -> int:
        """Switches bought, every tier."""
        return self.shape.switches

    @property
    def switch_ports(self) -> int:
        """Switch ports paid for (whole switches, empty ports included)."""
        return self.switches * self.model.radix

    @property
    def fabric_cables(self) -> int:
        """Switch-to-switch cables (host cables not included)."""
        return self.shape.fabric_cables

    @property
    def server_gbps(self) -> float:
        """Network bandwidth per server, Gbps: its ports at the model's speed."""
        return self.ports_per_server * float(self.model.gbps)

    def fabric(self, port_bandwidth: float, gpus_per_server: int = 1) -> Fabric:
        """The :class:`Fabric` of this plan with every port at ``port_bandwidth`` (bytes/s).

        >>> m = SwitchModel("64x100G", 64, 100.0)
        >>> f = plan_clos(128, m).fabric(12.5e9)
        >>> f.n_switches, f.n_physical_links
        (6, 256)
        """
        return clos(
            self.shape,
            port_bandwidth,
            oversubscription=self.oversubscription,
            gpus_per_server=gpus_per_server,
        )

    def info(self) -> dict:
        """JSON-able description (for reports): tiers, switch model, counts per tier."""
        return {
            **self.shape.info(),
            "switch": self.model.name,
            "radix": self.model.radix,
            "switch_gbps": self.model.gbps,
            "server_gbps": self.server_gbps,
            "hosts_per_leaf": self.hosts_per_leaf,
            "switches": self.switches,
            "switch_ports": self.switch_ports,
            "oversubscription": self.oversubscription,
        }


def plan_clos(
    servers: int,
    model: SwitchModel,
    oversubscription: float = 1.0,
    *,
    ports_per_server: int = 1,
    rails: bool = False,
) -> ClosPlan | None:
    """The buyer's Clos of ``model`` switches for ``servers`` servers of ``ports_per_server``
    NIC ports (module docstring), or ``None`` when it would need a fourth tier.

    Examples
    --------
    >>> m = SwitchModel("64x100G", 64, 100.0)
    >>> p = plan_clos(128, m)
    >>> p.tiers, p.leaves, p.hosts_per_leaf, p.uplinks, p.spines, p.bundle, p.switch_ports
    (2, 4, 32, 32, 2, 16, 384)
    >>> plan_clos(64, m).switch_ports, plan_clos(65, m).leaves, plan_clos(65, m).spines
    (64, 3, 2)
    >>> p = plan_clos(2049, m); p.tiers, p.leaves, p.spines, p.cores
    (3, 65, 96, 64)
    >>> plan_clos(16, m, ports_per_server=8).tiers, plan_clos(70_000, m) is None
    (2, True)
    """
    n = check_int("servers", servers)
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    p = check_int("ports_per_server", ports_per_server)
    radix = int(model.radix)
    per = 1 if rails else p
    if n * per <= radix:
        s = n
    else:
        s_max = hosts_per_leaf(radix, r) // per
        if s_max < 1:
            return None
        s = math.ceil(n / math.ceil(n / s_max))
    try:
        shape = clos_shape(
            n, radix, r, ports_per_server=p, rails=rails, servers_per_leaf=s, pack=True
        )
    except InputError:
        return None
    return ClosPlan(model, r, shape)


def plan_bill_of_materials(plan: ClosPlan, gbps: float) -> dict[str, int]:
    """Component counts of ``plan`` built at ``gbps`` per port, keyed as
    :func:`topoopt.fabrics.cost.bill_of_materials` keys them (every cable fibre with a
    transceiver at both ends, one NIC per server port, every tier alike).

    >>> m = SwitchModel("64x100G", 64, 100.0)
    >>> plan_bill_of_materials(plan_clos(128, m), 100.0)["transceiver_100G"]
    512
    """
    g = speed_label(gbps)
    cables = plan.shape.host_cables + plan.fabric_cables
    return {
        f"nic_port_{g}": plan.shape.host_cables,
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
