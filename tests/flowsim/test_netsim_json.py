"""The netsim JSON interface and the ``topoopt netsim`` command: results and one-line errors."""

from __future__ import annotations

import copy
import json

import numpy as np
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
    (mutate(["flows", 0, "speed"], 3), "flows[0].speed", "no such field; known fields: id,"),
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


def rename_key(doc, path, new):
    """``doc`` with the key at ``path`` renamed to ``new``, in place (the key order kept)."""
    target = doc
    for part in path[:-1]:
        target = target[part]
    items = list(target.items())
    target.clear()
    target.update((new if k == path[-1] else k, v) for k, v in items)
    return doc


def renamed(path, new):
    """``GOOD`` with the key at ``path`` renamed to ``new`` (in place: the key order kept)."""
    return rename_key(copy.deepcopy(GOOD), path, new)


TYPOS = [
    (["flows", 0, "bytes"], "bytse", "flows[0].bytse", "id, bytes, start, after, paths"),
    (["links", 1, "capacity"], "capacty", "links[1].capacty", "id, capacity, latency"),
    (["flows", 1, "paths", 0, "links"], "link", "flows[1].paths[0].link", "links, weight"),
    (["flows", 2, "id"], "ID", "flows[2].ID", "id, bytes, start, after, paths"),
    (["flows"], "flow", "flow", "links, flows"),
]


@pytest.mark.parametrize(("path", "typo", "field", "known"), TYPOS)
def test_a_misspelled_key_is_named_not_the_key_it_misses(path, typo, field, known):
    """The renamed key is unknown and its old name missing: the unknown one is reported (it was
    ``flows[0].bytes: got None``), by the fast path (which gives up) and the checked one."""
    from topoopt.flowsim.netsim_json import _fast_case

    doc = renamed(path, typo)
    assert _fast_case(doc) is None
    with pytest.raises(InputError) as info:
        parse_netsim(doc)
    allowed = f"no such field; known fields: {known}"
    assert str(info.value) == f"{field}: got {typo!r}; allowed: {allowed}"


def test_a_misspelled_key_is_refused_before_any_kernel(tmp_path, monkeypatch):
    """The line of ``topoopt netsim`` on a misspelled key comes before any kernel is called, so
    it is the same with the compiled kernels and with numba's JIT ones (``TOPOOPT_AOT=0``):
    every kernel name the flow model's modules hold raises here."""
    import topoopt.flowsim.flowset as flowset
    import topoopt.flowsim.simulator as simulator
    from topoopt.flowsim import aot

    def no_kernel(*args):
        raise AssertionError("a kernel was called")

    for module in (flowset, simulator, aot):
        for name in aot.AOT_KERNELS:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, no_kernel)
    path = write(tmp_path, renamed(["flows", 0, "bytes"], "bytse"))
    r = runner.invoke(app, ["netsim", str(path), "--json"])
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == (
        "error: flows[0].bytse: got 'bytse'; allowed: no such field; known fields: id, bytes, "
        "start, after, paths\n"
    )


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


# ---- the fast path (columns) against the checked path (pydantic, flow by flow)
FIELDS = ("capacity", "latency", "size", "start", "flow_ptr", "path_ptr", "path_links", "weight",
          "dep_ptr", "deps", "multiplicity")  # fmt: skip


def checked(doc, monkeypatch):
    """``parse_netsim`` with the fast path off: the case, or the error's text."""
    import topoopt.flowsim.netsim_json as nj

    with monkeypatch.context() as m:
        m.setattr(nj, "_fast_case", lambda doc: None)
        try:
            return nj.parse_netsim(doc)
        except InputError as exc:
            return str(exc)


def same_case(a, b) -> bool:
    return (
        a.flow_ids == b.flow_ids
        and a.link_ids == b.link_ids
        and all(
            getattr(a.flows, k).dtype == getattr(b.flows, k).dtype
            and getattr(a.flows, k).tobytes() == getattr(b.flows, k).tobytes()  # -0.0 too
            for k in FIELDS
        )
    )


