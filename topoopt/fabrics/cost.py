"""Bill of materials, capex and power of a fabric, and TopoOpt's cost-equivalent fat-tree.

Counting rules (per fabric, from its arrays):

- NIC ports: every server port, by speed (``integrated_port`` for accelerator-integrated links,
  e.g. TPU ICI);
- electrical switches: one per switch node, by radix and port speed; ``switch_port`` = radix
  (empty ports are paid for: the switch is bought whole); ``programmable_switch_port`` instead
  when the fabric's switches aggregate in the network (``params["ina_memory_bytes"]``);
- a fibre cable (electrical fabric): one fibre and a transceiver at each end, per member;
  a copper cable: one ``copper_cable``, no transceivers;
- optical layer: every optical server port has one transceiver and one fibre to its device;
  so has each end of a circuit between two switches (an OCS spine,
  :mod:`topoopt.fabrics.ocs_spine`); every OCS / patch-panel port is counted.

Capex and power are ``sum(count * unit price)`` with unit prices from :class:`PriceTable`, and
split by component (:data:`COMPONENTS`: ``nic``, ``transceiver``, ``switch``, ``cable``, ``ocs``,
``patch_panel``) in :attr:`CostReport.capex_by_component` / :attr:`CostReport.power_by_component`.

The cost-equivalent fat-tree (:func:`cost_equivalent_fat_tree`) buys the fastest full-bisection
Clos a budget affords from the switch catalogue (:mod:`topoopt.fabrics.catalogue`); see
``docs/costs.md`` for the model and its steps.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import yaml

from topoopt.fabrics.catalogue import (
    ClosPlan,
    SwitchModel,
    plan_bill_of_materials,
    plan_clos,
    speed_label,
)
from topoopt.fabrics.fabric import Fabric, check_float
from topoopt.fabrics.fat_tree import fat_tree, leaf_spine
from topoopt.fabrics.price_schema import (
    FLAT_ITEMS,
    SPEED_ITEMS,
    load_price_file,
    validate_price_table,
)
from traffic.errors import InputError

__all__ = [
    "SPEED_ITEMS",
    "FLAT_ITEMS",
    "COMPONENTS",
    "PRESETS",
    "PriceTable",
    "CostReport",
    "CostEquivalent",
    "load_prices",
    "resolve_prices",
    "bill_of_materials",
    "price_bill_of_materials",
    "cost",
    "catalogue_steps",
    "cost_equivalent_fat_tree",
    "OVERSUBSCRIPTION_STEPS",
]

OVERSUBSCRIPTION_STEPS = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)
"""Leaf-spine oversubscription ratios tried by :func:`cost_equivalent_fat_tree`."""

COMPONENTS = ("nic", "transceiver", "switch", "cable", "ocs", "patch_panel")
"""Components of a capex / power breakdown (every priced bill-of-materials item is in one)."""

_COMPONENT_OF = {
    "nic_port": "nic",
    "integrated_port": "nic",
    "transceiver": "transceiver",
    "switch_port": "switch",
    "programmable_switch_port": "switch",
    "fibre": "cable",
    "copper_cable": "cable",
    "ocs_port": "ocs",
    "patch_panel_port": "patch_panel",
}

PRESETS = ("topoopt-paper",)
"""Named price tables shipped with topoopt (``prices-<name>.yaml``, merged over the defaults)."""


def _gbps(bytes_per_s: float) -> float:
    return round(float(bytes_per_s) * 8.0 / 1e9, 6)


_speed_label = speed_label


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
                f"prices.{item}",
                gbps,
                f"a speed in {speeds[0]:g}..{speeds[-1]:g} Gbps (the speeds the price table "
                "lists: every fabric is priced, so a faster --link-gbps needs a --prices YAML "
                f"that lists {item} at that speed)",
            )
        by = {float(s): v for s, v in table.items()}
        capex = np.interp(gbps, speeds, [float(by[s]["capex_usd"]) for s in speeds])
        power = np.interp(gbps, speeds, [float(by[s]["power_w"]) for s in speeds])
        return float(capex), float(power)

    def speed_range(self, item: str = "switch_port") -> tuple[float, float]:
        """Lowest and highest listed speed of a speed-keyed section, Gbps."""
        s = sorted(float(x) for x in self.data[item])
        return s[0], s[-1]

    def source_of(self, item: str, gbps: float | None = None) -> str:
        """The ``source:`` text of an entry ('' when the table gives none).

        >>> load_prices().source_of("ocs_port").startswith("3-D MEMS")
        True
        """
        e = self.data[item] if gbps is None else self.data[item][float(gbps)]
        return str(e.get("source", ""))

    def catalogue(self) -> tuple[SwitchModel, ...]:
        """The switch configurations a buyer can order (``switch_catalogue``), by speed, radix.

        >>> [m.name for m in load_prices().catalogue() if m.gbps == 800]
        ['Tomahawk 5 64x800G']
        """
        models = [
            SwitchModel(str(m["name"]), int(m["radix"]), float(m["gbps"]), str(m.get("source", "")))
            for m in self.data.get("switch_catalogue", [])
        ]
        return tuple(sorted(models, key=lambda m: (m.gbps, m.radix, m.name)))

    def scaled(self, items: Iterable[str], factor: float) -> PriceTable:
        """A copy with the capex of ``items`` (sections or flat entries) times ``factor``.

        >>> load_prices().scaled(["switch_port"], 2.0).unit("switch_port", 100)
        (380.0, 6.0)
        """
        f = check_float("price factor", factor, 0.0, strict=False)
        data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.data.items()}
        for item in items:
            if item in SPEED_ITEMS:
                sec = data[item]
                data[item] = {s: {**e, "capex_usd": e["capex_usd"] * f} for s, e in sec.items()}
            elif item in FLAT_ITEMS:
                data[item] = {**data[item], "capex_usd": data[item]["capex_usd"] * f}
            else:
                names = ", ".join(SPEED_ITEMS + FLAT_ITEMS)
                raise InputError("price item", item, f"one of {names}")
        return PriceTable(data, f"{self.source} ({', '.join(items)} x {f:g})")


def _merge(base: dict, over: Mapping) -> dict:
    """``over`` (a table validated by :func:`topoopt.fabrics.price_schema.validate_price_table`)
    merged over ``base``: speed sections entry by entry, flat items and the switch catalogue
    replaced whole."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, val in over.items():
        if key == "version":
            continue
        if key in SPEED_ITEMS:
            out[key] = {**out.get(key, {}), **val}
        else:
            out[key] = val
    return out


