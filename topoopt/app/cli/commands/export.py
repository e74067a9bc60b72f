"""``topoopt export PLAN --format chakra|astra-sim|simai --out PATH``: our traffic in the formats of
other tools.

- ``chakra``: a folder of per-rank Chakra execution traces ``NAME.<rank>.et`` plus
  ``comm_group.json`` (:mod:`traffic.chakra.writer`); ``topoopt traffic PATH`` reads it back.
- ``astra-sim``: ``PATH/workload/`` (the Chakra traces), ``network.yml``, ``system.json``,
  ``remote_memory.json`` for the closest ASTRA-sim description of ``--fabric``, and ``NOTE.md``
  with what could not be expressed and the command line to run (:mod:`topoopt.exports.astra_sim`).
- ``simai``: one SimAI/AICB workload text file (:mod:`traffic.simai`).

Folders are written into a temporary sibling and renamed into place; an existing folder is
replaced only with ``--force`` and only if it holds nothing but a previous export's files.
"""

from __future__ import annotations

import os
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from topoopt.app.cli.choices import AstraFamily
from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    EfficiencyOption,
    GpuOption,
    GpusOption,
    SettingsOption,
    check_not_an_input,
    emit_json,
    handle_errors,
    prepare_output,
    write_output_text,
)
from traffic.errors import InputError

__all__ = ["register", "export_command"]


class GbUnit(StrEnum):
    GiB = "GiB"
    GB = "GB"


class Format(StrEnum):
    chakra = "chakra"
    astra_sim = "astra-sim"
    simai = "simai"


MARKER = ".topoopt-export"
_OURS = re.compile(
    r"^(.+\.(0|[1-9][0-9]*)\.et|comm_group\.json|network\.yml|system\.json|"
    r"remote_memory\.json|NOTE\.md|workload|\.topoopt-export)$"
)


