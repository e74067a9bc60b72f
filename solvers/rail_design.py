"""Design rail-aligned circuits from each rail's traffic (:mod:`topoopt.fabrics.rail_circuits`).

Rail ``k``'s traffic is what GPU ``k`` of every server sends to other servers: the flow model's
rail routing (:class:`topoopt.flowsim.network.Network`) puts it on NIC ``k`` whatever the
destination GPU, so :func:`rail_demands` sums the workload's GPU-level pair traffic
(:func:`traffic.expand.expand`, ring algorithm, NCCL-like rank order) by the source GPU's index
and the two servers. In Megatron layouts with tensor parallelism inside a server, the data- and
pipeline-parallel traffic is GPU ``i`` to GPU ``i``, and every rail's matrix is the same.

The design rule (:func:`design_rail_circuits`), for ``d`` lanes a NIC (``d >= 2``) on the mean
of the rails' symmetrised matrices ``W`` (the same circuits go on every rail, see the fabric's
module docstring; ``RailDesign.rails_identical`` says whether the rails' matrices were equal):

1. **Backbone** (connectivity, 2 lanes): the greedy-edge Hamiltonian cycle of ``W``. Take the
   pairs by ``W`` descending (ties: ``u``, then ``v`` ascending) and keep a pair when both
   servers have a free lane and it joins two fragments (a union-find: no cycle closes early);
   then chain the fragments (paths, or single servers) into one cycle, in the order of their
   smallest server. A data-parallel ring becomes a path of its heaviest edges, and the
   pipeline's sends join the rings.
2. **Fill** (the other ``d - 2`` lanes): (a) one circuit to every pair with traffic and no
   circuit, heaviest first, while both servers have a free lane (direct reach first: a
   pipeline's sends then go direct rather than a data-parallel ring getting parallel
   circuits); (b) then repeatedly the pair with the largest ``W(u, v) / (c(u, v) + 1)`` (``c``:
   its circuits so far) whose two servers have a free lane, until no pair with traffic fits.
   Unused lanes stay dark (still priced).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.fabric import Fabric
from topoopt.fabrics.rail_circuits import BREAKOUTS, rail_circuits
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["RailDesign", "rail_demands", "backbone_cycle", "fill_lanes", "design_rail_circuits",
           "rail_circuits_fabric"]  # fmt: skip


@dataclass(frozen=True)
class RailDesign:
    """One rail's circuits (the same on every rail) and how they were found.

    ``objective``: bytes per iteration of one rail (mean over rails) between servers joined by a
    circuit; ``lower_bound``: that rail's inter-server bytes (every pair joined); ``gap``:
    ``1 - objective / lower_bound`` (the share forwarded over several circuits).
    """

    circuits: Circuits
    rails: int
    ports_per_nic: int
    rails_identical: bool
    status: str
    objective: float
    lower_bound: float
    gap: float
    wall_s: float
    solver: str = "greedy-rail"


def rail_demands(workload: Workload) -> list[sp.csr_matrix]:
    """Bytes per iteration from GPU ``k`` of server ``u`` to server ``v != u``, one ``(n, n)``
    sparse matrix per rail ``k`` (module docstring).

    >>> from traffic.workload import Demand, Workload
    >>> wl = Workload(4, 2, (Demand("send", [[0, 3], [1, 2]], 5.0, "pp", "forward"),))
    >>> [m.toarray().tolist() for m in rail_demands(wl)]
    [[[0.0, 5.0], [0.0, 0.0]], [[0.0, 5.0], [0.0, 0.0]]]
    """
    from traffic.expand import expand

    g, n = workload.gpus_per_server, workload.servers
    pt = expand(workload, "ring", "gpu")
    src, dst, b = np.asarray(pt.src), np.asarray(pt.dst), np.asarray(pt.bytes, float)
    su, sv = src // g, dst // g
    keep = su != sv
    src, su, sv, b = src[keep], su[keep], sv[keep], b[keep]
    out = []
    for k in range(g):
        m = src % g == k
        out.append(sp.csr_matrix((b[m], (su[m], sv[m])), shape=(n, n)))
    return out


def _find(parent: np.ndarray, x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = int(parent[x])
    return x


def backbone_cycle(weights: sp.spmatrix, n: int) -> np.ndarray:
    """The greedy-edge Hamiltonian cycle of the symmetric ``weights`` (module docstring, step 1):
    ``(n, 2)`` rows ``(u, v)``, each server in two of them (``n = 2``: the pair twice).

    >>> w = sp.csr_matrix(([5.0, 4.0, 1.0], ([0, 1, 0], [1, 2, 3])), shape=(4, 4))
    >>> backbone_cycle(w + w.T, 4).tolist()
    [[0, 1], [1, 2], [0, 3], [3, 2]]
    """
    if n < 2:
        raise InputError("servers", n, "at least 2")
    w = sp.triu(sp.csr_matrix(weights), k=1).tocoo()
    order = np.lexsort((w.col, w.row, -w.data))
    deg = np.zeros(n, np.int64)
    parent = np.arange(n)
    adj: list[list[int]] = [[] for _ in range(n)]
    rows: list[tuple[int, int]] = []
    for e in order:
        u, v = int(w.row[e]), int(w.col[e])
        if w.data[e] <= 0 or deg[u] >= 2 or deg[v] >= 2:
            continue
        ru, rv = _find(parent, u), _find(parent, v)
        if ru == rv:
            continue
        parent[max(ru, rv)] = min(ru, rv)
        deg[u] += 1
        deg[v] += 1
        adj[u].append(v)
        adj[v].append(u)
        rows.append((u, v))
    # fragments: paths (two ends of degree 1) or single servers, by their smallest server
    comp = np.array([_find(parent, x) for x in range(n)])
    frags: list[tuple[int, int]] = []
    for c in np.unique(comp):
        ends = np.flatnonzero((comp == c) & (deg < 2))
        frags.append((int(ends[0]), int(ends[-1])))  # a single server: (x, x)
    frags.sort(key=lambda f: min(f))
    if len(frags) == 1 and n == 2 and not rows:
        return np.array([[0, 1], [1, 0]], np.int64)
    for i, (_, end) in enumerate(frags):
        nxt = frags[(i + 1) % len(frags)][0]
        rows.append((end, nxt))
    return np.array(rows, np.int64).reshape(-1, 2)


def fill_lanes(weights: sp.spmatrix, base: np.ndarray, n: int, lanes: int) -> np.ndarray:
    """Step 2 of the module docstring: ``base`` ``(u, v)`` rows plus circuits on the free lanes
    (each server ``lanes`` in all): every pair with traffic once, then by ``W / (c + 1)``.

    >>> w = sp.csr_matrix(([5.0, 1.0], ([0, 2], [1, 3])), shape=(4, 4))
    >>> fill_lanes(w + w.T, np.array([[0, 2], [2, 1], [1, 3], [3, 0]]), 4, 3).tolist()
    [[0, 2], [2, 1], [1, 3], [3, 0], [0, 1], [2, 3]]
    """
    base = np.asarray(base, np.int64).reshape(-1, 2)
    deg = np.bincount(base.ravel(), minlength=n)
    count: dict[tuple[int, int], int] = {}
    for u, v in base.tolist():
        key = (min(u, v), max(u, v))
        count[key] = count.get(key, 0) + 1
    w = sp.triu(sp.csr_matrix(weights), k=1).tocoo()
    extra: list[tuple[int, int]] = []
    order = np.lexsort((w.col, w.row, -w.data))
    for e in order:  # (a) one circuit to every pair with traffic, heaviest first
        u, v = int(w.row[e]), int(w.col[e])
        if w.data[e] > 0 and (u, v) not in count and deg[u] < lanes and deg[v] < lanes:
            extra.append((u, v))
            deg[u] += 1
            deg[v] += 1
            count[(u, v)] = 1
    heap = [  # (b) parallel circuits by bytes per circuit
        (-float(x) / (count.get((int(u), int(v)), 0) + 1), int(u), int(v))
        for u, v, x in zip(w.row, w.col, w.data, strict=True)
        if x > 0
    ]
    heapq.heapify(heap)
    while heap:
        negw, u, v = heapq.heappop(heap)
        if deg[u] >= lanes or deg[v] >= lanes:
            continue
        extra.append((u, v))
        deg[u] += 1
        deg[v] += 1
        c = count.get((u, v), 0) + 1
        count[(u, v)] = c
        heapq.heappush(heap, (negw * c / (c + 1), u, v))
    return np.r_[base, np.array(extra, np.int64).reshape(-1, 2)]


def design_rail_circuits(workload: Workload, ports_per_nic: int) -> RailDesign:
    """One rail's circuits for ``workload`` with ``ports_per_nic`` lanes a NIC (module docstring).

    >>> from traffic.workload import Demand, Workload
    >>> wl = Workload(8, 2, (Demand("all-reduce", [[0, 2, 4, 6], [1, 3, 5, 7]], 8.0, "dp",
    ...                              "backward"),))
    >>> d = design_rail_circuits(wl, 2)
    >>> d.circuits.rows.tolist(), d.rails_identical, d.gap
    ([[0, 1, 1], [0, 3, 1], [1, 2, 1], [2, 3, 1]], True, 0.0)
    """
    t0 = time.perf_counter()
    if ports_per_nic not in BREAKOUTS:
        raise InputError("ports_per_nic", ports_per_nic, f"one of {BREAKOUTS}")
    n, g = workload.servers, workload.gpus_per_server
    dem = rail_demands(workload)
    identical = all((m != dem[0]).nnz == 0 for m in dem[1:])
    mean = sum(dem[1:], dem[0]) / len(dem)
    w = (mean + mean.T).tocsr()
    rows = fill_lanes(w, backbone_cycle(w, n), n, ports_per_nic)
    circ = Circuits(rows, n, degree=ports_per_nic, min_count=1)
    lower = float(mean.sum())
    if circ.rows.size:
        joined = sp.csr_matrix(
            (np.ones(circ.rows.shape[0]), (circ.rows[:, 0], circ.rows[:, 1])), shape=(n, n)
        )
        joined = (joined + joined.T).astype(bool)
        direct = float(mean.multiply(joined).sum())
    else:
        direct = 0.0
    return RailDesign(
        circ, g, ports_per_nic, identical, "feasible", direct, lower,
        0.0 if lower == 0 else max(0.0, 1.0 - direct / lower), time.perf_counter() - t0,
    )  # fmt: skip


def rail_circuits_fabric(
    workload: Workload, ports_per_nic: int, nic_bandwidth: float, **kwargs
) -> tuple[Fabric, RailDesign]:
    """The designed rail-circuits fabric of ``workload`` (one rail per GPU of a server)."""
    design = design_rail_circuits(workload, ports_per_nic)
    fab = rail_circuits(
        design.circuits, workload.servers, rails=workload.gpus_per_server,
        ports_per_nic=ports_per_nic, nic_bandwidth=nic_bandwidth,
        gpus_per_server=workload.gpus_per_server,
        extra_params={"rails_identical": design.rails_identical, "design_gap": design.gap},
        **kwargs,
    )  # fmt: skip
    return fab, design
