"""The schedule model: circuit sets in time on one union fabric, simulated exactly.

A :class:`Schedule` is a sequence of ``(circuit set, start time)``: set ``0`` from ``t = 0``, set
``k`` requested at ``starts[k]``. Every circuit set is a :class:`CircuitSet` (circuits ``[u, v,
count]`` on ``degree`` ports per server, optionally with its own weighted routing).

Realisation (:func:`realise_schedule`)
--------------------------------------
- **One fabric.** The union of all circuit sets (per server pair, the largest count of any set)
  is one direct-connect fabric (:func:`topoopt.fabrics.direct_connect`); its directed link
  ``u -> v`` exists in every epoch, with capacity ``count_k(u, v) * B`` while set ``k`` is in
  force (``0`` when the pair has no circuit in set ``k``).
- **A reconfiguration** from set ``j`` to set ``k`` requested at ``t`` with dark time ``h``
  gives an epoch ``[t, t + h)`` in which the circuits being changed carry nothing while the
  ones that stay are untouched: link ``u -> v`` has ``min(count_j, count_k) * B`` and the paths
  of set ``j`` stay in force (a sub-flow crossing a changed circuit pauses; the others go on).
  From ``t + h`` set ``k``'s capacities and paths hold; unfinished flows continue with their
  remaining bytes on the new paths (:func:`topoopt.flowsim.timevarying.simulate_epochs`). The
  dark time ``h`` is at least the switch's delay; a longer one is always realisable (the
  operator waits before lighting the new circuits), which the search uses for monotonicity.
  With ``all_dark`` every fabric link carries nothing during ``[t, t + h)`` (the TopoOpt
  artifact pauses all traffic while it reconfigures). Consecutive equal sets are no
  reconfiguration. A reconfiguration may start only once the previous one has ended.
- **Routes.** Set ``k``'s flows follow its own routing for the pairs it covers and the shortest
  paths over its circuits (ECMP, hosts forwarding; at most :data:`ECMP_MAX_PATHS` per pair,
  spread evenly over the ranks of all of them) for the others, mapped onto the union fabric's
  link ids; a set that leaves a communicating pair unconnected is an error.
- **Periodic.** The schedule repeats every iteration. When the last set differs from set ``0``
  the circuits go back to set ``0`` after the iteration's last fabric flow ends, at ``t_net``;
  the next iteration can start at ``max(makespan, t_net + h)``, which is the iteration time
  reported (:attr:`ScheduleRun.iteration_s`; the makespan alone is ``makespan_s``). With
  ``wrap_overlap`` the wrap may also run into the next iteration's start, which needs set ``0``
  only from its first fabric flow ``f_0`` on (before it the iteration computes or uses the
  servers' own links) and its next reconfiguration only from its request ``starts[1]``: the
  next iteration starts at ``max(makespan, t_net + h - min(f_0, starts[1]))``, and runs as
  this one did (none of its flows meets a dark circuit; exact for the periodic iteration).

The iteration (:func:`iteration_under_schedule`) is the flow model's iteration
(:func:`topoopt.flowsim.iteration.simulate_iteration`): its FlowSet is built as always and run
through :func:`~topoopt.flowsim.timevarying.simulate_epochs` by the ``simulator`` hook, identical
flows aggregated into classes (exact: a class's members share their server pair, hence their
paths, in every epoch). A schedule without reconfiguration is simulated by
:func:`~topoopt.flowsim.network.simulate_builder` on its own fabric, exactly as ``topoopt simulate
--design`` does.

Symmetry. The last simulation of a schedule's iteration goes through the exact symmetry
quotient of its flow classes under every epoch where there is one
(:class:`ScheduleReductions`: :func:`topoopt.flowsim.epochs_reduction.reduce_grouped` on the
classes grouped by route, :func:`grouped_epochs`; the bytes left taken for
:class:`SharedPrefix` expanded from the quotient's paths), else it is the plain run; the
checks before it (the shared prefix's bound, the lower bounds of the bytes left, the static
engine after the last epoch) stay plain. Exact: the same iteration and flow times up to
rounding. Per-phase circuit sets designed for the phases' traffic break most symmetry: on
GPT-3 175B (128 servers, degree 8, one static design of the time-limited ``joint``) the
quotient of 317,214 flow classes (897 server pairs and links) is off in 17 of 25 runs (every
run whose first set is the static or the ``joint`` one), and at best halves them (159,024
classes, 318,048 of 634,428 sub-flows); runs not worth refining are screened
(:data:`REDUCE_WORTH`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np
from scipy.sparse import csgraph, csr_matrix

from solvers.model.congestion import link_lookup
from solvers.model.design import NodePaths
from topoopt.csr import ranges
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.direct_connect import direct_connect
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "CircuitSet",
    "Schedule",
    "RealisedSchedule",
    "ScheduleRun",
    "realise_schedule",
    "iteration_under_schedule",
    "simulate_schedule",
    "schedule_epochs",
    "schedule_flowset",
    "grouped_epochs",
    "route_profiles",
    "SharedPrefix",
    "ScheduleReductions",
    "FlowTemplate",
    "template_flowset",
    "prefix_bound",
    "REST_PATHS_PER_FLOW",
    "REDUCE_WORTH",
    "LOOSE_PATHS_PER_FLOW",
    "run_iteration",
    "connected",
    "ECMP_MAX_PATHS",
    "MAX_PATH_LINKS",
    "GroupCache",
]

MAX_PATH_LINKS = 200_000_000
"""Largest path table :func:`simulate_schedule` builds: path-link entries (int64) of every flow
class over all of a schedule's path versions (1.6 GB; the flow model holds about three copies).
With :data:`ECMP_MAX_PATHS` the 128-server plans need at most a few million."""

ECMP_MAX_PATHS = 64
"""Equal-cost paths a set's ECMP keeps per server pair (the group width of common switch ASICs).

The shortest paths of a sparse circuit set grow exponentially with their length: the demand
heuristic's set for DLRM's forward all-to-all on 128 servers (4 ports) has pairs 36 hops apart
with up to 531,441 shortest paths, 1.7e9 path-link entries for one epoch, which ran a 24 GB
machine out of memory. Pairs with at most this many paths keep all of them (every figure up to
64 servers in ``docs/reconfiguration.md`` is unchanged: their sets have at most 20); above it
:func:`topoopt.fabrics.routing.routes` keeps this many, evenly spread over the ranks, each
carrying an equal share."""


_ranges = ranges


def connected(circuits: Circuits, n: int) -> bool:
    """Whether the circuits join all ``n`` servers (a :class:`Circuits` on fewer servers leaves
    the last ones out).

    >>> connected(Circuits([[0, 1, 1], [1, 2, 1]]), 3), connected(Circuits([[0, 1, 1]]), 3)
    (True, False)
    """
    return n <= 1 or (circuits.n == n and circuits.connected())


@dataclass(frozen=True, eq=False)
class CircuitSet:
    """One set of circuits, optionally with its routing.

    Attributes
    ----------
    circuits : Circuits
        The circuits (stored as a :class:`Circuits`: given one, it is kept; rows are read on
        one more server than their largest id).
    routing : NodePaths, optional
        Weighted server paths over these circuits (pairs it does not cover: ECMP, at most
        :data:`ECMP_MAX_PATHS` paths per pair).
    label : str
        Where the set comes from (``"static"``, ``"joint:backward"``, ...).

    Examples
    --------
    >>> CircuitSet([[1, 0, 1], [0, 1, 1]]).circuits.tolist()
    [[0, 1, 2]]
    """

    circuits: Circuits
    routing: NodePaths | None = None
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "circuits", Circuits(self.circuits))

    def same_circuits(self, other: CircuitSet) -> bool:
        """Whether both sets hold the same circuits (routing aside; the server count aside)."""
        return bool(np.array_equal(self.circuits.rows, other.circuits.rows))

    def ports(self, n: int) -> np.ndarray:
        """Ports used at each of ``n`` servers."""
        c = self.circuits.rows
        return (np.bincount(c[:, 0], c[:, 2], n) + np.bincount(c[:, 1], c[:, 2], n)).astype(
            np.int64
        )


@dataclass(frozen=True, eq=False)
class Schedule:
    """Circuit sets in time: ``sets[k]`` is requested at ``starts[k]`` (``starts[0] == 0``).

    Attributes
    ----------
    sets : tuple of CircuitSet
        (or of :class:`solvers.reconfig.spine.SpineSet`: any set with ``same_circuits``)
    starts : tuple of float
        Seconds from the iteration's start, non-decreasing; a reconfiguration (a set whose
        circuits differ from the previous one) needs a start after the previous one's.
    phases : tuple of str
        The communication phase each entry serves.

    Examples
    --------
    >>> a, b = CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])
    >>> s = Schedule((a, b, b), (0.0, 1.0, 2.0), ("fwd", "bwd", "opt"))
    >>> s.changes(), s.reconfigurations()
    ([1], 2)
    """

    sets: tuple
    starts: tuple
    phases: tuple = ()

    def __post_init__(self) -> None:
        sets = tuple(self.sets)
        starts = tuple(float(x) for x in self.starts)
        phases = tuple(self.phases) or tuple(f"phase {i}" for i in range(len(sets)))
        if not sets or len(starts) != len(sets) or len(phases) != len(sets):
            raise InputError("schedule", f"{len(sets)} sets, {len(starts)} starts", "one each")
        if not all(hasattr(s, "same_circuits") for s in sets):  # CircuitSet, or a spine's
            raise InputError("schedule.sets", "not a CircuitSet", "CircuitSet entries")
        if starts[0] != 0.0:
            raise InputError("schedule.starts[0]", starts[0], "0 (the first set holds from 0)")
        bad = [
            i
            for i in range(1, len(starts))
            if not (np.isfinite(starts[i]) and starts[i] >= starts[i - 1])
        ]
        if bad:
            raise InputError(f"schedule.starts[{bad[0]}]", starts[bad[0]], "finite, non-decreasing")
        object.__setattr__(self, "sets", sets)
        object.__setattr__(self, "starts", starts)
        object.__setattr__(self, "phases", phases)

    def changes(self) -> list[int]:
        """Indices ``k >= 1`` whose circuits differ from entry ``k - 1``'s."""
        return [
            k for k in range(1, len(self.sets)) if not self.sets[k].same_circuits(self.sets[k - 1])
        ]

    def wraps(self) -> bool:
        """Whether the circuits must go back to set 0 for the next iteration."""
        return not self.sets[-1].same_circuits(self.sets[0])

    def reconfigurations(self) -> int:
        """Reconfigurations per iteration (the wrap back to set 0 included)."""
        return len(self.changes()) + int(self.wraps())

    def is_static(self) -> bool:
        return self.reconfigurations() == 0


