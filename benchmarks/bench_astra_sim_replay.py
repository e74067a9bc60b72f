"""Replay topoopt's ASTRA-sim exports in a prebuilt ASTRA-sim and compare the times (prints a
markdown table; asserts nothing). The numbers of ``docs/validation.md``, "ASTRA-sim replay".

Builds nothing: it runs the ASTRA-sim 2.x analytical binaries named by the environment and
skips (exit 0, one line) when ``ASTRA_SIM_BIN`` is not set.

- ``ASTRA_SIM_BIN``: ``AstraSim_Analytical_Congestion_Unaware`` (runs every export);
- ``ASTRA_SIM_AWARE_BIN`` (optional): ``AstraSim_Analytical_Congestion_Aware``, run on the
  one-dimensional exports (one GPU per server) only, since it refuses more dimensions.

Each case is exported with ``topoopt export ... --format astra-sim`` into a temporary folder,
run with the command line of its ``NOTE.md`` (plus, for the ``q2`` rows, ``--num-queues-per-dim=2``
and ``active-chunks-per-dimension: 4``, the settings under which ASTRA-sim's ring uses both
directions of a ``Ring`` dimension), and its time (the largest "sys[i] finished, N cycles" over
the NPUs; one cycle is 1 ns) is divided by topoopt's time for the same case: ``topoopt
simulate`` of the exported ``workload/`` traces (the same collectives, sends, compute nodes
and per-rank order) on the same fabric. The plan's own ``simulate`` time (``comm_s``, or
``iteration_s`` with compute, where topoopt overlaps and follows 1F1B) is shown beside it. The
single-collective cases are Chakra traces of one collective written with
``traffic.chakra.write_chakra``.

Usage::

    ASTRA_SIM_BIN=/path/AstraSim_Analytical_Congestion_Unaware \\
    ASTRA_SIM_AWARE_BIN=/path/AstraSim_Analytical_Congestion_Aware \\
        .venv/bin/python benchmarks/bench_astra_sim_replay.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

LLAMA = """model: llama3-8b
parallelism: {tp: 8, pp: 2, dp: 2, micro_batch_size: 1, global_batch_size: 16}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 4, gpus_per_server: 8}
"""
VGG96 = """model: vgg16
parallelism: {dp: 768, micro_batch_size: 16, global_batch_size: 12288}
precision: {activation_bytes: 4, gradient_bytes: 4, parameter_bytes: 4}
cluster: {servers: 96, gpus_per_server: 8}
"""
MIXTRAL = """model: mixtral-8x7b
parallelism: {tp: 1, pp: 1, dp: 16, ep: 8, micro_batch_size: 1, global_batch_size: 16}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 2, gpus_per_server: 8}
"""

# name, plan (a plan name, "@file" of the texts above, or "coll:OP:servers:gpus:bytes"),
# export arguments, simulate arguments, topoopt reference ("comm" or "iteration")
CASES = [
    (
        "all-reduce 1 GB, 8 x 1 GPU, ideal",
        "coll:all-reduce:8:1:1e9",
        ["--fabric", "ideal"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "all-reduce 1 GB, 8 x 1 GPU, ideal, --gb GB (the other unit)",
        "coll:all-reduce:8:1:1e9",
        ["--fabric", "ideal", "--gb", "GB"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "all-reduce 1 GB, 4 x 8 GPUs, ideal",
        "coll:all-reduce:4:8:1e9",
        ["--fabric", "ideal"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "all-to-all 1 GB, 8 x 1 GPU, ideal",
        "coll:all-to-all:8:1:1e9",
        ["--fabric", "ideal"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "vgg16-dp (128 GPUs), ideal",
        "vgg16-dp",
        ["--fabric", "ideal", "--no-compute"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "vgg16-dp, ideal, with compute",
        "vgg16-dp",
        ["--fabric", "ideal"],
        ["--fabric", "ideal"],
        "iteration",
    ),
    (
        "vgg16-dp, fat-tree 4:1 oversubscribed",
        "vgg16-dp",
        ["--fabric", "fat-tree", "--oversubscription", "4", "--no-compute"],
        ["--fabric", "fat-tree-oversub", "--oversubscription", "4"],
        "comm",
    ),
    (
        "vgg16 dp 768 GPUs on 96 servers, fat-tree 4:1 (two tiers)",
        "@vgg96",
        ["--fabric", "fat-tree", "--oversubscription", "4", "--no-compute"],
        ["--fabric", "fat-tree-oversub", "--oversubscription", "4"],
        "comm",
    ),
    (
        "vgg16-dp, torus 4x2x2",
        "vgg16-dp",
        ["--fabric", "torus", "--dims", "4x2x2", "--no-compute"],
        ["--fabric", "torus"],
        "comm",
    ),
    (
        "vgg16-dp, topoopt (ring of servers)",
        "vgg16-dp",
        ["--fabric", "topoopt", "--no-compute"],
        ["--fabric", "topoopt"],
        "comm",
    ),
    (
        "vgg16-dp, --design (topoopt solver)",
        "vgg16-dp",
        ["--design", "{design}", "--no-compute"],
        ["--design", "{design}"],
        "comm",
    ),
    (
        "llama3-8b tp8 pp2 dp2 (32 GPUs), ideal",
        "@llama",
        ["--fabric", "ideal", "--no-compute"],
        ["--fabric", "ideal"],
        "comm",
    ),
    (
        "llama3-8b tp8 pp2 dp2, ideal, with compute",
        "@llama",
        ["--fabric", "ideal"],
        ["--fabric", "ideal"],
        "iteration",
    ),
    (
        "llama3-8b tp8 pp2 dp2, topoopt",
        "@llama",
        ["--fabric", "topoopt", "--no-compute"],
        ["--fabric", "topoopt"],
        "comm",
    ),
    (
        "mixtral-8x7b ep8 dp16 (16 GPUs), ideal",
        "@mixtral",
        ["--fabric", "ideal", "--no-compute"],
        ["--fabric", "ideal"],
        "comm",
    ),
]


def topoopt(*args, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "topoopt", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )


def one_collective(op: str, servers: int, gpus: int, size: float, folder: Path) -> None:
    from traffic.chakra.writer import write_chakra
    from traffic.workload import Demand, Workload

    n = servers * gpus
    d = Demand(
        op=op,
        groups=np.arange(n, dtype=np.int64)[None, :],
        size=size,
        cls="dp",
        phase="backward",
        count=1,
        mutable=True,
        name=f"one {op}",
    )
    folder.mkdir()
    write_chakra(Workload(gpus=n, gpus_per_server=gpus, demands=(d,), name=f"{op}"), folder)


def replay(binary: str, folder: Path, q2: bool) -> tuple[float, float]:
    """ASTRA-sim's time (s: the slowest NPU's finish, 1 cycle = 1 ns) and CPU seconds."""
    system = folder / "system.json"
    if q2:
        j = json.loads(system.read_text())
        j["active-chunks-per-dimension"] = 4
        system = folder / "system-q2.json"
        system.write_text(json.dumps(j, allow_nan=False))
    cmd = [
        binary,
        "--workload-configuration=workload/trace",
        "--comm-group-configuration=workload/comm_group.json",
        f"--system-configuration={system.name}",
        "--remote-memory-configuration=remote_memory.json",
        "--network-configuration=network.yml",
    ] + (["--num-queues-per-dim=2"] if q2 else [])
    t0 = os.times()
    r = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    t1 = os.times()
    if r.returncode:
        tail = (r.stdout + r.stderr).strip().splitlines()[-1:]
        raise RuntimeError(f"{Path(binary).name} exited {r.returncode}: {tail}")
    cycles = [int(c) for c in re.findall(r"finished, (\d+) cycles", r.stdout + r.stderr)]
    cpu = (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)
    return max(cycles) * 1e-9, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="case names containing any of these words")
    a = ap.parse_args()
    unaware = os.environ.get("ASTRA_SIM_BIN")
    aware = os.environ.get("ASTRA_SIM_AWARE_BIN")
    if not unaware:
        print("skipped: set ASTRA_SIM_BIN to a prebuilt AstraSim_Analytical_Congestion_Unaware")
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "llama.yaml").write_text(LLAMA)
        (tmp / "mixtral.yaml").write_text(MIXTRAL)
        (tmp / "vgg96.yaml").write_text(VGG96)
        design = tmp / "design.json"
        topoopt("design", "vgg16-dp", "--solver", "topoopt", "--out", str(design), cwd=tmp)
        for k, (name, plan, exp, sim, ref) in enumerate(CASES):
            if a.only and not any(w in name for w in a.only):
                continue
            if plan.startswith("coll:"):
                _, op, s, g, size = plan.split(":")
                src = tmp / f"trace{k}"
                one_collective(op, int(s), int(g), float(size), src)
                plan = str(src)
            elif plan.startswith("@"):
                plan = str(tmp / f"{plan[1:]}.yaml")
            exp = [x.format(design=design) for x in exp]
            sim = [x.format(design=design) for x in sim]
            out = tmp / f"x{k}"
            t0 = time.perf_counter()
            topoopt("export", plan, "--format", "astra-sim", "--out", str(out), *exp, cwd=tmp)
            doc = json.loads(topoopt("simulate", plan, *sim, "--json", cwd=tmp).stdout)
            own = doc["comm_s" if ref == "comm" else "iteration_s"]
            # the same case: topoopt simulating the exported traces themselves
            doc = json.loads(
                topoopt("simulate", str(out / "workload"), *sim, "--json", cwd=tmp).stdout
            )
            ours = doc["iteration_s"]
            dims = (out / "network.yml").read_text().splitlines()[0].split(":", 1)[1].strip()
            runs = [("unaware", unaware, False)]
            if "Ring" in dims:
                runs.append(("unaware, q2", unaware, True))
            if aware and "," not in dims:
                runs.append(("aware", aware, False))
            for label, binary, q2 in runs:
                theirs, cpu = replay(binary, out, q2)
                rows.append((name, dims, ref, own, ours, label, theirs, cpu))
            print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(
        "| case | ASTRA-sim dims | plan's own (s) | topoopt on the export (s) | binary |"
        " ASTRA-sim (s) | ratio | replay CPU (s) |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|")
    for name, dims, ref, own, ours, label, theirs, cpu in rows:
        print(
            f"| {name} | `{dims}` | {own:.4g} (`{ref}_s`) | {ours:.4g} | {label} | "
            f"{theirs:.4g} | {theirs / ours:.3f} | {cpu:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
