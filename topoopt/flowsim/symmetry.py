"""Symmetry reduction of a :class:`~topoopt.flowsim.flowset.FlowSet`: simulate one representative
per class of interchangeable flows, sub-flows and links, exactly.

Classes
-------
The classes are the *coarsest equitable partition* (colour refinement) of flows, sub-flows (paths)
and links that refines their own data:

- links start coloured by ``(capacity, latency)``, sub-flows by their weight, flows by
  ``(size, start, multiplicity)``;
- a link's next colour adds the multiset of the colours of the sub-flows crossing it; a
  sub-flow's adds its flow's colour and the multiset of its links' (new) colours; a flow's
  adds the multiset of its sub-flows' (new) colours and the *set* of its dependencies' colours
  (taken in a topological order, so one pass settles a whole dependency chain:
  :func:`topoopt.flowsim._symmetry_kernels.classes_in_order`);
- repeated until no class splits (linear passes compiled in
  :mod:`topoopt.flowsim._symmetry_kernels`). Multisets are hashed (sums of seeded 64-bit words);
  the result is then *checked exactly* (:func:`is_equitable`), so a hash collision can only turn
  the reduction off, never make it wrong.

Why simulating the quotient is exact
------------------------------------
Equitable means: every link of class ``L`` is crossed by the same number ``d(L, P)`` of sub-flows
of class ``P`` (members counted with multiplicity), every sub-flow of ``P`` crosses the same
number ``c(P, L)`` of links of ``L``, the flows of a class have the same sub-flow classes and the
same dependency classes. By induction over the events (the induction of the multiplicity proof
in :mod:`topoopt.flowsim.simulator`): if the active sub-flows are a union of classes, all
members of a class having one rate, then during progressive filling every link of ``L`` carries
``sum_P d(L, P) r_P`` and fills at the same level, and a sub-flow of ``P`` freezes when one of
its links does, as every member of ``P`` does (they cross the same link classes): all members
of a class keep one rate. Members have equal bytes (same weight, same flow size) and equal
release times (same start, same dependency classes, whose members finish together by
induction), so they finish together, and their paths have equal latency (``sum_L c(P, L)
lat_L``). The max-min allocation is unique, so the unreduced simulation computes exactly these
rates. The quotient has one link per link class (its capacity and latency), one sub-flow per
sub-flow class, counting ``d(L, P)`` times on link ``L`` (per-incidence multiplicity), and one
flow per flow class: the same fillings, the same events, per member.

Where symmetry breaks (an irregular design, a failed link, a non-uniform all-to-all) the
refinement splits the classes that stop being interchangeable: the reduction coarsens by itself,
down to one flow per class (then it is off: nothing to gain).

Examples
--------
Four equal flows between four servers in a ring, one per link:

>>> from topoopt.flowsim.flowset import FlowSet
>>> fs = FlowSet.single_path([10.0] * 4, [0.0] * 4, size=[5.0] * 4, start=[0.0] * 4,
...                          paths=[[0], [1], [2], [3]])
>>> red = reduce_flows(fs)
>>> red.info["status"], red.flows.n_flows, red.flows.n_links
('on', 1, 1)
>>> simulate_reduced(fs).finish.tolist()
[0.5, 0.5, 0.5, 0.5]
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from topoopt.csr import gather_rows
from topoopt.flowsim._symmetry_kernels import (
    classes_in_order,
    csr_by_key,
    dense_ids,
    link_path_csr,
    refine_links_paths,
    topological_order,
    uniform_counts,
    uniform_sets,
)
from topoopt.flowsim.flowset import FlowSet, class_dependencies, class_representatives
from topoopt.flowsim.simulator import SimResult, simulate
from topoopt.flowsim.subflow_guard import check_subflows

__all__ = [
    "Partition",
    "Reduction",
    "equitable_partition",
    "expand_reduced",
    "is_equitable",
    "reduce_flows",
    "simulate_reduced",
]

MAX_ROUNDS = 200
"""Refinement rounds before giving up (each round splits at least one class; the number of
rounds is about the diameter of the flow-link incidence, a handful on real fabrics)."""


@dataclass(frozen=True, eq=False)
class Partition:
    """Classes of flows, sub-flows and links (``int64``, numbered ``0 ..`` by first member)."""

    flow: np.ndarray
    path: np.ndarray
    link: np.ndarray
    rounds: int

    @property
    def n_flow_classes(self) -> int:
        return int(self.flow.max()) + 1 if self.flow.size else 0

    @property
    def n_path_classes(self) -> int:
        return int(self.path.max()) + 1 if self.path.size else 0

    @property
    def n_link_classes(self) -> int:
        return int(self.link.max()) + 1 if self.link.size else 0


@dataclass(frozen=True, eq=False)
class Reduction:
    """A quotient :class:`FlowSet` and how to map its results back.

    ``flows`` is the quotient (flow ``F`` for flow class ``F``, link ``L`` for link class ``L``),
    ``emult`` its per-incidence multiplicity and ``plat`` its paths' latencies (arguments of
    :func:`topoopt.flowsim.simulator.simulate`); ``qpath[P]`` is the quotient sub-flow of
    sub-flow class ``P``. ``info`` is what the JSON reports (``status`` ``on`` or ``off``,
    ``reason`` when off, class and element counts).
    """

    partition: Partition | None
    flows: FlowSet | None
    emult: np.ndarray | None
    plat: np.ndarray | None
    qpath: np.ndarray | None
    info: dict = field(default_factory=dict)


def _dense(*cols: np.ndarray) -> np.ndarray:
    """Class ids ``0..`` (numbered by first occurrence) of the rows of the given columns, by a
    64-bit hash of each row (a collision can only merge classes, which :func:`is_equitable`
    then rejects unless the merged partition is still equitable, hence still exact)."""
    n = cols[0].shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    h = np.full(n, 0x243F6A8885A308D3, np.uint64)
    with np.errstate(over="ignore"):
        for c in cols:
            h ^= np.ascontiguousarray(c).view(np.uint64)
            h *= np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(31)
            h *= np.uint64(0xBF58476D1CE4E5B9)
            h ^= h >> np.uint64(29)
    return dense_ids(h)


def _csr_by(keys: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ptr, order)``: the positions of ``keys`` grouped by key value ``0..n-1`` (stable)."""
    return csr_by_key(np.ascontiguousarray(keys, np.int64), int(n))


