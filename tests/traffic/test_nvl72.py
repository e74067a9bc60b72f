"""Scale-up domains (issue 24.7): an NVL72 plan end to end, TP inside the 72-GPU NVLink domain."""

from __future__ import annotations

import numpy as np
import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.hardware import gpu_spec
from traffic.plan import load_plan

GB200 = gpu_spec("gb200")


def _nvl72(gpu="gb200", tp=8, servers=2, gps=72):
    return {
        "model": {"base": "llama3-70b", "layers": 4, "seq_len": 1024, "global_batch": 36},
        "parallelism": {"tp": tp, "pp": 2, "dp": servers * gps // (2 * tp)},
        "cluster": {"servers": servers, "gpus_per_server": gps, "gpu": gpu},
    }


def test_tp_groups_stay_inside_the_nvl72_domain():
    w = workload_from_plan(_nvl72())
    tp = [d for d in w.demands if d.cls == "tp"]
    assert tp
    for d in tp:
        racks = np.asarray(d.groups) // 72
        assert (racks == racks[:, :1]).all()  # every TP group on one NVL72 rack


def test_tp_runs_at_the_catalogue_nvlink_bandwidth():
    w = workload_from_plan(_nvl72())
    fab = ideal(2, port_bandwidth=50e9, gpus_per_server=72)
    tp_alone = communication_time(w.select(classes=["tp"]), fab).total_s
    half = {**GB200.model_dump(), "scale_up_gb_per_s": GB200.scale_up_gb_per_s / 2}
    w_half = workload_from_plan(_nvl72(gpu=half))
    tp_half = communication_time(w_half.select(classes=["tp"]), fab).total_s
    # TP flows never leave the rack: their time is set by the NVLink egress alone
    assert tp_half / tp_alone == pytest.approx(2.0, rel=1e-9)
    it = simulate_iteration(w, fab)
    assert it.iteration_s >= it.compute_s > 0 and it.info["gpu"] == "gb200"


def test_a_server_larger_than_the_scale_up_domain_is_refused():
    with pytest.raises(InputError, match="cluster.gpus_per_server"):
        load_plan(_nvl72(gpu="h100-sxm"))
