"""The grouped quotient of a static simulation (topoopt.flowsim.grouped_routes): each server
pair's routes listed once instead of one sub-flow a path of every flow. Against the plain
simulation of every flow (per flow, per link), on the OCS spine (many ECMP paths a pair across
pods, not route bundles), through a whole interleaved pipeline iteration whose every sub-flow is
refused, and where it must stand aside (no symmetry; per-path times asked)."""

from __future__ import annotations

import numpy as np
import pytest

import topoopt.flowsim.network as nw
from topoopt.fabrics.ocs_spine import ocs_spine
from topoopt.flowsim.grouped_routes import builder_groups, simulate_grouped_classes
from topoopt.flowsim.network import FlowBuilder, Network, simulate_builder
from traffic.errors import InputError

GPS = 2  # GPUs a server


def _spine(servers=32, radix=8, pods=4):
    return ocs_spine(servers, radix, pods=pods, gpus_per_server=GPS, port_bandwidth=12.5e9)


def _shift_builder(fab, shift: int, sizes=None):
    """Every GPU sends to the same GPU of the server ``shift`` further on (a rotation of the
    servers: interchangeable where the fabric is), ``sizes`` bytes (default 1 MB from a
    server's first GPU, 2 MB from its second: two merged flows a server pair)."""
    fb = FlowBuilder(Network(fab, GPS))
    n = fab.n_servers * GPS
    src = np.arange(n)
    dst = (src + shift * GPS) % n
    size = np.where(src % GPS, 2e6, 1e6) if sizes is None else np.asarray(sizes, np.float64)
    for s, d, b in zip(src, dst, size, strict=True):
        fb.add_ranks([int(s)], [int(d)], float(b))
    return fb


def test_groups_list_each_pair_once_and_expand_to_the_flows():
    """The groups' table lists each server pair's routed paths once; expanded to every merged
    flow (its group's paths) it is the sub-flow count build_classes charges."""
    fb = _shift_builder(_spine(), shift=9)  # crosses pods: several ECMP paths a pair
    gf, class_of, epochs = builder_groups(fb)
    flows, class_of2 = fb.build_classes()
    np.testing.assert_array_equal(class_of, class_of2)
    table = gf.versions[0]
    assert gf.n_subflows() == flows.n_paths
    assert table.weight.shape[0] < flows.n_paths  # each pair's paths once
    assert len(epochs) == 1 and epochs[0].start_s == 0.0 and epochs[0].paths == 0


@pytest.mark.parametrize("shift", [1, 9, 16])
def test_grouped_equals_every_flow_simulated(shift):
    """Per builder flow (start, finish) and per link (bytes): the grouped quotient's run
    equals the plain simulation of every flow on every path (rel 1e-9)."""
    fb = _shift_builder(_spine(), shift)
    plain = simulate_builder(fb, aggregate=False, record_series=False)
    got = simulate_grouped_classes(fb, record_series=False)
    assert got is not None
    sim, flows, class_of = got
    assert sim.reduction["method"] == "grouped routes" and sim.reduction["status"] == "on"
    assert sim.reduction["flow_classes"] < flows.n_flows  # a rotation: found
    np.testing.assert_allclose(sim.finish[class_of], plain.finish, rtol=1e-9)
    np.testing.assert_allclose(sim.start[class_of], plain.start, rtol=1e-9)
    np.testing.assert_allclose(sim.link_bytes, plain.link_bytes, rtol=1e-9, atol=1e-6)
    assert sim.path_start is None
    np.testing.assert_array_equal(np.diff(flows.flow_ptr), np.diff(fb.build_classes()[0].flow_ptr))


def test_no_symmetry_gives_none():
    """Random sizes break every interchange: the partition is off, the caller's refusal
    stands (None)."""
    rng = np.random.default_rng(5)
    fab = _spine()
    fb = _shift_builder(fab, 9, sizes=rng.uniform(1e6, 2e6, fab.n_servers * GPS))
    assert simulate_grouped_classes(fb) is None


def _refuse_large(monkeypatch, above=1000):
    """Every reduced sub-flow model over ``above`` sub-flows refused by the memory check, and
    no route bundles: what the OCS spine of Llama 3 405B at 16,384 GPUs meets."""
    real = nw.check_subflows

    def refuse(flows, subflows, reduced=False):
        if reduced and subflows > above:
            raise InputError("flows", f"{subflows:,} sub-flows (test)", "fewer")
        return real(flows, subflows, reduced)

    monkeypatch.setattr(nw, "check_subflows", refuse)
    monkeypatch.setattr(nw, "_simulate_bundled", lambda *a, **k: None)


def _interleaved():
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    plan = load_plan({
        "model": "llama3-8b",
        "parallelism": {"tp": 2, "pp": 2, "vpp": 2, "dp": 8, "micro_batch_size": 1,
                        "global_batch_size": 16},
        "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
        "cluster": {"servers": 16, "gpus_per_server": GPS},
    })  # fmt: skip
    return workload_from_plan(plan)


