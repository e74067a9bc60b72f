"""The plan space: the generator equals brute force on tiny spaces; constraints hold."""

from __future__ import annotations

import pytest

from topoopt.app.studies.cosearch.space import (
    RECOMPUTES,
    Candidate,
    SpaceOptions,
    _dominance_key,
    brute_force_space,
    candidate_plan,
    plan_space,
    table_gpus,
)
from traffic.errors import InputError
from traffic.memory import memory_per_gpu

TINY = {
    "model": {
        "layers": 4,
        "hidden": 64,
        "heads": 4,
        "vocab": 128,
        "seq_len": 32,
        "global_batch": 8,
    },
    "cluster": {"servers": 2, "gpus_per_server": 2},
}

MOE = {
    "model": {
        "layers": 2,
        "hidden": 32,
        "heads": 2,
        "vocab": 64,
        "seq_len": 16,
        "experts": 4,
        "top_k": 2,
        "global_batch": 4,
    },
    "cluster": {"servers": 2, "gpus_per_server": 2},
}


def _keys(space):
    return [c.key for c in space.candidates]


@pytest.mark.parametrize("memory", [80e9, 1.5e6])
def test_generator_equals_brute_force_dense(memory):
    """Every raw combination through load_plan + the memory cap + dominance gives exactly the
    generator's candidates (and a tighter memory cap only removes some)."""
    fast = plan_space(TINY, memory)
    slow = brute_force_space(TINY, memory)
    assert _keys(fast) == _keys(slow)
    assert fast.rejected["memory"] == slow.rejected["memory"]
    assert len(fast) > 0
    for plan, mem in zip(fast.plans, fast.memory, strict=True):
        assert mem.total_bytes <= memory
        par = plan.parallelism
        assert par.tp * par.pp * plan.dp * par.cp == plan.gpus
        assert plan.model.heads % par.tp == 0 and plan.model.layers % (par.pp * par.vpp) == 0
        assert par.tp <= plan.cluster.gpus_per_server
    if memory < 80e9:  # a tighter cap only removes plans (or adds recomputation to them)
        fits = {_dominance_key(c) for c in plan_space(TINY, 80e9).candidates}
        assert {_dominance_key(c) for c in fast.candidates} < fits


def test_generator_equals_brute_force_moe():
    opts = SpaceOptions(micro_batch_sizes=(1, 2), orders=("tp-cp-ep-dp-pp",))
    fast = plan_space(MOE, 80e9, opts)
    slow = brute_force_space(MOE, 80e9, opts)
    assert _keys(fast) == _keys(slow)
    assert {c.par["ep"] for c in fast.candidates} == {1, 2, 4}


def test_dominance_keeps_least_recompute():
    """With room for everything only recompute=none survives; with a tight cap the survivors of
    one group are exactly the least recomputation that fits."""
    roomy = plan_space(TINY, 80e9)
    assert {c.par["recompute"] for c in roomy.candidates} == {"none"}
    tight = plan_space(TINY, 1.5e6)
    assert {c.par["recompute"] for c in tight.candidates} == {"none", "selective", "full"}
    for c in tight.candidates:
        for cheaper in ("none", "selective")[: RECOMPUTES.index(c.par["recompute"])]:
            par = {**c.par, "recompute": cheaper}
            p2 = candidate_plan(tight.base, Candidate(tuple(sorted(par.items()))))
            assert memory_per_gpu(p2).total_bytes > 1.5e6


def test_recsys_placements_and_memory():
    """DLRM: every table on one server; more holders, less memory per GPU."""
    space = plan_space(_dlrm_base(), 80e9)
    servers = {len(set(c.table_servers)) for c in space.candidates if c.table_servers}
    assert servers == {1, 2, 4, 8, 16}
    one = [
        m
        for c, m in zip(space.candidates, space.memory, strict=True)
        if c.table_servers and len(set(c.table_servers)) == 1
    ]
    sixteen = [
        m
        for c, m in zip(space.candidates, space.memory, strict=True)
        if c.table_servers and len(set(c.table_servers)) == 16
    ]
    assert one[0].total_bytes > sixteen[0].total_bytes
    small = plan_space(_dlrm_base(), 30e9)
    assert all(len(set(c.table_servers)) > 1 for c in small.candidates if c.table_servers)
    assert table_gpus([3, 3, 0], 8).tolist() == [24, 25, 0]


def _dlrm_base():
    from topoopt.app.studies.cosearch.space import base_mapping
    from traffic.plan import load_plan

    p = load_plan("dlrm")
    b = base_mapping(p)
    b["model"] = {**b["model"], "global_batch": p.global_batch}
    return b


def test_bad_memory():
    with pytest.raises(InputError):
        plan_space(TINY, 0)
