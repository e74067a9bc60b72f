"""advise's bad inputs, found by running it on jobs the docs and tests did not use (session 39):
a wrong-shape jobs file names the field and what is allowed in the user's words (not the
schema's class), and an option every row uses is refused once, before any row is built, with one
line and exit 2 (no traceback, no output)."""

import json
import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from topoopt.app.studies.advise import (
    advise,
    equal_capex,
    equal_iteration,
    load_jobs,
    verdict_sentences,
)
from traffic.errors import InputError

RUNNER = CliRunner()


def _one_line(argv):
    r = RUNNER.invoke(app, ["advise", *argv, "--json"])
    assert r.exit_code == 2, r.output
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("name", "text", "expect"),
    [
        ("list.json", "[1]", "jobs[0]: got 1; allowed: a mapping {plan: PLAN, weight: W}"),
        ("nested.yaml", "- [dlrm, 2]\n", "jobs[0]: got ['dlrm', 2]; allowed: a mapping"),
        ("empty.json", "[]", "jobs: got []; allowed: a list of at least one job"),
        ("zero.yaml", "- {plan: dlrm, weight: 0}\n", "jobs[0].weight: got 0"),
        ("text.yaml", "- {plan: dlrm, weight: two}\n", "jobs[0].weight: got 'two'"),
        ("number.yaml", "- {plan: 5}\n", "jobs[0].plan: got 5; allowed: a plan file"),
        ("none.yaml", "- {weight: 2}\n", "jobs[0].plan: got None; allowed: a required field"),
        ("typo.yaml", "- {plan: dlrm, wieght: 2}\n", "jobs[0].wieght: got 'wieght'; allowed: no "),
        ("one.json", '{"plan": "dlrm", "weight": 2}', "allowed: a jobs file: a list of jobs"),
    ],
)
def test_a_wrong_shape_jobs_file_says_what_is_allowed_in_the_users_words(
    tmp_path, name, text, expect
):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as err:  # the library's message; the CLI's once below
        load_jobs(path)
    line = f"error: {err.value}"
    if name == "list.json":
        assert _one_line([str(path)]) == line
    assert expect in line, line
    assert line.startswith(f"error: {path}"), line
    for schema_word in ("_JobEntry", "_JobsFile", "dictionary", "instance of", "List should"):
        assert schema_word not in line, line
    if ".weight" in expect:
        assert "a finite number > 0" in line, line


def test_a_valid_jobs_file_still_loads_with_its_weights(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text("- {plan: dlrm, weight: 3}\n- {plan: vgg16-dp}\n")
    jobs = load_jobs(path)
    assert [(j.name, j.weight) for j in jobs] == [("dlrm", 3.0), ("vgg16-dp", 1.0)]


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["--degree", "0"], "--degree: got 0; allowed: an integer from 1 to 256"),  # was a KeyError
        (
            ["--oversubscription", "0.5"],
            "--oversubscription: got 0.5; allowed: a ratio from 1 to 1,024 (leaf down:up ports)",
        ),
        (["--time-limit", "0"], "--time-limit: got 0.0; allowed: a number of seconds > 0 and at"),
    ],
)
def test_an_option_every_row_uses_is_refused_before_any_row(argv, expect, monkeypatch):
    """``--degree 0`` failed every row and then raised a ``KeyError`` traceback (exit 1);
    ``--oversubscription 0`` left two rows "not built" and judged the rest (exit 0). No row may
    be evaluated now: the refusal comes first."""
    from topoopt.app.studies import advise as mod

    def fail(task):
        raise AssertionError(f"row {task['fabric']} evaluated before the check")

    monkeypatch.setattr(mod, "evaluate", fail)
    line = _one_line(["dlrm", "--gpus", "32", *argv])
    assert expect in line, line


def test_a_job_no_fabric_carries_is_one_line_not_a_traceback(monkeypatch):
    """Every row refused (here by a stand-in evaluation): the judgement has no table; the
    message names the job and the first row's reason."""
    from topoopt.app.studies import advise as mod

    def refuse(task):
        fam = mod.FAMILY_OF.get(task["fabric"], "ideal")
        return {"job": task["job"], "fabric": task["fabric"], "plan": task["job"],
                "family": fam, "error": "too big"}  # fmt: skip

    monkeypatch.setattr(mod, "evaluate", refuse)
    with pytest.raises(InputError, match=r"^dlrm: got 'no fabric built'; allowed: .*too big"):
        advise(load_jobs("dlrm"), degree=4, link_bandwidth=12.5e9, progress=False)
    line = _one_line(["dlrm", "--gpus", "32"])
    assert "dlrm: got 'no fabric built'" in line and "too big" in line, line


