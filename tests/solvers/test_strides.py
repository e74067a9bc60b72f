"""Circulant strides: TotientPerms, the geometric rule, exact distances, the exact optimiser.

Independent derivations: networkx BFS on ``networkx.circulant_graph`` for distances, a brute
force over every coprime stride set for the optimum, the reference table of
shared/reference/topoopt-method.md, and the Moore bound written out by hand.
"""

from __future__ import annotations

import itertools
import json
import math

import networkx as nx
import numpy as np
import pytest
from typer.testing import CliRunner

from solvers.baselines.strides import (
    best_strides,
    canonical_strides,
    circulant_distances,
    circulant_stats,
    coprime_strides,
    geometric_strides,
    moore_layers,
    moore_lower_bound,
    select_permutations,
    totient_perms,
)
from topoopt.app.cli.app import app
from traffic.errors import InputError

# (n, d): strides, diameter, mean hops -- the reference table of topoopt-method.md
REFERENCE = [
    (12, 4, [1, 5], 3, 1.818),
    (16, 4, [1, 5], 4, 2.133),
    (16, 8, [1, 3, 5, 9], 2, 1.467),
    (32, 8, [1, 3, 7, 15], 3, 2.000),
    (128, 4, [1, 13], 10, 5.622),
    (128, 6, [1, 7, 27], 6, 3.669),
    (128, 8, [1, 5, 13, 39], 5, 2.961),
]


def nx_stats(n: int, strides) -> tuple[int, int]:
    """(total distance from node 0, diameter) by networkx BFS."""
    lengths = nx.single_source_shortest_path_length(nx.circulant_graph(n, list(strides)), 0)
    assert len(lengths) == n
    return sum(lengths.values()), max(lengths.values())


# --------------------------------------------------------------------------- candidates
def test_totient_perms_example_of_the_note():
    assert totient_perms(12, 12).tolist() == [1, 5, 7, 11]
    assert totient_perms(12, 4).tolist() == [3, 9]
    assert totient_perms(12).tolist() == [1, 5, 7, 11]


@pytest.mark.parametrize("n", [6, 12, 30, 64, 105])
def test_totient_perms_are_exactly_the_single_cycles(n):
    for g in [x for x in range(1, n + 1) if n % x == 0]:
        got = totient_perms(n, g).tolist()
        assert len(got) == (sum(1 for p in range(1, g) if math.gcd(p, g) == 1) if g > 1 else 0)
        # a stride is a candidate iff i -> i + p visits every position of the coset once
        spacing = n // g
        for p in range(1, g):
            seen, x = set(), 0
            for _ in range(g):
                seen.add(x)
                x = (x + p) % g
            assert ((spacing * p) in got) == (len(seen) == g)


def test_totient_perms_rejects_non_divisor():
    with pytest.raises(InputError, match="g: got 5"):
        totient_perms(12, 5)


@pytest.mark.parametrize("n, d, strides, diam, mean", REFERENCE)
def test_geometric_rule_reference_table(n, d, strides, diam, mean):
    assert geometric_strides(n, d) == strides
    got_diam, got_mean = circulant_stats(n, strides)
    assert got_diam == diam
    assert round(got_mean, 3) == pytest.approx(mean, abs=1e-9)
    total, nx_diam = nx_stats(n, strides)
    assert (nx_diam, total / (n - 1)) == (got_diam, pytest.approx(got_mean))


def test_select_permutations_follows_the_running_value():
    # ratio = (15/1)^(1/4) = 1.968: running values 1, 1.97, 3.87, 7.62 -> 1, 3, 5, 9
    assert select_permutations([1, 3, 5, 7, 9, 11, 13, 15], 4) == [1, 3, 5, 9]
    # a written-out second case: candidates 2..20 step 2, k=2, ratio sqrt(10) = 3.162
    assert select_permutations(range(2, 21, 2), 2) == [2, 8]
    with pytest.raises(InputError, match="k: got 9"):
        select_permutations([1, 3, 5, 7, 9, 11, 13, 15], 9)


# --------------------------------------------------------------------------- distances
@pytest.mark.parametrize("n, strides", [(7, [1]), (10, [1, 3]), (25, [1, 7]), (64, [1, 9, 21])])
def test_distances_equal_networkx(n, strides):
    dist = circulant_distances(n, strides)
    graph = nx.circulant_graph(n, strides)
    for v in range(n):  # vertex-transitive: distances from any node are translates
        lengths = nx.single_source_shortest_path_length(graph, v)
        assert all(dist[(u - v) % n] == h for u, h in lengths.items())


def test_disconnected_stride_set_is_an_input_error():
    assert circulant_distances(6, [2]).tolist() == [0, -1, 1, -1, 1, -1]
    with pytest.raises(InputError, match="strides"):
        circulant_stats(6, [2])


def test_moore_layers_and_bound_by_hand():
    # L1 spheres in Z^2: 1, 4, 8, 12 ; in Z^4: 1, 8, 32, 88, 192
    assert moore_layers(2, 3).tolist() == [1, 4, 8, 12]
    assert moore_layers(4, 4).tolist() == [1, 8, 32, 88, 192]
    # n=128, d=8: 127 others = 8 at 1 + 32 at 2 + 87 at 3 -> diameter >= 3, total >= 333
    diam, mean = moore_lower_bound(128, 8)
    assert diam == 3 and mean == pytest.approx((8 + 64 + 87 * 3) / 127)


