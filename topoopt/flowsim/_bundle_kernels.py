"""Compiled passes of the route-bundle reduction (:mod:`topoopt.flowsim.bundles`).

One refinement round over a :class:`~topoopt.flowsim.bundles.BundleSet` without expanding its
bundles into paths: a link's multiset of bundle colours is summed once per bundle for its fixed
links and once per switch-pair route for the links of the route's paths (each weighted by how
many of the route's paths cross the link). Plain loops over the arrays, ``O(bundles + fixed
incidences + route incidences)`` a round.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from topoopt.numba_cache import kernel_cache

_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)

__all__ = [
    "bundle_link_hash",
    "fixed_and_route_sums",
    "flow_bundle_sums",
    "route_signatures",
]


@njit(cache=_CACHE, inline="always")
def _mix(h, v):
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=_CACHE, inline="always")
def _word(seed, colour):
    return _mix(seed, np.uint64(colour)) | np.uint64(1)


@njit(cache=_CACHE)
def bundle_link_hash(
    n_l, lc, bc, bmult, count, fix_ptr, fix_links, sw, n_sw, ul_ptr, ul_link, ul_cnt, s_b, s_l
):
    """Next link colours' hashes: ``mix(lc[l], sum over the paths crossing l of the word of
    their bundle's colour)``, each path counted with its flow's multiplicity ``bmult``. A
    bundle of ``count[b]`` paths adds ``count[b]`` words to each of its fixed links; a route
    ``s``'s unique link ``ul_link[k]``, crossed by ``ul_cnt[k]`` of its paths, adds that many
    words of every bundle on ``s``."""
    h = np.zeros(n_l, np.uint64)
    t = np.zeros(max(n_sw, 1), np.uint64)
    for b in range(bc.shape[0]):
        w = _word(s_b, bc[b]) * np.uint64(bmult[b])
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            h[fix_links[k]] += w * np.uint64(count[b])
        if sw[b] >= 0:
            t[sw[b]] += w
    for s in range(n_sw):
        ts = t[s]
        for k in range(ul_ptr[s], ul_ptr[s + 1]):
            h[ul_link[k]] += ts * np.uint64(ul_cnt[k])
    out = np.empty(n_l, np.uint64)
    for link in range(n_l):
        out[link] = _mix(_mix(s_l, np.uint64(lc[link])), h[link])
    return out


@njit(cache=_CACHE)
def route_signatures(sw_ptr, path_ptr, path_links, lc, s_p, s_q):
    """Per switch-pair route: the hash of the multiset, over its paths, of the multiset of
    the link colours ``lc`` on each path."""
    n_sw = sw_ptr.shape[0] - 1
    out = np.zeros(n_sw, np.uint64)
    for s in range(n_sw):
        acc = np.uint64(0)
        for p in range(sw_ptr[s], sw_ptr[s + 1]):
            ph = np.uint64(0)
            for k in range(path_ptr[p], path_ptr[p + 1]):
                ph += _word(s_p, lc[path_links[k]])
            acc += _word(s_q, ph)
        out[s] = acc
    return out


@njit(cache=_CACHE)
def fixed_and_route_sums(bc, fcb, fix_ptr, fix_links, sw, lc, sig, s_x, s_b):
    """Next bundle hashes: ``mix(bc, its flow's colour fcb, multiset of its fixed links'
    colours, its route's signature)``."""
    n_b = bc.shape[0]
    out = np.empty(n_b, np.uint64)
    for b in range(n_b):
        acc = np.uint64(0)
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            acc += _word(s_x, lc[fix_links[k]])
        r = np.uint64(0x5851F42D4C957F2D) if sw[b] < 0 else sig[sw[b]]
        out[b] = _mix(_mix(_mix(_mix(s_b, np.uint64(bc[b])), np.uint64(fcb[b])), acc), r)
    return out


@njit(cache=_CACHE)
def flow_bundle_sums(flow_ptr, bc, s_f):
    """Per flow: the hash of the multiset of its bundles' colours."""
    n_f = flow_ptr.shape[0] - 1
    out = np.zeros(n_f, np.uint64)
    for f in range(n_f):
        acc = np.uint64(0)
        for b in range(flow_ptr[f], flow_ptr[f + 1]):
            acc += _word(s_f, bc[b])
        out[f] = acc
    return out


# ---------------------------------------------------------------------------------------------
# Incremental refinement: stable class ids, only the elements next to a moved one re-hashed.
# ---------------------------------------------------------------------------------------------

_S_LINK = np.uint64(0x8A5CD789635D2DFF)  # words of bundle classes summed on links
_S_ROUTE_P = np.uint64(0x121FD2155C472F96)  # words of link classes in one hop / path
_S_ROUTE_Q = np.uint64(0x0F4D3B2B9C8B7A35)  # words of hops / paths in a route signature
_S_FIX = np.uint64(0x3C6EF372FE94F82B)  # words of link classes on a bundle's fixed links
_S_FLOW = np.uint64(0xA54FF53A5F1D36F1)  # words of bundle classes in a flow
_S_KEY = np.uint64(0x510E527FADE682D1)  # start of an element's key hash
_S_DEPS = np.uint64(0x9B05688C2B3E6C1F)  # words of the classes of a flow's dependencies


@njit(cache=_CACHE)
def _mixn(h, v):
    """:func:`_mix`, not inlined at numba's IR level (LLVM still inlines it): a kernel with
    many call sites compiles several times faster."""
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=_CACHE)
def _wordn(seed, colour):
    return _mixn(seed, np.uint64(colour)) | np.uint64(1)


