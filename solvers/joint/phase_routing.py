"""Per-phase routing on fixed circuits: flows of one phase detour over the ports it leaves idle.

A design's routing (:attr:`solvers.model.design.Design.routing`) is one weighted path set for
the whole iteration. :func:`phase_routing` keeps the design's circuits (no reconfiguration, no
dark time) and changes only the routing tables between the communication phases of the
iteration, each phase routed against its own traffic:

1. **Reference.** The design's iteration with its static routing, simulated on its own fabric
   (:func:`solvers.reconfig.schedule.run_iteration` without epochs: the flow model's
   iteration, flows aggregated into classes), with its timeline and fabric flows.
2. **Phases** (:func:`solvers.reconfig.search.comm_phases`): the reference timeline cut where
   the set of fabric communication labels in flight changes (pipeline 1F1B, gradient sync,
   ...), at most ``max_phases``; each phase's server traffic is the reference flows' bytes in
   flight during it, pro rata to time (:func:`solvers.reconfig.search.phase_traffic`).
3. **Per-phase routes** (:func:`route_phase`): for every pair with bytes in the phase, the
   static routing's paths followed by the closed-form candidate paths over the circuits
   (:func:`solvers.joint.fast_routing.candidate_paths`: direct, two-hop, shortest and
   one-hop-longer), weights starting at the static routing's and balanced by Frank-Wolfe on
   the phase's link loads (:func:`solvers.joint.fast_routing.balance`, which keeps its best
   iterate); then up to :data:`COLUMN_ROUNDS` rounds of column generation, each adding for
   every pair its cheapest path over all circuits under the smoothed congestion's link prices
   (Dijkstra: detours of any length over the ports the phase leaves idle) and balancing again.
   The phase's congestion ``max_l load_l / cap_l`` is never above the static routing's. With
   ``symmetric`` (the default) the routes are then averaged over the design's automorphisms
   (:mod:`solvers.joint.route_symmetry`: the server permutations that keep the circuits, the
   static routing and every phase's traffic), so that pairs the design cannot tell apart get
   images of one another's routes, weights equal to the last bit, and the routing schedule's
   symmetry quotient (step 4) stays near the static table's classes (Llama 3 405B calibrated
   at 2,048 GPUs: 74,034-117,238 flow classes per routed table against 60,228 static;
   without it every flow its own class once every phase is routed). Pairs
   without bytes in the phase keep their static paths. A pair with bytes that the design's
   routing leaves out (the flow model routes it by ECMP over the circuits' shortest paths)
   starts on its shortest candidates, split evenly (the static congestion is then an estimate;
   the choice of step 4 is exact either way). (An exact minimum-congestion path LP
   lowered the congestion further but lengthened the iteration: ``docs/advise.md``, levers.)
4. **Choice.** Every combination of (static or per-phase routing) per phase, at most
   ``2 ** max_phases``, is simulated exactly (:func:`simulate_routing_schedule`: the routing
   tables change at the reference's phase boundaries; a flow in flight continues with its
   remaining bytes on the new phase's paths, a flow that starts later starts on the paths in
   force; :func:`topoopt.flowsim.timevarying.simulate_epochs`), each cut at the incumbent
   (a choice slower than it is never chosen). The all-static choice is the reference and
   wins ties, so the result is never slower than the static routing. The time-varying runs
   go through their symmetry quotient (:func:`topoopt.flowsim.epochs_reduction.
   reduce_grouped`: one equitable partition for every table in force, found on the server
   pairs' routes, checked exactly, off where no symmetry is left), so the memory guard counts
   the quotient, not every flow's paths (Mixtral 8x7B at 16,384 GPUs: 6.8 M flow classes on
   31.7 M sub-flows over four tables, 9,126 classes on 39,206 quotient sub-flows). The
   choices share what does not depend on them (:class:`_ChoiceCache`: the iteration's flow
   builder, its flow classes and groups, each table's group routes, the isolated
   collectives), and a run's refinement starts from the flow classes of the runs on a subset
   of its tables (the same classes in fewer rounds); the results are those of separate runs.

Guarantees: exact (the iteration of the chosen routing schedule is the flow model's, not an
estimate); deterministic (no clock, no random choice); never slower than the design's static
routing. A circuit change is not part of it (that is per-phase reconfiguration,
:mod:`solvers.reconfig.search`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from solvers.joint.fast_routing import Q_END, ROUNDS, balance, candidate_paths, drop_paths
from solvers.model.design import Design, NodePaths, node_paths
from solvers.reconfig.schedule import (
    CircuitSet,
    GroupCache,
    RealisedSchedule,
    Schedule,
    ScheduleRun,
    _Hook,
    _PastHorizon,
    class_epochs,
    class_groups,
    run_iteration,
)
from topoopt.csr import PairIndex, ranges
from topoopt.fabrics.circuits import Circuits, circuit_links
from topoopt.fabrics.fabric import Fabric
from topoopt.paths import PathSet
from traffic.errors import InputError

__all__ = [
    "PhaseRoutingResult",
    "route_phase",
    "merge_routing",
    "routing_schedule",
    "simulate_routing_schedule",
    "phase_routing",
    "MAX_PHASES",
]

MAX_PHASES = 4
"""Communication phases at most (so at most 16 routing choices are simulated)."""


def _merge_paths(first: PathSet, second: PathSet, second_comm=None) -> PathSet:
    """Per commodity of ``first`` its paths, then those of ``second`` (path ``p`` of ``second``
    belonging to commodity ``second_comm[p]`` of ``first``; default: ``second`` on the same
    pairs in the same order); weights ``first``'s, ``0`` on ``second``'s."""
    k = first.n_commodities
    ca = first.path_commodity()
    cb = second.path_commodity() if second_comm is None else np.asarray(second_comm, np.int64)
    comm = np.concatenate([ca, cb])
    order = np.argsort(comm, kind="stable")  # a commodity's first paths, then its second
    lens = np.concatenate([first.path_lengths(), second.path_lengths()])
    starts = np.concatenate([first.path_ptr[:-1], second.path_ptr[:-1] + first.path_links.size])
    links = np.concatenate([first.path_links, second.path_links])
    w = np.concatenate([first.weight, np.zeros(second.n_paths)])
    pptr = np.zeros(order.size + 1, np.int64)
    np.cumsum(lens[order], out=pptr[1:])
    cptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(comm, minlength=k), out=cptr[1:])
    idx = ranges(starts[order], starts[order] + lens[order])
    return PathSet(first.src, first.dst, cptr, pptr, links[idx], w[order])


def route_phase(
    circuits, n: int, link_bandwidth: float, traffic: sp.spmatrix, static: NodePaths,
    rounds: int = ROUNDS, group: np.ndarray | None = None,
) -> tuple[NodePaths, float, float]:  # fmt: skip
    """One phase's routing of ``traffic`` (``(n, n)`` bytes) over ``circuits`` (module
    docstring, step 3).

    Returns ``(routing, static_s, routed_s)``: the routing of the pairs with bytes (server
    paths), and the phase's congestion ``max_l load_l / cap_l`` (seconds) under the static
    routing and under it (``routed_s <= static_s``, except with ``group`` where the average
    can be above: the caller then keeps the static routing).

    ``group`` (an ``int64 (|G|, n)`` array of server permutations, optional: the design's
    automorphisms, :func:`solvers.joint.route_symmetry.automorphisms`): the routing found is
    averaged over it (:func:`solvers.joint.route_symmetry.symmetrize`), so that it is
    invariant under every element (pairs of one orbit take the images of one another's routes,
    weights equal to the last bit) and ``routed_s`` is the average's congestion.

    Examples
    --------
    A triangle, 1 GB from 0 to 1 at 1 GB/s a circuit, statically on the direct circuit (1 s).
    Routed alone it also takes the idle detour 0-2-1: half direct, half around (0.5 s).

    >>> c = [[0, 1, 1], [1, 2, 1], [0, 2, 1]]
    >>> static = NodePaths.from_lists([0], [1], [[([0, 1], 1.0)]])
    >>> m = sp.csr_matrix(([1e9], ([0], [1])), shape=(3, 3))
    >>> r, s0, s1 = route_phase(c, 3, 1e9, m, static)
    >>> s0, round(s1, 3)
    (1.0, 0.5)
    """
    c = Circuits(circuits, n).rows
    lsrc, ldst, cap = circuit_links(c, link_bandwidth)
    m = sp.coo_matrix(traffic)
    keep = (m.data > 0) & (m.row != m.col)
    key = np.unique(m.row[keep].astype(np.int64) * n + m.col[keep])
    pb = np.zeros(key.size)
    np.add.at(pb, np.searchsorted(key, m.row[keep] * n + m.col[keep]), m.data[keep])
    src, dst = key // n, key % n
    sps = static.to_pathset(lsrc, ldst, n)
    idx = sps.index(src, dst, n)
    got = candidate_paths(c, n, src, dst)
    if got is None:
        raise InputError("circuits", "a pair with traffic is disconnected", "connected circuits")
    base = sps.take(np.maximum(idx, 0))
    # the pairs' own labels (a pair the static routing leaves out took commodity 0's above)
    base = PathSet(src, dst, base.commodity_ptr, base.path_ptr, base.path_links, base.weight)
    missing = idx < 0
    if missing.any():
        # pairs the design's routing leaves out: the flow model routes them by ECMP over the
        # circuits' shortest paths; start them on their shortest candidates, split evenly
        out = np.flatnonzero(missing)
        short = _shortest(got[0].take(out))
        base = drop_paths(base, ~missing[base.path_commodity()])
        base = _even_where(_merge_paths(base, short, out[short.path_commodity()]), missing)
    cand = _merge_paths(base, got[0])
    pb2 = pb[None, :]
    w, obj, _ = balance(cand, pb2, cap, rounds)
    cand = _with_weights(cand, w)
    for _ in range(COLUMN_ROUNDS):  # detours of any length over the phase's idle ports
        got = _cheapest_columns(cand, pb, lsrc, ldst, cap, n)
        if got is None:
            break
        cand = _merge_paths(cand, *got)
        w, obj, _ = balance(cand, pb2, cap, rounds)
        cand = _with_weights(cand, w)
    static_s = float(
        (np.bincount(base.path_links, np.repeat(pb[base.path_commodity()] * base.weight,
                                                base.path_lengths()), cap.size) / cap).max()
    ) if key.size else 0.0  # fmt: skip
    w = cand.weight
    if not obj <= static_s:  # balance keeps its best iterate, starting at the static weights
        w, obj = cand.weight, static_s
    on = w > 1e-12
    w = np.where(on, w, 0.0)
    routed = PathSet(cand.src, cand.dst, cand.commodity_ptr, cand.path_ptr, cand.path_links, w)
    routed = drop_paths(routed, on)
    out = node_paths(routed, ldst)
    if group is not None and len(group) > 1 and key.size:
        from solvers.joint.route_symmetry import symmetrize

        avg = symmetrize(out, group)
        if avg is not None:  # the same pairs in the same order: pb applies
            ps = avg.to_pathset(lsrc, ldst, n)
            per = np.repeat(pb[ps.path_commodity()] * ps.weight, ps.path_lengths())
            obj = float((np.bincount(ps.path_links, per, cap.size) / cap).max())
            out = avg
    return out, static_s, float(obj)


COLUMN_ROUNDS = 6
"""Rounds of column generation in :func:`route_phase`: each adds, for every pair, its cheapest
path over all circuits under the link prices of the current loads (when cheaper than its
paths), then balances again."""


def _shortest(paths: PathSet) -> PathSet:
    """Per commodity of ``paths``, only its paths of the fewest links."""
    comm, lens = paths.path_commodity(), paths.path_lengths()
    least = np.full(paths.n_commodities, np.iinfo(np.int64).max)
    np.minimum.at(least, comm, lens)
    return drop_paths(paths, lens == least[comm])


def _even_where(paths: PathSet, which: np.ndarray) -> PathSet:
    """``paths`` with the weights of the commodities ``which`` (a mask) split evenly over their
    paths; the others' unchanged."""
    comm = paths.path_commodity()
    on = which[comm]
    w = paths.weight.copy()
    w[on] = 1.0 / np.bincount(comm, minlength=paths.n_commodities)[comm[on]]
    return _with_weights(paths, w)


