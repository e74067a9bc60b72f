"""The work estimate (:mod:`topoopt.flowsim.work`) against the flows the iteration model builds.

The estimate counts flows from the plan's structure before any fabric exists; the simulation
builds them (``info["flows"]``: the flows simulated). On small plans of every family that
multiplies flows (DLRM's embedding all-to-all, FSDP's per-slot gathers, ZeRO-2/3's per-micro-batch
reduce-scatters, MoE all-to-alls, context parallelism, interleaved pipelines) both must be
equal, on the ideal switch and on a fat-tree (routes split bytes over paths, never add flows).
The peak memory the estimate also gives is measured in ``benchmarks/bench_estimate.py``."""

from __future__ import annotations

import pytest

from topoopt.fabrics import fat_tree, ideal
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.work import PROCESS_BYTES, check_work, estimate_work
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.plan import load_plan

F32 = {"activation_bytes": 4, "gradient_bytes": 4, "parameter_bytes": 4}
B16 = {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2}


def _plan(model, par, servers, gps, prec=B16, **extra):
    return load_plan(
        {"model": model, "parallelism": par, "precision": prec,
         "cluster": {"servers": servers, "gpus_per_server": gps}, **extra}
    )  # fmt: skip


PLANS = {
    "vgg16-dp": _plan(
        "vgg16", {"dp": 8, "micro_batch_size": 4, "global_batch_size": 32}, 4, 2, F32
    ),  # fmt: skip
    "dlrm": _plan("dlrm", {"dp": 8, "micro_batch_size": 64, "global_batch_size": 512}, 4, 2, F32),
    "llama-pp-vpp": _plan(
        "llama3-8b",
        {"tp": 2, "pp": 2, "dp": 2, "vpp": 2, "micro_batch_size": 1, "global_batch_size": 8},
        4,
        2,
    ),  # fmt: skip
    "llama-fsdp": _plan(
        "llama3-8b",
        {"dp": 8, "fsdp": "full_shard", "micro_batch_size": 1, "global_batch_size": 16},
        4,
        2,
    ),  # fmt: skip
    "llama-zero2": _plan(
        "llama3-8b",
        {"tp": 2, "dp": 4, "zero": 2, "micro_batch_size": 1, "global_batch_size": 8},
        4,
        2,
    ),  # fmt: skip
    "llama-cp": _plan(
        "llama3-8b",
        {"tp": 2, "cp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 4},
        4,
        2,
    ),  # fmt: skip
    "mixtral-ep": _plan(
        {"base": "mixtral-8x7b", "layers": 4},
        {"tp": 1, "dp": 8, "ep": 4, "micro_batch_size": 1, "global_batch_size": 16},
        4,
        2,
    ),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_estimate_equals_the_flows_built(name):
    w = workload_from_plan(PLANS[name])
    est = estimate_work(w)
    assert est.gpus == w.gpus == 8
    for fab in (ideal(4, gpus_per_server=2), fat_tree(4, gpus_per_server=2)):
        it = simulate_iteration(w, fab, exposed_by_class=False)
        assert it.info["flows"] == est.flows, (name, fab.family)
    assert est.peak_bytes > PROCESS_BYTES


def test_families_that_multiply_flows_are_counted():
    """The old closed form counted members x buckets and missed per-micro-batch families: FSDP
    gathers every slot and reduce-scatters every micro-batch, so its flows grow with the
    micro-batches (4 -> 8 -> 16 micro-batches: at least 1.5x more flows each time); plain data
    parallelism buckets once per iteration, so only its compute grows: per micro-batch and
    cell (one GPU each), a forward and a backward slot, each a compute flow and a blocking-task
    flow, 4 flows x 8 cells."""

    def flows(model, par, batch):
        p = _plan(model, {**par, "micro_batch_size": 1, "global_batch_size": batch}, 4, 2)
        return estimate_work(workload_from_plan(p)).flows

    fsdp = [flows("llama3-8b", {"dp": 8, "fsdp": "full_shard"}, 8 * m) for m in (4, 8, 16)]
    assert fsdp[1] >= 1.5 * fsdp[0] and fsdp[2] >= 1.5 * fsdp[1], fsdp
    dp = [flows("vgg16", {"dp": 8}, 8 * m) for m in (4, 8, 16)]
    assert dp[1] - dp[0] == 4 * 8 * 4 and dp[2] - dp[1] == 4 * 8 * 8, dp


def test_check_work_names_the_limit_that_binds(monkeypatch):
    w = workload_from_plan(PLANS["llama-fsdp"])
    n = estimate_work(w).flows
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", str(n))
    assert check_work(w).flows == n  # at the cap: admitted
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", str(n - 1))
    with pytest.raises(InputError, match=f"about {n:,} flows.*TOPOOPT_MAX_FLOWS"):
        check_work(w)
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", "1e9")
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "1e-6")  # 1,000 bytes
    with pytest.raises(InputError, match="GB of arrays.*TOPOOPT_MEMORY_BUDGET_GB"):
        check_work(w)


def test_imported_task_graphs_are_bounded_from_above():
    """A TopoOpt task graph is estimated from its tasks (one flow each, plus two per member of
    each all-reduce's ring): never below the flows built, and within 1.5x on the CANDLE graph
    (3,484 estimated, 2,532 built: barriers and one-server all-reduces build fewer)."""
    from pathlib import Path

    from traffic.taskgraph import read_taskgraph

    data = Path(__file__).resolve().parents[1] / "data" / "topoopt-taskgraphs"
    w = read_taskgraph(data / "100candle_16.fbuf")
    est = estimate_work(w).flows
    built = simulate_iteration(w, ideal(w.servers, gpus_per_server=w.gpus_per_server),
                               exposed_by_class=False).info["flows"]  # fmt: skip
    assert built <= est <= 1.5 * built, (est, built)


def test_subflows_are_checked_when_the_flows_are_routed(monkeypatch):
    """The sub-flows are counted exactly once routed, before their arrays exist, and refused
    beyond the budget (the most paths of a pair times every flow refused GPT-3 175B on the
    three-tier Clos of 16,384 GPUs as 35.6 GB; it peaks at 6.24 GB)."""
    from topoopt.flowsim import network
    from topoopt.flowsim.work import FLOW_PEAK_BYTES, SUBFLOW_BYTES, fabric_paths

    w = workload_from_plan(PLANS["vgg16-dp"])  # a ring over servers 0-3 of a k = 4 fat-tree
    fab = fat_tree(4, gpus_per_server=2)
    seen = []
    real = network.check_subflows

    def spy(flows, subflows, reduced=False):
        seen.append((flows, subflows))
        return real(flows, subflows, reduced)

    monkeypatch.setattr(network, "check_subflows", spy)
    base = simulate_iteration(w, fab, exposed_by_class=False).iteration_s
    flows, subflows = max(seen, key=lambda x: FLOW_PEAK_BYTES * x[0] + SUBFLOW_BYTES * x[1])
    assert flows == estimate_work(w).flows
    # servers 1-2 and 3-0 sit on different edge switches of pod 0: two paths each
    assert fabric_paths(fab) == 4 and subflows > 0
    need = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * subflows
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(need * 1.01 / 1e9))
    assert simulate_iteration(w, fab, exposed_by_class=False).iteration_s == base
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(need * 0.99 / 1e9))
    with pytest.raises(InputError, match=f"{subflows:,} sub-flows of {flows:,} flows"):
        simulate_iteration(w, fab, exposed_by_class=False)


