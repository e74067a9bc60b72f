"""Optical layers of finite-radix OCSes: the port-to-OCS layout, the placement of circuits on
the OCSes against brute force, the repair, and every method's design respecting the layer."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from solvers.cluster.ocs import OcsLayer as ClusterPlanes
from solvers.model.ocs_layers import Placement, check_ocs, place_circuits, repair_circuits
from solvers.realise import design_fabric
from solvers.registry import solve
from tests.solvers.test_topoopt_method import check_design, problem
from topoopt.fabrics import bill_of_materials, direct_connect
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.ocs_layout import OcsLayout
from traffic.errors import InputError


@pytest.mark.parametrize("n, d, r", [(300, 8, 136), (1024, 8, 320), (64, 4, 384), (10, 3, 4)])
def test_per_rail_layout_by_hand(n, d, r):
    layer = OcsLayout(n, d, r)
    k = -(-n // r)
    assert layer.ocs_per_group == k and layer.n_ocs == d * k
    o = layer.ocs_of
    # port p of every server lands in group p (OCSes p k .. p k + k - 1), never above radix
    assert np.all(o // k == np.arange(d)[None, :])
    assert layer.max_ports_used() <= r
    assert layer.bom() == {"ocs": d * k, "ocs_port": d * k * r}
    # the plane layout of the shared cluster's OCS layer, unit for unit
    planes = ClusterPlanes.build(n, d, r)
    assert np.array_equal(o - np.arange(d)[None, :] * k, planes.units.T)
    if k == 1:  # one OCS per rail: every pair reachable
        assert layer.reachable().sum() == n * (n - 1)


def test_packed_layout_by_hand():
    layer = OcsLayout(300, 8, 136, "packed")
    assert layer.n_ocs == 18 and layer.bom() == {"ocs": 18, "ocs_port": 18 * 136}
    o = layer.ocs_of
    assert np.array_equal(np.bincount(o.ravel())[:-1], np.full(17, 136))
    assert o[16, 7] == (16 * 8 + 7) // 136 == 0 and o[17, 0] == 1


def _brute_force_fits(units, layer: OcsLayout) -> bool:
    """Try every port at each end of every circuit: an independent oracle of the placement."""
    o = layer.ocs_of
    d = layer.degree
    used = set()

    def go(i):
        if i == len(units):
            return True
        u, v = units[i]
        for p, q in itertools.product(range(d), repeat=2):
            if o[u, p] != o[v, q] or (u, p) in used or (v, q) in used:
                continue
            used.update({(u, p), (v, q)})
            if go(i + 1):
                return True
            used.difference_update({(u, p), (v, q)})
        return False

    return go(0)


def _multigraphs(n, d, edges):
    pairs = list(itertools.combinations(range(n), 2))
    for k in range(1, edges + 1):
        for combo in itertools.combinations_with_replacement(pairs, k):
            deg = np.bincount(np.array(combo).ravel(), minlength=n)
            if deg.max() <= d:
                yield list(combo)


@pytest.mark.parametrize(
    "layer",
    [OcsLayout(4, 2, 2), OcsLayout(4, 2, 4), OcsLayout(5, 2, 3), OcsLayout(4, 2, 3, "packed")],
    ids=["per-rail-2", "per-rail-4", "per-rail-5x3", "packed-3"],
)
def test_placement_agrees_with_brute_force(layer):
    n, d = layer.servers, layer.degree
    cap = np.zeros((n, layer.n_ocs), int)
    np.add.at(cap, (np.repeat(np.arange(n), d), layer.ocs_of.ravel()), 1)
    seen = {True: 0, False: 0}
    for units in _multigraphs(n, d, 5):
        rows = np.array([[u, v, 1] for u, v in units])
        want = _brute_force_fits(units, layer)
        got = place_circuits(rows, layer)
        assert (got is not None) == want, units
        seen[want] += 1
        if got is None:
            with pytest.raises(InputError, match="OCS layer"):
                check_ocs(rows, layer)
            continue
        pl = got.rows  # every circuit placed once, on an OCS both ends reach, within ports
        assert pl[:, 3].sum() == len(units)
        assert np.all(cap[pl[:, 0], pl[:, 2]] > 0) and np.all(cap[pl[:, 1], pl[:, 2]] > 0)
        assert np.all(got.ports_used(layer) <= cap)
        # port by port: each circuit joins two ports of its OCS, each port used once
        pr = got.port_rows(layer)
        assert len(pr) == len(units)
        o = layer.ocs_of
        assert np.all(o[pr[:, 0], pr[:, 1]] == pr[:, 4])
        assert np.all(o[pr[:, 2], pr[:, 3]] == pr[:, 4])
        ends = np.concatenate([pr[:, 0] * d + pr[:, 1], pr[:, 2] * d + pr[:, 3]])
        assert np.unique(ends).size == ends.size
        assert sorted(map(tuple, pr[:, [0, 2]].tolist())) == sorted(units)
    assert seen[True] >= 3 and seen[False] >= 3  # both outcomes exercised


def test_repair_keeps_the_most_placeable_circuits():
    layer = OcsLayout(5, 2, 3)
    for units in itertools.islice(_multigraphs(5, 2, 5), 0, None, 7):
        rows = np.array([[u, v, 1] for u, v in units])
        best = max(  # brute force: the largest sub-multiset that fits
            (k for k in range(len(units), -1, -1)
             for sub in itertools.combinations(units, k) if _brute_force_fits(list(sub), layer)),
            default=0,
        )  # fmt: skip
        c, pl = repair_circuits(rows, layer)
        assert place_circuits(c, layer) is not None
        kept = {tuple(r) for r in rows[:, :2].tolist()}
        kept_count = sum(
            min(int(k), sum(1 for x in units if x == (u, v))) for u, v, k in c.tolist()
            if (u, v) in kept
        )  # fmt: skip
        assert kept_count == best
        assert np.bincount(c[:, :2].ravel(), c[:, 2].repeat(2), 5).max() <= 2


@pytest.mark.parametrize("method", ["topoopt", "joint"])
def test_every_design_fits_the_layer(method):
    # 12 servers x 4 ports on OCSes of 6 ports: two OCSes per rail, a circuit on port p only
    # inside one OCS of group p; the unconstrained design does not fit, the returned one does
    p = problem(12, 4)
    layer = OcsLayout(12, 4, 6)
    free = solve(p, method, time_limit_s=20, work_limit=5)
    assert place_circuits(free.circuits, layer) is None
    q = p.with_options(ocs=layer)
    d = solve(q, method, time_limit_s=20, work_limit=5)
    check_ocs(d, layer)
    check_design(q, d)
    info = d.info["ocs"]
    assert info["ocs"] == 8 and info["ocs_port"] == 48
    if method == "joint":  # the layer inside the search: its design fits without a repair
        assert info["repair"] is None and d.info["ocs_search"]["candidates_repaired"] > 0
    else:  # a baseline knows no OCS: repaired afterwards
        assert info["repair"] is not None
    ports = np.array(info["ports"])  # [u, p, v, q, ocs] per circuit, on the layout's OCSes
    assert len(ports) == d.circuits.total
    assert np.all(layer.ocs_of[ports[:, 0], ports[:, 1]] == ports[:, 4])
    assert np.all(layer.ocs_of[ports[:, 2], ports[:, 3]] == ports[:, 4])
    assert d.solver.endswith("+ OCS repair") == (method != "joint")
    assert d.lower_bound_s <= d.objective_s
    json.dumps(info)
    # realised on those OCSes and priced by the BOM rule: every port of every device
    bom = bill_of_materials(design_fabric(d))
    assert (bom["ocs"], bom["ocs_port"]) == (8, 48)


def test_direct_connect_refuses_a_pair_without_a_common_ocs():
    layer = OcsLayout(12, 4, 6)
    far = np.flatnonzero(~layer.reachable()[0])[1]  # [0] is server 0 itself
    with pytest.raises(InputError, match=f"pair 0-{far}"):
        direct_connect(12, 4, [[0, int(far), 1]], device="ocs", ocs_radix=6)
    ok = int(np.flatnonzero(layer.reachable()[0])[0])
    f = direct_connect(12, 4, [[0, ok, 1]], device="ocs", ocs_radix=6)
    assert f.params["ocs_devices"] == 8


def test_port_rows_refuse_a_placement_beyond_the_ports():
    layer = OcsLayout(4, 2, 2)  # server 0 has one port on OCS 0 (ocs_of row [0, 2])
    bad = Placement(np.array([[0, 1, 0, 2]]), "greedy")
    with pytest.raises(InputError, match="server 0 on OCS 0"):
        bad.port_rows(layer)


def test_problem_refuses_a_layer_of_other_servers():
    with pytest.raises(InputError, match="ocs"):
        problem(8, 4).with_options(ocs=OcsLayout(9, 4, 4))
    with pytest.raises(InputError, match="ocs_radix"):
        OcsLayout(8, 4, 1)


@pytest.mark.parametrize(
    ("n", "d", "radix", "layout"),
    [(12, 4, 6, "per-rail"), (12, 4, 12, "per-rail"), (8, 3, 4, "per-rail"), (12, 4, 16, "packed")],
)
def test_the_joint_searchs_moves_stay_on_the_layer(n, d, radix, layout):
    """Issue 24.5, inside the search: the circuit sets built on the OCSes
    (:func:`solvers.joint.ocs_fit.layer_candidates`) fit the layer exactly as constructed, use
    at most every server's ports, and every 2-swap proposed from their placement fits too
    (whatever the link loads: each load order tried; its placement is known by construction
    and checked, not searched), as does every fitted candidate."""
    from solvers.joint.local_search import swap_candidates
    from solvers.joint.ocs_fit import fit_circuits, layer_candidates, placement_of
    from topoopt.fabrics import circulant_circuits

    layer = OcsLayout(n, d, radix, layout)
    q = problem(n, d).with_options(ocs=layer)
    built = layer_candidates(q)
    assert [nm for nm, _ in built] == ["OCS matchings", "OCS matchings, ring order"]
    rng = np.random.default_rng(0)
    moves = 0
    for _, c in built:
        assert np.bincount(c[:, :2].ravel(), c[:, 2].repeat(2), n).max() <= d
        pl = placement_of(q, c)
        assert pl is not None
        for _ in range(3):
            util = np.repeat(rng.random(c.shape[0]), 2)
            for cand in swap_candidates(c, n, util, q.pair_cap, placement=pl, layer=layer):
                moves += 1
                # the swap's placement, known by construction, is remembered and holds
                assert place_circuits(cand, layer).status == "known"
                assert np.array_equal(  # degree-preserving
                    np.bincount(cand[:, :2].ravel(), cand[:, 2].repeat(2), n),
                    np.bincount(c[:, :2].ravel(), c[:, 2].repeat(2), n),
                )
    assert moves > 0
    fitted, _ = fit_circuits(q, circulant_circuits(n, [1, 2]))
    assert place_circuits(fitted, layer) is not None


def test_an_undecided_placement_is_repaired_not_refused(monkeypatch):
    """The safety net (``respect_ocs``): when CP-SAT cannot decide a placement in time (256 x 8
    ports on 136-port OCSes: the topoopt and joint rows of compare failed), the design is
    repaired, and the repair's placement, known by construction, passes the final check."""
    import solvers.ocs_repair as repair_mod
    from solvers.ocs_repair import respect_ocs

    layer = OcsLayout(12, 4, 6)
    q = problem(12, 4).with_options(ocs=layer)
    d = solve(problem(12, 4), "topoopt")
    real = repair_mod.place_circuits

    def undecided(circuits, lay, *a, **k):
        if np.array_equal(Circuits(circuits, 12).rows, d.circuits.rows):
            raise InputError("circuits (OCS placement)", 0, "a placement decided within 30 s")
        return real(circuits, lay, *a, **k)

    monkeypatch.setattr(repair_mod, "place_circuits", undecided)
    out = respect_ocs(d, q)
    assert out.solver == "topoopt + OCS repair" and out.info["ocs"]["repair"] is not None
    assert place_circuits(out.circuits, layer).status == "known"


