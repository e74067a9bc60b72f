"""Hypothesis strategies that mutate a valid input file into a case, and say when the case is
known to be wrong (so the CLI must refuse it with exit 2).

Three families of mutations, drawn evenly:

- bytes: flips, truncation, deletion and duplication of a range, junk, NUL bytes, bytes that
  are not UTF-8, whole binary files, UTF-16 text;
- structure (decoded JSON/YAML, or the lines and fields of a text file): deleted or added keys,
  duplicated keys, type swaps (a number as a string, a fraction for an integer, a boolean,
  null, lists, objects), huge and negative numbers, NaN/Infinity, deep nesting, wrapped and
  unwrapped values, long or odd strings, YAML alias bombs;
- targeted: a per-kind list of known-wrong edits (the faults the issue lists: a ring weight of
  5, duplicated ring members, ``"servers": "16"``, a circuit count of 1.9, ``routing.src``
  beyond the servers, ``servers: 10**9``, ``layers: 10**12``, ...).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml
from fuzz_kinds import Kind
from hypothesis import strategies as st

__all__ = ["Case", "mutations", "TARGETED", "serialise", "bomb_text"]


@dataclass(frozen=True)
class Case:
    """One mutated file: its bytes, the mutation, and whether it must be refused."""

    data: bytes
    op: str
    known_bad: bool


_BAD_TOKENS = ["1.5", "x", "99999999999999999999", "1e3", "\u0663", "0x1f", "nan", "1_0", "²"]
_ANY_TOKENS = ["-1", "+1", "", "0", "7", "100000", " ", "u", "#"]


def bomb_text(levels: int = 9) -> str:
    """A YAML flow sequence of ``10**levels`` leaves in ~40 bytes per level (anchors inside)."""
    parts = ["&l0 [" + ", ".join(["x"] * 10) + "]"]
    for i in range(1, levels):
        parts.append(f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    return "[" + ", ".join(parts) + "]"


def _paths(tree: Any, at: tuple = ()) -> list[tuple]:
    out = [at]
    if isinstance(tree, dict):
        for k, v in tree.items():
            out += _paths(v, (*at, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out += _paths(v, (*at, i))
    return out


def _get(tree: Any, path: tuple) -> Any:
    for p in path:
        tree = tree[p]
    return tree


def _set(tree: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    _get(tree, path[:-1])[path[-1]] = value
    return tree


def serialise(tree: Any, fmt: str, dup: tuple | None = None, raw: dict[str, str] | None = None):
    """JSON text of ``tree`` (also valid YAML flow text); the mapping at path ``dup`` repeats its
    first key; string values ``"@@NAME@@"`` are replaced by ``raw[NAME]`` (bare tokens)."""

    def emit(v: Any, at: tuple) -> str:
        if isinstance(v, dict):
            items = [f"{json.dumps(str(k))}: {emit(x, (*at, k))}" for k, x in v.items()]
            if dup == at and v:
                k0 = next(iter(v))
                items.append(f"{json.dumps(str(k0))}: {emit(v[k0], (*at, k0))}")
            return "{" + ", ".join(items) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(emit(x, (*at, i)) for i, x in enumerate(v)) + "]"
        if isinstance(v, str) and raw and v.startswith("@@") and v.endswith("@@"):
            return raw[v[2:-2]]
        return json.dumps(v)

    return emit(tree, ())


def _free(kind: Kind, path: tuple) -> bool:
    """Paths where any JSON value may be valid (so a type swap there is not known to be wrong)."""
    names = [p for p in path if isinstance(p, str)]
    if kind.name.startswith("design"):
        return "info" in names
    if kind.name.startswith("flows"):
        return bool(names) and (names[-1] in ("id", "after") or names[-2:] == ["paths", "links"])
    return False


def _int_strict(kind: Kind, path: tuple) -> bool:
    """Paths whose integer value must stay an integer (a fraction there is known to be wrong)."""
    if kind.name.startswith("design"):
        return "info" not in path and "stride" not in path
    if kind.name.startswith("flows"):
        return False
    if kind.name.startswith("prices"):
        return path[-1:] == ("version",)
    if kind.name == "hardware":  # the rest are real numbers (a fraction there is valid)
        return path[-1:] in (("version",), ("scale_up_domain",), ("radix",), ("ports",))
    return True


def _structure(draw, kind: Kind, raw: bytes) -> Case:
    text = raw.decode("utf-8")
    tree = json.loads(text) if kind.fmt == "json" else yaml.safe_load(text)
    paths = _paths(tree)
    path = draw(st.sampled_from(paths))
    node = _get(tree, path)
    ops = ["delete", "extra-key", "dup-key", "type", "huge", "nonfinite", "deep", "wrap", "unwrap"]
    ops += ["string"] + (["alias-bomb"] if kind.fmt == "yaml" else [])
    op = draw(st.sampled_from(ops))
    fmt_out = kind.fmt
    bad = False
    raw_tokens: dict[str, str] = {}
    dup = None
    tree = copy.deepcopy(tree)
    if op == "delete" and path:
        parent = _get(tree, path[:-1])
        del parent[path[-1]]
    elif op == "extra-key":
        maps = [p for p in paths if isinstance(_get(tree, p), dict)]
        if maps:
            at = draw(st.sampled_from(maps))
            key = draw(st.sampled_from(["zz_unknown", "a\nb", "x\u2028y", "", "\x1b[31m"]))
            _get(tree, at)[key] = draw(st.sampled_from([1, "x", None, [1]]))
            bad = not _free(kind, (*at, key)) and not isinstance(_get(tree, at), list)
    elif op == "dup-key":
        maps = [p for p in paths if isinstance(_get(tree, p), dict) and _get(tree, p)]
        if maps:
            dup, bad = draw(st.sampled_from(maps)), True
    elif op == "type" and not isinstance(node, dict | list):
        number = isinstance(node, int | float) and not isinstance(node, bool)
        choices: list[tuple[Any, bool]] = [(None, False), ([], False), ({}, False), ("x", False)]
        if number:
            free = _free(kind, path)
            choices += [(str(node), not free), (True, not free), (False, not free)]
            if isinstance(node, int):
                choices.append((node + 0.5, _int_strict(kind, path)))
                choices.append((float(node), _int_strict(kind, path)))
        else:
            choices += [(0, False), (1.5, False), (True, False)]
        value, bad = draw(st.sampled_from(choices))
        tree = _set(tree, path, value)
    elif op == "huge":
        value, known = draw(
            st.sampled_from([(2**63, True), (-(2**63) - 1, True), (10**30, True), (1e308, False),
                             (-1, False), (0, False), (2**31, False), (-1e-300, False)])
        )  # fmt: skip
        tree = _set(tree, path, "@@N@@")
        raw_tokens["N"] = str(value) if isinstance(value, int) else repr(value)
        bad = known
    elif op == "nonfinite":
        if kind.fmt == "json":
            token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1E400"]))
        else:
            token = draw(st.sampled_from([".nan", ".inf", "-.inf", ".NaN", "+.INF"]))
        tree = _set(tree, path, "@@N@@")
        raw_tokens["N"] = token
        bad = True
    elif op == "deep":
        depth = draw(st.integers(33, 200))
        tree = _set(tree, path, "@@N@@")
        raw_tokens["N"] = "[" * depth + "1" + "]" * depth
        bad = True
    elif op == "wrap":
        tree = _set(tree, path, [node])
    elif op == "unwrap" and isinstance(node, list | dict) and node:
        first = node[0] if isinstance(node, list) else next(iter(node.values()))
        tree = _set(tree, path, first)
    elif op == "string" and isinstance(node, str):
        value = draw(st.sampled_from(["", "x" * 100_000, "\u00e9\u4e2d\U0001f600", "a\tb", "-"]))
        tree = _set(tree, path, value)
    elif op == "alias-bomb":
        tree = _set(tree, path, "@@N@@")
        raw_tokens["N"] = bomb_text()
        bad = True
    else:
        op = "noop"
    if kind.fmt == "yaml" and op in ("delete", "type", "wrap", "unwrap", "string", "extra-key"):
        # the block style as well as the flow style
        out = yaml.safe_dump(tree, sort_keys=False) if draw(st.booleans()) else None
        if out is not None:
            return Case(out.encode(), f"structure:{op}@{path}", bad)
    out = serialise(tree, fmt_out, dup=dup, raw=raw_tokens)
    return Case(out.encode(), f"structure:{op}@{path}", bad)


def _lines(draw, kind: Kind, raw: bytes) -> Case:
    lines = raw.decode("utf-8").splitlines()
    data_rows = [i for i, x in enumerate(lines) if x and x[0].isdigit()]
    op = draw(st.sampled_from(["del-line", "dup-line", "token", "add-token", "drop-token", "swap"]))
    bad = False
    i = draw(st.sampled_from(data_rows))
    sep = "," if "," in lines[i] else " "
    toks = lines[i].split(sep)
    if op == "del-line":
        del lines[draw(st.integers(0, len(lines) - 1))]
    elif op == "dup-line":
        j = draw(st.integers(0, len(lines) - 1))
        lines.insert(j, lines[j])
    elif op == "token":
        j = draw(st.integers(0, len(toks) - 1))
        junk = draw(st.sampled_from(_BAD_TOKENS + _ANY_TOKENS))
        toks[j] = junk
        bad = junk in _BAD_TOKENS
        lines[i] = sep.join(toks)
    elif op == "add-token":
        toks.append(draw(st.sampled_from(["1", "2", "x"])))
        lines[i] = sep.join(toks)
        bad = len(toks) > 3 or toks[-1] == "x"
    elif op == "drop-token":
        toks.pop()
        lines[i] = sep.join(toks)
        bad = kind.name.startswith("prewired") or len(toks) < 2
    else:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
        if kind.name.startswith("prewired") and 0 in (i, j) and i != j:
            bad = True  # the header must come first
    return Case(("\n".join(lines) + "\n").encode(), f"lines:{op}", bad)


def _bytes(draw, raw: bytes) -> Case:
    op = draw(
        st.sampled_from(
            ["flip", "truncate", "delete", "duplicate", "junk", "nul", "bad-utf8", "binary",
             "utf16", "empty"]
        )
    )  # fmt: skip
    n = len(raw)
    pos = draw(st.integers(0, n - 1))
    end = draw(st.integers(pos, min(n, pos + 64)))
    bad = False
    if op == "flip":
        b = bytearray(raw)
        b[pos] ^= draw(st.integers(1, 255))
        out = bytes(b)
        bad = b"\x00" in out
        try:
            out.decode("utf-8")
        except UnicodeDecodeError:
            bad = True
    elif op == "truncate":
        out = raw[:pos]
    elif op == "delete":
        out = raw[:pos] + raw[end:]
    elif op == "duplicate":
        out = raw[:end] + raw[pos:end] + raw[end:]
    elif op == "junk":
        out = raw[:pos] + draw(st.binary(min_size=1, max_size=16)) + raw[pos:]
        bad = b"\x00" in out
        try:
            out.decode("utf-8")
        except UnicodeDecodeError:
            bad = True
    elif op == "nul":
        out, bad = raw[:pos] + b"\x00" + raw[pos:], True
    elif op == "bad-utf8":
        junk = draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80"]))
        out, bad = raw[:pos] + junk + raw[pos:], True
    elif op == "binary":
        out, bad = b"\x00" + draw(st.binary(min_size=1, max_size=256)), True
    elif op == "utf16":
        out, bad = raw.decode("utf-8").encode("utf-16"), True
    else:
        out, bad = b"", True
    return Case(out, f"bytes:{op}", bad)


Edit = Callable[[Any], Any]


def _edit(path: tuple, value: Any) -> Edit:
    def apply(tree: Any) -> Any:
        return _set(tree, path, value)

    return apply


def _append_dup(path: tuple) -> Edit:
    def apply(tree: Any) -> Any:
        lst = _get(tree, path)
        lst.append(lst[0])
        return tree

    return apply


def _revisit(tree: Any) -> Any:
    """The first path goes src -> dst -> src -> dst (its first hop twice)."""
    r = tree["routing"]
    a, b = r["nodes"][0], r["nodes"][r["path_ptr"][1] - 1]
    r["nodes"][0 : r["path_ptr"][1]] = [a, b, a, b]
    grow = 4 - r["path_ptr"][1]
    r["path_ptr"] = [0] + [x + grow for x in r["path_ptr"][1:]]
    return tree


def _text(s: str) -> Edit:
    return lambda tree: ("@@TEXT@@", s)


def _collective(**edits) -> dict:
    """A ``design.json`` collectives entry for the seed's group (then edited)."""
    entry = {"phase": "backward", "group": 0, "collective": "all-reduce", "algorithm": "blink",
             "members": list(range(8)), "src": [0], "dst": [1], "fraction": [1.0]}  # fmt: skip
    return {**entry, **edits}


