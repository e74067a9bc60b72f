"""Smoke test of the design benchmark suite (benchmarks/design/run.py) on tiny cases.

Checks the table's structure and its relations, not timings: one row per fabric (and the derived
best TopoOpt variant and congestion-objective joint), the ideal switch's ratios are 1, ratios are
the columns divided by the ideal's, the best TopoOpt variant is the faster one, the wins and
losses of the summary (and the searches the clock cut) are recomputed from the CSV, and bad
options exit 2.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "design"


def load(name: str):
    sys.path.insert(0, str(SUITE))
    spec = importlib.util.spec_from_file_location(f"design_{name}", SUITE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    run = load("run")
    out = tmp_path_factory.mktemp("bench") / "rows.csv"
    code = run.main(
        ["--quick", "--workloads", "vgg16,tg-dlrm-16", "--time-limit", "10", "--out", str(out)]
    )
    return run, code, pd.read_csv(out)


def test_quick_run_writes_one_row_per_fabric(quick):
    run, code, t = quick
    assert code == 0
    assert sorted(set(t["workload"])) == ["tg-dlrm-16", "vgg16"]
    derived = ["topoopt-best"] + (["joint-congestion"] if run._takes_objective() else [])
    for _, g in t.groupby(["workload", "servers", "degree"]):
        assert list(g["fabric"]) == list(run.FABRICS) + derived
        ideal = g[g["fabric"] == "ideal"].iloc[0]
        assert ideal["iter_ratio"] == 1.0 and ideal["comm_ratio"] == 1.0
        np.testing.assert_allclose(g["iter_ratio"], g["iteration_s"] / ideal["iteration_s"])
        np.testing.assert_allclose(g["comm_ratio"], g["comm_s"] / ideal["comm_s"])
        designed = g[g["fabric"].isin(["topoopt", "topoopt-released", "joint"])]
        assert designed["solver_wall_s"].notna().all() and (designed["gap"] >= -1e-12).all()
        # the best TopoOpt variant is the faster of the two, and says which one it is
        pair = g[g["fabric"].isin(["topoopt", "topoopt-released"])].set_index("fabric")
        best = g[g["fabric"] == "topoopt-best"].iloc[0]
        assert best["iteration_s"] == pair["iteration_s"].min()
        assert best["variant"] == pair["iteration_s"].idxmin()


def test_summary_lines_follow_the_table(quick):
    run, _, t = quick
    lines = run.summary_lines(t)
    key = ["workload", "servers", "degree"]
    j = t[t["fabric"] == "joint"].set_index(key)
    b = t[t["fabric"] == "topoopt-best"].set_index(key)
    f = t[t["fabric"] == "fat-tree-cost-equivalent"].set_index(key)
    i = t[t["fabric"] == "ideal"].set_index(key)
    dp = (j["comm_s"] / i["comm_s"]).loc["vgg16"].max()
    assert any(
        line.startswith(f"pure DP: max joint/ideal communication = {dp:.4f}") for line in lines
    )
    for ref, label in ((b, "best TopoOpt variant"), (f, "cost-equivalent fat-tree")):
        r = j["iteration_s"] / ref["iteration_s"]
        wins, losses = int((r < 1 - run.TIE).sum()), int((r > 1 + run.TIE).sum())
        want = (
            f"joint vs {label} (iteration): wins {wins}, ties {len(r) - wins - losses}, "
            f"losses {losses} of {len(r)} cases"
        )
        assert any(line.startswith(want) for line in lines), (want, lines)
    # the clock-cut searches are counted from the CSV's stopped_by column
    for who in ("joint", "joint-congestion"):
        rows = t[t["fabric"] == who]
        if len(rows):
            cut = int((rows["stopped_by"].fillna("") == "time limit").sum())
            want = f"{who} searches cut by the wall clock (depend on the machine's load): "
            assert any(line.startswith(f"{want}{cut} of {len(rows)} cases") for line in lines)
    assert set(t.loc[t["fabric"] == "ideal", "stopped_by"].fillna("")) == {""}
    head = run.headline(t).set_index(key)
    r = float((j["iteration_s"] / b["iteration_s"]).loc[("tg-dlrm-16", 16, 4)])
    assert head.loc[("tg-dlrm-16", 16, 4), "joint/best-topoopt iter"] == pytest.approx(r)
    assert head.loc[("vgg16", 16, 4), "topoopt_best_variant"] in ("topoopt", "topoopt-released")


def test_bad_options_exit_2(tmp_path, capsys):
    run = load("run")
    assert run.main(["--quick", "--workloads", "nope", "--out", str(tmp_path / "x.csv")]) == 2
    assert "workloads: got 'nope'" in capsys.readouterr().err
    assert run.main(["--sizes", "16,x", "--out", str(tmp_path / "y.csv")]) == 2


def test_workload_definitions():
    wl = load("workloads")
    w = wl.plan_workload("gpt3-pp", 32)
    assert (w.servers, w.gpus_per_server) == (32, 8)
    pp = [d for d in w.demands if d.cls == "pp"]
    src, dst = pp[0].groups[:, 0] // 8, pp[0].groups[:, 1] // 8
    assert np.all(src != dst)  # pipeline sends cross servers
    m = wl.plan_workload("mixtral-ep", 16)
    ep = [d for d in m.demands if d.cls == "ep"][0]
    servers = ep.groups // 8
    assert all(np.unique(row).size == ep.group_size for row in servers)  # one rank per server
    d = wl.plan_workload("dlrm", 16)
    assert (d.servers, d.gpus_per_server) == (16, 4)
