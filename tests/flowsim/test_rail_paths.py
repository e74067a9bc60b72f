"""Rail routes by switch pairs, and the ECMP path cap (issue 25: rail fabrics at 16,384 GPUs).

The rail routes of :meth:`Network.rail_paths` are built from the rail switches' pairs
(``_rail_paths_by_leaf``) instead of selecting among every path of each server pair
(``_rail_paths_enumerated``, the plain construction); both must give the same paths in the same
order with the same weights. The path cap (``max_paths``) keeps one hashed path per stratum of
equal-cost paths, independent of the other pairs asked.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.fabrics import rail_optimized, routes
from topoopt.fabrics.fat_tree import clos_shape, fat_tree
from topoopt.fabrics.rail import rail_only
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.network import SAME_RAIL, Network
from traffic.errors import InputError
from traffic.workload import Demand, Workload


def _requests(ns, g, n, seed):
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, ns, n), rng.integers(0, ns, n)
    r = rng.integers(-2, g * g, n)  # -1: no rail, -2: same-rail family, else i * g + j
    return u, v, r


@pytest.mark.parametrize(
    "fabric, g",
    [
        (rail_optimized(16, 4, radix=8), 4),  # two tiers
        (rail_optimized(32, 2, radix=8), 2),  # three tiers
        (rail_only(clos_shape(16, 8, pack=True), 4, 1e9), 4),  # no switch joins rails: hops
    ],
)
def test_switch_pair_routes_equal_the_server_pair_selection(fabric, g):
    u, v, r = _requests(fabric.n_servers, g, 300, 1)
    assert (r == -1).any() and (r == SAME_RAIL).any() and (u == v).any()
    fast, k = Network(fabric, gpus_per_server=g).rail_paths(u, v, r)
    plain = Network(fabric, gpus_per_server=g)
    key = np.unique((u * fabric.n_nodes + v) * (g * g + 2) + r + 2)
    pair = key // (g * g + 2)
    ref = plain._rail_paths_enumerated(
        pair // fabric.n_nodes, pair % fabric.n_nodes, key % (g * g + 2) - 2
    )
    assert k.max() < key.size
    for name in ("src", "dst", "commodity_ptr", "path_ptr", "path_links", "weight"):
        assert np.array_equal(getattr(fast, name), getattr(ref, name)), name


def test_path_cap_keeps_one_path_per_stratum_whatever_else_is_asked():
    f = fat_tree(8)  # 16 paths between pods
    pairs = np.array([[0, 127], [0, 1], [5, 120], [64, 3]])
    full = routes(f, "ecmp", pairs=pairs)
    capped = routes(f, "ecmp", pairs=pairs, k=4, seed=0, per_pair=True)
    n_full, n_cap = np.diff(full.commodity_ptr), np.diff(capped.commodity_ptr)
    assert n_full.tolist() == [16, 1, 16, 16] and n_cap.tolist() == [4, 1, 4, 4]
    assert np.allclose(capped.weight, 1.0 / n_cap[capped.path_commodity()])
    # each kept path is one of its pair's paths, and path i of a pair lies in stratum i
    for c in range(pairs.shape[0]):
        all_paths = [
            tuple(full.path_links[full.path_ptr[p] : full.path_ptr[p + 1]])
            for p in range(full.commodity_ptr[c], full.commodity_ptr[c + 1])
        ]
        for i, p in enumerate(range(capped.commodity_ptr[c], capped.commodity_ptr[c + 1])):
            kept = capped.path_links[capped.path_ptr[p] : capped.path_ptr[p + 1]]
            rank = all_paths.index(tuple(kept))
            assert rank * n_cap[c] // n_full[c] == i
    # a pair's sample does not depend on the other pairs asked
    alone = routes(f, "ecmp", pairs=pairs[2:3], k=4, seed=0, per_pair=True)
    assert np.array_equal(alone.path_links, capped.take([2]).path_links)


def test_a_cap_above_every_count_is_exact_and_a_small_one_is_flagged():
    f = fat_tree(4)  # at most 4 paths a pair
    w = Workload(16, 1, (Demand("all-reduce", [list(range(16))], 1e6, "dp", "backward"),))
    exact = communication_time(w, f).total_s
    assert communication_time(w, f, max_paths=4).total_s == exact
    capped = communication_time(w, f, max_paths=1).total_s
    assert capped >= exact  # one path a pair cannot beat the equal split here
    with pytest.raises(InputError, match="max_paths"):
        Network(f, max_paths=0)


def test_simulate_max_paths_option_says_it_is_an_approximation():
    # dlrm's 16 servers x 8 NICs at 800G: a two-tier leaf-spine with two spines, so a pair has
    # one path (same leaf) or two (across): a cap of 1 binds on the pairs across, 2 binds on none
    runner = CliRunner()
    args = ["simulate", "dlrm", "--fabric", "fat-tree", "--link-gbps", "800", "--json"]
    r = runner.invoke(app, [*args, "--max-paths", "1"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["fabric_info"]["tiers"] == 2
    assert doc["paths"]["exact"] is False and doc["paths"]["max_paths"] == 1
    assert doc["paths"]["capped_pairs"] > 0
    assert any("approximation" in x for x in doc["warnings"])
    # a cap at the largest path count does not bind: the result of every path, said exact
    r = runner.invoke(app, [*args, "--max-paths", "2"])
    assert r.exit_code == 0, r.output
    capped = json.loads(r.stdout)
    assert capped["paths"] == {"exact": True, "max_paths": 2, "capped_pairs": 0, "note": None}
    assert not any("approximation" in x for x in capped["warnings"])
    every = json.loads(runner.invoke(app, args).stdout)
    assert capped["iteration_s"] == every["iteration_s"]
    r = runner.invoke(app, ["simulate", "dlrm", "--fabric", "fat-tree", "--max-paths", "0"])
    assert r.exit_code == 2


def test_an_oversubscription_not_built_is_a_warning():
    """dlrm's 16 servers x 8 NICs at 800G: a two-tier leaf-spine whose leaves keep at least one
    uplink each, so 1000:1 asked builds 48:1 (the ratio of the leaves' ports); said on stderr
    and in the JSON, beside ``fabric_info``'s realised ratio. 2:1 is built as asked: silent."""
    runner = CliRunner()
    args = ["simulate", "dlrm", "--fabric", "fat-tree-oversub", "--link-gbps", "800", "--json"]
    doc = json.loads(runner.invoke(app, [*args, "--oversubscription", "1000"]).stdout)
    assert doc["fabric_info"]["tiers"] == 2
    built = doc["fabric_info"]["oversubscription_realised"]
    assert 1 < built < 1000
    assert doc["warnings"] == [
        f"warning: fat-tree-oversub: oversubscription 1000:1 asked, {built:g}:1 built (2 tiers)"
    ]
    doc = json.loads(runner.invoke(app, [*args, "--oversubscription", "2"]).stdout)
    assert doc["fabric_info"]["oversubscription_realised"] == 2 and doc["warnings"] == []
