"""Compiled (numba) loops of the flow model: progressive filling and the event loop.

These are the hot paths behind :func:`topoopt.flowsim.max_min.fill_rates` and
:func:`topoopt.flowsim.simulator.simulate`; the semantics and the exactness argument are in those
modules' docstrings. Everything here works on flat ``int32`` / ``int64`` / ``float64`` arrays
(CSR incidence, slots, no Python objects) and allocates its work arrays once per call.

- :func:`fill_kernel`: one progressive filling of a set of sub-flows on given link capacities,
  freezing every flow of every *local bottleneck* link per round (the algorithm of
  :mod:`topoopt.flowsim.max_min`), four linear passes over the remaining flows per round
  (:func:`_rounds_slots`).
- :func:`fill_links_mult`: the same filling one bottleneck link at a time, links taken in order
  of their fair share from the *link queue* (:func:`_lq_next`: buckets on the bits of the
  shares, a heap past them), a bottleneck's flows found in its list of flows.
- :func:`simulate_kernel`: the whole event loop (completions, arrivals from a release-time heap,
  dependencies, the partial re-fill after each event, the link-load change log). Every active
  sub-flow belongs to the *group* of the link it last froze on and has the group's rate; a
  group carries its members' bytes sent as one piecewise-linear *service* and the links they
  cross with their counts (its *row*). Bottlenecks change little from one event to the next
  (on the 100,000-flow benchmark about 10 sub-flows per event change group, out of 19,000
  re-filled on average), so a re-fill unfreezes and freezes whole groups through their rows,
  finds the next completion per group, and touches single sub-flows only when they arrive,
  finish or change group. When the kept groups' rows are shorter than the re-filled ones', the
  free capacity and counts to fill are built from the kept groups instead (capacity less their
  load, active count less theirs), and a group's next completion is computed again only when
  its rate, service or members changed.

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

from topoopt.numba_cache import kernel_cache

__all__ = [
    "REFILL_MARGIN",
    "RESYNC_EVERY",
    "blocked_kernel",
    "class_of_flow",
    "classes_kernel",
    "event_loop",
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

_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)


@njit(cache=_CACHE, error_model="numpy")
def fill_kernel(ptr, links, rows, rem, out):
    """Max-min fair rates of the sub-flows ``rows`` on the capacities ``rem`` (bytes/s), by
    rounds of local bottlenecks (:func:`_rounds_slots` run to the end).

    Writes the rate of ``rows[i]`` to ``out[i]``, subtracts the allocation from ``rem`` (clipped
    at 0) and returns the number of rounds.
    """
    return fill_kernel_mult(ptr, links, rows, np.ones(ptr.shape[0] - 1, np.int64), rem, out)


@njit(cache=_CACHE, error_model="numpy")
def fill_kernel_mult(ptr, links, rows, mult, rem, out):
    """:func:`fill_kernel` where row ``f`` stands for ``mult[f]`` identical sub-flows (a class):
    it counts ``mult[f]`` times on each of its links (a link's share is ``rem / sum of the
    multiplicities of its unfrozen rows``), every member gets the rate written to ``out`` and
    the class takes ``mult[f]`` times that rate from ``rem``."""
    n = rows.shape[0]
    s_links, s_nl, s_mult, s_in, wc, slinks, n_sl = _slots_of(ptr, links, rows, mult, rem)
    order = np.arange(max(n, 1))
    n_l = rem.shape[0]
    return _rounds_slots(
        order, n, s_links, s_nl, s_mult, out, s_in, rem, wc, slinks, n_sl,
        np.empty(max(n_l, 1)), np.zeros(max(n_l, 1), np.bool_), np.empty(max(n, 1)),
    )  # fmt: skip


@njit(cache=_CACHE)
def _slots_of(ptr, links, rows, mult, rem):
    """Slots for the sub-flows ``rows`` of the CSR incidence ``ptr``, ``links`` (slot ``i``:
    row ``rows[i]``'s links, their number and its multiplicity), all marked for filling:
    ``(s_links, s_nl, s_mult, s_in, wc, slinks, n_sl)`` with ``wc`` their count per link (with
    multiplicity ``mult``) and ``slinks[:n_sl]`` the links they cross (each once)."""
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
    return s_links, s_nl, s_mult, s_in, wc, slinks, n_sl


@njit(cache=_CACHE)
def _lheap_pop(hk, hl, size):
    size -= 1
    _lheap_sift(hk, hl, size, 0, hk[size], hl[size])
    return size


@njit(cache=_CACHE)
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


BUCKET_BITS = 10
"""The link queue (:func:`_lq_next`) splits each factor of 2 of fair shares into
``2**BUCKET_BITS`` buckets, fewer when the shares would span more than about two buckets per
link queued or half of :data:`N_BUCKETS` (the other half is room for shares to grow)."""

N_BUCKETS = 8192
"""Buckets of the link queue; shares beyond them go to a heap."""

LQ_CROWD = 4096
"""A bucket found holding more links than this hands the rest of the filling to the heap."""


@njit(cache=_CACHE)
def _lq_arrays(n_l):
    """The arrays of a link queue for ``n_l`` links: ``(hk, hl, bhead, bnext, lq, fb)``
    (:func:`_lq_init`, :func:`_lq_next`)."""
    return (
        np.empty(max(n_l, 1)),
        np.empty(max(n_l, 1), np.int64),
        np.empty(N_BUCKETS, np.int64),
        np.empty(max(n_l, 1), np.int64),
        np.zeros(8, np.int64),
        np.empty(1),
    )


@njit(cache=_CACHE, error_model="numpy")
def _lq_init(slinks, n_sl, fw, hk, hl, bhead, bnext, lq):
    """Put the links ``slinks[:n_sl]`` in the link queue by their fair shares: free capacity
    ``fw[l, 0]`` over unfrozen count ``fw[l, 1]`` (> 0) (:func:`_lq_next`). ``hk``, ``hl``,
    ``bnext`` (one slot per link), ``bhead`` (:data:`N_BUCKETS`) and ``lq`` (8) hold the queue
    (:func:`_lq_arrays`)."""
    bits = hk.view(np.int64)
    lo = np.int64(0x7FFFFFFFFFFFFFFF)
    hi = np.int64(0)
    for k in range(n_sl):
        lk = slinks[k]
        v = fw[lk, 0] / fw[lk, 1]
        hk[k] = v
        b = np.float64(v).view(np.int64)
        if b < lo:
            lo = b
        if b > hi and b < np.int64(0x7FF0000000000000):
            hi = b
    # the shares now span at most half the buckets (and about 2 per link: a sparse filling
    # does not walk thousands of empty buckets); the other half is room for shares to grow
    span = min(N_BUCKETS // 2 - 1, 2 * n_sl + 32)
    shift = 52 - BUCKET_BITS
    while (hi >> shift) - (lo >> shift) >= span and shift < 62:
        shift += 1
    qlo = lo >> shift
    nb = max(2 * ((hi >> shift) - qlo + 1), 2) + 1  # bucket nb - 1: shares past the others
    bhead[:nb] = -1
    for k in range(n_sl):
        lk = slinks[k]
        b = min((bits[k] >> shift) - qlo, nb - 1)
        bnext[lk] = bhead[b]
        bhead[b] = lk
    lq[0] = 0  # current bucket
    lq[1] = shift
    lq[2] = qlo
    lq[3] = nb
    lq[4] = 0  # 0: buckets, 1: heap
    lq[5] = 0  # heap size
    lq[6] = 0  # links tied at the smallest share (bucket phase)


@njit(cache=_CACHE, error_model="numpy", inline="always")
def _lq_next(fw, hk, hl, bhead, bnext, lq, fb, fbits):
    """The link with the smallest fair share ``fw[l, 0] / fw[l, 1]`` among the queued links that
    still have an unfrozen sub-flow (``fw[l, 1] > 0``; taken out of the queue), or -1 if there
    is none. Shares may only have grown since a link was queued (a filling freezes a sub-flow at
    no more than any of its links' shares). ``fb`` is a float64 scratch of one, ``fbits`` its
    int64 view.

    The links wait in buckets of shares: the bits of a non-negative double, read as an integer,
    grow with its value, so their top bits (sign, exponent and :data:`BUCKET_BITS` of mantissa,
    fewer if the shares span too many buckets) number buckets in order of share. A link sits in
    the bucket of its recorded share, never above its current one. The lowest non-empty bucket
    is scanned: each link's current share is computed, links whose share has left the bucket
    move up, links with nothing unfrozen drop out, and the smallest of the rest is the smallest
    share of all (every other bucket's links have shares at least their bucket's bottom).
    The links tied at that share are taken next, each while its share has not grown, before
    the bucket is scanned again. Links past the last bucket, or every link left once a bucket
    turns out to hold more than :data:`LQ_CROWD` (each take would rescan it), are then taken
    from a 4-ary heap, where a link met on top with a stale key is taken if its share is still
    the smallest key, else sifted back in at it."""
    if lq[4] == 0:
        shift = lq[1]
        qlo = lq[2]
        nb = lq[3]
        # links that tied for the smallest share at the last scan (hl[:lq[6]], the share hk[0]):
        # one still at that share is still the smallest (shares only grow); one whose share
        # grew goes back to its bucket
        while lq[6] > 0:
            lq[6] -= 1
            lk = hl[lq[6]]
            c = fw[lk, 1]
            if c == 0:
                continue
            v = fw[lk, 0] / c
            if v == hk[0]:
                return lk
            fb[0] = v
            q = min((fbits[0] >> shift) - qlo, nb - 1)
            bnext[lk] = bhead[q]
            bhead[q] = lk
        b = lq[0]
        while b < nb - 1:
            if bhead[b] < 0:
                b += 1
                continue
            nt = 0
            bestv = np.inf
            lk = bhead[b]
            bhead[b] = -1
            seen = 0
            while lk >= 0:
                seen += 1
                nxt = bnext[lk]
                c = fw[lk, 1]
                if c > 0:
                    v = fw[lk, 0] / c
                    fb[0] = v
                    q = min((fbits[0] >> shift) - qlo, nb - 1)
                    if q > b:
                        bnext[lk] = bhead[q]
                        bhead[q] = lk
                    elif nt == 0 or v < bestv:
                        for k in range(nt):
                            bnext[hl[k]] = bhead[b]
                            bhead[b] = hl[k]
                        hl[0] = lk
                        nt = 1
                        bestv = v
                    elif v == bestv:
                        hl[nt] = lk
                        nt += 1
                    else:
                        bnext[lk] = bhead[b]
                        bhead[b] = lk
                lk = nxt
            if seen > LQ_CROWD:
                # a crowded bucket (shares closer than a bucket but not equal): rescanning it
                # at every take would cost its size squared, so the heap takes all links left
                for k in range(nt):
                    bnext[hl[k]] = bhead[b]
                    bhead[b] = hl[k]
                break
            if nt > 0:
                lq[0] = b
                hk[0] = bestv
                lq[6] = nt - 1
                return hl[nt - 1]
        lq[0] = b
        hs = 0
        for bb in range(b, nb):
            lk = bhead[bb]
            while lk >= 0:
                if fw[lk, 1] > 0:
                    hk[hs] = fw[lk, 0] / fw[lk, 1]
                    hl[hs] = lk
                    hs += 1
                lk = bnext[lk]
        for k in range((hs - 2) // 4, -1, -1):
            _lheap_sift(hk, hl, hs, k, hk[k], hl[k])
        lq[4] = 1
        lq[5] = hs
    hs = lq[5]
    while hs > 0:
        lk = hl[0]
        c = fw[lk, 1]
        if c == 0:
            hs = _lheap_pop(hk, hl, hs)
            continue
        level = fw[lk, 0] / c
        if hk[0] < level:
            nxt = np.inf
            for b in range(1, min(5, hs)):
                if hk[b] < nxt:
                    nxt = hk[b]
            if nxt < level:
                _lheap_sift(hk, hl, hs, 0, level, lk)
                continue
        hs = _lheap_pop(hk, hl, hs)
        lq[5] = hs
        return lk
    lq[5] = 0
    return -1


@njit(cache=_CACHE, error_model="numpy")
def fill_links_mult(ptr, links, rows, mult, rem, out):
    """Max-min fair rates of the sub-flows ``rows`` on the capacities ``rem``, one bottleneck
    link at a time, as the simulator re-fills (there by groups), with the slots and link lists
    built here. Same result as :func:`fill_kernel_mult` (row ``f`` counts
    ``mult[f]`` times); writes ``out``, updates ``rem`` (clipped at 0), returns the number of
    saturated links.

    Links are taken in order of their share ``rem / count`` over unfrozen rows (the link
    queue, :func:`_lq_next`). The link with the smallest share saturates first: all its
    unfrozen rows freeze at that share, which is subtracted from their other links, whose shares
    can only grow (a frozen row takes no more than any of its links' shares).
    """
    n_l = rem.shape[0]
    n = rows.shape[0]
    s_links, s_nl, s_mult, s_in, wc, slinks, n_sl = _slots_of(ptr, links, rows, mult, rem)
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
    hk, hl, bhead, bnext, lq, fb = _lq_arrays(n_l)
    fbits = fb.view(np.int64)
    fw = np.empty((n_l, 2))
    fw[:, 0] = rem
    fw[:, 1] = wc
    _lq_init(slinks, n_sl, fw, hk, hl, bhead, bnext, lq)
    left = n
    steps = 0
    while left > 0:
        lk = _lq_next(fw, hk, hl, bhead, bnext, lq, fb, fbits)
        if lk < 0:
            break
        c = fw[lk, 1]
        level = fw[lk, 0] / c
        steps += 1
        for s in range(lp_ptr[lk], lp_ptr[lk] + alen[lk]):
            i = adj_s[s]
            if not s_in[i]:
                continue
            left -= 1
            mf = _freeze(i, level, s_links, s_nl, s_mult, out, s_in, fw[:, 0], fw[:, 1])
            if c == mf:
                break  # the link's last unfrozen slot
            c -= mf
    rem[:] = fw[:, 0]
    return steps


# ---------------------------------------------------------------------- release-time heap
@njit(cache=_CACHE)
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


@njit(cache=_CACHE)
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
@njit(cache=_CACHE, inline="always")
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


@njit(cache=_CACHE)
def _grow(a, need):
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    b[: a.shape[0]] = a
    return b


@njit(cache=_CACHE, error_model="numpy")
def event_loop(
    cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
    rdep, lp_ptr, rtol, record, emult, max_refills, row_space, cut_at, late_every,
):  # fmt: skip
    """The event loop of :func:`simulate_kernel` (its arguments, its results and ``stopped``),
    with an optional horizon and late cut, for :func:`topoopt.flowsim.timevarying.
    past_horizon_after_epochs` (``rest_kernel``): no event after ``cut_at`` (seconds) is
    simulated, and with ``late_every > 0``, every ``late_every`` events the loop stops once ``t +
    max over links of (bytes left on the link) / capacity`` passes ``cut_at`` (plus ``rtol`` of it
    per piece with bytes: completions merged early), the bytes left being the active sub-flows'
    (a group member's: its target less the group's service at ``t``) and the sub-flows not
    started (kept per link as they start, only when ``late_every > 0``). ``stopped``: the loop
    stopped so (some byte is sent after ``cut_at``). ``cut_at = inf, late_every = 0`` is the
    plain loop of :func:`simulate_kernel`."""

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
    s_mult = np.empty((max(n_p, 1), width), np.int64)  # its count on each of its links
    s_tg = np.empty(max(n_p, 1))  # service target in its group (bytes left if ungrouped)
    s_in = np.zeros(max(n_p, 1), np.bool_)  # an ungrouped arrival being filled
    s_bj = np.full(max(n_p, 1), -1, np.int64)  # which of its links is its group's (-1: none)
    n_act = 0
    # ---- links, and the group of each link
    # free capacity (capacity - load), and the unfrozen sub-flows during a filling (0 between)
    fw = np.zeros((n_l, 2))
    fw[:, 0] = cap
    nact = np.zeros(n_l, np.int64)
    alen = np.zeros(n_l, np.int64)
    adj_s = np.empty(max(n_e, 1), np.int32)
    adj_j = np.empty(max(n_e, 1), np.int32)
    gsz = np.zeros(n_l, np.int64)  # members (list entries)
    gcnt = np.zeros(n_l, np.int64)  # members with multiplicity
    gshare = np.zeros(n_l)  # the members' rate
    gV = np.zeros(n_l)  # service at time gT
    gT = np.zeros(n_l)
    gnext = np.full(n_l, np.inf)  # next member finish
    gst = np.zeros(n_l, np.bool_)  # gnext to be computed again
    gin = np.full(n_l, -1, np.int64)  # event whose filling re-fills it (-1 once frozen)
    glist = np.empty(max(n_l, 1), np.int64)  # non-empty groups
    gpos = np.full(n_l, -1, np.int64)
    n_g = np.zeros(1, np.int64)
    # rows: (link, count) in rw[a : a + n], (a, n, room) = rmeta[g] (valid if r_ok)
    rmeta = np.zeros((n_l, 3), np.int64)
    r_ok = np.zeros(n_l, np.bool_)
    r_size = 4 * n_e + 16 * n_l + 16 if row_space <= 0 else max(row_space, 2 * n_e + 16)
    rw = np.empty((r_size, 2), np.int32)
    r_end = np.zeros(1, np.int64)
    r_tmp = np.zeros(n_l, np.int64)
    # ---- release heap, results
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
    # ---- scratch
    gwork = np.empty(max(n_l, 1), np.int64)
    slinks = np.empty(n_l + 1, np.int64)
    lhk, lhl, bhead, bnext, lq, _ = _lq_arrays(n_l)
    done = np.empty(max(n_p, 1), np.int64)
    dstk = np.empty(max(n_p, 1), np.int64)
    mark = np.full(n_l, -1, np.int64)
    xmark = np.full(n_l, -1, np.int64)
    wbuf = np.empty(max(n_p, 1))
    mbuf = np.empty(max(n_p, 1), np.int64)
    touched = np.empty(n_l, np.int64)
    st = np.empty(16)
    sl = np.empty(16, np.int64)
    sv = np.empty(16)
    ns = 0
    n_events = 0
    steps = 0
    refilled = 0
    t_now = 0.0
    stopped = False
    uload = np.zeros(n_l)  # bytes of the sub-flows not started, per link (with multiplicity)
    n_un = 0
    for p in range(n_p if late_every > 0 else 0):
        if pbytes[p] > 0.0:
            n_un += 1
            for e in range(path_ptr[p], path_ptr[p + 1]):
                uload[path_links[e]] += pbytes[p] * emult[e]
    lload = np.zeros(n_l)
    late_next = 0
    while True:
        if late_every > 0 and n_events >= late_next:
            late_next = n_events + late_every
            n_pc = n_un
            for k in range(n_l):
                lload[k] = uload[k]
            for i in range(n_act):
                if s_bj[i] >= 0:
                    g = s_links[i, s_bj[i]]
                    x = s_tg[i] - (gV[g] + gshare[g] * (t_now - gT[g]))
                else:
                    x = s_tg[i]
                if x > 0.0:
                    n_pc += 1
                    for j in range(s_nl[i]):
                        lload[s_links[i, j]] += x * s_mult[i, j]
            worst = 0.0
            for k in range(n_l):
                if lload[k] > 0.0:
                    d = lload[k] / cap[k]
                    if d > worst:
                        worst = d
            if t_now + worst > cut_at + cut_at * (n_pc * rtol + 1e-9):
                stopped = True
                break
        # ---- next event: the earliest member finish of any group, or the next release
        t_c = np.inf
        for k in range(n_g[0]):
            g = glist[k]
            if gst[g]:  # its share, service or heap head changed at the last event
                gst[g] = False
                sh = gshare[g]  # the smallest member target heads the group's heap
                gnext[g] = gT[g] + (s_tg[adj_s[lp_ptr[g]]] - gV[g]) / sh if sh > 0.0 else np.inf
            v = gnext[g]
            if v < t_c:
                t_c = v
        t_a = hk[0] if hsize > 0 else np.inf
        t = min(t_c, t_a)
        if t == np.inf:
            break
        if t > cut_at:
            stopped = True
            break
        if t < t_now:
            t = t_now  # a finish estimate rounded just below the current time
        t_now = t
        n_events += 1
        ev = n_events
        cut = t + rtol * abs(t)
        r0 = np.inf
        n_t = 0
        # ---- completions: every member of a group due by `cut`, retired from the highest slot
        # down (the last slot moves into the freed one), then flows finished and dependents
        # released
        n_done = 0
        if t_c <= cut:
            for k in range(n_g[0]):
                g = glist[k]
                if gnext[g] > cut:
                    continue
                # the members due are a subtree at the top of the group's heap (a member's
                # finish estimate grows with its target): walk it
                sh = gshare[g]
                a = lp_ptr[g]
                n_s = 1
                dstk[0] = 0
                while n_s > 0:
                    n_s -= 1
                    h = dstk[n_s]
                    i = adj_s[a + h]
                    if gT[g] + (s_tg[i] - gV[g]) / sh <= cut:
                        done[n_done] = i
                        n_done += 1
                        for c2 in range(2 * h + 1, min(2 * h + 3, gsz[g])):
                            dstk[n_s] = c2
                            n_s += 1
            if n_done > 1:  # slots from the highest down
                done[:n_done] = np.sort(done[:n_done])[::-1]
            for k in range(n_done):
                i = done[k]
                p = act[i]
                done[k] = p
                g = s_links[i, s_bj[i]]
                rp = gshare[g]
                if rp < r0:
                    r0 = rp
                path_last[p] = t
                _leave(i, g, s_links, s_nl, s_bj, s_slot, s_mult, s_tg, adj_s, adj_j, lp_ptr,
                       gsz, gcnt, rmeta, r_ok, rw, glist, gpos, n_g)  # fmt: skip
                gst[g] = True
                for j in range(s_nl[i]):
                    lk = s_links[i, j]
                    mp = s_mult[i, j]
                    fw[lk, 0] += rp * mp
                    nact[lk] -= mp
                    if record and mark[lk] != ev:
                        mark[lk] = ev
                        touched[n_t] = lk
                        n_t += 1
                    # swap-remove slot i from the link's list (it is in no group's front)
                    s = s_slot[i, j]
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
                    _move_slot(n_act, i, act, s_links, s_slot, s_nl, s_mult, s_tg, s_bj, adj_s)
            for k in range(n_done):
                hsize = _path_done(
                    done[k], pflow, n_left, flow_ptr, path_last, plat, finish, rdep_ptr, rdep,
                    dep_left, dep_ptr, deps, start, release, hk, hv, hsize,
                )  # fmt: skip
        # ---- arrivals released by `cut` (zero-byte sub-flows finish on the spot)
        n_old = n_act
        n_rel = 0
        while hsize > 0 and hk[0] <= cut:
            f, hsize = _heap_pop(hk, hv, hsize)
            n_rel += 1
            for p in range(flow_ptr[f], flow_ptr[f + 1]):
                path_start[p] = t
                if late_every > 0 and pbytes[p] > 0.0:
                    n_un -= 1
                    for e in range(path_ptr[p], path_ptr[p + 1]):
                        uload[path_links[e]] -= pbytes[p] * emult[e]
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
                s_tg[i] = pbytes[p]
                s_bj[i] = -1
                s_nl[i] = path_ptr[p + 1] - path_ptr[p]
                for j in range(s_nl[i]):
                    lk = path_links[path_ptr[p] + j]
                    mp = emult[path_ptr[p] + j]
                    s_mult[i, j] = mp
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
                    if xmark[lk] == ev:
                        continue
                    xmark[lk] = ev
                    v = _water_level(lk, cap[lk], nact[lk], lp_ptr, alen, adj_s, adj_j, s_links,
                                     s_bj, gshare, s_mult, wbuf, mbuf)  # fmt: skip
                    if v < r0:
                        r0 = v
        if n_done + n_rel == 0:
            raise RuntimeError("flow model: an event with nothing to complete or start (a bug)")
        if r0 == np.inf:
            if record and n_t > 0:
                st, sl, sv, ns = _log(st, sl, sv, ns, t, touched, n_t, cap, fw)
            continue
        # ---- re-fill every group at or above the threshold and every arrival (the others
        # provably keep their rates), and every group on a link they cross (re-filling more is
        # exact; the level lemma leaves none there but rounding might): their load comes off
        # their links, which count them for the filling
        thr = r0 * (1.0 - REFILL_MARGIN)
        n_sl = 0
        n_w = 0
        left = 0
        n_rows = 0
        rr = 0  # row entries of the groups re-filled and of the kept ones (estimated if
        kk = 0  # a row is not built)
        for k in range(n_g[0]):
            g = glist[k]
            ln = rmeta[g, 1] if r_ok[g] else 4 * gsz[g]
            if gshare[g] >= thr:
                gin[g] = ev
                gwork[n_w] = g
                n_w += 1
                rr += ln
            else:
                kk += ln
        fresh = kk + n_l // 2 < rr
        if fresh:
            # Fewer kept than re-filled: the free capacity is the capacity less the kept
            # groups' load (the sum the resync below makes) and the count to fill is the active
            # count less theirs, arrivals included; the links with a count are listed in order.
            for lk in range(n_l):
                fw[lk, 0] = cap[lk]
                fw[lk, 1] = nact[lk]
            for k in range(n_g[0]):
                g = glist[k]
                if gin[g] != ev:
                    rp = gshare[g]
                    a = rmeta[g, 0]
                    if not r_ok[g]:
                        a = _row(
                            g, rmeta, r_ok, rw, r_end, r_tmp, lp_ptr, gsz, adj_s,
                            s_links, s_nl, s_mult,
                        )  # fmt: skip
                    for q in range(a, a + rmeta[g, 1]):
                        m = rw[q, 0]
                        cn = rw[q, 1]
                        fw[m, 0] -= rp * cn
                        fw[m, 1] -= cn
            for k in range(n_w):
                left += gsz[gwork[k]]
                n_rows += gsz[gwork[k]]
            n_w = 0
            for i in range(n_old, n_act):
                s_in[i] = True
                left += 1
                n_rows += 1
            for lk in range(n_l):
                slinks[n_sl] = lk
                n_sl += np.int64(fw[lk, 1] > 0.0)
        else:
            for i in range(n_old, n_act):
                s_in[i] = True
                left += 1
                n_rows += 1
                for j in range(s_nl[i]):
                    lk = s_links[i, j]
                    mf = s_mult[i, j]
                    c = fw[lk, 1]
                    if c == 0.0:
                        slinks[n_sl] = lk
                        n_sl += 1
                    fw[lk, 1] = c + mf
        n_chk = 0  # slinks[:n_chk] have their groups re-filled
        while True:
            while n_w > 0:
                n_w -= 1
                g = gwork[n_w]
                left += gsz[g]
                n_rows += gsz[g]
                rp = gshare[g]
                a = rmeta[g, 0]
                if not r_ok[g]:
                    a = _row(
                        g, rmeta, r_ok, rw, r_end, r_tmp, lp_ptr, gsz, adj_s, s_links,
                        s_nl, s_mult,
                    )  # fmt: skip
                for k in range(a, a + rmeta[g, 1]):
                    lk = rw[k, 0]
                    cn = rw[k, 1]
                    c = fw[lk, 1]
                    # listed on its first count, without a branch (one slot of room past n_l)
                    slinks[n_sl] = lk
                    n_sl += np.int64(c == 0.0)
                    fw[lk, 0] += rp * cn
                    fw[lk, 1] = c + cn
            for k in range(n_chk, n_sl):
                lk = slinks[k]
                if gsz[lk] > 0 and gin[lk] != ev:
                    gin[lk] = ev
                    gwork[n_w] = lk
                    n_w += 1
            n_chk = n_sl
            if n_w == 0:
                break
        refilled += n_rows
        if 0 <= max_refills < refilled:
            break  # over the work limit: the caller reports it (nothing returned is complete)
        if not fresh and (n_rows == n_act or ev % RESYNC_EVERY == 0):
            # Recompute the load of the kept groups from scratch (no accumulated rounding).
            fw[:, 0] = cap
            for k in range(n_g[0]):
                g = glist[k]
                if gin[g] != ev:
                    rp = gshare[g]
                    a = rmeta[g, 0]
                    if not r_ok[g]:
                        a = _row(
                            g, rmeta, r_ok, rw, r_end, r_tmp, lp_ptr, gsz, adj_s,
                            s_links, s_nl, s_mult,
                        )  # fmt: skip
                    for q in range(a, a + rmeta[g, 1]):
                        fw[rw[q, 0], 0] -= rp * rw[q, 1]
        for k in range(n_sl):
            lk = slinks[k]
            if not fw[lk, 0] > 0.0:
                fw[lk, 0] = 0.0
            if record and mark[lk] != ev:
                mark[lk] = ev
                touched[n_t] = lk
                n_t += 1
        # ---- progressive filling, one bottleneck link at a time (the link queue): a group
        # saturating on its own link freezes through its row; sub-flows of other groups (or
        # arrivals) unfrozen on it are frozen one by one and join its group
        _lq_init(slinks, n_sl, fw, lhk, lhl, bhead, bnext, lq)
        qb = lq[0]
        qshift = lq[1]
        qlo = lq[2]
        qnb = lq[3]
        qheap = False
        qhs = 0
        qnt = 0
        while left > 0:
            # ---- the next link: :func:`_lq_next` written out here, its state in locals (an
            # inlined call passes its eight arrays with reference counting, per link filled)
            lk = -1
            if not qheap:
                while qnt > 0:
                    qnt -= 1
                    ql = lhl[qnt]
                    qc = fw[ql, 1]
                    if qc == 0:
                        continue
                    qv = fw[ql, 0] / qc
                    if qv == lhk[0]:
                        lk = ql
                        break
                    qq = min((np.float64(qv).view(np.int64) >> qshift) - qlo, qnb - 1)
                    bnext[ql] = bhead[qq]
                    bhead[qq] = ql
                if lk < 0:
                    while qb < qnb - 1:
                        if bhead[qb] < 0:
                            qb += 1
                            continue
                        nt = 0
                        bestv = np.inf
                        ql = bhead[qb]
                        bhead[qb] = -1
                        seen = 0
                        while ql >= 0:
                            seen += 1
                            qn = bnext[ql]
                            qc = fw[ql, 1]
                            if qc > 0:
                                qv = fw[ql, 0] / qc
                                qq = min((np.float64(qv).view(np.int64) >> qshift) - qlo, qnb - 1)
                                if qq > qb:
                                    bnext[ql] = bhead[qq]
                                    bhead[qq] = ql
                                elif nt == 0 or qv < bestv:
                                    for k in range(nt):
                                        bnext[lhl[k]] = bhead[qb]
                                        bhead[qb] = lhl[k]
                                    lhl[0] = ql
                                    nt = 1
                                    bestv = qv
                                elif qv == bestv:
                                    lhl[nt] = ql
                                    nt += 1
                                else:
                                    bnext[ql] = bhead[qb]
                                    bhead[qb] = ql
                            ql = qn
                        if seen > LQ_CROWD:
                            for k in range(nt):
                                bnext[lhl[k]] = bhead[qb]
                                bhead[qb] = lhl[k]
                            break
                        if nt > 0:
                            lhk[0] = bestv
                            qnt = nt - 1
                            lk = lhl[nt - 1]
                            break
                    if lk < 0:
                        qhs = 0
                        for bb in range(qb, qnb):
                            ql = bhead[bb]
                            while ql >= 0:
                                if fw[ql, 1] > 0:
                                    lhk[qhs] = fw[ql, 0] / fw[ql, 1]
                                    lhl[qhs] = ql
                                    qhs += 1
                                ql = bnext[ql]
                        for k in range((qhs - 2) // 4, -1, -1):
                            _lheap_sift(lhk, lhl, qhs, k, lhk[k], lhl[k])
                        qheap = True
            if lk < 0 and qheap:
                while qhs > 0:
                    ql = lhl[0]
                    qc = fw[ql, 1]
                    if qc == 0:
                        qhs = _lheap_pop(lhk, lhl, qhs)
                        continue
                    qv = fw[ql, 0] / qc
                    if lhk[0] < qv:
                        qn2 = np.inf
                        for bb in range(1, min(5, qhs)):
                            if lhk[bb] < qn2:
                                qn2 = lhk[bb]
                        if qn2 < qv:
                            _lheap_sift(lhk, lhl, qhs, 0, qv, ql)
                            continue
                    qhs = _lheap_pop(lhk, lhl, qhs)
                    lk = ql
                    break
            if lk < 0:
                break
            c = fw[lk, 1]
            x = fw[lk, 0] / c
            steps += 1
            own = 0
            if gsz[lk] > 0:
                own = gcnt[lk]
                a = rmeta[lk, 0]
                if not r_ok[lk]:
                    a = _row(
                        lk, rmeta, r_ok, rw, r_end, r_tmp, lp_ptr, gsz, adj_s, s_links,
                        s_nl, s_mult,
                    )  # fmt: skip
                for k in range(a, a + rmeta[lk, 1]):
                    m = rw[k, 0]
                    cn = rw[k, 1]
                    fw[m, 0] = max(fw[m, 0] - x * cn, 0.0)
                    fw[m, 1] -= cn
                if x != gshare[lk]:
                    # a new rate: the service restarts at t (a group back at its old rate
                    # keeps its service and its next completion, unless a sub-flow joins)
                    gV[lk] += gshare[lk] * (t - gT[lk])
                    gT[lk] = t
                    gst[lk] = True
            else:
                gst[lk] = True
            gin[lk] = -1
            gshare[lk] = x
            left -= gsz[lk]
            # the others from the back of the list, where arrivals are (one that joins swaps
            # with the first entry behind the group, which is looked at next)
            need = c - own
            q = lp_ptr[lk] + alen[lk] - 1
            while need > 0 and q >= lp_ptr[lk] + gsz[lk]:
                i = adj_s[q]
                jo = s_bj[i]
                if jo < 0:
                    if not s_in[i]:
                        q -= 1
                        continue
                    s_in[i] = False
                    rem = s_tg[i]
                else:
                    go = s_links[i, jo]
                    if gin[go] != ev:
                        q -= 1
                        continue
                    rem = s_tg[i] - (gV[go] + gshare[go] * (t - gT[go]))
                    _leave(i, go, s_links, s_nl, s_bj, s_slot, s_mult, s_tg, adj_s, adj_j,
                           lp_ptr, gsz, gcnt, rmeta, r_ok, rw, glist, gpos, n_g)  # fmt: skip
                    gst[go] = True
                for j in range(s_nl[i]):
                    m = s_links[i, j]
                    mf = s_mult[i, j]
                    fw[m, 0] = max(fw[m, 0] - x * mf, 0.0)
                    fw[m, 1] -= mf
                mf = s_mult[i, adj_j[q]]  # its count on this link
                if gsz[lk] == 0:
                    gV[lk] = 0.0
                    gT[lk] = t
                    gpos[lk] = n_g[0]
                    glist[n_g[0]] = lk
                    n_g[0] += 1
                elif gT[lk] != t:
                    gV[lk] += gshare[lk] * (t - gT[lk])
                    gT[lk] = t
                gst[lk] = True
                s_tg[i] = gV[lk] + rem
                s_bj[i] = adj_j[q]
                _swap_entries(q, lp_ptr[lk] + gsz[lk], adj_s, adj_j, s_slot)
                gsz[lk] += 1
                _gheap_up(lk, gsz[lk] - 1, lp_ptr, adj_s, adj_j, s_slot, s_tg)
                gcnt[lk] += mf
                _row_add(i, lk, 1, rmeta, r_ok, rw, s_links, s_nl, s_mult)
                need -= mf
                left -= 1
            if fw[lk, 1] != 0.0:
                raise RuntimeError("flow model: a filled link kept unfrozen sub-flows (a bug)")
        if left != 0:
            raise RuntimeError("flow model: a filling ended with sub-flows unfrozen (a bug)")
        if record and n_t > 0:
            st, sl, sv, ns = _log(st, sl, sv, ns, t, touched, n_t, cap, fw)
    return (
        release,
        finish,
        path_start,
        path_last,
        st[:ns].copy(),
        sl[:ns].copy(),
        sv[:ns].copy(),
        n_events,
        steps,
        refilled,
        stopped,
    )


@njit(cache=_CACHE, error_model="numpy")
def simulate_kernel(
    cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
    rdep, lp_ptr, rtol, record, emult, max_refills, row_space,
):  # fmt: skip
    """Run the event loop of :func:`topoopt.flowsim.simulator.simulate` on flat arrays.

    Sub-flow ``p`` stands for identical sub-flows counted per link: on the link of incidence
    entry ``e`` (``path_links[e]``) it counts ``emult[e]`` times (its flow's multiplicity when
    every member crosses every link of the path; a symmetry quotient,
    :mod:`topoopt.flowsim.symmetry`, counts the members of a class per link of a link class).
    ``pbytes[p]`` and its rate are a member's; link counts, loads and the filling count it
    ``emult`` times on each link. ``lp_ptr[l]`` is where link ``l``'s slots start in the list of its
    active sub-flows (``lp_ptr[l+1] - lp_ptr[l]`` = the number of sub-flows crossing it).

    The active sub-flows live in slots ``0 .. n_act - 1`` (``act[i]`` is the sub-flow in slot
    ``i``); a completion moves the last slot into the freed one. Slot numbers, links and list
    positions are ``int32`` (fewer than 2**31 incidence entries). Every active sub-flow belongs
    to the *group* of the link it last froze on (``s_bj[i]``: which of its links; -1 only for an
    arrival before its first filling) and gets the group's rate. A group keeps its members at
    the front of its link's list, the links its members cross with their counts (its *row*,
    updated as members join and leave), and its *service* ``V(t)``: the bytes each member has
    sent since a reference point, piecewise linear in ``t`` (``gV``, ``gT``, ``gshare``). A
    member's ``s_tg[i]`` is the service at which it has sent everything, so its bytes left are
    ``s_tg[i] - V(t)`` and nothing per member changes while its group keeps its members.
    The members at the front of a group's list form a binary min-heap of their targets, so the
    group's next completion is its first entry and the members due at an event are a subtree at
    the top (a join or leave costs ``log`` of the group's size, never a scan of its members:
    a million sub-flows sharing one link cost ``n log n``, not ``n**2``).

    Returns ``(release, finish, path_start, path_last, series_time, series_link, series_load,
    n_events, fill_steps, refilled)`` where ``refilled`` counts the sub-flow re-fills done.
    With ``max_refills >= 0`` the loop stops as soon as more re-fills than that are needed
    (``refilled > max_refills`` on return; the other results are then incomplete).
    ``row_space`` entries hold the groups' rows (0: four per incidence entry and sixteen per
    link; at least the two per incidence entry that the largest row may need); when they run
    out every row is built again on its next use.
    """
    (release, finish, path_start, path_last, series_time, series_link, series_load, n_events,
     fill_steps, refilled, _) = event_loop(
        cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps, rdep_ptr,
        rdep, lp_ptr, rtol, record, emult, max_refills, row_space, np.inf, 0,
    )  # fmt: skip
    return (
        release, finish, path_start, path_last, series_time, series_link, series_load, n_events,
        fill_steps, refilled,
    )  # fmt: skip


@njit(cache=_CACHE)
def _row(g, rmeta, r_ok, rw, r_end, r_tmp, lp_ptr, gsz, adj_s, s_links, s_nl, s_mult):
    """Where group ``g``'s row starts in ``rw`` (``(link, count)``: the links its members cross,
    each once, with their members counted with multiplicity; ``rmeta[g] = (start, length,
    room)``), built from its members if it is not (``r_ok``). A row is built at the end of
    ``rw`` with room to grow by half; when that is full, every row is dropped (built again on
    its next use). Members joining or leaving update a built row (:func:`_row_add`)."""
    if r_ok[g]:
        return rmeta[g, 0]
    need = 0
    for q in range(lp_ptr[g], lp_ptr[g] + gsz[g]):
        need += s_nl[adj_s[q]]
    if r_end[0] + need + need // 2 + 8 > rw.shape[0]:
        r_ok[:] = False
        r_end[0] = 0
    a = r_end[0]
    e = a
    for q in range(lp_ptr[g], lp_ptr[g] + gsz[g]):
        i = adj_s[q]
        for j in range(s_nl[i]):
            m = s_links[i, j]
            if r_tmp[m] == 0:
                rw[e, 0] = m
                e += 1
            r_tmp[m] += s_mult[i, j]
    for k in range(a, e):
        m = rw[k, 0]
        if r_tmp[m] > 2147483647:
            raise RuntimeError("flow model: more than 2**31 sub-flows of one group on a link")
        rw[k, 1] = r_tmp[m]
        r_tmp[m] = 0
    room = (e - a) + (e - a) // 2 + 8  # its length is at most `need`: this fits
    rmeta[g, 0] = a
    rmeta[g, 1] = e - a
    rmeta[g, 2] = room
    r_ok[g] = True
    r_end[0] = a + room
    return a


@njit(cache=_CACHE, inline="always")
def _row_add(i, g, sign, rmeta, r_ok, rw, s_links, s_nl, s_mult):
    """Add (``sign`` 1) or take away (-1) slot ``i``'s links in group ``g``'s row, if built; a
    link whose count drops to 0 leaves the row (the last entry takes its place). A row with no
    room left is dropped instead (built again on its next use)."""
    if not r_ok[g]:
        return
    a = rmeta[g, 0]
    n = rmeta[g, 1]
    for j in range(s_nl[i]):
        m = s_links[i, j]
        mf = sign * s_mult[i, j]
        k = a
        while k < a + n and rw[k, 0] != m:
            k += 1
        if k < a + n:
            c = rw[k, 1] + mf
            if c == 0:
                n -= 1
                rw[k, 0] = rw[a + n, 0]
                rw[k, 1] = rw[a + n, 1]
            else:
                rw[k, 1] = c
        elif n < rmeta[g, 2]:
            rw[a + n, 0] = m
            rw[a + n, 1] = mf
            n += 1
        else:
            r_ok[g] = False
            return
    rmeta[g, 1] = n


@njit(cache=_CACHE, inline="always")
def _leave(i, g, s_links, s_nl, s_bj, s_slot, s_mult, s_tg, adj_s, adj_j, lp_ptr, gsz, gcnt,
           rmeta, r_ok, rw, glist, gpos, n_g):  # fmt: skip
    """Take slot ``i`` out of group ``g`` (out of the front of ``g``'s list, just behind it, and
    out of its row); the entry that takes its place in the group's heap is sifted into place."""
    jo = s_bj[i]
    pos = s_slot[i, jo]
    _swap_entries(pos, lp_ptr[g] + gsz[g] - 1, adj_s, adj_j, s_slot)
    gsz[g] -= 1
    gcnt[g] -= s_mult[i, jo]
    s_bj[i] = -1
    _row_add(i, g, -1, rmeta, r_ok, rw, s_links, s_nl, s_mult)
    h = pos - lp_ptr[g]
    if h < gsz[g]:
        h = _gheap_up(g, h, lp_ptr, adj_s, adj_j, s_slot, s_tg)
        _gheap_down(g, h, gsz[g], lp_ptr, adj_s, adj_j, s_slot, s_tg)
    if gsz[g] == 0:
        k = gpos[g]
        h = glist[n_g[0] - 1]
        glist[k] = h
        gpos[h] = k
        gpos[g] = -1
        n_g[0] -= 1


