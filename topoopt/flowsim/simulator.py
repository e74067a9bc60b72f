"""Event-driven flow-level simulation with max-min fair sharing.

Semantics
---------
- **Sharing.** At every instant the active sub-flows get the textbook max-min fair allocation of
  the link capacities (progressive filling, :mod:`topoopt.flowsim.max_min`). It is recomputed at
  every event (arrivals and completions); between events rates are constant, so the next
  completion is ``min(remaining / rate)``. Completions closer than ``rtol`` (relative) to the
  earliest one are handled as one batch at that time.
- **Multipath.** A flow of ``S`` bytes split over weighted paths is one sub-flow per path carrying
  ``weight * S`` bytes; each sub-flow shares fairly on its own path, independently of its
  siblings.
- **Latency.** Latency never occupies capacity. A sub-flow transmits from its flow's start; its
  finish is the time its last byte is transmitted plus the sum of the latencies of its path's
  links (added once). A flow finishes when its last sub-flow does: ``finish = max over its paths
  of (last-byte time + path latency)``. A zero-byte (sub-)flow's last byte is at its start, so it
  finishes at ``start + path latency``.
- **Dependencies.** A flow starts at ``max(start, finish of every flow in after)``.
- **Multiplicity.** A flow of multiplicity ``m`` (``FlowSet.multiplicity``) stands for ``m``
  identical flows (same paths and weights, size, start and dependencies). It is simulated as one
  flow whose every sub-flow counts ``m`` times on each of its links: a link's fair share is its
  remaining capacity over the summed multiplicities of its unfrozen sub-flows, each member gets
  that rate and the class takes ``m`` times it; loads and ``link_bytes`` count ``m`` members;
  ``start``/``finish`` are every member's. This is exact, not an approximation: the ``m``
  copies of a flow in the expanded problem are interchangeable (swapping two of them maps the
  problem onto itself), and the max-min fair allocation is unique, so it gives them equal rates
  at every instant; with equal bytes and equal release times they finish together, so every
  dependent sees the same finish whichever member it waits on. Progressive filling of the
  expanded problem therefore freezes all copies at once, at the level where one of their links
  fills, and counting each class ``m`` times in the link counts and capacity taken is that same
  filling step by step (the link order, group rows and water-level thresholds below only use the
  counts and the capacity taken). By induction over the events, the aggregated run processes
  the same events at the same times with the same per-member rates as the expanded one.

The result (:class:`SimResult`) has per-flow and per-sub-flow start and finish times, bytes per
link, the makespan (latest finish), and a compact piecewise-constant record of link loads: only the
links whose load changes at an event are recorded.

Performance and exactness
-------------------------
The event loop is compiled (:func:`topoopt.flowsim._kernels.simulate_kernel`); each event
re-fills only the sub-flows whose rate can change, by progressive filling one bottleneck link at
a time (links in order of fair share). The sub-flows are kept in *groups*, one per link: those
that last froze on it, all at the rate it gave them. When a link fills, its group freezes as a
whole: the share times the group's count on each link it crosses comes off that link's room,
which is the same filling as freezing its members one by one. Other unfrozen sub-flows on the
link (arrivals, or members of groups whose link has not filled yet) are found in the list of
active sub-flows each link keeps, frozen one by one, and join the group. A group's members share
one record of bytes sent, so a group whose rate changes costs its links, not its members, and
the next completion is found per group. A group is re-filled or kept as a whole (its members
have one rate), and a group on a link that a re-filled sub-flow crosses is re-filled too
(re-filling more than needed is exact; the level lemma below leaves none there, rounding might).
Which sub-flows are kept:

1. *Level lemma.* Remove a sub-flow ``d`` of max-min rate ``r_d`` and compare the two
   progressive fillings below level ``r_d``. None of ``d``'s links fills below ``r_d`` with ``d``
   present (``d`` would freeze there), and without ``d`` they have even more room. Every other
   link carries the same sub-flows, so, by induction over the levels, the same links fill at the
   same levels below ``r_d`` in both fillings and freeze the same sub-flows at the same rates:
   every sub-flow with ``r_f < r_d`` keeps ``r_f`` exactly, and no other one ends below ``r_d``.
   Several simultaneous completions: apply it one at a time (the smallest ``r_d`` bounds all).
2. *Arrivals.* Adding ``a`` is removing it from the new allocation, so (by 1.) the sub-flows
   whose old rate is below ``a``'s *new* rate ``r'_a`` are the same as those whose new rate is,
   with the same rates. On ``a``'s bottleneck link ``b`` (full, ``a`` largest on it) every other
   sub-flow thus has new rate ``min(old rate, r'_a)``: ``r'_a`` is the water level ``x_b``
   solving ``sum_f min(r_f, x) + x = cap_b`` over the old rates ``r_f`` on ``b``, and on every
   other link of ``a`` the same sum at ``r'_a`` is at most the capacity, so
   ``r'_a = min over a's links of x_l``: the threshold is known before the re-fill. Several
   arrivals at once, or together with completions: every sub-flow without a rate yet is counted
   uncapped (``x`` each) in every link's sum; by induction over adding them one at a time, each
   arrival's rate is at least that smaller level, which is still a valid threshold.
3. *Re-fill.* With ``r0`` the smallest of these thresholds, the sub-flows with ``r_f < r0`` are
   exactly those progressive filling freezes below ``r0`` in the new allocation, at the same
   rates. Filling the others on the capacity they leave gives the new allocation: at any level
   ``x < r0`` each link still has room (``cap - kept >= r0 * n_unfrozen > x * n_unfrozen``),
   so nothing freezes early, and above ``r0`` the two fillings are the same process.

Kept means ``r_f < r0 * (1 - 1e-9)``: sub-flows whose rate equals the threshold up to rounding are
re-filled (re-filling more than needed is always exact). Per-link loads are updated incrementally
and recomputed from the kept rates every 256 events and whenever everything is re-filled.
Measured in ``benchmarks/bench_flowsim.py`` against SimGrid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.flowsim.aot import simulate_kernel
from topoopt.flowsim.flowset import FlowSet
from traffic.errors import InputError

__all__ = ["SimResult", "WorkLimitExceeded", "check_limits", "expand_classes", "simulate"]

ROW_SPACE = 0
"""Entries the event loop keeps for its groups' rows (``0``: its default, see
:func:`topoopt.flowsim._kernels.simulate_kernel`); the tests make it small to rebuild rows
often."""


class WorkLimitExceeded(RuntimeError):
    """A simulation needed more sub-flow re-fills than its ``max_refills`` allowed.

    ``refills`` is how many it had done when it stopped. The work of the event loop is counted
    in re-fills (sub-flow rates recomputed), which depend only on the input: stopping on them,
    unlike stopping on the clock, gives the same outcome on any machine.
    """

    def __init__(self, refills: int, limit: int) -> None:
        super().__init__(
            f"flow simulation stopped after {refills} sub-flow re-fills (limit {limit})"
        )
        self.refills = int(refills)
        self.limit = int(limit)

    def __reduce__(self):
        return (WorkLimitExceeded, (self.refills, self.limit))


@dataclass(frozen=True, eq=False)
class SimResult:
    """What :func:`simulate` computed (seconds, bytes, bytes/s).

    Attributes
    ----------
    start, finish : numpy.ndarray
        ``(F,)`` start (after dependencies) and finish (including path latency) of each flow
        (of every member, for a flow with multiplicity).
    path_start, path_last_byte, path_finish : numpy.ndarray or None
        ``(P,)`` per sub-flow: start, time its last byte is transmitted, finish (+ latency).
        ``None`` in a result expanded per flow without them (:func:`expand_classes` with
        ``paths=False``).
    link_bytes : numpy.ndarray
        ``(L,)`` bytes carried by each link (every member of a flow with multiplicity).
    capacity : numpy.ndarray
        ``(L,)`` link capacities (to turn loads into utilisation).
    series_time, series_link, series_load : numpy.ndarray
        Change log of link loads: from ``series_time[i]`` on, link ``series_link[i]`` carries
        ``series_load[i]`` bytes/s (until its next entry). Loads start at 0.
    makespan : float
        Latest finish (0 with no flows).
    n_events : int
        Number of distinct event times processed.
    fill_rounds : int
        Total progressive-filling steps over all events: the bottleneck links saturated by the
        re-fills.
    simulated_flows : int
        Number of flows the event loop ran (classes of identical flows count once; see
        :func:`expand_classes`). -1 when not recorded.
    refills : int
        Sub-flow rates recomputed over all events (the re-fills; a measure of the work done,
        at least the number of rate changes). -1 when not recorded.
    reduction : dict, optional
        How the symmetry reduction went when the run went through it
        (:func:`topoopt.flowsim.symmetry.simulate_reduced`: ``status`` ``on``/``off``, the
        classes found, ``reason`` when off); ``None`` when it was not asked for.
    """

    start: np.ndarray
    finish: np.ndarray
    path_start: np.ndarray | None
    path_last_byte: np.ndarray | None
    path_finish: np.ndarray | None
    link_bytes: np.ndarray
    capacity: np.ndarray
    series_time: np.ndarray
    series_link: np.ndarray
    series_load: np.ndarray
    makespan: float
    n_events: int
    fill_rounds: int
    simulated_flows: int = -1
    refills: int = -1
    reduction: dict | None = None

    def link_load(self, link: int) -> tuple[np.ndarray, np.ndarray]:
        """Piecewise-constant load of one link: ``(times, loads)``; the load is ``loads[i]``
        bytes/s from ``times[i]`` until ``times[i+1]`` (and after the last time)."""
        n_l = self.capacity.shape[0]
        if not 0 <= int(link) < n_l:
            raise InputError("link", link, f"a link id in 0..{n_l - 1}")
        sel = self.series_link == int(link)
        times = np.concatenate([[0.0], self.series_time[sel]])
        loads = np.concatenate([[0.0], self.series_load[sel]])
        return times, loads

    def link_utilisation(self, link: int) -> tuple[np.ndarray, np.ndarray]:
        """Like :meth:`link_load`, divided by the link capacity (0..1)."""
        times, loads = self.link_load(link)
        return times, loads / self.capacity[int(link)]


def check_limits(rtol: float, max_refills: int | None) -> int:
    """Check a simulation's ``rtol`` and work limit; the limit as the kernels take it (-1: none).

    >>> check_limits(1e-12, None), check_limits(0.0, 5)
    (-1, 5)
    """
    if not (np.isfinite(rtol) and 0 <= rtol < 1e-3):
        raise InputError("rtol", rtol, "a relative tolerance in [0, 1e-3)")
    if max_refills is None:
        return -1
    if isinstance(max_refills, bool) or int(max_refills) != max_refills or max_refills < 0:
        raise InputError("max_refills", max_refills, "an integer >= 0 (or None)")
    return min(int(max_refills), 2**62)  # a limit past 2**62 re-fills is never reached


def simulate(
    flows: FlowSet,
    *,
    rtol: float = 1e-12,
    record_series: bool = True,
    max_refills: int | None = None,
    incidence_multiplicity: np.ndarray | None = None,
    path_latency: np.ndarray | None = None,
) -> SimResult:
    """Simulate a :class:`FlowSet` under max-min fair sharing (semantics in the module docstring).

    Parameters
    ----------
    flows : FlowSet
        Links, flows, weighted paths and dependencies.
    rtol : float, optional
        Relative time tolerance under which completions and arrivals are merged into one event.
    record_series : bool, optional
        Record the piecewise-constant link loads (``SimResult.series_*``).
    max_refills : int, optional
        Work limit: raise :class:`WorkLimitExceeded` as soon as more sub-flow re-fills than this
        are needed (deterministic, unlike a time limit).
    incidence_multiplicity : numpy.ndarray, optional
        ``int64`` per entry of ``flows.path_links``: how many times the sub-flow counts on that
        link (default: its flow's multiplicity on every link). A symmetry quotient
        (:mod:`topoopt.flowsim.symmetry`) counts, on a representative link, the members of a
        class of sub-flows crossing each link of its class. ``link_bytes`` and loads follow it.
    path_latency : numpy.ndarray, optional
        ``float64 (P,)``: latency added to each sub-flow (default: the sum over its links; a
        quotient path stands for paths crossing some link classes more than once).

    Returns
    -------
    SimResult

    Raises
    ------
    WorkLimitExceeded
        Over ``max_refills``.

    Examples
    --------
    Two flows of 100 and 300 bytes on one 100 B/s link: they share 50/50 until the first ends at
    2 s, then the second runs alone and ends at 2 + 200/100 = 4 s.

    >>> fs = FlowSet.single_path([100.0], [0.0], size=[100.0, 300.0], start=[0.0, 0.0],
    ...                          paths=[[0], [0]])
    >>> simulate(fs).finish.tolist()
    [2.0, 4.0]
    """
    limit = check_limits(rtol, max_refills)
    fs = flows
    if fs.path_links.shape[0] >= 2**31:  # the kernel's slot and list indices are int32
        raise InputError("flows.paths", fs.path_links.shape[0], "fewer than 2**31 link entries")
    rdep_ptr, rdep = fs.dependents()
    plat = fs.path_latency() if path_latency is None else np.asarray(path_latency, np.float64)
    if incidence_multiplicity is None:
        emult = np.repeat(fs.path_multiplicity(), np.diff(fs.path_ptr))
    else:
        emult = np.ascontiguousarray(incidence_multiplicity, np.int64).reshape(-1)
        if emult.shape != fs.path_links.shape or (emult.size and emult.min() < 1):
            raise InputError(
                "incidence_multiplicity", emult.shape, f"{fs.path_links.shape[0]} integers >= 1"
            )
    if plat.shape != (fs.n_paths,):
        raise InputError("path_latency", plat.shape, f"shape ({fs.n_paths},)")
    # room per link for the list of its active sub-flows
    lp_ptr = np.zeros(fs.n_links + 1, np.int64)
    np.cumsum(np.bincount(fs.path_links, minlength=fs.n_links), out=lp_ptr[1:])
    out = simulate_kernel(
        fs.capacity,
        fs.path_ptr,
        fs.path_links,
        fs.path_flow(),
        fs.path_bytes(),
        plat,
        fs.flow_ptr,
        fs.start,
        fs.dep_ptr,
        fs.deps,
        rdep_ptr,
        rdep,
        lp_ptr,
        float(rtol),
        bool(record_series),
        emult,
        limit,
        ROW_SPACE,
    )
    release, finish, path_start, path_last, st, sl, sv, n_events, rounds, refills = out
    if 0 <= limit < refills:
        raise WorkLimitExceeded(refills, limit)
    link_bytes = np.bincount(
        fs.path_links,
        weights=np.repeat(fs.path_bytes(), np.diff(fs.path_ptr)) * emult,
        minlength=fs.n_links,
    )
    return SimResult(
        start=release,
        finish=finish,
        path_start=path_start,
        path_last_byte=path_last,
        path_finish=path_last + plat,
        link_bytes=link_bytes,
        capacity=fs.capacity,
        series_time=st,
        series_link=sl,
        series_load=sv,
        makespan=float(np.max(finish)) if fs.n_flows else 0.0,
        n_events=int(n_events),
        fill_rounds=int(rounds),
        simulated_flows=fs.n_flows,
        refills=int(refills),
    )


def expand_classes(
    result: SimResult, flows: FlowSet, class_of: np.ndarray, paths: bool = True
) -> SimResult:
    """The result of a simulation of merged flows, per original flow.

    ``flows`` is the simulated :class:`FlowSet` and flow ``i`` of the original set was merged into
    flow ``class_of[i]`` of it (as by :meth:`FlowSet.aggregate` or
    :meth:`topoopt.flowsim.network.FlowBuilder.build_classes`). Per-flow and per-sub-flow times
    are the class's (every member's; the paths of a member are its class's, in order); link
    bytes and loads are already every member's. ``paths=False``: the per-flow times only (the
    ``path_*`` arrays ``None``), for a caller that reads per-flow times and link bytes: the
    per-sub-flow arrays have one entry per path of every original flow, many times the flows
    where many flows share a pair of many paths (``subflow_guard.EXPANDED_PATH_BYTES``).

    Examples
    --------
    >>> fs = FlowSet.single_path([10.0], [0.0], size=[5.0] * 3, start=[0.0] * 3,
    ...                          paths=[[0], [0], [0]])
    >>> small, class_of = fs.aggregate()
    >>> res = expand_classes(simulate(small), small, class_of)
    >>> res.finish.tolist(), res.link_bytes.tolist(), res.simulated_flows
    ([1.5, 1.5, 1.5], [15.0], 1)
    """
    from topoopt.flowsim._symmetry_kernels import gather_csr_rows  # numba (flowsim.aot)

    class_of = np.asarray(class_of, np.int64).reshape(-1)
    if class_of.size and (class_of.min() < 0 or class_of.max() >= flows.n_flows):
        raise InputError("class_of", int(class_of.max()), f"flow ids 0..{flows.n_flows - 1}")
    if not isinstance(paths, bool):
        raise InputError("paths", paths, "True or False")
    if paths:
        sub = gather_csr_rows(np.ascontiguousarray(flows.flow_ptr, np.int64), class_of)
        p_start = result.path_start[sub]
        p_last = result.path_last_byte[sub]
        p_finish = result.path_finish[sub]
        del sub
    else:
        p_start = p_last = p_finish = None
    return SimResult(
        start=result.start[class_of],
        finish=result.finish[class_of],
        path_start=p_start,
        path_last_byte=p_last,
        path_finish=p_finish,
        link_bytes=result.link_bytes,
        capacity=result.capacity,
        series_time=result.series_time,
        series_link=result.series_link,
        series_load=result.series_load,
        makespan=result.makespan,
        n_events=result.n_events,
        fill_rounds=result.fill_rounds,
        simulated_flows=result.simulated_flows,
        refills=result.refills,
        reduction=result.reduction,
    )
