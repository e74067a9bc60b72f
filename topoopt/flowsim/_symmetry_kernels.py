"""Compiled (numba) loops of the symmetry reduction (:mod:`topoopt.flowsim.symmetry`).

The numpy formulation of one colour-refinement round sorts every sub-flow's and link's hash
(``np.unique``) and allocates incidence-sized temporaries; the exact equitability check repeats
incidences by their multiplicity before sorting them. On a 2,048-GPU fat-tree (2.1 M sub-flows,
10 M incidences) that cost more than simulating the unreduced flows. Here the same steps are
linear passes with hash tables and per-class count tables:

- :func:`refine_links_paths`: the new colours of links and sub-flows for one round (wrapping sums
  of random words per multiset, then dense renumbering by first occurrence) and the multiset
  hash of each flow's sub-flow colours;
- :func:`class_dep_rows`: the dependency rows of classes (also used by
  :func:`topoopt.flowsim.flowset.class_dependencies`);
- :func:`csr_by_key`: positions grouped by key (a counting sort, stable);
- :func:`dense_ids`: class ids ``0..`` numbered by first occurrence of equal 64-bit keys;
- :func:`uniform_counts`: the exact test that every member of a class meets every class of the
  other side equally often (weights counted), member by member against its class's first one;
- :func:`uniform_sets`: the same for sets (the dependency classes of a flow).

Examples
--------
>>> import numpy as np
>>> dense_ids(np.array([7, 3, 7, 9], np.uint64)).tolist()
[0, 1, 0, 2]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from topoopt.flowsim._kernels import class_of_flow
from topoopt.numba_cache import kernel_cache

_CACHE = kernel_cache(__file__)  # a writable cache folder, else none (topoopt.numba_cache)

__all__ = [
    "class_dep_rows",
    "csr_by_key",
    "dense_ids",
    "mix64",
    "refine_links_paths",
    "uniform_counts",
    "uniform_sets",
]


@njit(cache=_CACHE, inline="always")
def mix64(h, v):
    """One step of a 64-bit hash of a sequence (splitmix-style finaliser), wrapping."""
    x = (h ^ v) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(31)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return x ^ (x >> np.uint64(29))


@njit(cache=_CACHE, inline="always")
def _word(seed, colour):
    """The odd 64-bit word of ``colour`` in a round seeded ``seed``."""
    return mix64(seed, np.uint64(colour)) | np.uint64(1)


@njit(cache=_CACHE)
def dense_ids(keys):
    """``int64`` ids ``0..`` of ``keys`` (``uint64``), equal keys equal ids, numbered by first
    occurrence: an open-addressing table of at least twice the size holding the position of
    each key's first occurrence (``int32``: 4 bytes a slot, where keys and ids would take 16;
    at millions of keys per round the table's fresh pages are much of the cost)."""
    n = keys.shape[0]
    if n >= 2**31:
        raise ValueError("dense_ids: 2**31 keys or more (positions are int32)")
    size = 2
    while size < 2 * n + 2:
        size *= 2
    mask = np.uint64(size - 1)
    t_first = np.full(size, -1, np.int32)
    out = np.empty(n, np.int64)
    n_id = 0
    for i in range(n):
        k = keys[i]
        s = mix64(np.uint64(0x243F6A8885A308D3), k) & mask
        while True:
            j = t_first[s]
            if j < 0:
                t_first[s] = i
                out[i] = n_id
                n_id += 1
                break
            if keys[j] == k:
                out[i] = out[j]
                break
            s = (s + np.uint64(1)) & mask
    return out


