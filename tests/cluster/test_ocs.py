"""The OCS layer and the port assignment against a brute-force checker on tiny cases."""

from __future__ import annotations

import numpy as np
import pytest
from realisable import brute_force_realisable, unit_edges, valid

from solvers.cluster.ocs import OcsLayer, assign_ports
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError


@pytest.mark.parametrize(("n", "d", "r"), [(8, 2, 4), (10, 3, 4), (432, 8, 144), (7, 4, None)])
def test_layer_units_fit_the_radix(n, d, r):
    layer = OcsLayer.build(n, d, r)
    p = -(-n // (r or n))
    assert layer.units.shape == (d, n)
    assert layer.units_per_plane == p
    sizes = layer.unit_sizes()
    assert sizes.sum(axis=1).tolist() == [n] * d  # every port on exactly one unit
    assert sizes.max() <= (r or n)
    if p > 1 and n // (p * d) > 0:  # boundaries move from plane to plane (cross wiring)
        assert not np.array_equal(layer.units[0], layer.units[1])


def test_layer_refuses_bad_radix():
    with pytest.raises(InputError, match="ocs-radix"):
        OcsLayer.build(8, 2, 1)


def _random_case(rng):
    m = int(rng.integers(3, 6))
    d = int(rng.integers(2, 4))
    units = rng.integers(0, 2, size=(d, m)) if rng.random() < 0.5 else np.zeros((d, m), int)
    e = int(rng.integers(1, 7 if d == 2 else 6))
    pairs = {}
    for _ in range(e):
        u, v = rng.choice(m, 2, replace=False)
        key = (int(min(u, v)), int(max(u, v)))
        pairs[key] = pairs.get(key, 0) + 1
    return [[u, v, c] for (u, v), c in pairs.items()], units


def test_assign_ports_agrees_with_brute_force():
    rng = np.random.default_rng(7)
    seen = {True: 0, False: 0}
    for _ in range(150):
        circuits, units = _random_case(rng)
        truth = brute_force_realisable(circuits, units)
        a = assign_ports(Circuits(circuits, units.shape[1]), units)
        assert a.proven
        assert a.complete == truth, (circuits, units.tolist())
        seen[truth] += 1
        # the coloured circuits obey the model whatever the outcome
        col = a.coloured()
        edges = [(int(u), int(v)) for u, v, _ in col.tolist()]
        assert valid(edges, col[:, 2].tolist(), units.tolist())
        if truth:
            assert sorted(edges) == sorted(unit_edges(circuits))
    assert seen[True] > 20 and seen[False] > 20  # both outcomes exercised


def test_odd_ring_needs_three_planes():
    ring5 = [[i, (i + 1) % 5, 1] for i in range(5)]
    assert not assign_ports(Circuits(ring5, 5), np.zeros((2, 5), int)).complete
    assert assign_ports(Circuits(ring5, 5), np.zeros((3, 5), int)).complete
    ring6 = [[i, (i + 1) % 6, 1] for i in range(6)]
    assert assign_ports(Circuits(ring6, 6), np.zeros((2, 6), int)).complete


def test_budget_exhausted_is_not_a_proof():
    # the Petersen graph on 3 planes: class 2 (needs 4 colours), and no count excludes 3 (15
    # circuits, 3 matchings of 5); with 2 steps the search cannot finish
    import networkx as nx

    pet = [[min(a, b), max(a, b), 1] for a, b in nx.petersen_graph().edges()]
    a = assign_ports(Circuits(pet, 10), np.zeros((3, 10), int), steps=2)
    assert not a.complete and not a.proven
    full = assign_ports(Circuits(pet, 10), np.zeros((3, 10), int))
    assert not full.complete and full.proven


def test_a_count_proves_what_the_budget_did_not():
    # K_{5} on 4 planes: 10 circuits, but a plane holds at most 2 on 5 servers (8 in all); the
    # count proves it when 2 steps of search do not
    k5 = [[u, v, 1] for u in range(5) for v in range(u + 1, 5)]
    a = assign_ports(Circuits(k5, 5), np.zeros((4, 5), int), steps=2)
    assert not a.complete and a.proven and a.steps == 0


def test_a_128_server_topoopt_design_is_coloured_with_8_planes():
    """TopoOpt's 8-port design of dlrm-128 (512 circuits, 8-regular) on one unit per plane: the
    Kempe-chain completion colours every circuit; the colouring is checked edge by edge."""
    from solvers.model.problem import DesignProblem
    from solvers.registry import solve
    from traffic.load import load_workload

    w = load_workload("dlrm-128")
    c = solve(DesignProblem.from_workload(w, 8, 12.5e9), "topoopt").circuits
    units = np.zeros((8, w.servers), int)
    a = assign_ports(c, units)
    assert a.complete and a.port.size == 512
    assert valid(list(zip(a.u.tolist(), a.v.tolist(), strict=True)), a.port.tolist(), units)


def test_a_256_server_job_on_136_port_units_is_coloured_without_a_repair():
    """Issue 24.5, the cluster's colouring at scale: TopoOpt's 8-port design of Llama 3 70B
    (tp 8, pp 4, dp 64) on 256 servers, planes of two 136-port units (the boundaries shifted
    by 16 servers a plane). The backtracking search runs out of steps with 41 circuits
    uncoloured (at its default 20,000 steps, 1.4 s; the old path repaired them); the
    construction it falls back to (a maximum matching per plane, then Kempe flips) colours all
    1,024, checked circuit by circuit (here after 2,000 steps of search, to keep it cheap)."""
    from solvers.baselines.topoopt_method import topoopt_design
    from solvers.model.problem import DesignProblem
    from topoopt.app.api import load_workload

    w = load_workload({
        "model": {"base": "llama3-70b", "global_batch": 512, "seq_len": 4096},
        "parallelism": {"tp": 8, "pp": 4, "dp": 64, "micro_batch_size": 1},
        "cluster": {"servers": 256, "gpus_per_server": 8},
    })  # fmt: skip
    c = topoopt_design(DesignProblem.from_workload(w, 8, 50e9)).circuits
    layer = OcsLayer.build(256, 8, 136)
    assert layer.units_per_plane == 2
    a = assign_ports(c, layer.units, steps=2_000)
    assert a.complete and a.port.size == 1024 and a.steps == 2_000
    assert valid(list(zip(a.u.tolist(), a.v.tolist(), strict=True)), a.port.tolist(), layer.units)


def _search_from_scratch(u, v, allowed, m, d, steps):
    """The search's definition, every count recomputed at every step (the module's keeps them
    up to date incrementally): the open circuit with fewest planes (lowest index on ties) takes
    its lowest plane; a circuit with none or the budget's end backtracks."""
    free = np.ones((m, d), bool)
    port = np.full(u.size, -1)
    best, best_n, n_col, taken, stack = port.copy(), 0, 0, 0, []
    while True:
        open_ = np.flatnonzero(port < 0)
        if open_.size == 0:
            return port.copy(), False, taken
        avail = allowed[:, open_] & free[u[open_]].T & free[v[open_]].T
        j = int(np.argmin(avail.sum(axis=0)))
        if avail[:, j].any() and taken < steps:
            k, cands = int(open_[j]), np.flatnonzero(avail[:, j]).tolist()
            stack.append((k, cands[1:]))
            port[k] = cands[0]
            free[u[k], cands[0]] = free[v[k], cands[0]] = False
            n_col, taken = n_col + 1, taken + 1
            continue
        if n_col > best_n:
            best, best_n = port.copy(), n_col
        if taken >= steps:
            return best, False, taken
        while stack:
            k, rest = stack.pop()
            free[u[k], port[k]] = free[v[k], port[k]] = True
            port[k], n_col = -1, n_col - 1
            rest = [x for x in rest if free[u[k], x] and free[v[k], x]]
            if rest:
                stack.append((k, rest[1:]))
                port[k] = rest[0]
                free[u[k], rest[0]] = free[v[k], rest[0]] = False
                n_col, taken = n_col + 1, taken + 1
                break
        else:
            return best, True, taken


def test_search_keeps_its_counts_as_a_from_scratch_search():
    from solvers.model.list_colouring import _search

    rng = np.random.default_rng(3)
    for _ in range(120):
        m, d = int(rng.integers(3, 16)), int(rng.integers(2, 5))
        e = int(rng.integers(1, m * d // 2 + 2))
        u, v = rng.integers(0, m, e), rng.integers(0, m, e)
        keep = u != v
        u, v = np.minimum(u, v)[keep], np.maximum(u, v)[keep]
        units = rng.integers(0, int(rng.integers(1, 3)), size=(d, m))
        allowed = units[:, u] == units[:, v]
        steps = int(rng.choice([3, 30, 3000]))
        got, want = (
            _search(u, v, allowed, m, d, steps),
            _search_from_scratch(u, v, allowed, m, d, steps),
        )
        assert got[0].tolist() == want[0].tolist() and got[1:] == want[1:]
