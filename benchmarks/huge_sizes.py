"""Sizes of 10^6 to 10^9 for every command and input kind, run from outside (issue 30, 1).

Each case is a real subprocess (``python -m topoopt ...``) on a file or option carrying one
huge size: servers, GPUs per server, batch, micro-batch, layers, hidden size, data parallelism,
stride N, fabric sizes and radices, collective sizes and chunks, evaluation counts, Chakra
sizes, jobs files of many jobs, flow files of many flows. Every case must end within
``--max-cpu`` CPU seconds (user + system; the wall clock of a loaded machine says little, a
case is cut at ``--timeout`` wall seconds) with exit 0 or exit 2 and, on exit 2, exactly one
stderr line (the limit it met: the estimate, the limit, the option that raises it).

Printed per case: wall and CPU seconds, the exit code and the stderr's last line; at the end the
case of most CPU and the failures (hang, slow, traceback, more than one line, other exits). A
case cut by ``--timeout`` shows the CPU it had used (on a loaded machine at ``nice -n 19`` a
90 s wall cut can fall on a case of 2 s CPU: rerun those alone).

Usage::

    nice -n 19 .venv/bin/python benchmarks/huge_sizes.py            # every case
    .venv/bin/python benchmarks/huge_sizes.py --only strides       # cases whose name matches
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VGG = {
    "model": "vgg16",
    "parallelism": {"dp": 8, "micro_batch_size": 4, "global_batch_size": 32},
    "precision": {"activation_bytes": 4, "gradient_bytes": 4, "parameter_bytes": 4},
    "cluster": {"servers": 8, "gpus_per_server": 1},
}
GPT = {
    "model": {"base": "gpt3-175b", "layers": 8},
    "parallelism": {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16},
    "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
    "cluster": {"servers": 8, "gpus_per_server": 2},
}


def _plan(base: dict, **edits) -> dict:
    doc = json.loads(json.dumps(base, allow_nan=False))
    for path, value in edits.items():
        *head, last = path.split("__")
        node = doc
        for k in head:
            if not isinstance(node.get(k), dict):
                node[k] = {"base": node[k]} if k == "model" else {}
            node = node[k]
        node[last] = value
    return doc


def _dp_plan(servers: int, gps: int = 1, base: dict = VGG) -> dict:
    dp = servers * gps
    return _plan(
        base,
        cluster__servers=servers,
        cluster__gpus_per_server=gps,
        parallelism__dp=dp,
        parallelism__global_batch_size=dp * base["parallelism"]["micro_batch_size"],
    )


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) of every case; files are written under ``tmp``."""

    def put(name: str, doc) -> str:
        p = tmp / name
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc, allow_nan=False))
        return str(p)

    out: list[tuple[str, list[str]]] = []
    plans = {
        "servers-1e6": _dp_plan(10**6),
        "servers-1e7": _dp_plan(10**7),
        "servers-1e8": _dp_plan(10**8),
        "servers-1e9": _dp_plan(10**9),
        "gpus-1e9-tp-pp-dp": _plan(
            GPT,
            model__layers=1000,
            parallelism__tp=1000,
            parallelism__pp=1000,
            parallelism__dp=1000,
            cluster__servers=10**6,
            cluster__gpus_per_server=1000,
            parallelism__global_batch_size=1000 * 4,
        ),  # fmt: skip
        "gpus-1e8-tp-dp": _plan(
            GPT,
            parallelism__tp=10**4,
            parallelism__pp=1,
            parallelism__dp=10**4,
            cluster__servers=10**4,
            cluster__gpus_per_server=10**4,
            parallelism__global_batch_size=10**4,
        ),  # fmt: skip
        "gpus-per-server-1e6": _dp_plan(1, 10**6),
        "gpus-1e7-gpt": _plan(
            GPT,
            cluster__servers=2_500_000,
            parallelism__dp=2_500_000,
            parallelism__global_batch_size=2_500_000 * 4,
        ),  # fmt: skip
        "batch-1e9": _plan(VGG, parallelism__global_batch_size=8 * 10**9),
        "micro-batch-1e9": _plan(
            VGG, parallelism__micro_batch_size=10**9, parallelism__global_batch_size=8 * 10**9
        ),
        "layers-1e6": _plan(GPT, model__layers=10**6),
        "layers-1e9": _plan(GPT, model__layers=10**9),
        "hidden-1e6": _plan(GPT, model__hidden=2**20, model__heads=2**10),
        "seq-1e7": _plan(GPT, model__seq_len=10**7),
        "vocab-1e9": _plan(GPT, model__vocab=10**9),
        "pp-1e6": _plan(
            GPT,
            model__layers=10**6,
            parallelism__pp=10**6,
            parallelism__dp=1,
            parallelism__tp=1,
            cluster__servers=10**6,
            cluster__gpus_per_server=1,
            parallelism__global_batch_size=10**6,
        ),  # fmt: skip
    }
    paths = {k: put(f"{k}.json", v) for k, v in plans.items()}
    for k, p in paths.items():
        out.append((f"simulate {k}", ["simulate", p, "--fabric", "ideal", "--json"]))
    for k in (
        "servers-1e6",
        "servers-1e8",
        "layers-1e6",
        "gpus-1e7-gpt",
        "gpus-1e9-tp-pp-dp",
        "batch-1e9",
        "pp-1e6",
    ):
        p = paths[k]
        out += [
            (f"simulate-fat-tree {k}", ["simulate", p, "--fabric", "fat-tree", "--json"]),
            (f"compare {k}", ["compare", p, "--json"]),
            (f"design {k}", ["design", p, "--json"]),
            (f"traffic {k}", ["traffic", p, "--json"]),
            (f"reconfig {k}", ["reconfig", p, "--json"]),
            (f"breakeven {k}", ["breakeven", p, "--json"]),
            (f"advise {k}", ["advise", p, "--json"]),
            (f"cosearch {k}", ["cosearch", p, "--json"]),
            (f"whatif {k}", ["whatif", p, "--design", "@DESIGN", "--fail-links", "1", "--json"]),
            (f"export-chakra {k}",
             ["export", p, "--format", "chakra", "--out", str(tmp / f"c-{k}")]),
            (f"export-astra {k}",
             ["export", p, "--format", "astra-sim", "--out", str(tmp / f"a-{k}")]),
            (f"export-simai {k}",
             ["export", p, "--format", "simai", "--out", str(tmp / f"s-{k}.txt")]),
        ]  # fmt: skip
    small = put("small.json", VGG)
    out += [
        ("advise --gpus 1e9", ["advise", "vgg16-dp", "--gpus", str(10**9), "--json"]),
        ("advise --gpus 1e6", ["advise", "vgg16-dp", "--gpus", str(10**6), "--json"]),
        ("advise --gpus 65536 gpt3", ["advise", "gpt3-175b", "--gpus", "65536", "--json"]),
        ("cosearch --servers 1e6", ["cosearch", "vgg16", "--servers", str(10**6), "--json"]),
        ("cosearch --servers 1e9", ["cosearch", "gpt3-175b", "--servers", str(10**9), "--json"]),
        ("cosearch --gpus-per-server 1e6",
         ["cosearch", "vgg16", "--servers", "8", "--gpus-per-server", str(10**6), "--json"]),
        ("cosearch --max-evaluations 1e9",
         ["cosearch", "vgg16", "--servers", "1000000", "--max-evaluations", str(10**9), "--json"]),
        ("cosearch --degree 1e6", ["cosearch", "vgg16", "--servers", "8", "--degree", str(10**6)]),
        ("design --degree 1e6", ["design", small, "--degree", str(10**6), "--json"]),
        ("design --max-parallel 1e9", ["design", small, "--max-parallel", str(10**9), "--json"]),
        ("design --ocs-radix 1e9", ["design", small, "--ocs-radix", str(10**9), "--json"]),
        ("design --work-limit 1e9 --time-limit 5",
         ["design", small, "--degree", "4", "--work-limit", "1e9", "--time-limit", "5", "--json"]),
        ("design --reserve-ports 1e9", ["design", small, "--reserve-ports", str(10**9)]),
        ("compare --degree 1e6", ["compare", small, "--degree", str(10**6), "--json"]),
        ("compare --degree 1e6 ideal", ["compare", small, "--fabrics", "ideal,fat-tree",
                                        "--degree", str(10**6), "--json"]),
        ("simulate --degree 1e9 expander",
         ["simulate", small, "--fabric", "expander", "--degree", str(10**9), "--json"]),
        ("simulate --split-allreduce 1",
         ["simulate", "gpt3-175b", "--fabric", "ideal", "--split-allreduce", "1", "--json"]),
        ("simulate --split-allreduce 1 small",
         ["simulate", small, "--fabric", "ideal", "--split-allreduce", "1", "--json"]),
        ("reconfig --max-evaluations 1e9",
         ["reconfig", small, "--degree", "4", "--max-evaluations", str(10**9), "--json"]),
        ("reconfig --work-limit 1e9", ["reconfig", small, "--degree", "4", "--work-limit", "1e9"]),
        ("strides 1e9 8", ["strides", str(10**9), "8", "--json"]),
        ("strides 1e9 8 --time-limit 5", ["strides", str(10**9), "8", "--time-limit", "5"]),
        ("strides 1e6 1e6", ["strides", str(10**6), str(10**6), "--json"]),
        ("strides 1e7 64 diameter", ["strides", str(10**7), "64", "--objective", "diameter"]),
        ("strides 1e6 8", ["strides", str(10**6), "8"]),
        ("collective --servers 1e9 ring",
         ["collective", "--collective", "all-reduce", "--size", "1GB", "--fabric", "ideal",
          "--servers", str(10**9), "--json"]),
        ("collective --servers 1e6 synthesize",
         ["collective", "--collective", "all-reduce", "--size", "1GB", "--fabric", "ideal",
          "--servers", str(10**6), "--algorithm", "synthesize", "--json"]),
        ("collective --servers 1e6 all-to-all",
         ["collective", "--collective", "all-to-all", "--size", "1GB", "--fabric", "fat-tree",
          "--servers", str(10**6), "--json"]),
        ("collective --dims 1000x1000x1000",
         ["collective", "--collective", "all-reduce", "--size", "1GB", "--fabric", "torus",
          "--dims", "1000x1000x1000", "--json"]),
        ("collective --k 1e6", ["collective", "--collective", "all-reduce", "--size", "1GB",
                                "--fabric", "fat-tree", "--k", str(10**6), "--json"]),
        ("collective --chunks 1e9",
         ["collective", "--collective", "broadcast", "--size", "1GB", "--fabric", "ideal",
          "--servers", "8", "--algorithm", "tree", "--chunks", str(10**9), "--json"]),
        ("collective --size 1e30", ["collective", "--collective", "all-reduce", "--size", "1e30",
                                    "--fabric", "ideal", "--servers", "8", "--json"]),
        ("collective expander 1e6", ["collective", "--collective", "all-reduce", "--size", "1GB",
                                     "--fabric", "expander", "--servers", str(10**6),
                                     "--degree", "8", "--json"]),
        ("collective ideal 1e5", ["collective", "--collective", "all-reduce", "--size", "1GB",
                                  "--fabric", "ideal", "--servers", str(10**5), "--json"]),
        ("collective ideal 1e5 tree", ["collective", "--collective", "broadcast", "--size", "1GB",
                                       "--fabric", "ideal", "--servers", str(10**5),
                                       "--algorithm", "tree", "--json"]),
        ("collective direct 3,000", ["collective", "--collective", "all-reduce", "--size", "1GB",
                                     "--fabric", "ideal", "--servers", "3000", "--algorithm",
                                     "direct", "--json"]),
        ("collective leaf-spine 1e5", ["collective", "--collective", "all-gather", "--size", "1GB",
                                       "--fabric", "leaf-spine", "--servers", str(10**5),
                                       "--json"]),
    ]  # fmt: skip
    for kind, extra in (
        ("ideal", ["--servers", str(10**9)]),
        ("fat-tree", ["--k", str(10**6)]),
        ("leaf-spine", ["--servers", str(10**9), "--radix", "64"]),
        ("rail", ["--servers", str(10**7)]),
        ("torus", ["--dims", "1000x1000x1000"]),
        ("tpu-v4", ["--dims", "4000x4000x4000"]),
        ("torus", ["--dims", "8x8", "--links-per-dim", str(10**9)]),
        ("leaf-spine", ["--servers", "64", "--nics", str(10**9)]),
        ("rail", ["--servers", "16", "--gpus-per-server", str(10**6)]),
        ("direct", ["--servers", str(10**7), "--degree", "8"]),
        ("expander", ["--servers", str(10**6), "--degree", "8"]),
        ("expander", ["--servers", "20000", "--degree", "64"]),
        ("expander", ["--servers", "100", "--degree", str(10**9)]),
        ("hybrid", ["--servers", str(10**7), "--optical-degree", "8"]),
        ("ideal", ["--servers", "8", "--gpus-per-server", str(10**9)]),
    ):
        out.append((f"fabric {kind} {' '.join(extra)}", ["fabric", kind, *extra, "--json"]))
    # jobs files: many jobs, a huge cluster
    jobs = [{"name": f"j{i}", "plan": "vgg16-dp"} for i in range(10**5)]
    out += [
        ("cluster --servers 1e9", ["cluster", put("jobs1.json", {"jobs": jobs[:1]}),
                                   "--servers", str(10**9), "--json"]),
        ("cluster 1e5 jobs", ["cluster", put("jobsN.json", {"jobs": jobs}),
                              "--servers", "16", "--json"]),
        ("cluster --ocs-radix 1e9", ["cluster", put("jobs2.json", {"jobs": jobs[:1]}),
                                     "--servers", "16", "--ocs-radix", str(10**9), "--json"]),
        ("cluster job servers 1e6", ["cluster", put("jobs3.json", {"jobs": [
            {"name": "big", "plan": _dp_plan(10**6)}]}), "--servers", str(10**6), "--json"]),
        ("advise 1e5 jobs",
         ["advise", put("advN.json", [{"plan": "vgg16-dp", "weight": 1}] * 10**5), "--json"]),
        ("advise weight 1e300",
         ["advise", put("advW.json", [{"plan": "vgg16-dp", "weight": 1e300}]), "--json"]),
        ("advise job of 1e6 servers", ["advise", put("advB.json", [{"plan": _dp_plan(10**6)}]),
                                       "--json"]),
    ]  # fmt: skip
    # flows file: many flows and links
    nflows = 200_000
    flows = {
        "links": [{"id": 0, "capacity": 1e9}],
        "flows": [{"id": i, "bytes": 1e6, "paths": [{"links": [0]}]} for i in range(nflows)],
    }
    out.append(("netsim 2e5 flows", ["netsim", put("flows.json", flows), "--json"]))
    out.append(("netsim bytes 1e300", ["netsim", put("flowsB.json", {
        "links": [{"id": 0, "capacity": 1e-300}],
        "flows": [{"id": 0, "bytes": 1e300, "paths": [{"links": [0]}]}]}), "--json"]))  # fmt: skip
    # Chakra: one rank with a huge comm_size, and many ranks
    out.append(("export chakra --max-nodes 1e9", [
        "export", "gpt3-175b", "--format", "chakra", "--out", str(tmp / "cbig"),
        "--max-nodes", str(10**9)]))  # fmt: skip
    # hardware catalogue with a huge GPU
    hw = tmp / "hw.yaml"
    hw.write_text(
        "version: 1\ngpus:\n  huge:\n    label: huge\n    bf16_tflops: 1e12\n"
        "    hbm_gb: 1e12\n    hbm_tb_per_s: 1e9\n    scale_up_gb_per_s: 1e12\n"
        "    scale_up_domain: 1000000000\n    efficiency: 0.5\n    source: s\n"
        "    efficiency_source: s\n"
    )
    # whatif on a small design with huge failure counts and samples
    out += [
        ("whatif --fail-links 1e9",
         ["whatif", small, "--design", "@DESIGN", "--fail-links", str(10**9), "--json"]),
        ("whatif --fail-ocs 1e9",
         ["whatif", small, "--design", "@DESIGN", "--fail-ocs", str(10**9), "--json"]),
        ("whatif --sweep --samples 1e9",
         ["whatif", small, "--design", "@DESIGN", "--sweep", "--samples", str(10**9), "--json"]),
        ("whatif --work-limit 1e9", ["whatif", small, "--design", "@DESIGN", "--fail-links", "1",
                                     "--solver", "joint", "--work-limit", "1e9", "--json"]),
    ]  # fmt: skip
    out.append(("hardware huge GPU", ["simulate", small, "--gpu", "huge", "--json", "@HW"]))
    return out


