"""Per-phase routing's shared work between its routing choices (``phase_routing(share=True)``:
the builder's flow classes, the tables' group routes, the isolated collectives, the refinement
seeded with the classes of runs on a subset of the tables) against every choice simulated from
scratch (``share=False``): the same choice, the same iterations, the same reductions."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.joint.phase_routing import phase_routing, routing_schedule
from solvers.reconfig.schedule import GroupCache, class_groups
from tests.flowsim.test_timevarying_reduced import _tiny_design  # a topoopt design, 4 x 2


def _plan(pp: int, dp: int) -> dict:
    """A GPT-style pipeline on 4 servers of 2 GPUs (``pp * dp = 8``): several communication
    phases, and symmetry the reduction finds."""
    return {
        "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
                  "global_batch": 16},
        "parallelism": {"tp": 1, "pp": pp, "dp": dp, "micro_batch_size": 1,
                        "global_batch_size": 16},
        "cluster": {"servers": 4, "gpus_per_server": 2},
    }  # fmt: skip


def _same_result(a, b):
    """Two phase routings: the same choice, iterations (to 1e-12) and reductions."""
    assert a.choice == b.choice and a.evaluations == b.evaluations
    assert a.iteration_s == pytest.approx(b.iteration_s, rel=1e-12, abs=0)
    assert a.static_iteration_s == b.static_iteration_s
    assert a.all_routed_s == pytest.approx(b.all_routed_s, rel=1e-12, abs=0)
    assert a.info["by_choice"].keys() == b.info["by_choice"].keys()
    for k, v in a.info["by_choice"].items():
        assert v == pytest.approx(b.info["by_choice"][k], rel=1e-12, abs=0), k
    assert a.info["reduction"] == b.info["reduction"]
    np.testing.assert_allclose(a.chosen.flows["finish"], b.chosen.flows["finish"], rtol=1e-12)


@pytest.fixture(scope="module")
def tiny():
    return {"pp4": _tiny_design(_plan(4, 2)), "pp2": _tiny_design(_plan(2, 4))}


@pytest.mark.parametrize("name", ["pp4", "pp2"])
def test_shared_runs_equal_runs_from_scratch(tiny, name, monkeypatch):
    """Every choice of a tiny pipeline and a data-parallel plan: the shared runs give the
    uncached runs' choice, iterations and reductions; the shared runs reuse the builder's
    classes (every choice after the first) and seed the refinement of a run whose tables
    include an earlier run's."""
    import topoopt.flowsim.epochs_reduction as er

    w, design, fab = tiny[name]
    seeded, real = [], er.reduce_grouped

    def spy(gf, epochs, **kw):
        seeded.append(kw.get("start_flow") is not None)
        return real(gf, epochs, **kw)

    monkeypatch.setattr(er, "reduce_grouped", spy)
    alone = phase_routing(w, design, fab, share=False)
    assert not any(seeded)
    seeded.clear()
    shared = phase_routing(w, design, fab)
    _same_result(shared, alone)
    on = [v for v in shared.info["reduction"].values() if v and v.get("status") == "on"]
    assert on  # the reduction ran on some choice
    assert any(seeded)  # e.g. SSSR, SSRS, then SSRR (its tables: both of theirs)


def test_every_choice_in_full_shared_or_not(tiny):
    """Every routing choice of the 2-stage pipeline simulated in full (no incumbent cut), in
    the order phase routing takes them, through one shared cache and each alone: the same
    iteration, fabric flows' finishes and reduction (classes, quotient sub-flows)."""
    import itertools

    from solvers.joint.phase_routing import _ChoiceCache, simulate_routing_schedule

    w, design, fab = tiny["pp2"]
    res = phase_routing(w, design, fab, share=False)
    own = [phase_routing_table(res, design, w, fab, i) for i in range(len(res.phases))]
    starts = [p.start_s for p in res.phases]
    c, static = design.circuits.rows, design.routing
    cache = _ChoiceCache()
    n_on = 0
    for choice in itertools.product((True, False), repeat=len(starts)):
        rts = tuple(o if x else static for x, o in zip(choice, own, strict=True))
        a = simulate_routing_schedule(w, fab, c, rts, starts)
        b = simulate_routing_schedule(w, fab, c, rts, starts, cache=cache)
        assert b.iteration_s == pytest.approx(a.iteration_s, rel=1e-12, abs=0)
        np.testing.assert_allclose(b.flows["finish"], a.flows["finish"], rtol=1e-12)
        ra, rb = (dict(r.result.info.get("reduction", {})) for r in (a, b))
        ra.pop("rounds", None)
        rb.pop("rounds", None)
        assert ra == rb
        n_on += ra.get("status") == "on"
    assert n_on >= 2 and cache.groups.hits >= 1 and cache.groups.seeds


