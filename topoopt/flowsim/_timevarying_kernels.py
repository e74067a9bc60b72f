"""Compiled (numba) event loop of :func:`topoopt.flowsim.timevarying.simulate_epochs`.

The semantics are in :mod:`topoopt.flowsim.timevarying`. :func:`epochs_kernel` runs the whole
simulation on flat arrays: a release-time heap (dependencies), a pool of *pieces* (a sub-flow on
one path between its start, or a path change, and its last byte or the next path change), and
at every event a lexicographic weighted max-min re-fill (:func:`_fill`) of the pieces whose rate
may change (the others keep theirs: the threshold of :func:`_arrival_level` and of the
completions, module docstring of :mod:`topoopt.flowsim.timevarying`): class by class, one
bottleneck link at a time from a heap of link levels.

The heap is lazy: a link's level ``rem / sum(m * w)`` only grows while its pieces freeze at
levels up to it (a piece frozen at ``x <= level`` takes ``m w x`` and removes ``m w`` from the
sum), so an entry is never above the link's current level. A popped entry whose level is no
longer the link's is pushed again with the current level; a link is a bottleneck when its
popped entry is current. Every link is queued once, plus once per stale pop, never per freeze.

Examples
--------
One 10 B/s link, flows of 10 and 30 bytes with weights 1 and 3 (both end at 4 s):

>>> import numpy as np
>>> out = epochs_kernel(
...     np.array([10.0]), np.array([10.0, 30.0]), np.zeros(2), np.ones(2, np.int64),
...     np.zeros(3, np.int64), np.zeros(0, np.int64), np.zeros(3, np.int64),
...     np.zeros(0, np.int64), np.zeros(2, np.int64), 1, np.array([1.0, 3.0]),
...     np.array([[0, 1, 2]]), np.array([0, 1, 2]), np.array([0, 0]), np.ones(2), np.zeros(2),
...     np.zeros(0), np.zeros((0, 1)), np.zeros(0, np.int64), 2, 1, 1e-12, True, -1,
...     np.zeros(2, np.bool_), np.inf, False, 1, np.zeros(0), False, np.ones(2), np.ones(2))
>>> out[1].tolist()
[4.0, 4.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from topoopt.flowsim._kernels import (
    REFILL_MARGIN,
    _grow,
    _heap_pop,
    _heap_push,
    event_loop,
)
from topoopt.numba_cache import kernel_cache

__all__ = ["epochs_kernel", "rest_kernel"]

_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)


@njit(cache=_CACHE, error_model="numpy")
def _fill(
    act, n_act, s_gp, s_flow, s_rate, cls, n_cls, fweight, mult, g_pptr, g_plinks, g_em, cap, ev,
    stamp, cstamp, rem, wsum, cnt, lofs, lcnt, lsub, byc, cc, hk, hv, tl, ref, cmin, theta,
):  # fmt: skip
    # ``cls`` is the class of every piece (not flow) here
    """Lexicographic weighted max-min rates of the active pieces into ``s_rate``.

    Pieces of a class below ``cmin``, and those of class ``cmin`` whose level ``rate / weight``
    is below ``theta * (1 - REFILL_MARGIN)``, keep their rates (``theta < 0``: none does); the
    others are re-filled on the capacity the kept ones leave (module docstring).

    Returns ``(rounds, n_tl, n_ref, lsub, hk, hv, tl)``: ``tl[:n_tl]`` are the links the pieces
    cross (``stamp[l] == ev`` for them), ``n_ref`` the pieces re-filled; the work arrays may
    have been grown."""
    rounds = 0
    n_tl = 0
    n_ref = 0
    lim = theta * (1.0 - REFILL_MARGIN)
    for c in range(n_cls + 1):
        cc[c] = 0
    for i in range(n_act):
        s = act[i]
        f = s_flow[s]
        c = cls[s]
        if c < cmin or (c == cmin and s_rate[s] >= 0.0 and s_rate[s] < lim * fweight[f]):
            x = s_rate[s] * mult[f]
            gp = s_gp[s]
            for j in range(g_pptr[gp], g_pptr[gp + 1]):
                k = g_plinks[j]
                if stamp[k] != ev:
                    stamp[k] = ev
                    rem[k] = cap[k]
                    tl = _grow(tl, n_tl + 1)
                    tl[n_tl] = k
                    n_tl += 1
                rem[k] -= x * g_em[j]
        else:
            ref[n_ref] = s
            n_ref += 1
            cc[c + 1] += 1
    # counting sort of the re-filled pieces by class
    for c in range(n_cls):
        cc[c + 1] += cc[c]
    cur = cc.copy()
    for i in range(n_ref):
        s = ref[i]
        c = cls[s]
        byc[cur[c]] = s
        cur[c] += 1
    cev = ev * (n_cls + 1)
    for c in range(n_cls):
        a, b = cc[c], cc[c + 1]
        if a == b:
            continue
        cev += 1
        n_tc = 0
        nnz = 0
        # links of this class: level data, counts
        for i in range(a, b):
            s = byc[i]
            s_rate[s] = -1.0
            f = s_flow[s]
            mw = mult[f] * fweight[f]
            gp = s_gp[s]
            for j in range(g_pptr[gp], g_pptr[gp + 1]):
                k = g_plinks[j]
                if stamp[k] != ev:
                    stamp[k] = ev
                    rem[k] = cap[k]
                    tl = _grow(tl, n_tl + 1)
                    tl[n_tl] = k
                    n_tl += 1
                if cstamp[k] != cev:
                    cstamp[k] = cev
                    wsum[k] = 0.0
                    cnt[k] = 0
                    lcnt[k] = 0
                    n_tc += 1
                wsum[k] += mw * g_em[j]
                cnt[k] += 1
                lcnt[k] += 1
                nnz += 1
        # CSR link -> pieces of this class (over the links first seen in any class so far whose
        # class stamp is this class)
        lsub = _grow(lsub, nnz)
        off = 0
        for q in range(n_tl):
            k = tl[q]
            if cstamp[k] == cev:
                lofs[k] = off
                off += lcnt[k]
                lcnt[k] = 0
        for i in range(a, b):
            s = byc[i]
            gp = s_gp[s]
            for j in range(g_pptr[gp], g_pptr[gp + 1]):
                k = g_plinks[j]
                lsub[lofs[k] + lcnt[k]] = s
                lcnt[k] += 1
        hk = _grow(hk, n_tc + 1)
        hv = _grow(hv, n_tc + 1)
        hsize = 0
        for q in range(n_tl):
            k = tl[q]
            if cstamp[k] == cev:
                r = rem[k] if rem[k] > 0.0 else 0.0
                hsize = _heap_push(hk, hv, hsize, r / wsum[k], k)
        while hsize > 0:
            x = hk[0]
            lk, hsize = _heap_pop(hk, hv, hsize)
            if cnt[lk] == 0:
                continue
            r = rem[lk] if rem[lk] > 0.0 else 0.0
            lv = r / wsum[lk]
            if lv != x:  # stale: the link's level changed since it was queued; queue it again
                hsize = _heap_push(hk, hv, hsize, lv, lk)
                continue
            rounds += 1
            for e in range(lofs[lk], lofs[lk] + lcnt[lk]):
                s = lsub[e]
                if s_rate[s] >= 0.0:
                    continue
                f = s_flow[s]
                s_rate[s] = fweight[f] * x
                mw = mult[f] * fweight[f]
                gp = s_gp[s]
                for j in range(g_pptr[gp], g_pptr[gp + 1]):
                    k = g_plinks[j]
                    rem[k] -= mw * x * g_em[j]
                    wsum[k] -= mw * g_em[j]
                    cnt[k] -= 1
            rem[lk] = 0.0
    return rounds, n_tl, n_ref, lsub, hk, hv, tl


@njit(cache=_CACHE, error_model="numpy")
def _arrival_level(
    act, n_act, s_gp, s_flow, s_rate, cls, cmin, fweight, mult, g_pptr, g_plinks, g_em, cap, ev,
    astamp, aload, awnew, aofs, acnt, alinks, alam, arm, awm,
):  # fmt: skip
    """A level below which no old piece of class ``cmin`` changes rate when its new pieces
    (``s_rate < 0``) arrive: the least over their links of the water level ``x`` solving
    ``sum over old pieces min(r, w x) m + x * (sum over new pieces w m) = capacity left by the
    higher classes`` (module docstring of :mod:`topoopt.flowsim.simulator`, weighted).

    Returns ``(level, alinks, alam, arm, awm)`` (the work arrays may have been grown)."""
    n_al = 0
    for i in range(n_act):
        s = act[i]
        f = s_flow[s]
        if cls[s] != cmin or s_rate[s] >= 0.0:
            continue
        gp = s_gp[s]
        for j in range(g_pptr[gp], g_pptr[gp + 1]):
            k = g_plinks[j]
            if astamp[k] != ev:
                astamp[k] = ev
                aload[k] = 0.0
                awnew[k] = 0.0
                acnt[k] = 0
                alinks = _grow(alinks, n_al + 1)
                alinks[n_al] = k
                n_al += 1
            awnew[k] += fweight[f] * mult[f] * g_em[j]
    for i in range(n_act):
        s = act[i]
        f = s_flow[s]
        c = cls[s]
        if c > cmin or s_rate[s] < 0.0:
            continue
        gp = s_gp[s]
        for j in range(g_pptr[gp], g_pptr[gp + 1]):
            k = g_plinks[j]
            if astamp[k] == ev:
                if c < cmin:
                    aload[k] += s_rate[s] * mult[f] * g_em[j]
                else:
                    acnt[k] += 1
    off = 0
    for q in range(n_al):
        k = alinks[q]
        aofs[k] = off
        off += acnt[k]
        acnt[k] = 0
    alam = _grow(alam, off)
    arm = _grow(arm, off)
    awm = _grow(awm, off)
    for i in range(n_act):
        s = act[i]
        f = s_flow[s]
        if cls[s] != cmin or s_rate[s] < 0.0:
            continue
        gp = s_gp[s]
        for j in range(g_pptr[gp], g_pptr[gp + 1]):
            k = g_plinks[j]
            if astamp[k] == ev:
                e = aofs[k] + acnt[k]
                alam[e] = s_rate[s] / fweight[f]
                arm[e] = s_rate[s] * mult[f] * g_em[j]
                awm[e] = fweight[f] * mult[f] * g_em[j]
                acnt[k] += 1
    level = np.inf
    for q in range(n_al):
        k = alinks[q]
        a = aofs[k]
        b = a + acnt[k]
        order = np.argsort(alam[a:b])
        avail = cap[k] - aload[k]
        wsum = awnew[k]
        for e in range(a, b):
            wsum += awm[e]
        taken = 0.0
        x = 0.0
        for e in range(b - a + 1):
            x = (avail - taken) / wsum
            if e == b - a or x <= alam[a + order[e]]:
                break
            taken += arm[a + order[e]]
            wsum -= awm[a + order[e]]
        if x < 0.0:
            x = 0.0
        if x < level:
            level = x
    return level, alinks, alam, arm, awm


@njit(cache=_CACHE, inline="always")
def _blocked(f, c, lcc, g_fptr, ver, g_pptr, g_plinks):
    """Whether a piece of a class above ``c`` is active on a link of flow ``f``'s paths."""
    for gp in range(g_fptr[ver, f], g_fptr[ver, f + 1]):
        for j in range(g_pptr[gp], g_pptr[gp + 1]):
            k = g_plinks[j]
            for c2 in range(c):
                if lcc[c2, k] > 0:
                    return True
    return False


