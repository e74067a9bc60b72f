"""Fuzz every input kind through the CLI: mutated valid files end in exit 0 with a valid result
or exit 2 with exactly one ``error:`` line; known-wrong mutations end in exit 2.

The example budget is fixed and the generation derandomised, so every run tries the same cases
(:data:`BUDGET`, 2,670 in total, a minute or two on 2 idle cores). Failing cases are written to
``$TOPOOPT_FUZZ_FAILURES`` (a folder) when that variable is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzz_kinds import KINDS, run_case
from fuzz_mutations import TARGETED, mutations, targeted_case
from hypothesis import HealthCheck, Phase, given, settings

BUDGET = {
    "plan-yaml": 260,
    "plan-json": 220,
    "design": 320,
    "design-hybrid": 170,
    "flows": 320,
    "circuits-text": 170,
    "circuits-json": 170,
    "prewired-csv": 140,
    "prewired-json": 140,
    "prices": 260,
    "cluster-jobs": 120,
    "cluster-arrivals": 120,
    "hardware": 120,
    "advise-jobs": 40,
    "plan-fields": 100,
}
"""Hypothesis examples per kind (2,670 in total)."""


def _keep(kind_name: str, n: int, data: bytes, suffix: str) -> None:
    folder = os.environ.get("TOPOOPT_FUZZ_FAILURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{kind_name}-{n}{suffix}").write_bytes(data)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_seed_is_accepted(name, tmp_path):
    """The unmutated seed of every kind runs to a valid result (else the fuzz proves nothing)."""
    kind = KINDS[name]
    path = tmp_path / f"seed{kind.suffix}"
    path.write_bytes(kind.seed_bytes())
    out = run_case(kind, path)
    assert out.exit_code == 0 and not out.problem, (out.problem, out.stderr[-500:])


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_known_wrong_edit_is_refused(name, tmp_path):
    """Each targeted edit (the faults the issue lists, per kind) ends in exit 2 and one line."""
    kind = KINDS[name]
    bad = []
    for i in range(len(TARGETED[name])):
        case = targeted_case(kind, i)
        path = tmp_path / f"t{i}{kind.suffix}"
        path.write_bytes(case.data)
        out = run_case(kind, path)
        if out.problem or out.exit_code != 2:
            bad.append((case.op, out.exit_code, out.problem or out.stdout[:200]))
    assert not bad, bad


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_fuzz_cli(name, tmp_path):
    kind = KINDS[name]
    failures: list[tuple[str, str]] = []

    @settings(
        max_examples=BUDGET[name],
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(mutations(kind))
    def one(case):
        path = tmp_path / f"case{kind.suffix}"
        path.write_bytes(case.data)
        out = run_case(kind, path)
        if out.problem:
            failures.append((case.op, out.problem))
        elif case.known_bad and out.exit_code != 2:
            failures.append((case.op, "a known-wrong input was accepted"))
        else:
            return
        _keep(name, len(failures), case.data, kind.suffix)

    one()
    assert not failures, failures[:10]