def _with_weights(paths: PathSet, w: np.ndarray) -> PathSet:
    return PathSet(paths.src, paths.dst, paths.commodity_ptr, paths.path_ptr, paths.path_links,
                   np.asarray(w, np.float64))  # fmt: skip


def _cheapest_columns(paths: PathSet, pb, lsrc, ldst, cap, n: int, q: float = Q_END):
    """Per commodity of ``paths`` (bytes ``pb``), its cheapest path over every link under the
    prices of the smooth congestion's gradient at the current loads (plus a small price per
    hop, so an idle detour still costs its length), kept where cheaper than its cheapest
    present path (relative ``1e-9``): ``(columns, commodities)``, one path each, or None when
    no commodity has one."""
    comm, lens = paths.path_commodity(), paths.path_lengths()
    load = np.bincount(paths.path_links, np.repeat(pb[comm] * paths.weight, lens), cap.size)
    u = load / cap
    top = u.max() if u.size and u.max() > 0 else 1.0
    price = ((u / top) ** (q - 1.0) + HOP_PRICE) / (cap / cap.max())
    have = np.add.reduceat(price[paths.path_links], paths.path_ptr[:-1])
    k = paths.n_commodities
    best_have = np.full(k, np.inf)
    np.minimum.at(best_have, comm, have)
    g = sp.csr_matrix((price, (lsrc, ldst)), shape=(n, n))
    srcs, inv = np.unique(paths.src, return_inverse=True)
    dist, pred = csgraph.dijkstra(g, indices=srcs, return_predecessors=True)
    d = dist[inv, paths.dst]
    better = d < best_have * (1 - 1e-9)
    if not better.any():
        return None
    # walk the cheaper commodities' predecessor chains back from their destinations
    bi = np.flatnonzero(better)
    rows, src = inv[bi], paths.src[bi]
    cur = paths.dst[bi].copy()
    seq = [cur.copy()]
    while np.any(cur != src):
        cur = np.where(cur != src, pred[rows, cur], cur)
        seq.append(cur.copy())
    m = np.stack(seq)  # (T, nb): m[t] = node t predecessor steps before the destination
    hops = np.argmax(m == src[None, :], axis=0)
    t = np.arange(1, m.shape[0])[:, None]
    valid = (t <= hops[None, :])[::-1].T.reshape(-1)
    u = m[1:][::-1].T.reshape(-1)[valid]
    v = m[:-1][::-1].T.reshape(-1)[valid]
    pptr = np.zeros(bi.size + 1, np.int64)
    np.cumsum(hops, out=pptr[1:])
    links = PairIndex(lsrc, ldst, n)(u, v).astype(np.int64)
    cols = PathSet(paths.src[bi], paths.dst[bi], np.arange(bi.size + 1, dtype=np.int64), pptr,
                   links, np.ones(bi.size))  # fmt: skip
    return cols, bi


