"""Compiled (numba) loops of the flow model: progressive filling and the event loop.

These are the hot paths behind :func:`topoopt.flowsim.max_min.fill_rates` and
:func:`topoopt.flowsim.simulator.simulate`; the semantics and the exactness argument are in those
modules' docstrings. Everything here works on flat ``int32`` / ``int64`` / ``float64`` arrays
(CSR incidence, slots, no Python objects) and allocates its work arrays once per call.

- :func:`fill_kernel`: one progressive filling of a set of sub-flows on given link capacities,
  freezing every flow of every *local bottleneck* link per round (the algorithm of
  :mod:`topoopt.flowsim.max_min`), four linear passes over the remaining flows per round
  (:func:`_rounds_slots`, which also starts the simulator's sparse re-fills).
- :func:`fill_links_mult`: the same filling one bottleneck link at a time, links taken in order
  of their fair share from a heap (a link met with a stale share goes back in), a bottleneck's
  flows found in its list of flows; the simulator's re-fill (:func:`_refill_slots`) on its own.
- :func:`simulate_kernel`: the whole event loop (completions, arrivals from a release-time heap,
  dependencies, the partial re-fill after each event, the link-load change log). The active
  sub-flows sit in slots ``0 .. n_act - 1`` (links, multiplicity, rate, bytes left, reference
  time and finish estimate side by side; a completion moves the last slot into the freed one),
  so the per-event scans read contiguous memory. Every link keeps the list of the slots
  crossing it (insert on arrival, swap-remove on completion), the sub-flows that last froze on
  it first, so a re-fill costs the links of the re-filled sub-flows plus about as many list
  entries, and builds no incidence of its own; a sub-flow's new rate and finish estimate are
  written when it freezes.

Examples
--------
>>> import numpy as np
>>> ptr = np.array([0, 2, 3, 4]); links = np.array([0, 1, 0, 1])
>>> rem = np.array([10.0, 10.0]); out = np.empty(3)
>>> fill_kernel(ptr, links, np.arange(3), rem, out)
1
>>> out.tolist(), rem.tolist()
([5.0, 5.0, 5.0], [0.0, 0.0])
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "REFILL_MARGIN",
    "RESYNC_EVERY",
    "ROUNDS_DENSITY",
    "SORT_WORK",
    "classes_kernel",
    "fill_kernel",
    "fill_kernel_mult",
    "fill_links_mult",
    "simulate_kernel",
]

REFILL_MARGIN = 1e-9
"""Relative margin under the proven threshold below which sub-flows keep their rates: a sub-flow
is kept only if its rate is below ``threshold * (1 - REFILL_MARGIN)``, so rounding in rates that
are mathematically equal to the threshold never keeps a flow that may change."""

RESYNC_EVERY = 256
"""Every this many events the per-link load is recomputed from the active sub-flows' rates (the
incremental update otherwise accumulates rounding)."""

ROUNDS_DENSITY = 1.0
"""The simulator's re-fill starts with rounds of local bottlenecks (:func:`_rounds_slots`, a few
linear passes) when it re-fills fewer than this many sub-flows per link they cross: then each
round freezes most of them, where the bottleneck-at-a-time heap would pop nearly every link
for a few sub-flows. Denser re-fills go straight to the heap (:func:`_refill_slots`)."""

ROUNDS_MIN_FRACTION = 0.1
"""Rounds stop (the heap takes the rest) once a round freezes less than this fraction of the
sub-flows left, so a chain of bottlenecks does not cost a pass per link."""

SORT_WORK = 32
"""The event loop re-sorts its slots by group (:func:`_sort_slots`) once it has re-filled this
many sub-flows per active one since the last sort. A sort costs about one pass over the slots;
it puts the sub-flows that freeze on one link next to each other in memory, which a
bottleneck's walk then reads in order (they leave their group rarely, so the order lasts)."""


@njit(cache=True, error_model="numpy")
def fill_kernel(ptr, links, rows, rem, out):
    """Max-min fair rates of the sub-flows ``rows`` on the capacities ``rem`` (bytes/s), by
    rounds of local bottlenecks (:func:`_rounds_slots` run to the end).

    Writes the rate of ``rows[i]`` to ``out[i]``, subtracts the allocation from ``rem`` (clipped
    at 0) and returns the number of rounds.
    """
    return fill_kernel_mult(ptr, links, rows, np.ones(ptr.shape[0] - 1, np.int64), rem, out)


@njit(cache=True, error_model="numpy")
def fill_kernel_mult(ptr, links, rows, mult, rem, out):
    """:func:`fill_kernel` where row ``f`` stands for ``mult[f]`` identical sub-flows (a class):
    it counts ``mult[f]`` times on each of its links (a link's share is ``rem / sum of the
    multiplicities of its unfrozen rows``), every member gets the rate written to ``out`` and
    the class takes ``mult[f]`` times that rate from ``rem``."""
    n = rows.shape[0]
    s_links, s_nl, s_mult, s_f, s_in, wc, slinks, n_sl = _slots_of(ptr, links, rows, mult, rem)
    order = np.arange(max(n, 1))
    n_l = rem.shape[0]
    rounds, _, _ = _rounds_slots(
        order, n, s_links, s_nl, s_mult, s_f, s_in, 0.0, rem, wc, slinks, n_sl,
        np.empty(max(n_l, 1)), np.zeros(max(n_l, 1), np.bool_), np.empty(max(n, 1)), 0.0,
    )  # fmt: skip
    for i in range(n):
        out[i] = s_f[i, 0]
    return rounds