def test_check_work_counts_the_reduced_path(monkeypatch):
    """With the symmetry reduction the flow cap is REDUCED_FLOW_FACTOR times TOPOOPT_MAX_FLOWS
    and the arrays are the route-bundle path's (one bundle a flow before routing): exact FSDP
    at 4,096 GPUs (10.8 M flows) runs in the default limits, and the guard still refuses
    beyond them."""
    from topoopt.flowsim.subflow_guard import BUNDLE_BYTES, BUNDLE_FLOW_BYTES
    from topoopt.flowsim.work import FLOW_PEAK_BYTES, QUOTIENT_CLASS_BYTES, REDUCED_FLOW_FACTOR

    w = workload_from_plan(PLANS["llama-fsdp"])
    plain, red = estimate_work(w), estimate_work(w, reduced=True)
    assert red.flows == plain.flows
    assert plain.peak_bytes - red.peak_bytes == pytest.approx(
        (FLOW_PEAK_BYTES - BUNDLE_FLOW_BYTES - BUNDLE_BYTES - QUOTIENT_CLASS_BYTES) * plain.flows
    )
    n = plain.flows
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", str(n - 1))
    with pytest.raises(InputError, match="TOPOOPT_MAX_FLOWS to raise it; about 3 minutes"):
        check_work(w)
    assert check_work(w, reduced=True).flows == n
    monkeypatch.setenv("TOPOOPT_MAX_FLOWS", str((n - 1) // REDUCED_FLOW_FACTOR))
    with pytest.raises(InputError, match="with the symmetry reduction"):
        check_work(w, reduced=True)
    monkeypatch.delenv("TOPOOPT_MAX_FLOWS")
    budget = (plain.array_bytes + red.array_bytes) / 2
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(budget / 1e9))
    with pytest.raises(InputError, match="GB of arrays"):
        check_work(w)
    assert check_work(w, reduced=True).flows == n


def test_reduced_subflows_are_checked_as_reduced_and_a_fallback_as_plain(monkeypatch):
    """Flows simulated through the symmetry quotient are checked at SUBFLOW_BYTES_REDUCED a
    sub-flow (the event loop holds the classes), the unreduced model at SUBFLOW_BYTES; through
    route bundles (servers with one link to one switch) at what the bundles hold
    (check_bundles); a reduction that turns itself off is checked again as plain before it
    simulates."""
    import numpy as np

    from topoopt.flowsim import FlowSet
    from topoopt.flowsim import network as network_module
    from topoopt.flowsim.subflow_guard import (
        BUNDLE_BYTES,
        BUNDLE_FLOW_BYTES,
        BUNDLE_ROUTE_BYTES,
        SUBFLOW_BYTES,
        SUBFLOW_BYTES_REDUCED,
    )
    from topoopt.flowsim.symmetry import simulate_reduced
    from topoopt.flowsim.work import FLOW_PEAK_BYTES

    w = workload_from_plan(PLANS["vgg16-dp"])
    fab = fat_tree(4, gpus_per_server=2)
    seen, seen_b = [], []
    real, real_b = network_module.check_subflows, network_module.check_bundles

    def spy(flows, subflows, reduced=False):
        seen.append((flows, subflows, reduced))
        return real(flows, subflows, reduced)

    def spy_b(flows, bundles, route_entries=0):
        seen_b.append((flows, bundles, route_entries))
        return real_b(flows, bundles, route_entries)

    monkeypatch.setattr(network_module, "check_subflows", spy)
    monkeypatch.setattr(network_module, "check_bundles", spy_b)
    base = simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s
    assert seen_b and not seen  # route bundles: checked as bundles, no sub-flow listed
    need_b = max(BUNDLE_FLOW_BYTES * f + BUNDLE_BYTES * b + BUNDLE_ROUTE_BYTES * r
                 for f, b, r in seen_b)  # fmt: skip
    simulate_iteration(w, fab, exposed_by_class=False, reduction=False)
    flows, subflows, reduced = max(seen, key=lambda x: x[1])
    assert not reduced
    plain = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * subflows
    assert need_b < plain
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((need_b + plain) / 2 / 1e9))
    assert simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s == base
    with pytest.raises(InputError, match="sub-flows"):
        simulate_iteration(w, fab, exposed_by_class=False, reduction=False)
    monkeypatch.delenv("TOPOOPT_MEMORY_BUDGET_GB")
    # without route bundles: the sub-flows, reduced, at SUBFLOW_BYTES_REDUCED
    monkeypatch.setattr(network_module.FlowBuilder, "build_bundles", lambda self, *a, **k: None)
    seen.clear()
    assert simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s == (
        pytest.approx(base, rel=1e-9)
    )
    flows, subflows, reduced = max(seen, key=lambda x: x[1])
    assert reduced
    lo = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES_REDUCED * subflows
    hi = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * subflows
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((lo + hi) / 2 / 1e9))
    assert simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s == (
        pytest.approx(base, rel=1e-9)
    )
    with pytest.raises(InputError, match="sub-flows"):
        simulate_iteration(w, fab, exposed_by_class=False, reduction=False)
    # two flows of different sizes on one link: no symmetry, the reduction is off
    fs = FlowSet.single_path([1.0], [0.0], size=[1.0, 2.0], start=[0.0, 0.0], paths=[[0], [0]])
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(FLOW_PEAK_BYTES * 2 * 1.01 / 1e9))
    with pytest.raises(InputError, match="2 sub-flows of 2 flows"):
        simulate_reduced(fs)
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "1")
    assert np.allclose(simulate_reduced(fs).finish, [2.0, 3.0])


