"""``compare`` simulates every row through the symmetry reduction (issue 25: every study uses it,
so a 16,384-GPU comparison runs at all), exactly: the reduced rows equal the plain ones, each
row says whether the reduction was used, and ``--no-reduction`` runs the plain model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from topoopt.app.studies.compare import compare
from traffic.build import workload_from_plan

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("iteration_s", "comm_s", "exposed_comm_s", "comm_busy_s", "comm_alone_s")


def _workload():
    """A data- and pipeline-parallel job on 8 servers of 2 GPUs: replicas and stages repeat."""
    par = {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 8}
    model = {"layers": 4, "hidden": 512, "heads": 8, "vocab": 1024, "seq_len": 256}
    return workload_from_plan(
        {"model": model, "parallelism": par, "cluster": {"servers": 8, "gpus_per_server": 2}}
    )


@pytest.fixture(scope="module")
def both():
    w = _workload()
    names = ["ideal", "fat-tree", "fat-tree-oversub", "torus", "expander"]
    kw = dict(degree=4, link_bandwidth=12.5e9, seed=3)
    return compare(w, names, **kw), compare(w, names, reduction=False, **kw)


def test_reduced_rows_equal_the_plain_ones(both):
    red, plain = both
    a, b = red.table.set_index("fabric"), plain.table.set_index("fabric")
    assert list(a.index) == list(b.index)
    for nm in a.index:
        for col in FIGURES:
            x, y = float(a.loc[nm, col]), float(b.loc[nm, col])
            assert abs(x - y) <= 1e-9 * abs(y), (nm, col, x, y)
    assert red.params["reduction"] is True and plain.params["reduction"] is False


def test_each_row_says_whether_the_reduction_was_used(both):
    red, plain = both
    a = red.table.set_index("fabric")["reduction"]
    # the switched fabrics and the torus are symmetric: classes of replicas and stages
    for nm in ("ideal", "fat-tree", "fat-tree-oversub", "torus"):
        assert a[nm] == "on", (nm, a[nm])
    assert a["expander"] == "on" or a["expander"].startswith("off: ")
    assert set(plain.table["reduction"]) == {"off: not asked (--no-reduction)"}


def test_the_cli_takes_no_reduction(tmp_path):
    plan = tmp_path / "p.yaml"
    plan.write_text(
        "model: {layers: 4, hidden: 512, heads: 8, vocab: 1024, seq_len: 256}\n"
        "parallelism: {tp: 2, pp: 2, dp: 2, global_batch_size: 4}\n"
        "cluster: {servers: 4, gpus_per_server: 2}\n"
    )
    docs = {}
    for flag in ("--reduction", "--no-reduction"):
        out = subprocess.run(
            [sys.executable, "-m", "topoopt", "compare", str(plan), "--fabrics",
             "ideal,fat-tree", "--degree", "2", "--json", flag],
            capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": ""},
            check=True,
        )  # fmt: skip
        docs[flag] = json.loads(out.stdout)
    on, off = docs["--reduction"], docs["--no-reduction"]
    assert [r["reduction"] for r in on["rows"]] == ["on", "on"]
    assert {r["reduction"] for r in off["rows"]} == {"off: not asked (--no-reduction)"}
    for r, s in zip(on["rows"], off["rows"], strict=True):
        assert abs(r["iteration_s"] - s["iteration_s"]) <= 1e-9 * s["iteration_s"]
