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

The result (:class:`SimResult`) has per-flow and per-sub-flow start and finish times, bytes per
link, the makespan (latest finish), and a compact piecewise-constant record of link loads: only the
links whose load changes at an event are recorded.

Performance: every event is a handful of vectorised numpy passes. After completions, only the
sub-flows whose rate was at least the smallest rate of a completing sub-flow are re-filled (the
others provably keep their rates, see :mod:`topoopt.flowsim.max_min`); arrivals re-fill everything
that is active.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.flowsim.flowset import FlowSet, _gather_rows
from topoopt.flowsim.max_min import fill_rates
from traffic.errors import InputError

__all__ = ["SimResult", "simulate"]


@dataclass(frozen=True, eq=False)
class SimResult:
    """What :func:`simulate` computed (seconds, bytes, bytes/s).

    Attributes
    ----------
    start, finish : numpy.ndarray
        ``(F,)`` start (after dependencies) and finish (including path latency) of each flow.
    path_start, path_last_byte, path_finish : numpy.ndarray
        ``(P,)`` per sub-flow: start, time its last byte is transmitted, finish (+ latency).
    link_bytes : numpy.ndarray
        ``(L,)`` bytes carried by each link.
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
        Total progressive-filling rounds over all events.
    """

    start: np.ndarray
    finish: np.ndarray
    path_start: np.ndarray
    path_last_byte: np.ndarray
    path_finish: np.ndarray
    link_bytes: np.ndarray
    capacity: np.ndarray
    series_time: np.ndarray
    series_link: np.ndarray
    series_load: np.ndarray
    makespan: float
    n_events: int
    fill_rounds: int

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


def simulate(flows: FlowSet, *, rtol: float = 1e-12, record_series: bool = True) -> SimResult:
    """Simulate a :class:`FlowSet` under max-min fair sharing (semantics in the module docstring).

    Parameters
    ----------
    flows : FlowSet
        Links, flows, weighted paths and dependencies.
    rtol : float, optional
        Relative time tolerance under which completions and arrivals are merged into one event.
    record_series : bool, optional
        Record the piecewise-constant link loads (``SimResult.series_*``).

    Returns
    -------
    SimResult

    Examples
    --------
    Two flows of 100 and 300 bytes on one 100 B/s link: they share 50/50 until the first ends at
    2 s, then the second runs alone and ends at 2 + 200/100 = 4 s.

    >>> fs = FlowSet.single_path([100.0], [0.0], size=[100.0, 300.0], start=[0.0, 0.0],
    ...                          paths=[[0], [0]])
    >>> simulate(fs).finish.tolist()
    [2.0, 4.0]
    """
    if not (np.isfinite(rtol) and 0 <= rtol < 1e-3):
        raise InputError("rtol", rtol, "a relative tolerance in [0, 1e-3)")
    return _Run(flows, rtol, record_series).run()