def test_estimate_counts_the_all_to_all_matrices_the_workload_holds(monkeypatch):
    """DLRM with embedding tables of different widths holds its all-to-all as two GPU x GPU
    matrices (forward, backward), sparse: the rows of the GPUs holding tables. At 24 GPUs all
    24 hold tables: 24 x 23 entries of 8 + 4 bytes and 25 int32 row pointers each (dense:
    2 x 24**2 x 8; at 16,384 GPUs dense was 4.29 GB, measured 2026-12-06: 4.4 GB held before
    the first flow). The estimate counts them; the plan loader refuses them beyond the budget
    before allocating."""
    from topoopt.app.studies.advise import scale_plan
    from topoopt.flowsim.work import (
        FLOW_PEAK_BYTES,
        GPU_PAIR_BYTES,
        GPU_PEAK_BYTES,
        held_matrix_bytes,
    )

    plan = scale_plan(load_plan("dlrm"), 24, "h100-sxm")
    w = workload_from_plan(plan)
    held = 2 * (24 * 23 * 12 + 25 * 4)
    assert held_matrix_bytes(w) == held
    est = estimate_work(w)
    gpu_terms = GPU_PEAK_BYTES * 24 + GPU_PAIR_BYTES * 24**2
    assert est.peak_bytes == pytest.approx(
        PROCESS_BYTES + held + FLOW_PEAK_BYTES * est.flows + gpu_terms
    )
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(held * 0.99 / 1e9))
    with pytest.raises(InputError, match="embedding all-to-all.*TOPOOPT_MEMORY_BUDGET_GB"):
        workload_from_plan(plan)