def run(argv: list[str], timeout: float, tmp: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    if argv[-1] == "@HW":
        argv = argv[:-1]
        env["TOPOOPT_HARDWARE"] = str(tmp / "hw.yaml")
    argv = [str(tmp / "design.json") if a == "@DESIGN" else a for a in argv]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "topoopt", *argv], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp,
    )  # fmt: skip
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        cpu = _proc_cpu(proc.pid)  # what it used before the wall-clock cut
        proc.kill()
        proc.communicate()
        _child_cpu()  # the killed case's CPU is not the next case's
        return {"wall": time.perf_counter() - t0, "cpu": cpu, "rc": None,
                "err": f"HANG (cut at {timeout:g} s wall)", "lines": 0}  # fmt: skip
    wall = time.perf_counter() - t0
    lines = [x for x in err.splitlines() if x.strip()]
    return {
        "wall": wall,
        "cpu": _child_cpu(),
        "rc": proc.returncode,
        "err": lines[-1] if lines else "",
        "lines": len(lines),
        "traceback": "Traceback" in err,
    }


_CPU = [0.0]


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of a running process, from /proc (NaN where unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _child_cpu() -> float:
    """CPU seconds (user + system) of the children reaped since the last call."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime
    out, _CPU[0] = total - _CPU[0], total
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timeout", type=float, default=120.0, help="wall seconds of a case")
    ap.add_argument("--max-cpu", type=float, default=30.0, help="CPU seconds of a case")
    ap.add_argument("--only", default="", help="cases whose name holds this text")
    ap.add_argument("--start", type=int, default=0, help="skip the cases before this index")
    ap.add_argument("--stop", type=int, default=None, help="end before this index")
    args = ap.parse_args()
    bad = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        todo = [(n, a) for n, a in cases(tmp)[args.start : args.stop] if args.only in n]
        slowest = (0.0, "")
        if any("@DESIGN" in a for _, a in todo):  # the design whatif cases read
            subprocess.run(
                [sys.executable, "-m", "topoopt", "design", str(tmp / "small.json"), "--degree",
                 "4", "--out", str(tmp / "design.json")], check=True, cwd=tmp,
                env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL,
            )  # fmt: skip
        _child_cpu()
        for name, argv in todo:
            r = run(argv, args.timeout, tmp)
            slowest = max(slowest, (r["cpu"] if r["rc"] is not None else math.inf, name))
            ok = r["rc"] == 0 or (r["rc"] == 2 and r["lines"] == 1 and not r.get("traceback"))
            ok = ok and r["cpu"] <= args.max_cpu
            if not ok:
                bad.append((name, r))
            print(f"{'ok ' if ok else 'BAD'} {r['wall']:6.1f} s wall {r['cpu']:5.1f} s CPU "
                  f"rc {r['rc']}  {name}: "
                  f"{r['err'][:220]}", flush=True)  # fmt: skip
    print(f"\n{len(todo)} cases, {len(bad)} bad; most CPU {slowest[1]} ({slowest[0]:.1f} s)")
    for name, r in bad:
        print(f"  BAD {name}: rc {r['rc']}, {r['lines']} stderr lines: {r['err'][:200]}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
