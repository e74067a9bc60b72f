"""The equal-cost table's runner (benchmarks/equal_cost_table.py, issue 29) without running a
case: plan rescaling by hand, the verdict and summary arithmetic recomputed, and a case that
raises (the 64-server ``gpt3-175b-fsdp`` refused by the flow budget stopped the whole run) as a
row while the others are kept, in the JSON lines and in the table rebuilt from them."""

from __future__ import annotations

import json
import math

import pytest


@pytest.fixture(scope="module")
def table(bench_script):
    return bench_script("equal_cost_table")


def _case(fam, s, p, ideal, ft, tb, j, ft_usd, j_usd, objective="iteration"):
    times = {"ideal": ideal, "fat-tree-cost-equivalent": ft, "topoopt-best": tb, "joint": j}
    capex = {"fat-tree-cost-equivalent": ft_usd, "joint": j_usd}
    return {"family": fam, "servers": s, "ports": p, "skipped": False, "wall_s": 1.0,
            "cpu_s": 0.5, **times, "errors": {}, "objective": objective,
            "deterministic": True, "capex_usd": capex}  # fmt: skip


def test_plans_rescaled_by_their_data_parallel_degree(table):
    # vgg16-dp: dp 128, batch 2048 (16 per GPU) on 16 x 8 GPUs; 32 servers: dp 256, batch 4096
    p = table.scaled_plan("vgg16-dp", 32)
    assert p["parallelism"]["dp"] == 32 * 8 and p["parallelism"]["global_batch_size"] == 4096
    assert p["cluster"]["servers"] == 32
    # gpt3-175b: tp 8 x pp 16 = 128 GPUs per replica; 16 servers: dp 1, batch 1536 / 8 = 192
    p = table.scaled_plan("gpt3-175b", 16)
    assert p["parallelism"]["dp"] == 1 and p["parallelism"]["global_batch_size"] == 192
    assert table.scaled_plan("gpt3-175b", 8) is None  # 64 GPUs cannot hold one replica


def test_summary_recomputed_by_hand(table):
    rs = [
        _case("a", 16, 4, 1.0, 2.0, 1.5, 1.0, 60.0, 100.0),  # win, win
        _case("a", 32, 4, 1.0, 1.0, 1.2, 1.2, 100.0, 100.0),  # loss, tie
        _case("a", 64, 4, 1.0, 3.0, 3.0, 3.0, 50.0, 100.0, "congestion"),  # tie, tie
    ]
    md = table.markdown(rs)
    row = next(ln for ln in md.splitlines() if ln.startswith("| a | 3 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    g_ft = (0.5 * 1.2 * 1.0) ** (1 / 3)
    per_dollar = (0.5 / 0.6 * 1.2 / 1.0 * 1.0 / 0.5) ** (1 / 3)  # time x capex, joint over ft
    g_tb = (1 / 1.5) ** (1 / 3)
    assert cells == ["a", "3", "1/1/1", f"{g_ft:.3f}", f"{per_dollar:.3f}", "1/0/2", f"{g_tb:.3f}"]
    assert "| a | 64 | 4 | 1 | 3 | 3 | 3 | 1.000 | 1.000 | 0.50 | congestion |" in md
    assert table.verdict(1.0, 1.0 + 0.9e-3) == "tie" and table.verdict(1.0, 1.0011) == "win"
    assert math.isnan(table.geomean([]))


def test_a_case_that_raises_is_a_row_and_the_rest_are_kept(table, monkeypatch, tmp_path, capsys):
    def fake(fam, s, p, gbps, limit):
        if s == 64:
            raise table_err("plan: about 5,470,934 flows")
        return _case(fam, s, p, 1.0, 2.0, 1.0, 1.0, 60.0, 100.0)

    table_err = type("InputError", (Exception,), {})
    monkeypatch.setattr(table, "run_case", fake)
    out = tmp_path / "part.jsonl"
    table.main(["--families", "dlrm", "--sizes", "16,64", "--ports", "4", "--jsonl", str(out)])
    printed = capsys.readouterr().out
    lines = [json.loads(ln) for ln in out.read_text().splitlines()]
    assert [(r["servers"], r["skipped"]) for r in lines] == [(16, False), (64, True)]
    assert lines[1]["error"] == "InputError: plan: about 5,470,934 flows"
    assert "| dlrm | 64 | 4 | (InputError: plan: about 5,470,934 flows) |" in printed
    assert "| dlrm | 1 | 1/0/0 | 0.500 |" in printed  # the failed case is not counted
    table.main(["--table-from", str(out)])
    again = capsys.readouterr().out
    assert again.split("\n\n")[:2] == printed.split("\n\n")[:2]  # the same two tables