_DESIGN = [
    ("servers as a string", _edit(("servers",), "8")),
    ("servers as a float", _edit(("servers",), 8.0)),
    ("servers 10**9", _edit(("servers",), 10**9)),
    ("degree -1", _edit(("degree",), -1)),
    ("circuit count 1.9", _edit(("circuits", 0, 2), 1.9)),
    ("self circuit", _edit(("circuits", 0), [3, 3, 1])),
    ("circuit beyond servers", _edit(("circuits", 0, 1), 999)),
    ("circuit count 0", _edit(("circuits", 0, 2), 0)),
    ("ring weight 5", _edit(("rings", 0, "weight"), 5)),
    ("ring weight 0.3", _edit(("rings", 0, "weight"), 0.3)),
    ("duplicated ring members", _append_dup(("rings", 0, "members"))),
    ("order not a permutation", _edit(("rings", 0, "order", 1), 0)),
    ("ring phase unknown", _edit(("rings", 0, "phase"), "nope")),
    ("ring group 99", _edit(("rings", 0, "group"), 99)),
    ("routing.src beyond servers", _edit(("routing", "src", 0), 999)),
    ("routing.dst == src", lambda t: _set(t, ("routing", "dst", 0), t["routing"]["src"][0])),
    ("path weight 0.3", _edit(("routing", "weight", 0), 0.3)),
    ("path weight 2", _edit(("routing", "weight", 0), 2)),
    ("path starts elsewhere",
     lambda t: _set(t, ("routing", "nodes", 0), (t["routing"]["src"][0] + 1) % 8)),
    ("commodity_ptr short", lambda t: _set(t, ("routing", "commodity_ptr"), [0])),
    ("objective -1", _edit(("objective_s",), -1.0)),
    ("gap as a string", _edit(("gap",), "0")),
    ("link_bandwidth 0", _edit(("link_bandwidth",), 0)),
    ("unknown key", _edit(("colour",), "red")),
    ("routing missing", lambda t: {k: v for k, v in t.items() if k != "routing"}),
    ("not an object", lambda t: [t]),
    ("reserved_ports short", _edit(("reserved_ports",), [0])),
    ("link_bandwidth 1e-300", _edit(("link_bandwidth",), 1e-300)),
    ("path crossing a hop twice", _revisit),
    ("prewired not among the circuits", _edit(("prewired",), [[0, 4, 1]])),
    ("reserved ports on top of full circuits", _edit(("reserved_ports",), [1] * 8)),
    ("collective algorithm tree", _edit(("collectives",), [_collective(algorithm="tree")])),
    ("collective transfer to itself", _edit(("collectives",), [_collective(dst=[0])])),
    ("collective member beyond servers", _edit(("collectives",), [_collective(members=[0, 99])])),
    ("collective phase unknown", _edit(("collectives",), [_collective(phase="nope")])),
    ("priority class unknown", _edit(("priority",), ["gold"])),
    ("priority class twice", _edit(("priority",), ["mp", "mp"])),
    ("priority empty", _edit(("priority",), [])),
    ("priority a string", _edit(("priority",), "mp")),
]  # fmt: skip
_HYBRID = _DESIGN + [
    ("electrical family torus", _edit(("electrical", "family"), "torus")),
    ("electrical servers 9", _edit(("electrical", "servers"), 9)),
    ("electrical radix '64'", _edit(("electrical", "radix"), "64")),
    ("device laser", _edit(("device",), "laser")),
    ("routing node beyond fabric", _edit(("routing", "nodes", 1), 10**6)),
    ("electrical port_bandwidth 1e-300", _edit(("electrical", "port_bandwidth"), 1e-300)),
]
_FLOWS = [
    ("capacity as a string", _edit(("links", 0, "capacity"), "1e10")),
    ("capacity 0", _edit(("links", 0, "capacity"), 0)),
    ("bytes -1", _edit(("flows", 0, "bytes"), -1)),
    ("bytes true", _edit(("flows", 0, "bytes"), True)),
    ("no paths", _edit(("flows", 0, "paths"), [])),
    ("duplicate link id", _edit(("links", 1, "id"), "a")),
    ("unknown after", _edit(("flows", 0, "after"), ["nope"])),
    ("weights not summing to 1", _edit(("flows", 1, "paths", 0, "weight"), 0.5)),
    ("link twice in a path", _edit(("flows", 0, "paths", 0, "links"), ["a", "a"])),
    ("id true", _edit(("flows", 0, "id"), True)),
    ("cycle", _edit(("flows", 0, "after"), [3])),
    ("unknown key", _edit(("flows", 0, "speed"), 1)),
    ("root a list", lambda t: [t]),
    ("unknown link", _edit(("flows", 2, "paths", 0, "links", 0), "q")),
    # finite but absurd: the finish time overflows (numpy's overflow warning is not a 2nd line)
    ("latency 1e308", _edit(("links", 0, "latency"), 1e308)),
]
_PLAN_COMMON = [
    ("servers 10**9", _edit(("cluster", "servers"), 10**9)),
    ("servers 0", _edit(("cluster", "servers"), 0)),
    ("servers as a string", _edit(("cluster", "servers"), "8")),
    ("servers 8.0", _edit(("cluster", "servers"), 8.0)),
    ("unknown section", _edit(("extras",), {"a": 1})),
    ("precision a string", _edit(("precision",), "x")),
    ("model unknown", _edit(("model",), "gpt-5")),
    ("global batch 1.5", _edit(("parallelism", "global_batch_size"), 1.5)),
    ("not a mapping", lambda t: [t]),
    ("zero true", _edit(("parallelism", "zero"), True)),  # a strict Literal[0..3] took these
    ("zero 1.0", _edit(("parallelism", "zero"), 1.0)),
    ("zero 4", _edit(("parallelism", "zero"), 4)),
]
_PLAN_YAML = _PLAN_COMMON + [
    ("layers 10**12", _edit(("model", "layers"), 10**12)),
    ("hidden 10**12", _edit(("model", "hidden"), 10**12)),
    ("tp as a string", _edit(("parallelism", "tp"), "2")),
    ("tp 1.5", _edit(("parallelism", "tp"), 1.5)),
    ("layers alias bomb", _edit(("model", "layers"), "@@BOMB@@")),
    ("options alias bomb", _edit(("options", "expert_load"), "@@BOMB@@")),
    ("stage_tp one entry for pp 2", _edit(("parallelism", "stage_tp"), [2])),
    ("stage_tp not dividing heads", _edit(("parallelism", "stage_tp"), [2, 3])),
    ("stage_tp as a string", _edit(("parallelism", "stage_tp"), "2,2")),
    ("stage_tp 1.5", _edit(("parallelism", "stage_tp"), [2, 1.5])),
    ("resharding unknown", _edit(("options", "resharding"), "gather")),
]
_CIRCUITS_JSON = [
    ("count 1.5", _edit(("circuits", 1, 2), 1.5)),
    ("id as a string", _edit(("circuits", 0, 1), "1")),
    ("id true", _edit(("circuits", 0, 0), True)),
    ("count -1", _edit(("circuits", 1, 2), -1)),
    ("self circuit", _edit(("circuits", 0), [2, 2])),
    ("four fields", _edit(("circuits", 0), [0, 1, 1, 1])),
    ("no circuit", _edit(("circuits",), [])),
    ("empty list", lambda t: []),
    ("empty object", lambda t: {}),
    ("unknown key", _edit(("x",), 1)),
    ("another document", lambda t: {"model": "vgg16"}),
    ("beyond servers", _edit(("circuits", 0, 1), 8)),
]
_CIRCUITS_TEXT = [
    ("header only", _text("u v count\n")),
    ("empty", _text("")),
    ("comments only", _text("# nothing\n")),
    ("fraction", _text("0 1.5\n")),
    ("letters", _text("0 1\n1 x\n")),
    ("a plan", _text("model: vgg16\ncluster: {servers: 8}\n")),
    ("four fields", _text("0 1 2 3\n")),
    ("beyond servers", _text("0 8\n")),
    ("negative", _text("0 -1\n")),
    ("unicode digit", _text("0 \u0663\n")),
    ("huge", _text("0 99999999999999999999999\n")),
    # issue 30 (outside campaign): a plus sign is not an ASCII integer, as in the fail-ports CSV
    ("plus sign", _text("+0 2\n")),
    ("plus sign count", _text("0 1 +2\n")),
]
_PREWIRED_CSV = [
    ("no header", _text("0,1,1\n")),
    ("short header", _text("u,v\n0,1\n")),
    ("letters", _text("u,v,count\n0,1,x\n")),
    ("fraction", _text("u,v,count\n0,1,1.0\n")),
    ("two fields", _text("u,v,count\n0,1\n")),
    ("beyond servers", _text("u,v,count\n0,99,1\n")),
    ("self", _text("u,v,count\n3,3,1\n")),
    ("empty", _text("")),
    ("a plan", _text("model: vgg16\n")),
    # blank lines before the header were dropped one by one (quadratic: 10^6 of them hung)
    ("blank lines first", _text("\n" * 1_000 + "u,v,count\n0,1,x\n")),
    # issue 30: only the header (nothing pre-wired: leave --prewired out), a plus sign
    ("header only", _text("u,v,count\n")),
    ("header only upper case", _text("U,V,COUNT\n")),
    ("plus sign", _text("u,v,count\n+0,1,1\n")),
]
_PREWIRED_JSON = [
    ("two fields", _edit((0,), [0, 1])),
    ("count as a string", _edit((0, 2), "1")),
    ("fraction", _edit((0, 2), 1.5)),
    ("negative", _edit((0, 0), -1)),
    ("true", _edit((0, 1), True)),
    ("an object", lambda t: {"a": 1}),
    ("beyond servers", _edit((0, 1), 99)),
    ("empty list", lambda t: []),  # issue 30: as the header-only CSV
]
_PRICES = [
    ("capex as a string", _edit(("fibre", "capex_usd"), "5")),
    ("capex -1", _edit(("fibre", "capex_usd"), -1)),
    ("speed key fast", lambda t: {**t, "transceiver": {"fast": {"capex_usd": 1, "power_w": 1}}}),
    ("speed 0", lambda t: {**t, "transceiver": {0: {"capex_usd": 1, "power_w": 1}}}),
    ("unknown item", _edit(("laser",), {"capex_usd": 1, "power_w": 1})),
    ("entry extra key", _edit(("fibre", "colour"), "red")),
    ("version a string", _edit(("version",), "1")),
    ("empty catalogue", _edit(("switch_catalogue",), [])),
    ("entry a list", _edit(("fibre",), [1, 2])),
    ("power .inf", _edit(("fibre", "power_w"), "@@INF@@")),
    ("alias bomb", _edit(("ocs_port", "source"), "@@BOMB@@")),
    ("not a mapping", lambda t: [t]),
    ("capex base-60 1:30", _edit(("fibre", "capex_usd"), "@@SEXA@@")),  # YAML 1.1 reads 90
]
_CLUSTER_JOBS = [
    ("duplicate name", _edit(("jobs", 1, "name"), "vision")),
    ("overlapping servers", _edit(("jobs", 0, "servers"), [4, 5, 6, 7])),
    ("too many servers", _edit(("jobs", 0, "plan", "cluster", "servers"), 16)),
    ("servers fewer than the plan's", _edit(("jobs", 1, "servers"), [5, 6])),
    ("server beyond the cluster", _edit(("jobs", 1, "servers"), [5, 6, 99])),
    ("repeated server", _edit(("jobs", 1, "servers"), [5, 5, 6])),
    ("negative server", _edit(("jobs", 1, "servers", 0), -1)),
    ("server as a string", _edit(("jobs", 1, "servers", 0), "5")),
    ("unknown plan", _edit(("jobs", 0, "plan"), "no-such-plan")),
    ("missing plan file", _edit(("jobs", 0, "plan"), "missing.yaml")),
    ("plan a number", _edit(("jobs", 0, "plan"), 7)),
    ("plan dp 0", _edit(("jobs", 0, "plan", "parallelism", "dp"), 0)),
    ("empty name", _edit(("jobs", 0, "name"), "")),
    ("name a number", _edit(("jobs", 0, "name"), 3)),
    ("no jobs", _edit(("jobs",), [])),
    ("job without plan", _edit(("jobs", 0), {"name": "x"})),
    ("job extra key", _edit(("jobs", 0, "gpus"), 4)),
    ("a list of names", lambda t: [j["name"] for j in t["jobs"]]),
    ("a plan, not jobs", lambda t: t["jobs"][0]["plan"]),
]
_CLUSTER_ARRIVALS = [
    ("depart unknown", _edit(("events", 0, "depart"), "ghost")),
    ("depart twice", _edit(("events", 2, "depart"), "vision")),
    ("time going back", _edit(("events", 1, "time_s"), 0.5)),
    ("negative time", _edit(("events", 0, "time_s"), -1.0)),
    ("time as a string", _edit(("events", 0, "time_s"), "1")),
    ("time .inf", _edit(("events", 0, "time_s"), "@@INF@@")),
    ("arrive and depart", _edit(("events", 0, "arrive"), {"name": "x", "plan": "dlrm"})),
    ("neither", _edit(("events", 0), {"time_s": 1.0})),
    ("arrive a running name", _edit(("events", 1, "arrive", "name"), "small")),
    ("arrival too big", _edit(("events", 1, "arrive", "plan", "cluster", "servers"), 8)),
    ("arrive on held servers", _edit(("events", 1, "arrive", "servers"), [3, 4, 5, 6, 7])),
    ("arrive unknown plan", _edit(("events", 1, "arrive", "plan"), "no-such-plan")),
    ("no events", _edit(("events",), [])),
    ("event extra key", _edit(("events", 0, "note"), "x")),
    ("a jobs file", lambda t: {"jobs": [{"name": "a", "plan": "dlrm"}]}),
]
_ADVISE_JOBS = [
    ("weight 0", _edit((0, "weight"), 0)),
    ("weight negative", _edit((0, "weight"), -1.5)),
    ("weight .inf", _edit((0, "weight"), "@@INF@@")),
    ("weight a string", _edit((0, "weight"), "2")),
    ("unknown plan", _edit((0, "plan"), "no-such-plan")),
    ("missing plan file", _edit((0, "plan"), "missing.yaml")),
    ("plan a number", _edit((0, "plan"), 7)),
    ("empty plan", _edit((0, "plan"), "")),
    ("job without plan", _edit((0,), {"weight": 1.0})),
    ("job extra key", _edit((0, "gpus"), 4)),
    ("job a string", _edit((0,), "dlrm")),
    ("no jobs", lambda t: []),
    ("same plan twice", lambda t: [t[0], t[0]]),
]
_C = ("cluster",)
_PLAN_FIELDS = [
    ("efficiency 0", _edit((*_C, "efficiency"), 0)),
    ("efficiency above 1", _edit((*_C, "efficiency"), 1.5)),
    ("efficiency .inf", _edit((*_C, "efficiency"), "@@INF@@")),
    ("efficiency a string", _edit((*_C, "efficiency"), "0.5")),
    ("gpu unknown name", _edit((*_C, "gpu"), "no-such-gpu")),
    ("gpu empty name", _edit((*_C, "gpu"), "")),
    ("gpu a number", _edit((*_C, "gpu"), 7)),
    ("inline gpu tflops 0", _edit((*_C, "gpu", "bf16_tflops"), 0)),
    ("inline gpu tflops .inf", _edit((*_C, "gpu", "bf16_tflops"), "@@INF@@")),
    (
        "inline gpu without hbm",
        lambda t: {
            **t,
            "cluster": {
                **t["cluster"],
                "gpu": {k: v for k, v in t["cluster"]["gpu"].items() if k != "hbm_gb"},
            },
        },
    ),  # fmt: skip
    ("inline gpu extra key", _edit((*_C, "gpu", "tdp_w"), 700)),
    ("inline gpu scale-up domain 0", _edit((*_C, "gpu", "scale_up_domain"), 0)),
    ("stage layers not summing to layers", _edit(("parallelism", "stage_layers"), [3, 4])),
    ("stage layers of another stage count", _edit(("parallelism", "stage_layers"), [2, 3, 3])),
    ("stage layers with 0", _edit(("parallelism", "stage_layers"), [0, 8])),
    ("stage layers with vpp 2", _edit(("parallelism", "vpp"), 2)),
    ("stage layers a number", _edit(("parallelism", "stage_layers"), 8)),
    ("memory-bound kernels unknown", _edit(("options", "memory_bound_kernels"), "all")),
    ("memory-bound kernels true", _edit(("options", "memory_bound_kernels"), True)),
    ("overlap a string", _edit(("options", "overlap_grad_reduce"), "yes")),
    ("overlap a number", _edit(("options", "overlap_grad_reduce"), 1)),
]
_G = ("gpus", "fuzz-gpu")
_HARDWARE = [
    ("tflops 0", _edit((*_G, "bf16_tflops"), 0)),
    ("tflops negative", _edit((*_G, "bf16_tflops"), -400)),
    ("tflops .inf", _edit((*_G, "bf16_tflops"), "@@INF@@")),
    ("tflops a string", _edit((*_G, "bf16_tflops"), "400")),
    ("tflops base-60 1:30", _edit((*_G, "bf16_tflops"), "@@SEXA@@")),  # YAML 1.1 reads 90
    ("efficiency above 1", _edit((*_G, "efficiency"), 1.5)),
    ("efficiency 0", _edit((*_G, "efficiency"), 0)),
    ("scale-up domain 0", _edit((*_G, "scale_up_domain"), 0)),
    ("scale-up domain a fraction", _edit((*_G, "scale_up_domain"), 7.5)),
    (
        "hbm missing",
        lambda t: {
            **t,
            "gpus": {"fuzz-gpu": {k: v for k, v in t["gpus"]["fuzz-gpu"].items() if k != "hbm_gb"}},
        },
    ),
    ("gpu extra key", _edit((*_G, "tdp_w"), 700)),
    ("gpu a list", _edit(_G, [1, 2])),
    ("empty name", lambda t: {**t, "gpus": {"": t["gpus"]["fuzz-gpu"]}}),
    ("unknown section", _edit(("cpus",), {})),
    ("version 2", _edit(("version",), 2)),
    ("version a string", _edit(("version",), "1")),
    ("switch beyond its asic", _edit(("switches", "fuzz-switch", "radix"), 64)),
    ("radix 1", _edit(("switches", "fuzz-switch", "radix"), 1)),
    ("optical kind unknown", _edit(("optical", "fuzz-ocs", "kind"), "mems")),
    ("reconfig 0", _edit(("optical", "fuzz-ocs", "reconfig_s"), 0)),
    ("nic capex negative", _edit(("nics", "fuzz-nic", "capex_usd"), -1)),
    ("alias bomb", _edit((*_G, "source"), "@@BOMB@@")),
    ("not a mapping", lambda t: [t]),
    ("the gpu renamed", lambda t: {**t, "gpus": {"other-gpu": t["gpus"]["fuzz-gpu"]}}),
]
TARGETED: dict[str, list[tuple[str, Edit]]] = {
    "hardware": _HARDWARE,
    "design": _DESIGN,
    "design-hybrid": _HYBRID,
    "flows": _FLOWS,
    "plan-yaml": _PLAN_YAML,
    "plan-json": _PLAN_COMMON,
    "circuits-json": _CIRCUITS_JSON,
    "circuits-text": _CIRCUITS_TEXT,
    "prewired-csv": _PREWIRED_CSV,
    "prewired-json": _PREWIRED_JSON,
    "prices": _PRICES,
    "cluster-jobs": _CLUSTER_JOBS,
    "cluster-arrivals": _CLUSTER_ARRIVALS,
    "advise-jobs": _ADVISE_JOBS,
    "plan-fields": _PLAN_FIELDS,
}
"""Per kind: known-wrong edits of the decoded seed (every one must end in exit 2)."""