class _Run:
    """State of one simulation (arrays over sub-flows P, flows F and links L)."""

    def __init__(self, fs: FlowSet, rtol: float, record: bool):
        self.fs, self.rtol, self.record = fs, rtol, record
        n_f, n_p, n_l = fs.n_flows, fs.n_paths, fs.n_links
        self.pflow = fs.path_flow()
        self.pbytes = fs.path_bytes()
        self.plat = fs.path_latency()
        self.ptr, self.links = fs.path_ptr, fs.path_links
        self.cap = fs.capacity
        self.rate = np.zeros(n_p)
        self.t_ref = np.zeros(n_p)
        self.rem_ref = self.pbytes.copy()
        self.fin_est = np.full(n_p, np.inf)
        self.active = np.zeros(n_p, bool)
        self.load = np.zeros(n_l)
        self.path_start = np.full(n_p, np.nan)
        self.path_last = np.full(n_p, np.nan)
        self.n_left = np.diff(fs.flow_ptr).copy()
        self.dep_left = np.diff(fs.dep_ptr).copy()
        self.rdep_ptr, self.rdep = fs.dependents()
        self.release = np.full(n_f, np.inf)
        self.finish = np.full(n_f, np.nan)
        free = np.flatnonzero(self.dep_left == 0)
        self.release[free] = fs.start[free]
        self.queue = free[np.argsort(fs.start[free], kind="stable")]
        self.queue_t = self.release[self.queue]
        self.qpos = 0
        self.buffer = np.zeros(0, np.int64)  # released dependent flows not started yet
        self.series: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.n_events = 0
        self.rounds = 0

    # ------------------------------------------------------------------ helpers
    def _next_arrival(self) -> float:
        t = np.inf
        if self.qpos < self.queue.shape[0]:
            t = self.queue_t[self.qpos]
        if self.buffer.shape[0]:
            t = min(t, float(self.release[self.buffer].min()))
        return float(t)

    def _finish_flows(self, done_paths: np.ndarray) -> None:
        """Account finished sub-flows; finish flows whose sub-flows are all done; release their
        dependents."""
        if done_paths.shape[0] == 0:
            return
        fl = self.pflow[done_paths]
        np.subtract.at(self.n_left, fl, 1)
        fl = np.unique(fl)
        done = fl[self.n_left[fl] == 0]
        if done.shape[0] == 0:
            return
        fp = self.fs.flow_ptr
        ends = self.path_last + self.plat
        sel = _gather_rows(fp, done)
        lens = fp[done + 1] - fp[done]
        self.finish[done] = np.maximum.reduceat(ends[sel], np.cumsum(lens) - lens)
        waiting = self.rdep[_gather_rows(self.rdep_ptr, done)]
        if waiting.shape[0] == 0:
            return
        np.subtract.at(self.dep_left, waiting, 1)
        ready = np.unique(waiting[self.dep_left[waiting] == 0])
        if ready.shape[0] == 0:
            return
        dp = self.fs.dep_ptr
        dl = dp[ready + 1] - dp[ready]
        dep_fin = np.maximum.reduceat(
            self.finish[self.fs.deps[_gather_rows(dp, ready)]], np.cumsum(dl) - dl
        )
        self.release[ready] = np.maximum(self.fs.start[ready], dep_fin)
        self.buffer = np.concatenate([self.buffer, ready])

    def _take_arrivals(self, t: float, cut: float) -> np.ndarray:
        """Start every flow released by ``cut``; return its non-empty sub-flows."""
        fresh = []
        while True:
            q0 = self.qpos
            q1 = int(np.searchsorted(self.queue_t, cut, side="right"))
            new = self.queue[q0:q1] if q1 > q0 else np.zeros(0, np.int64)
            self.qpos = max(q0, q1)
            if self.buffer.shape[0]:
                due = self.release[self.buffer] <= cut
                if due.any():
                    new = np.concatenate([new, self.buffer[due]])
                    self.buffer = self.buffer[~due]
            if new.shape[0] == 0:
                break
            paths = _gather_rows(self.fs.flow_ptr, new)
            self.path_start[paths] = t
            empty = self.pbytes[paths] <= 0
            self.path_last[paths[empty]] = t
            fresh.append(paths[~empty])
            self._finish_flows(paths[empty])
        return np.concatenate(fresh) if fresh else np.zeros(0, np.int64)

    # ------------------------------------------------------------------ main loop
    def run(self) -> SimResult:
        fs = self.fs
        while True:
            t_c = float(self.fin_est.min()) if self.fin_est.shape[0] else np.inf
            t_a = self._next_arrival()
            t = min(t_c, t_a)
            if not np.isfinite(t):
                break
            self.n_events += 1
            cut = t + self.rtol * abs(t)
            done = np.flatnonzero(self.fin_est <= cut) if t_c <= cut else np.zeros(0, np.int64)
            r0 = np.inf
            if done.shape[0]:
                r0 = float(self.rate[done].min())
                self.path_last[done] = t
                self._retire(done)
                self._finish_flows(done)
            fresh = self._take_arrivals(t, cut)
            if fresh.shape[0]:
                r0 = 0.0
            self._refill(t, r0, fresh)
        link_bytes = np.bincount(
            self.links, weights=np.repeat(self.pbytes, np.diff(self.ptr)), minlength=fs.n_links
        )
        if self.series:
            st, sl, sv = (np.concatenate(x) for x in zip(*self.series, strict=True))
        else:
            st, sl, sv = np.zeros(0), np.zeros(0, np.int64), np.zeros(0)
        makespan = float(np.max(self.finish)) if fs.n_flows else 0.0
        return SimResult(
            start=self.release.copy(),
            finish=self.finish,
            path_start=self.path_start,
            path_last_byte=self.path_last,
            path_finish=self.path_last + self.plat,
            link_bytes=link_bytes,
            capacity=fs.capacity,
            series_time=st,
            series_link=sl,
            series_load=sv,
            makespan=makespan,
            n_events=self.n_events,
            fill_rounds=self.rounds,
        )

    def _retire(self, done: np.ndarray) -> None:
        ent = _gather_rows(self.ptr, done)
        lens = self.ptr[done + 1] - self.ptr[done]
        self.load -= np.bincount(
            self.links[ent], weights=np.repeat(self.rate[done], lens), minlength=self.fs.n_links
        )
        self.active[done] = False
        self.fin_est[done] = np.inf
        self.rate[done] = 0.0
        if self.record:
            self._touched = np.unique(self.links[ent])

    def _refill(self, t: float, r0: float, fresh: np.ndarray) -> None:
        touched = getattr(self, "_touched", None)
        self._touched = None
        if fresh.shape[0]:
            self.active[fresh] = True
            self.t_ref[fresh] = t
        if r0 == 0.0:
            rows = np.flatnonzero(self.active)
        elif np.isfinite(r0):
            rows = np.flatnonzero(self.active & (self.rate >= r0))
        else:
            rows = np.zeros(0, np.int64)
        if rows.shape[0]:
            lens = self.ptr[rows + 1] - self.ptr[rows]
            ent = _gather_rows(self.ptr, rows)
            e_links = self.links[ent]
            old = self.rate[rows]
            kept = self.load - np.bincount(
                e_links, weights=np.repeat(old, lens), minlength=self.fs.n_links
            )
            if rows.shape[0] == int(self.active.sum()):
                kept[:] = 0.0
            new, left, rounds = fill_rates(self.ptr, self.links, rows, self.cap - kept)
            self.rounds += rounds
            self.load = self.cap - left
            # Bytes sent at the old rate since the last change, then the new finish estimate.
            self.rem_ref[rows] -= old * (t - self.t_ref[rows])
            self.t_ref[rows] = t
            self.rate[rows] = new
            self.fin_est[rows] = t + self.rem_ref[rows] / new
            if self.record:
                touched = e_links if touched is None else np.concatenate([touched, e_links])
        if self.record and touched is not None and touched.shape[0]:
            ls = np.unique(touched)
            self.series.append((np.full(ls.shape[0], t), ls, self.load[ls].copy()))
