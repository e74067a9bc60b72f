"""Every notebook is a real notebook (``notebooks/NAME.ipynb``, paired by jupytext with the
``NAME.py`` percent source that is reviewed in diffs), the pair is in sync, and the ``.ipynb``
executes without error, as a user opening it in JupyterLab would run it."""

from __future__ import annotations

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

FOLDER = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))


def _sources(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def test_there_are_notebooks_and_each_is_paired():
    names = {p.stem for p in NOTEBOOKS}
    assert {"traffic_analysis", "topology_design", "fabric_comparison"} <= names
    assert names == {p.stem for p in FOLDER.glob("*.py")}, "every .ipynb has its .py and back"
    for path in NOTEBOOKS:
        ipynb = nbformat.read(path, as_version=4)
        py = jupytext.read(path.with_suffix(".py"))
        assert _sources(ipynb) == _sources(py), f"{path.name} and its .py differ: jupytext --sync"
        assert not any(c.get("outputs") for c in ipynb.cells if c.cell_type == "code")
        assert ipynb.metadata.get("jupytext", {}).get("formats") == "ipynb,py:percent"


def test_every_notebook_ends_on_a_conclusion():
    for path in NOTEBOOKS:
        cells = nbformat.read(path, as_version=4).cells
        last = cells[-1]
        assert last.cell_type == "markdown" and "conclusion" in last.source.lower(), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs)
