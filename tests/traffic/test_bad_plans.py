"""Malformed plans: each gives one InputError line naming the field."""

import pytest

from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.plan import load_plan

GOOD = """\
model: gpt3-175b
parallelism: {tp: 8, pp: 16, dp: 8, micro_batch_size: 1, global_batch_size: 1536}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 128, gpus_per_server: 8}
"""

CASES = [
    ("unknown model", GOOD.replace("gpt3-175b", "gpt-5"), "model", "llama3-8b"),
    ("product != gpus", GOOD.replace("dp: 8", "dp: 4"), "parallelism", "1024"),
    ("zero degree", GOOD.replace("tp: 8", "tp: 0"), "parallelism.tp", "greater than 0"),
    ("negative size", GOOD.replace("servers: 128", "servers: -2"), "cluster.servers", "-2"),
    ("wrong type", GOOD.replace("tp: 8", "tp: eight"), "parallelism.tp", "integer"),
    ("string number", GOOD.replace("pp: 16", "pp: '16'"), "parallelism.pp", "integer"),
    ("unknown field", GOOD.replace("tp: 8,", "tp: 8, tpp: 2,"), "parallelism.tpp", "known"),
    ("unknown section", GOOD + "extras: {a: 1}\n", "extras", "known fields"),
    ("yaml syntax", GOOD.replace("dp: 8,", "dp: [8,"), "plan.yaml", "line"),
    ("heads % tp", GOOD.replace("tp: 8, pp: 16, dp: 8", "tp: 64, pp: 2, dp: 8"),
     "parallelism.tp", "heads = 96"),
    ("layers % pp", GOOD.replace("tp: 8, pp: 16, dp: 8", "tp: 8, pp: 64, dp: 2"),
     "model.layers", "pp*vpp"),
    ("batch % (b*dp)", GOOD.replace("1536", "1500"), "parallelism.global_batch_size", "dp"),
    ("bad order", GOOD.replace("dp: 8,", "dp: 8, order: tp-dp-xx,"), "parallelism.order", "tp"),
    ("zero and fsdp", GOOD.replace("dp: 8,", "dp: 8, zero: 3, fsdp: full_shard,"),
     "parallelism.fsdp", "pick one"),
    ("zero out of range", GOOD.replace("dp: 8,", "dp: 8, zero: 4,"), "parallelism.zero", "4"),
    ("bad recompute", GOOD.replace("dp: 8,", "dp: 8, recompute: some,"),
     "parallelism.recompute", "selective"),
    ("experts % ep", """\
model: {base: mixtral-8x7b, seq_len: 4096}
parallelism: {tp: 1, pp: 1, dp: 24, ep: 3, global_batch_size: 48}
cluster: {servers: 3, gpus_per_server: 8}
""", "parallelism.ep", "experts = 8"),
    ("ep on dense", GOOD.replace("dp: 8,", "dp: 8, ep: 2,"), "parallelism.ep", "dense"),
    ("bad bytes", GOOD.replace("activation_bytes: 2", "activation_bytes: 0"),
     "precision.activation_bytes", "1"),
    ("inline shape missing", """\
model: {layers: 2, hidden: 64, heads: 4, seq_len: 8}
parallelism: {global_batch_size: 8}
cluster: {servers: 1, gpus_per_server: 8}
""", "model.vocab", "required"),
    ("not a mapping", "- 1\n- 2\n", "plan.yaml", "mapping"),
    ("missing cluster", GOOD.replace("cluster: {servers: 128, gpus_per_server: 8}\n", ""),
     "cluster", "required"),
    ("expert_load length", """\
model: {base: mixtral-8x7b, seq_len: 4096}
parallelism: {tp: 1, pp: 1, dp: 8, ep: 8, global_batch_size: 8}
cluster: {servers: 1, gpus_per_server: 8}
options: {expert_load: [1, 2]}
""", "options.expert_load", "8 loads"),
    ("recsys with tp", """\
model: dlrm
parallelism: {tp: 2, global_batch_size: 65536}
cluster: {servers: 1, gpus_per_server: 8}
""", "parallelism.tp", "recsys"),
]  # fmt: skip


@pytest.mark.parametrize("label,text,field,hint", CASES, ids=[c[0] for c in CASES])
def test_bad_plan(tmp_path, label, text, field, hint):
    f = tmp_path / "plan.yaml"
    f.write_text(text)
    with pytest.raises(InputError) as info:
        workload_from_plan(f)
    msg = str(info.value)
    assert "\n" not in msg
    assert info.value.field == field, msg
    assert msg.startswith(f"{field}: got ")
    assert hint in msg


def test_good_plan_loads(tmp_path):
    f = tmp_path / "plan.yaml"
    f.write_text(GOOD)
    assert load_plan(f).micro_batches == 192


def test_json_syntax_error(tmp_path):
    f = tmp_path / "plan.json"
    f.write_text('{"model": "gpt3-175b",, }')
    with pytest.raises(InputError) as info:
        load_plan(f)
    assert info.value.field == "plan.json" and "line 1" in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError) as info:
        load_plan(tmp_path / "nope.yaml")
    assert info.value.field == "plan"