def test_the_per_flow_result_is_checked_before_it_is_expanded(monkeypatch):
    """The result per builder flow of a merged simulation (every builder flow gets its class's
    per-path times) is counted exactly before it is allocated and refused beyond the budget:
    DLRM's all-to-all at 4,096 GPUs on the torus (about 1,300 paths a server pair, every GPU
    pair of two servers a builder flow) went past 11.8 GB there, after the sub-flow checks
    passed (advise simulates through the symmetry reduction, as here)."""
    from topoopt.flowsim import iteration, subflow_guard

    w = workload_from_plan(PLANS["dlrm"])
    fab = fat_tree(4, gpus_per_server=2)
    reduction = True
    seen = []
    real = iteration.check_expansion

    def spy(flows, subflows, expanded):
        seen.append((flows, subflows, expanded))
        return real(flows, subflows, expanded)

    monkeypatch.setattr(iteration, "check_expansion", spy)
    it = simulate_iteration(w, fab, exposed_by_class=False, reduction=reduction)
    assert len(seen) == 1
    flows, subflows, expanded = seen[0]
    # the counts are the expanded result's own sizes, and the merge saved sub-flows
    assert flows == it.sim.finish.size and expanded == it.sim.path_finish.size
    assert subflows < expanded
    # a tiny case: make each expanded sub-flow weigh 100 kB, so that this check binds first
    monkeypatch.setattr(subflow_guard, "EXPANDED_PATH_BYTES", 1e5)
    need = subflow_guard.EXPANDED_FLOW_BYTES * flows + 1e5 * expanded
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(need * 1.01 / 1e9))
    assert (
        simulate_iteration(w, fab, exposed_by_class=False, reduction=reduction).iteration_s
        == it.iteration_s
    )
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(need * 0.99 / 1e9))
    with pytest.raises(InputError, match=f"{expanded:,} sub-flows in the result of {flows:,}"):
        simulate_iteration(w, fab, exposed_by_class=False, reduction=reduction)