@njit(cache=True)
def _slots_of(ptr, links, rows, mult, rem):
    """Slots (the layout of :func:`simulate_kernel`) for the sub-flows ``rows`` of the CSR
    incidence ``ptr``, ``links``, all marked for filling at rate 0 with nothing left to send:
    ``(s_links, s_nl, s_mult, s_f, s_in, wc, slinks, n_sl)`` with ``wc`` their count per link
    (with multiplicity ``mult``) and ``slinks[:n_sl]`` the links they cross (each once)."""
    n_l = rem.shape[0]
    n = rows.shape[0]
    width = 1
    for i in range(n):
        w = ptr[rows[i] + 1] - ptr[rows[i]]
        if w > width:
            width = w
    s_links = np.empty((max(n, 1), width), np.int32)
    s_nl = np.empty(max(n, 1), np.int64)
    s_mult = np.empty(max(n, 1), np.int64)
    s_f = np.zeros((max(n, 1), 4))
    s_in = np.ones(max(n, 1), np.bool_)
    wc = np.zeros(n_l, np.int64)
    slinks = np.empty(max(n_l, 1), np.int64)
    n_sl = 0
    for i in range(n):
        f = rows[i]
        s_nl[i] = ptr[f + 1] - ptr[f]
        s_mult[i] = mult[f]
        for j in range(s_nl[i]):
            lk = links[ptr[f] + j]
            s_links[i, j] = lk
            if wc[lk] == 0:
                slinks[n_sl] = lk
                n_sl += 1
            wc[lk] += mult[f]
    return s_links, s_nl, s_mult, s_f, s_in, wc, slinks, n_sl


@njit(cache=True)
def _lheap_pop(hk, hl, size):
    size -= 1
    _lheap_sift(hk, hl, size, 0, hk[size], hl[size])
    return size


@njit(cache=True)
def _lheap_sift(hk, hl, size, i, key, val):
    """Put ``(key, val)`` at slot ``i`` of the 4-ary min-heap ``hk[:size]`` (children of ``i``:
    ``4i + 1 .. 4i + 4``; half the depth of a binary heap) and sift it down."""
    while True:
        a = 4 * i + 1
        if a >= size:
            break
        m = a
        mk = hk[a]
        e = min(a + 4, size)
        for b in range(a + 1, e):
            v = hk[b]
            if v < mk:
                mk = v
                m = b
        if mk >= key:
            break
        hk[i] = mk
        hl[i] = hl[m]
        i = m
    hk[i] = key
    hl[i] = val


@njit(cache=True, error_model="numpy")
def fill_links_mult(ptr, links, rows, mult, rem, out):
    """Max-min fair rates of the sub-flows ``rows`` on the capacities ``rem``, one bottleneck
    link at a time: the simulator's re-fill (:func:`_refill_slots`) on its own, with the slots
    and link lists built here. Same result as :func:`fill_kernel_mult` (row ``f`` counts
    ``mult[f]`` times); writes ``out``, updates ``rem`` (clipped at 0), returns the number of
    saturated links.

    Links are taken in order of their share ``rem / count`` over unfrozen rows. The link with
    the smallest share saturates first: all its unfrozen rows freeze at that share, which is
    subtracted from their other links, whose shares can only grow (a frozen row takes no more
    than any of its links' shares). So a link's recorded key is never above its current share,
    and a link on top of the heap whose current share is at most every other key has the
    smallest share of all; otherwise it goes back in at its current share.
    """
    n_l = rem.shape[0]
    n = rows.shape[0]
    s_links, s_nl, s_mult, s_f, s_in, wc, slinks, n_sl = _slots_of(ptr, links, rows, mult, rem)
    alen = np.zeros(n_l, np.int64)
    for i in range(n):
        for j in range(s_nl[i]):
            alen[s_links[i, j]] += 1
    lp_ptr = np.zeros(n_l + 1, np.int64)
    for lk in range(n_l):
        lp_ptr[lk + 1] = lp_ptr[lk] + alen[lk]
    alen[:] = 0
    adj_s = np.empty(max(lp_ptr[n_l], 1), np.int32)
    for i in range(n):
        for j in range(s_nl[i]):
            lk = s_links[i, j]
            adj_s[lp_ptr[lk] + alen[lk]] = i
            alen[lk] += 1
    steps = _refill_slots(
        s_links, s_nl, s_mult, s_f, s_in, n, 0.0, rem, slinks, n_sl, lp_ptr, alen, adj_s, wc,
        np.empty(max(n_l, 1)), np.empty(max(n_l, 1), np.int64), np.empty(N_BUCKETS, np.int64),
        np.empty(max(n_l, 1), np.int64), np.empty(1, np.int64), np.empty(1, np.int64), adj_s,
        np.empty((1, 1), np.int32), False,
    )  # fmt: skip
    for i in range(n):
        out[i] = s_f[i, 0]
    return steps


# ---------------------------------------------------------------------- release-time heap
@njit(cache=True)
def _heap_push(hk, hv, size, key, val):
    i = size
    hk[i] = key
    hv[i] = val
    while i > 0:
        parent = (i - 1) // 2
        if hk[parent] > hk[i] or (hk[parent] == hk[i] and hv[parent] > hv[i]):
            hk[parent], hk[i] = hk[i], hk[parent]
            hv[parent], hv[i] = hv[i], hv[parent]
            i = parent
        else:
            break
    return size + 1


@njit(cache=True)
def _heap_pop(hk, hv, size):
    val = hv[0]
    size -= 1
    hk[0] = hk[size]
    hv[0] = hv[size]
    i = 0
    while True:
        a = 2 * i + 1
        b = a + 1
        m = i
        if a < size and (hk[a] < hk[m] or (hk[a] == hk[m] and hv[a] < hv[m])):
            m = a
        if b < size and (hk[b] < hk[m] or (hk[b] == hk[m] and hv[b] < hv[m])):
            m = b
        if m == i:
            break
        hk[m], hk[i] = hk[i], hk[m]
        hv[m], hv[i] = hv[i], hv[m]
        i = m
    return val, size


