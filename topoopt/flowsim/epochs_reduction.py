"""Symmetry reduction of a time-varying run: simulate one representative per class of flows,
sub-flows and links under every epoch's paths at once, exactly.

:func:`simulate_epochs_reduced` is :func:`topoopt.flowsim.timevarying.simulate_epochs` through
a quotient, as :func:`topoopt.flowsim.symmetry.simulate_reduced` is
:func:`topoopt.flowsim.simulate` through one.

Classes
-------
One partition serves every path version of the run (the FlowSet's own paths when a flow can
start on them, and each epoch's with paths): it is the coarsest equitable partition
(:func:`topoopt.flowsim.symmetry.equitable_partition`) of the *union* FlowSet whose flow ``f``
has the paths of every version, each sub-flow labelled by its version, the links labelled by
their capacity in every epoch and the flows by their priority, weight and non-preemption (what
the engine reads besides the FlowSet's own data, which the refinement keeps). A sub-flow class
then lies in one version, and for every version on its own the classes are equitable: every
link of class ``L`` carries the same number ``d(L, P)`` of members of each sub-flow class ``P``
of that version (multiplicity counted), every member of ``P`` crosses ``c(P, L)`` links of
``L``, the flows of a class have the same number ``k(P)`` of sub-flows of each class and the
same dependency classes. The result is checked exactly (:func:`topoopt.flowsim.symmetry.
is_equitable`, and each label constant per class), so a hash collision can only turn the
reduction off.

Why the quotient's run is exact
-------------------------------
The induction of :mod:`topoopt.flowsim.symmetry` over the events, with epochs: while a version
is in force the classes are equitable for it, so every member of a class of pieces has one rate
(weighted, class by class of priority: the weights and classes are constant per flow class)
and sends the same bytes; completions, releases and arrivals happen for whole classes at once.
At an epoch with paths every started flow takes the bytes its pieces have left, the same for
every member of a flow class (``sum over P of k(P) * left_P``), and splits them over the new
version's classes by weight: the same for every member again. Path latencies are equal within
a class (``sum over L of c(P, L) lat_L``).

The quotient has one link per link class, one flow per flow class (its real size), and per
version one path per sub-flow class, crossing each link class ``L`` once with the
per-incidence multiplicity ``d(L, P)`` and standing for ``k(P)`` pieces of its flow (its weight
``k(P) w_P``): :func:`~topoopt.flowsim.timevarying.simulate_epochs`' ``incidence_multiplicity``,
``path_members`` and ``path_latency``. Where symmetry breaks the classes split by themselves
(down to one member each: the reduction is then ``off`` and the run is the plain one).

Examples
--------
Four equal flows on a ring of four links, each moved at 0.5 s to the next link: one class.

>>> from topoopt.flowsim.flowset import FlowSet
>>> from topoopt.flowsim.timevarying import Epoch, EpochPaths
>>> fs = FlowSet.single_path([10.0] * 4, [0.0] * 4, size=[5.0] * 4, start=[0.0] * 4,
...                          paths=[[0], [1], [2], [3]])
>>> ep = [Epoch(0.5, np.full(4, 5.0), EpochPaths.single_path([[1], [2], [3], [0]]))]
>>> red = reduce_epochs(fs, ep)
>>> red.info["status"], red.flows.n_flows, red.flows.n_links
('on', 1, 1)
>>> simulate_epochs_reduced(fs, ep, reduction=red).finish.tolist()
[0.5, 0.5, 0.5, 0.5]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from topoopt.csr import gather_rows
from topoopt.flowsim.flowset import FlowSet, class_dependencies, class_representatives
from topoopt.flowsim.simulator import SimResult
from topoopt.flowsim.symmetry import (
    Partition,
    _dense,
    equitable_partition,
    expand_by_partition,
    is_equitable,
)
from topoopt.flowsim.timevarying import Epoch, EpochPaths, simulate_epochs
from traffic.errors import InputError

__all__ = [
    "EpochReduction",
    "GroupedFlows",
    "reduce_epochs",
    "reduce_grouped",
    "simulate_epochs_reduced",
    "simulate_grouped_reduced",
    "expand_left",
    "union_flowset",
]


@dataclass(frozen=True, eq=False)
class EpochReduction:
    """The quotient of a time-varying run (module docstring) and how to map its result back.

    Attributes
    ----------
    partition : Partition or None
        Classes of the flows, of the union FlowSet's sub-flows (:func:`union_flowset`) and of
        the links.
    flows : FlowSet or None
        The quotient (``None`` when the reduction is off).
    epochs : list of Epoch or None
        The quotient's epochs.
    emult, members, latency : list of numpy.ndarray or None
        Per path version of the quotient (its own paths, then each epoch's with paths):
        ``simulate_epochs``' ``incidence_multiplicity``, ``path_members``, ``path_latency``.
    priority, weight, nonpreemptive : numpy.ndarray or None
        Per quotient flow.
    own_qpath : numpy.ndarray or None
        The quotient path of each of the FlowSet's own paths (``None`` when no flow can start
        on them).
    info : dict
        ``status`` (``on`` / ``off``), ``reason`` when off, counts before and after.
    group_paths : list or None
        :func:`reduce_grouped`'s only, for :func:`expand_left`: per path version of the
        :class:`GroupedFlows`, ``(path_class, keys)``: the class of every path of its table
        (the groups' paths, in order) and the sorted keys ``flow class * n_path_classes + path
        class`` of the version's quotient paths (the quotient path of flow ``f``'s copy of its
        group's path ``j`` is the index of its key).
    """

    partition: Partition | None
    flows: FlowSet | None
    epochs: list | None
    emult: list | None
    members: list | None
    latency: list | None
    priority: np.ndarray | None = None
    weight: np.ndarray | None = None
    nonpreemptive: np.ndarray | None = None
    own_qpath: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    group_paths: list | None = None


def _versions(flows: FlowSet, epochs) -> tuple[list, bool]:
    """``(versions, own_used)``: the path versions as FlowSet-like tables (the FlowSet's own,
    then each epoch's with paths) and whether a flow can start on its own paths (not when the
    first epoch starts at 0 with paths: it comes before any arrival)."""
    vers = [EpochPaths.of(flows)] + [e.paths for e in epochs if e.paths is not None]
    own_used = not (epochs and epochs[0].start_s == 0.0 and epochs[0].paths is not None)
    return vers, own_used


def union_flowset(flows: FlowSet, versions) -> tuple[FlowSet, np.ndarray, np.ndarray]:
    """The FlowSet whose flow ``f`` has the paths of every one of ``versions``
    (:class:`~topoopt.flowsim.timevarying.EpochPaths`, in order), weights divided by their
    number: ``(union, version, local)``, per sub-flow of ``union`` its version and its index
    in that version.

    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0] * 2, size=[1.0], start=[0.0], paths=[[0]])
    >>> u, v, i = union_flowset(fs, [EpochPaths.of(fs), EpochPaths.single_path([[1]])])
    >>> u.flow_ptr.tolist(), u.path_links.tolist(), v.tolist(), u.weight.tolist()
    ([0, 2], [0, 1], [0, 1], [0.5, 0.5])
    """
    n_f = flows.n_flows
    nv = len(versions)
    counts = np.stack([np.diff(v.flow_ptr) for v in versions])  # (V, F)
    flow_ptr = np.zeros(n_f + 1, np.int64)
    np.cumsum(counts.sum(axis=0), out=flow_ptr[1:])
    offs = np.concatenate([[0], np.cumsum([v.weight.shape[0] for v in versions])])
    lofs = np.concatenate([[0], np.cumsum([v.path_links.shape[0] for v in versions])])
    # global path ids of the versions' tables, ordered by flow, then version, then position
    ver = np.concatenate([np.full(v.weight.shape[0], k, np.int64) for k, v in enumerate(versions)])
    pflow = np.concatenate([np.repeat(np.arange(n_f), np.diff(v.flow_ptr)) for v in versions])
    order = np.lexsort((np.arange(ver.shape[0]), ver, pflow))
    g_pptr = np.concatenate([v.path_ptr[:-1] + lofs[k] for k, v in enumerate(versions)])
    g_len = np.concatenate([np.diff(v.path_ptr) for v in versions])
    links = np.concatenate([v.path_links for v in versions])
    weight = np.concatenate([v.weight for v in versions]) / nv
    path_ptr = np.zeros(order.shape[0] + 1, np.int64)
    np.cumsum(g_len[order], out=path_ptr[1:])
    path_links = links[gather_rows(np.append(g_pptr, lofs[-1]), order)] if order.size else links
    u = FlowSet(
        capacity=flows.capacity, latency=flows.latency, size=flows.size, start=flows.start,
        flow_ptr=flow_ptr, path_ptr=path_ptr, path_links=path_links, weight=weight[order],
        dep_ptr=flows.dep_ptr, deps=flows.deps, multiplicity=flows.multiplicity,
    )  # fmt: skip
    return u, ver[order], order - offs[ver[order]]


def _off(reason: str, info: dict, part=None) -> EpochReduction:
    return EpochReduction(part, None, None, None, None, None, info={"status": "off",
                          "reason": reason, **info})  # fmt: skip


def reduce_epochs(
    flows: FlowSet, epochs=(), *, priority=None, weight=None, nonpreemptive=None, seed: int = 0,
    start_flow=None, start_link=None,
) -> EpochReduction:  # fmt: skip
    """The quotient of ``simulate_epochs(flows, epochs, priority=..., weight=...,
    nonpreemptive=...)`` (module docstring), or an ``off`` :class:`EpochReduction` saying why.
    ``start_flow``, ``start_link``: starting labels (:func:`~topoopt.flowsim.symmetry.
    equitable_partition`; any labels give an exact quotient).

    Examples
    --------
    Two flows of different sizes: no symmetry.

    >>> fs = FlowSet.single_path([1.0, 1.0], [0.0] * 2, size=[1.0, 2.0], start=[0.0] * 2,
    ...                          paths=[[0], [1]])
    >>> reduce_epochs(fs).info["reason"]
    'no symmetry: every flow is its own class'
    """
    epochs = list(epochs)
    n_f, n_l = flows.n_flows, flows.n_links
    vers, own_used = _versions(flows, epochs)
    for i, e in enumerate(epochs):
        if not isinstance(e, Epoch) or e.capacity.shape != (n_l,):
            raise InputError(f"epochs[{i}]", type(e).__name__, f"an Epoch of {n_l} links")
    used = list(range(len(vers))) if own_used else list(range(1, len(vers)))
    base = {"flows": n_f, "links": n_l, "versions": len(used)}
    if n_f == 0:
        return _off("no flows", base)
    prio = np.zeros(n_f, np.int64) if priority is None else np.asarray(priority, np.int64)
    fw = np.ones(n_f) if weight is None else np.asarray(weight, np.float64)
    npre = np.zeros(n_f, np.bool_) if nonpreemptive is None else np.asarray(nonpreemptive, bool)
    for name, a in (("priority", prio), ("weight", fw), ("nonpreemptive", npre)):
        if a.shape != (n_f,):
            raise InputError(name, a.shape, f"one value per flow, shape ({n_f},)")
    try:
        union, ver, local = union_flowset(flows, [vers[v] for v in used])
    except InputError as e:
        raise InputError(f"epochs.paths.{e.field}", e.value, e.allowed) from None
    base["paths"] = union.n_paths
    f_lab = _dense(prio, fw, npre.astype(np.int64))
    l_lab = _dense(*(e.capacity for e in epochs)) if epochs else np.zeros(n_l, np.int64)
    if start_flow is not None:
        f_lab = _dense(f_lab, np.asarray(start_flow, np.int64))
    if start_link is not None:
        l_lab = _dense(l_lab, np.asarray(start_link, np.int64))
    part = equitable_partition(union, seed=seed, start_flow=f_lab, start_link=l_lab,
                               start_path=ver)  # fmt: skip
    if part is None:
        return _off("refinement did not settle", base)
    counts = {
        "flow_classes": part.n_flow_classes,
        "path_classes": part.n_path_classes,
        "link_classes": part.n_link_classes,
        "rounds": part.rounds,
    }
    if part.n_flow_classes == n_f and part.n_path_classes == union.n_paths:
        return _off("no symmetry: every flow is its own class", {**base, **counts}, part)

    def constant(cls, n_c, *vals) -> bool:
        rep = class_representatives(cls, n_c)
        return all(np.array_equal(v, v[rep][cls]) for v in vals)

    caps = [e.capacity for e in epochs]
    if not (
        is_equitable(union, part)
        and constant(part.path, part.n_path_classes, ver)
        and constant(part.flow, part.n_flow_classes, prio, fw, npre)
        and constant(part.link, part.n_link_classes, *caps)
    ):
        return _off("classes failed the exact equitability check", {**base, **counts}, part)
    q = _quotient(flows, union, part, ver, [vers[v] for v in used], local, own_used, epochs)
    info = {"status": "on", **base, **counts, "quotient_paths": int(q["n_paths"])}
    rep_f = class_representatives(part.flow, part.n_flow_classes)
    own_q = None
    if own_used:  # the own paths come first in each flow of the union
        pf = flows.path_flow()
        pos = np.arange(flows.n_paths) - flows.flow_ptr[pf] + union.flow_ptr[pf]
        own_q = q["qpath"][part.path[pos]]
    return EpochReduction(
        part, q["flows"], q["epochs"], q["emult"], q["members"], q["latency"],
        prio[rep_f], fw[rep_f], npre[rep_f], own_q, info,
    )  # fmt: skip


def _quotient(flows, union, part, ver, vers, local, own_used, epochs) -> dict:
    """The quotient's FlowSet, epochs and per-version arrays (module docstring)."""
    n_fc, n_pc, n_lc = part.n_flow_classes, part.n_path_classes, part.n_link_classes
    rep_l = class_representatives(part.link, n_lc)
    rep_f = class_representatives(part.flow, n_fc)
    rep_p = class_representatives(part.path, n_pc)
    upflow = union.path_flow()
    fsize = np.bincount(part.flow, minlength=n_fc)  # flows per flow class
    psize = np.bincount(part.path, minlength=n_pc)  # sub-flows per sub-flow class
    lsize = np.bincount(part.link, minlength=n_lc)
    p_fc = part.flow[upflow[rep_p]]
    p_ver = ver[rep_p]
    k = psize // fsize[p_fc]  # sub-flows of the class per flow of its flow class
    mult = flows.multiplicity[upflow[rep_p]]
    nv = len(vers)
    tables = {}
    qpath = np.full(n_pc, -1, np.int64)  # quotient path (in its version's table) of each class
    for vi in range(nv):
        cls = np.flatnonzero(p_ver == vi)
        cls = cls[np.lexsort((cls, p_fc[cls]))]  # by flow class, then class number
        qpath[cls] = np.arange(cls.shape[0])
        fptr = np.zeros(n_fc + 1, np.int64)
        np.cumsum(np.bincount(p_fc[cls], minlength=n_fc), out=fptr[1:])
        rp = rep_p[cls]
        rptr = np.zeros(cls.shape[0] + 1, np.int64)
        np.cumsum(np.diff(union.path_ptr)[rp], out=rptr[1:])
        r_links = union.path_links[gather_rows(union.path_ptr, rp)]
        r_q = np.repeat(np.arange(cls.shape[0], dtype=np.int64), np.diff(rptr))
        key = r_q * n_lc + part.link[r_links]
        ukey, c_pl = np.unique(key, return_counts=True)
        qp, ql = ukey // n_lc, ukey % n_lc
        total = psize[cls][qp] * c_pl * mult[cls][qp]
        em = total // lsize[ql]
        if np.any(em * lsize[ql] != total):  # cannot happen for an equitable partition
            raise RuntimeError("epochs quotient: a link class count is not a whole number (a bug)")
        pptr = np.zeros(cls.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(qp, minlength=cls.shape[0]), out=pptr[1:])
        w = vers[vi].weight[local[rp]] * k[cls]  # the version's weight, times the members
        lat = np.add.reduceat(flows.latency[r_links], rptr[:-1]) if cls.size else np.zeros(0)
        tables[vi] = (EpochPaths(fptr, pptr, ql, w), em.astype(np.float64),
                      k[cls].astype(np.float64), lat)  # fmt: skip
    dep_ptr, deps = class_dependencies(part.flow, rep_f, flows.dep_ptr, flows.deps)
    own = tables[0]  # the own paths: version 0's when used, else never used (the first's)
    q = FlowSet(
        capacity=flows.capacity[rep_l], latency=flows.latency[rep_l], size=flows.size[rep_f],
        start=flows.start[rep_f], flow_ptr=own[0].flow_ptr, path_ptr=own[0].path_ptr,
        path_links=own[0].path_links, weight=own[0].weight, dep_ptr=dep_ptr, deps=deps,
    )  # fmt: skip
    q_epochs, nxt = [], 1 if own_used else 0
    arrs = [own]
    for e in epochs:
        paths = None
        if e.paths is not None:
            paths = tables[nxt][0]
            arrs.append(tables[nxt])
            nxt += 1
        q_epochs.append(Epoch(e.start_s, e.capacity[rep_l], paths))
    return {
        "flows": q, "epochs": q_epochs, "emult": [a[1] for a in arrs],
        "members": [a[2] for a in arrs], "latency": [a[3] for a in arrs],
        "n_paths": sum(t[0].weight.shape[0] for t in tables.values()), "qpath": qpath,
    }  # fmt: skip