def test_server_pair_path_counts_are_the_routes_without_listing_them():
    """Network.pair_path_counts against the torus's closed form: on a 5 x 5 torus (odd sides:
    one shortest way round each ring) a pair ``dx, dy`` hops apart has ``C(dx + dy, dx)``
    shortest paths; pair_routes lists as many, and a path cap gives ``min(count, k)``."""
    from math import comb

    import numpy as np

    from topoopt.fabrics import torus
    from topoopt.flowsim.network import Network

    fab = torus((5, 5))
    src = np.zeros(25, np.int64)
    dst = np.arange(25)
    dx, dy = dst % 5, dst // 5  # order "F": the first coordinate varies fastest
    dx, dy = np.minimum(dx, 5 - dx), np.minimum(dy, 5 - dy)
    closed = [comb(int(a + b), int(a)) for a, b in zip(dx, dy, strict=True)]
    net = Network(fab, gpus_per_server=1)
    assert net.pair_path_counts(src, dst).tolist() == closed
    ps, comm = net.pair_routes(src, dst)
    assert np.diff(ps.commodity_ptr)[comm].tolist() == closed
    capped = Network(fab, gpus_per_server=1, max_paths=3)
    assert capped.pair_path_counts(src, dst).tolist() == [min(c, 3) for c in closed]


def test_the_expansion_is_refused_before_the_pairs_are_routed(monkeypatch):
    """DLRM on a torus (servers with several links: no route bundles, every path a sub-flow):
    the per-path result's size is checked from the pairs' path counts before any pair is
    routed (advise's DLRM torus at 4,096 GPUs spent about 90 s of CPU routing and simulating
    before the check after the simulation refused it); the count is the late check's."""
    from topoopt.fabrics import torus
    from topoopt.flowsim import network, subflow_guard

    w = workload_from_plan(PLANS["dlrm"])
    fab = torus((2, 2), gpus_per_server=2)
    seen = []
    real = network.check_expansion

    def spy(flows, subflows, expanded):
        seen.append((flows, expanded))
        return real(flows, subflows, expanded)

    monkeypatch.setattr(network, "check_expansion", spy)
    it = simulate_iteration(w, fab, exposed_by_class=False, reduction=True)
    assert len(seen) == 1  # the result's run only, not the compute-only run
    flows, expanded = seen[0]
    assert (flows, expanded) == (it.sim.finish.size, it.sim.path_finish.size)
    assert expanded > flows  # the diagonal pairs have two paths
    monkeypatch.setattr(subflow_guard, "EXPANDED_PATH_BYTES", 1e5)
    need = subflow_guard.EXPANDED_FLOW_BYTES * flows + 1e5 * expanded
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(need * 0.99 / 1e9))

    def no_routes(*a, **k):
        raise AssertionError("routed before the check")

    monkeypatch.setattr(network.Network, "pair_routes", no_routes)
    with pytest.raises(InputError, match=f"{expanded:,} sub-flows in the result of {flows:,}"):
        simulate_iteration(w, fab, exposed_by_class=False, reduction=True)


