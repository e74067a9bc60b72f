"""``--gpus`` on every command that reads one plan (and ``gpus=`` of the Python API): the plan on
that many GPUs, as ``advise --gpus`` scales its jobs (servers and ``dp`` re-derived, the global
batch with ``dp``). The scaled plan is the plan file that says so: checked against the same
fields set by hand with ``--set``, to the last byte and digit."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import topoopt
from topoopt.app.cli.app import app
from traffic.errors import InputError
from traffic.load import with_gpus
from traffic.plan import load_plan

runner = CliRunner()
BY_HAND = [  # gpt3-175b on 4,096 GPUs: tp 8 x pp 16 = 128 a replica, 32 replicas of 192
    "--set", "cluster.servers=512", "--set", "parallelism.dp=32",
    "--set", "parallelism.global_batch_size=6144",
]  # fmt: skip


def _json(argv):
    r = runner.invoke(app, [*argv, "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    return json.loads(r.stdout)


def test_traffic_on_more_gpus_is_the_plan_that_says_so():
    scaled = _json(["traffic", "gpt3-175b", "--gpus", "4096"])
    hand = _json(["traffic", "gpt3-175b", *BY_HAND])
    assert scaled["gpus"] == hand["gpus"] == 4096
    for key in ("bytes_by_class", "total_bytes", "intra_server_bytes", "inter_server_bytes",
                "demands"):  # fmt: skip
        assert scaled[key] == hand[key], key
    assert scaled["source"] == "gpt3-175b.yaml on 4,096 GPUs"
    # the plan's own 1,536 sequences on 8 replicas: 192 a replica, x 32 replicas = 6,144
    assert with_gpus(load_plan("gpt3-175b"), 4096).global_batch == 6144


def test_simulate_and_the_api_scale_the_same_plan():
    cli = _json(["simulate", "vgg16-dp", "--gpus", "256", "--fabric", "ideal"])
    api = topoopt.simulate("vgg16-dp", "ideal", gpus=256)
    hand = _json(
        [
            "simulate",
            "vgg16-dp",
            "--fabric",
            "ideal",
            "--set",
            "cluster.servers=32",
            "--set",
            "parallelism.dp=256",
            "--set",
            "parallelism.global_batch_size=4096",
        ]
    )
    assert cli["gpus"] == 256 and cli["servers"] == 32
    assert cli["iteration_s"] == api.iteration_s == hand["iteration_s"]


@pytest.mark.parametrize(
    "command",
    [
        ["simulate", "gpt3-175b", "--fabric", "ideal"],
        ["compare", "gpt3-175b", "--fabrics", "ideal"],
        ["design", "gpt3-175b", "--solver", "topoopt"],
        ["export", "gpt3-175b", "--format", "chakra", "--out", "never"],
        ["traffic", "gpt3-175b"],
        ["reconfig", "gpt3-175b"],
        ["advise", "gpt3-175b"],
    ],
)
def test_a_count_the_plan_cannot_take_is_one_line(command, tmp_path):
    # an output path inside tmp_path (export's --out): nothing may be left there
    argv = [str(tmp_path / "never") if a == "never" else a for a in command]
    r = runner.invoke(app, [*argv, "--gpus", "1000"])
    assert r.exit_code == 2
    assert r.stderr.strip() == (
        "error: --gpus: got 1000; allowed: a multiple of the model-parallel size 128"
    )
    assert list(tmp_path.iterdir()) == []


def test_gpus_is_refused_where_there_is_no_plan():
    with pytest.raises(InputError, match="--gpus: got 8; allowed: a plan"):
        topoopt.load_workload("tests/data/topoopt-taskgraphs/100candle_16.fbuf", gpus=8)
    with pytest.raises(InputError, match="gpus: got 8; allowed: a plan name"):
        topoopt.load_workload(topoopt.load_workload("vgg16-dp"), gpus=8)