@njit(cache=_CACHE, inline="always")
def _gheap_up(g, h, lp_ptr, adj_s, adj_j, s_slot, s_tg):
    """Sift entry ``h`` of group ``g``'s heap up (the group's members, the front of its link's
    list, form a binary min-heap of their targets ``s_tg``); returns where it ends."""
    a = lp_ptr[g]
    while h > 0:
        up = (h - 1) // 2
        if s_tg[adj_s[a + up]] <= s_tg[adj_s[a + h]]:
            break
        _swap_entries(a + up, a + h, adj_s, adj_j, s_slot)
        h = up
    return h


@njit(cache=_CACHE, inline="always")
def _gheap_down(g, h, n, lp_ptr, adj_s, adj_j, s_slot, s_tg):
    """Sift entry ``h`` of group ``g``'s heap (of ``n`` members) down (:func:`_gheap_up`)."""
    a = lp_ptr[g]
    while True:
        c = 2 * h + 1
        if c >= n:
            break
        if c + 1 < n and s_tg[adj_s[a + c + 1]] < s_tg[adj_s[a + c]]:
            c += 1
        if s_tg[adj_s[a + h]] <= s_tg[adj_s[a + c]]:
            break
        _swap_entries(a + h, a + c, adj_s, adj_j, s_slot)
        h = c