@njit(cache=_CACHE)
def split_touched(touched, key, cls, size, ckey, n_cls, scratch):
    """Split the classes of the ``touched`` elements by their new ``key`` (``key[j]`` of
    ``touched[j]``): ``(n_cls, moved, old)``, the elements that changed class and their old class.

    Invariant kept: every member of class ``c`` has the key ``ckey[c]``, and ``size[c]``
    members. A touched element whose key is still ``ckey[c]`` stays with the members not touched;
    the others are grouped by ``(class, key)``. Where members were not touched, their part keeps
    the id; where every member was touched, the largest group keeps it (the first of equal
    ones); every other group gets a new id ``n_cls, n_cls + 1, ..`` (in the order the groups
    were met). Only touched elements move, so a step costs ``O(touched)``. ``scratch``: three
    arrays (``int64``, ``int32``, ``int32``) of at least as many entries as classes can be,
    ``0``, ``-1``, ``-1`` on entry and on return (per-class touched counts, group with the
    class's key, largest group)."""
    n = touched.shape[0]
    t_cnt, stay, best = scratch
    size_t = 2
    while size_t < 2 * n + 2:
        size_t *= 2
    mask = np.uint64(size_t - 1)
    # int32 positions and counts (fewer than 2**31 elements): the first step touches every
    # element, and these tables are most of its memory
    table = np.full(size_t, -1, np.int32)
    g_of = np.empty(n, np.int32)
    g_cls = np.empty(n, np.int64)
    g_key = np.empty(n, np.uint64)
    g_cnt = np.zeros(n, np.int32)
    n_g = 0
    for j in range(n):
        c = cls[touched[j]]
        k = key[j]
        s = _mixn(_mixn(_S_KEY, np.uint64(c)), k) & mask
        while True:
            g = table[s]
            if g < 0:
                g = n_g
                table[s] = n_g
                g_cls[g] = c
                g_key[g] = k
                n_g += 1
                break
            if g_cls[g] == c and g_key[g] == k:
                break
            s = (s + np.uint64(1)) & mask
        g_of[j] = g
        g_cnt[g] += 1
    for g in range(n_g):
        c = g_cls[g]
        t_cnt[c] += g_cnt[g]
        if g_key[g] == ckey[c]:
            stay[c] = g
        if best[c] < 0 or g_cnt[g] > g_cnt[best[c]]:
            best[c] = g
    g_new = np.full(n_g, -1, np.int64)  # new class of a group (-1: keeps its class)
    for g in range(n_g):
        c = g_cls[g]
        keeper = stay[c] if size[c] > t_cnt[c] else best[c]
        if g != keeper:
            g_new[g] = n_cls
            size[n_cls] = g_cnt[g]
            ckey[n_cls] = g_key[g]
            n_cls += 1
    for g in range(n_g):
        c = g_cls[g]
        if t_cnt[c] == 0:
            continue
        keeper = stay[c] if size[c] > t_cnt[c] else best[c]
        if keeper >= 0:
            size[c] = size[c] - t_cnt[c] + g_cnt[keeper]
            ckey[c] = g_key[keeper]
        else:
            size[c] -= t_cnt[c]
        t_cnt[c] = 0
        stay[c] = -1
        best[c] = -1
    n_mv = 0
    for j in range(n):
        if g_new[g_of[j]] >= 0:
            n_mv += 1
    moved = np.empty(n_mv, np.int64)
    old = np.empty(n_mv, np.int64)
    m = 0
    for j in range(n):
        ng = g_new[g_of[j]]
        if ng >= 0:
            i = touched[j]
            moved[m] = i
            old[m] = cls[i]
            cls[i] = ng
            m += 1
    return n_cls, moved, old