def equitable_partition(
    fs: FlowSet,
    *,
    seed: int = 0,
    max_rounds: int = MAX_ROUNDS,
    start_flow: np.ndarray | None = None,
    start_link: np.ndarray | None = None,
    start_path: np.ndarray | None = None,
):
    """The coarsest equitable partition of ``fs``'s flows, sub-flows and links (module
    docstring), by colour refinement; ``None`` if it did not settle in ``max_rounds`` rounds.

    ``start_flow`` and ``start_link`` (integer labels per flow and per link, optional) split the
    starting colours further: the result is then the coarsest equitable partition that also
    separates flows (links) of different labels. Labels from the classes of a similar flow set
    (another phase of the same iteration) leave little to refine, so it settles in fewer
    rounds; any labels give an equitable partition that keeps the data, hence an exact quotient.
    ``start_path`` (a label per sub-flow) splits the sub-flows' starting colours the same way
    (the path version of each sub-flow, :mod:`topoopt.flowsim.epochs_reduction`).

    Examples
    --------
    Two flows on two parallel links, and a third on a link of its own with twice the capacity:

    >>> fs = FlowSet.single_path([1.0, 1.0, 2.0], [0.0] * 3, size=[1.0] * 3, start=[0.0] * 3,
    ...                          paths=[[0], [1], [2]])
    >>> part = equitable_partition(fs)
    >>> part.flow.tolist(), part.link.tolist()
    ([0, 0, 1], [0, 0, 1])
    """
    rng = np.random.default_rng(seed)
    n_f, n_l = fs.n_flows, fs.n_links
    path_flow = fs.path_flow()
    path_ptr = np.ascontiguousarray(fs.path_ptr, np.int64)
    path_links = np.ascontiguousarray(fs.path_links, np.int64)
    owner = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(fs.dep_ptr))
    rptr, rorder = _csr_by(fs.deps, n_f)
    rflows = owner[rorder]
    order, visited = topological_order(fs.dep_ptr, rptr, rflows)
    if visited < n_f:
        return None
    flow_ptr = np.ascontiguousarray(fs.flow_ptr, np.int64)

    lc = _dense(fs.capacity, fs.latency, *_labels(start_link, n_l, "start_link"))
    pc = _dense(fs.weight, *_labels(start_path, fs.n_paths, "start_path"))
    fc = _dense(fs.size, fs.start, fs.multiplicity, *_labels(start_flow, n_f, "start_flow"))
    counts = (-1, -1, -1)
    for rounds in range(1, max_rounds + 1):
        s_l, s_p, s_f = rng.integers(0, 2**63, size=3, dtype=np.uint64)
        new_l, new_p, h_fp = refine_links_paths(
            n_l, path_ptr, path_links, flow_ptr, path_flow, lc, pc, fc, s_l, s_p, s_f
        )
        base = np.column_stack([fc, h_fp.view(np.int64)])
        cls = classes_in_order(base, order, fs.dep_ptr, fs.deps)
        new_f = dense_ids(cls) if n_f else np.zeros(0, np.int64)
        lc, pc, fc = new_l, new_p, new_f
        now = (
            int(lc.max(initial=-1)) + 1,
            int(pc.max(initial=-1)) + 1,
            int(fc.max(initial=-1)) + 1,
        )
        if now == counts:
            return Partition(flow=fc, path=pc, link=lc, rounds=rounds)
        counts = now
    return None


