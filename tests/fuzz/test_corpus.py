"""Every file of the mutation corpus (``tests/fuzz/corpus/<kind>/``, written by
``make_corpus.py``) ends in exit 2 with exactly one ``error:`` line and nothing on stdout, through
the in-process CLI; a few also through a real subprocess (the console as a user meets it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fuzz_kinds import KINDS, run_case

CORPUS = Path(__file__).resolve().parent / "corpus"
FILES = sorted(p for p in CORPUS.glob("*/*") if p.is_file())


def test_corpus_covers_every_kind():
    assert {p.parent.name for p in FILES} == set(KINDS)
    assert len(FILES) >= 200


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_corpus_files_end_in_one_error_line(kind):
    bad = []
    for path in sorted((CORPUS / kind).iterdir()):
        out = run_case(KINDS[kind], path)
        if out.problem or out.exit_code != 2:
            bad.append((path.name, out.exit_code, out.problem or out.stdout[:200]))
    assert not bad, bad


@pytest.mark.parametrize(
    "name",
    [
        "plan-yaml/*-g-alias-bomb-500-bytes.yaml",
        "design/*-t-ring-weight-5.json",
        "flows/*-g-nan.json",
        "circuits-text/*-t-a-plan.txt",
    ],
)
def test_corpus_in_a_subprocess(name):
    (path,) = CORPUS.glob(name)
    kind = KINDS[path.parent.name]
    r = subprocess.run(
        [sys.executable, "-m", "topoopt.app.cli", *kind.argv(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.stderr
