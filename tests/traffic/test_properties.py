"""Property tests on random valid plans: partitions, non-negative sizes, wire-byte bookkeeping."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traffic.build import workload_from_plan
from traffic.placement import RankGrid, rank_grids


@st.composite
def plans(draw):
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 3]))
    cp = draw(st.sampled_from([1, 2]))
    dp = draw(st.sampled_from([1, 2, 4]))
    vpp = draw(st.sampled_from([1, 2])) if pp > 1 else 1
    gpus = tp * pp * cp * dp
    gps = draw(st.sampled_from([g for g in (1, 2, 4, 8) if gpus % g == 0]))
    moe = draw(st.booleans())
    model = {
        "layers": pp * vpp * draw(st.integers(1, 3)),
        "hidden": 64 * draw(st.integers(1, 3)),
        "heads": 4,
        "kv_heads": draw(st.sampled_from([4])),
        "vocab": draw(st.integers(100, 600)),
        "seq_len": 16 * draw(st.integers(1, 4)),
        "gated_mlp": draw(st.booleans()),
        "norm": draw(st.sampled_from(["layernorm", "rmsnorm"])),
        "bias": draw(st.booleans()),
        "position": draw(st.sampled_from(["learned", "rope", "none"])),
        "tied_embeddings": draw(st.booleans()),
    }
    par = {"tp": tp, "pp": pp, "cp": cp, "dp": dp, "vpp": vpp,
           "sp": draw(st.booleans()) and tp > 1,
           "micro_batch_size": draw(st.sampled_from([1, 2])),
           "recompute": draw(st.sampled_from(["none", "selective", "full"])),
           "order": draw(st.sampled_from(["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp"]))}  # fmt: skip
    par["global_batch_size"] = par["micro_batch_size"] * dp * draw(st.integers(1, 3))
    opts = {"edge_extras": draw(st.booleans()), "pp_scatter_gather": draw(st.booleans())}
    if moe:
        model.update(experts=4, top_k=draw(st.sampled_from([1, 2])),
                     dense_layers=draw(st.integers(0, 1)))  # fmt: skip
        per_stage = tp * cp * dp
        par["ep"] = draw(st.sampled_from([e for e in (1, 2, 4) if per_stage % e == 0]))
        etps = [e for e in (1, 2, 4) if per_stage % (e * par["ep"]) == 0]
        etp = draw(st.sampled_from(etps))
        if etp != tp or draw(st.booleans()):  # else left out: Megatron's default, etp = tp
            par["etp"] = etp
        if draw(st.booleans()):
            opts["capacity_factor"] = draw(st.sampled_from([1.0, 1.25, 2.0]))
        elif draw(st.booleans()):
            opts["expert_load"] = draw(st.lists(st.integers(1, 9), min_size=4, max_size=4))
    shard = draw(st.sampled_from(["none", "dist", "zero", "fsdp"]))
    if shard == "dist":
        par["distributed_optimizer"] = True
    elif shard == "zero":
        par["zero"] = draw(st.integers(1, 3))
    elif shard == "fsdp":
        par["fsdp"] = draw(st.sampled_from(["full_shard", "shard_grad_op"]))
    return {
        "model": model,
        "parallelism": par,
        "cluster": {"servers": gpus // gps, "gpus_per_server": gps},
        "options": opts,
    }


def _independent_wire(d) -> float:
    """Bytes on the wire of one family, recomputed from the nccl-tests per-rank formulas."""
    g = d.group_size
    if g == 1:
        return 0.0
    if d.peer_bytes is not None:
        per_group = float(np.sum(d.peer_bytes))
    elif d.op == "send":
        per_group = d.size
    elif d.op == "all-reduce":
        per_group = g * 2 * (g - 1) / g * d.size
    else:
        per_group = g * (g - 1) / g * d.size
    return per_group * d.n_groups * d.count


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_workload_invariants(plan):
    w = workload_from_plan(plan)
    assert w.gpus == plan["cluster"]["servers"] * plan["cluster"]["gpus_per_server"]
    total = 0.0
    for d in w.demands:
        assert d.size >= 0 and d.count >= 0
        assert d.groups.min() >= 0 and d.groups.max() < w.gpus
        if d.op != "send":
            # members of a collective are distinct ranks, and rows of one family are disjoint
            flat = d.groups.reshape(-1)
            assert np.unique(flat).size == flat.size
        else:
            assert np.all(d.groups[:, 0] != d.groups[:, 1])
        if d.peer_bytes is not None:
            assert (d.peer_bytes >= 0).all()
            assert d.size == np.max(d.peer_bytes.sum(axis=1))
        total += _independent_wire(d)
    assert np.isclose(w.total_wire_bytes(), sum(d.wire_bytes() for d in w.demands), rtol=1e-12)
    assert np.isclose(w.total_wire_bytes(), total, rtol=1e-12)
    assert np.isclose(sum(w.bytes_by_class().values()), w.total_wire_bytes(), rtol=1e-12)
    # per-stage tp / dp families together cover every rank exactly once
    par = plan["parallelism"]
    for cls, first in (("tp", "tp"), ("dp", "dp")):
        fams = [
            d
            for d in w.demands
            if d.cls == cls
            and d.phase == "backward"
            and d.op in ("all-reduce", "reduce-scatter")
            and d.name.startswith(first)
        ]
        by_stage = {}
        for d in fams:
            by_stage.setdefault(d.stage, d)
        if fams and len(by_stage) == par["pp"] and all(d.group_size > 1 for d in fams):
            ranks = np.concatenate([d.groups.reshape(-1) for d in by_stage.values()])
            assert sorted(ranks.tolist()) == list(range(w.gpus))


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([1, 2, 3]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2]),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-dp-ep-cp-pp", "dp-tp-pp-ep-cp"]),
)
def test_group_listings_partition_ranks(tp, pp, cp, dp, ep, order):
    if (tp * cp * dp) % ep:
        return
    dense, expert = rank_grids(tp, pp, dp, cp, ep, 1, order)
    for grid in (dense, expert):
        assert isinstance(grid, RankGrid)
        for dims in ("tp", "cp", "ep", "dp", "pp", "dp-cp", "tp-pp", "tp-cp-dp"):
            g = grid.groups(dims)
            assert g.shape[0] * g.shape[1] == grid.world
            assert sorted(g.reshape(-1).tolist()) == list(range(grid.world))
            size = 1
            for d in dims.split("-"):
                size *= grid.size(d)
            assert g.shape[1] == size
