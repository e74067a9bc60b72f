"""Evaluations stay bounded: screening coarsens ZeRO/FSDP buckets, a finalist too large for the
exact simulation falls back to the coarsening, and a candidate too large even so is a
``skipped`` record (null times in the JSON document), never a crash."""

from __future__ import annotations

import json
import math

import pytest

from topoopt.app.cli.commands.cosearch import _finite
from topoopt.app.studies.cosearch import evaluate as ev
from topoopt.app.studies.cosearch.space import Candidate

# llama2-7b on 4 x 8 GPUs, tp8 FSDP, m = 4: 270 buckets of 25 MB per channel
BASE = {"model": "llama2-7b", "cluster": {"servers": 4, "gpus_per_server": 8}}
PAR = {"tp": 8, "pp": 1, "dp": 4, "micro_batch_size": 1, "global_batch_size": 16}
CAND = Candidate(tuple(sorted({**PAR, "fsdp": "full_shard"}.items())), None, "tp8 dp4 fsdp")


def _eval(**kw):
    return ev.evaluate(ev.EvalTask(0, BASE, CAND, "ideal", 2, 12.5e9, **kw))


def test_screening_exact_fallback_and_skip(monkeypatch):
    monkeypatch.setattr(ev, "SCREEN_MAX_BUCKETS", 16)
    exact = _eval()
    assert not exact["coarsened"] and exact["skipped"] is None
    same = _eval(screening=True)  # under SCREEN_FLOWS: screening is exact
    assert {k: v for k, v in same.items() if k != "wall_s"} == {
        k: v for k, v in exact.items() if k != "wall_s"
    }
    monkeypatch.setattr(ev, "SCREEN_FLOWS", exact["flows"] - 1)
    screen = _eval(screening=True)
    assert screen["coarsened"] and screen["flows"] < exact["flows"]
    # the bound of simulate_iteration's max_buckets: within 1/16 of the iteration
    assert screen["iteration_s"] == pytest.approx(exact["iteration_s"], rel=1 / 16)
    assert screen["compute_s"] == pytest.approx(exact["compute_s"], rel=1e-12)
    # a finalist above the size limit: the screening coarsening, flagged
    monkeypatch.setattr(ev, "MAX_FLOWS", exact["flows"] - 1)
    fallback = _eval()
    assert fallback["coarsened"] and fallback["iteration_s"] == screen["iteration_s"]
    # too large even coarsened: a record saying why, with infinite times
    monkeypatch.setattr(ev, "MAX_FLOWS", screen["flows"] - 1)
    skipped = _eval()
    assert skipped["skipped"] == (
        f"too large: {screen['flows']:,} flows (limit {screen['flows'] - 1:,})"
    )
    assert math.isinf(skipped["iteration_s"]) and skipped["flows"] is None
    doc = _finite({"records": [skipped]})
    assert doc["records"][0]["iteration_s"] is None
    json.dumps(doc, allow_nan=False)  # strict JSON
