"""The symmetry quotient of the time-varying engine (topoopt.flowsim.epochs_reduction): the
reduced run equals the plain one per flow, path and link on symmetric cases (cyclic copies of
random flows with random path versions, priorities, weights, a horizon), on cases whose
symmetry breaks (it coarsens or turns off), a closed form with two paths of one class per flow,
phase-routed iterations, and the memory guard counting the quotient."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from topoopt.flowsim.epochs_reduction import reduce_epochs, simulate_epochs_reduced
from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.timevarying import Epoch, EpochPaths, simulate_epochs

L = 3  # links per position of the ring: link 3 i + t


def cyclic_case(n: int, seed: int, n_base: int = 4, n_versions: int = 3, start0=False):
    """``n`` rotated copies of ``n_base`` random flows (sizes, multiplicities, dependencies
    within a copy) with ``n_versions`` random path versions (1-2 paths of 1-3 links within
    three positions of the ring, weights 1:1 or 1:2), epochs at random times (the first at 0
    with ``start0``): the rotation is a symmetry, so every copy's flows are interchangeable."""
    rng = np.random.default_rng(seed)
    nl = L * n
    cap = np.tile(rng.choice([1.0, 2.0, 3.0], L), n)
    lat = np.tile(rng.choice([0.0, 1e-3], L), n)
    b_size = rng.choice([1.0, 2.0, 5.0], n_base)
    b_deps = [[] if b == 0 else sorted(rng.choice(b, rng.integers(0, 2), replace=False))
              for b in range(n_base)]  # fmt: skip
    b_mult = rng.integers(1, 3, n_base)

    def version():
        out = []
        for _ in range(n_base):
            k = int(rng.integers(1, 3))
            ps = [sorted({int(rng.integers(0, 3)) * L + int(rng.integers(0, L))
                          for _ in range(int(rng.integers(1, 4)))}) for _ in range(k)]  # fmt: skip
            w = rng.choice([1.0, 2.0], k)
            out.append(list(zip(ps, w / w.sum(), strict=True)))
        return out

    def table(vb):
        fptr, pptr, links, w = [0], [0], [], []
        for i in range(n):
            for b in range(n_base):
                for ls, ww in vb[b]:
                    links += [(i * L + x) % nl for x in ls]
                    pptr.append(len(links))
                    w.append(ww)
                fptr.append(len(w))
        return np.array(fptr), np.array(pptr), np.array(links), np.array(w)

    vers = [version() for _ in range(n_versions)]
    deps = [[i * n_base + d for d in b_deps[b]] for i in range(n) for b in range(n_base)]
    fptr, pptr, links, w = table(vers[0])
    fs = FlowSet(
        capacity=cap, latency=lat, size=np.tile(b_size, n), start=np.zeros(n * n_base),
        flow_ptr=fptr, path_ptr=pptr, path_links=links, weight=w,
        dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]),
        deps=np.array([x for d in deps for x in d], np.int64), multiplicity=np.tile(b_mult, n),
    )  # fmt: skip
    t, epochs = 0.0, []
    for v in range(1, n_versions):
        t = 0.0 if (start0 and v == 1) else t + float(rng.uniform(0.2, 1.0))
        epochs.append(Epoch(t, cap, EpochPaths(*table(vers[v]))))
    return fs, epochs


def _same(a, b, rtol=1e-9):
    """Equal per flow (start, finish), per own path (nan where both), per link, to ``rtol``."""
    for x, y in ((a.start, b.start), (a.finish, b.finish), (a.link_bytes, b.link_bytes),
                 (a.path_last_byte, b.path_last_byte), (a.path_finish, b.path_finish)):  # fmt: skip
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape
        assert np.array_equal(np.isnan(x), np.isnan(y))
        assert np.array_equal(np.isinf(x), np.isinf(y))
        ok = np.isfinite(x)
        np.testing.assert_allclose(y[ok], x[ok], rtol=rtol, atol=1e-12)
    assert b.makespan == pytest.approx(a.makespan, rel=rtol) or a.makespan == b.makespan


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("start0", [False, True])
def test_symmetric_cases_reduce_and_match(seed, start0):
    fs, ep = cyclic_case(5, seed, start0=start0)
    red = reduce_epochs(fs, ep)
    assert red.info["status"] == "on"
    assert red.info["flow_classes"] <= 4 < fs.n_flows  # one class per rotated flow, or fewer
    res = simulate_epochs_reduced(fs, ep, reduction=red)
    _same(simulate_epochs(fs, ep), res)
    assert res.reduction["status"] == "on"
    if start0:  # the own paths are never used: nan in both runs
        assert np.all(np.isnan(res.path_last_byte))


