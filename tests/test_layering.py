"""The floors are the folders: traffic <- topoopt core <- solvers <- topoopt.app (the edges).

- In a fresh interpreter, every core module (``traffic``, ``topoopt`` outside ``topoopt.app``)
  imports no typer, plotly, ortools or solvers.
- Statically (every ``import`` statement, inside functions too): no module of ``topoopt``
  outside ``topoopt/app/`` imports ``solvers``; ``solvers`` never imports ``topoopt.app``; the
  edges import ``solvers`` only through its door (``solvers/__init__``); and no import cycle
  exists between the modules of the three packages.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("traffic", "topoopt", "solvers")
EDGES = "topoopt.app"

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
    if not (m.name == "topoopt.app" or m.name.startswith("topoopt.app."))
    and m.name != "topoopt.__main__"
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


def module_files() -> dict[str, Path]:
    """Module name -> file, for every module of the three packages."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def exported(path: Path | None) -> set[str]:
    """The names a package's ``__init__`` lists in ``__all__`` (its door); a name the door
    exports is taken from the door even where a submodule has the same name."""
    if path is None or path.name != "__init__.py":
        return set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                try:
                    return set(ast.literal_eval(node.value))
                except ValueError:
                    return set()
    return set()


def imports_of(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """Every module of ``known`` that ``name`` imports, anywhere in the file (functions too),
    with the line; ``from pkg import sub`` counts as an import of ``pkg.sub`` when that is a
    module (and then not as an import of ``pkg``). Imports under ``if TYPE_CHECKING:`` are kept
    (they still name a dependency)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            door = exported(known.get(mod))
            subs = [
                f"{mod}.{a.name}"
                for a in node.names
                if f"{mod}.{a.name}" in known and a.name not in door
            ]
            if len(subs) < len(node.names):
                found.append((mod, node.lineno))
            found.extend((sub, node.lineno) for sub in subs)
    out = []
    for mod, line in found:
        while mod and mod not in known:
            mod = mod.rpartition(".")[0]
        if mod and mod != name:
            out.append((mod, line))
    return out


def import_graph() -> dict[str, list[tuple[str, int]]]:
    known = module_files()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def _in(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def find_cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative).

    A door (``pkg/__init__`` re-exporting ``pkg.sub``) is an edge like any other, so a module
    inside a package that imports a sibling through the door closes a circle: inside a package,
    import the sibling itself."""
    edges = {a: sorted({b for b, _ in bs}) for a, bs in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    comps: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in edges:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def test_cycle_finder_finds_a_planted_circle():
    graph = {
        "a": [("b", 1)],
        "b": [("c", 1)],
        "c": [("a", 1)],
        "d": [("a", 1)],
        "p": [("p.x", 1)],  # a door re-exporting its own submodule
        "p.x": [("q", 1)],
        "q": [],
    }
    assert find_cycles(graph) == [["a", "b", "c"]]
    graph["c"] = []
    assert find_cycles(graph) == []
    graph["q"] = [("p", 1)]  # q reaches p.x through the door: p -> p.x -> q -> p
    assert find_cycles(graph) == [["p", "p.x", "q"]]


def test_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert cycles == [], f"import cycles (imports inside functions count too): {cycles}"


def test_only_the_edges_import_solvers_and_solvers_never_import_the_edges():
    graph = import_graph()
    upward = sorted(
        f"{a}:{line} -> {b}"
        for a, bs in graph.items()
        for b, line in bs
        if _in(a, "topoopt") and not _in(a, EDGES) and _in(b, "solvers")
    )
    assert upward == [], "only topoopt/app/ may import solvers: " + "; ".join(upward)
    twin = sorted(
        f"{a}:{line} -> {b}"
        for a, bs in graph.items()
        for b, line in bs
        if _in(a, "solvers") and _in(b, EDGES)
    )
    assert twin == [], "solvers must never import topoopt.app: " + "; ".join(twin)
    down = sorted(
        f"{a}:{line} -> {b}"
        for a, bs in graph.items()
        for b, line in bs
        if _in(a, "traffic") and (_in(b, "topoopt") or _in(b, "solvers"))
    )
    assert down == [], "traffic imports neither topoopt nor solvers: " + "; ".join(down)


def test_the_edges_enter_solvers_by_its_door():
    graph = import_graph()
    side_doors = sorted(
        f"{a}:{line} -> {b}"
        for a, bs in graph.items()
        for b, line in bs
        if _in(a, EDGES) and _in(b, "solvers") and b != "solvers"
    )
    assert side_doors == [], "the edges import solvers only from solvers/__init__: " + "; ".join(
        side_doors
    )


def test_no_door_name_shadows_a_submodule():
    """``import solvers.x as m`` must give the module ``x``, so no name of the solvers' door is
    also the name of one of its submodules."""
    known = module_files()
    clashes = sorted(
        f"solvers.{name}" for name in exported(known["solvers"]) if f"solvers.{name}" in known
    )
    assert clashes == [], clashes


def test_no_long_function_in_the_joint_search():
    """The searches are rows of named steps (issue 27): no function or method of
    ``solvers/joint/`` is over 150 lines."""
    long = []
    for path in sorted((ROOT / "solvers" / "joint").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > 150:
                    long.append(f"{path.name}:{node.name} ({n} lines)")
    assert long == [], long


def test_one_canonical_circuit_type():
    """Circuits are canonicalised in one place, ``topoopt/fabrics/circuits.py``."""
    hits = [
        f"{p.relative_to(ROOT)}"
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "circuits.py" and "canonical_circuits" in p.read_text()
    ]
    assert hits == [], hits


RESHAPE_ALLOWED = {
    ("solvers/model/design_schema.py", "_check_rows"): (
        "validates the raw design.json rows (3-int lists from the schema) before a Circuits is "
        "built, so its errors can name the document's row index"
    ),
    ("solvers/cluster/job_design.py", "fill_ports"): (
        "rows [u, v, port] of an OCS port assignment (a plane per circuit), not circuits"
    ),
}
"""Functions outside ``topoopt/fabrics/circuits.py`` that may reshape ``(-1, 3)`` rows, with
the reason: none of them receives circuits."""


def _reshapes_to_rows(call: ast.Call) -> bool:
    """``x.reshape(-1, 3)`` or ``x.reshape((-1, 3))`` (or ``np.reshape(x, (-1, 3))``)."""
    f = call.func
    if not (isinstance(f, ast.Attribute) and f.attr == "reshape"):
        return False
    args = (
        call.args[1:]
        if isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy")
        else (call.args)
    )
    if len(args) == 1 and isinstance(args[0], ast.Tuple):
        args = args[0].elts
    try:
        return [ast.literal_eval(a) for a in args] == [-1, 3]
    except ValueError:
        return False


def test_circuit_receivers_trust_circuits():
    """Receivers take a ``Circuits`` and read its rows (issue 27, item 5): no module of
    ``solvers`` or ``topoopt`` but ``topoopt/fabrics/circuits.py`` reshapes rows to ``(-1, 3)``,
    except the allow-listed functions (each with its reason)."""
    found = {}
    for pkg in ("solvers", "topoopt"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            if rel == "topoopt/fabrics/circuits.py":
                continue
            tree = ast.parse(path.read_text())
            for fn in ast.walk(tree):
                if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(fn):
                    if isinstance(node, ast.Call) and _reshapes_to_rows(node):
                        found.setdefault((rel, fn.name), []).append(node.lineno)
    stray = {k: v for k, v in found.items() if k not in RESHAPE_ALLOWED}
    assert stray == {}, f"reshape(-1, 3) outside circuits.py (take a Circuits instead): {stray}"
    assert set(found) == set(RESHAPE_ALLOWED), "an allow-list entry no longer reshapes: drop it"


def test_the_reshape_finder_finds_a_planted_receiver():
    calls = [
        "c = np.asarray(circuits, np.int64).reshape(-1, 3)",
        "c = x.reshape((-1, 3))",
        "c = np.reshape(x, (-1, 3))",
    ]
    for src in calls:
        call = ast.parse(src).body[0].value
        assert _reshapes_to_rows(call), src
    for src in ("c = x.reshape(-1, 2)", "c = x.reshape(-1)", "c = np.reshape(x, (3, -1))"):
        assert not _reshapes_to_rows(ast.parse(src).body[0].value), src
