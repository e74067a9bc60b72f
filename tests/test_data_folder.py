"""The repository carries its own test data: a fresh clone needs nothing beside it.

The TopoOpt task graphs live in ``tests/data/topoopt-taskgraphs`` with their licence and source;
their checksums are the ones ``SOURCE.md`` lists, and no test, notebook or benchmark reads a path
outside the repository (``../shared`` was the old place of the data).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "topoopt-taskgraphs"

# What reaching out of the checkout looks like in code: a path component "shared" next to "data"
# or "reference", a parents[...] walk above the repository, or "/work/shared".
OUTSIDE = re.compile(
    r"""(["']shared["']\s*/\s*["'](data|reference)["'])|(\.\./shared/data)|(/work/shared)"""
)


def test_taskgraphs_match_source_checksums():
    rows = re.findall(
        r"^\| `([^`]+\.fbuf)` \| ([\d,]+) \| `([0-9a-f]{64})` \|$",
        (DATA / "SOURCE.md").read_text(encoding="utf-8"),
        flags=re.M,
    )
    listed = {name: (int(size.replace(",", "")), sha) for name, size, sha in rows}
    on_disk = {p.name: p for p in DATA.glob("*.fbuf")}
    assert len(listed) == 7
    assert sorted(listed) == sorted(on_disk)
    for name, (size, sha) in listed.items():
        blob = on_disk[name].read_bytes()
        assert len(blob) == size, name
        assert hashlib.sha256(blob).hexdigest() == sha, name


def test_taskgraphs_carry_their_licence_and_source():
    licence = (DATA / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in licence
    source = (DATA / "SOURCE.md").read_text(encoding="utf-8")
    assert "hipersys-team/TopoOpt" in source and "Apache" in source
    readme = (ROOT / "tests" / "data" / "README.md").read_text(encoding="utf-8")
    assert "topoopt-taskgraphs/" in readme and "Apache-2.0" in readme


def test_nothing_reads_outside_the_repository():
    offenders = []
    for folder in ("tests", "benchmarks", "notebooks", "topoopt", "traffic", "solvers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                # Comments may cite the reference notes; code may not read them.
                if OUTSIDE.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_the_pattern_catches_the_old_paths():
    # The check above is only as good as its pattern: the old spellings must match it.
    old = [
        'DATA = Path(__file__).parents[2] / ".." / "shared" / "data" / "topoopt-taskgraphs"',
        'FBUF = ROOT.parent / "shared" / "data" / "topoopt-taskgraphs" / "100dlrm_16.fbuf"',
        'return Path("/work/shared/data/topoopt-taskgraphs")',
        "topoopt traffic ../shared/data/topoopt-taskgraphs/100dlrm_16.fbuf --json",
    ]
    assert all(OUTSIDE.search(s) for s in old)
    assert not OUTSIDE.search('DATA = ROOT / "tests" / "data" / "topoopt-taskgraphs"')
