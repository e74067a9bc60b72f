"""Anchors on their papers' own configurations (issue 26 item 5; ``docs/anchors.md``).

Prices two published systems with topoopt's bill-of-materials rules and the default price table
(``topoopt/fabrics/prices.yaml``), simulates a third claim's designs, and prints every count,
share and ratio; asserts nothing:

- ``tpu-v4``: the TPU v4 supercomputer (Jouppi et al., ISCA'23): 4,096 chips, 64 cubes of
  4x4x4 wired in copper, the faces of every cube joined through 48 Palomar OCSes of 136 ports
  into a 16x16x16 3-D torus (:func:`topoopt.fabrics.tpu_v4_torus`). The paper's claim: the OCSes
  and their optical components are under 5 % of system cost and under 3 % of system power.
  Printed: the optical share under the default table's accelerator (A100/TPU-v4 class with its
  host share, $12,000 / 450 W), under a TPU v4 chip's published maximum power (192 W, Google
  Cloud's TPU v4 documentation; no price is published, so the default capex is kept), and the
  break-even figures (the accelerator capex and power, or the fraction of commodity optics
  prices and power, at which the shares fall to 5 % and 3 %).
- ``jupiter``: a Jupiter fabric (Singh et al., SIGCOMM'15 "Jupiter Rising": 64 aggregation
  blocks of 512 uplinks, 1.3 Pb/s at 40 G; Poutievski et al., SIGCOMM'22 "Jupiter Evolving":
  the spine blocks replaced by an OCS layer, ~30 % capex and ~41 % power saved) built from the
  catalogue's 64-port switches: every block a two-tier pod of 16 leaves and 16 aggregation
  switches (512 servers of one port below, 512 uplinks above). With spine blocks: the
  three-tier full-bisection Clos of the same switch model
  (:func:`topoopt.fabrics.catalogue.plan_clos`); without: :func:`topoopt.fabrics.ocs_spine` with
  64 pods on Palomar OCSes (2 ports a pod on each of 256 OCSes). Printed for 100, 200, 400 and
  800 G (Tomahawk 2 64x100G, Tomahawk 3 64x200G, Tomahawk 4 64x400G, Tomahawk 5 64x800G),
  whole network and the layer above the aggregation switches alone. At 40 G (Jupiter Rising's
  generation) the catalogue's switch is the Trident 2 32x40G, whose three-tier Clos holds at
  most 8,192 servers: ``--gbps 40 --blocks 32 --uplinks 256`` prices that fabric (32 blocks of
  16 leaves and 16 aggregation switches), a quarter of Jupiter's 64 x 512.
- ``delta``: DELTA (Ye et al., arXiv 2603.28096: a static OCS topology from the job's DAG, up to
  17.5 % less communication than traffic-matrix designs and at least 20 % fewer optical ports
  at the same iteration). Only its abstract is reachable, so the configuration is ours: a plan
  (default GPT-3 175B on 1,024 H100 GPUs, ``advise``'s scaling) on ``d`` optical ports a server
  for each ``--degrees``, the traffic-matrix design ``topoopt`` against ``joint``; printed per
  design the iteration, the critical-path communication (all of it and the network's share),
  the circuits carrying no byte, and the fewest ports at which ``joint`` keeps ``topoopt``'s
  iteration at the largest degree. Minutes of CPU a degree at 1,024 GPUs (under 3 GB).

Usage::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_anchors.py tpu-v4
    PYTHONPATH=. .venv/bin/python benchmarks/bench_anchors.py jupiter [--gbps 100 200 400]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_anchors.py jupiter --gbps 40 \
        --blocks 32 --uplinks 256
    PYTHONPATH=. .venv/bin/python benchmarks/bench_anchors.py delta [--gbps 400] [--degrees 8 7 6]
"""

from __future__ import annotations

import argparse
import time

from topoopt.fabrics import tpu_v4_torus
from topoopt.fabrics.catalogue import SwitchModel, plan_bill_of_materials, plan_clos
from topoopt.fabrics.cost import (
    CostReport,
    PriceTable,
    bill_of_materials,
    load_prices,
    price_bill_of_materials,
)
from topoopt.fabrics.ocs_spine import ocs_spine
from topoopt.units import gbps_to_bytes_per_s