HOP_PRICE = 1e-3
"""Price of a hop on an idle link, relative to the busiest link's (:func:`_cheapest_columns`)."""


def merge_routing(static: NodePaths, phase: NodePaths, n: int) -> NodePaths:
    """``phase``'s paths for the pairs it routes, ``static``'s for every other pair.

    >>> s = NodePaths.from_lists([0, 1], [1, 0], [[([0, 1], 1.0)], [([1, 0], 1.0)]])
    >>> p = NodePaths.from_lists([0], [1], [[([0, 2, 1], 1.0)]])
    >>> merge_routing(s, p, 3).to_lists()
    [[([0, 2, 1], 1.0)], [([1, 0], 1.0)]]
    """
    ks = static.src * n + static.dst
    kp = phase.src * n + phase.dst
    rest = np.flatnonzero(~np.isin(ks, kp))
    parts = [(phase, np.arange(phase.src.size)), (static, rest)]
    src = np.concatenate([p.src[i] for p, i in parts])
    order = np.argsort(np.concatenate([p.src[i] * n + p.dst[i] for p, i in parts]),
                       kind="stable")  # fmt: skip
    cp, pp, nodes, w = [], [], [], []
    for p, i in parts:
        lo, hi = p.commodity_ptr[i], p.commodity_ptr[i + 1]
        pid = ranges(lo, hi)
        cp.append(hi - lo)
        plen = p.path_ptr[pid + 1] - p.path_ptr[pid]
        pp.append(plen)
        nodes.append(p.nodes[ranges(p.path_ptr[pid], p.path_ptr[pid + 1])])
        w.append(p.weight[pid])
    # reorder commodities by pair key (blocks of paths move with their commodity)
    n_paths_c = np.concatenate(cp)
    plen = np.concatenate(pp)
    all_nodes = np.concatenate(nodes)
    all_w = np.concatenate(w)
    c_lo = np.concatenate([[0], np.cumsum(n_paths_c)])
    p_lo = np.concatenate([[0], np.cumsum(plen)])
    pid = ranges(c_lo[order], c_lo[order + 1])
    cptr = np.zeros(order.size + 1, np.int64)
    np.cumsum(n_paths_c[order], out=cptr[1:])
    pptr = np.zeros(pid.size + 1, np.int64)
    np.cumsum(plen[pid], out=pptr[1:])
    dst = np.concatenate([p.dst[i] for p, i in parts])
    return NodePaths(
        src[order], dst[order], cptr, pptr, all_nodes[ranges(p_lo[pid], p_lo[pid + 1])],
        all_w[pid],
    )  # fmt: skip


