"""Disjoint, realisable placements; per-job iteration equals the job alone on the same circuits."""

from __future__ import annotations

import numpy as np
import pytest
from realisable import brute_force_realisable, check_cluster_circuits

from solvers.cluster.cluster_design import design_cluster
from solvers.cluster.jobs import Job
from solvers.cluster.ocs import OcsLayer
from solvers.realise import design_workload
from topoopt.fabrics.direct_connect import direct_connect
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.plan import load_plan

BW = 12.5e9


def tiny_plan(m: int, batch: int = 4) -> dict:
    return {
        "model": "vgg16",
        "parallelism": {"dp": m, "micro_batch_size": batch, "global_batch_size": batch * m},
        "precision": {"activation_bytes": 4, "gradient_bytes": 4, "parameter_bytes": 4},
        "cluster": {"servers": m, "gpus_per_server": 1},
    }


def tiny(m: int) -> object:
    return workload_from_plan(load_plan(tiny_plan(m)))


@pytest.mark.parametrize(("n", "d", "r"), [(12, 2, 6), (12, 3, None), (10, 2, 5)])
def test_tiny_clusters_are_disjoint_and_brute_force_realisable(n, d, r):
    layer = OcsLayer.build(n, d, r)
    jobs = [Job("a", tiny(3)), Job("b", tiny(4)), Job("c", tiny(3))]
    cl = design_cluster(jobs, layer, BW)
    check_cluster_circuits(
        {j.name: j.global_circuits(layer).tolist() for j in cl.jobs},
        {j.name: j.servers.tolist() for j in cl.jobs},
        layer.units,
    )
    for j in cl.jobs:
        local = j.design.circuits
        # the brute force agrees that the job's circuits are realisable on its servers' units
        assert brute_force_realisable(local, layer.restrict(j.servers))
        # the reported planes are the design's circuits, one each
        rows = sorted(map(tuple, j.ports[:, :2].tolist()))
        want = sorted((u, v) for u, v, c in local.tolist() for _ in range(c))
        assert rows == want
        # direct circuits skip the switch's hop latency: at most a hair below the ideal switch
        assert j.iteration_s >= j.alone_ideal_s * 0.99


def test_a_triangle_on_two_ports_is_repaired():
    # TopoOpt's ring over 3 servers on 2 ports is a triangle: three circuits, odd cycle
    layer = OcsLayer.build(3, 2)
    cl = design_cluster([Job("t", tiny(3))], layer, BW)
    j = cl.jobs[0]
    assert j.repaired == 1
    assert j.ports.shape[0] == 2  # a path: the third port pair cannot be wired
    assert brute_force_realisable(j.design.circuits, layer.restrict(j.servers))


def test_iteration_equals_the_job_alone_on_the_whole_cluster_fabric():
    """The first job simulated on the fabric of *every* job's circuits (other jobs' servers and
    circuits present, no traffic of theirs) equals its reported iteration on its own circuits:
    circuits never cross jobs, so nothing is shared."""
    n, d = 12, 3
    layer = OcsLayer.build(n, d)
    w = tiny(4)
    cl = design_cluster([Job("a", w), Job("b", tiny(5)), Job("c", tiny(3))], layer, BW)
    a = cl.jobs[0]
    assert a.servers.tolist() == [0, 1, 2, 3]
    rows = np.vstack([j.global_circuits(layer)[:, :2] for j in cl.jobs])
    circuits = np.hstack([rows, np.ones((rows.shape[0], 1), np.int64)])
    fab = direct_connect(n, d, circuits=circuits, port_bandwidth=BW, device="patch-panel")
    paths = a.design.routing.to_pathset(fab.src, fab.dst, fab.n_nodes)
    sim = simulate_iteration(
        design_workload(w, a.design, a.problem), fab, routing=paths, exposed_by_class=False
    )
    assert sim.iteration_s == pytest.approx(a.iteration_s, rel=1e-9)


def test_too_many_servers_and_overlaps_are_refused():
    layer = OcsLayer.build(8, 2)
    with pytest.raises(InputError, match="servers the jobs need"):
        design_cluster([Job("a", tiny(5)), Job("b", tiny(4))], layer, BW)
    with pytest.raises(InputError, match="free server ids"):
        design_cluster(
            [Job("a", tiny(3), np.array([0, 1, 2])), Job("b", tiny(3), np.array([2, 3, 4]))],
            layer,
            BW,
        )


def test_a_job_split_over_units_on_every_plane_cannot_run():
    # 12 servers, radix 6: servers 0-2 and 6-8 share no unit on either plane
    layer = OcsLayer.build(12, 2, 6)
    with pytest.raises(InputError, match="can connect"):
        design_cluster([Job("a", tiny(6), np.array([0, 1, 2, 6, 7, 8]))], layer, BW)
