"""``topoopt compare``: one workload, many fabrics, judged by the flow model at known cost.

Every fabric gets the same servers and the same per-server bandwidth ``degree x link_bandwidth``
(the ideal switch, the fat-trees' NICs, the optical ports). For each: the simulated iteration
(:func:`topoopt.flowsim.iteration.simulate_iteration`: iteration time, communication on its
critical path, exposed communication; definitions in :mod:`topoopt.flowsim.iteration`), the
communication alone (``comm_alone_s``, :func:`topoopt.flowsim.collectives.communication_time`,
every phase's flows released together, phases in sequence), capex and power
(:func:`topoopt.fabrics.cost.cost`), performance per dollar and the ratio to the ideal switch.

Fabric names (:data:`FABRICS`):

``ideal``
    One non-blocking switch, ``degree x B`` per server: the bound. Its two links (server to
    switch, switch to server) take half a link latency each, so that a transfer between two
    servers takes one link latency, the least any fabric offers (a direct circuit).
``fat-tree``
    The buyer's full-bisection Clos of ``degree`` NICs of ``B`` per server (one NIC per port,
    a server's NICs on its leaf), of the catalogue's switches at ``B``
    (:func:`switched_clos`): one switch when one serves all, else two or three tiers. Its
    row's ``fabric_info`` gives the tiers and switches per tier.
``fat-tree-oversub``
    The same with ``oversubscription`` (default 4:1) at the leaves, priced with fewer uplinks
    and spine ports; ``fabric_info["oversubscription_realised"]`` is the ratio built (1 when one
    switch serves every server), and the row's ``note`` says when it differs from the one asked.
``fat-tree-cost-equivalent``
    The fastest full-bisection Clos (one to three tiers, 1 to ``degree`` NICs per server) that
    the ``topoopt`` optical design's capex buys from the price table's switch catalogue at one
    uniform speed, priced as built (TopoOpt's "cost-equivalent fat-tree";
    :func:`topoopt.fabrics.cost.cost_equivalent_fat_tree`). Its row's ``fabric_info`` says
    what was bought: tiers, switch model, counts per tier, NICs and link rate, and the fluid
    speed mix that would spend the budget exactly, as a bound only (``fluid_bound``).
``torus``
    A 1-, 2- or 3-D torus of ``B`` links (:func:`torus_shape`: the largest bisection, then the
    most ports used, then the most dimensions; more ports never give a worse torus), dimension
    sizes as equal as possible, ``degree // (2 D)`` links per dimension and direction (so at
    most ``degree`` ports per server), ECMP routing.
``expander``
    Random ``degree``-regular direct-connect (seeded), ECMP over circuits with host forwarding.
    On both, a ring collective over all servers runs NCCL-like over the fabric's edge-disjoint
    Hamiltonian cycles, each in both directions (:mod:`topoopt.flowsim.fabric_rings`); rings
    over fewer servers run their rank order both ways.
``topoopt``, ``topoopt-released``, ``joint``
    Optical direct-connect designs by the solvers (:mod:`solvers.registry`), with their rings
    and routing. By default port ``i`` of every server lands on OCS ``i`` of ``n`` ports; with
    ``ocs_radix`` (``--ocs-radix``) on several OCSes of that many ports (one group per port
    index, ``per-rail``, or ``packed``), every circuit between two ports of one OCS.
``topoopt-best``
    The faster (flow-model iteration time) of the two faithful TopoOpt variants, ``topoopt``
    and ``topoopt-released``: the baseline to judge against. Its row's ``solver`` names the
    winner.
``hybrid``
    Leaf-spine (oversubscribed ``oversubscription``:1, ``degree - degree/2`` NICs of ``B``) plus
    an optical layer of ``degree/2`` ports per server wired as the geometric circulant, every
    pair's bytes split over both layers by one LP routing
    (:func:`solvers.hybrid_design.route_hybrid`).
``rail``
    Rail-optimised Clos of the same catalogue switches: NIC ``i`` of every server on rail
    ``i`` (a leaf per rail and server group), the rails joined by the spine.
``rail-only``
    Rails with no spine (Wang et al., arXiv:2307.12169): ``degree`` separate one-NIC Clos, NIC
    ``i`` of every server on rail ``i`` (:mod:`topoopt.fabrics.rail`); a server reaches a peer
    over any rail (at server level, the hop over the scale-up fabric to the GPU on the peer's
    rail is not charged).
``ocs-spine``
    Jupiter-style (:mod:`topoopt.fabrics.ocs_spine`): pods of leaves and aggregation switches
    (catalogue switches at ``B``, ``degree`` NICs per server on its leaf) whose aggregation
    uplinks land on 136-port OCSes instead of spine switches; the pod-to-pod circuits are
    engineered from the job's pod-level traffic (ring-expanded, :func:`ocs_spine_run`), pairs
    without a circuit go through a transit pod (shortest-path ECMP).
``rail-circuits``, ``rail-circuits-2``
    Rail-aligned circuits (:mod:`topoopt.fabrics.rail_circuits`): NIC ``i`` of a server wired
    only to NIC ``i`` of others, each rail through its own patch panel; each NIC of ``B`` broken
    out into 4 (``rail-circuits``) or 2 (``rail-circuits-2``) lanes of ``B / 4`` (``B / 2``);
    the same circuits on every rail, designed from the rails' traffic
    (:func:`solvers.rail_design.design_rail_circuits`: a greedy Hamiltonian backbone, then the
    heaviest pairs); rail routing as on ``rail-only`` (GPU ``i`` on NIC ``i``, hosts forward
    within a rail, a cross-rail flow ends on the destination's NVLink).
``fat-tree-ina``, ``hybrid-ina``
    ``fat-tree`` and ``hybrid`` whose electrical switches are programmable and aggregate
    all-reduces in the network, ATP-style, with ATP's aggregator memory per switch
    (:mod:`topoopt.flowsim.ina`; :mod:`topoopt.app.studies.ina_fabrics` for ``hybrid-ina``'s split
    between switches and circuits; ``docs/ina.md``); their switch ports are priced as
    ``programmable_switch_port``. They can beat ``ideal``, a host-based bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from topoopt.app.studies.ina_fabrics import ina_run
from topoopt.fabrics.cost import cost as fabric_cost
from topoopt.fabrics.cost import cost_equivalent_fat_tree
from topoopt.fabrics.expander import expander
from topoopt.fabrics.fabric import Fabric
from topoopt.fabrics.hybrid import hybrid
from topoopt.fabrics.ideal import ideal_bound
from topoopt.fabrics.torus import torus
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.conditioning import COLUMNS
from topoopt.flowsim.fabric_rings import ring_facts, ring_workload
from topoopt.flowsim.iteration import IterationResult, reduction_status, simulate_iteration
from topoopt.flowsim.priorities import check_priority
from topoopt.flowsim.roofline import throughput_facts
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = [
    "DESIGN_COLUMNS",
    "IDEAL_COLUMNS",
    "FABRICS",
    "json_rows",
    "FabricRun",
    "CompareResult",
    "build_fabric",
    "torus_shape",
    "compare",
    "cost_columns",
    "hybrid_run",
    "PER_PHASE_FABRICS",
    "PER_PHASE_COLUMNS",
    "per_phase_run",
    "reconfigure_row",
    "per_phase_sentence",
    "ocs_spine_run",
    "switched_clos",
    "torus_dims",
]

FABRICS = (
    "ideal",
    "fat-tree",
    "fat-tree-oversub",
    "fat-tree-cost-equivalent",
    "torus",
    "expander",
    "topoopt",
    "topoopt-released",
    "topoopt-best",
    "joint",
    "hybrid",
    "fat-tree-ina",
    "hybrid-ina",
    "rail",
    "rail-only",
    "ocs-spine",
    "rail-circuits",
    "rail-circuits-2",
)
DESIGNED = ("topoopt", "topoopt-released", "joint")

DESIGN_COLUMNS = ("objective_s", "lower_bound_s", "gap", "solver_status", "solver")
"""Columns only a row with a solver's design has (NaN on the other rows of the table)."""