def routing_schedule(fabric: Fabric, circuits, routings, starts) -> RealisedSchedule:
    """Routing tables in time on fixed circuits: ``routings[k]`` (server paths, or None: ECMP
    over the circuits) in force from ``starts[k]`` seconds (``starts[0] == 0``,
    non-decreasing) on ``fabric`` (a direct-connect fabric of ``circuits``). Every link keeps
    its capacity in every epoch (no circuit changes, no dark time); an epoch starts where the
    table changes (consecutive equal tables are one epoch), which
    :func:`solvers.reconfig.schedule.simulate_schedule` simulates (module docstring, step 4).

    Examples
    --------
    >>> from topoopt.fabrics.direct_connect import direct_connect
    >>> c = [[0, 1, 1], [1, 2, 1], [0, 2, 1]]
    >>> fab = direct_connect(3, 2, c, 10.0)
    >>> a = NodePaths.from_lists([0], [1], [[([0, 1], 1.0)]])
    >>> [(t, k) for t, _, k in routing_schedule(fab, c, (a, a, None), (0.0, 1.0, 2.0)).epochs]
    [(0.0, 0), (2.0, 2)]
    """
    sets = tuple(CircuitSet(circuits, r, f"routing {k}") for k, r in enumerate(routings))
    sched = Schedule(sets, tuple(float(t) for t in starts))
    cap = fabric.capacity[: fabric.n_links].astype(np.float64)
    caps = np.tile(cap, (len(sets), 1))
    epochs, last = [], None
    for k, t in enumerate(sched.starts):
        if epochs and epochs[-1][0] == t:
            epochs[-1] = (t, caps[k], k)
        elif k == 0 or routings[k] is not routings[last]:
            epochs.append((t, caps[k], k))
        else:
            continue
        last = k
    return RealisedSchedule(fabric, caps, tuple(epochs), sched, 0.0)


