"""``reconfig --fabric ocs-spine``: per-phase pod-to-pod circuits of ``compare``'s OCS spine.

The spine is ``compare``'s ``ocs-spine`` row (:func:`topoopt.app.studies.compare.ocs_spine_run`:
the cheapest catalogue radix at the link speed, its default pods) or the same radix with
``pods`` pods; :func:`solvers.reconfig.spine.reconfigure_spine` chooses its circuit schedule
(:func:`topoopt.app.studies.compare.reconfigure_row`, as ``compare --per-phase``).
Every schedule runs on the same hardware, priced once (:func:`topoopt.fabrics.cost.cost`).
"""

from __future__ import annotations

from collections.abc import Callable

from traffic.errors import InputError

__all__ = ["spine_reconfig"]


def spine_reconfig(
    workload,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    pods: int | None = None,
    prices=None,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
):
    """The :class:`~solvers.reconfig.search.ReconfigResult` of the job's OCS spine and its
    ``capex`` (``chosen`` and ``static``: the same device, capex and power).

    Raises
    ------
    InputError
        ``pods`` out of range for the spine (:func:`topoopt.fabrics.ocs_spine.ocs_spine_shape`).
    """
    from topoopt.app.studies.compare import ocs_spine_run, reconfigure_row
    from topoopt.fabrics.cost import cost

    if pods is not None and (isinstance(pods, bool) or int(pods) != pods or pods < 2):
        raise InputError("pods", pods, "an integer >= 2")
    run = ocs_spine_run("ocs-spine", workload, degree, link_bandwidth, prices)
    res = reconfigure_row(
        run, degree, link_bandwidth, delay_s, pods=pods, max_evaluations=max_evaluations,
        holds=holds, progress=progress,
    )  # fmt: skip
    rep = cost(res.static, prices)
    priced = {"device": "ocs", "capex_usd": rep.capex_usd, "power_w": rep.power_w}
    return res, {"chosen": priced, "static": dict(priced)}
