"""A light start-up: each entry point imports only what it uses (issue 25, whole-process runs).

In one fresh interpreter, step by step:

- ``import traffic.errors`` (every topoopt module does) loads no other ``traffic`` module and no
  numpy, pydantic, yaml or scipy (the door ``traffic/__init__`` is lazy);
- the command line (``topoopt --help``: every command module registered) loads no numpy, numba,
  pydantic, scipy or pandas (the commands import their library where they run);
- the flow model as a netsim process uses it (``topoopt.flowsim``, ``netsim_json``) loads no
  scipy.sparse, pandas or plan schemas (``traffic.plan``);
- a whole netsim run (import, read a JSON file, simulate) loads no pydantic (the document is
  read by columns, :mod:`topoopt.flowsim.netsim_json`), and no numba or PyYAML when the kernels
  are compiled ahead of time (:mod:`topoopt.flowsim.aot`, built by ``make setup``).

Also: the lazy door gives the same objects as the submodules, ``traffic.expand`` stays the
function after the submodule ``traffic.expand`` is loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, sys
def top(prefixes):
    return sorted({k for k in sys.modules if k.split(".")[0] in prefixes})
out = {}
import traffic.errors
out["errors"] = top({"numpy", "pydantic", "yaml", "scipy"}) + sorted(
    k for k in sys.modules if k.startswith("traffic.") and k != "traffic.errors"
)
import topoopt.app.cli.app
out["cli"] = sorted({k.split(".")[0] for k in sys.modules} & {
    "numpy", "numba", "pydantic", "scipy", "pandas", "plotly", "ortools", "solvers"})
import topoopt.flowsim, topoopt.flowsim.netsim_json
out["flowsim"] = sorted(
    k for k in sys.modules
    if k.split(".")[0] in {"pandas", "plotly", "ortools", "solvers", "networkx"}
    or k.startswith("scipy.sparse") or k in {"traffic.plan", "traffic.build"}
)
print(json.dumps(out))
"""


def test_entry_points_import_only_what_they_use():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout
    res = json.loads(out)
    assert res == {"errors": [], "cli": [], "flowsim": []}


NETSIM_RUN = r"""
import json, sys
from topoopt.flowsim import aot, simulate
from topoopt.flowsim.netsim_json import load_netsim
case = load_netsim(sys.argv[1])
res = simulate(case.flows, record_series=False)
print(json.dumps({
    "finish": res.finish.tolist(),
    "built": aot.load() is not None,
    "loaded": sorted({k.split(".")[0] for k in sys.modules} & {"numba", "pydantic", "yaml"}),
}))
"""


def test_netsim_run_loads_no_numba_pydantic_or_yaml(tmp_path):
    # two flows on one 100 B/s link, 100 and 300 B: 50/50 until 2 s, then 200 B alone: 4 s
    doc = {
        "links": [{"id": "up", "capacity": 100.0}],
        "flows": [{"id": 0, "bytes": 100, "paths": [{"links": ["up"]}]},
                  {"id": 1, "bytes": 300, "paths": [{"links": ["up"]}]}],
    }  # fmt: skip
    path = tmp_path / "two.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run(
        [sys.executable, "-c", NETSIM_RUN, str(path)], check=True, capture_output=True, text=True
    ).stdout
    res = json.loads(out)
    assert res["finish"] == [2.0, 4.0]
    # numba itself loads PyYAML (and scipy): without the compiled kernels only pydantic is ours
    assert res["loaded"] == [] if res["built"] else "numba" in res["loaded"]
    assert "pydantic" not in res["loaded"]


HOMES = {
    "build": ["workload_from_plan"],
    "errors": ["InputError"],
    "expand": ["expand", "gpu_matrix", "server_matrix"],
    "load": ["load_workload"],
    "plan": ["Plan", "embedded_plan_names", "load_plan"],
    "taskgraph": ["read_taskgraph"],
    "workload": ["CLASSES", "OPS", "PHASES", "Demand", "TaskGraph", "Workload"],
}
"""Where each name of the door was imported from when ``traffic/__init__`` was eager."""


def test_lazy_traffic_door_gives_the_submodules_objects():
    import importlib

    import traffic
    import traffic.expand  # binds no module over the function

    assert sorted(n for names in HOMES.values() for n in names) == sorted(traffic.__all__)
    for home, names in HOMES.items():
        mod = importlib.import_module(f"traffic.{home}")
        for name in names:
            assert getattr(traffic, name) is getattr(mod, name), name
    from traffic import expand

    assert expand is traffic.expand is sys.modules["traffic.expand"].expand
    assert callable(expand)
    assert set(traffic.__all__) <= set(dir(traffic))
