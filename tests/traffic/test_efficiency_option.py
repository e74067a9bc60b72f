"""``--efficiency`` (and ``efficiency=`` of the Python API): the kernel efficiency of the compute
model without editing a plan file. It is the plan's ``cluster.efficiency``, applied after
``--gpu``: the same iteration to the last digit as the plan file that sets it, and the compute
of a one-GPU plan is the closed form ``m * 4 * F / (peak * E) + optimizer`` at every ``E``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.fabrics import ideal
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.roofline import optimizer_time, workload_gpu
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.load import with_efficiency, with_gpu
from traffic.plan import load_plan

SMALL = {
    "model": {"base": "llama3-8b", "layers": 4, "global_batch": 16, "seq_len": 1024},
    "parallelism": {"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 2},
    "cluster": {"servers": 2, "gpus_per_server": 4},
}
ONE_GPU = {
    "model": {"base": "gpt3-175b", "layers": 4, "hidden": 256, "heads": 4, "seq_len": 128,
              "global_batch": 8},
    "parallelism": {"micro_batch_size": 2, "recompute": "full"},
    "cluster": {"servers": 1, "gpus_per_server": 1},
}  # fmt: skip


def _file(tmp_path, name, plan):
    f = tmp_path / name
    f.write_text(json.dumps(plan))
    return str(f)


def _json(args):
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize(
    ("gpu", "eff"),
    [("h100-sxm", 0.523), (None, 0.6)],  # None: the default A100 model
)
def test_the_option_is_the_plans_cluster_efficiency(tmp_path, gpu, eff):
    """simulate and compare with ``[--gpu G] --efficiency E`` give the iteration of the plan
    file with ``cluster: {gpu: G, efficiency: E}`` to the last digit, and another one than
    without the option (the GPU's default efficiency)."""
    hw = {} if gpu is None else {"gpu": gpu}
    plain = _file(tmp_path, "plain.json", {**SMALL, "cluster": {**SMALL["cluster"], **hw}})
    cal = {**SMALL, "cluster": {**SMALL["cluster"], **hw, "efficiency": eff}}
    calibrated = _file(tmp_path, "calibrated.json", cal)
    opt = [*([] if gpu is None else ["--gpu", gpu]), "--efficiency", str(eff)]
    common = ["--degree", "4", "--link-gbps", "400"]
    sim = ["simulate", "--fabric", "ideal", *common]
    a = _json([sim[0], plain, *sim[1:], *opt])
    b = _json([sim[0], calibrated, *sim[1:]])
    c = _json([sim[0], plain, *sim[1:]])
    assert (a["iteration_s"], a["compute_s"]) == (b["iteration_s"], b["compute_s"])
    assert (a["gpu"], a["efficiency"]) == (gpu or "a100-80gb", eff)
    assert c["compute_s"] > a["compute_s"] and c["efficiency"] == (0.43 if gpu else 0.5)
    cmp = ["compare", plain, "--fabrics", "ideal", *common, *opt]
    rows, params = (d := _json(cmp))["rows"], d["params"]
    assert rows[0]["iteration_s"] == b["iteration_s"]
    assert (params["gpu"], params["efficiency"]) == (gpu or "a100-80gb", eff)


def test_design_records_the_option_and_runs_at_it(tmp_path):
    plain = _file(tmp_path, "plain.json", SMALL)
    cal = _file(tmp_path, "cal.json", {**SMALL, "cluster": {**SMALL["cluster"],
                                                            "efficiency": 0.4}})  # fmt: skip
    args = ["--fabric", "rail-only", "--degree", "4", "--link-gbps", "400"]
    a = _json(["design", plain, *args, "--efficiency", "0.4"])
    b = _json(["design", cal, *args])
    assert a["iteration_s"] == b["iteration_s"] and a["efficiency"] == 0.4
    assert a["params"]["efficiency"] == 0.4 and b["params"]["efficiency"] is None


@pytest.mark.parametrize("gpu", [None, "h100-sxm"])
def test_compute_scales_as_one_over_efficiency(gpu):
    """One GPU, no communication, full recomputation: every micro-batch runs 4 forward
    equivalents of ``F`` FLOPs at ``peak * E``, then the memory-bound optimizer step
    (independent of ``E``)."""
    fab = ideal(1, gpus_per_server=1)
    base = with_gpu(load_plan(ONE_GPU), gpu)
    for eff in (0.25, 0.523, 1.0):
        w = workload_from_plan(with_efficiency(base, eff))
        g = workload_gpu(w)
        assert g.efficiency == eff and g.peak_flops == (312e12 if gpu is None else 989e12)
        (f,) = w.info["forward_flops_per_microbatch_per_gpu"]
        (p,) = w.info["parameters_per_gpu_per_stage"]
        m = w.info["micro_batches"]
        want = m * 4 * f / (g.peak_flops * eff) + optimizer_time(p, g)
        assert simulate_iteration(w, fab).compute_s == pytest.approx(want, rel=1e-12)


def test_after_gpu_and_in_the_api():
    """``with_gpu`` drops the efficiency of a plan whose GPU it replaces; the efficiency given
    with it applies to the new GPU. The API's ``efficiency=`` is the same, dict plans included."""
    import topoopt

    cal = load_plan({**SMALL, "cluster": {**SMALL["cluster"], "gpu": "h100-sxm",
                                          "efficiency": 0.523}})  # fmt: skip
    assert with_efficiency(with_gpu(cal, "h200"), 0.6).cluster.gpu_spec.efficiency == 0.6
    assert with_efficiency(cal, None) is cal
    w = topoopt.load_workload(SMALL, gpu="h200", efficiency=0.6)
    assert workload_gpu(w).efficiency == 0.6 and w.info["gpu"]["name"] == "h200"
    same = topoopt.load_workload({**SMALL, "cluster": cal.cluster.model_dump()}, gpu="h100-sxm")
    assert workload_gpu(same).efficiency == 0.523  # its own GPU keeps its calibration
    a = topoopt.simulate(SMALL, degree=4, link_gbps=400, efficiency=0.4)
    b = topoopt.simulate({**SMALL, "cluster": {**SMALL["cluster"], "efficiency": 0.4}},
                         degree=4, link_gbps=400)  # fmt: skip
    assert a.iteration_s == b.iteration_s and a["efficiency"] == 0.4
    with pytest.raises(InputError, match="efficiency: got 0; allowed: a fraction"):
        topoopt.load_workload(SMALL, efficiency=0)


@pytest.mark.parametrize(
    "value", [0, -0.5, 1.0001, float("nan"), float("inf"), True, "0.5", 1e-300, 0.000999]
)
def test_a_bad_efficiency_is_refused(value):
    with pytest.raises(InputError) as e:
        with_efficiency(load_plan(SMALL), value)
    assert str(e.value).startswith("--efficiency: got ") and "[0.001, 1]" in str(e.value)


def test_the_smallest_efficiency_is_a_tenth_of_a_percent():
    """1e-300 once ran: a 4.76e+297 s iteration, an overflow in the links' utilisation, 300-digit
    table rows. The floor holds in the plan, an inline GPU and the roofline's parameters alike."""
    low = with_efficiency(load_plan(SMALL), 0.001)
    assert low.cluster.efficiency == 0.001
    for cluster in ({"efficiency": 1e-9}, {"gpu": {**_inline_gpu(), "efficiency": 1e-9}}):
        with pytest.raises(InputError, match="efficiency: got 1e-09"):
            load_plan({**SMALL, "cluster": {**SMALL["cluster"], **cluster}})
    from topoopt.flowsim.roofline import RooflineParams

    with pytest.raises(InputError, match=r"gpu.efficiency: got 0.0005; allowed: a fraction in"):
        RooflineParams(efficiency=0.0005)


def _inline_gpu() -> dict:
    """An inline GPU of the catalogue's fields (h100-sxm's figures)."""
    from traffic.hardware import load_catalogue

    spec = load_catalogue().gpus["h100-sxm"].model_dump(exclude_none=True)
    return {k: v for k, v in spec.items() if k not in ("source", "efficiency_source", "nic_source")}


def test_advise_applies_it_to_every_job(tmp_path):
    """A jobs file's plans each run at the efficiency, after ``--gpu`` (advise's scale_plan)."""
    from topoopt.app.studies.advise import load_jobs, scale_plan

    other = {**SMALL, "cluster": {**SMALL["cluster"], "gpu": "h200", "efficiency": 0.3}}
    jobs = tmp_path / "jobs.yaml"
    a, b = _file(tmp_path, "a.json", SMALL), _file(tmp_path, "b.json", other)
    jobs.write_text(json.dumps([{"plan": a, "weight": 1}, {"plan": b, "weight": 2}]))
    for gpu, want in ((None, [None, "h200"]), ("h100-sxm", ["h100-sxm"] * 2)):
        scaled = [scale_plan(j.plan, 16, gpu, 0.523) for j in load_jobs(str(jobs))]
        assert [p.cluster.gpu for p in scaled] == want
        assert [workload_gpu(workload_from_plan(p)).efficiency for p in scaled] == [0.523] * 2


def test_cosearch_runs_every_plan_at_it():
    """``compute_s = c / E + optimizer``: the best plan's compute at 0.25 and 0.5 lies 3 c and c
    above the one at 1 (vgg16 on 2 x 4 GPUs, two evaluations, the ideal switch)."""
    args = ["cosearch", "vgg16", "--servers", "2", "--gpus-per-server", "4", "--degree", "4"]
    args += ["--max-evaluations", "2", "--fabric", "ideal", "--pareto-fabrics", "ideal"]
    runs = {e: _json([*args, "--efficiency", str(e)]) for e in (0.25, 0.5, 1.0)}
    assert len({json.dumps(d["best"]["plan"]) for d in runs.values()}) == 1
    t = {e: d["best"]["compute_s"] for e, d in runs.items()}
    assert t[0.25] - t[1.0] == pytest.approx(3 * (t[0.5] - t[1.0]), rel=1e-9)
    assert t[0.5] > t[1.0] and runs[0.5]["inputs"]["options"]["--efficiency"] == 0.5
