"""Pipeline stages of unequal layer counts (issue 24.6: Llama 3 405B, 126 layers on 16 stages)."""

from __future__ import annotations

import pytest

from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.memory import memory_per_gpu
from traffic.models.megatron import stage_parameters
from traffic.plan import load_plan


def _plan(stage_layers=None, layers=6, **par):
    parallelism = {"tp": 2, "pp": 2, "dp": 1, "global_batch_size": 4, **par}
    if stage_layers is not None:
        parallelism["stage_layers"] = stage_layers
    return {"model": {"base": "llama3-8b", "layers": layers, "seq_len": 512},
            "parallelism": parallelism,
            "cluster": {"servers": 1, "gpus_per_server": 4}}  # fmt: skip


def test_uneven_stages_scale_compute_memory_and_parameters():
    even = load_plan(_plan())
    uneven = load_plan(_plan([2, 4]))
    we, wu = workload_from_plan(even), workload_from_plan(uneven)
    assert wu.info["layers_per_stage"] == [2, 4]
    # the same model: the same FLOPs and parameters in all, split differently
    assert wu.info["model_flops_per_iteration"] == pytest.approx(
        we.info["model_flops_per_iteration"], rel=1e-12
    )
    fe, fu = (
        we.info["forward_flops_per_microbatch_per_gpu"],
        wu.info["forward_flops_per_microbatch_per_gpu"],
    )
    # stage 0 holds layers only: its forward FLOPs scale with its layer count
    assert fu[0] / fe[0] == pytest.approx(2 / 3, rel=1e-12)
    pe, pu = stage_parameters(even), stage_parameters(uneven)
    per_layer = pe[0].dense - pu[0].dense  # one layer's weights moved from stage 0 to 1
    assert pu[1].dense - pe[1].dense == pytest.approx(per_layer)
    assert sum(p.dense for p in pu) == sum(p.dense for p in pe)
    me, mu = memory_per_gpu(even), memory_per_gpu(uneven)
    assert mu.per_stage[1] > me.per_stage[1] and mu.per_stage[0] < me.per_stage[0]


def test_llama3_405b_as_published():
    sl = [7] + [8] * 14 + [7]
    p = load_plan(
        {"model": "llama3-405b", "parallelism": {"tp": 8, "pp": 16, "dp": 1, "stage_layers": sl,
         "global_batch_size": 16}, "cluster": {"servers": 16, "gpus_per_server": 8}}
    )  # fmt: skip
    w = workload_from_plan(p)
    assert w.info["layers_per_stage"] == sl
    f = w.info["forward_flops_per_microbatch_per_gpu"]
    assert f[0] / f[1] == pytest.approx(7 / 8, rel=1e-12)


@pytest.mark.parametrize(
    "sl, extra, field",
    [([3], {}, "parallelism.stage_layers"), ([2, 3], {}, "parallelism.stage_layers"),
     ([0, 6], {}, "parallelism.stage_layers"), ([3, 3], {"vpp": 3}, "parallelism.vpp")],
)  # fmt: skip
def test_bad_stage_layers(sl, extra, field):
    with pytest.raises(InputError) as e:
        load_plan(_plan(sl, **extra))
    assert str(e.value).startswith(field)
