"""Demand-driven circuits: the heuristic of the TopoOpt artifact's reconfigurable baseline.

The TopoOpt artifact's OCS-reconfig baseline (``DemandHeuristicNetworkOptimizer`` in
hipersys-team's ``ffsim-opera``, read for its algorithm; this is our own code) gives circuits
to server pairs greedily by demand:

1. Each unordered pair ``{u, v}`` has demand ``D_uv = max(D[u, v], D[v, u])``.
2. Repeatedly, the pair of largest ``D_uv / 2^c_uv`` (``c_uv`` its circuits so far) whose two
   servers both have a free port gets one more circuit (ties: lowest pair first).
3. Ports left free are joined pairwise (lowest free servers first, a new pair before a parallel
   circuit), and
4. disconnected components are joined by exchanging the ends of two circuits (``(a, b)`` in
   one component and ``(c, d)`` in another become ``(a, c)`` and ``(b, d)``: every port keeps
   its count and the two components become one); a server left without circuits is spliced
   into one (``(c, d)`` becomes ``(c, x)`` and ``(x, d)``, two of its free ports).
"""

from __future__ import annotations

import heapq

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from traffic.errors import InputError

__all__ = ["demand_circuits"]


def _components(count: np.ndarray) -> np.ndarray:
    g = sp.csr_matrix(count > 0)
    return csgraph.connected_components(g, directed=False)[1]


def demand_circuits(demand, degree: int, max_parallel: int | None = None) -> np.ndarray:
    """Circuits ``[u, v, count]`` (``u < v``) for a server demand matrix (module docstring).

    Parameters
    ----------
    demand : array_like or scipy.sparse matrix
        ``(n, n)`` bytes from server ``u`` to ``v`` (diagonal ignored).
    degree : int
        Ports per server.
    max_parallel : int, optional
        At most this many circuits per pair (default ``degree``).

    Returns
    -------
    numpy.ndarray
        ``int64 (m, 3)``, canonical; every server uses at most ``degree`` ports.

    Examples
    --------
    Servers 0 and 1 exchange the most; every server ends up with both of its ports used and the
    graph connected:

    >>> d = np.zeros((4, 4)); d[0, 1] = 8.0; d[2, 3] = 1.0
    >>> demand_circuits(d, 2).tolist()
    [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]]
    """
    if isinstance(degree, bool) or int(degree) != degree or degree < 1:
        raise InputError("degree", degree, "an integer >= 1")
    d = demand.toarray() if sp.issparse(demand) else np.asarray(demand, np.float64)
    n = d.shape[0]
    if d.shape != (n, n) or n < 2:
        raise InputError("demand", d.shape, "a square matrix over >= 2 servers")
    cap = int(degree if max_parallel is None else min(max_parallel, degree))
    sym = np.maximum(d, d.T)
    np.fill_diagonal(sym, 0.0)
    free = np.full(n, int(degree), np.int64)
    count = np.zeros((n, n), np.int64)
    iu, iv = np.nonzero(np.triu(sym > 0, 1))
    heap = [(-float(sym[u, v]), int(u), int(v)) for u, v in zip(iu, iv, strict=True)]
    heapq.heapify(heap)
    while heap:  # 2. greedy by demand / 2^circuits
        negp, u, v = heapq.heappop(heap)
        if free[u] == 0 or free[v] == 0 or count[u, v] >= cap:
            continue
        count[u, v] += 1
        count[v, u] += 1
        free[u] -= 1
        free[v] -= 1
        heapq.heappush(heap, (negp / 2.0, u, v))
    while True:  # 3. join free ports: a new pair first, else a parallel circuit
        have = np.flatnonzero(free > 0)
        if have.size < 2:
            break
        pick = None
        for i, u in enumerate(have.tolist()):
            for v in have[i + 1 :].tolist():
                if count[u, v] == 0:
                    pick = (u, v)
                    break
            if pick:
                break
        if pick is None:
            for i, u in enumerate(have.tolist()):
                for v in have[i + 1 :].tolist():
                    if count[u, v] < cap:
                        pick = (u, v)
                        break
                if pick:
                    break
        if pick is None:
            break
        u, v = pick
        count[u, v] += 1
        count[v, u] += 1
        free[u] -= 1
        free[v] -= 1
    comp = _components(count)
    while comp.max() > 0:  # 4. join components by exchanging circuit ends
        a_comp, b_comp = 0, int(comp.max())
        ea = np.argwhere(np.triu(count, 1) * (comp[:, None] == a_comp) > 0)
        eb = np.argwhere(np.triu(count, 1) * (comp[:, None] == b_comp) > 0)
        if not ea.size or not eb.size:  # a server without circuits: splice it into one
            lone = int(np.flatnonzero(comp == (a_comp if not ea.size else b_comp))[0])
            other = eb if not ea.size else ea
            if free[lone] < 2 or not other.size:
                raise InputError("degree", degree, f"enough ports to connect server {lone}")
            (c, e) = other[0]
            free[lone] -= 2
            edits = ((c, e, -1), (c, lone, 1), (lone, e, 1))
        else:
            (a, b), (c, e) = ea[0], eb[0]
            edits = ((a, b, -1), (c, e, -1), (a, c, 1), (b, e, 1))
        for x, y, s in edits:
            count[x, y] += s
            count[y, x] += s
        comp = _components(count)
    u, v = np.nonzero(np.triu(count, 1))
    return np.column_stack([u, v, count[u, v]]).astype(np.int64)