@pytest.mark.parametrize("seed", range(3))
def test_priorities_weights_and_horizon_match(seed):
    fs, ep = cyclic_case(4, 10 + seed)
    rng = np.random.default_rng(seed)
    prio = np.tile(rng.integers(0, 2, 4), 4)
    w = np.tile(rng.choice([1.0, 3.0], 4), 4)
    kw = {"priority": prio, "weight": w}
    _same(simulate_epochs(fs, ep, **kw), simulate_epochs_reduced(fs, ep, **kw))
    plain = simulate_epochs(fs, ep, horizon=1.0, late_cut=True)
    _same(plain, simulate_epochs_reduced(fs, ep, horizon=1.0, late_cut=True))
    # a priority that breaks the rotation (copy 0's flows first) coarsens the classes
    prio2 = np.zeros(fs.n_flows, np.int64)
    prio2[4:] = 1
    red = reduce_epochs(fs, ep, priority=prio2)
    assert red.info["flow_classes"] > reduce_epochs(fs, ep).info["flow_classes"]
    _same(simulate_epochs(fs, ep, priority=prio2), simulate_epochs_reduced(fs, ep, priority=prio2))


@pytest.mark.parametrize("seed", range(4))
def test_broken_symmetry_coarsens_or_turns_off_and_matches(seed):
    fs, ep = cyclic_case(5, seed)
    cap = ep[0].capacity.copy()
    cap[0] *= 1.5  # one link of one epoch differs
    ep1 = [Epoch(ep[0].start_s, cap, ep[0].paths), *ep[1:]]
    red = reduce_epochs(fs, ep1)
    assert red.info["status"] == "off" or red.info["link_classes"] > L
    _same(simulate_epochs(fs, ep1), simulate_epochs_reduced(fs, ep1, reduction=red))
    fs2 = replace(fs, size=fs.size * np.linspace(1.0, 2.0, fs.n_flows))  # no two flows alike
    red2 = reduce_epochs(fs2, ep)
    assert red2.info["flow_classes"] == fs2.n_flows  # off, or only a flow's equal paths merged
    if red2.info["path_classes"] == red2.info["paths"]:
        assert red2.info["status"] == "off"
        assert red2.info["reason"] == "no symmetry: every flow is its own class"
    res = simulate_epochs_reduced(fs2, ep, reduction=red2)
    assert res.reduction["status"] == red2.info["status"]
    _same(simulate_epochs(fs2, ep), res)


def test_two_paths_of_one_class_per_flow_closed_form():
    """``n`` flows of 1 byte, flow ``i`` split evenly over links ``3i`` and ``3(i+1)`` (each
    link carries two halves at 0.5 B/s); at 0.3 s all move to link ``3i+1`` alone (0.7 bytes
    left at 1 B/s); at 0.6 s, 0.4 bytes left, split evenly over links ``3i+2`` and
    ``3(i+1)+2`` (two halves a link again, 0.2 bytes at 0.5 B/s): every flow ends at 1.0 s.
    One flow class whose sub-flow classes stand for two paths each in the split versions."""
    n = 6
    two = np.arange(0, 2 * n + 1, 2)
    fs = FlowSet(
        capacity=np.ones(L * n), latency=np.zeros(L * n), size=np.ones(n), start=np.zeros(n),
        flow_ptr=two, path_ptr=np.arange(2 * n + 1),
        path_links=np.array([[L * i, L * ((i + 1) % n)] for i in range(n)]).ravel(),
        weight=np.full(2 * n, 0.5),
    )  # fmt: skip
    later = np.array([[L * i + 2, L * ((i + 1) % n) + 2] for i in range(n)]).ravel()
    ep = [
        Epoch(0.3, np.ones(L * n), EpochPaths.single_path([[L * i + 1] for i in range(n)])),
        Epoch(0.6, np.ones(L * n),
              EpochPaths(two, np.arange(2 * n + 1), later, np.full(2 * n, 0.5))),
    ]  # fmt: skip
    red = reduce_epochs(fs, ep)
    assert (red.info["flow_classes"], red.flows.n_flows) == (1, 1)
    assert [m.tolist() for m in red.members] == [[2.0], [1.0], [2.0]]
    res = simulate_epochs_reduced(fs, ep, reduction=red)
    np.testing.assert_allclose(res.finish, 1.0, rtol=1e-12)
    np.testing.assert_allclose(res.link_bytes[0::L], 0.3, rtol=1e-12)
    np.testing.assert_allclose(res.link_bytes[1::L], 0.3, rtol=1e-12)
    np.testing.assert_allclose(res.link_bytes[2::L], 0.4, rtol=1e-12)
    _same(simulate_epochs(fs, ep), res, rtol=1e-12)


