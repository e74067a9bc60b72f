"""Rank placement reproduces Megatron-core's RankGenerator listings.

Expected lists are written by hand from Megatron's documented rule: in the order string the first
dimension has stride 1 (rank = tp + t*cp + t*cp*ep + t*cp*ep*dp + t*cp*ep*dp*pp for the default
order); group members are listed with the first-named dimension fastest, groups likewise.
"""

import itertools

import numpy as np
import pytest

from traffic.errors import InputError
from traffic.placement import RankGrid, parse_order, rank_grids


def test_default_order_world16_tp2_pp2_dp4():
    g = RankGrid.from_sizes(tp=2, pp=2, dp=4, order="tp-cp-ep-dp-pp")
    assert g.groups("tp").tolist() == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11],
                                       [12, 13], [14, 15]]  # fmt: skip
    assert g.groups("dp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14], [9, 11, 13, 15]]
    assert g.groups("pp").tolist() == [[0, 8], [1, 9], [2, 10], [3, 11], [4, 12], [5, 13],
                                       [6, 14], [7, 15]]  # fmt: skip
    assert g.groups("tp-pp").tolist() == [[0, 1, 8, 9], [2, 3, 10, 11], [4, 5, 12, 13],
                                          [6, 7, 14, 15]]  # fmt: skip
    assert g.groups("cp").tolist() == [[r] for r in range(16)]


def test_dp_outermost_order():
    # rank = tp + 2*pp + 4*dp
    g = RankGrid.from_sizes(tp=2, pp=2, dp=4, order="tp-cp-ep-pp-dp")
    assert g.groups("pp").tolist() == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9, 11],
                                       [12, 14], [13, 15]]  # fmt: skip
    assert g.groups("dp").tolist() == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]]
    assert g.groups("tp").tolist()[:3] == [[0, 1], [2, 3], [4, 5]]


def test_dp_cp_group_and_stage_filter():
    # rank = tp + 2*cp + 4*dp + 8*pp
    g = RankGrid.from_sizes(tp=2, cp=2, dp=2, pp=2)
    assert g.groups("dp-cp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7], [8, 10, 12, 14],
                                          [9, 11, 13, 15]]  # fmt: skip
    assert g.groups("cp").tolist()[:4] == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert g.groups("tp", pp=1).tolist() == [[8, 9], [10, 11], [12, 13], [14, 15]]
    assert g.coordinate("pp").tolist() == [0] * 8 + [1] * 8
    assert g.coordinate("cp").tolist()[:8] == [0, 0, 1, 1, 0, 0, 1, 1]


def test_expert_grid():
    # world 16 = tp2 * dp4 * pp2; expert grid (etp=1, ep=4, edp=2, pp=2): rank = ep + 4*edp + 8*pp
    dense, expert = rank_grids(tp=2, pp=2, dp=4, ep=4, etp=1)
    assert expert.groups("ep").tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                            [12, 13, 14, 15]]  # fmt: skip
    assert expert.groups("dp").tolist() == [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12], [9, 13],
                                            [10, 14], [11, 15]]  # fmt: skip
    assert dense.world == expert.world == 16
    # etp = 2: rank = etp + 2*ep + 4*edp + 8*pp with ep = 2, edp = 2
    _, e2 = rank_grids(tp=2, pp=2, dp=4, ep=2, etp=2)
    assert e2.groups("tp").tolist()[:2] == [[0, 1], [2, 3]]
    assert e2.groups("ep").tolist()[:2] == [[0, 2], [1, 3]]
    assert e2.groups("dp").tolist()[:2] == [[0, 4], [1, 5]]


def _brute_force(sizes: dict, order: list, dims: list) -> list:
    """Second implementation: enumerate coordinates explicitly."""
    names = order
    strides = {}
    acc = 1
    for n in names:
        strides[n] = acc
        acc *= sizes[n]
    rest = [n for n in names if n not in dims]

    def enum(ns):  # first name fastest
        ranges = [range(sizes[n]) for n in reversed(ns)]
        for combo in itertools.product(*ranges):
            yield dict(zip(reversed(ns), combo, strict=True))

    out = []
    for gc in enum(rest):
        row = []
        for mc in enum(dims):
            c = {**gc, **mc}
            row.append(sum(c[n] * strides[n] for n in names))
        out.append(row)
    return out


@pytest.mark.parametrize(
    "sizes,order",
    [
        (dict(tp=2, cp=2, ep=1, dp=3, pp=2), "tp-cp-ep-dp-pp"),
        (dict(tp=4, cp=1, ep=1, dp=2, pp=3), "tp-cp-ep-pp-dp"),
        (dict(tp=2, cp=3, ep=1, dp=2, pp=2), "tp-dp-cp-pp"),
        (dict(tp=1, cp=1, ep=4, dp=2, pp=2), "tp-cp-ep-dp-pp"),
    ],
)
def test_against_brute_force(sizes, order):
    g = RankGrid.from_sizes(order=order, **sizes)
    full = list(parse_order(order))
    for r in range(1, 4):
        for dims in itertools.combinations(["tp", "cp", "ep", "dp", "pp"], r):
            dims = [d for d in full if d in dims]
            got = g.groups("-".join(dims)).tolist()
            assert got == _brute_force(sizes, full, dims)
            assert sorted(np.ravel(got).tolist()) == list(range(g.world))


def test_bad_orders():
    with pytest.raises(InputError, match="parallelism.order"):
        parse_order("tp-xx-pp")
    with pytest.raises(InputError, match="parallelism.order"):
        parse_order("tp-tp-pp")
    with pytest.raises(InputError, match="parallelism.order"):
        RankGrid.from_sizes(tp=2, dp=2, order="tp-pp")
    with pytest.raises(InputError, match="parallelism.ep"):
        rank_grids(tp=2, pp=1, dp=3, ep=4)
