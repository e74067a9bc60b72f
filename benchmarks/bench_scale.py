"""Benchmark: the flow kernel's scaling cases of issue 25, this tree against a baseline tree.

Cases (every one run in a fresh process, so two trees can be compared side by side in one run):

- ``one-link``: N flows on one 10 GB/s link, all at t=0, distinct sizes (processor sharing: one
  completion event per flow). The target is 1,000,000 flows in under 10 s. A kernel that is
  quadratic there runs the baseline at ``--baseline-one-link`` flows (default 200,000).
- ``k16-mixed``: 100,000 random flows (1..1000 MB, all at t=0, ECMP paths as in
  ``bench_flowsim.py``) on a k=16 fat-tree whose links have mixed capacities (12.5, 25 or
  50 GB/s, seeded). Target: under 20 s.
- ``simgrid``: 10,000 random flows on a k=8 fat-tree against SimGrid (``tests/peers/
  simgrid_peer.py`` under ``/usr/bin/python3``): the simulation alone (ours: one ``simulate``
  call, kernels already loaded, on the flow set built in the process with its paths given, so
  neither the routing nor the decoding of the netsim JSON is in it (the decoding is in the
  whole-process figure); ``simulate``'s own array preparation and the result are; SimGrid:
  platform build + run, timed inside the peer) and whole processes (ours:
  interpreter start, import, kernel load from numba's cache, read the netsim JSON, simulate;
  SimGrid: its peer process), and the largest relative difference of finish times.
- ``llama405``: ``topoopt simulate`` of Llama 3 405B on 16,384 H100 (tp 8, cp 16, pp 16, dp 8,
  sequence 131,072; :data:`LLAMA405_PLAN`) on the three-tier fat-tree, as the ``gpt3`` rows.
- ``gpt3``: ``topoopt simulate`` of GPT-3 175B (tp 8, pp 16, dp = GPUs / 128, 1,536 sequences)
  on the ideal switch and a fat-tree (``--gpt3-fabrics``; ``--gpt3-gpus``, default 2,048 8,192
  16,384; servers of 8 x 400 G H100, ``--gpt3-args``), with the
  symmetry reduction and, up to ``--gpt3-unreduced-max`` GPUs, without (``--no-reduction``):
  each a whole process under ``/usr/bin/time -v`` (wall, user + system CPU, peak resident
  memory), the classes found, and the relative difference of the iteration times.

Printed per case: wall and CPU seconds of the simulation (CPU time is the fairer figure on a
loaded machine), events, and for a baseline the ratio and the largest relative difference of
finish times between the trees. Never asserts on time.

Usage::

    .venv/bin/python benchmarks/bench_scale.py                       # this tree only
    .venv/bin/python benchmarks/bench_scale.py --baseline /work/main  # before / after
    .venv/bin/python benchmarks/bench_scale.py --cases one-link --one-link 100000
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "peers" / "simgrid_peer.py"
CASES = ("one-link", "k16-mixed", "simgrid", "gpt3", "llama405")
GPT3_PLAN = """model: gpt3-175b
parallelism: {{tp: 8, pp: 16, dp: {dp}, micro_batch_size: 1, global_batch_size: 1536}}
precision: {{activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}}
cluster: {{servers: {servers}, gpus_per_server: 8}}
"""


LLAMA405_PLAN = """model: {{base: llama3-405b, seq_len: 131072}}
parallelism: {{tp: 8, cp: 16, pp: 16, dp: 8, sp: true, vpp: 1,
              stage_layers: [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7],
              micro_batch_size: 1, global_batch_size: 128, recompute: none,
              distributed_optimizer: true}}
