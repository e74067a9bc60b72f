"""Time-varying max-min simulation: capacity and path epochs, strict priorities, weights.

:func:`simulate_epochs` extends :func:`topoopt.flowsim.simulate` (whose module docstring,
:mod:`topoopt.flowsim.simulator`, defines the base semantics: multipath sub-flows, latency,
dependencies, multiplicity, the ``rtol`` batching of events) with three things:

API
---
``simulate_epochs(flows, epochs=(), *, priority=None, weight=None, rtol=1e-12,
max_refills=None, record_series=True, nonpreemptive=None) -> SimResult``

- ``flows``: a :class:`topoopt.flowsim.FlowSet`; its ``capacity`` and paths hold from ``t = 0``
  until the first epoch.
- ``epochs``: a sequence of :class:`Epoch` ``(start_s, capacity, paths=None)`` with strictly
  increasing ``start_s >= 0``. From ``start_s`` on, link ``l`` has ``capacity[l]`` bytes/s
  (``float64 (L,)``, finite, ``>= 0``; ``0`` = the link carries nothing) and, when ``paths``
  (an :class:`EpochPaths`) is given, every flow's weighted paths are replaced by it. ``paths=None``
  keeps the paths in force (not the FlowSet's). Link latencies never change.
- ``priority``: ``int (F,)`` strict priority class per flow, ``0`` = highest (default all 0).
- ``weight``: ``float (F,)`` max-min sharing weight per flow, ``> 0`` (default all 1). All
  sub-flows of a flow share with their flow's weight (distinct from the path split weights).
- ``nonpreemptive``: ``bool (F,)`` (default all False): such a flow is a unit of scheduling
  that is never preempted (a Lina micro-op, :mod:`topoopt.flowsim.priorities`). Released, it
  starts only when no flow of a higher class (smaller ``priority``) is sending on a link of its
  paths, and waits otherwise; once started it shares in the highest class. Its ``start`` in
  the result is when it started.

Semantics
---------
- **Sharing: lexicographic weighted max-min.** Class 0's active sub-flows get the weighted
  max-min fair allocation of the current capacities: weighted progressive filling raises a
  common level ``x``; an unfrozen sub-flow of weight ``w`` (and multiplicity ``m``) takes
  ``m * w * x`` from every link it crosses; when a link is full its unfrozen sub-flows freeze at
  rate ``w * x`` (each member's). Class 1 is then filled the same way on the capacity class 0
  leaves, and so on. With one class and unit weights this is :func:`simulate`'s allocation.
- **Epochs.** At ``start_s`` (after the completions of that instant, before its arrivals) the
  capacities change. If the epoch has paths, every started, unfinished flow takes the bytes its
  sub-flows have left, ``R``, and continues on its new paths, path ``p`` carrying ``R *
  weight[p]``; flows not yet started later start on the paths in force when they start. A
  sub-flow whose path crosses a link of capacity 0 gets rate 0 (paused: it sends nothing) until
  the capacity returns or its paths change; paused sub-flows take no capacity on their other
  links.
- **Latency.** As in :func:`simulate`: latency never takes capacity; every piece of a flow
  (a sub-flow on one path, between its start or an epoch and its last byte or the next path
  change) arrives at the time it last sent a byte plus its path's latency, and a flow finishes
  at the latest arrival of its pieces that carried bytes. A zero-byte flow finishes at its
  start plus the largest latency of the paths it starts on.
- **Never finishing.** A flow that still has bytes when nothing more can happen (all its
  sub-flows paused and no later epoch) gets ``finish = inf`` (and so do its dependents).

Result (:class:`topoopt.flowsim.SimResult`)
-------------------------------------------
``start``, ``finish``, ``link_bytes`` (bytes carried per link over all epochs, every member),
``series_*`` (the link-load change log), ``makespan``, ``n_events`` (distinct event times,
epochs included), ``fill_rounds`` (bottleneck links filled), ``simulated_flows``, ``refills``
(sub-flow rates computed over all events: the pieces re-filled, below) are filled as by
:func:`simulate`. ``capacity`` is the FlowSet's (the capacity before the first epoch). The
per-sub-flow arrays ``path_start``, ``path_last_byte``, ``path_finish`` refer to the FlowSet's
own paths; they are ``nan`` for every path of a flow that ever ran on epoch paths (a flow
re-split at a path change or started after one).

Algorithm and cost
------------------
An exact event-driven loop compiled with numba
(:func:`topoopt.flowsim._timevarying_kernels.epochs_kernel`): events are completions, arrivals
(release-time heap, dependencies) and epoch starts. At each event only the pieces whose rate
can change are re-filled, by weighted progressive filling one bottleneck link at a time (links
in a lazy heap keyed by their level ``rem / sum(m * w)``, which only grows as pieces freeze).
Which pieces keep their rates follows the level lemma of :mod:`topoopt.flowsim.simulator`,
stated in levels ``rate / weight`` (weighted filling is the same process in those units) and
applied to the highest class ``c`` with an arrival or a completion: every class above ``c``
keeps its rates (a class is filled on what the classes above it leave, whatever the classes
below do); in class ``c`` the pieces whose level is below the threshold (the least level of a
completing piece, and the weighted water level of the arrivals on their links over the old
rates) keep theirs; class ``c``'s other pieces and every class below ``c`` are re-filled on the
capacity the kept pieces leave. An epoch re-fills everything. An event costs ``O(A)`` for
``A`` active piece-link incidences plus ``O(R log L)`` for the ``R`` re-filled ones;
``benchmarks/bench_timevarying.py`` measures it.
The tests check it against :func:`simulate` (no epochs, one class, unit weights), closed forms,
an independent plain-Python reference and SimGrid's weighted max-min.

Examples
--------
One 100 B/s link, two flows of 100 bytes; from 0.5 s the link drops to 50 B/s, so each has 75
bytes left at 25 B/s:

>>> from topoopt.flowsim import FlowSet
>>> fs = FlowSet.single_path([100.0], [0.0], size=[100.0, 100.0], start=[0.0, 0.0],
...                          paths=[[0], [0]])
>>> simulate_epochs(fs, [Epoch(0.5, np.array([50.0]))]).finish.tolist()
[3.5, 3.5]

The same flows, flow 0 in the higher class: it runs alone at 100 B/s and ends at 1 s.

>>> simulate_epochs(fs, priority=[0, 1]).finish.tolist()
[1.0, 2.0]

Nothing simulated after 1.5 s: flow 1 is still running.

>>> simulate_epochs(fs, priority=[0, 1], horizon=1.5).finish.tolist()
[1.0, inf]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from topoopt.csr import gather_rows
from topoopt.flowsim._timevarying_kernels import epochs_kernel, rest_kernel
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.simulator import ROW_SPACE, SimResult, WorkLimitExceeded, check_limits
from traffic.errors import InputError

__all__ = [
    "BytesLeft",
    "Epoch",
    "EpochPaths",
    "Handoff",
    "HorizonVerdict",
    "LATE_EVERY",
    "REMAINDER_MARGIN",
    "RELEASE_MARGIN",
    "past_horizon_after_epochs",
    "remainder_flows",
    "unreleased_left",
    "simulate_epochs",
]

LATE_EVERY = 1024
"""Events between two checks of the late cut (``simulate_epochs(late_cut=True)``); a check is
one pass over the active pieces and the paths of the flows not started."""


@dataclass(frozen=True, eq=False)
class EpochPaths:
    """Every flow's weighted paths for an epoch, in the CSR layout of :class:`FlowSet`.

    Attributes
    ----------
    flow_ptr : numpy.ndarray
        ``int64 (F+1,)``: the paths of flow ``f`` are ``flow_ptr[f]:flow_ptr[f+1]`` (at least
        one per flow, ``F`` the FlowSet's number of flows).
    path_ptr : numpy.ndarray
        ``int64 (P+1,)``: path ``p`` crosses ``path_links[path_ptr[p]:path_ptr[p+1]]``.
    path_links : numpy.ndarray
        ``int64``: link ids of the FlowSet (non-empty paths, each link at most once per path).
    weight : numpy.ndarray
        ``float64 (P,)``: fraction of its flow's (remaining) bytes each path carries (positive,
        summing to 1 per flow).

    Checked against the FlowSet when :func:`simulate_epochs` runs (same rules as FlowSet's).

    Examples
    --------
    >>> EpochPaths.single_path([[1], [0, 1]]).path_links.tolist()
    [1, 0, 1]
    """

    flow_ptr: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    weight: np.ndarray

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in ("flow_ptr", "path_ptr", "path_links"):
            set_(self, name, np.ascontiguousarray(getattr(self, name), np.int64).reshape(-1))
        set_(self, "weight", np.ascontiguousarray(self.weight, np.float64).reshape(-1))

    @classmethod
    def single_path(cls, paths: Sequence[Sequence[int]]) -> EpochPaths:
        """One path per flow: ``paths[f]`` is the list of links of flow ``f``."""
        n = len(paths)
        lens = np.array([len(p) for p in paths], np.int64)
        path_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=path_ptr[1:])
        links = np.concatenate([np.asarray(p, np.int64) for p in paths]) if n else np.zeros(0)
        return cls(np.arange(n + 1), path_ptr, links, np.ones(n))

    @classmethod
    def of(cls, flows: FlowSet) -> EpochPaths:
        """The paths of a FlowSet."""
        return cls(flows.flow_ptr, flows.path_ptr, flows.path_links, flows.weight)


@dataclass(frozen=True, eq=False)
class BytesLeft:
    """Bytes left per path at given times (``simulate_epochs(left_at=...)``).

    Attributes
    ----------
    times : numpy.ndarray
        The times asked, ascending (seconds).
    ok : numpy.ndarray
        ``bool``: the run reached that time (else it stopped before: no entry).
    version : numpy.ndarray
        ``int64``: the path version in force then (``0``: the FlowSet's own paths, ``i``: those
        of the ``i``-th epoch that has paths).
    left : tuple
        Per time, ``float64`` per path of that version (its CSR order): the bytes left to send
        per member, before the events of that instant (an active piece's bytes less what its
        rate sends by then; a flow not started: its size times the path's weight; a finished
        path: 0), or ``None``.
    """

    times: np.ndarray
    ok: np.ndarray
    version: np.ndarray
    left: tuple


@dataclass(frozen=True, eq=False)
class Handoff:
    """The state of a run stopped once every epoch has started (``simulate_epochs(handoff=True)``).

    Attributes
    ----------
    handed : bool
        The run stopped there (False: it ended, or was cut, before: nothing to hand over).
    time : float
        When it stopped (seconds): the events of that instant are done.
    paths : FlowSet
        The FlowSet carrying the paths in force (the FlowSet's own, or the last epoch's).
    capacity : numpy.ndarray
        The capacities in force (bytes/s).
    arrive : numpy.ndarray
        ``float64 (F,)``: the latest arrival so far of each flow's pieces that ended or were cut
        (``-inf``: none).
    n_left : numpy.ndarray
        ``int64 (F,)``: each flow's active pieces (0: not started, or finished).
    path, left, rate : numpy.ndarray
        Per active piece: its path (index into ``paths``), bytes left per member, rate.
    """

    handed: bool
    time: float
    paths: FlowSet
    capacity: np.ndarray
    arrive: np.ndarray
    n_left: np.ndarray
    path: np.ndarray
    left: np.ndarray
    rate: np.ndarray


@dataclass(frozen=True, eq=False)
class Epoch:
    """From ``start_s`` on: link capacities ``capacity`` and, if given, new paths.

    Attributes
    ----------
    start_s : float
        Start of the epoch, seconds (``>= 0``).
    capacity : numpy.ndarray
        ``float64 (L,)``: capacity of every link of the FlowSet, bytes/s (finite, ``>= 0``).
    paths : EpochPaths or None
        Every flow's new weighted paths, or ``None`` to keep the paths in force.

    Examples
    --------
    >>> Epoch(1.0, [5.0, 0.0]).capacity.tolist()
    [5.0, 0.0]
    """

    start_s: float
    capacity: np.ndarray
    paths: EpochPaths | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "start_s", float(self.start_s))
        cap = np.ascontiguousarray(self.capacity, np.float64).reshape(-1)
        object.__setattr__(self, "capacity", cap)


def _check_paths(flows: FlowSet, paths: EpochPaths, field: str) -> FlowSet:
    """The FlowSet with ``paths`` instead of its own (FlowSet's checks), without dependencies."""
    if not isinstance(paths, EpochPaths):
        raise InputError(field, type(paths).__name__, "an EpochPaths or None")
    try:
        return FlowSet(
            capacity=flows.capacity,
            latency=flows.latency,
            size=flows.size,
            start=flows.start,
            flow_ptr=paths.flow_ptr,
            path_ptr=paths.path_ptr,
            path_links=paths.path_links,
            weight=paths.weight,
        )
    except InputError as exc:
        raise InputError(f"{field}.{exc.field}", exc.value, exc.allowed) from None


def _per_flow(values, n: int, field: str, default: float, kind: str) -> np.ndarray:
    if values is None:
        return np.full(n, default, np.int64 if kind == "int" else np.float64)
    a = np.asarray(values)
    if a.shape != (n,):
        raise InputError(field, a.shape, f"one value per flow, shape ({n},)")
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise InputError(field, str(a.dtype), "numbers")
    a = a.astype(np.float64)
    if kind == "int":
        bad = ~(np.isfinite(a) & (a >= 0) & (a == np.floor(a)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(f"{field}[{i}]", float(a[i]), "an integer >= 0 (0 = highest)")
        return a.astype(np.int64)
    bad = ~(np.isfinite(a) & (a > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{field}[{i}]", float(a[i]), "a finite weight > 0")
    return np.ascontiguousarray(a)


def _quotient_arrays(versions, incidence_multiplicity, path_members):
    """``(g_em, g_k)`` of :func:`simulate_epochs`' global path table: the per-version arrays
    given (checked: one per version, of its path-link entries and paths, finite, > 0), or 1."""
    parts = []
    for given, size, field in (
        (incidence_multiplicity, lambda vs: vs.path_links.shape[0], "incidence_multiplicity"),
        (path_members, lambda vs: vs.n_paths, "path_members"),
    ):
        if given is None:
            parts.append(np.ones(sum(size(vs) for vs in versions)))
            continue
        given = list(given)
        if len(given) != len(versions):
            raise InputError(field, len(given), f"one array per path version ({len(versions)})")
        arrs = []
        for v, (a, vs) in enumerate(zip(given, versions, strict=True)):
            a = np.ascontiguousarray(a, np.float64).reshape(-1)
            if a.shape[0] != size(vs) or not np.all(np.isfinite(a) & (a > 0)):
                raise InputError(f"{field}[{v}]", a.shape, f"{size(vs)} finite values > 0")
            arrs.append(a)
        parts.append(np.ascontiguousarray(np.concatenate(arrs)) if arrs else np.ones(0))
    return parts[0], parts[1]


def simulate_epochs(
    flows: FlowSet,
    epochs: Sequence[Epoch] = (),
    *,
    priority=None,
    weight=None,
    rtol: float = 1e-12,
    max_refills: int | None = None,
    record_series: bool = True,
    nonpreemptive=None,
    horizon: float | None = None,
    late_cut: bool = False,
    left_at=None,
    handoff: bool = False,
    incidence_multiplicity=None,
    path_members=None,
    path_latency=None,
):
    """Simulate a FlowSet under epochs, strict priorities and weights (see the module docstring).

    Parameters
    ----------
    flows : FlowSet
        Links, flows, weighted paths, dependencies; its capacities hold until the first epoch.
    epochs : sequence of Epoch, optional
        Capacity (and path) changes, in strictly increasing ``start_s``.
    priority : array_like of int, optional
        ``(F,)`` strict priority class per flow, 0 = highest (default: one class).
    weight : array_like of float, optional
        ``(F,)`` weighted max-min share of each flow (default 1).
    rtol : float, optional
        Relative time tolerance under which events are merged (as in :func:`simulate`).
    max_refills : int, optional
        Work limit in sub-flow rate computations: raise :class:`WorkLimitExceeded` past it.
    record_series : bool, optional
        Record the link-load change log.
    nonpreemptive : array_like of bool, optional
        ``(F,)`` flows that wait for their links to be free of higher classes and are then
        not preempted (module docstring).
    horizon : float, optional
        Simulate no event after this time (seconds): a flow unfinished by then gets ``finish =
        inf`` (a search that only needs to know a run ends after its incumbent).
    late_cut : bool, optional
        With a ``horizon``: also stop as soon as some flow provably ends after it. Once no
        epoch is left, every byte still to send crosses its links at most at their capacity,
        so ``t + max over links of (bytes left on the link) / capacity`` bounds the last byte
        (``inf`` when a link of capacity 0 has bytes); past the horizon (with a margin for
        the ``rtol`` batching), the run stops and the flows unfinished then get ``finish =
        inf``. Whether every flow ends by the horizon is the same as without it; only the
        finishes of a run that does not are fewer.
    left_at : sequence of float, optional
        Times (seconds) at which to take the bytes each path has left (:class:`BytesLeft`);
        the result is then ``(SimResult, BytesLeft)``.
    handoff : bool, optional
        With a ``horizon``: stop once every epoch has started (after the events of the last
        epoch's instant, and after the late cut's first check when ``late_cut``) and return
        the state there (:class:`Handoff`) for :func:`remainder_flows`; the result is then
        ``(SimResult, Handoff)`` (``(SimResult, BytesLeft, Handoff)`` with ``left_at``), the
        flows unfinished at the stop with ``finish = inf``.
    incidence_multiplicity, path_members : sequence of numpy.ndarray, optional
        For a symmetry quotient (:mod:`topoopt.flowsim.epochs_reduction`), one array per path
        version (the FlowSet's own paths, then each epoch's with paths): ``float64`` per
        path-link entry, the members a piece puts on that link (its rate times this, instead
        of times its flow's multiplicity alone), and ``float64`` per path, how many pieces of
        its flow the path stands for (a piece of it starts with its weight over this of the
        flow's bytes). Default 1 (a plain FlowSet). Not with ``handoff``; with ``left_at``
        the bytes left are per path of the quotient, per member piece (each piece it stands
        for has them: :func:`topoopt.flowsim.epochs_reduction.expand_left`).
    path_latency : sequence of numpy.ndarray, optional
        For a quotient too: per path version, ``float64`` per path, its latency (default: the
        sum of its links' latencies).

    Returns
    -------
    SimResult
        And a :class:`BytesLeft` with ``left_at``, a :class:`Handoff` with ``handoff``.

    Raises
    ------
    InputError
        On malformed epochs, priorities or weights.
    WorkLimitExceeded
        Over ``max_refills``.

    Examples
    --------
    Weighted sharing: flows of weight 1 and 3 on one 100 B/s link get 25 and 75 B/s.

    >>> fs = FlowSet.single_path([100.0], [0.0], size=[100.0, 300.0], start=[0.0, 0.0],
    ...                          paths=[[0], [0]])
    >>> simulate_epochs(fs, weight=[1.0, 3.0]).finish.tolist()
    [4.0, 4.0]
    """
    if not isinstance(flows, FlowSet):
        raise InputError("flows", type(flows).__name__, "a FlowSet")
    limit = check_limits(rtol, max_refills)
    stop = np.inf if horizon is None else float(horizon)
    if np.isnan(stop):
        raise InputError("horizon", horizon, "a number of seconds or None")
    fs = flows
    n_f, n_l = fs.n_flows, fs.n_links
    prio = _per_flow(priority, n_f, "priority", 0, "int")
    fweight = _per_flow(weight, n_f, "weight", 1.0, "float")
    if nonpreemptive is None:
        nonpre = np.zeros(n_f, np.bool_)
    else:
        nonpre = np.asarray(nonpreemptive)
        if nonpre.shape != (n_f,) or nonpre.dtype != np.bool_:
            raise InputError("nonpreemptive", nonpre.shape, f"booleans, one per flow ({n_f},)")
        nonpre = np.ascontiguousarray(nonpre)
    # dense class ranks 0..C-1 (order kept)
    levels, cls = np.unique(prio, return_inverse=True)
    cls = np.ascontiguousarray(cls.reshape(-1), np.int64)
    n_cls = max(int(levels.shape[0]), 1)

    epochs = list(epochs)
    e_start = np.zeros(len(epochs))
    e_cap = np.zeros((len(epochs), n_l))
    e_ver = np.full(len(epochs), -1, np.int64)
    versions = [fs]
    prev = -np.inf
    for i, ep in enumerate(epochs):
        if not isinstance(ep, Epoch):
            raise InputError(f"epochs[{i}]", type(ep).__name__, "an Epoch")
        if not (np.isfinite(ep.start_s) and ep.start_s >= 0 and ep.start_s > prev):
            raise InputError(
                f"epochs[{i}].start_s", ep.start_s, "finite, >= 0, after the previous epoch"
            )
        prev = ep.start_s
        if ep.capacity.shape != (n_l,):
            raise InputError(f"epochs[{i}].capacity", ep.capacity.shape, f"shape ({n_l},)")
        bad = ~(np.isfinite(ep.capacity) & (ep.capacity >= 0))
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"epochs[{i}].capacity[{j}]", float(ep.capacity[j]), "a finite bytes/s >= 0"
            )
        e_start[i] = ep.start_s
        e_cap[i] = ep.capacity
        if ep.paths is not None:
            versions.append(_check_paths(fs, ep.paths, f"epochs[{i}].paths"))
            e_ver[i] = len(versions) - 1

    snap_t = np.sort(np.asarray([] if left_at is None else left_at, np.float64).reshape(-1))
    if not np.all(np.isfinite(snap_t)):
        raise InputError("left_at", left_at, "finite times in seconds")
    # all path versions in one global path table; g_fptr[v, f] = first global path of f
    n_v = len(versions)
    g_fptr = np.zeros((n_v, n_f + 1), np.int64)
    pp_parts, pl_parts, w_parts, lat_parts = [], [], [], []
    p_off = nnz_off = 0
    for v, vs in enumerate(versions):
        g_fptr[v] = vs.flow_ptr + p_off
        pp_parts.append(vs.path_ptr[:-1] + nnz_off)
        pl_parts.append(vs.path_links)
        w_parts.append(vs.weight)
        lat_parts.append(vs.path_latency() if path_latency is None else path_latency[v])
        p_off += vs.n_paths
        nnz_off += vs.path_links.shape[0]
    g_pptr = np.concatenate(pp_parts + [np.array([nnz_off], np.int64)])
    g_plinks = np.ascontiguousarray(np.concatenate(pl_parts), np.int64)
    g_w = np.ascontiguousarray(np.concatenate(w_parts))
    g_lat = np.ascontiguousarray(np.concatenate(lat_parts))
    g_em, g_k = _quotient_arrays(versions, incidence_multiplicity, path_members)
    if (incidence_multiplicity is not None or path_members is not None) and handoff:
        raise InputError("handoff", "a quotient's run", "no handoff with a quotient")
    rdep_ptr, rdep = fs.dependents()
    max_paths = int(max(np.diff(vs.flow_ptr).max() if n_f else 1 for vs in versions))
    out = epochs_kernel(
        fs.capacity,
        fs.size,
        fs.start,
        fs.multiplicity,
        fs.dep_ptr,
        fs.deps,
        rdep_ptr,
        rdep,
        cls,
        n_cls,
        fweight,
        g_fptr,
        g_pptr,
        g_plinks,
        g_w,
        g_lat,
        e_start,
        e_cap,
        e_ver,
        int(fs.n_paths),
        max_paths,
        float(rtol),
        bool(record_series),
        limit,
        nonpre,
        stop,
        bool(late_cut),
        LATE_EVERY,
        snap_t,
        bool(handoff),
        g_em,
        g_k,
    )
    (release, finish, path_last, moved, link_bytes, st, sl, sv, n_events, rounds, refills) = out[
        :11
    ]
    if 0 <= limit < refills:
        raise WorkLimitExceeded(refills, limit)
    left = None
    offs = np.concatenate([[0], np.cumsum([vs.n_paths for vs in versions])])
    if left_at is not None:
        snap, snap_ver, snap_ok = out[11:14]
        left = BytesLeft(
            times=snap_t,
            ok=snap_ok,
            version=snap_ver,
            left=tuple(
                snap[k, offs[v] : offs[v + 1]].copy() if ok else None
                for k, (v, ok) in enumerate(zip(snap_ver, snap_ok, strict=True))
            ),
        )
    pflow = fs.path_flow()
    path_start = release[pflow].copy()
    path_last = path_last.copy()
    gone = moved[pflow]
    path_last[gone] = np.nan
    path_start[gone] = np.nan
    res = SimResult(
        start=release,
        finish=finish,
        path_start=path_start,
        path_last_byte=path_last,
        path_finish=path_last + (fs.path_latency() if path_latency is None else path_latency[0]),
        link_bytes=link_bytes,
        capacity=fs.capacity,
        series_time=st,
        series_link=sl,
        series_load=sv,
        makespan=float(np.max(finish)) if n_f else 0.0,
        n_events=int(n_events),
        fill_rounds=int(rounds),
        simulated_flows=n_f,
        refills=int(refills),
    )
    if not handoff:
        return res if left is None else (res, left)
    handed, t_h, ver, arrive, n_left, h_gp, h_left, h_rate = out[14:]
    ho = Handoff(
        handed=bool(handed),
        time=float(t_h),
        paths=versions[int(ver)],
        capacity=(e_cap[-1] if len(epochs) else fs.capacity).copy(),
        arrive=arrive,
        n_left=n_left,
        path=h_gp - offs[int(ver)],
        left=h_left,
        rate=h_rate,
    )
    return (res, ho) if left is None else (res, left, ho)


@dataclass(frozen=True, eq=False)
class HorizonVerdict:
    """What :func:`past_horizon_after_epochs` found.

    Attributes
    ----------
    past : bool
        Some flow is unfinished at the horizon (``False``: not decided, or it ends by it).
    by : str
        ``"run"``, ``"rest"`` or ``""`` (:func:`past_horizon_after_epochs`).
    left : BytesLeft or None
        The bytes left at the times asked (``left_at``).
    """

    past: bool
    by: str
    left: BytesLeft | None


REMAINDER_MARGIN = 1e-7
"""Relative margin of :func:`past_horizon_after_epochs`' verdict over the rounding of the two
engines whose runs it equates (besides ``rtol`` per path, as the late cut)."""


def remainder_flows(flows: FlowSet, result: SimResult, handoff: Handoff):
    """The rest of a handed-over run as a FlowSet without epochs, or ``None``.

    After the last epoch a run of :func:`simulate_epochs` is a run of
    :func:`topoopt.flowsim.simulate` (one class, unit weights) from the handoff time ``t``
    (:class:`Handoff`): the same max-min sharing of the capacities in force, the same
    completions, releases and latencies. Its flows are those unfinished at ``t``:

    - a started one (active pieces) starts at ``t`` with, on each path of an active piece with
      bytes left, those bytes (its size is their sum, each path's weight its share);
    - one not started whose dependencies have all finished starts at its release time;
    - any other keeps its start, its dependencies on unfinished flows (renumbered), and waits
      for the finished ones through its start (their finish times).

    A started flow also finishes no earlier than ``floor``: the arrivals of its pieces that
    ended or were cut before ``t``, and ``t`` plus the latency of its active pieces with no
    bytes left. Returns ``(rest, index, floor)``: ``index[j]`` is the flow of ``flows`` that
    flow ``j`` of ``rest`` continues. ``None`` when the rest cannot be stated so: a path in
    force with bytes (or a piece) crosses a link of capacity 0 (it pauses forever), or the run
    was not handed over.
    """
    if not handoff.handed:
        return None
    ps = handoff.paths
    t = handoff.time
    cap = handoff.capacity
    fin = result.finish
    idx = np.flatnonzero(~np.isfinite(fin))
    n = idx.size
    new = np.full(flows.n_flows, -1, np.int64)
    new[idx] = np.arange(n)
    lat = ps.path_latency()
    floor = handoff.arrive[idx].copy()
    # active pieces, grouped by flow (the pool keeps a flow's pieces in path order)
    pf = ps.path_flow()[handoff.path]
    order = np.argsort(pf, kind="stable")
    a_path, a_left, a_flow = handoff.path[order], handoff.left[order], pf[order]
    empty = a_left <= 0.0
    np.maximum.at(floor, new[a_flow[empty]], t + lat[a_path[empty]])
    active = handoff.n_left[idx] > 0
    # paths of the rest: per flow, its active pieces with bytes (all of them if none has
    # bytes: a zero-byte flow), else its paths in force
    keep = ~empty
    has = np.zeros(flows.n_flows, np.bool_)
    has[a_flow[keep]] = True
    use = keep | ~has[a_flow]
    sizes = flows.size[idx].astype(np.float64)
    starts = flows.start[idx].astype(np.float64)
    pieces = np.bincount(new[a_flow[use]], minlength=n)
    n_paths = np.where(active, pieces, np.diff(ps.flow_ptr)[idx])
    flow_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(n_paths, out=flow_ptr[1:])
    p_src = np.empty(flow_ptr[-1], np.int64)
    weight = np.empty(flow_ptr[-1])
    u_flow, u_path, u_left = new[a_flow[use]], a_path[use], np.where(keep, a_left, 0.0)[use]
    tot = np.bincount(u_flow, weights=u_left, minlength=n)
    cnt = np.bincount(u_flow, minlength=n)
    pos = flow_ptr[u_flow] + (
        np.arange(u_flow.size) - np.concatenate([[0], np.cumsum(cnt)])[u_flow]
    )
    p_src[pos] = u_path
    weight[pos] = np.where(
        tot[u_flow] > 0, u_left / np.where(tot > 0, tot, 1.0)[u_flow], 1.0 / cnt[u_flow]
    )
    sizes[active] = tot[active]
    starts[active] = t
    idle = np.flatnonzero(~active)
    for j in idle:
        f = idx[j]
        a, b = ps.flow_ptr[f], ps.flow_ptr[f + 1]
        p_src[flow_ptr[j] : flow_ptr[j + 1]] = np.arange(a, b)
        weight[flow_ptr[j] : flow_ptr[j + 1]] = ps.weight[a:b]
        if np.isfinite(result.start[f]):
            starts[j] = result.start[f]  # released: every dependency has finished
    dep_ptr = np.zeros(n + 1, np.int64)
    deps = []
    dp, dd = flows.dep_ptr, flows.deps
    for j in idle:
        f = idx[j]
        if np.isfinite(result.start[f]):
            dep_ptr[j + 1] = 0
            continue
        for g in dd[dp[f] : dp[f + 1]]:
            if new[g] >= 0:
                deps.append(new[g])
                dep_ptr[j + 1] += 1
            elif fin[g] > starts[j]:
                starts[j] = fin[g]
    np.cumsum(dep_ptr, out=dep_ptr)
    lens = np.diff(ps.path_ptr)[p_src]
    path_ptr = np.zeros(p_src.size + 1, np.int64)
    np.cumsum(lens, out=path_ptr[1:])
    links = ps.path_links[gather_rows(ps.path_ptr, p_src)]
    zero = cap <= 0.0
    if np.any(zero[links]):
        return None
    rest = FlowSet(
        capacity=np.where(zero, 1.0, cap),  # links of capacity 0 carry no path of the rest
        latency=flows.latency,
        size=sizes,
        start=starts,
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=links,
        weight=weight,
        dep_ptr=dep_ptr,
        deps=np.asarray(deps, np.int64),
        multiplicity=flows.multiplicity[idx],
    )
    return rest, idx, floor


def past_horizon_after_epochs(
    flows: FlowSet,
    epochs: Sequence[Epoch],
    horizon: float,
    *,
    rtol: float = 1e-12,
    max_refills: int | None = None,
    left_at=None,
):
    """Whether ``simulate_epochs(flows, epochs, horizon=horizon, late_cut=True)`` leaves some
    flow unfinished, decided with the rest of the run simulated by the static engine.

    The run is simulated by :func:`simulate_epochs` up to the start of the last epoch (with the
    late cut's check there: a cut is the verdict), then the rest (:func:`remainder_flows`) by
    the static engine's event loop (:func:`topoopt.flowsim.simulate`'s, groups re-filled
    through their rows, a seventh of the time-varying one's cost per event), with a horizon
    and the late cut at ``horizon * (1 + REMAINDER_MARGIN)``
    (:func:`~topoopt.flowsim._timevarying_kernels.rest_kernel`). Some flow of the run is
    unfinished at the horizon exactly when a piece sends its last byte after it; the verdict
    is ``True`` when the rest stops so (an event past that time, or the late cut's bound past
    it by ``rtol`` per piece with bytes), and every flow the rest finished ends no earlier
    than its ``floor`` (else its dependents could be released later than the rest releases
    them). ``False`` means *not decided*: the caller simulates the run
    (so a ``False`` is never wrong, and a ``True`` rests on the two engines agreeing to within
    the margin, as the shared prefix of :mod:`solvers.reconfig.schedule` does).

    One class, unit weights and no non-preemptive flows only (the static engine's model).
    ``max_refills`` bounds the work of each of the two runs (over it: not decided). With
    ``left_at`` (times up to the last epoch's start) the bytes left are taken in the first run.

    Returns
    -------
    HorizonVerdict
        ``past``, ``by`` (``"run"``: the time-varying run ended or was cut before the handoff,
        ``"rest"``: the static engine's rest, ``""``: not decided) and ``left`` (the
        :class:`BytesLeft` of ``left_at``, else ``None``).

    Examples
    --------
    Flow 0 (1 byte on link 0), then flow 1 (1 byte on link 1), both links 1 B/s; from 0.5 s
    link 0 has 2 B/s: flow 0 ends at 0.75 s, flow 1 at 1.75 s (the late cut at 0.5 s proves
    only 1.5 s: a byte left on link 0, one on link 1).

    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0, 0.0], size=[1.0, 1.0], start=[0.0, 0.0],
    ...                          paths=[[0], [1]], after=[[], [0]])
    >>> ep = [Epoch(0.5, np.array([2.0, 1.0]))]
    >>> v = past_horizon_after_epochs(fs, ep, 1.6)
    >>> v.past, v.by, past_horizon_after_epochs(fs, ep, 1.8).past
    (True, 'rest', False)
    """
    kw = dict(rtol=rtol, max_refills=max_refills, record_series=False, horizon=horizon)
    try:
        out = simulate_epochs(flows, epochs, late_cut=True, handoff=True, left_at=left_at, **kw)
    except WorkLimitExceeded:
        return HorizonVerdict(False, "", None)
    res, ho = out[0], out[-1]
    left = out[1] if left_at is not None else None
    if not ho.handed or np.all(np.isfinite(res.finish)):
        # ended, or cut, before the handoff: as the plain run says
        past = not np.all(np.isfinite(res.finish))
        return HorizonVerdict(past, "run" if past else "", left)
    rem = remainder_flows(flows, res, ho)
    if rem is None:
        return HorizonVerdict(False, "", left)
    rest, _, floor = rem
    cut_at = horizon + horizon * REMAINDER_MARGIN
    finish, last_byte, stopped, refills = _rest_run(
        rest, cut_at, rtol, check_limits(rtol, max_refills)
    )
    if finish is None:
        return HorizonVerdict(False, "", left)
    done = np.isfinite(finish)
    if np.any(finish[done] < floor[done]):
        return HorizonVerdict(False, "", left)
    last = float(np.nanmax(last_byte, initial=-np.inf))
    past = stopped or last > horizon + horizon * (REMAINDER_MARGIN + rest.n_paths * rtol)
    return HorizonVerdict(past, "rest" if past else "", left)


def _rest_run(fs: FlowSet, cut_at: float, rtol: float, limit: int):
    """The static engine's run of ``fs`` (:func:`topoopt.flowsim.simulate`, one class, unit
    weights) with a horizon and the late cut at ``cut_at``
    (:func:`~topoopt.flowsim._timevarying_kernels.rest_kernel`): ``(finish, path_last_byte,
    stopped, refills)``, ``finish`` ``nan`` for the flows unfinished at a stop; ``(None, None,
    False, refills)`` over the work limit ``limit`` (``< 0``: none)."""
    rdep_ptr, rdep = fs.dependents()
    emult = np.repeat(fs.path_multiplicity(), np.diff(fs.path_ptr))
    lp_ptr = np.zeros(fs.n_links + 1, np.int64)
    np.cumsum(np.bincount(fs.path_links, minlength=fs.n_links), out=lp_ptr[1:])
    out = rest_kernel(
        fs.capacity, fs.path_ptr, fs.path_links, fs.path_flow(), fs.path_bytes(),
        fs.path_latency(), fs.flow_ptr, fs.start, fs.dep_ptr, fs.deps, rdep_ptr, rdep, lp_ptr,
        float(rtol), False, emult, limit, ROW_SPACE, float(cut_at), LATE_EVERY,
    )  # fmt: skip
    refills, stopped = int(out[9]), bool(out[10])
    if 0 <= limit < refills:
        return None, None, False, refills
    return out[1], out[3], stopped, refills


RELEASE_MARGIN = 1e-7
"""Relative margin of :func:`unreleased_left`: a flow counts as not released at ``x`` when the
static engine releases it after ``x + x * RELEASE_MARGIN`` (the two engines' rounding)."""


def unreleased_left(
    flows: FlowSet,
    epochs: Sequence[Epoch],
    times,
    *,
    rtol: float = 1e-12,
    max_refills: int | None = None,
):
    """Lower bounds of the bytes each path has left at ``times``, from a static run of the
    first epoch (a :class:`BytesLeft` of its paths, or ``None``).

    Up to the second epoch's start a run of :func:`simulate_epochs` whose first epoch starts at
    0 with paths is a run of :func:`topoopt.flowsim.simulate` (one class, unit weights) on the
    first epoch's capacities and paths: the same max-min sharing, releases and latencies. That
    run is simulated by the static engine's event loop (a fraction of the time-varying one's
    cost per event) up to just past the last of ``times``; at a time ``x`` a flow it has not
    released by ``x + x * RELEASE_MARGIN`` has its whole size left, on each of its paths by its
    weight; every other flow is given 0 (released: it may have sent anything). Each figure is
    at most what ``simulate_epochs(left_at=times)`` takes, so a bound that only grows with the
    bytes left (:func:`solvers.reconfig.schedule.prefix_bound`) stays a bound with them, for
    the run that takes them and for any other run sharing its first epoch up to ``x``.

    ``None`` when it cannot be stated so: no epoch at 0 with paths, a time past the second
    epoch's start (or negative), a path of the first epoch crossing a link of capacity 0 (it
    pauses there; the static engine has no such link), or over ``max_refills``.

    Examples
    --------
    Flow 1 waits for flow 0 (1 byte on a 1 B/s link, ends at 1 s): at 0.5 s it has its 2 bytes
    left (flow 0, released, is given 0); at 1.5 s both are released.

    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0, 0.0], size=[1.0, 2.0], start=[0.0, 0.0],
    ...                          paths=[[0], [1]], after=[[], [0]])
    >>> ep = [Epoch(0.0, np.array([1.0, 1.0]), EpochPaths.of(fs)), Epoch(2.0, np.ones(2))]
    >>> [x.tolist() for x in unreleased_left(fs, ep, [0.5, 1.5]).left]
    [[0.0, 2.0], [0.0, 0.0]]
    """
    t = np.sort(np.asarray(times, np.float64).reshape(-1))
    epochs = list(epochs)
    if not epochs or epochs[0].start_s != 0.0 or epochs[0].paths is None or t.size == 0:
        return None
    end = epochs[1].start_s if len(epochs) > 1 else np.inf
    if not (np.all(np.isfinite(t)) and t[0] >= 0.0 and t[-1] <= end):
        return None
    first = epochs[0]
    ps = first.paths
    cap = first.capacity
    if cap.shape != (flows.n_links,):
        return None
    zero = cap <= 0.0
    if np.any(zero[ps.path_links]):
        return None
    fs = FlowSet(
        capacity=np.where(zero, 1.0, cap),  # links of capacity 0 carry no path here
        latency=flows.latency,
        size=flows.size,
        start=flows.start,
        flow_ptr=ps.flow_ptr,
        path_ptr=ps.path_ptr,
        path_links=ps.path_links,
        weight=ps.weight,
        dep_ptr=flows.dep_ptr,
        deps=flows.deps,
        multiplicity=flows.multiplicity,
    )
    limit = check_limits(rtol, max_refills)
    rdep_ptr, rdep = fs.dependents()
    emult = np.repeat(fs.path_multiplicity(), np.diff(fs.path_ptr))
    lp_ptr = np.zeros(fs.n_links + 1, np.int64)
    np.cumsum(np.bincount(fs.path_links, minlength=fs.n_links), out=lp_ptr[1:])
    cut_at = float(t[-1]) + float(t[-1]) * 2 * RELEASE_MARGIN
    out = rest_kernel(
        fs.capacity, fs.path_ptr, fs.path_links, fs.path_flow(), fs.path_bytes(),
        fs.path_latency(), fs.flow_ptr, fs.start, fs.dep_ptr, fs.deps, rdep_ptr, rdep, lp_ptr,
        float(rtol), False, emult, limit, ROW_SPACE, cut_at, 0,
    )  # fmt: skip
    if 0 <= limit < int(out[9]):
        return None
    release = out[0]  # inf: not released when the loop stopped (at its first event past cut_at)
    pflow = fs.path_flow()
    full = fs.size[pflow] * fs.weight
    left = tuple(np.where(release[pflow] > x + x * RELEASE_MARGIN, full, 0.0) for x in t.tolist())
    n = t.size
    return BytesLeft(times=t, ok=np.ones(n, np.bool_), version=np.ones(n, np.int64), left=left)
