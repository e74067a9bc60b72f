"""The ideal row of ``compare`` is a bound on every row, also when a design rewrites the
collectives (the soak's plan 141: ``joint``'s Blink all-gather beat the ideal switch's rings)."""

import pytest

from topoopt.app.studies.compare import compare, json_rows
from topoopt.fabrics.ideal import ideal_bound
from topoopt.flowsim.iteration import simulate_iteration
from traffic.build import workload_from_plan
from traffic.plan import load_plan

PLAN_141 = {  # benchmarks/soak.py, seed 0, plan 141
    "model": {"base": "bert-large", "layers": 4},
    "parallelism": {"micro_batch_size": 1, "tp": 1, "pp": 1, "dp": 6, "global_batch_size": 12,
                    "zero": 3},
    "cluster": {"servers": 6, "gpus_per_server": 1},
}  # fmt: skip


@pytest.fixture(scope="module")
def compared():
    w = workload_from_plan(load_plan(PLAN_141))
    res = compare(w, ["ideal", "joint", "fat-tree"], degree=4, link_bandwidth=12.5e9,
                  time_limit_s=30.0)  # fmt: skip
    return w, res


def test_the_ideal_switch_runs_the_designs_collectives_and_stays_a_bound(compared):
    w, res = compared
    t = res.table.set_index("fabric")
    ring = simulate_iteration(w, ideal_bound(6, 4, 12.5e9)).iteration_s  # the plan's rings
    assert t.loc["ideal", "ideal_ring_s"] == pytest.approx(ring, rel=1e-12)
    assert t.loc["joint", "iteration_s"] < ring  # what the soak saw: joint "beat" the rings
    assert t.loc["ideal", "ideal_collectives"] == "joint"
    assert (t["iteration_s"] >= t.loc["ideal", "iteration_s"] * (1 - 1e-12)).all()
    rows = {r["fabric"]: r for r in json_rows(res.table)}
    assert rows["fat-tree"]["ideal_ring_s"] is None and rows["ideal"]["ideal_collectives"]


def test_advise_bounds_every_row_with_the_designs_collectives_on_the_ideal_switch(compared):
    """``advise`` as ``compare``: the joint row of plan 141 runs its own collectives on the ideal
    switch too (``ideal_own_s``, the value ``compare``'s ideal row reaches with joint's
    collectives), and the job's ideal (``ideal_bounds``) is then no slower than any row."""
    from topoopt.app.studies.advise import evaluate, ideal_bounds
    from topoopt.fabrics.cost import load_prices

    plan = load_plan(PLAN_141)
    common = {"job": "bert", "plan": plan, "weight": 1.0, "degree": 4,
              "link_bandwidth": 12.5e9, "oversubscription": 4.0, "seed": 0,
              "time_limit_s": 30.0, "prices": load_prices()}  # fmt: skip
    rows = [evaluate({**common, "fabric": f}) for f in ("ideal", "joint", "fat-tree")]
    by = {r["fabric"]: r for r in rows}
    w = workload_from_plan(plan)
    ring = simulate_iteration(w, ideal_bound(6, 4, 12.5e9)).iteration_s
    assert by["ideal"]["iteration_s"] == pytest.approx(ring, rel=1e-12)
    assert by["joint"]["iteration_s"] < ring  # the plan's own rings are no bound here
    assert by["ideal"].get("ideal_own_s") is None and by["fat-tree"]["ideal_own_s"] is None
    res = compared[1]
    assert res.table.set_index("fabric").loc["ideal", "ideal_collectives"] == "joint"
    want = float(res.table.set_index("fabric").loc["ideal", "iteration_s"])  # joint's, by compare
    assert by["joint"]["ideal_own_s"] == pytest.approx(want, rel=1e-12)
    ideal, who = ideal_bounds(rows)
    assert who == {"bert": "joint"} and ideal["bert"] == by["joint"]["ideal_own_s"]
    assert all(r["iteration_s"] >= ideal["bert"] * (1 - 1e-12) for r in rows)


def test_cosearch_cuts_joint_finalists_only_by_a_bound_joint_cannot_beat():
    """The co-search's cut of ``joint`` finalists: plan 141's ideal-switch time with the plan's
    rings (87.933 ms, the soak) is above what ``joint`` reached (85.580 ms), so a best cheap
    time between the two must not cut it; the compute-only bound it uses now is below
    ``joint``'s time (the flow model's compute alone: no network and no collective can
    shorten it)."""
    from topoopt.app.studies.cosearch.evaluate import compute_bound
    from topoopt.app.studies.cosearch.search import _finalists_by_ideal

    ideal_ring_s, joint_s = 0.087933, 0.085580  # plan 141, stop 34's soak (test above: <)
    lower = compute_bound(load_plan(PLAN_141))
    w = workload_from_plan(load_plan(PLAN_141))
    compute_s = simulate_iteration(w, ideal_bound(6, 4, 1e30)).iteration_s  # no network time
    assert lower <= compute_s * (1 + 1e-9) and compute_s < joint_s
    ideal = {0: {"iteration_s": 0.080}, 1: {"iteration_s": ideal_ring_s}}
    cheap = {0: {"iteration_s": 0.086}}  # best cheap: between joint's and the rings' time
    out, cut = _finalists_by_ideal([0, 1], ideal, cheap, 0, 2, {0: 0.070, 1: lower})
    assert out == [0, 1] and cut == 0  # kept (the ideal-switch time 87.9 ms cut it before)
    out, cut = _finalists_by_ideal([0, 1], ideal, cheap, 0, 2, {0: 0.070, 1: 0.086})
    assert out == [0] and cut == 1  # a bound at the best cheap time cuts
