"""The optical layer of a hybrid fabric designed over a given electrical fabric."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.hybrid_design import (
    HybridDesign,
    build_electrical,
    electrical_spec,
    evaluate_hybrid,
    hybrid_design,
    hybrid_lower_bound,
    route_hybrid,
)
from solvers.model.problem import DesignProblem, PhaseTraffic
from solvers.realise import design_workload
from topoopt.fabrics.fat_tree import fat_tree, leaf_spine
from topoopt.fabrics.hybrid import add_optical_layer
from topoopt.fabrics.torus import torus
from topoopt.flowsim.collectives import communication_time
from traffic.errors import InputError
from traffic.workload import Demand, Workload

B = 1e9  # bytes/s of every electrical and optical port
S = 1e9  # bytes


def permutation_workload(n=8, shift=4):
    pairs = np.column_stack([np.arange(n), (np.arange(n) + shift) % n])
    return Workload(n, 1, (Demand("send", pairs, S, "mp", "forward", mutable=False),))


def two_leaves(n=8, latency=0.0):
    # n/2 servers per leaf, one uplink per leaf: 4:1 oversubscribed for n = 8
    return leaf_spine(n, 4.0, leaf_hosts=n // 2, port_bandwidth=B, latency=latency)


def mixed_workload(n=8):
    # an embedding all-to-all (fixed) and a data-parallel all-reduce (mutable ring)
    r = np.arange(n)[None]
    return Workload(
        n,
        1,
        (
            Demand("all-to-all", r, 16e6, "mp", "forward", mutable=False),
            Demand("all-reduce", r, 64e6, "dp", "backward"),
        ),
    )


@pytest.fixture(scope="module")
def mixed():
    w = mixed_workload()
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    e = two_leaves()
    return w, p, e, hybrid_design(p, e, 2, time_limit_s=20)


def hop_loads(design: HybridDesign, problem: DesignProblem) -> float:
    """A second, minimal evaluation: walk the node paths hop by hop on the networkx view."""
    g = design.fabric().to_networkx()
    n = problem.n
    routes = {
        (int(s), int(t)): paths
        for s, t, paths in zip(design.routing.src, design.routing.dst,
                               design.routing.to_lists(), strict=True)
    }  # fmt: skip
    total = 0.0
    for ph in problem.phases:
        demand = {}
        fx = ph.fixed.tocoo()
        for s, t, b in zip(fx.row, fx.col, fx.data, strict=True):
            demand[(int(s), int(t))] = demand.get((int(s), int(t)), 0.0) + b
        for r in design.rings:
            if r["phase"] != ph.name:
                continue
            o = r["order"]
            for a, b2 in zip(o, o[1:] + o[:1], strict=True):
                rb = ph.ring_bytes[r["group"]] * r["weight"]
                demand[(a, b2)] = demand.get((a, b2), 0.0) + rb
        load: dict[tuple[int, int], float] = {}
        for (s, t), byts in demand.items():
            assert s < n and t < n
            for nodes, w in routes[(s, t)]:
                for u, v in zip(nodes, nodes[1:], strict=False):
                    load[(u, v)] = load.get((u, v), 0.0) + byts * w
        total += max(x / g.edges[e]["capacity"] for e, x in load.items())
    return total


# --------------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("d", [1, 2])
def test_permutation_across_an_oversubscribed_cut(d):
    # 4 servers per leaf each send S to the other leaf. Across the cut each way: one uplink (B)
    # plus 4 servers x d optical ports (B each), so T >= 4S / ((4d + 1) B); the circuits
    # (i, i + 4) x d with each server sending S/(4d+1) electrically attain it.
    w = permutation_workload()
    p = DesignProblem.from_workload(w, degree=d, link_bandwidth=B)
    e = two_leaves()
    des = hybrid_design(p, e, d, time_limit_s=10)
    want = 4 * S / ((4 * d + 1) * B)
    assert des.objective_s == pytest.approx(want, rel=1e-6)
    assert des.lower_bound_s == pytest.approx(want, rel=1e-6)
    assert des.info["electrical_only_s"] == pytest.approx(4 * S / B, rel=1e-6)
    assert des.status == "optimal"
    assert int(des.port_usage().max()) <= d
    # the flow model: one phase of fluid flows sharing links evenly -> the same time
    f = des.fabric()
    t = communication_time(w, f, routing=des.routing_pathset(f)).total_s
    assert t == pytest.approx(want, rel=1e-6)


def test_all_reduce_reaches_the_nic_bound():
    # a ring all-reduce over 8 servers: every member sends 2 (n-1)/n S_ar whatever the ring; with
    # the NIC (B) and d = 2 optical ports (2B) the time cannot beat 2 (n-1)/n S_ar / (3B), and rings
    # along the circuits plus the electrical ring attain it
    n, s_ar = 8, 64e6
    w = Workload(n, 1, (Demand("all-reduce", np.arange(n)[None], s_ar, "dp", "backward"),))
    p = DesignProblem.from_workload(w, degree=2, link_bandwidth=B)
    des = hybrid_design(p, two_leaves(), 2, time_limit_s=10)
    want = 2 * (n - 1) / n * s_ar / (3 * B)
    assert des.objective_s == pytest.approx(want, rel=1e-6)
    f = des.fabric()
    t = communication_time(design_workload(w, des, p), f, routing=des.routing_pathset(f)).total_s
    assert t == pytest.approx(want, rel=1e-6)


def test_electrical_only_is_the_uplink_time():
    w = permutation_workload()
    p = DesignProblem.from_workload(w, degree=1, link_bandwidth=B)
    des = hybrid_design(p, two_leaves(), 0, time_limit_s=5)
    assert des.circuits.rows.shape == (0, 3)
    assert des.objective_s == pytest.approx(4 * S / B, rel=1e-9)  # 4S over one uplink
    f = des.fabric()
    assert f.family == "leaf-spine"
    assert communication_time(w, f, routing=des.routing_pathset(f)).total_s == pytest.approx(
        4 * S / B, rel=1e-9
    )


# --------------------------------------------------------------------------- invariants
def test_no_worse_than_both_baselines_and_within_the_port_budget(mixed):
    w, p, e, des = mixed
    base = des.info["baselines_s"]
    assert set(base) == {"circulant", "topoopt"}
    assert des.objective_s <= min(base.values()) * (1 + 1e-9)
    # the circulant baseline rebuilt independently (add_optical_layer's default circuits, as
    # hybrid() builds them) and routed: the design is no worse
    circ = add_optical_layer(e, 2, None, B, latency=0.0)
    assert int((circ.link_kind == "optical").sum()) == 16  # 8 circuits of the stride-1 ring
    assert route_hybrid(p, circ).time_s >= des.objective_s * (1 - 1e-9)
    deg = des.port_usage()
    assert deg.max() <= 2 and deg.sum() == 2 * des.circuits.total
    f = des.fabric()
    assert int(f.server_optical_ports.max()) == 2  # the fabric validates its own port budget
    assert des.lower_bound_s <= des.objective_s + 1e-15
    assert des.info["electrical_only_s"] > des.objective_s


def test_objective_matches_a_second_evaluation(mixed):
    _, p, _, des = mixed
    assert hop_loads(des, p) == pytest.approx(des.objective_s, rel=1e-9)
    assert des.evaluate(p).sum() == pytest.approx(des.objective_s, rel=1e-9)


def test_routing_is_valid_on_the_combined_fabric(mixed):
    _, p, _, des = mixed
    f = des.fabric()
    edges = set(zip(f.src.tolist(), f.dst.tolist(), strict=True))
    r = des.routing
    for s, t, paths in zip(r.src.tolist(), r.dst.tolist(), r.to_lists(), strict=True):
        assert sum(w for _, w in paths) == pytest.approx(1.0, abs=1e-9)
        for nodes, w in paths:
            assert w > 0 and nodes[0] == s and nodes[-1] == t
            assert all((a, b) in edges for a, b in zip(nodes, nodes[1:], strict=False))
    # every pair with bytes is routed (fixed all-to-all and the ring steps)
    have = set(zip(r.src.tolist(), r.dst.tolist(), strict=True))
    assert {(a, b) for a in range(8) for b in range(8) if a != b} <= have
    for ring in des.rings:
        assert sorted(ring["order"]) == ring["members"]
    ps = des.routing_pathset(f)
    assert np.allclose(np.bincount(ps.path_commodity(), ps.weight), 1.0)


def test_json_round_trip(mixed, tmp_path):
    _, p, _, des = mixed
    text = des.to_json()
    back = HybridDesign.from_json(text)
    assert back.to_json() == text
    d = json.loads(text)
    keys = "servers degree link_bandwidth circuits rings routing solver status objective_s"
    keys += " lower_bound_s gap wall_s electrical"
    assert set(keys.split()) <= set(d)
    a, b = des.fabric(), back.fabric()
    for attr in ("src", "dst", "capacity", "link_kind"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr))
    pa, pb = des.routing_pathset(a), back.routing_pathset(b)
    assert np.array_equal(pa.path_links, pb.path_links) and np.allclose(pa.weight, pb.weight)
    with pytest.raises(InputError, match="electrical"):
        HybridDesign.from_json(json.dumps({k: v for k, v in d.items() if k != "electrical"}))
    with pytest.raises(InputError, match="JSON"):
        HybridDesign.from_json("{not json")


def test_deterministic(mixed):
    _, p, e, des = mixed
    again = hybrid_design(p, e, 2, time_limit_s=20)
    a, b = json.loads(des.to_json()), json.loads(again.to_json())
    for x in (a, b):
        x.pop("wall_s")
        x["info"].pop("time_limit_s")
    assert a == b
    assert a["info"]["deterministic"] and a["info"]["stopped_by"] == "local optimum"


def _same(a: HybridDesign, b: HybridDesign) -> bool:
    x, y = json.loads(a.to_json()), json.loads(b.to_json())
    for z in (x, y):
        z.pop("wall_s")
        z["info"].pop("time_limit_s")
    return x == y


def _permutation_problem(d=2):
    return DesignProblem.from_workload(permutation_workload(), degree=d, link_bandwidth=B)


def test_generous_clocks_give_the_same_routing():
    """The LPs are bounded by work, not by the clock: two generous wall-clock limits (10 s and
    an hour) give the same circuits, rings and routing, at the closed-form optimum of the
    permutation across the 4:1 cut (4 S / (9 B) for d = 2), and no limit stopped an LP."""
    p = _permutation_problem()
    a = hybrid_design(p, two_leaves(), 2, time_limit_s=10.0)
    b = hybrid_design(p, two_leaves(), 2, time_limit_s=3600.0)
    assert _same(a, b)
    assert np.array_equal(a.routing.weight, b.routing.weight)
    assert a.objective_s == pytest.approx(4 * S / (9 * B), rel=1e-6)
    assert b.info["lp_limits"] == [] and b.info["deterministic"]
    assert 0 < b.info["work_used"] < b.info["work_limit"]


def test_tiny_work_limit_gives_a_deterministic_fallback():
    """A work limit too small for any LP: every path LP stops at its work-derived iteration
    limit (one iteration) and takes the deterministic fall-back split, the search stops on work
    (not the clock), and the design is flagged deterministic and is the same twice under
    different clocks. The fall-back is a valid design, no better than the optimum 4 S / (9 B),
    and its objective is recomputed exactly from its own routing."""
    p = _permutation_problem()
    a = hybrid_design(p, two_leaves(), 2, time_limit_s=10.0, work_limit=1e-6)
    b = hybrid_design(p, two_leaves(), 2, time_limit_s=3600.0, work_limit=1e-6)
    assert _same(a, b)
    assert a.info["stopped_by"] == "work limit" and a.info["deterministic"]
    assert a.info["lp_limits"] == ["work"] and a.info["moves_tried"] == 0
    assert a.info["path_lp_status"].startswith("fallback (limit, work limit): ")
    assert a.objective_s >= 4 * S / (9 * B) * (1 - 1e-9)
    assert a.objective_s == pytest.approx(float(a.evaluate(p).sum()), rel=1e-12)


def test_time_limit_cut_is_reported(mixed, monkeypatch):
    """A clock that has always run out: the search stops before its first move and says so."""
    import solvers.hybrid_design as hd

    _, p, e, _ = mixed
    real = time.perf_counter
    calls = iter(range(10**6))

    def clock():  # the start time is real; every later reading is an hour on
        return real() + (3600.0 if next(calls) > 0 else 0.0)

    monkeypatch.setattr(hd.time, "perf_counter", clock)
    des = hd.hybrid_design(p, e, 2, time_limit_s=20)
    assert not des.info["deterministic"] and des.info["stopped_by"] == "time limit"
    assert des.info["moves_tried"] == 0


def test_path_lp_without_a_solution_splits_over_every_walk(monkeypatch):
    """The path LP cut by its clock before any solution (DLRM at 512 servers): the fall-back
    splits each pair over its candidate walks instead of putting it on its first (a leaf's
    whole traffic on one spine). The permutation across the 4:1 cut with circuits (i, i + 4):
    half of each pair on its circuit (S/2 at B: 0.5 s), half over the one uplink (4 x S/2 at B:
    2 s), against 4 S / B all on the switches; the flow model agrees."""
    from types import SimpleNamespace

    import solvers.hybrid_design as hd

    w = permutation_workload()
    p = DesignProblem.from_workload(w, degree=1, link_bandwidth=B)
    f = add_optical_layer(two_leaves(), 1, [[i, i + 4, 1] for i in range(4)], B)
    monkeypatch.setattr(
        hd,
        "solve_matrix_program",
        lambda *a, **k: SimpleNamespace(x=None, status="limit", limit="time", work=0.0),
    )
    r = route_hybrid(p, f, time_limit=1.0, arc_lp_max_columns=0)
    assert r.status == "fallback (limit, time limit): every walk" and r.limit == "time"
    assert r.time_s == pytest.approx(2 * S / B, rel=1e-9)
    assert communication_time(w, f, routing=r.paths).total_s == pytest.approx(2 * S / B)


# --------------------------------------------------------------------------- bounds and specs
def test_lower_bound_by_hand():
    # server 0 sends 6 bytes to 1 (same leaf) and 3 to 4 (other leaf); 1 byte/s everywhere, d=1.
    # server bound: 9 / (1 + 1) = 4.5; cut of leaf {0..3}: 3 / (1 uplink + 4 optical) = 0.6
    D = sp.csr_matrix(([6.0, 3.0], ([0, 0], [1, 4])), shape=(8, 8))
    p = DesignProblem(8, 1, 1.0, (PhaseTraffic("p", [0], [], [], D),))
    e = leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=1.0)
    assert hybrid_lower_bound(p, e, 1, 1.0).tolist() == pytest.approx([4.5])
    # a ring over {0, 4} crosses the cut once each way: ring bytes 10 -> 10 / 5 = 2 < 10 / 2
    p2 = DesignProblem(8, 1, 1.0, (PhaseTraffic("p", [0, 2], [0, 4], [10.0],
                                                sp.csr_matrix((8, 8))),))  # fmt: skip
    assert hybrid_lower_bound(p2, e, 1, 1.0).tolist() == pytest.approx([5.0])
    # 8 servers all-to-all 1 byte each: leaf cut 16 bytes / (1 + 4 d) vs server 7 / (1 + d)
    A = sp.csr_matrix(np.ones((8, 8)) - np.eye(8))
    p3 = DesignProblem(8, 1, 1.0, (PhaseTraffic("p", [0], [], [], A),))
    assert hybrid_lower_bound(p3, e, 0, 1.0).tolist() == pytest.approx([16.0])
    assert hybrid_lower_bound(p3, e, 3, 1.0).tolist() == pytest.approx([max(16 / 13, 7 / 4)])


def test_electrical_spec_round_trips():
    for f in (
        leaf_spine(40, 3.0, radix=16, port_bandwidth=B),
        leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=B, latency=0.0, gpus_per_server=4),
        fat_tree(4, 12, oversubscription=2.0),
    ):
        g = build_electrical(electrical_spec(f))
        assert np.array_equal(g.src, f.src) and np.array_equal(g.capacity, f.capacity)
        assert g.gpus_per_server == f.gpus_per_server


def test_bad_input():
    w = permutation_workload()
    p = DesignProblem.from_workload(w, degree=1, link_bandwidth=B)
    e = two_leaves()
    with pytest.raises(InputError, match="optical_degree"):
        hybrid_design(p, e, -1)
    with pytest.raises(InputError, match="optical_bandwidth"):
        hybrid_design(p, e, 1, optical_bandwidth=0.0)
    with pytest.raises(InputError, match="electrical.servers"):
        hybrid_design(p, leaf_spine(16, 4.0, leaf_hosts=4), 1)
    with pytest.raises(InputError, match="electrical"):
        hybrid_design(p, torus("2x4"), 1)
    with pytest.raises(InputError, match="electrical.family"):
        hybrid_design(p, {"family": "dragonfly", "servers": 8}, 1)
    with pytest.raises(InputError, match="time_limit_s"):
        hybrid_design(p, e, 1, time_limit_s=0)


# --------------------------------------------------------------------------- large path LPs
def _cut_with_circuits(d=1):
    """The permutation across the 4:1 cut with the circuits (i, i + 4) x d: its optimum
    4 S / ((4 d + 1) B) (each server sends S / (4 d + 1) over the switches, the rest direct)."""
    p = _permutation_problem(d)
    c = [[i, i + 4, d] for i in range(4)]
    return p, add_optical_layer(two_leaves(), d, c, B)


def test_first_order_path_lp_is_near_the_lp_optimum_and_deterministic(monkeypatch):
    """A path LP too large for the simplex within its work limit goes to the first-order
    method (forced here on a small one): within 1 % of the closed-form optimum that GLOP
    reaches, never below it, the same weights twice, no limit flagged."""
    import solvers.hybrid_design as hd

    p, f = _cut_with_circuits()
    want = 4 * S / (5 * B)
    exact = route_hybrid(p, f, arc_lp_max_columns=0, work_limit=np.inf)
    assert exact.solver == "glop" and exact.time_s == pytest.approx(want, rel=1e-6)
    monkeypatch.setattr(hd, "_first_order_steps", lambda *a: 200)
    a = route_hybrid(p, f, arc_lp_max_columns=0, time_limit=10.0)
    b = route_hybrid(p, f, arc_lp_max_columns=0, time_limit=3600.0)
    assert a.solver == "first-order" and a.status.startswith("first-order (200 steps from ")
    assert a.limit == "" and a.work > 0
    assert want * (1 - 1e-9) <= a.time_s <= want * 1.01
    assert np.array_equal(a.paths.weight, b.paths.weight)
    assert np.array_equal(a.paths.path_links, b.paths.path_links)
    # the recomputed time of its own walks
    assert a.time_s == pytest.approx(float(evaluate_hybrid(p, f, a.paths, a.rings).sum()))


def test_a_shared_electrical_table_gives_the_same_candidates():
    """The two ring options of a large routing share one table of electrical ECMP paths (a key
    asked with k_ecmp paths serves a via's leg with its first path): the candidates equal those
    built alone, walk for walk."""
    import solvers.hybrid_design as hd

    f = add_optical_layer(leaf_spine(8, 1.0, leaf_hosts=4, port_bandwidth=B), 2,
                          [[0, 4, 1], [1, 5, 1], [0, 1, 1], [4, 5, 1], [2, 6, 2], [3, 7, 2]],
                          B)  # fmt: skip
    a_src, a_dst = np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7])
    b_src, b_dst = np.array([0, 4, 2]), np.array([5, 1, 3])
    needs = [hd._electrical_needs(f, s, t, 8, 8) for s, t in ((a_src, a_dst), (b_src, b_dst))]
    keys = np.concatenate([k for k, _ in needs])
    k_of = np.concatenate([k for _, k in needs])
    order = np.argsort(-k_of, kind="stable")
    el = hd._electrical_walks(f, keys[order], k_of[order])
    assert len(el) == np.unique(keys).size
    for s, t in ((a_src, a_dst), (b_src, b_dst)):
        alone = hd._candidate_paths(f, s, t, 8, 8)
        shared = hd._candidate_paths(f, s, t, 8, 8, el)
        assert [[q.tolist() for q in c] for c in alone] == [[q.tolist() for q in c] for c in shared]
