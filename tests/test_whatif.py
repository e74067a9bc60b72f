"""``topoopt whatif``: iteration time before and after circuit, port and device failures.

- Port assignment: every port of a server holds at most one circuit, a non-crossed circuit uses
  the same port (device) at both ends, bipartite multigraphs need no crossing (König), a
  triangle on two ports needs one (brute force: three edges pairwise adjacent, two colours).
- Closed forms on hand-made designs: a bundle of two circuits losing one halves the bandwidth
  of a send (after = 2 x before); a path 0-1-2 losing 1-2 disconnects (the job cannot run
  rerouted) and the re-optimiser wires the free ports 0-2 (one rewired circuit).
- Guarantees on a 8-server DLRM-like design for links, ports and device failures:
  re-optimised <= after, the surviving circuits are kept, failed ports stay unused, same seed
  -> same result.
- Bad input: one line, exit 2.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from solvers.model.design import Design, NodePaths
from solvers.model.problem import DesignProblem
from solvers.registry import solve
from topoopt.app.cli.app import app
from topoopt.app.cli.common import dumps_strict
from topoopt.app.studies.whatif import (
    links_failure,
    make_case,
    ocs_failure,
    port_assignment,
    ports_failure,
    whatif,
)
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError
from traffic.workload import Demand, Workload

runner = CliRunner()
B = 1e9  # bytes/s per circuit


# --------------------------------------------------------------------------- port assignment
def check_ports(rows, n, degree):
    seen = set()
    for u, v, pu, pv in rows.tolist():
        assert 0 <= pu < degree and 0 <= pv < degree
        assert (u, pu) not in seen and (v, pv) not in seen
        seen.add((u, pu))
        seen.add((v, pv))


def random_multigraph(rng, n, degree, bipartite):
    free = np.full(n, degree)
    rows = []
    for _ in range(4 * n * degree):
        u, v = rng.integers(n, size=2)
        if u == v or free[u] == 0 or free[v] == 0 or (bipartite and u % 2 == v % 2):
            continue
        free[u] -= 1
        free[v] -= 1
        rows.append([min(u, v), max(u, v), 1])
    c = {}
    for u, v, _ in rows:
        c[(u, v)] = c.get((u, v), 0) + 1
    return np.array([[u, v, k] for (u, v), k in sorted(c.items())], np.int64).reshape(-1, 3)


@pytest.mark.parametrize("seed", range(6))
def test_port_assignment_bipartite_needs_no_crossing(seed):
    rng = np.random.default_rng(seed)
    n, degree = 10, 4
    c = random_multigraph(rng, n, degree, bipartite=True)
    rows, crossed = port_assignment(Circuits(c, n), n, degree)
    check_ports(rows, n, degree)
    assert crossed == 0 and np.all(rows[:, 2] == rows[:, 3])
    assert rows.shape[0] == c[:, 2].sum()


@pytest.mark.parametrize("seed", range(6))
def test_port_assignment_general_graphs_are_proper(seed):
    rng = np.random.default_rng(100 + seed)
    c = random_multigraph(rng, 9, 3, bipartite=False)
    rows, crossed = port_assignment(Circuits(c, 9), 9, 3)
    check_ports(rows, 9, 3)
    assert crossed == int(np.sum(rows[:, 2] != rows[:, 3]))


def test_triangle_on_two_ports_needs_a_crossing():
    tri = np.array([[0, 1, 1], [0, 2, 1], [1, 2, 1]])
    # brute force: no 2-colouring of three pairwise adjacent edges
    ok = [
        cols
        for cols in itertools.product(range(2), repeat=3)
        if len(set(cols)) == 3  # every two edges of a triangle share a server
    ]
    assert ok == []
    rows, crossed = port_assignment(Circuits(tri, 3), 3, 2)
    check_ports(rows, 3, 2)
    assert crossed == 1


# --------------------------------------------------------------------------- closed forms
def ar_workload(n, members, size):
    """One data-parallel all-reduce of ``size`` bytes over ``members`` (one GPU per server,
    ring in rank order, not re-ordered by designs): each member sends ``2(g-1)/g * size`` to
    its ring successor; compute is one FLOP."""
    info = {
        "micro_batches": 1,
        "forward_flops_per_microbatch_per_gpu": [1.0],
        "parameters_per_gpu_per_stage": [0],
    }
    dem = (Demand("all-reduce", [members], size, "dp", "backward", mutable=False, stage=0),)
    return Workload(n, 1, dem, name="all-reduce", info=info)


def hand_design(n, degree, circuits, paths):
    src = [p[0][0] for p in paths]
    dst = [p[0][-1] for p in paths]
    routing = NodePaths.from_lists(src, dst, [[(p[0], 1.0)] for p in paths])
    return Design(n, degree, B, np.asarray(circuits), (), routing, "topoopt", "hand", 0.0, 0.0,
                  0.0, 0.0)  # fmt: skip


def test_bundle_losing_one_circuit_halves_bandwidth():
    size = 1e9  # each server sends size bytes to the other: 1 s on one circuit
    w = ar_workload(2, [0, 1], size)
    case = make_case(hand_design(2, 2, [[0, 1, 2]], [([0, 1],), ([1, 0],)]), w)
    f = links_failure(case.ports, 2, 1, seed=0)
    r = whatif(case, f, solver="topoopt")
    assert r["before_s"] == pytest.approx(size / (2 * B), rel=1e-4)
    assert r["after_s"] == pytest.approx(size / B, rel=1e-4)
    assert r["before_rerouted_s"] == pytest.approx(size / (2 * B), rel=1e-4)  # same path
    # both ports of the failed circuit are dead: nothing to rewire; topoopt refuses 2 servers,
    # so the rerouted design stays
    assert r["fallback"] and "servers" in r["solver_refused"]
    assert r["reoptimized_s"] == r["after_s"]
    assert r["rewired_circuits"] == 0 and r["failed_ports"] == {"0": 1, "1": 1}


def test_disconnection_then_reoptimised_reconnects():
    # path 0-1-2 on 2 ports; 0 <-> 2 goes through 1. Losing 1-2 cuts server 2 off.
    size = 1e9
    w = ar_workload(3, [0, 2], size)
    d = hand_design(3, 2, [[0, 1, 1], [1, 2, 1]], [([0, 1, 2],), ([2, 1, 0],)])
    case = make_case(d, w)
    f = ports_failure(case.ports, 3, 2, {"circuits": np.array([[2, 1, 1]])})
    r = whatif(case, f, solver="topoopt")
    assert r["before_s"] == pytest.approx(size / B, rel=1e-4)
    assert r["disconnected"] and r["after_s"] is None
    # free ports: server 0 one, server 2 one (its other port failed), server 1 none
    assert [0, 2, 1] in r["reoptimized_circuits"] and r["rewired_circuits"] == 1
    assert r["reoptimized_s"] == pytest.approx(size / B, rel=1e-4)
    doc = json.loads(dumps_strict(r))  # what --json prints: the job cannot run rerouted
    assert doc["after_s"] is None and doc["reoptimized_s"] > 0


def test_failure_nothing_can_repair():
    # both ports of server 2 fail: no design can reach it (the CLI prints one line, exit 2)
    w = ar_workload(3, [0, 2], 1e6)
    case = make_case(hand_design(3, 2, [[0, 1, 1], [1, 2, 1]], [([0, 1, 2],), ([2, 1, 0],)]), w)
    f = ports_failure(case.ports, 3, 2, {"ports": np.array([[2, 2]])})
    # the solver refuses a problem it cannot connect; with no rerouted design to fall back
    # on, its one-line error is the answer
    with pytest.raises(InputError, match="failure: got 'ports 2 of server 2'.*disconnected"):
        whatif(case, f, solver="topoopt")


def test_nonexistent_circuit_is_an_error():
    w = ar_workload(3, [0, 2], 1e6)
    case = make_case(hand_design(3, 2, [[0, 1, 1], [1, 2, 1]], [([0, 1, 2],), ([2, 1, 0],)]), w)
    with pytest.raises(InputError, match="circuits\\[0\\]"):
        ports_failure(case.ports, 3, 2, {"circuits": np.array([[0, 2, 1]])})
    with pytest.raises(InputError, match="circuits\\[0\\]"):
        ports_failure(case.ports, 3, 2, {"circuits": np.array([[0, 1, 2]])})


# --------------------------------------------------------------------------- guarantees
def dlrm_like(n=8):
    r = np.arange(n).reshape(1, n)
    info = {
        "micro_batches": 1,
        "forward_flops_per_microbatch_per_gpu": [1e9],
        "parameters_per_gpu_per_stage": [0],
    }
    return Workload(gpus=n, gpus_per_server=1, name="dlrm-like", info=info, demands=(
        Demand("all-to-all", r, 4e6, "embedding", "forward", mutable=False, stage=0),
        Demand("all-reduce", r, 20e6, "dp", "backward", stage=0),
    ))  # fmt: skip


@pytest.fixture(scope="module")
def dlrm_case():
    w = dlrm_like()
    problem = DesignProblem.from_workload(w, 3, 12.5e9)
    d = solve(problem, "topoopt", seed=0)
    return make_case(d, w)


def failures(case):
    n, deg = case.design.servers, case.design.degree
    yield links_failure(case.ports, n, 1, seed=3)
    yield links_failure(case.ports, n, 2, seed=4)
    yield ocs_failure(case.ports, n, deg, 1)
    yield ports_failure(case.ports, n, deg, {"ports": np.array([[2, 1], [5, 2]])})


def test_guarantees(dlrm_case):
    case = dlrm_case
    n, deg = case.design.servers, case.design.degree
    before = None
    for f in failures(case):
        r = whatif(case, f, before_s=before)
        before = r["before_s"]
        if r["after_s"] is not None:
            assert r["reoptimized_s"] <= r["after_s"]
            assert r["after_s"] >= r["before_s"] * (1 - 1e-9), f.label
            assert r["after_s"] >= r["before_rerouted_s"] * (1 - 1e-9), f.label
        new = {(u, v): k for u, v, k in r["reoptimized_circuits"]}
        for u, v, k in r["surviving_circuits"]:
            assert new.get((u, v), 0) >= k  # unaffected circuits kept
        used = np.zeros(n, int)
        for u, v, k in r["reoptimized_circuits"]:
            used[u] += k
            used[v] += k
        failed = np.zeros(n, int)
        for s, k in r["failed_ports"].items():
            failed[int(s)] = k
        assert np.all(used <= deg - failed)  # failed ports stay unused
        kept = {(a, b): c for a, b, c in r["surviving_circuits"]}
        added = sum(max(k - kept.get(uv, 0), 0) for uv, k in new.items())
        assert r["rewired_circuits"] == added
        assert len(r["failed"]) == sum(k for *_, k in f.lost_circuits(n).tolist())


def test_reoptimised_faster_than_intact_is_the_intact_routing(dlrm_case):
    """Issue 29 item 6: one failed circuit re-routed by ``joint`` (nothing rewired) beats the
    intact design. The intact circuits on the re-optimised routes and rings are an intact design
    at least as fast (the lost circuit comes back unused), so the gain is routing the intact
    design left on the table, and whatif says so."""
    case = dlrm_case
    f = links_failure(case.ports, case.design.servers, 1, seed=3)
    r = whatif(case, f, solver="joint")
    assert r["rewired_circuits"] == 0 and not r["fallback"]
    assert r["reoptimized_s"] < r["before_s"]
    assert r["intact_on_reoptimized_s"] <= r["reoptimized_s"] * (1 + 1e-9)
    assert r["intact_routing_suboptimal"]
    # a failure whose re-optimisation is slower than the intact design reports nothing
    g = ocs_failure(case.ports, case.design.servers, case.design.degree, 1)
    q = whatif(case, g, solver="joint", before_s=r["before_s"])
    assert q["reoptimized_s"] >= q["before_s"]
    assert q["intact_on_reoptimized_s"] is None and not q["intact_routing_suboptimal"]


def test_ocs_failure_takes_port_u_everywhere(dlrm_case):
    case = dlrm_case
    f = ocs_failure(case.ports, 8, 3, 0)
    on0 = [r for r in case.ports.tolist() if r[2] == 0 or r[3] == 0]
    assert f.lost.tolist() == on0 and f.failed_ports.tolist() == [1] * 8


def test_same_seed_same_result(dlrm_case):
    a = whatif(dlrm_case, links_failure(dlrm_case.ports, 8, 2, seed=9), seed=1)
    b = whatif(dlrm_case, links_failure(dlrm_case.ports, 8, 2, seed=9), seed=1)
    assert a == b
    c = links_failure(dlrm_case.ports, 8, 2, seed=10)
    assert c.lost.shape == (2, 4)


# --------------------------------------------------------------------------- CLI
@pytest.fixture(scope="module")
def dlrm_design_file(tmp_path_factory):
    from traffic.load import load_workload

    w = load_workload("dlrm")
    d = solve(DesignProblem.from_workload(w, 4, 12.5e9), "topoopt", seed=0)
    path = tmp_path_factory.mktemp("whatif") / "design.json"
    path.write_text(d.to_json())
    return path


def invoke(*args):
    return runner.invoke(app, ["whatif", *map(str, args)])


@pytest.mark.parametrize(
    "extra, content, field",
    [
        (["--fail-links", "99"], None, "--fail-links"),
        (["--fail-links", "-1"], None, "--fail-links"),
        (["--fail-ocs", "4"], None, "--fail-ocs"),
        ([], "u,v,count\n0,2,1\n", "circuits[0]"),
        ([], "server,port\n0,1\n", "--fail-ports header"),
        ([], "server,ports\n0,x\n", "ports[0]"),
        ([], '{"ports": [[0]]}', "ports[0]"),
        ([], '{"ports": [[0, 1]], "circuits": []}', "--fail-ports"),
        ([], "server,ports\n99,1\n", "ports[0].server"),
        (["--fail-links", "1"], None, "--design"),
        (["--fail-links", "1", "--fail-ocs", "0"], None, "--fail-links/--fail-ports"),
    ],
)
def test_cli_errors(dlrm_design_file, tmp_path, extra, content, field):
    # PLAN --design FILE, as simulate, export and reconfig take them; the design of another
    # plan (16 servers for a 32-server plan) is refused naming --design
    plan = "gpt3-175b-32" if field == "--design" else "dlrm"
    args = [plan, "--design", dlrm_design_file, *extra]
    if content is not None:
        f = tmp_path / "fail.txt"
        f.write_text(content)
        args += ["--fail-ports", f]
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}"), lines
    assert r.stdout == ""


def test_cli_json(dlrm_design_file):
    r = invoke("dlrm", "--design", dlrm_design_file, "--fail-ocs", "2", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("before_s", "after_s", "reoptimized_s", "rewired_circuits", "failed"):
        assert key in doc
    assert doc["reoptimized_s"] <= doc["after_s"]
    assert all(2 in (x["port_u"], x["port_v"]) for x in doc["failed"])
    assert len(doc["failed"]) == 8  # 16 servers, one port each on device 2: a matching of 8
    # the design as built (issue 29: capex in every study): 16 servers x 4 patch-panel ports of
    # 100 G, each a NIC port, a transceiver, a fibre and a panel port: 400 + 100 + 5 + 100 USD
    assert doc["capex_usd"] == 16 * 4 * (400 + 100 + 5 + 100)
    assert doc["power_w"] > 0


def test_sweep_quantiles_and_fat_tree(dlrm_case):
    from topoopt.app.studies.whatif import whatif_sweep

    r = whatif_sweep(dlrm_case, samples=2, seed=0)
    for k in ("1", "2"):
        f = r["failures"][k]
        assert f["disconnected"] == 0  # a 3-regular design survives any 2 circuit losses here
        after, reopt = f["after_slowdown"], f["reoptimized_slowdown"]
        qs = ["p0", "p50", "p90", "p100"]
        assert all(after[a] <= after[b] for a, b in itertools.pairwise(qs))
        # per sample reoptimized <= after, so every order statistic is too
        assert all(reopt[q] <= after[q] for q in qs)
    ft = r["fat_tree"]
    # k = 4 (16 host ports for 8 servers): servers fill the edge switches 2 by 2, so the loss
    # of each of the 4 occupied edge switches cuts 2 servers off; no other switch does
    assert ft["k"] == 4 and ft["switches"] == 20
    assert ft["switch_losses_disconnecting"] == 4 and ft["servers_cut_off_max"] == 2
    assert len(ft["simulated_switches"]) == 2 and ft["slowdown"]["p0"] >= 1 - 1e-9
    assert whatif_sweep(dlrm_case, samples=1, seed=0, fat_tree=False)["failures"].keys() == {
        "1",
        "2",
    }


@pytest.mark.parametrize(
    "n, degree, solver",
    [(9, 4, "topoopt"), (15, 4, "expander"), (16, 4, "expander"), (12, 5, "expander")],
)
def test_port_assignment_meets_the_matching_bound(n, degree, solver):
    """A device holds at most floor(n/2) circuits, so at least m - d * floor(n/2) circuits of
    a design with m circuits cross devices; the assignment reaches that bound here (0 for even
    n: random regular graphs are class 1, odd n: every regular graph is overfull)."""
    d = solve(DesignProblem.from_workload(dlrm_like(n), degree, 12.5e9), solver, seed=0)
    rows, crossed = port_assignment(d.circuits, n, degree)
    check_ports(rows, n, degree)
    m = d.circuits.total
    assert crossed == max(m - degree * (n // 2), 0)


def test_cli_sweep_json(dlrm_design_file):
    r = invoke("dlrm", "--design", dlrm_design_file, "--sweep", "--samples", "1", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)  # exactly one document
    assert set(doc["failures"]) == {"1", "2"}
    assert doc["capex_usd"] == 16 * 4 * (400 + 100 + 5 + 100)  # as test_cli_json
    for f in doc["failures"].values():
        assert set(f["after_slowdown"]) == {"p0", "p50", "p90", "p100"}
        assert f["reoptimized_slowdown"]["p0"] <= f["after_slowdown"]["p0"]
    ft = doc["fat_tree"]
    # 16 servers on a k=4 fat-tree fill all 8 edge switches, each loss cuts 2 servers off
    assert (ft["k"], ft["switches"], ft["switch_losses_disconnecting"]) == (4, 20, 8)
    assert "fat-tree" in r.stderr  # progress on stderr
    # the steps are counted (a terminal's bar shows their ETA): one per sample and failure size
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert steps == ["[1/2] 1 failed, sample 1", "[2/2] 2 failed, sample 1"]


def test_capex_of_a_speed_the_price_table_lacks_is_none_with_the_reason():
    """whatif at 1 GB/s ports (8 Gbps: no price item) still runs; its capex is None and says why."""
    from topoopt.app.studies.cluster import layer_capex
    from topoopt.app.studies.whatif import design_capex

    c = layer_capex(8, 2, 1e9, 8)
    assert c["capex_usd"] is None and "prices.nic_port" in c["capex_error"], c
    w = dlrm_like()
    case = make_case(solve(DesignProblem.from_workload(w, 3, 1e9), "topoopt", seed=0), w)
    c = design_capex(case)
    assert c["capex_usd"] is None and "8.0" in c["capex_error"], c