def simulate_epochs_reduced(
    flows: FlowSet, epochs=(), *, reduction: EpochReduction | None = None, priority=None,
    weight=None, nonpreemptive=None, **kwargs,
) -> SimResult:  # fmt: skip
    """:func:`~topoopt.flowsim.timevarying.simulate_epochs` through the quotient of
    :func:`reduce_epochs` (the plain run when it is off): the same result per flow and link,
    up to rounding; ``SimResult.reduction`` says what it found. The ``path_*`` arrays are those
    of the flows' own paths (``nan`` where a flow never ran on them, as the plain run's).
    ``kwargs``: :func:`simulate_epochs`' others (not ``left_at`` or ``handoff``).
    """
    for name in ("left_at", "handoff"):
        if kwargs.get(name):
            raise InputError(name, kwargs[name], "not with simulate_epochs_reduced")
    red = reduction
    if red is None:
        red = reduce_epochs(flows, epochs, priority=priority, weight=weight,
                            nonpreemptive=nonpreemptive)  # fmt: skip
    if red.flows is None:
        from dataclasses import replace

        res = simulate_epochs(flows, epochs, priority=priority, weight=weight,
                              nonpreemptive=nonpreemptive, **kwargs)  # fmt: skip
        return replace(res, reduction=dict(red.info))
    res = simulate_epochs(
        red.flows, red.epochs, priority=red.priority, weight=red.weight,
        nonpreemptive=red.nonpreemptive, incidence_multiplicity=red.emult,
        path_members=red.members, path_latency=red.latency, **kwargs,
    )  # fmt: skip
    part = red.partition
    if red.own_qpath is None:  # the own paths never used: every flow ran on epoch paths
        res = _nan_paths(res)
        q_of = np.zeros(flows.n_paths, np.int64)
    else:
        q_of = red.own_qpath
    view = SimpleNamespace(partition=part, info=red.info)
    return expand_by_partition(res, view, q_of, flows.capacity)