def random_doc(rng) -> dict:
    """A valid document: ids ints or strings, optional fields given, absent or null, numbers
    ints or floats (some -0.0), weights on every path of a flow or on none, dependencies."""
    n_l, n_f = int(rng.integers(1, 6)), int(rng.integers(1, 8))
    lid = [int(i) * 3 - 4 if rng.random() < 0.5 else f"l{i}" for i in range(n_l)]
    links = []
    for i in range(n_l):
        link = {"id": lid[i], "capacity": [100, 2.5e9, 1e10][i % 3]}
        pick = rng.integers(0, 4)
        if pick:
            link["latency"] = [None, 0, -0.0, 1e-6][pick]
        links.append(link)
    flows = []
    for f in range(n_f):
        flow = {"id": f if rng.random() < 0.5 else f"f{f}", "bytes": [0, 5, 1e6, 2.5][f % 4]}
        if rng.random() < 0.6:
            flow["start"] = [None, 0, -0.0, 0.25][int(rng.integers(0, 4))]
        if f and rng.random() < 0.5:
            flow["after"] = [flows[int(j)]["id"] for j in rng.choice(f, 1)]
        k = int(rng.integers(1, 4))
        weights = rng.dirichlet(np.ones(k)).tolist() if rng.random() < 0.5 else None
        flow["paths"] = []
        for j in range(k):
            hops = rng.choice(n_l, int(rng.integers(1, n_l + 1)), replace=False)
            path = {"links": [lid[h] for h in hops]}
            if weights is not None:
                path["weight"] = 1 if k == 1 else weights[j]
            flow["paths"].append(path)
        flows.append(flow)
    return {"links": links, "flows": flows}


def test_fast_path_equals_the_checked_path_on_valid_documents(monkeypatch):
    from topoopt.flowsim.netsim_json import _fast_case

    rng = np.random.default_rng(3)
    for _ in range(60):
        doc = random_doc(rng)
        fast = _fast_case(doc)
        slow = checked(doc, monkeypatch)
        assert not isinstance(slow, str), slow
        if fast is None:  # rounding: weights that do not sum to 1 within 1e-9 never occur
            raise AssertionError(f"the fast path gave up on a valid document: {doc}")
        assert same_case(fast, slow)
    big = json.loads(json.dumps(random_doc(np.random.default_rng(9))))  # via JSON text
    assert same_case(_fast_case(big), checked(big, monkeypatch))


def mutations(doc, rng):
    """Documents one change away from ``doc`` (most of them bad)."""
    bad_values = [None, True, "1", -1, 0, 2, 1.5, float("nan"), float("inf"), 10**30, [], {},
                  (1,), np.float64(1.0), "x" * 201, 2**63, -0.0]  # fmt: skip
    flows, links = doc["flows"], doc["links"]
    spots = [("links", i, k) for i in range(len(links)) for k in ("id", "capacity", "latency")]
    spots += [("flows", f, k) for f in range(len(flows)) for k in ("id", "bytes", "start", "after")]
    spots += [("flows", f, "paths", j, k) for f in range(len(flows))
              for j in range(len(flows[f]["paths"])) for k in ("links", "weight")]  # fmt: skip
    for _ in range(12):
        spot = spots[int(rng.integers(len(spots)))]
        out = copy.deepcopy(doc)
        target = out
        for key in spot[:-1]:
            target = target[key]
        how = int(rng.integers(5))
        if how == 0:
            target.pop(spot[-1], None)
        elif how == 4 and spot[-1] in target:  # a misspelled key: reported as unknown
            value = target.pop(spot[-1])
            target[spot[-1][::-1] + "_"] = value
        elif how == 1:
            target["extra"] = 1
        elif how == 2 and isinstance(target.get(spot[-1]), list) and target[spot[-1]]:
            target[spot[-1]] = target[spot[-1]] + [target[spot[-1]][0]]  # a repeated id
        else:
            target[spot[-1]] = bad_values[int(rng.integers(len(bad_values)))]
        yield out
    yield {"links": links, "flows": flows, "more": []}
    yield {"links": tuple(links), "flows": flows}
    yield {"links": links, "flows": flows + [flows[0]]}  # a repeated flow id


def test_fast_path_changes_no_outcome_of_a_bad_document(monkeypatch):
    """One change to a valid document: ``parse_netsim`` gives what the checked path gives (the
    same case, or the same one-line error), and the fast path accepted nothing it refuses."""
    from topoopt.flowsim.netsim_json import _fast_case

    rng = np.random.default_rng(11)
    errors = 0
    for _ in range(25):
        for doc in mutations(random_doc(rng), rng):
            slow = checked(doc, monkeypatch)
            try:
                got = parse_netsim(doc)
            except InputError as exc:
                got = str(exc)
            if isinstance(slow, str):
                errors += 1
                assert got == slow and _fast_case(doc) is None
            else:
                assert same_case(got, slow)
    assert errors > 200  # most changes are errors


def test_a_netsim_file_takes_the_fast_path(tmp_path, monkeypatch):
    from topoopt.flowsim.netsim_json import _fast_case

    path = tmp_path / "case.json"
    path.write_text(json.dumps(GOOD))
    fast = _fast_case(json.loads(path.read_text()))
    assert fast is not None and same_case(load_netsim(path), fast)
    assert same_case(fast, checked(GOOD, monkeypatch))
