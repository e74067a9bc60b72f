"""Max-min fair rates: invariants, a second (one level at a time) implementation, warm starts."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from topoopt.flowsim.max_min import fill_rates, max_min_rates
from traffic.errors import InputError


def reference_max_min(paths: list[list[int]], cap: list[float]) -> list[float]:
    """Textbook progressive filling, one water level at a time, in plain Python."""
    rate = [0.0] * len(paths)
    frozen = [False] * len(paths)
    left = list(cap)
    while not all(frozen):
        users = [
            [f for f, p in enumerate(paths) if not frozen[f] and link in p]
            for link in range(len(cap))
        ]
        inc = min(left[link] / len(u) for link, u in enumerate(users) if u)
        for f in range(len(paths)):
            if not frozen[f]:
                rate[f] += inc
        for link, u in enumerate(users):
            left[link] -= inc * len(u)
        for link, u in enumerate(users):
            if u and left[link] <= 1e-12 * cap[link]:
                for f in u:
                    frozen[f] = True
    return rate


def random_case(rng, n_links, n_flows, max_hops):
    cap = rng.choice([1.0, 2.0, 3.0, 5.0, 7.5, 10.0], n_links).tolist()
    paths = [
        sorted(rng.choice(n_links, rng.integers(1, max_hops + 1), replace=False).tolist())
        for _ in range(n_flows)
    ]
    return paths, cap


def incidence(paths, n_links):
    rows = np.repeat(np.arange(len(paths)), [len(p) for p in paths])
    cols = np.concatenate([np.asarray(p) for p in paths])
    return sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(len(paths), n_links))


def check_max_min(paths, cap, rates):
    """Feasible, and every flow has a saturated link on which no flow gets more than it."""
    load = np.zeros(len(cap))
    for p, r in zip(paths, rates, strict=True):
        load[p] += r
    assert np.all(load <= np.asarray(cap) * (1 + 1e-12))
    for f, p in enumerate(paths):
        ok = False
        for link in p:
            saturated = load[link] >= cap[link] * (1 - 1e-12)
            top = max(rates[g] for g, q in enumerate(paths) if link in q)
            ok |= saturated and rates[f] >= top * (1 - 1e-12)
        assert ok, f"flow {f} has no bottleneck link"


@pytest.mark.parametrize("seed", range(60))
def test_agrees_with_level_by_level_filling(seed):
    rng = np.random.default_rng(seed)
    n_links = int(rng.integers(1, 9))
    paths, cap = random_case(rng, n_links, int(rng.integers(1, 15)), min(n_links, 4))
    rates = max_min_rates(incidence(paths, n_links), cap)
    np.testing.assert_allclose(rates, reference_max_min(paths, cap), rtol=1e-12)
    check_max_min(paths, cap, rates.tolist())


def test_known_values():
    # Parking lot on 3 links of 1: the long flow and each short flow get 1/2.
    paths = [[0, 1, 2], [0], [1], [2]]
    np.testing.assert_allclose(max_min_rates(incidence(paths, 3), [1.0] * 3), [0.5] * 4)
    # Link 1 (capacity 1) caps flow 0 at 1; flow 1 takes the rest of link 0 (capacity 10).
    np.testing.assert_allclose(max_min_rates(incidence([[0, 1], [0]], 2), [10.0, 1.0]), [1, 9])
    # Three flows on one link of 9 -> 3 each, whatever their other links.
    inc = incidence([[0, 1], [0, 2], [0]], 3)
    np.testing.assert_allclose(max_min_rates(inc, [9.0, 100.0, 100.0]), [3, 3, 3])


@pytest.mark.parametrize("seed", range(20))
def test_warm_start_after_departure(seed):
    """After a flow leaves, the flows below its rate keep theirs; filling the rest on the
    capacity they leave gives the from-scratch allocation."""
    rng = np.random.default_rng(100 + seed)
    n_links = 6
    paths, cap = random_case(rng, n_links, 12, 3)
    inc = incidence(paths, n_links)
    rates = max_min_rates(inc, cap)
    gone = int(rng.integers(len(paths)))
    rest = [p for f, p in enumerate(paths) if f != gone]
    old = np.delete(rates, gone)
    truth = max_min_rates(incidence(rest, n_links), cap)
    low = old < rates[gone]
    np.testing.assert_allclose(truth[low], old[low], rtol=1e-12)
    inc2 = incidence(rest, n_links)
    kept = np.asarray(inc2[low].T @ old[low]).ravel()
    rows = np.flatnonzero(~low)
    new, left, rounds = fill_rates(
        inc2.indptr.astype(np.int64), inc2.indices.astype(np.int64), rows, np.asarray(cap) - kept
    )
    np.testing.assert_allclose(new, truth[rows], rtol=1e-12)
    assert rounds >= 1 or rows.size == 0
    np.testing.assert_allclose(
        left, np.maximum(cap - np.asarray(inc2.T @ truth).ravel(), 0), atol=1e-9
    )


def test_rounds_fewer_than_levels_on_independent_bottlenecks():
    # 50 separate links with different capacities: 50 distinct rates, all local bottlenecks.
    cap = np.arange(1.0, 51.0)
    inc = incidence([[i] for i in range(50)], 50)
    rates, _, rounds = fill_rates(
        inc.indptr.astype(np.int64), inc.indices.astype(np.int64), np.arange(50), cap
    )
    np.testing.assert_allclose(rates, cap)
    assert rounds == 1


def test_bad_input():
    inc = incidence([[0], [0, 1]], 2)
    with pytest.raises(InputError, match=r"capacity\[1\]: got 0.0"):
        max_min_rates(inc, [1.0, 0.0])
    with pytest.raises(InputError, match="one capacity per link"):
        max_min_rates(inc, [1.0])
    empty_row = sp.csr_matrix((np.ones(1), ([0], [0])), shape=(2, 2))
    with pytest.raises(InputError, match="every flow crosses at least one link"):
        max_min_rates(empty_row, [1.0, 1.0])
