"""The co-search: pruning is exact against brute force, the result never loses to the reference,
the TopoOpt baseline runs its alternation, and results do not depend on the worker count."""

from __future__ import annotations

import pytest

from topoopt.app.studies.cosearch.evaluate import EvalTask, compute_bound, evaluate, workload_for
from topoopt.app.studies.cosearch.search import SearchConfig, cosearch, pareto_front
from topoopt.app.studies.cosearch.space import Candidate, SpaceOptions, plan_space
from topoopt.app.studies.engine import Engine

BASE = {
    "model": {
        "layers": 4,
        "hidden": 256,
        "heads": 4,
        "vocab": 512,
        "seq_len": 128,
        "global_batch": 16,
    },
    "cluster": {"servers": 4, "gpus_per_server": 2},
}
SMALL = SpaceOptions(
    micro_batch_sizes=(1, 4),
    shardings=("none",),
    orders=("tp-cp-ep-dp-pp",),
    max_cp=1,
    max_vpp=1,
    sequence_parallel=(False,),
)
REF = Candidate(
    tuple(
        sorted({"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1, "global_batch_size": 16}.items())
    ),
    None,
    "reference",
)


def _strip(records):
    drop = {"wall_s", "design_object"}
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


def test_compute_bound_is_the_compute_only_iteration():
    """The analytic bound equals the flow model's compute-only makespan (1F1B) on every
    candidate of the small space; it and the ideal-switch bound (uplink bytes over degree x B)
    never exceed the ideal-switch iteration."""
    space = plan_space(BASE, 80e9, SMALL)
    for k, c in enumerate(space.candidates):
        r = evaluate(EvalTask(k, space.base, c, "ideal", 2, 12.5e9))
        assert r["compute_bound_s"] == pytest.approx(r["compute_s"], rel=1e-9)
        assert r["compute_bound_s"] <= r["iteration_s"] * (1 + 1e-9)
        assert 0 < r["network_bound_s"] <= r["iteration_s"]  # the ideal-switch bound
        plan, _ = workload_for(space.base, c)
        assert compute_bound(plan) == r["compute_bound_s"]


def test_refine_finds_the_brute_force_optimum_on_the_ideal_switch():
    """Target = ideal switch: pruning by the compute bound loses nothing; the winner is the
    minimum over every candidate simulated one by one."""
    space = plan_space(BASE, 80e9, SMALL)
    with Engine(1, progress=False) as eng:
        every = eng.map(
            evaluate,
            [
                EvalTask(k, space.base, c, "ideal", 2, 12.5e9)
                for k, c in enumerate(space.candidates)
            ],
        )
        cfg = SearchConfig(
            fabric="ideal", degree=2, max_evaluations=len(space), finalists=2, pareto_fabrics=()
        )
        res = cosearch(space, cfg, eng)
    want = min(every, key=lambda r: (r["iteration_s"], r["key"]))
    assert res.best["key"] == want["key"]
    assert res.best["iteration_s"] == want["iteration_s"]
    assert len(res.records) <= len(space)


def test_refine_never_loses_to_the_reference_and_gives_a_pareto_front():
    space = plan_space(BASE, 80e9, SMALL)
    cfg = SearchConfig(
        fabric="topoopt",
        degree=2,
        max_evaluations=14,
        finalists=2,
        pareto_fabrics=("ideal", "fat-tree"),
    )
    with Engine(1, progress=False) as eng:
        res = cosearch(space, cfg, eng, reference=REF)
    assert res.best["iteration_s"] <= res.reference["iteration_s"]
    assert len(res.records) <= 14
    front = res.pareto
    assert front == pareto_front(front)
    for r in front:  # nobody dominates a front point
        for q in res.records:
            if not q.get("fixed_topology"):
                assert not (q["iteration_s"] < r["iteration_s"] and q["capex_usd"] < r["capex_usd"])
    assert {r["fate"] for r in res.candidates} <= {
        "best",
        "compute: its compute alone is no faster than the best iteration",
        "network: slower once its communication is simulated",
    }


def test_topoopt_mcmc_alternates_and_is_seeded():
    space = plan_space(BASE, 80e9, SMALL)
    cfg = SearchConfig(
        fabric="topoopt", degree=2, max_evaluations=10, method="topoopt-mcmc", seed=3
    )
    with Engine(1, progress=False) as eng:
        a = cosearch(space, cfg, eng, reference=REF)
        b = cosearch(space, cfg, eng, reference=REF)
    assert _strip(a.records) == _strip(b.records)
    assert a.best["iteration_s"] <= a.reference["iteration_s"]
    stages = {r["stage"] for r in a.records}
    assert "mcmc (fixed topology)" in stages  # plans judged on the current, fixed topology
    assert len(a.records) <= 10


@pytest.mark.slow
def test_same_result_with_one_and_two_workers():
    """Ray with 2 workers gives the same evaluations, in the same order, as in-process; so do
    the search warnings the records carry (``joint`` on a 0.001-unit work limit falls back to
    the congestion objective in every evaluation)."""
    space = plan_space(BASE, 80e9, SMALL)
    cfg = SearchConfig(
        fabric="topoopt", degree=2, max_evaluations=10, finalists=2, pareto_fabrics=("ideal",)
    )
    fell = SearchConfig(
        fabric="joint", degree=2, max_evaluations=3, finalists=1, pareto_fabrics=("ideal",),
        work_limit=0.001,
    )  # fmt: skip
    with Engine(1, progress=False) as eng:
        one = cosearch(space, cfg, eng, reference=REF)
        one_fell = cosearch(space, fell, eng, reference=REF)
    with Engine(2, progress=False) as eng:
        assert eng.backend == "ray"
        two = cosearch(space, cfg, eng, reference=REF)
        two_fell = cosearch(space, fell, eng, reference=REF)
    assert _strip(one.records) == _strip(two.records)
    assert one.best["key"] == two.best["key"]
    assert one.search_warnings() == [] == two.search_warnings()
    assert _strip(one_fell.records) == _strip(two_fell.records)
    said = two_fell.search_warnings()
    assert said and said == one_fell.search_warnings()
    joint = [r for r in two_fell.records if r["fabric"] == "joint"]
    assert [r["search_warning"] for r in joint] == said  # one line per joint evaluation
    assert all("the congestion objective decided" in w for w in said)


class _TableRunner:
    """A stand-in for the evaluation engine: each (candidate, fabric) has a given time."""

    def __init__(self, times):
        self.times, self.records = times, []

    def run(self, jobs, label):
        out = []
        for cand, fabric, stage, _, _ in jobs:
            t = self.times[(cand.key, fabric)]
            out.append({"index": len(self.records), "key": cand.key, "iteration_s": t,
                        "stage": stage})  # fmt: skip
            self.records.append(out[-1])
        return out


def test_joint_finalists_by_ideal_time_find_what_the_cheap_level_ranks_last():
    """Target ``joint`` (never slower than the cheap ``topoopt`` design, never faster than the
    ideal switch): the candidate fastest on the ideal switch but slowest on TopoOpt's one-shot
    design is the best on ``joint``. Ranking finalists by the cheap time (the old rule) never
    sent it to ``joint``; by ideal time it is found (the brute-force optimum over all
    candidates). The cut uses the compute-only bound, not the ideal time (``joint`` may rewrite
    the collectives and beat the ideal switch's rings: plan 141, tests/studies/
    test_ideal_bound.py): the table's times are seconds, the plans' compute bounds far below,
    so nothing is cut and the last candidate is only ranked out (``F = 2``)."""
    from topoopt.app.studies.cosearch.search import _refine

    space = plan_space(BASE, 80e9, SMALL)
    n = len(space)
    assert n >= 4
    keys = [c.key for c in space.candidates]
    times = {}
    for i, k in enumerate(keys):
        ideal = 1.0 + 0.1 * i
        cheap = 10.0 if i == 0 else 2.0 + 0.1 * i
        times[(k, "ideal")] = ideal
        times[(k, "topoopt")] = cheap
        times[(k, "joint")] = ideal + 0.05 if i == 0 else cheap - 0.1
    times[(keys[-1], "ideal")] = 3.0  # no faster on the ideal switch than the best cheap time
    times[(keys[-1], "joint")] = 3.0
    brute = min(keys, key=lambda k: times[(k, "joint")])
    cfg = SearchConfig(
        fabric="joint", degree=2, max_evaluations=3 * n, finalists=2, pareto_fabrics=()
    )
    run = _TableRunner(times)
    best, _, _, levels, counts = _refine(space, cfg, run, None, [0.0] * n)
    assert best["key"] == brute == keys[0]
    sent = {space.candidates[k].key for k in levels["target"]}
    assert keys[1] in sent  # the best cheap candidate, which makes the cut safe
    assert keys[-1] not in sent
    assert counts["pruned by the cheap level"] == 0  # its ideal time is no bound on joint's


def test_evaluation_goes_through_the_reduction_and_equals_the_unreduced_model():
    """Every evaluation simulates through the exact symmetry quotient (issue 25): the record's
    times equal the unreduced model's on a fat-tree to 1e-9."""
    from topoopt.app.studies.compare import build_fabric
    from topoopt.flowsim.iteration import simulate_iteration

    space = plan_space(BASE, 80e9, SMALL)
    c = space.candidates[0]
    r = evaluate(EvalTask(0, space.base, c, "fat-tree", 2, 12.5e9))
    _, w = workload_for(space.base, c)
    run = build_fabric("fat-tree", w, 2, 12.5e9)
    plain = simulate_iteration(run.workload, run.fabric, exposed_by_class=False, reduction=False)
    assert r["iteration_s"] == pytest.approx(plain.iteration_s, rel=1e-9)
    assert r["exposed_comm_s"] == pytest.approx(plain.exposed_comm_s, rel=1e-9, abs=1e-15)