@njit(cache=_CACHE, error_model="numpy", inline="always")
def _freeze(i, level, s_links, s_nl, s_mult, rate, s_in, resid, wc):
    """Freeze slot ``i`` at rate ``level`` (written to ``rate[i]``): it leaves the set
    (``s_in``), takes ``level`` times its multiplicity from each of its links (``resid``,
    clipped at 0) and leaves their counts ``wc``. Returns its multiplicity."""
    s_in[i] = False
    mf = s_mult[i]
    take = level * mf
    for j in range(s_nl[i]):
        m = s_links[i, j]
        resid[m] = max(resid[m] - take, 0.0)
        wc[m] -= mf
    rate[i] = level
    return mf


@njit(cache=_CACHE, error_model="numpy")
def _rounds_slots(
    rows, n_rows, s_links, s_nl, s_mult, rate, s_in, resid, wc, slinks, n_sl, share, bott, fm,
):  # fmt: skip
    """Rounds of local-bottleneck filling (the algorithm of :func:`fill_kernel`) of the slots
    ``rows[:n_rows]`` (marked in ``s_in``, counted in ``wc``) on the capacities ``resid``, their
    links ``slinks[:n_sl]``: every round freezes all the slots of every link whose share is the
    smallest share of each of its slots' links (:func:`_freeze`), until all are frozen (every
    round freezes at least the slots of the link with the smallest share). Returns the number
    of rounds. ``share``, ``bott`` (per link) and ``fm`` (per row) are scratch."""
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
            _freeze(i, fm[k], s_links, s_nl, s_mult, rate, s_in, resid, wc)
        rounds += 1
        n_rows = w
        v = 0
        for k in range(n_sl):
            lk = slinks[k]
            if wc[lk] > 0:
                slinks[v] = lk
                v += 1
        n_sl = v
    return rounds