def _nan_paths(res: SimResult) -> SimResult:
    from dataclasses import replace

    nan = np.full(res.path_start.shape[0], np.nan)
    return replace(res, path_start=nan, path_last_byte=nan.copy(), path_finish=nan.copy())


@dataclass(frozen=True, eq=False)
class GroupedFlows:
    """Flows whose paths are their group's, per path version (the server pair's routes of a
    routing table: many flows share one pair), for :func:`reduce_grouped`.

    Attributes
    ----------
    capacity, latency : numpy.ndarray
        Per link (the capacities until the first epoch).
    size, start, multiplicity : numpy.ndarray
        Per flow.
    dep_ptr, deps : numpy.ndarray
        Dependency CSR between flows.
    group : numpy.ndarray
        ``int64`` per flow: its group (``0 .. G-1``).
    versions : list of EpochPaths
        Per path version, the weighted paths of every group (an
        :class:`~topoopt.flowsim.timevarying.EpochPaths` over ``G`` "flows").
    """

    capacity: np.ndarray
    latency: np.ndarray
    size: np.ndarray
    start: np.ndarray
    multiplicity: np.ndarray
    dep_ptr: np.ndarray
    deps: np.ndarray
    group: np.ndarray
    versions: list

    @property
    def n_flows(self) -> int:
        return int(self.size.shape[0])

    def n_subflows(self) -> int:
        """Sub-flows of the flows (each flow takes its group's paths), summed over versions."""
        per = sum(np.diff(v.flow_ptr).astype(np.int64) for v in self.versions)
        return int(per[self.group].sum())


