"""Per-phase pod-to-pod circuits of an OCS spine (issue 26, item 2: "the reconfiguration
machinery changes the pod-to-pod circuits between jobs or phases").

The OCS spine (:mod:`topoopt.fabrics.ocs_spine`) engineers its pod-to-pod circuits once, from the
whole iteration's pod traffic. Here they may change at the phase boundaries of an iteration,
each change costing the OCS's reconfiguration delay, by the machinery of direct-connect
reconfiguration (:mod:`solvers.reconfig.search`, :mod:`solvers.reconfig.schedule`):

1. **Static circuits.** ``engineer_circuits`` of the whole iteration's pod-level bytes (every
   demand expanded to ring pair traffic between servers, as ``compare``'s ``ocs-spine`` row), and
   the iteration on that fabric: the reference run.
2. **Phases** (:func:`~solvers.reconfig.search.comm_phases`) of the reference run, and each
   phase's server bytes (:func:`~solvers.reconfig.search.phase_traffic`).
3. **Per-phase candidates**: the static circuits and ``engineer_circuits`` of the phase's pod-level
   bytes (:class:`SpineSet`, dropped when equal to the static set).
4. **Schedules and dark times**: :func:`~solvers.reconfig.search.search_schedules`, each schedule
   simulated exactly (:func:`iteration_under_spine_schedule`): the same guarantees (never
   slower than static, non-decreasing in the delay on the dark-time grid).

Realisation (:func:`realise_spine_schedule`): one union fabric, the spine with, for every pair of
aggregation switches, the most circuits any set gives it (:func:`topoopt.fabrics.ocs_spine.
circuit_links` places each set's circuits on the switches). Under set ``k`` an optical link has
``count_k * B`` (zero when set ``k`` has no circuit there); the electrical links never change. A
reconfiguration keeps ``min(count_j, count_k)`` circuits of a switch pair lit during its dark
time (an OCS moves only the mirrors it changes) and the old paths; then set ``k``'s capacities and
its paths, shortest-path ECMP on the spine of set ``k`` (pairs without a circuit through a transit
pod), as on the static fabric. The schedule repeats every iteration (the wrap back to set 0).

The spine's hardware is the same whatever the schedule (every OCS is bought whole): per-phase
circuits change the iteration, not the capex or the power.
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
from topoopt.fabrics.fabric import DEFAULT_LINK_LATENCY, Fabric
from topoopt.fabrics.ocs_spine import (
    PALOMAR_PORTS,
    OcsSpineShape,
    circuit_links,
    engineer_circuits,
    ocs_spine,
    ocs_spine_shape,
    pod_demand,
)
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "SpineSet",
    "RealisedSpine",
    "spine_fabric",
    "static_spine_circuits",
    "realise_spine_schedule",
    "iteration_under_spine_schedule",
    "reconfigure_spine",
]


@dataclass(frozen=True, eq=False)
class SpineSet:
    """One set of pod-to-pod circuits: ``(ocses, pods, pods)`` symmetric counts.

    >>> a = SpineSet(np.array([[[0, 2], [2, 0]]]), "static")
    >>> a.same_circuits(SpineSet(a.circuits.copy())), a.total
    (True, 2)
    """

    circuits: np.ndarray
    label: str = ""

    def __post_init__(self) -> None:
        c = np.asarray(self.circuits, np.int64)
        c.setflags(write=False)
        object.__setattr__(self, "circuits", c)

    def same_circuits(self, other: SpineSet) -> bool:
        return bool(np.array_equal(self.circuits, other.circuits))

    @property
    def total(self) -> int:
        """Circuits of the set."""
        return int(self.circuits.sum()) // 2


def spine_fabric(
    shape: OcsSpineShape,
    link_bandwidth: float,
    *,
    circuits: np.ndarray | None = None,
    links: tuple[np.ndarray, np.ndarray] | None = None,
    gpus_per_server: int = 1,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """The spine of ``shape`` with these ``circuits`` (or agg-level ``links``)."""
    return ocs_spine(
        shape.servers, shape.radix, ports_per_server=shape.ports_per_server, pods=shape.pods,
        ocs_radix=shape.ocs_radix, circuits=circuits, links=links,
        port_bandwidth=float(link_bandwidth), gpus_per_server=gpus_per_server, latency=latency,
    )  # fmt: skip


def _pod_of(shape: OcsSpineShape) -> np.ndarray:
    return np.arange(shape.servers) // shape.servers_per_leaf // shape.leaves_per_pod


def static_spine_circuits(workload, shape: OcsSpineShape) -> np.ndarray:
    """The circuits ``compare``'s ``ocs-spine`` row engineers for ``workload`` (step 1)."""
    from traffic.expand import expand

    m = expand(workload, "ring", "server").matrix()
    return engineer_circuits(pod_demand(m, _pod_of(shape), shape.pods), shape.ocs_ports)


