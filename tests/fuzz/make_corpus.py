"""Write the mutation corpus ``tests/fuzz/corpus/<kind>/``: known-wrong files of every input kind.

Run ``python tests/fuzz/make_corpus.py`` (from the repository root) to rebuild it; the output is
deterministic. Each file is one of

- a targeted edit of the kind's seed (:data:`fuzz_mutations.TARGETED`: the faults the issue
  lists, per kind);
- a generic fault every kind must refuse: duplicated keys, NaN/Infinity, integers beyond int64,
  nesting deeper than the limit, an unknown key, a YAML alias bomb (500 bytes, 10^9 values),
  NUL bytes, bytes that are not UTF-8, UTF-16 text, an empty file, random binary data.

``test_corpus.py`` runs every file through the CLI and expects exit 2 and one ``error:`` line.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import yaml  # noqa: E402
from fuzz_kinds import KINDS, Kind  # noqa: E402
from fuzz_mutations import TARGETED, bomb_text, serialise, targeted_case  # noqa: E402

CORPUS = HERE / "corpus"


def _first_number_path(tree, at=()):
    if isinstance(tree, bool):
        return None
    if isinstance(tree, int | float):
        return at
    if isinstance(tree, dict):
        items = list(tree.items())
    else:
        items = list(enumerate(tree)) if isinstance(tree, list) else []
    for k, v in items:
        found = _first_number_path(v, (*at, k))
        if found is not None:
            return found
    return None


def _put(tree, path, value):
    node = tree
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return tree


def generic_cases(kind: Kind) -> list[tuple[str, bytes]]:
    """Known-wrong files of ``kind`` that are not specific to it."""
    raw = kind.seed_bytes()
    text = raw.decode("utf-8")
    rng = random.Random(sum(map(ord, kind.name)))
    out = [
        ("nul-byte", raw[: len(raw) // 2] + b"\x00" + raw[len(raw) // 2 :]),
        ("not-utf8", raw[: len(raw) // 3] + b"\xff\xfe" + raw[len(raw) // 3 :]),
        ("utf16", text.encode("utf-16")),
        ("empty", b""),
        ("binary", b"\x00" + bytes(rng.randrange(256) for _ in range(200))),
        ("bom-then-binary", b"\xef\xbb\xbf\x00\x01\x02"),
    ]
    if kind.fmt == "text":
        lines = text.splitlines()
        rows = [i for i, x in enumerate(lines) if x[:1].isdigit()]
        for label, token in (("fraction", "1.5"), ("huge", "9" * 30), ("letters", "abc")):
            mutated = list(lines)
            sep = "," if "," in mutated[rows[-1]] else " "
            cells = mutated[rows[-1]].split(sep)
            cells[1] = token
            mutated[rows[-1]] = sep.join(cells)
            out.append((label, ("\n".join(mutated) + "\n").encode()))
        return out
    tree = json.loads(text) if kind.fmt == "json" else yaml.safe_load(text)
    num = _first_number_path(tree)
    if isinstance(tree, dict):
        out.append(("duplicate-key", serialise(tree, kind.fmt, dup=()).encode()))
        out.append(("unknown-key", serialise({**tree, "zz_unknown": 1}, kind.fmt).encode()))
        first = next(iter(tree))
        deep = dict(tree)
        deep[first] = "@@D@@"
        out.append(("deep", serialise(deep, kind.fmt, raw={"D": "[" * 100 + "]" * 100}).encode()))
    if num is not None:
        for label, token in (("int64-overflow", str(2**63)), ("huge-int", str(10**40))):
            t = _put(json.loads(json.dumps(tree)), num, "@@N@@")
            out.append((label, serialise(t, kind.fmt, raw={"N": token}).encode()))
        for label, token in (("nan", "NaN"), ("infinity", "-Infinity")):
            if kind.fmt == "yaml":
                token = {"NaN": ".nan", "-Infinity": "-.inf"}[token]
            t = _put(json.loads(json.dumps(tree)), num, "@@N@@")
            out.append((label, serialise(t, kind.fmt, raw={"N": token}).encode()))
    if kind.fmt == "yaml" and num is not None:
        t = _put(json.loads(json.dumps(tree)), num, "@@B@@")
        out.append(("alias-bomb", serialise(t, kind.fmt, raw={"B": bomb_text()}).encode()))
        bomb = bomb_text()
        out.append(("alias-bomb-500-bytes", f"x: {bomb}\n".encode()))
    return out


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def main() -> None:
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    total = 0
    for name, kind in sorted(KINDS.items()):
        folder = CORPUS / name
        folder.mkdir(parents=True)
        cases = [(f"t-{_slug(lbl)}", targeted_case(kind, i).data) for i, (lbl, _) in
                 enumerate(TARGETED[name])]  # fmt: skip
        cases += [(f"g-{lbl}", data) for lbl, data in generic_cases(kind)]
        for i, (label, data) in enumerate(cases):
            (folder / f"{i:03d}-{label}{kind.suffix}").write_bytes(data)
        total += len(cases)
        print(f"{name}: {len(cases)} files")
    print(f"total: {total} files in {CORPUS}")


if __name__ == "__main__":
    main()
