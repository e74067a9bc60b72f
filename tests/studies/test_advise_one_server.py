"""advise on one server: refused in one line (no network to choose), and a zero-capex winner
never divides by zero (the crash of ``advise ... --gpus 8``: ZeroDivisionError, exit 1)."""

import pandas as pd
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.studies.advise import equal_iteration, verdict_sentences

RUNNER = CliRunner()


def test_one_server_is_refused_in_one_line_before_any_work():
    for argv in (["dlrm", "--gpus", "8"], ["tests/fuzz/seeds/advise-jobs.yaml", "--gpus", "8"]):
        r = RUNNER.invoke(app, ["advise", *argv, "--degree", "4", "--time-limit", "1", "--json"])
        assert r.exit_code == 2 and r.stdout == "", r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0] == (
            "error: --gpus: got 8; allowed: at least 2 servers (16 GPUs): on one server the "
            "GPUs talk over NVLink and there is no network to choose"
        )


def test_a_winner_that_costs_nothing_has_no_capex_ratio_and_a_sentence():
    t = pd.DataFrame({"fabric": ["joint", "fat-tree"], "family": ["direct", "clos"],
                      "capex_usd": [0.0, 2e6], "power_w": [0.0, 4e4],
                      "iteration_s": [1.0, 1.0], "server_gbps": [800, 800],
                      "tiers": [None, 2], "optics_share": [0.0, 0.4],
                      "binding_class": [None, None], "binding_link": [None, None]})  # fmt: skip
    ei = equal_iteration(t)
    assert (ei["winner"], ei["runner_up"], ei["capex_ratio"]) == ("joint", "fat-tree", None)
    j = {"equal_capex": {"winner": None, "runner_up": None}, "equal_iteration": ei}
    assert verdict_sentences("job", t, j, 1.0)[0] == (
        "job: at equal iteration time (at most 1 s + 2 %) the cheapest is joint at 0.000 M$: no "
        "network to buy, where fat-tree costs 2.000 M$."
    )


def test_compare_on_one_server_is_refused_in_one_line(tmp_path):
    # was: exit 2 with "result.rows[3].iterations_per_s_per_musd = inf" after every fabric ran
    plan = tmp_path / "one.yaml"
    plan.write_text(
        "model: dlrm\nparallelism: {dp: 8, micro_batch_size: 512, global_batch_size: 4096}\n"
        "cluster: {servers: 1, gpus_per_server: 8}\n"
    )
    r = RUNNER.invoke(app, ["compare", str(plan), "--json", "--time-limit", "1"])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.strip().splitlines() == [
        "error: cluster.servers: got 1; allowed: at least 2 (on one server the GPUs talk over "
        "NVLink: no network to compare)"
    ]
