"""The netsim JSON interface and the ``topoopt netsim`` command: results and one-line errors."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.flowsim.netsim_json import load_netsim, parse_netsim, run_netsim
from traffic.errors import InputError

GOOD = {
    "links": [
        {"id": "a", "capacity": 100.0},
        {"id": 7, "capacity": 100.0, "latency": 0.001},
    ],
    "flows": [
        {"id": 1, "bytes": 100, "paths": [{"links": ["a", 7]}]},
        {
            "id": "x",
            "bytes": 300,
            "start": 0.5,
            "paths": [{"links": ["a"], "weight": 0.5}, {"links": [7], "weight": 0.5}],
        },
        {"id": "y", "bytes": 0, "after": [1, "x"], "paths": [{"links": [7]}]},
    ],
}
# By hand: flow 1 alone at 100 B/s until 0.5 s (50 B); then on each link it shares 50/50 with
# one half of x: its last 50 B take 1 s -> 1.5 s + 1 ms latency (link 7). Each half of x has
# 150 B: 50 B by 1.5 s, then 100 B alone at 100 B/s -> 2.5 s (+1 ms on link 7). y (0 B, after
# both) starts at 2.501 and ends 1 ms later.
EXPECTED = {
    "flows": [
        {"id": 1, "start": 0.0, "finish": 1.501},
        {"id": "x", "start": 0.5, "finish": 2.501},
        {"id": "y", "start": 2.501, "finish": 2.502},
    ],
    "makespan": 2.502,
}


def test_good_document():
    out = run_netsim(GOOD)
    assert [f["id"] for f in out["flows"]] == [1, "x", "y"]
    for got, want in zip(out["flows"], EXPECTED["flows"], strict=True):
        assert got["start"] == pytest.approx(want["start"], rel=1e-14)
        assert got["finish"] == pytest.approx(want["finish"], rel=1e-14)
    assert out["makespan"] == pytest.approx(2.502, rel=1e-14)


def test_default_weights_split_equally():
    doc = {
        "links": [{"id": 0, "capacity": 10.0}, {"id": 1, "capacity": 30.0}],
        "flows": [{"id": 0, "bytes": 60, "paths": [{"links": [0]}, {"links": [1]}]}],
    }
    # 30 B on each: 3 s on link 0, 1 s on link 1.
    assert run_netsim(doc)["flows"][0]["finish"] == pytest.approx(3.0)
    assert parse_netsim(doc).flows.weight.tolist() == [0.5, 0.5]


def mutate(path, value):
    doc = copy.deepcopy(GOOD)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


BAD = [
    (mutate(["flows", 0, "paths", 0, "links", 1], "zz"), "flows[0].paths[0].links[1]", "'zz'"),
    (mutate(["flows", 0, "paths", 0, "links"], []), "flows[0].paths[0].links", "non-empty"),
    (mutate(["flows", 0, "paths"], []), "flows[0].paths", "non-empty list of paths"),
    (mutate(["flows", 1, "bytes"], -5), "flows[1].bytes", "got -5"),
    (mutate(["flows", 1, "paths", 1, "weight"], 0.4), "flows[1].paths.weight", "summing to 1"),
    (mutate(["flows", 1, "paths", 1, "weight"], KeyError), "flows[1].paths[1].weight", "none"),
    (mutate(["flows", 1, "paths", 0, "weight"], 0), "flows[1].paths[0].weight", "(0, 1]"),
    (mutate(["flows", 1, "after"], ["y"]), "after", "acyclic"),
    (mutate(["flows", 0, "after"], [1]), "flows[0].after", "other flows than itself"),
    (mutate(["flows", 2, "after"], ["nope"]), "flows[2].after[0]", "a flow id"),
    (mutate(["flows", 2, "id"], "x"), "flows[2].id", "not used by another flow"),
    (mutate(["flows", 2, "id"], True), "flows[2].id", "a string or an integer"),
    (mutate(["links", 1, "id"], "a"), "links[1].id", "not used by another link"),
    (mutate(["links", 0, "capacity"], 0), "links[0].capacity", "positive"),
    (mutate(["links", 0, "capacity"], "fast"), "links[0].capacity", "positive"),
    (mutate(["links", 0, "latency"], -1), "links[0].latency", ">= 0"),
    (mutate(["flows", 0, "start"], -1.0), "flows[0].start", ">= 0"),
    (mutate(["flows", 0, "paths", 0, "links"], ["a", "a"]), "links", "at most once"),
    (mutate(["flows", 0, "speed"], 3), "flows[0]", "only the keys"),
    (mutate(["flows"], KeyError), "flows", "a list"),
    ([1, 2], "netsim", "an object"),
]


@pytest.mark.parametrize(("doc", "field", "words"), BAD)
def test_bad_input_names_field_value_and_allowed(doc, field, words):
    with pytest.raises(InputError) as info:
        parse_netsim(doc)
    msg = str(info.value)
    assert field in info.value.field
    assert words in msg
    assert "\n" not in msg and "allowed:" in msg


def test_cycle_message_lists_ids():
    doc = mutate(["flows", 1, "after"], ["y"])
    with pytest.raises(InputError) as info:
        parse_netsim(doc)
    assert set(info.value.value) >= {"x", "y"}


def test_load_netsim_bad_json(tmp_path):
    p = tmp_path / "f.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="invalid JSON"):
        load_netsim(p)


runner = CliRunner()


def write(tmp_path, doc, name="flows.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_cli_json(tmp_path):
    r = runner.invoke(app, ["netsim", str(write(tmp_path, GOOD)), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["makespan"] == pytest.approx(2.502)
    assert [f["id"] for f in out["flows"]] == [1, "x", "y"]


def test_cli_table_and_out_file(tmp_path):
    target = tmp_path / "result.json"
    r = runner.invoke(app, ["netsim", str(write(tmp_path, GOOD)), "--out", str(target)])
    assert r.exit_code == 0, r.output
    assert "makespan: 2502 ms" in r.stdout
    assert json.loads(target.read_text())["makespan"] == pytest.approx(2.502)
    again = runner.invoke(app, ["netsim", str(write(tmp_path, GOOD)), "--out", str(target)])
    assert again.exit_code == 2
    assert "--force" in again.stderr


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    bad = write(tmp_path, BAD[0][0])
    r = runner.invoke(app, ["netsim", str(bad), "--json"])
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: flows[0].paths[0].links[1]")
    missing = runner.invoke(app, ["netsim", str(tmp_path / "absent.json")])
    assert missing.exit_code == 2
