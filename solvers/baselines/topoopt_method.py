"""The TopoOpt baseline (NSDI 2023): TopologyFinder, as the paper and as the released code do it.

Pipeline (``shared/reference/topoopt-method.md``), each step a public function:

1. :func:`degree_split` -- ``d_AR = round(d * T_AR / (T_AR + T_MP))`` made even and at least 2
   (the +-1 connectivity ring), ``d_MP = d - d_AR``. Variant ``topoopt-released``: ``d_AR = d``
   (even part), ``d_MP = 0``.
2. :func:`allreduce_rings` -- the heaviest ring groups of the heaviest group size get dedicated
   rings: candidate strides by :func:`solvers.baselines.strides.totient_perms` over the group
   positions,
   chosen by :func:`solvers.baselines.strides.select_permutations` (geometric rule); plus the +-1
   ring over
   all servers (which is the group's stride 1 when the group is all servers), in the numbering
   where those groups are cosets of ``Z_n`` (:func:`coset_order`), as the released code numbers
   them. Each stride ``p``
   is two directed rings (``+p`` and ``-p``), 2 ports per member. Every other group gets a
   *virtual ring* (its members in order, both directions) whose steps are forwarded over the
   AllReduce circuits; on a circulant the step is decomposed by :func:`coin_change` over
   ``{+-p}``.
3. :func:`mp_matchings` -- ``d_MP`` rounds of maximum-weight perfect matching (Edmonds'
   blossom, rustworkx; above 256 servers over each server's 32 heaviest partners) on the
   remaining symmetric MP demand; each matched pair gets a circuit and its demand is discounted
   ``T_ij <- T_ij * c / (c + 1)``, ``c`` the MP circuits now between
   ``i`` and ``j``.
4. :func:`sample_shortest_paths` -- MP routing: ``k`` shortest paths per pair (paper; drawn
   from the shortest-path DAG with a seed, duplicates merged, equal split) or one random shortest
   path (released code).
5. :func:`finish_design` -- recompute the objective with
   :func:`solvers.model.congestion.evaluate_routing` and the ideal-switch lower bound.

:func:`topoopt_design` chains them.

Reserved and pre-wired ports (our adaptation; the paper has no such option): TopologyFinder
needs the same degree at every server, so steps 1-3 run on ``d_free = min_i free_i`` ports
(``free_i = degree - reserved_i - pre-wired ports_i``,
:meth:`solvers.model.problem.DesignProblem.free_ports`); the pre-wired circuits are then added
(:func:`solvers.model.design.merge_prewired`) and every port still free is filled by
:func:`solvers.joint.local_search.fill_free_ports` (joining components first, then heaviest MP
and ring-step bytes first). With ``d_free < 2`` no ring fits on the free ports: the design is
the pre-wired circuits plus the filled ports and every ring group runs a virtual ring (members
in order) routed on shortest paths. A design that leaves two servers with traffic disconnected
is refused (:func:`require_connected`).
"""

from __future__ import annotations

import math
import time
from collections import deque

import networkx as nx
import numpy as np
import scipy.sparse as sp

from solvers.baselines.strides import select_permutations, totient_perms
from solvers.baselines.traffic_input import TopoOptTraffic, topoopt_traffic
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design, NodePaths
from solvers.model.ports import merge_prewired, with_port_options
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "VARIANTS",
    "degree_split",
    "coin_change",
    "ring_circuits",
    "coset_order",
    "allreduce_rings",
    "MATCHERS",
    "EXACT_MATCHING_SERVERS",
    "MATCHING_PARTNERS",
    "candidate_pairs",
    "tie_break_weights",
    "max_weight_matching",
    "mp_matchings",
    "sample_shortest_paths",
    "ideal_lower_bound",
    "finish_design",
    "topoopt_design",
    "require_connected",
]

VARIANTS = ("topoopt", "topoopt-released")
"""``topoopt``: the paper's TopologyFinder; ``topoopt-released``: the public artifact's."""