def _agg_counts(shape: OcsSpineShape, circuits: np.ndarray) -> np.ndarray:
    """``(A, A)`` symmetric circuit counts between the ``A`` aggregation switches."""
    a0 = shape.servers + shape.leaves
    n_agg = shape.pods * shape.aggs_per_pod
    cu, cv = circuit_links(shape, circuits)
    m = np.zeros((n_agg, n_agg), np.int64)
    np.add.at(m, (cu - a0, cv - a0), 1)
    return m + m.T


@dataclass(frozen=True, eq=False)
class RealisedSpine(RealisedUnion):
    """A spine schedule on its union fabric (module docstring,
    :class:`~solvers.reconfig.union.RealisedUnion`)."""

    shape: OcsSpineShape
    link_bandwidth: float

    def _set_routes(self, k: int, pairs: np.ndarray) -> PathSet:
        """ECMP routes of ``pairs`` on the spine of entry ``k``'s set, on union link ids."""
        from topoopt.fabrics.routing import routes

        fab = self.fabric
        own = spine_fabric(
            self.shape, self.link_bandwidth, circuits=self.schedule.sets[k].circuits,
            gpus_per_server=fab.gpus_per_server, latency=float(fab.latency.max(initial=0.0)),
        )  # fmt: skip
        ps = routes(own, "ecmp", pairs=pairs)
        to_union = link_lookup(fab.src, fab.dst, fab.n_nodes)(own.src, own.dst)
        return replace(ps, path_links=to_union[ps.path_links])


def realise_spine_schedule(
    schedule: Schedule,
    shape: OcsSpineShape,
    link_bandwidth: float,
    hold_s: float,
    *,
    gpus_per_server: int = 1,
    latency: float = DEFAULT_LINK_LATENCY,
    all_dark: bool = False,
) -> RealisedSpine:
    """The union fabric and capacity/path epochs of a schedule of :class:`SpineSet`.

    Examples
    --------
    Four pods of one leaf and one aggregation switch (4 uplinks each) on one 16-port OCS: the
    union has 2 circuits between pods 0 and 1 (set 0) and 2 between pods 0 and 2 (set 1).

    >>> sh = ocs_spine_shape(16, 8, pods=4, ocs_radix=16)
    >>> a = engineer_circuits(np.array([[0, 1, 0, 0]] + [[0] * 4] * 3, float), sh.ocs_ports)
    >>> b = engineer_circuits(np.array([[0, 0, 1, 0]] + [[0] * 4] * 3, float), sh.ocs_ports)
    >>> s = Schedule((SpineSet(a), SpineSet(b)), (0.0, 1.0))
    >>> r = realise_spine_schedule(s, sh, 1.0, 0.5)
    >>> opt = r.fabric.link_kind == "optical"
    >>> [(t, c[opt][::2].tolist(), k) for t, c, k in r.epochs]  # pairs 01 02 03 12 13 23
    [(0.0, [2.0, 1.0, 1.0, 1.0, 1.0, 2.0], 0), (1.0, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], None), \
(1.5, [1.0, 2.0, 1.0, 1.0, 2.0, 1.0], 1)]
    """
    h = check_hold(hold_s)
    bw = float(link_bandwidth)

    def build(u, v, reps):
        a0 = shape.servers + shape.leaves
        links = (np.repeat(u + a0, reps), np.repeat(v + a0, reps))
        return spine_fabric(shape, bw, links=links, gpus_per_server=gpus_per_server,
                            latency=latency)  # fmt: skip

    counts = [_agg_counts(shape, s.circuits) for s in schedule.sets]
    fab, caps, epochs = union_epochs(
        schedule, counts, build, shape.servers + shape.leaves, bw, h, all_dark
    )
    return RealisedSpine(fab, caps, epochs, schedule, h, shape, bw)