@njit(cache=_CACHE, inline="always")
def _count(lcc, c, gp, g_pptr, g_plinks, d):
    for j in range(g_pptr[gp], g_pptr[gp + 1]):
        lcc[c, g_plinks[j]] += d


@njit(cache=_CACHE, error_model="numpy")
def _late_bound(
    t, act, n_act, s_gp, s_flow, s_left, mult, size, finish, n_left, g_fptr, ver, g_pptr,
    g_plinks, g_w, g_em, g_k, cap, load,
):  # fmt: skip
    """``(t + max_l load_l / cap_l, pieces)``: every byte left (the active pieces' and the
    unstarted flows' on the paths of version ``ver``) crosses its links after ``t``, at most at
    their capacity, when no epoch is left (``inf`` for bytes on a link of capacity 0); and
    the pieces those bytes make, a bound on the completions still to come."""
    n_l = cap.shape[0]
    for k in range(n_l):
        load[k] = 0.0
    pieces = n_act
    for i in range(n_act):
        s = act[i]
        x = s_left[s]
        if x > 0.0:
            x *= mult[s_flow[s]]
            gp = s_gp[s]
            for j in range(g_pptr[gp], g_pptr[gp + 1]):
                load[g_plinks[j]] += x * g_em[j]
    for f in range(size.shape[0]):
        if n_left[f] != 0 or finish[f] < np.inf or size[f] <= 0.0:
            continue  # active, finished or nothing to send
        x = size[f] * mult[f]
        for gp in range(g_fptr[ver, f], g_fptr[ver, f + 1]):
            pieces += 1
            for j in range(g_pptr[gp], g_pptr[gp + 1]):
                load[g_plinks[j]] += x * g_w[gp] / g_k[gp] * g_em[j]
    worst = 0.0
    for k in range(n_l):
        if load[k] > 0.0:
            if cap[k] <= 0.0:
                return np.inf, pieces
            d = load[k] / cap[k]
            if d > worst:
                worst = d
    return t + worst, pieces