@njit(cache=_CACHE)
def _marked(mark, lst, n):
    """The first ``n`` entries of ``lst`` (the marked elements, in the order they were
    marked), their marks cleared."""
    out = lst[:n].copy()
    for j in range(n):
        mark[out[j]] = False
    return out


@njit(cache=_CACHE)
def _route_sig(s, sig_ptr, sig_pp, sig_pl, lc):
    acc = np.uint64(0)
    for p in range(sig_ptr[s], sig_ptr[s + 1]):
        ph = np.uint64(0)
        for k in range(sig_pp[p], sig_pp[p + 1]):
            ph += _wordn(_S_ROUTE_P, lc[sig_pl[k]])
        acc += _wordn(_S_ROUTE_Q, ph)
    return acc


@njit(cache=_CACHE)
def _dep_set_hash(f, dep_ptr, deps, fc, stamp, token):
    """The hash of the *set* of classes ``fc`` of flow ``f``'s dependencies: a sum of one word
    per distinct class (``stamp[c] == token`` marks the classes seen; ``token`` is new at
    every call), and their number."""
    h = np.uint64(0)
    n_u = 0
    for j in range(dep_ptr[f], dep_ptr[f + 1]):
        c = fc[deps[j]]
        if stamp[c] != token:
            stamp[c] = token
            h += _wordn(_S_DEPS, c)
            n_u += 1
    return _mixn(h, np.uint64(n_u))