@functools.lru_cache(maxsize=8)
def _packaged(name: str) -> dict:
    """A packaged table, parsed and validated by the same schema as a user's file, once per
    process (merged copies are made from it)."""
    text = resources.files("topoopt.fabrics").joinpath(name).read_text("utf-8")
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return validate_price_table(data, name)


def load_prices(path: str | Path | None = None, *, preset: str | None = None) -> PriceTable:
    """The default price table, with a named ``preset`` (:data:`PRESETS`) and then the entries
    of the YAML file ``path`` merged over it.

    >>> load_prices().unit("ocs_port")
    (500.0, 0.75)
    >>> load_prices(preset="topoopt-paper").source
    'preset topoopt-paper'
    """
    base = _merge({}, _packaged("prices.yaml"))
    source = "default"
    if preset is not None:
        if preset not in PRESETS:
            raise InputError("preset", preset, f"one of {', '.join(PRESETS)}")
        fname = f"prices-{preset}.yaml"
        base = _merge(base, _packaged(fname))
        source = f"preset {preset}"
    if path is None:
        return PriceTable(base, source)
    p = Path(path)
    over = load_price_file(p)  # strict YAML + schema (topoopt.fabrics.price_schema)
    return PriceTable(_merge(base, over), str(p))


def resolve_prices(prices: str | Path | None = None, preset: str | None = None) -> PriceTable:
    """The CLI's ``--prices`` / ``--preset``: ``prices`` is a YAML file or a preset name.

    >>> resolve_prices("topoopt-paper").source
    'preset topoopt-paper'
    """
    if prices is not None and str(prices) in PRESETS and not Path(prices).exists():
        if preset is not None and preset != str(prices):
            raise InputError("preset", preset, f"the same preset as --prices {prices}")
        return load_prices(preset=str(prices))
    if prices is not None and not Path(prices).exists():
        allowed = f"a price-table file or one of {', '.join(PRESETS)}"
        raise InputError("prices", str(prices), allowed)
    return load_prices(prices, preset=preset)


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
    if fabric.family == "rail-circuits":  # its NIC nodes are no switches: its own rules
        from topoopt.fabrics.rail_circuits import rail_circuits_bill_of_materials

        return rail_circuits_bill_of_materials(fabric)
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
    # circuits between two switches (an OCS spine): each end is a switch port with one
    # transceiver and one fibre to its OCS port
    first = np.arange(0, fabric.n_links, 2)
    sw_opt = first[fabric.link_kind[first] == "optical"]
    sw_opt = sw_opt[
        (fabric.node_kind[fabric.src[sw_opt]] == "switch")
        & (fabric.node_kind[fabric.dst[sw_opt]] == "switch")
    ]
    if sw_opt.size:
        per_o = fabric.capacity[sw_opt] / fabric.multiplicity[sw_opt]
        m_o = fabric.multiplicity[sw_opt]
        for bw in np.unique(per_o):
            add(f"transceiver_{_speed_label(_gbps(bw))}", 2 * m_o[per_o == bw].sum())
        add("fibre", 2 * m_o.sum())
    # cables of the electrical (non-circuit) layer: the first direction of each cable
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
    # switches that aggregate in the network (topoopt.flowsim.ina) are programmable ones
    port = "programmable_switch_port" if "ina_memory_bytes" in fabric.params else "switch_port"
    if sw.size:
        speed = np.zeros(fabric.n_nodes)
        member = fabric.capacity / fabric.multiplicity
        np.maximum.at(speed, fabric.src, member)
        for node in sw:
            g = _speed_label(_gbps(speed[node]))
            add(f"switch_{int(fabric.node_ports[node])}x{g}", 1)
            add(f"{port}_{g}", fabric.node_ports[node])
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

    @property
    def capex_by_component(self) -> dict[str, float]:
        """USD per component of :data:`COMPONENTS` (those present); sums to :attr:`capex_usd`."""
        return _by_component(self.capex_by_item)

    @property
    def power_by_component(self) -> dict[str, float]:
        """Watts per component of :data:`COMPONENTS` (those present); sums to :attr:`power_w`."""
        return _by_component(self.power_by_item)