def _labels(labels, n: int, name: str) -> tuple:
    """``(labels as int64,)`` for :func:`_dense`'s columns, or ``()`` without labels."""
    if labels is None:
        return ()
    lab = np.ascontiguousarray(labels, np.int64).reshape(-1)
    if lab.shape != (n,):
        raise ValueError(f"{name}: shape {lab.shape}, expected ({n},)")
    return (lab,)


def is_equitable(
    fs: FlowSet, part: Partition, link_csr: tuple[np.ndarray, np.ndarray] | None = None
) -> bool:
    """Check exactly that ``part`` is an equitable partition of ``fs`` that keeps its data:
    equal capacity and latency per link class, weight per sub-flow class, size, start and
    multiplicity per flow class; each sub-flow class inside one flow class; equal counts of
    each link class per sub-flow and of each sub-flow class per link (multiplicity counted), of
    each sub-flow class per flow; the same set of dependency classes per flow class.

    Examples
    --------
    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0] * 2, size=[1.0, 2.0], start=[0.0] * 2,
    ...                          paths=[[0], [1]])
    >>> is_equitable(fs, Partition(np.array([0, 0]), np.array([0, 0]), np.array([0, 0]), 0))
    False
    """
    f, p, lk = (np.ascontiguousarray(c, np.int64) for c in (part.flow, part.path, part.link))
    if f.shape != (fs.n_flows,) or p.shape != (fs.n_paths,) or lk.shape != (fs.n_links,):
        return False
    n_fc, n_pc, n_lc = part.n_flow_classes, part.n_path_classes, part.n_link_classes

    def constant(cls, n_c, *vals) -> bool:
        rep = class_representatives(cls, n_c)
        return all(np.array_equal(v, v[rep][cls]) for v in vals)

    path_flow = fs.path_flow()
    if not (
        constant(lk, n_lc, fs.capacity, fs.latency)
        and constant(p, n_pc, fs.weight, f[path_flow])
        and constant(f, n_fc, fs.size, fs.start, fs.multiplicity)
    ):
        return False
    path_ptr = np.ascontiguousarray(fs.path_ptr, np.int64)
    path_links = np.ascontiguousarray(fs.path_links, np.int64)
    if fs.path_links.size:
        # each sub-flow of a class crosses each link class as often
        ones = np.ones(fs.n_links, np.int64)
        if not uniform_counts(path_ptr, path_links, ones, p, lk, n_pc, n_lc):
            return False
        # each link of a class carries each sub-flow class as often, members counted
        if link_csr is None:
            link_csr = link_path_csr(path_ptr, path_links, fs.n_links)
        l_ptr, link_paths = link_csr
        w = np.ascontiguousarray(fs.multiplicity[path_flow], np.int64)
        if not uniform_counts(l_ptr, link_paths, w, lk, p, n_lc, n_pc):
            return False
        unused = np.diff(l_ptr) == 0
        if not constant(lk, n_lc, unused):
            return False
    if fs.n_paths:
        flow_ptr = np.ascontiguousarray(fs.flow_ptr, np.int64)
        items = np.arange(fs.n_paths, dtype=np.int64)
        ones = np.ones(fs.n_paths, np.int64)
        if not uniform_counts(flow_ptr, items, ones, f, p, n_fc, n_pc):
            return False
    if fs.deps.size:
        dep_ptr = np.ascontiguousarray(fs.dep_ptr, np.int64)
        deps = np.ascontiguousarray(fs.deps, np.int64)
        if not uniform_sets(dep_ptr, deps, f, f, n_fc, n_fc):
            return False
    has_deps = np.diff(fs.dep_ptr) > 0
    return constant(f, n_fc, has_deps)