MAX_GROUP_ROUNDS = 50
"""Rounds of :func:`reduce_grouped` (each refines the groups' and the flows' classes)."""


def _multiset_hash(owner: np.ndarray, colour: np.ndarray, n_owner: int, seed: int) -> np.ndarray:
    """Per owner, a 64-bit hash of the multiset of ``colour`` of its items (a wrapping sum of one
    pseudo-random word per colour; a collision can only merge, which the checks then reject)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**63, size=int(colour.max(initial=-1)) + 1, dtype=np.uint64) | 1
    order = np.argsort(owner, kind="stable")
    w = words[colour[order]]
    out = np.zeros(n_owner, np.uint64)
    if w.size:
        cnt = np.bincount(owner, minlength=n_owner)
        ptr = np.concatenate([[0], np.cumsum(cnt)[:-1]])
        has = cnt > 0
        with np.errstate(over="ignore"):
            out[has] = np.add.reduceat(w, ptr[has])
    return out


def reduce_grouped(
    gf: GroupedFlows, epochs, *, seed: int = 0, start_flow: np.ndarray | None = None,
    check=None,
) -> EpochReduction:  # fmt: skip
    """The quotient of the run of ``gf`` under ``epochs`` (their ``paths`` are version indices
    into ``gf.versions``, or None; the first epoch starts at 0 with paths), found without
    listing every flow's paths: the coarsest equitable partition of the *groups'* union
    FlowSet (:func:`union_flowset` of the groups' versions), each group started from the
    multiset of its flows' classes, and the flows' classes (their data, their group's class,
    their dependencies' classes), refined in turn until neither splits. Then checked exactly:
    the groups' partition is equitable (:func:`~topoopt.flowsim.symmetry.is_equitable`), the
    flows of a class have the same data, group class and dependency classes, and every group
    of a class holds as many flows of each class. Then the flows' sub-flows ``(flow, group
    path)`` classed by ``(flow class, group path class)`` are an equitable partition of the
    flows' union (a link of class ``L`` carries ``n(G, F) d(L, P)`` sub-flows of class ``(F,
    P)``, ``n(G, F)`` the flows of class ``F`` in each group of class ``G``), so the quotient is
    exact (module docstring). One priority class, unit weights (what the routing schedules
    use).

    ``start_flow`` (an integer label per flow, or rows of them; optional) splits the flows'
    starting colours further, as :func:`~topoopt.flowsim.symmetry.equitable_partition`'s: any
    labels give an equitable partition, checked, hence an exact quotient; labels that only
    separate flows the result separates anyway (the flows' classes of a run on a subset of
    these path versions: the classes of a run are equitable for each of its versions alone)
    give the same classes in fewer rounds. The refinement stops once a round splits no flow
    class (the next would repeat it).

    ``check`` (optional, a memory guard) is called with the count of the flow classes' group
    paths, summed over the versions, before the quotient lists them (at least the quotient's
    sub-flows, which are these merged by path class), and may raise."""
    from topoopt.flowsim._symmetry_kernels import uniform_counts, uniform_sets
    from topoopt.flowsim.flowset import identical_classes

    n_f = gf.n_flows
    n_g = int(gf.versions[0].flow_ptr.shape[0] - 1)
    nv = len(gf.versions)
    base = {"flows": n_f, "groups": n_g, "links": int(gf.capacity.shape[0]), "versions": nv,
            "paths": gf.n_subflows()}  # fmt: skip
    if not epochs or epochs[0].start_s != 0.0 or epochs[0].paths is None:
        return _off("the first epoch does not start at 0 with paths", base)
    if n_f == 0:
        return _off("no flows", base)
    groups = FlowSet(
        capacity=gf.capacity, latency=gf.latency, size=np.ones(n_g), start=np.zeros(n_g),
        flow_ptr=gf.versions[0].flow_ptr, path_ptr=gf.versions[0].path_ptr,
        path_links=gf.versions[0].path_links, weight=gf.versions[0].weight,
    )  # fmt: skip
    union, ver, local = union_flowset(groups, gf.versions)
    base["group_paths"] = union.n_paths
    l_lab = _dense(*(e.capacity for e in epochs))
    rows = []
    if start_flow is not None:
        two = isinstance(start_flow, list | tuple) or np.ndim(start_flow) == 2
        rows = list(start_flow) if two else [start_flow]
    if any(np.shape(lab) != (n_f,) for lab in rows):
        raise InputError("start_flow", f"shapes {[np.shape(lab) for lab in rows]}",
                         f"one label per flow ({n_f}), or rows of them")  # fmt: skip
    fcol = _dense(gf.size, gf.start, gf.multiplicity)
    for lab in rows:  # one row at a time (its int64 copy only)
        fcol = _dense(fcol, np.asarray(lab).astype(np.int64))
    zeros = np.zeros(n_f)
    part = None
    for rounds in range(1, MAX_GROUP_ROUNDS + 1):
        gcol = _dense(_multiset_hash(gf.group, fcol, n_g, seed + rounds).view(np.int64))
        part = equitable_partition(union, seed=seed, start_flow=gcol, start_link=l_lab,
                                   start_path=ver)  # fmt: skip
        if part is None:
            return _off("refinement did not settle", base)
        key = _dense(fcol, part.flow[gf.group])
        new = identical_classes(key, zeros, zeros, gf.dep_ptr, gf.deps)
        # ``new`` refines ``fcol``: as many classes is the same partition, so the next round's
        # group colours, groups' partition and flow classes would be these again
        settled = new.max(initial=-1) == fcol.max(initial=-1)
        fcol = new
        if settled:
            break
    else:
        return _off("refinement did not settle", base)
    n_fc = int(fcol.max()) + 1
    info_c = {"flow_classes": n_fc, "group_classes": part.n_flow_classes,
              "path_classes": part.n_path_classes, "link_classes": part.n_link_classes,
              "rounds": rounds}  # fmt: skip

    def constant(cls, n_c, *vals) -> bool:
        rep = class_representatives(cls, n_c)
        return all(np.array_equal(v, v[rep][cls]) for v in vals)

    gptr = np.zeros(n_g + 1, np.int64)
    np.cumsum(np.bincount(gf.group, minlength=n_g), out=gptr[1:])
    g_items = np.argsort(gf.group, kind="stable").astype(np.int64)
    ok = (
        is_equitable(union, part)
        and constant(part.path, part.n_path_classes, ver)
        and constant(part.link, part.n_link_classes, *(e.capacity for e in epochs))
        and constant(fcol, n_fc, gf.size, gf.start, gf.multiplicity, part.flow[gf.group])
        and constant(fcol, n_fc, np.diff(gf.dep_ptr) > 0)
        and uniform_sets(np.ascontiguousarray(gf.dep_ptr, np.int64),
                         np.ascontiguousarray(gf.deps, np.int64), fcol, fcol, n_fc, n_fc)
        and uniform_counts(gptr, g_items, np.ones(n_f, np.int64), part.flow, fcol,
                           part.n_flow_classes, n_fc)
    )  # fmt: skip
    if not ok:
        return _off("classes failed the exact equitability check", {**base, **info_c})
    if n_fc == n_f and part.n_path_classes == union.n_paths:
        return _off("no symmetry: every flow is its own class", {**base, **info_c})
    if check is not None:  # the flow classes' group paths, before the quotient lists them
        g_rep = gf.group[class_representatives(fcol, n_fc)]
        upf = union.path_flow()
        listed = 0
        for v in range(nv):
            per_group = np.bincount(upf[ver == v], minlength=union.n_flows)
            listed += int(per_group[g_rep].sum())
        check(listed)
    return _grouped_quotient(gf, union, ver, local, part, fcol, n_fc, epochs, {**base, **info_c})


def _grouped_quotient(gf, union, ver, local, part, fcol, n_fc, epochs, info) -> EpochReduction:
    """The quotient of :func:`reduce_grouped`'s classes (module docstring)."""
    n_lc = part.n_link_classes
    rep_f = class_representatives(fcol, n_fc)
    rep_l = class_representatives(part.link, n_lc)
    rep_p = class_representatives(part.path, part.n_path_classes)
    fsize = np.bincount(fcol, minlength=n_fc)
    lsize = np.bincount(part.link, minlength=n_lc)
    m_f = gf.multiplicity[rep_f]
    g_rep = gf.group[rep_f]  # each flow class's representative group
    tables = []
    group_paths = []
    n_q = 0
    for v in range(len(gf.versions)):
        # the version-v paths of each flow class's group (union: a group's paths by version)
        upf = union.path_flow()
        sel = np.flatnonzero(ver == v)
        by_g = np.zeros(union.n_flows + 1, np.int64)
        np.cumsum(np.bincount(upf[sel], minlength=union.n_flows), out=by_g[1:])
        lo, hi = by_g[g_rep], by_g[g_rep + 1]
        pos = sel[_ranges_np(lo, hi)]
        qf = np.repeat(np.arange(n_fc, dtype=np.int64), hi - lo)
        pc = part.path[pos]
        key, k = np.unique(qf * part.n_path_classes + pc, return_counts=True)
        q_f, q_p = key // part.n_path_classes, key % part.n_path_classes
        fptr = np.zeros(n_fc + 1, np.int64)
        np.cumsum(np.bincount(q_f, minlength=n_fc), out=fptr[1:])
        rp = rep_p[q_p]
        rptr = np.zeros(rp.shape[0] + 1, np.int64)
        np.cumsum(np.diff(union.path_ptr)[rp], out=rptr[1:])
        r_links = union.path_links[gather_rows(union.path_ptr, rp)]
        r_q = np.repeat(np.arange(rp.shape[0], dtype=np.int64), np.diff(rptr))
        lk, c = np.unique(r_q * n_lc + part.link[r_links], return_counts=True)
        qp, ql = lk // n_lc, lk % n_lc
        total = fsize[q_f][qp] * k[qp] * c * m_f[q_f][qp]
        em = total // lsize[ql]
        if np.any(em * lsize[ql] != total):  # cannot happen for an equitable partition
            raise RuntimeError("grouped quotient: a link class count is not whole (a bug)")
        pptr = np.zeros(rp.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(qp, minlength=rp.shape[0]), out=pptr[1:])
        w = gf.versions[v].weight[local[rp]] * k
        lat = np.add.reduceat(gf.latency[r_links], rptr[:-1]) if rp.size else np.zeros(0)
        tables.append((EpochPaths(fptr, pptr, ql, w), em.astype(np.float64), k.astype(np.float64),
                       lat))  # fmt: skip
        pc_v = np.empty(sel.shape[0], np.int64)
        pc_v[local[sel]] = part.path[sel]
        group_paths.append((pc_v, key))
        n_q += rp.shape[0]
    dep_ptr, deps = class_dependencies(fcol, rep_f, gf.dep_ptr, gf.deps)
    own = tables[epochs[0].paths]
    q = FlowSet(
        capacity=gf.capacity[rep_l], latency=gf.latency[rep_l], size=gf.size[rep_f],
        start=gf.start[rep_f], flow_ptr=own[0].flow_ptr, path_ptr=own[0].path_ptr,
        path_links=own[0].path_links, weight=own[0].weight, dep_ptr=dep_ptr, deps=deps,
    )  # fmt: skip
    arrs = [own]
    q_epochs = []
    for e in epochs:
        paths = None
        if e.paths is not None:
            paths = tables[e.paths][0]
            arrs.append(tables[e.paths])
        q_epochs.append(Epoch(e.start_s, e.capacity[rep_l], paths))
    flow_part = Partition(fcol, np.zeros(0, np.int64), part.link, part.rounds)
    return EpochReduction(
        flow_part, q, q_epochs, [a[1] for a in arrs], [a[2] for a in arrs],
        [a[3] for a in arrs], group_paths=group_paths,
        info={"status": "on", **info, "quotient_paths": int(n_q),
              "path_classes": int(part.n_path_classes)},
    )  # fmt: skip


