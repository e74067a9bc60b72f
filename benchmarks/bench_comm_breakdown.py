"""Where `joint-phased` spends more communication than the full Clos: per class, with two bounds.

Builds the ``fat-tree`` and ``joint`` rows as ``topoopt advise JOB --gpus N --gpu h100-sxm
--degree 8 --link-gbps 400`` does (:func:`topoopt.app.studies.compare.build_fabric`, the search's
900 s default), simulates both with ``exposed_by_class`` and routes ``joint``'s design per phase
(:func:`solvers.phase_routing`: the ``joint-phased`` row). Prints per class the communication on
the critical path (``comm_by_class``) of the three and the exposed seconds (the iteration minus
the iteration with that class instantaneous) of the two static ones, then two bounds derived from
the demands' bytes alone (``docs/verdicts.md``, "Why joint-phased carries more communication"):

* the gradient sync of the busiest stage: bytes a server sends (a ring reduce-scatter or
  all-gather of ``n`` members sends ``(n - 1) / n`` of the buffer per server it crosses) over
  ``d`` ports and over the ports the design's circuits keep inside a stage's block;
* one pipeline send: a server's ranks' activations of one micro-batch over one circuit, and over
  its ``d`` NICs.

Run it under ``/usr/bin/time -v`` for the peak memory (Mixtral 8x7B: 1,024 GPUs 64 s CPU, 0.77 GB;
16,384 GPUs 200 s CPU, 4.28 GB: under the memory lock)::

    nice -n 5 /usr/bin/time -v python benchmarks/bench_comm_breakdown.py mixtral-8x7b --gpus 1024
"""

from __future__ import annotations

import argparse
import time

import numpy as np

DEGREE = 8
LINK = 400e9 / 8  # bytes/s: 400 Gbps


def stage_bytes(workload, cls: str) -> dict[int, float]:
    """Per pipeline stage, the bytes one server sends for the ``cls`` collectives (ring
    reduce-scatters and all-gathers: ``(n - 1) / n`` of the buffer per group per server it
    crosses; a group's members on one server are adjacent in its ring)."""
    gps, out = workload.gpus_per_server, {}
    for d in workload.demands:
        if d.cls != cls:
            continue
        g = np.asarray(d.groups)
        n = g.shape[1]
        servers = np.unique(g // gps)
        per_group = len(np.unique(g[0] // gps))  # servers a group spans
        groups_per_server = g.shape[0] * per_group / servers.size
        out[d.stage] = out.get(d.stage, 0.0) + d.size * (n - 1) / n * groups_per_server
    return out


def main(argv=None) -> None:
    from solvers import phase_routing
    from topoopt.app.studies.advise import load_jobs, scale_plan
    from topoopt.app.studies.compare import build_fabric
    from topoopt.flowsim.iteration import simulate_iteration
    from traffic.build import workload_from_plan

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", help="a plan name or file")
    ap.add_argument("--gpus", type=int, required=True)
    a = ap.parse_args(argv)
    wl = workload_from_plan(scale_plan(load_jobs(a.job)[0].plan, a.gpus, "h100-sxm"))
    rows, c0 = {}, time.process_time()
    for name in ("fat-tree", "joint"):
        run = build_fabric(name, wl, DEGREE, LINK, seed=0, time_limit_s=900.0)
        it = simulate_iteration(
            run.workload,
            run.fabric,
            routing=run.routing,
            exposed_by_class=True,
            reduction=True,
            path_times=False,
        )
        rows[name] = (it.iteration_s, it.comm_s, it.comm_by_class, it.exposed_by_class)
    res = phase_routing(run.workload, run.design, run.fabric)
    ch = res.chosen.result
    rows["joint-phased"] = (res.iteration_s, ch.comm_s, ch.comm_by_class, {})
    print(
        f"{a.job} at {a.gpus} GPUs ({time.process_time() - c0:.1f} s CPU); design "
        f"{(run.design.info or {}).get('winner')!r}, phases "
        f"{''.join('R' if x else 'S' for x in res.choice)}"
    )
    classes = sorted({c for r in rows.values() for c in r[2]})
    print(
        f"{'':14}{'iteration s':>12}{'comm s':>9}"
        + "".join(f"{c:>9}" for c in classes)
        + "  exposed: "
        + " ".join(f"{c:>7}" for c in classes)
    )
    for name, (t, comm, by, exp) in rows.items():
        print(
            f"{name:14}{t:12.6f}{comm:9.4f}"
            + "".join(f"{by.get(c, 0):9.4f}" for c in classes)
            + "  "
            + ("" if not exp else "         " + " ".join(f"{exp.get(c, 0):7.4f}" for c in classes))
        )
    # bounds from the demands' bytes
    c = run.design.circuits.rows
    blk = wl.servers // max(1, len({d.stage for d in wl.demands}))
    intra = c[(c[:, 0] // blk) == (c[:, 1] // blk)]
    ring_ports = 2 * int(intra[:, 2].sum()) / wl.servers  # mean ports a server keeps in its block
    dp = stage_bytes(wl, "dp")
    if dp:
        s, b = max(dp.items(), key=lambda kv: kv[1])
        print(
            f"dp bound, stage {s}: {b / 1e9:.2f} GB a server: {b / (DEGREE * LINK):.4f} s over "
            f"{DEGREE} ports, {b / (ring_ports * LINK):.4f} s over {ring_ports:g} in-block "
            "ports (mean)"
        )
    pp = [d for d in wl.demands if d.cls == "pp"]
    if pp:
        send = max(d.size for d in pp) * wl.gpus_per_server
        print(
            f"pp send: {send / 1e6:.1f} MB a server a micro-batch: {send / LINK * 1e3:.4f} ms "
            f"on one circuit, {send / (DEGREE * LINK) * 1e3:.4f} ms over {DEGREE} NICs"
        )


if __name__ == "__main__":
    main()
