"""The documentation site (issue 28): ``mkdocs build --strict`` (warnings are errors: a broken
link, a page left out of the nav, a docstring the numpydoc parser cannot read) builds docs/ and
the API reference from the docstrings, as ``make docs`` does. Needs the ``docs`` extra, which
``make test``'s set-up installs (``pip install -e '.[test,docs]'``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        for value in item.values() if isinstance(item, dict) else [item]:
            out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = _nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    assert set(pages) == {p.name for p in (ROOT / "docs").glob("*.md")}
    assert config["strict"] is True
    handler = config["plugins"][1]["mkdocstrings"]["handlers"]["python"]
    assert handler["options"]["docstring_style"] == "numpy"


def test_site_builds_strict(tmp_path):
    missing = [m for m in ("mkdocs", "material", "mkdocstrings_handlers.python")
               if importlib.util.find_spec(m.split(".")[0]) is None]  # fmt: skip
    assert not missing, f"pip install -e '.[docs]' (missing {missing}); `make test` installs it"
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
         "-d", str(site)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    for page in ("index.html", "commands/index.html", "api/index.html"):
        assert (site / page).is_file(), page
    # the API reference holds the public functions, rendered from their numpydoc sections
    ref = (site / "reference" / "index.html").read_text()
    ids = set(re.findall(r'id="(topoopt\.[\w.]+)"', ref))
    for name in ("compare", "simulate", "design", "cosearch", "load_plan"):
        assert f"topoopt.app.api.{name}" in ids, name
    assert "topoopt.app.cli.byte_sizes.parse_bytes" in ids
    assert "Parameters" in ref and "Returns" in ref
    # the commands page keeps its section anchors (the README links to them)
    commands = (site / "commands" / "index.html").read_text()
    assert 'id="topoopt-compare"' in commands