@pytest.mark.parametrize(
    "layer",
    [OcsLayout(4, 2, 2), OcsLayout(5, 2, 3), OcsLayout(4, 2, 3, "packed")],
    ids=["per-rail-2", "per-rail-5x3", "packed-3"],
)
def test_the_constructive_placement_agrees_with_brute_force(layer, monkeypatch):
    """Issue 24.5, the placement check without CP-SAT: on every multigraph of up to 5 circuits,
    :func:`place_by_planes` never claims a placement brute force refutes, what it
    places is a valid placement of those circuits, and on one OCS group per port index
    (``per-rail``, where it is a list edge colouring of the port indices, exact when found) it
    places every placeable multigraph of these sizes; ``place_circuits`` agrees with brute force
    and calls CP-SAT only when the constructions fail (never per-rail: the exact colouring
    search, :func:`colour_by_ocs`, refutes what does not fit)."""
    import solvers.model.ocs_layers as ocs_layers
    from solvers.model.ocs_layers import PlacementWork, place_by_planes, placement_holds

    monkeypatch.setattr(ocs_layers, "_KNOWN", {})  # nothing remembered from other tests
    n, d = layer.servers, layer.degree
    work = PlacementWork()
    seen = {True: 0, False: 0}
    for units in _multigraphs(n, d, 5):
        rows = np.array([[u, v, 1] for u, v in units])
        want = _brute_force_fits(units, layer)
        got = place_by_planes(rows, layer)
        assert placement_holds(got.rows[:, [0, 1, 3]], layer, got.rows)
        assert not got.complete or want, units
        if layer.layout == "per-rail":
            assert got.complete == want, units
        assert (place_circuits(rows, layer, work=work) is not None) == want
        seen[want] += 1
    assert seen[True] >= 3 and seen[False] >= 3
    assert work.checks == seen[True] + seen[False]
    if layer.layout == "per-rail":
        assert work.cp_sat_calls == 0
    else:  # packed: two ports of a server on one OCS, CP-SAT decides what the others do not
        assert work.cp_sat_calls > 0


