"""The verdict sentences against the table they summarise, and the verdict block of
``compare --html``."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.report.verdict import best_rows, equal_capex_rows, verdict_sentences

TABLE = pd.DataFrame(
    {
        "fabric": ["ideal", "fat-tree", "fat-tree-cost-equivalent", "topoopt-best", "joint"],
        "iteration_s": [60.0, 61.0, 66.0, 80.0, 72.0],
        "capex_usd": [4.0e6, 9.0e6, 3.0e6, 3.0e6, 3.03e6],
        "ratio_to_ideal": [1.0, 61 / 60, 1.1, 80 / 60, 1.2],
    }
)


def test_sentences_state_the_table():
    said = verdict_sentences(TABLE)
    assert len(said) == 2
    # equal capex: topoopt-best's 3 M$; joint's 3.03 M$ is within 2 %, fat-tree's 9 M$ is not
    assert list(equal_capex_rows(TABLE)["fabric"]) == [
        "fat-tree-cost-equivalent",
        "topoopt-best",
        "joint",
    ]
    # the fastest of those is the cost-equivalent fat-tree, 66 s against joint's 72 s: 1 - 66/72
    assert said[0] == (
        "At equal capex (at most 3.000 M$, topoopt-best's capex), fat-tree-cost-equivalent is the "
        "fastest: 66 s per iteration for 3.000 M$, 8.3 % less than joint (72 s, 3.030 M$)."
    )
    # the ideal switch (60 s) is a bound, never the winner: the full fat-tree is, at 61/60
    assert said[1] == (
        "Fastest overall: fat-tree, 1.017x the ideal switch (a bound, not a product), for 9.000 M$."
    )
    assert best_rows(TABLE) == {1, 2}  # the rows printed in bold


def test_a_row_below_the_ideal_switch_is_not_called_above_a_bound():
    # Llama 3 405B at 16,384 H100 (vpp 8): the fat-tree 7.475840 s, the ideal switch 7.483991 s
    # (max-min sharing per NIC and per path, docs/model.md): the sentence says why
    t = TABLE[TABLE["fabric"].isin(["ideal", "fat-tree"])].copy()
    t["iteration_s"] = [7.483991, 7.475840]
    t["ratio_to_ideal"] = [1.0, 7.475840 / 7.483991]
    assert verdict_sentences(t) == [
        "Fastest overall: fat-tree, 0.999x the ideal switch (a fluid bound, not a product: "
        "max-min sharing on this fabric's links finished 0.109 % sooner, docs/model.md), for "
        "9.000 M$."
    ]


def test_no_optical_design_no_equal_capex_sentence():
    t = TABLE[TABLE["fabric"].isin(["ideal", "fat-tree"])]
    said = verdict_sentences(t)
    assert len(said) == 1 and said[0].startswith("Fastest overall: fat-tree,")


def test_compare_html_opens_with_the_verdict(tmp_path):
    plan = tmp_path / "tiny.yaml"
    plan.write_text(
        "model: llama2-7b\n"
        "parallelism: {tp: 1, pp: 1, dp: 8, micro_batch_size: 1, global_batch_size: 16}\n"
        "precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}\n"
        "cluster: {servers: 8, gpus_per_server: 1}\n"
    )
    page = tmp_path / "r.html"
    res = CliRunner().invoke(
        app,
        [
            "compare", str(plan), "--fabrics", "ideal,fat-tree-cost-equivalent,topoopt",
            "--degree", "4", "--html", str(page), "--json",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = pd.DataFrame(json.loads(res.stdout)["rows"])
    text = page.read_text()
    block = re.search(r'<div id="verdict">(.*?)</div>', text, flags=re.S)
    assert block is not None and text.index('id="verdict"') < text.index('class="summary"')
    said = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", block.group(1))]
    assert 2 <= len(said) <= 3
    # the first two sentences follow from the rows alone; the third names what binds the loser
    assert said[:2] == verdict_sentences(rows)
    same = rows[rows["fabric"] != "ideal"].sort_values("iteration_s")
    win, lose = same.iloc[0], same.iloc[1]
    margin = 100 * (1 - win["iteration_s"] / lose["iteration_s"])
    assert f"{win['fabric']} is the fastest" in said[0] and f"{margin:.1f} % less" in said[0]
    assert said[2].startswith(f"On {lose['fabric']}, ")
    assert text.count('<tr class="best">') == len(best_rows(rows))


def test_a_tie_is_called_a_tie():
    """Within 0.1 % (the design suite's rule) no fabric is "the fastest" at equal capex."""
    t = TABLE.copy()
    t.loc[t["fabric"] == "joint", "iteration_s"] = 66.05  # 0.08 % slower than the fat-tree's 66
    said = verdict_sentences(t)[0]
    assert said == (
        "At equal capex (at most 3.000 M$, topoopt-best's capex), fat-tree-cost-equivalent and "
        "joint tie: 66 s (3.000 M$) and 66.05 s (3.030 M$) per iteration (within 0.1 %)."
    )