class _RoutingHook(_Hook):
    """The schedule hook, simulating a builder without fabric flows (the compute-only run of
    :func:`topoopt.flowsim.iteration.simulate_iteration`) without epochs: with no flow on the
    fabric, the routing tables change nothing. With ``reduction`` the routing schedule's
    flows are simulated through their symmetry quotient
    (:func:`topoopt.flowsim.epochs_reduction.simulate_epochs_reduced`: exact, one partition
    for every routing table; the classes' paths listed per table only,
    :func:`solvers.reconfig.schedule.class_epochs`); ``reductions`` records what each run
    found. ``cache`` (a :class:`_ChoiceCache`, optional) holds what the runs of one
    :func:`phase_routing` share: the builder's classes and the tables' group routes
    (:class:`~solvers.reconfig.schedule.GroupCache`), and the flow classes found by earlier
    runs, which seed a run whose routing tables include theirs (the same classes, in fewer
    rounds: :func:`~topoopt.flowsim.epochs_reduction.reduce_grouped`)."""

    def __init__(self, realised, horizon=None, reduction: bool = True, cache=None):
        super().__init__(realised, horizon)
        self.reduction = reduction
        self.reductions: list = []
        self.cache = cache

    def __call__(self, fb, limit):
        a = None  # the builder's fabric flows (GroupCache.fabric_flows)
        if self.realised is not None:
            a = _fabric_flows(fb) if self.cache is None else self.cache.groups.fabric_flows(fb)
        if a is not None and not a["src"].size:
            from topoopt.flowsim.network import simulate_builder

            return simulate_builder(fb, aggregate=True, record_series=False, max_refills=limit)
        if self.realised is not None and self.reduction:
            sim = self._reduced_run(fb, limit)
            if sim is not None:
                if self.horizon is not None and not np.all(np.isfinite(sim.finish)):
                    raise _PastHorizon
                self._record(fb, sim, a)
                return sim
        return super().__call__(fb, limit)

    def _reduced_run(self, fb, limit):
        """The run through the grouped quotient (:func:`~topoopt.flowsim.epochs_reduction.
        reduce_grouped`), or when it is off the plain run of every class; ``None`` when the
        schedule does not start with paths. The memory guard counts what each holds: the
        groups' routes as reduced sub-flows before the refinement, then the quotient's
        sub-flows (the plain run: every class's sub-flows of every table)."""
        from topoopt.flowsim.epochs_reduction import reduce_grouped, simulate_grouped_reduced
        from topoopt.flowsim.simulator import expand_classes
        from topoopt.flowsim.subflow_guard import check_grouped
        from topoopt.flowsim.timevarying import simulate_epochs

        c = self.cache
        got = class_groups(fb, self.realised) if c is None else c.groups(fb, self.realised)
        if got is None:
            return None
        gf, class_of, epochs = got
        n_b = class_of.size
        n_group_paths = sum(int(v.weight.shape[0]) for v in gf.versions)
        check_grouped(n_b, n_group_paths)
        if c is None:
            red = reduce_grouped(gf, epochs)
        else:
            # seeded with the classes of the earlier runs on a subset of these tables (the
            # group cache's, held by it); kept, in the fewest bytes, unless the seeds held
            # gave them already (the run settled in its first round)
            key = frozenset(id(v) for v in gf.versions)
            seeds = c.groups.seeds
            start = [f for k, f in seeds.items() if k <= key]
            red = reduce_grouped(gf, epochs, start_flow=start or None)
            if red.partition is not None and (not start or red.info["rounds"] > 1):
                f = red.partition.flow
                seeds[key] = f.astype(np.min_scalar_type(int(f.max(initial=0))))
        self.reductions.append(dict(red.info))
        hz = self.horizon
        kw = dict(max_refills=limit, record_series=False, horizon=hz, late_cut=hz is not None)
        if red.flows is not None:
            check_grouped(n_b, int(red.info["quotient_paths"]))
            res = simulate_grouped_reduced(gf, red, **kw)
            return expand_classes(res, SimpleNamespace(n_flows=gf.n_flows), class_of,
                                  paths=False)  # fmt: skip
        del gf  # the plain run: class_epochs checks every class's sub-flows of every table
        flows, class_of, ep = class_epochs(fb, self.realised)
        res = simulate_epochs(flows, ep, **kw)
        return expand_classes(res, flows, class_of, paths=False)

    def _record(self, fb, sim, a=None):
        if self.flows is None:
            a = _fabric_flows(fb) if a is None else a
            pair = a["pair"]
            self.flows = {
                "src": a["src"].copy(), "dst": a["dst"].copy(), "bytes": a["bytes"].copy(),
                "start": np.asarray(sim.start)[pair], "finish": np.asarray(sim.finish)[pair],
            }  # fmt: skip