def _tiny_design(plan):
    from solvers import DesignProblem, design_fabric, design_workload, solve
    from traffic.build import workload_from_plan

    wl = workload_from_plan(plan)
    problem = DesignProblem.from_workload(wl, degree=2, link_bandwidth=12.5e9)
    design = solve(problem, "topoopt", seed=0)
    fab = design_fabric(design, gpus_per_server=wl.gpus_per_server)
    return design_workload(wl, design, problem), design, fab


PIPELINE = {
    "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
              "global_batch": 16},
    "parallelism": {"tp": 1, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 16},
    "cluster": {"servers": 4, "gpus_per_server": 1},
}  # fmt: skip


@pytest.mark.parametrize("plan", [PIPELINE, "vgg16-dp"])
def test_phase_routed_iterations_match_per_choice(plan):
    """Every routing schedule a per-phase routing simulates (each phase static or routed, at
    the reference's phase boundaries), and one table alone: the reduced run's iteration equals
    the plain one's, and so do its fabric flows' finishes."""
    import itertools

    from solvers.joint.phase_routing import phase_routing, simulate_routing_schedule

    w, design, fab = _tiny_design(plan)
    res = phase_routing(w, design, fab)
    starts = [p.start_s for p in res.phases]
    own = [phase_routing_table(res, i) for i in range(len(res.phases))]
    static = design.routing
    c = design.circuits.rows
    cases = [tuple(o if x and o is not None else static for x, o in zip(choice, own, strict=True))
             for choice in itertools.product((False, True), repeat=len(starts))]  # fmt: skip
    if len(starts) == 1:  # one phase: the static table, then a copy of it from mid-iteration
        copy = replace(static, weight=static.weight.copy())
        cases, starts = [(static, copy)], [0.0, res.static_iteration_s / 2]
    seen = 0
    for rts in cases:
        a = simulate_routing_schedule(w, fab, c, rts, starts, reduction=False)
        b = simulate_routing_schedule(w, fab, c, rts, starts, reduction=True)
        assert b.iteration_s == pytest.approx(a.iteration_s, rel=1e-9)
        np.testing.assert_allclose(b.flows["finish"], a.flows["finish"], rtol=1e-9)
        assert b.result.info["reduction"]["status"] in ("on", "off")
        seen += 1
    assert seen >= 1
    # one table as one epoch (what a table refused by the static engine's budget runs as)
    import solvers.joint.phase_routing as pr

    plain = pr.simulate_routing_schedule(w, fab, c, (static,), (0.0,)).iteration_s
    one = pr.simulate_routing_schedule(w, fab, c, (static, static), (0.0, 0.0))
    assert one.iteration_s == pytest.approx(plain, rel=1e-9)


def phase_routing_table(res, i):
    """The routing phase ``i`` takes when routed (``None``: it keeps the static one)."""
    return res.routings[i] if res.choice[i] else None


def test_guard_counts_the_quotient(monkeypatch):
    """The memory guard of a reduced run (``check_grouped``: the route-bundle path's bytes a
    builder flow, one quotient class a flow at most, and reduced sub-flows): the classes' listed
    paths (the refinement's input), then the quotient's sub-flows, not every sub-flow of every
    table; a budget below the listed paths' refuses in one line (field ``flows``) before the
    run."""
    import topoopt.flowsim.subflow_guard as guard
    from solvers.joint.phase_routing import simulate_routing_schedule
    from traffic.errors import InputError

    w, design, fab = _tiny_design("vgg16-dp")
    calls = []
    real = guard.check_grouped

    def spy(flows, subflows):
        calls.append((int(flows), int(subflows)))
        return real(flows, subflows)

    monkeypatch.setattr(guard, "check_grouped", spy)
    c, st = design.circuits.rows, design.routing
    run = simulate_routing_schedule(w, fab, c, (st, st), (0.0, 1e-4))
    red = run.result.info["reduction"]
    assert red["status"] == "on" and red["quotient_paths"] < red["paths"]
    listed, quotient = calls[0], calls[1]
    n_b = listed[0]  # the builder's flows
    assert listed == (n_b, red["group_paths"])  # the groups' routes, before refining
    assert quotient == (n_b, red["quotient_paths"])  # then the quotient's sub-flows
    est = real(n_b, red["group_paths"])
    assert est == pytest.approx(
        guard.GROUPED_FLOW_BYTES * n_b + guard.GROUPED_SUBFLOW_BYTES * red["group_paths"]
    )
    # a budget below the groups' routes: refused in one line before the refinement
    monkeypatch.setattr(guard, "check_grouped", real)
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((est - 1.0) / 1e9))
    with pytest.raises(InputError) as e:
        simulate_routing_schedule(w, fab, c, (st, st), (0.0, 1e-4))
    assert e.value.field == "flows" and f"{red['group_paths']:,} sub-flows" in str(e.value)