@dataclass(frozen=True, eq=False)
class RealisedSchedule:
    """A schedule on its union fabric (see the module docstring).

    Attributes
    ----------
    fabric : Fabric
        The union direct-connect fabric.
    capacity : numpy.ndarray
        ``float64 (S, Lf)``: capacity of every fabric link under each schedule entry.
    epochs : tuple
        ``(start_s, fabric capacity (Lf,), entry index or None)``: from ``start_s``, these
        capacities and (entry given) that entry's paths.
    schedule : Schedule
    hold_s : float
    """

    fabric: Fabric
    capacity: np.ndarray
    epochs: tuple
    schedule: Schedule
    hold_s: float
    _routes: dict = field(default_factory=dict, repr=False)

    def routes(self, k: int, pairs: np.ndarray) -> PathSet:
        """Routes of entry ``k``'s set for server ``pairs`` (``(K, 2)``), on union link ids."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        cs = self.schedule.sets[k]
        key = (cs.circuits.key, id(cs.routing), pairs.tobytes())
        if key in self._routes:
            return self._routes[key]
        fab = self.fabric
        n_nodes = fab.n_nodes
        parts = []
        covered = np.zeros(pairs.shape[0], bool)
        if cs.routing is not None and cs.routing.n_commodities:
            ps = cs.routing.to_pathset(fab.src, fab.dst, n_nodes)
            idx = ps.index(pairs[:, 0], pairs[:, 1], n_nodes)
            covered = idx >= 0
            if covered.any():
                parts.append(ps.take(idx[covered]))
        missing = pairs[~covered]
        if missing.size:
            from topoopt.fabrics.routing import routes

            n = fab.n_servers
            c = cs.circuits.rows
            own = direct_connect(n, max(1, int(cs.ports(n).max())), c, 1.0)
            refused = None
            try:
                ps = routes(own, "ecmp", pairs=missing, k=ECMP_MAX_PATHS, seed=0)
                bad = np.diff(ps.commodity_ptr) == 0
            except InputError as e:  # no path at all for some pair, or a routing limit
                ps, bad, refused = None, np.ones(missing.shape[0], bool), e
            if bad.any():
                reach = csgraph.connected_components(
                    csr_matrix(
                        (np.ones(c.shape[0]), (c[:, 0], c[:, 1])),
                        shape=(n, n),
                    ),
                    directed=False,
                )[1]
                far = np.flatnonzero(reach[missing[:, 0]] != reach[missing[:, 1]])
                if refused is not None and not far.size:  # connected: the routing's own limit
                    raise refused
                u, v = missing[int(far[0]) if far.size else int(np.flatnonzero(bad)[0])]
                raise InputError(
                    f"schedule entry {k} ({self.schedule.phases[k]})",
                    f"servers {int(u)} and {int(v)} unconnected",
                    "circuit sets that connect every pair that communicates",
                )
            to_union = link_lookup(fab.src, fab.dst, n_nodes)(own.src, own.dst)
            parts.append(replace(ps, path_links=to_union[ps.path_links]))
        out = PathSet.concat(parts)
        self._routes[key] = out
        return out


def realise_schedule(
    schedule: Schedule,
    servers: int,
    link_bandwidth: float,
    hold_s: float,
    *,
    gpus_per_server: int = 1,
    all_dark: bool = False,
) -> RealisedSchedule:
    """The union fabric and capacity/path epochs of ``schedule`` (module docstring).

    Parameters
    ----------
    schedule : Schedule
    servers : int
    link_bandwidth : float
        Bytes/s of one circuit, each direction.
    hold_s : float
        Dark time of every reconfiguration, seconds (``>= 0``).
    gpus_per_server : int
    all_dark : bool
        Every fabric link carries nothing during a reconfiguration (not only the changed ones).

    Raises
    ------
    InputError
        A negative or non-finite ``hold_s``; a reconfiguration starting before the previous
        one has ended; a circuit on a server out of range.

    Examples
    --------
    Two servers, one circuit, then two (from 1 s, dark 0.5 s): the pair's link has ``B``, then
    ``B`` while one circuit is added (the existing one stays), then ``2 B``.

    >>> a, b = CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])
    >>> r = realise_schedule(Schedule((a, b), (0.0, 1.0)), 2, 10.0, 0.5)
    >>> [(t, cap.tolist(), k) for t, cap, k in r.epochs]
    [(0.0, [10.0, 10.0], 0), (1.0, [10.0, 10.0], None), (1.5, [20.0, 20.0], 1)]
    """
    h = float(hold_s)
    if not (np.isfinite(h) and h >= 0):
        raise InputError("delay", hold_s, "a finite number of seconds >= 0")
    n = int(servers)
    union = np.zeros((n, n), np.int64)
    for cs in schedule.sets:
        c = cs.circuits.rows
        if c.size and c[:, 1].max() >= n:
            raise InputError("schedule.circuits", int(c[:, 1].max()), f"server ids 0..{n - 1}")
        np.maximum.at(union, (c[:, 0], c[:, 1]), c[:, 2])
    iu, iv = np.nonzero(union)
    rows = np.column_stack([iu, iv, union[iu, iv]])
    deg = np.bincount(iu, union[iu, iv], n) + np.bincount(iv, union[iu, iv], n)
    fabric = direct_connect(
        n,
        max(1, int(deg.max())),
        rows,
        link_bandwidth,
        device="ocs",
        gpus_per_server=gpus_per_server,
    )
    src, dst = fabric.src, fabric.dst
    lo, hi = np.minimum(src, dst), np.maximum(src, dst)
    caps = np.zeros((len(schedule.sets), fabric.n_links))
    for k, cs in enumerate(schedule.sets):
        m = np.zeros((n, n), np.int64)
        c = cs.circuits.rows
        m[c[:, 0], c[:, 1]] = c[:, 2]
        caps[k] = m[lo, hi] * float(link_bandwidth)
    return RealisedSchedule(fabric, caps, schedule_epochs(schedule, caps, h, all_dark), schedule, h)


def schedule_epochs(schedule: Schedule, caps: np.ndarray, hold_s: float, all_dark: bool = False):
    """The ``(start_s, capacities, entry or None)`` epochs of ``schedule`` whose entry ``k``
    gives the links ``caps[k]`` (module docstring: a dark epoch keeps ``min`` of both sets, or
    nothing with ``all_dark``, and the previous paths).

    >>> a, b = CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])
    >>> schedule_epochs(Schedule((a, b), (0.0, 1.0)), np.array([[1.0], [2.0]]), 0.5)
    ((0.0, array([1.]), 0), (1.0, array([1.]), None), (1.5, array([2.]), 1))
    """
    h = float(hold_s)
    entries: list[list] = [[0.0, caps[0], 0]]
    prev = 0
    last_end = 0.0
    for k in schedule.changes():
        t = schedule.starts[k]
        if t < last_end:
            raise InputError(
                f"schedule.starts[{k}]",
                t,
                f"after the previous reconfiguration ends ({last_end:.9g} s)",
            )
        if h > 0:
            dark = np.zeros_like(caps[k]) if all_dark else np.minimum(caps[prev], caps[k])
            if entries[-1][0] == t:  # the previous set's live period is empty
                entries[-1] = [t, np.minimum(dark, entries[-1][1]), entries[-1][2]]
            else:
                entries.append([t, dark, None])
            entries.append([t + h, caps[k], k])
        else:
            if entries[-1][0] == t:
                entries[-1] = [t, caps[k], k]
            else:
                entries.append([t, caps[k], k])
        last_end = t + h
        prev = k
    return tuple((float(t), c, v) for t, c, v in entries)


@dataclass(frozen=True, eq=False)
class ScheduleRun:
    """One iteration under a schedule (seconds).

    Attributes
    ----------
    iteration_s : float
        ``max(makespan, t_net + hold)`` when the schedule wraps back to its first set, else the
        makespan (module docstring).
    makespan_s : float
    net_finish_s : float
        When the last fabric flow ends (``t_net``).
    reconfigurations : int
    hold_s : float
        Dark time of each reconfiguration.
    result : IterationResult
    flows : dict
        The fabric flows of the run: ``src``, ``dst`` (servers), ``bytes``, ``start``,
        ``finish`` (one entry per flow).
    """

    iteration_s: float
    makespan_s: float
    net_finish_s: float
    reconfigurations: int
    hold_s: float
    result: object
    flows: dict


class _PastHorizon(Exception):
    """A run cut at its horizon (:func:`iteration_under_schedule`)."""


@dataclass
class SharedPrefix:
    """Bytes left at the first reconfiguration, shared by the schedules of one first set.

    Schedules whose first set is the same run the same simulation until the first of them
    reconfigures. A run of such a schedule takes the bytes every path has left at the first
    reconfiguration times ``wanted[label]`` (of the schedules whose first set has that label)
    up to its own (:func:`~topoopt.flowsim.timevarying.simulate_epochs` ``left_at``); a later
    schedule of that set reconfiguring at one of them is then cut without simulating its prefix
    when :func:`prefix_bound` proves it ends past its horizon (``pruned`` counts them).
    ``rest_cut`` counts the runs found past their horizon with the rest after their last epoch
    simulated by the static engine (:data:`REST_PATHS_PER_FLOW`).

    Attributes
    ----------
    wanted : dict
        First set's label -> first reconfiguration times (seconds) of its schedules.
    taken : dict
        ``(label, time)`` -> ``(sizes, multiplicity, flow_ptr, left)`` of the run that took it:
        the flow classes' sizes and multiplicities and the first set's paths per class (a
        later run must have the same), and the bytes left per path.
    pruned : int
    rest_cut : int
    template : FlowTemplate, optional
        The flow classes of the first run built (:class:`FlowTemplate`): a later schedule whose
        first reconfiguration was taken is tried against :func:`prefix_bound` with them before
        its iteration is built (:func:`iteration_under_schedule`).
    loose : set
        The keys of ``taken`` whose bytes left are lower bounds from the static engine's run
        of the first set (:data:`LOOSE_PATHS_PER_FLOW`,
        :func:`~topoopt.flowsim.timevarying.unreleased_left`), not a run's own figures: a run
        that reaches such a time takes its exact bytes left in their place.
    loose_cut : int
        Runs cut by :func:`prefix_bound` from such lower bounds (counted in ``pruned`` too).
    """

    wanted: dict
    taken: dict = field(default_factory=dict)
    pruned: int = 0
    rest_cut: int = 0
    template: FlowTemplate | None = None
    loose: set = field(default_factory=set)
    loose_cut: int = 0


@dataclass(frozen=True, eq=False)
class FlowTemplate:
    """The flow classes of one schedule's iteration, for the other schedules of a search.

    An iteration's flows do not depend on the circuits: server-pair flows are routed per epoch
    by :func:`schedule_flowset` (the FlowSet's own paths, on the union fabric it was built on,
    are never used), and every other flow runs on one link past the fabric's (intra-server,
    null and device links, numbered from the fabric's link count on, the same in every union).
    So the flows built on one union fabric of ``n_fabric`` links are those of any other with
    these links' ids shifted by the difference of link counts (:func:`template_flowset`), but
    for the server-pair flows' own paths, which no epoch uses: the epochs are the same arrays,
    and :func:`prefix_bound` gets the same figures from them without building the iteration
    (what the shared prefix's cuts cost: building the task graph's flows and their classes).

    Attributes
    ----------
    flows : FlowSet
        The flow classes (:meth:`~topoopt.flowsim.network.FlowBuilder.build_classes`).
    class_of : ndarray
        Class of every builder flow.
    link, src, dst : ndarray
        Per class, its representative's link (``-1``: a server-pair flow) and servers.
    n_fabric : int
        Links of the fabric they were built on.
    key : tuple
        What else the flows depend on: the workload (its ``id``) and the gradient buckets'
        cap of the iteration (:func:`iteration_under_schedule` uses a template of its own key
        only).
    """

    flows: object
    class_of: np.ndarray
    link: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    n_fabric: int
    key: tuple = ()


@dataclass
class ScheduleReductions:
    """The symmetry quotients of a search's time-varying runs (:class:`_Hook`), shared by them.

    The last run of a schedule's iteration (after the shared prefix's and the late cut's
    checks, which stay plain) goes through the exact symmetry quotient of its flow classes
    under every epoch (:func:`topoopt.flowsim.epochs_reduction.reduce_grouped`: one partition
    for every circuit set's routes, found on the server pairs' routes, checked exactly), the
    bytes left it takes for :class:`SharedPrefix` expanded from the quotient's paths
    (:func:`~topoopt.flowsim.epochs_reduction.expand_left`); where the partition is off the
    run is the plain one. The partition depends only on the flows (the workload and its
    bucket cap) and each epoch's capacities and routes, not on the times, so a run whose
    epochs gave a partition off (or hardly smaller, :data:`REDUCE_WORTH`) before skips the
    refinement (``verdicts``) and is simulated plain.

    Attributes
    ----------
    verdicts : dict
        The epochs' signature (:meth:`_Hook._signature`) -> ``False`` for a partition found
        off, or on with more than :data:`REDUCE_WORTH` of the sub-flows (a quotient worth it
        is built for each run).
    runs : list of dict
        Per run that reached its last simulation: ``status`` (``on``, ``off``, ``screened``:
        not refined, :func:`_not_worth`; ``skipped``: a verdict for the same epochs reused),
        the flow classes and their sub-flows (summed over the schedule's routing tables), and
        for ``on`` the quotient's flow classes and sub-flows (the same way).
    """

    verdicts: dict = field(default_factory=dict)
    runs: list = field(default_factory=list)

    def summary(self) -> dict:
        """Counts of :attr:`runs`: ``runs``, ``reduced``, ``off``, ``screened``, ``skipped``
        and, over the reduced runs, the flow classes and sub-flows before and after."""
        on = [r for r in self.runs if r["status"] == "on"]
        return {
            "runs": len(self.runs),
            "reduced": len(on),
            "off": sum(r["status"] == "off" for r in self.runs),
            "screened": sum(r["status"] == "screened" for r in self.runs),
            "skipped": sum(r["status"] == "skipped" for r in self.runs),
            "flow_classes": sum(r["flow_classes"] for r in on),
            "quotient_flow_classes": sum(r["quotient_flow_classes"] for r in on),
            "subflows": sum(r["subflows"] for r in on),
            "quotient_subflows": sum(r["quotient_subflows"] for r in on),
        }


REDUCE_WORTH = 0.5
"""A quotient with more than this fraction of the flow classes' sub-flows (summed over the
routing tables) is used for the run that found it (it is exact) but not refined again for the
same epochs (:class:`ScheduleReductions`): its run costs about the plain one's, and the
refinement (0.3-0.5 s of CPU on GPT-3 175B's 317,214 flow classes at 128 servers) comes on
top. GPT-3 175B's per-phase sets give 0.85 (1.07 M of 1.27 M sub-flows over four runs). The
same fraction screens runs before any refinement (:func:`_not_worth`): DLRM on 256 servers x
8 ports, a class per server pair or so, refined its 2.2 M group paths for a quotient of 0.99
(+0.5 GB peak, +15 % CPU)."""

REST_PATHS_PER_FLOW = 2.0
"""A run with a horizon whose last epoch has at least this many paths per flow class is first
decided by :func:`~topoopt.flowsim.timevarying.past_horizon_after_epochs` (the rest after the
last epoch in the static engine; a run it proves past the horizon is cut there, any other is
then simulated as always). Sets routed over many paths per pair (``joint``'s per-phase sets:
6.9 per flow class on GPT-3 175B) make the events and re-fills of the time-varying engine;
single-path sets (1.0) gain nothing from the detour."""

LOOSE_PATHS_PER_FLOW = 2.0
"""A run with a horizon whose first set has at least this many paths per flow class, and whose
first reconfiguration times (:class:`SharedPrefix`) are not yet taken, first gets lower bounds
of the bytes left then from the static engine's run of that set alone
(:func:`~topoopt.flowsim.timevarying.unreleased_left`: a flow not yet released has all its
bytes left, any other 0), and is cut when :func:`prefix_bound` proves it past its horizon with
them; otherwise it is simulated as always (and takes the exact bytes left). ``joint``'s
per-phase set of the 1F1B phase (3.5 paths per server pair on GPT-3 175B) costs 40 s of CPU
in the time-varying engine up to the reconfiguration; the static engine's run a fraction."""

PREFIX_MARGIN = 1e-7
"""Relative margin of :func:`prefix_bound`'s cut, over the rounding of the two runs whose
states it equates (besides ``rtol`` per piece, as the late cut)."""


def prefix_bound(flows, epochs, taken, rtol: float = 1e-12) -> tuple[float, int]:
    """A lower bound on the last byte of a schedule's run from the bytes left at its first
    reconfiguration, taken in another run of the same first set (:class:`SharedPrefix`).

    ``epochs`` are the schedule's (:func:`schedule_flowset`): the first set's from ``0``, the
    first reconfiguration at ``t1`` (possibly dark epochs without paths, then the last epoch,
    with paths, at ``tx``); ``None`` for any other shape or flows that are not the ones
    taken. A path ``p`` with ``left_p`` bytes at ``t1`` sends at most ``d * min`` capacity of
    its links in a dark epoch of length ``d``; what its flow has left at ``tx`` is then at
    least the sum over its paths of ``max(0, left_p - that)``, and goes over the last epoch's
    paths by their weights, with the flows' multiplicities: ``tx + max over links of load /
    capacity`` (``inf`` for load on a link of capacity 0). Returns ``(bound, pieces)``,
    ``pieces`` the last epoch's paths with bytes (each may end ``rtol`` early).
    """
    sizes, mult, fptr, left = taken
    if (
        len(epochs) < 2
        or epochs[0].start_s != 0.0
        or epochs[0].paths is None
        or epochs[-1].paths is None
        or any(e.paths is not None for e in epochs[1:-1])
        or not np.array_equal(flows.size, sizes)
        or not np.array_equal(flows.multiplicity, mult)
        or not np.array_equal(epochs[0].paths.flow_ptr, fptr)
    ):
        return None, 0
    first = epochs[0].paths
    rest = left.copy()
    lens = np.diff(first.path_ptr)
    for e, nxt in zip(epochs[1:-1], epochs[2:], strict=True):  # dark epochs
        d = nxt.start_s - e.start_s
        bn = np.minimum.reduceat(e.capacity[first.path_links], first.path_ptr[:-1])
        rest -= d * np.where(lens > 0, bn, 0.0)
    np.maximum(rest, 0.0, out=rest)
    n_f = flows.n_flows
    per_flow = np.add.reduceat(rest, fptr[:-1]) if rest.size else np.zeros(n_f)
    per_flow = np.where(np.diff(fptr) > 0, per_flow, 0.0) * flows.multiplicity
    last = epochs[-1]
    lp = last.paths
    on_path = np.repeat(per_flow, np.diff(lp.flow_ptr)) * lp.weight
    load = np.bincount(
        lp.path_links, weights=np.repeat(on_path, np.diff(lp.path_ptr)),
        minlength=last.capacity.shape[0],
    )  # fmt: skip
    busy = load > 0
    if np.any(busy & (last.capacity <= 0)):
        return np.inf, int(np.count_nonzero(on_path > 0))
    worst = float(np.max(load[busy] / last.capacity[busy], initial=0.0))
    return last.start_s + worst, int(np.count_nonzero(on_path > 0))


def _prefix_cut(p: SharedPrefix | None, hz, label, flows, epochs) -> bool:
    """Whether :func:`prefix_bound` from the bytes ``p`` took at this run's first
    reconfiguration proves the run past its horizon ``hz`` (the margin: ``rtol`` per piece and
    :data:`PREFIX_MARGIN`)."""
    t1 = epochs[1].start_s if len(epochs) > 1 else np.inf
    if p is None or hz is None or (label, t1) not in p.taken:
        return False
    b, pieces = prefix_bound(flows, epochs, p.taken[(label, t1)])
    return b is not None and b > hz + hz * (pieces * 1e-12 + PREFIX_MARGIN)


class _Hook:
    """The ``simulator`` of :func:`simulate_iteration`: epochs or plain, recording fabric flows."""

    def __init__(
        self,
        realised: RealisedSchedule | None,
        horizon: float | None = None,
        prefix: SharedPrefix | None = None,
        key: tuple = (),
        reductions: ScheduleReductions | None = None,
    ):
        self.realised = realised
        self.horizon = horizon
        self.prefix = prefix
        self.key = key
        self.quotients = reductions
        self.flows: dict | None = None

    def _epochs_run(self, fb, limit):
        from topoopt.flowsim.simulator import expand_classes
        from topoopt.flowsim.timevarying import past_horizon_after_epochs, simulate_epochs

        r, p, hz = self.realised, self.prefix, self.horizon
        flows, class_of, epochs, template = _schedule_flowset(fb, r)
        if p is not None and p.template is None:
            p.template = replace(template, key=self.key)
        label = r.schedule.sets[0].label
        t1 = epochs[1].start_s if len(epochs) > 1 else np.inf
        if _prefix_cut(p, hz, label, flows, epochs):
            p.pruned += 1
            raise _PastHorizon
        times = []
        if p is not None and epochs[0].paths is not None:
            # the times not taken yet, or taken as lower bounds only (the run takes them)
            times = [x for x in p.wanted.get(label, ()) if x <= t1 and
                     ((label, x) not in p.taken or (label, x) in p.loose)]  # fmt: skip
            fresh = [x for x in times if (label, x) not in p.taken]
            if (
                hz is not None
                and fresh
                and len(epochs) > 1
                and epochs[0].paths.weight.shape[0] >= LOOSE_PATHS_PER_FLOW * flows.n_flows
            ):
                self._take_loose(fresh, label, flows, epochs, limit)
                if _prefix_cut(p, hz, label, flows, epochs):
                    p.pruned += 1
                    p.loose_cut += 1
                    raise _PastHorizon
        if (
            hz is not None
            and len(epochs) > 1
            and epochs[-1].paths is not None
            and epochs[-1].paths.weight.shape[0] >= REST_PATHS_PER_FLOW * flows.n_flows
        ):
            v = past_horizon_after_epochs(
                flows, epochs, hz, max_refills=limit, left_at=times or None
            )
            if v.left is not None:
                self._take(v.left, label, flows, epochs)
                times = [x for x in times if (label, x) not in p.taken or (label, x) in p.loose]
            if v.past:
                if p is not None and v.by == "rest":
                    p.rest_cut += 1
                raise _PastHorizon
        kw = dict(max_refills=limit, record_series=False, horizon=hz, late_cut=True)
        reduced = self._reduced(fb, flows, class_of, epochs, template)
        if reduced is not None:
            from topoopt.flowsim.epochs_reduction import simulate_grouped_reduced

            gf, g_epochs, red = reduced
            out = simulate_grouped_reduced(gf, red, g_epochs, left_at=times or None, **kw)
            res, left = out if times else (out, None)
            if left is not None:
                self._take(left, label, flows, epochs)
            return expand_classes(res, flows, class_of, paths=False)
        if not times:
            return expand_classes(simulate_epochs(flows, epochs, **kw), flows, class_of)
        res, left = simulate_epochs(flows, epochs, left_at=times, **kw)
        self._take(left, label, flows, epochs)
        return expand_classes(res, flows, class_of)

    def _signature(self, epochs) -> tuple:
        """What the quotient of this run depends on besides the builder's flows: the flows'
        key, the schedule's circuit sets (its union's links) and every epoch's capacities and
        routes (:class:`ScheduleReductions`)."""
        sets = self.realised.schedule.sets
        routes = tuple((cs.circuits.key, id(cs.routing)) for cs in sets)
        return (self.key, routes,
                tuple((e.capacity.tobytes(), v) for e, (_, _, v) in
                      zip(epochs, self.realised.epochs, strict=True)))  # fmt: skip

    def _reduced(self, fb, flows, class_of, epochs, template):
        """``(grouped flows, their epochs, quotient)`` of this run's flow classes
        (:class:`ScheduleReductions`), or ``None`` for the plain run: no record, classes that
        are not their groups', a run not worth refining (:func:`_not_worth`), a partition off
        (or not worth it before for the same signature)."""
        from topoopt.flowsim.epochs_reduction import reduce_grouped
        from topoopt.flowsim.subflow_guard import check_subflows

        rec = self.quotients
        if rec is None:
            return None
        tables = {id(e.paths): e.paths for e in epochs if e.paths is not None}.values()
        row = {"flow_classes": flows.n_flows,
               "subflows": sum(int(p.weight.shape[0]) for p in tables)}  # fmt: skip
        sig = self._signature(epochs)
        if sig in rec.verdicts:  # off, or not worth it, for these epochs before
            rec.runs.append({"status": "skipped", **row})
            return None
        got = grouped_epochs(template, flows, epochs, self.realised.fabric.n_nodes)
        if got is not None and _not_worth(got[0], row["subflows"]):
            rec.verdicts[sig] = False
            rec.runs.append({"status": "screened", **row})
            return None
        red = None if got is None else reduce_grouped(*got)
        if red is None or red.flows is None:
            rec.verdicts[sig] = False
            rec.runs.append({"status": "off", **row})
            return None
        q_sub = int(red.info["quotient_paths"])
        if q_sub > REDUCE_WORTH * row["subflows"]:
            rec.verdicts[sig] = False  # exact, used now; not refined again for this signature
        rec.runs.append({"status": "on", **row, "quotient_flow_classes": red.flows.n_flows,
                         "quotient_subflows": q_sub})  # fmt: skip
        check_subflows(class_of.size, int(red.info["quotient_paths"]), reduced=True)
        return (*got, red)

    def _take(self, left, label, flows, epochs, loose: bool = False):
        """Share the bytes left at the times a run took (:class:`SharedPrefix`); ``loose``:
        lower bounds, which a run's own figures replace."""
        p = self.prefix
        for x, ok, v, arr in zip(left.times, left.ok, left.version, left.left, strict=True):
            if ok and v == 1:  # the first set's paths (version 0: the FlowSet's own)
                fptr = epochs[0].paths.flow_ptr
                key = (label, float(x))
                p.taken[key] = (flows.size, flows.multiplicity, fptr, arr)
                if loose:
                    p.loose.add(key)
                else:
                    p.loose.discard(key)

    def _take_loose(self, times, label, flows, epochs, limit):
        """Lower bounds of the bytes left at ``times`` from the static engine's run of the
        first set (:data:`LOOSE_PATHS_PER_FLOW`)."""
        from topoopt.flowsim.timevarying import unreleased_left

        got = unreleased_left(flows, epochs, times, max_refills=limit)
        if got is not None:
            self._take(got, label, flows, epochs, loose=True)

    def __call__(self, fb, limit):
        from topoopt.flowsim.network import simulate_builder

        # no flow on the fabric (the compute-only run): the circuits, their dark times and
        # routes change nothing, so the plain run (the epochs engine had no pair to route)
        off_fabric = self.realised is not None and not np.any(
            fb.arrays()["link"] < self.realised.fabric.n_links
        )
        if self.realised is None or off_fabric:
            sim = simulate_builder(fb, aggregate=True, record_series=False, max_refills=limit)
        else:
            sim = self._epochs_run(fb, limit)
            if self.horizon is not None and not np.all(np.isfinite(sim.finish)):
                raise _PastHorizon
        if self.flows is None:
            a = fb.arrays()
            pair = a["link"] < 0
            self.flows = {
                "src": a["src"][pair],
                "dst": a["dst"][pair],
                "bytes": a["size"][pair],
                "start": np.asarray(sim.start)[pair],
                "finish": np.asarray(sim.finish)[pair],
            }
        return sim


def simulate_schedule(
    builder,
    realised: RealisedSchedule,
    *,
    max_refills: int | None = None,
    max_path_links: int = MAX_PATH_LINKS,
    horizon: float | None = None,
    late_cut: bool = False,
):
    """Simulate a :class:`~topoopt.flowsim.network.FlowBuilder`'s flows under a realised schedule.

    The builder's network must be ``realised.fabric``. Identical flows are simulated as classes
    (:meth:`~topoopt.flowsim.network.FlowBuilder.build_classes`), every epoch's paths built for
    the classes' server pairs, and the result expanded back to every builder flow. A path table
    of more than ``max_path_links`` entries (every class's path links, summed over the path
    versions) is refused (:class:`~traffic.errors.InputError`) before it is built. No event
    after ``horizon`` is simulated, and with ``late_cut`` none after some flow provably ends
    past it (:func:`~topoopt.flowsim.timevarying.simulate_epochs`).

    Examples
    --------
    One flow of 30 bytes on a pair whose single circuit (10 B/s) gets a second one at 1 s, dark
    0.5 s (the first circuit stays): 15 bytes by 1.5 s, then 20 B/s: done at 2.25 s.

    >>> from topoopt.flowsim.network import FlowBuilder, Network
    >>> a, b = CircuitSet([[0, 1, 1]]), CircuitSet([[0, 1, 2]])
    >>> r = realise_schedule(Schedule((a, b), (0.0, 1.0)), 2, 10.0, 0.5)
    >>> fb = FlowBuilder(Network(r.fabric, intra_bandwidth=1e9))
    >>> ids = fb.add_ranks([0], [1], [30.0])
    >>> float(simulate_schedule(fb, r).finish[0] - r.fabric.latency.max())
    2.25
    """
    from topoopt.flowsim.simulator import expand_classes
    from topoopt.flowsim.timevarying import simulate_epochs

    flows, class_of, epochs = schedule_flowset(builder, realised, max_path_links)
    res = simulate_epochs(
        flows, epochs, max_refills=max_refills, record_series=False, horizon=horizon,
        late_cut=late_cut,
    )  # fmt: skip
    return expand_classes(res, flows, class_of)


def schedule_flowset(builder, realised: RealisedSchedule, max_path_links: int = MAX_PATH_LINKS):
    """``(flows, class_of, epochs)``: the flow classes of a builder and the epochs of a realised
    schedule, as :func:`simulate_schedule` simulates them."""
    return _schedule_flowset(builder, realised, max_path_links)[:3]


def _schedule_flowset(builder, realised: RealisedSchedule, max_path_links: int = MAX_PATH_LINKS):
    """:func:`schedule_flowset` and the :class:`FlowTemplate` of its classes."""
    from topoopt.flowsim.flowset import class_representatives

    r = realised
    fb = builder
    if fb.net.fabric is not r.fabric:
        raise InputError("builder", "a network on another fabric", "the schedule's union fabric")
    flows, class_of = fb.build_classes()
    a = fb.arrays()
    rep = class_representatives(class_of, flows.n_flows)
    t = FlowTemplate(flows, class_of, a["link"][rep], a["src"][rep], a["dst"][rep],
                     r.fabric.n_links)  # fmt: skip
    return flows, class_of, _epochs_of(t, flows, r, max_path_links), t


def template_flowset(template: FlowTemplate, realised: RealisedSchedule,
                     max_path_links: int = MAX_PATH_LINKS):  # fmt: skip
    """``(flows, epochs)`` of :func:`schedule_flowset` for the iteration whose flow classes
    ``template`` holds, on ``realised``'s union fabric (:class:`FlowTemplate`); ``None`` when a
    flow of the template runs on a fabric link of its own (then the flows depend on the
    fabric)."""
    t = template
    f = t.flows
    n_fab = realised.fabric.n_links
    pair = t.link < 0
    if np.any(t.link[~pair] < t.n_fabric):
        return None
    own = {}
    if n_fab != t.n_fabric:
        own = _own_paths_moved(f, pair, t.n_fabric, n_fab)
        if own is None:
            return None
    fab = realised.fabric  # this union's links, then the template's others
    cap = np.concatenate([fab.capacity, f.capacity[t.n_fabric :]])
    lat = np.concatenate([fab.latency, f.latency[t.n_fabric :]])
    f = replace(f, capacity=cap, latency=lat, **own)
    return f, _epochs_of(t, f, realised, max_path_links)


def _not_worth(gf, subflows: int) -> bool:
    """Whether a run's refinement is skipped (:class:`ScheduleReductions`): the groups' paths
    (what the refinement works on) are more than :data:`REDUCE_WORTH` of the classes'
    ``subflows`` (a class per server pair or so: the refinement would cost about the run, and
    hold a second copy of its tables), or their route profiles (:func:`route_profiles`) more
    than :data:`REDUCE_WORTH` of the groups."""
    n_g = gf.versions[0].flow_ptr.shape[0] - 1
    g_paths = sum(int(v.weight.shape[0]) for v in gf.versions)
    return g_paths > REDUCE_WORTH * subflows or route_profiles(gf) > REDUCE_WORTH * n_g


def route_profiles(gf) -> int:
    """How many route profiles the groups of ``gf`` (a :class:`~topoopt.flowsim.
    epochs_reduction.GroupedFlows`) have: per routing table, the paths of a group and their
    links in all. Groups of one class of an equitable partition have the same profile (as many
    paths of each path class, whose members have the same length), so the quotient has at
    least this many group classes (:class:`ScheduleReductions` skips the refinement when they
    are more than :data:`REDUCE_WORTH` of the groups).

    >>> from topoopt.flowsim.timevarying import EpochPaths
    >>> from types import SimpleNamespace
    >>> t = EpochPaths([0, 1, 2, 4], [0, 1, 2, 4, 6], [0, 1, 2, 3, 4, 5], np.ones(4))
    >>> route_profiles(SimpleNamespace(versions=[t]))  # 1 path of 1 link twice, 2 of 2 once
    2
    """
    cols = []
    for v in gf.versions:
        per_path = np.diff(v.path_ptr)
        n_p = np.diff(v.flow_ptr)
        cols += [n_p, np.add.reduceat(per_path, v.flow_ptr[:-1]) if n_p.size else n_p]
    return int(np.unique(np.stack(cols, axis=1), axis=0).shape[0])


def grouped_epochs(template: FlowTemplate, flows, epochs, n_nodes: int):
    """The flow classes of :func:`schedule_flowset` grouped by route for
    :func:`topoopt.flowsim.epochs_reduction.reduce_grouped`: ``(grouped, epochs)``, every
    class in the group of its server pair (or of its link), every distinct epoch table's rows
    once per group (its representative class's), the epochs with their table's index. The
    classes' paths in every table are then their group's, in order (:func:`_epochs_of` routes
    a class by its server pair; a link class has the one path of its link), so a run of the
    groups keeps the classes' path layout (the bytes left of
    :func:`~topoopt.flowsim.epochs_reduction.expand_left`). ``None`` when the first epoch
    does not start at 0 with paths or a class's paths are not its group's (checked: the
    number of paths of every class, the one link of every link class).
    """
    from topoopt.flowsim.epochs_reduction import GroupedFlows
    from topoopt.flowsim.flowset import class_representatives
    from topoopt.flowsim.timevarying import Epoch, EpochPaths

    t = template
    if not epochs or epochs[0].start_s != 0.0 or epochs[0].paths is None or not flows.n_flows:
        return None
    is_link = t.link >= 0
    key = np.where(is_link, t.link, flows.n_links + t.src * n_nodes + t.dst)
    _, group = np.unique(key, return_inverse=True)
    group = group.reshape(-1).astype(np.int64)
    n_g = int(group.max()) + 1
    rep = class_representatives(group, n_g)
    tables, index, out = [], {}, []
    for e in epochs:
        v = None
        if e.paths is not None:
            v = index.get(id(e.paths))
        if e.paths is not None and v is None:
            ps = e.paths
            cnt = np.diff(ps.flow_ptr)
            if not np.array_equal(cnt, cnt[rep][group]):
                return None
            first = ps.flow_ptr[:-1][is_link]
            lens = np.diff(ps.path_ptr)
            if (
                np.any(cnt[is_link] != 1)
                or np.any(lens[first] != 1)
                or not np.array_equal(ps.path_links[ps.path_ptr[first]], t.link[is_link])
            ):
                return None
            ids = _ranges(ps.flow_ptr[rep], ps.flow_ptr[rep + 1])
            fptr = np.zeros(n_g + 1, np.int64)
            np.cumsum(cnt[rep], out=fptr[1:])
            pptr = np.zeros(ids.shape[0] + 1, np.int64)
            np.cumsum(lens[ids], out=pptr[1:])
            links = ps.path_links[_ranges(ps.path_ptr[ids], ps.path_ptr[ids + 1])]
            tables.append(EpochPaths(fptr, pptr, links, ps.weight[ids]))
            v = index[id(e.paths)] = len(tables) - 1
        out.append(Epoch(e.start_s, e.capacity, v))
    gf = GroupedFlows(
        capacity=flows.capacity, latency=flows.latency, size=flows.size, start=flows.start,
        multiplicity=flows.multiplicity, dep_ptr=flows.dep_ptr, deps=flows.deps, group=group,
        versions=tables,
    )  # fmt: skip
    return gf, out


def _own_paths_moved(f, pair: np.ndarray, n_from: int, n_to: int) -> dict | None:
    """The own paths of ``f`` (``flow_ptr``, ``path_ptr``, ``path_links``, ``weight``) moved
    from a union fabric of ``n_from`` links to one of ``n_to`` (:func:`template_flowset`): the
    links past the fabric's shifted, and every server-pair flow's own paths, which no epoch
    uses (every epoch routes them), replaced by one path over link 0 (a smaller union may not
    have the template's links, and their ids taken modulo its link count can repeat a link in
    a path: GPT-3 175B on 128 servers, degree 8). ``None`` without a fabric link."""
    if n_to == 0 and pair.any():
        return None
    fp, pp = f.flow_ptr, f.path_ptr
    n_p = np.where(pair, 1, np.diff(fp))
    fptr = np.zeros(pair.shape[0] + 1, np.int64)
    np.cumsum(n_p, out=fptr[1:])
    keep = ~pair
    old = _ranges(fp[:-1][keep], fp[1:][keep])  # the link flows' paths, kept in order
    pos = _ranges(fptr[:-1][keep], fptr[1:][keep])
    lens = np.ones(int(fptr[-1]), np.int64)
    lens[pos] = np.diff(pp)[old]
    pptr = np.zeros(lens.shape[0] + 1, np.int64)
    np.cumsum(lens, out=pptr[1:])
    links = np.zeros(int(pptr[-1]), np.int64)  # the pair flows' one path: link 0
    moved = f.path_links[_ranges(pp[old], pp[old + 1])]
    links[_ranges(pptr[pos], pptr[pos + 1])] = np.where(
        moved >= n_from, moved + (n_to - n_from), moved
    )
    w = np.ones(lens.shape[0])
    w[pos] = f.weight[old]
    return {"flow_ptr": fptr, "path_ptr": pptr, "path_links": links, "weight": w}


def _epochs_of(t: FlowTemplate, flows, realised: RealisedSchedule, max_path_links: int):
    """The epochs of ``realised`` for ``flows`` (classes of ``t``; :func:`schedule_flowset`)."""
    from topoopt.flowsim.timevarying import Epoch, EpochPaths

    r = realised
    n_c = flows.n_flows
    is_pair = t.link < 0
    src, dst = t.src[is_pair], t.dst[is_pair]
    n_nodes = r.fabric.n_nodes
    keys = np.unique(src * n_nodes + dst)
    pairs = np.column_stack([keys // n_nodes, keys % n_nodes])
    # one global path table: the FlowSet's own paths, then each version's routes
    versions = sorted({v for _, _, v in r.epochs if v is not None})
    paths = {}
    own_lo, own_hi = flows.flow_ptr[:-1], flows.flow_ptr[1:]
    pair_ids = np.flatnonzero(is_pair)
    tables = []
    size = 0
    for v in versions:
        ps = r.routes(v, pairs)
        comm = ps.index(src, dst, n_nodes)
        p0 = flows.n_paths
        g_ptr = np.concatenate([flows.path_ptr[:-1], ps.path_ptr + flows.path_ptr[-1]])
        lo, hi = own_lo.copy(), own_hi.copy()
        lo[pair_ids] = p0 + ps.commodity_ptr[comm]
        hi[pair_ids] = p0 + ps.commodity_ptr[comm + 1]
        size += int((g_ptr[hi] - g_ptr[lo]).sum())  # a flow's paths are contiguous
        tables.append((v, ps, g_ptr, lo, hi))
    if size > max_path_links:
        raise InputError(
            "schedule",
            f"{size:,} path-link entries ({n_c:,} flow classes x {len(versions)} path versions)",
            f"at most {max_path_links:,} (the memory of one flow simulation)",
        )
    for v, ps, g_ptr, lo, hi in tables:
        g_links = np.concatenate([flows.path_links, ps.path_links])
        g_w = np.concatenate([flows.weight, ps.weight])
        ids = _ranges(lo, hi)
        fptr = np.zeros(n_c + 1, np.int64)
        np.cumsum(hi - lo, out=fptr[1:])
        lens = g_ptr[ids + 1] - g_ptr[ids]
        pptr = np.zeros(ids.shape[0] + 1, np.int64)
        np.cumsum(lens, out=pptr[1:])
        links = g_links[_ranges(g_ptr[ids], g_ptr[ids + 1])]
        paths[v] = EpochPaths(fptr, pptr, links, g_w[ids])
    n_fab = r.fabric.n_links
    rest = flows.capacity[n_fab:]
    epochs = [
        Epoch(t0, np.concatenate([cap, rest]), None if v is None else paths[v])
        for t0, cap, v in r.epochs
    ]
    return epochs


def _flow_classes(builder, realised: RealisedSchedule):
    """What :func:`class_epochs` and :func:`class_groups` share: the builder's flows in classes
    of identical flows (same route key, size and dependency classes), or ``None`` when the
    schedule's first epoch has no paths. Returns ``(realised, arrays, capacity, latency, n_cap,
    n_nodes, pair_keys, route, n_flows, class_of, n_classes, representatives, dep_ptr, deps)``;
    a route is a link (``< n_cap``) or ``n_cap +`` the index of its server pair in ``pair_keys``
    (``src * n_nodes + dst``)."""
    r = realised
    if builder.net.fabric is not r.fabric:
        raise InputError("builder", "a network on another fabric", "the schedule's union fabric")
    if not r.epochs or r.epochs[0][0] != 0.0 or r.epochs[0][2] is None:
        return None
    return (r, *_builder_classes(builder, builder.arrays(), r.fabric.n_nodes))


def _builder_classes(builder, a: dict, n_nodes: int) -> tuple:
    """The part of :func:`_flow_classes` that depends on the builder only (its ``arrays`` ``a``
    and network), not on the schedule's tables: ``(arrays, capacity, latency, n_cap, n_nodes,
    pair_keys, route, n_flows, class_of, n_classes, representatives, dep_ptr, deps)``."""
    from topoopt.flowsim.flowset import (
        class_dependencies,
        class_representatives,
        identical_classes,
    )

    fb = builder
    net = fb.net
    cap = net.capacity(fb.n_devices)
    lat = net.latency(fb.n_devices)
    n_cap = cap.shape[0]
    pair = a["link"] < 0
    keys, inv = np.unique(a["src"][pair] * n_nodes + a["dst"][pair], return_inverse=True)
    route = a["link"].copy()
    route[pair] = n_cap + inv.reshape(-1)
    n_f = route.shape[0]
    class_of = identical_classes(route, a["size"], np.zeros(n_f), a["dep_ptr"], a["deps"])
    n_c = int(class_of.max()) + 1 if n_f else 0
    rep = class_representatives(class_of, n_c)
    dep_ptr, deps = class_dependencies(class_of, rep, a["dep_ptr"], a["deps"])
    return a, cap, lat, n_cap, n_nodes, keys, route, n_f, class_of, n_c, rep, dep_ptr, deps


def class_epochs(builder, realised: RealisedSchedule, max_path_links: int = MAX_PATH_LINKS):
    """``(flows, class_of, epochs)`` as :func:`schedule_flowset`, without routing the server
    pairs over the union fabric: every class's own paths are the first epoch's (which starts
    at 0 with paths, before any flow starts: the own paths are never used), so only each path
    version's routes are listed, once per server pair. ``None`` when the schedule's first
    epoch has no paths. A table of more than ``max_path_links`` entries (every class's path
    links, summed over the path versions) is refused before it is built, as by
    :func:`schedule_flowset`, and so are sub-flows over the memory budget
    (:func:`topoopt.flowsim.subflow_guard.check_subflows`: the plain run holds every one). The
    symmetry quotient does not list them (:func:`class_groups`).
    """
    from topoopt.flowsim.subflow_guard import check_subflows
    from topoopt.flowsim.timevarying import Epoch, EpochPaths

    c = _flow_classes(builder, realised)
    if c is None:
        return None
    r, a, cap, lat, n_cap, n_nodes, keys, route, n_f, class_of, n_c, rep, dep_ptr, deps = c
    c_route = route[rep]
    is_pair = c_route >= n_cap
    c_pair = np.where(is_pair, c_route - n_cap, 0)
    pairs = np.column_stack([keys // n_nodes, keys % n_nodes])
    versions = sorted({v for _, _, v in r.epochs if v is not None})
    tables, size, subflows = [], 0, 0
    for v in versions:
        ps = r.routes(v, pairs)
        comm = ps.index(pairs[:, 0], pairs[:, 1], n_nodes)[c_pair]
        lo = np.where(is_pair, ps.commodity_ptr[comm], 0)
        hi = np.where(is_pair, ps.commodity_ptr[comm + 1], 1)
        cum = np.concatenate([[0], np.cumsum(np.diff(ps.path_ptr))])
        size += int(np.where(is_pair, cum[hi] - cum[lo], 1).sum())
        subflows += int((hi - lo).sum())
        tables.append((v, ps, lo, hi))
    if size > max_path_links:
        raise InputError(
            "schedule",
            f"{size:,} path-link entries ({n_c:,} flow classes x {len(versions)} path versions)",
            f"at most {max_path_links:,} (the memory of one flow simulation)",
        )
    check_subflows(n_f, subflows)
    paths = {}
    for v, ps, lo, hi in tables:
        fptr = np.zeros(n_c + 1, np.int64)
        np.cumsum(hi - lo, out=fptr[1:])
        ids = _ranges(lo, hi)
        owner = np.repeat(np.arange(n_c), hi - lo)
        on_pair = is_pair[owner]
        lens = np.where(on_pair, np.diff(ps.path_ptr)[np.where(on_pair, ids, 0)], 1)
        pptr = np.zeros(ids.shape[0] + 1, np.int64)
        np.cumsum(lens, out=pptr[1:])
        links = np.empty(int(pptr[-1]), np.int64)
        pos = _ranges(pptr[:-1][on_pair], pptr[1:][on_pair])
        src_ids = ids[on_pair]
        links[pos] = ps.path_links[_ranges(ps.path_ptr[src_ids], ps.path_ptr[src_ids + 1])]
        links[pptr[:-1][~on_pair]] = c_route[owner[~on_pair]]
        w = np.where(on_pair, ps.weight[np.where(on_pair, ids, 0)], 1.0)
        paths[v] = EpochPaths(fptr, pptr, links, w)
    from topoopt.flowsim.flowset import FlowSet

    own = paths[r.epochs[0][2]]
    flows = FlowSet(
        capacity=cap, latency=lat, size=a["size"][rep], start=np.zeros(n_c),
        flow_ptr=own.flow_ptr, path_ptr=own.path_ptr, path_links=own.path_links,
        weight=own.weight, dep_ptr=dep_ptr, deps=deps,
        multiplicity=np.bincount(class_of, minlength=n_c),
    )  # fmt: skip
    n_fab = r.fabric.n_links
    rest = cap[n_fab:]
    epochs = [
        Epoch(t0, np.concatenate([c, rest]), None if v is None else paths[v])
        for t0, c, v in r.epochs
    ]
    return flows, class_of, epochs


def class_groups(builder, realised: RealisedSchedule):
    """The flow classes of a builder grouped by route for :func:`topoopt.flowsim.
    epochs_reduction.reduce_grouped`: ``(grouped, class_of, epochs)``, the classes' groups
    (each server pair, each link of a link flow), every path version's routes once per group,
    and the epochs with their path version's index (``None``: no paths). ``None`` when the
    schedule's first epoch has no paths. The routes are those :func:`class_epochs` lists per
    class. (:class:`GroupCache` gives the same for several schedules of one builder.)"""
    c = _flow_classes(builder, realised)
    if c is None:
        return None
    base = _group_base(c[1:])
    del c
    versions = sorted({v for _, _, v in realised.epochs if v is not None})
    tables = [_group_table(realised.routes(v, base.pairs), base) for v in versions]
    return _grouped(realised, base, versions, tables)


def _group_base(c: tuple) -> SimpleNamespace:
    """What :func:`class_groups` takes from :func:`_builder_classes`' classes ``c``: the
    network's ``capacity`` and ``latency``, per class its ``size``, ``multiplicity`` and
    dependencies (``dep_ptr``, ``deps``), per builder flow its class (``class_of``); the
    groups: ``g_key`` (a link, or ``n_cap +`` a pair index; links first), ``group`` (per
    class), ``is_pair``, ``pairs`` (``(K, 2)`` server pairs) and ``g_pair`` (the pair of each
    pair group)."""
    a, cap, lat, n_cap, n_nodes, keys, route, n_f, class_of, n_c, rep, dep_ptr, deps = c
    g_key, group = np.unique(route[rep], return_inverse=True)  # links first, then pairs
    is_pair = g_key >= n_cap
    return SimpleNamespace(
        capacity=cap, latency=lat, size=a["size"][rep], class_of=class_of,
        multiplicity=np.bincount(class_of, minlength=n_c), dep_ptr=dep_ptr, deps=deps,
        g_key=g_key, group=group.reshape(-1).astype(np.int64), is_pair=is_pair,
        pairs=np.column_stack([keys // n_nodes, keys % n_nodes]), g_pair=g_key[is_pair] - n_cap,
        n_nodes=n_nodes,
    )  # fmt: skip


def _group_table(ps: PathSet, base: SimpleNamespace):
    """One path version's routes ``ps`` (of ``base.pairs``) per group of ``base``
    (:func:`_group_base`): an :class:`~topoopt.flowsim.timevarying.EpochPaths` over the groups
    (a link group: its one link)."""
    from topoopt.flowsim.timevarying import EpochPaths

    g_key, is_pair, pairs, n_nodes = base.g_key, base.is_pair, base.pairs, base.n_nodes
    n_g = g_key.shape[0]
    comm = ps.index(pairs[:, 0], pairs[:, 1], n_nodes)[base.g_pair]
    lo = np.zeros(n_g, np.int64)
    hi = np.ones(n_g, np.int64)
    lo[is_pair], hi[is_pair] = ps.commodity_ptr[comm], ps.commodity_ptr[comm + 1]
    fptr = np.zeros(n_g + 1, np.int64)
    np.cumsum(hi - lo, out=fptr[1:])
    owner = np.repeat(np.arange(n_g), hi - lo)
    ids = _ranges(lo, hi)
    on = is_pair[owner]
    lens = np.where(on, np.diff(ps.path_ptr)[np.where(on, ids, 0)], 1)
    pptr = np.zeros(ids.shape[0] + 1, np.int64)
    np.cumsum(lens, out=pptr[1:])
    links = np.empty(int(pptr[-1]), np.int64)
    links[_ranges(pptr[:-1][on], pptr[1:][on])] = ps.path_links[
        _ranges(ps.path_ptr[ids[on]], ps.path_ptr[ids[on] + 1])
    ]
    links[pptr[:-1][~on]] = g_key[owner[~on]]
    w = np.where(on, ps.weight[np.where(on, ids, 0)], 1.0)
    return EpochPaths(fptr, pptr, links, w)


def _grouped(r: RealisedSchedule, base: SimpleNamespace, versions, tables):
    """:func:`class_groups`' result from the builder's classes and groups ``base``
    (:func:`_group_base`) and the group ``tables`` of the path ``versions`` (entry indices)."""
    from topoopt.flowsim.epochs_reduction import GroupedFlows
    from topoopt.flowsim.timevarying import Epoch

    index = {v: i for i, v in enumerate(versions)}
    gf = GroupedFlows(
        capacity=base.capacity, latency=base.latency, size=base.size,
        start=np.zeros(base.size.shape[0]), multiplicity=base.multiplicity,
        dep_ptr=base.dep_ptr, deps=base.deps, group=base.group, versions=list(tables),
    )  # fmt: skip
    rest = base.capacity[r.fabric.n_links :]
    epochs = [
        Epoch(t0, np.concatenate([cc, rest]), None if v is None else index[v])
        for t0, cc, v in r.epochs
    ]
    return gf, base.class_of, epochs


class GroupCache:
    """:func:`class_groups` for the runs of several schedules that differ only in their
    routing tables, on one fabric, of one builder's flows (the routing choices of
    :func:`solvers.joint.phase_routing.phase_routing`, whose runs share one builder): the
    builder's classes and groups are found once, and each routing table's group routes once
    (keyed by its circuits and its routing object, held here so the key stays valid). They are
    reused for the same builder object, unchanged since (as many flows, devices and
    dependencies); another builder is classed afresh. The same results as
    :func:`class_groups`, exactly. :meth:`fabric_flows` keeps, for the last two builders, what
    a run records of its fabric flows. ``seeds`` is free for the caller: labels of the
    builder's flow classes, emptied with them.
    """

    def __init__(self):
        self._builder = None
        self._state: tuple = ()
        self._base: SimpleNamespace | None = None
        self._tables: dict = {}
        self._flows: list = []
        self.seeds: dict = {}
        self.hits = 0  # runs that reused the builder's classes

    @staticmethod
    def _state_of(builder) -> tuple:
        return (builder.net.fabric, builder.n, builder.n_devices, builder.n_deps)

    def fabric_flows(self, builder) -> dict:
        """The builder's server-pair flows: ``pair`` (a mask over its flows), their ``src``,
        ``dst`` and ``bytes``; the same dict for the same builder, unchanged."""
        state = self._state_of(builder)
        for b, st, got in self._flows:
            if b is builder and st == state:
                return got
        a = builder.arrays()
        pair = a["link"] < 0
        got = {"pair": pair, "src": a["src"][pair], "dst": a["dst"][pair],
               "bytes": a["size"][pair]}  # fmt: skip
        self._flows = [*self._flows[-1:], (builder, state, got)]
        return got

    def __call__(self, builder, realised: RealisedSchedule):
        r = realised
        if builder.net.fabric is not r.fabric:
            raise InputError(
                "builder", "a network on another fabric", "the schedule's union fabric"
            )
        if not r.epochs or r.epochs[0][0] != 0.0 or r.epochs[0][2] is None:
            return None
        if builder is self._builder and self._state_of(builder) == self._state:
            self.hits += 1
        else:  # another builder: classed afresh
            self._builder, self._state = builder, self._state_of(builder)
            self._base = None
            self._tables, self.seeds = {}, {}
            c = _builder_classes(builder, builder.arrays(), r.fabric.n_nodes)
            self._base = _group_base(c)
            del c
        versions = sorted({v for _, _, v in r.epochs if v is not None})
        tables = []
        for v in versions:
            cs = r.schedule.sets[v]
            key = (cs.circuits.key, id(cs.routing))
            got = self._tables.get(key)
            if got is None or got[0] is not cs.routing:
                got = (cs.routing, _group_table(r.routes(v, self._base.pairs), self._base))
                self._tables[key] = got
            tables.append(got[1])
        return _grouped(r, self._base, versions, tables)


def iteration_under_schedule(
    workload,
    schedule: Schedule,
    link_bandwidth: float,
    hold_s: float,
    *,
    compute_s: float | None = None,
    all_dark: bool = False,
    max_refills: int | None = None,
    horizon: float | None = None,
    max_buckets: int | None = None,
    max_flows: int | None = None,
    prefix: SharedPrefix | None = None,
    isolated: dict | None = None,
    reduction: bool | ScheduleReductions = True,
    wrap_overlap: bool = False,
) -> ScheduleRun:
    """One training iteration of ``workload`` under ``schedule`` (module docstring).

    Parameters
    ----------
    workload : Workload
        The workload as simulated (ring-ordered by :func:`solvers.realise.design_workload` when
        it follows a design's rings).
    schedule : Schedule
    link_bandwidth : float
        Bytes/s of one circuit.
    hold_s : float
        Dark time of every reconfiguration, seconds.
    compute_s : float, optional
        The workload's compute-only iteration, when known (skips that simulation).
    all_dark : bool
        See :func:`realise_schedule`.
    max_refills : int, optional
        Work limit of the flow model (:class:`~topoopt.flowsim.simulator.WorkLimitExceeded`).
    horizon : float, optional
        A schedule that reconfigures is simulated up to this time only (seconds): the run's
        ``iteration_s`` is exact when it is at most ``horizon``, else ``inf`` with no result
        and flows (a search comparing schedules with its incumbent needs no more).
    max_buckets, max_flows : int, optional
        Gradient buckets per channel (a coarsening) and the flow-count guard of
        :func:`topoopt.flowsim.iteration.simulate_iteration` (plan-derived workloads).
    prefix : SharedPrefix, optional
        Bytes left at first reconfigurations, taken by and shared with the runs of other
        schedules of the same first set (with a ``horizon``: a run it proves past the horizon
        is not simulated).
    isolated : dict, optional
        The intra-server collectives' isolated durations, shared by the runs of one workload
        (:func:`~topoopt.flowsim.iteration.simulate_iteration`'s ``isolated_cache``: they
        depend on the intra-server links only, not on the circuits; the same results).
    reduction : bool or ScheduleReductions
        Simulate a schedule that reconfigures through the exact symmetry quotient of its
        flows where there is one (:class:`ScheduleReductions`; the same results): ``True`` (a
        record of this run only), ``False`` (the plain run), or the record shared by the runs
        of a search (an off partition found once is not searched again).
    wrap_overlap : bool
        The wrap back to set 0 may overlap the next iteration up to its first fabric flow and
        its first reconfiguration (module docstring); False: the next iteration starts once
        the wrap has ended.

    Returns
    -------
    ScheduleRun

    Examples
    --------
    >>> from traffic.build import workload_from_plan
    >>> w = workload_from_plan("vgg16-dp")
    >>> ring = [[i, (i + 1) % w.servers, 1] for i in range(w.servers)]
    >>> static = Schedule((CircuitSet(ring),), (0.0,))
    >>> run = iteration_under_schedule(w, static, 12.5e9, 0.0)
    >>> run.reconfigurations, run.iteration_s == run.makespan_s > 0
    (0, True)
    """
    n = workload.servers
    h = float(hold_s)
    if schedule.is_static():
        cs = schedule.sets[0]
        fabric = direct_connect(
            n,
            max(1, int(cs.ports(n).max())),
            cs.circuits.rows,
            link_bandwidth,
            device="ocs",
            gpus_per_server=workload.gpus_per_server,
        )
        routing = None
        if cs.routing is not None:
            routing = cs.routing.to_pathset(fabric.src, fabric.dst, fabric.n_nodes)
        hook = _Hook(None)
    else:
        realised = realise_schedule(
            schedule, n, link_bandwidth, h,
            gpus_per_server=workload.gpus_per_server, all_dark=all_dark,
        )  # fmt: skip
        key = (id(workload), max_buckets)
        p = prefix
        if p is not None and p.template is not None and p.template.key == key:
            # the shared prefix's cut from the flow classes of an earlier run, before this
            # iteration is built (FlowTemplate): the hook's own check, on the same figures
            got = template_flowset(p.template, realised)
            if got is not None and _prefix_cut(p, horizon, schedule.sets[0].label, *got):
                p.pruned += 1
                return ScheduleRun(np.inf, np.inf, np.inf, schedule.reconfigurations(), h, None, {})
        fabric, routing = realised.fabric, None
        rec = reduction if isinstance(reduction, ScheduleReductions) else None
        if reduction is True:
            rec = ScheduleReductions()
        hook = _Hook(realised, horizon, prefix, key, rec)
    return run_iteration(
        workload, schedule, fabric, routing, hook, h, compute_s=compute_s,
        max_refills=max_refills, max_buckets=max_buckets, max_flows=max_flows,
        isolated=isolated, wrap_overlap=wrap_overlap,
    )  # fmt: skip


def run_iteration(
    workload, schedule: Schedule, fabric: Fabric, routing, hook: _Hook, hold_s: float, *,
    compute_s=None, max_refills=None, max_buckets=None, max_flows=None, isolated=None,
    builds=None, wrap_overlap: bool = False,
) -> ScheduleRun:  # fmt: skip
    """The iteration of ``workload`` on ``fabric`` (a static set's, or a schedule's union with
    the ``hook`` of its realisation) and the wrap rule (module docstring). ``isolated`` and
    ``builds``: :func:`~topoopt.flowsim.iteration.simulate_iteration`'s ``isolated_cache`` and
    ``builds``."""
    from topoopt.flowsim.iteration import simulate_iteration

    h = float(hold_s)
    try:
        res = simulate_iteration(
            workload,
            fabric,
            routing=routing,
            exposed_by_class=False,
            compute_s=compute_s,
            simulator=hook,
            max_refills=max_refills,
            max_buckets=max_buckets,
            max_flows=max_flows,
            isolated_cache=isolated,
            builds=builds,
        )
    except _PastHorizon:
        return ScheduleRun(np.inf, np.inf, np.inf, schedule.reconfigurations(), h, None, {})
    fl = hook.flows
    net = float(fl["finish"].max()) if fl["finish"].size else 0.0
    makespan = float(res.iteration_s)
    it = makespan
    if schedule.wraps():
        ready = net + h  # set 0 lit again
        if wrap_overlap:  # needed from the next iteration's first fabric flow / request on
            lead = float(fl["start"].min()) if fl["start"].size else makespan
            ready -= min(lead, float(schedule.starts[1]) if len(schedule.starts) > 1 else lead)
        it = max(makespan, ready)
    return ScheduleRun(it, makespan, net, schedule.reconfigurations(), h, res, fl)
