"""The verdict of every study that is not a fabric comparison, in two or three sentences computed
from its result: what a design achieves when simulated, where a price breakeven lies, what a
failure costs, what reconfiguring saves, which plan a co-search picks, how shared-cluster jobs
fare. The comparison's own verdict is :mod:`topoopt.app.report.verdict`.

Every function takes the study's result (a value or the ``--json`` document's mapping) and
returns a list of sentences; the CLI prints them above its table and the HTML report shows them
in ``<div id="verdict">``. Times are in ms, or in seconds above
:data:`~topoopt.app.report.time_units.SECONDS_ABOVE_S`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from topoopt.app.report.time_units import time_unit

__all__ = [
    "breakeven_verdict",
    "cluster_verdict",
    "cosearch_verdict",
    "design_verdict",
    "reconfig_verdict",
    "simulate_verdict",
    "whatif_verdict",
]


def _t(seconds: float) -> str:
    """A time in ms, or in s above 10 s (4 significant digits)."""
    unit, k = time_unit([seconds])
    return f"{seconds * k:.4g} {unit}"


def _pct(new: float, old: float) -> str:
    """``new`` against ``old``: ``12.3 % slower`` / ``4.0 % faster`` / ``as fast``."""
    d = new / old - 1.0
    if abs(d) < 5e-4:
        return "as fast"
    return f"{100 * abs(d):.1f} % " + ("slower" if d > 0 else "faster")


def design_verdict(
    solver: str,
    iteration_s: float | None,
    objective: str | None,
    objective_s: float,
    lower_bound_s: float,
    ideal_s: float | None = None,
) -> list[str]:
    """What a design search achieved: its simulated iteration (the ideal switch's, a bound, when
    known), and what its objective and bound say. ``objective``: what the search minimised
    (``iteration``, ``congestion``; ``None``: the solver's own estimate of the iteration, as
    TopoOpt's). ``iteration_s`` None: the time limit cut the design's simulation.

    Examples
    --------
    >>> design_verdict("topoopt", 0.020022, None, 0.019809, 0.010687)[1]
    'Its search optimised its own estimate of the iteration: 19.81 ms against a lower bound of 10.69 ms (gap 46.0 %).'
    >>> for s in design_verdict("joint", 60.43, "congestion", 0.5927, 0.4, ideal_s=40.0):
    ...     print(s)
    The joint design runs one iteration in 60.43 s (simulated), 1.511x the ideal switch (a bound, not a product).
    Its search optimised the congestion objective: 592.7 ms against a lower bound of 400 ms; that is not an iteration time, judge the design by the simulated 60.43 s.
    >>> design_verdict("joint", None, "congestion", 0.5927, 0.4)[0]
    'The joint design was not simulated: the time limit cut its simulation (topoopt simulate PLAN --design FILE runs it).'
    """  # noqa: E501
    if iteration_s is None:
        out = [
            f"The {solver} design was not simulated: the time limit cut its simulation "
            "(topoopt simulate PLAN --design FILE runs it)."
        ]
        bound = _t(lower_bound_s) if math.isfinite(lower_bound_s) else "none"
        out.append(
            f"Its search optimised the {objective or 'estimated iteration'} objective: "
            f"{_t(objective_s)} against a lower bound of {bound}."
        )
        return out
    first = f"The {solver} design runs one iteration in {_t(iteration_s)} (simulated)"
    if ideal_s is not None and ideal_s > 0 and math.isfinite(ideal_s):
        from topoopt.app.report.verdict import ideal_note

        ratio = iteration_s / ideal_s
        first += f", {ratio:.3f}x the ideal switch {ideal_note(ratio)}"
    out = [first + "."]
    bound = _t(lower_bound_s) if math.isfinite(lower_bound_s) else "none"
    if objective in ("iteration", None):
        gap = (objective_s - lower_bound_s) / objective_s if objective_s > 0 else float("nan")
        what = "the iteration time" if objective else "its own estimate of the iteration"
        out.append(
            f"Its search optimised {what}: {_t(objective_s)} against a lower bound of {bound}"
            + (f" (gap {100 * gap:.1f} %)." if math.isfinite(gap) else ".")
        )
    else:
        out.append(
            f"Its search optimised the {objective} objective: {_t(objective_s)} against a lower "
            f"bound of {bound}; that is not an iteration time, judge the design by the simulated "
            f"{_t(iteration_s)}."
        )
    return out


def simulate_verdict(res: Mapping[str, Any]) -> list[str]:
    """What one iteration on one fabric is made of, and the traffic class that costs the most
    (``res``: the document of :func:`~topoopt.app.studies.simulate.simulate_plan`).

    Examples
    --------
    >>> r = {"workload": "dlrm", "fabric": "ideal", "iteration_s": 0.0055, "compute_s": 0.00014,
    ...      "exposed_comm_s": 0.00536, "exposed_comm_s_by_class": {"dp": 0.001, "ep": 0.0049}}
    >>> for s in simulate_verdict(r):
    ...     print(s)
    One iteration of dlrm on ideal takes 5.5 ms: 0.14 ms of compute and 5.36 ms of exposed communication (97.5 % of the iteration).
    The class that costs the most is ep: the iteration is 4.9 ms shorter with its communication instantaneous.
    """  # noqa: E501
    t = float(res["iteration_s"])
    exposed = float(res["exposed_comm_s"])
    share = f" ({100 * exposed / t:.1f} % of the iteration)" if t > 0 else ""
    out = [
        f"One iteration of {res['workload']} on {res['fabric']} takes {_t(t)}: "
        f"{_t(float(res['compute_s']))} of compute and {_t(exposed)} of exposed "
        f"communication{share}."
    ]
    by_class = res.get("exposed_comm_s_by_class") or {}
    if by_class:
        cls, v = max(by_class.items(), key=lambda kv: kv[1])
        if v > 0:
            out.append(
                f"The class that costs the most is {cls}: the iteration is {_t(float(v))} shorter "
                "with its communication instantaneous."
            )
    rounding = res.get("rounding")
    if rounding:
        out.append(rounding["sentence"])
    return out


def _what(mode: str) -> str:
    return "switch port" if mode == "electrical" else "optical port"


def breakeven_verdict(res: Any) -> list[str]:
    """Who is faster at the price table's prices, and at which port price the order flips
    (``res``: :class:`~topoopt.app.studies.breakeven.BreakevenResult`).

    In ``electrical`` mode a dearer switch port leaves the cost-equivalent fat-tree less
    bandwidth, so it is faster below the tie price; in ``optical`` mode a dearer optical port
    gives it a larger budget, so it is faster above it.

    Examples
    --------
    >>> import pandas as pd
    >>> from types import SimpleNamespace as R
    >>> r = R(mode="electrical", design="joint", status="tie", price_usd=141.1, factor=0.7426,
    ...       base_price_usd=190.0, optical_iteration_s=0.02002, tie_iteration_s=0.02002,
    ...       curve=pd.DataFrame({"factor": [0.25, 1.0, 4.0], "iteration_s": [0.015, 0.021, 0.03]}))
    >>> for s in breakeven_verdict(r):
    ...     print(s)
    At the price table's switch port price (190 USD), joint is faster than the cost-equivalent fat-tree at equal capex: 20.02 ms per iteration against 21 ms.
    They tie (20.02 ms) when a switch port costs 141.1 USD, 0.743x the table's price: below that the fat-tree is faster, above it joint.
    """  # noqa: E501
    what = _what(res.mode)
    curve = res.curve
    at_table = curve.loc[(curve["factor"] - 1.0).abs() < 1e-12, "iteration_s"]
    out = []
    t_opt = float(res.optical_iteration_s)
    if len(at_table):
        t_ft = float(at_table.iloc[0])
        if abs(t_ft - t_opt) <= 1e-3 * t_opt:
            who = f"{res.design} and the cost-equivalent fat-tree tie at equal capex"
            out.append(
                f"At the price table's {what} price ({res.base_price_usd:.4g} USD), {who}: "
                f"{_t(t_opt)} and {_t(t_ft)} per iteration."
            )
        else:
            fast, slow = (res.design, "the cost-equivalent fat-tree")
            tf, ts = t_opt, t_ft
            if t_ft < t_opt:
                fast, slow, tf, ts = "the cost-equivalent fat-tree", res.design, t_ft, t_opt
            out.append(
                f"At the price table's {what} price ({res.base_price_usd:.4g} USD), {fast} is "
                f"faster than {slow} at equal capex: {_t(tf)} per iteration against {_t(ts)}."
            )
    cheap_wins = "the fat-tree" if res.mode == "electrical" else res.design
    dear_wins = res.design if res.mode == "electrical" else "the fat-tree"
    if res.status in ("tie", "step") and res.price_usd is not None:
        how = (
            f"They tie ({_t(float(res.tie_iteration_s))})"
            if res.status == "tie" and res.tie_iteration_s is not None
            else "The order flips at a step of the switch catalogue"
        )
        out.append(
            f"{how} when a {what} costs {res.price_usd:.4g} USD, {res.factor:.3g}x the table's "
            f"price: below that {cheap_wins} is faster, above it {dear_wins}."
        )
    else:
        lo = float(curve["factor"].min()) * res.base_price_usd
        hi = float(curve["factor"].max()) * res.base_price_usd
        who = res.design if res.status == "optical-faster" else "the cost-equivalent fat-tree"
        out.append(
            f"{who[0].upper() + who[1:]} is faster at every {what} price tried, "
            f"{lo:.4g} to {hi:.4g} USD: no breakeven in that range."
        )
    return out


def whatif_verdict(res: Mapping[str, Any]) -> list[str]:
    """What a failure costs the iteration, rerouted and re-optimised (``res``: the document of
    :func:`~topoopt.app.studies.whatif.whatif`).

    Examples
    --------
    >>> r = {"failed": [[0, 1]], "before_s": 0.020022, "after_s": 0.022708,
    ...      "reoptimized_s": 0.022011, "solver": "topoopt", "rewired_circuits": 0,
    ...      "fallback": False}
    >>> for s in whatif_verdict(r):
    ...     print(s)
    Losing 1 circuit makes the iteration 13.4 % slower when rerouted (20.02 ms -> 22.71 ms).
    Re-optimised by topoopt (0 circuits rewired) it takes 22.01 ms, 9.9 % slower than before the failure.
    """  # noqa: E501
    n = len(res.get("failed") or ())
    lost = f"Losing {n} circuit{'s' if n != 1 else ''}"
    before, after, reopt = res["before_s"], res.get("after_s"), res.get("reoptimized_s")
    out = []
    if after is None:
        out.append(f"{lost} disconnects the job's servers: rerouting alone cannot run it.")
    else:
        out.append(
            f"{lost} makes the iteration {_pct(after, before)} when rerouted "
            f"({_t(before)} -> {_t(after)})."
        )
    if reopt is not None:
        s = (
            f"Re-optimised by {res['solver']} ({res['rewired_circuits']} circuits rewired) it "
            f"takes {_t(reopt)}, {_pct(reopt, before)} than before the failure"
        )
        s = s.replace("as fast than", "as fast as")
        if res.get("fallback"):
            s += " (the re-optimisation was slower, so the rerouted design is kept)"
        out.append(s + ".")
    return out


def reconfig_verdict(res: Any, delay_s: float) -> list[str]:
    """What reconfiguring the circuits during the iteration saves over the static design
    (``res``: :class:`~solvers.reconfig.search.ReconfigResult`).

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> r = R(iteration_s=0.018, static_iteration_s=0.020, reconfigurations=3,
    ...       lower_bound_s=0.0175)
    >>> for s in reconfig_verdict(r, 1e-5):
    ...     print(s)
    Reconfiguring 3 times per iteration (10 us each) takes 18 ms per iteration, 10.0 % faster than the static design (20 ms).
    The chosen schedule takes 1.029x the lower bound (17.5 ms: compute alone, or the busiest server's bytes at full port rate; no schedule is faster).
    """  # noqa: E501
    t, t0 = float(res.iteration_s), float(res.static_iteration_s)
    k = int(res.reconfigurations)
    if k == 0:
        out = [
            f"The static design is kept ({_t(t0)} per iteration): no reconfiguration at "
            f"{delay_s * 1e6:g} us per change pays for itself."
        ]
    else:
        out = [
            f"Reconfiguring {k} time{'s' if k != 1 else ''} per iteration ({delay_s * 1e6:g} us "
            f"each) takes {_t(t)} per iteration, {_pct(t, t0)} than the static design "
            f"({_t(t0)})."
        ]
    lb = float(res.lower_bound_s)
    if math.isfinite(lb) and lb > 0:
        out.append(
            f"The chosen schedule takes {t / lb:.3f}x the lower bound ({_t(lb)}: compute alone, "
            "or the busiest server's bytes at full port rate; no schedule is faster)."
        )
    return out


def cosearch_verdict(best: Mapping[str, Any], reference: Mapping | None, pareto: Sequence) -> list:
    """Which plan and fabric a co-search picks, against the reference plan, and the Pareto
    front's span.

    Examples
    --------
    >>> b = {"fabric": "joint", "label": "tp2 pp1 dp16", "iteration_s": 0.5, "capex_usd": 2e5,
    ...      "memory_per_gpu_bytes": 3e10}
    >>> p = [b, {"fabric": "fat-tree", "label": "tp1 pp1 dp32", "iteration_s": 0.6,
    ...          "capex_usd": 1e5}]
    >>> for s in cosearch_verdict(b, {"label": "tp8 pp2 dp2", "iteration_s": 0.6}, p):
    ...     print(s)
    Best: tp2 pp1 dp16 on joint, 500 ms per iteration for 0.200 M$ (30.0 GB per GPU).
    The reference plan tp8 pp2 dp2 takes 600 ms, 1.200x the best.
    The Pareto front has 2 points, from 500 ms for 0.200 M$ to 600 ms for 0.100 M$ (tp1 pp1 dp32 on fat-tree).
    """  # noqa: E501
    out = [
        f"Best: {best['label']} on {best['fabric']}, {_t(best['iteration_s'])} per iteration for "
        f"{best['capex_usd'] / 1e6:.3f} M$ ({best['memory_per_gpu_bytes'] / 1e9:.1f} GB per GPU)."
    ]
    if reference is not None:
        r = reference
        out.append(
            f"The reference plan {r['label']} takes {_t(r['iteration_s'])}, "
            f"{r['iteration_s'] / best['iteration_s']:.3f}x the best."
        )
    if len(pareto) >= 2:
        fast = min(pareto, key=lambda r: r["iteration_s"])
        cheap = min(pareto, key=lambda r: r["capex_usd"])
        out.append(
            f"The Pareto front has {len(pareto)} points, from {_t(fast['iteration_s'])} for "
            f"{fast['capex_usd'] / 1e6:.3f} M$ to {_t(cheap['iteration_s'])} for "
            f"{cheap['capex_usd'] / 1e6:.3f} M$ ({cheap['label']} on {cheap['fabric']})."
        )
    return out


def cluster_verdict(res: Mapping[str, Any]) -> list[str]:
    """How the jobs of a shared cluster fare against each alone on an ideal switch (``res``:
    the document of :func:`~topoopt.app.studies.cluster.run_cluster`).

    Examples
    --------
    >>> r = {"jobs": [{"name": "a", "slowdown": 1.02}, {"name": "b", "slowdown": 1.31}]}
    >>> for s in cluster_verdict(r):
    ...     print(s)
    Sharing the cluster, the slowest job is b: 1.310x its iteration alone on an ideal switch (a bound).
    Geometric mean over 2 jobs: 1.156x; the fastest, a, is at 1.020x.
    >>> cluster_verdict({"jobs": [{"name": "a", "slowdown": 4.14}, {"name": "b", "slowdown": 4.14}]})
    ['Sharing the cluster, all 2 jobs run at 4.140x their iteration alone on an ideal switch (a bound).']
    """  # noqa: E501
    jobs = [j for j in res.get("jobs", []) if j.get("slowdown") is not None]
    if not jobs:
        return []
    worst = max(jobs, key=lambda j: j["slowdown"])
    best = min(jobs, key=lambda j: j["slowdown"])
    if len(jobs) >= 2 and best["slowdown"] >= worst["slowdown"] * (1 - 1e-9):
        return [
            f"Sharing the cluster, all {len(jobs)} jobs run at {worst['slowdown']:.3f}x their "
            "iteration alone on an ideal switch (a bound)."
        ]
    out = [
        f"Sharing the cluster, the slowest job is {worst['name']}: {worst['slowdown']:.3f}x its "
        "iteration alone on an ideal switch (a bound)."
    ]
    if len(jobs) >= 2:
        gm = math.exp(sum(math.log(j["slowdown"]) for j in jobs) / len(jobs))
        out.append(
            f"Geometric mean over {len(jobs)} jobs: {gm:.3f}x; the fastest, {best['name']}, is at "
            f"{best['slowdown']:.3f}x."
        )
    return out