TPU_V4_MAX_POWER_W = 192.0
"""TPU v4 chip maximum power (Google Cloud TPU v4 documentation: "192 W maximum")."""

JUPITER_BLOCKS = 64
"""Aggregation blocks of a Jupiter fabric (Jupiter Rising, SIGCOMM'15: 64 blocks x 512 x 40 G)."""

JUPITER_UPLINKS = 512
"""Uplinks of one Jupiter aggregation block (Jupiter Rising, SIGCOMM'15)."""

OPTICAL_ITEMS = ("ocs_port", "transceiver", "fibre")


def _less(new: float, old: float) -> str:
    """``12.3 % less`` or ``4.0 % more``: ``new`` against ``old``."""
    d = 100 * (1 - new / old)
    return f"{d:.1f} % less" if d >= 0 else f"{-d:.1f} % more"


def with_accelerator(table: PriceTable, capex_usd: float, power_w: float, note: str) -> PriceTable:
    """``table`` with its ``accelerator`` entry replaced (the other entries untouched)."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in table.data.items()}
    data["accelerator"] = {"capex_usd": capex_usd, "power_w": power_w, "source": note}
    return PriceTable(data, f"{table.source}, accelerator {note}")


def optical_share(r: CostReport) -> dict:
    """OCS ports, transceivers and fibres (the optical path) against the whole system."""
    keys = [k for k in r.capex_by_item if k.startswith(OPTICAL_ITEMS)]
    oc = sum(r.capex_by_item[k] for k in keys)
    op = sum(r.power_by_item[k] for k in keys)
    ocs_c = sum(v for k, v in r.capex_by_item.items() if k.startswith("ocs_port"))
    ocs_p = sum(v for k, v in r.power_by_item.items() if k.startswith("ocs_port"))
    return {
        "optics_capex_usd": oc,
        "optics_power_w": op,
        "capex_share": oc / r.system_capex_usd,
        "power_share": op / r.system_power_w,
        "ocs_capex_share": ocs_c / r.system_capex_usd,
        "ocs_power_share": ocs_p / r.system_power_w,
    }


def tpu_v4(table: PriceTable | None = None, dims: str = "16x16x16") -> dict:
    """TPU v4 pod priced: bill of materials, shares, and the break-even figures.

    Break-even (``s`` the claimed share, ``O`` the optical cost, ``N`` the rest of the network,
    ``n`` chips): accelerator capex ``a* = (O / s - O - N) / n``; optics price factor
    ``f* = s (N + n a) / ((1 - s) O)`` (commodity optics scaled by ``f*`` give share ``s``).
    """
    table = load_prices() if table is None else table
    fab = tpu_v4_torus(dims)
    r = price_bill_of_materials(bill_of_materials(fab), table, fab.n_gpus)
    sh = optical_share(r)
    n = fab.n_gpus
    oc, op = sh["optics_capex_usd"], sh["optics_power_w"]
    rest_c, rest_p = r.capex_usd - oc, r.power_w - op
    acc_c, acc_p = table.unit("accelerator")
    return {
        "chips": n,
        "bom": r.bom,
        "network_capex_usd": r.capex_usd,
        "network_power_w": r.power_w,
        "accelerator": (acc_c, acc_p),
        **sh,
        "break_even_accelerator_usd": (oc / 0.05 - oc - rest_c) / n,
        "break_even_accelerator_w": (op / 0.03 - op - rest_p) / n,
        "break_even_optics_price_factor": 0.05 * (rest_c + n * acc_c) / (0.95 * oc),
        "break_even_optics_power_factor": 0.03 * (rest_p + n * acc_p) / (0.97 * op),
    }


def jupiter_pair(
    model: SwitchModel,
    blocks: int = JUPITER_BLOCKS,
    uplinks: int = JUPITER_UPLINKS,
    table: PriceTable | None = None,
) -> dict:
    """A Jupiter-sized fabric with spine blocks (three-tier Clos) and with an OCS layer instead.

    Servers of one port: ``blocks * uplinks`` (every block non-blocking: as many servers below
    as uplinks above). Returns both cost reports and the layer above the aggregation switches
    of each (the spine tier: core switch ports with their cables' transceivers and fibres; the
    OCS layer: OCS ports with the aggregation side's transceiver and fibre).
    """
    table = load_prices() if table is None else table
    n = blocks * uplinks
    g = model.gbps
    clos = plan_clos(n, model)
    if clos is None or clos.tiers != 3:
        raise ValueError(f"{n} servers on {model.name}: no three-tier Clos")
    rc = price_bill_of_materials(plan_bill_of_materials(clos, g), table)
    fab = ocs_spine(n, model.radix, pods=blocks, port_bandwidth=g * 1e9 / 8)
    ro = price_bill_of_materials(bill_of_materials(fab), table)
    sw_c, sw_p = table.unit("switch_port", g)
    tr_c, tr_p = table.unit("transceiver", g)
    fi_c, fi_p = table.unit("fibre")
    oc_c, oc_p = table.unit("ocs_port")
    sh = clos.shape
    core_ports = sh.cores * sh.spine_radix
    core_cables = n  # full bisection: every server's bandwidth crosses the aggregation-core tier
    spine_c = core_ports * sw_c + core_cables * (2 * tr_c + fi_c)
    spine_p = core_ports * sw_p + core_cables * (2 * tr_p + fi_p)
    info = fab.params
    ocs_ports = info["ocses"] * info["ocs_radix"]
    ends = 2 * info["circuits"]  # an aggregation port's transceiver and fibre per circuit end
    layer_c = ocs_ports * oc_c + ends * (tr_c + fi_c)
    layer_p = ocs_ports * oc_p + ends * (tr_p + fi_p)
    return {
        "servers": n,
        "clos": rc,
        "ocs": ro,
        "clos_shape": {
            "leaves": sh.leaves, "pods": sh.pods, "aggregation": sh.pods * sh.uplinks,
            "cores": sh.cores, "core_ports": core_ports,
        },
        "ocs_shape": {
            "leaves": info["leaves"], "pods": info["pods"], "aggregation": info["aggregation"],
            "ocses": info["ocses"], "ocs_ports": ocs_ports, "circuits": info["circuits"],
        },
        "spine_layer": (spine_c, spine_p),
        "ocs_layer": (layer_c, layer_p),
    }  # fmt: skip


def _tpu(_a) -> None:
    base = load_prices()
    chip = with_accelerator(
        base, base.unit("accelerator")[0], TPU_V4_MAX_POWER_W,
        "TPU v4 192 W maximum (Google Cloud TPU v4 documentation); capex kept at the default",
    )  # fmt: skip
    for name, table in (
        ("default table (A100/TPU-v4 class, host share)", base),
        ("TPU v4 chip", chip),
    ):
        t0 = time.process_time()
        r = tpu_v4(table)
        acc_c, acc_p = r["accelerator"]
        print(f"== {name}: accelerator ${acc_c:,.0f} / {acc_p:g} W")
        print(f"   {r['chips']} chips; BOM {r['bom']}")
        print(
            f"   network {r['network_capex_usd'] / 1e6:.3f} M$ /"
            f" {r['network_power_w'] / 1e3:.1f} kW;"
            f" optics (OCS ports + transceivers + fibres) {r['optics_capex_usd'] / 1e6:.3f} M$ /"
            f" {r['optics_power_w'] / 1e3:.1f} kW"
        )
        print(
            f"   optics share of system: capex {100 * r['capex_share']:.2f} %, power"
            f" {100 * r['power_share']:.2f} % (OCSes alone {100 * r['ocs_capex_share']:.2f} %,"
            f" {100 * r['ocs_power_share']:.2f} %)"
        )
        print(
            f"   break-even: < 5 % of capex from an accelerator of"
            f" ${r['break_even_accelerator_usd']:,.0f} (or optics at"
            f" {r['break_even_optics_price_factor']:.3f}x commodity prices); < 3 % of power from"
            f" {r['break_even_accelerator_w']:.0f} W a chip (or optics at"
            f" {r['break_even_optics_power_factor']:.3f}x commodity power)"
        )
        print(f"   {time.process_time() - t0:.2f} s CPU")


MODELS = {
    40.0: SwitchModel("Trident 2 32x40G", 32, 40.0),
    100.0: SwitchModel("Tomahawk 2 64x100G", 64, 100.0),
    200.0: SwitchModel("Tomahawk 3 64x200G", 64, 200.0),
    400.0: SwitchModel("Tomahawk 4 64x400G", 64, 400.0),
    800.0: SwitchModel("Tomahawk 5 64x800G", 64, 800.0),
}


def _jupiter(a) -> None:
    for gbps in a.gbps:
        t0 = time.process_time()
        model = MODELS[gbps]
        try:
            r = jupiter_pair(model, a.blocks, a.uplinks)
        except ValueError as e:
            k = model.radix
            print(
                f"== {a.blocks} blocks x {a.uplinks} uplinks at {gbps:g} G: not buildable ({e});"
                f" the largest three-tier Clos of this switch has {k} pods of {k * k // 4}"
                f" servers: run --gbps {gbps:g} --blocks {k} --uplinks {k * k // 4}"
            )
            continue
        c, o = r["clos"], r["ocs"]
        print(f"== {a.blocks} blocks x {a.uplinks} uplinks at {gbps:g} G ({r['servers']} servers)")
        print(f"   Clos with spine blocks {r['clos_shape']}")
        print(f"   OCS layer instead      {r['ocs_shape']}")
        print(
            f"   capex {c.capex_usd / 1e6:.3f} -> {o.capex_usd / 1e6:.3f} M$"
            f" ({_less(o.capex_usd, c.capex_usd)}); power"
            f" {c.power_w / 1e3:.1f} -> {o.power_w / 1e3:.1f} kW ({_less(o.power_w, c.power_w)})"
        )
        nc, no = c.capex_by_component.get("nic", 0.0), o.capex_by_component.get("nic", 0.0)
        npc, npo = c.power_by_component.get("nic", 0.0), o.power_by_component.get("nic", 0.0)
        print(
            f"   without the NICs: capex {_less(o.capex_usd - no, c.capex_usd - nc)}, power"
            f" {_less(o.power_w - npo, c.power_w - npc)}"
        )
        (sc, sp), (lc, lp) = r["spine_layer"], r["ocs_layer"]
        print(
            f"   layer above the aggregation switches: spine {sc / 1e6:.3f} M$ / {sp / 1e3:.1f} kW"
            f" vs OCS layer {lc / 1e6:.3f} M$ / {lp / 1e3:.1f} kW"
            f" (capex {_less(lc, sc)}, power {_less(lp, sp)})"
        )
        oc = o.capex_by_component.get("ocs", 0.0)
        even = (c.capex_usd - (o.capex_usd - oc)) / o.bom["ocs_port"]
        print(
            f"   with free OCSes: capex {_less(o.capex_usd - oc, c.capex_usd)}; the OCS layer"
            f" breaks even at ${even:,.0f} an OCS port;"
            f" the spine is {100 * sc / c.capex_usd:.1f} % of the Clos's capex,"
            f" {100 * sp / c.power_w:.1f} % of its power"
        )
        print(
            "   capex M$ Clos", {k: round(v / 1e6, 3) for k, v in c.capex_by_component.items()},
            "OCS", {k: round(v / 1e6, 3) for k, v in o.capex_by_component.items()},
        )  # fmt: skip
        print(f"   {time.process_time() - t0:.2f} s CPU")


DELTA_CLAIM_COMM = 0.175
"""DELTA (arXiv 2603.28096): "reduces communication time by up to 17.5 %" against
traffic-matrix-based designs."""

DELTA_CLAIM_PORTS = 0.20
"""DELTA: "reduces optical port consumption by at least 20 %" without a longer iteration."""


def circuit_use(fabric, links) -> dict:
    """Circuits of a direct-connect ``fabric`` and how many carry no byte in an iteration.

    ``links`` is the iteration's link table (:attr:`IterationResult.links`: one row per
    directed link, its ``capacity`` the sum of its parallel circuits). A server pair joined by
    ``m`` circuits of ``B`` bytes/s has ``capacity = m B`` each way; the pair's circuits are idle
    when neither direction carries a byte. Returns the circuits, the idle ones and the optical
    ports (two per circuit) in use.
    """
    opt = links[links["kind"] == "optical"]
    b = float(fabric.optical_port_bandwidth)
    pairs: dict[tuple[int, int], list[float]] = {}
    for s, d, cap, by in zip(opt["src"], opt["dst"], opt["capacity"], opt["bytes"], strict=True):
        key = (min(int(s), int(d)), max(int(s), int(d)))
        m = round(float(cap) / b)
        e = pairs.setdefault(key, [m, 0.0])
        e[1] += float(by)
    circuits = sum(m for m, _ in pairs.values())
    idle = sum(m for m, by in pairs.values() if by <= 0.0)
    return {"circuits": circuits, "idle_circuits": idle, "ports_in_use": 2 * (circuits - idle)}


def delta_rows(plan, degrees, gbps: float, time_limit_s: float = 600.0) -> list[dict]:
    """``plan`` on the traffic-matrix design (``topoopt``: TopoOpt's TotientPerms rings and its
    traffic-matrix circuits) and on ``joint`` (circuits and routes against each phase's traffic),
    ``d`` optical ports a server for each ``d`` of ``degrees``, ``gbps`` a port. One row a
    (fabric, degree): iteration, communication on the critical path (``comm_s``), exposed
    communication, capex and the circuits' use (:func:`circuit_use`)."""
    from topoopt.app.studies.compare import compare
    from traffic.build import workload_from_plan

    w = workload_from_plan(plan)
    out = []
    for d in degrees:
        t0 = time.process_time()
        res = compare(
            w, ("ideal", "topoopt", "joint"), d, gbps_to_bytes_per_s(gbps),
            time_limit_s=time_limit_s,
        )  # fmt: skip
        cpu = time.process_time() - t0
        tab = res.table.set_index("fabric")
        runs = {r.name: r for r in res.runs}
        for name in ("ideal", "topoopt", "joint"):
            r = tab.loc[name]
            row = {
                "fabric": name, "degree": d, "gbps": gbps,
                "iteration_s": float(r["iteration_s"]), "comm_s": float(r["comm_s"]),
                "exposed_comm_s": float(r["exposed_comm_s"]),
                "capex_usd": float(r["capex_usd"]), "cpu_s": cpu,
                "deterministic": r.get("deterministic"), "stopped_by": r.get("stopped_by"),
                "comm_by_class": dict(res.iterations[name].comm_by_class),
            }  # fmt: skip
            if name != "ideal":
                row.update(circuit_use(runs[name].fabric, res.iterations[name].links))
            out.append(row)
    return out


def network_comm_s(row: dict, intra: tuple[str, ...] = ("tp",)) -> float:
    """Communication on the critical path less its ``intra`` classes (tensor parallelism inside
    a server, on NVLink whatever the network): the seconds an optical design can change."""
    by_class = row.get("comm_by_class") or {}
    return row["comm_s"] - sum(by_class.get(c, 0.0) for c in intra)


def delta_summary(rows: list[dict], full: int) -> dict:
    """DELTA's two figures from :func:`delta_rows`: the communication saved by ``joint`` against
    the traffic-matrix design at ``full`` ports a server (all of it, and the network's share,
    :func:`network_comm_s`), and the fewest ports a server at which ``joint`` is no slower than
    the traffic-matrix design at ``full`` (``None``: none measured).
    """
    by = {(r["fabric"], r["degree"]): r for r in rows}
    base, j = by[("topoopt", full)], by[("joint", full)]
    ideal = by[("ideal", full)]
    net = network_comm_s
    fewest = None
    for (f, d), r in sorted(by.items(), key=lambda kv: kv[0][1]):
        if f == "joint" and r["iteration_s"] <= base["iteration_s"] * (1 + 1e-9):
            fewest = d if fewest is None else min(fewest, d)
    return {
        "comm_saved": 1 - j["comm_s"] / base["comm_s"],
        "iteration_saved": 1 - j["iteration_s"] / base["iteration_s"],
        "ideal_comm_saved": 1 - ideal["comm_s"] / base["comm_s"],
        "network_comm_saved": 1 - net(j) / net(base),
        "ideal_network_comm_saved": 1 - net(ideal) / net(base),
        "fewest_ports": fewest,
        "ports_saved": None if fewest is None else 1 - fewest / full,
    }


def _delta(a) -> None:
    from topoopt.app.studies.advise import scale_plan
    from traffic.plan import load_plan

    plan = scale_plan(load_plan(a.plan), a.gpus, a.gpu)
    print(
        f"== DELTA: {a.plan} on {a.gpus} GPUs ({plan.cluster.servers} servers, {a.gpu}),"
        f" {a.gbps:g} G ports, degrees {a.degrees}"
    )
    rows = delta_rows(plan, a.degrees, a.gbps, a.time_limit)
    for r in rows:
        use = (
            f" circuits {r['circuits']}, idle {r['idle_circuits']},"
            f" ports in use {r['ports_in_use']}"
            if "circuits" in r
            else ""
        )
        print(
            f"   {r['fabric']:8s} d={r['degree']}: iteration {r['iteration_s']!r} s, comm"
            f" {r['comm_s']!r} s, exposed {r['exposed_comm_s']!r} s, capex"
            f" {r['capex_usd'] / 1e6:.3f} M$;{use} (deterministic {r['deterministic']},"
            f" stopped by {r['stopped_by']}; {r['cpu_s']:.1f} s CPU for the degree)"
        )
        print(
            "      critical path by class (s):",
            {k: round(v, 6) for k, v in r["comm_by_class"].items()},
        )
    full = max(a.degrees)
    s = delta_summary(rows, full)
    fp = s["fewest_ports"]
    print(
        f"   joint against the traffic-matrix design at {full} ports:"
        f" {100 * s['comm_saved']:.2f} % less communication on the critical path"
        f" ({100 * s['iteration_saved']:.3f} % shorter iteration; the ideal switch"
        f" {100 * s['ideal_comm_saved']:.2f} % less; DELTA claims up to"
        f" {100 * DELTA_CLAIM_COMM:.1f} %)"
    )
    print(
        f"   network communication on the critical path (less tensor parallelism on NVLink):"
        f" {100 * s['network_comm_saved']:.2f} % less with joint (the ideal switch"
        f" {100 * s['ideal_network_comm_saved']:.2f} % less)"
    )
    print(
        "   fewest ports a server with joint no slower than the traffic-matrix design at"
        f" {full}: " + ("none measured" if fp is None else
                        f"{fp} ({100 * s['ports_saved']:.1f} % fewer; DELTA claims at least"
                        f" {100 * DELTA_CLAIM_PORTS:.0f} %)")
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="anchor", required=True)
    sub.add_parser("tpu-v4").set_defaults(run=_tpu)
    j = sub.add_parser("jupiter")
    j.add_argument("--gbps", type=float, nargs="+", default=[100.0, 200.0, 400.0, 800.0])
    j.add_argument("--blocks", type=int, default=JUPITER_BLOCKS)
    j.add_argument("--uplinks", type=int, default=JUPITER_UPLINKS)
    j.set_defaults(run=_jupiter)
    d = sub.add_parser("delta")
    d.add_argument("--plan", default="gpt3-175b")
    d.add_argument("--gpus", type=int, default=1024)
    d.add_argument("--gpu", default="h100-sxm")
    d.add_argument("--gbps", type=float, default=400.0)
    d.add_argument("--degrees", type=int, nargs="+", default=[8, 7, 6])
    d.add_argument("--time-limit", type=float, default=600.0)
    d.set_defaults(run=_delta)
    a = ap.parse_args()
    a.run(a)


if __name__ == "__main__":
    main()
