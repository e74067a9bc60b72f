"""The rounding check (``--rounding-check N``, :mod:`topoopt.flowsim.conditioning`): the nudged
fabric is the nominal one with every link's bandwidth scaled (checked against the closed form of
a transfer alone), the nudges are seeded, the summary is the runs' own spread, and ``simulate``
and ``compare`` report it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from topoopt.app.studies.compare import ROUNDING_COLUMNS, compare, json_rows
from topoopt.app.studies.simulate import simulate_plan
from topoopt.fabrics import fat_tree, torus
from topoopt.flowsim.collectives import communication_time
from topoopt.flowsim.conditioning import (
    LARGEST,
    SMALLEST,
    nudged_fabric,
    nudges,
    summary,
)
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan
from traffic.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def _plan(servers: int = 8, gpus_per_server: int = 2) -> dict:
    """Data and pipeline parallel on ``servers`` servers: replicas and stages repeat."""
    tp = gpus_per_server
    par = {"tp": tp, "pp": 2, "dp": servers // 2, "micro_batch_size": 1}
    par["global_batch_size"] = 2 * par["dp"]
    model = {"layers": 4, "hidden": 512, "heads": 8, "vocab": 1024, "seq_len": 256}
    cluster = {"servers": servers, "gpus_per_server": gpus_per_server}
    return {"model": model, "parallelism": par, "cluster": cluster}


def test_a_transfer_alone_scales_as_latency_plus_bytes_over_the_nudged_bandwidth():
    """One GPU a server, data parallel only: the communication alone crosses fabric links only,
    so with every link scaled by ``1 + e`` it is ``a + b / (1 + e)`` (latency plus bytes over
    bandwidth). Two scaled runs give ``a`` and ``b``; a third must lie on that curve, and the
    nominal run too."""
    plan = {
        "model": {"layers": 4, "hidden": 512, "heads": 8, "vocab": 1024, "seq_len": 256},
        "parallelism": {"dp": 8, "micro_batch_size": 1, "global_batch_size": 8},
        "cluster": {"servers": 8, "gpus_per_server": 1},
    }
    w = workload_from_plan(plan)
    fab = fat_tree(4, 8)

    def t(e):
        f = fab if e == 0 else nudged_fabric(fab, e)
        return communication_time(w, f).total_s

    x1, x2 = 1.0 / 1.5, 1.0 / 3.0  # e = 0.5 and 2
    t1, t2 = t(0.5), t(2.0)
    b = (t1 - t2) / (x1 - x2)
    a = t1 - b * x1
    assert b > 0 and a >= 0
    for e in (0.0, 0.25, 1e-13):
        assert t(e) == pytest.approx(a + b / (1.0 + e), rel=1e-12), e


def test_a_zero_nudge_is_the_nominal_run_bit_for_bit():
    w = workload_from_plan(_plan())
    fab = torus((2, 4), gpus_per_server=2)
    got = simulate_iteration(w, nudged_fabric(fab, 0.0), reduction=True).iteration_s
    assert got == simulate_iteration(w, fab, reduction=True).iteration_s


def test_nudges_are_seeded_bounded_and_of_both_signs():
    e = nudges(8, seed=5)
    assert np.array_equal(e, nudges(8, seed=5))
    assert not np.array_equal(e, nudges(8, seed=6))
    assert np.all((np.abs(e) >= SMALLEST) & (np.abs(e) <= LARGEST))
    assert (e > 0).sum() == 4 and (e < 0).sum() == 4
    assert nudges(0).shape == (0,)
    for bad in (-1, 65, 2.5, True, "3"):
        with pytest.raises(InputError, match="rounding-check"):
            nudges(bad)


def test_the_summary_is_the_spread_of_the_runs():
    s = summary(2.0, [2.0 + 4e-3, 2.0 - 2e-3], [1e-15, -1e-14])
    assert s["spread"] == pytest.approx(6e-3 / 2.0, rel=1e-12)
    assert s["min_s"] == 2.0 - 2e-3 and s["max_s"] == 2.0 + 4e-3
    assert s["mean_s"] == pytest.approx(2.0 + 2e-3 / 3, rel=1e-12)
    assert s["std_s"] == pytest.approx(np.std([2.0, 2.004, 1.998]), rel=1e-12)
    assert s["conditioned"] == "ill" and s["stable_digits"] == 2
    assert "0.3 %" in s["sentence"]
    same = summary(2.0, [2.0, 2.0], [1e-15, -1e-15])
    assert same["spread"] == 0.0 and same["conditioned"] == "well"
    assert same["stable_digits"] == 15
    with pytest.raises(ValueError):
        summary(1.0, [1.0], [1e-15, 2e-15])


@pytest.fixture(scope="module")
def checked():
    return simulate_plan(
        workload_from_plan(_plan()), fabric="torus", degree=4, rounding_check=3, seed=2
    )


def test_simulate_reports_the_nudged_runs_and_they_move_by_at_most_the_nudge(checked):
    r = checked["rounding"]
    t0 = checked["iteration_s"]
    assert r["runs"] == 3 and np.array_equal(r["nudges"], nudges(3, seed=2))
    times = np.array(r["iteration_s"])
    every = np.concatenate([[t0], times])
    assert r["spread"] == (every.max() - every.min()) / t0
    # the exact answer moves by at most |e| (only the fabric's communication speeds up); this
    # small job does not amplify rounding, so a few units in the last place on top of that
    assert np.all(np.abs(times / t0 - 1) <= np.abs(r["nudges"]) + 1e-14)
    assert r["conditioned"] == "well" and r["stable_digits"] >= 12
    assert simulate_plan(workload_from_plan(_plan()), fabric="torus", degree=4)["rounding"] is None


def test_compare_adds_the_rounding_columns_and_the_sentence():
    from topoopt.app.report.verdict import rounding_sentence

    w = workload_from_plan(_plan())
    res = compare(w, ["ideal", "torus"], degree=4, seed=1, rounding_check=2)
    rows = json_rows(res.table)
    for row in rows:
        assert row["rounding_conditioned"] == "well", row
        assert 0 <= row["rounding_spread"] <= 1e-9 and row["rounding_std_s"] >= 0
    assert res.params["rounding_check"] == 2
    sentence = rounding_sentence(res.table, 2)
    assert sentence.startswith("Rounding check (2 runs a row") and "every row agrees" in sentence
    plain = compare(w, ["ideal", "torus"], degree=4, seed=1)
    assert not set(ROUNDING_COLUMNS) & set(plain.table.columns)
    assert rounding_sentence(plain.table, 0) is None
    # the check does not change the rows' own figures
    assert list(plain.table["iteration_s"]) == list(res.table["iteration_s"])


def test_the_cli_refuses_a_bad_count_in_one_line(tmp_path):
    out = tmp_path / "r.json"
    p = subprocess.run(
        [sys.executable, "-m", "topoopt", "simulate", "vgg16-dp", "--fabric", "torus",
         "--rounding-check", "100", "--json"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )  # fmt: skip
    assert p.returncode == 2 and p.stdout == "" and not out.exists()
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--rounding-check: got 100" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and json.dumps(p.stdout) == '""'
