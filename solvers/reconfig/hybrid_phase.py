"""Per-phase circuits of a hybrid fabric's optical half (issue 26, MixNet's closest model).

A hybrid fabric (:func:`topoopt.fabrics.hybrid.add_optical_layer`) keeps an electrical packet
fabric and gives every server ``d`` optical ports whose circuits join servers directly; ``compare``
wires them once (the geometric circulant) and routes every pair over both layers with one LP
(:func:`solvers.hybrid_design.route_hybrid`). MixNet (SIGCOMM'25) reconfigures its optical domain
during training from the traffic it sees. Here the optical circuits may change at the phase
boundaries of an iteration, each change costing the OCS delay, by the machinery of the OCS
spine (:mod:`solvers.reconfig.spine`) and direct-connect reconfiguration:

1. **Static circuits.** The given hybrid fabric and its routing (``compare``'s ``hybrid`` row:
   its fabric, its ring-designed workload and its LP routing): the reference run.
2. **Phases** (:func:`~solvers.reconfig.search.comm_phases`) of the reference run, and each
   phase's server bytes (:func:`~solvers.reconfig.search.phase_traffic`).
3. **Per-phase candidates** (:class:`HybridSet`): the static circuits, and
   :func:`~solvers.reconfig.demand.demand_circuits` of the phase's server bytes on the ``d``
   optical ports (dropped when equal to the static circuits), routed by
   :func:`~solvers.hybrid_design.route_hybrid` on the phase's bytes alone (a path LP over the
   electrical ECMP paths, the circuits and mixed walks); a pair that the phase does not carry
   takes the electrical ECMP paths.
4. **Schedules and dark times**: :func:`~solvers.reconfig.search.search_schedules`, every
   schedule simulated exactly; the static schedule is a candidate, so the result is never
   slower than the static circuits.

Realisation (:func:`realise_hybrid_schedule`): one union fabric, the electrical fabric plus, for
every server pair, the most circuits any set gives it. Under set ``k`` a circuit link has
``count_k * B_o`` (zero when set ``k`` has no circuit there); the electrical links never change.
A reconfiguration keeps ``min(count_j, count_k)`` circuits of a pair lit during its dark time and
the old paths (:func:`~solvers.reconfig.schedule.schedule_epochs`); then set ``k``'s capacities
and paths. The schedule repeats every iteration (the wrap back to set 0).

The hardware is the same whatever the schedule (the OCSes are bought whole): per-phase circuits
change the iteration, not the capex or the power.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from solvers.model.congestion import link_lookup
from solvers.reconfig.schedule import Schedule, ScheduleRun, _Hook, run_iteration
from solvers.reconfig.search import ReconfigResult, _check_delay
from solvers.reconfig.union import RealisedUnion, check_hold, reconfigure_union, union_epochs
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "HybridSet",
    "RealisedHybrid",
    "optical_circuits",
    "electrical_part",
    "realise_hybrid_schedule",
    "iteration_under_hybrid_schedule",
    "reconfigure_hybrid",
]


@dataclass(frozen=True, eq=False)
class HybridSet:
    """One set of optical circuits, ``[u, v, count]`` rows (``u < v``, sorted), with its routing
    (walks on the set's own hybrid fabric) or ``None`` (electrical ECMP for every pair)."""

    circuits: np.ndarray
    routing: PathSet | None = None
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "circuits", Circuits(self.circuits).rows)  # canonical, read-only

    def same_circuits(self, other: HybridSet) -> bool:
        return bool(np.array_equal(self.circuits, other.circuits))

    @property
    def total(self) -> int:
        """Circuits of the set."""
        return int(self.circuits[:, 2].sum())


def optical_circuits(fabric: Fabric) -> np.ndarray:
    """``[u, v, count]`` rows (``u < v``) of a hybrid fabric's circuits."""
    opt = (fabric.link_kind == "optical") & (fabric.src < fabric.dst)
    return np.column_stack([fabric.src[opt], fabric.dst[opt], fabric.multiplicity[opt]])


def electrical_part(fabric: Fabric) -> Fabric:
    """The electrical fabric under a hybrid one: the inverse of
    :func:`topoopt.fabrics.hybrid.add_optical_layer` (its nodes and links keep their ids; the
    optical devices, appended last, and the circuits go)."""
    from topoopt.fabrics.fabric import build_fabric

    if fabric.family != "hybrid":
        raise InputError("fabric", fabric.family, "a hybrid fabric")
    n = fabric.n_servers
    d = int(fabric.server_optical_ports[0])
    keep = fabric.n_nodes - d
    e = np.arange(0, fabric.n_links, 2)
    e = e[fabric.link_kind[e] != "optical"]
    ports = fabric.node_ports[:keep].copy()
    ports[:n] -= d
    pre = "electrical_"
    params = {k[len(pre) :]: v for k, v in fabric.params.items() if k.startswith(pre)}
    return build_fabric(
        str(fabric.params["electrical"]), params, fabric.node_kind[:keep],
        fabric.node_layer[:keep], ports, fabric.src[e], fabric.dst[e],
        fabric.capacity[e] / fabric.multiplicity[e], fabric.link_kind[e],
        multiplicity=fabric.multiplicity[e], medium=fabric.medium[e], latency=fabric.latency[e],
        server_ports=fabric.server_ports - d, port_bandwidth=fabric.port_bandwidth,
        gpus_per_server=fabric.gpus_per_server,
        intra_server_bandwidth=fabric.intra_server_bandwidth,
    )  # fmt: skip


