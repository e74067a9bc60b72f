"""Dependencies point one way: traffic <- topoopt core <- solvers <- edges (CLI, report).

Checked in a fresh interpreter, importing every core module.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import importlib, json, pkgutil, sys
import traffic
mods = ["traffic"] + [m.name for m in pkgutil.walk_packages(traffic.__path__, "traffic.")]
for m in mods:
    importlib.import_module(m)
after_traffic = sorted(k for k in sys.modules if k.split(".")[0] in {"topoopt", "solvers"})
import topoopt
core = ["topoopt"] + [
    m.name for m in pkgutil.walk_packages(topoopt.__path__, "topoopt.")
    if not m.name.startswith(("topoopt.cli", "topoopt.report", "topoopt.studies"))
]
for m in core:
    importlib.import_module(m)
banned = {"typer", "plotly", "ortools", "solvers"}
heavy = sorted(k for k in sys.modules if k.split(".")[0] in banned)
print(json.dumps({"after_traffic": after_traffic, "heavy": heavy, "n_core": len(core) + len(mods)}))
"""


def test_core_imports_no_edges_or_solvers():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout
    res = json.loads(out)
    assert res["after_traffic"] == [], "traffic must not import topoopt or solvers"
    assert res["heavy"] == [], "core modules must not import typer, plotly, ortools or solvers"
    assert res["n_core"] >= 5
