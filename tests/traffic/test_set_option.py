"""``--set KEY=VALUE`` (and ``settings=`` of :func:`traffic.load.load_workload`): a plan field
changed without editing the plan file. The result is the plan file that says so, to the last
digit; the settings apply after ``--gpu``/``--efficiency`` (and after ``advise``'s ``--gpus``
scaling); anything else is one line naming the field, the value and what is allowed."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.traffic.test_efficiency_option import _file, _json  # a plan file; a command's JSON
from topoopt.app.cli.app import app
from topoopt.app.studies.advise import scale_plan
from traffic.errors import InputError
from traffic.load import load_workload, with_settings
from traffic.plan import load_plan

SMALL = {
    "model": {"base": "llama3-8b", "layers": 8, "global_batch": 16, "seq_len": 1024},
    "parallelism": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2},
    "cluster": {"servers": 2, "gpus_per_server": 4},
}


def test_set_is_the_plan_file_that_says_so(tmp_path):
    """vpp 2, a global batch of 32 and a sequence of 2,048 set on the command line give the
    iteration (and traffic) of the file written with those fields, to the last digit; the JSON
    names what was set; without the settings the iteration differs."""
    plain = _file(tmp_path, "plain.json", SMALL)
    edited = {
        "model": {**SMALL["model"], "seq_len": 2048},
        "parallelism": {**SMALL["parallelism"], "vpp": 2, "global_batch_size": 32},
        "cluster": SMALL["cluster"],
    }
    want_file = _file(tmp_path, "edited.json", edited)
    sets = [
        "--set", "parallelism.vpp=2", "--set", "parallelism.global_batch_size=32",
        "--set", "model.seq_len=2048",
    ]  # fmt: skip
    common = ["--fabric", "ideal", "--degree", "4", "--link-gbps", "400"]
    got = _json(["simulate", plain, *common, *sets])
    want = _json(["simulate", want_file, *common])
    base = _json(["simulate", plain, *common])
    assert got["iteration_s"] == want["iteration_s"] != base["iteration_s"]
    assert got["workload"] == (
        "plain.json with parallelism.vpp=2 parallelism.global_batch_size=32 model.seq_len=2048"
    )
    w1 = load_workload(plain, settings=["parallelism.vpp=2", "parallelism.global_batch_size=32",
                                        "model.seq_len=2048"])  # fmt: skip
    w2 = load_workload(want_file)
    assert w1.bytes_by_class() == w2.bytes_by_class()
    assert w1.info["micro_batches"] == 32 // (2 * 2) == w2.info["micro_batches"]


def test_set_applies_after_gpu_and_efficiency():
    """``--gpu h100-sxm --set cluster.efficiency=0.6`` is an H100 at 0.6 (the setting wins over
    the GPU's default 0.43); ``--efficiency 0.5 --set cluster.efficiency=0.6`` is 0.6."""
    w = load_workload("gpt3-175b", gpu="h100-sxm", settings=["cluster.efficiency=0.6"])
    assert (w.info["gpu"]["name"], w.info["gpu"]["efficiency"]) == ("h100-sxm", 0.6)
    w = load_workload("gpt3-175b", gpu="h100-sxm", efficiency=0.5,
                      settings=["cluster.efficiency=0.6"])  # fmt: skip
    assert w.info["gpu"]["efficiency"] == 0.6


def test_advise_sets_the_scaled_plan():
    """advise's settings apply to the plan as it runs: GPT-3 175B scaled to 16,384 GPUs (dp 128)
    with a global batch of 2,048 and vpp 6 has 2,048 / 128 = 16 micro-batches a replica (the
    scaling alone would give 1,536 / 8 x 128 = 24,576)."""
    p = scale_plan(load_plan("gpt3-175b"), 16384)
    assert (p.dp, p.global_batch) == (128, 24576)
    s = ["parallelism.global_batch_size=2048", "parallelism.vpp=6"]
    p = scale_plan(load_plan("gpt3-175b"), 16384, "h100-sxm", 0.523, s)
    assert (p.dp, p.global_batch, p.micro_batches, p.parallelism.vpp) == (128, 2048, 16, 6)
    assert (p.cluster.gpu, p.cluster.gpu_spec.efficiency) == ("h100-sxm", 0.523)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("vpp=2", "--set: got 'vpp=2'; allowed: KEY=VALUE with KEY a dotted field of model"),
        ("parallelism.vpp", "--set: got 'parallelism.vpp'; allowed: KEY=VALUE"),
        ("parallelism.vp=2", "parallelism.vp: got 'vp'; allowed: no such field"),
        ("parallelism.vpp=3", "model.layers: got 8; allowed: a multiple of pp*vpp = 2*3 = 6"),
        ("parallelism.vpp=abc", "parallelism.vpp: got 'abc'; allowed: Input should be a valid"),
        ("parallelism.vpp=", "--set: got 'parallelism.vpp='; allowed: a VALUE of 1 to 4,096"),
        ("parallelism.tp.x=1", "--set: got 'parallelism.tp.x=1'; allowed: parallelism.tp to be"),
        ("parallelism.vpp={a: 1}", "allowed: a scalar or a list VALUE"),
        ("cluster.servers=[1,", "--set cluster.servers: got 'line 1 column"),
        ("secrets.key=1", "KEY a dotted field of model, parallelism, precision, cluster"),
    ],
)
def test_a_bad_setting_is_one_line(tmp_path, setting, message):
    with pytest.raises(InputError) as e:
        load_workload(_file(tmp_path, "p.json", SMALL), settings=[setting])
    assert message in str(e.value) and "\n" not in str(e.value)
    r = CliRunner().invoke(app, ["simulate", str(tmp_path / "p.json"), "--fabric", "ideal",
                                 "--set", setting])  # fmt: skip
    assert r.exit_code == 2 and r.output.count("error:") == 1 and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key=st.text(string.ascii_letters + "._", min_size=0, max_size=30),
    value=st.text(min_size=0, max_size=40),
)
@example(key="parallelism.vpp", value="2")
@example(key="parallelism.sp", value=" true")
@example(key="model.seq_len", value="2048")
@example(key="parallelism.stage_layers", value="[3, 5]")
@example(key="cluster.servers", value="abc")
def test_any_setting_is_a_plan_or_one_line(key, value):
    """Random KEY=VALUE text: a plan whose field at KEY is VALUE as YAML reads it, named after the
    setting; or one line starting with the field (or ``--set``); never another exception (the
    value goes through the strict YAML reader, the plan through its schema)."""
    import yaml

    plan = load_plan(SMALL)
    try:
        out = with_settings(plan, [f"{key}={value}"])
    except InputError as e:
        msg = str(e)
        assert "\n" not in msg
        assert msg.startswith(("--set", "model", "parallelism", "precision", "cluster", "options"))
    else:
        node = out.model_dump()
        for part in key.strip().split("."):
            node = node[part]
        want = yaml.safe_load(value.strip())
        assert (list(node) if isinstance(node, tuple) else node) == want
        assert out.source == f"{plan.model.name} with {key.strip()}={value.strip()}"


def test_the_api_takes_the_same_settings(tmp_path):
    """``topoopt.simulate(..., settings=[...])`` on a dict plan is the CLI's ``--set`` on the
    file: the same iteration, and a Workload refuses settings (it has no plan fields)."""
    import topoopt

    plain = _file(tmp_path, "plain.json", SMALL)
    s = ["parallelism.vpp=2"]
    cli = _json(["simulate", plain, "--fabric", "ideal", "--degree", "4", "--link-gbps", "400",
                 "--set", s[0]])  # fmt: skip
    api = topoopt.simulate(SMALL, "ideal", degree=4, link_gbps=400, settings=s)
    assert api.data["iteration_s"] == cli["iteration_s"]
    with pytest.raises(InputError, match="settings"):
        topoopt.load_workload(topoopt.load_workload(SMALL), settings=s)
