"""Plan loading: YAML, JSON, mappings, embedded plans, zoo entries and option echoing."""

import json

import pytest
import yaml

from traffic.build import workload_from_plan
from traffic.models.megatron import model_parameters
from traffic.plan import Plan, embedded_plan_names, embedded_plan_path, load_plan
from traffic.zoo import ZOO, get_model, zoo_names

EXPECTED_PLANS = {"gpt3-175b", "gpt3-175b-fsdp", "mixtral-8x7b", "dlrm", "vgg16-dp"}


def test_embedded_plans_load_and_build():
    names = set(embedded_plan_names())
    assert EXPECTED_PLANS <= names
    for n in names:
        plan = load_plan(embedded_plan_path(n))
        assert isinstance(plan, Plan) and plan.source == f"{n}.yaml"
        w = workload_from_plan(plan)
        assert w.gpus == plan.cluster.servers * plan.cluster.gpus_per_server
        assert w.total_wire_bytes() > 0


def test_yaml_json_mapping_agree(tmp_path):
    data = yaml.safe_load(embedded_plan_path("gpt3-175b").read_text())
    j = tmp_path / "p.json"
    j.write_text(json.dumps(data))
    a, b, c = load_plan(embedded_plan_path("gpt3-175b")), load_plan(j), load_plan(data)
    assert a.model_dump() == b.model_dump() == c.model_dump()
    assert load_plan("gpt3-175b").model_dump() == a.model_dump()


def test_defaults_inferred():
    plan = load_plan({"model": "llama3-8b", "parallelism": {"tp": 2, "global_batch_size": 64},
                      "cluster": {"servers": 2, "gpus_per_server": 8}})  # fmt: skip
    assert plan.dp == 8 and plan.micro_batches == 8
    assert plan.precision.activation_bytes == 2 and plan.options.sp_regather is True
    assert load_plan("dlrm").global_batch == 65536


def test_base_override_recomputes_derived_shape():
    plan = load_plan({"model": {"base": "gpt3-175b", "hidden": 1024, "heads": 16, "layers": 4},
                      "parallelism": {"global_batch_size": 8},
                      "cluster": {"servers": 1, "gpus_per_server": 8}})  # fmt: skip
    m = plan.model
    assert (m.ffn, m.head_dim, m.vocab, m.seq_len) == (4096, 64, 51200, 2048)
    h, l, V, s = 1024, 4, 51200, 2048
    assert model_parameters(m) == 12 * l * h * h + 13 * l * h + (V + s) * h + 2 * h


@pytest.mark.parametrize(
    "name,count",
    [  # published figures (model cards / papers)
        ("llama2-7b", 6_738_415_616),
        ("llama2-70b", 68_976_648_192),
        ("llama3-8b", 8_030_261_248),
        ("llama3-70b", 70_553_706_496),
        ("mixtral-8x7b", 46_702_792_704),
    ],
)
def test_zoo_parameter_counts(name, count):
    assert model_parameters(get_model(name)) == count


def test_zoo_complete_and_sourced():
    required = {"gpt3-175b", "llama2-7b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b",
                "mixtral-8x7b", "deepseek-v3", "bert-large", "resnet50", "vgg16", "dlrm", "ncf",
                "candle-uno"}  # fmt: skip
    assert required <= set(zoo_names())
    for n in ZOO:
        assert get_model(n).source
    d = get_model("dlrm")
    assert (d.tables[0].count, d.tables[0].rows, d.tables[0].dim) == (64, 10**7, 128)


def test_conventions_echo_options():
    w = workload_from_plan({"model": "gpt3-175b",
                            "parallelism": {"tp": 8, "pp": 16, "dp": 8, "recompute": "full"},
                            "cluster": {"servers": 128, "gpus_per_server": 8},
                            "options": {"grad_reduce_dtype": "fp32", "tied_embeddings": False,
                                        "edge_extras": False}})  # fmt: skip
    c = w.conventions
    assert c["recompute"] == "full" and c["grad_reduce_bytes"] == 4
    assert c["tied_embeddings"] is False and c["edge_extras"] is False
    assert c["padded_vocab"] == 51200
    assert not [d for d in w.demands if d.cls == "embedding"]
    json.dumps(dict(c))  # JSON-serialisable for the CLI
    json.dumps(dict(w.info))
