"""The plan names its GPU: model FLOPs against the published formulas, the compute model, --gpu."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.roofline import (
    A100,
    throughput_facts,
    workload_gpu,
    workload_scale_up_bandwidth,
)
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.models.megatron import plan_padded_vocab
from traffic.plan import load_plan

SMALL = {
    "model": {"base": "llama3-8b", "layers": 4, "global_batch": 16, "seq_len": 1024},
    "parallelism": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2},
    "cluster": {"servers": 2, "gpus_per_server": 4},
}


def _plan(**cluster):
    return {**SMALL, "cluster": {**SMALL["cluster"], **cluster}}


def test_gpt_flops_are_narayanan_eq3():
    # Narayanan et al. SC'21 eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) with full recomputation,
    # 72 B s l h^2 (1 + s/6h + V/12lh) without (3 passes of the layers and the logits)
    for recompute in ("none", "full"):
        p = load_plan(
            {"model": "gpt3-175b", "parallelism": {"tp": 8, "pp": 16, "dp": 4,
             "recompute": recompute}, "cluster": {"servers": 64, "gpus_per_server": 8}}
        )  # fmt: skip
        w = workload_from_plan(p)
        B, s, l, h, V = 1536, 2048, 96, 12288, plan_padded_vocab(p)
        no_rc = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))
        rc = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
        assert w.info["model_flops_per_iteration"] == pytest.approx(no_rc, rel=1e-12)
        hw = rc if recompute == "full" else no_rc
        assert w.info["hardware_flops_per_iteration"] == pytest.approx(hw, rel=1e-12)


def test_gqa_gated_flops_are_the_palm_count_with_cp():
    # PaLM (Chowdhery et al. 2022, app. B): 6 N D + 12 L (heads*head_dim) s D, N the matrix
    # parameters a token meets; checked on a GQA, gated-MLP model with context parallelism
    p = load_plan(
        {"model": "llama3-70b", "parallelism": {"tp": 8, "pp": 4, "cp": 2, "dp": 2,
         "global_batch_size": 8}, "cluster": {"servers": 16, "gpus_per_server": 8}}
    )  # fmt: skip
    m = p.model
    h, hd, L = m.hidden, m.head_dim, m.layers
    attn = h * (m.heads + 2 * m.kv_heads) * hd + m.heads * hd * h
    mlp = 3 * h * m.ffn
    n = L * (attn + mlp) + h * plan_padded_vocab(p)
    tokens = 8 * m.seq_len
    palm = 6 * n * tokens + 12 * L * m.heads * hd * m.seq_len * tokens
    w = workload_from_plan(p)
    assert w.info["model_flops_per_iteration"] == pytest.approx(palm, rel=1e-12)


def test_a100_reproduces_the_default_exactly():
    base = workload_from_plan(SMALL)
    named = workload_from_plan(_plan(gpu="a100-80gb"))
    assert workload_gpu(base) is A100 and base.info["gpu"] is None
    g = workload_gpu(named)
    assert (g.peak_flops, g.efficiency, g.memory_bandwidth) == (312e12, 0.5, 2.039e12)
    fab = ideal(2, gpus_per_server=4)
    a, b = simulate_iteration(base, fab), simulate_iteration(named, fab)
    assert a.iteration_s == b.iteration_s and a.compute_s == b.compute_s


def test_a_named_gpu_sets_compute_and_scale_up():
    w = workload_from_plan(_plan(gpu="h100-sxm"))
    assert workload_scale_up_bandwidth(w) == 450e9
    assert workload_gpu(w).achieved_flops == pytest.approx(989e12 * 0.43)
    fab = ideal(2, gpus_per_server=4)
    base = simulate_iteration(workload_from_plan(SMALL), fab)
    h = simulate_iteration(w, fab)
    fwd = base.info["forward_s_per_stage"][0] / h.info["forward_s_per_stage"][0]
    assert fwd == pytest.approx(989 * 0.43 / (312 * 0.5), rel=1e-12)
    eff = workload_from_plan(_plan(gpu="h100-sxm", efficiency=0.6))
    assert workload_gpu(eff).efficiency == 0.6
    inline = {"bf16_tflops": 100, "hbm_gb": 16, "hbm_tb_per_s": 1, "scale_up_gb_per_s": 50,
              "scale_up_domain": 4, "efficiency": 0.5}  # fmt: skip
    wi = workload_from_plan(_plan(gpu=inline))
    assert workload_gpu(wi).peak_flops == 100e12 and workload_scale_up_bandwidth(wi) == 50e9


def test_gpu_flag_keeps_the_efficiency_of_the_plans_own_gpu():
    """``--gpu h100-sxm`` on a plan calibrated at ``gpu: h100-sxm, efficiency: 0.523`` (session
    43's calibrated 16,384-GPU verdicts) used to rebuild the cluster without the efficiency, so the
    run was at the catalogue's 0.43; the same GPU now leaves the plan as it is, another GPU
    drops the efficiency (the new GPU's catalogue default applies)."""
    from topoopt.app.studies.advise import scale_plan
    from traffic.load import with_gpu

    plan = load_plan(_plan(gpu="h100-sxm", efficiency=0.523))
    assert with_gpu(plan, "h100-sxm") is plan
    scaled = scale_plan(plan, 16, "h100-sxm")
    assert (scaled.cluster.gpu, scaled.cluster.efficiency, scaled.cluster.servers) == (
        "h100-sxm", 0.523, 4)  # fmt: skip
    assert workload_gpu(workload_from_plan(scaled)).achieved_flops == pytest.approx(989e12 * 0.523)
    other = with_gpu(plan, "h200")
    assert (other.cluster.gpu, other.cluster.efficiency) == ("h200", None)
    assert workload_gpu(workload_from_plan(other)).efficiency == 0.43  # the catalogue's h200


def test_throughput_facts_follow_the_definition():
    w = workload_from_plan(_plan(gpu="b200"))
    f = throughput_facts(w, 2.0)
    per_gpu = w.info["model_flops_per_iteration"] / (2.0 * w.gpus)
    assert f["gpu"] == "b200" and f["tflops_per_gpu"] == pytest.approx(per_gpu / 1e12)
    assert f["mfu"] == pytest.approx(per_gpu / 2250e12)


@pytest.mark.parametrize("gpu", ["h100", 3, {"bf16_tflops": 1}])
def test_a_bad_gpu_is_one_line(gpu):
    with pytest.raises(InputError) as e:
        load_plan(_plan(gpu=gpu))
    assert str(e.value).startswith("cluster.gpu") and "\n" not in str(e.value)


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-m", "topoopt", *args], capture_output=True, text=True, env=env
    )


def test_simulate_gpu_flag(tmp_path):
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(SMALL))
    r = _cli("simulate", str(plan), "--fabric", "ideal", "--degree", "4", "--gpu", "h100-sxm",
             "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["gpu"] == "h100-sxm" and d["gpu_peak_tflops"] == 989 and d["efficiency"] == 0.43
    expect = d["model_flops_per_iteration"] / (d["iteration_s"] * d["gpus"]) / 1e12
    assert d["tflops_per_gpu"] == pytest.approx(expect) and 0 < d["mfu"] < 0.43
    bad = _cli("simulate", str(plan), "--fabric", "ideal", "--gpu", "h100")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--gpu" in bad.stderr


@pytest.mark.parametrize(("gpu", "eff"), [("h100-sxm", 0.43), ("mi300x", 0.3)])
def test_tables_name_the_gpu_nics_and_efficiency(tmp_path, gpu, eff):
    """Issue 24.2: every table and JSON says which GPU, NIC and efficiency it modelled."""
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app

    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(SMALL))
    args = ["--degree", "8", "--link-gbps", "400", "--gpu", gpu]
    r = CliRunner().invoke(app, ["compare", str(plan), "--fabrics", "ideal", *args])
    assert r.exit_code == 0, r.output
    assert f"8 NICs x 400 Gbps per server, {gpu} at efficiency {eff:g}" in r.stdout
    r = CliRunner().invoke(app, ["compare", str(plan), "--fabrics", "ideal", *args, "--json"])
    params = json.loads(r.stdout)["params"]
    assert (params["gpu"], params["efficiency"], params["degree"]) == (gpu, eff, 8)
    assert params["link_bandwidth"] == 400e9 / 8
    r = CliRunner().invoke(app, ["simulate", str(plan), "--fabric", "ideal", *args])
    assert r.exit_code == 0, r.output
    assert f"{gpu} at efficiency {eff:g}" in r.stdout