def _fabric_flows(fb) -> dict:
    """:meth:`solvers.reconfig.schedule.GroupCache.fabric_flows` without the cache."""
    return GroupCache().fabric_flows(fb)


class _ChoiceCache:
    """What the routing choices of one :func:`phase_routing` share, none of it depending on
    the choice (the same workload, fabric, circuits and compute time; only the routing tables
    differ): the iteration's flow builder (:func:`~topoopt.flowsim.iteration.
    simulate_iteration`'s ``builds``: built once, not per choice), its flow classes and each
    routing table's group routes (:class:`~solvers.reconfig.schedule.GroupCache`, with the
    flow classes the runs found) and the intra-server collectives' isolated durations
    (``isolated_cache``). Every run gives the same results as without it."""

    def __init__(self):
        self.groups = GroupCache()
        self.isolated: dict = {}
        self.builds: dict = {}


def simulate_routing_schedule(
    workload, fabric: Fabric, circuits, routings, starts, *, compute_s=None, horizon=None,
    max_buckets=None, reduction: bool = True, cache: _ChoiceCache | None = None,
) -> ScheduleRun:  # fmt: skip
    """One iteration of ``workload`` under :func:`routing_schedule` ``(fabric, circuits,
    routings, starts)``. A single table is the flow model's plain iteration (no epochs), or,
    when that simulation is refused by the memory budget (its sub-flows, field ``flows``), the
    same table as one epoch of the time-varying engine (its flow classes: the same result,
    :mod:`topoopt.flowsim.timevarying`); ``horizon`` cuts a run past it (``iteration_s`` then
    ``inf``). With ``reduction`` (default) the time-varying runs go through their symmetry
    quotient (:class:`_RoutingHook`; exact), and the result's ``info["reduction"]`` says what
    it found. ``cache`` (:class:`_ChoiceCache`, optional): what the runs of one
    :func:`phase_routing` share (the same results).
    """
    iso = None if cache is None else cache.isolated
    if len(routings) == 1:
        try:
            return _plain(workload, fabric, circuits, routings[0], compute_s, max_buckets, iso)
        except InputError as e:
            if e.field != "flows":
                raise
    realised = routing_schedule(fabric, circuits, routings, starts)
    hook = _RoutingHook(realised, horizon if len(routings) > 1 else None, reduction, cache)
    run = run_iteration(
        workload, realised.schedule, fabric, None, hook, 0.0, compute_s=compute_s,
        max_buckets=max_buckets, isolated=iso, builds=None if cache is None else cache.builds,
    )  # fmt: skip
    if run.result is not None and hook.reductions:  # the iteration's run (the first)
        run.result.info["reduction"] = hook.reductions[0]
    return run


