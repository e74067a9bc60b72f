"""Block candidates: the servers that exchange fixed (model-parallel) traffic wired as blocks,
the blocks joined by rings across them.

Many plans split the servers into equal *blocks* that talk among themselves (a tensor- or
model-parallel group of servers, one data-parallel replica each; TopoOpt's CANDLE task graphs are
four such blocks of four servers) while the gradient all-reduces run across the blocks. The
fixed traffic then needs wide, short paths inside a block and the rings need circuits between
blocks. :func:`block_candidates` builds, from the connected components of the fixed traffic
(``mp`` of :func:`solvers.baselines.traffic_input.topoopt_traffic`, symmetrised):

- inside each block of ``s`` servers, for ``m = 1, 2, ...``: the complete multigraph with ``m``
  circuits per pair (``m (s - 1)`` ports), or a ring with ``m`` circuits per hop (``2 m``
  ports), the ring whose hops carry the most fixed bytes (:func:`best_cycle`);
- across blocks, with the ports left (``r``): up to ``r / 2`` rings (at most half the blocks),
  ring ``j`` joining the same-position server of every block, blocks ``j + 1`` apart (a
  matching when that is half the blocks); every server is then one hop from its counterparts
  in the neighbouring blocks, where the all-reduces of TP x DP plans run;
- the free ports filled as :func:`solvers.joint.local_search.fill_free_ports` does (more circuits on
  the heaviest fixed pairs).

The blocks are the connected components of the fixed traffic and, for plans whose blocks exchange
a little fixed traffic, the finer partitions :func:`block_partitions` finds by dropping the
lightest fixed pairs. Only partitions into at least two blocks of one size at least 2 get
candidates; the flow model judges them beside every other candidate
(:mod:`solvers.joint.iteration_search`).

Two routing transforms go with the construction; the search simulates the best block
candidate with them (its *block routing* step):

- :func:`balanced_block_rings`: a group with several members in each block gets rings that
  cross between blocks at rotating positions, so every position's circuits across carry the
  same share (the routing LP's equally congested mixtures often cross at a few positions only);
- :func:`block_detours`: a share of the bytes between same-position servers of two blocks goes
  through the block mates' circuits across, which idle while another model shard's gradients
  are being reduced.

Examples
--------
Two blocks of two servers that talk inside, four ports: one circuit inside, one across (0-2,
1-3), and the two free ports each to the inside pairs.

>>> import numpy as np
>>> p = _two_blocks([[0, 2], [1, 3]], degree=4)
>>> blocks(p)
[[0, 1], [2, 3]]
>>> [(nm, c.tolist()) for nm, c in block_candidates(p)][:1]
[('blocks 2x2: complete x1 + 1 ring(s) across', [[0, 1, 3], [0, 2, 1], [1, 3, 1], [2, 3, 3]])]
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits

__all__ = [
    "blocks",
    "block_partitions",
    "block_candidates",
    "block_constructions",
    "balanced_block_rings",
    "block_detours",
    "first_block_candidates",
    "best_cycle",
    "CYCLE_ENUMERATION",
    "INSIDE_SHARE",
]


def blocks(problem: DesignProblem) -> list[list[int]] | None:
    """The connected components of the problem's fixed traffic, each sorted, in order of their
    first server; ``None`` unless there are at least two, all of one size ``>= 2`` and covering
    every server."""
    from solvers.baselines.traffic_input import topoopt_traffic

    n = problem.n
    mp = sp.csr_matrix(topoopt_traffic(problem).mp)
    if mp.nnz == 0:
        return None
    sym = ((mp + mp.T) > 0).astype(np.int8)
    k, label = connected_components(sym, directed=False)
    comps = [np.flatnonzero(label == c).tolist() for c in range(k)]
    comps.sort(key=lambda c: c[0])
    size = len(comps[0])
    if k < 2 or size < 2 or any(len(c) != size for c in comps) or k * size != n:
        return None
    return comps


def block_partitions(problem: DesignProblem) -> list[list[list[int]]]:
    """Every partition of the servers into equal blocks that the fixed traffic suggests,
    coarsest first: the connected components (:func:`blocks`), then the components left as the
    lightest fixed pairs are dropped, one weight at a time, while the blocks still hold at least
    :data:`INSIDE_SHARE` of the fixed bytes.

    Some plans' blocks exchange a little fixed traffic (TopoOpt's CANDLE-32 task graph: four
    replicas of eight servers, each pair of replicas joined by a few light model-parallel
    pairs, so the components are two blocks of sixteen); their finer blocks are the replicas.

    Examples
    --------
    Two heavy pairs joined by one light pair: the components are one block, the heavy pairs
    two (they hold 16 of the 17 bytes).

    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("send", np.array([[0, 1], [2, 3]]), 8.0, "mp", "forward", mutable=False),
    ...     Demand("send", np.array([[1, 2]]), 1.0, "mp", "forward", mutable=False)))
    >>> p = DesignProblem.from_workload(w, degree=4, link_bandwidth=1.0)
    >>> block_partitions(p)
    [[[0, 1], [2, 3]]]
    """
    from solvers.baselines.traffic_input import topoopt_traffic

    n = problem.n
    mp = sp.coo_matrix(topoopt_traffic(problem).mp)
    if mp.nnz == 0:
        return []
    sym = sp.coo_matrix(sp.csr_matrix(mp) + sp.csr_matrix(mp).T)
    keep = sym.row < sym.col
    u, v, wt = sym.row[keep], sym.col[keep], sym.data[keep]
    total = float(wt.sum())
    out: list[list[list[int]]] = []
    for cut in [-1.0, *np.unique(wt)[:-1].tolist()]:
        on = wt > cut
        g = sp.coo_matrix((np.ones(int(on.sum())), (u[on], v[on])), shape=(n, n))
        k, label = connected_components(g, directed=False)
        if float(wt[label[u] == label[v]].sum()) < INSIDE_SHARE * total:
            break  # finer cuts only lose more (their blocks refine these)
        comps = [np.flatnonzero(label == c).tolist() for c in range(k)]
        comps.sort(key=lambda c: c[0])
        size = len(comps[0])
        if k < 2 or size < 2 or any(len(c) != size for c in comps) or comps in out:
            continue
        out.append(comps)
    return out


INSIDE_SHARE = 0.8
"""A partition into blocks is a candidate while its blocks hold at least this share of the
fixed bytes (:func:`block_partitions`)."""


def best_cycle(block: list[int], weight: np.ndarray) -> list[int]:
    """The Hamiltonian cycle of ``block`` whose consecutive pairs carry the most fixed bytes
    (``weight[u, v] + weight[v, u]``), by enumeration up to :data:`CYCLE_ENUMERATION` servers
    (ties: the first in lexicographic order); larger blocks keep their ascending order.

    Examples
    --------
    >>> w = np.zeros((4, 4)); w[0, 2] = w[1, 3] = 5.0
    >>> best_cycle([0, 1, 2, 3], w)
    [0, 1, 3, 2]
    """
    from itertools import permutations

    s = len(block)
    if s <= 3 or s > CYCLE_ENUMERATION:
        return list(block)
    sym = weight + weight.T
    best, best_w = list(block), -1.0
    first = block[0]
    for rest in permutations(block[1:]):
        if rest[0] > rest[-1]:  # each cycle once (its two directions)
            continue
        order = (first, *rest)
        wsum = sum(sym[order[i], order[(i + 1) % s]] for i in range(s))
        if wsum > best_w * (1 + 1e-12):
            best, best_w = list(order), wsum
    return best


CYCLE_ENUMERATION = 8
"""Blocks up to this many servers get their ring inside by enumeration (2,520 cycles of 8)."""


def _inside(comps: list[list[int]], kind: str, m: int, weight: np.ndarray) -> list[list[int]]:
    rows = []
    for c in comps:
        s = len(c)
        if kind == "complete" or s == 2:
            rows += [[c[i], c[j], m] for i in range(s) for j in range(i + 1, s)]
        else:  # the ring that carries the most fixed bytes directly
            o = best_cycle(c, weight)
            rows += [[o[i], o[(i + 1) % s], m] for i in range(s)]
    return rows


def _across(comps: list[list[int]], rings: int) -> list[list[int]]:
    k, s = len(comps), len(comps[0])
    rows = []
    for j in range(rings):
        step = j + 1
        if step > k // 2:
            break
        for pos in range(s):
            for b in range(k if 2 * step != k else k // 2):
                rows.append([comps[b][pos], comps[(b + step) % k][pos], 1])
    return rows


def block_candidates(problem: DesignProblem) -> list[tuple[str, np.ndarray]]:
    """Named circuit sets of the block construction (module docstring) over every partition of
    :func:`block_partitions`; ``[]`` when the fixed traffic forms no equal blocks or no
    construction fits the ports."""
    return [(name, c) for name, c, _, _ in _constructions(problem)]


def block_constructions(problem: DesignProblem) -> list[tuple[str, np.ndarray, list[list[int]]]]:
    """``(name, circuits, blocks)`` of every block construction: :func:`block_candidates` with
    the partition each was built on (for :func:`balanced_block_rings` and
    :func:`block_detours`)."""
    return [(name, c, comps) for name, c, _, comps in _constructions(problem)]


def first_block_candidates(problem: DesignProblem) -> list[tuple[str, np.ndarray]]:
    """The block constructions a search should try before its other candidates, per partition:
    the complete blocks, or, when none fits the ports, the rings inside blocks of at most
    :data:`CYCLE_ENUMERATION` servers (their cycle is the heaviest; beyond, only ascending).

    Examples
    --------
    >>> import numpy as np
    >>> p = _two_blocks([[0, 2], [1, 3]], degree=4)
    >>> [nm for nm, _ in first_block_candidates(p)]
    ['blocks 2x2: complete x1 + 1 ring(s) across']
    """
    got = list(_constructions(problem))
    out = []
    for comps in block_partitions(problem):
        mine = [(nm, c, kind) for nm, c, kind, cc in got if cc == comps]
        first = [(nm, c) for nm, c, kind in mine if kind == "complete"]
        if not first and len(comps[0]) <= CYCLE_ENUMERATION:
            first = [(nm, c) for nm, c, _ in mine]
        out += first
    return out


def _constructions(problem: DesignProblem):
    """``(name, circuits, kind, blocks)`` of every block construction that fits, over every
    partition of :func:`block_partitions` (module docstring)."""
    from solvers.baselines.traffic_input import topoopt_traffic
    from solvers.model.ports import fill_free_ports

    if problem.has_port_options:
        return
    parts = block_partitions(problem)
    if not parts:
        return
    n, d = problem.n, problem.degree
    mp = topoopt_traffic(problem).mp
    dense = np.asarray(sp.csr_matrix(mp).todense(), float)
    seen: set[bytes] = set()
    for comps in parts:
        k, s = len(comps), len(comps[0])
        shapes = [("complete", m, m * (s - 1)) for m in range(1, d + 1)]
        if s > 3:  # a ring inside differs from the complete graph only from four servers on
            shapes += [("ring", m, 2 * m) for m in range(1, d // 2 + 1)]
        for kind, m, used in shapes:
            left = d - used
            if left < (1 if k == 2 else 2):
                continue
            rings = left // 2 if k > 2 else left
            across = _across(comps, rings)
            if not across:
                continue
            rows = _inside(comps, kind, m, dense) + across
            c = Circuits(np.array(rows, np.int64), n).rows
            deg = np.zeros(n, np.int64)
            np.add.at(deg, c[:, 0], c[:, 2])
            np.add.at(deg, c[:, 1], c[:, 2])
            if deg.max() > d:
                continue
            c = fill_free_ports(c, n, d, mp, problem.pair_cap)
            key = c.tobytes()
            if key in seen:
                continue
            seen.add(key)
            steps = min(rings, k // 2)
            yield f"blocks {k}x{s}: {kind} x{m} + {steps} ring(s) across", c, kind, comps


def balanced_block_rings(design, problem: DesignProblem, comps: list[list[int]] | None = None):
    """``design`` with the rings of every group that spans blocks with two or more members in
    each replaced by rings that cross between blocks at rotating positions, equal weights.

    A ring over a group with ``m >= 2`` members in each of ``K`` blocks (the same positions in
    every block) enters and leaves each block once; it crosses from block ``b`` to the next at
    one position ``q_b``, over the ring of same-position servers across the blocks. The routing
    LP's rings for such a group may all cross at the same few positions (it counts a phase's
    transfers as simultaneous, so many congestion-equivalent mixtures exist); then the circuits
    across at those positions carry the group's bytes twice or more while others idle. Here ring
    ``s`` (``s = 0 .. m - 1``) crosses at positions ``P[(b + s) mod m]`` and each is used in both
    directions with weight ``1 / (2 m)``, so every position's circuits across carry the same
    share. A group of one member per block gets the ring of its same-position servers in block
    order, both ways with equal weights. Groups inside one block, groups whose positions differ
    between blocks or whose crossings lack a circuit keep their rings.

    Examples
    --------
    Two blocks of two servers joined 0-2 and 1-3: the four-server ring crosses once at each
    position, both ways.

    >>> import numpy as np
    >>> from solvers.model.design import Design, NodePaths
    >>> p = _two_blocks([[0, 1, 2, 3]], degree=2)
    >>> c = np.array([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]])
    >>> ring = {"phase": p.phases[0].name, "group": 0, "members": [0, 1, 2, 3],
    ...         "order": [0, 1, 3, 2], "stride": None, "weight": 1.0, "virtual": False}
    >>> d = Design(4, 2, 1.0, c, (ring,), NodePaths.from_lists([], [], []), "joint",
    ...            "feasible", 1.0, 0.0, 1.0, 0.0, {})
    >>> [(r["order"], r["weight"]) for r in balanced_block_rings(d, p).rings]
    [([1, 0, 2, 3], 0.25), ([1, 3, 2, 0], 0.25), ([0, 1, 3, 2], 0.25), ([0, 2, 3, 1], 0.25)]
    """
    from dataclasses import replace

    comps = blocks(problem) if comps is None else comps
    if comps is None or not design.rings:
        return design
    block_of, pos_of, have = _block_index(comps, problem.n, design.circuits)
    out: list[dict] = []
    done: set[tuple[str, int]] = set()
    for r in design.rings:
        key = (r["phase"], int(r["group"]))
        if key in done:
            continue
        orders = _rotating_orders(sorted(int(x) for x in r["members"]), comps, block_of, pos_of)
        if orders is None or not all(
            (o[i], o[(i + 1) % len(o)]) in have for o in orders for i in range(len(o))
            if block_of[o[i]] != block_of[o[(i + 1) % len(o)]]
        ):  # fmt: skip
            out.append(r)
            continue
        done.add(key)
        both = []
        for fwd in orders:
            for o in (fwd, [fwd[0], *fwd[1:][::-1]]):
                if o not in both:
                    both.append(o)
        out += [{**r, "order": o, "stride": None, "weight": 1.0 / len(both)} for o in both]
    return replace(design, rings=tuple(out))


def _rotating_orders(members, comps, block_of, pos_of):
    """The ``m`` ring orders of :func:`balanced_block_rings` over ``members``, or ``None``."""
    touched = sorted({int(block_of[u]) for u in members})
    if len(touched) < 2 or any(block_of[u] < 0 for u in members):
        return None
    pos = [sorted(int(pos_of[u]) for u in members if block_of[u] == b) for b in touched]
    if any(p != pos[0] for p in pos):
        return None
    P, k = pos[0], len(touched)
    m = len(P)
    if m == 1:  # the ring of same-position servers itself (both ways, equal weights)
        return [[comps[b][P[0]] for b in touched]]
    orders = []
    for s in range(m):
        q = [P[(b + s) % m] for b in range(k)]  # crossing position from touched block b on
        if q[-1] == q[0]:  # block 0 would be entered and left at the same position
            return None
        order = []
        for i, b in enumerate(touched):
            enter, leave = q[i - 1], q[i]
            mid = [x for x in P if x not in (enter, leave)]
            order += [comps[b][x] for x in (enter, *mid, leave)]
        orders.append(order)
    return orders


def block_detours(design, problem: DesignProblem, alpha: float, comps=None):
    """``design`` with ``alpha`` of the bytes of every pair of same-position servers in two
    blocks moved onto the detours through their block mates: ``u -> u' -> v' -> v`` for each
    mate ``u'`` of ``u`` and its counterpart ``v'`` in ``v``'s block, in equal shares, where
    all three circuits exist (pairs without such detours keep their paths).

    The circuits across blocks join same-position servers, so each ring family of one member
    per block (the all-reduce across replicas of one model shard) has circuits of its own; when
    one shard's gradients are ready and another's are not, the idle shards' circuits across can
    carry part of the busy ones' bytes, at the cost of two hops inside the blocks.

    Examples
    --------
    >>> import numpy as np
    >>> from solvers.model.design import Design, NodePaths
    >>> p = _two_blocks([[0, 2], [1, 3]], degree=2)
    >>> c = np.array([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]])
    >>> rt = NodePaths.from_lists([0], [2], [[([0, 2], 1.0)]])
    >>> d = Design(4, 2, 1.0, c, (), rt, "joint", "feasible", 1.0, 0.0, 1.0, 0.0, {})
    >>> block_detours(d, p, 0.5).routing.to_lists()
    [[([0, 2], 0.5), ([0, 1, 3, 2], 0.5)]]
    """
    from dataclasses import replace

    from solvers.model.design import NodePaths

    a = float(alpha)
    comps = blocks(problem) if comps is None else comps
    rt = design.routing
    if a <= 0 or comps is None or rt.n_commodities == 0:
        return design
    block_of, pos_of, have = _block_index(comps, problem.n, design.circuits)
    own = rt.to_lists()
    out = []
    for k in range(rt.n_commodities):
        u, v = int(rt.src[k]), int(rt.dst[k])
        bu, bv = int(block_of[u]), int(block_of[v])
        paths = []
        if bu >= 0 and bv >= 0 and bu != bv and pos_of[u] == pos_of[v]:
            for j, x in enumerate(comps[bu]):
                y = comps[bv][j]
                if x != u and (u, x) in have and (x, y) in have and (y, v) in have:
                    paths.append([u, x, y, v])
        if not paths:
            out.append(own[k])
            continue
        acc: dict[tuple[int, ...], float] = {}
        for path, wt in own[k]:
            acc[tuple(path)] = acc.get(tuple(path), 0.0) + (1.0 - a) * wt
        for path in paths:
            acc[tuple(path)] = acc.get(tuple(path), 0.0) + a / len(paths)
        out.append([(list(p), wt) for p, wt in acc.items() if wt > 0])
    return replace(design, routing=NodePaths.from_lists(rt.src, rt.dst, out))


def _block_index(comps, n: int, circuits: Circuits):
    """``(block_of, pos_of, have)``: each server's block and position in it (-1 outside every
    block) and the set of ordered server pairs joined by a circuit."""
    block_of = np.full(n, -1, np.int64)
    pos_of = np.full(n, -1, np.int64)
    for b, c in enumerate(comps):
        block_of[c] = b
        pos_of[c] = np.arange(len(c))
    c = circuits.rows
    have = {(int(u), int(v)) for u, v in c[:, :2]} | {(int(v), int(u)) for u, v in c[:, :2]}
    return block_of, pos_of, have


def _two_blocks(allreduce_groups, degree: int) -> DesignProblem:
    """The examples' problem: servers 0-1 and 2-3 exchange fixed (mp) bytes, 8 each way per
    pair; one all-reduce of 4 bytes per row of ``allreduce_groups``; 1 byte/s per port."""
    from traffic.workload import Demand, Workload

    w = Workload(gpus=4, gpus_per_server=1, demands=(
        Demand("send", np.array([[0, 1], [1, 0], [2, 3], [3, 2]]), 8.0, "mp", "forward",
               mutable=False),
        Demand("all-reduce", np.array(allreduce_groups), 4.0, "dp", "backward")))  # fmt: skip
    return DesignProblem.from_workload(w, degree=degree, link_bandwidth=1.0)
