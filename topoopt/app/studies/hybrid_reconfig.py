"""``reconfig --fabric hybrid``: per-phase circuits of ``compare``'s hybrid fabric's optical half.

The fabric is ``compare``'s ``hybrid`` row (:func:`topoopt.app.studies.compare.build_fabric`:
``degree - degree // 2`` NICs on a 4:1 leaf-spine, ``degree // 2`` optical ports wired as the
geometric circulant, one LP routing over both layers, the ring-designed workload);
:func:`solvers.reconfig.hybrid_phase.reconfigure_hybrid` chooses the schedule of its optical
circuits. Every schedule runs on the same hardware, priced once (``compare``'s price).

:func:`static_controls` is the control for the per-phase gain: the search's demand circuits
held static for the whole iteration, each as ``compare``'s ``hybrid`` row with those circuits in
place of the circulant (its LP routing over both layers, its rings on the circuits): how much of
the per-phase gain better (demand-aware) static circuits give without reconfiguring.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["hybrid_reconfig", "static_controls"]


def hybrid_reconfig(
    workload,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    prices=None,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    time_limit_s: float = 900.0,
    progress: Callable[[str], None] | None = None,
):
    """The :class:`~solvers.reconfig.search.ReconfigResult` of the job's hybrid fabric and its
    ``capex`` (``chosen`` and ``static``: the same device, capex and power).

    Raises
    ------
    InputError
        ``degree`` below 4 (``compare``'s hybrid needs two optical ports).
    """
    from topoopt.app.studies.compare import build_fabric, reconfigure_row

    run = build_fabric(
        "hybrid", workload, degree, link_bandwidth, prices=prices, time_limit_s=time_limit_s,
        progress=progress,
    )  # fmt: skip
    res = reconfigure_row(
        run, degree, link_bandwidth, delay_s, time_limit_s=time_limit_s,
        max_evaluations=max_evaluations, holds=holds, progress=progress,
    )  # fmt: skip
    priced = {"device": "ocs", "capex_usd": run.capex_usd, "power_w": run.power_w}
    return res, {"chosen": priced, "static": dict(priced)}


def static_controls(
    workload,
    degree: int,
    link_bandwidth: float,
    result,
    *,
    prices=None,
    time_limit_s: float = 900.0,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """Static hybrids whose optical circuits are the per-phase search's demand circuits.

    Candidates, each a static ``compare`` ``hybrid`` row (:func:`~topoopt.app.studies.compare.
    hybrid_run` with these circuits; the same hardware and price as the circulant's):

    - ``demand:iteration``: :func:`~solvers.reconfig.demand.demand_circuits` of the whole
      iteration's server bytes (the reference run's fabric flows) on the ``degree // 2`` optical
      ports;
    - ``demand:<phase>``: every phase's demand set of ``result`` (``result.candidates``) held for
      the whole iteration;
    - ``union``: the union of the chosen schedule's sets (per pair the most circuits of any set),
      when it fits the optical ports (else its row has ``fits: false`` and no time).

    Parameters
    ----------
    workload : Workload
        The plan's workload (as given to :func:`hybrid_reconfig`).
    degree, link_bandwidth
        As :func:`hybrid_reconfig`.
    result : ReconfigResult
        :func:`hybrid_reconfig`'s result.

    Returns
    -------
    list of dict
        ``{"circuits": label, "fits": bool, "ports_used": max optical ports a server uses,
        "iteration_s": float or None, "routing": the LP's status note}`` in the order above;
        a set equal to an earlier one is not simulated again and names it (``same_as``).
    """
    import numpy as np

    from solvers import demand_circuits
    from topoopt.app.studies.compare import hybrid_run
    from topoopt.fabrics.circuits import Circuits
    from topoopt.flowsim.iteration import simulate_iteration

    say = progress or (lambda m: None)
    n, d = workload.servers, int(degree) // 2
    fl = result.reference.flows
    total = np.bincount(fl["src"] * n + fl["dst"], weights=fl["bytes"], minlength=n * n)
    sets = [("demand:iteration", demand_circuits(total.reshape(n, n), d))]
    seen = set()
    for cands in result.candidates:
        for cs in cands[1:]:
            if cs.label not in seen:
                seen.add(cs.label)
                sets.append((cs.label, cs.circuits))
    chosen = result.schedule.sets
    if len(chosen) > 1:
        m = np.zeros((n, n), np.int64)
        for cs in chosen:
            c = cs.circuits
            m[c[:, 0], c[:, 1]] = np.maximum(m[c[:, 0], c[:, 1]], c[:, 2])
        iu, iv = np.nonzero(m)
        sets.append(("union", np.column_stack([iu, iv, m[iu, iv]])))
    rows: list[dict] = []
    done: dict[bytes, dict] = {}  # circuits -> their row: equal sets are simulated once
    for label, circ in sets:
        c = Circuits(circ, n).rows
        used = np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)
        ports = int(used.max(initial=0))
        row = {"circuits": label, "fits": ports <= d, "ports_used": ports, "iteration_s": None,
               "routing": None}  # fmt: skip
        same = done.get(c.tobytes())
        if same is not None:
            row.update(iteration_s=same["iteration_s"], routing=same["routing"],
                       same_as=same["circuits"])  # fmt: skip
        elif row["fits"]:
            run = hybrid_run(
                "hybrid", workload, degree, link_bandwidth, time_limit_s=time_limit_s,
                prices=prices, circuits=c,
            )  # fmt: skip
            it = simulate_iteration(
                run.workload, run.fabric, routing=run.routing, exposed_by_class=False,
                max_buckets=result.info.get("max_buckets"),
            ).iteration_s  # fmt: skip
            row.update(iteration_s=float(it), routing=run.note)
            say(f"control: {label} held static {it * 1e3:.6g} ms")
        else:
            say(f"control: {label} needs {ports} optical ports a server of {d}")
        done.setdefault(c.tobytes(), row)
        rows.append(row)
    return rows