def _check_folder(out: Path, force: bool) -> None:
    check_not_an_input(out, "--out")
    if out.exists() or out.is_symlink():
        if not force:
            raise InputError("--out", str(out), "a path that does not exist yet (or --force)")
        if not out.is_dir() or out.is_symlink():
            raise InputError("--out", str(out), "a folder (it is a file)")
        if not _ours(out):
            raise InputError(
                "--out", str(out), "a folder written by topoopt export (--force replaces only that)"
            )
    parent = out.absolute().parent
    if not parent.is_dir():
        raise InputError("--out", str(out), "a path in an existing folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError("--out", str(out), "a path in a folder you can write to")


def _ours(out: Path) -> bool:
    """True for a folder holding nothing but an earlier export (its marker file included)."""
    return (
        out.is_dir()
        and not out.is_symlink()
        and (out / MARKER).is_file()
        and all(_OURS.match(p.name) for p in out.iterdir())
    )


def _write_folder(out: Path, force: bool, fill) -> dict:
    """Fill a temporary sibling folder, then move it to ``out`` (topoopt.atomic): nothing is left
    on failure or on SIGTERM/SIGINT, and a folder that appeared meanwhile is kept."""
    from topoopt.atomic import atomic_write_folder

    def fill_and_mark(d: Path) -> dict:
        info = fill(d)
        (d / MARKER).write_text("written by topoopt export\n", encoding="utf-8")
        return info

    info = atomic_write_folder(out, fill_and_mark, force=force, replaceable=_ours)
    print(f"wrote {out}/", file=sys.stderr)
    return info


@handle_errors
def export_command(
    plan: Annotated[
        str,
        typer.Argument(
            metavar="PLAN", help="Plan file, embedded plan name, .fbuf, or Chakra trace folder"
        ),
    ],
    fmt: Annotated[Format, typer.Option("--format", help="Output format")],
    out: Annotated[Path, typer.Option("--out", help="Output folder (chakra, astra-sim) or file")],
    fabric: Annotated[
        AstraFamily, typer.Option("--fabric", help="astra-sim: fabric family to describe")
    ] = AstraFamily.ideal,
    gpu: GpuOption = None,
    efficiency: EfficiencyOption = None,
    settings: SettingsOption = None,
    gpus: GpusOption = None,
    design: Annotated[
        Path | None,
        typer.Option(
            "--design",
            help="astra-sim: a design.json written by `topoopt design` (its degree, link "
            "bandwidth and ring orders; instead of --fabric)",
        ),
    ] = None,
    degree: Annotated[
        int, typer.Option("--degree", help="astra-sim: ports per server")
    ] = DEFAULT_DEGREE,
    link_gbps: Annotated[
        float, typer.Option("--link-gbps", help="astra-sim: port Gbps")
    ] = DEFAULT_LINK_GBPS,
    oversubscription: Annotated[
        float, typer.Option(help="astra-sim: oversubscription of a fat-tree / leaf-spine")
    ] = 1.0,
    dims: Annotated[
        str | None, typer.Option("--dims", help="astra-sim: torus shape, e.g. 4x4")
    ] = None,
    gb: Annotated[
        GbUnit,
        typer.Option(
            "--gb",
            help="astra-sim: bytes of the 'GB' in network.yml's GB/s: GiB (2**30, what "
            "astra-network-analytical up to 2024-11 converts with) or GB (1e9)",
        ),
    ] = GbUnit.GiB,
    name: Annotated[str, typer.Option("--name", help="Trace file prefix")] = "trace",
    stage: Annotated[
        int | None,
        typer.Option(
            "--stage",
            help="simai: the pipeline stage written (SimAI replays one stage's layers on every "
            "rank; default: the one with the most forward FLOPs)",
        ),
    ] = None,
    compute: Annotated[
        bool,
        typer.Option(
            help="chakra, astra-sim: write compute nodes with topoopt's roofline durations "
            "(plans only)"
        ),
    ] = True,
    max_nodes: Annotated[
        int,
        typer.Option(
            "--max-nodes",
            help="chakra, astra-sim: most trace nodes written (about 140 bytes each on disk, "
            "half a minute per 20 million); memory is bounded by TOPOOPT_MEMORY_BUDGET_GB",
        ),
    ] = 20_000_000,  # traffic.chakra.writer.MAX_NODES
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
    force: Annotated[bool, typer.Option(help="Replace an earlier export at --out")] = False,
) -> None:
    """Write PLAN's traffic as Chakra traces, an ASTRA-sim input set, or a SimAI workload."""
    from topoopt.units import gbps_to_bytes_per_s
    from traffic.load import load_workload

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}", name):
        raise InputError("--name", name, "letters, digits, '_', '-', '.' (at most 64)")
    if fmt is Format.simai:
        prepare_output(out, force, "--out")
    else:
        _check_folder(out, force)
    if degree < 1:
        raise InputError("--degree", degree, "an integer >= 1")
    if max_nodes < 1:
        raise InputError("--max-nodes", max_nodes, "an integer >= 1")
    if not (link_gbps > 0 and link_gbps < 1e6):
        raise InputError("--link-gbps", link_gbps, "a number of Gbps > 0")
    if not (oversubscription >= 1 and oversubscription < 1e6):
        raise InputError("--oversubscription", oversubscription, "a number >= 1")
    torus = None
    if dims is not None:
        try:
            torus = tuple(int(x) for x in dims.lower().split("x"))
        except ValueError:
            raise InputError("--dims", dims, "a shape like 4x4 or 4x4x4") from None
        if not torus or min(torus) < 2:
            raise InputError("--dims", dims, "sides >= 2, e.g. 4x4")

    w = load_workload(plan, gpu=gpu, efficiency=efficiency, settings=settings or (), gpus=gpus)
    fabric = AstraFamily(fabric).value  # a plain name in the notes and the config
    design_notes: list[str] = []
    if design is not None:
        if fmt is not Format.astra_sim:
            raise InputError("--design", str(design), "only with --format astra-sim")
        w, fabric, degree, link_gbps, design_notes = _from_design(w, design)
    result: dict = {"format": fmt.value, "out": str(out), "workload": w.name, "gpus": w.gpus}
    if fmt is Format.simai:
        from traffic.simai import parse_simai, simai_workload

        text = simai_workload(w, stage=stage)
        parsed = parse_simai(text, str(out))  # what we write must parse
        write_output_text(out, text)
        result.update(lines=len(parsed.lines), header=parsed.header)
        result["stage"] = int(parsed.lines[0].name.split("_")[0][5:]) if parsed.lines else 0
    elif fmt is Format.chakra:
        from topoopt.exports.astra_sim import compute_durations
        from traffic.chakra import write_chakra

        comp = compute_durations(w) if compute else None
        result.update(
            _write_folder(
                out,
                force,
                lambda d: write_chakra(w, d, name=name, max_nodes=max_nodes, compute=comp),
            )
        )
    else:
        from topoopt.exports.astra_sim import astra_sim_config, compute_durations
        from traffic.chakra import write_chakra

        comp = compute_durations(w) if compute else None
        over, leaf, clos_notes = _clos(w, fabric, degree, gbps_to_bytes_per_s(link_gbps),
                                       oversubscription)  # fmt: skip
        design_notes = [*design_notes, *clos_notes]
        cfg = astra_sim_config(
            fabric,
            servers=w.servers,
            gpus_per_server=w.gpus_per_server,
            degree=degree,
            link_bandwidth=gbps_to_bytes_per_s(link_gbps),
            oversubscription=over,
            torus_dims=torus,
            gb=gb.value,
            leaf_servers=leaf,
        )

        def fill(d: Path) -> dict:
            (d / "workload").mkdir()
            info = write_chakra(w, d / "workload", name=name, max_nodes=max_nodes, compute=comp)
            (d / "network.yml").write_text(cfg.network_yml, encoding="utf-8")
            (d / "system.json").write_text(cfg.system_json, encoding="utf-8")
            (d / "remote_memory.json").write_text(cfg.remote_memory_json, encoding="utf-8")
            note = _note(w, fabric, cfg, name, comp, design_notes)
            (d / "NOTE.md").write_text(note, encoding="utf-8")
            return info

        result.update(_write_folder(out, force, fill))
        result.update(dimensions=cfg.dimensions, notes=cfg.notes)
    if as_json:
        emit_json(result)
    else:
        print(
            f"{fmt.value}: {w.name} ({w.gpus} GPUs) -> {out}"
            + (f", {result['nodes']:,} trace nodes" if "nodes" in result else ""),
            file=sys.stderr,
        )


