"""A local Ray instance that does not start (issue 30, Ray faults): on a busy machine Ray's node
can time out during its start (``Exception: The current node timed out during startup``, a
traceback and exit 1 seen at 16,384 GPUs with ``--workers 2``). It is one line naming Ray and
the way out (``--workers 1``), and whatever the failed start left is stopped."""

from __future__ import annotations

import pytest

from topoopt.app.studies.engine import Engine
from traffic.errors import InputError

ray = pytest.importorskip("ray")


@pytest.mark.parametrize(
    "exc",
    [Exception("The current node timed out during startup. This could happen because ..."),
     ConnectionError("GCS did not answer")],
)  # fmt: skip
def test_a_local_instance_that_does_not_start_is_one_line(monkeypatch, exc):
    calls = []

    def failing_init(*a, **k):
        raise exc

    monkeypatch.setattr(ray, "init", failing_init)
    monkeypatch.setattr(ray, "shutdown", lambda *a, **k: calls.append("shutdown"))
    with pytest.raises(InputError) as info:
        with Engine(workers=2, progress=False):
            pass
    text = str(info.value)
    assert "\n" not in text and text.startswith("ray: got 'a ")
    assert "did not start" in text and "--workers 1" in text, text
    assert calls == ["shutdown"]  # what the failed start left is stopped
