"""The Python API (``import topoopt``): lazy, light, and the docs/api.md example runs."""

from __future__ import annotations

import doctest
import json
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_docs_api_example_runs():
    res = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 6 and res.failed == 0


def test_api_is_lazy_and_unknown_names_fail():
    probe = (
        "import json, sys, topoopt\n"
        "before = sorted(k for k in sys.modules if k.split('.')[0] in {'solvers', 'plotly'})\n"
        "f = topoopt.compare\n"
        "after = 'solvers' in sys.modules or 'topoopt.app.api' in sys.modules\n"
        "try:\n    topoopt.no_such_thing\n    missing = False\n"
        "except AttributeError:\n    missing = True\n"
        "print(json.dumps([before, callable(f), after, missing, 'compare' in dir(topoopt)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    before, is_callable, loaded, missing, listed = json.loads(out.stdout)
    assert before == [] and is_callable and loaded and missing and listed
