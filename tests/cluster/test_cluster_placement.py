"""Candidate windows against a direct computation on small random free sets."""

from __future__ import annotations

import numpy as np

from solvers.cluster.ocs import OcsLayer
from solvers.cluster.placement import candidate_placements


def naive(free, m, layer, limit):
    f = sorted(int(x) for x in free)
    rows = []
    for k in range(len(f) - m + 1):
        w = f[k : k + m]
        whole = sum(len({int(layer.units[i, s]) for s in w}) == 1 for i in range(layer.degree))
        rows.append((-whole, w[-1] - w[0], w[0], w))
    return [r[3] for r in sorted(rows)[:limit]]


def test_windows_match_a_direct_ranking():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(6, 40))
        layer = OcsLayer.build(n, int(rng.integers(1, 5)), int(rng.integers(2, n + 1)))
        free = np.flatnonzero(rng.random(n) < 0.6)
        m = int(rng.integers(1, 6))
        got = [c.tolist() for c in candidate_placements(free, m, layer, 5)]
        assert got == naive(free, m, layer, 5)
