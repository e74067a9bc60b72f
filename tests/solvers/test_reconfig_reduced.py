"""The reconfiguration search's time-varying runs through the exact symmetry quotient
(:class:`solvers.reconfig.schedule.ScheduleReductions`): the same iteration, the same finish of
every fabric flow and the same bytes left at a reconfiguration as the plain run of the flow
classes, on symmetric schedules (the quotient on) and an asymmetric one (off, or coarsened)."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.reconfig.schedule import (
    CircuitSet,
    Schedule,
    ScheduleReductions,
    SharedPrefix,
    _own_paths_moved,
    iteration_under_schedule,
)
from topoopt.flowsim.flowset import FlowSet
from traffic.build import workload_from_plan

B = 12.5e9
HOLD = 1e-4


@pytest.fixture(scope="module")
def dp():
    """VGG-16 data-parallel on 16 servers (ring all-reduce), its static ring's iteration."""
    w = workload_from_plan("vgg16-dp")
    n = w.servers
    ring = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)], label="ring")
    ref = iteration_under_schedule(w, Schedule((ring,), (0.0,)), B, 0.0)
    return w, ring, ref


def _both(w, sched, ref, **kw):
    """The plain run and the reduced one (with its record) of one schedule."""
    rec = ScheduleReductions()
    args = dict(compute_s=ref.result.compute_s, **kw)
    plain = iteration_under_schedule(w, sched, B, HOLD, reduction=False, **args)
    red = iteration_under_schedule(w, sched, B, HOLD, reduction=rec, **args)
    return plain, red, rec


def _same(plain, red):
    """Iteration and every fabric flow's start and finish equal to 1e-9 (relative)."""
    assert red.iteration_s == pytest.approx(plain.iteration_s, rel=1e-9, abs=0)
    if not np.isfinite(plain.iteration_s):
        return
    for k in ("start", "finish"):
        a, b = plain.flows[k], red.flows[k]
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=0)
    assert red.makespan_s == pytest.approx(plain.makespan_s, rel=1e-9)


@pytest.mark.parametrize("frac", [0.3, 0.7])
def test_symmetric_schedule_reduced_equals_plain(dp, frac):
    """A ring, then the ring doubled at a fraction of the iteration: every ring flow of a step
    is one class (the quotient on, far fewer classes), the iteration and every flow's times
    as the plain run's."""
    w, ring, ref = dp
    n = w.servers
    ring2 = CircuitSet([[i, (i + 1) % n, 2] for i in range(n)], label="ring2")
    sched = Schedule((ring, ring2), (0.0, frac * ref.iteration_s))
    plain, red, rec = _both(w, sched, ref)
    _same(plain, red)
    assert plain.iteration_s < ref.iteration_s  # the doubled ring pays
    (row,) = rec.runs
    assert row["status"] == "on"
    assert row["quotient_flow_classes"] * 10 < row["flow_classes"]
    assert rec.summary()["reduced"] == 1


def test_asymmetric_schedule_falls_back(dp):
    """The ring, then a line (the wrap-around circuit gone): the flows that crossed it go the
    long way, path lengths differ by pair, and the quotient splits (here: off, the plain run);
    the same results either way. A second run of the same sets at another time skips the
    refinement (the partition does not depend on the times)."""
    w, ring, ref = dp
    n = w.servers
    line = CircuitSet([[i, i + 1, 2] for i in range(n - 1)], label="line")
    rec = ScheduleReductions()
    for frac in (0.4, 0.6):
        sched = Schedule((ring, line), (0.0, frac * ref.iteration_s))
        plain = iteration_under_schedule(w, sched, B, HOLD, reduction=False,
                                         compute_s=ref.result.compute_s)  # fmt: skip
        red = iteration_under_schedule(w, sched, B, HOLD, reduction=rec,
                                       compute_s=ref.result.compute_s)  # fmt: skip
        _same(plain, red)
    statuses = [r["status"] for r in rec.runs]
    assert statuses[0] in ("on", "off")
    if statuses[0] == "off":
        assert statuses[1] == "skipped"
    else:  # coarsened, not off: fewer classes than flows all the same
        assert rec.runs[0]["quotient_flow_classes"] < rec.runs[0]["flow_classes"]