def _by_component(by_item: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, v in by_item.items():
        item, _ = _item_of(key)
        comp = _COMPONENT_OF[item]
        out[comp] = out.get(comp, 0.0) + float(v)
    return {c: out[c] for c in COMPONENTS if c in out}


def price_bill_of_materials(
    bom: Mapping[str, int], prices: PriceTable | None = None, n_gpus: int = 0
) -> CostReport:
    """Capex and power of a bill of materials (keys as :func:`bill_of_materials`'s).

    >>> r = price_bill_of_materials({"switch_port_100G": 2, "fibre": 1})
    >>> r.capex_usd, r.capex_by_component
    (385.0, {'switch': 380.0, 'cable': 5.0})
    """
    prices = load_prices() if prices is None else prices
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
        bom=dict(bom),
        capex_usd=float(sum(capex.values())),
        power_w=float(sum(power.values())),
        capex_by_item=capex,
        power_by_item=power,
        compute_capex_usd=n_gpus * acc_c,
        compute_power_w=n_gpus * acc_p,
    )


def cost(fabric: Fabric, prices: PriceTable | None = None) -> CostReport:
    """Capex and power of ``fabric``'s network under ``prices`` (default table).

    ``compute_*`` fields price ``fabric.n_gpus`` accelerators for system-level fractions.

    Examples
    --------
    >>> from topoopt.fabrics import fat_tree
    >>> r = cost(fat_tree(4))
    >>> r.capex_by_item["switch_port_100G"] == 80 * 190.0
    True
    >>> sum(r.capex_by_component.values()) == r.capex_usd
    True
    """
    return price_bill_of_materials(bill_of_materials(fabric), prices, fabric.n_gpus)