def _plain(workload, fabric, circuits, table, compute_s, max_buckets, isolated=None):
    """One routing table: the flow model's plain iteration (:func:`run_iteration`)."""
    sched = Schedule((CircuitSet(circuits, table, "routing 0"),), (0.0,))
    routing = None
    if table is not None:
        routing = table.to_pathset(fabric.src, fabric.dst, fabric.n_nodes)
    return run_iteration(
        workload, sched, fabric, routing, _Hook(None), 0.0, compute_s=compute_s,
        max_buckets=max_buckets, isolated=isolated,
    )  # fmt: skip


@dataclass(frozen=True, eq=False)
class PhaseRoutingResult:
    """The per-phase routing of a design (module docstring).

    Attributes
    ----------
    iteration_s : float
        The chosen routing schedule's iteration (seconds), at most ``static_iteration_s``.
    static_iteration_s : float
        The design's static routing's iteration.
    all_routed_s : float
        Every phase on its own routing (simulated in full, never cut; ``inf`` when some phase
        has no routing of its own: its static one was not improved).
    choice : tuple of bool
        Per phase, whether it takes its own routing (all False: static).
    phases : list of solvers.reconfig.search.Phase
    congestion : list of tuple
        Per phase ``(static_s, routed_s)``: its traffic's ``max_l load_l / cap_l`` under
        both routings.
    routings : tuple of NodePaths
        Per phase, the routing in force (static or own).
    evaluations : int
        Routing schedules simulated (the reference included).
    reference : ScheduleRun
    info : dict
        ``wall_s``, ``cpu_s``, ``by_choice`` (choice -> iteration or ``inf`` when cut),
        ``reduction`` (choice -> what the symmetry reduction of its run found, or ``None``
        for a run cut at the incumbent: :func:`simulate_routing_schedule`).
    chosen : ScheduleRun
        The chosen routing schedule's run (``reference`` when all phases stay static).
    """

    iteration_s: float
    static_iteration_s: float
    all_routed_s: float
    choice: tuple
    phases: list
    congestion: list
    routings: tuple
    evaluations: int
    reference: ScheduleRun
    info: dict = field(default_factory=dict)
    chosen: ScheduleRun | None = None