def test_equal_capex_sentence_says_same_time_instead_of_zero_percent_less():
    """Llama 3 70B (tp8 cp2 pp4) on 512 H200s, 8 x 400 G: rail and fat-tree both ran at the
    ideal switch's 11.69 s and the sentence read "0.0 % less than fat-tree". A tie of time is
    decided by the capex, and the sentence says so."""
    t = pd.DataFrame({"fabric": ["fat-tree", "rail", "joint"], "family": ["clos", "rail", "direct"],
                      "capex_usd": [2.770e6, 1.539e6, 3.0e6], "power_w": [5e4, 3e4, 2e4],
                      "iteration_s": [11.68646, 11.68646 * (1 + 1e-6), 11.5],
                      "server_gbps": [3200, 3200, 3200], "tiers": [2, 1, None],
                      "optics_share": [0.4, 0.4, 0.3],
                      "binding_class": [None] * 3, "binding_link": [None] * 3})  # fmt: skip
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    # fat-tree is faster by 1e-6 of the time and costs 2.770 / 1.539 = 1.80x rail's: the same
    # time (advise.SAME_TIME), so the cheaper is the one to buy (it said "buy fat-tree ..., the
    # same time as rail, which costs 1.80x less" until 2026-12-08)
    assert (j["equal_capex"]["winner"], j["equal_capex"]["runner_up"]) == ("rail", "fat-tree")
    first = verdict_sentences("llama", t, j, 11.5)[0]
    assert first.endswith(
        "11.69 s per iteration, the same time as fat-tree (11.69 s) for 1.80x less capex."
    ), first
    t.loc[1, "iteration_s"] = 11.68646 * (1 + 0.001)  # 0.1 % slower: not the same time
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    first = verdict_sentences("llama", t, j, 11.5)[0]
    assert j["equal_capex"]["winner"] == "fat-tree" and "0.1 % less than rail" in first, first
    t.loc[1, "iteration_s"] = 11.68646  # an exact tie: the cheaper (rail) wins
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    first = verdict_sentences("llama", t, j, 11.5)[0]
    assert first.endswith(
        "11.69 s per iteration, the same time as fat-tree (11.69 s) for 1.80x less capex."
    ), first


def test_the_cheapest_network_wins_only_when_it_does():
    """The ideal-switch sentence said "so the cheapest network wins" whenever the cheapest row
    was within 5 % of the bound, even when it missed the equal-iteration target (+ 2 %) and
    another row won there: now it names the winner and the cheapest's excess."""
    t = pd.DataFrame({"fabric": ["fat-tree", "torus"], "family": ["clos", "torus"],
                      "capex_usd": [10e6, 4e6], "power_w": [2e5, 1e5],
                      "iteration_s": [1.00, 1.04], "server_gbps": [800, 800],
                      "tiers": [2, None], "optics_share": [0.4, 0.4],
                      "binding_class": [None] * 2, "binding_link": [None] * 2})  # fmt: skip
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    assert j["equal_iteration"]["winner"] == "fat-tree"  # 1.04 > 1.00 x 1.02
    last = verdict_sentences("j", t, j, 1.0)[-1]
    assert "so the cheapest network wins" not in last, last
    assert last.endswith("the cheapest is 4.0 % over the equal-iteration target, so fat-tree "
                         "wins there."), last  # fmt: skip
    t.loc[1, "iteration_s"] = 1.01  # within the target: the cheapest wins, and is said to
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    assert j["equal_iteration"]["winner"] == "torus"
    assert verdict_sentences("j", t, j, 1.0)[-1].endswith("so the cheapest network wins.")


