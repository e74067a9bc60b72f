"""``topoopt.app.studies.sweep`` runs its points on the engine: same rows as the comparisons it
stands for, in point order, with the plan axis."""

from __future__ import annotations

import pandas as pd

from topoopt.app.studies.compare import compare
from topoopt.app.studies.sweep import sweep
from traffic.build import workload_from_plan

PLAN = {
    "model": {"layers": 2, "hidden": 128, "heads": 4, "vocab": 256, "seq_len": 64},
    "parallelism": {"tp": 2, "global_batch_size": 8},
    "cluster": {"servers": 4, "gpus_per_server": 2},
}


def test_sweep_equals_the_comparisons_it_runs():
    w = workload_from_plan(PLAN, name="tiny")
    fabrics = ("ideal", "fat-tree", "topoopt")
    table = sweep({"tiny": w}, degrees=(2, 3), link_bandwidths=(12.5e9,), fabrics=fabrics)
    assert list(zip(table["degree"], table["fabric"], strict=True)) == [
        (d, f) for d in (2, 3) for f in fabrics
    ]
    assert set(table["plan"]) == {"tiny"}
    for d in (2, 3):
        want = compare(w, fabrics, d, 12.5e9).table
        got = table[table["degree"] == d].reset_index(drop=True)
        cols = ["fabric", "iteration_s", "capex_usd"]
        pd.testing.assert_frame_equal(got[cols], want[cols])