# ---------------------------------------------------------------------- event loop
@njit(cache=True)
def _path_done(
    p, pflow, n_left, flow_ptr, path_last, plat, finish, rdep_ptr, rdep, dep_left, dep_ptr, deps,
    start, release, hk, hv, hsize,
):  # fmt: skip
    """Account one finished sub-flow; finish its flow when it was the last; release dependents
    (push them on the heap). Returns the new heap size."""
    f = pflow[p]
    n_left[f] -= 1
    if n_left[f] > 0:
        return hsize
    end = -np.inf
    for q in range(flow_ptr[f], flow_ptr[f + 1]):
        v = path_last[q] + plat[q]
        if v > end:
            end = v
    finish[f] = end
    for k in range(rdep_ptr[f], rdep_ptr[f + 1]):
        g = rdep[k]
        dep_left[g] -= 1
        if dep_left[g] == 0:
            rel = start[g]
            for j in range(dep_ptr[g], dep_ptr[g + 1]):
                v = finish[deps[j]]
                if v > rel:
                    rel = v
            release[g] = rel
            hsize = _heap_push(hk, hv, hsize, rel, g)
    return hsize


@njit(cache=True)
def _grow(a, need):
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=True, error_model="numpy")
def simulate_kernel(
    cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
    rdep, lp_ptr, rtol, record, pmult, max_refills, rounds_density, sort_work,
):  # fmt: skip
    """Run the event loop of :func:`topoopt.flowsim.simulator.simulate` on flat arrays.

    Sub-flow ``p`` stands for ``pmult[p]`` identical sub-flows (its flow's multiplicity):
    ``pbytes[p]`` and its rate are a member's; link counts, loads and the filling count it
    ``pmult[p]`` times. ``lp_ptr[l]`` is where link ``l``'s slots start in the list of its
    active sub-flows (``lp_ptr[l+1] - lp_ptr[l]`` = the number of sub-flows crossing it).

    The active sub-flows live in slots ``0 .. n_act - 1`` (``act[i]`` is the sub-flow in slot
    ``i``; ``s_f[i]`` its rate, bytes left at its reference time, that time and its finish
    estimate); a completion moves the last slot into the freed one. Slot numbers, links and
    list positions are ``int32`` (fewer than 2**31 incidence entries).

    Returns ``(release, finish, path_start, path_last, series_time, series_link, series_load,
    n_events, fill_rounds, refilled)`` where ``refilled`` counts the sub-flow re-fills done.
    With ``max_refills >= 0`` the loop stops as soon as more re-fills than that are needed
    (``refilled > max_refills`` on return; the other results are then incomplete). A re-fill of
    fewer than ``rounds_density`` sub-flows per link crossed starts with rounds of local
    bottlenecks (see :data:`ROUNDS_DENSITY`; 0 never, ``inf`` always: same rates either way).
    The slots are re-sorted by group once ``sort_work`` re-fills per active sub-flow have been
    done since the last sort (see :data:`SORT_WORK`; 0 at every event: the order only affects
    speed).
    """
    n_p = pbytes.shape[0]
    n_f = start.shape[0]
    n_l = cap.shape[0]
    n_e = path_links.shape[0]
    width = 1
    for p in range(n_p):
        w = path_ptr[p + 1] - path_ptr[p]
        if w > width:
            width = w
    # ---- slot arrays (slot i holds active sub-flow act[i])
    act = np.empty(max(n_p, 1), np.int64)
    s_links = np.empty((max(n_p, 1), width), np.int32)  # its links
    s_slot = np.empty((max(n_p, 1), width), np.int32)  # where each sits in that link's list
    s_nl = np.empty(max(n_p, 1), np.int64)  # how many links
    s_mult = np.empty(max(n_p, 1), np.int64)
    s_f = np.empty((max(n_p, 1), 4))  # rate, bytes left at t_ref, t_ref, finish estimate
    s_in = np.zeros(max(n_p, 1), np.bool_)  # being re-filled
    s_bj = np.full(max(n_p, 1), -1, np.int64)  # which of its links it last froze on (-1: none)
    n_act = 0
    load = np.zeros(n_l)
    nact = np.zeros(n_l, np.int64)
    resid = np.zeros(n_l)
    path_start = np.full(n_p, np.nan)
    path_last = np.full(n_p, np.nan)
    n_left = flow_ptr[1:] - flow_ptr[:-1]
    dep_left = dep_ptr[1:] - dep_ptr[:-1]
    release = np.full(n_f, np.inf)
    finish = np.full(n_f, np.nan)
    hk = np.empty(max(n_f, 1))
    hv = np.empty(max(n_f, 1), np.int64)
    hsize = 0
    for f in range(n_f):
        if dep_left[f] == 0:
            release[f] = start[f]
            hsize = _heap_push(hk, hv, hsize, start[f], f)
    # Active sub-flows per link (slots lp_ptr[l] .. lp_ptr[l] + alen[l], holding slot numbers
    # and the index of the link in that slot's path), kept up to date by swap-removal.
    alen = np.zeros(n_l, np.int64)
    gsz = np.zeros(n_l, np.int64)
    adj_s = np.empty(max(n_e, 1), np.int32)
    adj_j = np.empty(max(n_e, 1), np.int32)
    wc = np.zeros(n_l, np.int64)
    rows = np.empty(max(n_p, 1), np.int64)
    wlinks = np.empty(max(n_l, 1), np.int64)
    share = np.empty(max(n_l, 1))
    bott = np.zeros(max(n_l, 1), np.bool_)
    fm = np.empty(max(n_p, 1))
    lhk = np.empty(max(n_l, 1))
    lhl = np.empty(max(n_l, 1), np.int64)
    bhead = np.empty(N_BUCKETS, np.int64)
    bnext = np.empty(max(n_l, 1), np.int64)
    done = np.empty(max(n_p, 1), np.int64)
    mark = np.full(n_l, -1, np.int64)
    xmark = np.full(n_l, -1, np.int64)
    slinks = np.empty(max(n_l, 1), np.int64)
    wbuf = np.empty(max(n_p, 1))
    mbuf = np.empty(max(n_p, 1), np.int64)
    touched = np.empty(n_l, np.int64)
    # buffers of the slot sort
    perm = np.empty(max(n_p, 1), np.int64)
    gstart = np.empty(n_l + 1, np.int64)
    b_act = np.empty_like(act)
    b_links = np.empty_like(s_links)
    b_slot = np.empty_like(s_slot)
    b_f = np.empty_like(s_f)
    b_i = np.empty_like(s_nl)
    sorted_at = 0
    st = np.empty(16)
    sl = np.empty(16, np.int64)
    sv = np.empty(16)
    ns = 0
    n_events = 0
    rounds = 0
    refilled = 0
    t_now = 0.0
    while True:
        if refilled - sorted_at > sort_work * n_act:
            sorted_at = refilled
            _sort_slots(
                n_act, n_l, act, s_links, s_slot, s_nl, s_mult, s_f, s_bj, adj_s, perm, gstart,
                b_act, b_links, b_slot, b_f, b_i,
            )  # fmt: skip
        t_c = np.inf
        for i in range(n_act):
            v = s_f[i, 3]
            if v < t_c:
                t_c = v
        t_a = hk[0] if hsize > 0 else np.inf
        t = min(t_c, t_a)
        if t == np.inf:
            break
        if t < t_now:
            t = t_now  # a finish estimate rounded just below the current time
        t_now = t
        n_events += 1
        cut = t + rtol * abs(t)
        r0 = np.inf
        n_t = 0
        # ---- completions: retire (the last slot moves into the freed one), then finish flows
        # and release dependents
        n_done = 0
        if t_c <= cut:
            i = 0
            while i < n_act:
                if s_f[i, 3] > cut:
                    i += 1
                    continue
                p = act[i]
                done[n_done] = p
                n_done += 1
                rp = s_f[i, 0]
                if rp < r0:
                    r0 = rp
                path_last[p] = t
                mp = s_mult[i]
                for j in range(s_nl[i]):
                    lk = s_links[i, j]
                    load[lk] -= rp * mp
                    nact[lk] -= mp
                    if record and mark[lk] != n_events:
                        mark[lk] = n_events
                        touched[n_t] = lk
                        n_t += 1
                    # swap-remove slot i from the link's list (out of its group first)
                    s = s_slot[i, j]
                    if s_bj[i] == j:
                        q = lp_ptr[lk] + gsz[lk] - 1
                        _swap_entries(s, q, adj_s, adj_j, s_slot)
                        gsz[lk] -= 1
                        s = q
                    last = lp_ptr[lk] + alen[lk] - 1
                    if s != last:
                        q = adj_s[last]
                        jq = adj_j[last]
                        adj_s[s] = q
                        adj_j[s] = jq
                        s_slot[q, jq] = s
                    alen[lk] -= 1
                n_act -= 1
                if i != n_act:
                    _move_slot(n_act, i, act, s_links, s_slot, s_nl, s_mult, s_f, s_bj, adj_s)
            for k in range(n_done):
                hsize = _path_done(
                    done[k], pflow, n_left, flow_ptr, path_last, plat, finish, rdep_ptr, rdep,
                    dep_left, dep_ptr, deps, start, release, hk, hv, hsize,
                )  # fmt: skip
        # ---- arrivals released by `cut` (zero-byte sub-flows finish on the spot)
        n_old = n_act
        while hsize > 0 and hk[0] <= cut:
            f, hsize = _heap_pop(hk, hv, hsize)
            for p in range(flow_ptr[f], flow_ptr[f + 1]):
                path_start[p] = t
                if pbytes[p] <= 0.0:
                    path_last[p] = t
                    hsize = _path_done(
                        p, pflow, n_left, flow_ptr, path_last, plat, finish, rdep_ptr, rdep,
                        dep_left, dep_ptr, deps, start, release, hk, hv, hsize,
                    )  # fmt: skip
                    continue
                i = n_act
                n_act += 1
                act[i] = p
                s_f[i, 0] = 0.0
                s_f[i, 1] = pbytes[p]
                s_f[i, 2] = t
                s_f[i, 3] = np.inf
                s_bj[i] = -1
                mp = pmult[p]
                s_mult[i] = mp
                s_nl[i] = path_ptr[p + 1] - path_ptr[p]
                for j in range(s_nl[i]):
                    lk = path_links[path_ptr[p] + j]
                    s_links[i, j] = lk
                    nact[lk] += mp
                    s = lp_ptr[lk] + alen[lk]
                    adj_s[s] = i
                    adj_j[s] = j
                    s_slot[i, j] = s
                    alen[lk] += 1
        if n_act > n_old:
            # Threshold for arrivals (simulator docstring, point 2): on each link of an arriving
            # sub-flow, the water level x at which the sub-flows already there, capped at their
            # old rates, plus every sub-flow with no rate yet, uncapped, fill the link.
            for i in range(n_old, n_act):
                for j in range(s_nl[i]):
                    lk = s_links[i, j]
                    if xmark[lk] == n_events:
                        continue
                    xmark[lk] = n_events
                    v = _water_level(
                        lk, cap[lk], nact[lk], lp_ptr, alen, adj_s, s_f[:, 0], s_mult, wbuf, mbuf
                    )
                    if v < r0:
                        r0 = v
        if r0 == np.inf:
            if record and n_t > 0:
                st, sl, sv, ns = _log(st, sl, sv, ns, t, touched, n_t, load)
            continue
        # ---- re-fill: every sub-flow whose rate may change (the others provably keep theirs);
        # its load comes off its links, which are counted for the filling
        thr = r0 * (1.0 - REFILL_MARGIN)
        n_rows = 0
        n_sl = 0
        for i in range(n_act):
            if i < n_old and s_f[i, 0] < thr:
                continue
            rows[n_rows] = i
            n_rows += 1
            s_in[i] = True
            mf = s_mult[i]
            rp = s_f[i, 0] * mf
            for j in range(s_nl[i]):
                lk = s_links[i, j]
                load[lk] -= rp
                c = wc[lk]
                if c == 0:
                    slinks[n_sl] = lk
                    n_sl += 1
                wc[lk] = c + mf
        if n_rows == 0:
            if record and n_t > 0:
                st, sl, sv, ns = _log(st, sl, sv, ns, t, touched, n_t, load)
            continue
        refilled += n_rows
        if 0 <= max_refills < refilled:
            break  # over the work limit: the caller reports it (nothing returned is complete)
        if n_rows == n_act or n_events % RESYNC_EVERY == 0:
            # Recompute the load of the kept sub-flows from scratch (no accumulated rounding).
            load[:] = 0.0
            for i in range(n_old):
                if not s_in[i]:
                    rp = s_f[i, 0] * s_mult[i]
                    for j in range(s_nl[i]):
                        load[s_links[i, j]] += rp
        for k in range(n_sl):
            lk = slinks[k]
            v = cap[lk] - load[lk]
            resid[lk] = v if v > 0.0 else 0.0
            if record and mark[lk] != n_events:
                mark[lk] = n_events
                touched[n_t] = lk
                n_t += 1
        # links for the heap: all of them, or (after rounds, which compact their list) those
        # still carrying an unfrozen sub-flow; `slinks` stays whole for the load update below
        heap_links = slinks
        n_wl = n_sl
        n_un = n_rows
        if n_rows < rounds_density * n_sl:
            wlinks[:n_sl] = slinks[:n_sl]
            heap_links = wlinks
            nr, n_un, n_wl = _rounds_slots(
                rows, n_rows, s_links, s_nl, s_mult, s_f, s_in, t, resid, wc, wlinks, n_sl,
                share, bott, fm, ROUNDS_MIN_FRACTION,
            )  # fmt: skip
            rounds += nr
        rounds += _refill_slots(
            s_links, s_nl, s_mult, s_f, s_in, n_un, t, resid, heap_links, n_wl, lp_ptr, alen,
            adj_s, wc, lhk, lhl, bhead, bnext, s_bj, gsz, adj_j, s_slot, True,
        )  # fmt: skip
        for k in range(n_sl):
            lk = slinks[k]
            load[lk] = cap[lk] - resid[lk]
        if record and n_t > 0:
            st, sl, sv, ns = _log(st, sl, sv, ns, t, touched, n_t, load)
    return (
        release,
        finish,
        path_start,
        path_last,
        st[:ns].copy(),
        sl[:ns].copy(),
        sv[:ns].copy(),
        n_events,
        rounds,
        refilled,
    )


