"""The README names what the repository holds: every embedded plan, every CLI command."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_lists_every_embedded_plan():
    readme = (ROOT / "README.md").read_text()
    names = sorted(p.stem for p in (ROOT / "traffic" / "plans").glob("*.yaml"))
    assert len(names) >= 8
    assert [n for n in names if f"`{n}`" not in readme] == []


def test_readme_documents_every_command():
    readme = (ROOT / "README.md").read_text()
    commands = sorted(
        p.stem
        for p in (ROOT / "topoopt" / "app" / "cli" / "commands").glob("*.py")
        if not p.stem.startswith("_")
    )
    assert "export" in commands and "cosearch" in commands
    assert [c for c in commands if f"### `topoopt {c}" not in readme] == []