def test_horizon_cut_reduced_equals_plain(dp):
    """With a horizon: below the iteration both runs are cut (``inf``, the late cut through the
    quotient's links), above it both are exact and equal."""
    w, ring, ref = dp
    n = w.servers
    ring2 = CircuitSet([[i, (i + 1) % n, 2] for i in range(n)], label="ring2")
    sched = Schedule((ring, ring2), (0.0, 0.5 * ref.iteration_s))
    exact = iteration_under_schedule(w, sched, B, HOLD, reduction=False,
                                     compute_s=ref.result.compute_s).iteration_s  # fmt: skip
    for hz, finite in ((exact * 0.98, False), (exact * 1.02, True)):
        plain, red, rec = _both(w, sched, ref, horizon=hz)
        assert np.isfinite(plain.iteration_s) == finite == np.isfinite(red.iteration_s)
        _same(plain, red)
        assert rec.runs[0]["status"] == "on"


def test_bytes_left_reduced_equals_plain(dp):
    """The bytes left at the first reconfiguration (and at an earlier time) that a run takes
    for the shared prefix (:class:`SharedPrefix`): per path of every flow class, expanded from
    the quotient's paths, equal to the plain run's."""
    w, ring, ref = dp
    n = w.servers
    ring2 = CircuitSet([[i, (i + 1) % n, 2] for i in range(n)], label="ring2")
    t1 = 0.5 * ref.iteration_s
    sched = Schedule((ring, ring2), (0.0, t1))
    taken = []
    for reduction in (False, ScheduleReductions()):
        p = SharedPrefix({"ring": (0.2 * ref.iteration_s, t1)})
        iteration_under_schedule(w, sched, B, HOLD, reduction=reduction, prefix=p,
                                 compute_s=ref.result.compute_s)  # fmt: skip
        taken.append(p.taken)
    assert reduction.runs[0]["status"] == "on"
    plain, red = taken
    assert sorted(plain) == sorted(red) == [("ring", 0.2 * ref.iteration_s), ("ring", t1)]
    for key in plain:
        (s0, m0, f0, l0), (s1, m1, f1, l1) = plain[key], red[key]
        assert np.array_equal(s0, s1) and np.array_equal(m0, m1) and np.array_equal(f0, f1)
        assert l0.shape == l1.shape and np.any(l0 > 0)
        np.testing.assert_allclose(l1, l0, rtol=1e-9, atol=1e-9 * float(l0.max()))


def test_own_paths_moved_never_repeats_a_link():
    """A template's server-pair flow crossing fabric links 1 and 4 of a union of 5 links, moved
    to a union of 3 (ids modulo 3 would give 1, 1): its own path becomes link 0, the link flow's
    path (link 5, past the fabric's) is shifted to 3; the FlowSet is valid."""
    f = FlowSet(
        capacity=np.ones(6), latency=np.zeros(6), size=np.ones(2), start=np.zeros(2),
        flow_ptr=np.array([0, 1, 2]), path_ptr=np.array([0, 2, 3]),
        path_links=np.array([1, 4, 5]), weight=np.ones(2),
    )  # fmt: skip
    own = _own_paths_moved(f, np.array([True, False]), 5, 3)
    g = FlowSet(capacity=np.ones(4), latency=np.zeros(4), size=f.size, start=f.start, **own)
    assert g.path_links.tolist() == [0, 3]
    assert g.flow_ptr.tolist() == [0, 1, 2] and g.weight.tolist() == [1.0, 1.0]


DLRM_PLAN = """\
model: dlrm
parallelism: {dp: 8, micro_batch_size: 512, global_batch_size: 4096}
precision: {activation_bytes: 4, gradient_bytes: 4, parameter_bytes: 4}
cluster: {servers: 8, gpus_per_server: 1}
"""


def test_search_reduced_equals_plain(tmp_path):
    """The whole search on DLRM (8 servers: all-to-alls and an all-reduce) with every run
    plain and with the quotient: the same result, field for field; some runs reduced."""
    from solvers.reconfig import reconfigure
    from traffic.load import load_workload

    path = tmp_path / "dlrm8.yaml"
    path.write_text(DLRM_PLAN)
    w = load_workload(str(path))
    kw = dict(static_solver="topoopt", solvers=("demand", "topoopt"), holds=(1e-4, 1e-2))
    a = reconfigure(w, 4, B, 1e-5, reduction=False, **kw)
    b = reconfigure(w, 4, B, 1e-5, **kw)
    da, db = a.to_dict(), b.to_dict()
    s = db.pop("reduction")
    assert da.pop("reduction")["runs"] == 0
    da.pop("wall_s"), db.pop("wall_s")
    assert da.keys() == db.keys()
    for k in da:
        if isinstance(da[k], float):
            assert db[k] == pytest.approx(da[k], rel=1e-9), k
        else:
            assert db[k] == da[k], k
    assert s["runs"] > 0 and s["reduced"] > 0