def reduce_flows(
    fs: FlowSet,
    *,
    seed: int = 0,
    start_flow: np.ndarray | None = None,
    start_link: np.ndarray | None = None,
    check=None,
) -> Reduction:
    """The symmetry quotient of ``fs`` (module docstring), or an ``off`` :class:`Reduction`
    saying why (no symmetry, the refinement did not settle, the check failed).
    ``start_flow``, ``start_link``: starting labels (:func:`equitable_partition`). ``check``:
    called with the quotient's sub-flow count once the classes are known, before the quotient
    is built (a memory guard, :func:`~topoopt.flowsim.subflow_guard.check_quotient`: its
    refusal propagates).

    Examples
    --------
    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0] * 2, size=[1.0, 2.0], start=[0.0] * 2,
    ...                          paths=[[0], [1]])
    >>> reduce_flows(fs).info["status"], reduce_flows(fs).info["reason"]
    ('off', 'no symmetry: every flow is its own class')
    """
    base = {"flows": fs.n_flows, "paths": fs.n_paths, "links": fs.n_links}
    if fs.n_flows == 0:
        return Reduction(None, None, None, None, None, {"status": "off", "reason": "no flows"})
    part = equitable_partition(fs, seed=seed, start_flow=start_flow, start_link=start_link)
    if part is None:
        info = {"status": "off", "reason": f"refinement did not settle in {MAX_ROUNDS} rounds"}
        return Reduction(None, None, None, None, None, {**info, **base})
    counts = {
        "flow_classes": part.n_flow_classes,
        "path_classes": part.n_path_classes,
        "link_classes": part.n_link_classes,
        "rounds": part.rounds,
    }
    if part.n_flow_classes == fs.n_flows and part.n_path_classes == fs.n_paths:
        info = {"status": "off", "reason": "no symmetry: every flow is its own class"}
        return Reduction(part, None, None, None, None, {**info, **base, **counts})
    if not is_equitable(fs, part):
        info = {"status": "off", "reason": "classes failed the exact equitability check"}
        return Reduction(part, None, None, None, None, {**info, **base, **counts})
    if check is not None:
        check(part.n_path_classes)
    q, emult, plat, qpath = _quotient(fs, part)
    info = {"status": "on", **base, **counts}
    return Reduction(part, q, emult, plat, qpath, info)


