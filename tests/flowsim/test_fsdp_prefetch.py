"""FSDP on the ideal switch: parameter all-gathers prefetched on their own stream, and the
tensor-parallel groups of a sharded data-parallel group running side by side (issue 29 item 17:
TP on the critical path was the sum over the TP groups the all-gather joined, and every gather
ran between two compute tasks)."""

from __future__ import annotations

from topoopt.fabrics import ideal
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan

MODEL = {"layers": 4, "hidden": 512, "heads": 8, "vocab": 512, "seq_len": 4096, "global_batch": 64}
B_SERVER = 100e9  # bytes/s: one 100 GB/s port per server on the ideal switch
B_INTRA = 300e9  # bytes/s: each GPU's intra-server link


def _plan():
    """tp 2 inside each server, FSDP full_shard over 4 servers (one rank per server in each of
    the 2 data-parallel groups), m = 4, the gradient reduce-scatter once per iteration."""
    return workload_from_plan(
        {
            "model": MODEL,
            "parallelism": {"tp": 2, "dp": 4, "micro_batch_size": 4, "global_batch_size": 64,
                            "fsdp": "full_shard"},
            "cluster": {"servers": 4, "gpus_per_server": 2},
            "options": {"defer_grad_sync": True},
        }
    )  # fmt: skip


def test_fsdp_tp_runs_at_its_standalone_time_and_gathers_hide_behind_compute():
    w = _plan()
    m, n, gps = 4, 4, 2
    fab = ideal(4, port_bandwidth=B_SERVER, gpus_per_server=gps, latency=0.0)
    r = simulate_iteration(w, fab, intra_bandwidth=B_INTRA, exposed_by_class=False)
    # one rank's TP time: its all-reduces, one after another; a 2-rank ring sends S per rank
    tp = [d for d in w.demands if d.cls == "tp"]
    assert tp and all(d.op == "all-reduce" and d.group_size == 2 for d in tp)
    t_tp = sum(d.count * d.size for d in tp) / B_INTRA
    # one slot's parameter all-gather: both ranks of a server send (n - 1) / n of it
    ag = [d for d in w.demands if d.op == "all-gather"]
    assert sorted(d.phase for d in ag) == ["backward", "forward"]
    assert all(d.count == m for d in ag)
    x_ag = gps * (n - 1) / n * ag[0].size / B_SERVER
    (rs,) = [d for d in w.demands if d.op == "reduce-scatter"]
    assert rs.count == 1
    x_rs = gps * (n - 1) / n * rs.size / B_SERVER
    # compute-bound: every slot's compute outlasts one gather, so each gather but the first
    # runs during the previous slot and the iteration is at most compute + TP + the first
    # gather + the reduce-scatter the optimizer waits for
    t_f = r.info["forward_s_per_stage"][0] / m
    assert x_ag < t_f
    assert r.info["cells"] == w.gpus // 2  # the TP groups, not one cell per FSDP group
    crit_tp = r.comm_by_class["tp"]
    assert 0.95 * t_tp <= crit_tp <= t_tp * (1 + 1e-9)
    assert r.iteration_s <= (r.compute_s + t_tp + x_ag + x_rs) * (1 + 1e-9)
    # and the gathers are real: without them (instantaneous dp) the iteration is faster
    assert r.iteration_s > r.compute_s + 0.95 * t_tp


def test_a_layer_waits_for_its_own_parameters():
    """Network-bound (a slow port): every slot waits for its gather, so the iteration is at
    least the 2 m gathers on one stream plus the last slot's compute."""
    w = _plan()
    m, n, gps, bw = 4, 4, 2, 1e9
    fab = ideal(4, port_bandwidth=bw, gpus_per_server=gps, latency=0.0)
    r = simulate_iteration(w, fab, intra_bandwidth=B_INTRA, exposed_by_class=False)
    ag = [d for d in w.demands if d.op == "all-gather"]
    x_ag = gps * (n - 1) / n * ag[0].size / bw
    t_b = r.info["backward_s_per_stage"][0] / m
    assert x_ag > 3 * t_b  # network-bound
    assert r.iteration_s >= 2 * m * x_ag + t_b
