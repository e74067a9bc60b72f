"""One JSON envelope (issue 28): every ``--json`` document of every command opens with
``topoopt_version``, ``command`` and ``inputs`` (the arguments and every option, as parsed), then
the command's own keys. The test walks the typer application, so a new command with ``--json``
and no cheap invocation here fails it."""

from __future__ import annotations

import functools
import json

import pytest
import typer.main
from typer.testing import CliRunner

import topoopt
from topoopt.app.cli.app import app
from topoopt.app.cli.common import json_envelope

runner = CliRunner()


def _json_commands() -> dict[str, object]:
    """``{"fabric fat-tree": click command, ...}`` of every command taking ``--json``."""
    out = {}

    def walk(cmd, path):
        if any("--json" in getattr(p, "opts", ()) for p in getattr(cmd, "params", ())):
            out[" ".join(path)] = cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


JSON_COMMANDS = _json_commands()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The input files of the cheap invocations: a flow set, a job list, a DLRM design."""
    from solvers import DesignProblem, solve
    from traffic.load import load_workload

    tmp = tmp_path_factory.mktemp("envelope")
    flows = tmp / "flows.json"
    flows.write_text(
        json.dumps(
            {
                "links": [{"id": "a", "capacity": 100.0}],
                "flows": [{"id": 1, "bytes": 100, "paths": [{"links": ["a"]}]}],
            }
        )
    )
    jobs = tmp / "jobs.json"
    jobs.write_text(json.dumps({"jobs": [{"name": "a", "plan": "dlrm"}]}))
    design = tmp / "design.json"
    w = load_workload("dlrm")
    design.write_text(solve(DesignProblem.from_workload(w, 4, 12.5e9), "topoopt", seed=0).to_json())
    return {"flows": flows, "jobs": jobs, "design": design, "tmp": tmp}


def _cases(f) -> dict[str, list[str]]:
    """A cheap invocation of every command with ``--json`` (``--json`` is appended)."""
    fabric = {
        "ideal": ["--servers", "4"],
        "fat-tree": ["--k", "4"],
        "leaf-spine": ["--servers", "8", "--radix", "8"],
        "rail": ["--servers", "4", "--gpus-per-server", "2"],
        "torus": ["--dims", "2x2"],
        "tpu-v4": ["--dims", "4x4x4"],
        "direct": ["--servers", "4", "--degree", "2"],
        "expander": ["--servers", "8", "--degree", "3"],
        "hybrid": ["--servers", "4", "--optical-degree", "2"],
    }
    out = {f"fabric {k}": ["fabric", k, *v] for k, v in fabric.items()}
    out.update(
        {
            "traffic": ["traffic", "dlrm"],
            "netsim": ["netsim", str(f["flows"])],
            "strides": ["strides", "16", "2"],
            "design": ["design", "dlrm", "--degree", "4", "--solver", "topoopt"],
            "simulate": ["simulate", "dlrm", "--fabric", "ideal"],
            "compare": ["compare", "dlrm", "--fabrics", "ideal"],
            "breakeven": ["breakeven", "dlrm", "--degree", "4"],
            "advise": ["advise", "dlrm", "--gpus", "32", "--degree", "4"],
            "cluster": ["cluster", str(f["jobs"]), "--servers", "16", "--degree", "2"],
            "collective": (
                "collective --fabric expander --servers 8 --degree 3 --collective all-reduce "
                "--size 1MiB"
            ).split(),
            "whatif": ["whatif", "dlrm", "--design", str(f["design"]), "--fail-links", "1"],
            "reconfig": "reconfig dlrm --degree 2 --solver topoopt --phase-solvers demand".split(),
            "export": ["export", "dlrm", "--format", "simai", "--out", str(f["tmp"] / "simai")],
            "cosearch": ["cosearch", "vgg16", "--servers", "8", "--degree", "4"],
            "demo": ["demo", "--out", str(f["tmp"] / "demo.html"), "--force"],
        }
    )
    return out


@pytest.fixture
def small_demo(monkeypatch):
    """``demo`` on one plan, one port count and two fabrics (the command's path is unchanged)."""
    from topoopt.app.studies import demo

    small = {"plans": ("dlrm",), "degrees": (4,), "fabrics": ("ideal", "fat-tree")}
    monkeypatch.setattr(demo, "run_demo", functools.partial(demo.run_demo, **small))
    monkeypatch.setattr(demo, "DEMO_PLANS", small["plans"])
    monkeypatch.setattr(demo, "DEMO_DEGREES", small["degrees"])
    monkeypatch.setattr(demo, "DEMO_FABRICS", small["fabrics"])


def test_every_json_command_has_a_case(files):
    assert set(_cases(files)) == set(JSON_COMMANDS)
    assert len(JSON_COMMANDS) >= 24  # 15 commands and 9 fabric kinds


@pytest.mark.parametrize("command", sorted(JSON_COMMANDS))
def test_envelope(command, files, small_demo):
    argv = [*_cases(files)[command], "--json"]
    r = runner.invoke(app, argv)
    assert r.exit_code == 0, (r.stdout[-500:], r.stderr[-1500:])
    doc = json.loads(r.stdout)  # exactly one document
    assert list(doc)[:4] == ["topoopt_version", "command", "inputs", "warnings"]
    assert isinstance(doc["warnings"], list)
    assert all(w.startswith("warning: ") for w in doc["warnings"])
    assert doc["topoopt_version"] == topoopt.__version__
    assert doc["command"] == command
    inputs = doc["inputs"]
    assert set(inputs) == {"arguments", "options"}
    click_cmd = JSON_COMMANDS[command]
    # every parameter is echoed: arguments by name, options by their long flag
    want_args = {p.name for p in click_cmd.params if p.param_type_name == "argument"}
    want_opts = {
        next(o for o in p.opts if o.startswith("--"))
        for p in click_cmd.params
        if p.param_type_name == "option" and p.expose_value
    }
    assert set(inputs["arguments"]) == want_args
    assert set(inputs["options"]) >= want_opts - {"--help"}
    assert inputs["options"]["--json"] is True
    # the values given on the command line, as given (after the command and its sub-command)
    given = argv[len(command.split()) :]
    positional = [a for a in given if not a.startswith("--")]
    for name, value in inputs["arguments"].items():
        assert str(value) in positional, (name, value)
    for flag, value in zip(given, given[1:], strict=False):
        if flag.startswith("--") and flag in inputs["options"] and not value.startswith("--"):
            echoed = inputs["options"][flag]
            if isinstance(echoed, int | float) and not isinstance(echoed, bool):
                assert echoed == pytest.approx(_number(value)), flag
            else:
                assert str(echoed) == value, flag


def _number(text: str) -> float:
    from topoopt.app.cli.byte_sizes import parse_bytes

    return parse_bytes(text, "value")


def test_envelope_outside_a_command():
    doc = json_envelope({"a": 1})
    assert doc == {
        "topoopt_version": topoopt.__version__,
        "command": None,
        "inputs": {},
        "warnings": [],
        "a": 1,
    }
    assert json_envelope([1, 2])["result"] == [1, 2]
    with pytest.raises(ValueError, match="envelope keys"):
        json_envelope({"command": "x"})
    with pytest.raises(ValueError, match="envelope keys"):
        json_envelope({"warnings": []})


def test_json_has_no_wall_clock_fields_unless_timings_asks():
    """Issue 30: the same command gives the same bytes on any machine, so ``--json`` documents
    leave out their wall-clock fields (``wall_s`` here, the stride search's); ``topoopt
    --timings`` keeps them."""
    runner = CliRunner()
    plain = runner.invoke(app, ["strides", "16", "4", "--json"])
    timed = runner.invoke(app, ["--timings", "strides", "16", "4", "--json"])
    assert plain.exit_code == 0 == timed.exit_code, (plain.stderr, timed.stderr)
    a, b = json.loads(plain.stdout), json.loads(timed.stdout)
    assert "wall_s" not in a and b["wall_s"] >= 0
    b.pop("wall_s")
    assert a == b  # nothing else differs
    again = runner.invoke(app, ["strides", "16", "4", "--json"])
    assert again.stdout == plain.stdout  # the same bytes
