"""Route bundles: the symmetry reduction built from the routes, without the sub-flows.

On a rail fabric a flow from GPU ``i`` of server ``u`` to GPU ``j`` of server ``v`` takes ``u``'s
link to its rail-``i`` switch ``a``, every shortest path of the switch pair ``(a, b)``, then
``b``'s link to ``v`` (:meth:`topoopt.flowsim.network.Network.rail_paths`). On the three-tier
rail-optimised Clos of 16,384 GPUs a switch pair has up to 256 such paths, and the exact flow
model of GPT-3 175B holds 108.8 M sub-flows: too many to build, let alone to refine
(:mod:`topoopt.flowsim.symmetry`). A *bundle* is the ``count`` paths of one such segment: its
*fixed* links (first, last, the destination GPU's egress on a rail hop), crossed by every path
of the bundle, and a switch-pair *route* (a commodity of a :class:`~topoopt.paths.PathSet` of
switch pairs, shared by every bundle between the same two switches). A
:class:`BundleSet` holds flows made of bundles; expanded (:meth:`BundleSet.to_flowset`) it is
the flow model, one sub-flow per path.

Classes and why the quotient is exact
-------------------------------------
The partition sought is one of the unreduced flow model (:mod:`topoopt.flowsim.symmetry`'s
module docstring) in which *every path of a bundle has its bundle's class*. Colour refinement
runs on the bundles:

- a link's next colour adds the multiset of the bundle colours of the paths crossing it
  (counted with their flow's multiplicity): ``count`` words per bundle on its fixed links, and
  on a route's link ``ul_cnt`` words of every bundle on the route (the paths of the route
  crossing it), summed once per route (:func:`~topoopt.flowsim._bundle_kernels.
  bundle_link_hash`);
- a bundle's adds its flow's colour, the multiset of its fixed links' colours and its route's
  signature (the multiset over the route's paths of the multiset of their link colours);
- a flow's adds the multiset of its bundles' colours and the set of its dependencies' colours.

The result is checked exactly (:func:`is_bundle_equitable`) as a partition of the *unreduced*
model, with each path classed by its bundle: equal data per class; every path of a route
crosses the same multiset of link classes as the route's first path, and the bundles of a class
have the same fixed and route multisets (so every path of a class crosses each link class
as often); every link of a class carries each bundle class's paths as often (exact integer
counts, from the fixed links and the routes' link counts); the flows of a class have the same
multiset of bundle classes and set of dependency classes. That is an equitable partition of
the unreduced model, so :mod:`topoopt.flowsim.symmetry`'s argument applies: every path of a
class, in particular every path of a bundle, keeps one rate, and the quotient (one flow per
flow class, one sub-flow per bundle class counting ``d(L, P)`` times on link class ``L``, one
link per link class) simulates the unreduced model exactly. When the check fails (the paths of
a bundle are not interchangeable: an irregular or failed fabric) the reduction is ``off`` and
the caller builds the unreduced model.

Examples
--------
Two flows, each of one bundle over two parallel two-link routes between the same switches:

>>> import numpy as np
>>> bs = BundleSet(
...     capacity=np.ones(6), latency=np.zeros(6), size=np.array([1.0, 1.0]),
...     start=np.zeros(2), flow_ptr=np.array([0, 1, 2]),
...     fix_ptr=np.array([0, 1, 2]), fix_links=np.array([0, 1]), route=np.array([0, 0]),
...     count=np.array([2, 2]), weight=np.array([0.5, 0.5]),
...     route_ptr=np.array([0, 2]), path_ptr=np.array([0, 2, 4]),
...     path_links=np.array([2, 3, 4, 5]))
>>> red = reduce_bundles(bs)
>>> red.info["status"], red.flows.n_flows, red.flows.n_links
('on', 1, 2)
>>> simulate_bundles(bs, red).finish.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from topoopt.csr import ranges
from topoopt.flowsim._bundle_kernels import (
    bundle_link_hash,
    fixed_and_route_sums,
    flow_bundle_sums,
    refine_incremental,
    route_class_profiles,
    route_signatures,
    uniform_bundle_paths,
)
from topoopt.flowsim._symmetry_kernels import (
    classes_in_order,
    csr_by_key,
    dense_ids,
    topological_order,
    uniform_counts,
    uniform_sets,
)
from topoopt.flowsim.flowset import (
    FlowSet,
    class_dependencies,
    class_representatives,
    identical_classes,
)
from topoopt.flowsim.simulator import SimResult, simulate
from topoopt.flowsim.subflow_guard import check_bundles

__all__ = [
    "BundlePartition",
    "BundleReduction",
    "BundleSet",
    "bundle_partition",
    "bundle_partition_rounds",
    "is_bundle_equitable",
    "listed_bundles",
    "reduce_bundles",
    "simulate_bundles",
]

MAX_ROUNDS = 200
"""Refinement rounds before giving up (as :data:`topoopt.flowsim.symmetry.MAX_ROUNDS`)."""


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def _sorted_by(*keys: np.ndarray) -> bool:
    """Whether the rows are sorted by ``keys`` (the first the major one), in one pass of
    differences instead of a sort.

    >>> _sorted_by(np.array([0, 0, 1]), np.array([2, 3, 0])), _sorted_by(np.array([1, 0]))
    (True, False)
    """
    if keys[0].size < 2:
        return True
    later = np.zeros(keys[0].size - 1, bool)  # rows already ordered by a more major key
    for k in keys:
        d = np.diff(k)
        if np.any(~later & (d < 0)):
            return False
        later |= d > 0
    return True


def _paths_ptr(route_counts) -> np.ndarray:
    """``route_ptr`` numbering the paths of routes given as link counts: a route's paths are
    the counts of its links at hop 0 (one empty path without links: a switch to itself)."""
    rc_ptr, _, rc_cnt, rc_hop = (np.asarray(x) for x in route_counts)
    n_s = rc_ptr.shape[0] - 1
    r_of = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(rc_ptr))
    at0 = rc_hop == 0
    n_p = np.bincount(r_of[at0], weights=rc_cnt[at0], minlength=n_s).astype(np.int64)
    n_p[np.diff(rc_ptr) == 0] = 1
    return np.r_[0, np.cumsum(n_p)].astype(np.int64)


@dataclass(frozen=True, eq=False)
class BundleSet:
    """Flows whose sub-flows come in bundles of equal-weight paths (module docstring).

    Attributes
    ----------
    capacity, latency : numpy.ndarray
        ``(L,)`` per link, bytes/s and seconds.
    size, start : numpy.ndarray
        ``(F,)`` bytes and earliest start of each flow.
    flow_ptr : numpy.ndarray
        ``(F+1,)``: flow ``f``'s bundles are ``flow_ptr[f]:flow_ptr[f+1]`` (at least one).
    fix_ptr, fix_links : numpy.ndarray
        Bundle ``b``'s fixed links ``fix_links[fix_ptr[b]:fix_ptr[b+1]]`` (on every path).
    route : numpy.ndarray
        ``(B,)`` the bundle's switch-pair route (``-1``: none, then ``count`` is 1).
    count : numpy.ndarray
        ``(B,)`` paths in the bundle (the route's paths).
    weight : numpy.ndarray
        ``(B,)`` fraction of its flow *each* path of the bundle carries.
    route_ptr, path_ptr, path_links : numpy.ndarray
        Route ``s``'s paths are ``route_ptr[s]:route_ptr[s+1]``, path ``p``'s links
        ``path_links[path_ptr[p]:path_ptr[p+1]]`` (disjoint from the fixed links of its bundles).
        Omitted (``None``) with ``route_counts``; ``route_ptr`` then numbers the paths.
    dep_ptr, deps, multiplicity : numpy.ndarray, optional
        Dependencies and multiplicities of the flows, as in :class:`~topoopt.flowsim.FlowSet`.
    route_counts : tuple of numpy.ndarray, optional
        The routes as link counts instead of listed paths (shortest-path routes):
        ``(ptr, link, count, hop)`` of :func:`topoopt.fabrics.routing.route_link_counts`, route
        ``s``'s links ``link[ptr[s]:ptr[s+1]]``, each crossed by ``count`` of its paths at
        position ``hop`` (every path crosses one link at each hop). Stored sorted by route,
        hop, link. The paths are never listed (:meth:`to_flowset` is not available); the
        reduction checks that the links at one hop of a route are of one class, which makes
        every path of the route cross the same link classes.
    """

    capacity: np.ndarray
    latency: np.ndarray
    size: np.ndarray
    start: np.ndarray
    flow_ptr: np.ndarray
    fix_ptr: np.ndarray
    fix_links: np.ndarray
    route: np.ndarray
    count: np.ndarray
    weight: np.ndarray
    route_ptr: np.ndarray | None = None
    path_ptr: np.ndarray | None = None
    path_links: np.ndarray | None = None
    dep_ptr: np.ndarray | None = None
    deps: np.ndarray | None = None
    multiplicity: np.ndarray | None = None
    route_counts: tuple | None = None

    def __post_init__(self) -> None:
        n_f = np.asarray(self.size).shape[0]
        if self.route_counts is not None:
            if self.path_ptr is not None or self.path_links is not None:
                raise ValueError("BundleSet: give routes as paths or as route_counts, not both")
            rc_ptr, rc_link, rc_cnt, rc_hop = (_i64(x) for x in self.route_counts)
            n_s = rc_ptr.shape[0] - 1
            r_of = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(rc_ptr))
            if _sorted_by(r_of, rc_hop, rc_link):  # as routing.route_link_counts gives them
                rc = (rc_ptr, rc_link, rc_cnt, rc_hop)
            else:
                o = np.lexsort((rc_link, rc_hop, r_of))
                rc = (rc_ptr, rc_link[o], rc_cnt[o], rc_hop[o])
            object.__setattr__(self, "route_counts", rc)
            object.__setattr__(self, "route_ptr", _paths_ptr(rc))
            object.__setattr__(self, "path_ptr", np.zeros(1, np.int64))
            object.__setattr__(self, "path_links", np.zeros(0, np.int64))
        for name in ("flow_ptr", "fix_ptr", "fix_links", "route", "count", "route_ptr",
                     "path_ptr", "path_links"):  # fmt: skip
            object.__setattr__(self, name, _i64(getattr(self, name)))
        for name in ("capacity", "latency", "size", "start", "weight"):
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), np.float64))
        if self.dep_ptr is None:
            object.__setattr__(self, "dep_ptr", np.zeros(n_f + 1, np.int64))
            object.__setattr__(self, "deps", np.zeros(0, np.int64))
        object.__setattr__(self, "dep_ptr", _i64(self.dep_ptr))
        object.__setattr__(self, "deps", _i64(self.deps))
        mult = np.ones(n_f, np.int64) if self.multiplicity is None else self.multiplicity
        object.__setattr__(self, "multiplicity", _i64(mult))
        nb = self.route.shape[0]
        if self.flow_ptr.shape != (n_f + 1,) or self.fix_ptr.shape != (nb + 1,):
            raise ValueError("BundleSet: flow_ptr or fix_ptr of the wrong length")
        if np.any(np.diff(self.flow_ptr) < 1):
            raise ValueError("BundleSet: every flow needs at least one bundle")
        routed = self.route >= 0
        n_paths = np.diff(self.route_ptr)[self.route[routed]]
        if not np.array_equal(self.count[routed], n_paths) or np.any(self.count[~routed] != 1):
            raise ValueError("BundleSet: count must be the route's paths (1 without a route)")

    @property
    def n_flows(self) -> int:
        return self.size.shape[0]

    @property
    def n_bundles(self) -> int:
        return self.route.shape[0]

    @property
    def n_links(self) -> int:
        return self.capacity.shape[0]

    @property
    def n_routes(self) -> int:
        return self.route_ptr.shape[0] - 1

    @property
    def n_paths(self) -> int:
        """Sub-flows of the unreduced model (paths of every bundle)."""
        return int(self.count.sum())

    def bundle_flow(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_flows, dtype=np.int64), np.diff(self.flow_ptr))

    def to_flowset(self) -> FlowSet:
        """The unreduced flow model: one sub-flow per path of every bundle (its fixed links,
        then the route path's links), flows, bundles and paths in order. Not with
        ``route_counts`` (the paths are not listed)."""
        if self.route_counts is not None:
            raise ValueError("BundleSet.to_flowset: the routes are link counts, not paths")
        nb = self.n_bundles
        routed = self.route >= 0
        # the paths of every bundle: a route path, or -1 (fixed links only)
        b_of = np.repeat(np.arange(nb, dtype=np.int64), self.count)
        r = self.route
        rp = np.full(b_of.size, -1, np.int64)
        sel = routed[b_of]
        rp[sel] = ranges(self.route_ptr[r[routed]], self.route_ptr[r[routed] + 1])
        nfix = np.diff(self.fix_ptr)[b_of]
        nbody = np.zeros(b_of.size, np.int64)
        nbody[sel] = self.path_ptr[rp[sel] + 1] - self.path_ptr[rp[sel]]
        path_ptr = np.zeros(b_of.size + 1, np.int64)
        np.cumsum(nfix + nbody, out=path_ptr[1:])
        links = np.empty(int(path_ptr[-1]), np.int64)
        links[ranges(path_ptr[:-1], path_ptr[:-1] + nfix)] = self.fix_links[
            ranges(self.fix_ptr[b_of], self.fix_ptr[b_of + 1])
        ]
        body = rp >= 0
        links[ranges(path_ptr[:-1][body] + nfix[body], path_ptr[1:][body])] = self.path_links[
            ranges(self.path_ptr[rp[body]], self.path_ptr[rp[body] + 1])
        ]
        flow_ptr = np.zeros(self.n_flows + 1, np.int64)
        np.cumsum(np.bincount(self.bundle_flow()[b_of], minlength=self.n_flows),
                  out=flow_ptr[1:])  # fmt: skip
        return FlowSet(
            capacity=self.capacity,
            latency=self.latency,
            size=self.size,
            start=self.start,
            flow_ptr=flow_ptr,
            path_ptr=path_ptr,
            path_links=links,
            weight=self.weight[b_of],
            dep_ptr=self.dep_ptr,
            deps=self.deps,
            multiplicity=self.multiplicity,
        )


def listed_bundles(
    arrays: dict,
    routes,
    comm: np.ndarray,
    capacity: np.ndarray,
    latency: np.ndarray,
    start: float = 0.0,
) -> tuple[BundleSet, np.ndarray] | None:
    """The flows of a builder on listed server-pair routes (a routing override: a design's
    weighted multi-path or single-path routing) as a :class:`BundleSet`, without a sub-flow
    per path: ``(bundles, class_of)`` as :meth:`topoopt.flowsim.network.FlowBuilder.
    build_bundles` returns them, or ``None`` when a flow's pair has no path.

    A route here is one path of a commodity: a pair flow has one bundle per path of its pair
    (a design's routing gives a pair one path or a few, each with its own fraction; a pair it
    does not cover is routed with equal weights), no fixed links, its path carrying ``weight``
    of the flow; a link flow has one bundle, its link fixed. (Equal-weight paths of a pair are
    not one bundle: they need not cross the same link classes, and a bundle's paths must.) The
    routes are listed once per commodity used, however many flows take them, so what is built
    is the flows (merged as :meth:`~topoopt.flowsim.network.FlowBuilder.build_classes` merges
    them: same pair, bytes, dependency classes), their bundles (one per flow on a single-path
    routing) and the used commodities' paths, never the per-flow sub-flow arrays
    (:class:`~topoopt.flowsim.FlowSet`'s ``path_ptr`` and ``path_links`` of every sub-flow);
    :func:`~topoopt.flowsim.subflow_guard.check_bundles` counts these before they exist.
    ``to_flowset()`` of the result is the flow model :meth:`~topoopt.flowsim.network.
    FlowBuilder.build_classes` builds (the same sub-flows, a flow's paths in the listed order).

    Parameters
    ----------
    arrays : dict
        :meth:`~topoopt.flowsim.network.FlowBuilder.arrays` (``link`` ``-1`` for a pair flow).
    routes : PathSet
        Server-pair routes; ``comm[i]`` is the commodity of the ``i``-th pair flow (in builder
        order); ignored when there is none.
    capacity, latency : numpy.ndarray
        Per link of the network (its device links included).
    start : float
        Earliest start of every flow, seconds.

    Examples
    --------
    One flow on a pair with two paths of weight 0.25 and one of 0.5 (links 0-1, 2-3, 4), one
    link flow on link 5: four bundles, three routes.

    >>> from topoopt.paths import PathSet
    >>> ps = PathSet(np.array([0]), np.array([1]), np.array([0, 3]), np.array([0, 2, 4, 5]),
    ...              np.arange(5), np.array([0.25, 0.25, 0.5]))
    >>> a = {"link": np.array([-1, 5]), "size": np.array([8.0, 1.0]),
    ...      "dep_ptr": np.zeros(3, np.int64), "deps": np.zeros(0, np.int64)}
    >>> bs, class_of = listed_bundles(a, ps, np.array([0]), np.ones(6), np.zeros(6))
    >>> bs.flow_ptr.tolist(), bs.weight.tolist(), bs.route.tolist(), bs.fix_links.tolist()
    ([0, 3, 4], [0.25, 0.25, 0.5, 1.0], [0, 1, 2, -1], [5])
    >>> bs.route_ptr.tolist(), bs.path_ptr.tolist(), bs.count.tolist()
    ([0, 1, 2, 3], [0, 2, 4, 5], [1, 1, 1, 1])
    """
    link = np.ascontiguousarray(arrays["link"], np.int64)
    n_f = link.shape[0]
    pair = np.flatnonzero(link < 0)
    comm = np.asarray(comm, np.int64).reshape(-1)
    if pair.size:
        used, inv = np.unique(comm, return_inverse=True)  # the commodities the flows take
        inv = inv.reshape(-1).astype(np.int64)
        cp = np.asarray(routes.commodity_ptr, np.int64)
        pp = np.asarray(routes.path_ptr, np.int64)
        if np.any(used < 0) or np.any(cp[used + 1] == cp[used]):
            return None  # a pair without a path: the caller's model says so
        # the used commodities' paths, one route each, in the listed order
        cr_ptr = np.zeros(used.size + 1, np.int64)  # routes (paths) of each used commodity
        np.cumsum(cp[used + 1] - cp[used], out=cr_ptr[1:])
        path = ranges(cp[used], cp[used + 1])
        r_weight = np.asarray(routes.weight, np.float64)[path]
        route_ptr = np.arange(path.size + 1, dtype=np.int64)
        path_ptr = np.zeros(path.size + 1, np.int64)
        np.cumsum(pp[path + 1] - pp[path], out=path_ptr[1:])
        path_links = np.asarray(routes.path_links, np.int64)[ranges(pp[path], pp[path + 1])]
    else:
        inv = np.zeros(0, np.int64)
        route_ptr = cr_ptr = np.zeros(1, np.int64)
        path_ptr, path_links, r_weight = np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0)
    # identical flows merged (keyed by the used commodity instead of a link)
    key = link.copy()
    key[pair] = int(capacity.shape[0]) + inv
    class_of = identical_classes(
        key, arrays["size"], np.full(n_f, float(start)), arrays["dep_ptr"], arrays["deps"]
    )
    n_c = int(class_of.max()) + 1 if n_f else 0
    rep = class_representatives(class_of, n_c)
    dep_ptr, deps = class_dependencies(class_of, rep, arrays["dep_ptr"], arrays["deps"])
    req = np.full(n_f, -1, np.int64)
    req[pair] = inv
    req = req[rep]  # the used commodity of each merged pair flow (-1: a link flow)
    is_pair = req >= 0
    safe = np.maximum(req, 0)
    nb_f = np.where(is_pair, (cr_ptr[safe + 1] - cr_ptr[safe]) if pair.size else 0, 1)
    flow_ptr = np.zeros(n_c + 1, np.int64)
    np.cumsum(nb_f, out=flow_ptr[1:])
    nb = int(flow_ptr[-1])
    check_bundles(n_f, nb, int(path_links.size))
    b_flow = np.repeat(np.arange(n_c, dtype=np.int64), nb_f)
    pb = is_pair[b_flow]
    route = np.full(nb, -1, np.int64)
    route[pb] = ranges(cr_ptr[req[is_pair]], cr_ptr[req[is_pair] + 1])
    count = np.ones(nb, np.int64)
    weight = np.ones(nb, np.float64)
    weight[pb] = r_weight[route[pb]]
    fix_ptr = np.zeros(nb + 1, np.int64)
    np.cumsum(~pb, out=fix_ptr[1:])
    bs = BundleSet(
        capacity=capacity,
        latency=latency,
        size=np.asarray(arrays["size"], np.float64)[rep],
        start=np.full(n_c, float(start)),
        flow_ptr=flow_ptr,
        fix_ptr=fix_ptr,
        fix_links=link[rep][b_flow[~pb]],
        route=route,
        count=count,
        weight=weight,
        route_ptr=route_ptr,
        path_ptr=path_ptr,
        path_links=path_links,
        dep_ptr=dep_ptr,
        deps=deps,
        multiplicity=np.bincount(class_of, minlength=n_c),
    )
    return bs, class_of


@dataclass(frozen=True, eq=False)
class BundlePartition:
    """Classes of flows, bundles and links (``int64``, numbered ``0 ..``)."""

    flow: np.ndarray
    bundle: np.ndarray
    link: np.ndarray
    rounds: int

    @property
    def n_flow_classes(self) -> int:
        return int(self.flow.max()) + 1 if self.flow.size else 0

    @property
    def n_bundle_classes(self) -> int:
        return int(self.bundle.max()) + 1 if self.bundle.size else 0

    @property
    def n_link_classes(self) -> int:
        return int(self.link.max()) + 1 if self.link.size else 0


@dataclass(frozen=True, eq=False)
class BundleReduction:
    """The quotient of a :class:`BundleSet` (as :class:`topoopt.flowsim.symmetry.Reduction`;
    ``qpath[P]``: the quotient sub-flow of bundle class ``P``)."""

    partition: BundlePartition | None
    flows: FlowSet | None
    emult: np.ndarray | None
    plat: np.ndarray | None
    qpath: np.ndarray | None
    info: dict = field(default_factory=dict)


def _dense(*cols: np.ndarray) -> np.ndarray:
    from topoopt.flowsim.symmetry import _dense as dense

    return dense(*cols)


def _labels(labels, n: int, name: str) -> tuple:
    from topoopt.flowsim.symmetry import _labels as labels_of

    return labels_of(labels, n, name)


def _route_links(bs: BundleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per route: its distinct links and how many of its paths cross each, as a CSR
    ``(ul_ptr, ul_link, ul_cnt)``."""
    if bs.route_counts is not None:
        return bs.route_counts[:3]
    n_l, n_s = bs.n_links, bs.n_routes
    p_route = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(bs.route_ptr))
    inc_route = np.repeat(p_route, np.diff(bs.path_ptr))
    key, cnt = np.unique(inc_route * n_l + bs.path_links, return_counts=True)
    ul_ptr = np.zeros(n_s + 1, np.int64)
    np.cumsum(np.bincount(key // n_l, minlength=n_s), out=ul_ptr[1:])
    return ul_ptr, key % n_l, cnt.astype(np.int64)


def _hop_groups(bs: BundleSet) -> tuple[np.ndarray, np.ndarray]:
    """With ``route_counts``: the CSR of each route's hops over the (route, hop) groups
    ``(route_hop_ptr, group_ptr)`` (entries of a group: ``group_ptr[g]:group_ptr[g+1]``)."""
    rc_ptr, _, _, rc_hop = bs.route_counts
    n_s = rc_ptr.shape[0] - 1
    r_of = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(rc_ptr))
    new = np.ones(rc_hop.size, bool)
    new[1:] = (r_of[1:] != r_of[:-1]) | (rc_hop[1:] != rc_hop[:-1])
    starts = np.flatnonzero(new)
    group_ptr = np.r_[starts, rc_hop.size].astype(np.int64)
    route_hop_ptr = np.r_[0, np.cumsum(np.bincount(r_of[starts], minlength=n_s))]
    return route_hop_ptr.astype(np.int64), group_ptr


def _signature_paths(bs: BundleSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`route_signatures` hashes per route: its listed paths, or with
    ``route_counts`` one group per hop (the links at that hop), an invariant of the route
    as well (the exact check decides)."""
    if bs.route_counts is None:
        return bs.route_ptr, bs.path_ptr, bs.path_links
    rh_ptr, g_ptr = _hop_groups(bs)
    return rh_ptr, g_ptr, bs.route_counts[1]


def _start_colours(bs: BundleSet, ul_ptr, ul_link, start_flow, start_link):
    """``(lc, bc, fc)``: the starting colours of links, bundles and flows. Links start split
    by their role (on fixed links, on routes, both): the split only refines, and it is what the
    link-load check (:func:`_uniform_link_loads`) compares."""
    n_f, n_l = bs.n_flows, bs.n_links
    role = np.zeros(n_l, np.int64)
    role[bs.fix_links] = 1
    on_route = np.zeros(bs.n_routes, bool)
    on_route[bs.route[bs.route >= 0]] = True
    role[ul_link[on_route[np.repeat(np.arange(bs.n_routes), np.diff(ul_ptr))]]] |= 2
    lc = _dense(bs.capacity, bs.latency, role, *_labels(start_link, n_l, "start_link"))
    bc = _dense(bs.weight, bs.count.astype(np.float64))
    fc = _dense(
        bs.size, bs.start, bs.multiplicity.astype(np.float64),
        *_labels(start_flow, n_f, "start_flow"),
    )  # fmt: skip
    return lc, bc, fc


def bundle_partition(
    bs: BundleSet,
    *,
    seed: int = 0,
    max_rounds: int = MAX_ROUNDS,
    route_links=None,
    start_flow: np.ndarray | None = None,
    start_link: np.ndarray | None = None,
) -> BundlePartition | None:
    """The classes of flows, bundles and links by colour refinement over the bundles (module
    docstring); ``None`` if they did not settle in ``max_rounds`` rounds or the dependencies
    have a cycle. Checked by :func:`is_bundle_equitable`, not here. ``start_flow``,
    ``start_link``: labels that split the starting colours (as
    :func:`topoopt.flowsim.symmetry.equitable_partition`'s: fewer rounds when they come from
    a similar flow set, exact whatever they are).

    The refinement is incremental (:func:`~topoopt.flowsim._bundle_kernels.refine_incremental`:
    class ids kept stable, only the elements next to one that moved re-hashed each round). The
    classes are the coarsest stable refinement of the starting colours, the unique fixed point
    that :func:`bundle_partition_rounds` (every element re-hashed every round) reaches too, and
    are numbered the same way (by first occurrence), so both return the same partition;
    ``rounds`` counts the incremental rounds. ``seed`` is unused (the words are fixed) and kept
    for the callers of the round-by-round version."""
    n_f = bs.n_flows
    owner = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(bs.dep_ptr))
    rptr, rorder = csr_by_key(bs.deps, n_f)
    _, visited = topological_order(bs.dep_ptr, rptr, owner[rorder])
    if visited < n_f:
        return None
    bflow = bs.bundle_flow()
    ul_ptr, ul_link, ul_cnt = _route_links(bs) if route_links is None else route_links
    lc, bc, fc = _start_colours(bs, ul_ptr, ul_link, start_flow, start_link)
    sig_ptr, sig_pp, sig_pl = _signature_paths(bs)
    rounds = refine_incremental(
        lc, bc, fc, bs.multiplicity[bflow], bs.count, bflow, bs.fix_ptr, bs.fix_links, bs.route,
        bs.flow_ptr, bs.dep_ptr, bs.deps, rptr, _i64(owner[rorder]), _i64(ul_ptr),
        _i64(ul_link), _i64(ul_cnt), _i64(sig_ptr), _i64(sig_pp), _i64(sig_pl), max_rounds,
    )  # fmt: skip
    if rounds < 0:
        return None
    return BundlePartition(
        flow=dense_ids(fc.view(np.uint64)),
        bundle=dense_ids(bc.view(np.uint64)),
        link=dense_ids(lc.view(np.uint64)),
        rounds=rounds,
    )


def bundle_partition_rounds(
    bs: BundleSet,
    *,
    seed: int = 0,
    max_rounds: int = MAX_ROUNDS,
    route_links=None,
    start_flow: np.ndarray | None = None,
    start_link: np.ndarray | None = None,
) -> BundlePartition | None:
    """:func:`bundle_partition` round by round: every link, bundle and flow re-hashed every
    round with fresh random words (``seed``), until no class splits. The same partition (the
    unique coarsest stable refinement); kept as the plain oracle of the incremental one."""
    rng = np.random.default_rng(seed)
    n_f = bs.n_flows
    owner = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(bs.dep_ptr))
    rptr, rorder = csr_by_key(bs.deps, n_f)
    order, visited = topological_order(bs.dep_ptr, rptr, owner[rorder])
    if visited < n_f:
        return None
    bflow = bs.bundle_flow()
    bmult = bs.multiplicity[bflow]
    ul_ptr, ul_link, ul_cnt = _route_links(bs) if route_links is None else route_links
    lc, bc, fc = _start_colours(bs, ul_ptr, ul_link, start_flow, start_link)
    n_l = bs.n_links
    sig_ptr, sig_pp, sig_pl = _signature_paths(bs)
    counts = (-1, -1, -1)
    for rounds in range(1, max_rounds + 1):
        s = rng.integers(0, 2**63, size=6, dtype=np.uint64)
        h_l = bundle_link_hash(
            n_l, lc, bc, bmult, bs.count, bs.fix_ptr, bs.fix_links, bs.route, bs.n_routes,
            ul_ptr, ul_link, ul_cnt, s[0], s[1],
        )  # fmt: skip
        lc = dense_ids(h_l)
        sig = route_signatures(sig_ptr, sig_pp, sig_pl, lc, s[2], s[3])
        h_b = fixed_and_route_sums(
            bc, fc[bflow], bs.fix_ptr, bs.fix_links, bs.route, lc, sig, s[4], s[5]
        )
        bc = dense_ids(h_b)
        h_f = flow_bundle_sums(bs.flow_ptr, bc, s[0] ^ s[5])
        base = np.column_stack([fc, h_f.view(np.int64)])
        fc = dense_ids(classes_in_order(base, order, bs.dep_ptr, bs.deps)) if n_f else fc
        now = (
            int(lc.max(initial=-1)) + 1,
            int(bc.max(initial=-1)) + 1,
            int(fc.max(initial=-1)) + 1,
        )
        if now == counts:
            return BundlePartition(flow=fc, bundle=bc, link=lc, rounds=rounds)
        counts = now
    return None


def _route_reps(bs: BundleSet) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(ptr, links)`` of one path of each route: its first listed path, or with
    ``route_counts`` the first link at each hop (a path crossing the same link classes as
    every path of the route once the links at each hop are of one class)."""
    if bs.route_counts is None:
        has = np.flatnonzero(np.diff(bs.route_ptr) > 0)
        starts = np.zeros(bs.n_routes, np.int64)
        lens = np.zeros(bs.n_routes, np.int64)
        starts[has] = bs.path_ptr[bs.route_ptr[has]]
        lens[has] = bs.path_ptr[bs.route_ptr[has] + 1] - starts[has]
        ptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
        return ptr, bs.path_links[ranges(starts, starts + lens)]
    rh_ptr, g_ptr = _hop_groups(bs)
    return rh_ptr, bs.route_counts[1][g_ptr[:-1]]


def _rep_paths(bs: BundleSet, bundles: np.ndarray, reps=None) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(ptr, links)`` of one path of each of ``bundles``: its fixed links, then the
    links of its route's representative path (:func:`_route_reps`, or ``reps``)."""
    rr_ptr, rr_links = _route_reps(bs) if reps is None else reps
    nfix = np.diff(bs.fix_ptr)[bundles]
    r = bs.route[bundles]
    body = r >= 0
    nbody = np.zeros(bundles.size, np.int64)
    nbody[body] = rr_ptr[r[body] + 1] - rr_ptr[r[body]]
    ptr = np.zeros(bundles.size + 1, np.int64)
    np.cumsum(nfix + nbody, out=ptr[1:])
    links = np.empty(int(ptr[-1]), np.int64)
    links[ranges(ptr[:-1], ptr[:-1] + nfix)] = bs.fix_links[
        ranges(bs.fix_ptr[bundles], bs.fix_ptr[bundles + 1])
    ]
    links[ranges(ptr[:-1][body] + nfix[body], ptr[1:][body])] = rr_links[
        ranges(rr_ptr[r[body]], rr_ptr[r[body] + 1])
    ]
    return ptr, links


def is_bundle_equitable(bs: BundleSet, part: BundlePartition, route_links=None) -> bool:
    """Check exactly that ``part``, with every path classed by its bundle, is an equitable
    partition of the unreduced model ``bs.to_flowset()`` that keeps its data (module docstring;
    the conditions of :func:`topoopt.flowsim.symmetry.is_equitable`), without building it.
    ``True`` only then; the link loads are checked through a sufficient condition
    (:func:`_uniform_link_loads`), so an equitable partition can be refused (the reduction is
    then off), never the other way."""
    f, b, lk = (_i64(c) for c in (part.flow, part.bundle, part.link))
    if f.shape != (bs.n_flows,) or b.shape != (bs.n_bundles,) or lk.shape != (bs.n_links,):
        return False
    n_fc, n_bc, n_lc = part.n_flow_classes, part.n_bundle_classes, part.n_link_classes
    bflow = bs.bundle_flow()

    def constant(cls, n_c, *vals) -> bool:
        rep = class_representatives(cls, n_c)
        return all(np.array_equal(v, v[rep][cls]) for v in vals)

    if not (
        constant(lk, n_lc, bs.capacity, bs.latency)
        and constant(b, n_bc, bs.weight, bs.count, f[bflow], bs.multiplicity[bflow])
        and constant(f, n_fc, bs.size, bs.start, bs.multiplicity)
    ):
        return False
    ones_l = np.ones(bs.n_links, np.int64)
    # every path of a route crosses each link class as often as the route's first path
    n_s = bs.n_routes
    if bs.route_counts is not None:  # sufficient: the links at each hop of a route, one class
        _, g_ptr = _hop_groups(bs)
        cls = lk[bs.route_counts[1]]
        g_of = np.repeat(np.arange(g_ptr.size - 1), np.diff(g_ptr))
        if not np.array_equal(cls, cls[g_ptr[:-1]][g_of]):
            return False
    elif bs.path_links.size:
        p_route = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(bs.route_ptr))
        if not uniform_counts(bs.path_ptr, bs.path_links, ones_l, p_route, lk, n_s, n_lc):
            return False
    # the bundles of a class: one path each (fixed + route's first), same link classes
    rr_ptr, rr_links = _route_reps(bs)
    if not uniform_bundle_paths(
        bs.fix_ptr, bs.fix_links, bs.route, _i64(rr_ptr), _i64(rr_links), b, lk, n_bc, n_lc
    ):
        return False
    # every link of a class carries each bundle class's paths as often (multiplicity counted):
    # on fixed links counted per bundle; on route links through the routes' profiles
    if not _uniform_link_loads(bs, b, lk, n_bc, n_lc, bflow, route_links):
        return False
    # flows: the same bundle classes, the same dependency classes
    items = np.arange(bs.n_bundles, dtype=np.int64)
    ones_b = np.ones(bs.n_bundles, np.int64)
    if not uniform_counts(bs.flow_ptr, items, ones_b, f, b, n_fc, n_bc):
        return False
    if bs.deps.size and not uniform_sets(bs.dep_ptr, bs.deps, f, f, n_fc, n_fc):
        return False
    return constant(f, n_fc, np.diff(bs.dep_ptr) > 0)


def _uniform_link_loads(bs, b, lk, n_bc, n_lc, bflow, route_links) -> bool:
    """Whether every link of a class carries each bundle class's paths as often (members
    counted with their flow's multiplicity), exactly.

    A link's count of class ``P`` is its fixed incidences' (``count * m`` per bundle) plus,
    over the routes ``s`` crossing it, ``ul_cnt(s, l) * M(s, P)`` (``M``: the members of
    ``P`` on ``s``). Checked without the ``(route, class) x links`` table: routes are grouped
    by their exact profile ``M(s, .)`` (*route classes* ``rho``), and the check asks that every
    link of a class have the same fixed counts per ``P`` and the same ``sum_{s in rho}
    ul_cnt(s, l)`` per route class: then the sums agree (sufficient; a partition failing it
    turns the reduction off, never makes it wrong)."""
    bm = bs.multiplicity[bflow]
    fix_b = np.repeat(np.arange(bs.n_bundles, dtype=np.int64), np.diff(bs.fix_ptr))
    w = np.ascontiguousarray((bs.count * bm)[fix_b], np.int64)
    l_ptr, l_items = csr_by_key(bs.fix_links, bs.n_links)
    if not uniform_counts(l_ptr, l_items, w, lk, b[fix_b], n_lc, n_bc):
        return False
    fixed_free = np.diff(l_ptr) == 0
    routed = np.flatnonzero(bs.route >= 0)
    n_s = bs.n_routes
    route_free = np.ones(bs.n_links, bool)
    if routed.size:
        sp, p_of, msum = route_class_profiles(bs.route, b, _i64(bm), n_s, n_bc)
        profiles: dict[bytes, int] = {}
        rho = np.full(n_s, -1, np.int64)  # route class; -1: no bundle on the route
        for r in np.flatnonzero(np.diff(sp) > 0):
            row = np.concatenate([p_of[sp[r] : sp[r + 1]], msum[sp[r] : sp[r + 1]]])
            rho[r] = profiles.setdefault(row.tobytes(), len(profiles))
        ul_ptr, ul_link, ul_cnt = _route_links(bs) if route_links is None else route_links
        ul_route = np.repeat(np.arange(n_s, dtype=np.int64), np.diff(ul_ptr))
        used = rho[ul_route] >= 0
        e_link, e_cls = ul_link[used], rho[ul_route[used]]
        e_w = np.ascontiguousarray(ul_cnt[used], np.int64)
        r_ptr, r_items = csr_by_key(np.ascontiguousarray(e_link, np.int64), bs.n_links)
        if not uniform_counts(r_ptr, r_items, e_w, lk, e_cls, n_lc, max(len(profiles), 1)):
            return False
        route_free = np.diff(r_ptr) == 0
    rep = class_representatives(lk, n_lc)
    return bool(
        np.array_equal(fixed_free, fixed_free[rep][lk])
        and np.array_equal(route_free, route_free[rep][lk])
    )


def reduce_bundles(
    bs: BundleSet,
    *,
    seed: int = 0,
    start_flow: np.ndarray | None = None,
    start_link: np.ndarray | None = None,
) -> BundleReduction:
    """The symmetry quotient of ``bs`` built from its bundles (module docstring), or an ``off``
    :class:`BundleReduction` saying why (then simulate ``bs.to_flowset()``, or the caller's
    own unreduced model). ``start_flow``, ``start_link``: starting labels
    (:func:`bundle_partition`)."""
    base = {"flows": bs.n_flows, "paths": bs.n_paths, "links": bs.n_links,
            "bundles": bs.n_bundles, "routes": bs.n_routes}  # fmt: skip
    if bs.n_flows == 0:
        return BundleReduction(
            None, None, None, None, None, {"status": "off", "reason": "no flows"}
        )
    ul = _route_links(bs)
    part = bundle_partition(
        bs, seed=seed, route_links=ul, start_flow=start_flow, start_link=start_link
    )
    if part is None:
        info = {"status": "off", "reason": f"refinement did not settle in {MAX_ROUNDS} rounds"}
        return BundleReduction(None, None, None, None, None, {**info, **base})
    counts = {
        "flow_classes": part.n_flow_classes,
        "path_classes": part.n_bundle_classes,
        "link_classes": part.n_link_classes,
        "rounds": part.rounds,
        "method": "route bundles",
    }
    if not is_bundle_equitable(bs, part, route_links=ul):
        info = {"status": "off", "reason": "the paths of a bundle are not interchangeable "
                "(classes failed the exact equitability check)"}  # fmt: skip
        return BundleReduction(part, None, None, None, None, {**info, **base, **counts})
    q, emult, plat, qpath = _quotient(bs, part)
    return BundleReduction(part, q, emult, plat, qpath, {"status": "on", **base, **counts})


def _quotient(bs: BundleSet, part: BundlePartition):
    """The quotient FlowSet, per-incidence multiplicity, path latencies and the quotient
    sub-flow of every bundle class (:func:`topoopt.flowsim.symmetry._quotient`'s, with the
    paths of a bundle class counted from the bundles)."""
    n_fc, n_bc, n_lc = part.n_flow_classes, part.n_bundle_classes, part.n_link_classes
    bflow = bs.bundle_flow()
    rep_l = class_representatives(part.link, n_lc)
    rep_f = class_representatives(part.flow, n_fc)
    rep_b = class_representatives(part.bundle, n_bc)
    b_fc = part.flow[bflow[rep_b]]
    order = np.lexsort((np.arange(n_bc), b_fc))
    qpath = np.empty(n_bc, np.int64)
    qpath[order] = np.arange(n_bc)
    flow_ptr = np.zeros(n_fc + 1, np.int64)
    np.cumsum(np.bincount(b_fc, minlength=n_fc), out=flow_ptr[1:])
    rb = rep_b[order]  # representative bundle of each quotient sub-flow
    rptr, r_links = _rep_paths(bs, rb)
    r_q = np.repeat(np.arange(n_bc, dtype=np.int64), np.diff(rptr))
    ukey, c_pl = np.unique(r_q * n_lc + part.link[r_links], return_counts=True)
    lsize = np.bincount(part.link, minlength=n_lc)
    # paths of each bundle class, every member flow counted (|P| m_P)
    psize = np.bincount(part.bundle, weights=bs.count * bs.multiplicity[bflow],
                        minlength=n_bc).astype(np.int64)[order]  # fmt: skip
    ql, qp = ukey % n_lc, ukey // n_lc
    total = psize[qp] * c_pl
    emult = total // lsize[ql]
    if np.any(emult * lsize[ql] != total):  # cannot happen for an equitable partition
        raise RuntimeError("bundle quotient: a link class count is not a whole number (a bug)")
    path_ptr = np.zeros(n_bc + 1, np.int64)
    np.cumsum(np.bincount(qp, minlength=n_bc), out=path_ptr[1:])
    w = bs.weight[rb]
    wsum = np.add.reduceat(w, flow_ptr[:-1])
    dep_ptr, deps = class_dependencies(part.flow, rep_f, bs.dep_ptr, bs.deps)
    q = FlowSet(
        capacity=bs.capacity[rep_l],
        latency=bs.latency[rep_l],
        size=bs.size[rep_f] * wsum,
        start=bs.start[rep_f],
        flow_ptr=flow_ptr,
        path_ptr=path_ptr,
        path_links=ql,
        weight=w / wsum[b_fc[order]],
        dep_ptr=dep_ptr,
        deps=deps,
    )
    plat = np.add.reduceat(bs.latency[r_links], rptr[:-1]) if n_bc else np.zeros(0)
    return q, emult, plat, qpath


def simulate_bundles(
    bs: BundleSet,
    reduction: BundleReduction | None = None,
    *,
    rtol: float = 1e-12,
    record_series: bool = True,
    max_refills: int | None = None,
) -> SimResult | None:
    """The simulation of the unreduced model of ``bs`` through its bundle quotient: per flow
    (``start``, ``finish``), per *bundle* (``path_*``: every path of a bundle has its times)
    and per link. ``None`` when the reduction is off (``reduction.info`` says why)."""
    red = reduce_bundles(bs) if reduction is None else reduction
    if red.flows is None:
        return None
    res = simulate(
        red.flows,
        rtol=rtol,
        record_series=record_series,
        max_refills=max_refills,
        incidence_multiplicity=red.emult,
        path_latency=red.plat,
    )
    from topoopt.flowsim.symmetry import expand_by_partition

    return expand_by_partition(res, red, red.qpath[red.partition.bundle], bs.capacity)