def _quotient(fs: FlowSet, part: Partition):
    """The quotient FlowSet, its per-incidence multiplicity, path latencies and the quotient
    sub-flow of every sub-flow class."""
    n_fc, n_pc, n_lc = part.n_flow_classes, part.n_path_classes, part.n_link_classes
    path_flow = fs.path_flow()
    rep_l = class_representatives(part.link, n_lc)
    rep_f = class_representatives(part.flow, n_fc)
    rep_p = class_representatives(part.path, n_pc)
    # quotient sub-flows in the order of their flow class (then class number)
    p_fc = part.flow[path_flow[rep_p]]
    order = np.lexsort((np.arange(n_pc), p_fc))
    qpath = np.empty(n_pc, np.int64)
    qpath[order] = np.arange(n_pc)
    flow_ptr = np.zeros(n_fc + 1, np.int64)
    np.cumsum(np.bincount(p_fc, minlength=n_fc), out=flow_ptr[1:])
    # incidences per (sub-flow class P, link class L) from P's representative alone: with the
    # partition equitable (checked), every member crosses c(P, L) links of L and has the same
    # multiplicity m_P, so counting both ways |L| d(L, P) = |P| c(P, L) m_P (d: members of P on
    # each link of L, the per-incidence multiplicity)
    rp = rep_p[order]  # representative sub-flow of each quotient sub-flow
    ql, qp, c_pl, plat = _quotient_incidence(fs, part.link, n_lc, rp)
    lsize = np.bincount(part.link, minlength=n_lc)
    psize = np.bincount(part.path, minlength=n_pc)[order]  # members of each quotient sub-flow
    total = psize[qp] * c_pl * fs.multiplicity[path_flow[rp]][qp]
    emult = total // lsize[ql]
    if np.any(emult * lsize[ql] != total):  # cannot happen for an equitable partition
        raise RuntimeError("symmetry quotient: a link class count is not a whole number (a bug)")
    path_ptr = np.zeros(n_pc + 1, np.int64)
    np.cumsum(np.bincount(qp, minlength=n_pc), out=path_ptr[1:])
    w = fs.weight[rep_p[order]]
    wsum = np.add.reduceat(w, flow_ptr[:-1])
    qfc = p_fc[order]
    dep_ptr, deps = class_dependencies(part.flow, rep_f, fs.dep_ptr, fs.deps)
    q = FlowSet(
        capacity=fs.capacity[rep_l],
        latency=fs.latency[rep_l],
        size=fs.size[rep_f] * wsum,
        start=fs.start[rep_f],
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=ql,
        weight=w / wsum[qfc],
        dep_ptr=dep_ptr,
        deps=deps,
    )
    return q, emult, plat, qpath


QUOTIENT_CHUNK = 1 << 20
"""Quotient sub-flows whose incidences :func:`_quotient_incidence` counts at a time: its
per-entry temporaries (the links, their keys and the sort of :func:`numpy.unique`, about 50
bytes an entry) stay those of a chunk, and its counts go into arrays of the incidences'
number. Where the symmetry is weak (a capped ECMP routing: 4.27 M quotient sub-flows of 4.76 M
at 8,192 GPUs on the OCS spine, 12.9 M of 14.4 M at 32,768) they were the largest transient of
the run."""