@njit(cache=_CACHE)
def refine_incremental(
    lc, bc, fc, bmult, count, bflow, fix_ptr, fix_links, route, flow_ptr, dep_ptr, deps,
    rdep_ptr, rdep, ul_ptr, ul_link, ul_cnt, sig_ptr, sig_pp, sig_pl, max_rounds,
):  # fmt: skip
    """Colour refinement of links, bundles and flows to the coarsest stable partition that
    refines the starting colours ``lc``, ``bc``, ``fc`` (``int64`` ids ``0..``, updated in place):
    the fixed point of :func:`bundle_link_hash`, :func:`route_signatures`,
    :func:`fixed_and_route_sums`, :func:`flow_bundle_sums` and the flows' dependency sets
    (:func:`topoopt.flowsim.bundles.bundle_partition`), which is unique, so the classes are
    those of the round-by-round refinement. Returns the rounds, ``-1`` if not settled in
    ``max_rounds``.

    Class ids are kept stable (:func:`split_touched`: only split-off parts get new ids), and the
    multiset sums are kept up to date by the difference of words when an element moves, so a
    round re-hashes only the elements next to one that moved: links whose load sum changed,
    routes with a moved link, bundles whose flow, fixed link or route signature changed, flows
    with a moved bundle or dependency (flows to a fixed point in each round, dependents
    following their dependencies). The ids are not numbered by first occurrence."""
    n_l = lc.shape[0]
    n_b = bc.shape[0]
    n_f = fc.shape[0]
    n_s = ul_ptr.shape[0] - 1
    if max(n_l, n_b, n_f, fix_links.shape[0], ul_link.shape[0]) >= 2**31:
        raise ValueError("refine_incremental: 2**31 elements or more (positions are int32)")
    # reverse incidences: bundles on each link as a fixed link, routes per link, bundles per route
    lf_ptr = np.zeros(n_l + 1, np.int64)
    for k in range(fix_links.shape[0]):
        lf_ptr[fix_links[k] + 1] += 1
    for i in range(n_l):
        lf_ptr[i + 1] += lf_ptr[i]
    fill = lf_ptr[:-1].copy()
    lf_b = np.empty(fix_links.shape[0], np.int32)
    for b in range(n_b):
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            lf_b[fill[fix_links[k]]] = b
            fill[fix_links[k]] += 1
    lr_ptr = np.zeros(n_l + 1, np.int64)
    for k in range(ul_link.shape[0]):
        lr_ptr[ul_link[k] + 1] += 1
    for i in range(n_l):
        lr_ptr[i + 1] += lr_ptr[i]
    fill = lr_ptr[:-1].copy()
    lr_s = np.empty(ul_link.shape[0], np.int32)
    for s in range(n_s):
        for k in range(ul_ptr[s], ul_ptr[s + 1]):
            lr_s[fill[ul_link[k]]] = s
            fill[ul_link[k]] += 1
    rb_ptr = np.zeros(n_s + 1, np.int64)
    for b in range(n_b):
        if route[b] >= 0:
            rb_ptr[route[b] + 1] += 1
    for s in range(n_s):
        rb_ptr[s + 1] += rb_ptr[s]
    fill = rb_ptr[:-1].copy()
    rb_b = np.empty(rb_ptr[n_s], np.int32)
    for b in range(n_b):
        if route[b] >= 0:
            rb_b[fill[route[b]]] = b
            fill[route[b]] += 1
    # class sizes and keys (keys set by the first, complete step of each kind)
    l_size = np.zeros(n_l, np.int64)
    b_size = np.zeros(n_b, np.int64)
    f_size = np.zeros(n_f, np.int64)
    n_lc = 0
    n_bc = 0
    n_fc = 0
    for i in range(n_l):
        l_size[lc[i]] += 1
        n_lc = max(n_lc, lc[i] + 1)
    for i in range(n_b):
        b_size[bc[i]] += 1
        n_bc = max(n_bc, bc[i] + 1)
    for i in range(n_f):
        f_size[fc[i]] += 1
        n_fc = max(n_fc, fc[i] + 1)
    l_key = np.zeros(n_l, np.uint64)
    b_key = np.zeros(n_b, np.uint64)
    f_key = np.zeros(n_f, np.uint64)
    n_max = max(n_l, n_b, n_f, 1)
    scratch = (np.zeros(n_max, np.int64), np.full(n_max, -1, np.int32),
               np.full(n_max, -1, np.int32))  # fmt: skip
    # multiset sums
    s_l = np.zeros(n_l, np.uint64)
    t = np.zeros(max(n_s, 1), np.uint64)
    for b in range(n_b):
        w = _wordn(_S_LINK, bc[b]) * np.uint64(bmult[b])
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            s_l[fix_links[k]] += w * np.uint64(count[b])
        if route[b] >= 0:
            t[route[b]] += w
    for s in range(n_s):
        for k in range(ul_ptr[s], ul_ptr[s + 1]):
            s_l[ul_link[k]] += t[s] * np.uint64(ul_cnt[k])
    s_f = np.zeros(n_f, np.uint64)
    for f in range(n_f):
        for b in range(flow_ptr[f], flow_ptr[f + 1]):
            s_f[f] += _wordn(_S_FLOW, bc[b])
    sig = np.zeros(max(n_s, 1), np.uint64)
    for s in range(n_s):
        sig[s] = _route_sig(s, sig_ptr, sig_pp, sig_pl, lc)
    # marks: every element is touched in the first round
    m_l = np.ones(n_l, np.bool_)
    m_b = np.ones(n_b, np.bool_)
    m_f = np.ones(n_f, np.bool_)
    m_s = np.zeros(max(n_s, 1), np.bool_)
    m_t = np.zeros(max(n_s, 1), np.bool_)
    lst_l = np.arange(n_l)
    lst_b = np.arange(n_b)
    lst_f = np.arange(n_f)
    lst_s = np.empty(max(n_s, 1), np.int64)
    lst_t = np.empty(max(n_s, 1), np.int64)
    n_ml = n_l
    n_mb = n_b
    n_mf = n_f
    n_ms = 0
    n_mt = 0
    dt = np.zeros(max(n_s, 1), np.uint64)
    stamp = np.full(max(n_f, 1), -1, np.int64)
    token = 0
    rounds = 0
    while n_ml + n_mb + n_mf > 0:
        rounds += 1
        if rounds > max_rounds:
            return -1
        # links: split by their load sums
        touched = _marked(m_l, lst_l, n_ml)
        n_ml = 0
        key = s_l[touched]
        n_lc, moved, old = split_touched(touched, key, lc, l_size, l_key, n_lc, scratch)
        for j in range(moved.shape[0]):
            i = moved[j]
            for k in range(lf_ptr[i], lf_ptr[i + 1]):
                b = lf_b[k]
                if not m_b[b]:
                    m_b[b] = True
                    lst_b[n_mb] = b
                    n_mb += 1
            for k in range(lr_ptr[i], lr_ptr[i + 1]):
                s = lr_s[k]
                if not m_s[s]:
                    m_s[s] = True
                    lst_s[n_ms] = s
                    n_ms += 1
        # routes: signatures of the routes with a moved link
        for j in range(n_ms):
            s = lst_s[j]
            m_s[s] = False
            new = _route_sig(s, sig_ptr, sig_pp, sig_pl, lc)
            if new != sig[s]:
                sig[s] = new
                for k in range(rb_ptr[s], rb_ptr[s + 1]):
                    b = rb_b[k]
                    if not m_b[b]:
                        m_b[b] = True
                        lst_b[n_mb] = b
                        n_mb += 1
        n_ms = 0
        # bundles: flow class, fixed links' classes, route signature
        touched = _marked(m_b, lst_b, n_mb)
        n_mb = 0
        key = np.empty(touched.shape[0], np.uint64)
        for j in range(touched.shape[0]):
            b = touched[j]
            acc = np.uint64(0)
            for k in range(fix_ptr[b], fix_ptr[b + 1]):
                acc += _wordn(_S_FIX, lc[fix_links[k]])
            r = np.uint64(0x5851F42D4C957F2D) if route[b] < 0 else sig[route[b]]
            key[j] = _mixn(_mixn(_mixn(_S_KEY, np.uint64(fc[bflow[b]])), acc), r)
        n_bc, moved, old = split_touched(touched, key, bc, b_size, b_key, n_bc, scratch)
        for j in range(moved.shape[0]):
            b = moved[j]
            dw = (_wordn(_S_LINK, bc[b]) - _wordn(_S_LINK, old[j])) * np.uint64(bmult[b])
            for k in range(fix_ptr[b], fix_ptr[b + 1]):
                i = fix_links[k]
                s_l[i] += dw * np.uint64(count[b])
                if not m_l[i]:
                    m_l[i] = True
                    lst_l[n_ml] = i
                    n_ml += 1
            if route[b] >= 0:
                s = route[b]
                dt[s] += dw
                if not m_t[s]:
                    m_t[s] = True
                    lst_t[n_mt] = s
                    n_mt += 1
            f = bflow[b]
            s_f[f] += _wordn(_S_FLOW, bc[b]) - _wordn(_S_FLOW, old[j])
            if not m_f[f]:
                m_f[f] = True
                lst_f[n_mf] = f
                n_mf += 1
        for j in range(n_mt):
            s = lst_t[j]
            m_t[s] = False
            for k in range(ul_ptr[s], ul_ptr[s + 1]):
                i = ul_link[k]
                s_l[i] += dt[s] * np.uint64(ul_cnt[k])
                if not m_l[i]:
                    m_l[i] = True
                    lst_l[n_ml] = i
                    n_ml += 1
            dt[s] = np.uint64(0)
        n_mt = 0
        # flows: bundle multiset and dependency set, to a fixed point along the dependencies
        while n_mf > 0:
            touched = _marked(m_f, lst_f, n_mf)
            n_mf = 0
            key = np.empty(touched.shape[0], np.uint64)
            for j in range(touched.shape[0]):
                f = touched[j]
                token += 1
                key[j] = _mixn(s_f[f], _dep_set_hash(f, dep_ptr, deps, fc, stamp, token))
            n_fc, moved, old = split_touched(touched, key, fc, f_size, f_key, n_fc, scratch)
            for j in range(moved.shape[0]):
                f = moved[j]
                for b in range(flow_ptr[f], flow_ptr[f + 1]):
                    if not m_b[b]:
                        m_b[b] = True
                        lst_b[n_mb] = b
                        n_mb += 1
                for k in range(rdep_ptr[f], rdep_ptr[f + 1]):
                    g = rdep[k]
                    if not m_f[g]:
                        m_f[g] = True
                        lst_f[n_mf] = g
                        n_mf += 1
    return rounds


