"""The calibrated 16,384-GPU plans of docs/verdicts.md (benchmarks/calibrated_plans.py): the files
kept in benchmarks/plans/ are what the script writes, and each is the plan the doc says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from traffic.plan import load_plan

PLANS = Path(__file__).resolve().parents[2] / "benchmarks" / "plans"


@pytest.fixture(scope="module")
def script(bench_script):
    bench_script("bench_megatron_table1")  # imported by bench_llama3_table4 by its stem
    bench_script("bench_llama3_table4")
    return bench_script("calibrated_plans")


def _read(name):
    text = (PLANS / name).read_text()
    return json.loads(text) if name.endswith(".json") else yaml.safe_load(text)


def test_the_kept_files_are_the_scripts_plans(script):
    assert _read("llama3-405b-calibrated.json") == script.llama_plan()
    assert _read("gpt3-175b-b2048-calibrated.yaml") == script.gpt3_plan()
    assert _read("gpt3-175b-b2048.yaml") == script.gpt3_plan(calibrated=False)


def test_llama_is_table_4s_second_row_at_the_fit(script):
    p = load_plan(_read("llama3-405b-calibrated.json"))
    par = p.parallelism
    # 16,384 H100 = 2,048 servers of 8; tp 8 x pp 16 x dp 128 = 16,384; 16 sequences a group
    assert (p.cluster.servers * p.cluster.gpus_per_server, par.tp, par.pp, p.dp) == (
        16384, 8, 16, 128)  # fmt: skip
    assert (p.global_batch, p.model.seq_len, par.vpp, p.model.layers) == (2048, 8192, 8, 128)
    assert (p.cluster.gpu, p.cluster.efficiency) == ("h100-sxm", 0.523)


def test_gpt3_takes_the_largest_vpp_dividing_its_layers_and_a_batch_that_interleaves():
    cal, base = (load_plan(_read(n)) for n in ("gpt3-175b-b2048-calibrated.yaml",
                                                "gpt3-175b-b2048.yaml"))  # fmt: skip
    # 96 layers / pp 16 = 6 a stage: vpp in {1, 2, 3, 6}; 8 would need 128 layers
    assert (cal.model.layers, cal.parallelism.pp, cal.parallelism.vpp) == (96, 16, 6)
    # interleaving needs micro-batches a multiple of pp: 2,048 / dp 128 = 16 (1,536 gives 12)
    assert cal.global_batch // cal.dp == 16 == cal.parallelism.pp
    assert (cal.cluster.gpu, cal.cluster.efficiency) == ("h100-sxm", 0.523)
    assert (base.parallelism.vpp, base.cluster.efficiency, base.global_batch) == (1, None, 2048)
    assert (base.cluster.servers, base.dp, base.parallelism.tp) == (2048, 128, 8)


def test_mixtral_is_the_default_verdicts_plan_with_only_the_efficiency_changed(script):
    from topoopt.app.studies.advise import scale_plan
    from traffic.hardware import gpu_spec

    default = scale_plan(load_plan("mixtral-8x7b"), 16384, "h100-sxm")  # the verdict's plan
    assert gpu_spec("h100-sxm").efficiency == 0.43  # the default run's efficiency
    assert script.MIXTRAL_EFFICIENCIES == (0.523, 0.48, 0.47)
    for e, name in ((0.523, "mixtral-8x7b-eff0523.yaml"), (0.48, "mixtral-8x7b-eff048.yaml"),
                    (0.47, "mixtral-8x7b-eff047.yaml")):  # fmt: skip
        d = _read(name)
        assert d == script.mixtral_plan(e) and script.mixtral_name(e) == name
        p = load_plan(d)
        assert (p.cluster.gpu, p.cluster.efficiency, p.parallelism.vpp) == ("h100-sxm", e, 1)
        # 16,384 GPUs = 2,048 servers x 8 = tp 2 x pp 4 x dp 2,048; 32 sequences a replica, as
        # the embedded plan's 512 on dp 16
        assert p.cluster.servers * p.cluster.gpus_per_server == 16384 == 2 * 4 * p.dp
        assert (p.dp, p.global_batch) == (2048, 512 // 16 * 2048)
        # advise --gpus 16384 --gpu h100-sxm leaves it as written (the plan's own GPU and size)
        assert scale_plan(p, 16384, "h100-sxm") == p
        # only the efficiency differs from the plan the default verdict ran
        assert p.cluster.model_copy(update={"efficiency": None}) == default.cluster
        # (the fields: the scaled plan's name says its GPU count, the file's its efficiency)
        same = p.model_copy(update={"cluster": default.cluster})
        assert same.model_dump() == default.model_dump()
