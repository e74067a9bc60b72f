"""``topoopt fabric KIND ...``: build a fabric, print its size, bisection, diameter, BOM, cost.

Kinds: ideal, fat-tree, leaf-spine, rail, torus, tpu-v4, direct, expander, hybrid. Bandwidths are
given in Gbps and delays in ms here (the edge); the library works in bytes/s and seconds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from topoopt.app.cli.choices import Device, ElectricalKind
from topoopt.app.cli.common import (
    PresetOption,
    PricesOption,
    emit_json,
    handle_errors,
    prepare_output,
    stdout,
    write_output_text,
    write_output_with,
)
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError

__all__ = ["register", "fabric_app", "fabric_report"]

fabric_app = typer.Typer(
    name="fabric",
    help="Build a fabric and report size, bisection bandwidth, diameter, BOM, capex and power.",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="Draw the fabric into this file")]
GraphmlOpt = Annotated[
    Path | None,
    typer.Option("--graphml", help="Write the fabric as GraphML (node types, capacity, count)"),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite the --html file")]
GbpsOpt = Annotated[float, typer.Option("--link-gbps", help="Port / link bandwidth, Gbps")]
GpusOpt = Annotated[int, typer.Option("--gpus-per-server", help="Accelerators per server")]


def fabric_report(
    fabric, prices_path: str | Path | None = None, preset: str | None = None
) -> dict[str, Any]:
    """The JSON-able report of a fabric (sizes, bisection, diameter, BOM, capex, power), priced
    as ``compare`` prices (``--prices`` a file or a preset name, ``--preset``)."""
    from topoopt.fabrics import bisection, cost, diameter
    from topoopt.fabrics.cost import resolve_prices

    prices = resolve_prices(prices_path, None if preset is None else str(preset))
    rep = cost(fabric, prices)
    bis = bisection(fabric)
    try:
        diam: int | None = diameter(fabric)
    except InputError as exc:
        print(f"note: {exc}", file=sys.stderr)
        diam = None
    s = fabric.summary()
    return {
        "family": fabric.family,
        "params": fabric.params,
        "servers": s["servers"],
        "gpus": s["gpus"],
        "switches": s["switches"],
        "ocs": s["ocs"],
        "patch_panels": s["patch_panels"],
        "links": s["links"],
        "bisection_bandwidth": bis.bandwidth,
        "bisection_method": bis.method,
        "diameter": diam,
        "reconfiguration_delay_s": fabric.reconfiguration_delay,
        "bom": rep.bom,
        "capex_usd": rep.capex_usd,
        "power_w": rep.power_w,
        "prices": prices.source,
    }


def _finish(
    fabric,
    as_json: bool,
    html: Path | None,
    force: bool,
    prices: str | None,
    graphml: Path | None = None,
    preset: str | None = None,
) -> None:
    out = prepare_output(html, force, "--html")
    gml = prepare_output(graphml, force, "--graphml")
    report = fabric_report(fabric, prices, preset)
    if gml is not None:
        from topoopt.exports.graphml import write_graphml

        write_output_with(gml, lambda tmp: write_graphml(fabric, tmp))
    if out is not None:
        from topoopt.app.report.fabric_figure import DIV_ID, fabric_figure
        from topoopt.app.report.html import page_html

        title = f"topoopt fabric: {fabric.family}, {fabric.n_servers} servers"
        summary = _summary_frame(report)
        write_output_text(
            out, page_html([(DIV_ID, fabric_figure(fabric))], title, summary=[("Fabric", summary)])
        )
    if as_json:
        emit_json(report)
        return
    table = Table(title=f"{report['family']} fabric")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    bis_gbps = report["bisection_bandwidth"] * 8 / 1e9
    rows = [
        ("servers", report["servers"]),
        ("switches", report["switches"]),
        ("OCS / patch panels", f"{report['ocs']} / {report['patch_panels']}"),
        ("physical links", report["links"]),
        ("bisection", f"{bis_gbps:,.1f} Gbps ({report['bisection_method']})"),
        ("diameter (server hops)", report["diameter"]),
        ("capex", f"${report['capex_usd']:,.0f}"),
        ("power", f"{report['power_w']:,.0f} W"),
    ]
    for k, v in rows:
        table.add_row(k, str(v))
    stdout.print(table)
    bom = Table(title="bill of materials")
    bom.add_column("component")
    bom.add_column("count", justify="right")
    for k, v in report["bom"].items():
        bom.add_row(k, f"{v:,}")
    stdout.print(bom)


def _summary_frame(report: dict[str, Any]):
    """The report's headline numbers as a one-row table (the top of the --html page)."""
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "family": report["family"],
                "servers": report["servers"],
                "switches": report["switches"],
                "OCS / patch panels": f"{report['ocs']} / {report['patch_panels']}",
                "links": report["links"],
                "bisection Gbps": report["bisection_bandwidth"] * 8 / 1e9,
                "diameter": "-" if report["diameter"] is None else report["diameter"],
                "capex USD": report["capex_usd"],
                "power W": report["power_w"],
            }
        ]
    )


