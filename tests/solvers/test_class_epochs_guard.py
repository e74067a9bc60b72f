"""The memory guard of the plain run of flow classes under a routing schedule
(:func:`solvers.reconfig.schedule.class_epochs`, the per-phase routing's run when the grouped
quotient turns itself off): it charges the builder's flows what a run of merged flows holds of
each, the plain model per class and per sub-flow
(:func:`topoopt.flowsim.subflow_guard.check_class_subflows`), counted here independently of
the guard, at least what the run allocates (traced), and refuses over the budget in one line."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from solvers.joint.phase_routing import simulate_routing_schedule
from tests.flowsim.test_timevarying_reduced import _tiny_design  # a topoopt design, 4 x 2
from topoopt.flowsim import subflow_guard as guard
from traffic.errors import InputError

PLAN = {
    "model": {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
              "global_batch": 16},
    "parallelism": {"tp": 1, "pp": 4, "dp": 2, "micro_batch_size": 1, "global_batch_size": 16},
    "cluster": {"servers": 4, "gpus_per_server": 2},
}  # fmt: skip


@pytest.fixture(scope="module")
def tiny():
    return _tiny_design(PLAN)


def _off(monkeypatch):
    """The grouped quotient off: every run is the plain run of the flow classes."""
    import topoopt.flowsim.epochs_reduction as er

    monkeypatch.setattr(
        er, "reduce_grouped", lambda gf, epochs, **kw: er._off("off (test)", {"flows": 0})
    )


def _run(tiny):
    w, design, fab = tiny
    st = design.routing
    return simulate_routing_schedule(w, fab, design.circuits.rows, (st, st), (0.0, 1e-4))


def test_the_guard_counts_builder_flows_classes_and_every_tables_subflows(tiny, monkeypatch):
    """The counts the guard gets, against the builder and the class FlowSet counted here: the
    builder's flows, the classes (distinct ``class_of``), and the sub-flows of every path
    version's table; the estimate is the formula's."""
    import solvers.joint.phase_routing as pr

    _off(monkeypatch)
    calls, got = [], []
    real_guard, real_ce = guard.check_class_subflows, pr.class_epochs

    def spy(flows, classes, subflows):
        calls.append((int(flows), int(classes), int(subflows)))
        return real_guard(flows, classes, subflows)

    def spy_ce(builder, realised, *a, **kw):
        out = real_ce(builder, realised, *a, **kw)
        got.append((builder.n, out))
        return out

    monkeypatch.setattr(guard, "check_class_subflows", spy)
    monkeypatch.setattr(pr, "class_epochs", spy_ce)
    _run(tiny)
    assert calls and len(calls) == len(got)
    for (flows, classes, subflows), (n_b, (fs, class_of, epochs)) in zip(calls, got, strict=True):
        assert flows == n_b == class_of.size
        assert classes == np.unique(class_of).size == fs.n_flows
        tables = {id(e.paths): e.paths for e in epochs if e.paths is not None}.values()
        assert subflows == sum(int(np.diff(t.flow_ptr).sum()) for t in tables)
        assert real_guard(flows, classes, subflows) == pytest.approx(
            guard.BUNDLE_FLOW_BYTES * flows
            + guard.FLOW_PEAK_BYTES * classes
            + guard.SUBFLOW_BYTES * subflows
        )


def test_the_estimate_is_at_least_the_traced_run(tiny, monkeypatch):
    """The whole schedule run (builder, classes, tables, the plain event loop, the result per
    builder flow) allocates at most the estimate at its peak (numpy and Python, traced)."""
    _off(monkeypatch)
    seen = []
    real = guard.check_class_subflows
    monkeypatch.setattr(guard, "check_class_subflows", lambda *a: seen.append(real(*a)) or seen[-1])
    _run(tiny)  # the kernels loaded once, outside the measurement
    seen.clear()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        _run(tiny)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert seen and max(seen) >= peak


def test_over_the_budget_one_line(tiny, monkeypatch):
    """A budget below the estimate: refused before the class tables exist, one line naming the
    sub-flows, classes and flows (field ``flows``, the value, what is allowed)."""
    _off(monkeypatch)
    seen = []
    real = guard.check_class_subflows
    monkeypatch.setattr(
        guard, "check_class_subflows", lambda *a: seen.append((a, real(*a))) or seen[-1][1]
    )
    _run(tiny)
    (flows, classes, subflows), est = seen[0]
    monkeypatch.setattr(guard, "check_class_subflows", real)
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", repr((est - 1.0) / 1e9))
    with pytest.raises(InputError) as e:
        _run(tiny)
    msg = str(e.value)
    assert e.value.field == "flows" and "\n" not in msg
    assert f"{subflows:,} sub-flows of {classes:,} flow classes of {flows:,} flows" in msg
    assert "at most" in msg and "TOPOOPT_MEMORY_BUDGET_GB" in msg