@dataclass(frozen=True)
class _Step:
    """The cheapest catalogue Clos at one bandwidth per server (``ports`` NICs of ``gbps``)."""

    gbps: float
    plan: ClosPlan
    report: CostReport

    @property
    def ports(self) -> int:
        """NICs (ports) per server."""
        return self.plan.ports_per_server

    @property
    def server_gbps(self) -> float:
        """Bandwidth per server, Gbps."""
        return self.ports * self.gbps


def catalogue_steps(
    servers: int,
    prices: PriceTable | None = None,
    oversubscription: float = 1.0,
    max_ports: int = 1,
) -> list[_Step]:
    """Per bandwidth per server, the cheapest Clos (:func:`~topoopt.fabrics.catalogue.plan_clos`,
    one, two or three tiers) of the catalogue's models for ``servers`` servers of ``1 ..
    max_ports`` NICs each (every NIC at the switch's speed), keeping only bandwidths whose cost
    is below every higher bandwidth's (a buyer never pays more for less).

    >>> [(s.gbps, s.plan.tiers, s.plan.model.radix) for s in catalogue_steps(128)][-3:]
    [(200.0, 1, 128), (400.0, 1, 128), (800.0, 2, 64)]
    >>> [(s.ports, s.gbps) for s in catalogue_steps(128, max_ports=8)][-2:]
    [(7, 800.0), (8, 800.0)]
    """
    prices = load_prices() if prices is None else prices
    lo = max(prices.speed_range(item)[0] for item in SPEED_ITEMS)
    hi = min(prices.speed_range(item)[1] for item in SPEED_ITEMS)
    steps: dict[float, _Step] = {}
    for model in prices.catalogue():
        if not lo - 1e-9 <= model.gbps <= hi + 1e-9:
            continue
        for p in range(1, int(max_ports) + 1):
            plan = plan_clos(servers, model, oversubscription, ports_per_server=p)
            if plan is None:
                continue
            rep = price_bill_of_materials(plan_bill_of_materials(plan, model.gbps), prices)
            key = round(p * model.gbps, 6)
            best = steps.get(key)
            if best is None or (rep.capex_usd, plan.switch_ports, p) < (
                best.report.capex_usd,
                best.plan.switch_ports,
                best.ports,
            ):
                steps[key] = _Step(model.gbps, plan, rep)
    kept: list[_Step] = []
    for s in sorted(steps.values(), key=lambda s: -s.server_gbps):
        if not kept or s.report.capex_usd < kept[-1].report.capex_usd:
            kept.append(s)
    return kept[::-1]


@dataclass(frozen=True, eq=False)
class CostEquivalent:
    """A fat-tree whose capex matches a target: its fabric, the knob that was tuned, and (for
    the catalogue search) how it was bought (:attr:`info`)."""

    fabric: Fabric
    port_bandwidth: float
    oversubscription: float
    capex_usd: float
    target_capex_usd: float
    power_w: float = 0.0
    capex_breakdown: dict = field(default_factory=dict)
    power_breakdown: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def server_bandwidth(self) -> float:
        """Network bandwidth per server, bytes/s (one NIC port at :attr:`port_bandwidth`)."""
        return float(np.mean(self.fabric.server_bandwidth))


def _mix(a: Mapping[str, float], b: Mapping[str, float], t: float) -> dict[str, float]:
    keys = [c for c in COMPONENTS if c in a or c in b]
    return {c: (1 - t) * a.get(c, 0.0) + t * b.get(c, 0.0) for c in keys}


def _step_info(s: _Step, share: float | None = None) -> dict:
    d = {
        "gbps": s.gbps,
        "ports": s.ports,
        "server_gbps": s.server_gbps,
        "switch": s.plan.model.name,
        "tiers": s.plan.tiers,
        "switches": s.plan.switches,
        "switch_ports": s.plan.switch_ports,
        "capex_usd": s.report.capex_usd,
    }
    if share is not None:
        d["share"] = share
    return d