# --------------------------------------------------------------------------- 1. degree split
def degree_split(t_ar: float, t_mp: float, d: int, variant: str = "topoopt") -> tuple[int, int]:
    """Ports for AllReduce rings and for MP matchings.

    Paper (as the released code's proportional split, commented out in its last commit, does
    it): ``x = d * T_AR / (T_AR + T_MP)`` rounded half up, an odd result raised by one (rings
    are bidirectional), at least 2 so that the +-1 ring keeps the graph connected and at most
    the largest even number ``<= d``; with no MP traffic it is the largest even number ``<= d``.
    ``d_MP = d - d_AR``, except that ports are not given to matchings when there is no MP
    traffic (an odd ``d`` then leaves one idle). Released code: ``d_AR`` = largest even
    ``<= d``, ``d_MP = 0``.

    Examples
    --------
    >>> degree_split(3.0, 1.0, 8)
    (6, 2)
    >>> degree_split(0.0, 5.0, 8)
    (2, 6)
    >>> degree_split(1.0, 2.0, 8)  # 8/3 rounds to 3, odd: 4
    (4, 4)
    >>> degree_split(1.0, 1.0, 8, "topoopt-released")
    (8, 0)
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise InputError("degree", d, "an integer >= 2 (the +-1 ring needs 2 ports)")
    if variant not in VARIANTS:
        raise InputError("variant", variant, f"one of {', '.join(VARIANTS)}")
    if t_ar < 0 or t_mp < 0:
        raise InputError("traffic", (t_ar, t_mp), "bytes >= 0")
    d = int(d)
    top = d - d % 2
    if variant == "topoopt-released" or t_mp == 0:
        return top, 0
    raw = d * t_ar / (t_ar + t_mp) if t_ar + t_mp > 0 else 0.0
    r = int(np.floor(raw + 0.5))  # C's lround for x >= 0
    d_ar = max(2, min(top, r + r % 2))
    return d_ar, d - d_ar


# --------------------------------------------------------------------------- 2. rings
def coin_change(target: int, coins: list[int], n: int) -> list[int]:
    """Shortest signed decomposition of ``target`` (mod ``n``) into coins ``{+-p}``.

    Exact: BFS over ``Z_n`` from 0 (each coin, either sign, is one hop), then the path back.
    The coins are returned in the order walked (their sum is ``target`` mod ``n``).

    Raises
    ------
    InputError
        If ``target`` is not reachable (the coins and ``n`` share a factor that ``target``
        does not).

    Examples
    --------
    >>> coin_change(6, [1, 5], 12)
    [1, 5]
    >>> coin_change(11, [1, 5], 12)
    [-1]
    >>> coin_change(0, [1], 8)
    []
    """
    if n < 1 or not coins:
        raise InputError("coins", coins, "at least one coin and n >= 1")
    target %= n
    moves = sorted({int(c) % n for c in coins} | {(-int(c)) % n for c in coins} - {0})
    signed = {}
    for c in coins:
        signed.setdefault(int(c) % n, int(c))
        signed.setdefault((-int(c)) % n, -int(c))
    prev = np.full(n, -1, dtype=np.int64)
    move = np.zeros(n, dtype=np.int64)
    prev[0] = 0
    queue = deque([0])
    while queue and prev[target] < 0:
        x = queue.popleft()
        for m in moves:
            y = (x + m) % n
            if prev[y] < 0:
                prev[y], move[y] = x, m
                queue.append(y)
    if prev[target] < 0:
        raise InputError("target", target, f"a value reachable with coins {coins} mod {n}")
    out = []
    x = target
    while x != 0:
        out.append(signed[int(move[x])])
        x = int(prev[x])
    return out[::-1]


def ring_circuits(order: np.ndarray) -> np.ndarray:
    """Circuits ``[u, v, 1]`` of one bidirectional ring visiting ``order`` (a 2-ring: count 2).

    Examples
    --------
    >>> ring_circuits(np.array([0, 2, 1])).tolist()
    [[0, 2, 1], [2, 1, 1], [1, 0, 1]]
    >>> ring_circuits(np.array([3, 5])).tolist()
    [[3, 5, 2]]
    """
    order = np.asarray(order, np.int64)
    if order.size < 2:
        return np.zeros((0, 3), np.int64)
    if order.size == 2:
        return np.array([[order[0], order[1], 2]], np.int64)
    return np.stack([order, np.roll(order, -1), np.ones(order.size, np.int64)], axis=1)


def _positions_ring(members: np.ndarray, p: int) -> np.ndarray:
    """Members in the order ``i -> i + p`` over positions (a single cycle when gcd(p, g) = 1)."""
    g = members.size
    return members[(np.arange(g) * p) % g]


def coset_order(groups: tuple[np.ndarray, ...], g: int, n: int) -> np.ndarray:
    """The servers in the numbering where the ring groups of size ``g`` are cosets of ``Z_n``.

    The released code numbers the servers so that every group of ``g`` members is a coset
    ``{s, s + n/g, s + 2n/g, ...}`` (``shared/reference/topoopt-method.md``): position ``k`` of
    group ``s`` is server ``s + k n/g``, and its +-1 connectivity ring, which visits the servers
    in that numbering, steps from member ``k`` of one group to member ``k`` of the next (the
    same pipeline stage of the next replica, or the next stage of the same replica, whichever the
    groups are). A plan whose groups are blocks of consecutive servers (``order`` with ``dp``
    inside ``pp``) is that numbering relabelled; this function gives the order of the +-1 ring
    in our numbering, so that the ring is the method's whatever order the plan places the ranks
    in: position ``k`` of every group before position ``k + 1`` of any, groups by their smallest
    server (the plan's order), servers of no such group last in index order. Groups of size ``g``
    that share a server with an earlier one are skipped. When the groups are already cosets this
    is ``0, 1, ..., n - 1``.

    Examples
    --------
    >>> blocks = (np.array([0, 1, 2]), np.array([3, 4, 5]), np.array([6, 7]))
    >>> coset_order(blocks, 3, 9).tolist()  # member k of block 0, of block 1, then k + 1
    [0, 3, 1, 4, 2, 5, 6, 7, 8]
    >>> cosets = (np.array([0, 2, 4]), np.array([1, 3, 5]))
    >>> coset_order(cosets, 3, 6).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    seen = np.zeros(n, bool)
    kept = []
    for m in sorted((x for x in groups if x.size == g), key=lambda x: int(x.min())):
        if not seen[m].any():
            seen[m] = True
            kept.append(np.sort(m))
    if not kept:
        return np.arange(n, dtype=np.int64)
    grid = np.stack(kept, axis=1).ravel()  # row k: position k of every kept group
    return np.concatenate([grid, np.flatnonzero(~seen)]).astype(np.int64)


def allreduce_rings(traffic: TopoOptTraffic, d_ar: int) -> tuple[np.ndarray, list[dict], dict]:
    """AllReduce circuits and rings (see the module docstring, step 2).

    Parameters
    ----------
    traffic : TopoOptTraffic
    d_ar : int
        Even number of ports per server for AllReduce rings (including the +-1 ring).

    Returns
    -------
    circuits : numpy.ndarray
        ``[u, v, count]`` rows.
    rings : list of dict
        One per group: ``{"group", "members", "strides", "virtual"}``; ``strides`` are the
        position strides of its dedicated rings (empty for a virtual ring).
    info : dict
        ``{"strides": ..., "group_size": ..., "circulant": bool}`` (``circulant``: the
        AllReduce circuits are ``C_n(strides)`` over servers ``0..n-1``).
    """
    n = traffic.n
    k_ar = d_ar // 2
    parts: list[np.ndarray] = []
    rings: list[dict] = []
    weight = traffic.ar_weight()
    order = np.argsort(-weight, kind="stable")
    dedicated: dict[int, list[int]] = {}
    info: dict = {"strides": [], "group_size": None, "circulant": True}
    free = np.full(n, k_ar, dtype=np.int64)  # AllReduce strides still free at each server
    if order.size:
        top = traffic.groups[int(order[0])]
        g = top.size
        info["group_size"] = int(g)
        all_servers = g == n
        if not all_servers:  # the +-1 ring, in the numbering where the groups are cosets
            ring = coset_order(traffic.groups, g, n)
            parts.append(ring_circuits(ring))
            free -= 1
            info["strides"] = [1]
            # coin change over +-1 in index space walks this ring only in index order
            info["circulant"] = bool(np.array_equal(ring, np.arange(n)))
        k_group = int(min(k_ar - (0 if all_servers else 1), totient_perms(g).size))
        if k_group > 0:
            strides = select_permutations(totient_perms(g), k_group)
            for j in order.tolist():
                members = traffic.groups[j]
                if members.size != g or np.any(free[members] < k_group):
                    continue
                free[members] -= k_group
                dedicated[j] = strides
                for p in strides:
                    parts.append(ring_circuits(_positions_ring(members, p)))
            if all_servers:
                info["strides"] = [int(p) for p in strides]
            else:
                info["circulant"] = False
    else:
        parts.append(ring_circuits(np.arange(n)))
        info["strides"] = [1]
    for j in range(len(traffic.groups)):
        rings.append(
            {
                "group": j,
                "members": traffic.groups[j],
                "strides": dedicated.get(j, []),
                "virtual": j not in dedicated,
            }
        )
    circuits = np.vstack(parts) if parts else np.zeros((0, 3), np.int64)
    return Circuits(circuits, n).rows, rings, info


# --------------------------------------------------------------------------- 3. matchings
MATCHERS = ("rustworkx", "networkx")
"""Blossom implementations of :func:`max_weight_matching`: ``rustworkx`` (compiled, default) and
``networkx`` (pure Python; the reference the tests compare against)."""

EXACT_MATCHING_SERVERS = 256
"""Up to this many servers the matchings run on the complete demand graph (exact); above, on
each server's :data:`MATCHING_PARTNERS` heaviest partners (see :func:`candidate_pairs`)."""

MATCHING_PARTNERS = 32
"""Candidate partners per server when the demand graph is sparsified."""


def candidate_pairs(w: np.ndarray, partners: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``i < j`` with positive weight the blossom sees.

    ``partners=None``: every positive pair (the complete demand graph). Otherwise the union over
    servers of each server's ``partners`` heaviest positive pairs (ties to the nearest partner
    after it in cyclic index order).

    Examples
    --------
    >>> w = np.array([[0, 3, 1, 0], [3, 0, 2, 5], [1, 2, 0, 4], [0, 5, 4, 0]], float)
    >>> [x.tolist() for x in candidate_pairs(w, None)]
    [[0, 0, 1, 1, 2], [1, 2, 2, 3, 3]]
    >>> [x.tolist() for x in candidate_pairs(w, 1)]
    [[0, 1, 2], [1, 3, 3]]
    """
    n = w.shape[0]
    if partners is None or partners >= n - 1:
        iu, ju = np.nonzero(np.triu(w, 1) > 0)
        return iu.astype(np.int64), ju.astype(np.int64)
    k = int(partners)
    # ties go to the nearest partners in cyclic index order (i+1, i+2, ...): on uniform demand the
    # candidates form a circulant band instead of all pointing at the lowest-numbered servers
    shift = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
    top = np.lexsort((shift, -w), axis=1)[:, :k]
    r = np.repeat(np.arange(n, dtype=np.int64), k)
    c = top.ravel().astype(np.int64)
    ok = w[r, c] > 0
    r, c = r[ok], c[ok]
    key = np.unique(np.minimum(r, c) * n + np.maximum(r, c))
    return key // n, key % n


def tie_break_weights(weight: np.ndarray, hops: np.ndarray, n: int) -> np.ndarray:
    """Integer blossom weights: the demand first, two tie-breaks after it (lexicographic).

    ``key = q * M + s`` with ``q = rint(weight * 2**b / max(weight))`` (the demand, ``b <= 40``
    bits so that the keys fit in 62 bits), ``s = (weight > 0) * (h H + 1) + min(hops, H)``
    (``h = n // 2`` pairs in a matching, ``H = n`` caps the hop count of the pair in the topology
    built so far, unreachable pairs included) and ``M = h (h H + 1) + h H + 1``, more than any
    matching's sum of ``s``. A matching of maximum key has maximum (quantised) demand, then the
    most pairs with demand, then the pairs farthest apart in the topology so far (so a matching
    joins pairs the rings and earlier matchings left far apart rather than stacking circuits on
    neighbours). Every such matching is a maximum-weight matching of the paper's problem: the
    tie-breaks only choose among its optima (the paper and the released code leave ties to the
    blossom implementation).

    Examples
    --------
    >>> key = tie_break_weights(np.array([2.0, 2.0, 0.0, 0.0]), np.array([1, 3, 2, np.inf]), 4)
    >>> m = 2 * (2 * 4 + 1) + 2 * 4 + 1  # 27
    >>> (key // m).tolist() == [2**40, 2**40, 0, 0], (key % m).tolist()
    (True, [10, 12, 2, 4])
    """
    weight = np.asarray(weight, np.float64)
    half, cap = int(n) // 2, int(n)
    m = half * (half * cap + 1) + half * cap + 1
    bits = min(40, 62 - int(np.ceil(np.log2(m + 1))))
    top = float(weight.max(initial=0.0))
    q = (
        np.rint(weight * (2.0**bits / top)).astype(np.int64)
        if top > 0
        else np.zeros(weight.size, np.int64)
    )
    far = np.minimum(np.nan_to_num(np.asarray(hops, np.float64), posinf=cap), cap)
    s = (weight > 0).astype(np.int64) * (half * cap + 1) + far.astype(np.int64)
    return q * m + s


def max_weight_matching(
    n: int,
    iu: np.ndarray,
    ju: np.ndarray,
    weight: np.ndarray,
    matcher: str = "rustworkx",
    perfect: bool = False,
) -> list[tuple[int, int]]:
    """A maximum-weight matching of the graph ``(iu, ju, weight)``.

    Integer weights are used exactly. ``rustworkx`` takes integer weights only: float weights are
    scaled to ``2**40 / max(weight)`` and rounded, so matchings whose weights differ by less
    than ``max(weight) * 2**-40`` tie. ``perfect=True``: the heaviest among the matchings of
    maximum cardinality (a maximum-weight perfect matching when the graph has one).

    Examples
    --------
    >>> iu, ju = np.array([0, 1, 2]), np.array([1, 2, 3])
    >>> sorted(max_weight_matching(4, iu, ju, np.array([1.0, 3.0, 1.0])))
    [(1, 2)]
    >>> sorted(max_weight_matching(4, iu, ju, np.array([1.0, 3.0, 1.0]), perfect=True))
    [(0, 1), (2, 3)]
    >>> sorted(max_weight_matching(4, iu, ju, np.array([2.0, 3.0, 2.0]), matcher="networkx"))
    [(0, 1), (2, 3)]
    """
    if matcher not in MATCHERS:
        raise InputError("matcher", matcher, f"one of {', '.join(MATCHERS)}")
    if iu.size == 0:
        return []
    weight = np.asarray(weight)
    exact = np.issubdtype(weight.dtype, np.integer)
    if matcher == "networkx":
        wl = weight.tolist() if exact else np.asarray(weight, float).tolist()
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_weighted_edges_from(zip(iu.tolist(), ju.tolist(), wl, strict=True))
        pairs = nx.max_weight_matching(graph, maxcardinality=perfect)
    else:
        import rustworkx as rx

        if exact:
            wi = weight.astype(np.int64)
        else:
            top = float(np.max(weight))
            scale = 2.0**40 / top if top > 0 else 0.0
            wi = np.rint(np.asarray(weight, float) * scale).astype(np.int64)
        graph = rx.PyGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(list(zip(iu.tolist(), ju.tolist(), wi.tolist(), strict=True)))
        pairs = rx.max_weight_matching(graph, max_cardinality=perfect, weight_fn=int)
    return sorted((min(a, b), max(a, b)) for a, b in pairs)


def _complete(
    pairs: list[tuple[int, int]], w: np.ndarray, hops: np.ndarray
) -> list[tuple[int, int]]:
    """Complete a matching to a perfect one (only the sparsified blossom leaves servers loose):
    loose servers by heaviest remaining demand first, then pairs farthest apart in the topology
    so far, then index order."""
    n = w.shape[0]
    matched = np.zeros(n, bool)
    for a, b in pairs:
        matched[a] = matched[b] = True
    loose = np.flatnonzero(~matched)
    out = list(pairs)
    if loose.size:
        ia, ib = np.triu_indices(loose.size, 1)
        sub_w = w[loose[ia], loose[ib]]
        sub_h = np.nan_to_num(hops[loose[ia], loose[ib]], posinf=n)
        order = np.lexsort((ib, ia, -sub_h, -sub_w))
        taken = np.zeros(loose.size, bool)
        for x, y in zip(ia[order].tolist(), ib[order].tolist(), strict=True):
            if not taken[x] and not taken[y]:
                taken[x] = taken[y] = True
                out.append((int(loose[x]), int(loose[y])))
    return sorted(out)


def mp_matchings(
    mp: sp.spmatrix,
    ports: int,
    n: int,
    partners: int | None | str = "auto",
    matcher: str = "rustworkx",
    base: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Iterated maximum-weight perfect matchings on the MP demand (step 3).

    Each round runs Edmonds' blossom (:func:`max_weight_matching`) on the pairs with remaining
    demand (weights ``T_ij + T_ji``); because all weights are non-negative, completing that
    matching by pairing the unmatched servers gives a maximum-weight *perfect* matching of the
    complete graph. Each matched pair gets one circuit and its demand becomes
    ``T_ij * c / (c + 1)`` (``c``: MP circuits now between ``i`` and ``j``).

    Parameters
    ----------
    mp : scipy.sparse matrix
        ``(n, n)`` MP bytes.
    ports : int
        Matching rounds (MP ports per server).
    n : int
        Servers.
    partners : int, None or "auto"
        Candidate edges: ``None`` the complete demand graph (exact, the paper's method);
        an integer ``k`` each server's ``k`` heaviest partners (:func:`candidate_pairs`), the
        matching then completed heaviest loose pair first; ``"auto"`` (default): exact up to
        :data:`EXACT_MATCHING_SERVERS` servers, else ``k =`` :data:`MATCHING_PARTNERS`. The
        sparsified blossom is exact whenever the optimum uses only candidate edges, which is the
        usual case (``benchmarks/design/README.md`` measures it at n = 128).
    matcher : {"rustworkx", "networkx"}
        Blossom implementation.
    base : numpy.ndarray, optional
        Circuits already built (the AllReduce rings): with the matchings so far they give the
        hop counts of the tie-break (:func:`tie_break_weights`).

    Returns
    -------
    circuits : numpy.ndarray
        ``[u, v, count]`` rows (``u < v``).
    remaining : numpy.ndarray
        Dense ``(n, n)`` symmetric demand after the last discount.

    Raises
    ------
    InputError
        If ``n`` is odd and ``ports > 0`` (no perfect matching exists).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> T = sp.csr_matrix(([8.0, 6.0, 1.0], ([0, 2, 0], [1, 3, 2])), shape=(4, 4))
    >>> c, rest = mp_matchings(T, 1, 4)
    >>> c.tolist(), float(rest[0, 1]), float(rest[2, 3]), float(rest[0, 2])
    ([[0, 1, 1], [2, 3, 1]], 4.0, 3.0, 1.0)
    """
    if ports > 0 and n % 2:
        raise InputError("servers", n, "an even number of servers when ports go to MP matchings")
    if partners == "auto":
        partners = None if n <= EXACT_MATCHING_SERVERS else MATCHING_PARTNERS
    elif partners is not None and (
        isinstance(partners, bool) or not isinstance(partners, (int, np.integer)) or partners < 1
    ):
        raise InputError("partners", partners, "an integer >= 1, None or 'auto'")
    w = np.asarray(sp.csr_matrix(mp).todense(), dtype=np.float64)
    w = w + w.T
    np.fill_diagonal(w, 0.0)
    count = np.zeros((n, n), dtype=np.int64)
    rows: list[tuple[int, int]] = []
    built = Circuits(() if base is None else base, n)
    for _ in range(int(ports)):
        if partners is None:  # the complete graph: every pair, ties broken inside the blossom
            iu, ju = np.triu_indices(n, 1)
            iu, ju = iu.astype(np.int64), ju.astype(np.int64)
        else:
            iu, ju = candidate_pairs(w, partners)
        hops = built.merged(rows).hop_distances()
        key = tie_break_weights(w[iu, ju], hops[iu, ju], n)
        # complete graph: the heaviest perfect matching; sparsified: the heaviest matching of
        # the candidates (a maximum-cardinality one could trade heavy pairs for more pairs),
        # completed afterwards
        best = max_weight_matching(n, iu, ju, key, matcher, perfect=partners is None)
        pairs = _complete(best, w, hops)
        for a, b in pairs:
            count[a, b] += 1
            count[b, a] += 1
            c = count[a, b]
            w[a, b] *= c / (c + 1)
            w[b, a] = w[a, b]
            rows.append((a, b))
    return Circuits(rows, n).rows, w


# --------------------------------------------------------------------------- 4. routing
def _neighbour_table(circuits: Circuits) -> np.ndarray:
    """``(n, max degree)`` neighbours of each server, ascending, ``-1``-padded."""
    c, n = circuits.rows, circuits.n
    u = np.concatenate([c[:, 0], c[:, 1]])
    v = np.concatenate([c[:, 1], c[:, 0]])
    order = np.lexsort((v, u))
    u, v = u[order], v[order]
    deg = np.bincount(u, minlength=n)
    table = np.full((n, max(int(deg.max(initial=0)), 1)), -1, dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(deg)[:-1]])
    table[u, np.arange(u.size) - start[u]] = v
    return table


def sample_shortest_paths(
    circuits: Circuits,
    src: np.ndarray,
    dst: np.ndarray,
    k: int = 1,
    seed: int = 0,
    dist: np.ndarray | None = None,
) -> NodePaths:
    """Up to ``k`` shortest paths per pair, drawn from the shortest-path DAG (seeded).

    Each of the ``k`` draws walks from the source, at every hop choosing uniformly at random
    among the neighbours one hop closer to the destination; identical draws are merged and the
    commodity is split equally over the distinct paths. All pairs walk together (vectorised).
    With ``k = 1`` this is the released code's "one shortest path chosen at random".

    Raises
    ------
    InputError
        If a pair is disconnected.
    """
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    if dist is None:
        dist = circuits.hop_distances()
    if src.size and not np.all(np.isfinite(dist[src, dst])):
        bad = int(np.flatnonzero(~np.isfinite(dist[src, dst]))[0])
        raise InputError("routing", f"{int(src[bad])}->{int(dst[bad])}", "connected servers")
    table = _neighbour_table(circuits)
    rng = np.random.default_rng(seed)
    hops = dist[src, dst].astype(np.int64) if src.size else np.zeros(0, np.int64)
    hmax = int(hops.max(initial=0))
    draws = []
    for _ in range(max(int(k), 1)):
        walk = np.full((src.size, hmax + 1), -1, dtype=np.int64)
        walk[:, 0] = src
        cur = src.copy()
        for step in range(1, hmax + 1):
            live = hops >= step
            idx = np.flatnonzero(live)
            cand = table[cur[idx]]
            ok = cand >= 0
            want = dist[cur[idx], dst[idx]] - 1
            ok &= dist[np.where(ok, cand, 0), dst[idx, None]] == want[:, None]
            keys = np.where(ok, rng.random(cand.shape), -1.0)
            nxt = cand[np.arange(idx.size), np.argmax(keys, axis=1)]
            cur[idx] = nxt
            walk[idx, step] = nxt
        draws.append(walk)
    return _merge_draws(np.stack(draws, axis=1), src, dst, hops)


def _merge_draws(stack: np.ndarray, src: np.ndarray, dst: np.ndarray, hops: np.ndarray):
    """Distinct draws per commodity, in lexicographic node order, equal weights (vectorised).

    ``stack`` is ``(K, k, H)``: draw ``j`` of commodity ``i`` visits ``stack[i, j, :hops[i]+1]``
    (``-1`` after). All draws of one commodity have the same length, so sorting whole rows sorts
    the paths themselves.
    """
    K, k, H = stack.shape
    if K == 0:
        z = np.zeros(0, np.int64)
        return NodePaths(z, z, np.zeros(1, np.int64), np.zeros(1, np.int64), z, np.zeros(0))
    flat = stack.reshape(K * k, H)
    comm = np.repeat(np.arange(K, dtype=np.int64), k)
    base = int(flat.max(initial=0)) + 2
    # one integer key per row (same order) when it fits 62 bits; compared in logs, since a
    # long path (H hops) makes base ** H overflow a float (DLRM, 256 servers, 4 ports: over
    # 128 hops on demand circuits)
    if math.log2(K + 1) + H * math.log2(base) < 62.0:
        key = comm.copy()
        for c in range(H):
            key = key * base + (flat[:, c] + 1)
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort(tuple(flat[:, c] for c in range(H - 1, -1, -1)) + (comm,))
    rows, rc = flat[order], comm[order]
    keep = np.ones(rows.shape[0], bool)
    keep[1:] = (rc[1:] != rc[:-1]) | np.any(rows[1:] != rows[:-1], axis=1)
    rows, rc = rows[keep], rc[keep]
    counts = np.bincount(rc, minlength=K)
    cptr = np.zeros(K + 1, np.int64)
    np.cumsum(counts, out=cptr[1:])
    lens = hops[rc] + 1
    pptr = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(lens, out=pptr[1:])
    nodes = rows[np.arange(H)[None, :] < lens[:, None]]
    return NodePaths(src, dst, cptr, pptr, nodes, 1.0 / counts[rc])


def _concat_paths(a: NodePaths, b: NodePaths) -> NodePaths:
    """Commodities of ``a`` then those of ``b``."""
    return NodePaths(
        np.concatenate([a.src, b.src]),
        np.concatenate([a.dst, b.dst]),
        np.concatenate([a.commodity_ptr, a.commodity_ptr[-1] + b.commodity_ptr[1:]]),
        np.concatenate([a.path_ptr, a.path_ptr[-1] + b.path_ptr[1:]]),
        np.concatenate([a.nodes, b.nodes]),
        np.concatenate([a.weight, b.weight]),
    )


# --------------------------------------------------------------------------- 5. scores
def ideal_lower_bound(problem: DesignProblem) -> float:
    """Ideal-switch bound: per phase, the busiest server's bytes out or in over ``d * B``.

    With reserved ports, server ``i`` has ``degree - reserved_i`` ports: its bytes are divided
    by ``(degree - reserved_i) * B`` (``inf`` when it has traffic and no usable port).
    """
    n, cap = problem.n, problem.degree * problem.link_bandwidth
    if problem.reserved is not None and problem.reserved.any():
        per = problem.usable_ports() * problem.link_bandwidth
        total = 0.0
        for ph in problem.phases:
            byts = np.maximum(ph.out_bytes(n), ph.in_bytes(n))
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(byts > 0, byts / per, 0.0)
            total += float(t.max(initial=0.0))
        return total
    return float(
        sum(
            max(ph.out_bytes(n).max(initial=0), ph.in_bytes(n).max(initial=0))
            for ph in problem.phases
        )
        / cap
    )


def finish_design(
    problem: DesignProblem,
    circuits: np.ndarray,
    rings: list[dict],
    routing: NodePaths,
    solver: str,
    t0: float,
    info: dict,
) -> Design:
    """Score a design with :func:`solvers.model.congestion.evaluate_routing` and package it."""
    design = Design(
        problem.n,
        problem.degree,
        problem.link_bandwidth,
        circuits,
        tuple(rings),
        routing,
        solver,
        "feasible",
        0.0,
        0.0,
        0.0,
        0.0,
        info,
    )
    ev = evaluate_routing(problem, design.circuits, design.phase_routings(problem))
    if not ev.feasible:
        raise InputError("design", "; ".join(ev.violations), "a feasible design")
    lb = ideal_lower_bound(problem)
    gap = (ev.objective - lb) / ev.objective if ev.objective > 0 else 0.0
    done = Design(
        problem.n,
        problem.degree,
        problem.link_bandwidth,
        design.circuits,
        tuple(rings),
        routing,
        solver,
        "feasible",
        ev.objective,
        lb,
        gap,
        time.perf_counter() - t0,
        info,
    )
    return with_port_options(done, problem)


def _phase_rings(traffic: TopoOptTraffic, rings: list[dict]) -> list[dict]:
    """Directed rings per phase group: ``+p`` and ``-p`` of each stride, equal weights."""
    out = []
    for r in rings:
        members = r["members"]
        strides = r["strides"] if r["strides"] else [1]
        orders = []
        for p in strides:
            fwd = _positions_ring(members, int(p))
            orders += [(int(p), fwd), (-int(p), np.concatenate([fwd[:1], fwd[1:][::-1]]))]
        for phase, gi in traffic.refs[r["group"]]:
            for p, o in orders:
                out.append(
                    {
                        "phase": phase,
                        "group": int(gi),
                        "members": members.tolist(),
                        "order": o.tolist(),
                        "stride": p,
                        "weight": 1.0 / len(orders),
                        "virtual": bool(r["virtual"]),
                    }
                )
    return out


def topoopt_design(
    problem: DesignProblem,
    variant: str = "topoopt",
    k_paths: int = 4,
    seed: int = 0,
    matching_partners: int | None | str = "auto",
) -> Design:
    """The TopoOpt baseline design of ``problem`` (module docstring, steps 1-5).

    Parameters
    ----------
    problem : DesignProblem
    variant : {"topoopt", "topoopt-released"}
    k_paths : int
        Paths per MP pair for ``topoopt`` (the released variant uses one).
    seed : int
        Seed of the random shortest-path draws.
    matching_partners : int, None or "auto"
        Candidate edges of the MP matchings (``partners`` of :func:`mp_matchings`).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=8, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.arange(8).reshape(1, 8), 1e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=4, link_bandwidth=1e9)
    >>> d = topoopt_design(p)
    >>> d.info["strides"], d.port_usage().tolist() == [4] * 8
    ([1, 3], True)
    """
    t0 = time.perf_counter()
    if variant not in VARIANTS:
        raise InputError("variant", variant, f"one of {', '.join(VARIANTS)}")
    if isinstance(k_paths, bool) or int(k_paths) != k_paths or k_paths < 1:
        raise InputError("k_paths", k_paths, "an integer >= 1")
    n, d = problem.n, problem.degree
    options = problem.has_port_options
    if d < 2:
        raise InputError("degree", d, "an integer >= 2 (the +-1 ring needs 2 ports)")
    if n < 3:
        raise InputError("servers", n, "at least 3 servers (a ring)")
    traffic = topoopt_traffic(problem)
    d_build = problem.free_degree if options else d
    if d_build >= 2:
        d_ar, d_mp = degree_split(traffic.t_ar(), traffic.t_mp(), d_build, variant)
        ar_circ, groups, ar_info = allreduce_rings(traffic, d_ar)
        mp_circ, _ = mp_matchings(traffic.mp, d_mp, n, partners=matching_partners, base=ar_circ)
        circuits = Circuits(np.vstack([ar_circ, mp_circ]), n).rows
    else:  # no ring fits on the free ports: pre-wired + filled ports, virtual rings
        d_ar = d_mp = 0
        ar_circ = np.zeros((0, 3), np.int64)
        groups = [
            {"group": j, "members": m, "strides": [], "virtual": True}
            for j, m in enumerate(traffic.groups)
        ]
        ar_info = {"strides": [], "group_size": None, "circulant": False}
        circuits = ar_circ
    rings = _phase_rings(traffic, groups)
    filled = 0
    over_cap = circuits.size and int(circuits[:, 2].max()) > problem.pair_cap
    if options or over_cap:
        from solvers.model.ports import fill_free_ports

        # the construction stacks circuits on a pair (rings and matchings on the same pair, the
        # c/(c+1) discount); with a per-pair cap they are cut back and the ports refilled
        circuits = circuits.copy()
        circuits[:, 2] = np.minimum(circuits[:, 2], problem.pair_cap)
        circuits = merge_prewired(circuits, problem)
        before = int(circuits[:, 2].sum())
        circuits = fill_free_ports(
            circuits, n, problem.usable_ports(), _step_demand(problem, traffic, rings),
            problem.pair_cap, connect=True,
        )  # fmt: skip
        filled = int(circuits[:, 2].sum()) - before
        require_connected(problem, Circuits(circuits, n))
        if not ar_circ.size:
            ar_circ = circuits  # virtual rings are forwarded over whatever circuits there are
    circ, ar = Circuits(circuits, n), Circuits(ar_circ, n)
    dist_all = circ.hop_distances()
    # commodities: MP pairs (k shortest paths) and ring steps (direct, or virtual-ring routes)
    mp = traffic.mp.tocoo()
    mp_key = set((mp.row.astype(np.int64) * n + mp.col).tolist())
    k = k_paths if variant == "topoopt" else 1
    mp_src, mp_dst = mp.row.astype(np.int64), mp.col.astype(np.int64)
    step_paths: dict[int, list[int]] = {}
    ar_dist = None
    for r in rings:
        o = r["order"]
        for a, b in zip(o, o[1:] + o[:1], strict=True):
            key = a * n + b
            if key in mp_key or key in step_paths:
                continue
            if dist_all[a, b] == 1 and not r["virtual"]:
                step_paths[key] = [a, b]
            elif ar_info["circulant"] and ar_info["strides"]:
                walk = [a]
                for c in coin_change(b - a, ar_info["strides"], n):
                    walk.append((walk[-1] + c) % n)
                step_paths[key] = walk
            else:
                if ar_dist is None:
                    ar_dist = ar.hop_distances()
                one = sample_shortest_paths(ar, [a], [b], 1, seed, ar_dist)
                step_paths[key] = one.to_lists()[0][0][0]
    mp_paths = sample_shortest_paths(circ, mp_src, mp_dst, k, seed, dist_all)
    keys = np.array(sorted(step_paths), np.int64)
    steps = NodePaths.from_lists(
        keys // n, keys % n, [[(step_paths[x], 1.0)] for x in keys.tolist()]
    )
    routing = _concat_paths(mp_paths, steps)
    info = {
        "variant": variant,
        "d_ar": d_ar,
        "d_mp": d_mp,
        "t_ar_bytes": traffic.t_ar(),
        "t_mp_bytes": traffic.t_mp(),
        "strides": ar_info["strides"],
        "ring_group_size": ar_info["group_size"],
        "k_paths": k,
        "seed": seed,
        "matching_partners": matching_partners,
    }
    if options:
        info["d_free"] = d_build
        info["prewired_circuits"] = problem.prewired_circuits().total
        info["free_ports_filled"] = filled
    return finish_design(problem, circ, rings, routing, variant, t0, info)


def require_connected(problem: DesignProblem, circuits: Circuits) -> None:
    """Raise :class:`InputError` when two servers with traffic are in different components of
    ``circuits`` (what too many reserved ports or pre-wired circuits can leave)."""
    n = problem.n
    _, label = circuits.components()
    busy = np.zeros(n, bool)
    for ph in problem.phases:
        busy |= (ph.out_bytes(n) > 0) | (ph.in_bytes(n) > 0)
    idx = np.flatnonzero(busy)
    if idx.size and np.any(label[idx] != label[idx[0]]):
        b = int(idx[np.flatnonzero(label[idx] != label[idx[0]])[0]])
        raise InputError(
            "reserved/prewired ports",
            f"servers {int(idx[0])} and {b} left disconnected (d_free = {problem.free_degree})",
            "enough free ports for a connected design (reserve fewer ports or pre-wire fewer "
            "circuits)",
        )


def _step_demand(problem: DesignProblem, traffic: TopoOptTraffic, rings: list[dict]):
    """Symmetric-enough demand that ranks pairs for filling free ports: MP bytes plus the
    bytes of every ring step (``ring_bytes * weight`` of each directed ring)."""
    n = problem.n
    rows, cols, vals = [], [], []
    ring_bytes = {ph.name: ph.ring_bytes for ph in problem.phases}
    for r in rings:
        o = np.asarray(r["order"], np.int64)
        b = float(ring_bytes[r["phase"]][r["group"]]) * float(r["weight"])
        rows.append(o)
        cols.append(np.roll(o, -1))
        vals.append(np.full(o.size, b))
    if not rows:
        return traffic.mp
    steps = sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    )
    return sp.csr_matrix(traffic.mp + steps)