@njit(cache=_CACHE, inline="always")
def _move_slot(a, b, act, s_links, s_slot, s_nl, s_mult, s_tg, s_bj, adj_s):
    """Move the active sub-flow in slot ``a`` to slot ``b`` (its link lists follow)."""
    act[b] = act[a]
    s_bj[b] = s_bj[a]
    s_nl[b] = s_nl[a]
    s_tg[b] = s_tg[a]
    for j in range(s_nl[a]):
        s_links[b, j] = s_links[a, j]
        s_mult[b, j] = s_mult[a, j]
        s = s_slot[a, j]
        s_slot[b, j] = s
        adj_s[s] = b


@njit(cache=_CACHE, inline="always")
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


@njit(cache=_CACHE)
def _water_level(
    lk, capacity, n_active, lp_ptr, alen, adj_s, adj_j, s_links, s_bj, gshare, s_mult, wbuf,
    mbuf,
):  # fmt: skip
    """A lower bound, exact up to rounding when the iteration converges, of the level ``x``
    solving ``sum_f m_f min(rate_f, x) + k x = capacity`` on link ``lk``: ``f`` over its active
    sub-flows (the slots ``adj_s[lp_ptr[lk] : lp_ptr[lk] + alen[lk]]``, each at its group's rate
    ``gshare``) with a rate (> 0), ``m_f`` their multiplicities, ``k`` the other active ones
    (``n_active`` counted with multiplicity in all).

    Fixed-point iteration from below: with ``x`` a level at most the solution, every sub-flow
    with ``rate_f < x`` is capped at ``rate_f`` in the solution too, so ``x' = (capacity -
    capped rates) / (uncapped count)`` is again at most the solution and at least ``x``; it
    stops when no new sub-flow is capped (then ``x`` is the solution) or after 16 passes (then
    ``x`` is a valid, smaller threshold: the simulator only needs a lower bound, see point 2 of
    its docstring). Linear per pass, where sorting the rates would cost ``m log m``."""
    m = 0
    for q in range(lp_ptr[lk], lp_ptr[lk] + alen[lk]):
        i = adj_s[q]
        if s_bj[i] < 0:
            continue
        r = gshare[s_links[i, s_bj[i]]]
        if r > 0.0:
            wbuf[m] = r
            mbuf[m] = s_mult[i, adj_j[q]]
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


