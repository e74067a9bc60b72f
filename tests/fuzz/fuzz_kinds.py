"""The input kinds the fuzz tests mutate: a valid seed file each, the CLI command that reads it,
and what a valid result of that command looks like.

The CLI runs in-process through click's runner on the typer application converted once (a
typer ``CliRunner`` converts the application on every call, ~0.1 s). Every case must end in
exit 0 with a valid JSON result, or exit 2 with exactly one ``error:`` line on stderr and nothing
on stdout; anything else (a traceback, another exit code, a case running past
:data:`CASE_SECONDS`) is a failure.
"""

from __future__ import annotations

import json
import math
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import typer
from click.testing import CliRunner

from topoopt.app.cli.app import app

__all__ = [
    "SEEDS",
    "KINDS",
    "Kind",
    "Outcome",
    "run_case",
    "STATS",
    "CASE_SECONDS",
]

SEEDS = Path(__file__).resolve().parent / "seeds"
CASE_SECONDS = 60
"""A case running longer than this is a hang (the slowest valid case takes ~0.3 s)."""

COMMAND = typer.main.get_command(app)
RUNNER = CliRunner()
STATS: dict[str, Counter] = {}
"""Per kind: cases, exit0, exit2 and crash counts of this session (printed by conftest)."""


@dataclass(frozen=True)
class Kind:
    """One input kind: its seed, file suffix, format and command."""

    name: str
    seed: str
    suffix: str
    fmt: str  # "json", "yaml" or "text"
    args: tuple[str, ...]  # "{}" is replaced by the input path
    keys: tuple[str, ...]  # keys a valid result has
    env_var: str | None = None  # the input is named by this environment variable, not an arg

    def argv(self, path: Path) -> list[str]:
        return [str(path) if a == "{}" else a for a in self.args]

    def env(self, path: Path) -> dict[str, str] | None:
        return None if self.env_var is None else {self.env_var: str(path)}

    def seed_bytes(self) -> bytes:
        return (SEEDS / self.seed).read_bytes()


_PLAN = str(SEEDS / "plan.json")
_SIM = ("simulate", _PLAN, "--design", "{}", "--json")
_DIRECT = ("fabric", "direct", "--servers", "8", "--degree", "4", "--circuits", "{}", "--json")
_DESIGN = ("design", _PLAN, "--degree", "2", "--solver", "topoopt", "--prewired", "{}", "--json")
_SIM_KEYS = ("iteration_s", "compute_s", "comm_s", "exposed_comm_s")
_CLUSTER = ("cluster", "--servers", "8", "--degree", "2", "--json")
_CLUSTER_ARR = ("cluster", str(SEEDS / "cluster-jobs.yaml"), *_CLUSTER[1:], "--arrivals", "{}")
_ADVISE = ("advise", "{}", "--gpus", "16", "--degree", "4", "--link-gbps", "100", "--time-limit",
           "1", "--json")  # fmt: skip
_FAB_KEYS = ("servers", "capex_usd", "power_w", "bisection_bandwidth")

KINDS = {
    k.name: k
    for k in (
        Kind("plan-yaml", "plan.yaml", ".yaml", "yaml", ("traffic", "{}", "--json"), ("gpus",)),
        Kind("plan-json", "plan.json", ".json", "json", ("traffic", "{}", "--json"), ("gpus",)),
        Kind("design", "design.json", ".json", "json", _SIM, _SIM_KEYS),
        Kind("design-hybrid", "design-hybrid.json", ".json", "json", _SIM, _SIM_KEYS),
        Kind("flows", "flows.json", ".json", "json", ("netsim", "{}", "--json"), ("makespan",)),
        Kind("circuits-text", "circuits.txt", ".txt", "text", _DIRECT, _FAB_KEYS),
        Kind("circuits-json", "circuits.json", ".json", "json", _DIRECT, _FAB_KEYS),
        Kind("prewired-csv", "prewired.csv", ".csv", "text", _DESIGN, ("objective_s",)),
        Kind("prewired-json", "prewired.json", ".json", "json", _DESIGN, ("objective_s",)),
        Kind("cluster-jobs", "cluster-jobs.yaml", ".yaml", "yaml", (*_CLUSTER, "{}"), ("jobs",)),
        Kind(
            "cluster-arrivals",
            "cluster-arrivals.yaml",
            ".yaml",
            "yaml",
            _CLUSTER_ARR,
            ("jobs", "events"),
        ),
        Kind(
            "advise-jobs",
            "advise-jobs.yaml",
            ".yaml",
            "yaml",
            _ADVISE,
            ("verdict", "rows", "pareto", "equal_capex", "equal_iteration"),
        ),
        Kind(
            "hardware",
            "hardware.yaml",
            ".yaml",
            "yaml",
            ("simulate", _PLAN, "--fabric", "ideal", "--gpu", "fuzz-gpu", "--json"),
            ("iteration_s", "gpu"),
            env_var="TOPOOPT_HARDWARE",
        ),
        Kind(
            "plan-fields",
            "plan-fields.yaml",
            ".yaml",
            "yaml",
            ("simulate", "{}", "--fabric", "ideal", "--json"),
            ("iteration_s", "gpu", "mfu"),
        ),
        Kind(
            "prices",
            "prices.yaml",
            ".yaml",
            "yaml",
            ("fabric", "ideal", "--servers", "4", "--prices", "{}", "--json"),
            _FAB_KEYS,
        ),
    )
}


@dataclass(frozen=True)
class Outcome:
    """How one case ended."""

    exit_code: int
    stdout: str
    stderr: str
    problem: str  # "" when the case ended as it must


class _Hang(Exception):
    pass


def _alarm(signum, frame):  # pragma: no cover - only on a hang
    raise _Hang(f"no result after {CASE_SECONDS} s")


def _finite(x) -> bool:
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    if isinstance(x, list):
        return all(_finite(v) for v in x)
    return True


def run_case(kind: Kind, path: Path) -> Outcome:
    """Run ``kind``'s command on ``path`` in-process and judge the ending (module docstring)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        r = RUNNER.invoke(COMMAND, kind.argv(path), env=kind.env(path))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    out, err, code = r.stdout, r.stderr, r.exit_code
    stats = STATS.setdefault(kind.name, Counter())
    stats["cases"] += 1
    problem = ""
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        problem = f"{type(r.exception).__name__}: {r.exception}"[:500]
    elif code == 2:
        lines = err.strip().splitlines()
        if out or len(lines) != 1 or not lines[0].startswith("error: "):
            problem = f"exit 2 without exactly one error line: {err[-500:]!r} / {out[:200]!r}"
    elif code == 0:
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or any(k not in doc for k in kind.keys):
            problem = f"exit 0 without a valid JSON result: {out[:300]!r}"
        elif not _finite(doc):
            problem = "exit 0 with a non-finite number in the result"
    else:
        problem = f"exit {code}: {err[-500:]!r}"
    if problem:
        stats["crashes"] += 1
    else:
        stats[f"exit{code}"] += 1
    return Outcome(code, out, err, problem)
