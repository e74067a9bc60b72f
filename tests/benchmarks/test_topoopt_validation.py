"""The TopoOpt baselines on TopoOpt's own task graphs, held against the artifact's results.

Source of the published numbers: hipersys-team/TopoOpt, ``simulation/scripts/fig16/topoopt/
100_topo_d4_27jobs.csv`` and ``100_topo_d8_27jobs.csv``: iteration times (htsim "Final" times,
picoseconds) of 16-server jobs at 100 Gbps on the TopoOpt fabric with 4 and 8 ports, drawn from
its DLRM, transformer, CANDLE and VGG runs (five search runs each). The attribution of each value
to its job is explained in ``docs/validation.md`` (the notebook names 131,546,054,758 ps as a
CANDLE run at 8 ports; the draw frequencies match the notebook's job probabilities).

Tolerances:

- transformer and VGG (pure data parallel: the strategy is the same on any fabric, so the task
  graph we read is the job TopoOpt simulated): 1 %. Ours are 0.08-0.42 % below htsim's, which
  adds TCP's packet-level effects (slow start, 1 us per hop, queueing) that a fluid max-min model
  leaves out.
- DLRM: within the range of TopoOpt's five runs, widened by 5 % (its runs search different
  strategies; ours replays the fat-tree run's strategy, so the spread of TopoOpt's own runs is
  the uncertainty of the comparison).
- CANDLE: TopoOpt's job is faster than any fabric can make our task graph (our ideal switch is
  already slower at 8 ports): its co-optimised strategy differs from the fat-tree run's, so the
  number is not comparable; the test pins that finding.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from topoopt.app.studies.compare import compare
from traffic.taskgraph import read_taskgraph

PS = 1e-12
B = 100e9 / 8
DATA = Path(__file__).resolve().parents[1] / "data" / "topoopt-taskgraphs"

# raw values of the artifact's CSV files (picoseconds)
DLRM = {
    4: (23163828770, 23638591159, 24440174855, 25153992275, 33580502766),
    8: (15185241946, 19382130971, 19611805047, 19926218536, 20917179248),
}
TRANSFORMER = {4: 62815131375, 8: 62643560175}
VGG = {4: 100559060382, 8: 100559060382}
CANDLE = {4: 225221522566, 8: 131546054758}


def times(model: str, degree: int) -> dict[str, float]:
    w = read_taskgraph(DATA / f"100{model}_16.fbuf")
    t = compare(w, ["ideal", "topoopt", "topoopt-released"], degree=degree, link_bandwidth=B)
    return t.table.set_index("fabric")["iteration_s"].to_dict()


@pytest.mark.slow
@pytest.mark.parametrize("degree", [4, 8])
def test_data_parallel_jobs_match_the_artifact_within_one_percent(degree):
    for model, published in (("transformer", TRANSFORMER), ("vgg", VGG)):
        got = times(model, degree)
        for variant in ("topoopt", "topoopt-released"):
            assert got[variant] == pytest.approx(published[degree] * PS, rel=0.01), model


@pytest.mark.slow
@pytest.mark.parametrize("degree", [4, 8])
def test_dlrm_falls_within_the_artifacts_runs(degree):
    got = times("dlrm", degree)
    lo, hi = min(DLRM[degree]) * PS, max(DLRM[degree]) * PS
    for variant in ("topoopt", "topoopt-released"):
        assert lo / 1.05 <= got[variant] <= hi * 1.05, (variant, got[variant])


@pytest.mark.slow
def test_candle_differs_by_strategy_not_by_topology():
    got = times("candle", 8)
    # no fabric beats the ideal switch, and ours is slower than TopoOpt's job: the task graphs
    # differ (TopoOpt co-optimised CANDLE's strategy with its topology)
    assert got["ideal"] > CANDLE[8] * PS
    assert got["topoopt"] >= got["ideal"]