@njit(cache=_CACHE)
def refine_links_paths(
    n_l, path_ptr, path_links, flow_ptr, path_flow, lc, pc, fc, s_l, s_p, s_f,
):  # fmt: skip
    """One refinement round for links and sub-flows (:func:`topoopt.flowsim.symmetry.
    equitable_partition`): ``(new_l, new_p, h_fp)``.

    A link's new colour is its colour with the multiset of the colours ``pc`` of the sub-flows
    crossing it, hashed as the wrapping sum of one pseudo-random odd word per colour
    (:func:`_word` of the round's seed ``s_l``); a sub-flow's is its colour, its flow's colour
    and the multiset of its links' *new* colours (seed ``s_p``); ``h_fp[f]`` is the multiset
    hash of flow ``f``'s *new* sub-flow colours (seed ``s_f``). Using each side's new colours at
    once (Gauss-Seidel order rather than all from the last round) reaches the same coarsest
    equitable partition in fewer rounds: every split made is one any equitable refinement of
    the start must make, and the fixed point is the same.

    Both multiset sums are taken in one sequential pass over the sub-flows: each sub-flow's
    word is added to each of its links' sums (wrapping sums do not depend on the order, so
    this equals summing link by link over the sub-flows crossing it, without the random
    reads of a link -> sub-flow list), and the links' words are computed once per link."""
    n_p = path_ptr.shape[0] - 1
    n_f = flow_ptr.shape[0] - 1
    seed = np.uint64(0x243F6A8885A308D3)
    hl = np.zeros(n_l, np.uint64)
    for p in range(n_p):
        w = _word(s_l, pc[p])
        for k in range(path_ptr[p], path_ptr[p + 1]):
            hl[path_links[k]] += w
    kl = np.empty(n_l, np.uint64)
    for lk in range(n_l):
        kl[lk] = mix64(mix64(seed, np.uint64(lc[lk])), hl[lk])
    new_l = dense_ids(kl)
    wl = np.empty(n_l, np.uint64)
    for lk in range(n_l):
        wl[lk] = _word(s_p, new_l[lk])
    kp = np.empty(n_p, np.uint64)
    for p in range(n_p):
        h = np.uint64(0)
        for k in range(path_ptr[p], path_ptr[p + 1]):
            h += wl[path_links[k]]
        kp[p] = mix64(mix64(mix64(seed, np.uint64(pc[p])), np.uint64(fc[path_flow[p]])), h)
    new_p = dense_ids(kp)
    h_fp = np.zeros(n_f, np.uint64)
    for f in range(n_f):
        h = np.uint64(0)
        for p in range(flow_ptr[f], flow_ptr[f + 1]):
            h += _word(s_f, new_p[p])
        h_fp[f] = h
    return new_l, new_p, h_fp


@njit(cache=_CACHE)
def uniform_counts(u_ptr, v_items, v_weight, u_class, v_class, n_uc, n_vc):
    """Whether every ``u`` of one class ``u_class[u]`` meets each class of ``v`` as often as
    its class's first member does: ``u``'s items are ``v_items[u_ptr[u]:u_ptr[u+1]]``, each
    counted ``v_weight[item]`` times and classed ``v_class[item]``. Exact integer counts
    in one table per class (``O(items)`` in all)."""
    n_u = u_ptr.shape[0] - 1
    rep = np.full(n_uc, -1, np.int64)
    for u in range(n_u):
        if rep[u_class[u]] < 0:
            rep[u_class[u]] = u
    tab = np.zeros(max(n_vc, 1), np.int64)
    touched = np.empty(max(n_vc, 1), np.int64)
    for u in range(n_u):
        r = rep[u_class[u]]
        if r == u:
            continue
        n_t = 0
        for k in range(u_ptr[r], u_ptr[r + 1]):
            c = v_class[v_items[k]]
            if tab[c] == 0:
                touched[n_t] = c
                n_t += 1
            tab[c] += v_weight[v_items[k]]
        ok = True
        for k in range(u_ptr[u], u_ptr[u + 1]):
            c = v_class[v_items[k]]
            w = v_weight[v_items[k]]
            if tab[c] < w:
                ok = False
                break
            tab[c] -= w
        for j in range(n_t):
            if tab[touched[j]] != 0:
                ok = False
            tab[touched[j]] = 0
        if not ok:
            return False
    return True


@njit(cache=_CACHE)
def uniform_sets(u_ptr, v_items, u_class, v_class, n_uc, n_vc):
    """Whether every ``u`` of one class has the same *set* of classes ``v_class[item]`` of its
    items ``v_items[u_ptr[u]:u_ptr[u+1]]`` as its class's first member."""
    n_u = u_ptr.shape[0] - 1
    rep = np.full(n_uc, -1, np.int64)
    for u in range(n_u):
        if rep[u_class[u]] < 0:
            rep[u_class[u]] = u
    stamp = np.full(max(n_vc, 1), -1, np.int64)
    seen = np.full(max(n_vc, 1), -1, np.int64)
    for u in range(n_u):
        r = rep[u_class[u]]
        if r == u:
            continue
        n_r = 0
        for k in range(u_ptr[r], u_ptr[r + 1]):
            c = v_class[v_items[k]]
            if stamp[c] != u:
                stamp[c] = u
                n_r += 1
        n_s = 0
        for k in range(u_ptr[u], u_ptr[u + 1]):
            c = v_class[v_items[k]]
            if stamp[c] != u:
                return False
            if seen[c] != u:
                seen[c] = u
                n_s += 1
        if n_s != n_r:
            return False
    return True