def _ranges_np(lo, hi):
    from topoopt.csr import ranges

    return ranges(np.asarray(lo, np.int64), np.asarray(hi, np.int64))


def simulate_grouped_reduced(
    gf: GroupedFlows, reduction: EpochReduction, epochs=None, *, left_at=None, **kwargs
):
    """The run of :func:`reduce_grouped`'s quotient, per flow of ``gf`` (start, finish) and per
    link (bytes); no per-path times (``path_*`` ``None``). ``kwargs``: :func:`simulate_epochs`'
    others (not ``handoff``). With ``left_at`` (and the ``epochs`` the quotient was reduced
    from) the result is ``(SimResult, BytesLeft)``, the bytes left per path of every flow of
    ``gf`` (its group's paths of the version in force, in order; :func:`expand_left`)."""
    red = reduction
    out = simulate_epochs(
        red.flows, red.epochs, incidence_multiplicity=red.emult, path_members=red.members,
        path_latency=red.latency, left_at=left_at, **kwargs,
    )  # fmt: skip
    res, left = (out, None) if left_at is None else out
    part = red.partition
    from dataclasses import replace

    res = replace(res, path_start=None, path_last_byte=None, path_finish=None)
    view = SimpleNamespace(partition=part, info=red.info)
    lptr_res = expand_by_partition(_with_empty_paths(res), view, np.zeros(0, np.int64),
                                   gf.capacity)  # fmt: skip
    res = replace(lptr_res, path_start=None, path_last_byte=None, path_finish=None)
    if left is None:
        return res
    if epochs is None:
        raise InputError("epochs", None, "the epochs the quotient was reduced from (left_at)")
    return res, expand_left(gf, red, epochs, left)


