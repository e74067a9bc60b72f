"""Iteration model: compute critical path, 1F1B bubble, DP all-reduce closed forms, overlap,
imported task graphs, results and errors; each against a derivation written out here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim.iteration import TIMELINE_COLUMNS, pipeline_order, simulate_iteration
from topoopt.flowsim.roofline import RooflineParams, compute_time, optimizer_time
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.taskgraph import read_taskgraph
from traffic.workload import Demand, Workload

FAST = 1e24  # bytes/s: an infinitely fast network
GPU = RooflineParams(peak_flops=1e12, efficiency=1.0, memory_bandwidth=1e12)
TASKGRAPHS = Path(__file__).resolve().parents[1] / "data" / "topoopt-taskgraphs"


def pipeline_workload(p: int, m: int, flops: float, send: float, vpp: int = 1) -> Workload:
    """p stages of one GPU each (one GPU per server), sends of ``send`` bytes between stages."""
    dem = []
    chunks = p * vpp
    for a in range(p):
        z = (a + 1) % p
        k = sum(1 for c in range(chunks - 1) if c % p == a)
        if k == 0:
            continue
        dem.append(Demand("send", [[a, z]], send, "pp", "forward", k * m, False, stage=a))
        dem.append(Demand("send", [[z, a]], send, "pp", "backward", k * m, False, stage=z))
    info = {
        "micro_batches": m,
        "forward_flops_per_microbatch_per_gpu": [flops] * p,
        "parameters_per_gpu_per_stage": [0] * p,
    }
    return Workload(p, 1, tuple(dem), info=info, conventions={"vpp": vpp})


def one_f_one_b(p: int, m: int, tf: list[float], tb: list[float]) -> float:
    """Makespan of 1F1B with instantaneous communication, by a direct recursion."""
    orders = []
    for i in range(p):
        w = min(p - i - 1, m)
        seq = [("F", j) for j in range(w)]
        for j in range(m - w):
            seq += [("F", w + j), ("B", j)]
        seq += [("B", j) for j in range(m - w, m)]
        orders.append(seq)
    end: dict = {}
    prev = {}
    for i in range(p):
        for k, t in enumerate(orders[i]):
            prev[(i, *t)] = (i, *orders[i][k - 1]) if k else None

    def finish(key):
        if key in end:
            return end[key]
        i, ph, j = key
        start = 0.0 if prev[key] is None else finish(prev[key])
        if ph == "F" and i > 0:
            start = max(start, finish((i - 1, "F", j)))
        if ph == "B":
            start = max(start, finish((i + 1, "B", j)) if i < p - 1 else finish((i, "F", j)))
        end[key] = start + (tf[i] if ph == "F" else tb[i])
        return end[key]

    import sys

    sys.setrecursionlimit(100000)
    return max(finish((i, "B", m - 1)) for i in range(p))


@pytest.mark.parametrize(("p", "m"), [(1, 3), (2, 2), (4, 8), (4, 3), (3, 10)])
def test_1f1b_bubble_with_negligible_communication(p, m):
    flops = 1e9  # 1 ms forward on GPU, 2 ms backward
    w = pipeline_workload(p, m, flops, send=1.0)
    r = simulate_iteration(w, ideal(p, port_bandwidth=FAST, latency=0.0), gpu=GPU)
    tf, tb = 1e-3, 2e-3
    assert r.iteration_s == pytest.approx((m + p - 1) * (tf + tb), rel=1e-9)
    assert r.iteration_s == pytest.approx(one_f_one_b(p, m, [tf] * p, [tb] * p), rel=1e-9)
    ideal_time = m * (tf + tb)
    assert (r.iteration_s - ideal_time) / ideal_time == pytest.approx((p - 1) / m, rel=1e-9)
    assert r.compute_s == pytest.approx(r.iteration_s, rel=1e-9)
    assert r.exposed_comm_s == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(("p", "m", "v"), [(2, 4, 2), (4, 8, 2), (4, 4, 3)])
def test_interleaved_bubble_shrinks_by_the_virtual_stages(p, m, v):
    """Megatron's interleaved schedule: bubble (p-1)/(v m) of the ideal m (t_f + t_b)."""
    w = pipeline_workload(p, m, 1e9, send=1.0, vpp=v)
    r = simulate_iteration(w, ideal(p, port_bandwidth=FAST, latency=0.0), gpu=GPU)
    ideal_time = m * 3e-3
    assert (r.iteration_s - ideal_time) / ideal_time == pytest.approx((p - 1) / (v * m), rel=1e-9)


