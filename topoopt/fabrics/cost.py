"""Bill of materials, capex and power of a fabric, and TopoOpt's cost-equivalent fat-tree.

Counting rules (per fabric, from its arrays):

- NIC ports: every server port, by speed (``integrated_port`` for accelerator-integrated links,
  e.g. TPU ICI);
- electrical switches: one per switch node, by radix and port speed; ``switch_port`` = radix
  (empty ports are paid for: the switch is bought whole);
- a fibre cable (electrical fabric): one fibre and a transceiver at each end, per member;
  a copper cable: one ``copper_cable``, no transceivers;
- optical layer: every optical server port has one transceiver and one fibre to its device;
  every OCS / patch-panel port is counted.

Capex and power are ``sum(count * unit price)`` with unit prices from :class:`PriceTable`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from topoopt.fabrics.fabric import Fabric, check_float
from topoopt.fabrics.fat_tree import fat_tree, leaf_spine
from traffic.errors import InputError

__all__ = [
    "SPEED_ITEMS",
    "FLAT_ITEMS",
    "PriceTable",
    "CostReport",
    "CostEquivalent",
    "load_prices",
    "bill_of_materials",
    "cost",
    "cost_equivalent_fat_tree",
    "OVERSUBSCRIPTION_STEPS",
]

OVERSUBSCRIPTION_STEPS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)
"""Leaf-spine oversubscription ratios tried by :func:`cost_equivalent_fat_tree`."""

SPEED_ITEMS = ("nic_port", "transceiver", "switch_port")
"""Price-table sections keyed by line rate (Gbps)."""

FLAT_ITEMS = (
    "integrated_port",
    "patch_panel_port",
    "ocs_port",
    "fibre",
    "copper_cable",
    "accelerator",
)
"""Price-table entries with one unit price."""


def _gbps(bytes_per_s: float) -> float:
    return round(float(bytes_per_s) * 8.0 / 1e9, 6)


def _speed_label(gbps: float) -> str:
    return f"{gbps:.12g}G"


@dataclass(frozen=True)
class PriceTable:
    """Unit capex (USD) and power (W) per component; see ``prices.yaml`` for defaults/sources."""

    data: dict = field(repr=False)
    source: str = "default"

    def unit(self, item: str, gbps: float | None = None) -> tuple[float, float]:
        """``(capex_usd, power_w)`` of one ``item`` (at ``gbps`` for speed-keyed items).

        Between two listed speeds the price is interpolated linearly.

        >>> t = load_prices()
        >>> t.unit("transceiver", 100), t.unit("transceiver", 62.5)
        ((100.0, 3.5), (62.5, 2.25))
        """
        if item in FLAT_ITEMS:
            e = self.data[item]
            return float(e["capex_usd"]), float(e["power_w"])
        if item not in SPEED_ITEMS:
            raise InputError("price item", item, f"one of {', '.join(SPEED_ITEMS + FLAT_ITEMS)}")
        table = self.data[item]
        speeds = np.array(sorted(float(s) for s in table))
        if gbps is None or not speeds[0] - 1e-9 <= gbps <= speeds[-1] + 1e-9:
            raise InputError(
                f"prices.{item}", gbps, f"a speed in {speeds[0]:g}..{speeds[-1]:g} Gbps"
            )
        by = {float(s): v for s, v in table.items()}
        capex = np.interp(gbps, speeds, [float(by[s]["capex_usd"]) for s in speeds])
        power = np.interp(gbps, speeds, [float(by[s]["power_w"]) for s in speeds])
        return float(capex), float(power)

    def speed_range(self, item: str = "switch_port") -> tuple[float, float]:
        """Lowest and highest listed speed of a speed-keyed section, Gbps."""
        s = sorted(float(x) for x in self.data[item])
        return s[0], s[-1]


def _check_entry(where: str, e: Any) -> dict:
    if not isinstance(e, Mapping) or set(e) != {"capex_usd", "power_w"}:
        raise InputError(where, e, "a mapping {capex_usd: number, power_w: number}")
    for key in ("capex_usd", "power_w"):
        v = e[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or not math.isfinite(v):
            raise InputError(f"{where}.{key}", v, "a finite number >= 0")
    return {"capex_usd": float(e["capex_usd"]), "power_w": float(e["power_w"])}


def _merge(base: dict, over: Mapping, where: str) -> dict:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, val in over.items():
        if key == "version":
            continue
        if key in SPEED_ITEMS:
            if not isinstance(val, Mapping):
                raise InputError(f"{where}.{key}", val, "a mapping speed_gbps -> entry")
            sec = dict(out.get(key, {}))
            for s, e in val.items():
                try:
                    sp = float(s)
                except (TypeError, ValueError):
                    raise InputError(f"{where}.{key}", s, "speeds in Gbps (numbers)") from None
                if sp <= 0:
                    raise InputError(f"{where}.{key}", s, "speeds > 0 Gbps")
                sec = {float(k): v for k, v in sec.items()}
                sec[sp] = _check_entry(f"{where}.{key}.{s}", e)
            out[key] = sec
        elif key in FLAT_ITEMS:
            out[key] = _check_entry(f"{where}.{key}", val)
        else:
            raise InputError(where, key, f"entries among {', '.join(SPEED_ITEMS + FLAT_ITEMS)}")
    return out


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The default price table, with the entries of the YAML file ``path`` merged over it.

    >>> load_prices().unit("ocs_port")
    (500.0, 0.75)
    """
    text = resources.files("topoopt.fabrics").joinpath("prices.yaml").read_text("utf-8")
    base = _merge({}, yaml.safe_load(text), "prices.yaml")
    if path is None:
        return PriceTable(base, "default")
    p = Path(path)
    try:
        over = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise InputError(str(p), f"invalid YAML ({type(exc).__name__})", "a YAML mapping") from None
    if not isinstance(over, Mapping):
        raise InputError(str(p), type(over).__name__, "a YAML mapping of price entries")
    return PriceTable(_merge(base, over, str(p)), str(p))