PER_PHASE_FABRICS = ("ocs-spine", "hybrid")
"""The rows ``per_phase_delay_s`` evaluates with per-phase circuits (:func:`per_phase_run`)."""

PER_PHASE_COLUMNS = (
    "per_phase", "reconfig_delay_s", "static_iteration_s", "reconfigurations", "dark_s",
    "schedule",
)  # fmt: skip
"""Columns only a per-phase row has (None on the others in JSON)."""

IDEAL_COLUMNS = ("ideal_ring_s", "ideal_collectives")
"""Columns only the ideal row has (:func:`_ideal_with_designed_collectives`)."""

ROUNDING_COLUMNS = COLUMNS
"""Columns of ``rounding_check`` (:func:`rounding_row`; None on a per-phase row, whose
schedule search is not repeated)."""


def json_rows(table: pd.DataFrame) -> list[dict]:
    """The rows of a comparison table for JSON: on a row without a design (no ``solver``), the
    :data:`DESIGN_COLUMNS` are ``None`` (not applicable) instead of NaN; any other non-finite
    value stays, for the strict writers to refuse.

    Examples
    --------
    >>> t = pd.DataFrame([{"fabric": "ideal", "iteration_s": 1.0},
    ...                   {"fabric": "joint", "iteration_s": 2.0, "objective_s": 1.5,
    ...                    "solver": "joint"}])
    >>> json_rows(t)[0]
    {'fabric': 'ideal', 'iteration_s': 1.0, 'objective_s': None, 'solver': None}
    """
    from solvers import SEARCH_COLUMNS

    rows = table.to_dict(orient="records")
    for row in rows:
        failed = isinstance(row.get("error"), str)  # a fabric that could not be built
        for k, v in row.items():
            bad = failed or k in (
                "note", "error", *SEARCH_COLUMNS, *IDEAL_COLUMNS, *PER_PHASE_COLUMNS,
                *ROUNDING_COLUMNS,
            )  # fmt: skip
            if isinstance(v, float) and math.isnan(v) and bad:
                row[k] = None
            elif k == "reconfigurations" and isinstance(v, float) and math.isfinite(v):
                row[k] = int(v)  # a count (a float in a column with NaN)
        if not isinstance(row.get("solver"), str):
            for k in DESIGN_COLUMNS:
                v = row.get(k)
                if isinstance(v, float) and math.isnan(v):
                    row[k] = None
    return rows


@dataclass
class FabricRun:
    """One fabric of a comparison, ready to simulate."""

    name: str
    fabric: Fabric
    workload: Workload
    routing: PathSet | None = None
    design: Any = None
    capex_usd: float = 0.0
    power_w: float = 0.0
    note: str = ""
    cost_detail: dict | None = None
    """``capex_breakdown``, ``power_breakdown``, ``fabric_info`` when the fabric's capex is not
    the price of its bill of materials (the cost-equivalent fat-tree's speed mix)."""
    search_info: dict | None = None
    """A row without a design (``hybrid``): ``deterministic``, ``stopped_by`` and
    ``time_limit_cut`` of its routing LPs, read as a design's ``info``
    (:func:`solvers.search_warning`)."""
    rings: dict | None = None
    """A torus or expander row: its NCCL-like rings
    (:func:`topoopt.flowsim.fabric_rings.ring_facts`)."""
    warning: str = ""
    """What the built fabric is not, of what was asked (:func:`fabric_warning`): a torus or
    expander whose rings miss cables, a Clos of two or more tiers whose oversubscription differs
    from the one asked (the leaves' ports round it)."""


def fabric_warning(run: FabricRun, label: str | None = None) -> str | None:
    """The warning line of a row whose fabric is not what was asked, in a way its time carries:
    a torus or expander whose rings do not use every cable pair
    (:func:`~topoopt.flowsim.fabric_rings.ring_facts`: fewer Hamiltonian cycles found than its
    cables allow, or none above its server limit, so its collectives over every server run
    slower than the fabric allows), or a Clos of two or more tiers built at another
    oversubscription than the one asked (the leaves' ports round it; one switch serving every
    server has none, which the row's note says). None otherwise.

    >>> fabric_warning(FabricRun("torus", None, None, warning="rings: x"))
    'torus: rings: x'
    >>> fabric_warning(FabricRun("torus", None, None))
    """
    return f"{label or run.name}: {run.warning}" if run.warning else None


def cost_columns(run: FabricRun, prices=None) -> dict[str, Any]:
    """The transparent-cost columns of a comparison row (issue 13).

    ``server_bandwidth`` (bytes/s of network bandwidth per server: the mean over servers of the
    sum of their NIC ports' rates, :attr:`Fabric.server_bandwidth`), ``capex_breakdown`` and
    ``power_breakdown`` (component -> USD / W, :data:`topoopt.fabrics.cost.COMPONENTS`, summing
    to the row's capex and power) and ``fabric_info`` (family and builder parameters; for the
    cost-equivalent fat-tree its tiers, switches, link rate, oversubscription, the catalogue mix
    and every catalogue step, :func:`topoopt.fabrics.cost.cost_equivalent_fat_tree`).
    """
    fab = run.fabric
    if run.cost_detail is not None:
        detail = dict(run.cost_detail)
    else:
        rep = fabric_cost(fab, prices)
        params = {
            k: v
            for k, v in fab.params.items()
            if isinstance(v, int | float | str | bool)
            or (isinstance(v, list | tuple) and len(v) <= 16)
        }
        detail = {
            "capex_breakdown": rep.capex_by_component,
            "power_breakdown": rep.power_by_component,
            "fabric_info": {"family": fab.family, "switches": fab.n_switches, **params},
        }
    return {"server_bandwidth": float(np.mean(fab.server_bandwidth)), **detail}


@dataclass
class CompareResult:
    """The comparison table and everything behind it (for figures)."""

    table: pd.DataFrame
    runs: list[FabricRun]
    iterations: dict[str, IterationResult]
    comm: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)


def torus_dims(servers: int, ndims: int) -> tuple[int, ...]:
    """Dimension sizes with product ``servers``, as equal as possible (largest first).

    >>> torus_dims(128, 3), torus_dims(16, 2), torus_dims(12, 2)
    ((8, 4, 4), (4, 4), (4, 3))
    """
    best = None
    for combo in _factorisations(servers, ndims):
        spread = max(combo) - min(combo)
        if best is None or spread < best[0]:
            best = (spread, tuple(sorted(combo, reverse=True)))
    if best is None:
        raise InputError("servers", servers, f"a number with a {ndims}-D factorisation")
    return best[1]