def test_a_cp_sat_placement_is_deterministic_and_charged(monkeypatch):
    """Issue 24.5: CP-SAT runs on one worker with seed 0 under a deterministic time limit and
    no wall-clock limit, so a placement (and the work it is charged) is the same every
    time. The constructions are switched off so that CP-SAT decides: the
    first multigraph on 5 servers x 2 ports (OCSes of 3 ports) that the greedy placement
    misses and brute force places."""
    import solvers.model.ocs_layers as ocs_layers
    from solvers.model.ocs_layers import PlacementWork, _capacity, _greedy

    layer = OcsLayout(5, 2, 3)
    case = next(
        rows
        for units in _multigraphs(5, 2, 5)
        if _greedy(rows := np.array([[u, v, 1] for u, v in units]), _capacity(layer))[1].size
        and _brute_force_fits(units, layer)
    )
    none = ocs_layers.PlanePlacement(np.zeros((0, 4), np.int64), False)
    monkeypatch.setattr(ocs_layers, "place_by_planes", lambda *a: none)
    monkeypatch.setattr(ocs_layers, "colour_by_ocs", lambda *a: None)
    runs = []
    for _ in range(2):
        w = PlacementWork()
        pl = place_circuits(case, layer, work=w)
        runs.append((pl.status, pl.rows.tobytes(), w))
    assert runs[0] == runs[1] and runs[0][0] == "exact" and runs[0][2].cp_sat_calls == 1
    assert runs[0][2].deterministic_s >= 0


