"""Byte sizes with suffixes (issue 28): one parser (:mod:`topoopt.app.cli.byte_sizes`) for every
option that takes a size, exact values against the SI and IEC definitions, bad spellings as one
line naming the option, the value and what is allowed, and the options on the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.cli.byte_sizes import BYTE_UNITS, MAX_BYTES, parse_bytes
from traffic.errors import InputError

runner = CliRunner()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1GiB", 1024**3),
        ("512MiB", 512 * 1024**2),
        ("10GB", 10 * 1000**3),
        ("4000000", 4_000_000),  # a plain integer is bytes
        ("1e9", 1_000_000_000),
        ("1.5KiB", 1536),
        ("2 TB", 2e12),
        (" 3MB ", 3e6),
        ("7B", 7),
        ("1PiB", 2**50),
        ("1kB", 1000),
        ("1KB", 1000),
    ],
)
def test_values(text, expected):
    assert parse_bytes(text, "--size") == expected


def test_every_unit_is_its_power():
    # SI: the k-th prefix of k, M, G, T, P is 10**(3k); IEC: Ki, Mi, ... is 2**(10k)
    expected = {"B": 1, "kB": 10**3}
    for k, prefix in enumerate("KMGTP", start=1):
        expected[f"{prefix}B"] = 10 ** (3 * k)
        expected[f"{prefix}iB"] = 2 ** (10 * k)
    assert BYTE_UNITS == expected
    for unit, factor in expected.items():
        assert parse_bytes(f"3{unit}", "--size") == 3 * factor


def test_plain_unit_of_an_option_named_for_it():
    assert parse_bytes("80", "--gpu-memory-gb", plain_unit=1e9, plain_name="GB") == 80e9
    assert parse_bytes("96GiB", "--gpu-memory-gb", plain_unit=1e9, plain_name="GB") == 96 * 2**30
    assert parse_bytes(None, "--size") is None
    assert parse_bytes("0", "--x", allow_zero=True) == 0


@pytest.mark.parametrize(
    "text",
    ["", "lots", "10Gb", "10G", "1 GiBs", "-5", "-1GiB", "0", "0MiB", "nan", "inf", "1e999",
     "GiB", "1_000", "+5", "1,000", "5 MiB extra", "1.2.3"],
)  # fmt: skip
def test_bad_inputs_are_one_line(text):
    with pytest.raises(InputError) as err:
        parse_bytes(text, "--size")
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"--size: got {text!r}; allowed: ")
    assert "GiB" in msg and "> 0" in msg


@pytest.mark.parametrize("text", ["1e-300", "0.5", "0.0001KB", "1e-10 GiB"])
def test_less_than_one_byte_is_refused(text):
    """A positive size under one byte was taken: ``collective --size 1e-300`` printed a bound of
    1.4e-310 s and a ratio of 1.4e+304 to it."""
    with pytest.raises(InputError, match=rf"^--size: got {text!r}; allowed: at least 1 byte"):
        parse_bytes(text, "--size")
    assert parse_bytes("1", "--size") == 1.0 and parse_bytes("0.001kB", "--size") == 1.0
    assert parse_bytes("1e-9", "--gpu-memory-gb", plain_unit=1e9, plain_name="GB") == 1.0


def test_above_the_largest():
    assert parse_bytes(f"{MAX_BYTES}", "--size") == MAX_BYTES
    with pytest.raises(InputError, match="at most 4,611,686,018,427,387,904 bytes"):
        parse_bytes("5000PiB", "--size")


# ------------------------------------------------------------------ on the command line
COLLECTIVE = ["collective", "--fabric", "expander", "--servers", "8", "--degree", "3"]


def _collective_time(size: str) -> float:
    r = runner.invoke(app, [*COLLECTIVE, "--collective", "all-reduce", "--size", size, "--json"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["inputs"]["options"]["--size"] == size  # echoed as typed
    return doc["time_s"]


def test_collective_size_suffix_is_the_same_bytes():
    assert _collective_time("1GiB") == _collective_time(str(2**30))
    assert _collective_time("10MB") == _collective_time("1e7")


def test_split_allreduce_suffix_is_the_same_bytes():
    def iteration(split: str) -> float:
        r = runner.invoke(
            app,
            ["simulate", "dlrm", "--fabric", "ideal", "--priority", "dp", "--split-allreduce",
             split, "--json"],
        )  # fmt: skip
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["iteration_s"]

    assert iteration("4MiB") == iteration(str(4 * 2**20))


@pytest.mark.parametrize(
    "argv, option",
    [
        ([*COLLECTIVE, "--collective", "all-reduce", "--size", "1Gb"], "--size"),
        ([*COLLECTIVE, "--collective", "all-reduce", "--size", "-1MiB"], "--size"),
        (["simulate", "dlrm", "--fabric", "ideal", "--split-allreduce", "4M"], "--split-allreduce"),
        (["compare", "dlrm", "--fabrics", "ideal", "--split-allreduce", "0"], "--split-allreduce"),
        (["cosearch", "vgg16", "--servers", "8", "--gpu-memory-gb", "lots"], "--gpu-memory-gb"),
    ],
)
def test_bad_sizes_on_the_command_line(argv, option, tmp_path):
    r = runner.invoke(app, argv)
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {option}: got "), r.stderr
    assert "allowed: " in lines[0] and "MiB" in lines[0]