def test_per_flow_times_only_are_the_full_results_without_the_path_arrays(monkeypatch):
    """``path_times=False`` (what advise asks): every per-flow time, link byte and figure of
    the full result, the per-path arrays None, and the expansion check counts no paths (it
    cannot refuse what is not built)."""
    import numpy as np

    from topoopt.fabrics import torus
    from topoopt.flowsim import iteration

    w = workload_from_plan(PLANS["dlrm"])
    fab = torus((2, 2), gpus_per_server=2)
    full = simulate_iteration(w, fab, exposed_by_class=False, reduction=True)
    seen = []
    monkeypatch.setattr(iteration, "check_expansion", lambda f, s, e: seen.append(e) or 0.0)
    lean = simulate_iteration(w, fab, exposed_by_class=False, reduction=True, path_times=False)
    assert seen == [0]
    assert lean.sim.path_start is lean.sim.path_last_byte is lean.sim.path_finish is None
    assert full.sim.path_finish.size > 0
    assert lean.iteration_s == full.iteration_s and lean.comm_s == full.comm_s
    assert lean.comm_by_class == full.comm_by_class
    for k in ("start", "finish", "link_bytes"):
        assert np.array_equal(getattr(lean.sim, k), getattr(full.sim, k))
    assert lean.links.equals(full.links) and lean.timeline.equals(full.timeline)
    with pytest.raises(InputError, match="path_times"):
        simulate_iteration(w, fab, path_times=1)


def test_the_quotient_is_checked_when_its_size_is_known_before_it_is_built(monkeypatch):
    """Where the routed sub-flows fit as reduced, the symmetry quotient is checked once the
    classes are known (check_quotient: QUOTIENT_SUBFLOW_BYTES a quotient sub-flow on top) and
    refused, in one line, before it is built when that is over the budget; the count checked
    is the quotient's own sub-flows."""
    from topoopt.flowsim import network as network_module
    from topoopt.flowsim import symmetry as symmetry_module
    from topoopt.flowsim.subflow_guard import QUOTIENT_SUBFLOW_BYTES, SUBFLOW_BYTES_REDUCED
    from topoopt.flowsim.work import FLOW_PEAK_BYTES

    w = workload_from_plan(PLANS["vgg16-dp"])
    fab = fat_tree(4, gpus_per_server=2)
    monkeypatch.setattr(network_module.FlowBuilder, "build_bundles", lambda self, *a, **k: None)
    seen, built = [], []
    real_q, real_quotient = network_module.check_quotient, symmetry_module._quotient

    def spy(flows, subflows, quotient):
        seen.append((flows, subflows, quotient))
        return real_q(flows, subflows, quotient)

    def quotient(fs, part):
        built.append(part.n_path_classes)
        return real_quotient(fs, part)

    monkeypatch.setattr(network_module, "check_quotient", spy)
    monkeypatch.setattr(symmetry_module, "_quotient", quotient)
    base = simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s
    assert seen and [q for _, _, q in seen] == built  # checked, then built, each quotient
    f, s, q = max(seen, key=lambda x: x[2])
    assert 0 < q < s
    lo = FLOW_PEAK_BYTES * f + SUBFLOW_BYTES_REDUCED * s
    hi = lo + QUOTIENT_SUBFLOW_BYTES * q
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((lo + hi) / 2 / 1e9))
    seen.clear()
    built.clear()
    with pytest.raises(InputError, match=f"a symmetry quotient of {q:,} sub-flows"):
        simulate_iteration(w, fab, exposed_by_class=False, reduction=True)
    assert len(seen) == len(built) + 1  # the refused one was never built
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr(hi * 1.01 / 1e9))
    assert simulate_iteration(w, fab, exposed_by_class=False, reduction=True).iteration_s == base