def phase_routing_table(res, design, w, fab, i):
    """Phase ``i``'s own routing (static when not improved), routed again as phase routing
    does (step 3)."""
    from solvers.joint.phase_routing import merge_routing, route_phase
    from solvers.reconfig.search import phase_traffic

    m = phase_traffic(res.reference.flows, res.phases, design.servers)[i]
    if m.nnz == 0:
        return design.routing
    r, s0, s1 = route_phase(design.circuits.rows, design.servers, design.link_bandwidth, m,
                            design.routing)  # fmt: skip
    return merge_routing(design.routing, r, design.servers) if s1 < s0 else design.routing


def test_shared_runs_with_the_reduction_off(tiny, monkeypatch):
    """The reduction off (every run the plain one of every flow class): the same results
    shared or not, and nothing seeded from a run without classes."""
    import topoopt.flowsim.epochs_reduction as er

    w, design, fab = tiny["pp4"]
    calls = []

    def off(gf, epochs, **kw):
        calls.append(kw.get("start_flow"))
        return er._off("switched off by the test", {"flows": gf.n_flows})

    monkeypatch.setattr(er, "reduce_grouped", off)
    alone = phase_routing(w, design, fab, share=False)
    shared = phase_routing(w, design, fab)
    _same_result(shared, alone)
    assert calls and all(c is None for c in calls)
    red = [v for v in shared.info["reduction"].values() if v and "flow_classes" not in v]
    assert any(v.get("reason") == "switched off by the test" for v in red)


def test_group_cache_equals_class_groups(tiny):
    """The group cache against :func:`class_groups` on schedules of different tables: one
    builder (classed once), the same builder with a flow added, then another builder (each
    classed afresh)."""
    from solvers.model.design import NodePaths
    from topoopt.flowsim.network import FlowBuilder, Network

    w, design, fab = tiny["pp4"]
    c, static = design.circuits.rows, design.routing
    copy = NodePaths(static.src, static.dst, static.commodity_ptr, static.path_ptr,
                     static.nodes, static.weight.copy())  # fmt: skip

    def builder(flows):
        fb = FlowBuilder(Network(fab, intra_bandwidth=1e9))
        for s, d, b in flows:
            fb.add_ranks([s], [d], [b])
        return fb

    a = builder([(0, 1, 5e6), (1, 0, 5e6), (2, 3, 5e6), (3, 2, 5e6), (0, 2, 1e6)])
    cache = GroupCache()
    cases = [
        (a, (static,), (0.0,)),
        (a, (static, copy), (0.0, 1e-4)),
        (a, (copy, static, None), (0.0, 1e-4, 2e-4)),
        (a, (static, copy), (0.0, 1e-4)),  # a with one more flow (added below)
        (builder([(0, 1, 5e6), (1, 2, 2e6)]), (static, None), (0.0, 1e-4)),
    ]
    for k, (fb, tables, starts) in enumerate(cases):
        if k == 3:
            fb.add_ranks([1], [3], [7e6], after=[0])
        r = routing_schedule(fab, c, tables, starts)
        want = class_groups(fb, r)
        got = cache(fb, r)
        gw, gg = want[0], got[0]
        np.testing.assert_array_equal(want[1], got[1])
        for f in ("capacity", "latency", "size", "start", "multiplicity", "dep_ptr", "deps",
                  "group"):  # fmt: skip
            np.testing.assert_array_equal(getattr(gw, f), getattr(gg, f))
        assert len(gw.versions) == len(gg.versions)
        for x, y in zip(gw.versions, gg.versions, strict=True):
            for f in ("flow_ptr", "path_ptr", "path_links", "weight"):
                np.testing.assert_array_equal(getattr(x, f), getattr(y, f))
        assert [(e.start_s, e.paths) for e in want[2]] == [(e.start_s, e.paths) for e in got[2]]
        flows = cache.fabric_flows(fb)
        arr = fb.arrays()
        pair = arr["link"] < 0
        np.testing.assert_array_equal(flows["pair"], pair)
        np.testing.assert_array_equal(flows["bytes"], arr["size"][pair])
    assert cache.hits == 2  # the second and third runs; a changed, then another builder


