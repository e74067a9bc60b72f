"""``min_hop_paths`` batches its sources; its paths are those of one scipy call per source."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

import solvers.routing_lp as rl


def _per_source(n, link_src, link_dst, src, dst, forward=None):
    """The reference: one Dijkstra call per source, each path walked back hop by hop."""
    fwd = np.ones(n, bool) if forward is None else np.asarray(forward, bool)
    head = np.where(fwd[link_dst], link_dst, link_dst + n)
    size = 2 * n
    g = sp.csr_matrix((np.ones(link_src.size), (link_src, head)), shape=(size, size))
    lid = rl.link_lookup(link_src, head, size)
    out = []
    for s, d in zip(src, dst, strict=True):
        t = d if fwd[d] else d + n
        dist, pred = csgraph.shortest_path(
            g, directed=True, unweighted=True, indices=int(s), return_predecessors=True
        )
        if not np.isfinite(dist[t]):
            out.append(None)
            continue
        hops, v = [], t
        while v != s:
            hops.append(int(lid(np.array([pred[v]]), np.array([v]))[0]))
            v = pred[v]
        out.append(hops[::-1])
    return out


@pytest.mark.parametrize("chunk_bytes", [rl.MIN_HOP_CHUNK_BYTES, 1])
def test_batched_paths_equal_per_source_paths(monkeypatch, chunk_bytes):
    monkeypatch.setattr(rl, "MIN_HOP_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(7)
    for t in range(60):
        n = int(rng.integers(2, 30))
        m = int(rng.integers(1, 5 * n))
        ls, ld = rng.integers(0, n, m), rng.integers(0, n, m)
        ls, ld = ls[ls != ld], ld[ls != ld]
        k = int(rng.integers(1, 2 * n))
        s, d = rng.integers(0, n, k), rng.integers(0, n, k)
        fwd = rng.random(n) < 0.7 if t % 2 else None
        got = rl.min_hop_paths(n, ls, ld, s, d, fwd)
        want = _per_source(n, ls, ld, s, d, fwd)
        for g, w, a, b in zip(got, want, s, d, strict=True):
            assert (g is None) == (w is None), (a, b)
            if w is not None:
                assert g.tolist() == w, (a, b)
                # a path: consecutive links, from a to b, fewest hops
                assert len(w) == len(set(w))