def _quotient_incidence(fs: FlowSet, link_class: np.ndarray, n_lc: int, rp: np.ndarray):
    """For the quotient sub-flows whose representative sub-flows are ``rp``: each one's link
    classes with their counts (``ql``, ``qp``: the quotient sub-flow, ``c``; by sub-flow, then
    class) and its path latency (the representative's links summed in path order), computed
    :data:`QUOTIENT_CHUNK` sub-flows at a time (every row whole in one chunk, so the same
    arrays as in one pass)."""
    n_pc = rp.shape[0]
    lens = np.diff(fs.path_ptr)[rp]
    # the counts go straight into arrays of the incidences' number (at least the pairs'), cut
    # to length at the end: no list of pieces beside their concatenation
    n_in = int(lens.sum())
    ql, qp, cnt = (np.empty(n_in, np.int64) for _ in range(3))
    plat = np.zeros(n_pc)
    m = 0
    for a in range(0, n_pc, QUOTIENT_CHUNK):
        b = min(a + QUOTIENT_CHUNK, n_pc)
        rptr = np.zeros(b - a + 1, np.int64)
        np.cumsum(lens[a:b], out=rptr[1:])
        r_links = fs.path_links[gather_rows(fs.path_ptr, rp[a:b])]
        full = lens[a:b] > 0  # (an empty path's latency is 0; reduceat would read the next's)
        if full.any():
            plat[a:b][full] = np.add.reduceat(fs.latency[r_links], rptr[:-1][full])
        key = np.repeat(np.arange(a, b, dtype=np.int64), lens[a:b]) * n_lc + link_class[r_links]
        del r_links
        ukey, c = np.unique(key, return_counts=True)
        del key
        k = ukey.shape[0]
        np.remainder(ukey, n_lc, out=ql[m : m + k])
        np.floor_divide(ukey, n_lc, out=qp[m : m + k])
        cnt[m : m + k] = c
        m += k
    return ql[:m], qp[:m], cnt[:m], plat


def expand_reduced(result: SimResult, fs: FlowSet, red: Reduction) -> SimResult:
    """The result of simulating ``red.flows`` for every flow, sub-flow and link of ``fs``.

    Link loads of a representative link are each member link's; the change log lists every
    member link, sorted by time then link.
    """
    return expand_by_partition(result, red, red.qpath[red.partition.path], fs.capacity)


def expand_by_partition(result: SimResult, red, qp: np.ndarray, capacity: np.ndarray) -> SimResult:
    """:func:`expand_reduced`'s expansion, shared with the route-bundle quotient
    (:func:`topoopt.flowsim.bundles.simulate_bundles`): ``red.partition`` maps every flow and
    link to its class, ``qp`` every (sub-flow or bundle) path to its quotient path."""
    part = red.partition
    lptr, lorder = _csr_by(part.link, part.n_link_classes)
    sel = gather_rows(lptr, result.series_link)
    counts = np.diff(lptr)[result.series_link]
    s_time = np.repeat(result.series_time, counts)
    s_link = lorder[sel]
    s_load = np.repeat(result.series_load, counts)
    o = np.lexsort((s_link, s_time))
    return SimResult(
        start=result.start[part.flow],
        finish=result.finish[part.flow],
        path_start=result.path_start[qp],
        path_last_byte=result.path_last_byte[qp],
        path_finish=result.path_finish[qp],
        link_bytes=result.link_bytes[part.link],
        capacity=capacity,
        series_time=s_time[o],
        series_link=s_link[o],
        series_load=s_load[o],
        makespan=result.makespan,
        n_events=result.n_events,
        fill_rounds=result.fill_rounds,
        simulated_flows=result.simulated_flows,
        refills=result.refills,
        reduction=dict(red.info),
    )


def simulate_reduced(
    fs: FlowSet,
    *,
    rtol: float = 1e-12,
    record_series: bool = True,
    max_refills: int | None = None,
    reduction: Reduction | None = None,
) -> SimResult:
    """:func:`~topoopt.flowsim.simulator.simulate` through the symmetry quotient
    (:func:`reduce_flows`; the plain simulation when the reduction is off): the same result per
    flow, sub-flow and link, up to rounding."""
    red = reduce_flows(fs) if reduction is None else reduction
    if red.flows is None:
        # the plain simulation holds every sub-flow: checked as such (the builder checked them
        # as reduced, topoopt.flowsim.subflow_guard)
        check_subflows(fs.n_flows, fs.n_paths)
        res = simulate(fs, rtol=rtol, record_series=record_series, max_refills=max_refills)
        return replace(res, reduction=dict(red.info))
    res = simulate(
        red.flows,
        rtol=rtol,
        record_series=record_series,
        max_refills=max_refills,
        incidence_multiplicity=red.emult,
        path_latency=red.plat,
    )
    return expand_reduced(res, fs, red)
