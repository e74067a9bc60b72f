"""The figures of the cluster report: structure and values."""

from __future__ import annotations

from topoopt.app.report.cluster_figures import (
    changes_bars,
    cluster_page,
    job_iteration_bars,
    job_table,
    placement_strip,
)

JOBS = [
    {"name": "a", "servers": [0, 1, 2], "iteration_s": 0.003, "alone_ideal_s": 0.002,
     "n_circuits": 2, "repaired_circuits": 1},
    {"name": "b", "servers": [3, 4], "iteration_s": 0.001, "alone_ideal_s": 0.001,
     "n_circuits": 1, "repaired_circuits": 0},
]  # fmt: skip
EVENTS = [
    {"time_s": 1.0, "event": "depart", "job": "b", "changed_circuits": 0, "added_circuits": 0,
     "removed_circuits": 1, "replanned": False, "running": ["a"]},
]  # fmt: skip


def test_figures_hold_the_jobs_values():
    fig = job_iteration_bars(JOBS)
    assert [t.name for t in fig.data] == ["shared OCS cluster", "alone, ideal switch"]
    assert list(fig.data[0].y) == [3.0, 1.0] and list(fig.data[1].y) == [2.0, 1.0]
    strip = placement_strip(JOBS, 6)
    assert [list(t.x) for t in strip.data] == [[0, 1, 2], [3, 4]]
    ch = changes_bars(EVENTS)
    assert [list(t.y) for t in ch.data] == [[0], [0], [1]]
    t = job_table(JOBS)
    assert t["slowdown"].tolist() == [1.5, 1.0] and t["servers"].tolist() == [
        "0..2 (3)",
        "3..4 (2)",
    ]


def test_page_has_fixed_div_ids():
    res = {"jobs": JOBS, "events": EVENTS, "servers": 6, "degree": 2, "link_gbps": 100.0,
           "ocs_radix": 6, "ocs_units_per_plane": 1, "solver": "topoopt"}  # fmt: skip
    page = cluster_page(res)
    for div in ("cluster-iteration", "cluster-placement", "cluster-changes"):
        assert f'id="{div}"' in page
    assert page == cluster_page(res)  # reproducible
