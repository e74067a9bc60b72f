"""The README is the front door: short, with its sections, naming every embedded plan and linking
every command's reference in docs/commands.md; the commands it shows parse, and its plan runs."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import click
import typer
import yaml
from typer.testing import CliRunner

from topoopt.app.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
COMMANDS_MD = (ROOT / "docs" / "commands.md").read_text()
COMMANDS = sorted(
    p.stem
    for p in (ROOT / "topoopt" / "app" / "cli" / "commands").glob("*.py")
    if not p.stem.startswith("_")
)


def _code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^ *```{lang}\n(.*?)^ *```", text, flags=re.M | re.S)


def _command_lines(text: str) -> list[list[str]]:
    """Every ``topoopt ...`` line of the ``sh`` blocks, continuation lines joined, as argv."""
    out = []
    for block in _code_blocks(text, "sh"):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("topoopt "):
                out.append(shlex.split(line)[1:])
    return out


def test_readme_is_short_and_has_its_sections():
    assert len(README.splitlines()) <= 150
    heads = re.findall(r"^## (.+)$", README, flags=re.M)
    for want in ("Start here", "Your own cluster", "What is modelled", "Limitations", "Command"):
        assert any(h.startswith(want) for h in heads), (want, heads)
    assert "make demo" in README and "make test" in README


def test_readme_lists_every_embedded_plan():
    names = sorted(p.stem for p in (ROOT / "traffic" / "plans").glob("*.yaml"))
    assert len(names) >= 8
    assert [n for n in names if f"`{n}`" not in README] == []
    assert [n for n in names if f"`{n}`" not in (ROOT / "docs" / "plans.md").read_text()] == []


def test_every_command_has_a_reference_linked_from_the_readme():
    assert "export" in COMMANDS and "cosearch" in COMMANDS and len(COMMANDS) >= 15
    assert [c for c in COMMANDS if f"## `topoopt {c}`" not in COMMANDS_MD] == []
    assert [c for c in COMMANDS if f"(docs/commands.md#topoopt-{c})" not in README] == []


def test_readme_links_point_at_files():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_every_command_line_shown_parses():
    """Each ``topoopt`` line of README.md and docs/commands.md names a command and options it
    has, with values of the right type and choice (parsed by the real app, nothing run)."""
    root = typer.main.get_command(app)
    lines = _command_lines(README) + _command_lines(COMMANDS_MD)
    assert len(lines) >= 12
    for argv in lines:
        if "..." in argv or any(a.startswith("[") for a in argv):
            continue  # a schematic line (alternatives, optional parts), not a command
        cmd, rest = root.commands[argv[0]], argv[1:]
        if isinstance(cmd, click.Group):
            cmd, rest = cmd.commands[rest[0]], rest[1:]
        cmd.make_context(argv[0], list(rest))  # raises on an unknown option or a bad value


def test_readme_plan_runs(tmp_path):
    """The walkthrough's plan file is a valid plan: ``topoopt traffic`` on it, as the README
    says, counts 128 GPUs on 16 servers and tp, pp and dp traffic."""
    plan = next(b for b in _code_blocks(README, "yaml") if "parallelism" in b)
    path = tmp_path / "my-cluster.yaml"
    path.write_text(plan)
    doc = yaml.safe_load(plan)
    result = CliRunner().invoke(app, ["traffic", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["gpus"] == doc["cluster"]["servers"] * doc["cluster"]["gpus_per_server"] == 128
    assert out["servers"] == 16
    assert {"tp", "pp", "dp"} <= set(out["bytes_by_class"])
