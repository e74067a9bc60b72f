"""The memory of routed flows, checked before their sub-flows exist.

A flow between two servers is split over its route's paths into sub-flows (one per path, each
with its links). :func:`check_subflows` is called by
:meth:`topoopt.flowsim.network.FlowBuilder.build` and ``build_classes`` once the flows are
routed and before the sub-flow arrays are allocated, with the exact counts, and refuses a
simulation whose arrays would exceed ``TOPOOPT_MEMORY_BUDGET_GB``:

``arrays = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * sub-flows``

(the estimate before anything is built, :mod:`topoopt.flowsim.work`, counts the flows alone).
It imports nothing of the flow model, so that the builder and the estimate can both use it.
"""

from __future__ import annotations

from traffic.errors import InputError
from traffic.limits import FLOW_PEAK_BYTES, memory_budget_bytes

__all__ = ["FLOW_PEAK_BYTES", "SUBFLOW_BYTES", "SUBFLOW_BYTES_REDUCED", "check_subflows"]

SUBFLOW_BYTES = 300.0
"""Peak bytes per sub-flow (a flow's share on one of its paths) at the routing of the flows,
:func:`check_subflows`: GPT-3 175B on the three-tier Clos of 2,048 servers x 8 NICs, 17.1 M
sub-flows of 1.06 M flows, peaks at 6.24 GB: 284 bytes a sub-flow beside the flows' own
:data:`FLOW_PEAK_BYTES` and :data:`topoopt.flowsim.work.PROCESS_BYTES` (the symmetry
reduction's incidence arrays included)."""


SUBFLOW_BYTES_REDUCED = 150.0
"""Peak bytes per sub-flow when the flows are simulated through the symmetry quotient
(:mod:`topoopt.flowsim.symmetry`; the event loop then holds the classes, not every sub-flow),
measured 2026-12-06 on the three-tier Clos of 2,048 servers x 8 NICs beside
:data:`FLOW_PEAK_BYTES` and :data:`topoopt.flowsim.work.PROCESS_BYTES`: GPT-3 175B, 17.1 M
sub-flows of 1.06 M flows, 3.20 GB peak (110 bytes a sub-flow); Llama 3 405B at tp 8 cp 16 pp 16
dp 8, 26.0 M sub-flows of 2.29 M flows, 4.79 GB peak (91 bytes a sub-flow). A reduction that
turns itself off is checked again with :data:`SUBFLOW_BYTES` before the plain simulation."""


def check_subflows(flows: int, subflows: int, reduced: bool = False) -> float:
    """Refuse routed flows whose sub-flows would exceed the memory budget; return the estimated
    array bytes (module docstring) otherwise.

    Called with the flows of one simulation once their routes are known and before the
    sub-flow arrays exist: ``flows`` flows (before identical flows are merged) split into
    ``subflows`` sub-flows in all; ``reduced``: they will be simulated through the symmetry
    quotient (:data:`SUBFLOW_BYTES_REDUCED` a sub-flow instead of :data:`SUBFLOW_BYTES`).

    Raises
    ------
    InputError
        Field ``flows``, naming the sub-flows, the estimate, the budget and the variable that
        raises it.

    Examples
    --------
    >>> round(check_subflows(1_058_684, 17_147_580) / 1e9, 2)  # GPT-3 175B, 16,384 GPUs
    6.1
    >>> round(check_subflows(1_058_684, 17_147_580, reduced=True) / 1e9, 2)  # 3.20 GB measured
    3.52
    >>> check_subflows(10**6, 10**8)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '100,000,000 sub-flows of 1,000,000 flows (about 30.9 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    per = SUBFLOW_BYTES_REDUCED if reduced else SUBFLOW_BYTES
    est = FLOW_PEAK_BYTES * float(flows) + per * float(subflows)
    budget = memory_budget_bytes()
    if est > budget:
        raise InputError(
            "flows",
            f"{int(subflows):,} sub-flows of {int(flows):,} flows (about {est / 1e9:,.1f} GB "
            "of arrays)",
            f"at most {budget / 1e9:g} GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)",
        )
    return est
