"""Soak: ``compare`` and ``design`` over many random valid plans in one process (issue 30, 6).

Plans are drawn with one seed (``--seed``): a model of the zoo (small layer counts for the
transformers), 6 or 8 servers of 1-4 GPUs, a valid split into tensor, pipeline and data
parallelism, micro-batches and a global batch; a draw the plan schema refuses is drawn again
(counted). For each plan, in this one process:

- ``compare`` (the CLI's default fabrics) at 4 ports per server, and again at 8 ports on the
  fabrics that are built rather than searched (:data:`CHEAP`);
- ``design`` (the joint solver, default limits) at 4 ports.

Checked on every plan: nothing raises; on every row the ideal switch is no slower than the
fabric (``ideal <= every fabric``, relative 1e-9); every fabric of :data:`CHEAP` at 8 ports is
no slower than at 4 (``more ports never slower``, relative 1e-6); the design's objective is
finite and at least its lower bound. Memory: the resident set (``/proc/self/statm``) after each
plan; printed are its value after the first 10 plans and at the end, and the growth per plan
over the last 90 % (a least-squares slope), beside the peak (``ru_maxrss``).

Usage::

    nice -n 19 .venv/bin/python benchmarks/soak.py             # 200 plans
    .venv/bin/python benchmarks/soak.py --plans 5 --seed 1      # a few
    nice -n 19 .venv/bin/python benchmarks/soak.py --start 100  # plans 101-200 of seed 0

``--start K`` draws plans 1..K of the seed's sequence (the schema check only, no compare) and
runs plans K+1..``--plans``: a soak stopped at plan K continues on the same plans (so ``--start
172 --plans 175`` runs plans 173, 174 and 175). ``--show K`` runs nothing: it prints plan K (1 to
``--plans``) of the seed's sequence as JSON, or writes it to ``--out``, with the soak's ``design``
call as a command line, to reproduce one plan alone::

    .venv/bin/python benchmarks/soak.py --show 173 --out p173.json
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MODELS = (
    ("vgg16", None),
    ("resnet50", None),
    ("ncf", None),
    ("bert-large", {"layers": 4}),
    ("llama3-8b", {"layers": 4}),
    ("llama2-7b", {"layers": 4}),
    ("mixtral-8x7b", {"layers": 2}),
)


CHEAP = ("ideal", "fat-tree", "fat-tree-oversub", "torus", "expander")
"""The fabrics compared again at 8 ports (built, not searched: the designed fabrics' searches
are the soak's cost, run once per plan at 4 ports in ``compare`` and in ``design``)."""


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def draw_plan(rng: np.random.Generator) -> dict:
    """One random plan mapping (maybe invalid: the schema decides)."""
    name, over = MODELS[int(rng.integers(len(MODELS)))]
    servers = int(rng.choice([6, 8]))  # design: more servers than ports, an even count
    gps = int(rng.choice([1, 2, 4]))
    gpus = servers * gps
    model: dict | str = name if over is None else {"base": name, **over}
    par: dict = {"micro_batch_size": int(rng.choice([1, 2, 4]))}
    if over is not None:  # transformers: tp inside a server, pp over the layers
        tp = int(rng.choice([t for t in (1, 2, 4) if gps % t == 0]))
        pp = int(rng.choice([p for p in (1, 2) if (gpus // tp) % p == 0]))
        par.update(tp=tp, pp=pp)
        if name == "mixtral-8x7b":
            par["ep"] = int(rng.choice([e for e in (1, 2) if (gpus // (tp * pp)) % e == 0]))
        dp = gpus // (tp * pp)
    else:
        dp = gpus
    par["dp"] = dp
    par["global_batch_size"] = dp * par["micro_batch_size"] * int(rng.choice([1, 2, 4]))
    if over is not None and rng.random() < 0.25:
        par["zero"] = int(rng.choice([1, 2, 3]))
    return {
        "model": model,
        "parallelism": par,
        "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
        "cluster": {"servers": servers, "gpus_per_server": gps},
    }


def check_plan(doc: dict, fabrics, design_work_limit: float | None = None) -> list[str]:
    """The soak's checks of one plan (module docstring); the problems found, as sentences
    (``design_work_limit``: the joint design's work limit, default the solver's)."""
    from topoopt.app import api

    out = []
    try:
        t4 = api.compare(doc, fabrics, degree=4).set_index("fabric")
        t8 = api.compare(doc, CHEAP, degree=8).set_index("fabric")
        d = api.design(doc, degree=4, work_limit=design_work_limit)
    except Exception as exc:  # noqa: BLE001 - a soak records every failure
        return [f"raised {exc!r}"]
    for deg, t in ((4, t4), (8, t8)):
        ideal = float(t.loc["ideal", "iteration_s"])
        for fab, row in t.iterrows():
            it = float(row["iteration_s"])
            if math.isfinite(it) and it < ideal * (1 - 1e-9):
                out.append(f"{fab} at {deg} ports {it} < ideal {ideal}")
    for fab in t8.index:
        a, b = float(t4.loc[fab, "iteration_s"]), float(t8.loc[fab, "iteration_s"])
        if math.isfinite(a) and math.isfinite(b) and b > a * (1 + 1e-6):
            out.append(f"{fab} slower at 8 ports ({b}) than at 4 ({a})")
    if not (math.isfinite(d.objective_s) and d.objective_s >= d.lower_bound_s * (1 - 1e-9)):
        out.append(f"design objective {d.objective_s} vs lower bound {d.lower_bound_s}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--plans", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="skip the first START plans (drawn only)")
    ap.add_argument("--show", type=int, default=None, help="print plan SHOW (1-based), run nothing")
    ap.add_argument("--out", default=None, help="with --show: write the plan to this JSON file")
    args = ap.parse_args()
    if not 0 <= args.start < args.plans:
        ap.error(f"--start {args.start}: must be in [0, --plans {args.plans})")
    if args.show is not None and not 1 <= args.show <= args.plans:
        ap.error(f"--show {args.show}: must be in [1, --plans {args.plans}]")
    if args.out is not None and args.show is None:
        ap.error("--out: only with --show")

    from topoopt.app.cli.commands.compare import DEFAULT_FABRICS
    from traffic.errors import InputError
    from traffic.plan import load_plan

    fabrics = DEFAULT_FABRICS.split(",")
    rng = np.random.default_rng(args.seed)
    redrawn, failures, rss = 0, [], []
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(args.plans):
        while True:
            doc = draw_plan(rng)
            try:
                load_plan(doc)
                break
            except InputError:
                redrawn += 1
        if args.show is not None:
            if k + 1 == args.show:
                show_plan(k + 1, args.seed, doc, args.out)
                return
            continue
        if k < args.start:
            continue
        label = f"plan {k}: {doc['model']} {doc['parallelism']} {doc['cluster']}"
        failures += [f"{label}: {f}" for f in check_plan(doc, fabrics)]
        rss.append(rss_bytes())
        print(f"{k + 1}/{args.plans} rss {rss[-1] / 1e6:.0f} MB  {label}", flush=True)
        if (k + 1) % 25 == 0 and k + 1 < args.plans:
            summary(k + 1, args.seed, redrawn, failures, rss, t0, c0, args.start)
    summary(args.plans, args.seed, redrawn, failures, rss, t0, c0, args.start)
    sys.exit(1 if failures else 0)


def show_plan(k: int, seed: int, doc: dict, out: str | None) -> None:
    """Plan ``k`` as JSON (to ``out`` or stdout), and on stderr the CLI command that runs the
    soak's ``design`` of it (the joint solver at 4 ports, default work limit; the soak calls
    ``api.design``, whose wall-clock cap is 900 s)."""
    import json

    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        Path(out).write_text(text)
    where = out or "PLAN.json"
    print(f"plan {k} of seed {seed}; its design: python -m topoopt design {where} --degree 4 "
          f"--time-limit 900 --json", file=sys.stderr)  # fmt: skip


def summary(n, seed, redrawn, failures, rss, t0, c0, start=0) -> None:
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    r = np.asarray(rss, float)
    lo = max(1, len(r) // 10)
    slope = float(np.polyfit(np.arange(lo, len(r)), r[lo:], 1)[0]) if len(r) - lo >= 2 else 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"\nplans {start + 1}-{n} (seed {seed}, {redrawn} draws refused by the schema and "
          f"redrawn): {len(failures)} failures")  # fmt: skip
    for f in failures:
        print("  " + f)
    print(f"resident set: {r[min(9, len(r) - 1)] / 1e6:.0f} MB after 10 plans, "
          f"{r[-1] / 1e6:.0f} MB at the end; growth {slope / 1e3:.1f} kB per plan over the last "
          f"{len(r) - lo} plans; peak {peak / 1e6:.0f} MB")  # fmt: skip
    print(f"wall {wall:.0f} s, CPU {cpu:.0f} s\n", flush=True)


if __name__ == "__main__":
    main()