def _own_fabric(electrical: Fabric, d: int, circuits: np.ndarray, b_opt: float) -> Fabric:
    from topoopt.fabrics.hybrid import add_optical_layer

    c = Circuits(circuits, electrical.n_servers).rows
    ports = np.bincount(c[:, 0], c[:, 2], electrical.n_servers)
    ports += np.bincount(c[:, 1], c[:, 2], electrical.n_servers)
    deg = max(int(d), int(ports.max(initial=0)))
    return add_optical_layer(electrical, deg, c, b_opt)


@dataclass(frozen=True, eq=False)
class RealisedHybrid(RealisedUnion):
    """A hybrid schedule on its union fabric (module docstring,
    :class:`~solvers.reconfig.union.RealisedUnion`)."""

    electrical: Fabric
    optical_degree: int
    optical_bandwidth: float

    def _set_routes(self, k: int, pairs: np.ndarray) -> PathSet:
        """Routes of ``pairs`` under entry ``k``'s set, on union link ids: the set's routing
        where it covers a pair, else electrical ECMP."""
        from topoopt.fabrics.routing import routes

        cs = self.schedule.sets[k]
        fab = self.fabric
        own = _own_fabric(self.electrical, self.optical_degree, cs.circuits,
                          self.optical_bandwidth)  # fmt: skip
        to_union = link_lookup(fab.src, fab.dst, fab.n_nodes)(own.src, own.dst)
        parts = []
        covered = np.zeros(pairs.shape[0], bool)
        if cs.routing is not None and cs.routing.n_commodities:
            idx = cs.routing.index(pairs[:, 0], pairs[:, 1], own.n_nodes)
            covered = idx >= 0
            if covered.any():
                parts.append(cs.routing.take(idx[covered]))
        if (~covered).any():
            kinds = sorted(set(own.link_kind.tolist()) - {"optical"})
            parts.append(routes(own, "ecmp", pairs=pairs[~covered], kinds=kinds))
        if not parts:  # no pairs asked
            z = np.zeros(0, np.int64)
            parts = [PathSet(src=z, dst=z, commodity_ptr=np.zeros(1, np.int64),
                             path_ptr=np.zeros(1, np.int64), path_links=z,
                             weight=np.zeros(0))]  # fmt: skip
        ps = PathSet.concat(parts)  # looked up by pair (PathSet.index), not by position
        return replace(ps, path_links=to_union[ps.path_links])


def realise_hybrid_schedule(
    schedule: Schedule,
    electrical: Fabric,
    optical_degree: int,
    optical_bandwidth: float,
    hold_s: float,
    *,
    all_dark: bool = False,
) -> RealisedHybrid:
    """The union fabric and capacity/path epochs of a schedule of :class:`HybridSet`.

    Examples
    --------
    Four servers on one leaf, two optical ports each: set 0 has two circuits 0-1 (and 2-3),
    set 1 two circuits 0-2 (and 1-3); the union has all four pairs, each lit in one set.

    >>> from topoopt.fabrics.fat_tree import leaf_spine
    >>> a = HybridSet([[0, 1, 2], [2, 3, 2]]); b = HybridSet([[0, 2, 2], [1, 3, 2]])
    >>> r = realise_hybrid_schedule(Schedule((a, b), (0.0, 1.0)), leaf_spine(4), 2, 1.0, 0.5)
    >>> opt = (r.fabric.link_kind == "optical") & (r.fabric.src < r.fabric.dst)
    >>> [(t, c[opt].tolist(), k) for t, c, k in r.epochs]  # pairs 01 02 13 23
    [(0.0, [2.0, 0.0, 0.0, 2.0], 0), (1.0, [0.0, 0.0, 0.0, 0.0], None), \
(1.5, [0.0, 2.0, 2.0, 0.0], 1)]
    """
    h = check_hold(hold_s)
    n = electrical.n_servers
    b = float(optical_bandwidth)
    counts = []
    for s in schedule.sets:
        m = np.zeros((n, n), np.int64)
        c = s.circuits
        m[c[:, 0], c[:, 1]] += c[:, 2]
        counts.append(m + m.T)

    def build(u, v, reps):
        return _own_fabric(electrical, optical_degree, np.column_stack([u, v, reps]), b)

    fab, caps, epochs = union_epochs(schedule, counts, build, 0, b, h, all_dark)
    return RealisedHybrid(fab, caps, epochs, schedule, h, electrical, int(optical_degree), b)


