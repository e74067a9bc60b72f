"""A design becomes a fabric, a routing and ring-ordered collectives the flow model runs."""

from __future__ import annotations

import numpy as np
import pytest

from solvers.baselines.topoopt_method import topoopt_design
from solvers.model.problem import DesignProblem
from solvers.realise import design_fabric, design_routing, design_workload, simulate_design
from topoopt.flowsim.collectives import communication_time
from traffic.load import load_workload
from traffic.workload import Demand, Workload

B = 1e9


def dp_workload(servers=8, gps=2, size=64e6):
    ranks = np.arange(servers * gps)
    # two DP groups (one per local GPU index), each spanning all servers
    groups = np.stack([ranks[ranks % gps == i] for i in range(gps)])
    return Workload(servers * gps, gps, (Demand("all-reduce", groups, size, "dp", "backward"),))


def test_rings_follow_circuits_and_conserve_bytes():
    w = dp_workload()
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=B)
    d = topoopt_design(p)
    dw = design_workload(w, d, p)
    assert dw.total_wire_bytes() == pytest.approx(w.total_wire_bytes(), rel=1e-12)
    fab = design_fabric(d, gpus_per_server=w.gpus_per_server)
    adj = set(zip(fab.src.tolist(), fab.dst.tolist(), strict=True))
    rings = [x for x in dw.demands if x.ordered]
    assert len(rings) == sum(1 for r in d.rings if not r["virtual"]) > 1
    for fam in rings:
        for row in fam.groups // w.gpus_per_server:
            hops = list(zip(row.tolist(), np.roll(row, -1).tolist(), strict=True))
            assert all((a, b) in adj for a, b in hops)  # every ring step is one circuit


def test_pure_dp_design_matches_the_ideal_switch_comm_time():
    # d/2 bidirectional circulant rings carry d directed rings: each server sends at d*B,
    # so the ring all-reduce takes 2(n-1)/n * S / (d*B), as on an ideal switch of d*B per server
    w = dp_workload(servers=8, gps=1)
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=B)
    d = topoopt_design(p, "topoopt-released")
    fab = design_fabric(d, latency=0.0)
    t = communication_time(design_workload(w, d, p), fab, routing=design_routing(d, fab)).total_s
    n, S = 8, 64e6
    assert t == pytest.approx(2 * (n - 1) / n * S / (4 * B), rel=1e-9)


def test_simulate_design_runs_and_checks_sizes():
    w = load_workload("vgg16-dp")
    p = DesignProblem.from_workload(w, degree=4, link_bandwidth=B)
    d = topoopt_design(p)
    r = simulate_design(w, d, p, exposed_by_class=False)
    assert r.iteration_s >= r.compute_s > 0
    assert r.exposed_comm_s > 0
    from traffic.errors import InputError

    with pytest.raises(InputError, match="servers"):
        design_workload(dp_workload(servers=4), d, p)