@njit(cache=_CACHE)
def route_class_profiles(route, bcls, bmult, n_s, n_bc):
    """Per route, its bundle classes and their members counted with multiplicity, in class
    order: the CSR ``(ptr, cls, cnt)`` (the route profiles ``M(s, .)`` of
    :func:`topoopt.flowsim.bundles._uniform_link_loads`), in one pass over the bundles with a
    per-class count table (``O(bundles + sum of sorts of each route's distinct classes)``)."""
    n_b = route.shape[0]
    ptr = np.zeros(n_s + 1, np.int64)
    for b in range(n_b):
        if route[b] >= 0:
            ptr[route[b] + 1] += 1
    for s in range(n_s):
        ptr[s + 1] += ptr[s]
    fill = ptr[:-1].copy()
    order = np.empty(ptr[n_s], np.int64)
    for b in range(n_b):
        if route[b] >= 0:
            order[fill[route[b]]] = b
            fill[route[b]] += 1
    tab = np.zeros(max(n_bc, 1), np.int64)
    touched = np.empty(max(n_bc, 1), np.int64)
    out_ptr = np.zeros(n_s + 1, np.int64)
    out_cls = np.empty(ptr[n_s], np.int64)
    out_cnt = np.empty(ptr[n_s], np.int64)
    w = 0
    for s in range(n_s):
        n_t = 0
        for k in range(ptr[s], ptr[s + 1]):
            b = order[k]
            c = bcls[b]
            if tab[c] == 0:
                touched[n_t] = c
                n_t += 1
            tab[c] += bmult[b]
        srt = np.sort(touched[:n_t])
        for j in range(n_t):
            out_cls[w] = srt[j]
            out_cnt[w] = tab[srt[j]]
            tab[srt[j]] = 0
            w += 1
        out_ptr[s + 1] = w
    return out_ptr, out_cls[:w].copy(), out_cnt[:w].copy()