def test_pipeline_orders_contain_every_task_once():
    for p, m, v in [(4, 8, 1), (4, 8, 2), (2, 6, 3)]:
        for i in range(p):
            o = pipeline_order(p, m, i, v)
            assert o.shape == (2 * m * v, 3)
            keys = {tuple(r) for r in o.tolist()}
            assert len(keys) == 2 * m * v
    with pytest.raises(InputError, match="micro_batches"):
        pipeline_order(4, 6, 0, 2)


def small_plan(**par):
    base = {
        "tp": 2,
        "pp": 4,
        "dp": 2,
        "cp": 1,
        "sp": False,
        "vpp": 1,
        "micro_batch_size": 1,
        "global_batch_size": 16,
        "recompute": "none",
        "zero": 0,
        "fsdp": None,
        "distributed_optimizer": False,
        "order": "tp-cp-ep-dp-pp",
    }
    base.update(par)
    gpus = base["tp"] * base["pp"] * base["dp"]
    return {
        "model": "llama2-7b",
        "parallelism": base,
        "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
        "cluster": {"servers": gpus // 4, "gpus_per_server": 4},
    }


def test_infinitely_fast_network_gives_the_compute_critical_path():
    w = workload_from_plan(small_plan())
    fab = ideal(w.servers, port_bandwidth=FAST, latency=0.0, gpus_per_server=4)
    r = simulate_iteration(w, fab, intra_bandwidth=FAST)
    flops = w.info["forward_flops_per_microbatch_per_gpu"]
    tf = [compute_time(f) for f in flops]
    tb = [2 * t for t in tf]
    m, p = w.info["micro_batches"], len(flops)
    opt = [optimizer_time(x) for x in w.info["parameters_per_gpu_per_stage"]]
    # last backward of stage i ends at the 1F1B time of the sub-pipeline; optimizer after it
    ends = []
    for i in range(p):
        t_i = one_f_one_b_stage_end(p, m, tf, tb, i)
        ends.append(t_i + opt[i])
    assert r.iteration_s == pytest.approx(max(ends), rel=1e-9)
    assert r.compute_s == pytest.approx(max(ends), rel=1e-9)
    # with full recomputation the backward is 3x the forward
    w3 = workload_from_plan(small_plan(recompute="full"))
    r3 = simulate_iteration(w3, fab, intra_bandwidth=FAST, exposed_by_class=False)
    tb3 = [3 * t for t in tf]
    ends3 = [one_f_one_b_stage_end(p, m, tf, tb3, i) + opt[i] for i in range(p)]
    assert r3.iteration_s == pytest.approx(max(ends3), rel=1e-9)


def one_f_one_b_stage_end(p, m, tf, tb, stage):
    """End of the last backward of ``stage`` (stages before it finish later in 1F1B)."""
    # the recursion of one_f_one_b restricted to the chain ending at (stage, B, m-1)
    orders = []
    for i in range(p):
        w = min(p - i - 1, m)
        seq = [("F", j) for j in range(w)]
        for j in range(m - w):
            seq += [("F", w + j), ("B", j)]
        seq += [("B", j) for j in range(m - w, m)]
        orders.append(seq)
    end: dict = {}
    for _ in range(4 * p * m):  # relax until fixed point (Bellman-Ford on a DAG)
        changed = False
        for i in range(p):
            t_prev = 0.0
            for ph, j in orders[i]:
                s = t_prev
                if ph == "F" and i > 0:
                    s = max(s, end.get((i - 1, "F", j), np.inf))
                if ph == "B":
                    s = max(
                        s,
                        end.get((i + 1, "B", j), np.inf)
                        if i < p - 1
                        else end.get((i, "F", j), np.inf),
                    )
                e = s + (tf[i] if ph == "F" else tb[i])
                if end.get((i, ph, j)) != e and np.isfinite(e):
                    end[(i, ph, j)] = e
                    changed = True
                t_prev = e
        if not changed:
            break
    return end[(stage, "B", m - 1)]


@pytest.mark.parametrize("g", [2, 4, 6])
def test_lone_dp_all_reduce_matches_the_closed_form(g):
    S, B, lat = 2e8, 1e10, 1e-6
    info = {
        "micro_batches": 1,
        "forward_flops_per_microbatch_per_gpu": [1.0],
        "parameters_per_gpu_per_stage": [0],
    }
    dem = (Demand("all-reduce", [np.arange(g)], S, "dp", "backward", stage=0),)
    w = Workload(g, 1, dem, info=info)
    fab = ideal(g, port_bandwidth=B, latency=lat)
    r = simulate_iteration(w, fab, gpu=GPU, bucket_bytes=1e12)
    comp = 3e-12  # 1 FLOP forward + 2 backward at 1e12 FLOP/s
    assert r.compute_s == pytest.approx(comp, rel=1e-9)
    assert r.exposed_comm_s == pytest.approx(2 * (g - 1) / g * S / B + 2 * lat, rel=1e-9)
    assert r.exposed_by_class["dp"] == pytest.approx(r.exposed_comm_s, rel=1e-12)
    assert r.comm_s == pytest.approx(r.exposed_comm_s, rel=1e-9)
    # bucketed: n buckets run one after the other, each 2(g-1)/g * (S/n)/B + 2 latencies
    n = 8
    rb = simulate_iteration(w, fab, gpu=GPU, bucket_bytes=S / n, exposed_by_class=False)
    expect = n * (2 * (g - 1) / g * S / n / B + 2 * lat)
    assert rb.exposed_comm_s == pytest.approx(expect, rel=1e-9)
    assert (rb.timeline["kind"] == "sync").sum() == n
    # the fabric links carry exactly the wire bytes, each byte on an uplink and a downlink
    up = rb.links[rb.links["kind"] != "intra"]["bytes"].sum()
    assert up == pytest.approx(2 * 2 * (g - 1) * S, rel=1e-12)


def test_gradient_buckets_overlap_with_the_last_backward():
    """Backward of 80 ms produces 8 buckets, one every 10 ms; each bucket's all-reduce takes
    less than 10 ms, so only the last bucket is exposed."""
    g, S, B, lat = 4, 8e7, 1e10, 0.0
    n = 8
    info = {
        "micro_batches": 1,
        "forward_flops_per_microbatch_per_gpu": [4e10],
        "parameters_per_gpu_per_stage": [0],
    }
    dem = (Demand("all-reduce", [np.arange(g)], S, "dp", "backward", stage=0),)
    w = Workload(g, 1, dem, info=info)
    r = simulate_iteration(w, ideal(g, port_bandwidth=B, latency=lat), gpu=GPU, bucket_bytes=S / n)
    bucket = 2 * (g - 1) / g * (S / n) / B
    assert bucket < 0.01
    assert r.compute_s == pytest.approx(0.04 + 0.08, rel=1e-9)
    assert r.exposed_comm_s == pytest.approx(bucket, rel=1e-9)
    # the critical path: forward, the 8 backward pieces, the last bucket (the others overlap)
    assert r.comm_s == pytest.approx(bucket, rel=1e-9)
    assert r.comm_by_class == pytest.approx({"dp": bucket}, rel=1e-9)
    assert r.info["critical_path_compute_s"] == pytest.approx(0.12, rel=1e-9)
    # some communication is in flight during all n buckets
    assert r.comm_busy_s == pytest.approx(n * bucket, rel=1e-9)


def test_tp_collectives_block_their_stage():
    """One stage, one TP group of 4 GPUs in a server, c all-reduces per micro-batch forward:
    every forward grows by c * 2(t-1)/t * S / B_nvlink."""
    t, m, S, Bnv, c = 4, 3, 1e7, 1e11, 5
    info = {
        "micro_batches": m,
        "forward_flops_per_microbatch_per_gpu": [1e9],
        "parameters_per_gpu_per_stage": [0],
    }
    dem = (Demand("all-reduce", [np.arange(t)], S, "tp", "forward", c * m, stage=0),)
    w = Workload(t, t, dem, info=info)
    r = simulate_iteration(w, ideal(1, gpus_per_server=t), gpu=GPU, intra_bandwidth=Bnv)
    per = c * 2 * (t - 1) / t * S / Bnv
    assert r.iteration_s == pytest.approx(m * (3e-3 + per), rel=1e-9)
    assert r.exposed_by_class["tp"] == pytest.approx(m * per, rel=1e-9)
    assert r.links[r.links["kind"] != "intra"]["bytes"].sum() == 0.0


def test_gpt_like_plan_on_a_real_switch():
    w = workload_from_plan(small_plan())
    fab = ideal(w.servers, port_bandwidth=12.5e9, gpus_per_server=4)
    r = simulate_iteration(w, fab)
    assert r.iteration_s >= r.compute_s > 0
    assert r.exposed_comm_s == pytest.approx(r.iteration_s - r.compute_s)
    assert set(r.exposed_by_class) == {"tp", "pp", "dp"}
    assert all(-1e-12 <= v <= r.exposed_comm_s + 1e-12 for v in r.exposed_by_class.values())
    assert 0 < r.comm_s <= r.iteration_s
    assert list(r.timeline.columns) == list(TIMELINE_COLUMNS)
    assert (r.timeline["finish_s"] >= r.timeline["start_s"]).all()
    assert r.timeline["finish_s"].max() == pytest.approx(r.iteration_s)
    u = r.links["utilisation"].to_numpy()
    assert np.all((u >= 0) & (u <= 1 + 1e-9))
    assert r.info["merge_exact"]
    # every pipeline send of every replica is a flow: 2 replicas x 3 boundaries x m x 2 ways
    sends = r.timeline[r.timeline["kind"] == "send"]
    assert len(sends) == 2 * 3 * w.info["micro_batches"] * 2


def critical_path(tg) -> float:
    """Longest path of compute runtimes through the task graph (communication free)."""
    n = tg.n_tasks
    w = np.where(np.isin(tg.kind, ("forward", "backward", "update")), tg.runtime_s, 0.0)
    indeg = np.bincount(tg.edges[:, 1], minlength=n)
    succ = [[] for _ in range(n)]
    for a, b in tg.edges.tolist():
        succ[a].append(b)
    start = np.zeros(n)
    ready = [i for i in range(n) if indeg[i] == 0]
    while ready:
        i = ready.pop()
        for j in succ[i]:
            start[j] = max(start[j], start[i] + w[i])
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return float((start + w).max())


@pytest.mark.parametrize("name", ["100vgg_16.fbuf", "100dlrm_16.fbuf"])
def test_imported_taskgraph_is_at_least_its_critical_path(name):
    w = read_taskgraph(TASKGRAPHS / name)
    cp = critical_path(w.taskgraph)
    r = simulate_iteration(w, ideal(w.servers, port_bandwidth=12.5e9), exposed_by_class=False)
    assert r.iteration_s >= r.compute_s >= cp * (1 - 1e-12)
    fast = simulate_iteration(
        w, ideal(w.servers, port_bandwidth=FAST, latency=0.0), exposed_by_class=False
    )
    assert fast.iteration_s == pytest.approx(fast.compute_s, rel=1e-9)
    assert fast.compute_s >= cp * (1 - 1e-12)


def test_bad_input():
    w = pipeline_workload(2, 2, 1e9, 1.0)
    fab = ideal(2)
    with pytest.raises(InputError, match="algorithm"):
        simulate_iteration(w, fab, algorithm="butterfly")
    with pytest.raises(InputError, match="mode"):
        simulate_iteration(w, fab, mode="x")
    with pytest.raises(InputError, match="bucket_bytes"):
        simulate_iteration(w, fab, bucket_bytes=0)
    with pytest.raises(InputError, match="workload.servers"):
        simulate_iteration(w, ideal(1))
    with pytest.raises(InputError, match="workload"):
        simulate_iteration(Workload(2, 1, ()), fab)
    with pytest.raises(InputError, match="gpu.efficiency"):
        RooflineParams(efficiency=1.5)


def test_critical_path_communication_of_a_two_stage_pipeline():
    """Two stages on two servers, one micro-batch: F0 -> send -> F1 -> B1 -> send back -> B0.
    Everything is on the critical path, so the communication on it is the two sends
    (S/B + one 1 us hop each: link latency 0.5 us per ideal-switch link), the exposed
    communication too, and the critical path's compute is F0 + F1 + B1 + B0."""
    S, B, lat, flops = 1e6, 1e9, 0.5e-6, 1e9
    w = pipeline_workload(2, 1, flops, S)
    r = simulate_iteration(w, ideal(2, port_bandwidth=B, latency=lat), gpu=GPU)
    send = S / B + 2 * lat
    tf = flops / GPU.peak_flops
    assert r.comm_s == pytest.approx(2 * send, rel=1e-9)
    assert r.exposed_comm_s == pytest.approx(2 * send, rel=1e-9)
    assert r.comm_by_class == pytest.approx({"pp": 2 * send}, rel=1e-9)
    assert r.info["critical_path_compute_s"] == pytest.approx(2 * (tf + 2 * tf), rel=1e-9)
    assert r.iteration_s == pytest.approx(r.comm_s + r.info["critical_path_compute_s"], rel=1e-12)


def test_channels_of_one_collective_share_its_buckets():
    """A gradient all-reduce split into two ring channels (as a design's rings) is one DDP
    bucket stream: ceil(S_total / bucket) buckets, bucket k of both channels after bucket k-1
    of both. On one switch the split changes nothing: the same iteration as the single ring
    (before, each channel ran its own ceil(S/2 / bucket) buckets and the pair went faster)."""
    g, S, B, lat = 4, 8e7, 1e10, 1e-6
    info = {
        "micro_batches": 1,
        "forward_flops_per_microbatch_per_gpu": [4e10],
        "parameters_per_gpu_per_stage": [0],
    }
    one = Demand("all-reduce", [np.arange(g)], S, "dp", "backward", stage=0)
    rings = tuple(
        Demand("all-reduce", [order], S / 2, "dp", "backward", stage=0, ordered=True)
        for order in ([0, 1, 2, 3], [0, 3, 2, 1])
    )
    fab = ideal(g, port_bandwidth=B, latency=lat)
    r1 = simulate_iteration(Workload(g, 1, (one,), info=info), fab, gpu=GPU, bucket_bytes=S / 4)
    r2 = simulate_iteration(Workload(g, 1, rings, info=info), fab, gpu=GPU, bucket_bytes=S / 4)
    assert (r1.timeline["kind"] == "sync").sum() == 4
    assert (r2.timeline["kind"] == "sync").sum() == 2 * 4  # 4 buckets per channel, not 2
    assert r2.iteration_s == pytest.approx(r1.iteration_s, rel=1e-9)
    sync = r2.timeline[r2.timeline["kind"] == "sync"].sort_values("start_s")
    starts = sync["start_s"].to_numpy().reshape(4, 2)
    assert np.all(starts[:, 0] == starts[:, 1])  # both channels start each bucket together
    ends = sync["finish_s"].to_numpy().reshape(4, 2).max(axis=1)
    assert np.all(starts[1:, 0] >= ends[:-1] - 1e-15)  # after the previous bucket of both