def _clos(w, fabric: str, degree: int, link_bandwidth: float, oversubscription: float):
    """The oversubscription and leaf size of the Clos topoopt itself builds for ``w`` (the
    ``fat-tree-oversub`` of ``simulate``/``compare``:
    :func:`topoopt.app.studies.compare.switched_clos`), for an oversubscribed ``fat-tree`` or
    ``leaf-spine``: ``(oversubscription, servers per leaf or None, notes)``.

    Found by replaying the export in ASTRA-sim: the 16 servers of ``vgg16-dp`` with 8 ports each
    fit one 128-port switch, so topoopt's "4:1" fabric realises 1:1, while the export charged
    every NPU a quarter of its bandwidth (3.9x topoopt's all-reduce time)."""
    if fabric not in ("fat-tree", "leaf-spine") or oversubscription <= 1:
        return oversubscription, None, []
    from topoopt.app.studies.compare import switched_clos

    info = switched_clos("fat-tree-oversub", w, degree, link_bandwidth, oversubscription)
    info = info.cost_detail["fabric_info"]
    realised = float(info.get("oversubscription_realised", oversubscription))
    tiers, spl = int(info.get("tiers", 0)), int(info.get("servers_per_leaf", 0))
    if realised <= 1:
        return 1.0, None, [
            f"{fabric}: {oversubscription:g}:1 asked, but one switch ({info.get('switch')}) "
            f"serves all {w.servers} servers in the Clos topoopt builds, so no oversubscription "
            "is realised: written at the full per-server bandwidth"
        ]  # fmt: skip
    if tiers == 2 and 1 < spl < w.servers and w.servers % spl == 0:
        return realised, spl, []
    return realised, None, [
        f"{fabric}: topoopt's Clos has {tiers} tiers and {info.get('leaves')} leaves of up to "
        f"{spl} servers; ASTRA-sim's dimensions need equal leaves, so the realised "
        f"{realised:g}:1 is averaged over one Switch"
    ]  # fmt: skip