@njit(cache=_CACHE)
def uniform_bundle_paths(fix_ptr, fix_links, route, rr_ptr, rr_links, bcls, lk, n_bc, n_lc):
    """Whether every bundle crosses each link class as often as the first bundle of its class
    does, one path each: its fixed links, then its route's representative path
    ``rr_links[rr_ptr[s]:rr_ptr[s+1]]`` (:func:`topoopt.flowsim.bundles._rep_paths`'s paths,
    compared without building them; exact integer counts in one table)."""
    n_b = bcls.shape[0]
    rep = np.full(max(n_bc, 1), -1, np.int64)
    for b in range(n_b):
        if rep[bcls[b]] < 0:
            rep[bcls[b]] = b
    tab = np.zeros(max(n_lc, 1), np.int64)
    touched = np.empty(max(n_lc, 1), np.int64)
    for b in range(n_b):
        r = rep[bcls[b]]
        if r == b:
            continue
        n_t = 0
        for k in range(fix_ptr[r], fix_ptr[r + 1]):
            c = lk[fix_links[k]]
            if tab[c] == 0:
                touched[n_t] = c
                n_t += 1
            tab[c] += 1
        if route[r] >= 0:
            for k in range(rr_ptr[route[r]], rr_ptr[route[r] + 1]):
                c = lk[rr_links[k]]
                if tab[c] == 0:
                    touched[n_t] = c
                    n_t += 1
                tab[c] += 1
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            tab[lk[fix_links[k]]] -= 1
        if route[b] >= 0:
            for k in range(rr_ptr[route[b]], rr_ptr[route[b] + 1]):
                tab[lk[rr_links[k]]] -= 1
        ok = True
        for j in range(n_t):
            if tab[touched[j]] != 0:
                ok = False
            tab[touched[j]] = 0
        if not ok:
            return False
        # a link class the member crosses and its representative does not: a negative count
        # left on an untouched entry; reset those too
        for k in range(fix_ptr[b], fix_ptr[b + 1]):
            c = lk[fix_links[k]]
            if tab[c] != 0:
                ok = False
                tab[c] = 0
        if route[b] >= 0:
            for k in range(rr_ptr[route[b]], rr_ptr[route[b] + 1]):
                c = lk[rr_links[k]]
                if tab[c] != 0:
                    ok = False
                    tab[c] = 0
        if not ok:
            return False
    return True
