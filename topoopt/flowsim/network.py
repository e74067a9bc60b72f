"""The network a simulation runs on: fabric links, intra-server links, a null link, device links.

A :class:`Network` extends a :class:`~topoopt.fabrics.Fabric` with the links the flow model needs
besides the fabric's own, numbered after them:

========================= ================================== =====================================
link ids                  what                               capacity, latency
========================= ================================== =====================================
``0 .. Lf-1``             the fabric's directed links        the fabric's
``Lf + r`` (``r < R``)    NVLink-like egress of GPU ``r``    ``intra_bandwidth``, ``intra_latency``
``Lf + R``                the *null* link                    1 byte/s, 0 s
``Lf + R + 1 + c``        the private link of device ``c``   1 byte/s, 0 s
========================= ================================== =====================================

with ``R = n_servers * gpus_per_server`` GPU slots.

- **Intra-server transfers.** A transfer between two GPUs of one server crosses the egress link of
  its source GPU, never the fabric. One link per GPU models an NVSwitch-style server, where every
  GPU sends at its own NVLink bandwidth whatever the others do; a collective inside a server is
  then one flow per member on that member's egress link. When the fabric gives no
  ``intra_server_bandwidth`` the default is :data:`DEFAULT_INTRA_BANDWIDTH` (300e9 bytes/s per
  direction, the NVLink 3 bandwidth of one A100 GPU: 12 links x 25 GB/s).
- **Network transfers.** Endpoints are servers (``rank // gpus_per_server``); the routes are a
  :class:`~topoopt.paths.PathSet` over server pairs, computed once per set of needed pairs with
  :func:`topoopt.fabrics.routes` (or taken from an override, e.g. a solver's), then indexed with
  vectorised look-ups.
- **Rails.** On a rail fabric (``rail-only``, ``rail-optimized``: NIC ``i`` of every server on
  rail ``i``) with one GPU per NIC, GPU ``i``'s traffic leaves on NIC ``i`` (``rail_routing``, on
  by default there): a flow from GPU ``i`` of server ``u`` to GPU ``j`` of server ``v`` takes the
  paths of ``(u, v)`` that leave on rail ``i`` and arrive on rail ``j``; when none does (rail-only:
  no switch joins two rails) it takes those that arrive on rail ``i`` and then crosses the
  destination server's scale-up fabric from GPU ``i`` to GPU ``j``: the path ends with GPU
  ``(v, i)``'s egress link (NVLink bandwidth, ``intra_bandwidth``). Routes are then per server
  pair and rail pair (:meth:`Network.pair_routes` with ``rails``).
- **Compute as flows.** A compute task of duration ``T`` seconds is a flow of ``T`` bytes on a
  private link of capacity 1 byte/s that only its device uses; the device's tasks are serialised
  by dependencies, so such a flow takes exactly ``T`` once its dependencies are done.
- **Barriers and instantaneous transfers.** A zero-byte flow on the null link (latency 0) finishes
  the instant its dependencies do: it joins dependencies (a barrier), and it stands for a transfer
  that the model declares instantaneous (an infinitely fast network).

:class:`FlowBuilder` accumulates flows route by route and task by task, then turns them into one
:class:`~topoopt.flowsim.FlowSet` (:meth:`FlowBuilder.build`), or into one where identical flows
are merged into classes with a multiplicity (:meth:`FlowBuilder.build_classes`).

- **Aggregation.** Rank-level collectives on many servers are mostly copies: every GPU pair
  between two servers carries the same bytes on the same server-pair route, released at the same
  time after the same flows. Flows with the same route (the same link for single-link flows, the
  same server pair's weighted paths otherwise), the same size and the same dependency classes are
  one class of the flow model (:func:`~topoopt.flowsim.flowset.identical_classes`; exact, as
  argued in :mod:`topoopt.flowsim.simulator`). Intra-server flows of different GPUs use
  different egress links, device tasks different device links: they never merge.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

from topoopt.csr import gather_rows, ranges
from topoopt.fabrics.fabric import Fabric
from topoopt.fabrics.rail import RAIL_FAMILIES, link_rails, rail_count
from topoopt.flowsim._symmetry_kernels import csr_by_key, dense_ids, expand_routes
from topoopt.flowsim.flowset import (
    FlowSet,
    class_dependencies,
    class_representatives,
    identical_classes,
    merged_classes,
)
from topoopt.flowsim.simulator import SimResult, expand_classes, simulate
from topoopt.flowsim.subflow_guard import (
    check_bundles,
    check_expansion,
    check_quotient,
    check_route_counts,
    check_subflows,
)
from topoopt.flowsim.symmetry import reduce_flows, simulate_reduced
from topoopt.paths import PathSet
from traffic.errors import InputError
from traffic.limits import check_memory

__all__ = [
    "DEFAULT_INTRA_BANDWIDTH",
    "FLOW_BYTES",
    "DEP_BYTES",
    "Network",
    "FlowBuilder",
    "simulate_builder",
    "simulate_builder_classes",
]

FLOW_BYTES = 96
"""Bytes of arrays per flow a FlowBuilder leads to: its own four int64/float64 entries (link,
source, destination, bytes: 32, measured 4.4 GB for 55 million flows and 146 million
dependencies with :data:`DEP_BYTES`), their concatenation by :meth:`FlowBuilder.arrays` and the
classes and FlowSet built from them (about three copies)."""

DEP_BYTES = 48
"""Bytes of arrays per dependency edge (owner and dependency, int64, about three copies)."""

DEFAULT_INTRA_BANDWIDTH = 300e9
"""Bytes/s of one GPU's NVLink egress when the fabric gives none (A100, NVLink 3: 12 x 25 GB/s)."""


_rows = gather_rows


class _RouteMemo:
    """The largest set of server-pair routes computed for the last fabric, shared by every
    :class:`Network` on it (the phases of an iteration and ``communication_time`` ask subsets
    of one pair set). The routes of a pair do not depend on the other pairs asked (ECMP and
    shortest paths without a random seed, as :meth:`Network.pair_routes` asks them), so a
    subset's are the superset's rows (:meth:`~topoopt.paths.PathSet.take`), the same arrays
    :func:`~topoopt.fabrics.routing.routes` returns for it. The fabric is held by a weak
    reference: the memo never keeps a fabric alive, a new fabric replaces it, and the routes
    are dropped when the fabric is collected (:meth:`release`: a process that builds one
    fabric after another, ``advise``'s rows, does not keep the last fabric's routes, which may
    be gigabytes, through the next one)."""

    def __init__(self) -> None:
        self.fabric = None  # weakref.ref to the fabric
        self.method = ""
        self.uniq = np.zeros(0, np.int64)  # sorted pair keys src * n_nodes + dst
        self.ps: PathSet | None = None
        self.capped: np.ndarray | None = None  # per pair: more paths than the cap (or None)

    def subset(
        self, fabric, method: str, uniq: np.ndarray
    ) -> tuple[PathSet, np.ndarray | None] | None:
        if self.ps is None or self.fabric is None or self.fabric() is not fabric:
            return None
        if self.method != method:
            return None
        if self.uniq.size == 0 or uniq.size == 0:
            return None
        pos = np.searchsorted(self.uniq, uniq)
        pos = np.minimum(pos, self.uniq.size - 1)
        if not np.array_equal(self.uniq[pos], uniq):
            return None
        capped = None if self.capped is None else self.capped[pos]
        return self.ps.take(pos), capped

    def offer(
        self, fabric, method: str, uniq: np.ndarray, ps: PathSet, capped: np.ndarray | None
    ) -> None:
        same = (
            self.ps is not None and self.fabric is not None and self.fabric() is fabric
            and self.method == method
        )  # fmt: skip
        if not same or uniq.size > self.uniq.size:
            ref = self.fabric if same else weakref.ref(fabric, self._collected)
            self.fabric, self.method, self.uniq, self.ps = ref, method, uniq, ps
            self.capped = capped

    def _collected(self, ref) -> None:
        if ref is self.fabric:  # the fabric of the routes held: not an older one
            self.release()

    def release(self) -> None:
        """Forget the routes held (the memo is a cache: nothing is lost but time)."""
        self.fabric, self.method, self.uniq, self.ps = None, "", np.zeros(0, np.int64), None
        self.capped = None


_SHARED_ROUTES = _RouteMemo()