def expand_left(gf: GroupedFlows, reduction: EpochReduction, epochs, left):
    """The quotient run's bytes left (:class:`~topoopt.flowsim.timevarying.BytesLeft`, per
    quotient path and member) per path of every flow of ``gf``: flow ``f`` has its group's
    paths of the version in force, in order (the layout of a plain run of the flows with those
    paths), each with the bytes left of its quotient path (every member of a class of pieces
    has the same; module docstring). Versions: ``0`` the quotient's own paths (the first
    epoch's), ``i`` the ``i``-th epoch with paths, as in the plain run whose own paths are
    never used.

    Examples
    --------
    Two equal flows on two links, one group each: one class; each has 3 bytes of 5 left.

    >>> from topoopt.flowsim.timevarying import BytesLeft
    >>> one = EpochPaths(np.array([0, 1, 2]), np.array([0, 1, 2]), np.array([0, 1]), np.ones(2))
    >>> gf = GroupedFlows(np.full(2, 1.0), np.zeros(2), np.full(2, 5.0), np.zeros(2),
    ...                   np.ones(2, np.int64), np.zeros(3, np.int64), np.zeros(0, np.int64),
    ...                   np.array([0, 1]), [one])
    >>> ep = [Epoch(0.0, np.full(2, 1.0), 0)]
    >>> red = reduce_grouped(gf, ep)
    >>> res, left = simulate_grouped_reduced(gf, red, ep, left_at=[2.0])
    >>> res.finish.tolist(), left.left[0].tolist()
    ([5.0, 5.0], [3.0, 3.0])
    """
    from topoopt.csr import ranges
    from topoopt.flowsim.timevarying import BytesLeft

    red = reduction
    by_ver = [epochs[0].paths] + [e.paths for e in epochs if e.paths is not None]
    fcls = red.partition.flow
    out = []
    for arr, ok, v in zip(left.left, left.ok, left.version, strict=True):
        if not ok or arr is None:
            out.append(None)
            continue
        gv = by_ver[int(v)]
        table = gf.versions[gv]
        pc, keys = red.group_paths[gv]
        lo, hi = table.flow_ptr[gf.group], table.flow_ptr[gf.group + 1]
        ids = ranges(lo, hi)
        owner = np.repeat(fcls, hi - lo)
        q = np.searchsorted(keys, owner * red.info["path_classes"] + pc[ids])
        out.append(arr[q])
    return BytesLeft(times=left.times, ok=left.ok, version=left.version, left=tuple(out))


def _with_empty_paths(res: SimResult) -> SimResult:
    from dataclasses import replace

    e = np.zeros(0)
    return replace(res, path_start=e, path_last_byte=e, path_finish=e)