def targeted_case(kind: Kind, index: int) -> Case:
    """The ``index``-th known-wrong edit of ``kind``'s seed."""
    label, edit = TARGETED[kind.name][index]
    raw = kind.seed_bytes().decode("utf-8")
    if kind.fmt == "text":
        tree: Any = raw
    else:
        tree = json.loads(raw) if kind.fmt == "json" else yaml.safe_load(raw)
    out = edit(copy.deepcopy(tree))
    if isinstance(out, tuple) and out and out[0] == "@@TEXT@@":
        return Case(out[1].encode(), f"targeted:{label}", True)
    text = serialise(out, kind.fmt, raw={"BOMB": bomb_text(), "INF": ".inf", "SEXA": "1:30"})
    return Case(text.encode(), f"targeted:{label}", True)


@st.composite
def mutations(draw, kind: Kind) -> Case:
    """A mutated file of ``kind`` (module docstring)."""
    raw = kind.seed_bytes()
    family = draw(st.sampled_from(["bytes", "structure", "targeted"]))
    if family == "bytes":
        return _bytes(draw, raw)
    if family == "targeted":
        return targeted_case(kind, draw(st.integers(0, len(TARGETED[kind.name]) - 1)))
    if kind.fmt == "text":
        return _lines(draw, kind, raw)
    return _structure(draw, kind, raw)
