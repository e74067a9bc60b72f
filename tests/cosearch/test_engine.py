"""The evaluation engine: in-process and Ray backends, retries, order of results."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from topoopt.app.studies.engine import Engine, EvaluationFailed
from traffic.errors import InputError


def flaky(item):
    """Raise on the first attempt of each item (a marker file remembers), then square."""
    folder, x = item
    marker = Path(folder) / f"attempt-{x}"
    if not marker.exists():
        marker.write_text("failed once")
        raise RuntimeError(f"first attempt of {x} fails")
    return x * x


def always_fails(x):
    raise RuntimeError(f"task {x} always fails")


def test_local_backend_retries_a_failure(tmp_path):
    with Engine(1, progress=False) as eng:
        assert eng.backend == "local"
        out = eng.map(flaky, [(str(tmp_path), k) for k in range(4)])
    assert out == [0, 1, 4, 9]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"attempt-{k}" for k in range(4)]


def test_local_backend_never_drops_a_failure():
    with Engine(1, max_retries=1, progress=False) as eng, pytest.raises(EvaluationFailed):
        eng.map(always_fails, [1])


def test_bad_engine_settings():
    with pytest.raises(InputError):
        Engine(0)
    with pytest.raises(InputError):
        Engine(2, max_retries=-1)


@pytest.mark.slow
def test_ray_starts_retries_keeps_order_and_stops(tmp_path):
    """A local Ray instance starts on entering the engine and stops on leaving it; a task that
    raises once is retried on Ray (max_retries, retry_exceptions) and its result kept; results
    come back in input order; a task that always fails raises instead of vanishing."""
    import ray
    import ray.cloudpickle

    # pytest imports this file as "cosearch.test_engine", a name Ray's workers cannot import:
    # ship the test's functions by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    assert not ray.is_initialized()
    with Engine(2, progress=False) as eng:
        assert eng.backend == "ray" and ray.is_initialized()
        assert ray.cluster_resources().get("CPU") == 2
        out = eng.map(flaky, [(str(tmp_path), k) for k in range(5)][::-1])
        assert out == [16, 9, 4, 1, 0]
        assert len(list(tmp_path.iterdir())) == 5  # each failed once, then succeeded
        with pytest.raises(EvaluationFailed):
            eng.map(always_fails, [7])
    assert not ray.is_initialized()
    assert os.environ.get("RAY_USAGE_STATS_ENABLED") == "0"