def _one_way_ring(layer=None):
    """3 servers of 2 ports, 1 byte/s a circuit, 1-byte transfers 0->1->2->0 (the exact MIP's
    doctest), optionally on an optical layer."""
    import scipy.sparse as sp

    from solvers.model.problem import DesignProblem, PhaseTraffic

    D = sp.csr_matrix((np.ones(3), ([0, 1, 2], [1, 2, 0])), shape=(3, 3))
    return DesignProblem(3, 2, 1.0, (PhaseTraffic("p", [0], [], [], D),), ocs=layer)


def test_the_exact_mip_designs_on_the_layer():
    """Issue 24.5: the exact MIP places its circuits on the OCSes itself (constraints 11-12 of
    :mod:`solvers.joint.exact_mip`). Unconstrained, its optimum is the triangle (2/3 s), which
    one OCS per port index cannot hold (3 colours for 2 ports): the old path repaired it
    afterwards. On the layer the MIP proves the optimum among placeable designs: a path (a
    triangle is the only other way to use the ports), one transfer over two hops and each
    other on its own link, so 1 s by hand; the joint search takes it without a repair."""
    from solvers.joint.driver import congestion_search
    from solvers.joint.exact_mip import exact_design

    layer = OcsLayout(3, 2, 8)
    free = exact_design(_one_way_ring(), 2.0)
    assert free.circuits.tolist() == [[0, 1, 1], [0, 2, 1], [1, 2, 1]]
    assert place_circuits(free.circuits, layer) is None  # the old path's repair
    on = exact_design(_one_way_ring(layer), 2.0)
    assert on.status == "optimal" and on.objective_s == pytest.approx(1.0, rel=1e-6)
    assert on.circuits[:, 2].sum() == 2 and place_circuits(on.circuits, layer) is not None
    d = congestion_search(_one_way_ring(layer), time_limit_s=20)
    assert d.info["exact"]["status"] == "optimal" and d.info["exact"]["repaired"] is False
    assert d.objective_s == pytest.approx(1.0, rel=1e-6)
    assert place_circuits(d.circuits, layer) is not None