def iteration_under_spine_schedule(
    workload,
    schedule: Schedule,
    shape: OcsSpineShape,
    link_bandwidth: float,
    hold_s: float,
    *,
    compute_s: float | None = None,
    horizon: float | None = None,
    max_buckets: int | None = None,
    max_flows: int | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> ScheduleRun:
    """One training iteration of ``workload`` under a spine ``schedule``: a static one on its
    own spine (exactly ``compare``'s ``ocs-spine`` simulation when its circuits are
    :func:`static_spine_circuits`), else on the union fabric through its epochs
    (:func:`~solvers.reconfig.schedule.iteration_under_schedule`'s rules)."""
    gps = workload.gpus_per_server
    h = float(hold_s)
    if schedule.is_static():
        fab = spine_fabric(
            shape, link_bandwidth, circuits=schedule.sets[0].circuits, gpus_per_server=gps,
            latency=latency,
        )  # fmt: skip
        hook = _Hook(None)
    else:
        realised = realise_spine_schedule(
            schedule, shape, link_bandwidth, h, gpus_per_server=gps, latency=latency
        )
        fab, hook = realised.fabric, _Hook(realised, horizon)
    return run_iteration(
        workload, schedule, fab, None, hook, h, compute_s=compute_s, max_buckets=max_buckets,
        max_flows=max_flows,
    )  # fmt: skip


def reconfigure_spine(
    workload,
    link_bandwidth: float,
    delay_s: float,
    *,
    radix: int,
    ports_per_server: int,
    pods: int | None = None,
    ocs_radix: int = PALOMAR_PORTS,
    static_circuits: np.ndarray | None = None,
    max_phases: int = 4,
    max_exhaustive: int = 64,
    max_evaluations: int = 128,
    holds: tuple[float, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReconfigResult:
    """The fastest schedule of pod-to-pod circuits of an OCS spine at delay ``delay_s``.

    Parameters
    ----------
    workload : Workload
    link_bandwidth : float
        Bytes/s of every port (NICs, switch ports, circuits).
    delay_s : float
        Reconfiguration delay of the OCSes, seconds (``>= 0``).
    radix, ports_per_server, pods, ocs_radix
        The spine's shape (:func:`topoopt.fabrics.ocs_spine.ocs_spine_shape`).
    static_circuits : (ocses, pods, pods) int array, optional
        Default :func:`static_spine_circuits`.
    max_phases, max_exhaustive, max_evaluations, holds, progress
        As :func:`solvers.reconfig.search.reconfigure`.

    Returns
    -------
    ReconfigResult
        ``static`` is the static spine (a :class:`Fabric`); the schedule's sets are
        :class:`SpineSet`; ``info`` has the spine's ``pods`` and ``ocses``.

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan("vgg16-dp")
    >>> r = reconfigure_spine(w, 12.5e9, 1e-3, radix=4, ports_per_server=1, ocs_radix=8)
    >>> r.lower_bound_s <= r.iteration_s <= r.static_iteration_s, r.info["pods"]
    (True, 4)
    """
    delay = _check_delay(delay_s)
    if isinstance(max_evaluations, bool) or int(max_evaluations) != max_evaluations:
        raise InputError("max_evaluations", max_evaluations, "an integer >= 0")
    t0 = time.perf_counter()
    n = workload.servers
    sh = ocs_spine_shape(
        n, radix, ports_per_server=ports_per_server, pods=pods, ocs_radix=ocs_radix
    )
    bw = float(link_bandwidth)
    circ = static_spine_circuits(workload, sh) if static_circuits is None else static_circuits
    static = SpineSet(circ, "static")
    spine_fabric(sh, bw, circuits=static.circuits)  # checks the circuits before any simulation
    pod_of = _pod_of(sh)

    def phase_sets(m, ph) -> list:
        cs = SpineSet(
            engineer_circuits(pod_demand(m, pod_of, sh.pods), sh.ocs_ports),
            f"engineered:{ph.name}",
        )
        return [] if cs.same_circuits(static) else [cs]

    def simulate(sched: Schedule, h: float, **kw) -> ScheduleRun:
        return iteration_under_spine_schedule(workload, sched, sh, bw, h, **kw)

    return reconfigure_union(
        workload, static, simulate, phase_sets, delay,
        static_fabric=spine_fabric(
            sh, bw, circuits=static.circuits, gpus_per_server=workload.gpus_per_server
        ),
        ports=int(ports_per_server), port_bandwidth=bw,
        info={
            "fabric": "ocs-spine",
            "static_solver": "engineered",
            "phase_solvers": ["engineered"],
            "pods": sh.pods,
            "ocses": sh.ocses,
            "radix": sh.radix,
        },
        label=("spine", f" ({sh.pods} pods)"), max_phases=max_phases,
        max_exhaustive=max_exhaustive, max_evaluations=max_evaluations, holds=holds,
        progress=progress, t0=t0,
    )  # fmt: skip
