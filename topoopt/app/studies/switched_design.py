"""``topoopt design PLAN --fabric rail|rail-only``: size, price and simulate a switched rail fabric.

A switched fabric has no circuits to choose: what there is to design is its sizing. For ``D``
NICs of ``B`` per server (GPU ``i``'s NIC on rail ``i``) every switch model of the price table's
catalogue at ``B`` gives one Clos (:func:`topoopt.app.studies.compare.clos_candidates`):

``rail``
    the rail-optimised Clos: a leaf per rail and server group, the rails joined by the spine
    (:func:`topoopt.fabrics.catalogue.plan_clos` with ``rails=True``);
``rail-only``
    ``D`` one-port Clos, one per rail, no switch joins two rails (Wang et al., arXiv:2307.12169;
    :func:`topoopt.fabrics.rail.rail_only`); a flow between GPUs on different rails crosses the
    server's scale-up fabric.

The design is the cheapest candidate (capex of its bill of materials, then fewer switch ports),
exactly the fabric ``compare``'s ``rail`` / ``rail-only`` row builds; it is simulated as that row
is, so the two iteration times are equal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from topoopt.app.studies.compare import FabricRun, clos_candidates, cost_columns, switched_clos
from topoopt.flowsim.iteration import IterationResult, reduction_status, simulate_iteration
from topoopt.flowsim.roofline import throughput_facts
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["SWITCHED_LAYOUTS", "SwitchedDesign", "design_switched"]

SWITCHED_LAYOUTS = ("rail", "rail-only")
"""The switched fabrics ``design --fabric`` sizes (module docstring)."""


@dataclass(frozen=True)
class SwitchedDesign:
    """A sized switched fabric: the chosen Clos, every candidate, and the simulated iteration."""

    layout: str
    run: FabricRun
    iteration: IterationResult
    candidates: tuple[dict, ...]
    """One per catalogue switch model at the port speed: ``switch``, ``radix``, ``tiers``,
    ``switches``, ``switch_ports``, ``capex_usd``, ``power_w`` (``tiers`` None and no price when
    the model would need a fourth tier) and ``chosen``."""
    degree: int
    link_bandwidth: float
    """bytes/s of one NIC."""
    oversubscription: float
    wall_s: float

    @property
    def capex_usd(self) -> float:
        return float(self.run.capex_usd)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: the fabric (tiers, switches per tier, model), its capex and power with their
        breakdowns, the simulated iteration with the compute model (GPU, efficiency, MFU), the
        candidates."""
        it = self.iteration
        return {
            "fabric": self.layout,
            "servers": int(self.run.fabric.n_servers),
            "nics_per_server": self.degree,
            "nic_gbps": self.link_bandwidth * 8.0 / 1e9,
            "oversubscription": self.oversubscription,
            "iteration_s": float(it.iteration_s),
            "comm_s": float(it.comm_s),
            "exposed_comm_s": float(it.exposed_comm_s),
            "reduction": reduction_status(it),
            "capex_usd": float(self.run.capex_usd),
            "power_w": float(self.run.power_w),
            **cost_columns(self.run),
            **throughput_facts(self.run.workload, it.iteration_s),
            "note": self.run.note or None,
            "candidates": list(self.candidates),
        }


def design_switched(
    workload: Workload,
    layout: str,
    degree: int,
    link_bandwidth: float,
    *,
    oversubscription: float = 1.0,
    prices=None,
    reduction: bool = True,
) -> SwitchedDesign:
    """Size the cheapest ``layout`` fabric (module docstring) of ``degree`` NICs of
    ``link_bandwidth`` (bytes/s) per server for ``workload`` and simulate its iteration
    (through the exact symmetry reduction with ``reduction``, as ``compare``'s row).

    Raises
    ------
    InputError
        An unknown layout, or a cluster no catalogue model serves in three tiers.

    Examples
    --------
    Two servers of two GPUs, NIC ``i`` on rail ``i``: one 32 x 100 G switch per rail (2 x 32
    ports at 190 USD), 4 NICs at 400 USD, a transceiver at both ends of 4 cables at 100 USD, 4
    fibres at 5 USD:

    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan({"model": "llama2-7b", "cluster": {"servers": 2,
    ...     "gpus_per_server": 2}, "parallelism": {"tp": 1, "pp": 2, "dp": 2,
    ...     "micro_batch_size": 1, "global_batch_size": 4}})
    >>> d = design_switched(w, "rail-only", 2, 12.5e9)
    >>> d.run.cost_detail["fabric_info"]["switches"], d.capex_usd == 64 * 190 + 1600 + 800 + 20
    (2, True)
    """
    if layout not in SWITCHED_LAYOUTS:
        raise InputError("fabric", layout, " or ".join(SWITCHED_LAYOUTS))
    t0 = time.perf_counter()
    gbps = float(link_bandwidth) * 8.0 / 1e9
    run = switched_clos(
        layout, workload, degree, float(link_bandwidth), oversubscription, prices, layout=layout
    )
    chosen = run.cost_detail["fabric_info"]["switch"]
    copies = degree if layout == "rail-only" else 1
    rows = []
    for m, plan, rep in clos_candidates(
        workload.servers, degree, gbps, oversubscription, prices, layout
    ):
        row = {"switch": m.name, "radix": int(m.radix), "tiers": None, "chosen": False}
        if plan is not None:
            row.update(
                tiers=plan.tiers,
                switches=plan.switches * copies,
                switch_ports=plan.switch_ports * copies,
                capex_usd=float(rep.capex_usd),
                power_w=float(rep.power_w),
                chosen=m.name == chosen,
            )
        rows.append(row)
    if run.fabric.n_servers > 1:
        run.fabric.check_connected()
    it = simulate_iteration(run.workload, run.fabric, exposed_by_class=False, reduction=reduction)
    return SwitchedDesign(
        layout,
        run,
        it,
        tuple(rows),
        int(degree),
        float(link_bandwidth),
        float(oversubscription),
        time.perf_counter() - t0,
    )
