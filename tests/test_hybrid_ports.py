"""Reserved and pre-wired optical ports in the hybrid optical-layer designer.

The options apply to the optical ports: server ``u`` may wire ``optical_degree - reserved_u``
ports, the pre-wired circuits count against them and stay in every design.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from test_ports_options import PREWIRED, RESERVED, cli, design_with_options, dlrm_like, gpt_like

from solvers.hybrid_design import (
    HybridDesign,
    _greedy_b_matching,
    _swap_in,
    baseline_circuits,
    hybrid_design,
    hybrid_lower_bound,
)
from solvers.model.problem import DesignProblem, PhaseTraffic
from topoopt.fabrics.direct_connect import geometric_strides
from topoopt.fabrics.fat_tree import leaf_spine
from traffic.errors import InputError
from traffic.load import load_workload
from traffic.workload import Demand, Workload

B = 1e9  # bytes/s of every electrical and optical port
S = 1e9  # bytes
N = 16


def electrical(n=N, leaf=4):
    return leaf_spine(n, 4.0, leaf_hosts=leaf, port_bandwidth=B)


# --------------------------------------------------------------------------- checkers
def row_degrees(circuits, n):
    """Ports used per server, counted row by row (no library helper)."""
    out = [0] * n
    for u, v, k in np.asarray(circuits).reshape(-1, 3).tolist():
        out[int(u)] += int(k)
        out[int(v)] += int(k)
    return out


def pair_counts(circuits):
    have: dict[tuple[int, int], int] = {}
    for u, v, k in np.asarray(circuits).reshape(-1, 3).tolist():
        key = (min(u, v), max(u, v))
        have[key] = have.get(key, 0) + int(k)
    return have


def usable(d, reserved, n=N):
    """Optical ports server ``i`` may wire: ``d - reserved_i``."""
    res = [reserved] * n if np.isscalar(reserved) else list(reserved)
    return [d - r for r in res]


def assert_ports(circuits, n, ports, prewired, pair_cap):
    """At most ``ports[i]`` ports at server ``i``, every pre-wired count kept, no pair above
    ``pair_cap`` (from the raw rows)."""
    used = row_degrees(circuits, n)
    for i in range(n):
        assert used[i] <= ports[i], (i, used[i], ports[i])
    have = pair_counts(circuits)
    for u, v, k in prewired:
        assert have.get((min(u, v), max(u, v)), 0) >= k, (u, v, k)
    assert all(k <= pair_cap for k in have.values())


def hop_by_hop(design: HybridDesign, problem: DesignProblem) -> float:
    """Sum over phases of the largest load / capacity, walking the node paths link by link."""
    f = design.fabric()
    cap: dict[tuple[int, int], float] = {}
    for u, v, c in zip(f.src.tolist(), f.dst.tolist(), f.capacity.tolist(), strict=True):
        assert (u, v) not in cap  # node sequences name links unambiguously
        cap[(u, v)] = c
    r = design.routing
    walks = {
        (int(s), int(t)): paths
        for s, t, paths in zip(r.src, r.dst, r.to_lists(), strict=True)
    }  # fmt: skip
    total = 0.0
    for ph in problem.phases:
        demand: dict[tuple[int, int], float] = {}
        fx = ph.fixed.tocoo()
        for s, t, b in zip(fx.row.tolist(), fx.col.tolist(), fx.data.tolist(), strict=True):
            demand[(s, t)] = demand.get((s, t), 0.0) + b
        for ring in design.rings:
            if ring["phase"] != ph.name:
                continue
            o = ring["order"]
            for a, b in zip(o, o[1:] + o[:1], strict=True):
                rb = float(ph.ring_bytes[ring["group"]]) * ring["weight"]
                demand[(a, b)] = demand.get((a, b), 0.0) + rb
        load: dict[tuple[int, int], float] = {}
        for key, byts in demand.items():
            for nodes, w in walks[key]:
                for u, v in zip(nodes, nodes[1:], strict=False):
                    load[(u, v)] = load.get((u, v), 0.0) + byts * w
        total += max(x / cap[e] for e, x in load.items())
    return total


# --------------------------------------------------------------------------- designs
CASES = {"dlrm-d3": (dlrm_like, 3), "gpt-d4": (gpt_like, 4)}


@pytest.fixture(scope="module")
def designs():
    out = {}
    for name, (make, d) in CASES.items():
        p = DesignProblem.from_workload(make(), d, B, reserved=RESERVED, prewired=PREWIRED)
        out[name] = (p, d, hybrid_design(p, electrical(), d, time_limit_s=30))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_ports_and_prewired_circuits(designs, name):
    p, d, des = designs[name]
    assert_ports(des.circuits, N, usable(d, RESERVED), PREWIRED, pair_cap=d)
    assert des.reserved_ports.tolist() == RESERVED
    assert des.prewired.tolist() == sorted([min(u, v), max(u, v), k] for u, v, k in PREWIRED)
    assert des.info["prewired_circuits"] == 5
    # the combined fabric carries the pre-wired circuits as optical links of the right capacity
    f = des.fabric()
    opt = f.link_kind == "optical"
    links = {(int(u), int(v)): float(c) for u, v, c in zip(f.src[opt], f.dst[opt], f.capacity[opt],
                                                            strict=True)}  # fmt: skip
    for u, v, k in PREWIRED:
        assert links[(u, v)] >= k * B and links[(v, u)] >= k * B


@pytest.mark.parametrize("name", list(CASES))
def test_objective_rescored(designs, name):
    p, d, des = designs[name]
    assert hop_by_hop(des, p) == pytest.approx(des.objective_s, rel=1e-9)
    assert des.evaluate(p).sum() == pytest.approx(des.objective_s, rel=1e-9)
    # the reported bound is the computed one (the server / cut bound, capped at the objective)
    want = min(float(hybrid_lower_bound(p, electrical(), d, B).sum()), des.objective_s)
    assert des.lower_bound_s == pytest.approx(want, rel=1e-12)
    assert des.objective_s <= min(des.info["candidates_s"].values()) * (1 + 1e-9)
    assert des.info["electrical_only_s"] > des.objective_s


def test_json_round_trip_keeps_the_options(designs):
    p, d, des = designs["dlrm-d3"]
    text = des.to_json()
    doc = json.loads(text)
    assert doc["reserved_ports"] == RESERVED
    assert doc["prewired"] == [[0, 8, 1], [2, 3, 1], [4, 12, 2], [7, 15, 1]]
    back = HybridDesign.from_json(text)
    assert back.to_json() == text
    assert np.array_equal(back.prewired, des.prewired)
    # a document whose circuits lost a pre-wired circuit, or use a reserved port, is refused
    lost = dict(doc, circuits=[c for c in doc["circuits"] if c[:2] != [4, 12]])
    with pytest.raises(InputError, match="pre-wired pair 4-12"):
        HybridDesign.from_json(json.dumps(lost))
    full = dict(doc, reserved_ports=[d] + RESERVED[1:])
    with pytest.raises(InputError, match=r"circuits \(server 0\)"):
        HybridDesign.from_json(json.dumps(full))


def test_without_options_nothing_changes():
    # "no options" (None) and "options that restrict nothing" (0 reserved, nothing pre-wired)
    # give the same circuits, rings, routing and objective; only the latter records options
    w, e = dlrm_like(), electrical()
    plain = hybrid_design(DesignProblem.from_workload(w, 2, B), e, 2, time_limit_s=30)
    trivial = hybrid_design(
        DesignProblem.from_workload(w, 2, B, reserved=0, prewired=np.zeros((0, 3))), e, 2,
        time_limit_s=30,
    )  # fmt: skip
    assert np.array_equal(plain.circuits, trivial.circuits)
    assert plain.objective_s == trivial.objective_s
    assert plain.rings == trivial.rings
    assert json.dumps(plain.routing.to_dict()) == json.dumps(trivial.routing.to_dict())
    a, b = json.loads(plain.to_json()), json.loads(trivial.to_json())
    assert "reserved_ports" not in a and "prewired" not in a
    assert b["reserved_ports"] == [0] * N and b["prewired"] == []
    assert plain.reserved_ports is None and plain.prewired is None


# --------------------------------------------------------------------------- closed forms
def permutation_problem(d, reserved=None, prewired=None, n=8):
    pairs = np.column_stack([np.arange(n), (np.arange(n) + n // 2) % n])
    w = Workload(n, 1, (Demand("send", pairs, S, "mp", "forward", mutable=False),))
    return DesignProblem.from_workload(w, d, B, reserved=reserved, prewired=prewired)


def test_reserved_ports_shrink_the_optical_cut():
    # 4 servers per leaf each send S to the other leaf over one uplink (B) plus their usable
    # optical ports: d = 3 with one reserved everywhere leaves 2, so T = 4S / ((4*2 + 1) B);
    # the pre-wired (0, 4) and (1, 5) lie on the optimal design (i, i + 4) x 2, so it is
    # attained, and the bound (counting usable ports only) proves it
    p = permutation_problem(3, reserved=1, prewired=[[0, 4, 1], [5, 1, 1]])
    des = hybrid_design(p, electrical(8), 3, time_limit_s=20)
    want = 4 * S / (9 * B)
    assert des.objective_s == pytest.approx(want, rel=1e-6)
    assert des.lower_bound_s == pytest.approx(want, rel=1e-6)
    assert des.status == "optimal"
    assert_ports(des.circuits, 8, usable(3, 1, 8), [[0, 4, 1], [1, 5, 1]], pair_cap=3)
    # all ports reserved: the electrical fabric alone, 4S over one uplink
    none = hybrid_design(permutation_problem(3, reserved=3), electrical(8), 3, time_limit_s=10)
    assert none.circuits.rows.shape == (0, 3)
    assert none.objective_s == pytest.approx(4 * S / B, rel=1e-9)


def test_lower_bound_counts_usable_optical_ports():
    # server 0 sends 6 bytes to 1 (same leaf) and 3 to 4 (other leaf), 1 byte/s everywhere.
    # optical_degree 2: server bound 9 / (1 + 2) = 3; with 1 port reserved at server 0,
    # 9 / (1 + 1) = 4.5. Cut of leaf {0..3}: 3 / (1 + 4*2) without, 3 / (1 + 7) with.
    D = sp.csr_matrix(([6.0, 3.0], ([0, 0], [1, 4])), shape=(8, 8))
    e = leaf_spine(8, 4.0, leaf_hosts=4, port_bandwidth=1.0)
    p = DesignProblem(8, 2, 1.0, (PhaseTraffic("p", [0], [], [], D),))
    assert hybrid_lower_bound(p, e, 2, 1.0).tolist() == pytest.approx([3.0])
    q = p.with_options(reserved=[1, 0, 0, 0, 0, 0, 0, 0])
    assert hybrid_lower_bound(q, e, 2, 1.0).tolist() == pytest.approx([4.5])
    # a cut-dominated case: server i sends 1 byte to i + 4 (across); optical_degree 3.
    # Without reservations: cut 4 / (1 + 4*3), server 1 / (1 + 3) -> 4/13. Two ports reserved
    # on leaf {0..3}: cut 4 / (1 + 4*1) = 0.8 beats the server bound 1 / (1 + 1) = 0.5
    X = sp.csr_matrix((np.ones(8), (np.arange(8), (np.arange(8) + 4) % 8)), shape=(8, 8))
    r = DesignProblem(8, 3, 1.0, (PhaseTraffic("p", [0], [], [], X),))
    assert hybrid_lower_bound(r, e, 3, 1.0).tolist() == pytest.approx([4 / 13])
    r2 = r.with_options(reserved=[2, 2, 2, 2, 0, 0, 0, 0])
    assert hybrid_lower_bound(r2, e, 3, 1.0).tolist() == pytest.approx([0.8])


# --------------------------------------------------------------------------- every candidate
def test_baselines_honour_the_options():
    w = dlrm_like()
    d = 4
    p = DesignProblem.from_workload(w, d, B, reserved=RESERVED, prewired=PREWIRED)
    base = baseline_circuits(p, d, B)
    assert "circulant" in base
    for c in base.values():
        assert_ports(c, N, usable(d, RESERVED), PREWIRED, pair_cap=d)
    # reserved only, free degree 2: the stride ring on top, then every free port filled
    q = DesignProblem.from_workload(w, d, B, reserved=[2] + [0] * (N - 1))
    c = baseline_circuits(q, d, B)["circulant"]
    have = pair_counts(c)
    (p1,) = geometric_strides(N, 1)
    assert all(have.get((min(i, (i + p1) % N), max(i, (i + p1) % N)), 0) >= 1 for i in range(N))
    free = [d - r - u for r, u in zip([2] + [0] * (N - 1), row_degrees(c, N), strict=True)]
    assert min(free) == 0 and sum(x > 0 for x in free) <= 1
    # without options: the plain geometric circulant, untouched
    plain = baseline_circuits(DesignProblem.from_workload(w, d, B), d, B)["circulant"]
    strides = geometric_strides(N, 2)
    want = sorted([min(i, (i + s) % N), max(i, (i + s) % N), 1] for s in strides for i in range(N))
    assert plain.tolist() == want


def test_greedy_b_matching_invariants():
    rng = np.random.default_rng(5)
    for _ in range(60):
        n = int(rng.integers(3, 9))
        cap = int(rng.integers(1, 4))
        budget = rng.integers(0, 4, n)
        W = rng.random((n, n)) * (rng.random((n, n)) < 0.6)
        start = []
        deg = np.zeros(n, int)
        for u, v in rng.integers(0, n, (3, 2)).tolist():
            if u != v and deg[u] < budget[u] and deg[v] < budget[v]:
                start.append([u, v, 1])
                deg[u] += 1
                deg[v] += 1
        start_a = np.asarray(start, np.int64).reshape(-1, 3)
        if pair_counts(start_a) and max(pair_counts(start_a).values()) > cap:
            continue
        c = _greedy_b_matching(W, budget, cap, start_a)
        assert_ports(c, n, budget, start, cap)
        # maximal: no pair with weight, free ports at both ends and room under the cap is left
        used, have = row_degrees(c, n), pair_counts(c)
        for i in range(n):
            for j in range(i + 1, n):
                if W[i, j] + W[j, i] > 0 and have.get((i, j), 0) < cap:
                    assert used[i] == budget[i] or used[j] == budget[j], (i, j)


def test_swaps_never_break_prewired_or_ports():
    # random multigraphs within per-server budgets; every move _swap_in proposes adds the target
    # pair, keeps the pre-wired counts, the per-server budgets and the pair cap
    rng = np.random.default_rng(11)
    proposed = 0
    for _ in range(200):
        n = int(rng.integers(4, 9))
        cap = int(rng.integers(1, 3))
        budget = rng.integers(1, 4, n)
        deg = np.zeros(n, int)
        have: dict[tuple[int, int], int] = {}
        for _ in range(3 * n):
            u, v = sorted(rng.choice(n, 2, replace=False).tolist())
            if deg[u] < budget[u] and deg[v] < budget[v] and have.get((u, v), 0) < cap:
                have[(u, v)] = have.get((u, v), 0) + 1
                deg[u] += 1
                deg[v] += 1
        if not have:
            continue
        rows = np.asarray([[u, v, k] for (u, v), k in sorted(have.items())], np.int64)
        floor = rows[rng.random(len(rows)) < 0.4]
        use = {(u, v): float(rng.random()) for u, v, _ in rows.tolist()}
        a, c = sorted(rng.choice(n, 2, replace=False).tolist())
        if have.get((a, c), 0) >= cap:
            continue
        move = _swap_in(rows, a, c, use, n, budget, floor, cap)
        if move is None:
            continue
        proposed += 1
        assert_ports(move, n, budget, floor.tolist(), cap)
        assert pair_counts(move).get((a, c), 0) == have.get((a, c), 0) + 1
    assert proposed > 50


# --------------------------------------------------------------------------- bad input
def test_bad_options_name_the_field():
    e = electrical(8)
    # problem.degree 4 allows reserving 3, the optical degree 2 does not
    p = permutation_problem(4, reserved=[3] + [0] * 7)
    with pytest.raises(InputError, match=r"reserved \(server 0\).*optical_degree = 2"):
        hybrid_design(p, e, 2, time_limit_s=5)
    # two pre-wired circuits at server 0, one usable optical port there (2 - 1)
    p = permutation_problem(4, reserved=1, prewired=[[0, 4, 1], [0, 5, 1]])
    with pytest.raises(InputError, match=r"prewired \(server 0\).*usable optical ports"):
        hybrid_design(p, e, 2, time_limit_s=5)
    # two parallel pre-wired circuits (fine for problem.degree 4), one optical port per server
    p = permutation_problem(4, prewired=[[0, 4, 2]])
    with pytest.raises(InputError, match=r"prewired \(server 0\): got '2 ports'.* 1 usable"):
        hybrid_design(p, e, 1, time_limit_s=5)
    # no optical layer at all: nothing may be pre-wired, nothing reserved
    with pytest.raises(InputError, match=r"prewired \(server 0\)"):
        hybrid_design(permutation_problem(4, prewired=[[0, 4, 1]]), e, 0, time_limit_s=5)
    with pytest.raises(InputError, match=r"reserved \(server 0\)") as info:
        hybrid_design(permutation_problem(4, reserved=1), e, 0, time_limit_s=5)
    assert "\n" not in str(info.value) and "1" in str(info.value)


# --------------------------------------------------------------------------- CLI
def test_cli_hybrid_with_reserved_and_prewired(tmp_path):
    f, out, doc = design_with_options(tmp_path, "--fabric", "hybrid", "--degree", "2",
                                      "--time-limit", "5")  # fmt: skip
    n = doc["servers"]
    assert doc["electrical"]["family"] == "leaf-spine" and doc["degree"] == 2
    assert_ports(doc["circuits"], n, usable(2, 1, n), [[0, 1, 1], [2, 9, 1]], pair_cap=2)
    # at least the server bound written out here: every server's busiest phase direction over
    # its NIC plus its one usable optical port (100 Gbps each)
    prob = DesignProblem.from_workload(load_workload("dlrm"), 2, 12.5e9)
    server = sum(
        max(ph.out_bytes(n).max(), ph.in_bytes(n).max()) / (12.5e9 + 1 * 12.5e9)
        for ph in prob.phases
    )
    assert server > 0 and doc["lower_bound_s"] >= server * (1 - 1e-9)
    r = cli("simulate", "dlrm", "--design", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fabric"] == "hybrid"
    # every port reserved, yet a circuit pre-wired: one line on stderr, exit 2
    r = cli("design", "dlrm", "--fabric", "hybrid", "--degree", "2", "--reserve-ports", "2",
            "--prewired", f, "--json")  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "prewired (server 0)" in r.stderr