def test_a_problem_without_traffic_fills_its_ports_on_the_layer():
    """Issue 24.5, the no-phase fallback (``baseline_only``): the free ports of the baseline
    are joined on common OCSes (every port used: 12 x 4 ports, 24 circuits), so no repair
    follows; before, the fill ignored the layer, the safety net repaired it and routing a
    problem without phases crashed. A baseline that does not fit (6 x 2 ports on OCSes of 3)
    is fitted without routing, and the ``topoopt`` method's safety net repairs without
    routing too."""
    from solvers.model.problem import DesignProblem

    q = DesignProblem(12, 4, 1e9, (), ocs=OcsLayout(12, 4, 6))
    d = solve(q, "joint", time_limit_s=20)
    assert d.info["ocs"]["repair"] is None and d.circuits.total == 24
    assert place_circuits(d.circuits, q.ocs) is not None
    small = DesignProblem(6, 2, 1e9, (), ocs=OcsLayout(6, 2, 3))
    for method in ("joint", "topoopt"):
        out = solve(small, method, time_limit_s=20)
        assert check_ocs(out, small.ocs) is not None


def test_the_topoopt_design_at_256_servers_fits_136_port_ocses_without_cp_sat():
    """Issue 24.5 at scale (``compare`` of Llama 3 70B, tp 8 pp 4 dp 64, on 256 servers x 8
    ports of 400 G on 136-port OCSes, two per port index): the TopoOpt design is placed by the
    construction (matchings per port index) in well under a second, no CP-SAT, so the safety
    net keeps it as it is (no repair, no LP routing: its rings stay regular and the flow
    model's symmetry reduction applies). Before, CP-SAT took 3 s of CPU to place it, and the
    TopoOpt design of stop 34 was undecided within 30 s of it (49 s of CPU), repaired and
    LP-routed, and its simulation did not finish in 34 min."""
    from solvers.baselines.topoopt_method import topoopt_design
    from solvers.model.ocs_layers import PlacementWork
    from solvers.model.problem import DesignProblem
    from solvers.ocs_repair import respect_ocs
    from topoopt.app.api import load_workload

    w = load_workload({
        "model": {"base": "llama3-70b", "global_batch": 512, "seq_len": 4096},
        "parallelism": {"tp": 8, "pp": 4, "dp": 64, "micro_batch_size": 1},
        "cluster": {"servers": 256, "gpus_per_server": 8, "gpu": "h100-sxm"},
    })  # fmt: skip
    layer = OcsLayout(256, 8, 136)
    assert (layer.n_ocs, layer.ocs_per_group) == (16, 2)
    q = DesignProblem.from_workload(w, degree=8, link_bandwidth=50e9).with_options(ocs=layer)
    d = topoopt_design(q)
    work = PlacementWork()
    pl = place_circuits(d.circuits, layer, work=work)
    assert pl.status == "constructive" and work.cp_sat_calls == 0 and d.circuits.total == 1024
    out = respect_ocs(d, q)
    assert out.solver == "topoopt" and out.info["ocs"]["repair"] is None