def torus_shape(servers: int, degree: int) -> tuple[tuple[int, ...], int]:
    """The torus ``compare`` builds on ``servers`` servers of ``degree`` ports: its dimension
    sizes and parallel links per dimension and direction.

    The candidates are 1-, 2- and 3-D (as many as ``degree // 2`` allows), each of
    :func:`torus_dims` with ``per = degree // (2 * ndims)`` links per dimension and direction.
    The one chosen has, in this order of precedence:

    1. the largest bisection, in links crossing the cut that halves the largest dimension
       ``k``: ``2 n / k * per`` (``n * per`` when ``k = 2``, where both directions reach the same
       neighbour);
    2. the largest uniform-traffic throughput per server, ports used over mean hops: ``2 per``
       ports per dimension longer than 1, over ``sum floor(k_i^2 / 4) / k_i`` hops;
    3. the most dimensions longer than 1.

    More ports never give a worse torus by this rule: every candidate at ``d`` ports is there at
    ``d + 1`` with the same dimensions and as many links or more, so the chosen key never
    decreases. (The rule before 2026-12-06, ``min(3, degree // 2)`` dimensions, built 2x2x2 on
    6 of 8 ports for 8 servers, 1.9e-6 slower than the 4x2 torus of 4 ports; now 4x2 with two
    links per direction. On 64, 96, 128, 256, 512, 1,000, 1,024, 2,048 and 4,096 servers every
    degree 2-16 keeps the shape of the old rule: the 3-D torus's fewer hops outweigh its unused
    ports.)

    >>> torus_shape(8, 4), torus_shape(8, 8), torus_shape(64, 8), torus_shape(7, 6)
    (((4, 2), 1), ((4, 2), 2), ((4, 4, 4), 1), ((7,), 3))
    """
    if degree < 2:
        raise InputError("degree", degree, "at least 2 for a torus (a ring needs 2 ports)")
    best = None
    for nd in range(1, min(3, degree // 2) + 1):
        dims = torus_dims(servers, nd)
        per = degree // (2 * nd)
        k = dims[0]
        cut = servers * per if k == 2 else 2 * (servers // k) * per
        real = sum(1 for x in dims if x > 1)
        hops = sum(Fraction(x * x // 4, x) for x in dims)
        key = (cut, Fraction(2 * per * real) / hops if hops else Fraction(0), real)
        if best is None or key > best[0]:
            best = (key, dims, per)
    return best[1], best[2]


def _factorisations(n: int, k: int):
    if k == 1:
        yield (n,)
        return
    for f in range(1, n + 1):
        if n % f == 0:
            for rest in _factorisations(n // f, k - 1):
                yield (f, *rest)


def clos_candidates(
    servers: int, degree: int, gbps: float, oversubscription: float, prices=None,
    layout: str = "bundled",
) -> list[tuple[Any, Any, Any]]:  # fmt: skip
    """Every switch model of the price table's catalogue at ``gbps`` (a 64-port switch priced
    per port when it has none) as ``(model, plan, report)``: the Clos of that model for
    ``servers`` servers of ``degree`` NICs (:func:`topoopt.fabrics.catalogue.plan_clos`) and its
    priced bill of materials (:func:`topoopt.fabrics.cost.price_bill_of_materials`), or
    ``(model, None, None)`` when the model would need a fourth tier. ``layout``: ``bundled``,
    ``rail`` (rails joined by the spine) or ``rail-only`` (``degree`` one-port Clos, priced as
    ``degree`` copies). :func:`switched_clos` builds the cheapest; ``design --fabric rail``
    reports them all.

    Examples
    --------
    >>> [(m.name, p.tiers, r.capex_usd) for m, p, r in clos_candidates(16, 4, 100.0, 1.0,
    ...  layout="rail-only")][:2]
    [('Tomahawk 32x100G', 1, 63040.0), ('Tomahawk 2 64x100G', 1, 87360.0)]
    """
    from topoopt.fabrics.catalogue import SwitchModel, plan_bill_of_materials, plan_clos
    from topoopt.fabrics.cost import load_prices, price_bill_of_materials

    if layout not in ("bundled", "rail", "rail-only"):
        raise InputError("layout", layout, "bundled, rail or rail-only")
    copies = degree if layout == "rail-only" else 1  # rail-only: one one-port Clos per rail
    ports = 1 if layout == "rail-only" else degree
    table = load_prices() if prices is None else prices
    models = [m for m in table.catalogue() if abs(m.gbps - gbps) <= 1e-6 * gbps]
    models = models or [SwitchModel(f"64x{gbps:g}G (priced per port)", 64, gbps)]
    out = []
    for m in models:
        plan = plan_clos(
            servers, m, oversubscription, ports_per_server=ports, rails=layout == "rail"
        )
        if plan is None:
            out.append((m, None, None))
            continue
        bom = {k: v * copies for k, v in plan_bill_of_materials(plan, gbps).items()}
        out.append((m, plan, price_bill_of_materials(bom, table)))
    return out


def _no_clos(n: int, degree: int, gbps: float, oversubscription: float, prices, layout: str):
    """Why no Clos of the catalogue at ``gbps`` serves ``n`` servers of ``degree`` NICs, as an
    :class:`InputError`: the NICs per server when fewer would fit (the most that do, by
    bisection: a Clos that serves ``d`` ports per server serves fewer), else the servers."""

    def fits(d: int) -> bool:
        return any(p is not None for _, p, _ in clos_candidates(
            n, d, gbps, oversubscription, prices, layout))  # fmt: skip

    if degree > 1 and fits(1):
        lo, hi = 1, degree  # fits(lo), not fits(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        raise InputError(
            "degree", degree,
            f"at most {lo} NICs per server for {n:,} servers on a Clos of {gbps:g}G switches "
            f"of {_catalogue_of(prices)}",
        )  # fmt: skip
    raise InputError(
        "servers", n,
        f"a cluster a three-tier Clos of {gbps:g}G switches of {_catalogue_of(prices)} serves",
    )  # fmt: skip


def _catalogue_of(prices) -> str:
    """Whose switch catalogue a Clos was sized from, for a refusal: the default table's, or the
    ``switch_catalogue`` of the ``--prices`` file (a radix-3 catalogue was told as a server
    count the fabric cannot serve, naming neither)."""
    src = "default" if prices is None else prices.source
    return "the default price table" if src == "default" else f"the switch_catalogue of {src}"


def switched_clos(
    name: str, workload: Workload, degree: int, link_bandwidth: float, oversubscription: float,
    prices=None, layout: str = "bundled",
) -> FabricRun:  # fmt: skip
    """The cheapest Clos of ``degree`` NICs of ``link_bandwidth`` per server from the price
    table's switch catalogue at that speed (:func:`topoopt.fabrics.catalogue.plan_clos`: one
    switch when one serves all, else two or three tiers); a 64-port switch at that speed,
    priced per port, when the catalogue has none. ``layout``: ``bundled`` (a server's NICs on
    its leaf), ``rail`` (NIC ``i`` on rail ``i``, rails joined by the spine) or ``rail-only``
    (one Clos per rail, no spine across rails: :func:`topoopt.fabrics.rail.rail_only`).
    ``fabric_info`` gives the tiers, switches per tier and the oversubscription realised.

    Examples
    --------
    >>> from traffic.load import load_workload
    >>> run = switched_clos("fat-tree", load_workload("dlrm"), 4, 12.5e9, 1.0)
    >>> run.cost_detail["fabric_info"]["tiers"], run.fabric.server_ports[:2].tolist()
    (1, [4, 4])
    """
    from topoopt.fabrics.rail import rail_only

    n, gbps = workload.servers, float(link_bandwidth) * 8.0 / 1e9
    best = None
    for _, plan, rep in clos_candidates(n, degree, gbps, oversubscription, prices, layout):
        if plan is None:
            continue
        if best is None or (rep.capex_usd, plan.switch_ports) < (
            best[1].capex_usd,
            best[0].switch_ports,
        ):
            best = (plan, rep)
    if best is None:
        _no_clos(n, degree, gbps, oversubscription, prices, layout)
    plan, rep = best
    gps = workload.gpus_per_server
    if layout == "rail-only":
        fab = rail_only(plan.shape, degree, float(link_bandwidth), gpus_per_server=gps)
    else:
        fab = plan.fabric(float(link_bandwidth), gpus_per_server=gps)
    run = FabricRun(name, fab, workload, capex_usd=rep.capex_usd, power_w=rep.power_w)
    info = {"family": fab.family, **plan.info()}
    if layout == "rail-only":  # the plan is one rail's; the fabric is `degree` of them
        info.update(rails=degree, switches=plan.switches * degree, ports_per_server=degree)
        info["switch_ports"] = plan.switch_ports * degree
        info["server_gbps"] = plan.server_gbps * degree
        for tier in ("leaves", "spines", "aggregation", "cores"):
            if tier in info:
                info[tier] *= degree
    run.cost_detail = {
        "capex_breakdown": rep.capex_by_component,
        "power_breakdown": rep.power_by_component,
        "fabric_info": info,
    }
    notes, warns = [], []
    if plan.model.name.endswith("(priced per port)"):  # no catalogue switch at this speed
        said = (
            f"no switch of the price table's catalogue runs at {plan.model.gbps:g} Gbps: "
            f"priced as {plan.model.name}"
        )
        notes.append(said)
        warns.append(said)
    realised = plan.shape.oversubscription
    if abs(realised - oversubscription) > 1e-9:
        said = (
            f"oversubscription {oversubscription:g}:1 asked, {realised:g}:1 built "
            f"({plan.tiers} tier{'s' if plan.tiers > 1 else ''})"
        )
        notes.append(said)
        if plan.tiers > 1:  # one switch has no uplinks: the note says so, nothing to warn
            warns.append(said)
    run.note, run.warning = "; ".join(notes), "; ".join(warns)
    return run


def ocs_spine_run(
    name: str, workload: Workload, degree: int, link_bandwidth: float, prices=None
) -> FabricRun:
    """The cheapest OCS spine (:func:`topoopt.fabrics.ocs_spine.ocs_spine`) of the catalogue's
    switches at ``link_bandwidth``, its circuits engineered for ``workload``'s pod-level
    traffic (every demand expanded to ring pair traffic between servers)."""
    from topoopt.fabrics.cost import load_prices
    from topoopt.fabrics.ocs_spine import ocs_spine, ocs_spine_shape, pod_demand
    from traffic.expand import expand

    table = load_prices() if prices is None else prices
    n, gbps = workload.servers, float(link_bandwidth) * 8.0 / 1e9
    radixes = sorted({m.radix for m in table.catalogue() if abs(m.gbps - gbps) <= 1e-6 * gbps})
    matrix = expand(workload, "ring", "server").matrix()
    best, why = None, None
    for radix in radixes or [64]:
        try:
            sh = ocs_spine_shape(n, radix, ports_per_server=degree)
        except InputError as e:
            why = e
            continue
        pod_of = np.arange(n) // sh.servers_per_leaf // sh.leaves_per_pod
        fab = ocs_spine(
            n, radix, ports_per_server=degree, demand=pod_demand(matrix, pod_of, sh.pods),
            port_bandwidth=float(link_bandwidth), gpus_per_server=workload.gpus_per_server,
        )  # fmt: skip
        capex, power = _price(fab, table)
        if best is None or capex < best[1]:
            best = (fab, capex, power, sh)
    if best is None:
        raise why or InputError("servers", n, "a cluster an OCS spine serves")
    fab, capex, power, sh = best
    run = FabricRun(name, fab, workload, capex_usd=capex, power_w=power)
    run.note = f"{sh.pods} pods, {sh.ocses} OCS, circuits engineered for the job's pod traffic"
    return run


def _price(fabric: Fabric, prices) -> tuple[float, float]:
    r = fabric_cost(fabric, prices)
    return r.capex_usd, r.power_w


def hybrid_run(
    name: str,
    workload: Workload,
    degree: int,
    link_bandwidth: float,
    *,
    oversubscription: float = 4.0,
    time_limit_s: float = 30.0,
    prices=None,
    circuits=None,
    work_limit: float | None = None,
) -> FabricRun:
    """``compare``'s ``hybrid`` row: ``degree - degree // 2`` NICs on an oversubscribed
    leaf-spine, ``degree // 2`` optical ports with ``circuits`` (default: the geometric
    circulant), one LP routing over both layers and the workload's rings on the circuits.
    ``work_limit`` bounds the routing's LPs deterministically (None:
    :data:`solvers.hybrid_design.ROUTE_WORK_LIMIT`); ``time_limit_s`` is a wall-clock cap only,
    and a routing it cut has ``search_info["deterministic"] = False``.

    Raises
    ------
    InputError
        ``degree`` below 4.
    """
    n, d, B = workload.servers, int(degree), float(link_bandwidth)
    if d < 4:  # the optical half (d // 2 ports) is a circulant of at least 2 ports
        raise InputError(
            "degree", d, "at least 4 for a hybrid (half electrical, 2 or more optical)"
        )
    fab = hybrid(
        n,
        d // 2,
        oversubscription=oversubscription,
        ports_per_server=d - d // 2,  # one NIC per port, as on every fabric
        circuits=circuits,
        port_bandwidth=B,
        optical_port_bandwidth=B,
        gpus_per_server=workload.gpus_per_server,
    )
    # hop-count ECMP would put all of a circuit pair's bytes on its one circuit (1 hop)
    # and none on the NIC (2 hops): the optical ports then cap neighbour traffic whatever
    # the NIC speed (issue 13). One LP routing over both layers splits every pair.
    from types import SimpleNamespace

    from solvers import DesignProblem, design_workload, ring_records, route_hybrid

    problem = DesignProblem.from_workload(workload, degree=d // 2, link_bandwidth=B)
    routed = route_hybrid(problem, fab, time_limit_s, work_limit=work_limit)
    opt = fab.link_kind == "optical"
    have = set((fab.src[opt] * n + fab.dst[opt]).tolist())
    rings = SimpleNamespace(servers=n, rings=ring_records(problem, routed.rings, have))
    run = FabricRun(name, fab, design_workload(workload, rings, problem), routed.paths)
    run.note = "routed by solvers.hybrid_design.route_hybrid (both layers)"
    if routed.status.startswith("fallback"):  # a limit stopped the path LP: say so
        run.note += f"; no path LP routing within its limits, {routed.status}"
    run.search_info = {
        "deterministic": routed.limit != "time",
        "stopped_by": {"time": "time limit", "work": "work limit"}.get(routed.limit, "optimal"),
        "time_limit_cut": ["the hybrid routing LP"],
    }
    run.capex_usd, run.power_w = _price(fab, prices)
    return run


def build_fabric(
    name: str,
    workload: Workload,
    degree: int,
    link_bandwidth: float,
    *,
    oversubscription: float = 4.0,
    seed: int = 0,
    time_limit_s: float = 30.0,
    prices=None,
    designs: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
    work_limit: float | None = None,
    ocs_radix: int | None = None,
    ocs_layout: str = "per-rail",
) -> FabricRun:
    """Build the fabric ``name`` (see the module docstring) for ``workload``'s servers.

    ``time_limit_s`` is the designed fabrics' wall-clock cap, ``work_limit`` their deterministic
    work budget (:func:`solvers.registry.solve`; None: the solver's default). ``ocs_radix``
    (ports of one OCS; None: one OCS of ``n`` ports per port index) puts the designed fabrics
    (``topoopt``, ``topoopt-released``, ``topoopt-best``, ``joint`` and the reference of
    ``fat-tree-cost-equivalent``) on an optical layer of finite-radix OCSes laid out by
    ``ocs_layout`` (:class:`~topoopt.fabrics.ocs_layout.OcsLayout`): every design fits it
    (:func:`solvers.ocs_repair.respect_ocs`) and is priced with all the OCSes' ports."""
    ocs = {"ocs_radix": ocs_radix, "ocs_layout": ocs_layout}
    n, gps = workload.servers, workload.gpus_per_server
    B, d = float(link_bandwidth), int(degree)
    designs = {} if designs is None else designs
    common = {"gpus_per_server": gps}
    if name == "ideal":
        # a bound: server to server in one link's latency, the least any fabric offers
        fab = ideal_bound(n, d, B, **common)
    elif name in ("fat-tree", "fat-tree-oversub"):
        # the buyer's Clos of d NICs of B per server: catalogue switches at B, 1-3 tiers
        r = 1.0 if name == "fat-tree" else float(oversubscription)
        return switched_clos(name, workload, d, B, r, prices)
    elif name == "ocs-spine":
        return ocs_spine_run(name, workload, d, B, prices)
    elif name in ("rail", "rail-only"):
        return switched_clos(name, workload, d, B, 1.0, prices, layout=name)
    elif name in ("rail-circuits", "rail-circuits-2"):
        from solvers import rail_circuits_fabric

        if d != gps:
            raise InputError("degree", d, f"{gps}: one NIC (rail) per GPU for {name}")
        fab, rd = rail_circuits_fabric(workload, 4 if name == "rail-circuits" else 2, B)
        run = FabricRun(name, fab, workload)
        run.note = (
            f"{rd.ports_per_nic} lanes a NIC, rails identical: {rd.rails_identical}, "
            f"{100 * rd.gap:.1f} % of a rail's bytes forwarded (design {rd.wall_s:.2f} s)"
        )
        run.capex_usd, run.power_w = _price(fab, prices)
        return run
    elif name == "fat-tree-cost-equivalent":
        ref = designs.get("topoopt") or build_fabric(
            "topoopt", workload, d, B, seed=seed, prices=prices, designs=designs, **ocs
        )
        # never more than the ideal switch's d x B per server: the ideal stays a bound
        eq = cost_equivalent_fat_tree(
            ref.capex_usd, n, prices=prices, max_bandwidth=d * B, max_ports=d, **common
        )
        # a buildable uniform Clos: capex is its bill of materials (topoopt.fabrics.cost)
        run = FabricRun(name, eq.fabric, workload, capex_usd=eq.capex_usd, power_w=eq.power_w)
        run.cost_detail = {
            "capex_breakdown": eq.capex_breakdown,
            "power_breakdown": eq.power_breakdown,
            "fabric_info": eq.info,
        }
        return run
    elif name == "torus":
        dims, per = torus_shape(n, d)
        fab = torus(dims, B, links_per_dim=per, **common)
    elif name == "expander":
        fab = expander(n, d, seed, B, **common)
    elif name == "hybrid":
        return hybrid_run(
            name, workload, d, B, oversubscription=oversubscription, time_limit_s=time_limit_s,
            prices=prices, work_limit=work_limit,
        )  # fmt: skip
    elif name in ("fat-tree-ina", "hybrid-ina"):  # the same fabric, switches aggregate
        base = build_fabric(
            name.removesuffix("-ina"), workload, d, B, oversubscription=oversubscription,
            seed=seed, time_limit_s=time_limit_s, prices=prices, progress=progress,
        )  # fmt: skip
        return ina_run(name, base, prices)  # topoopt.app.studies.ina_fabrics
    elif name == "topoopt-best":
        best = None
        for variant in ("topoopt", "topoopt-released"):
            r = designs.get(variant) or build_fabric(
                variant, workload, d, B, seed=seed, time_limit_s=time_limit_s, prices=prices,
                designs=designs, progress=progress, **ocs,
            )  # fmt: skip
            it = designs.get(f"{variant} iteration") or simulate_iteration(
                r.workload, r.fabric, routing=r.routing, exposed_by_class=False, reduction=True
            )
            designs[f"{variant} iteration"] = it
            if best is None or it.iteration_s < best[0]:
                best = (it.iteration_s, r)
        run = replace(best[1], name=name, note=f"best TopoOpt variant: {best[1].name}")
        designs[name] = run
        return run
    elif name in DESIGNED:
        from solvers import DesignProblem, design_fabric, design_routing, design_workload, solve

        problem = DesignProblem.from_workload(workload, degree=d, link_bandwidth=B)
        if ocs_radix is not None:
            from topoopt.fabrics.ocs_layout import OcsLayout

            problem = problem.with_options(ocs=OcsLayout(n, d, ocs_radix, ocs_layout))
        design = solve(
            problem, name, time_limit_s=time_limit_s, seed=seed, progress=progress,
            work_limit=work_limit,
        )  # fmt: skip
        fab = design_fabric(design, gpus_per_server=gps)
        run = FabricRun(
            name,
            fab,
            design_workload(workload, design, problem),
            design_routing(design, fab),
            design,
        )
        run.capex_usd, run.power_w = _price(fab, prices)
        designs[name] = run
        return run
    else:
        raise InputError("fabric", name, f"one of {', '.join(FABRICS)}")
    if name in ("torus", "expander"):  # NCCL-like rings: Hamiltonian cycles, both directions
        run = FabricRun(name, fab, ring_workload(workload, fab, seed))
        run.rings = ring_facts(fab, seed)  # None below 3 servers (rank order is every ring)
        run.note = run.rings["note"] if run.rings else ""
        if run.rings and not run.rings["full"]:
            run.warning = run.note
        run.capex_usd, run.power_w = _price(fab, prices)
        return run
    run = FabricRun(name, fab, workload)
    run.capex_usd, run.power_w = _price(fab, prices)
    return run


def reconfigure_row(
    run: FabricRun,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    pods: int | None = None,
    time_limit_s: float = 30.0,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
):
    """The schedule search of an ``ocs-spine`` or ``hybrid`` row's circuits at delay ``delay_s``
    (``reconfig --fabric ocs-spine`` / ``--fabric hybrid``): :func:`solvers.reconfigure_spine`
    on the row's spine (its radix, OCS radix and pods, or ``pods``), or
    :func:`solvers.reconfigure_hybrid` on the row's fabric, LP routing and ring-designed
    workload (each phase set's routing LP gets ``time_limit_s``). A ReconfigResult."""
    from solvers import reconfigure_hybrid, reconfigure_spine

    kw = {"max_evaluations": max_evaluations, "holds": holds, "progress": progress}
    p = run.fabric.params
    if run.name == "ocs-spine":
        return reconfigure_spine(
            run.workload, link_bandwidth, delay_s, radix=int(p["radix"]),
            ports_per_server=int(degree), pods=int(pods or p["pods"]),
            ocs_radix=int(p["ocs_radix"]), **kw,
        )  # fmt: skip
    if run.name == "hybrid":
        return reconfigure_hybrid(
            run.workload, run.fabric, run.routing, delay_s, time_limit_s=time_limit_s, **kw
        )
    raise InputError("fabric", run.name, f"one of {', '.join(PER_PHASE_FABRICS)}")


def per_phase_run(
    run: FabricRun,
    degree: int,
    link_bandwidth: float,
    delay_s: float,
    *,
    time_limit_s: float = 30.0,
    max_evaluations: int = 128,
    progress: Callable[[str], None] | None = None,
):
    """The ``ocs-spine`` or ``hybrid`` ``run`` with per-phase circuits charged the OCS delay
    ``delay_s`` (:func:`reconfigure_row`). The static circuits are a candidate of the search,
    so the chosen schedule is never slower than them.

    Returns
    -------
    (ReconfigResult, ScheduleRun or None)
        The search's result and, when it chose to reconfigure, the chosen schedule simulated
        again in full (its :class:`~topoopt.flowsim.iteration.IterationResult` is ``.result``;
        its ``iteration_s`` is the result's).
    """
    from solvers import iteration_under_hybrid_schedule, iteration_under_spine_schedule
    from topoopt.fabrics.ocs_spine import ocs_spine_shape

    res = reconfigure_row(
        run, degree, link_bandwidth, delay_s, time_limit_s=time_limit_s,
        max_evaluations=max_evaluations, progress=progress,
    )  # fmt: skip
    if res.schedule.is_static():
        return res, None
    again = {"compute_s": res.info["compute_s"], "max_buckets": res.info["max_buckets"]}
    if run.name == "hybrid":
        chosen = iteration_under_hybrid_schedule(
            run.workload, res.schedule, run.fabric, res.dark_s, **again
        )
    else:
        p = run.fabric.params
        sh = ocs_spine_shape(
            run.workload.servers, int(p["radix"]), ports_per_server=int(degree),
            pods=int(p["pods"]), ocs_radix=int(p["ocs_radix"]),
        )  # fmt: skip
        chosen = iteration_under_spine_schedule(
            run.workload, res.schedule, sh, float(link_bandwidth), res.dark_s, **again
        )
    return res, chosen


def _per_phase_row(row, run, it, degree, link_bandwidth, delay_s, time_limit_s, progress):
    """Update a static ``row`` to :func:`per_phase_run`'s schedule (:func:`compare`'s
    ``per_phase_delay_s``); the iteration the row now reports."""
    res, chosen = per_phase_run(
        run, degree, link_bandwidth, delay_s, time_limit_s=time_limit_s, progress=progress
    )
    row.update(
        per_phase=True, reconfig_delay_s=float(delay_s), static_iteration_s=it.iteration_s,
        reconfigurations=0, dark_s=float(delay_s), schedule=["static"],
    )  # fmt: skip
    if chosen is None or not chosen.iteration_s < it.iteration_s:
        return it
    r = chosen.result
    t = float(chosen.iteration_s)
    row.update(
        iteration_s=t, comm_s=r.comm_s, exposed_comm_s=t - float(r.compute_s),
        comm_busy_s=r.comm_busy_s, **throughput_facts(run.workload, t),
        reconfigurations=res.reconfigurations, dark_s=res.dark_s,
        schedule=[cs.label for cs in res.schedule.sets],
    )  # fmt: skip
    return r


def per_phase_sentence(table: pd.DataFrame) -> str | None:
    """The verdict's sentence on the per-phase rows of a comparison (None without any).

    >>> t = pd.DataFrame([{"fabric": "hybrid", "per_phase": True, "reconfig_delay_s": 1e-2,
    ...     "iteration_s": 3.95, "static_iteration_s": 4.0, "reconfigurations": 4}])
    >>> print(per_phase_sentence(t))  # doctest: +NORMALIZE_WHITESPACE
    Per-phase circuits at a 10,000 us OCS delay (the static circuits always a candidate): hybrid
    3.95 s, 1.25 % below its static circuits' 4 s (4 reconfigurations an iteration).
    """
    if "per_phase" not in table:
        return None
    rows = table[table["per_phase"].eq(True)]
    if not len(rows):
        return None
    parts = []
    for _, r in rows.iterrows():
        t, s0 = float(r["iteration_s"]), float(r["static_iteration_s"])
        k = int(r["reconfigurations"])
        if k == 0:
            parts.append(f"{r['fabric']} keeps its static circuits ({s0:.6g} s)")
        else:
            parts.append(
                f"{r['fabric']} {t:.6g} s, {100 * (1 - t / s0):.2f} % below its static "
                f"circuits' {s0:.6g} s ({k} reconfiguration{'s' if k > 1 else ''} an iteration)"
            )
    delay = float(rows["reconfig_delay_s"].iloc[0])
    return (
        f"Per-phase circuits at a {delay * 1e6:,.6g} us OCS delay (the static circuits always a "
        f"candidate): {'; '.join(parts)}."
    )


def _build_and_simulate(
    nm, workload, degree, link_bandwidth, designs, say, tag, *, oversubscription, seed,
    time_limit_s, prices, progress, work_limit, priority, split_allreduce, ocs, reduction=True,
):  # fmt: skip
    """Build fabric ``nm`` and simulate the workload on it: ``(run, iteration, comm, t_built)``,
    through the symmetry quotient with ``reduction`` (exact; off where it does not apply).
    An :class:`InputError` here means the fabric cannot be built or routed (e.g. a random
    expander that is not connected); :func:`compare` turns it into a row that says why."""
    run = designs.get(nm) or build_fabric(
        nm, workload, degree, link_bandwidth, oversubscription=oversubscription, seed=seed,
        time_limit_s=time_limit_s, prices=prices, designs=designs, progress=progress,
        work_limit=work_limit, **ocs,
    )  # fmt: skip
    if run.fabric.n_servers > 1:
        run.fabric.check_connected()  # e.g. a random 2-regular expander: disjoint cycles
    # beyond the memory budget the simulation refuses once its flows are routed, before the
    # sub-flow arrays exist (topoopt.flowsim.subflow_guard.check_subflows, exact counts): the
    # row says so (the estimate, the limit, the variable). The most paths of a pair times every
    # flow (fabric_paths) is not used here: 35.6 GB for a 6.2 GB run at 16,384 GPUs.
    t1 = time.perf_counter()
    say(f"{tag} {nm}: simulating")
    own = getattr(run.design, "priority", ()) or None  # a design's own class priorities
    it = simulate_iteration(
        run.workload, run.fabric, routing=run.routing, exposed_by_class=False,
        priority=priority if priority is not None else own, split_allreduce=split_allreduce,
        reduction=reduction, path_times=False,
    )  # fmt: skip
    cm = communication_time(
        run.workload, run.fabric, routing=run.routing, reduction=reduction, path_times=False
    )
    return run, it, cm, t1


def rounding_row(
    run: FabricRun,
    nominal_s: float,
    runs: int,
    seed: int,
    *,
    priority,
    split_allreduce,
    reduction: bool = True,
) -> dict[str, Any]:
    """The :data:`ROUNDING_COLUMNS` of one row: its iteration simulated ``runs`` more times with
    every fabric link's bandwidth scaled by ``1 + e`` (:mod:`topoopt.flowsim.conditioning`),
    the same simulation as the row's otherwise (:func:`_build_and_simulate`)."""
    from topoopt.flowsim.conditioning import check, columns

    own = getattr(run.design, "priority", ()) or None
    return columns(
        check(
            run.fabric, nominal_s, runs, seed,
            lambda f: simulate_iteration(
                run.workload, f, routing=run.routing, exposed_by_class=False,
                priority=priority if priority is not None else own,
                split_allreduce=split_allreduce, reduction=reduction, path_times=False,
            ).iteration_s,
        )
    )  # fmt: skip


def _ideal_with_designed_collectives(
    rows, runs, its, priority, split_allreduce, say, reduction: bool = True
) -> None:
    """Keep the ideal row a bound on every row: a design may rewrite the workload's collectives
    (``joint`` chooses each collective's algorithm and routing, e.g. a Blink tree packing for an
    all-gather) or give its classes a priority, and on an ideal switch that rewritten workload can
    be faster than the plan's ring collectives (the soak's plan 141: BERT, ZeRO-3 on 6 servers,
    ``joint`` 0.08558 s against the ideal switch's 0.08793 s). The ideal switch runs every
    designed row's workload and priority too, and its row keeps the fastest, naming whose
    collectives (``ideal_collectives``); ``ideal_ring_s`` keeps the plan's own."""
    ideal = next((r for r in runs if r.name == "ideal"), None)
    if ideal is None:
        return
    row = next(r for r in rows if r["fabric"] == "ideal")
    best, who = its["ideal"], None
    for run in runs:
        own = getattr(run.design, "priority", ()) or None
        if run.design is None or (run.workload is ideal.workload and own is None):
            continue
        say(f"ideal: simulating {run.name}'s collectives")
        it = simulate_iteration(
            run.workload, ideal.fabric, routing=ideal.routing, exposed_by_class=False,
            priority=priority if priority is not None else own, split_allreduce=split_allreduce,
            reduction=reduction, path_times=False,
        )  # fmt: skip
        if it.iteration_s < best.iteration_s:
            best, who = it, run.name
    row["ideal_ring_s"] = its["ideal"].iteration_s
    row["ideal_collectives"] = who
    if who is not None:
        for col in ROUNDING_COLUMNS:  # the check ran the plan's collectives, not these
            if col in row:
                row[col] = math.nan
        row.update(
            iteration_s=best.iteration_s, comm_s=best.comm_s,
            exposed_comm_s=best.exposed_comm_s, comm_busy_s=best.comm_busy_s,
            **throughput_facts(ideal.workload, best.iteration_s),
        )  # fmt: skip
        its["ideal"] = best


def compare(
    workload: Workload,
    fabrics: Sequence[str] = FABRICS,
    degree: int = 8,
    link_bandwidth: float = 12.5e9,
    *,
    oversubscription: float = 4.0,
    seed: int = 0,
    time_limit_s: float = 30.0,
    prices=None,
    progress: Callable[[str], None] | None = None,
    on_fabric_done: Callable[[str], None] | None = None,
    work_limit: float | None = None,
    priority: Sequence[str] | str | None = None,
    split_allreduce: float | None = None,
    ocs_radix: int | None = None,
    ocs_layout: str = "per-rail",
    per_phase_delay_s: float | None = None,
    reduction: bool = True,
    rounding_check: int = 0,
) -> CompareResult:
    """Simulate ``workload`` on each fabric; one row per fabric (module docstring).

    Returns
    -------
    CompareResult
        ``table`` columns: ``fabric``, ``iteration_s``, ``comm_s`` (communication on the
        iteration's critical path), ``exposed_comm_s`` (``iteration_s - compute_s``; at most
        ``comm_s``), ``comm_busy_s`` (time some communication is in flight), ``comm_alone_s``
        (the communication alone, phases in sequence; see the module docstring),
        ``capex_usd``, ``power_w``, ``server_bandwidth`` (bytes/s per server),
        ``capex_breakdown``, ``power_breakdown`` (component -> USD / W) and ``fabric_info``
        (:func:`cost_columns`), ``iterations_per_s_per_musd`` (throughput per million USD of
        network), ``ratio_to_ideal`` (iteration time over the ideal switch's), ``build_s``,
        ``simulate_s``, plus the solver's ``objective_s``, ``lower_bound_s`` and ``gap`` for
        designed fabrics, ``note`` where the fabric says something about itself, and ``error``
        (why) on the row of a fabric that cannot be built or routed (its figures are NaN; the
        other fabrics run). Only ``ideal`` failing fails the comparison.

    ``progress`` receives one-line messages; ``on_fabric_done(name)`` is called after each
    fabric (for progress bars). ``time_limit_s`` caps the designed fabrics' searches on the
    wall clock; ``work_limit`` is their deterministic budget (None: the solver's default).
    ``ocs_radix`` and ``ocs_layout`` put the designed fabrics on finite-radix OCSes
    (:func:`build_fabric`); ``params`` records them.
    ``priority`` (traffic classes, highest first) and ``split_allreduce`` (micro-op bytes) are
    passed to every fabric's iteration simulation (:mod:`topoopt.flowsim.priorities`).

    ``per_phase_delay_s`` (seconds, default None: static circuits) evaluates the ``ocs-spine``
    and ``hybrid`` rows with per-phase circuits charged this OCS delay (:func:`per_phase_run`,
    the static circuits always a candidate): their ``iteration_s``, ``comm_s``,
    ``exposed_comm_s`` (the dark times included), ``comm_busy_s`` and throughput are the chosen
    schedule's; ``comm_alone_s`` stays the static circuits'; the row adds
    :data:`PER_PHASE_COLUMNS` (``per_phase`` True, ``reconfig_delay_s``, ``static_iteration_s``,
    ``reconfigurations`` an iteration, ``dark_s``, ``schedule``: the sets' labels in order).
    Not with ``priority`` or ``split_allreduce`` (the schedule search simulates without them).

    ``reduction`` (default on) simulates every row through the symmetry quotient
    (:mod:`topoopt.flowsim.symmetry`: exact, the classes checked; off by itself where symmetry
    breaks, and with ``priority`` or ``split_allreduce``); the row's ``reduction`` says whether
    it was used (``on``) or why not. Off, every flow is simulated (for checking).

    ``rounding_check`` (default 0: none) simulates every row's iteration this many more times
    with its fabric's link bandwidths scaled by ``1 + e`` (:func:`rounding_row`): the rows
    add :data:`ROUNDING_COLUMNS`, how far rounding alone moves them (a per-phase row is not
    repeated: None), and ``params`` records ``rounding_check``.
    """
    from topoopt.flowsim.conditioning import check_runs

    rounding_check = check_runs(rounding_check)
    say = progress or (lambda _m: None)
    if per_phase_delay_s is not None:
        d = per_phase_delay_s
        if isinstance(d, bool) or not isinstance(d, int | float) or not math.isfinite(d) or d < 0:
            raise InputError("per_phase_delay_s", d, "a finite number of seconds >= 0")
        if priority is not None or split_allreduce is not None:
            raise InputError(
                "priority" if priority is not None else "split_allreduce",
                priority if priority is not None else split_allreduce,
                "none with per-phase circuits (the schedule search simulates without them)",
            )
    if workload.servers < 2:  # one server's GPUs talk over NVLink: no network to compare
        raise InputError(
            "cluster.servers", workload.servers,
            "at least 2 (on one server the GPUs talk over NVLink: no network to compare)",
        )  # fmt: skip
    names = list(dict.fromkeys(fabrics))
    for nm in names:
        if nm not in FABRICS:
            raise InputError("fabrics", nm, f"a comma-separated list of {', '.join(FABRICS)}")
    if "ideal" not in names:
        names.insert(0, "ideal")
    ocs = {"ocs_radix": ocs_radix, "ocs_layout": ocs_layout}
    if ocs_radix is not None:  # a bad radix or layout: refused before any fabric is built
        from topoopt.fabrics.ocs_layout import OcsLayout

        OcsLayout(workload.servers, int(degree), ocs_radix, ocs_layout)
    # sizes first, before any fabric is built (a refusal after minutes of work helps nobody)
    from topoopt.flowsim.work import check_work

    check_work(
        workload, f"simulation (x {len(names)} fabrics)",
        reduced=reduction and priority is None and split_allreduce is None,
    )  # fmt: skip
    if "fat-tree-cost-equivalent" in names:
        from topoopt.fabrics.cost import catalogue_steps

        if not catalogue_steps(workload.servers, prices):
            raise InputError(
                "servers", workload.servers, "a cluster a two-tier Clos of the catalogue can serve"
            )
    designs: dict[str, Any] = {}
    for nm in ("ideal", "fat-tree", "fat-tree-oversub"):  # seconds, and refusing sizes: first
        if nm in names:
            designs[nm] = build_fabric(
                nm, workload, degree, link_bandwidth, oversubscription=oversubscription,
                seed=seed, prices=prices, designs=designs,
            )  # fmt: skip
    rows, runs, its, comms = [], [], {}, {}
    for k, nm in enumerate(names):
        say(f"[{k + 1}/{len(names)}] {nm}: building")
        t0 = time.perf_counter()
        try:
            run, it, cm, t1 = _build_and_simulate(
                nm, workload, degree, link_bandwidth, designs, say, f"[{k + 1}/{len(names)}]",
                oversubscription=oversubscription, seed=seed, time_limit_s=time_limit_s,
                prices=prices, progress=progress, work_limit=work_limit, priority=priority,
                split_allreduce=split_allreduce, ocs=ocs, reduction=reduction,
            )  # fmt: skip
        except InputError as e:
            if nm == "ideal":
                raise  # the bound every row is measured against
            say(f"[{k + 1}/{len(names)}] {nm}: cannot be built: {e}")
            rows.append({"fabric": nm, "error": str(e), "build_s": time.perf_counter() - t0})
            if on_fabric_done is not None:
                on_fabric_done(nm)
            continue
        t2 = time.perf_counter()
        runs.append(run)
        its[nm], comms[nm] = it, cm
        designs[f"{nm} iteration"] = it
        row = {
            "fabric": nm,
            "iteration_s": it.iteration_s,
            "comm_s": it.comm_s,
            "exposed_comm_s": it.exposed_comm_s,
            "comm_busy_s": it.comm_busy_s,
            "comm_alone_s": cm.total_s,
            "capex_usd": run.capex_usd,
            "power_w": run.power_w,
            **cost_columns(run, prices),
            **throughput_facts(run.workload, it.iteration_s),
            "build_s": t1 - t0,
            "simulate_s": t2 - t1,
            "reduction": reduction_status(it),
        }
        if run.note:
            row["note"] = run.note
        if rounding_check and not (per_phase_delay_s is not None and nm in PER_PHASE_FABRICS):
            say(f"[{k + 1}/{len(names)}] {nm}: rounding check, {rounding_check} runs")
            row.update(
                rounding_row(
                    run, it.iteration_s, rounding_check, seed, priority=priority,
                    split_allreduce=split_allreduce, reduction=reduction,
                )
            )  # fmt: skip
            row["simulate_s"] = time.perf_counter() - t1
            t2 = time.perf_counter()
        if per_phase_delay_s is not None and nm in PER_PHASE_FABRICS:
            say(f"[{k + 1}/{len(names)}] {nm}: per-phase circuits")
            its[nm] = _per_phase_row(
                row, run, it, degree, link_bandwidth, per_phase_delay_s, time_limit_s, progress
            )
            row["simulate_s"] = time.perf_counter() - t1
        if run.design is not None:
            row.update(
                objective_s=run.design.objective_s,
                lower_bound_s=run.design.lower_bound_s,
                gap=run.design.gap,
                solver_status=run.design.status,
                solver=run.design.solver,
            )
            from solvers import search_summary

            row.update(search_summary(run.design))  # the objective used, why, deterministic
        rows.append(row)
        say(
            f"[{k + 1}/{len(names)}] {nm}: done, iteration {row['iteration_s']:.6g} s, capex "
            f"{run.capex_usd:,.0f} USD (build {t1 - t0:.1f} s, simulate {t2 - t1:.1f} s)"
        )
        if on_fabric_done is not None:
            on_fabric_done(nm)
    _ideal_with_designed_collectives(rows, runs, its, priority, split_allreduce, say, reduction)
    table = pd.DataFrame(rows)
    ideal_t = float(table.loc[table["fabric"] == "ideal", "iteration_s"].iloc[0])
    table["ratio_to_ideal"] = table["iteration_s"] / ideal_t
    with np.errstate(divide="ignore"):
        table["iterations_per_s_per_musd"] = np.where(
            table["capex_usd"] > 0,
            1e6 / (table["iteration_s"] * table["capex_usd"]),
            np.where(table["capex_usd"].isna(), math.nan, math.inf),
        )
    params = {
        "degree": degree,
        "link_bandwidth": link_bandwidth,
        "oversubscription": oversubscription,
        "seed": seed,
        "time_limit_s": time_limit_s,
        "servers": workload.servers,
        "gpus": workload.gpus,
        "workload": workload.name,
        "gpu": throughput_facts(workload, 0.0)["gpu"],
        "efficiency": throughput_facts(workload, 0.0)["efficiency"],
        "reduction": bool(reduction),
    }
    if ocs_radix is not None:
        params.update(ocs_radix=int(ocs_radix), ocs_layout=ocs_layout)
    if priority is not None:
        params["priority"] = list(check_priority(priority))
    if split_allreduce is not None:
        params["split_allreduce_bytes"] = float(split_allreduce)
    if per_phase_delay_s is not None:
        params["per_phase_delay_s"] = float(per_phase_delay_s)
    if rounding_check:
        params["rounding_check"] = rounding_check
    return CompareResult(table, runs, its, comms, params)
