"""Benchmark: the work and memory estimate against the measured peak memory, on 30 plans.

Every row is one ``topoopt simulate PLAN --fabric F --json`` process (the CLI, as a user runs
it) whose peak resident memory is read from the kernel (``os.wait4``: ``ru_maxrss``), beside
the estimate :func:`topoopt.flowsim.work.estimate_work` computes for the same plan before any
fabric or flow exists. The plans are the built-in plans of ``traffic/plans`` and variants of
them at other sizes (servers, data-parallel replicas, micro-batches), GPUs (``--gpu``) and
sharding (ZeRO-2/3, FSDP full and hybrid shard), on the ideal switch and a fat-tree.

Printed: one row per plan (flows counted, estimate GB, measured peak GB, ratio estimate / peak,
wall and CPU seconds), then the smallest and largest ratio. The goal is ``1 <= ratio <= 2`` on
every row. The numba kernels are compiled (and cached) by a first, unmeasured run, so each row
is a process loading them from the cache, as every run after the first does.

Usage::

    nice -n 19 .venv/bin/python benchmarks/bench_estimate.py            # the 30 rows
    .venv/bin/python benchmarks/bench_estimate.py --only vgg16-dp,dlrm   # a few
    .venv/bin/python benchmarks/bench_estimate.py --markdown             # the table for docs
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLANS = ROOT / "traffic" / "plans"


def variant(base: str, servers=None, gps=None, options=None, **par) -> dict:
    """The built-in plan ``base`` with another cluster size and parallelism fields."""
    d = copy.deepcopy(yaml.safe_load((PLANS / f"{base}.yaml").read_text()))
    if servers:
        d["cluster"]["servers"] = servers
    if gps:
        d["cluster"]["gpus_per_server"] = gps
    if options:
        d.setdefault("options", {}).update(options)
    d["parallelism"].update(par)
    return d


def cases() -> list[tuple[str, dict, str, str | None]]:
    """``(label, plan, fabric, gpu)`` of the 30 rows."""
    fs = "gpt3-175b-fsdp"
    return [
        ("vgg16-dp", variant("vgg16-dp"), "ideal", None),
        ("vgg16-dp", variant("vgg16-dp"), "fat-tree", None),
        ("vgg16-dp 64x8", variant("vgg16-dp", 64, dp=512, global_batch_size=8192), "ideal", None),
        (
            "vgg16-dp 256x8",
            variant("vgg16-dp", 256, dp=2048, global_batch_size=32768),
            "ideal",
            None,
        ),  # fmt: skip
        ("dlrm", variant("dlrm"), "ideal", None),
        ("dlrm", variant("dlrm"), "ideal", "h100-sxm"),
        ("dlrm-128", variant("dlrm-128"), "ideal", None),
        ("dlrm-128", variant("dlrm-128"), "fat-tree", None),
        ("dlrm 32x8", variant("dlrm", 32, dp=256, micro_batch_size=256), "ideal", None),
        ("dlrm 256x4", variant("dlrm", 256, 4, dp=1024, micro_batch_size=64), "ideal", None),
        ("gpt3-175b-32", variant("gpt3-175b-32"), "ideal", None),
        ("gpt3-175b-32", variant("gpt3-175b-32"), "fat-tree", None),
        ("gpt3-175b-32 zero-1", variant("gpt3-175b-32", zero=1), "ideal", None),
        (
            "gpt3-175b-32 zero-2 B64",
            variant("gpt3-175b-32", zero=2, global_batch_size=64),
            "ideal",
            None,
        ),
        (
            "gpt3-175b-32 zero-3 B64",
            variant("gpt3-175b-32", zero=3, global_batch_size=64),
            "ideal",
            None,
        ),
        ("gpt3-175b 64x8 dp4", variant("gpt3-175b-32", 64, dp=4), "ideal", None),
        ("gpt3-175b", variant("gpt3-175b"), "ideal", None),
        ("gpt3-175b", variant("gpt3-175b"), "fat-tree", "h100-sxm"),
        ("llama3-70b-cp", variant("llama3-70b-cp"), "ideal", None),
        ("llama3-70b-cp 64x8", variant("llama3-70b-cp", 64, dp=8), "ideal", None),
        ("mixtral-8x7b", variant("mixtral-8x7b"), "ideal", None),
        (
            "mixtral-8x7b 32x8",
            variant("mixtral-8x7b", 32, dp=32, global_batch_size=1024),
            "ideal",
            None,
        ),  # fmt: skip
        ("mixtral-8x7b-32x4", variant("mixtral-8x7b-32x4"), "ideal", None),
        ("mixtral-8x7b-32x4", variant("mixtral-8x7b-32x4"), "fat-tree", None),
        ("fsdp 8x8 m12", variant(fs, 8, dp=8, global_batch_size=96), "ideal", None),
        ("fsdp 16x8 m4", variant(fs, 16, dp=16, global_batch_size=64), "ideal", None),
        ("fsdp 16x8 m4", variant(fs, 16, dp=16, global_batch_size=64), "fat-tree", None),
        (
            "fsdp 16x8 m4 hybrid",
            variant(fs, 16, dp=16, global_batch_size=64, fsdp="hybrid_shard"),
            "ideal",
            None,
        ),  # fmt: skip
        ("fsdp 16x8 m12", variant(fs, 16, dp=16, global_batch_size=192), "ideal", None),
        ("fsdp 32x8 m4", variant(fs, 32, dp=32, global_batch_size=128), "ideal", None),
    ]


def estimate(path: Path, gpu: str | None, fabric: str = "ideal"):
    """The estimate ``topoopt simulate`` checks once the fabric is built (its paths known)."""
    from topoopt.app.cli.common import DEFAULT_DEGREE, DEFAULT_LINK_GBPS
    from topoopt.app.studies.compare import build_fabric
    from topoopt.flowsim.work import estimate_work, fabric_paths
    from traffic.load import load_workload

    w = load_workload(str(path), gpu=gpu)
    run = build_fabric(fabric, w, DEFAULT_DEGREE, DEFAULT_LINK_GBPS * 1e9 / 8)
    return estimate_work(run.workload, paths=fabric_paths(run.fabric, run.routing))


def measure(path: Path, fabric: str, gpu: str | None, env: dict) -> tuple[float, float, float]:
    """Peak RSS (bytes), wall and CPU seconds of one ``topoopt simulate`` process."""
    cmd = [sys.executable, "-m", "topoopt", "simulate", str(path), "--fabric", fabric, "--json"]
    if gpu:
        cmd += ["--gpu", gpu]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()[-400:]}")
    return ru.ru_maxrss * 1024.0, wall, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated labels to run (default: all)")
    ap.add_argument("--fabric", default="", help="only the rows on this fabric")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    only = {s for s in args.only.split(",") if s}
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOPOOPT_MAX_FLOWS="1e8")
    env.setdefault("TOPOOPT_MEMORY_BUDGET_GB", "16")
    rows = [c for c in cases() if (not only or c[0] in only) and args.fabric in ("", c[2])]
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "warm.yaml"
        warm.write_text(yaml.safe_dump(variant("vgg16-dp")))
        measure(warm, "ideal", None, env)  # compiles and caches the numba kernels
        ratios = []
        if args.markdown:
            print("| plan | fabric | GPU | GPUs | flows | paths | estimate GB | peak GB | ratio |"
                  " wall s | CPU s |")  # fmt: skip
            print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        else:
            print(
                f"{'plan':24s} {'fabric':9s} {'gpu':9s} {'GPUs':>5s} {'flows':>11s} {'paths':>5s} "
                f"{'est GB':>7s} {'peak GB':>7s} {'ratio':>6s} {'wall s':>7s} {'cpu s':>6s}"
            )
        for k, (label, plan, fabric, gpu) in enumerate(rows):
            path = Path(tmp) / f"plan{k}.yaml"
            path.write_text(yaml.safe_dump(plan))
            est = estimate(path, gpu, fabric)
            peak, wall, cpu = measure(path, fabric, gpu, env)
            r = est.peak_bytes / peak
            ratios.append(r)
            g = gpu or "-"
            if args.markdown:
                print(f"| {label} | {fabric} | {g} | {est.gpus:,} | {est.flows:,} | {est.paths} | "
                      f"{est.peak_bytes / 1e9:.2f} | {peak / 1e9:.2f} | {r:.2f} | {wall:.1f} | "
                      f"{cpu:.1f} |")  # fmt: skip
            else:
                print(f"{label:24s} {fabric:9s} {g:9s} {est.gpus:5d} {est.flows:11,d} "
                      f"{est.paths:5d} {est.peak_bytes / 1e9:7.2f} {peak / 1e9:7.2f} {r:6.2f} "
                      f"{wall:7.1f} {cpu:6.1f}", flush=True)  # fmt: skip
        bad = [r for r in ratios if not 1.0 <= r <= 2.0]
        print(f"\n{len(ratios)} plans: ratio estimate / peak from {min(ratios):.2f} to "
              f"{max(ratios):.2f}; outside [1, 2]: {len(bad)}")  # fmt: skip


if __name__ == "__main__":
    main()