@pytest.mark.parametrize(
    ("command", "gpu", "link", "said"),
    [
        ("simulate", "b200", None, "400"),  # DGX B200: 8 x ConnectX-7 400 G
        ("simulate", "a100-80gb", None, "200"),  # DGX A100: 8 x ConnectX-6 200 G
        ("simulate", "h100-sxm", "100", None),  # given (even the default): the user's choice
        ("compare", "h100-sxm", None, "400"),
        ("compare", "mi300x", "400", None),
        ("compare", None, None, None),  # no --gpu: the plan's default A100 model, no line
    ],
)
def test_the_reference_servers_nics_are_named_when_link_gbps_is_left(
    tmp_path, command, gpu, link, said
):
    """`--gpu` alone keeps the 100 G ports of `--link-gbps`'s default: one warning line names
    the reference server's NIC speed per GPU (the catalogue's nic_gbps, from the DGX / ND
    datasheets) and the option that models it; none once --link-gbps is given."""
    from typer.testing import CliRunner

    from topoopt.app.cli.app import app
    from traffic.hardware import load_catalogue

    plan = tmp_path / "p.json"
    plan.write_text(json.dumps(SMALL))
    args = [command, str(plan), "--fabric" if command == "simulate" else "--fabrics", "ideal"]
    args += ["--degree", "4", "--json"]
    args += [] if gpu is None else ["--gpu", gpu]
    args += [] if link is None else ["--link-gbps", link]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    lines = [w for w in json.loads(r.stdout)["warnings"] if "--link-gbps" in w]
    if said is None:
        assert lines == []
    else:
        label = load_catalogue().gpus[gpu].label
        assert lines == [
            f"warning: --link-gbps: 100 Gbps a port (the default) is slower than the reference "
            f"{label} server's NICs, {said} Gbps a GPU (docs/validation.md): give --link-gbps "
            f"{said} to model that server, or --link-gbps 100 to keep this"
        ]


def test_every_catalogue_gpu_names_its_reference_nic():
    from traffic.hardware import load_catalogue

    cat = load_catalogue()
    want = {"a100-40gb": 200, "a100-80gb": 200, "h100-sxm": 400, "h200": 400, "b200": 400,
            "gb200": 400, "mi300x": 400}  # fmt: skip
    assert {n: g.nic_gbps for n, g in cat.gpus.items()} == want
    assert all(f"{g.nic_gbps:g} Gb/s" in g.nic_source for g in cat.gpus.values())
