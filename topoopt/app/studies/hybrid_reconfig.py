"""``reconfig --fabric hybrid``: per-phase circuits of ``compare``'s hybrid fabric's optical half.

The fabric is ``compare``'s ``hybrid`` row (:func:`topoopt.app.studies.compare.build_fabric`:
``degree - degree // 2`` NICs on a 4:1 leaf-spine, ``degree // 2`` optical ports wired as the
geometric circulant, one LP routing over both layers, the ring-designed workload);
:func:`solvers.reconfig.hybrid_phase.reconfigure_hybrid` chooses the schedule of its optical
circuits. Every schedule runs on the same hardware, priced once (``compare``'s price).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["hybrid_reconfig"]


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
    from solvers import reconfigure_hybrid
    from topoopt.app.studies.compare import build_fabric

    run = build_fabric(
        "hybrid", workload, degree, link_bandwidth, prices=prices, time_limit_s=time_limit_s,
        progress=progress,
    )  # fmt: skip
    res = reconfigure_hybrid(
        run.workload, run.fabric, run.routing, delay_s, max_evaluations=max_evaluations,
        holds=holds, time_limit_s=time_limit_s, progress=progress,
    )  # fmt: skip
    priced = {"device": "ocs", "capex_usd": run.capex_usd, "power_w": run.power_w}
    return res, {"chosen": priced, "static": dict(priced)}