def phase_routing(
    workload, design: Design, fabric: Fabric, *, max_phases: int = MAX_PHASES,
    rounds: int = ROUNDS, max_buckets: int | None = None, progress=None,
    min_fraction: float = 0.02, share: bool = True, symmetric: bool = True,
) -> PhaseRoutingResult:  # fmt: skip
    """Per-phase routing of ``design``'s circuits for ``workload`` (module docstring).

    Parameters
    ----------
    workload : Workload
        The workload as the design runs it (:func:`solvers.realise.design_workload`).
    design : Design
    fabric : Fabric
        The design's fabric (:func:`solvers.realise.design_fabric`).
    max_phases : int
        Communication phases at most (1 to :data:`MAX_PHASES`).
    rounds : int
        Frank-Wolfe rounds per phase.
    max_buckets : int, optional
        Gradient buckets per channel (a coarsening; None: exact).
    progress : callable, optional
        One-line messages.
    min_fraction : float
        Phases shorter than this fraction of the iteration join a neighbour
        (:func:`solvers.reconfig.search.comm_phases`).
    share : bool
        The runs share what does not depend on the routing choice (:class:`_ChoiceCache`:
        the iteration's builder, its flow classes, the tables' group routes, the isolated
        collectives; each run seeded with the flow classes of the runs on a subset of its
        tables). The same results; False
        simulates every choice from scratch (the reference of the tests).
    symmetric : bool
        Average every phase's routes over the design's automorphisms that keep its circuits,
        static routing and every phase's traffic (:mod:`solvers.joint.route_symmetry`;
        module docstring, step 3), so that the routing tables keep the design's symmetry
        and the time-varying runs' quotient stays near the static table's classes.
        ``info["group"]`` gives the automorphisms found (1: none). False: the routes as
        found pair by pair (the behaviour before session 45).

    Returns
    -------
    PhaseRoutingResult

    Raises
    ------
    InputError
        ``max_phases`` out of range; a design without a routing for a pair with traffic.
    """
    from solvers.reconfig.search import comm_phases, phase_traffic

    if (
        isinstance(max_phases, bool)
        or not isinstance(max_phases, int)
        or not (1 <= max_phases <= MAX_PHASES)
    ):
        raise InputError("max_phases", max_phases, f"an integer 1..{MAX_PHASES}")
    say = progress or (lambda m: None)
    t0, c0 = time.perf_counter(), time.process_time()
    n = design.servers
    static = design.routing
    circuits = design.circuits.rows
    if not isinstance(share, bool):
        raise InputError("share", share, "True or False")
    cache = _ChoiceCache() if share else None
    ref = simulate_routing_schedule(workload, fabric, circuits, (static,), (0.0,),
                                    max_buckets=max_buckets, cache=cache)  # fmt: skip
    compute_s = float(ref.result.compute_s)
    say(f"phase routing: static iteration {ref.iteration_s:.9g} s")
    phases = comm_phases(ref, workload, max_phases=max_phases, min_fraction=min_fraction)
    mats = phase_traffic(ref.flows, phases, n)
    if not isinstance(symmetric, bool):
        raise InputError("symmetric", symmetric, "True or False")
    group = None
    if symmetric:
        from solvers.joint.route_symmetry import automorphisms

        group = automorphisms(n, circuits, static, [m for m in mats if m.nnz])
        say(f"phase routing: {len(group)} automorphisms of the design and its traffic")
    own, congestion = [], []
    for ph, m in zip(phases, mats, strict=True):
        if m.nnz == 0:
            own.append(static)
            congestion.append((0.0, 0.0))
            continue
        r, s0, s1 = route_phase(circuits, n, design.link_bandwidth, m, static, rounds, group)
        own.append(merge_routing(static, r, n) if s1 < s0 else static)
        congestion.append((s0, s1))
        say(f"phase routing: {ph.name} [{ph.start_s:.6g}, {ph.end_s:.6g}) s: congestion "
            f"{s0:.6g} -> {s1:.6g} s")  # fmt: skip
    starts = tuple(ph.start_s for ph in phases)
    best, best_choice, best_run = float(ref.iteration_s), (False,) * len(phases), ref
    by_choice = {best_choice: best}
    label = lambda c: "".join("R" if x else "S" for x in c)  # noqa: E731
    reductions = {label(best_choice): _reduction_of(ref)}
    choices = [c for c in itertools.product((False, True), repeat=len(phases))
               if any(c) and all(own[i] is not static for i in range(len(c)) if c[i])]  # fmt: skip
    full = (True,) * len(phases)
    choices.sort(key=lambda c: (c != full, c))  # every phase routed first, in full
    all_routed = np.inf
    for c in choices:
        rts = tuple(own[i] if c[i] else static for i in range(len(c)))
        run = simulate_routing_schedule(
            workload, fabric, circuits, rts, starts, compute_s=compute_s,
            horizon=None if c == full else best, max_buckets=max_buckets, cache=cache,
        )  # fmt: skip
        it = float(run.iteration_s)
        by_choice[c] = it
        reductions[label(c)] = _reduction_of(run)
        if c == full:
            all_routed = it
        say(f"phase routing: {''.join('R' if x else 'S' for x in c)}: {it:.9g} s")
        if it < best:  # a run cut at the incumbent is never below it: this one ran in full
            best, best_choice, best_run = it, c, run
    routings = tuple(own[i] if best_choice[i] else static for i in range(len(phases)))
    return PhaseRoutingResult(
        iteration_s=best, static_iteration_s=float(ref.iteration_s), all_routed_s=all_routed,
        choice=best_choice, phases=phases, congestion=congestion, routings=routings,
        evaluations=len(by_choice), reference=ref, chosen=best_run,
        info={"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
              "by_choice": {"".join("R" if x else "S" for x in k): v
                            for k, v in by_choice.items()},
              "reduction": reductions, "group": 1 if group is None else len(group)},
    )  # fmt: skip


def _reduction_of(run: ScheduleRun) -> dict | None:
    """What the symmetry reduction of a routing schedule's run found (``status``, ``reason``
    when off, flows and flow classes; the static engine's plain run: ``off``, not asked), or
    ``None`` for a run cut at its horizon (no result)."""
    if run.result is None:
        return None
    red = run.result.info.get("reduction") or {}
    if "flow_classes" not in red and red.get("reason", "").startswith(
        ("not asked", "a custom simulator")
    ):  # one table on the static engine (_plain)
        return {"status": "off", "reason": "one table: the static engine's plain run"}
    return {k: red[k] for k in ("status", "reason", "flows", "flow_classes", "quotient_paths")
            if k in red}  # fmt: skip