def bill_of_materials(fabric: Fabric) -> dict[str, int]:
    """Component -> count for ``fabric`` (see the module docstring for the rules).

    Keys: ``nic_port_<S>G`` / ``integrated_port_<S>G``, ``transceiver_<S>G``,
    ``switch_port_<S>G``, ``switch_<R>x<S>G`` (switches of radix R), ``ocs``, ``ocs_port``,
    ``patch_panel``, ``patch_panel_port``, ``fibre``, ``copper_cable``; zero counts are omitted.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> bill_of_materials(fat_tree(4))["switch_port_100G"]
    80
    """
    bom: dict[str, int] = {}

    def add(key: str, n: float) -> None:
        if n:
            bom[key] = bom.get(key, 0) + int(round(n))

    integrated = bool(fabric.params.get("integrated_ports", fabric.family == "tpu-v4"))
    nic = "integrated_port" if integrated else "nic_port"
    e_ports = fabric.server_ports - fabric.server_optical_ports
    for bw in np.unique(fabric.port_bandwidth):
        add(f"{nic}_{_speed_label(_gbps(bw))}", e_ports[fabric.port_bandwidth == bw].sum())
    opt_ports = int(fabric.server_optical_ports.sum())
    if opt_ports:
        sp = _speed_label(_gbps(fabric.optical_port_bandwidth))
        add(f"{nic}_{sp}", opt_ports)
        add(f"transceiver_{sp}", opt_ports)
        add("fibre", opt_ports)
    # cables of the electrical (non-circuit) layer: the first direction of each cable
    first = np.arange(0, fabric.n_links, 2)
    first = first[fabric.link_kind[first] != "optical"]
    first = first[fabric.link_kind[first] != "intra-server"]
    per = fabric.capacity[first] / fabric.multiplicity[first]
    mult = fabric.multiplicity[first]
    fib = fabric.medium[first] == "fibre"
    for bw in np.unique(per[fib]):
        sel = fib & (per == bw)
        add(f"transceiver_{_speed_label(_gbps(bw))}", 2 * mult[sel].sum())
    add("fibre", mult[fib].sum())
    add("copper_cable", mult[~fib].sum())
    # switches: speed of a switch = fastest member link at it
    sw = np.flatnonzero(fabric.node_kind == "switch")
    if sw.size:
        speed = np.zeros(fabric.n_nodes)
        member = fabric.capacity / fabric.multiplicity
        np.maximum.at(speed, fabric.src, member)
        for node in sw:
            g = _speed_label(_gbps(speed[node]))
            add(f"switch_{int(fabric.node_ports[node])}x{g}", 1)
            add(f"switch_port_{g}", fabric.node_ports[node])
    for kind, key in (("ocs", "ocs"), ("patch-panel", "patch_panel")):
        dev = fabric.node_kind == kind
        add(key, int(dev.sum()))
        add(f"{key}_port", int(fabric.node_ports[dev].sum()))
    return bom


def _item_of(key: str) -> tuple[str | None, float | None]:
    """Price item and speed (Gbps) of a BOM key; (None, None) for informational counts."""
    for item in SPEED_ITEMS:
        if key.startswith(item + "_"):
            return item, float(key[len(item) + 1 : -1])
    if key.startswith("integrated_port_"):
        return "integrated_port", None
    if key in FLAT_ITEMS:
        return key, None
    return None, None  # switch_<R>x<S>G, ocs, patch_panel: priced through their ports


@dataclass(frozen=True)
class CostReport:
    """Bill of materials with capex (USD) and power (W), total and per item."""

    bom: dict
    capex_usd: float
    power_w: float
    capex_by_item: dict
    power_by_item: dict
    compute_capex_usd: float = 0.0
    compute_power_w: float = 0.0

    @property
    def system_capex_usd(self) -> float:
        """Network plus compute capex."""
        return self.capex_usd + self.compute_capex_usd

    @property
    def system_power_w(self) -> float:
        """Network plus compute power."""
        return self.power_w + self.compute_power_w