def _unique_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(key, return_inverse=True)`` for ``int64`` keys, by a hash table (linear)
    and a sort of the distinct keys only (millions of flows, thousands of server pairs).

    >>> [x.tolist() for x in _unique_inverse(np.array([7, 3, 7, 9]))]
    [[3, 7, 9], [1, 0, 1, 2]]
    """
    key = np.ascontiguousarray(key, np.int64).reshape(-1)
    ids = dense_ids(key.view(np.uint64))
    n_u = int(ids.max()) + 1 if ids.size else 0
    first = np.empty(n_u, np.int64)
    first[ids[::-1]] = np.arange(key.shape[0] - 1, -1, -1, dtype=np.int64)
    order = np.argsort(key[first], kind="stable")
    rank = np.empty(n_u, np.int64)
    rank[order] = np.arange(n_u, dtype=np.int64)
    return key[first][order], rank[ids]


@dataclass(frozen=True, eq=False)
class Network:
    """A fabric plus intra-server, null and device links (see the module docstring).

    Parameters
    ----------
    fabric : Fabric
    gpus_per_server : int, optional
        GPUs per server of the workload (default: the fabric's); rank ``r`` is on server
        ``r // gpus_per_server``.
    intra_bandwidth : float, optional
        Bytes/s of each GPU's intra-server egress link (default: the fabric's
        ``intra_server_bandwidth``, else :data:`DEFAULT_INTRA_BANDWIDTH`).
    intra_latency : float
        Seconds per intra-server transfer (default 0: NVLink latency is sub-microsecond).
    routing : PathSet, optional
        Routes over server pairs (node ids of the fabric) to use instead of the fabric's; pairs
        it does not cover are routed with ``method``.
    method : str
        Routing method of :func:`topoopt.fabrics.routes` for pairs ``routing`` does not cover.
    rail_routing : bool, optional
        GPU ``i``'s traffic on rail ``i`` (module docstring). Default: on for a rail fabric
        whose rails equal ``gpus_per_server``, off otherwise; True elsewhere is an error.
    max_paths : int, optional
        Keep at most this many ECMP paths per server pair (per switch pair on a rail fabric
        with rail routing): one per stratum of ``count / max_paths`` consecutive paths, a
        random one within it from a hash of the pair (:func:`topoopt.fabrics.routes` with ``k``,
        ``seed=0``, ``per_pair``),
        each weighted ``1 / max_paths``. An approximation of the equal split over every path
        (per-flow hashing over a sample of the paths); ``None`` (default): every path, exact.

    Examples
    --------
    >>> from topoopt.fabrics import ideal
    >>> net = Network(ideal(2, port_bandwidth=1e9), gpus_per_server=2, intra_bandwidth=5e9)
    >>> net.n_fabric_links, net.intra_link([0, 3]).tolist(), net.null_link
    (4, [4, 7], 8)
    """

    fabric: Fabric
    gpus_per_server: int | None = None
    intra_bandwidth: float | None = None
    intra_latency: float = 0.0
    routing: PathSet | None = None
    method: str = "ecmp"
    rail_routing: bool | None = None
    max_paths: int | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)
    _capped: list = field(default_factory=list, repr=False, compare=False)  # capped pair keys

    def __post_init__(self) -> None:
        gps = self.fabric.gpus_per_server if self.gpus_per_server is None else self.gpus_per_server
        if isinstance(gps, bool) or not isinstance(gps, int | np.integer) or gps < 1:
            raise InputError("gpus_per_server", gps, "a positive integer")
        object.__setattr__(self, "gpus_per_server", int(gps))
        bw = self.intra_bandwidth
        if bw is None:
            bw = self.fabric.intra_server_bandwidth or DEFAULT_INTRA_BANDWIDTH
        if not (np.isfinite(bw) and bw > 0):
            raise InputError("intra_bandwidth", bw, "a positive finite number of bytes/s")
        object.__setattr__(self, "intra_bandwidth", float(bw))
        lat = float(self.intra_latency)
        if not (np.isfinite(lat) and lat >= 0):
            raise InputError("intra_latency", self.intra_latency, "a finite number >= 0 s")
        object.__setattr__(self, "intra_latency", lat)
        if self.routing is not None and not isinstance(self.routing, PathSet):
            raise InputError("routing", type(self.routing).__name__, "a PathSet or None")
        rails = rail_count(self.fabric)
        fits = rails > 1 and rails == self.gpus_per_server
        rr = self.rail_routing
        if rr is None:
            rr = fits
        elif rr and not fits:
            raise InputError(
                "rail_routing", True,
                f"a rail fabric ({', '.join(RAIL_FAMILIES)}) with one rail per GPU of a server "
                f"(got {self.fabric.family}, {rails} rails, {self.gpus_per_server} GPUs)",
            )  # fmt: skip
        object.__setattr__(self, "rail_routing", bool(rr))
        k = self.max_paths
        if k is not None and (isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1):
            raise InputError("max_paths", k, "a positive integer or None (every ECMP path)")
        if k is not None:
            object.__setattr__(self, "max_paths", int(k))

    def _route(self, pairs: np.ndarray, capped: dict | None = None) -> PathSet:
        """:func:`~topoopt.fabrics.routing.routes` of ``pairs`` with this network's method and
        path cap; the pairs the cap bound on are recorded (:attr:`capped_pairs`), and their
        mask, per pair, left in ``capped["capped"]`` when given."""
        from topoopt.fabrics.routing import routes

        if self.max_paths is None or self.method not in ("ecmp", "host-forwarding"):
            return routes(self.fabric, self.method, pairs=pairs)
        stats = {} if capped is None else capped
        ps = routes(
            self.fabric, self.method, pairs=pairs, k=self.max_paths, seed=0, per_pair=True,
            stats=stats,
        )  # fmt: skip
        self._note_capped(pairs, stats["capped"])
        return ps

    def _note_capped(self, pairs: np.ndarray, mask: np.ndarray) -> None:
        """Record the routed pairs (``(K, 2)`` node ids) whose routes the cap sampled."""
        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        keys = (pairs[:, 0] * self.fabric.n_nodes + pairs[:, 1])[np.asarray(mask, bool)]
        if keys.size:
            self._capped[:] = [np.unique(np.concatenate([*self._capped, keys]))]

    @property
    def capped_pairs(self) -> int:
        """Pairs routed so far whose shortest paths outnumber ``max_paths`` (their routes are a
        sample, an approximation); 0 without a cap, or when the cap has not bound yet.

        >>> from topoopt.fabrics import fat_tree
        >>> net = Network(fat_tree(4), gpus_per_server=1, max_paths=2)
        >>> _ = net.pair_routes([0, 0], [1, 2])  # one and two paths: the cap does not bind
        >>> net.capped_pairs
        0
        >>> _ = net.pair_routes([0], [15])  # four paths, two kept
        >>> net.capped_pairs
        1
        """
        return int(self._capped[0].size) if self._capped else 0

    @property
    def _route_key(self) -> str:
        """The routing method and path cap, as the route caches key them."""
        return self.method if self.max_paths is None else f"{self.method}/k={self.max_paths}"

    # ------------------------------------------------------------------ link ids
    @property
    def n_fabric_links(self) -> int:
        return self.fabric.n_links

    @property
    def n_gpu_slots(self) -> int:
        """GPU slots (``n_servers * gpus_per_server``), one intra link each."""
        return self.fabric.n_servers * self.gpus_per_server

    @property
    def null_link(self) -> int:
        """Id of the null link (zero-byte flows on it are instantaneous)."""
        return self.n_fabric_links + self.n_gpu_slots

    @property
    def first_device_link(self) -> int:
        """Id of the private link of device 0."""
        return self.null_link + 1

    def intra_link(self, ranks) -> np.ndarray:
        """Intra-server egress link of each GPU rank."""
        r = np.asarray(ranks, np.int64)
        return self.n_fabric_links + r

    def server_of(self, ranks) -> np.ndarray:
        """Server of each rank; the fabric node of a switch pseudo-rank (:meth:`switch_rank`)."""
        r = np.asarray(ranks, np.int64)
        slots = self.n_gpu_slots
        return np.where(r < slots, r // self.gpus_per_server, r - slots + self.fabric.n_servers)

    def switch_rank(self, nodes) -> np.ndarray:
        """Pseudo-rank of fabric switch nodes, so that a rank-level flow may end at a switch
        (in-network aggregation, :mod:`topoopt.flowsim.ina`): ``n_gpu_slots + node - n_servers``.

        >>> from topoopt.fabrics import leaf_spine
        >>> net = Network(leaf_spine(4, radix=4, leaf_hosts=2), gpus_per_server=2)
        >>> r = net.switch_rank([4]); r.tolist(), net.server_of(r).tolist()
        ([8], [4])
        """
        return np.asarray(nodes, np.int64) - self.fabric.n_servers + self.n_gpu_slots

    def capacity(self, n_devices: int = 0) -> np.ndarray:
        """Capacity of every link, bytes/s (``n_devices`` device links at the end)."""
        return np.concatenate(
            [
                self.fabric.capacity,
                np.full(self.n_gpu_slots, self.intra_bandwidth),
                np.ones(1 + n_devices),
            ]
        )

    def latency(self, n_devices: int = 0) -> np.ndarray:
        """Latency of every link, seconds."""
        return np.concatenate(
            [
                self.fabric.latency,
                np.full(self.n_gpu_slots, self.intra_latency),
                np.zeros(1 + n_devices),
            ]
        )

    def link_kind(self, n_devices: int = 0) -> np.ndarray:
        """Kind of every link: the fabric's kinds, then ``intra``, ``null`` and ``device``."""
        return np.concatenate(
            [
                self.fabric.link_kind.astype(object),
                np.full(self.n_gpu_slots, "intra", object),
                np.array(["null"], object),
                np.full(n_devices, "device", object),
            ]
        )

    def check_workload(self, gpus: int, gpus_per_server: int) -> None:
        """Raise :class:`InputError` unless a workload of ``gpus`` GPUs fits this network."""
        if gpus_per_server != self.gpus_per_server:
            raise InputError(
                "workload.gpus_per_server",
                gpus_per_server,
                f"the network's gpus_per_server={self.gpus_per_server}",
            )
        servers = -(-gpus // gpus_per_server)
        if servers > self.fabric.n_servers:
            raise InputError(
                "workload.servers",
                servers,
                f"at most the fabric's {self.fabric.n_servers} servers ({self.fabric.family})",
            )

    # ------------------------------------------------------------------ routes
    def pair_routes(
        self, src: np.ndarray, dst: np.ndarray, rails: np.ndarray | None = None
    ) -> tuple[PathSet, np.ndarray]:
        """Routes for server pairs: a PathSet and the commodity index of each pair.

        The fabric is routed once for all distinct pairs asked (cached per pair set); with a
        ``routing`` override, the pairs are looked up in it, and pairs it does not cover are
        routed with ``method`` (cached, so a solver's routing only needs the pairs it chose).
        ``rails`` (with ``rail_routing``): ``i * gpus_per_server + j`` for a flow from GPU ``i``
        to GPU ``j`` of the two servers, ``-1`` for no restriction; the commodities are then
        per pair and rails (module docstring, :meth:`rail_paths`).
        """
        if rails is not None and self.rail_routing:
            return self.rail_paths(src, dst, rails)
        src = np.asarray(src, np.int64)
        dst = np.asarray(dst, np.int64)
        n = self.fabric.n_nodes
        if self.routing is not None:
            ps = self.routing
            idx = ps.index(src, dst, n)
            if np.any(idx < 0):
                # pairs the override does not cover are routed with ``method``
                ck = ("override", self._route_key, id(ps))
                missing = np.unique((src * n + dst)[idx < 0])
                cached = self._cache.get(ck)
                if cached is not None:
                    still = cached.index(missing // n, missing % n, n) < 0
                    missing = missing[still]
                    ps = cached
                if missing.size:
                    extra = self._route(np.column_stack([missing // n, missing % n]))
                    ps = PathSet.concat([ps, extra])
                self._cache[ck] = ps
                idx = ps.index(src, dst, n)
            return ps, idx
        uniq, inv = _unique_inverse(src * n + dst)
        ck = ("routes", self._route_key, uniq.tobytes())
        if ck not in self._cache:
            held = _SHARED_ROUTES.subset(self.fabric, self._route_key, uniq)
            if held is None:
                got: dict = {}
                ps = self._route(np.column_stack([uniq // n, uniq % n]), got)
                _SHARED_ROUTES.offer(self.fabric, self._route_key, uniq, ps, got.get("capped"))
            else:
                ps, capped = held
                if capped is not None:  # the memo's routes were capped: which of these were
                    self._note_capped(np.column_stack([uniq // n, uniq % n]), capped)
            self._cache.clear()
            self._cache[ck] = ps
        return self._cache[ck], inv.reshape(-1).astype(np.int64)

    def pair_path_counts(
        self, src: np.ndarray, dst: np.ndarray, rails: np.ndarray | None = None
    ) -> np.ndarray | None:
        """How many paths :meth:`pair_routes` gives each server pair, without listing them:
        the shortest-path counts of the breadth-first tables
        (:func:`~topoopt.fabrics.routing.shortest_path_counts`; ``min(count, max_paths)``
        with a path cap, one path for the single-path methods), as floats. ``None`` where
        the routes are not counted this way (a ``routing`` override, rail routing): the
        caller then counts the routes once listed.

        >>> from topoopt.fabrics import fat_tree
        >>> net = Network(fat_tree(4), gpus_per_server=1)
        >>> net.pair_path_counts([0, 0, 0], [1, 2, 15]).tolist()  # same edge, pod, other pod
        [1.0, 2.0, 4.0]
        >>> [int(np.diff(net.pair_routes([0], [v])[0].commodity_ptr)[0]) for v in (1, 2, 15)]
        [1, 2, 4]
        """
        if self.routing is not None or (rails is not None and self.rail_routing):
            return None
        src = np.asarray(src, np.int64).reshape(-1)
        dst = np.asarray(dst, np.int64).reshape(-1)
        if self.method not in ("ecmp", "host-forwarding"):
            return np.ones(src.size)
        from topoopt.fabrics.routing import shortest_path_counts

        targets, ti = np.unique(dst, return_inverse=True)
        kinds = ("optical",) if self.method == "host-forwarding" else None
        count = shortest_path_counts(self.fabric, targets, kinds)[1][ti.reshape(-1), src]
        return count if self.max_paths is None else np.minimum(count, float(self.max_paths))

    def _link_rails(self) -> np.ndarray:
        ck = ("link_rails",)
        if ck not in self._cache:
            self._cache[ck] = link_rails(self.fabric)
        return self._cache[ck]

    def rail_paths(self, src, dst, rails) -> tuple[PathSet, np.ndarray]:
        """Routes of rank flows on rails: for each ``(src server, dst server, rails)`` the paths
        of the server pair leaving on rail ``i`` and arriving on rail ``j``, else those arriving
        on rail ``i`` followed by the destination GPU ``i``'s scale-up egress link to GPU ``j``;
        weights renormalised (module docstring). ``rails == -1``: every path of the pair;
        ``rails == SAME_RAIL`` (-2): a merged family of one flow per rail ``i -> i`` (GPU ``i`` to
        GPU ``i`` for every ``i``): the paths leaving and arriving on one rail, each rail's
        share ``1 / g`` (exactly the ``g`` flows' routes, merged).

        >>> from topoopt.fabrics.fat_tree import clos_shape
        >>> from topoopt.fabrics.rail import rail_only
        >>> net = Network(rail_only(clos_shape(2, 8, pack=True), 2, 1e9), gpus_per_server=2)
        >>> ps, k = net.rail_paths([0, 0], [1, 1], [0 * 2 + 0, 0 * 2 + 1])
        >>> [ps.path_links[ps.path_ptr[p]:ps.path_ptr[p + 1]].tolist() for p in range(2)]
        [[0, 5], [0, 5, 10]]
        """
        src = np.asarray(src, np.int64).reshape(-1)
        dst = np.asarray(dst, np.int64).reshape(-1)
        rails = np.asarray(rails, np.int64).reshape(-1)
        g = self.gpus_per_server
        n = self.fabric.n_nodes
        M = g * g + 2  # rails -2 .. g*g-1, shifted by 2
        key = (src * n + dst) * M + (rails + 2)
        uniq, inv = _unique_inverse(key)
        ck = ("rails", self._route_key, id(self.routing), uniq.tobytes())
        if ck in self._cache:
            return self._cache[ck], inv.reshape(-1).astype(np.int64)
        pair, r = uniq // M, uniq % M - 2
        u, v = pair // n, pair % n
        if self.routing is None and self.method == "ecmp":
            ps = self._rail_paths_by_leaf(u, v, r)
        else:
            ps = self._rail_paths_enumerated(u, v, r)
        self._cache[ck] = ps
        return ps, inv.reshape(-1).astype(np.int64)

    def _rail_paths_by_leaf(self, u, v, r) -> PathSet:
        """:meth:`rail_paths` of the requests ``(u, v, r)`` without the server pairs' paths.

        Every link of a server is a rail link (:func:`~topoopt.fabrics.rail.link_rails`), so
        the shortest paths of ``(u, v)`` that leave on rail ``i`` and arrive on rail ``j`` are
        ``u -> a`` (``a``: ``u``'s switch on rail ``i``), a shortest path ``a -> b``, then
        ``b -> v`` (``b``: ``v``'s switch on rail ``j``), and there are such paths exactly when
        ``2 + d(a, b) = d(u, v) = 2 + min over rails k, l of d(a_k, b_l)``. ECMP weighs the
        paths of a pair equally, so the selection of :meth:`rail_paths` weighs each of them
        ``1 / sigma(a, b)`` (a same-rail family: ``1 / (sigma(a_k, b_k) n)`` over its ``n``
        rails), in the same order (paths are unranked in link-id order, so those through
        ``u -> a`` are the switch pair's paths in their own order). Only the switch pairs are
        routed: on the three-tier rail-optimised Clos of 2,048 servers a server pair has 16,384
        paths and a rail pair 256. Requests this does not cover (no rail restriction, or no
        rail path: the enumeration's all-paths fall-back) go through
        :meth:`_rail_paths_enumerated`.
        """
        seg = self._rail_segments(u, v, r)
        keys = ("fast", "req", "hop", "first", "last", "base", "sw")
        fast, seg_req, seg_hop, first, last, base, sw_of = (seg[k] for k in keys)
        seg_i, g, nreq = seg["rail"], self.gpus_per_server, u.size
        cp, pp, pl = base.commodity_ptr, base.path_ptr, base.path_links
        cnt = cp[sw_of + 1] - cp[sw_of]
        nseg = np.bincount(seg_req, minlength=nreq)
        path = ranges(cp[sw_of], cp[sw_of + 1])  # switch-pair path of every output path
        ps_seg = np.repeat(np.arange(seg_req.size), cnt)
        body = pp[path + 1] - pp[path]
        lens = body + 2 + seg_hop[ps_seg]
        path_ptr = np.zeros(path.size + 1, np.int64)
        np.cumsum(lens, out=path_ptr[1:])
        links = np.empty(int(path_ptr[-1]), np.int64)
        links[path_ptr[:-1]] = first[ps_seg]
        inner = ranges(path_ptr[:-1] + 1, path_ptr[:-1] + 1 + body)
        links[inner] = pl[ranges(pp[path], pp[path + 1])]
        links[path_ptr[:-1] + 1 + body] = last[ps_seg]
        hp = seg_hop[ps_seg]
        extra = self.intra_link(v[seg_req] * g + seg_i)  # destination GPU (v, i)'s egress
        links[path_ptr[1:][hp] - 1] = extra[ps_seg[hp]]
        w = 1.0 / (cnt[ps_seg] * nseg[seg_req[ps_seg]])
        commodity_ptr = np.zeros(nreq + 1, np.int64)
        np.cumsum(np.bincount(seg_req[ps_seg], minlength=nreq), out=commodity_ptr[1:])
        ps = PathSet(u, v, commodity_ptr, path_ptr, links, w)
        if fast.all():
            return ps
        slow = np.flatnonzero(~fast)
        rest = self._rail_paths_enumerated(u[slow], v[slow], r[slow])
        pos = np.empty(nreq, np.int64)  # request -> commodity of [ps (fast rows), rest]
        pos[np.flatnonzero(fast)] = np.flatnonzero(fast)
        pos[slow] = nreq + np.arange(slow.size)
        return PathSet.concat([ps, rest]).take(pos)

    def _rail_segments(self, u, v, r, counts: bool = False) -> dict:
        """The segments of the rail requests ``(u, v, r)`` (:meth:`_rail_paths_by_leaf`): each
        is ``u``'s link to its rail switch ``a`` (``first``), every shortest path of the switch
        pair ``(a, b)`` (commodity ``sw`` of ``base``, a :class:`~topoopt.paths.PathSet` of
        switch pairs), ``b``'s link to ``v`` (``last``), then with ``hop`` the destination
        GPU's scale-up egress link; ``req``: the request of each segment, request-major, first
        link ascending; ``rail``: the segment's first rail; ``fast``: the requests covered
        (the others need :meth:`_rail_paths_enumerated`). With ``counts``, ``base`` is the
        switch pairs' :func:`~topoopt.fabrics.routing.route_link_counts` instead of their
        listed paths."""
        from topoopt.fabrics.routing import shortest_path_counts

        fab, g = self.fabric, self.gpus_per_server
        ns = fab.n_servers
        lr = self._link_rails()
        ck = ("rail_links",)
        if ck not in self._cache:
            up_link = np.full((ns, g), -1, np.int64)
            down_link = np.full((ns, g), -1, np.int64)
            m = (fab.src < ns) & (lr >= 0) & (lr < g)
            up_link[fab.src[m], lr[m]] = np.flatnonzero(m)
            m = (fab.dst < ns) & (lr >= 0) & (lr < g)
            down_link[fab.dst[m], lr[m]] = np.flatnonzero(m)
            self._cache[ck] = (up_link, down_link)
        up_link, down_link = self._cache[ck]
        nreq = u.size
        ok_uv = (u < ns) & (v < ns) & (u != v) & (r != -1)
        uu, vv = np.where(ok_uv, u, 0), np.where(ok_uv, v, 0)
        ck = ("switch_hops",)
        if ck not in self._cache:  # hops from every node to every switch, and to every server
            self._cache[ck] = (
                shortest_path_counts(fab, np.arange(ns, fab.n_nodes))[0],
                shortest_path_counts(fab, np.arange(ns))[0],
            )
        to_switch, to_server = self._cache[ck]

        def hops(ri, ki, li):  # d(u's switch on rail ki, v's switch on rail li) of requests ri
            a = fab.dst[up_link[uu[ri], ki]]
            b = fab.src[down_link[vv[ri], li]]
            return to_switch[b - ns, a]

        rows = np.arange(nreq)
        d_uv = to_server[vv, uu]
        i, j = np.where(r >= 0, r // g, 0), np.where(r >= 0, r % g, 0)
        direct = ok_uv & (r >= 0) & (2 + hops(rows, i, j) == d_uv)
        hop = ok_uv & (r >= 0) & ~direct & (2 + hops(rows, i, i) == d_uv)
        same = np.flatnonzero(ok_uv & (r == SAME_RAIL))
        ks = np.arange(g)
        same_k = np.zeros((nreq, g), bool)
        same_k[same] = 2 + hops(same[:, None], ks[None, :], ks[None, :]) == d_uv[same, None]
        fast = direct | hop | same_k.any(axis=1)
        # segments: (request, first rail, last rail, hop), request-major, first link ascending
        sreq, sk = np.nonzero(same_k)
        seg_req = np.r_[np.flatnonzero(direct | hop), sreq]
        seg_i = np.r_[i[direct | hop], sk]
        seg_j = np.r_[np.where(direct, j, i)[direct | hop], sk]
        seg_hop = np.r_[hop[direct | hop], np.zeros(sk.size, bool)]
        first = up_link[u[seg_req], seg_i] if seg_req.size else np.zeros(0, np.int64)
        last = down_link[v[seg_req], seg_j] if seg_req.size else np.zeros(0, np.int64)
        order = np.lexsort((first, seg_req))
        seg_req, seg_i, seg_hop = seg_req[order], seg_i[order], seg_hop[order]
        first, last = first[order], last[order]
        a, b = fab.dst[first], fab.src[last]
        nsw = fab.n_nodes
        sw_pairs, sw_of = np.unique(a * nsw + b, return_inverse=True)
        sw_of = sw_of.reshape(-1)
        base = self._switch_routes(np.column_stack([sw_pairs // nsw, sw_pairs % nsw]), counts)
        return {
            "fast": fast, "req": seg_req, "hop": seg_hop, "first": first, "last": last,
            "base": base, "sw": sw_of, "rail": seg_i,
        }  # fmt: skip

    def _switch_routes(self, pairs: np.ndarray, counts: bool):
        """The switch pairs' routes: listed (:meth:`_route`) or, with ``counts``, as
        :func:`~topoopt.fabrics.routing.route_link_counts` by hop (ECMP without a path cap only;
        every pair's counts are kept, read-only, and a later call computes only the pairs not
        seen; refused by :func:`~topoopt.flowsim.subflow_guard.check_route_counts` before they
        are computed when their memory would exceed the budget)."""
        if not counts:
            return self._route(pairs)
        from topoopt.fabrics.routing import route_link_counts, route_link_entries

        pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
        n = self.fabric.n_nodes
        keys = pairs[:, 0] * n + pairs[:, 1]
        ck = ("switch_route_counts",)
        # every pair computed so far, sorted by key: (keys, ptr, link, count, hop); kept on
        # the fabric (the counts depend on its links only), so that every Network on it (the
        # phases of an iteration, communication_time's) shares them
        cache = self.fabric._cache
        known = cache.get(ck, (np.zeros(0, np.int64), np.zeros(1, np.int64)) + (
            np.zeros(0, np.int64),) * 3)  # fmt: skip
        new = np.setdiff1d(keys, known[0])
        if new.size:
            new_pairs = np.column_stack([new // n, new % n])
            # refuse before the counts' memory is spent (the cache keeps every pair's)
            check_route_counts(new.size, route_link_entries(self.fabric, new_pairs), known[2].size)
            got = route_link_counts(self.fabric, new_pairs, by_hop=True)
        if new.size and not known[0].size:  # the first pairs: kept as computed (new is sorted)
            known = (new, *got)
            cache[ck] = known
            del got
        elif new.size:
            all_keys = np.r_[known[0], new]
            lens = np.r_[np.diff(known[1]), np.diff(got[0])]
            data = [np.r_[a, b] for a, b in zip(known[2:], got[1:], strict=True)]
            o = np.argsort(all_keys, kind="stable")
            starts = np.r_[0, np.cumsum(lens)][:-1][o]
            sel = ranges(starts, starts + lens[o])
            known = (all_keys[o], np.r_[0, np.cumsum(lens[o])].astype(np.int64),
                     *(d[sel] for d in data))  # fmt: skip
            cache[ck] = known
        if new.size:
            for a in known:  # shared by every Network on the fabric and handed out uncopied
                a.setflags(write=False)
        if np.array_equal(keys, known[0]):  # every pair kept, in order: no copy
            return known[1:]
        pos = np.searchsorted(known[0], keys)
        lo, hi = known[1][pos], known[1][pos + 1]
        sel = ranges(lo, hi)
        ptr = np.r_[0, np.cumsum(hi - lo)].astype(np.int64)
        return (ptr, *(d[sel] for d in known[2:]))

    def _server_segments(self, u, v, counts: bool = False) -> dict | None:
        """ECMP routes of the server pairs ``(u, v)`` as segments (:meth:`_rail_segments`'s
        dict, no hop), where every server has one link to one switch ``a`` and one link back
        from it: then a server is never inside a shortest path, and the shortest paths of
        ``(u, v)`` are ``u -> a``, every shortest path of the switch pair ``(a, b)``, ``b ->
        v``, each weighted ``1 / sigma(a, b)`` as ECMP weighs the pair's paths. ``None`` for
        other fabrics, or pairs that are not two distinct servers."""
        fab = self.fabric
        ns = fab.n_servers
        ck = ("server_links",)
        if ck not in self._cache:
            m_up, m_down = fab.src < ns, fab.dst < ns
            ok = (
                np.array_equal(np.bincount(fab.src[m_up], minlength=ns), np.ones(ns, np.int64))
                and np.array_equal(
                    np.bincount(fab.dst[m_down], minlength=ns), np.ones(ns, np.int64)
                )
                and not np.any(m_up & m_down)
            )
            got = None
            if ok:
                up = np.empty(ns, np.int64)
                down = np.empty(ns, np.int64)
                up[fab.src[m_up]] = np.flatnonzero(m_up)
                down[fab.dst[m_down]] = np.flatnonzero(m_down)
                if np.array_equal(fab.dst[up], fab.src[down]):  # one switch each, both ways
                    got = (up, down)
            self._cache[ck] = got
        if self._cache[ck] is None:
            return None
        up, down = self._cache[ck]
        if u.size and not ((u < ns) & (v < ns) & (u != v)).all():
            return None
        first, last = up[u], down[v]
        a, b = fab.dst[first], fab.src[last]
        nsw = fab.n_nodes
        sw_pairs, sw_of = np.unique(a * nsw + b, return_inverse=True)
        base = self._switch_routes(np.column_stack([sw_pairs // nsw, sw_pairs % nsw]), counts)
        return {
            "fast": np.ones(u.size, bool), "req": np.arange(u.size, dtype=np.int64),
            "hop": np.zeros(u.size, bool), "first": first, "last": last, "base": base,
            "sw": sw_of.reshape(-1), "rail": np.zeros(u.size, np.int64),
        }  # fmt: skip

    def _rail_paths_enumerated(self, u, v, r) -> PathSet:
        """:meth:`rail_paths` of the requests ``(u, v, r)`` by selecting among every path of
        each server pair (any routing method or override)."""
        g = self.gpus_per_server
        uniq = np.arange(u.size)
        base, comm = self.pair_routes(u, v)  # server-pair routes (cached)
        lr = self._link_rails()
        cp, pp, pl = base.commodity_ptr, base.path_ptr, base.path_links
        first = np.where(pp[1:] > pp[:-1], lr[pl[np.minimum(pp[:-1], pl.size - 1)]], -1)
        last = np.where(pp[1:] > pp[:-1], lr[pl[np.maximum(pp[1:] - 1, 0)]], -1)
        # the paths of every request, request-major
        cnt = cp[comm + 1] - cp[comm]
        req = np.repeat(np.arange(uniq.size), cnt)
        path = ranges(cp[comm], cp[comm + 1])
        i, j = np.where(r >= 0, r // g, -1)[req], np.where(r >= 0, r % g, -1)[req]
        free = r[req] == -1
        same = r[req] == SAME_RAIL
        direct = (
            free | ((first[path] == i) & (last[path] == j)) | (same & (first[path] == last[path]))
        )
        has_direct = np.bincount(req, weights=direct, minlength=uniq.size) > 0
        hop = ~has_direct[req] & (first[path] == i) & (last[path] == i)
        sel = direct | hop
        has_sel = np.bincount(req, weights=sel, minlength=uniq.size) > 0
        sel |= ~has_sel[req]  # a pair no rail path serves (not a rail fabric path): all paths
        hop &= sel
        req, path, hop = req[sel], path[sel], hop[sel]
        # destination GPU (v, i)'s egress link, appended to the hop paths
        extra = self.intra_link(v[req] * g + np.maximum(r[req] // g, 0))
        lens = pp[path + 1] - pp[path] + hop
        path_ptr = np.zeros(path.size + 1, np.int64)
        np.cumsum(lens, out=path_ptr[1:])
        links = np.empty(int(path_ptr[-1]), np.int64)
        body = ranges(path_ptr[:-1], path_ptr[:-1] + (pp[path + 1] - pp[path]))
        links[body] = pl[ranges(pp[path], pp[path + 1])]
        links[path_ptr[1:][hop] - 1] = extra[hop]
        w = base.weight[path]
        # same-rail families: every rail's paths renormalised, then 1/g each (group by rail)
        grp = np.where(same[sel], req * (g + 1) + np.maximum(first[path], 0), req * (g + 1) + g)
        gu, ginv = np.unique(grp, return_inverse=True)
        gtot = np.bincount(ginv, weights=w, minlength=gu.size)
        w = w / gtot[ginv]
        nrail = np.bincount(gu // (g + 1), minlength=uniq.size)  # groups per request
        w = w / nrail[req]
        tot = np.bincount(req, weights=w, minlength=uniq.size)
        commodity_ptr = np.zeros(uniq.size + 1, np.int64)
        np.cumsum(np.bincount(req, minlength=uniq.size), out=commodity_ptr[1:])
        return PathSet(u, v, commodity_ptr, path_ptr, links, w / tot[req])


SAME_RAIL = -2
"""``rails`` code of a merged family of one flow per rail, GPU ``i`` to GPU ``i``
(:meth:`Network.rail_paths`)."""


class FlowBuilder:
    """Accumulate flows (on server-pair routes or on single links) and their dependencies.

    Every ``add_*`` call returns the ids of the new flows. Dependencies are given per flow as a
    CSR pair ``(after_ptr, after)`` of flow ids, or as one id list shared by all the new flows,
    or later with :meth:`add_deps`; they may name flows added later and must be acyclic (checked
    by :meth:`build`). :meth:`build` returns the :class:`~topoopt.flowsim.FlowSet`.

    Examples
    --------
    >>> from topoopt.fabrics import ideal
    >>> net = Network(ideal(2, port_bandwidth=100.0, latency=0.0))
    >>> fb = FlowBuilder(net)
    >>> dev = fb.new_devices(1)
    >>> a = fb.add_links(fb.device_link(dev), [2.0])           # 2 s of compute
    >>> b = fb.add_ranks([0], [1], [300.0], after=a)            # then 300 B from server 0 to 1
    >>> from topoopt.flowsim import simulate
    >>> simulate(fb.build()).finish.tolist()
    [2.0, 5.0]
    """

    def __init__(self, network: Network):
        self.net = network
        self.n = 0
        self.n_devices = 0
        self._link: list[np.ndarray] = []  # link id, or -1 for a server-pair flow
        self._src: list[np.ndarray] = []  # server pair (only for link == -1)
        self._dst: list[np.ndarray] = []
        self._rail: list[np.ndarray] = []  # rails i * g + j of a rank flow on rails, else -1
        self._size: list[np.ndarray] = []
        self._owner: list[np.ndarray] = []  # dependency edges: owner waits for dep
        self._deps: list[np.ndarray] = []
        self._n_deps = 0

    @property
    def n_deps(self) -> int:
        """Dependency edges added so far."""
        return self._n_deps

    def _check_size(self, flows: int, deps: int) -> None:
        # the memory budget (traffic.limits), checked before the arrays of the new flows exist
        n, d = self.n + flows, self._n_deps + deps
        check_memory(
            "plan",
            FLOW_BYTES * float(n) + DEP_BYTES * float(d),
            f"{n:,} flows and {d:,} dependencies in one simulation",
        )

    # ------------------------------------------------------------------ devices
    def new_devices(self, k: int) -> np.ndarray:
        """Reserve ``k`` private device links; returns their device indices."""
        out = np.arange(self.n_devices, self.n_devices + k, dtype=np.int64)
        self.n_devices += k
        return out

    def device_link(self, devices) -> np.ndarray:
        """Link id of each device."""
        return self.net.first_device_link + np.asarray(devices, np.int64)

    # ------------------------------------------------------------------ adding
    def _push(self, link, src, dst, size, after_ptr, after, rail=-1) -> np.ndarray:
        size = np.asarray(size, np.float64).reshape(-1)
        k = size.shape[0]
        link = np.broadcast_to(np.asarray(link, np.int64), (k,))
        if after_ptr is None:
            shared = np.zeros(0, np.int64) if after is None else np.asarray(after, np.int64)
            shared = shared.reshape(-1)
            lens = np.full(k, shared.shape[0], np.int64)
            deps = np.tile(shared, k)
        else:
            after_ptr = np.asarray(after_ptr, np.int64)
            lens = np.diff(after_ptr)
            deps = np.asarray(after, np.int64).reshape(-1)[after_ptr[0] : after_ptr[-1]]
        self._check_size(k, deps.shape[0])
        ids = np.arange(self.n, self.n + k, dtype=np.int64)
        self._link.append(np.array(link))
        self._src.append(np.broadcast_to(np.asarray(src, np.int64), (k,)).copy())
        self._dst.append(np.broadcast_to(np.asarray(dst, np.int64), (k,)).copy())
        self._rail.append(np.broadcast_to(np.asarray(rail, np.int64), (k,)).copy())
        self._size.append(size)
        self._owner.append(np.repeat(ids, lens))
        self._deps.append(deps)
        self.n += k
        self._n_deps += deps.shape[0]
        return ids

    def add_deps(self, flows, after) -> None:
        """Make each ``flows[i]`` wait for ``after[i]`` too (ids of flows added or to be added;
        checked when the FlowSet is built)."""
        f = np.asarray(flows, np.int64).ravel()
        a = np.asarray(after, np.int64).ravel()
        if f.shape != a.shape:
            raise InputError("after", a.shape, f"one dependency per flow, shape {f.shape}")
        self._check_size(0, a.shape[0])
        self._owner.append(f)
        self._deps.append(a)
        self._n_deps += a.shape[0]

    def add_links(self, links, size, *, after=None, after_ptr=None) -> np.ndarray:
        """Flows on single links (intra, null or device links), ``size`` bytes each."""
        size = np.asarray(size, np.float64).reshape(-1)
        links = np.broadcast_to(np.asarray(links, np.int64), size.shape)
        return self._push(links, -1, -1, size, after_ptr, after)

    def add_barrier(self, after) -> int:
        """One zero-byte flow on the null link that finishes when all of ``after`` have."""
        return int(self.add_links(self.net.null_link, [0.0], after=after)[0])

    def add_ranks(
        self,
        src_rank,
        dst_rank,
        size,
        *,
        after=None,
        after_ptr=None,
        instantaneous=False,
        same_rail=None,
    ) -> np.ndarray:
        """Transfers between GPU ranks: on the source GPU's intra link inside a server, on the
        fabric route between their servers otherwise; on the null link with zero bytes when
        ``instantaneous``. ``same_rail`` (bool per flow, with rail routing): the flow stands for
        one flow per rail from GPU ``i`` to GPU ``i`` of the two servers, merged
        (:data:`SAME_RAIL`)."""  # fmt: skip
        s = np.asarray(src_rank, np.int64).reshape(-1)
        d = np.asarray(dst_rank, np.int64).reshape(-1)
        size = np.broadcast_to(np.asarray(size, np.float64), s.shape).copy()
        if instantaneous:
            return self._push(
                np.full(s.shape, self.net.null_link), -1, -1, np.zeros(s.shape), after_ptr, after
            )
        ss, ds = self.net.server_of(s), self.net.server_of(d)
        intra = ss == ds
        link = np.where(intra, self.net.intra_link(s), -1)
        rail = -1
        if self.net.rail_routing:  # GPU i leaves on rail i (Network's module docstring)
            g, slots = self.net.gpus_per_server, self.net.n_gpu_slots
            gpus = (s < slots) & (d < slots) & ~intra
            rail = np.where(gpus, (s % g) * g + d % g, -1)
            if same_rail is not None:
                sr = np.broadcast_to(np.asarray(same_rail, bool), s.shape)
                rail = np.where(gpus & sr, SAME_RAIL, rail)
        return self._push(
            link, np.where(intra, -1, ss), np.where(intra, -1, ds), size, after_ptr, after, rail
        )

    # ------------------------------------------------------------------ output
    def arrays(self) -> dict[str, np.ndarray]:
        """The accumulated per-flow arrays (``link``, ``src``, ``dst``, ``size``) and deps CSR."""

        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)

        owner, deps = cat(self._owner, np.int64), cat(self._deps, np.int64)
        if deps.size and (deps.min() < 0 or deps.max() >= self.n):
            bad = int(deps.min()) if deps.min() < 0 else int(deps.max())
            raise InputError("after", bad, f"ids of flows of this builder (0..{self.n - 1})")
        if owner.size and (owner.min() < 0 or owner.max() >= self.n):
            bad = int(owner.min()) if owner.min() < 0 else int(owner.max())
            raise InputError("flows", bad, f"ids of flows of this builder (0..{self.n - 1})")
        ptr, order = csr_by_key(owner, self.n)  # a stable counting sort
        return {
            "link": cat(self._link, np.int64),
            "src": cat(self._src, np.int64),
            "dst": cat(self._dst, np.int64),
            "rail": cat(self._rail, np.int64),
            "size": cat(self._size, np.float64),
            "dep_ptr": ptr,
            "deps": deps[order],
        }

    def build(self, start: float = 0.0) -> FlowSet:
        """One FlowSet with every flow added so far (all released at ``start`` at the earliest).

        Server-pair flows take every weighted path of their pair's route; link flows have the one
        single-link path.
        """
        return self._flowset(self.arrays(), start)

    def build_classes(
        self, start: float = 0.0, *, reduced: bool = False, expansion: bool = False
    ) -> tuple[FlowSet, np.ndarray]:
        """Like :meth:`build`, with identical flows merged into one flow with multiplicity.

        Returns ``(flows, class_of)``: the flow with builder id ``i`` is simulated as flow
        ``class_of[i]`` of ``flows`` (turn results back into per-flow ones with
        :func:`topoopt.flowsim.simulator.expand_classes`). Identical: same route (same link, or
        same server pair), same bytes, same dependency classes (module docstring). ``reduced``:
        the flows will be simulated through the symmetry quotient (the sub-flow memory check,
        :func:`~topoopt.flowsim.subflow_guard.check_subflows`, counts them as such).
        ``expansion``: the caller will expand the result per builder flow with every path's
        times (:func:`~topoopt.flowsim.simulator.expand_classes`); that expansion is checked
        (:func:`~topoopt.flowsim.subflow_guard.check_expansion`) before the pairs are routed,
        from their path counts (:meth:`Network.pair_path_counts`) where they are known so.

        Examples
        --------
        Four GPUs per server; all 16 flows from server 0's GPUs to server 1's are one class:

        >>> from topoopt.fabrics import ideal
        >>> net = Network(ideal(2, port_bandwidth=100.0, latency=0.0), gpus_per_server=4)
        >>> fb = FlowBuilder(net)
        >>> src, dst = [x.ravel() for x in np.meshgrid(range(4), range(4, 8), indexing="ij")]
        >>> ids = fb.add_ranks(src, dst, 25.0)
        >>> fs, class_of = fb.build_classes()
        >>> fs.n_flows, fs.multiplicity.tolist(), class_of.tolist() == [0] * 16
        (1, [16], True)
        """
        a = self.arrays()
        net = self.net
        route = a["link"].copy()
        pair = np.flatnonzero(route < 0)
        ps, comm = None, np.full(route.shape[0], -1, np.int64)
        if expansion and pair.size:  # before routing: the pairs' paths may be most of the work
            cnt = net.pair_path_counts(a["src"][pair], a["dst"][pair], a["rail"][pair])
            if cnt is not None:
                n_exp = route.shape[0] - pair.size + int(cnt.sum(dtype=np.float64))
                check_expansion(route.shape[0], 0, n_exp)
                del cnt
        if pair.size:
            ps, comm[pair] = net.pair_routes(a["src"][pair], a["dst"][pair], a["rail"][pair])
            route[pair] = net.first_device_link + self.n_devices + comm[pair]
        class_of, n_c, rep, dep_ptr, deps = merged_classes(
            route, a["size"], start, a["dep_ptr"], a["deps"]
        )
        merged = {k: a[k][rep] for k in ("link", "src", "dst", "rail", "size")}
        merged.update(dep_ptr=dep_ptr, deps=deps)
        mult = np.bincount(class_of, minlength=n_c)
        return self._flowset(merged, start, mult, (ps, comm[rep]), reduced), class_of

    def build_bundles(self, start: float = 0.0, *, listed: bool = False):
        """Like :meth:`build_classes`, with each merged flow's paths as *bundles*
        (:class:`~topoopt.flowsim.bundles.BundleSet`: a segment's fixed links and its
        switch pair's route, never expanded path by path: :meth:`Network._rail_segments` on
        a rail fabric, :meth:`Network._server_segments` elsewhere), or ``None`` where the routes are
        not such segments (another method than ECMP, a path cap, a rail request
        without a rail path, a server with several links or links to several switches off
        a rail fabric). Returns ``(bundles, class_of)``. The switch pairs' routes are link
        counts (:func:`~topoopt.fabrics.routing.route_link_counts`, the bundles'
        ``route_counts``), or with ``listed`` their paths one by one. With a routing override
        (a design's routing, off rail routing) the server pairs' own listed paths are the
        routes, one per path (:func:`~topoopt.flowsim.bundles.listed_bundles`), and ``None``
        where those bundles are over the memory budget
        (:func:`~topoopt.flowsim.subflow_guard.check_bundles`): with many paths a flow the
        sub-flow model costs less, and its own check decides.

        Examples
        --------
        >>> from topoopt.fabrics import rail_optimized
        >>> net = Network(rail_optimized(16, 4, radix=8), gpus_per_server=4)
        >>> fb = FlowBuilder(net)
        >>> ids = fb.add_ranks([0, 1], [12, 13], 100.0)  # GPU 0 -> 0 and 1 -> 1, servers 0 -> 3
        >>> bs, class_of = fb.build_bundles()
        >>> bs.n_flows, bs.n_bundles, bs.count.tolist(), class_of.tolist()
        (2, 2, [1, 1], [0, 1])
        """
        from topoopt.flowsim.bundles import BundleSet, listed_bundles

        net = self.net
        if net.routing is not None and not net.rail_routing:  # a design's listed routes
            a = self.arrays()
            pair = np.flatnonzero(a["link"] < 0)
            ps, comm = net.pair_routes(a["src"][pair], a["dst"][pair]) if pair.size else (
                None, np.zeros(0, np.int64))  # fmt: skip
            n_dev = self.n_devices
            try:
                return listed_bundles(a, ps, comm, net.capacity(n_dev), net.latency(n_dev), start)
            except InputError:  # over the bundle budget: the sub-flow model's own check decides
                return None
        if not (net.routing is None and net.method == "ecmp" and net.max_paths is None):
            return None
        a = self.arrays()
        pair = np.flatnonzero(a["link"] < 0)
        g, n = net.gpus_per_server, net.fabric.n_nodes
        src, dst, rails = a["src"][pair], a["dst"][pair], a["rail"][pair]
        if net.rail_routing:  # the request keys of rail_paths
            M = g * g + 2
            if np.any(rails == -1):
                return None
            uniq, inv = _unique_inverse((src * n + dst) * M + (rails + 2))
        else:  # pair_routes'
            M = 1
            uniq, inv = _unique_inverse(src * n + dst)
        inv = inv.reshape(-1).astype(np.int64)
        nreq = uniq.size
        if nreq:
            uv, r = uniq // M, uniq % M - 2
            if net.rail_routing:
                seg = net._rail_segments(uv // n, uv % n, r, counts=not listed)
            else:
                seg = net._server_segments(uv // n, uv % n, counts=not listed)
            if seg is None or not seg["fast"].all():
                return None
        route = a["link"].copy()
        route[pair] = net.first_device_link + self.n_devices + inv
        n_f = route.shape[0]
        class_of = identical_classes(
            route, a["size"], np.full(n_f, float(start)), a["dep_ptr"], a["deps"]
        )
        n_c = int(class_of.max()) + 1 if n_f else 0
        rep = class_representatives(class_of, n_c)
        dep_ptr, deps = class_dependencies(class_of, rep, a["dep_ptr"], a["deps"])
        link = a["link"][rep]
        comm = np.full(n_f, -1, np.int64)
        comm[pair] = inv
        req = comm[rep]  # the rail request of each merged pair flow (-1: a link flow)
        if nreq:
            base = seg["base"]
            sreq, hop = seg["req"], seg["hop"]
            if listed:
                cp = base.commodity_ptr
                routes_kw = {"route_ptr": cp, "path_ptr": base.path_ptr,
                             "path_links": base.path_links}  # fmt: skip
            else:
                from topoopt.flowsim.bundles import _paths_ptr

                cp = _paths_ptr(base)
                routes_kw = {"route_counts": base}
            sw = seg["sw"]
            seg_ptr = np.zeros(nreq + 1, np.int64)
            np.cumsum(np.bincount(sreq, minlength=nreq), out=seg_ptr[1:])
            cnt_seg = cp[sw + 1] - cp[sw]
            nseg = np.diff(seg_ptr)
            extra = net.intra_link(
                (uniq // M % n)[sreq] * g + seg["rail"]
            )  # destination GPU's egress on a hop
        else:
            seg_ptr = np.zeros(1, np.int64)
        # bundles: one per link flow, one per segment of a pair flow's request
        is_pair = req >= 0
        nb_f = np.where(is_pair, np.diff(seg_ptr)[np.maximum(req, 0)] if nreq else 0, 1)
        flow_ptr = np.zeros(n_c + 1, np.int64)
        np.cumsum(nb_f, out=flow_ptr[1:])
        nb = int(flow_ptr[-1])
        if nreq:  # the switch pairs' routes: link-count entries, or listed path hops
            base_r = seg["base"]
            n_route = (base_r[1] if isinstance(base_r, tuple) else base_r.path_links).size
        check_bundles(self.n, nb, int(n_route) if nreq else 0)
        b_flow = np.repeat(np.arange(n_c, dtype=np.int64), nb_f)
        b_seg = np.full(nb, -1, np.int64)
        pb = is_pair[b_flow]
        if nreq:
            b_seg[pb] = ranges(seg_ptr[req[is_pair]], seg_ptr[req[is_pair] + 1])
        nfix = np.where(pb, 2, 1)
        if nreq:
            nfix[pb] += hop[b_seg[pb]]
        fix_ptr = np.zeros(nb + 1, np.int64)
        np.cumsum(nfix, out=fix_ptr[1:])
        fix = np.empty(int(fix_ptr[-1]), np.int64)
        fix[fix_ptr[:-1][~pb]] = link[b_flow[~pb]]
        route_of = np.full(nb, -1, np.int64)
        count = np.ones(nb, np.int64)
        weight = np.ones(nb, np.float64)
        if nreq:
            sb = b_seg[pb]
            fix[fix_ptr[:-1][pb]] = seg["first"][sb]
            fix[fix_ptr[:-1][pb] + 1] = seg["last"][sb]
            hb = np.flatnonzero(pb)[hop[sb]]
            fix[fix_ptr[hb] + 2] = extra[b_seg[hb]]
            route_of[pb] = sw[sb]
            count[pb] = cnt_seg[sb]
            weight[pb] = 1.0 / (cnt_seg[sb] * nseg[sreq[sb]])
        else:
            routes_kw = {"route_ptr": np.zeros(1, np.int64), "path_ptr": np.zeros(1, np.int64),
                         "path_links": np.zeros(0, np.int64)}  # fmt: skip
        bs = BundleSet(
            capacity=net.capacity(self.n_devices),
            latency=net.latency(self.n_devices),
            size=a["size"][rep],
            start=np.full(n_c, float(start)),
            flow_ptr=flow_ptr,
            fix_ptr=fix_ptr,
            fix_links=fix,
            route=route_of,
            count=count,
            weight=weight,
            dep_ptr=dep_ptr,
            deps=deps,
            multiplicity=np.bincount(class_of, minlength=n_c),
            **routes_kw,
        )
        return bs, class_of

    def _flowset(
        self, a: dict, start: float, multiplicity=None, routes=None, reduced: bool = False
    ) -> FlowSet:
        """The FlowSet of the per-flow arrays ``a``; ``routes``: ``(PathSet, commodity of each
        flow)`` when the caller has them (else looked up)."""
        net = self.net
        n_f = a["size"].shape[0]
        link = np.ascontiguousarray(a["link"], np.int64)
        pair_idx = np.flatnonzero(link < 0)
        if routes is not None:
            ps, comm = routes
        else:
            ps, comm = None, np.full(n_f, -1, np.int64)
            if pair_idx.size:
                ps, comm[pair_idx] = net.pair_routes(
                    a["src"][pair_idx], a["dst"][pair_idx], a["rail"][pair_idx]
                )
        if pair_idx.size:
            cp, r_ptr, r_links, r_w = ps.commodity_ptr, ps.path_ptr, ps.path_links, ps.weight
        else:
            cp, r_ptr = np.zeros(1, np.int64), np.zeros(1, np.int64)
            r_links, r_w = np.zeros(0, np.int64), np.zeros(0)
        n_pair_paths = int((cp[comm[pair_idx] + 1] - cp[comm[pair_idx]]).sum())
        # before the sub-flow arrays exist
        check_subflows(self.n, n_f - pair_idx.size + n_pair_paths, reduced=reduced)
        flow_ptr, path_ptr, links, weight = expand_routes(
            link,
            comm,
            np.ascontiguousarray(cp, np.int64),
            np.ascontiguousarray(r_ptr, np.int64),
            np.ascontiguousarray(r_links, np.int64),
            np.ascontiguousarray(r_w, np.float64),
        )
        return FlowSet(
            capacity=net.capacity(self.n_devices),
            latency=net.latency(self.n_devices),
            size=a["size"],
            start=np.full(n_f, float(start)),
            flow_ptr=flow_ptr,
            path_ptr=path_ptr,
            path_links=links,
            weight=weight,
            dep_ptr=a["dep_ptr"],
            deps=a["deps"],
            multiplicity=multiplicity,
        )


def simulate_builder(
    builder: FlowBuilder,
    *,
    aggregate: bool = True,
    record_series: bool = True,
    start=0.0,
    max_refills: int | None = None,
    reduction: bool = False,
    class_labels: dict | None = None,
    path_times: bool = True,
) -> SimResult:
    """Simulate every flow of a :class:`FlowBuilder`, per builder flow id.

    With ``aggregate``, identical flows are simulated as one class with a multiplicity
    (:meth:`FlowBuilder.build_classes`) and the result is expanded back to every flow
    (:func:`topoopt.flowsim.simulator.expand_classes`): the same result as without, up to
    rounding. ``max_refills``: the work limit of :func:`topoopt.flowsim.simulator.simulate`.
    With ``reduction``, the (aggregated) flows are simulated through their symmetry quotient
    (:func:`topoopt.flowsim.symmetry.simulate_reduced`; exact, ``SimResult.reduction`` says
    what it found). Where the routes are ECMP by switch pairs (rail routing, or servers with
    one link to one switch: :meth:`FlowBuilder.build_bundles`) the quotient is built from the
    routes without expanding every path (:mod:`topoopt.flowsim.bundles`; ``reduction["method"]``
    is ``"route bundles"``), and the ``path_*`` arrays have one entry per bundle of equal
    paths instead of one per path.

    ``class_labels`` (with ``reduction`` and ``aggregate``): a dict the caller keeps across the
    simulations of builders of one structure (the phases of one iteration: the same flows in
    the same order, some made instantaneous). The first reduced simulation stores its classes
    there (``"flow"``: the flow class of every builder flow; ``"link"``: every link's class);
    later ones start their refinement from them (:func:`topoopt.flowsim.symmetry.
    equitable_partition`'s ``start_flow``, ``start_link``) when the builder has as many flows
    and links, which saves most refinement rounds. Exact whatever the labels: they only split
    the starting colours, and the partition found is checked equitable.

    ``path_times=False`` (with ``aggregate``): per-flow times and link bytes only, the
    ``path_*`` arrays None; where every sub-flow is over the memory budget the reduced run
    goes through the grouped quotient (:func:`simulate_builder_classes`, ``per_path``).

    Examples
    --------
    >>> from topoopt.fabrics import ideal
    >>> fb = FlowBuilder(Network(ideal(2, port_bandwidth=100.0, latency=0.0), gpus_per_server=2))
    >>> ids = fb.add_ranks([0, 1], [2, 3], 100.0)
    >>> sim = simulate_builder(fb)
    >>> sim.finish.tolist(), sim.simulated_flows
    ([2.0, 2.0], 1)
    """
    if not isinstance(aggregate, bool):
        raise InputError("aggregate", aggregate, "True or False")
    if not isinstance(reduction, bool):
        raise InputError("reduction", reduction, "True or False")
    if not isinstance(path_times, bool):
        raise InputError("path_times", path_times, "True or False")
    if not aggregate:
        run = simulate_reduced if reduction else simulate
        return run(builder.build(start), record_series=record_series, max_refills=max_refills)
    return expand_classes(
        *simulate_builder_classes(
            builder,
            record_series=record_series,
            start=start,
            max_refills=max_refills,
            reduction=reduction,
            class_labels=class_labels,
            per_path=path_times,
        ),
        paths=path_times,
    )


def simulate_builder_classes(
    builder: FlowBuilder,
    *,
    record_series: bool = True,
    start=0.0,
    max_refills: int | None = None,
    reduction: bool = False,
    class_labels: dict | None = None,
    expansion: bool = False,
    per_path: bool = True,
) -> tuple[SimResult, FlowSet, np.ndarray]:
    """:func:`simulate_builder` with ``aggregate``, before the expansion per builder flow:
    ``(result, flows, class_of)``, the result per flow of the merged ``flows``
    (:meth:`FlowBuilder.build_classes`); ``expand_classes(result, flows, class_of)`` is
    :func:`simulate_builder`'s. A caller that needs only the makespan, or that expands later,
    saves the per-builder-flow (and per-sub-flow) arrays. ``expansion``: the caller will expand
    with every path's times: :meth:`FlowBuilder.build_classes` checks that expansion before
    routing (not the route bundles, whose paths are expanded per bundle). ``per_path=False``
    (with ``reduction``, without ``expansion``): the caller reads no per-path times, so where
    every sub-flow is over the memory budget (:meth:`FlowBuilder.build_classes` refuses them)
    the flows go through the grouped quotient, each server pair's routes listed once
    (:func:`topoopt.flowsim.grouped_routes.simulate_grouped_classes`: exact, no per-path
    times; the refusal stands where it finds no symmetry). Where every sub-flow fits the
    result is the one without it.

    >>> from topoopt.fabrics import ideal
    >>> fb = FlowBuilder(Network(ideal(2, port_bandwidth=100.0, latency=0.0), gpus_per_server=2))
    >>> ids = fb.add_ranks([0, 1], [2, 3], 100.0)
    >>> sim, flows, class_of = simulate_builder_classes(fb)
    >>> sim.finish.tolist(), class_of.tolist()
    ([2.0], [0, 0])
    """
    if reduction:
        got = _simulate_bundled(builder, start, record_series, max_refills, class_labels)
        if got is not None:
            return got
    try:
        flows, class_of = builder.build_classes(start, reduced=reduction, expansion=expansion)
    except InputError as e:
        if not (e.field == "flows" and reduction and not expansion and not per_path):
            raise
        from topoopt.flowsim.grouped_routes import simulate_grouped_classes

        got = simulate_grouped_classes(
            builder, start, record_series=record_series, max_refills=max_refills
        )
        if got is None:  # no symmetry: the sub-flows' refusal stands
            raise
        return got
    if not reduction:
        sim = simulate(flows, record_series=record_series, max_refills=max_refills)
        return sim, flows, class_of
    start_flow = start_link = None
    lab_f = lab_l = None
    if class_labels is not None:
        lab_f, lab_l = class_labels.get("flow"), class_labels.get("link")
    if lab_f is not None and lab_f.shape[0] == class_of.shape[0]:
        start_flow = lab_f[class_representatives(class_of, flows.n_flows)]
    if lab_l is not None and lab_l.shape[0] == flows.n_links:
        start_link = lab_l
    # the routed sub-flows were checked as reduced (build_classes); the quotient is checked
    # once its size is known (where the symmetry is weak it is about as large as they are)
    red = reduce_flows(
        flows, start_flow=start_flow, start_link=start_link,
        check=lambda q: check_quotient(class_of.shape[0], flows.n_paths, q),
    )  # fmt: skip
    if class_labels is not None and lab_f is None and red.partition is not None:
        class_labels["flow"] = red.partition.flow[class_of].astype(np.int32)
        class_labels["link"] = red.partition.link
    sim = simulate_reduced(
        flows, record_series=record_series, max_refills=max_refills, reduction=red
    )
    return sim, flows, class_of


def _simulate_bundled(builder: FlowBuilder, start, record_series, max_refills, labels=None):
    """:func:`simulate_builder_classes` through the route-bundle quotient
    (:mod:`topoopt.flowsim.bundles`) where the builder's routes are bundles and the quotient
    is exact; ``None`` otherwise (the caller then builds every sub-flow). ``labels``: the
    ``class_labels`` dict of :func:`simulate_builder` (the first phase's classes seed the
    later phases' refinement). The result's ``path_*`` arrays have one entry per *bundle*
    (every path of a bundle has its times)."""
    from topoopt.flowsim.bundles import reduce_bundles, simulate_bundles

    got = builder.build_bundles(start)
    if got is None:
        return None
    bs, class_of = got
    start_flow = start_link = None
    lab_f = lab_l = None
    if labels is not None:
        lab_f, lab_l = labels.get("flow"), labels.get("link")
        if lab_f is not None and lab_f.shape[0] == class_of.shape[0]:
            start_flow = lab_f[class_representatives(class_of, bs.n_flows)]
        if lab_l is not None and lab_l.shape[0] == bs.n_links:
            start_link = lab_l
    red = reduce_bundles(bs, start_flow=start_flow, start_link=start_link)
    if red.flows is None:
        return None
    if labels is not None and lab_f is None:
        labels["flow"] = red.partition.flow[class_of].astype(np.int32)
        labels["link"] = red.partition.link
    sim = simulate_bundles(bs, red, record_series=record_series, max_refills=max_refills)
    return sim, bs, class_of