def grouped_case(n: int, seed: int, perturb: bool = False):
    """The cyclic case's path versions as the routes of ``4 n`` groups, each carrying one or
    two flows (rotated copies), the first epoch at 0 with version 0: ``(grouped, epochs with
    version indices, flows, epochs with paths)``, the last two the same run listed per flow.
    ``perturb``: one flow of copy 0 is larger (its rotation symmetry broken)."""
    from topoopt.flowsim.epochs_reduction import GroupedFlows

    fs, ep = cyclic_case(n, seed, start0=True)
    rng = np.random.default_rng(seed + 100)
    per = rng.integers(1, 3, 4)  # flows per group of each base group
    group = np.concatenate([np.repeat(np.arange(4 * i, 4 * i + 4), per) for i in range(n)])
    f_size = np.tile(np.concatenate([rng.choice([1.0, 3.0], k) for k in per]), n)
    if perturb:
        f_size[0] *= 1.5
    nf = group.shape[0]
    per_copy = int(per.sum())
    deps = [[] if j == 0 else [i * per_copy + j - 1] for i in range(n) for j in range(per_copy)]
    dep_ptr = np.concatenate([[0], np.cumsum([len(d) for d in deps])])
    dep = np.array([x for d in deps for x in d], np.int64)
    mult = np.tile(rng.integers(1, 3, per_copy), n)
    versions = [EpochPaths.of(fs)] + [e.paths for e in ep]
    gf = GroupedFlows(
        capacity=fs.capacity, latency=fs.latency, size=f_size, start=np.zeros(nf),
        multiplicity=mult, dep_ptr=dep_ptr, deps=dep, group=group, versions=versions,
    )  # fmt: skip

    def expand(v):
        t = versions[v]
        cnt = np.diff(t.flow_ptr)[group]
        fptr = np.concatenate([[0], np.cumsum(cnt)])
        ids = np.concatenate([np.arange(t.flow_ptr[g], t.flow_ptr[g + 1]) for g in group])
        lens = np.diff(t.path_ptr)[ids]
        pptr = np.concatenate([[0], np.cumsum(lens)])
        links = np.concatenate([t.path_links[t.path_ptr[p] : t.path_ptr[p + 1]] for p in ids])
        return EpochPaths(fptr, pptr, links, t.weight[ids])

    tabs = [expand(v) for v in range(len(versions))]
    plain = FlowSet(
        capacity=fs.capacity, latency=fs.latency, size=f_size, start=np.zeros(nf),
        flow_ptr=tabs[0].flow_ptr, path_ptr=tabs[0].path_ptr, path_links=tabs[0].path_links,
        weight=tabs[0].weight, dep_ptr=dep_ptr, deps=dep, multiplicity=mult,
    )  # fmt: skip
    starts = [0.0] + [e.start_s for e in ep[1:]]
    cap = ep[0].capacity
    g_ep = [Epoch(t, cap, v) for v, t in enumerate(starts)]
    p_ep = [Epoch(t, cap, tabs[v]) for v, t in enumerate(starts)]
    return gf, g_ep, plain, p_ep


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("perturb", [False, True])
def test_grouped_quotient_matches_the_flows_listed_one_by_one(seed, perturb):
    """The grouped reduction (the groups' routes refined, not every flow's paths) against the
    plain run of every flow on its group's paths: the same starts, finishes and link bytes;
    symmetric, one class per rotated flow; one flow perturbed, more classes (or off)."""
    from topoopt.flowsim.epochs_reduction import reduce_grouped, simulate_grouped_reduced

    gf, g_ep, plain, p_ep = grouped_case(5, seed, perturb)
    red = reduce_grouped(gf, g_ep)
    a = simulate_epochs(plain, p_ep)
    per_copy = gf.n_flows // 5
    if not perturb:
        assert red.info["status"] == "on" and red.info["flow_classes"] <= per_copy
    else:
        assert red.info["status"] == "off" or red.info["flow_classes"] > per_copy
    if red.flows is None:
        return
    b = simulate_grouped_reduced(gf, red)
    for x, y in ((a.start, b.start), (a.finish, b.finish), (a.link_bytes, b.link_bytes)):
        np.testing.assert_allclose(y, x, rtol=1e-9, atol=1e-12)
