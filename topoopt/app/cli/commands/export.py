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

from topoopt.app.cli.common import (
    DEFAULT_DEGREE,
    DEFAULT_LINK_GBPS,
    emit_json,
    handle_errors,
    prepare_output,
    write_output_text,
)
from traffic.errors import InputError

__all__ = ["register", "export_command"]


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
        str, typer.Option("--fabric", help="astra-sim: fabric family to describe")
    ] = "ideal",
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
    name: Annotated[str, typer.Option("--name", help="Trace file prefix")] = "trace",
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

    w = load_workload(plan)
    result: dict = {"format": fmt.value, "out": str(out), "workload": w.name, "gpus": w.gpus}
    if fmt is Format.simai:
        from traffic.simai import parse_simai, simai_workload

        text = simai_workload(w)
        parsed = parse_simai(text, str(out))  # what we write must parse
        write_output_text(out, text)
        result.update(lines=len(parsed.lines), header=parsed.header)
    elif fmt is Format.chakra:
        from traffic.chakra import write_chakra

        result.update(_write_folder(out, force, lambda d: write_chakra(w, d, name=name)))
    else:
        from topoopt.exports.astra_sim import astra_sim_config
        from traffic.chakra import write_chakra

        cfg = astra_sim_config(
            fabric,
            servers=w.servers,
            gpus_per_server=w.gpus_per_server,
            degree=degree,
            link_bandwidth=gbps_to_bytes_per_s(link_gbps),
            oversubscription=oversubscription,
            torus_dims=torus,
        )

        def fill(d: Path) -> dict:
            (d / "workload").mkdir()
            info = write_chakra(w, d / "workload", name=name)
            (d / "network.yml").write_text(cfg.network_yml, encoding="utf-8")
            (d / "system.json").write_text(cfg.system_json, encoding="utf-8")
            (d / "remote_memory.json").write_text(cfg.remote_memory_json, encoding="utf-8")
            (d / "NOTE.md").write_text(_note(w, fabric, cfg, name), encoding="utf-8")
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


def _note(w, fabric: str, cfg, name: str) -> str:
    lines = [
        f"# ASTRA-sim inputs for {w.name} ({w.gpus} GPUs, {w.gpus_per_server} per server)",
        "",
        f"Fabric described: `{fabric}`.",
        "",
        "Run (analytical backend):",
        "",
        "```sh",
        "AstraSim_Analytical_Congestion_Aware \\",
        f"  --workload-configuration=workload/{name} \\",
        "  --comm-group-configuration=workload/comm_group.json \\",
        "  --system-configuration=system.json \\",
        "  --remote-memory-configuration=remote_memory.json \\",
        "  --network-configuration=network.yml",
        "```",
        "",
        "## What could not be expressed",
        "",
    ]
    lines += [f"- {n}" for n in cfg.notes] or ["- nothing: the fabric maps onto ASTRA-sim exactly"]
    lines += [
        "- the traces carry communication only, in one deadlock-free order per rank; compute and "
        "the pipeline schedule are not written (topoopt's iteration model builds those itself)",
    ]
    return "\n".join(lines) + "\n"


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
