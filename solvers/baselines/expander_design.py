"""The expander baseline: a random ``d``-regular graph with shortest-path routing (seeded).

Every ring group runs a virtual ring (its members in index order, both directions) whose steps,
like every fixed transfer, take one random shortest path (:func:`solvers.baselines.topoopt_method.
sample_shortest_paths`). The graph is drawn by :func:`networkx.random_regular_graph`; draws that
are disconnected are redrawn with the next seed (up to 100 times).

Reserved and pre-wired ports (:mod:`solvers.model.problem`): the random regular graph is drawn on
``d_free = min_i free_i`` ports (one less when ``n * d_free`` is odd; none below 2), the pre-wired
circuits are added (:func:`solvers.model.design.merge_prewired`) and the ports still free are paired
at random (:func:`random_fill`, seeded: components joined first, then uniformly random pairs).
"""

from __future__ import annotations

import time

import networkx as nx
import numpy as np

from solvers.baselines.topoopt_method import (
    finish_design,
    require_connected,
    sample_shortest_paths,
)
from solvers.baselines.traffic_input import topoopt_traffic
from solvers.model.design import Design
from solvers.model.ports import merge_prewired
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits, circuit_degrees
from traffic.errors import InputError

__all__ = ["random_regular_circuits", "random_fill", "expander_design"]


def random_regular_circuits(n: int, d: int, seed: int = 0) -> np.ndarray:
    """Circuits ``[u, v, 1]`` of a connected random ``d``-regular simple graph on ``n`` servers.

    Raises
    ------
    InputError
        ``d < 2``, ``d >= n``, ``n * d`` odd, or no connected draw in 100 seeds.

    Examples
    --------
    >>> c = random_regular_circuits(10, 3, seed=1)
    >>> c.shape, np.bincount(c[:, :2].ravel(), minlength=10).tolist() == [3] * 10
    ((15, 3), True)
    """
    if isinstance(d, bool) or int(d) != d or d < 2:
        raise InputError("degree", d, "an integer >= 2")
    if d >= n:
        raise InputError("degree", d, f"fewer ports than servers (< {n}) for a simple graph")
    if (n * d) % 2:
        raise InputError("degree", d, f"n * d even (n={n})")
    for attempt in range(100):
        g = nx.random_regular_graph(int(d), int(n), seed=int(seed) + attempt)
        if nx.is_connected(g):
            e = np.array(sorted((min(a, b), max(a, b)) for a, b in g.edges()), np.int64)
            return np.hstack([e, np.ones((e.shape[0], 1), np.int64)])
    raise InputError("degree", d, "a degree for which a connected random graph can be drawn")


def random_fill(circuits, n: int, budget, pair_cap: int, seed: int = 0) -> np.ndarray:
    """Pair the free ports (``budget - used`` at each server) at random, seeded.

    While the circuit graph has several components and two of them have free ports, a random
    pair across two components is wired (preferring components that keep a free port after
    the join); then random pairs of servers with free ports, never above ``pair_cap`` circuits
    per pair, until no pair can be wired.

    Examples
    --------
    >>> c = random_fill([[0, 1, 1], [2, 3, 1]], 6, 2, 1, seed=0)
    >>> circuit_degrees(c, 6).astype(int).tolist()
    [2, 2, 2, 2, 2, 2]
    """
    cur = Circuits(circuits, n)
    c = cur.rows
    budget = np.broadcast_to(np.asarray(budget, np.int64), (n,))
    free = np.maximum(budget - circuit_degrees(c, n), 0).astype(np.int64)
    rng = np.random.default_rng(seed)
    count = np.zeros((n, n), np.int64)
    count[c[:, 0], c[:, 1]] = c[:, 2]
    added: list[list[int]] = []
    while True:
        idx = np.flatnonzero(free > 0)
        if idx.size < 2:
            break
        a_, b_ = np.triu_indices(idx.size, 1)
        a, b = idx[a_], idx[b_]
        ok = count[a, b] < pair_cap
        if not ok.any():
            break
        k, label = cur.merged(added).components()
        if k > 1:
            cross = ok & (label[a] != label[b])
            if cross.any():
                comp_free = np.bincount(label, weights=free, minlength=k)
                keeps = cross & (comp_free[label[a]] + comp_free[label[b]] - 2 > 0)
                ok = keeps if keeps.any() else cross
        pick = int(rng.choice(np.flatnonzero(ok)))
        x, y = int(a[pick]), int(b[pick])
        count[x, y] += 1
        free[x] -= 1
        free[y] -= 1
        added.append([x, y, 1])
    return cur.merged(added).rows


def expander_design(problem: DesignProblem, seed: int = 0) -> Design:
    """The expander baseline design of ``problem`` (see the module docstring)."""
    t0 = time.perf_counter()
    n = problem.n
    info: dict = {"seed": seed}
    if problem.has_port_options:
        d_r = min(problem.free_degree, n - 1)
        d_r -= (n * d_r) % 2  # a d-regular graph on n nodes needs n * d even
        circuits = random_regular_circuits(n, d_r, seed) if d_r >= 2 else np.zeros((0, 3))
        circuits = merge_prewired(circuits, problem)
        before = int(circuits[:, 2].sum())
        circuits = random_fill(circuits, n, problem.usable_ports(), problem.pair_cap, seed)
        require_connected(problem, Circuits(circuits, n))
        info.update(
            d_free=problem.free_degree,
            random_regular_degree=d_r if d_r >= 2 else 0,
            prewired_circuits=problem.prewired_circuits().total,
            free_ports_filled=int(circuits[:, 2].sum()) - before,
        )
    else:
        circuits = random_regular_circuits(n, problem.degree, seed)
    traffic = topoopt_traffic(problem)
    rings = []
    for j, members in enumerate(traffic.groups):
        fwd = members.tolist()
        for sign, order in ((1, fwd), (-1, fwd[:1] + fwd[1:][::-1])):
            for phase, gi in traffic.refs[j]:
                rings.append(
                    {
                        "phase": phase,
                        "group": int(gi),
                        "members": fwd,
                        "order": order,
                        "stride": sign,
                        "weight": 0.5,
                        "virtual": True,
                    }
                )
    mp = traffic.mp.tocoo()
    keys = set((mp.row.astype(np.int64) * n + mp.col).tolist())
    for r in rings:
        o = r["order"]
        keys |= {a * n + b for a, b in zip(o, o[1:] + o[:1], strict=True)}
    key = np.array(sorted(keys), np.int64)
    circ = Circuits(circuits, n)
    routing = sample_shortest_paths(circ, key // n, key % n, 1, seed, circ.hop_distances())
    return finish_design(problem, circ, rings, routing, "expander", t0, info)
