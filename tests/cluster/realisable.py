"""An independent brute-force realisability checker for tiny circuit multigraphs (tests only).

It tries every assignment of planes to the unit circuits (``D ** E`` of them) and accepts one in
which no server uses a plane twice and every circuit's two ports land on one unit of its plane.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np


def unit_edges(circuits) -> list[tuple[int, int]]:
    out = []
    for u, v, c in np.asarray(circuits, np.int64).reshape(-1, 3).tolist():
        out += [(min(u, v), max(u, v))] * c
    return out


def valid(edges, planes, units) -> bool:
    """``planes[k]`` for ``edges[k]`` obeys the wiring model (``units[i][s]``)."""
    seen = set()
    for (u, v), p in zip(edges, planes, strict=True):
        if units[p][u] != units[p][v] or (u, p) in seen or (v, p) in seen:
            return False
        seen.add((u, p))
        seen.add((v, p))
    return True


def brute_force_realisable(circuits, units) -> bool:
    """Whether some plane assignment realises ``circuits`` on ``units`` (``(D, m)``)."""
    units = np.asarray(units).tolist()
    edges = unit_edges(circuits)
    return any(
        valid(edges, p, units) for p in itertools.product(range(len(units)), repeat=len(edges))
    )


def check_cluster_circuits(circuits_by_job: dict, servers_by_job: dict, layer_units) -> None:
    """Assert global circuits ``[u, v, plane, unit]`` obey the OCS layer and stay in their job."""
    units = np.asarray(layer_units)
    used = Counter()
    owner = {}
    for name, servers in servers_by_job.items():
        for s in servers:
            assert s not in owner, f"server {s} in two jobs"
            owner[s] = name
    for name, rows in circuits_by_job.items():
        for u, v, p, unit in rows:
            assert owner[u] == name and owner[v] == name, (name, u, v)
            assert units[p, u] == units[p, v] == unit, (name, u, v, p)
            used[(u, p)] += 1
            used[(v, p)] += 1
    assert max(used.values(), default=0) <= 1, "a port used twice"