@njit(cache=True, error_model="numpy", inline="always")
def _freeze(i, level, t, s_links, s_nl, s_mult, s_f, s_in, resid, wc):
    """Freeze re-filled slot ``i`` at rate ``level`` at time ``t``: it leaves the set
    (``s_in``), takes ``level`` times its multiplicity from each of its links (``resid``,
    clipped at 0) and leaves their counts ``wc``; its bytes left are brought to ``t`` at its old
    rate, then it gets the new rate and finish estimate. Returns its multiplicity."""
    s_in[i] = False
    mf = s_mult[i]
    take = level * mf
    for j in range(s_nl[i]):
        m = s_links[i, j]
        resid[m] = max(resid[m] - take, 0.0)
        wc[m] -= mf
    rem = s_f[i, 1] - s_f[i, 0] * (t - s_f[i, 2])
    s_f[i, 0] = level
    s_f[i, 1] = rem
    s_f[i, 2] = t
    s_f[i, 3] = t + rem / level if level > 0.0 else np.inf
    return mf


@njit(cache=True, error_model="numpy")
def _rounds_slots(
    rows, n_rows, s_links, s_nl, s_mult, s_f, s_in, t, resid, wc, slinks, n_sl, share, bott, fm,
    min_frac,
):  # fmt: skip
    """Rounds of local-bottleneck filling (the algorithm of :func:`fill_kernel`) of the slots
    ``rows[:n_rows]`` (marked in ``s_in``, counted in ``wc``) on the capacities ``resid``, their
    links ``slinks[:n_sl]``: every round freezes all the slots of every link whose share is the
    smallest share of each of its slots' links, writing rate and finish estimate as
    :func:`_refill_slots` does. Stops when all are frozen or a round freezes less than the
    fraction ``min_frac`` of those left (with 0, only when all are: every round freezes at
    least the slots of the link with the smallest share). Returns ``(rounds, n_rows, n_sl)``:
    the slots still unfrozen are ``rows[:n_rows]`` (still marked and counted), the links still
    carrying one are ``slinks[:n_sl]``, ready for :func:`_refill_slots`. ``share``, ``bott``
    (per link) and ``fm`` (per row) are scratch."""
    rounds = 0
    while n_rows > 0:
        for k in range(n_sl):
            lk = slinks[k]
            share[lk] = resid[lk] / wc[lk]
            bott[lk] = True
        for k in range(n_rows):
            i = rows[k]
            mm = np.inf
            for j in range(s_nl[i]):
                v = share[s_links[i, j]]
                if v < mm:
                    mm = v
            fm[k] = mm
        for k in range(n_rows):
            i = rows[k]
            mm = fm[k]
            for j in range(s_nl[i]):
                lk = s_links[i, j]
                if mm < share[lk]:
                    bott[lk] = False
        w = 0
        for k in range(n_rows):
            i = rows[k]
            frozen = False
            for j in range(s_nl[i]):
                if bott[s_links[i, j]]:
                    frozen = True
                    break
            if not frozen:
                rows[w] = i
                w += 1
                continue
            _freeze(i, fm[k], t, s_links, s_nl, s_mult, s_f, s_in, resid, wc)
        rounds += 1
        froze = n_rows - w
        n_rows = w
        v = 0
        for k in range(n_sl):
            lk = slinks[k]
            if wc[lk] > 0:
                slinks[v] = lk
                v += 1
        n_sl = v
        if froze < min_frac * (n_rows + froze):
            break
    return rounds, n_rows, n_sl