def test_canonical_form_is_an_isomorphism_invariant():
    n = 64
    rng = np.random.default_rng(3)
    units = coprime_strides(n)
    for _ in range(20):
        s = sorted(rng.choice(units[units < n // 2], 3, replace=False).tolist())
        u = int(rng.choice(units))
        image = [(u * x) % n for x in s]
        assert canonical_strides(n, s) == canonical_strides(n, image)
        assert nx_stats(n, s) == nx_stats(n, canonical_strides(n, s))


# --------------------------------------------------------------------------- exact optimum
def brute_force(n: int, d: int) -> dict[str, tuple[int, int]]:
    classes = [s for s in range(1, n // 2 + 1) if math.gcd(s, n) == 1 and s < n - s]
    best: dict[str, tuple[int, int]] = {}
    for s in itertools.combinations(classes, d // 2):
        total, diam = nx_stats(n, s)
        for obj, key in (("mean-hops", (total, diam)), ("diameter", (diam, total))):
            if obj not in best or key < best[obj]:
                best[obj] = key
    return best


@pytest.mark.parametrize("n", list(range(5, 41, 1)))
def test_exact_optimum_equals_brute_force(n):
    for d in (2, 4, 6, 8):
        if d // 2 > sum(1 for s in range(1, n) if math.gcd(s, n) == 1 and s < n - s):
            continue
        want = brute_force(n, d)
        for obj in ("mean-hops", "diameter"):
            r = best_strides(n, d, obj)
            assert r.status == "optimal"
            total, diam = nx_stats(n, r.strides)
            assert (total, diam) == (r.total_distance, r.diameter)
            key = (total, diam) if obj == "mean-hops" else (diam, total)
            assert key == want[obj], (n, d, obj, r.strides)
            assert all(math.gcd(s, n) == 1 for s in r.strides)


@pytest.mark.parametrize(
    "d, mean, geo_mean", [(4, 5.354, 5.622), (6, 3.433, 3.669), (8, 2.866, 2.961)]
)
def test_acceptance_n128(d, mean, geo_mean):
    r = best_strides(128, d, "mean-hops")
    assert r.status == "optimal" and r.gap == 0.0
    assert round(r.mean_hops, 3) == mean
    assert round(circulant_stats(128, geometric_strides(128, d))[1], 3) == geo_mean
    assert nx_stats(128, r.strides)[0] == r.total_distance


def test_note_optima_at_n128():
    r4 = best_strides(128, 4, "diameter")
    assert r4.diameter == 8 and r4.strides == (1, 15)
    r8 = best_strides(128, 8, "mean-hops")
    assert r8.strides == (1, 5, 21, 35) and r8.diameter == 4
    assert best_strides(128, 6, "diameter").diameter == 5


def test_time_limit_returns_a_bound():
    r = best_strides(1024, 10, "mean-hops", time_limit_s=0.2)
    assert r.status == "time-limit"
    lb = moore_lower_bound(1024, 10)[1]
    assert r.lower_bound == pytest.approx(lb) and r.mean_hops >= lb and 0 < r.gap < 1
    assert nx_stats(1024, r.strides)[0] == r.total_distance


@pytest.mark.parametrize(
    "args, field",
    [((128, 7), "d"), ((128, 0), "d"), ((2, 2), "n"), ((10, 6), "d"), ((16, 4, "x"), "objective")],
)
def test_bad_input(args, field):
    with pytest.raises(InputError, match=f"^{field}: got"):
        best_strides(*args)


# --------------------------------------------------------------------------- CLI
def test_cli_json_and_errors():
    runner = CliRunner()
    res = runner.invoke(app, ["strides", "128", "8", "--objective", "mean-hops", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["strides"] == [1, 5, 21, 35] and doc["status"] == "optimal"
    assert round(doc["mean_hops"], 3) == 2.866 and doc["diameter"] == 4
    assert doc["geometric"]["strides"] == [1, 5, 13, 39]
    bad = runner.invoke(app, ["strides", "128", "5"])
    assert bad.exit_code == 2
    assert "d: got 5" in bad.stderr


def test_max_sets_is_a_deterministic_limit(monkeypatch):
    """``max_sets`` stops the enumeration between chunks of stride sets, whatever the clock:
    status ``set-limit``, fewer sets than the proof, the same answer twice; the proof's set
    count when it is not reached (issue 30: the joint search's 5 s clock cut 128 servers x 16
    ports on a loaded machine)."""
    import solvers.baselines.strides as st
    from traffic.errors import InputError

    monkeypatch.setattr(st, "_BATCH", 2)  # chunks of 100 sets: several chunks at n = 64
    full = st.best_strides(64, 8, "mean-hops")
    cut = [st.best_strides(64, 8, "mean-hops", max_sets=1) for _ in range(2)]
    assert full.status == "optimal" and full.evaluated == 116
    assert cut[0].status == "set-limit" and 1 <= cut[0].evaluated < full.evaluated
    assert cut[0].to_dict() == {**cut[1].to_dict(), "wall_s": cut[0].to_dict()["wall_s"]}
    assert st.best_strides(64, 8, "mean-hops", max_sets=10**6).evaluated == full.evaluated
    with pytest.raises(InputError, match="max_sets"):
        st.best_strides(64, 8, max_sets=0)


def test_a_set_count_past_the_float_range_is_named_in_the_error():
    """n = 65,536 with 256 ports has C(16383, 127) = 3.44e+321 canonical sets: more than a float
    holds (it overflowed to a traceback); the count is printed from the exact integer."""
    import math
    from decimal import Decimal

    count = math.comb(65536 // 4 - 1, 127)
    assert count > 10**308 and f"{Decimal(count):.2e}" == "3.44e+321"
    with pytest.raises(InputError, match=r"^time_limit_s: got 'none: about 3\.44e\+321 stride"):
        best_strides(65536, 256)