def _circuits(path: Path | None):
    if path is None:
        return None
    from topoopt.fabrics import load_circuits

    return load_circuits(path)


@fabric_app.command("ideal")
@handle_errors
def ideal_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    degree: Annotated[int, typer.Option("--degree", help="Ports per server")] = 1,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """One non-blocking switch (the bound)."""
    from topoopt.fabrics import ideal

    f = ideal(servers, degree, gbps_to_bytes_per_s(link_gbps), gpus_per_server=gpus_per_server)
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("fat-tree")
@handle_errors
def fat_tree_cmd(
    k: Annotated[int, typer.Option("--k", help="Switch radix (even)")],
    servers: Annotated[int | None, typer.Option("--servers", help="Servers (<= k^3/4)")] = None,
    oversubscription: Annotated[float, typer.Option(help="Edge-layer oversubscription")] = 1.0,
    agg_oversubscription: Annotated[
        float, typer.Option(help="Aggregation-layer oversubscription")
    ] = 1.0,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """k-ary three-tier fat-tree."""
    from topoopt.fabrics import fat_tree

    f = fat_tree(
        k,
        servers,
        oversubscription=oversubscription,
        agg_oversubscription=agg_oversubscription,
        port_bandwidth=gbps_to_bytes_per_s(link_gbps),
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("leaf-spine")
@handle_errors
def leaf_spine_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    oversubscription: Annotated[float, typer.Option(help="Leaf oversubscription")] = 1.0,
    radix: Annotated[int, typer.Option(help="Switch ports")] = 64,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    nics: Annotated[int, typer.Option(help="NICs (ports) per server, all on its leaf")] = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """Leaf-spine Clos: one, two or three tiers as the server count and radix require."""
    from topoopt.fabrics import leaf_spine

    f = leaf_spine(
        servers,
        oversubscription,
        radix=radix,
        ports_per_server=nics,
        port_bandwidth=gbps_to_bytes_per_s(link_gbps),
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("rail")
@handle_errors
def rail_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    gpus_per_server: Annotated[
        int, typer.Option("--gpus-per-server", help="GPUs (= rails, NIC ports) per server")
    ] = 8,
    oversubscription: Annotated[float, typer.Option(help="Leaf oversubscription")] = 1.0,
    radix: Annotated[int, typer.Option(help="Switch ports")] = 64,
    link_gbps: GbpsOpt = 100.0,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """Rail-optimised two-tier fabric (GPU i of every server on rail i)."""
    from topoopt.fabrics import rail_optimized

    f = rail_optimized(
        servers,
        gpus_per_server,
        oversubscription,
        radix=radix,
        port_bandwidth=gbps_to_bytes_per_s(link_gbps),
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("torus")
@handle_errors
def torus_cmd(
    dims: Annotated[str, typer.Option("--dims", help="Sizes, e.g. 4x4x4")],
    twist: Annotated[bool, typer.Option(help="Twisted wrap-around")] = False,
    links_per_dim: Annotated[int, typer.Option(help="Parallel links per neighbour")] = 1,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """1-, 2- or 3-D wrap-around torus, one server per node."""
    from topoopt.fabrics import torus

    f = torus(
        dims,
        gbps_to_bytes_per_s(link_gbps),
        links_per_dim=links_per_dim,
        twist=twist or None,
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("tpu-v4")
@handle_errors
def tpu_cmd(
    dims: Annotated[str, typer.Option("--dims", help="Torus shape in chips (multiples of 4)")] = (
        "4x4x4"
    ),
    twist: Annotated[bool, typer.Option(help="Twisted wrap-around")] = False,
    link_gbps: GbpsOpt = 400.0,
    delay_us: Annotated[
        float, typer.Option(help="Reconfiguration delay of the OCS, microseconds")
    ] = 10_000.0,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """TPU-v4-style torus: 4x4x4 copper cubes joined by OCS circuits."""
    from topoopt.fabrics import tpu_v4_torus

    f = tpu_v4_torus(
        dims,
        gbps_to_bytes_per_s(link_gbps),
        twist=twist or None,
        reconfiguration_delay=delay_us / 1e6,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("direct")
@handle_errors
def direct_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    degree: Annotated[int, typer.Option("--degree", help="Optical ports per server")],
    circuits: Annotated[
        Path | None,
        typer.Option("--circuits", help="Circuits file: 'u v [count]' rows or JSON"),
    ] = None,
    device: Annotated[Device, typer.Option(help="What holds the circuits")] = Device.patch_panel,
    delay_us: Annotated[
        float | None,
        typer.Option(help="Reconfiguration delay, microseconds (default per device)"),
    ] = None,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """Optical direct-connect (default circuits: TopoOpt geometric circulant)."""
    from topoopt.fabrics import direct_connect

    f = direct_connect(
        servers,
        degree,
        _circuits(circuits),
        gbps_to_bytes_per_s(link_gbps),
        device=Device(device).value,
        reconfiguration_delay=None if delay_us is None else delay_us / 1e6,
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("expander")
@handle_errors
def expander_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    degree: Annotated[int, typer.Option("--degree", help="Optical ports per server")],
    seed: Annotated[int, typer.Option("--seed", help="Random seed")] = 0,
    device: Annotated[Device, typer.Option(help="What holds the circuits")] = Device.patch_panel,
    link_gbps: GbpsOpt = 100.0,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """Random d-regular direct-connect (seeded)."""
    from topoopt.fabrics import expander

    f = expander(
        servers,
        degree,
        seed,
        gbps_to_bytes_per_s(link_gbps),
        device=Device(device).value,
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


@fabric_app.command("hybrid")
@handle_errors
def hybrid_cmd(
    servers: Annotated[int, typer.Option("--servers", help="Servers")],
    optical_degree: Annotated[int, typer.Option(help="Optical ports per server")],
    electrical: Annotated[
        ElectricalKind, typer.Option(help="The electrical part")
    ] = ElectricalKind.leaf_spine,
    oversubscription: Annotated[float, typer.Option(help="Electrical oversubscription")] = 1.0,
    k: Annotated[int | None, typer.Option("--k", help="Fat-tree radix")] = None,
    radix: Annotated[int, typer.Option(help="Leaf-spine switch ports")] = 64,
    circuits: Annotated[Path | None, typer.Option("--circuits", help="Circuits file")] = None,
    device: Annotated[Device, typer.Option(help="What holds the circuits")] = Device.ocs,
    link_gbps: GbpsOpt = 100.0,
    optical_gbps: Annotated[
        float | None, typer.Option(help="Optical port bandwidth, Gbps (default: --link-gbps)")
    ] = None,
    gpus_per_server: GpusOpt = 1,
    as_json: JsonOpt = False,
    html: HtmlOpt = None,
    force: ForceOpt = False,
    prices: PricesOption = None,
    preset: PresetOption = None,
    graphml: GraphmlOpt = None,
) -> None:
    """Electrical leaf-spine / fat-tree plus an optical circuit layer."""
    from topoopt.fabrics import hybrid

    f = hybrid(
        servers,
        optical_degree,
        electrical=ElectricalKind(electrical).value,
        oversubscription=oversubscription,
        k=k,
        radix=radix,
        circuits=_circuits(circuits),
        port_bandwidth=gbps_to_bytes_per_s(link_gbps),
        optical_port_bandwidth=None if optical_gbps is None else gbps_to_bytes_per_s(optical_gbps),
        device=Device(device).value,
        gpus_per_server=gpus_per_server,
    )
    _finish(f, as_json, html, force, prices, graphml, preset)


def register(app: typer.Typer) -> None:
    app.add_typer(fabric_app, name="fabric")
