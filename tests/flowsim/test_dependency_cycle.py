"""``FlowSet.dependency_cycle`` (compiled Kahn) against networkx on random dependency graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from topoopt.flowsim.flowset import FlowSet
from traffic.errors import InputError


def _graph(rng, n, p_back):
    after = []
    for f in range(n):
        k = int(rng.integers(0, 4))
        earlier = rng.integers(0, max(f, 1), k) if f else np.zeros(0, int)
        deps = set(int(x) for x in earlier)
        if rng.random() < p_back:  # a dependency on a later flow: maybe a cycle
            deps.add(int(rng.integers(f, n)))
        deps.discard(f)
        after.append(sorted(deps))
    return after


def test_dependency_cycle_matches_networkx():
    rng = np.random.default_rng(3)
    n_cyclic = 0
    for _ in range(200):
        n = int(rng.integers(2, 40))
        after = _graph(rng, n, p_back=float(rng.choice([0.0, 0.05, 0.2])))
        g = nx.DiGraph()
        g.add_nodes_from(range(n))
        g.add_edges_from((d, f) for f, ds in enumerate(after) for d in ds)
        try:
            fs = FlowSet.single_path(
                [1.0], [0.0], size=[1.0] * n, start=[0.0] * n, paths=[[0]] * n, after=after
            )
        except InputError as e:  # the constructor refuses cycles, naming one
            assert not nx.is_directed_acyclic_graph(g), e
            n_cyclic += 1
            continue
        assert nx.is_directed_acyclic_graph(g)
        assert fs.dependency_cycle() == []
    assert n_cyclic > 20


@pytest.mark.parametrize("n", [2, 5, 50_000])
def test_a_long_chain_closed_into_a_cycle_is_found(n):
    # a chain 0 <- 1 <- ... <- n-1, and 0 waits on n-1: every flow is on the cycle
    dep_ptr = np.arange(n + 1, dtype=np.int64)
    deps = np.concatenate([[n - 1], np.arange(n - 1)]).astype(np.int64)
    fs = object.__new__(FlowSet)
    object.__setattr__(fs, "dep_ptr", dep_ptr)
    object.__setattr__(fs, "deps", deps)
    object.__setattr__(fs, "size", np.ones(n))
    cyc = fs.dependency_cycle()
    assert sorted(cyc) == list(range(n))
    # consecutive members: each waits on the one before it
    for a, b in zip(cyc, cyc[1:] + cyc[:1], strict=True):
        assert a in deps[dep_ptr[b] : dep_ptr[b + 1]]
