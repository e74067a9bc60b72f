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

__all__ = [
    "bundle_link_hash",
    "fixed_and_route_sums",
    "flow_bundle_sums",
    "route_signatures",
]


@njit(cache=True, inline="always")
def _mix(h, v):
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=True, inline="always")
def _word(seed, colour):
    return _mix(seed, np.uint64(colour)) | np.uint64(1)


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
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