@njit(cache=_CACHE, error_model="numpy")
def epochs_kernel(
    cap0, size, start, mult, dep_ptr, deps, rdep_ptr, rdep, cls, n_cls, fweight, g_fptr, g_pptr,
    g_plinks, g_w, g_lat, e_start, e_cap, e_ver, n_p0, max_paths, rtol, record, limit, nonpre,
    horizon, late_cut, late_every, snap_t, handoff, g_em, g_k,
):  # fmt: skip
    """The event loop (see the module docstring of :mod:`topoopt.flowsim.timevarying`).

    No event after ``horizon`` (seconds; ``inf``: none) is simulated: flows unfinished by then
    keep ``finish = inf``. With ``late_cut`` the loop also stops, once no epoch is left, as
    soon as :func:`_late_bound` proves that some byte crosses its link after ``horizon``
    (checked when the last epoch starts and every ``late_every`` events after): some flow
    would then be unfinished at the horizon anyway; the flows unfinished at the stop keep
    ``finish = inf``.

    ``g_em`` (one per entry of ``g_plinks``) multiplies what a piece puts on that link (its
    rate, weight and bytes times its flow's multiplicity); ``g_k`` (one per global path) is how
    many pieces of its flow a path stands for: a piece of path ``gp`` starts with ``g_w[gp] /
    g_k[gp]`` of its flow's bytes, and counts ``g_k[gp]`` times in the bytes its flow takes to
    new paths. Both are 1 for a plain FlowSet; the symmetry quotient
    (:mod:`topoopt.flowsim.epochs_reduction`) sets them.

    ``snap_t`` (ascending seconds) asks for the bytes left at those times: ``snap[k, p]`` is
    what global path ``p`` of the version in force at ``snap_t[k]`` (``snap_ver[k]``) has left
    to send per member (an active piece's bytes less what its rate sends by then; a flow not
    started: its size times the path's weight; finished: 0), taken before the events of that
    instant; ``snap_ok[k]`` is False when the loop stopped before ``snap_t[k]``.

    With ``handoff`` (and a finite ``horizon``) the loop also stops where the late cut is first
    checked (once every epoch has started and the events of that instant are done), unless that
    check cuts: the state is then handed to a caller that simulates the rest without epochs
    (:func:`topoopt.flowsim.timevarying.remainder_flows`).

    Returns ``(release, finish, path_last, moved, link_bytes, series_time, series_link,
    series_load, n_events, fill_rounds, refills, snap, snap_ver, snap_ok, handed, t, ver,
    arrive, n_left, h_gp, h_left, h_rate)``; ``path_last`` is per path of version 0 and
    ``moved[f]`` says flow ``f`` ran on epoch paths. ``handed`` says the loop stopped for the
    handoff, at time ``t`` with path version ``ver`` in force; ``arrive[f]`` is the latest
    arrival so far of flow ``f``'s pieces that ended or were cut, ``n_left[f]`` its active
    pieces (0: not started or finished), and ``h_gp``, ``h_left``, ``h_rate`` the global path,
    bytes left per member and rate of every active piece (empty unless ``handed``)."""
    n_f = size.shape[0]
    n_l = cap0.shape[0]
    n_e = e_start.shape[0]
    cap = cap0.copy()
    ver = 0
    release = np.full(n_f, np.inf)
    finish = np.full(n_f, np.inf)
    arrive = np.full(n_f, -np.inf)
    n_left = np.zeros(n_f, np.int64)
    moved = np.zeros(n_f, np.bool_)
    dep_left = np.empty(n_f, np.int64)
    path_last = np.full(n_p0, np.nan)
    link_bytes = np.zeros(n_l)
    hk = np.empty(n_f + 1)
    hv = np.empty(n_f + 1, np.int64)
    hsize = 0
    for f in range(n_f):
        dep_left[f] = dep_ptr[f + 1] - dep_ptr[f]
        if dep_left[f] == 0:
            release[f] = start[f]
            hsize = _heap_push(hk, hv, hsize, start[f], f)
    # piece pool
    pool = max(16, n_p0)
    s_gp = np.empty(pool, np.int64)
    s_flow = np.empty(pool, np.int64)
    s_init = np.empty(pool)
    s_left = np.empty(pool)
    s_rate = np.empty(pool)
    s_last = np.empty(pool)
    s_cls = np.empty(pool, np.int64)
    n_s = 0
    lcc = np.zeros((n_cls, n_l), np.int64)  # active pieces per (flow class, link)
    wl = np.empty(n_f, np.int64)  # non-preemptive flows released, waiting for their links
    n_wl = 0
    sf = np.empty(n_f, np.int64)
    act = np.empty(pool, np.int64)
    n_act = 0
    ended = np.empty(pool, np.int64)
    is_end = np.zeros(pool, np.bool_)
    # fill work arrays
    stamp = np.full(n_l, -1, np.int64)
    cstamp = np.full(n_l, -1, np.int64)
    rem = np.zeros(n_l)
    wsum = np.zeros(n_l)
    cnt = np.zeros(n_l, np.int64)
    lofs = np.zeros(n_l, np.int64)
    lcnt = np.zeros(n_l, np.int64)
    lsub = np.empty(16, np.int64)
    byc = np.empty(pool, np.int64)
    ref = np.empty(pool, np.int64)
    cc = np.zeros(n_cls + 1, np.int64)
    th_dep = np.full(n_cls, np.inf)
    has_arr = np.zeros(n_cls, np.bool_)
    full = True
    astamp = np.full(n_l, -1, np.int64)
    aload = np.zeros(n_l)
    awnew = np.zeros(n_l)
    aofs = np.zeros(n_l, np.int64)
    acnt = np.zeros(n_l, np.int64)
    alinks = np.empty(16, np.int64)
    alam = np.empty(16)
    arm = np.empty(16)
    awm = np.empty(16)
    fk = np.empty(16)
    fv = np.empty(16, np.int64)
    tl = np.empty(16, np.int64)
    prev_tl = np.empty(16, np.int64)
    n_prev = 0
    new_load = np.zeros(n_l)
    cur_load = np.zeros(n_l)
    resid = np.zeros(n_f)
    rflows = np.empty(n_f, np.int64)
    # series
    st = np.empty(16)
    sl = np.empty(16, np.int64)
    sv = np.empty(16)
    n_ser = 0
    t = 0.0
    ep = 0
    n_events = 0
    rounds = 0
    refills = 0
    n_sn = snap_t.shape[0]
    snap = np.zeros((n_sn, g_w.shape[0] if n_sn else 0))
    snap_ver = np.full(n_sn, -1, np.int64)
    snap_ok = np.zeros(n_sn, np.bool_)
    k_sn = 0
    late_load = np.zeros(n_l if late_cut else 0)
    late_next = 0 if n_e == 0 else -1  # event count of the next late check (-1: epochs left)
    handed = False
    while True:
        if (late_cut or handoff) and late_next >= 0 and n_events >= late_next and horizon < np.inf:
            late_next = n_events + late_every
            if late_cut:
                b, n_pc = _late_bound(
                    t, act, n_act, s_gp, s_flow, s_left, mult, size, finish, n_left, g_fptr,
                    ver, g_pptr, g_plinks, g_w, g_em, g_k, cap, late_load,
                )  # fmt: skip
                # completions within rtol of an event end early: at most rtol * t per piece
                if b > horizon + horizon * (n_pc * rtol + 1e-9):
                    break
            if handoff:
                handed = True
                break
        t_c = np.inf
        for i in range(n_act):
            s = act[i]
            if s_rate[s] > 0.0:
                tc = t + s_left[s] / s_rate[s]
                if tc < t_c:
                    t_c = tc
        t_a = hk[0] if hsize > 0 else np.inf
        t_e = e_start[ep] if ep < n_e else np.inf
        t_next = min(t_c, min(t_a, t_e))
        while k_sn < n_sn and snap_t[k_sn] <= t_next:
            tau = snap_t[k_sn]
            if tau >= t:  # the state at tau, before its events
                for i in range(n_act):
                    s = act[i]
                    x = s_left[s]
                    if s_rate[s] > 0.0:
                        x -= s_rate[s] * (tau - t)
                    snap[k_sn, s_gp[s]] = x if x > 0.0 else 0.0
                for f in range(n_f):
                    if n_left[f] == 0 and finish[f] == np.inf:
                        for gp in range(g_fptr[ver, f], g_fptr[ver, f + 1]):
                            snap[k_sn, gp] = size[f] * g_w[gp] / g_k[gp]
                snap_ver[k_sn] = ver
                snap_ok[k_sn] = True
            k_sn += 1
        if t_next == np.inf or t_next > horizon:
            break
        if t_next > t:
            dt = t_next - t
            for i in range(n_act):
                s = act[i]
                if s_rate[s] > 0.0:
                    s_left[s] -= s_rate[s] * dt
                    s_last[s] = t_next
            t = t_next
        n_events += 1
        cut = t + rtol * abs(t)
        # ---- completions (and the zero-byte pieces of arrivals, in the cascade below)
        n_end = 0
        if t_c <= cut:
            for i in range(n_act):
                s = act[i]
                if s_rate[s] > 0.0 and s_left[s] <= s_rate[s] * (cut - t):
                    ended[n_end] = s
                    n_end += 1
        while True:
            for q in range(n_end):
                s = ended[q]
                is_end[s] = True
                f = s_flow[s]
                if s_rate[s] > 0.0 and s_rate[s] < th_dep[s_cls[s]] * fweight[f]:
                    th_dep[s_cls[s]] = s_rate[s] / fweight[f]
                gp = s_gp[s]
                if s_init[s] > 0.0:
                    _count(lcc, cls[f], gp, g_pptr, g_plinks, -1)
                sent = s_init[s] * mult[f]
                for j in range(g_pptr[gp], g_pptr[gp + 1]):
                    link_bytes[g_plinks[j]] += sent * g_em[j]
                v = t + g_lat[gp]
                if v > arrive[f]:
                    arrive[f] = v
                if gp < n_p0:
                    path_last[gp] = t
                n_left[f] -= 1
                if n_left[f] == 0:
                    finish[f] = arrive[f]
                    for kk in range(rdep_ptr[f], rdep_ptr[f + 1]):
                        g = rdep[kk]
                        dep_left[g] -= 1
                        if dep_left[g] == 0:
                            rel = start[g]
                            for jj in range(dep_ptr[g], dep_ptr[g + 1]):
                                if finish[deps[jj]] > rel:
                                    rel = finish[deps[jj]]
                            release[g] = rel
                            if rel < np.inf:
                                hk = _grow(hk, hsize + 1)
                                hv = _grow(hv, hsize + 1)
                                hsize = _heap_push(hk, hv, hsize, rel, g)
            if n_end > 0:
                m = 0
                for i in range(n_act):
                    s = act[i]
                    if not is_end[s]:
                        act[m] = s
                        m += 1
                n_act = m
                n_end = 0
            # ---- epochs that start now (once, before the arrivals of this instant)
            while ep < n_e and e_start[ep] <= cut:
                for k in range(n_l):
                    cap[k] = e_cap[ep, k]
                v_new = e_ver[ep]
                ep += 1
                full = True
                if ep == n_e:
                    late_next = n_events
                if v_new < 0:
                    continue
                ver = v_new
                n_rf = 0
                for i in range(n_act):
                    s = act[i]
                    f = s_flow[s]
                    left = s_left[s] if s_left[s] > 0.0 else 0.0
                    if n_left[f] > 0:
                        rflows[n_rf] = f
                        n_rf += 1
                        resid[f] = 0.0
                        n_left[f] = -1  # collected once
                    resid[f] += left * g_k[s_gp[s]]
                    # the piece is cut: its bytes sent so far count, it arrives after its last
                    sent = (s_init[s] - left) * mult[f]
                    gp = s_gp[s]
                    _count(lcc, cls[f], gp, g_pptr, g_plinks, -1)
                    if sent > 0.0:
                        for j in range(g_pptr[gp], g_pptr[gp + 1]):
                            link_bytes[g_plinks[j]] += sent * g_em[j]
                        v = s_last[s] + g_lat[gp]
                        if v > arrive[f]:
                            arrive[f] = v
                    is_end[s] = True
                n_act = 0
                for q in range(n_rf):
                    f = rflows[q]
                    moved[f] = True
                    a, b = g_fptr[ver, f], g_fptr[ver, f + 1]
                    need = n_s + (b - a)
                    if need > pool:
                        pool = max(need, 2 * pool)
                        s_gp = _grow(s_gp, pool)
                        s_flow = _grow(s_flow, pool)
                        s_init = _grow(s_init, pool)
                        s_left = _grow(s_left, pool)
                        s_rate = _grow(s_rate, pool)
                        s_last = _grow(s_last, pool)
                        s_cls = _grow(s_cls, pool)
                        act = _grow(act, pool)
                        ended = _grow(ended, pool)
                        byc = _grow(byc, pool)
                        ref = _grow(ref, pool)
                        is_end = _grow(is_end, pool)
                    n_left[f] = b - a
                    for gp in range(a, b):
                        s_gp[n_s] = gp
                        s_flow[n_s] = f
                        s_init[n_s] = resid[f] * g_w[gp] / g_k[gp]
                        s_left[n_s] = s_init[n_s]
                        s_rate[n_s] = -1.0
                        s_cls[n_s] = 0 if nonpre[f] else cls[f]
                        _count(lcc, cls[f], gp, g_pptr, g_plinks, 1)
                        s_last[n_s] = -np.inf
                        is_end[n_s] = False
                        act[n_act] = n_s
                        n_act += 1
                        n_s += 1
            # ---- arrivals released by now
            n_sf = 0
            while hsize > 0 and hk[0] <= cut:
                f, hsize = _heap_pop(hk, hv, hsize)
                if nonpre[f] and _blocked(f, cls[f], lcc, g_fptr, ver, g_pptr, g_plinks):
                    wl[n_wl] = f
                    n_wl += 1
                else:
                    sf[n_sf] = f
                    n_sf += 1
            m = 0
            for q in range(n_wl):  # waiting non-preemptive flows whose links are now clear
                f = wl[q]
                if _blocked(f, cls[f], lcc, g_fptr, ver, g_pptr, g_plinks):
                    wl[m] = f
                    m += 1
                else:
                    release[f] = t
                    sf[n_sf] = f
                    n_sf += 1
            n_wl = m
            for q in range(n_sf):
                f = sf[q]
                if ver != 0:
                    moved[f] = True
                a, b = g_fptr[ver, f], g_fptr[ver, f + 1]
                need = n_s + (b - a)
                if need > pool:
                    pool = max(need, 2 * pool)
                    s_gp = _grow(s_gp, pool)
                    s_flow = _grow(s_flow, pool)
                    s_init = _grow(s_init, pool)
                    s_left = _grow(s_left, pool)
                    s_rate = _grow(s_rate, pool)
                    s_last = _grow(s_last, pool)
                    s_cls = _grow(s_cls, pool)
                    act = _grow(act, pool)
                    ended = _grow(ended, pool)
                    byc = _grow(byc, pool)
                    ref = _grow(ref, pool)
                    is_end = _grow(is_end, pool)
                n_left[f] = b - a
                for gp in range(a, b):
                    s_gp[n_s] = gp
                    s_flow[n_s] = f
                    s_init[n_s] = size[f] * g_w[gp] / g_k[gp]
                    s_left[n_s] = s_init[n_s]
                    s_rate[n_s] = -1.0
                    s_cls[n_s] = 0 if nonpre[f] else cls[f]
                    s_last[n_s] = -np.inf
                    is_end[n_s] = False
                    if s_init[n_s] <= 0.0:
                        ended[n_end] = n_s
                        n_end += 1
                    else:
                        act[n_act] = n_s
                        n_act += 1
                        has_arr[s_cls[n_s]] = True
                        _count(lcc, cls[f], gp, g_pptr, g_plinks, 1)
                    n_s += 1
            if n_end == 0:
                break
        # ---- re-fill the active pieces whose rate may change
        cmin = n_cls
        for c in range(n_cls):
            if th_dep[c] < np.inf or has_arr[c]:
                cmin = c
                break
        theta = -1.0
        if full:
            cmin = 0
        elif cmin < n_cls:
            theta = th_dep[cmin]
            if has_arr[cmin]:
                lv, alinks, alam, arm, awm = _arrival_level(
                    act, n_act, s_gp, s_flow, s_rate, s_cls, cmin, fweight, mult, g_pptr,
                    g_plinks, g_em, cap, n_events, astamp, aload, awnew, aofs, acnt, alinks, alam,
                    arm, awm,
                )  # fmt: skip
                theta = min(theta, lv)
        for c in range(n_cls):
            th_dep[c] = np.inf
            has_arr[c] = False
        if not full and cmin == n_cls:
            continue  # nothing arrived, left or changed: every rate stays
        full = False
        r, n_tl, n_ref, lsub, fk, fv, tl = _fill(
            act, n_act, s_gp, s_flow, s_rate, s_cls, n_cls, fweight, mult, g_pptr, g_plinks, g_em,
            cap, n_events, stamp, cstamp, rem, wsum, cnt, lofs, lcnt, lsub, byc, cc, fk, fv, tl,
            ref, cmin, theta,
        )  # fmt: skip
        refills += n_ref
        if 0 <= limit < refills:
            break
        rounds += r
        if record:
            for i in range(n_act):
                s = act[i]
                f = s_flow[s]
                x = s_rate[s] * mult[f]
                gp = s_gp[s]
                for j in range(g_pptr[gp], g_pptr[gp + 1]):
                    new_load[g_plinks[j]] += x * g_em[j]
            for q in range(n_prev):
                k = prev_tl[q]
                if stamp[k] != n_events and cur_load[k] != 0.0:
                    st = _grow(st, n_ser + 1)
                    sl = _grow(sl, n_ser + 1)
                    sv = _grow(sv, n_ser + 1)
                    st[n_ser] = t
                    sl[n_ser] = k
                    sv[n_ser] = 0.0
                    n_ser += 1
                    cur_load[k] = 0.0
            for q in range(n_tl):
                k = tl[q]
                if new_load[k] != cur_load[k]:
                    st = _grow(st, n_ser + 1)
                    sl = _grow(sl, n_ser + 1)
                    sv = _grow(sv, n_ser + 1)
                    st[n_ser] = t
                    sl[n_ser] = k
                    sv[n_ser] = new_load[k]
                    n_ser += 1
                    cur_load[k] = new_load[k]
                new_load[k] = 0.0
            prev_tl = _grow(prev_tl, n_tl)
            prev_tl[:n_tl] = tl[:n_tl]
            n_prev = n_tl
    n_h = n_act if handed else 0
    h_gp = np.empty(n_h, np.int64)
    h_left = np.empty(n_h)
    h_rate = np.empty(n_h)
    for i in range(n_h):
        s = act[i]
        h_gp[i] = s_gp[s]
        h_left[i] = s_left[s]
        h_rate[i] = s_rate[s]
    return (
        release,
        finish,
        path_last,
        moved,
        link_bytes,
        st[:n_ser].copy(),
        sl[:n_ser].copy(),
        sv[:n_ser].copy(),
        n_events,
        rounds,
        refills,
        snap,
        snap_ver,
        snap_ok,
        handed,
        t,
        ver,
        arrive,
        n_left,
        h_gp,
        h_left,
        h_rate,
    )


@njit(cache=_CACHE, error_model="numpy")
def rest_kernel(
    cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
    rdep, lp_ptr, rtol, record, emult, max_refills, row_space, cut_at, late_every,
):  # fmt: skip
    """The static engine's event loop (:func:`topoopt.flowsim._kernels.event_loop`, the code of
    :func:`~topoopt.flowsim._kernels.simulate_kernel`) with a horizon and the late cut, for
    :func:`topoopt.flowsim.timevarying.past_horizon_after_epochs`: no event after ``cut_at``
    (seconds) is simulated, and every
    ``late_every`` events the loop stops once ``t + max over links of (bytes left on the link)
    / capacity`` passes ``cut_at`` (plus ``rtol`` of it per piece with bytes: completions
    merged early), the bytes left being the active sub-flows' (a group member's: its target
    less the group's service at ``t``) and the sub-flows not started (kept per link as they
    start). Returns :func:`~topoopt.flowsim._kernels.simulate_kernel`'s tuple and ``stopped``
    (the loop stopped so: some byte is sent after ``cut_at``)."""
    return event_loop(
        cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
        rdep, lp_ptr, rtol, record, emult, max_refills, row_space, cut_at, late_every,
    )  # fmt: skip