@njit(cache=_CACHE)
def csr_by_key(keys, n):
    """``(ptr, order)``: the positions of ``keys`` (values ``0..n-1``) grouped by key, each
    group in increasing position (a stable counting sort, ``O(len(keys) + n)``)."""
    ptr = np.zeros(n + 1, np.int64)
    for k in keys:
        ptr[k + 1] += 1
    for i in range(n):
        ptr[i + 1] += ptr[i]
    fill = ptr[:-1].copy()
    order = np.empty(keys.shape[0], np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        order[fill[k]] = i
        fill[k] += 1
    return ptr, order


@njit(cache=_CACHE)
def class_dep_rows(class_of, rep, dep_ptr, deps):
    """Dependency CSR between classes (:func:`topoopt.flowsim.flowset.class_dependencies`):
    ``(ptr, classes)`` with class ``c``'s row the classes of the dependencies of its
    representative ``rep[c]``, sorted, each once."""
    n_c = rep.shape[0]
    ptr = np.zeros(n_c + 1, np.int64)
    total = 0
    for c in range(n_c):
        total += dep_ptr[rep[c] + 1] - dep_ptr[rep[c]]
    out = np.empty(total, np.int64)
    w = 0
    for c in range(n_c):
        r = rep[c]
        a = w
        for k in range(dep_ptr[r], dep_ptr[r + 1]):
            out[w] = class_of[deps[k]]
            w += 1
        if w - a > 1:
            out[a:w] = np.sort(out[a:w])
            v = a + 1
            for k in range(a + 1, w):
                if out[k] != out[v - 1]:
                    out[v] = out[k]
                    v += 1
            w = v
        ptr[c + 1] = w
    return ptr, out[:w].copy()


@njit(cache=_CACHE)
def gather_csr_rows(ptr, rows):
    """The concatenated element indices ``ptr[r]:ptr[r+1]`` of the rows ``rows``, in order
    (:func:`topoopt.csr.gather_rows` in one pass, without its incidence-sized temporaries)."""
    total = 0
    for r in rows:
        total += ptr[r + 1] - ptr[r]
    out = np.empty(total, np.int64)
    w = 0
    for r in rows:
        for k in range(ptr[r], ptr[r + 1]):
            out[w] = k
            w += 1
    return out


@njit(cache=_CACHE)
def expand_routes(flow_link, comm, cp_ptr, r_path_ptr, r_path_links, r_weight):
    """The sub-flows of flows on single links or on routes: ``(flow_ptr, path_ptr, path_links,
    weight)`` (:meth:`topoopt.flowsim.network.FlowBuilder.build`).

    Flow ``f`` with ``flow_link[f] >= 0`` has one sub-flow of weight 1 on that link; otherwise
    its sub-flows are the paths ``cp_ptr[c]:cp_ptr[c+1]`` of commodity ``c = comm[f]`` of a
    path set (``r_path_ptr``, ``r_path_links``, ``r_weight``), in order."""
    n_f = flow_link.shape[0]
    flow_ptr = np.zeros(n_f + 1, np.int64)
    n_inc = 0
    for f in range(n_f):
        if flow_link[f] >= 0:
            flow_ptr[f + 1] = flow_ptr[f] + 1
            n_inc += 1
        else:
            c = comm[f]
            flow_ptr[f + 1] = flow_ptr[f] + cp_ptr[c + 1] - cp_ptr[c]
            n_inc += r_path_ptr[cp_ptr[c + 1]] - r_path_ptr[cp_ptr[c]]
    n_p = flow_ptr[n_f]
    path_ptr = np.zeros(n_p + 1, np.int64)
    links = np.empty(n_inc, np.int64)
    weight = np.empty(n_p, np.float64)
    p = 0
    e = 0
    for f in range(n_f):
        if flow_link[f] >= 0:
            links[e] = flow_link[f]
            e += 1
            weight[p] = 1.0
            p += 1
            path_ptr[p] = e
        else:
            c = comm[f]
            for q in range(cp_ptr[c], cp_ptr[c + 1]):
                for k in range(r_path_ptr[q], r_path_ptr[q + 1]):
                    links[e] = r_path_links[k]
                    e += 1
                weight[p] = r_weight[q]
                p += 1
                path_ptr[p] = e
    return flow_ptr, path_ptr, links, weight


@njit(cache=_CACHE)
def first_repeated_link(path_ptr, path_links):
    """``(p, link)``: the first sub-flow ``p`` that crosses a link twice and the smallest such
    link, ``(-1, -1)`` when none does (linear in the incidences for paths of up to 32 links,
    which are compared pairwise; longer paths are sorted)."""
    n_p = path_ptr.shape[0] - 1
    for p in range(n_p):
        a, b = path_ptr[p], path_ptr[p + 1]
        if b - a <= 32:
            best = -1
            for i in range(a, b):
                for j in range(i + 1, b):
                    if path_links[i] == path_links[j] and (best < 0 or path_links[i] < best):
                        best = path_links[i]
            if best >= 0:
                return p, best
        else:
            s = np.sort(path_links[a:b])
            for i in range(1, s.shape[0]):
                if s[i] == s[i - 1]:
                    return p, s[i]
    return -1, -1


@njit(cache=_CACHE)
def link_path_csr(path_ptr, path_links, n_l):
    """``(l_ptr, link_paths)``: the sub-flows crossing each link, one entry per incidence, in
    increasing sub-flow order (the transpose of the sub-flow x link incidence; ``int32``
    entries, half the memory of the incidence's own ``int64``)."""
    n_p = path_ptr.shape[0] - 1
    if n_p >= 2**31:
        raise ValueError("link_path_csr: 2**31 sub-flows or more (entries are int32)")
    l_ptr = np.zeros(n_l + 1, np.int64)
    for k in range(path_links.shape[0]):
        l_ptr[path_links[k] + 1] += 1
    for i in range(n_l):
        l_ptr[i + 1] += l_ptr[i]
    fill = l_ptr[:-1].copy()
    out = np.empty(path_links.shape[0], np.int32)
    for p in range(n_p):
        for k in range(path_ptr[p], path_ptr[p + 1]):
            lk = path_links[k]
            out[fill[lk]] = p
            fill[lk] += 1
    return l_ptr, out


@njit(cache=_CACHE)
def topological_order(dep_ptr, rdep_ptr, rdep):
    """``(order, n_visited)``: the flows in a topological order of their dependencies (Kahn's
    algorithm, the visit order of :func:`topoopt.flowsim._kernels.classes_kernel`);
    ``n_visited`` below the number of flows means a cycle."""
    n_f = dep_ptr.shape[0] - 1
    indeg = dep_ptr[1:] - dep_ptr[:-1]
    queue = np.empty(max(n_f, 1), np.int64)
    qh = 0
    qt = 0
    for f in range(n_f):
        if indeg[f] == 0:
            queue[qt] = f
            qt += 1
    while qh < qt:
        f = queue[qh]
        qh += 1
        for j in range(rdep_ptr[f], rdep_ptr[f + 1]):
            g = rdep[j]
            indeg[g] -= 1
            if indeg[g] == 0:
                queue[qt] = g
                qt += 1
    return queue[:qt], qt


@njit(cache=_CACHE)
def classes_in_order(base, order, dep_ptr, deps):
    """Flow classes by ``(base row, set of dependency classes)``, visiting flows in ``order``
    (topological: a flow's dependencies come before it): the partition of
    :func:`topoopt.flowsim._kernels.classes_kernel` without its traversal, for refinement
    rounds over one dependency graph. Returns ``uint64`` class ids numbered by visit."""
    n_f = base.shape[0]
    class_of = np.full(n_f, -1, np.int64)
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
    for q in range(order.shape[0]):
        f = order[q]
        n_c = class_of_flow(
            f, base, dep_ptr, deps, class_of, tmp, table, mask, c_rep, c_hash, c_ptr, c_deps, n_c
        )
    return class_of.view(np.uint64)