def _catalogue_equivalent(
    target: float,
    servers: int,
    oversubscription: float,
    gpus_per_server: int,
    prices: PriceTable,
    max_gbps: float | None = None,
    max_ports: int = 1,
    fluid_mix: bool = False,
) -> CostEquivalent:
    steps = catalogue_steps(servers, prices, oversubscription, max_ports)
    if not steps:
        raise InputError("servers", servers, "a cluster a three-tier Clos of the catalogue serves")
    costs = np.array([s.report.capex_usd for s in steps])
    speeds = np.array([s.server_gbps for s in steps])
    if target < costs[0] * (1 - 1e-12):
        raise InputError(
            "target_capex",
            target,
            f">= {costs[0]:,.0f} USD (the cheapest catalogue Clos for {servers} servers, "
            f"{steps[0].server_gbps:g} Gbps)",
        )
    ok = costs <= target * (1 + 1e-12)
    if max_gbps is not None:
        ok &= speeds <= max_gbps * (1 + 1e-12)
    if not ok.any():
        raise InputError("max_bandwidth", max_gbps, f">= {speeds[0]:g} Gbps per server")
    k = int(np.flatnonzero(ok)[-1])  # the fastest buildable uniform fabric within budget
    capped = None
    if k == len(steps) - 1:
        capped = "catalogue"
    elif max_gbps is not None and costs[k + 1] <= target * (1 + 1e-12):
        capped = "max_bandwidth"  # the budget buys more than the cap allows
    # the fluid bound: a share t of the next step, spending the budget exactly (not buildable
    # as one uniform fabric; reported, never simulated or priced)
    fluid = {"server_gbps": float(speeds[k]), "mix": [_step_info(steps[k], 1.0)]}
    t = 0.0
    if capped is None:
        t = float((target - costs[k]) / (costs[k + 1] - costs[k]))
        if max_gbps is not None and speeds[k] + t * (speeds[k + 1] - speeds[k]) > max_gbps:
            t = max(0.0, float((max_gbps - speeds[k]) / (speeds[k + 1] - speeds[k])))  # the cap
        fluid = {
            "server_gbps": float(speeds[k] + t * (speeds[k + 1] - speeds[k])),
            "mix": [_step_info(steps[k], 1.0 - t), _step_info(steps[k + 1], t)],
        }
    st = steps[k]
    bw = st.gbps * 1e9 / 8.0
    capex, power = st.report.capex_usd, st.report.power_w
    capex_b, power_b = st.report.capex_by_component, st.report.power_by_component
    if fluid_mix and capped is None and t > 0:
        # the fluid model (a bound): the deeper endpoint's shape at the mixed rate, the mixed
        # capex (the target); for sensitivity studies (topoopt.app.studies.breakeven)
        lo, hi = steps[k], steps[k + 1]
        deeper = (hi.plan.tiers, hi.plan.switch_ports) >= (lo.plan.tiers, lo.plan.switch_ports)
        st = hi if deeper else lo
        bw = fluid["server_gbps"] / st.ports * 1e9 / 8.0
        capex_b = _mix(lo.report.capex_by_component, hi.report.capex_by_component, t)
        power_b = _mix(lo.report.power_by_component, hi.report.power_by_component, t)
        capex, power = float(sum(capex_b.values())), float(sum(power_b.values()))
    fab = st.plan.fabric(bw, gpus_per_server=gpus_per_server)
    info = {
        "family": fab.family,
        "method": "catalogue",
        **st.plan.info(),
        "link_gbps": bw * 8.0 / 1e9,
        "server_bandwidth": bw * st.ports,
        "priced_as": "fluid mix (a bound)"
        if capex_b is not st.report.capex_by_component
        else "built",
        "target_capex_usd": target,
        "capped": capped,
        "max_gbps": max_gbps,
        "fluid_bound": fluid,
        "catalogue_steps": [_step_info(s) for s in steps],
    }
    return CostEquivalent(fab, bw, oversubscription, capex, target, power, capex_b, power_b, info)


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
    max_bandwidth: float | None = None,
    max_ports: int = 1,
    fluid_mix: bool = False,
) -> CostEquivalent:
    """TopoOpt's cost-equivalent fat-tree: the Clos fabric whose capex equals ``target_capex``.

    Parameters
    ----------
    target_capex : float
        USD to match (e.g. ``cost(optical_design).capex_usd``).
    servers : int
        Servers of the fat-tree.
    vary : {"bandwidth", "oversubscription"}
        ``bandwidth``: keep ``oversubscription`` (default 1, full bisection) and buy the fastest
        Clos the budget affords from the price table's switch catalogue
        (:func:`catalogue_steps`: per bandwidth per server, the cheapest one-, two- or
        three-tier Clos of the models, servers with 1 to ``max_ports`` NICs at the switch's
        speed). What is bought is buildable: one uniform speed, the fastest step whose capex is
        within the target (capex at or below it). The fluid speed mix that spends the target
        exactly (a share ``t`` of the next step, bandwidth ``(1 - t) s_k + t s_{k+1}``) cannot
        be bought as one fabric: it is reported as a bound in ``info["fluid_bound"]``; with
        ``fluid_mix`` (sensitivity studies only) the bound is what is returned: the deeper
        endpoint's shape at the mixed rate, capex the target (``info["priced_as"]``).
        Above the fastest catalogue step the fabric is that step (``info["capped"] ==
        "catalogue"``); with ``max_bandwidth`` (bytes/s per server) it never buys more than
        that (``info["capped"] == "max_bandwidth"``: ``compare`` passes the ideal switch's
        ``degree x B``, so the ideal switch stays a bound).
        ``oversubscription``: keep ``port_bandwidth`` and return the smallest oversubscription
        whose capex does not exceed the target, among ``(k/2)/u`` for a k-ary fat-tree (every
        uplink count ``u``) or :data:`OVERSUBSCRIPTION_STEPS` for a leaf-spine (``family``,
        ``k``, ``radix`` and ``port_bandwidth`` are used by this mode only).

    Returns
    -------
    CostEquivalent
        With ``info``: tiers, switch model, counts per tier, NICs per server, link rate,
        oversubscription, bandwidth per server, the fluid bound and every catalogue step
        (``vary="bandwidth"``).

    Raises
    ------
    InputError
        When no fabric of the catalogue / family can match the target.

    Examples
    --------
    >>> ref = cost(leaf_spine(64, port_bandwidth=25e9)).capex_usd
    >>> eq = cost_equivalent_fat_tree(ref, 64)
    >>> round(eq.port_bandwidth * 8 / 1e9, 6), eq.info["tiers"], eq.info["switch"]
    (200.0, 1, 'Tomahawk 3 64x200G')
    """
    target = check_float("target_capex", target_capex)
    prices = load_prices() if prices is None else prices
    r = check_float("oversubscription", oversubscription, 1.0, strict=False)
    if vary == "bandwidth":
        cap = None if max_bandwidth is None else check_float("max_bandwidth", max_bandwidth)
        mg = None if cap is None else cap * 8.0 / 1e9
        return _catalogue_equivalent(
            target, servers, r, gpus_per_server, prices, mg, max_ports, fluid_mix
        )
    if vary != "oversubscription":
        raise InputError("vary", vary, "bandwidth or oversubscription")

    def build(rr: float) -> Fabric:
        if family == "leaf-spine":
            return leaf_spine(
                servers,
                rr,
                radix=radix,
                port_bandwidth=port_bandwidth,
                gpus_per_server=gpus_per_server,
            )
        if family == "fat-tree":
            if k is None:
                raise InputError("k", None, "the fat-tree radix for family fat-tree")
            return fat_tree(
                k,
                servers,
                oversubscription=rr,
                port_bandwidth=port_bandwidth,
                gpus_per_server=gpus_per_server,
            )
        raise InputError("family", family, "leaf-spine or fat-tree")

    if family == "fat-tree" and k is not None:
        cands = sorted({(k / 2) / u for u in range(1, k // 2 + 1)})
    else:
        cands = list(OVERSUBSCRIPTION_STEPS)
    for rr in cands:
        fab = build(rr)
        rep = cost(fab, prices)
        if rep.capex_usd <= target * (1 + 1e-12):
            return CostEquivalent(
                fab,
                port_bandwidth,
                rr,
                rep.capex_usd,
                target,
                rep.power_w,
                rep.capex_by_component,
                rep.power_by_component,
                {"family": fab.family, "method": "oversubscription", "oversubscription": rr},
            )
    raise InputError("target_capex", target, "enough for the most oversubscribed fabric")