@njit(cache=_CACHE)
def _log(st, sl, sv, ns, t, touched, n_t, cap, fw):
    """Append ``(t, link, load)`` for the touched links (sorted) to the change log (the load is
    the capacity less the free capacity ``fw[:, 0]``), growing
    its arrays when needed; returns ``(st, sl, sv, ns)``."""
    st, sl, sv = _grow(st, ns + n_t), _grow(sl, ns + n_t), _grow(sv, ns + n_t)
    ls = np.sort(touched[:n_t])
    for k in range(n_t):
        st[ns] = t
        sl[ns] = ls[k]
        sv[ns] = cap[ls[k]] - fw[ls[k], 0]
        ns += 1
    return st, sl, sv, ns


# ---------------------------------------------------------------------- classes of identical flows
@njit(cache=_CACHE)
def _mix(h, v):
    """One step of a 64-bit hash (splitmix-style), wrapping."""
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=_CACHE)
def class_of_flow(
    f, base, dep_ptr, deps, class_of, tmp, table, mask, c_rep, c_hash, c_ptr, c_deps, n_c
):
    """Put flow ``f`` into its class (:func:`classes_kernel`): the class whose base row equals
    ``f``'s and whose sorted, deduplicated dependency classes equal its own, found through the
    open-addressing hash ``table`` (``mask`` + 1 slots) and compared exactly, else a new class
    ``n_c``. Sets ``class_of[f]``; returns the number of classes. ``tmp`` is scratch of at least
    ``f``'s dependency count; ``c_rep``, ``c_hash``, ``c_ptr``, ``c_deps`` the classes so far
    (representative, hash, CSR of their dependency classes). Shared with
    :func:`topoopt.flowsim._symmetry_kernels.classes_in_order`."""
    n_k = base.shape[1]
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
    return n_c


