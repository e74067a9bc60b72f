"""Expansion of demands into pair matrices: hand-derived templates, then conservation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traffic.errors import InputError
from traffic.expand import ALGORITHMS, expand, gpu_matrix, server_matrix
from traffic.workload import Demand, Workload

S = 1000.0


def one(op, group, algorithm="ring", gps=1, size=S, count=1, gpus=None, **kw):
    group = np.asarray(group)
    gpus = gpus or int(group.max()) + 1
    gpus += (-gpus) % gps
    w = Workload(
        gpus, gps, (Demand(op, group.reshape(1, -1), size, "dp", "backward", count, **kw),)
    )
    return w, gpu_matrix(w, algorithm).toarray()


def test_ring_allreduce_each_sends_2_g_minus_1_over_g_to_successor():
    _, m = one("all-reduce", [0, 1, 2, 3])
    want = np.zeros((4, 4))
    for i in range(4):
        want[i, (i + 1) % 4] = 2 * 3 / 4 * S  # 1500 bytes
    np.testing.assert_allclose(m, want)


def test_ring_uses_ascending_rank_order_and_count():
    _, m = one("reduce-scatter", [3, 0, 2, 1], count=5)
    assert m[0, 1] == m[1, 2] == m[2, 3] == m[3, 0] == 5 * 3 / 4 * S
    assert np.count_nonzero(m) == 4


def test_explicit_ring_order():
    w, _ = one("all-reduce", [0, 1, 2, 3])
    m = expand(w, "ring", orders={0: np.array([[0, 2, 1, 3]])}).matrix().toarray()
    assert m[0, 2] == m[2, 1] == m[1, 3] == m[3, 0] == 1500.0
    with pytest.raises(InputError, match="orders"):
        expand(w, "ring", orders={0: np.array([[0, 2, 1, 1]])})


def test_halving_doubling_power_of_two():
    _, m = one("all-reduce", range(8), "halving-doubling")
    # step j exchanges S/2^j with partner i XOR 8/2^j, once halving and once doubling
    assert m[0, 4] == 2 * S / 2
    assert m[0, 2] == 2 * S / 4
    assert m[0, 1] == 2 * S / 8
    assert m[5, 1] == 2 * S / 2 and m[5, 7] == 2 * S / 4 and m[5, 4] == 2 * S / 8
    assert np.count_nonzero(m) == 8 * 3
    assert m.sum() == 2 * 7 * S


def test_halving_doubling_non_power_of_two_extras():
    _, m = one("all-reduce", range(6), "halving-doubling")
    # core of p=4: step 1 partner i^2 (S), step 2 partner i^1 (S/2); extras 4,5 fold into 0,1
    assert m[0, 2] == S and m[0, 1] == S / 2
    assert m[4, 0] == S and m[0, 4] == S and m[5, 1] == S and m[1, 5] == S
    assert m.sum() == 2 * 5 * S


def test_double_binary_tree_allreduce():
    _, m = one("all-reduce", range(4), "tree")
    # tree 1 (heap): {0,1} {0,2} {1,3}; tree 2 (mirrored heap): {3,2} {3,1} {2,0};
    # each tree edge carries S/2 each way
    want = np.zeros((4, 4))
    for a, b, times in ((0, 1, 1), (0, 2, 2), (1, 3, 2), (2, 3, 1)):
        want[a, b] = want[b, a] = times * S / 2
    np.testing.assert_allclose(m, want)


def test_direct_algorithms():
    _, m = one("all-reduce", range(4), "direct")
    np.testing.assert_allclose(m, (np.ones((4, 4)) - np.eye(4)) * 2 * S / 4)
    _, m = one("all-gather", range(4), "direct")
    np.testing.assert_allclose(m, (np.ones((4, 4)) - np.eye(4)) * S / 4)
    _, m = one("broadcast", [2, 0, 1, 3], "direct")
    assert m[2].tolist() == [S, S, 0, S] and m.sum() == 3 * S


def test_all_to_all_uniform_and_peer_bytes():
    _, m = one("all-to-all", range(4), "ring")  # all-to-all is direct whatever the algorithm
    np.testing.assert_allclose(m, (np.ones((4, 4)) - np.eye(4)) * S / 4)
    pb = np.array([[0, 10, 20], [30, 0, 0], [5, 5, 0]], dtype=float)
    _, m = one("all-to-all", [4, 0, 2], size=30.0, peer_bytes=pb)
    assert m[4, 0] == 10 and m[4, 2] == 20 and m[0, 4] == 30 and m[2, 4] == 5 and m[2, 0] == 5
    assert m.sum() == pb.sum()


def test_broadcast_chain_and_send():
    _, m = one("broadcast", [3, 1, 2], "ring")
    assert m[3, 1] == S and m[1, 2] == S and m.sum() == 2 * S
    _, m = one("send", [5, 2], count=3)
    assert m[5, 2] == 3 * S and m.sum() == 3 * S


def test_hierarchical_two_servers_of_four():
    w, m = one("all-reduce", range(8), "hierarchical", gps=4)
    # intra-server ring reduce-scatter + all-gather: 2 * 3/4 * S to the successor on the server
    assert m[0, 1] == m[3, 0] == m[4, 5] == 2 * 3 / 4 * S
    # inter-server all-reduce of S/4 between the two members with the same local index
    assert m[0, 4] == m[4, 0] == m[1, 5] == 2 * (1 / 2) * S / 4
    srv = server_matrix(w, "hierarchical").toarray()
    np.testing.assert_allclose(srv, [[6 * S, S], [S, 6 * S]])
    assert srv.sum() == 2 * 7 * S


def test_hierarchical_falls_back_to_ring_when_uneven():
    w, m = one("all-reduce", [0, 1, 2, 4], "hierarchical", gps=4, gpus=8)
    _, ring = one("all-reduce", [0, 1, 2, 4], "ring", gps=4, gpus=8)
    np.testing.assert_allclose(m, ring)


def test_server_level_ring_dp_across_servers():
    # DP groups of a tp=2 job on 4 servers of 2 GPUs: ranks {0,2,4,6} and {1,3,5,7}
    groups = np.array([[0, 2, 4, 6], [1, 3, 5, 7]])
    w = Workload(8, 2, (Demand("all-reduce", groups, S, "dp", "backward"),))
    srv = server_matrix(w).toarray()
    want = np.zeros((4, 4))
    for i in range(4):
        want[i, (i + 1) % 4] = 2 * 2 * 3 / 4 * S  # two rings, each 1500 bytes per hop
    np.testing.assert_allclose(srv, want)


def test_bad_algorithm_and_level():
    w, _ = one("all-reduce", range(4))
    with pytest.raises(InputError, match="algorithm"):
        expand(w, "bogus")
    with pytest.raises(InputError, match="level"):
        expand(w, "ring", "rack")


def test_filters():
    groups = np.array([[0, 1]])
    w = Workload(
        2,
        1,
        (
            Demand("all-reduce", groups, S, "dp", "backward"),
            Demand("send", groups, S, "pp", "forward", mutable=False),
        ),
    )
    assert gpu_matrix(w, classes=["pp"]).sum() == S
    assert gpu_matrix(w, mutable=True).sum() == 2 * S
    assert gpu_matrix(w, phases=["forward"]).sum() == S


ops = st.sampled_from(["all-reduce", "reduce-scatter", "all-gather", "all-to-all", "broadcast"])


@settings(max_examples=150, deadline=None)
@given(
    op=ops,
    algorithm=st.sampled_from(ALGORITHMS),
    g=st.integers(1, 17),
    n_groups=st.integers(1, 4),
    gps=st.sampled_from([1, 2, 4, 8]),
    size=st.floats(0, 1e9, allow_nan=False),
    count=st.integers(0, 7),
    seed=st.integers(0, 2**32 - 1),
)
def test_bytes_conserved_demand_to_gpu_to_server(
    op, algorithm, g, n_groups, gps, size, count, seed
):
    rng = np.random.default_rng(seed)
    gpus = 64
    groups = np.stack([rng.permutation(gpus)[:g] for _ in range(n_groups)])
    d = Demand(op, groups, size, "tp", "forward", count)
    w = Workload(gpus, gps, (d,))
    pairs = expand(w, algorithm)
    assert (pairs.bytes >= 0).all()
    assert (pairs.src != pairs.dst).all()
    expected = d.wire_bytes()
    assert pairs.total() == pytest.approx(expected, rel=1e-12, abs=1e-6)
    gm, sm = gpu_matrix(w, algorithm), server_matrix(w, algorithm)
    assert gm.sum() == pytest.approx(expected, rel=1e-12, abs=1e-6)
    assert sm.sum() == pytest.approx(expected, rel=1e-12, abs=1e-6)
    assert sm.shape == (gpus // gps, gpus // gps)


def test_ordered_family_keeps_its_row_order():
    groups = np.array([[0, 2, 1, 3]])
    w = Workload(4, 1, (Demand("all-reduce", groups, S, "dp", "backward", ordered=True),))
    m = gpu_matrix(w).toarray()
    assert m[0, 2] == m[2, 1] == m[1, 3] == m[3, 0] == 1500.0
    assert np.count_nonzero(m) == 4
