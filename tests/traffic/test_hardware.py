"""The hardware catalogue: schema, a source for every figure, one-line errors, user overrides."""

from __future__ import annotations

import pytest

from traffic.errors import InputError
from traffic.hardware import SECTIONS, gpu_spec, load_catalogue

REQUIRED_GPUS = ("a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "gb200", "mi300x")


def test_catalogue_has_the_required_entries():
    c = load_catalogue()
    assert set(REQUIRED_GPUS) <= set(c.gpus)
    assert {n.gbps for n in c.nics.values()} >= {100, 200, 400, 800}
    assert {s.tbps for s in c.switches.values()} >= {51.2, 102.4}
    radices = {s.radix for s in c.switches.values()}
    assert min(radices) == 64 and max(radices) == 512
    assert {s.gbps for s in c.switches.values()} >= {400, 800}
    kinds = {o.kind for o in c.optical.values()}
    assert kinds == {"ocs", "patch-panel"}
    assert {136, 320} <= {o.ports for o in c.optical.values() if o.kind == "ocs"}


def test_every_entry_names_its_sources():
    c = load_catalogue()
    for section in SECTIONS:
        for name, e in getattr(c, section).items():
            assert len(e.source) > 20, (section, name)
            extra = e.efficiency_source if section == "gpus" else e.price_source
            assert len(extra) > 20, (section, name)


def test_datasheet_figures_are_consistent():
    c = load_catalogue()
    # the A100 entries reproduce the roofline's long-standing default exactly
    for n in ("a100-40gb", "a100-80gb"):
        g = c.gpus[n]
        assert g.peak_flops == 312e12 and g.efficiency == 0.5
        assert g.scale_up_bandwidth == 300e9 and g.fp8_tflops is None
    assert c.gpus["a100-80gb"].memory_bandwidth == 2.039e12
    for n in ("h100-sxm", "h200", "b200", "gb200", "mi300x"):
        g = c.gpus[n]
        assert g.fp8_tflops == pytest.approx(2 * g.bf16_tflops, rel=1e-3)
    assert c.gpus["gb200"].scale_up_domain == 72
    # a switch box never has more bandwidth than its ASIC
    for s in c.switches.values():
        assert s.radix * s.gbps <= s.tbps * 1000 + 1e-6


@pytest.mark.parametrize(
    "text, field",
    [
        (
            "gpus: {x1: {label: X, bf16_tflops: 1, hbm_gb: 1, hbm_tb_per_s: 1, "
            "scale_up_gb_per_s: 1, scale_up_domain: 8, efficiency: 0.5, source: abc, "
            "efficiency_source: abc, colour: red}}",
            "gpus.x1.colour",
        ),
        (
            "gpus: {x1: {label: X, bf16_tflops: '989 TFLOPS', hbm_gb: 1, hbm_tb_per_s: 1, "
            "scale_up_gb_per_s: 1, scale_up_domain: 8, efficiency: 0.5, source: abc, "
            "efficiency_source: abc}}",
            "gpus.x1.bf16_tflops",
        ),
        (
            "nics: {n: {label: N, gbps: 400, capex_usd: 1, power_w: 1, source: abc}}",
            "nics.n.price_source",
        ),
        (
            "switches: {s: {label: S, asic: A, tbps: 51.2, radix: 128, gbps: 800, capex_usd: 1, "
            "power_w: 1, source: abc, price_source: abc}}",
            "switches.s",
        ),
        (
            "optical: {o: {label: O, kind: laser, ports: 8, capex_usd: 1, power_w: 1, "
            "reconfig_s: 1, source: abc, price_source: abc}}",
            "optical.o.kind",
        ),
        ("widgets: {}", "widgets"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path, text, field):
    p = tmp_path / "hw.yaml"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        load_catalogue(p)
    msg = str(e.value)
    assert "\n" not in msg and field in msg and str(p) in msg


def test_a_user_file_adds_and_overrides(tmp_path, monkeypatch):
    p = tmp_path / "hw.yaml"
    p.write_text(
        "gpus:\n"
        "  h100-sxm: {label: H100 derated, bf16_tflops: 700, hbm_gb: 80, hbm_tb_per_s: 3.35,"
        " scale_up_gb_per_s: 450, scale_up_domain: 8, efficiency: 0.6, source: my lab,"
        " efficiency_source: my lab}\n"
        "  tpu-x: {label: TPU X, bf16_tflops: 100, hbm_gb: 16, hbm_tb_per_s: 1,"
        " scale_up_gb_per_s: 50, scale_up_domain: 4, efficiency: 0.5, source: my lab,"
        " efficiency_source: my lab}\n"
    )
    c = load_catalogue(p)
    assert c.gpus["h100-sxm"].bf16_tflops == 700 and c.gpus["tpu-x"].scale_up_domain == 4
    assert c.gpus["b200"].bf16_tflops == 2250  # untouched entries stay
    assert load_catalogue().gpus["h100-sxm"].bf16_tflops == 989  # the packaged one is unchanged
    monkeypatch.setenv("TOPOOPT_HARDWARE", str(p))
    assert gpu_spec("tpu-x").label == "TPU X"
    monkeypatch.setenv("TOPOOPT_HARDWARE", str(tmp_path / "missing.yaml"))
    with pytest.raises(InputError, match="TOPOOPT_HARDWARE"):
        load_catalogue()


def test_an_unknown_gpu_lists_the_catalogue():
    with pytest.raises(InputError) as e:
        gpu_spec("h100")
    assert "cluster.gpu" in str(e.value) and "h100-sxm" in str(e.value)


def test_the_default_gpu_is_the_catalogues_a100(tmp_path, monkeypatch):
    """A plan without ``cluster.gpu`` computes on the catalogue's ``a100-80gb``: a user file that
    overrides it applies there as it does to ``--gpu a100-80gb`` (it was read only for plans
    naming a GPU: 312 and 3,120 TFLOP/s for one name in one environment), and a broken file is
    refused there too."""
    from topoopt.flowsim.roofline import A100, workload_gpu
    from traffic.build import workload_from_plan

    plan = {"model": "vgg16", "parallelism": {"dp": 2, "micro_batch_size": 4,
            "global_batch_size": 8}, "cluster": {"servers": 1, "gpus_per_server": 2}}  # fmt: skip
    assert workload_gpu(workload_from_plan(plan)) == A100  # the packaged figures: unchanged
    p = tmp_path / "hw.yaml"
    p.write_text(
        "gpus:\n  a100-80gb: {label: A100 x10, bf16_tflops: 3120, hbm_gb: 80,"
        " hbm_tb_per_s: 2.039, scale_up_gb_per_s: 300, scale_up_domain: 8, efficiency: 0.5,"
        " source: test, efficiency_source: test}\n"
    )
    monkeypatch.setenv("TOPOOPT_HARDWARE", str(p))
    g = workload_gpu(workload_from_plan(plan))
    named = workload_gpu(workload_from_plan({**plan, "cluster": {**plan["cluster"],
                                                                "gpu": "a100-80gb"}}))  # fmt: skip
    assert g.peak_flops == named.peak_flops == 3120e12 and g.efficiency == 0.5
    monkeypatch.setenv("TOPOOPT_HARDWARE", str(tmp_path / "missing.yaml"))
    with pytest.raises(InputError, match="TOPOOPT_HARDWARE"):
        workload_gpu(workload_from_plan(plan))