def test_kept_routing_drops_broken_paths_and_rescales():
    """The repair's routing (``kept_routing``): a commodity keeps its surviving paths, their
    weights rescaled to one (by hand: 0.25 and 0.5 survive -> 1/3 and 2/3); a commodity whose
    paths all broke takes a fewest-hop path; an untouched routing is returned as it is; a
    disconnected pair gives None."""
    from solvers.model.design import NodePaths
    from solvers.ocs_repair import kept_routing

    r = NodePaths.from_lists(
        [0, 1], [2, 3],
        [[([0, 2], 0.25), ([0, 1, 2], 0.5), ([0, 3, 2], 0.25)], [([1, 3], 1.0)]],
    )  # fmt: skip
    c = Circuits([[0, 2, 1], [0, 1, 1], [1, 2, 1], [2, 3, 1]], 4)  # 0-3 and 1-3 removed
    out = kept_routing(r, c).to_lists()
    assert [n for n, _ in out[0]] == [[0, 2], [0, 1, 2]]
    assert np.allclose([w for _, w in out[0]], [1 / 3, 2 / 3], rtol=0, atol=1e-15)
    assert out[1] == [([1, 2, 3], 1.0)]
    full = Circuits([[0, 2, 1], [0, 1, 1], [1, 2, 1], [0, 3, 1], [2, 3, 1], [1, 3, 1]], 4)
    assert kept_routing(r, full) is r
    assert kept_routing(r, Circuits([[0, 2, 1], [0, 1, 1], [1, 2, 1]], 4)) is None


def test_a_repaired_design_keeps_its_routing_and_the_symmetry_reduction(monkeypatch):
    """Issue 24.5: the safety net on a design whose placement is undecided but whose circuits
    the repair keeps (Llama 3 70B tp 8 pp 4 dp 4 on 16 servers x 4 ports, 8-port OCSes; what
    stop 34's 256 x 8 TopoOpt design met on 136-port OCSes): the design keeps its own routing
    (no LP, objective unchanged), so its simulation keeps the flow model's classes. The
    reduced simulation equals the unreduced one (1e-9) with the reduction on and as many
    classes as the design before the repair (7,242 of 24,734 flows); the LP's routing of the
    same circuits, what stop 34 shipped, splits them into 22,676."""
    import solvers.ocs_repair as repair_mod
    from solvers.joint.driver import route_design, to_design
    from solvers.model.problem import DesignProblem
    from solvers.realise import simulate_design
    from topoopt.app.api import load_workload

    w = load_workload({
        "model": {"base": "llama3-70b", "global_batch": 32, "seq_len": 4096},
        "parallelism": {"tp": 8, "pp": 4, "dp": 4, "micro_batch_size": 1},
        "cluster": {"servers": 16, "gpus_per_server": 8, "gpu": "h100-sxm"},
    })  # fmt: skip
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=50e9)
    q = p.with_options(ocs=OcsLayout(16, 4, 8))
    d = solve(p, "topoopt")

    def undecided(*a, **k):
        raise InputError("circuits (OCS placement)", 0, "a placement decided within 30 s")

    monkeypatch.setattr(repair_mod, "place_circuits", undecided)
    out = repair_mod.respect_ocs(d, q)
    rep = out.info["ocs"]["repair"]
    assert rep["objective"] == "kept routing" and rep["changed_pairs"] == 0
    assert rep["lp_objective_s"] is None  # no LP routed
    assert out.routing is d.routing and out.objective_s == d.objective_s
    assert check_ocs(out, q.ocs) is not None
    full = simulate_design(w, out, q, reduction=False)
    red = simulate_design(w, out, q, reduction=True)
    info = red.info["reduction"]
    assert info["status"] == "on" and info["flows"] == 24734
    assert abs(red.iteration_s - full.iteration_s) <= 1e-9 * full.iteration_s
    assert info["flow_classes"] == 7242  # the design's own (its routing is kept as it is)
    routed, _, _ = route_design(q, out.circuits.rows)
    lp = to_design(q, out.circuits.rows, routed, d.lower_bound_s, "lp", 0.0, {})
    assert simulate_design(w, lp, q, reduction=True).info["reduction"]["flow_classes"] == 22676