@njit(cache=True)
def _move_slot(a, b, act, s_links, s_slot, s_nl, s_mult, s_f, s_bj, adj_s):
    """Move the active sub-flow in slot ``a`` to slot ``b`` (its link lists follow)."""
    act[b] = act[a]
    s_bj[b] = s_bj[a]
    s_nl[b] = s_nl[a]
    s_mult[b] = s_mult[a]
    for c in range(4):
        s_f[b, c] = s_f[a, c]
    for j in range(s_nl[a]):
        s_links[b, j] = s_links[a, j]
        s = s_slot[a, j]
        s_slot[b, j] = s
        adj_s[s] = b


@njit(cache=True)
def _sort_slots(
    n_act, n_l, act, s_links, s_slot, s_nl, s_mult, s_f, s_bj, adj_s, perm, gstart, b_act,
    b_links, b_slot, b_f, b_i,
):  # fmt: skip
    """Renumber the active slots so that the sub-flows of each group (those that last froze on
    one link; :func:`_refill_slots`) are consecutive, groups in link order, ungrouped sub-flows
    last (a counting sort, stable); the link lists follow (``adj_s``). Run between events (no
    slot marked for a re-fill). ``perm``, ``gstart`` and the ``b_*`` arrays are scratch of the
    slot arrays' sizes."""
    gstart[:] = 0
    for i in range(n_act):
        g = s_links[i, s_bj[i]] if s_bj[i] >= 0 else n_l
        gstart[g] += 1
    acc = 0
    for g in range(n_l + 1):
        c = gstart[g]
        gstart[g] = acc
        acc += c
    for i in range(n_act):
        g = s_links[i, s_bj[i]] if s_bj[i] >= 0 else n_l
        perm[i] = gstart[g]  # old slot i -> new slot
        gstart[g] += 1
    for i in range(n_act):
        k = perm[i]
        b_act[k] = act[i]
        for c in range(4):
            b_f[k, c] = s_f[i, c]
        for j in range(s_nl[i]):
            b_links[k, j] = s_links[i, j]
            b_slot[k, j] = s_slot[i, j]
            adj_s[s_slot[i, j]] = k
    act[:n_act] = b_act[:n_act]
    s_f[:n_act] = b_f[:n_act]
    s_links[:n_act] = b_links[:n_act]
    s_slot[:n_act] = b_slot[:n_act]
    for arr in (s_nl, s_mult, s_bj):
        for i in range(n_act):
            b_i[perm[i]] = arr[i]
        arr[:n_act] = b_i[:n_act]