def cost(fabric: Fabric, prices: PriceTable | None = None) -> CostReport:
    """Capex and power of ``fabric``'s network under ``prices`` (default table).

    ``compute_*`` fields price ``fabric.n_gpus`` accelerators for system-level fractions.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> r = cost(fat_tree(4))
    >>> r.capex_by_item["switch_port_100G"] == 80 * 190.0
    True
    """
    prices = load_prices() if prices is None else prices
    bom = bill_of_materials(fabric)
    capex: dict[str, float] = {}
    power: dict[str, float] = {}
    for key, n in bom.items():
        item, gbps = _item_of(key)
        if item is None:
            continue
        c, p = prices.unit(item, gbps)
        capex[key], power[key] = n * c, n * p
    acc_c, acc_p = prices.unit("accelerator")
    return CostReport(
        bom=bom,
        capex_usd=float(sum(capex.values())),
        power_w=float(sum(power.values())),
        capex_by_item=capex,
        power_by_item=power,
        compute_capex_usd=fabric.n_gpus * acc_c,
        compute_power_w=fabric.n_gpus * acc_p,
    )


@dataclass(frozen=True, eq=False)
class CostEquivalent:
    """A fat-tree whose capex matches a target: its fabric and the knob that was tuned."""

    fabric: Fabric
    port_bandwidth: float
    oversubscription: float
    capex_usd: float
    target_capex_usd: float


def cost_equivalent_fat_tree(
    target_capex: float,
    servers: int,
    *,
    vary: str = "bandwidth",
    family: str = "leaf-spine",
    k: int | None = None,
    radix: int = 64,
    port_bandwidth: float = 12.5e9,
    oversubscription: float = 1.0,
    gpus_per_server: int = 1,
    prices: PriceTable | None = None,
) -> CostEquivalent:
    """TopoOpt's cost-equivalent fat-tree: the Clos fabric whose capex equals ``target_capex``.

    Parameters
    ----------
    target_capex : float
        USD to match (e.g. ``cost(optical_design).capex_usd``).
    servers : int
        Servers of the fat-tree.
    vary : {"bandwidth", "oversubscription"}
        ``bandwidth``: keep ``oversubscription`` and solve for the per-port bandwidth (prices are
        continuous in speed, capex is non-decreasing in it: bisection to 1e-9 relative).
        ``oversubscription``: keep ``port_bandwidth`` and return the smallest oversubscription
        whose capex does not exceed the target, among ``(k/2)/u`` for a k-ary fat-tree (every
        uplink count ``u``) or :data:`OVERSUBSCRIPTION_STEPS` for a leaf-spine.
    family : {"leaf-spine", "fat-tree"}
        Clos family (``fat-tree`` needs ``k``).

    Raises
    ------
    InputError
        When no fabric of the family in the table's speed range can match the target.

    Examples
    --------
    >>> ref = cost(leaf_spine(64, port_bandwidth=25e9)).capex_usd
    >>> eq = cost_equivalent_fat_tree(ref, 64)
    >>> round(eq.port_bandwidth * 8 / 1e9, 6)
    200.0
    """
    target = check_float("target_capex", target_capex)
    prices = load_prices() if prices is None else prices

    def build(bw: float, r: float) -> Fabric:
        if family == "leaf-spine":
            return leaf_spine(
                servers, r, radix=radix, port_bandwidth=bw, gpus_per_server=gpus_per_server
            )
        if family == "fat-tree":
            if k is None:
                raise InputError("k", None, "the fat-tree radix for family fat-tree")
            return fat_tree(
                k, servers, oversubscription=r, port_bandwidth=bw, gpus_per_server=gpus_per_server
            )
        raise InputError("family", family, "leaf-spine or fat-tree")

    if vary == "bandwidth":
        lo_g, hi_g = prices.speed_range("switch_port")
        lo, hi = lo_g * 1e9 / 8, hi_g * 1e9 / 8
        c_lo = cost(build(lo, oversubscription), prices).capex_usd
        c_hi = cost(build(hi, oversubscription), prices).capex_usd
        if not c_lo <= target <= c_hi:
            raise InputError(
                "target_capex", target, f"between {c_lo:,.0f} and {c_hi:,.0f} USD for {servers}"
            )
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if cost(build(mid, oversubscription), prices).capex_usd < target:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-9 * hi:
                break
        fab = build(hi, oversubscription)
        return CostEquivalent(fab, hi, oversubscription, cost(fab, prices).capex_usd, target)
    if vary == "oversubscription":
        if family == "fat-tree" and k is not None:
            cands = sorted({(k / 2) / u for u in range(1, k // 2 + 1)})
        else:
            cands = list(OVERSUBSCRIPTION_STEPS)
        best = None
        for r in cands:
            fab = build(port_bandwidth, r)
            c = cost(fab, prices).capex_usd
            if c <= target * (1 + 1e-12):
                best = CostEquivalent(fab, port_bandwidth, r, c, target)
                break
        if best is None:
            raise InputError("target_capex", target, "enough for the most oversubscribed fabric")
        return best
    raise InputError("vary", vary, "bandwidth or oversubscription")
