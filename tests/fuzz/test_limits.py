"""The limits behind the fuzz suite, one by one: decoding faults name the file, alias bombs are
refused without being expanded, error values are previews, sizes beyond the memory budget are
refused with the estimate and the limit, and non-finite results are errors naming the input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fuzz_kinds import COMMAND, RUNNER, SEEDS
from fuzz_mutations import bomb_text

from traffic.decode import decode_text, load_document, parse_json, parse_yaml
from traffic.errors import InputError, check_finite, preview
from traffic.limits import MAX_YAML_NODES, check_memory
from traffic.plan import load_plan


def one_line(args: list[str]) -> str:
    r = RUNNER.invoke(COMMAND, args)
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_decoding_faults_name_the_file(tmp_path):
    cases = {
        "a.json": (b'{"a": 1, "a": 2}', "duplicate key"),
        "b.json": (b"[NaN]", "NaN"),
        "c.json": (b"[9223372036854775808]", "int64"),
        "d.json": (b"[" * 33 + b"]" * 33, "nesting depth 33"),
        "e.json": (b'[1, "\xff"]', "byte 0xff at offset 5"),
        "f.yaml": (b"a: 1\x00", "binary data"),
        "g.yaml": (b"a: 1\na: 2\n", "duplicate key"),
        "h.yaml": (b"a: 2020-01-01\n", "plain values"),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError) as exc:
            load_document(path, "test file")
        assert exc.value.field.startswith(str(path)) and words in str(exc.value), str(exc.value)


def test_alias_bomb_is_refused_while_composing():
    """Nine nested anchors: 10^9 values in ~500 bytes; refused after composing ~100 nodes."""
    text = f"options: {{expert_load: {bomb_text(9)}}}\n"
    assert len(text) < 600
    with pytest.raises(InputError, match="alias") as exc:
        parse_yaml(text, "plan.yaml")
    assert f"{MAX_YAML_NODES:,}" in str(exc.value)
    # legitimate aliases stay legal
    assert parse_yaml("a: &x [1, 2]\nb: *x\n", "p.yaml") == {"a": [1, 2], "b": [1, 2]}


def test_alias_bomb_in_a_plan_through_the_cli(tmp_path):
    plan = (SEEDS / "plan.yaml").read_text() + f"extra: {bomb_text(9)}\n"
    path = tmp_path / "bomb.yaml"
    path.write_text(plan)
    line = one_line(["traffic", str(path), "--json"])
    assert "alias" in line and path.name in line


def test_preview_never_materialises_the_value():
    x: list = [0]
    for _ in range(300):  # 2**300 leaves if expanded
        x = [x, x]
    shown = preview(x)
    assert len(shown) <= 120 and shown.endswith("...")
    err = InputError("field", x, "small")
    assert len(str(err)) < 200
    assert preview(10**10000) == "an integer of 33220 bits"
    assert preview("x" * 10**6).startswith("'xxx") and len(preview("x" * 10**6)) == 120


def test_bad_utf8_and_bom():
    assert decode_text(b"\xef\xbb\xbfa: 1", "p.yaml") == "a: 1"
    with pytest.raises(InputError, match="p.yaml: got 'byte 0xc3 at offset 3'"):
        decode_text(b"a: \xc3(", "p.yaml")


@pytest.mark.parametrize(
    "edit,field",
    [
        ("cluster: {servers: 1000000000, gpus_per_server: 8}", "cluster"),
        ("cluster: {servers: 100000000, gpus_per_server: 2}", "cluster.servers"),
        ("layers: 1000000000000", "model.layers"),
    ],
)
def test_sizes_beyond_the_budget_are_refused_up_front(tmp_path, edit, field):
    text = (SEEDS / "plan.yaml").read_text()
    if edit.startswith("cluster"):
        text = text.replace("cluster: {servers: 8, gpus_per_server: 2}", edit)
    else:
        text = text.replace("layers: 8", edit)
    path = tmp_path / "big.yaml"
    path.write_text(text)
    line = one_line(["traffic", str(path), "--json"])
    assert line.startswith(f"error: {field}: got "), line
    assert "allowed: at most" in line


def test_memory_budget_is_configurable(monkeypatch):
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "0.5")
    with pytest.raises(InputError, match=r"about 1 GB of arrays.*at most 0.5 GB"):
        check_memory("servers", 1e9, "10^9 bytes")
    plan = load_plan(SEEDS / "plan.yaml")
    assert plan.gpus == 16
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "1e-9")
    with pytest.raises(InputError, match="cluster.servers"):
        load_plan(SEEDS / "plan.yaml")
    monkeypatch.setenv("TOPOOPT_MEMORY_BUDGET_GB", "lots")
    with pytest.raises(InputError, match="TOPOOPT_MEMORY_BUDGET_GB"):
        check_memory("servers", 1.0, "1 byte")


def test_fabric_sizes_beyond_the_budget():
    line = one_line(["fabric", "ideal", "--servers", "1000000000", "--json"])
    assert "servers" in line and "GB of arrays" in line
    line = one_line(["fabric", "fat-tree", "--k", "2000", "--json"])
    assert line.startswith("error: k: got ")


def test_non_finite_result_is_an_error_naming_the_input(tmp_path):
    doc = json.loads((SEEDS / "flows.json").read_text())
    doc["links"][0]["capacity"] = 1e-300  # finite input, infinite finish time
    doc["flows"][0]["bytes"] = 1e300
    path = tmp_path / "flows.json"
    path.write_text(json.dumps(doc))
    line = one_line(["netsim", str(path), "--json"])
    assert line.startswith(f"error: {path}: got 'result.flows[0].finish = ")
    with pytest.raises(InputError, match="result.a"):
        check_finite({"a": float("nan")}, "x")


def test_designs_are_strict_json(tmp_path):
    """A design.json with a bare Infinity is refused; the seed (written by `topoopt design`)
    parses as strict JSON."""
    text = (SEEDS / "design.json").read_text()
    parse_json(text, "design.json")
    bad = json.loads(text)
    bad["gap"] = "@@"
    path = tmp_path / "d.json"
    path.write_text(json.dumps(bad).replace('"@@"', "Infinity"))
    line = one_line(["simulate", str(SEEDS / "plan.json"), "--design", str(path), "--json"])
    assert "Infinity" in line and str(path) in line


def test_circuits_file_that_is_not_circuits(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("model: vgg16\n")
    line = one_line(
        ["fabric", "direct", "--servers", "8", "--degree", "4", "--circuits", str(path)]
    )
    assert str(path) in line
    path.write_text("u v count\n")
    line = one_line(
        ["fabric", "direct", "--servers", "8", "--degree", "4", "--circuits", str(path)]
    )
    assert "no circuit" in line


def test_a_new_kind_uses_the_same_layer(tmp_path):
    """The mechanism for future kinds (a jobs file): load_document + validate + InputError."""
    from pydantic import BaseModel, ConfigDict

    from traffic.decode import validate

    class Job(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        plan: str
        gpus: int

    path = Path(tmp_path / "jobs.yaml")
    path.write_text("plan: dlrm\ngpus: '8'\n")
    with pytest.raises(InputError) as exc:
        validate(Job, load_document(path, "jobs file"), str(path))
    assert exc.value.field == f"{path} gpus" and exc.value.value == "8"