precision: {{activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}}
cluster: {{servers: {servers}, gpus_per_server: 8}}
"""
"""Issue 25's Llama 3 405B case: the long-context stage (tp 8, cp 16, pp 16, dp 8, sequence
131,072, 128 sequences a step) on 2,048 servers of 8 H100 (``servers`` fixed at 2,048)."""

GPT3_ARGS = "--degree 8 --link-gbps 400 --gpu h100-sxm"
"""Fabric and GPU options of the ``gpt3`` rows: 8 x 400 G H100 servers (a three-tier fat-tree
at 16,384 GPUs)."""


def gpt3_run(
    gpus: int,
    fabric: str,
    reduced: bool,
    tmp: str,
    timeout: float,
    extra: str = GPT3_ARGS,
    template: str = GPT3_PLAN,
) -> dict:
    """One ``topoopt simulate --json`` process under ``/usr/bin/time -v``: its figures.
    ``template``: the plan (:data:`GPT3_PLAN`, or :data:`LLAMA405_PLAN` at 16,384 GPUs)."""
    plan = Path(tmp) / f"plan-{gpus}-{abs(hash(template))}.yaml"
    plan.write_text(template.format(dp=gpus // 128, servers=gpus // 8))
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "topoopt", "simulate", str(plan)]
    cmd += ["--fabric", fabric, "--json", "--reduction" if reduced else "--no-reduction"]
    cmd += extra.split()
    # 16,384 GPUs build about 7.4 M flows before aggregation: above the default guard; the
    # work estimate (flowsim.work) counts every ECMP path of every flow (35.6 GB on the
    # three-tier fat-tree at 16,384 GPUs, 3.1 GB measured with the reduction): raise its budget
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TOPOOPT_MAX_FLOWS": "40000000",
        "TOPOOPT_MEMORY_BUDGET_GB": "100000",
    }
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    facts = {}
    for ln in r.stderr.splitlines():
        k, _, v = ln.strip().rpartition(": ")
        facts[k] = v
    if r.returncode != 0:
        tail = [ln for ln in r.stderr.splitlines() if ln.startswith("error")]
        return {"error": tail[0] if tail else f"exit {r.returncode}"}
    h, m, sec = (
        [0.0, 0.0]
        + [float(x) for x in facts["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")]
    )[-3:]
    out = json.loads(r.stdout)
    return {
        "wall": 3600 * h + 60 * m + sec,
        "cpu": float(facts["User time (seconds)"]) + float(facts["System time (seconds)"]),
        "rss_gb": float(facts["Maximum resident set size (kbytes)"]) / 1e6,
        "iteration_s": out["iteration_s"],
        "reduction": out.get("reduction", {}),
    }


def gpt3_rows(
    gpus_list: list[int],
    unreduced_max: int,
    tmp: str,
    timeout: float,
    extra: str,
    fabrics: tuple[str, ...] = ("ideal", "fat-tree"),
    template: str = GPT3_PLAN,
    name: str = "gpt3",
) -> None:
    for gpus in gpus_list:
        for fabric in fabrics:
            red = gpt3_run(gpus, fabric, True, tmp, timeout, extra, template)
            line = f"{name} {gpus:>6} GPUs {fabric:<9}"
            if "error" in red:
                print(f"{line} reduced: {red['error']}", flush=True)
                continue
            info = red["reduction"]
            cls = (
                f"{info.get('flow_classes')}/{info.get('flows')} flow classes"
                if info.get("status") == "on"
                else f"off ({info.get('reason')})"
            )
            line += (
                f" reduced {red['wall']:7.1f} s wall {red['cpu']:7.1f} s cpu "
                f"{red['rss_gb']:5.2f} GB [{cls}]"
            )
            if gpus <= unreduced_max:
                un = gpt3_run(gpus, fabric, False, tmp, timeout, extra, template)
                if "error" in un:
                    line += f" | unreduced: {un['error']}"
                else:
                    diff = abs(un["iteration_s"] - red["iteration_s"]) / un["iteration_s"]
                    line += (
                        f" | unreduced {un['wall']:7.1f} s wall {un['cpu']:7.1f} s cpu "
                        f"{un['rss_gb']:5.2f} GB; iteration rel diff {diff:.1e}"
                    )
            print(line, flush=True)


def _flow_tools(tree: str):
    """``(FlowSet, simulate, bench_flowsim)`` with ``topoopt`` imported from ``tree``."""
    sys.path.insert(0, tree)
    from topoopt.flowsim import FlowSet, simulate

    spec = importlib.util.spec_from_file_location(
        "bench_flowsim", ROOT / "benchmarks" / "bench_flowsim.py"
    )
    bf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bf)  # its own sys.path entry comes after: topoopt stays `tree`'s
    return FlowSet, simulate, bf


def build_case(case: str, n: int, FlowSet, bf):
    """The flow set of ``case`` with ``n`` flows (seeded)."""
    if case == "one-link":
        rng = np.random.default_rng(0)
        size = rng.permutation(np.arange(1, n + 1)) * 1e6 + rng.uniform(0.0, 1.0, n)
        paths = np.zeros((n, 1), np.int64)
        return FlowSet.single_path([1e10], [0.0], size=size, start=np.zeros(n), paths=paths)
    if case == "k16-mixed":
        fs = bf.flow_set("fat-tree k=16", n, "random")
        cap = np.random.default_rng(1).choice([12.5e9, 25e9, 50e9], fs.n_links)
        return FlowSet(
            capacity=cap, latency=fs.latency, size=fs.size, start=fs.start, flow_ptr=fs.flow_ptr,
            path_ptr=fs.path_ptr, path_links=fs.path_links, weight=fs.weight,
        )  # fmt: skip
    return bf.flow_set("fat-tree k=8", n, "random")


def child(tree: str, case: str, n: int, out: str) -> None:
    """Run one case in this process with ``topoopt`` from ``tree``; write the figures to
    ``out`` (JSON) and the finish times next to it (``.npy``)."""
    FlowSet, simulate, bf = _flow_tools(tree)
    simulate(bf.flow_set("fat-tree k=4", 20, "random", stagger=0.1))  # load the kernels
    fs = build_case(case, n, FlowSet, bf)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(fs, record_series=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    np.save(out + ".npy", res.finish)
    Path(out).write_text(
        json.dumps({"wall": wall, "cpu": cpu, "events": res.n_events}, allow_nan=False)
    )


def run_tree(tree: str, case: str, n: int, tmp: str) -> tuple[dict, np.ndarray]:
    out = str(Path(tmp) / f"{abs(hash((tree, case, n)))}.json")
    cmd = [sys.executable, __file__, "--child", tree, case, str(n), out]
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONPATH": tree})
    return json.loads(Path(out).read_text()), np.load(out + ".npy")


def simgrid_row(tree: str, n: int, tmp: str) -> str:
    """Ours against SimGrid on ``n`` random k=8 flows: simulation only and whole process."""
    FlowSet, simulate, bf = _flow_tools(tree)
    fs = build_case("simgrid", n, FlowSet, bf)
    case, out = Path(tmp) / "case.json", Path(tmp) / "sg.json"
    case.write_text(json.dumps(bf.netsim_doc(fs), allow_nan=False))
    t0 = time.perf_counter()
    subprocess.run(["/usr/bin/python3", str(PEER), str(case), str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    sg_proc = time.perf_counter() - t0
    sg = json.loads(out.read_text())
    sg_finish = np.array([f["finish"] for f in sg["flows"]])
    ours, finish = run_tree(tree, "simgrid", n, tmp)
    code = (
        "import sys; from topoopt.flowsim.netsim_json import load_netsim; "
        "from topoopt.flowsim import simulate; c = load_netsim(sys.argv[1]); "
        "simulate(c.flows, record_series=False)"
    )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(case)], check=True,
                   env={**os.environ, "PYTHONPATH": tree})  # fmt: skip
    our_proc = time.perf_counter() - t0
    diff = float(np.max(np.abs(finish - sg_finish) / sg_finish))
    return (
        f"simgrid {n} flows k=8: simulation ours {ours['wall']:.3f} s (cpu {ours['cpu']:.3f}) "
        f"vs SimGrid {sg['wall_s']:.2f} s = {sg['wall_s'] / ours['wall']:.0f}x; whole process "
        f"ours {our_proc:.2f} s vs SimGrid {sg_proc:.2f} s = {sg_proc / our_proc:.1f}x; "
        f"max rel diff {diff:.1e}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", help="another checkout of topoopt to run side by side")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=CASES)
    ap.add_argument("--one-link", type=int, default=1_000_000)
    ap.add_argument("--baseline-one-link", type=int, default=200_000)
    ap.add_argument("--k16", type=int, default=100_000)
    ap.add_argument("--simgrid", type=int, default=10_000)
    ap.add_argument("--gpt3-gpus", nargs="*", type=int, default=[2048, 8192, 16384])
    ap.add_argument("--gpt3-unreduced-max", type=int, default=8192)
    ap.add_argument("--gpt3-args", default=GPT3_ARGS, help="fabric/GPU options of simulate")
    ap.add_argument(
        "--gpt3-fabrics", nargs="*", default=["ideal", "fat-tree"], help="e.g. rail, joint"
    )
    ap.add_argument("--gpt3-timeout", type=float, default=900.0)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        tree, case, n, out = args.child
        child(tree, case, int(n), out)
        return
    sizes = {"one-link": args.one_link, "k16-mixed": args.k16}
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores (wall times inflate under load)")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            if case == "gpt3":
                gpt3_rows(
                    args.gpt3_gpus, args.gpt3_unreduced_max, tmp, args.gpt3_timeout,
                    args.gpt3_args, tuple(args.gpt3_fabrics),
                )  # fmt: skip
                continue
            if case == "llama405":
                gpt3_rows(
                    [16384], 0, tmp, args.gpt3_timeout, args.gpt3_args, ("fat-tree",),
                    LLAMA405_PLAN, "llama3-405b",
                )  # fmt: skip
                continue
            if case == "simgrid":
                print(simgrid_row(str(ROOT), args.simgrid, tmp), flush=True)
                continue
            n = sizes[case]
            now, fin = run_tree(str(ROOT), case, n, tmp)
            line = (
                f"{case:<10} this tree: {n:>8} flows {now['wall']:8.2f} s wall "
                f"{now['cpu']:8.2f} s cpu {now['events']:>8} events"
            )
            if args.baseline:
                nb = args.baseline_one_link if case == "one-link" else n
                old, fin_old = run_tree(args.baseline, case, nb, tmp)
                line += (
                    f" | baseline: {nb:>8} flows {old['wall']:8.2f} s wall {old['cpu']:8.2f} s cpu"
                )
                if nb == n:
                    diff = np.max(np.abs(fin - fin_old) / fin_old)
                    line += f" ratio {old['cpu'] / now['cpu']:.2f}x cpu, max rel diff {diff:.1e}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
