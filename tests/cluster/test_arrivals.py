"""Arrivals keep running jobs' circuits when they can, and count changed circuits exactly."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from realisable import check_cluster_circuits
from test_cluster_design import BW, tiny

from solvers.cluster.arrivals import play
from solvers.cluster.cluster_design import design_cluster
from solvers.cluster.jobs import Event, Job
from solvers.cluster.ocs import OcsLayer
from traffic.errors import InputError


def _circuits(jobs, layer) -> dict[str, Counter]:
    """Per job: the multiset of global (u, v, plane), recomputed from the local ports."""
    out = {}
    for j in jobs:
        rows = []
        for u, v, p in j.ports.tolist():
            a, b = int(j.servers[u]), int(j.servers[v])
            rows.append((min(a, b), max(a, b), p))
        out[j.name] = Counter(rows)
    return out


def _check(state, layer):
    check_cluster_circuits(
        {j.name: j.global_circuits(layer).tolist() for j in state},
        {j.name: j.servers.tolist() for j in state},
        layer.units,
    )


def test_arrival_on_free_servers_changes_nothing_running():
    layer = OcsLayer.build(12, 2)
    start = design_cluster([Job("a", tiny(3)), Job("b", tiny(4))], layer, BW)
    events = [
        Event(1.0, job=Job("c", tiny(3))),
        Event(2.0, depart="a"),
        Event(3.0, job=Job("d", tiny(5))),
    ]
    records, states = play(start, events)
    before = _circuits(start.jobs, layer)
    for rec, state in zip(records, states, strict=True):
        assert rec["changed_circuits"] == 0 and rec["moved_jobs"] == [] and not rec["replanned"]
        _check(state, layer)
        now = _circuits(state, layer)
        for name in now.keys() & before.keys():  # running jobs keep every circuit and plane
            assert now[name] == before[name]
        before = now
    assert records[1]["removed_circuits"] == states[0][0].ports.shape[0]
    # a 0-2, b 3-6, c 7-9: d takes the servers a left and the two never used (one unit each)
    assert [j.name for j in states[2]] == ["b", "c", "d"]
    d = states[2][-1]
    assert d.servers.tolist() == [0, 1, 2, 10, 11]
    assert records[2]["added_circuits"] == d.ports.shape[0]


def test_fragmented_free_servers_force_a_replan_counted_exactly():
    # 12 servers, radix 6: plane 0 units {0-5}, {6-11}; plane 1 units {0-2, 9-11}, {3-8}.
    layer = OcsLayer.build(12, 2, 6)
    assert layer.units.tolist() == [[0] * 6 + [1] * 6, [0, 0, 0] + [1] * 6 + [0, 0, 0]]
    a = Job("a", tiny(3), np.array([3, 4, 5]))
    b = Job("b", tiny(3), np.array([9, 10, 11]))
    start = design_cluster([a, b], layer, BW)
    # free: 0-2 and 6-8, which share no unit on either plane: a 6-server job cannot connect
    records, states = play(start, [Event(1.0, job=Job("c", tiny(6)))])
    rec, state = records[0], states[0]
    assert rec["replanned"]
    _check(state, layer)
    old, new = _circuits(start.jobs, layer), _circuits(state, layer)
    torn = sum(sum((old[n] - new[n]).values()) for n in ("a", "b"))
    added = sum(sum((new[n] - old[n]).values()) for n in ("a", "b"))
    assert rec["changed_circuits"] == torn
    assert rec["added_circuits"] == added + sum(new["c"].values())
    # one move suffices: a gives 3-5 up, c takes 0-5 (whole on plane 0), a goes to 6-8
    assert [j.servers.tolist() for j in state] == [[6, 7, 8], [9, 10, 11], [0, 1, 2, 3, 4, 5]]
    assert rec["moved_jobs"] == ["a"]
    # a is a triangle repaired to a path (2 circuits), torn down and re-made; b is untouched
    assert torn == old["a"].total() == 2
    assert new["b"] == old["b"]


def test_bad_events_are_refused():
    layer = OcsLayer.build(8, 2)
    start = design_cluster([Job("a", tiny(3))], layer, BW)
    with pytest.raises(InputError, match="a running job"):
        play(start, [Event(1.0, depart="ghost")])
    with pytest.raises(InputError, match="no running job has"):
        play(start, [Event(1.0, job=Job("a", tiny(3)))])
    with pytest.raises(InputError, match="servers free"):
        play(start, [Event(1.0, job=Job("big", tiny(6)))])


def test_when_no_single_move_works_the_cluster_is_replanned_and_counted():
    # free servers 0, 1, 5, 10, 11 cannot hold a connected 5-server job, nor can any one move
    layer = OcsLayer.build(12, 2, 6)
    jobs = [Job("a", tiny(3), np.array([2, 3, 4])), Job("b", tiny(4), np.array([6, 7, 8, 9]))]
    start = design_cluster(jobs, layer, BW)
    records, states = play(start, [Event(1.0, job=Job("c", tiny(5)))])
    rec, state = records[0], states[0]
    _check(state, layer)
    assert rec["replanned"] and rec["moved_jobs"] == ["a", "b"]
    assert [j.servers.tolist() for j in state] == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9, 10, 11]]
    old, new = _circuits(start.jobs, layer), _circuits(state, layer)
    torn = sum(sum((old[n] - new[n]).values()) for n in ("a", "b"))
    assert rec["changed_circuits"] == torn > 0
    added = sum(sum((new[n] - old[n]).values()) for n in ("a", "b")) + new["c"].total()
    assert rec["added_circuits"] == added
