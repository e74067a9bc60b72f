"""The log-log scaling study of ``docs/performance.md``: wall, CPU and peak memory against GPUs.

GPT-3 175B (tp 8, pp 16, dp = GPUs / 128, 1,536 sequences; :data:`bench_scale.GPT3_PLAN`) on
servers of 8 x 400 G H100 (:data:`bench_scale.GPT3_ARGS`), for each fabric of ``--fabrics``
(default the ideal switch, the fat-tree, which has three tiers from 16,384 GPUs, the
rail-optimised Clos and a ``joint`` design of 8 ports) and each GPU count of ``--gpus``
(default 128 .. 65,536): one ``topoopt simulate --json`` process under ``/usr/bin/time -v``
with the symmetry reduction and, up to ``--unreduced-max`` GPUs, one without
(``--no-reduction``). Each row: wall and CPU (user + system) seconds, peak resident memory, the
iteration time, the classes the reduction found (flow classes of flows, link classes of
links) and, where both ran, the relative difference of the iteration times.

A fabric whose run fails or passes ``--timeout`` at some size is not run at larger sizes (the
row says why). Then the log-log slope of CPU seconds and of peak memory against GPUs between
consecutive sizes (1 = linear), and, with ``--kernel``, the flow kernel's cases of
``bench_scale.py`` (``one-link`` and ``k16-mixed``). ``--csv FILE`` writes every row.

Never asserts on time; quote CPU seconds on a loaded machine (the load average is printed).

Usage::

    .venv/bin/python benchmarks/bench_scaling_study.py --gpus 128 512 2048 --csv rows.csv
    nice -n 19 .venv/bin/python benchmarks/bench_scaling_study.py --fabrics ideal fat-tree \\
        --gpus 128 512 2048 8192 16384 65536 --unreduced-max 2048 --timeout 1800
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUS = (128, 512, 2048, 8192, 16384, 65536)
FABRICS = ("ideal", "fat-tree", "rail", "joint")


def _bench_scale():
    spec = importlib.util.spec_from_file_location(
        "bench_scale", ROOT / "benchmarks" / "bench_scale.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def classes(info: dict) -> str:
    """``"F/f flows, L/l links"`` of a reduction that is on, else ``off (reason)``."""
    if not info:
        return ""
    if info.get("status") != "on":
        return f"off ({info.get('reason', '')})"
    return (
        f"{info.get('flow_classes'):,}/{info.get('flows'):,} flows, "
        f"{info.get('link_classes'):,}/{info.get('links'):,} links"
    )


def slopes(rows: list[dict], key: str) -> dict:
    """``(fabric, run) -> [(gpus_a, gpus_b, slope)]``: log-log slope of ``key`` between
    consecutive sizes that both ran."""
    out: dict = {}
    done = [r for r in rows if "error" not in r]
    for fab in sorted({r["fabric"] for r in done}):
        for run in ("reduced", "unreduced"):
            pts = sorted(
                (r["gpus"], r[key]) for r in done if r["fabric"] == fab and r["run"] == run
            )
            for (g0, v0), (g1, v1) in zip(pts, pts[1:], strict=False):
                if v0 > 0 and v1 > 0:
                    s = math.log(v1 / v0) / math.log(g1 / g0)
                    out.setdefault((fab, run), []).append((g0, g1, s))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", nargs="*", type=int, default=list(GPUS))
    ap.add_argument("--fabrics", nargs="*", default=list(FABRICS))
    ap.add_argument("--unreduced-max", type=int, default=2048)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    ap.add_argument("--args", default=None, help="fabric/GPU options of simulate")
    ap.add_argument("--kernel", action="store_true", help="also the kernel's one-link, k16 cases")
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    bs = _bench_scale()
    extra = bs.GPT3_ARGS if a.args is None else a.args
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for fab in a.fabrics:
            stopped = {"reduced": None, "unreduced": None}
            for gpus in sorted(a.gpus):
                for run in ("reduced", "unreduced"):
                    if run == "unreduced" and gpus > a.unreduced_max:
                        continue
                    row = {"fabric": fab, "gpus": gpus, "run": run}
                    if stopped[run]:
                        row["error"] = f"not run ({stopped[run]} at fewer GPUs)"
                    else:
                        r = bs.gpt3_run(gpus, fab, run == "reduced", tmp, a.timeout, extra)
                        row.update(r)
                        if "error" in r:
                            stopped[run] = r["error"]
                    rows.append(row)
                    print(_line(row, rows), flush=True)
        if a.kernel:
            for case, n in (("one-link", 1_000_000), ("k16-mixed", 100_000)):
                k, _ = bs.run_tree(str(ROOT), case, n, tmp)
                print(
                    f"kernel {case:<10} {n:>9,} flows {k['cpu']:8.2f} s cpu {k['wall']:8.2f} s "
                    f"wall {k['events']:>9,} events",
                    flush=True,
                )
    for key, name in (("cpu", "CPU s"), ("rss_gb", "peak GB")):
        for (fab, run), ss in slopes(rows, key).items():
            txt = ", ".join(f"{g0}->{g1}: {s:.2f}" for g0, g1, s in ss)
            print(f"log-log slope of {name}, {fab} {run}: {txt}")
    if a.csv:
        cols = ["fabric", "gpus", "run", "wall", "cpu", "rss_gb", "iteration_s", "classes",
                "rel_diff", "error"]  # fmt: skip
        with open(a.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, cols, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({**r, "classes": classes(r.get("reduction", {}))})


def _line(row: dict, rows: list[dict]) -> str:
    head = f"{row['fabric']:<9} {row['gpus']:>6} GPUs {row['run']:<9}"
    if "error" in row:
        return f"{head} {row['error']}"
    diff = ""
    if row["run"] == "unreduced":
        red = [
            r for r in rows
            if r["fabric"] == row["fabric"] and r["gpus"] == row["gpus"]
            and r["run"] == "reduced" and "error" not in r
        ]  # fmt: skip
        if red:
            d = abs(red[0]["iteration_s"] - row["iteration_s"]) / row["iteration_s"]
            row["rel_diff"] = d
            diff = f" rel diff {d:.1e}"
    return (
        f"{head} {row['cpu']:8.1f} s cpu {row['wall']:8.1f} s wall {row['rss_gb']:6.2f} GB "
        f"iteration {row['iteration_s']!r} s [{classes(row.get('reduction', {}))}]{diff}"
    )


if __name__ == "__main__":
    sys.exit(main())
