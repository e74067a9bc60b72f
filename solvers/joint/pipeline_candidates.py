"""Pipeline candidates: circuits along a pipeline's stage chain plus the data-parallel partners.

A pipeline-parallel plan sends activations between consecutive stages only: the fixed
(model-parallel) traffic of every server goes to at most two partners, and those pairs form one
chain per data-parallel replica. The gradient all-reduces run across the chains (the servers of
one stage in every replica). :func:`pipeline_candidates` builds, from the chains
(:func:`stage_chains`), for each ``a = 1 .. degree / 2``:

- ``a`` circuits on every hop of every chain, the chain left open or closed into a ring (its
  two ends joined: the first and last stages share the tied embeddings' all-reduce);
- the ports left to the ring groups, heaviest ring bytes first: a group of two gets every port
  its members have left (circuits to the data-parallel partner), a larger group as many rings
  along its members as their free ports allow;
- the free ports filled (:func:`solvers.model.ports.fill_free_ports`).

The hand design of issue 29 (gpt3-175b-32 at 4 ports: one circuit to each pipeline neighbour,
two to the data-parallel partner) is ``a = 1``, open.

Examples
--------
Two replicas of a three-stage pipeline on six servers (stage ``s`` of replica ``r`` on server
``2 s + r``), 4 ports: one circuit per hop, two to each partner, the ends' free ports filled.

>>> import numpy as np, scipy.sparse as sp
>>> from solvers.model.problem import DesignProblem, PhaseTraffic
>>> fx = sp.coo_matrix(([1e9] * 4, ([0, 2, 1, 3], [2, 4, 3, 5])), shape=(6, 6)).tocsr()
>>> ph = PhaseTraffic("x", [0, 2, 4, 6], [0, 1, 2, 3, 4, 5], [1e9] * 3, fx)
>>> p = DesignProblem(6, 4, 1e9, (ph,))
>>> stage_chains(p)
[[0, 2, 4], [1, 3, 5]]
>>> nm, c = pipeline_candidates(p)[0]
>>> nm, c.tolist()
('pipeline x1 (open) + 2 ports to the ring groups', [[0, 1, 3], [0, 2, 1], [1, 3, 1], \
[2, 3, 2], [2, 4, 1], [3, 5, 1], [4, 5, 3]])
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits

__all__ = ["stage_chains", "pipeline_candidates"]


def stage_chains(problem: DesignProblem) -> list[list[int]] | None:
    """The pipeline chains of ``problem``'s fixed traffic, each in stage order from its lower
    end; ``None`` unless every server with fixed traffic has at most two fixed partners, the
    pairs form simple paths (no cycles), and at least one path has three or more servers."""
    from solvers.baselines.traffic_input import topoopt_traffic

    mp = sp.csr_matrix(topoopt_traffic(problem).mp)
    sym = ((mp + mp.T) > 0).astype(np.int64).tocsr()
    sym.setdiag(0)
    sym.eliminate_zeros()
    deg = np.diff(sym.indptr)
    if sym.nnz == 0 or deg.max() > 2:
        return None
    n_comp, label = connected_components(sym, directed=False)
    chains = []
    for comp in range(n_comp):
        members = np.flatnonzero(label == comp)
        if members.size < 2:
            continue
        ends = members[deg[members] == 1]
        if ends.size != 2:
            return None  # a cycle: not a pipeline's chain
        order, prev, cur = [int(ends.min())], -1, int(ends.min())
        while len(order) < members.size:
            nxt = [int(j) for j in sym.indices[sym.indptr[cur] : sym.indptr[cur + 1]] if j != prev]
            prev, cur = cur, nxt[0]
            order.append(cur)
        chains.append(order)
    if not chains or max(len(c) for c in chains) < 3:
        return None
    return sorted(chains)


def _add(free: np.ndarray, rows: list, i: int, j: int, k: int) -> None:
    free[i] -= k
    free[j] -= k
    rows.append([min(i, j), max(i, j), k])


def pipeline_candidates(problem: DesignProblem) -> list[tuple[str, np.ndarray]]:
    """The pipeline constructions (module docstring), ``(name, circuits)``; empty unless the
    problem has stage chains (:func:`stage_chains`) and no port options."""
    from solvers.baselines.traffic_input import topoopt_traffic
    from solvers.model.ports import fill_free_ports

    if problem.has_port_options:
        return []
    chains = stage_chains(problem)
    if chains is None:
        return []
    n, d, cap = problem.n, problem.degree, problem.pair_cap
    traffic = topoopt_traffic(problem)
    by_bytes = sorted(range(len(traffic.groups)), key=lambda g: (-traffic.ring_bytes[g], g))
    out = []
    for a in range(1, d // 2 + 1):
        for closed in (False, True):
            if a > cap or (closed and all(len(ch) < 3 for ch in chains)):
                continue
            free = np.full(n, d, np.int64)
            rows: list[list[int]] = []
            for ch in chains:
                hops = list(zip(ch[:-1], ch[1:], strict=True))
                if closed and len(ch) >= 3:
                    hops.append((ch[-1], ch[0]))
                for i, j in hops:
                    _add(free, rows, i, j, a)
            for g in by_bytes:
                m = traffic.groups[g]
                if m.size == 2:
                    k = min(int(free[m[0]]), int(free[m[1]]), cap)
                    if k > 0:
                        _add(free, rows, int(m[0]), int(m[1]), k)
                    continue
                k = min(int(free[m].min()) // 2, cap)
                if k > 0:
                    for i, j in zip(m, np.roll(m, -1), strict=True):
                        _add(free, rows, int(i), int(j), k)
            c = Circuits(rows, n).rows
            if c.size and c[:, 2].max() > cap:
                continue
            c = fill_free_ports(c, n, d, traffic.mp, cap)
            shape = "closed" if closed else "open"
            out.append((f"pipeline x{a} ({shape}) + {d - 2 * a} ports to the ring groups", c))
    return out