def iteration_under_hybrid_schedule(
    workload,
    schedule: Schedule,
    fabric: Fabric,
    hold_s: float,
    *,
    compute_s: float | None = None,
    horizon: float | None = None,
    max_buckets: int | None = None,
    max_flows: int | None = None,
) -> ScheduleRun:
    """One iteration of ``workload`` under a schedule of optical circuits of the hybrid
    ``fabric``: a static one on ``fabric`` with its set's routing (exactly ``compare``'s
    ``hybrid`` simulation when given its fabric, workload and routing), else on the union fabric
    through its epochs."""
    h = float(hold_s)
    if schedule.is_static():
        s = schedule.sets[0]
        own = fabric if s.same_circuits(HybridSet(optical_circuits(fabric))) else None
        if own is None:
            own = _own_fabric(
                electrical_part(fabric), int(fabric.server_optical_ports[0]), s.circuits,
                float(fabric.params["optical_port_bandwidth"]),
            )  # fmt: skip
        routing, hook, fab = s.routing, _Hook(None), own
    else:
        realised = realise_hybrid_schedule(
            schedule, electrical_part(fabric), int(fabric.server_optical_ports[0]),
            float(fabric.params["optical_port_bandwidth"]), h,
        )  # fmt: skip
        routing, hook, fab = None, _Hook(realised, horizon), realised.fabric
    return run_iteration(
        workload, schedule, fab, routing, hook, h, compute_s=compute_s, max_buckets=max_buckets,
        max_flows=max_flows,
    )  # fmt: skip


def _phase_routing(fabric: Fabric, matrix, link_bandwidth: float, time_limit_s: float):
    """:func:`~solvers.hybrid_design.route_hybrid` of one phase's server bytes on ``fabric``."""
    import scipy.sparse as sp

    from solvers.hybrid_design import route_hybrid
    from solvers.model.problem import DesignProblem, PhaseTraffic

    n = fabric.n_servers
    ph = PhaseTraffic("phase", np.zeros(1, np.int64), np.zeros(0, np.int64),
                      np.zeros(0), sp.csr_matrix(matrix))  # fmt: skip
    d = int(fabric.server_optical_ports[0])
    return route_hybrid(DesignProblem(n, d, float(link_bandwidth), (ph,)), fabric, time_limit_s)


def reconfigure_hybrid(
    workload,
    fabric: Fabric,
    routing: PathSet | None,
    delay_s: float,
    *,
    max_phases: int = 4,
    max_exhaustive: int = 64,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    time_limit_s: float = 60.0,
    progress: Callable[[str], None] | None = None,
) -> ReconfigResult:
    """The fastest schedule of a hybrid fabric's optical circuits at delay ``delay_s``.

    Parameters
    ----------
    workload : Workload
        As simulated on the static fabric (``compare``'s ``hybrid`` row: its ring-designed
        workload).
    fabric : Fabric
        The static hybrid fabric (family ``hybrid``).
    routing : PathSet, optional
        Its routing (``compare``'s LP routing); ``None``: the simulator's default.
    delay_s : float
        Reconfiguration delay of the OCSes, seconds (``>= 0``).
    max_phases, max_exhaustive, max_evaluations, holds, progress
        As :func:`solvers.reconfig.search.reconfigure`.
    time_limit_s : float
        Seconds of every phase set's routing LP.

    Returns
    -------
    ReconfigResult
        ``static`` is the static fabric; the schedule's sets are :class:`HybridSet`.
    """
    from solvers.reconfig.demand import demand_circuits

    delay = _check_delay(delay_s)
    if isinstance(max_evaluations, bool) or int(max_evaluations) != max_evaluations:
        raise InputError("max_evaluations", max_evaluations, "an integer >= 0")
    if fabric.family != "hybrid":
        raise InputError("fabric", fabric.family, "a hybrid fabric")
    t0 = time.perf_counter()
    n = workload.servers
    if fabric.n_servers != n:
        raise InputError("fabric", f"{fabric.n_servers} servers", f"the plan's {n}")
    d = int(fabric.server_optical_ports[0])
    b_opt = float(fabric.params["optical_port_bandwidth"])
    electrical = electrical_part(fabric)
    static = HybridSet(optical_circuits(fabric), routing, "static")

    def phase_sets(m, ph) -> list:
        circ = demand_circuits(m, d)
        if HybridSet(circ).same_circuits(static):
            return []
        r = _phase_routing(_own_fabric(electrical, d, circ, b_opt), m, b_opt, time_limit_s)
        return [HybridSet(circ, r.paths, f"demand:{ph.name}")]

    def simulate(sched: Schedule, h: float, **kw) -> ScheduleRun:
        return iteration_under_hybrid_schedule(workload, sched, fabric, h, **kw)

    return reconfigure_union(
        workload, static, simulate, phase_sets, delay, static_fabric=fabric,
        ports=int(fabric.server_ports[0]),  # electrical NICs and optical ports
        port_bandwidth=max(float(np.max(fabric.port_bandwidth)), b_opt),  # the faster port
        info={
            "fabric": "hybrid",
            "static_solver": "circulant",
            "phase_solvers": ["demand"],
            "optical_degree": d,
        },
        label=("hybrid", ""), max_phases=max_phases, max_exhaustive=max_exhaustive,
        max_evaluations=max_evaluations, holds=holds, progress=progress, t0=t0,
    )  # fmt: skip
