"""Some rows of ``advise`` alone, as the CLI evaluates them, with the peak memory of each stage.

``topoopt advise`` has no option to run only some fabrics; this runs the evaluation of the given
fabrics (:func:`topoopt.app.studies.advise.evaluate`, the task ``advise`` builds with the CLI's
defaults: ``--time-limit`` 900 s, seed 0, a 4:1 oversubscribed Clos, the default price table,
per-phase routing on), so that a ``joint`` row and its ``joint-phased`` row can be measured
without the seven other rows. Each row is appended to ``--rows`` (JSON lines, ``joint-phased``
split out as ``advise`` does); on stderr, for each row: the memory estimate ``advise`` checks
before the row's simulations (:func:`topoopt.flowsim.work.check_work`: flows, arrays) and the
process's peak resident memory when the row's own simulations are done (before the per-phase
routing) and at the end. ``--guards`` also logs every memory guard of
:mod:`topoopt.flowsim.subflow_guard` a run calls (over 50,000 flows): its counts, its estimate
and, at the next line, the peak resident memory the run reached after it (what the estimate is
compared against; ``TOPOOPT_MEMORY_BUDGET_GB`` raised, it shows which guards would refuse at the
default). Run it under ``/usr/bin/time -v`` for CPU seconds::

    nice -n 10 /usr/bin/time -v python benchmarks/bench_advise_row.py llama3-405b \\
        --gpus 32768 --fabric joint --rows rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import resource
import sys

from bench_advise_scale import append_row, cluster_options


def _peak_gb() -> float:
    """The process's peak resident memory so far, GB (Linux: ``ru_maxrss`` in kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def main(argv=None) -> None:
    import solvers
    from topoopt.app.cli.common import DEFAULT_SEED, DEFAULT_TIME_LIMIT_S
    from topoopt.app.studies import advise as adv
    from topoopt.fabrics.cost import load_prices
    from topoopt.flowsim import work

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jobs", help="a plan name or file (its first job)")
    cluster_options(ap)
    ap.add_argument("--fabric", action="append", required=True, help="a row of advise; repeat")
    ap.add_argument(
        "--phase-routing", action=argparse.BooleanOptionalAction, default=True,
        help="as advise --phase-routing/--no-phase-routing (the CLI's default: on)",
    )  # fmt: skip
    ap.add_argument(
        "--rounding-check", type=int, default=0, metavar="N",
        help="as advise --rounding-check: each row's iteration N more times, link bandwidths "
        "scaled by 1 + e (default 0: none)",
    )  # fmt: skip
    ap.add_argument("--rows", required=True, help="JSON-lines file, one row per evaluation")
    ap.add_argument(
        "--guards", action="store_true",
        help="log every memory guard's counts and estimate (module docstring)",
    )  # fmt: skip
    a = ap.parse_args(argv)

    def say(**kw) -> None:
        line = json.dumps({**kw, "peak_gb": round(_peak_gb(), 3)}, allow_nan=False)
        print(line, file=sys.stderr, flush=True)

    real_check, real_phase = work.check_work, solvers.phase_routing

    def check(w, what="simulation", **kw):  # advise imports it at the call: patched here
        est = real_check(w, what, **kw)
        say(stage="check_work", flows=est.flows, arrays_gb=round(est.array_bytes / 1e9, 3))
        return est

    def phase(*args, **kw):
        say(stage="own simulations done, per-phase routing starts")
        return real_phase(*args, **kw)

    work.check_work, solvers.phase_routing = check, phase
    if a.guards:
        _log_guards(say)
    job = adv.load_jobs(a.jobs)[0]
    plan = adv.scale_plan(job.plan, a.gpus, a.gpu)
    common = {
        "degree": a.degree, "link_bandwidth": a.link_gbps * 1e9 / 8, "oversubscription": 4.0,
        "seed": DEFAULT_SEED, "time_limit_s": float(DEFAULT_TIME_LIMIT_S), "prices": load_prices(),
    }  # fmt: skip
    if a.phase_routing:
        common["phase_routing"] = True
    if a.rounding_check:
        common["rounding_check"] = a.rounding_check
    for fabric in a.fabric:
        task = {"job": job.name, "plan": plan, "weight": job.weight, "fabric": fabric, **common}
        row = adv.evaluate(task)
        rows = adv._split_phased([row])
        say(stage="row done", fabric=fabric)
        for r in rows:
            append_row(a.rows, r)
        for r in rows:
            t, err = r.get("iteration_s"), r.get("error")
            got = f"{t!r} s" if t is not None else f"error {err}"
            print(f"{r['job']} / {r['fabric']}: {got}")
            if r.get("rounding_conditioned") is not None:
                print(f"  rounding: {r['rounding_conditioned']}, spread {r['rounding_spread']:.3g}")
            for k in ("search_warning", "paths_warning", "phase_routing_warning"):
                if r.get(k):
                    print(f"  {k}: {r[k]}")


GUARDS = (
    "check_subflows", "check_bundles", "check_grouped", "check_expansion", "check_route_counts",
)  # fmt: skip
"""The memory guards of :mod:`topoopt.flowsim.subflow_guard` logged by ``--guards``."""


def _log_guards(say) -> None:
    """Wrap every guard of :data:`GUARDS` where the flow model looks it up (its module, and the
    modules that import it by name) to log its arguments and estimate, or its refusal."""
    import importlib

    from topoopt.flowsim import subflow_guard as guard

    users = [
        importlib.import_module(f"topoopt.flowsim.{m}")
        for m in ("network", "symmetry", "grouped_routes", "bundles", "iteration", "work")
    ]

    def wrapped(name, real):
        def check(*args, **kw):
            counts = [int(x) if not isinstance(x, bool) else x for x in args]
            try:
                est = real(*args, **kw)
            except Exception as e:
                say(stage=name, counts=counts, refused=str(e))
                raise
            if counts and counts[0] > 50_000:
                say(stage=name, counts=counts, **kw, arrays_gb=round(est / 1e9, 3))
            return est

        return check

    for name in GUARDS:
        f = wrapped(name, getattr(guard, name))
        for m in (guard, *users):
            if hasattr(m, name):
                setattr(m, name, f)


if __name__ == "__main__":
    main()