@njit(cache=_CACHE)
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
        n_c = class_of_flow(
            f, base, dep_ptr, deps, class_of, tmp, table, mask, c_rep, c_hash, c_ptr, c_deps, n_c
        )
        for j in range(rdep_ptr[f], rdep_ptr[f + 1]):
            g = rdep[j]
            indeg[g] -= 1
            if indeg[g] == 0:
                queue[qt] = g
                qt += 1
    return class_of, qt


@njit(cache=_CACHE)
def blocked_kernel(dep_ptr, rptr, rflows):
    """Kahn's algorithm over a dependency CSR: each flow's count of dependencies never released.

    ``dep_ptr`` gives each flow's number of dependencies, ``rptr``/``rflows`` the reverse CSR
    (the flows waiting on each flow). Flows with a count of 0 are released, one at a time from a
    stack; a flow is released when its count drops to 0. The flows left with a positive count are
    exactly those on or after a dependency cycle.
    """
    n = dep_ptr.size - 1
    indeg = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    top = 0
    for f in range(n):
        indeg[f] = dep_ptr[f + 1] - dep_ptr[f]
        if indeg[f] == 0:
            stack[top] = f
            top += 1
    while top > 0:
        top -= 1
        f = stack[top]
        for j in range(rptr[f], rptr[f + 1]):
            g = rflows[j]
            indeg[g] -= 1
            if indeg[g] == 0:
                stack[top] = g
                top += 1
    return indeg