def _stand_in_rows(table):
    """An ``evaluate`` returning hand-made rows (fabric -> (capex $, power W, iteration s), or
    an error string), so the judgement and the report run in a second."""
    from topoopt.app.studies import advise as mod

    def evaluate(task):
        nm = task["fabric"]
        row = {"job": task["job"], "fabric": nm, "plan": task["job"], "weight": task["weight"],
               "family": mod.FAMILY_OF.get(nm, "ideal"), "gpus": 32, "servers": 4}  # fmt: skip
        got = table.get((task["job"], nm), table.get(nm, (20e6, 2e5, 2.0)))
        if isinstance(got, str):
            return {**row, "error": got}
        capex, power, t = got
        if nm == "ideal":
            return {**row, "iteration_s": t}
        return {**row, "capex_usd": capex, "power_w": power, "iteration_s": t,
                "iterations_per_s_per_musd": 1e6 / (t * capex),
                "iterations_per_s_per_kw": 1e3 / (t * power), "server_gbps": 400.0,
                "tiers": 1, "optics_share": 0.3, "optical_ports": 0, "optical_item": "ocs_port",
                "binding_class": None, "binding_link": None}  # fmt: skip

    return evaluate


def test_html_marks_the_pareto_rows_and_says_why_a_row_was_not_built(tmp_path, monkeypatch):
    """The HTML table marked no row (the CLI's marks the Pareto front) and showed a row that was
    not built as dashes without its reason (the CLI says it on stderr)."""
    from topoopt.app.studies import advise as mod

    table = {"ideal": (0.0, 0.0, 1.0), "fat-tree": (10e6, 1e5, 1.0),
             "rail-only": (5e6, 5e4, 1.0), "torus": "too many rings"}  # fmt: skip
    monkeypatch.setattr(mod, "evaluate", _stand_in_rows(table))
    out = tmp_path / "a.html"
    r = RUNNER.invoke(app, ["advise", "dlrm", "--gpus", "32", "--json", "--html", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    page = out.read_text()
    assert page.count('<div id="verdict">') == 1
    marked = re.findall(r'<tr class="best"><td>dlrm</td><td>[^<]*</td><td>([^<]*)</td>', page)
    assert marked == doc["pareto"]["dlrm"] == ["rail-only"]  # the others cost 20 M$ and take 2 s
    assert "<th>error</th>" in page and "too many rings" in page


def test_a_mix_of_jobs_is_judged_as_one_purchase_by_its_weights(tmp_path, monkeypatch):
    """The weights of a jobs file reached the rows and nothing else: each job had its own
    verdict, and no sentence answered "which network for this mix". The mix is now judged as
    one purchase: a fabric's figure is the weights' mean of the jobs' slowdowns over the ideal
    switch, its capex the largest of its rows."""
    from topoopt.app.studies import advise as mod

    table = {("dlrm", "ideal"): (0, 0, 1.0), ("vgg16-dp", "ideal"): (0, 0, 2.0),
             "fat-tree": (10e6, 1e5, 2.0), ("dlrm", "fat-tree"): (10e6, 1e5, 1.0),
             ("dlrm", "torus"): (4e6, 4e4, 1.0), ("vgg16-dp", "torus"): (4e6, 4e4, 3.0),
             ("dlrm", "rail-only"): (5e6, 5e4, 1.0), ("vgg16-dp", "rail-only"): (5.1e6, 5e4, 2.02),
             ("vgg16-dp", "hybrid"): "not built"}  # fmt: skip
    monkeypatch.setattr(mod, "evaluate", _stand_in_rows(table))
    jobs = tmp_path / "mix.yaml"
    jobs.write_text("- {plan: dlrm, weight: 3}\n- {plan: vgg16-dp}\n")
    r = RUNNER.invoke(app, ["advise", str(jobs), "--json"])
    assert r.exit_code == 0, r.output
    mix = json.loads(r.stdout)["mix"]
    slow = {row["fabric"]: row["slowdown"] for row in mix["rows"]}
    assert "hybrid" not in slow  # not built for every job: no purchase for the mix
    assert slow["fat-tree"] == pytest.approx(1.0)  # both jobs at their ideal
    assert slow["torus"] == pytest.approx((3 * 1.0 + 1 * 1.5) / 4)
    assert slow["rail-only"] == pytest.approx((3 * 1.0 + 1 * 1.01) / 4)
    assert slow["joint"] == pytest.approx((3 * 2.0 + 1 * 1.0) / 4)  # 20 M$, 2 s each
    caps = {row["fabric"]: row["capex_usd"] for row in mix["rows"]}
    assert caps["rail-only"] == 5.1e6  # the larger of its two rows
    assert mix["equal_capex"]["winner"] == "fat-tree"
    # at the Clos's slowdown (1.0, + 2 %): rail-only (1.0025) is the cheapest, 10 / 5.1 cheaper
    assert mix["equal_slowdown"]["winner"] == "rail-only"
    assert mix["equal_slowdown"]["capex_ratio"] == pytest.approx(10 / 5.1)
    said = [s for s in json.loads(r.stdout)["verdict"] if s.startswith("mix")]
    assert said[0].startswith("mix (dlrm 3, vgg16-dp 1; each weight the job's share")
    assert said[1] == (
        "mix: at equal slowdown (at most 1.000x, + 2 %) the cheapest is rail-only at 5.100 M$, "
        "1.96x cheaper than fat-tree."
    )
    r = RUNNER.invoke(app, ["advise", "dlrm", "--gpus", "32", "--json"])  # one job: no mix
    assert r.exit_code == 0 and "mix" not in json.loads(r.stdout)


def test_a_budget_or_target_nothing_meets_is_said_not_left_out(monkeypatch):
    """``--budget`` below every row's capex (or ``--target-iteration-s`` below every row's
    time) left the equal-capex (equal-iteration) sentence out without a word."""
    from topoopt.app.studies import advise as mod

    table = {"ideal": (0, 0, 1.0), "fat-tree": (10e6, 1e5, 1.0), "torus": (4e6, 4e4, 1.5)}
    monkeypatch.setattr(mod, "evaluate", _stand_in_rows(table))
    res = advise(load_jobs("dlrm"), budget_usd=1e6, target_iteration_s=0.5, progress=False)
    assert res.judged["dlrm"]["equal_capex"]["winner"] is None
    assert res.judged["dlrm"]["equal_iteration"]["winner"] is None
    assert res.verdict[0] == (
        "dlrm: no fabric fits the budget of 1.000 M$ (+ 2 %): the cheapest is torus at 4.000 M$."
    )
    assert res.verdict[1] == (
        "dlrm: no fabric reaches 0.5 s per iteration (+ 2 %): the fastest is fat-tree at 1 s, "
        "and even the ideal switch takes 1 s."
    )


def test_gpus_a_moe_plan_cannot_scale_to_names_gpus_and_the_step():
    """``advise mixtral-8x7b --gpus 1000`` (a multiple of the model-parallel size 8) answered
    "parallelism.ep: got 8; allowed: etp*ep dividing tp*cp*dp = 250", a field the user did not
    write. Brute force over 16-512 GPUs: the plan scales exactly to the multiples of 32 (the
    8 experts' groups tile tp*dp = 2 dp when dp is a multiple of 4), and the refusal names
    --gpus and that step."""
    from topoopt.app.studies.advise import scale_plan
    from traffic.plan import load_plan

    base = load_jobs("mixtral-8x7b")[0].plan
    for gpus in range(16, 513, 8):
        d = base.model_dump(exclude_unset=True)
        d["cluster"] = {**d["cluster"], "servers": gpus // 8}
        dp = gpus // 8
        d["parallelism"] = {**d["parallelism"], "dp": dp, "global_batch_size": 32 * dp}
        try:  # the plan checker's own verdict on the scaled plan, the independent oracle
            load_plan(d)
            valid = True
        except InputError:
            valid = False
        assert valid == (gpus % 32 == 0), gpus
        if valid:
            assert scale_plan(base, gpus).dp == dp
        else:
            with pytest.raises(InputError, match=r"^--gpus: got \d+; allowed: a multiple of 32 "):
                scale_plan(base, gpus)


def test_jobs_on_different_clusters_are_not_judged_as_one_purchase(tmp_path, monkeypatch):
    from topoopt.app.studies import advise as mod

    monkeypatch.setattr(mod, "evaluate", _stand_in_rows({"ideal": (0, 0, 1.0)}))
    jobs = tmp_path / "two.yaml"
    jobs.write_text("- {plan: dlrm}\n- {plan: dlrm-128, weight: 2}\n")
    res = advise(load_jobs(jobs), progress=False)
    assert res.mix is None
    assert res.verdict[-1] == (
        "mix: not judged as one purchase: the jobs run on different clusters (dlrm 16 servers x "
        "8 GPUs, dlrm-128 128 servers x 4 GPUs); give --gpus and plans of one server size."
    )


def test_two_plans_of_one_file_name_are_two_jobs_and_one_plan_twice_is_refused(tmp_path):
    """``a/job.yaml`` and ``b/job.yaml`` (two plans) were refused as "each plan once": the
    duplicate check compared file names. It now compares what the entries name (the file,
    its path normalised), and jobs of one file name are named as written."""
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    (tmp_path / "a" / "job.yaml").write_text(
        "model: vgg16\nparallelism: {dp: 16, micro_batch_size: 16, global_batch_size: 256}\n"
        "cluster: {servers: 2, gpus_per_server: 8}\n"
    )
    (tmp_path / "b" / "job.yaml").write_text(
        "model: resnet50\nparallelism: {dp: 16, micro_batch_size: 16, global_batch_size: 256}\n"
        "cluster: {servers: 2, gpus_per_server: 8}\n"
    )
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("- {plan: a/job.yaml}\n- {plan: b/job.yaml, weight: 2}\n")
    got = [(j.name, j.weight, j.plan.model.name) for j in load_jobs(jobs)]
    assert got == [("a/job.yaml", 1.0, "vgg16"), ("b/job.yaml", 2.0, "resnet50")]
    jobs.write_text("- {plan: a/job.yaml}\n- {plan: b/../a/job.yaml, weight: 2}\n")
    with pytest.raises(InputError, match="each plan once"):
        load_jobs(jobs)


def test_the_cli_table_shows_no_nan_and_tiers_as_counts(monkeypatch):
    """The table printed ``nan`` in the tiers column of the torus, hybrid and joint rows (no
    switch tiers) and ``1.0`` for a count."""
    from topoopt.app.studies import advise as mod

    base = _stand_in_rows({"ideal": (0, 0, 1.0), "fat-tree": (10e6, 1e5, 1.0)})

    def evaluate(task):
        row = base(task)
        if task["fabric"] == "torus":
            row["tiers"] = float("nan")
        return row

    monkeypatch.setattr(mod, "evaluate", evaluate)
    r = RUNNER.invoke(app, ["advise", "dlrm", "--gpus", "32"])
    assert r.exit_code == 0, r.output
    torus = next(line for line in r.stdout.splitlines() if "│ torus " in line)
    cells = [c.strip() for c in torus.split("│")[1:-1]]
    assert cells[9] == "-" and "nan" not in r.stdout, torus  # the tiers column
    fat = next(line for line in r.stdout.splitlines() if "│ fat-tree " in line)
    assert [c.strip() for c in fat.split("│")[1:-1]][9] == "1", fat


def test_a_product_below_the_ideal_switch_is_explained():
    """Session 43, Llama 3 405B at 16,384 GPUs at the calibrated compute: the full Clos took
    7.475840 s against the ideal switch's 7.483991 s, and the sentence read "the fastest product
    0.999x that" after calling the ideal switch a bound; it now says by how much and why."""
    t = pd.DataFrame({"fabric": ["fat-tree", "torus"], "family": ["clos", "torus"],
                      "capex_usd": [128.04e6, 22.15e6], "power_w": [2e6, 3e5],
                      "iteration_s": [7.475840, 12.902626], "server_gbps": [3200, 3200],
                      "tiers": [3, None], "optics_share": [0.46, 0.4],
                      "binding_class": [None] * 2, "binding_link": [None] * 2})  # fmt: skip
    j = {"equal_capex": equal_capex(t), "equal_iteration": equal_iteration(t)}
    line = verdict_sentences("llama", t, j, 7.483991)[-1]
    # 1 - 7.475840 / 7.483991 = 0.001089...: 0.109 %
    assert line == (
        "llama: the ideal switch (a bound) takes 7.484 s; the fastest product 0.999x that "
        "(0.109 % sooner: max-min sharing on its links, not a better network, docs/model.md), "
        "the cheapest (torus) 1.724x."
    ), line
    assert "sooner" not in verdict_sentences("llama", t, j, 7.47)[-1]  # at or above the bound
