"""Numbers in YAML inputs as users write them: ``1e-3`` and ``1.5e3`` are numbers (YAML 1.1 read
them as text, and a strict schema then refused ``time_s: 1e-3`` as "not a valid number"), and a
hardware quantity printed with an exponent is scaled exactly (it was a ``ValueError``)."""

from __future__ import annotations

import pytest

from solvers.cluster.jobs import load_arrivals
from traffic.errors import InputError
from traffic.hardware.catalogue import load_catalogue
from traffic.strict_yaml import compose_yaml

SEEDS = __import__("pathlib").Path(__file__).parent / "fuzz" / "seeds"


@pytest.mark.parametrize(
    "text, value",
    [
        ("1e-3", 0.001), ("1.5e3", 1500.0), ("-2E+5", -200000.0), (".5e2", 50.0),
        ("1_000e2", 100000.0), ("1.0e+3", 1000.0), ("12", 12), ("1.0", 1.0),
        ('"1e3"', "1e3"), ("1e", "1e"), ("e3", "e3"), ("1e3x", "1e3x"),
    ],
)  # fmt: skip
def test_exponent_numbers_read_as_yaml_1_2_does(text, value):
    got = compose_yaml(f"a: {text}\n", "t.yaml")["a"]
    assert got == value and type(got) is type(value)


def test_an_arrival_time_in_exponent_form_is_a_time(tmp_path):
    path = tmp_path / "arrivals.yaml"
    path.write_text("events:\n  - {time_s: 2.5e-3, depart: vision}\n")
    (event,) = load_arrivals(path)
    assert event.time_s == 0.0025


def test_hardware_quantities_in_exponent_form(tmp_path):
    seed = (SEEDS / "hardware.yaml").read_text()
    path = tmp_path / "hw.yaml"
    path.write_text(seed.replace("hbm_tb_per_s: 3.2", "hbm_tb_per_s: 3.2e0"))
    gpu = load_catalogue(path).gpus["fuzz-gpu"]
    assert gpu.memory_bandwidth == 3.2e12
    for tiny in ("1e-300", "0.00001"):  # 0.00001 printed as '1e-05': '1e-05e12' was a ValueError
        path.write_text(seed.replace("bf16_tflops: 400", f"bf16_tflops: {tiny}"))
        with pytest.raises(InputError, match=r"bf16_tflops: got (1e-05|1e-300); allowed: .*0\.001"):
            load_catalogue(path)
