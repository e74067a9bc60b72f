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


def test_an_address_where_no_ray_head_listens_is_one_line_at_once():
    """Issue 30 item 4: ``--address`` of a cluster that is not there retried for more than a
    minute and printed Ray's warnings; now a TCP probe answers first (a port just closed:
    refused at once), and the CLI prints one line naming --address."""
    import socket

    from typer.testing import CliRunner

    from topoopt.app.cli.app import app
    from topoopt.app.studies.engine import probe_address

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(InputError, match="no answer at 127.0.0.1"):
        probe_address(f"ray://127.0.0.1:{port}", 1.0)
    for bad in ("nonsense", "host:", ":6379", "h:99999"):
        with pytest.raises(InputError, match="HOST:PORT"):
            probe_address(bad)
    probe_address("auto")  # Ray's own discovery: left to Ray
    r = CliRunner().invoke(
        app, ["cosearch", "vgg16", "--servers", "8", "--address", f"127.0.0.1:{port}"]
    )
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"error: --address: got '127.0.0.1:{port}'")


def killed_once(item):
    """SIGKILL the worker process on the first attempt of each item, then square (the marker
    file is written before the kill, so the retry knows)."""
    import signal

    folder, x = item
    marker = Path(folder) / f"killed-{x}"
    if not marker.exists():
        marker.write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)
    return x * x


@pytest.mark.slow
def test_a_sigkilled_ray_worker_is_retried_with_equal_results(tmp_path):
    """Issue 30 item 4: a worker process killed mid-evaluation (SIGKILL, no exception to
    catch): Ray re-submits the task (max_retries) and the results equal the fault-free run."""
    import ray
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    items = [(str(tmp_path), k) for k in range(4)]
    with Engine(2, progress=False) as eng:
        out = eng.map(killed_once, items)
    # the fault-free run, in-process (a marker for every item already: nobody is killed)
    with Engine(1, progress=False) as eng:
        assert out == eng.map(killed_once, items) == [k * k for k in range(4)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"killed-{k}" for k in range(4)]
    assert not ray.is_initialized()
