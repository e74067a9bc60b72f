"""The in-network-aggregation fabrics of ``compare``: ``fat-tree-ina`` and ``hybrid-ina``.

Both take the run of the fabric without aggregation (``fat-tree``, ``hybrid``) and make its
electrical switches programmable with ATP's aggregator memory (:func:`topoopt.flowsim.ina.with_ina`,
``docs/ina.md``).

``hybrid-ina`` has two layers to move an all-reduce: the switches sum a share ``f`` of it over the
servers' electrical NICs while the host ring moves the rest over the circuits. Three
configurations are simulated (communication alone,
:func:`topoopt.flowsim.collectives.communication_time`) and the fastest kept:

0. no aggregation at all (the switches stay idle: on a plan where the hybrid's LP routing
   spreads the rings over both layers better than a tree on the NIC alone);

1. every admitted all-reduce in the network (``f = 1``), the other traffic on the hybrid's LP
   routing over both layers;
2. the host traffic on the optical circuits only (fewest-hop ECMP over circuits, servers
   forwarding) and ``f = T_ring / (T_ring + T_ina)``, where ``T_ina`` is configuration 1's time
   and ``T_ring`` the time of the whole communication on the circuits alone: the split where the
   tree's ``f`` and the circuits' ``1 - f`` would take equal time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from topoopt.fabrics.cost import cost
from topoopt.fabrics.routing import routes
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.ina import with_ina

__all__ = ["ina_run"]


def ina_run(name: str, base: Any, prices=None) -> Any:
    """The ``FabricRun`` of ``name`` (``fat-tree-ina`` / ``hybrid-ina``) from ``base``, the run
    of the same fabric without aggregation (module docstring); capex and power re-priced with
    programmable switch ports.

    Examples
    --------
    >>> from traffic.workload import Demand, Workload
    >>> from topoopt.app.studies.compare import build_fabric
    >>> w = Workload(4, 1, (Demand("all-reduce", [[0, 1, 2, 3]], 1e6, "dp", "backward"),))
    >>> run = ina_run("fat-tree-ina", build_fabric("fat-tree", w, 4, 12.5e9))
    >>> run.name, run.fabric.params["ina_memory_bytes"]
    ('fat-tree-ina', 5120000.0)
    """
    fab = with_ina(base.fabric)
    routing, note = base.routing, "in-network aggregation (topoopt.flowsim.ina)"
    if name == "hybrid-ina":
        w = base.workload
        t_ina = communication_time(w, fab, routing=routing).total_s
        optical = routes(base.fabric, "ecmp", kinds=("optical",))
        t_ring = communication_time(w, base.fabric, routing=optical).total_s
        f = t_ring / (t_ring + t_ina) if t_ring + t_ina > 0 else 1.0
        best = t_ina
        if 0.0 < f < 1.0:
            split = with_ina(base.fabric, fraction=f)
            t_split = communication_time(w, split, routing=optical).total_s
            if t_split < best:
                fab, routing, best = split, optical, t_split
                note += f"; {f:.3f} of each all-reduce in the network, the rest on the circuits"
        if communication_time(w, base.fabric, routing=base.routing).total_s <= best:
            fab, routing = with_ina(base.fabric, memory_bytes=0.0), base.routing
            note = "programmable switches not used: the host algorithm is faster on this plan"
    run = replace(base, name=name, fabric=fab, routing=routing, cost_detail=None)  # re-priced
    run.note = "; ".join(x for x in (base.note, note) if x)
    rep = cost(fab, prices)
    run.capex_usd, run.power_w = rep.capex_usd, rep.power_w
    return run
