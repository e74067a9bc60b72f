"""The expander baseline: a random ``d``-regular graph with shortest-path routing (seeded).

Every ring group runs a virtual ring (its members in index order, both directions) whose steps,
like every fixed transfer, take one random shortest path (:func:`solvers.topoopt_method.
sample_shortest_paths`). The graph is drawn by :func:`networkx.random_regular_graph`; draws that
are disconnected are redrawn with the next seed (up to 100 times).
"""

from __future__ import annotations

import time

import networkx as nx
import numpy as np

from solvers.design import Design
from solvers.problem import DesignProblem
from solvers.topoopt_method import finish_design, hop_distances, sample_shortest_paths
from solvers.traffic_input import topoopt_traffic
from traffic.errors import InputError

__all__ = ["random_regular_circuits", "expander_design"]


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


def expander_design(problem: DesignProblem, seed: int = 0) -> Design:
    """The expander baseline design of ``problem`` (see the module docstring)."""
    t0 = time.perf_counter()
    n = problem.n
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
    routing = sample_shortest_paths(
        circuits, n, key // n, key % n, 1, seed, hop_distances(circuits, n)
    )
    info = {"seed": seed}
    return finish_design(problem, circuits, rings, routing, "expander", t0, info)
