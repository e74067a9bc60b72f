"""``comm_phases``' merge rules on hand-made timelines, the phases derived by hand; the wrap back
to the first circuit set overlapping the next iteration (``wrap_overlap``).

The timelines are pipelines' shapes: a warm-up of forward sends, the 1F1B stretch of forward and
backward sends, then the gradient sync starting stage by stage while the last backward sends
run (``docs/verdicts.md``, "Reconfigurable circuits for Mixtral").
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from solvers.reconfig.search import PHASE_MERGES, comm_phases
from traffic.errors import InputError

FWD, BWD, SYNC, OPT = "forward:pp", "backward:pp", "backward:dp", "optimizer:dp"


def _run(segments, total: float):
    """A reference run whose timeline holds, per segment ``(start, end, labels)``, one
    communication task per label over exactly ``[start, end)``, and a workload whose ``pp``
    and ``dp`` classes cross servers."""
    rows = [
        {"kind": "comm", "class": lab.split(":")[1], "phase": lab.split(":")[0],
         "start_s": a, "finish_s": b}
        for a, b, labs in segments for lab in labs
    ]  # fmt: skip
    rows.append({"kind": "compute", "class": "compute", "phase": "forward", "start_s": 0.0,
                 "finish_s": total})  # fmt: skip
    cross = np.array([[0, 1]])  # one GPU a server: the group spans two servers
    wl = SimpleNamespace(
        gpus_per_server=1,
        demands=[
            SimpleNamespace(n_groups=1, group_size=2, groups=cross, cls=c) for c in ("pp", "dp")
        ],
    )
    run = SimpleNamespace(result=SimpleNamespace(timeline=pd.DataFrame(rows)), iteration_s=total)
    return run, wl


def _phases(segments, total, **kw):
    run, wl = _run(segments, total)
    return [(p.start_s, p.end_s, p.name) for p in comm_phases(run, wl, **kw)]


# warm-up, 1F1B, the first stage's sync starting (short), the sync with the last sends, the sync
PIPELINE = [
    (0.0, 2.0, {FWD}),
    (2.0, 10.0, {FWD, BWD}),
    (10.0, 10.25, {SYNC, BWD}),  # 0.25 s < 0.02 x 16 s = 0.32 s: must join a neighbour
    (10.25, 11.0, {SYNC, BWD, OPT}),
    (11.0, 16.0, {SYNC}),
]


def test_shortest_joins_the_first_sync_into_the_1f1b_phase():
    # the short segment joins the one before it: the 1F1B phase carries the sync's start
    assert _phases(PIPELINE, 16.0, max_phases=4) == [
        (0.0, 2.0, FWD),
        (2.0, 10.25, "backward:dp+backward:pp+forward:pp"),
        (10.25, 11.0, "backward:dp+backward:pp+optimizer:dp"),
        (11.0, 16.0, SYNC),
    ]
    # then the shortest (0.75 s) joins its shorter neighbour (5 s after, not 8.25 s before)
    assert _phases(PIPELINE, 16.0, max_phases=3) == [
        (0.0, 2.0, FWD),
        (2.0, 10.25, "backward:dp+backward:pp+forward:pp"),
        (10.25, 16.0, "backward:dp+backward:pp+optimizer:dp"),
    ]


def test_labels_keeps_the_1f1b_phase_apart_from_the_sync():
    # {dp, bwd} differs from 1F1B's {fwd, bwd} by 2 labels, from {dp, bwd, opt} by 1
    assert _phases(PIPELINE, 16.0, max_phases=4, merge="labels") == [
        (0.0, 2.0, FWD),
        (2.0, 10.0, "backward:pp+forward:pp"),
        (10.0, 11.0, "backward:dp+backward:pp+optimizer:dp"),
        (11.0, 16.0, SYNC),
    ]
    # the shortest (1 s) is 3 labels from 1F1B and 2 from the sync: it joins the sync
    assert _phases(PIPELINE, 16.0, max_phases=3, merge="labels") == [
        (0.0, 2.0, FWD),
        (2.0, 10.0, "backward:pp+forward:pp"),
        (10.0, 16.0, "backward:dp+backward:pp+optimizer:dp"),
    ]


def test_labels_joins_neighbours_of_one_label_set():
    # the short {fwd} is 1 label from the 1F1B on either side and joins the shorter (after),
    # which leaves two 1F1B phases side by side: "labels" joins them, "shortest" (the short
    # one into the one before) keeps both
    segs = [(0.0, 4.0, {FWD, BWD}), (4.0, 4.25, {FWD}), (4.25, 8.0, {FWD, BWD}),
            (8.0, 16.0, {SYNC})]  # fmt: skip
    assert _phases(segs, 16.0, merge="labels") == [
        (0.0, 8.0, "backward:pp+forward:pp"),
        (8.0, 16.0, SYNC),
    ]
    assert _phases(segs, 16.0) == [
        (0.0, 4.25, "backward:pp+forward:pp"),
        (4.25, 8.0, "backward:pp+forward:pp"),
        (8.0, 16.0, SYNC),
    ]


@pytest.mark.parametrize("merge", PHASE_MERGES)
def test_phases_tile_the_iteration(merge):
    # invariants on a random timeline: phases tile [0, total), at most max_phases, each
    # phase's name the union of the labels of the segments it covers
    rng = np.random.default_rng(7)
    labels = [FWD, BWD, SYNC, OPT]
    cuts = np.concatenate([[0.0], np.sort(rng.uniform(0, 16, 40)), [16.0]])
    segs = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        pick = {lab for lab in labels if rng.random() < 0.5} or {FWD}
        segs.append((float(a), float(b), pick))
    for mp in (1, 3, 6):
        got = _phases(segs, 16.0, max_phases=mp, merge=merge)
        assert 1 <= len(got) <= mp
        assert got[0][0] == 0.0 and got[-1][1] == 16.0
        assert all(x[1] == y[0] for x, y in zip(got[:-1], got[1:], strict=True))
        for a, b, name in got:
            covered = set().union(*(s[2] for s in segs if s[0] < b and s[1] > a))
            assert set(name.split("+")) == covered


def test_unknown_merge_is_an_input_error():
    run, wl = _run(PIPELINE, 16.0)
    with pytest.raises(InputError, match="merge"):
        comm_phases(run, wl, merge="longest")


def test_reconfigure_cuts_its_phases_by_the_rule_asked():
    # a small pipeline (pp 2, dp 2 on 4 servers of 1 GPU: test_phase_routing's): reconfigure's
    # phases are comm_phases' of its own reference run under the rule asked, which it records
    from solvers.reconfig import reconfigure
    from traffic.build import workload_from_plan

    model = {"layers": 4, "hidden": 256, "heads": 4, "vocab": 512, "seq_len": 128,
             "global_batch": 16}  # fmt: skip
    w = workload_from_plan({
        "model": model,
        "parallelism": {"tp": 1, "pp": 2, "dp": 2, "micro_batch_size": 1,
                        "global_batch_size": 16},
        "cluster": {"servers": 4, "gpus_per_server": 1},
    })  # fmt: skip
    for merge in PHASE_MERGES:
        r = reconfigure(w, 2, 12.5e9, 1e-3, static_solver="topoopt", solvers=("demand",),
                        phase_merge=merge, holds=(1e-3,))  # fmt: skip
        assert r.info["phase_merge"] == merge
        assert r.phases == comm_phases(r.reference, w, merge=merge)
        assert r.iteration_s <= r.static_iteration_s


@pytest.mark.parametrize("hold", [1e-3, 1e-2, 1e-1])
def test_wrap_overlap_starts_the_next_iteration_before_the_wrap_ends(hold):
    # VGG16 data-parallel on 16 servers: a ring, then a stride-3 ring from mid-iteration, so
    # the circuits wrap back after the last fabric flow (t_net). Plainly the next iteration
    # waits for the wrap: max(makespan, t_net + h). With wrap_overlap it needs the ring only
    # from its first fabric flow f_0 on, the start of its first gradient all-reduce in the
    # timeline: max(makespan, t_net + h - f_0), and never later than plainly
    from solvers.reconfig import CircuitSet, Schedule, iteration_under_schedule
    from traffic.build import workload_from_plan

    w = workload_from_plan("vgg16-dp")
    n = w.servers
    ring = CircuitSet([[i, (i + 1) % n, 1] for i in range(n)], None, "ring")
    stride = CircuitSet([[i, (i + 3) % n, 1] for i in range(n)], None, "stride")
    static = iteration_under_schedule(w, Schedule((ring,), (0.0,)), 12.5e9, 0.0)
    tl = static.result.timeline
    dp = tl[(tl["class"] == "dp") & (tl["finish_s"] > tl["start_s"])]
    f0 = float(dp["start_s"].min())
    sched = Schedule((ring, stride), (0.0, static.iteration_s / 2))
    plain = iteration_under_schedule(w, sched, 12.5e9, hold)
    over = iteration_under_schedule(w, sched, 12.5e9, hold, wrap_overlap=True)
    assert plain.iteration_s == max(plain.makespan_s, plain.net_finish_s + hold)
    assert over.makespan_s == plain.makespan_s and over.net_finish_s == plain.net_finish_s
    assert over.iteration_s == pytest.approx(
        max(plain.makespan_s, plain.net_finish_s + hold - f0), abs=1e-12
    )
    assert over.iteration_s <= plain.iteration_s