@njit(cache=True, inline="always")
def _swap_entries(a, b, adj_s, adj_j, s_slot):
    """Swap entries ``a`` and ``b`` of the link lists (their slots' back pointers follow)."""
    ia = adj_s[a]
    ja = adj_j[a]
    ib = adj_s[b]
    jb = adj_j[b]
    adj_s[a] = ib
    adj_j[a] = jb
    adj_s[b] = ia
    adj_j[b] = ja
    s_slot[ib, jb] = a
    s_slot[ia, ja] = b


@njit(cache=True, error_model="numpy", inline="always")
def _saturate(
    lk, level, c, t, s_links, s_nl, s_mult, s_f, s_in, resid, lp_ptr, alen, adj_s, wc, s_bj, gsz,
    adj_j, s_slot, track,
):  # fmt: skip
    """Saturate link ``lk`` at ``level``: freeze its ``c`` (with multiplicity) unfrozen marked
    slots, found in its list (:func:`_refill_slots`). Returns how many slots froze."""
    base = lp_ptr[lk]
    n = 0
    for s in range(base, base + alen[lk]):
        i = adj_s[s]
        if not s_in[i]:
            continue
        n += 1
        mf = _freeze(i, level, t, s_links, s_nl, s_mult, s_f, s_in, resid, wc)
        if track and s_bj[i] != adj_j[s]:
            # i now freezes on lk: it joins lk's group (the front of lk's list, where the next
            # walks look first) and leaves its old one
            jo = s_bj[i]
            if jo >= 0:
                m = s_links[i, jo]
                _swap_entries(s_slot[i, jo], lp_ptr[m] + gsz[m] - 1, adj_s, adj_j, s_slot)
                gsz[m] -= 1
            s_bj[i] = adj_j[s]
            _swap_entries(s, base + gsz[lk], adj_s, adj_j, s_slot)
            gsz[lk] += 1
        if c == mf:
            break  # the link's last unfrozen re-filled slot
        c -= mf
    return n


BUCKET_BITS = 10
"""The re-fill's bucket queue (:func:`_refill_slots`) splits each factor of 2 of fair shares
into ``2**BUCKET_BITS`` buckets (fewer when the shares span more than :data:`N_BUCKETS` of
them)."""

N_BUCKETS = 8192
"""Buckets of the re-fill's queue; shares beyond them go to a heap."""


