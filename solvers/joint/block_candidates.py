"""Block candidates: the servers that exchange fixed (model-parallel) traffic wired as blocks,
the blocks joined by rings across them.

Many plans split the servers into equal *blocks* that talk among themselves (a tensor- or
model-parallel group of servers, one data-parallel replica each; TopoOpt's CANDLE task graphs are
four such blocks of four servers) while the gradient all-reduces run across the blocks. The
fixed traffic then needs wide, short paths inside a block and the rings need circuits between
blocks. :func:`block_candidates` builds, from the connected components of the fixed traffic
(``mp`` of :func:`solvers.traffic_input.topoopt_traffic`, symmetrised):

- inside each block of ``s`` servers, for ``m = 1, 2, ...``: the complete multigraph with ``m``
  circuits per pair (``m (s - 1)`` ports), or a ring with ``m`` circuits per hop (``2 m``
  ports), the ring whose hops carry the most fixed bytes (:func:`best_cycle`);
- across blocks, with the ports left (``r``): up to ``r / 2`` rings (at most half the blocks),
  ring ``j`` joining the same-position server of every block, blocks ``j + 1`` apart (a
  matching when that is half the blocks); every server is then one hop from its counterparts
  in the neighbouring blocks, where the all-reduces of TP x DP plans run;
- the free ports filled as :func:`solvers.joint.local_search.fill_free_ports` does (more circuits on
  the heaviest fixed pairs).

Only plans whose components are at least two blocks of one size at least 2 get candidates; the
flow model judges them beside every other candidate (:mod:`solvers.joint.iteration_search`).

Examples
--------
Two blocks of two servers that talk inside, four ports: one circuit inside, one across (0-2,
1-3), and the two free ports each to the inside pairs.

>>> import numpy as np
>>> from solvers.problem import DesignProblem
>>> from traffic.workload import Demand, Workload
>>> w = Workload(gpus=4, gpus_per_server=1, demands=(
...     Demand("send", np.array([[0, 1], [1, 0], [2, 3], [3, 2]]), 8.0, "mp", "forward",
...            mutable=False),
...     Demand("all-reduce", np.array([[0, 2], [1, 3]]), 4.0, "dp", "backward")))
>>> p = DesignProblem.from_workload(w, degree=4, link_bandwidth=1.0)
>>> blocks(p)
[[0, 1], [2, 3]]
>>> [(nm, c.tolist()) for nm, c in block_candidates(p)][:1]
[('blocks 2x2: complete x1 + 1 ring(s) across', [[0, 1, 3], [0, 2, 1], [1, 3, 1], [2, 3, 3]])]
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from solvers.congestion import canonical_circuits
from solvers.problem import DesignProblem

__all__ = [
    "blocks",
    "block_candidates",
    "first_block_candidates",
    "best_cycle",
    "CYCLE_ENUMERATION",
]


def blocks(problem: DesignProblem) -> list[list[int]] | None:
    """The connected components of the problem's fixed traffic, each sorted, in order of their
    first server; ``None`` unless there are at least two, all of one size ``>= 2`` and covering
    every server."""
    from solvers.traffic_input import topoopt_traffic

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
    """Named circuit sets of the block construction (module docstring); ``[]`` when the fixed
    traffic does not form equal blocks or a construction does not fit the ports."""
    return [(name, c) for name, c, _ in _constructions(problem)]


def first_block_candidates(problem: DesignProblem) -> list[tuple[str, np.ndarray]]:
    """The block constructions a search should try before its other candidates: the complete
    blocks, or, when none fits the ports, the rings inside blocks of at most
    :data:`CYCLE_ENUMERATION` servers (their cycle is the heaviest; beyond, only ascending).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("send", np.array([[0, 1], [1, 0], [2, 3], [3, 2]]), 8.0, "mp", "forward",
    ...            mutable=False),
    ...     Demand("all-reduce", np.array([[0, 2], [1, 3]]), 4.0, "dp", "backward")))
    >>> p = DesignProblem.from_workload(w, degree=4, link_bandwidth=1.0)
    >>> [nm for nm, _ in first_block_candidates(p)]
    ['blocks 2x2: complete x1 + 1 ring(s) across']
    """
    got = list(_constructions(problem))
    first = [(nm, c) for nm, c, kind in got if kind == "complete"]
    if first or not got:
        return first
    s = len(blocks(problem)[0])
    return [(nm, c) for nm, c, _ in got] if s <= CYCLE_ENUMERATION else []


def _constructions(problem: DesignProblem):
    """``(name, circuits, kind)`` of every block construction that fits (module docstring)."""
    from solvers.joint.local_search import fill_free_ports
    from solvers.traffic_input import topoopt_traffic

    comps = blocks(problem)
    if comps is None or problem.has_port_options:
        return
    n, d = problem.n, problem.degree
    k, s = len(comps), len(comps[0])
    mp = topoopt_traffic(problem).mp
    dense = np.asarray(sp.csr_matrix(mp).todense(), float)
    seen: set[bytes] = set()
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
        c = canonical_circuits(np.array(_inside(comps, kind, m, dense) + across, np.int64), n)
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
        yield f"blocks {k}x{s}: {kind} x{m} + {steps} ring(s) across", c, kind