def _binary(cfg) -> str:
    """The ASTRA-sim analytical binary ``NOTE.md`` names for ``cfg``: the congestion-unaware
    one, for every export. The congestion-aware one refuses any network of more than one
    dimension ("only support 1-dim topology"), and on one dimension it forwards every chunk
    whole, hop by hop (``Link::send`` schedules the next hop on arrival), so a ``Switch`` path
    (NPU, switch, NPU) costs twice ``chunk / bandwidth``: replayed, a ring all-reduce of 1 GB on
    8 NPUs took 2.006x topoopt's time there and 1.007x in the congestion-unaware binary
    (docs/validation.md, "ASTRA-sim replay")."""
    return "AstraSim_Analytical_Congestion_Unaware"


def _from_design(w, path: Path):
    """The workload as the design runs it (its ring orders, :func:`solvers.design_workload`), the
    ASTRA-sim family and ports that describe its fabric, and what ASTRA-sim cannot express."""
    from solvers import (
        DesignProblem,
        HybridDesign,
        check_design_rings,
        design_workload,
        load_design,
    )
    from topoopt.units import bytes_per_s_to_gbps

    if not path.is_file():
        raise InputError("--design", str(path), "an existing design.json file")
    d = load_design(path)
    if d.servers != w.servers:
        raise InputError("--design", f"{d.servers} servers", f"a design for {w.servers} servers")
    problem = DesignProblem.from_workload(w, d.degree, d.link_bandwidth)
    check_design_rings(d, problem, str(path))
    w2 = design_workload(w, d, problem)
    notes = [
        f"design {path.name} (solver {d.solver}): the workload's groups are written in the "
        "design's ring orders (comm_group.json lists members in ring order)",
        "the design's circuits, multi-hop routes and per-class priorities cannot be expressed: "
        "ASTRA-sim's analytical network has no arbitrary-graph dimension and no routing table",
    ]
    if isinstance(d, HybridDesign):
        fab = d.fabric()
        ports = int(fab.server_ports[0] - fab.server_optical_ports[0])
        bw = float(fab.port_bandwidth[0])
        return w2, "hybrid", ports, bytes_per_s_to_gbps(bw), notes
    family = d.solver if d.solver in ("topoopt", "joint", "expander") else "direct"
    return w2, family, int(d.degree), bytes_per_s_to_gbps(float(d.link_bandwidth)), notes


