"""Reserved and pre-wired optical ports (issue #5, section 2).

- Exact MIP == brute force: every multigraph of a tiny cluster that respects the usable ports
  (``degree - reserved``), the pair cap, and contains the pre-wired circuits is enumerated here
  and scored by an LP written independently (one commodity per ordered server pair on scipy's
  HiGHS, every directed ring of each group enumerated with itertools).
- Every solver on 16-server DLRM-like and GPT-like problems: the design contains the pre-wired
  circuits and uses at most ``degree - reserved`` ports per server, checked from the circuit
  array; the routing is feasible and re-scores to the reported objective.
- Bad input: one ``InputError`` naming the field; the CLI prints one line and exits 2.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from solvers.baselines.expander_design import random_fill
from solvers.baselines.topoopt_method import topoopt_design
from solvers.joint.driver import check_problem
from solvers.joint.exact_mip import exact_design
from solvers.joint.local_search import swap_candidates
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design
from solvers.model.ports import check_ports, fill_free_ports, merge_prewired
from solvers.model.problem import DesignProblem, PhaseTraffic, read_prewired
from solvers.registry import SOLVERS, solve
from traffic.errors import InputError
from traffic.workload import Demand, Workload


# --------------------------------------------------------------------------- helpers
def degrees(circuits, n):
    """Ports used per server, counted row by row (no library helper)."""
    out = [0] * n
    for u, v, k in np.asarray(circuits).tolist():
        out[int(u)] += int(k)
        out[int(v)] += int(k)
    return out


def assert_respects_ports(circuits, n, degree, reserved, prewired):
    used = degrees(circuits, n)
    res = [reserved] * n if np.isscalar(reserved) else list(reserved)
    for i in range(n):
        assert used[i] <= degree - res[i], (i, used[i], degree - res[i])
    have = {}
    for u, v, k in np.asarray(circuits).tolist():
        have[(min(u, v), max(u, v))] = have.get((min(u, v), max(u, v)), 0) + k
    for u, v, k in prewired:
        assert have.get((min(u, v), max(u, v)), 0) >= k, ((u, v), have)


# --------------------------------------------------------------------------- brute force
def feasible_multigraphs(n, degree, cap, reserved, prewired):
    """Every multigraph: counts 0..cap per pair, degree <= degree - reserved, pre-wired kept."""
    pairs = list(itertools.combinations(range(n), 2))
    low = {(min(u, v), max(u, v)): k for u, v, k in prewired}
    ranges = [range(low.get(p, 0), cap + 1) for p in pairs]
    for counts in itertools.product(*ranges):
        deg = [0] * n
        for (u, v), k in zip(pairs, counts, strict=True):
            deg[u] += k
            deg[v] += k
        if all(deg[i] <= degree - reserved[i] for i in range(n)):
            yield {p: k for p, k in zip(pairs, counts, strict=True) if k}


def phase_time(n, bandwidth, fixed, groups, graph):
    """min T: per-pair commodities (fixed bytes + ring steps of a ring mixture) on ``graph``."""
    arcs = [(u, v) for u, v in graph] + [(v, u) for u, v in graph]
    if not arcs:
        return np.inf if fixed.sum() > 0 or groups else 0.0
    cap = [graph[(min(a, b), max(a, b))] * bandwidth for a, b in arcs]
    pairs = [(s, t) for s in range(n) for t in range(n) if s != t]
    rings = []  # (group index, bytes, ring)
    for gi, (members, rb) in enumerate(groups):
        first, rest = members[0], members[1:]
        rings += [(gi, rb, (first,) + p) for p in itertools.permutations(rest)]
    na = len(arcs)
    n_flow = len(pairs) * na
    nv = n_flow + len(rings) + 1
    rows, cols, vals, rhs = [], [], [], []
    r = 0
    for q, (s, t) in enumerate(pairs):
        for v in range(n):
            for a, (x, y) in enumerate(arcs):
                if x == v or y == v:
                    rows.append(r), cols.append(q * na + a), vals.append(1.0 if x == v else -1.0)
            sign = (v == s) - (v == t)
            for j, (_, rb, ring) in enumerate(rings):
                steps = sum(
                    1 for i in range(len(ring)) if (ring[i], ring[(i + 1) % len(ring)]) == (s, t)
                )
                if steps and sign:
                    rows.append(r), cols.append(n_flow + j), vals.append(-sign * rb * steps)
            rhs.append(sign * fixed[s, t])
            r += 1
    for gi in range(len(groups)):
        for j, (g, _, _) in enumerate(rings):
            if g == gi:
                rows.append(r), cols.append(n_flow + j), vals.append(1.0)
        rhs.append(1.0)
        r += 1
    a_eq = sp.csr_matrix((vals, (rows, cols)), shape=(r, nv))
    urows, ucols, uvals = [], [], []
    for a in range(na):
        for q in range(len(pairs)):
            urows.append(a), ucols.append(q * na + a), uvals.append(1.0)
        urows.append(a), ucols.append(nv - 1), uvals.append(-cap[a])
    a_ub = sp.csr_matrix((uvals, (urows, ucols)), shape=(na, nv))
    c = np.zeros(nv)
    c[-1] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(na), A_eq=a_eq, b_eq=rhs, method="highs")
    if res.status == 2:
        return np.inf
    assert res.status == 0, res.message
    return res.fun


def brute_force(problem, reserved, prewired):
    best, arg, seen = np.inf, None, 0
    for graph in feasible_multigraphs(
        problem.n, problem.degree, problem.pair_cap, reserved, prewired
    ):
        seen += 1
        t = 0.0
        for ph in problem.phases:
            groups = [
                (tuple(int(x) for x in ph.group(g)), float(ph.ring_bytes[g]))
                for g in range(ph.n_groups)
            ]
            t += phase_time(problem.n, problem.link_bandwidth, ph.fixed.toarray(), groups, graph)
            if not np.isfinite(t):
                break
        if t < best - 1e-12:
            best, arg = t, graph
    return best, arg, seen


def tiny_cases():
    n = 4
    f = np.zeros((n, n))
    f[0, 1], f[1, 3], f[3, 2], f[2, 0], f[0, 3] = 3.0, 2.0, 2.0, 1.0, 2.0
    ph = PhaseTraffic("p", [0, 3], [0, 1, 2], [3.0], sp.csr_matrix(f))
    yield "n4-d3-reserved-prewired", n, 3, (ph,), None, [2, 0, 0, 1], [[0, 2, 1]]
    n = 5
    fwd = sp.csr_matrix((np.full(4, 2.0), ([0, 1, 2, 3], [1, 2, 3, 4])), shape=(n, n))
    phases = (
        PhaseTraffic("forward", [0], [], [], fwd),
        PhaseTraffic("backward", [0, 5], np.arange(5), [4.0], fwd.T.tocsr()),
    )
    yield "n5-d2-pipeline+dp", n, 2, phases, None, [0, 0, 1, 0, 0], [[0, 4, 1]]
    n = 6
    f = np.zeros((n, n))
    f[0, 3], f[3, 0], f[1, 4], f[2, 5] = 3.0, 1.0, 2.0, 2.0
    ph = PhaseTraffic("p", [0, 3], [0, 2, 4], [2.0], sp.csr_matrix(f))
    yield "n6-d2-cap1-prewired", n, 2, (ph,), 1, [0] * n, [[0, 1, 1], [2, 3, 1]]


@pytest.mark.parametrize("case", list(tiny_cases()), ids=lambda c: c[0])
def test_exact_mip_equals_brute_force_with_port_options(case):
    name, n, d, phases, cap, reserved, prewired = case
    problem = DesignProblem(n, d, 1.0, phases, max_parallel=cap, reserved=reserved,
                            prewired=prewired)  # fmt: skip
    want, graph, seen = brute_force(problem, reserved, prewired)
    assert seen > 1 and np.isfinite(want), name
    r = exact_design(problem, upper_bound_s=4 * want, time_limit=60)
    assert r.status == "optimal", name
    assert r.objective_s == pytest.approx(want, rel=1e-5), (name, graph, r.circuits)
    assert_respects_ports(r.circuits, n, d, reserved, prewired)
    check_ports(r.circuits, problem)
    # the options bind: the same traffic without them is strictly faster (or the brute force
    # argmin is not a design the options allow), so ignoring them could not pass
    free = DesignProblem(n, d, 1.0, phases, max_parallel=cap)
    unconstrained = exact_design(free, upper_bound_s=4 * want, time_limit=60)
    assert unconstrained.status == "optimal"
    assert unconstrained.objective_s <= want * (1 + 1e-6)
    if name != "n6-d2-cap1-prewired":
        assert unconstrained.objective_s < want * (1 - 1e-3), name


# --------------------------------------------------------------------------- every solver
def dlrm_like(n=16, g=2):
    r = np.arange(n * g).reshape(n, g).T.copy()
    return Workload(gpus=n * g, gpus_per_server=g, name="dlrm-like", demands=(
        Demand("all-to-all", r, 4e6, "embedding", "forward", mutable=False),
        Demand("all-reduce", r, 20e6, "dp", "backward"),
    ))  # fmt: skip


def gpt_like(n=16, g=2, stages=4):
    r = np.arange(n * g).reshape(stages, n // stages, g)
    sends = np.stack([r[:-1].ravel(), r[1:].ravel()], axis=1)
    dp = r.transpose(0, 2, 1).reshape(-1, n // stages).copy()
    return Workload(gpus=n * g, gpus_per_server=g, name="gpt-like", demands=(
        Demand("send", sends, 8e6, "pp", "forward", mutable=False, count=4),
        Demand("send", sends[:, ::-1].copy(), 8e6, "pp", "backward", mutable=False, count=4),
        Demand("all-reduce", dp, 30e6, "dp", "backward"),
    ))  # fmt: skip


RESERVED = [1, 0, 0, 2, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
PREWIRED = [[0, 8, 1], [2, 3, 1], [4, 12, 2], [15, 7, 1]]


@pytest.fixture(scope="module")
def designs():
    out = {}
    for wname, w in (("dlrm-like", dlrm_like()), ("gpt-like", gpt_like())):
        p = DesignProblem.from_workload(w, 4, 1e9, reserved=RESERVED, prewired=PREWIRED)
        for s in SOLVERS:
            out[(wname, s)] = (p, solve(p, s, time_limit_s=8, seed=1))
    return out


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("wname", ["dlrm-like", "gpt-like"])
def test_every_solver_keeps_prewired_and_reserved(designs, wname, solver):
    p, d = designs[(wname, solver)]
    assert_respects_ports(d.circuits, 16, 4, RESERVED, PREWIRED)
    ev = evaluate_routing(p, d.circuits, d.phase_routings(p))
    assert ev.feasible, ev.violations
    assert ev.objective == pytest.approx(d.objective_s, rel=1e-9)
    # the ideal switch with each server's usable ports, written out here
    want = 0.0
    for ph in p.phases:
        out_b, in_b = ph.out_bytes(16), ph.in_bytes(16)
        want += max(max(out_b[i], in_b[i]) / ((4 - RESERVED[i]) * 1e9) for i in range(16))
    assert d.lower_bound_s >= want * (1 - 1e-9)  # at least the ideal switch
    if solver != "joint":
        assert d.lower_bound_s == pytest.approx(want, rel=1e-12)
    assert d.objective_s >= want * (1 - 1e-9)
    # every solver's design records the options (design.json carries them)
    assert d.reserved_ports.tolist() == RESERVED
    assert np.array_equal(d.prewired, p.prewired_circuits())


def test_joint_is_no_worse_than_topoopt_with_options(designs):
    for wname in ("dlrm-like", "gpt-like"):
        joint = designs[(wname, "joint")][1]
        base = designs[(wname, "topoopt")][1]
        assert joint.objective_s <= base.objective_s * (1 + 1e-9), wname


def test_baselines_record_and_round_trip_the_options(designs):
    p, d = designs[("dlrm-like", "topoopt")]
    assert d.reserved_ports.tolist() == RESERVED
    assert d.prewired.tolist() == [[0, 8, 1], [2, 3, 1], [4, 12, 2], [7, 15, 1]]
    doc = json.loads(d.to_json())
    assert doc["reserved_ports"] == RESERVED and doc["prewired"] == d.prewired.tolist()
    again = Design.from_json(d.to_json())
    assert again.reserved_ports.tolist() == RESERVED
    assert np.array_equal(again.prewired, d.prewired)
    check_ports(again, p)
    # TopoOpt ran on the fewest free ports: server 3 has 4 - 2 reserved - 1 pre-wired = 1
    assert d.info["d_free"] == 1 and p.free_ports().tolist()[3] == 1


def test_topoopt_with_two_free_ports_builds_rings_then_fills():
    w = dlrm_like()
    p = DesignProblem.from_workload(w, 6, 1e9, reserved=1, prewired=[[0, 1, 1], [5, 9, 2]])
    assert p.free_degree == 3
    d = topoopt_design(p)
    assert d.info["d_free"] == 3 and d.info["d_ar"] + d.info["d_mp"] <= 3
    assert_respects_ports(d.circuits, 16, 6, 1, [[0, 1, 1], [5, 9, 2]])
    # every usable port wired: 16 servers x 5 ports / 2
    assert d.circuits.total == 16 * 5 // 2


def test_no_options_is_the_old_problem():
    w = dlrm_like()
    plain = DesignProblem.from_workload(w, 4, 1e9)
    zero = DesignProblem.from_workload(w, 4, 1e9, reserved=0, prewired=[])
    assert not plain.has_port_options and not zero.has_port_options
    assert plain.usable_ports().tolist() == [4] * 16 and plain.free_degree == 4
    for s in ("topoopt", "topoopt-released", "expander"):
        a, b = solve(plain, s, seed=2), solve(zero, s, seed=2)
        assert np.array_equal(a.circuits, b.circuits) and a.objective_s == b.objective_s
        assert "reserved_ports" not in json.loads(a.to_json())


# --------------------------------------------------------------------------- building blocks
def test_fill_free_ports_respects_per_server_budgets():
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(4, 9))
        budget = rng.integers(0, 4, n)
        dem = sp.csr_matrix(rng.random((n, n)) * (rng.random((n, n)) < 0.5))
        cap = int(rng.integers(1, 3))
        none = np.zeros((0, 3))
        for c in (
            fill_free_ports(none, n, budget, dem, cap, connect=True),
            random_fill(none, n, budget, cap, seed=int(rng.integers(9))),
        ):
            used = degrees(c, n)
            assert all(used[i] <= budget[i] for i in range(n))
            assert c.size == 0 or (c[:, 2] <= cap).all()
            # maximal: no two servers with a free port and a pair under the cap are left
            count = {(int(u), int(v)): int(k) for u, v, k in c}
            free = [i for i in range(n) if used[i] < budget[i]]
            for a, b in itertools.combinations(free, 2):
                assert count.get((a, b), 0) >= cap, (a, b)


def test_merge_prewired_keeps_the_prewired_count_within_the_cap():
    ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix((5, 5)))
    p = DesignProblem(5, 4, 1.0, (ph,), max_parallel=2, prewired=[[0, 1, 2], [2, 3, 1]])
    m = merge_prewired([[0, 1, 1], [2, 3, 1], [3, 4, 1]], p)
    assert m.tolist() == [[0, 1, 2], [2, 3, 2], [3, 4, 1]]


def test_swaps_never_remove_a_prewired_circuit():
    n = 6
    c = np.array([[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 4, 1], [3, 5, 1], [4, 5, 1]])
    floor = np.array([[0, 2, 1], [1, 3, 1]])
    util = np.full(2 * c.shape[0], 0.1)
    util[0:2] = 1.0  # 0-1 is the hottest
    cands = swap_candidates(c, n, util, 2, hot=(0, 5), floor=floor)
    plain = swap_candidates(c, n, util, 2, hot=(0, 5))
    assert plain and len(cands) < len(plain)
    for cand in cands:
        have = {(int(u), int(v)): int(k) for u, v, k in cand}
        assert have.get((0, 2), 0) >= 1 and have.get((1, 3), 0) >= 1
        assert degrees(cand, n) == degrees(c, n)


# --------------------------------------------------------------------------- bad input
def _ph(n):
    return (PhaseTraffic("p", [0], [], [], sp.csr_matrix((n, n))),)


BAD = [
    ({"reserved": -1}, "reserved (server 0)", "-1"),
    ({"reserved": 5}, "reserved (server 0)", "5"),
    ({"reserved": [0, 1]}, "reserved", "shape"),
    ({"reserved": True}, "reserved", "True"),
    ({"reserved": [0.5, 0, 0, 0]}, "reserved", "0.5"),
    ({"prewired": [[0, 4, 1]]}, "prewired (row 0)", "4"),
    ({"prewired": [[1, 1, 1]]}, "prewired (row 0)", "[1, 1, 1]"),
    ({"prewired": [[0, 1, 1.5]]}, "prewired", "1.5"),
    ({"prewired": [[0, 1, -1]]}, "prewired (row 0) count", "-1"),
    ({"prewired": [[0, 1]]}, "prewired", "shape"),
    ({"prewired": [[0, 1, 3]], "max_parallel": 2}, "prewired (pair 0-1)", "pair_cap = 2"),
    ({"prewired": [[0, 1, 2], [0, 2, 1]], "reserved": 2}, "prewired (server 0)", "usable"),
]


@pytest.mark.parametrize("kw,field,shown", BAD, ids=[str(b[0]) for b in BAD])
def test_bad_port_options(kw, field, shown):
    with pytest.raises(InputError) as exc:
        DesignProblem(4, 4, 1.0, _ph(4), **kw)
    assert exc.value.field == field
    assert shown in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "text,field",
    [
        ("a,b,c\n0,1,1\n", "f line 1"),
        ("u,v,count\n0,1\n", "f line 2"),
        ("u,v,count\n0,1,1\n0,x,1\n", "f line 3 v"),
        ("u,v,count\n0,1,-2\n", "f line 2 count"),
        ("[[0, 1, 1], [0, 1]]", "f item 1"),
        ("[[0, 1, true]]", "f item 0 count"),
        ("[[0, 1, 1]", "f"),
    ],
)
def test_bad_prewired_files(text, field):
    with pytest.raises(InputError) as exc:
        read_prewired(text, name="f")
    assert exc.value.field == field


def test_check_ports_and_check_problem_refuse():
    p = DesignProblem(4, 2, 1.0, _ph(4), reserved=[0, 1, 0, 0], prewired=[[2, 3, 1]])
    with pytest.raises(InputError, match="server 1"):
        check_ports([[0, 1, 1], [1, 2, 1]], p)
    with pytest.raises(InputError, match="pre-wired pair 2-3"):
        check_ports([[0, 1, 1]], p)
    check_ports([[0, 1, 1], [2, 3, 1], [0, 2, 1]], p)
    fixed = sp.csr_matrix(([1.0], ([0], [3])), shape=(4, 4))
    q = DesignProblem(4, 2, 1.0, (PhaseTraffic("p", [0], [], [], fixed),), reserved=[2, 0, 0, 0])
    with pytest.raises(InputError, match=r"reserved \(server 0\)"):
        check_problem(q)


# --------------------------------------------------------------------------- CLI
def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "topoopt.app.cli", *map(str, args)], capture_output=True, text=True
    )


def design_with_options(tmp_path, *args):
    """``topoopt design dlrm ARGS --reserve-ports 1 --prewired f.csv --out design.json --json``
    with circuits 0-1 and 9-2 pre-wired: checks that it succeeds and that stdout and the file
    record the options; returns ``(csv path, design.json path, stdout document)``."""
    f = tmp_path / "f.csv"
    f.write_text("u,v,count\n0,1,1\n9,2,1\n")
    out = tmp_path / "design.json"
    r = cli("design", "dlrm", *args, "--reserve-ports", "1", "--prewired", f, "--out", out,
            "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["reserved_ports"] == [1] * doc["servers"]
    assert doc["prewired"] == [[0, 1, 1], [2, 9, 1]]
    assert json.loads(out.read_text())["prewired"] == doc["prewired"]
    return f, out, doc


def test_cli_design_with_reserved_and_prewired(tmp_path):
    _, _, doc = design_with_options(tmp_path, "--degree", "4", "--solver", "joint",
                                    "--time-limit", "5")  # fmt: skip
    assert_respects_ports(doc["circuits"], doc["servers"], 4, 1, [[0, 1, 1], [2, 9, 1]])
    j = tmp_path / "f.json"
    j.write_text("[[0, 1, 1]]")
    r = cli("design", "dlrm", "--degree", "4", "--solver", "topoopt", "--prewired", j, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prewired"] == [[0, 1, 1]]


@pytest.mark.parametrize(
    "content,field",
    [("u,v,count\n0,1,1\n2,5\n", "line 3"), ("u,v,count\n3,3,1\n", "prewired (row 0)")],
)
def test_cli_malformed_prewired_exits_2_without_output(tmp_path, content, field):
    f = tmp_path / "f.csv"
    f.write_text(content)
    out = tmp_path / "design.json"
    r = cli("design", "dlrm", "--degree", "4", "--solver", "topoopt", "--prewired", f,
            "--out", out)  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and field in r.stderr
    assert not out.exists()


def test_cli_max_parallel_caps_every_pair(tmp_path):
    """--max-parallel 1: no pair gets two circuits (the TopoOpt design of gpt3-175b-32 at degree
    4 stacks them otherwise: its matchings add circuits to the ring pairs that carry the pipeline
    sends); 0 is refused with one line and exit 2."""
    plan = "gpt3-175b-32"
    free = cli("design", plan, "--degree", "4", "--solver", "topoopt", "--json")
    assert free.returncode == 0, free.stderr
    assert max(k for _, _, k in json.loads(free.stdout)["circuits"]) > 1
    capped = cli("design", plan, "--degree", "4", "--solver", "topoopt", "--max-parallel", "1",
                 "--json")  # fmt: skip
    assert capped.returncode == 0, capped.stderr
    doc = json.loads(capped.stdout)
    assert max(k for _, _, k in doc["circuits"]) == 1
    assert_respects_ports(doc["circuits"], doc["servers"], 4, [0] * doc["servers"], [])
    out = tmp_path / "x.json"
    bad = cli("design", "dlrm", "--max-parallel", "0", "--out", out)
    assert bad.returncode == 2 and not out.exists()
    assert bad.stderr.count("\n") == 1 and "max_parallel" in bad.stderr


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_solver_honours_the_pair_cap(solver):
    """max_parallel = 1 on a problem whose TopoOpt design stacks circuits: no pair above 1, every
    port still in use where the degree allows, and the routing re-scores to the objective."""
    p = DesignProblem.from_workload(dlrm_like(), 4, 1e9, max_parallel=1)
    d = solve(p, solver, time_limit_s=30, seed=0, work_limit=2)
    assert int(d.circuits.rows[:, 2].max()) == 1
    assert_respects_ports(d.circuits, 16, 4, [0] * 16, [])
    ev = evaluate_routing(p, d.circuits, d.phase_routings(p))
    assert ev.feasible and ev.objective == pytest.approx(d.objective_s, rel=1e-9)