def test_interleaved_iteration_through_the_groups_equals_plain(monkeypatch):
    """An interleaved pipeline (vpp 2) on the OCS spine, every reduced sub-flow model refused:
    the iteration (per-path times off) goes through the grouped quotient and equals the plain
    iteration of every flow, task by task."""
    from topoopt.flowsim.iteration import simulate_iteration

    w, fab = _interleaved(), _spine(16, 8, 2)
    kw = {"exposed_by_class": False, "record_series": False}
    plain = simulate_iteration(w, fab, reduction=False, **kw)
    _refuse_large(monkeypatch)
    got = simulate_iteration(w, fab, reduction=True, path_times=False, **kw)
    assert got.info["reduction"]["method"] == "grouped routes"
    assert got.iteration_s == pytest.approx(plain.iteration_s, rel=1e-9)
    np.testing.assert_allclose(
        got.timeline["finish_s"].to_numpy(), plain.timeline["finish_s"].to_numpy(), rtol=1e-9
    )
    with pytest.raises(InputError) as e:  # per-path times asked: the refusal stands
        simulate_iteration(w, fab, reduction=True, **kw)
    assert e.value.field == "flows"


def test_memory_check_covers_the_traced_arrays(monkeypatch):
    """The grouped run's memory check (check_grouped: the builder's flows, the groups' paths,
    the classes' group paths before the quotient lists them, then the quotient's sub-flows)
    is at least the peak of the arrays it allocates (numpy's
    allocations as tracemalloc sees them) on a 128-server OCS spine, 256 flows (1.5x measured;
    at 16,384 GPUs 2.94 GB estimated for a 2.58 GB peak of the whole process)."""
    import tracemalloc

    import topoopt.flowsim.grouped_routes as grouped

    fb = _shift_builder(_spine(128, 16, 8), shift=17)
    simulate_grouped_classes(fb)  # compiled kernels and caches first
    est = []
    real = grouped.check_grouped
    monkeypatch.setattr(grouped, "check_grouped", lambda f, s: est.append(real(f, s)) or est[-1])
    tracemalloc.start()
    try:
        sim, _, _ = simulate_grouped_classes(fb, record_series=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sim.reduction["status"] == "on" and len(est) == 3  # groups, listing, quotient
    assert max(est) >= peak


def test_simulate_and_compare_read_no_per_path_times(monkeypatch):
    """``simulate`` and ``compare`` read per-flow times and link bytes only, so where every
    reduced sub-flow model is refused their iteration and communication alone go through the
    grouped quotient (what lets ``simulate`` run Llama 3 405B's OCS spine at 16,384 GPUs):
    the same figures as the plain run of every flow; the communication alone with per-path
    times asked still refuses."""
    from topoopt.app.studies.simulate import simulate_plan
    from topoopt.flowsim.collectives import communication_time

    w = _interleaved()
    kw = {"fabric": "ocs-spine", "degree": 8, "link_bandwidth": 12.5e9}
    plain = simulate_plan(w, reduction=False, **kw)
    _refuse_large(monkeypatch, above=50)  # the communication alone's models too
    got = simulate_plan(w, **kw)
    assert got["reduction"]["method"] == "grouped routes"
    for key in ("iteration_s", "comm_s", "exposed_comm_s", "comm_alone_s"):
        assert got[key] == pytest.approx(plain[key], rel=1e-9), key
    for cls, v in plain["exposed_comm_s_by_class"].items():
        assert got["exposed_comm_s_by_class"][cls] == pytest.approx(v, rel=1e-9, abs=1e-12)
    for cls, v in plain["comm_alone_s_by_class"].items():
        assert got["comm_alone_s_by_class"][cls] == pytest.approx(v, rel=1e-9), cls
    from topoopt.app.studies.compare import build_fabric

    fab = build_fabric("ocs-spine", w, 8, 12.5e9).fabric
    with pytest.raises(InputError) as e:
        communication_time(w, fab, reduction=True)
    assert e.value.field == "flows"


def test_the_quotient_listing_is_checked_before_it_is_built(monkeypatch):
    """``reduce_grouped``'s ``check`` gets the flow classes' group paths (counted here from
    the classes it returns: a flow of each class, its group's paths), at least the quotient's
    sub-flows, before the quotient lists them; with ``check_grouped`` over the budget it
    refuses in one line (field ``flows``) and builds no quotient."""
    from topoopt.flowsim.epochs_reduction import reduce_grouped
    from topoopt.flowsim.subflow_guard import GROUPED_FLOW_BYTES, GROUPED_SUBFLOW_BYTES
    from topoopt.flowsim.subflow_guard import check_grouped as real

    fb = _shift_builder(_spine(), shift=9)
    gf, _, epochs = builder_groups(fb)
    seen = []
    red = red0 = reduce_grouped(gf, epochs, check=seen.append)
    assert red.flows is not None
    first = np.unique(red.partition.flow, return_index=True)[1]  # a flow of each class
    paths_of_group = np.diff(gf.versions[0].flow_ptr)
    assert seen == [int(paths_of_group[gf.group[first]].sum())]
    assert seen[0] >= red.info["quotient_paths"]
    n_b = fb.n
    est = real(n_b, seen[0])
    assert est == pytest.approx(GROUPED_FLOW_BYTES * n_b + GROUPED_SUBFLOW_BYTES * seen[0])
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((est - 1.0) / 1e9))
    built = []
    monkeypatch.setattr(
        "topoopt.flowsim.epochs_reduction._grouped_quotient", lambda *a: built.append(a)
    )
    with pytest.raises(InputError) as e:
        reduce_grouped(gf, epochs, check=lambda n: real(n_b, n))
    msg = str(e.value)
    assert e.value.field == "flows" and "\n" not in msg and not built
    assert f"{seen[0]:,} sub-flows of {n_b:,} flows through the grouped quotient" in msg
    assert "at most" in msg and red0.info["quotient_paths"] <= seen[0]