def _note(w, fabric: str, cfg, name: str, comp=None, design_notes=()) -> str:
    binary = _binary(cfg)
    dims = ", ".join(
        f"{d['topology']} of {d['npus_count']} at {d['bandwidth_bytes_per_s'] / 1e9:g} GB/s"
        for d in cfg.dimensions
    )
    gb = cfg.gb
    lines = [
        f"# ASTRA-sim inputs for {w.name} ({w.gpus} GPUs, {w.gpus_per_server} per server)",
        "",
        f"Fabric described: `{fabric}` as {len(cfg.dimensions)} dimension(s): {dims} "
        "(bandwidth of one NPU's own link, per direction).",
        "",
        "Run with ASTRA-sim 2.x's analytical backend:",
        "",
        "```sh",
        f"{binary} \\",
        f"  --workload-configuration=workload/{name} \\",
        "  --comm-group-configuration=workload/comm_group.json \\",
        "  --system-configuration=system.json \\",
        "  --remote-memory-configuration=remote_memory.json \\",
        "  --network-configuration=network.yml",
        "```",
        "",
    ]
    lines += [
        "The congestion-unaware binary runs every export, but gives every message its link's "
        "full bandwidth, with no sharing between messages: ring collectives (one message per "
        "link at a time) match topoopt within a few per cent, while an all-to-all is up to "
        "(n - 1)x optimistic (0.14x topoopt's time on 8 NPUs of a Switch).",
        "",
    ]
    if len(cfg.dimensions) > 1:
        lines += [
            '`AstraSim_Analytical_Congestion_Aware` refuses this network ("only support 1-dim '
            'topology": it has more than one dimension).',
            "",
        ]
    else:
        lines += [
            "`AstraSim_Analytical_Congestion_Aware` runs this one-dimensional network and shares "
            "links between messages, but forwards every chunk whole, hop by hop: a path through "
            "the Switch (NPU, switch, NPU) costs twice chunk / bandwidth, so a ring all-reduce "
            "takes about 2x topoopt's time there (an all-to-all about 1.14x on 8 NPUs).",
            "",
        ]
    lines += [
        "## How the files are meant to be read",
        "",
        "- `network.yml`: NPU `r` is GPU `r mod "
        f"{w.gpus_per_server}` of server `r div {w.gpus_per_server}`; every bandwidth is one "
        "NPU's own link (a server's NIC bandwidth divided by its GPUs, as topoopt shares it), "
        f"written in {gb}/s: astra-network-analytical converts its 'GB/s' with "
        + ("2**30 bytes" if gb == "GiB" else "1e9 bytes")
        + " (`bw_GBps_to_Bpns`); re-export with `--gb "
        + ("GB" if gb == "GiB" else "GiB")
        + "` for a build that converts the other way.",
        "- `system.json`: `local-mem-bw` is large on purpose. ASTRA-sim charges each reduction "
        "step 3 x chunk / local-mem-bw (one write, two reads); at its examples' 1600 GB/s that "
        "adds 30-35 % to a large all-reduce over NVSwitch, a cost topoopt does not model. Set "
        "the GPU's HBM bandwidth (GB/s) to include it.",
        "",
        "## What could not be expressed, and what ASTRA-sim does differently",
        "",
    ]
    lines += [f"- {n}" for n in (*design_notes, *cfg.notes)]
    if any(d["topology"] == "Ring" for d in cfg.dimensions):
        lines.append(
            "- a `Ring` dimension: with one queue per dimension (the default of "
            "`--num-queues-per-dim`) ASTRA-sim's ring collectives send in one direction only "
            "(QueueLevelHandler gives the single queue `Clockwise`), so they get half the "
            "ring bandwidth topoopt gives them (about 2x topoopt's time for a data-parallel "
            "all-reduce over a ring of servers). Adding `--num-queues-per-dim=2` and setting "
            "`active-chunks-per-dimension` to 4 in `system.json` runs chunks in both directions "
            "(within a few per cent of topoopt), but then the congestion-unaware binary also "
            "runs two chunks at once, each at full bandwidth, on the `Switch` dimension of a "
            "server's GPUs: optimistic for intra-server collectives"
        )
    lines += [
        "- collectives on a sub-group (tensor-, expert-, pipeline-, data-parallel groups smaller "
        "than all NPUs) are run by ASTRA-sim as a 1-D ring over the group's members "
        "(CommunicatorGroup), not hierarchically over the dimensions; an all-to-all on a "
        "sub-group is therefore a ring too",
        "- broadcast nodes are not simulated on the network: ASTRA-sim replays them for their "
        "`duration_micros` (1 ns when 0)",
        "- ASTRA-sim has no per-flow routing: a design's circuits and routes are reduced to the "
        "dimensions above",
    ]
    if comp is not None:
        lines.append(
            "- compute is written as COMP_NODEs with `duration_micros` (topoopt's roofline time "
            f"on {comp['gpu']} at efficiency {comp['efficiency']:g} "
            f"per micro-batch, {comp['micro_batches']} micro-batch(es), rounded to whole "
            "microseconds): one chain per rank, forward then backward micro-batch by "
            "micro-batch, each followed by its collectives; no 1F1B order and no overlap of "
            "compute with communication, so expect the replay at or above topoopt's "
            "`iteration_s` (which overlaps gradient synchronisation and follows 1F1B)"
        )
    else:
        lines.append(
            "- the traces carry communication only, in one deadlock-free order per rank; compute "
            "and the pipeline schedule are not written"
        )
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