def test_seeded_refinement_gives_the_same_classes():
    """:func:`reduce_grouped` seeded with the classes of a run on a subset of its versions
    (here: version 0 alone), or with its own result: the same classes and quotient as
    unseeded; seeded with the even groups apart from the odd (finer than the result): more
    classes, still exact (the plain run's finishes and link bytes)."""
    from topoopt.flowsim.epochs_reduction import (
        GroupedFlows,
        reduce_grouped,
        simulate_grouped_reduced,
    )
    from topoopt.flowsim.timevarying import Epoch, EpochPaths, simulate_epochs

    # 8 groups on a ring of 8 links, 2 flows each (sizes 1 and 3, the second after the first);
    # version 0: group g on link g; version 1: on links g and g + 1, half each
    n = 8
    v0 = EpochPaths.single_path([[g] for g in range(n)])
    v1 = EpochPaths(np.arange(0, 2 * n + 1, 2), np.arange(2 * n + 1),
                    np.array([[g, (g + 1) % n] for g in range(n)]).ravel(),
                    np.full(2 * n, 0.5))  # fmt: skip
    group = np.repeat(np.arange(n), 2)
    size = np.tile([1.0, 3.0], n)
    dep_ptr = np.concatenate([[0], np.cumsum(np.tile([0, 1], n))])
    deps = np.arange(0, 2 * n, 2)

    def gf_of(versions):
        return GroupedFlows(capacity=np.ones(n), latency=np.zeros(n), size=size,
                            start=np.zeros(2 * n), multiplicity=np.ones(2 * n, np.int64),
                            dep_ptr=dep_ptr, deps=deps, group=group, versions=versions)  # fmt: skip

    one = reduce_grouped(gf_of([v0]), [Epoch(0.0, np.ones(n), 0)])
    gf = gf_of([v0, v1])
    ep = [Epoch(0.0, np.ones(n), 0), Epoch(0.5, np.ones(n), 1)]
    plain = reduce_grouped(gf, ep)
    assert plain.info["status"] == "on" and plain.info["flow_classes"] == 2
    for start in (one.partition.flow, plain.partition.flow, [one.partition.flow] * 2):
        seeded = reduce_grouped(gf, ep, start_flow=start)
        assert seeded.info["rounds"] <= plain.info["rounds"]
        np.testing.assert_array_equal(seeded.partition.flow, plain.partition.flow)
        np.testing.assert_array_equal(seeded.partition.link, plain.partition.link)
        assert {k: v for k, v in seeded.info.items() if k != "rounds"} == {
            k: v for k, v in plain.info.items() if k != "rounds"
        }
    fine = reduce_grouped(gf, ep, start_flow=group % 2)  # even groups apart from odd ones
    assert fine.info["status"] == "on" and fine.info["flow_classes"] == 4
    # the plain run of every flow on its group's paths
    f_ptr = np.arange(2 * n + 1)
    fs_paths = [EpochPaths.single_path([[g] for g in group]),
                EpochPaths(np.arange(0, 4 * n + 1, 2), np.arange(4 * n + 1),
                           np.array([[g, (g + 1) % n] for g in group]).ravel(),
                           np.full(4 * n, 0.5))]  # fmt: skip
    from topoopt.flowsim.flowset import FlowSet

    fs = FlowSet(capacity=np.ones(n), latency=np.zeros(n), size=size, start=np.zeros(2 * n),
                 flow_ptr=f_ptr, path_ptr=f_ptr, path_links=group, weight=np.ones(2 * n),
                 dep_ptr=dep_ptr, deps=deps)  # fmt: skip
    want = simulate_epochs(fs, [Epoch(0.0, np.ones(n), fs_paths[0]),
                                Epoch(0.5, np.ones(n), fs_paths[1])])  # fmt: skip
    for red in (plain, fine):
        got = simulate_grouped_reduced(gf, red)
        np.testing.assert_allclose(got.finish, want.finish, rtol=1e-12)
        np.testing.assert_allclose(got.link_bytes, want.link_bytes, rtol=1e-12)


def test_simulate_iteration_shares_its_builders(tiny):
    """``simulate_iteration(builds=...)``: the second call reuses the first's iteration
    builder (the same object; not the compute-only run's) and gives the same iteration as a
    call without it; a call on another workload empties the dict first."""
    from topoopt.flowsim.iteration import simulate_iteration

    w, design, fab = tiny["pp4"]
    builds: dict = {}
    alone = simulate_iteration(w, fab)
    first = simulate_iteration(w, fab, builds=builds)
    held = builds[frozenset()]
    again = simulate_iteration(w, fab, builds=builds)
    assert builds[frozenset()] is held and builds["for"][0] is w
    assert set(builds) == {"for", frozenset()}  # not the compute-only run's builder
    assert alone.iteration_s == first.iteration_s == again.iteration_s
    assert alone.compute_s == first.compute_s == again.compute_s
    assert alone.exposed_by_class == again.exposed_by_class
    w2, _, fab2 = tiny["pp2"]
    other = simulate_iteration(w2, fab2, builds=builds)
    assert builds["for"][0] is w2 and builds[frozenset()] is not held
    assert other.iteration_s == simulate_iteration(w2, fab2).iteration_s