@njit(cache=True, error_model="numpy")
def _refill_slots(
    s_links, s_nl, s_mult, s_f, s_in, n_rows, t, resid, slinks, n_sl, lp_ptr, alen, adj_s, wc,
    hk, hl, bhead, bnext, s_bj, gsz, adj_j, s_slot, track,
):  # fmt: skip
    """Progressive filling of the ``n_rows`` slots marked in ``s_in`` on the capacities
    ``resid`` left by the others, one bottleneck link at a time (the algorithm of
    :func:`fill_links_mult`): the slots of a bottleneck link are found in its list
    ``adj_s[lp_ptr[l] : lp_ptr[l] + alen[l]]``, skipping those not being re-filled.
    ``slinks[:n_sl]`` are the links of the marked slots (each once) and ``wc`` counts the
    marked slots on each link (with multiplicity ``s_mult``); both come back cleared
    (``s_in`` all False, ``wc`` all 0). A slot frozen at level ``x`` at time ``t`` gets its bytes
    left brought to ``t`` at its old rate, then rate ``x`` and its new finish estimate.
    ``hk``, ``hl``, ``bnext`` (one slot per link) and ``bhead`` (:data:`N_BUCKETS`) are
    scratch. Returns the number of bottleneck links saturated.

    The links wait in a *bucket queue* by fair share: the bits of a non-negative double,
    read as an integer, grow with its value, so their top bits (sign, exponent and
    :data:`BUCKET_BITS` of mantissa, fewer if the shares span too many buckets) number
    buckets in order of share. A link sits in the bucket of its recorded share, which is never
    above its current one (shares only grow during a filling: a frozen slot takes no more
    than any of its links' shares). The lowest non-empty bucket is scanned: each link's
    current share is computed, links whose share has left the bucket move up, links with no
    marked slot left drop out, and the smallest of the rest is the smallest share of all (every
    other bucket's links have shares at least their bucket's bottom): that link saturates.
    Links whose shares lie beyond the last bucket are then taken from a 4-ary heap
    (``hk``, ``hl``), with the same rule for stale keys. Either way the filling stops as soon as
    every marked slot is frozen.

    With ``track``, a slot frozen on link ``l`` joins ``l``'s *group*, the first ``gsz[l]``
    entries of ``l``'s list (``s_bj[i]`` = which of its links it is grouped on, -1 for none;
    ``adj_j`` and ``s_slot`` are the back pointers the swaps keep right). Bottlenecks change
    little from one event to the next, so the walk of a saturating link finds the slots it
    freezes first and stops at the last one: order within a list only affects speed."""
    left = n_rows
    steps = 0
    if n_sl == 0 or left == 0:
        return 0
    # bucket numbering: share bits >> shift, offset so that the smallest share is in bucket 0
    bits = hk.view(np.int64)
    lo = np.int64(0x7FFFFFFFFFFFFFFF)
    hi = np.int64(0)
    for k in range(n_sl):
        lk = slinks[k]
        hk[k] = resid[lk] / wc[lk]
        b = bits[k]
        if b < lo:
            lo = b
        if b > hi and b < np.int64(0x7FF0000000000000):
            hi = b
    shift = 52 - BUCKET_BITS
    while (hi >> shift) - (lo >> shift) >= N_BUCKETS - 1 and shift < 62:
        shift += 1
    qlo = lo >> shift
    nb = N_BUCKETS - 1  # bucket nb - 1: shares beyond the numbered range
    for b in range(nb):
        bhead[b] = -1
    for k in range(n_sl):
        lk = slinks[k]
        b = min((bits[k] >> shift) - qlo, nb - 1)
        bnext[lk] = bhead[b]
        bhead[b] = lk
    b = 0
    fb = np.empty(1)
    fbits = fb.view(np.int64)
    while left > 0 and b < nb - 1:
        if bhead[b] < 0:
            b += 1
            continue
        # scan bucket b: move links whose share grew out of it, drop links with nothing left,
        # keep the smallest share aside
        best = -1
        bestv = np.inf
        lk = bhead[b]
        bhead[b] = -1
        while lk >= 0:
            nxt = bnext[lk]
            c = wc[lk]
            if c > 0:
                v = resid[lk] / c
                fb[0] = v
                q = min((fbits[0] >> shift) - qlo, nb - 1)
                if q > b:
                    bnext[lk] = bhead[q]
                    bhead[q] = lk
                elif best < 0 or v < bestv:
                    if best >= 0:
                        bnext[best] = bhead[b]
                        bhead[b] = best
                    best = lk
                    bestv = v
                else:
                    bnext[lk] = bhead[b]
                    bhead[b] = lk
            lk = nxt
        if best < 0:
            continue
        steps += 1
        left -= _saturate(
            best, bestv, wc[best], t, s_links, s_nl, s_mult, s_f, s_in, resid, lp_ptr, alen,
            adj_s, wc, s_bj, gsz, adj_j, s_slot, track,
        )  # fmt: skip
    if left == 0:
        return steps
    # the rest from a heap (built in linear time): a link met on top with a stale key is taken
    # if its share is still the smallest key, else sifted back in at its current share
    hs = 0
    lk = bhead[nb - 1]
    while lk >= 0:
        if wc[lk] > 0:
            hk[hs] = resid[lk] / wc[lk]
            hl[hs] = lk
            hs += 1
        lk = bnext[lk]
    for k in range((hs - 2) // 4, -1, -1):
        _lheap_sift(hk, hl, hs, k, hk[k], hl[k])
    while hs > 0 and left > 0:
        lk = hl[0]
        c = wc[lk]
        if c == 0:
            hs = _lheap_pop(hk, hl, hs)
            continue
        level = resid[lk] / c
        if hk[0] < level:
            nxt = np.inf
            for b in range(1, min(5, hs)):
                if hk[b] < nxt:
                    nxt = hk[b]
            if nxt < level:
                _lheap_sift(hk, hl, hs, 0, level, lk)
                continue
        hs = _lheap_pop(hk, hl, hs)
        steps += 1
        left -= _saturate(
            lk, level, c, t, s_links, s_nl, s_mult, s_f, s_in, resid, lp_ptr, alen, adj_s, wc,
            s_bj, gsz, adj_j, s_slot, track,
        )  # fmt: skip
    return steps


@njit(cache=True)
def _water_level(lk, capacity, n_active, lp_ptr, alen, adj_p, rate, pmult, wbuf, mbuf):
    """A lower bound, exact up to rounding when the iteration converges, of the level ``x``
    solving ``sum_f m_f min(rate_f, x) + k x = capacity`` on link ``lk``: ``f`` over its active
    sub-flows (``adj_p[lp_ptr[lk] : lp_ptr[lk] + alen[lk]]``) with a rate (> 0), ``m_f`` their
    multiplicities, ``k`` the other active ones (``n_active`` counted with multiplicity in all).

    Fixed-point iteration from below: with ``x`` a level at most the solution, every sub-flow
    with ``rate_f < x`` is capped at ``rate_f`` in the solution too, so ``x' = (capacity -
    capped rates) / (uncapped count)`` is again at most the solution and at least ``x``; it
    stops when no new sub-flow is capped (then ``x`` is the solution) or after 16 passes (then
    ``x`` is a valid, smaller threshold: the simulator only needs a lower bound, see point 2 of
    its docstring). Linear per pass, where sorting the rates would cost ``m log m``."""
    m = 0
    for q in range(lp_ptr[lk], lp_ptr[lk] + alen[lk]):
        p = adj_p[q]
        r = rate[p]
        if r > 0.0:
            wbuf[m] = r
            mbuf[m] = pmult[p]
            m += 1
    left = capacity
    n = n_active
    x = left / n
    for _ in range(16):
        w = 0
        for i in range(m):
            c = wbuf[i]
            if c < x:
                left -= c * mbuf[i]
                n -= mbuf[i]
            else:
                wbuf[w] = c
                mbuf[w] = mbuf[i]
                w += 1
        if w == m:
            break
        m = w
        x = left / n
    return x


@njit(cache=True)
def _log(st, sl, sv, ns, t, touched, n_t, load):
    """Append ``(t, link, load)`` for the touched links (sorted) to the change log, growing
    its arrays when needed; returns ``(st, sl, sv, ns)``."""
    st, sl, sv = _grow(st, ns + n_t), _grow(sl, ns + n_t), _grow(sv, ns + n_t)
    ls = np.sort(touched[:n_t])
    for k in range(n_t):
        st[ns] = t
        sl[ns] = ls[k]
        sv[ns] = load[ls[k]]
        ns += 1
    return st, sl, sv, ns


# ---------------------------------------------------------------------- classes of identical flows
@njit(cache=True)
def _mix(h, v):
    """One step of a 64-bit hash (splitmix-style), wrapping."""
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=True)
def classes_kernel(base, dep_ptr, deps, rdep_ptr, rdep):
    """Classes of identical flows, in topological order (see
    :func:`topoopt.flowsim.flowset.identical_classes`).

    ``base`` is ``int64 (F, K)``: what two flows of one class share besides their dependencies.
    Flows are visited in a topological order of the dependency graph (Kahn); a flow joins the
    class whose base row equals its own and whose sorted, deduplicated dependency classes equal
    its own, found through an open-addressing hash table and compared exactly (hash collisions
    only cost a probe). Returns ``(class_of, n_visited)``; ``n_visited < F`` means a cycle.
    """
    n_f = base.shape[0]
    n_k = base.shape[1]
    class_of = np.full(n_f, -1, np.int64)
    indeg = dep_ptr[1:] - dep_ptr[:-1]
    queue = np.empty(max(n_f, 1), np.int64)
    qh = 0
    qt = 0
    for f in range(n_f):
        if indeg[f] == 0:
            queue[qt] = f
            qt += 1
    size = 1
    while size < 2 * n_f + 2:
        size *= 2
    mask = np.uint64(size - 1)
    table = np.full(size, -1, np.int64)
    c_rep = np.empty(max(n_f, 1), np.int64)
    c_hash = np.empty(max(n_f, 1), np.uint64)
    c_ptr = np.zeros(n_f + 1, np.int64)
    c_deps = np.empty(max(deps.shape[0], 1), np.int64)
    tmp = np.empty(max(deps.shape[0], 1), np.int64)
    n_c = 0
    while qh < qt:
        f = queue[qh]
        qh += 1
        k = 0
        for j in range(dep_ptr[f], dep_ptr[f + 1]):
            tmp[k] = class_of[deps[j]]
            k += 1
        if k > 1:
            tmp[:k] = np.sort(tmp[:k])
            w = 1
            for j in range(1, k):
                if tmp[j] != tmp[w - 1]:
                    tmp[w] = tmp[j]
                    w += 1
            k = w
        h = np.uint64(k)
        for j in range(n_k):
            h = _mix(h, np.uint64(base[f, j]))
        for j in range(k):
            h = _mix(h, np.uint64(tmp[j]))
        slot = h & mask
        found = -1
        while table[slot] >= 0:
            c = table[slot]
            if c_hash[c] == h and c_ptr[c + 1] - c_ptr[c] == k:
                same = True
                r = c_rep[c]
                for j in range(n_k):
                    if base[r, j] != base[f, j]:
                        same = False
                        break
                if same:
                    for j in range(k):
                        if c_deps[c_ptr[c] + j] != tmp[j]:
                            same = False
                            break
                if same:
                    found = c
                    break
            slot = (slot + np.uint64(1)) & mask
        if found < 0:
            found = n_c
            table[slot] = n_c
            c_rep[n_c] = f
            c_hash[n_c] = h
            for j in range(k):
                c_deps[c_ptr[n_c] + j] = tmp[j]
            c_ptr[n_c + 1] = c_ptr[n_c] + k
            n_c += 1
        class_of[f] = found
        for j in range(rdep_ptr[f], rdep_ptr[f + 1]):
            g = rdep[j]
            indeg[g] -= 1
            if indeg[g] == 0:
                queue[qt] = g
                qt += 1
    return class_of, qt
