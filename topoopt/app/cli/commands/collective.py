"""``topoopt collective``: schedule one collective on a fabric or a design, time it, bound it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.table import Table

from topoopt.app.cli.byte_sizes import parse_bytes
from topoopt.app.cli.choices import CollectiveFabric
from topoopt.app.cli.common import DEFAULT_SEED, emit_json, handle_errors, stdout
from topoopt.units import gbps_to_bytes_per_s
from traffic.errors import InputError

__all__ = ["register", "collective_command", "FABRIC_KINDS", "build_collective_fabric"]

FABRIC_KINDS = (
    "ideal",
    "fat-tree",
    "leaf-spine",
    "torus",
    "direct",
    "expander",
    "hybrid",
    "dgx1",
)
"""Fabrics ``--fabric`` builds (the builders of :mod:`topoopt.fabrics`, plus the DGX-1)."""

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "broadcast", "all-to-all")
ALGORITHMS = ("ring", "tree", "halving-doubling", "direct", "blink", "synthesize")


def _need(value, option: str, kind: str):
    if value is None:
        raise InputError(option, "missing", f"a value (needed by --fabric {kind})")
    return value


def build_collective_fabric(
    kind: str,
    *,
    servers: int | None = None,
    degree: int | None = None,
    seed: int = 0,
    link_gbps: float | None = None,
    dims: str | None = None,
    k: int | None = None,
    oversubscription: float = 1.0,
    circuits: Path | None = None,
    gpus: str | None = None,
):
    """The fabric ``--fabric KIND`` and its options describe (Gbps at this edge)."""
    from topoopt import fabrics as fb

    if kind not in FABRIC_KINDS:
        raise InputError("--fabric", kind, f"one of {', '.join(FABRIC_KINDS)}")
    if kind == "dgx1":
        from solvers import NVLINK2_BANDWIDTH, dgx1

        ids = None
        if gpus is not None:
            try:
                ids = [int(x) for x in gpus.split(",") if x.strip()]
            except ValueError:
                raise InputError("--gpus", gpus, "comma-separated GPU ids 0..7") from None
        bw = NVLINK2_BANDWIDTH if link_gbps is None else gbps_to_bytes_per_s(link_gbps)
        return dgx1(ids, bw)
    bw = gbps_to_bytes_per_s(100.0 if link_gbps is None else link_gbps)
    if kind == "ideal":
        return fb.ideal(_need(servers, "--servers", kind), degree or 1, bw)
    if kind == "fat-tree":
        return fb.fat_tree(
            _need(k, "--k", kind), servers, oversubscription=oversubscription, port_bandwidth=bw
        )
    if kind == "leaf-spine":
        return fb.leaf_spine(_need(servers, "--servers", kind), oversubscription, port_bandwidth=bw)
    if kind == "torus":
        return fb.torus(_need(dims, "--dims", kind), bw)
    if kind == "direct":
        circ = None if circuits is None else fb.load_circuits(circuits)
        return fb.direct_connect(
            _need(servers, "--servers", kind), _need(degree, "--degree", kind), circ, bw
        )
    if kind == "expander":
        return fb.expander(
            _need(servers, "--servers", kind), _need(degree, "--degree", kind), seed, bw
        )
    return fb.hybrid(
        _need(servers, "--servers", kind),
        _need(degree, "--degree", kind),
        oversubscription=oversubscription,
        port_bandwidth=bw,
    )


def _design_fabric(path: Path):
    from solvers import HybridDesign, load_design

    if not path.is_file():
        raise InputError("--design", str(path), "an existing design.json file")
    d = load_design(path)
    if not isinstance(d, HybridDesign):
        from solvers import design_fabric, design_routing

        fab = design_fabric(d)
        return fab, design_routing(d, fab)
    fab = d.fabric()
    return fab, d.routing_pathset(fab)


@handle_errors
def collective_command(
    collective: Annotated[Literal[COLLECTIVES], typer.Option(help="The collective")],
    size: Annotated[
        str,
        typer.Option(
            metavar="SIZE", help="nccl-tests size S: bytes (1e9) or with a suffix (1GiB, 512MiB)"
        ),
    ],
    algorithm: Annotated[Literal[ALGORITHMS], typer.Option(help="How it is scheduled")] = "ring",
    fabric: Annotated[CollectiveFabric | None, typer.Option("--fabric", help="Fabric kind")] = None,
    design: Annotated[
        Path | None, typer.Option("--design", help="A design.json (instead of --fabric)")
    ] = None,
    servers: Annotated[int | None, typer.Option(help="Servers")] = None,
    degree: Annotated[int | None, typer.Option(help="Ports per server")] = None,
    seed: Annotated[int, typer.Option(help="Seed (expander)")] = DEFAULT_SEED,
    link_gbps: Annotated[
        float | None, typer.Option(help="Port bandwidth, Gbps (default 100; dgx1: 200/NVLink)")
    ] = None,
    dims: Annotated[str | None, typer.Option(help="Torus sizes, e.g. 4x4")] = None,
    k: Annotated[int | None, typer.Option("--k", help="Fat-tree radix")] = None,
    oversubscription: Annotated[float, typer.Option(help="Fat-tree / leaf-spine / hybrid")] = 1.0,
    circuits: Annotated[Path | None, typer.Option(help="Circuits file (direct)")] = None,
    gpus: Annotated[str | None, typer.Option(help="dgx1: the allocated GPUs, e.g. 0,1,2,4")] = None,
    root: Annotated[int, typer.Option(help="Root of a broadcast")] = 0,
    chunks: Annotated[
        int | None, typer.Option(help="Pipeline chunks of tree schedules (default: fluid)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Time one collective (ring, tree, halving-doubling, direct, Blink, synthesized); bound it."""
    if (fabric is None) == (design is None):
        raise InputError("--fabric/--design", "both" if fabric else "neither", "exactly one")
    if collective not in COLLECTIVES:
        raise InputError("--collective", collective, f"one of {', '.join(COLLECTIVES)}")
    if algorithm not in ALGORITHMS:
        raise InputError("--algorithm", algorithm, f"one of {', '.join(ALGORITHMS)}")
    nbytes = parse_bytes(size, "--size")
    if chunks is not None and chunks < 1:
        raise InputError("--chunks", chunks, "an integer >= 1")
    routing = None
    if fabric is not None and servers is not None and fabric not in ("torus", "fat-tree", "dgx1"):
        from solvers import check_collective_size

        # sizes first: the servers bound the nodes, before the fabric is built
        check_collective_size(collective, algorithm, servers, servers)
    if design is not None:
        # the design fixes its fabric: a fabric option beside it would be ignored in silence
        # (--link-gbps 1 --degree 2 gave the design's own time)
        given = {
            "--degree": degree, "--link-gbps": link_gbps, "--dims": dims, "--k": k,
            "--circuits": circuits, "--gpus": gpus,
            "--oversubscription": None if oversubscription == 1.0 else oversubscription,
        }  # fmt: skip
        for name, value in given.items():
            if value is not None:
                raise InputError(name, value, "none with --design (the design sets its fabric)")
        fab, routing = _design_fabric(design)
    else:
        fab = build_collective_fabric(
            CollectiveFabric(fabric).value,
            servers=servers,
            degree=degree,
            seed=seed,
            link_gbps=link_gbps,
            dims=dims,
            k=k,
            oversubscription=oversubscription,
            circuits=circuits,
            gpus=gpus,
        )
    if servers is not None and fab.n_servers != servers:  # --design / --dims set the size
        source = "--design" if design is not None else f"--fabric {fabric}"
        raise InputError("--servers", servers, f"{fab.n_servers}, the servers of {source}")
    from solvers import run_collective

    res = run_collective(
        fab, collective, nbytes, algorithm, routing=routing, chunks=chunks, root=root
    )
    doc = res.to_dict()
    if as_json:
        emit_json(doc)
        return
    t = Table(title=f"{collective} of {nbytes:g} bytes, {fab.n_servers} servers ({fab.family})")
    t.add_column("quantity")
    t.add_column("value", justify="right")
    sch = doc["schedule"]
    t.add_row("algorithm", f"{algorithm} ({sch.get('method', algorithm)})")
    t.add_row("time (ms)", f"{res.time_s * 1e3:.4f}")
    t.add_row("lower bound (ms)", f"{res.lower_bound_s * 1e3:.4f}")
    t.add_row("time / bound", f"{doc['ratio_to_bound']:.4f}")
    t.add_row("transfers", str(sch["transfers"]))
    if "selected" in sch:
        t.add_row("selected", sch["selected"])
    stdout.print(t)


def register(app: typer.Typer) -> None:
    app.command("collective")(collective_command)
