"""``advise`` at scale with every row saved as it finishes (a long run cut by a deadline keeps
the rows it has).

The same call as ``topoopt advise JOB --gpus N --gpu h100-sxm --degree 8 --link-gbps 400``
with the CLI's defaults otherwise (``--time-limit`` 900 s, ``DEFAULT_TIME_LIMIT_S``; seed 0;
the default price table; a 4:1 oversubscribed Clos) (:func:`topoopt.app.studies.advise.advise`;
until session 39 this benchmark's ``--time-limit`` defaulted to 30 s, the CLI's to 900 s, so
its ``joint`` rows could be clock-cut where the CLI's were not); each (job, fabric) row is
appended to ``--rows`` (JSON lines) when its evaluation ends, with its wall seconds, and the
judgement (equal capex, equal iteration) is printed at the end. Run it under ``/usr/bin/time -v``
for CPU seconds and peak memory::

    nice -n 19 /usr/bin/time -v python benchmarks/bench_advise_scale.py gpt3-175b \\
        --gpus 16384 --rows rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def cluster_options(ap: argparse.ArgumentParser) -> None:
    """``--gpus`` (required), ``--gpu``, ``--degree`` and ``--link-gbps`` with this benchmark's
    defaults (H100 SXM, 8 x 400 G; also :mod:`bench_advise_row`'s)."""
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--degree", type=int, default=8)
    ap.add_argument("--link-gbps", type=float, default=400.0)


def append_row(path: str, row: dict) -> None:
    """One row as a strict JSON line (non-finite floats as null) at the end of ``path``."""
    clean = {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }
    with open(path, "a") as f:
        f.write(json.dumps(clean, default=str, allow_nan=False) + "\n")


def main(argv=None) -> None:
    from topoopt.app.cli.common import DEFAULT_SEED, DEFAULT_TIME_LIMIT_S
    from topoopt.app.studies.advise import advise, json_document, load_jobs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jobs", help="a plan name or file, or a jobs file")
    cluster_options(ap)
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument(
        "--phase-routing",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="as advise --phase-routing/--no-phase-routing (the CLI's default: on)",
    )
    ap.add_argument("--rows", required=True, help="JSON-lines file, one row per evaluation")
    ap.add_argument("--json", help="the advise JSON document at the end")
    a = ap.parse_args(argv)

    def save(row: dict) -> None:
        append_row(a.rows, row)
        t = row.get("iteration_s")
        print(
            f"{row['job']} / {row['fabric']}: "
            + (f"{t:.6g} s" if t is not None else f"error {row.get('error')}")
            + f", {row.get('wall_s', 0):.1f} s wall, paths exact {row.get('paths_exact')}",
            file=sys.stderr,
            flush=True,
        )

    res = advise(
        load_jobs(a.jobs), gpus=a.gpus, gpu=a.gpu, degree=a.degree,
        link_bandwidth=a.link_gbps * 1e9 / 8, time_limit_s=a.time_limit, seed=a.seed,
        progress=False, on_done=save, phase_routing=a.phase_routing,
    )  # fmt: skip
    doc = json_document(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1, default=str, allow_nan=False)
    for line in res.verdict:
        print(line)
    for line in res.warnings():
        print(line if line.startswith("warning:") else f"warning: {line}")  # as the CLI
    print(json.dumps({"equal_capex": doc["equal_capex"], "equal_iteration": doc["equal_iteration"]},
                     default=str, indent=1, allow_nan=False))  # fmt: skip


if __name__ == "__main__":
    main()
