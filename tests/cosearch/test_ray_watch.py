"""The command line's watcher of its local Ray instance (``engine.EXIT_ON_DEATH``): a main thread
blocked in a Ray call when the instance dies (Ray's driver would end the process after its 60 s
GCS timeout, exit 1, with its own message: the full suite's flake of ``test_ray_dies``) still
ends with the one line and exit 2. No Ray here: the instance's death is a stub, the blocked call
a sleep."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, time
from topoopt.app.studies import engine
engine.EXIT_ON_DEATH = True
engine.GRACE_S, engine.WATCH_S = 0.3, 0.05
e = engine.Engine(workers=2, progress=False)
e._counts = (3, 10)
e._dead_process = lambda: "raylet"
e._arm_watch()
if sys.argv[1] == "blocked":
    time.sleep(60)  # the main thread in a Ray call that never returns
else:  # the main thread reported it and is stuck exiting (e.g. Ray's shutdown at exit)
    import atexit
    atexit.register(time.sleep, 60)
    print("error: reported by the command", file=sys.stderr)
    sys.exit(2)
"""


def _run(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=50,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip


def test_a_blocked_main_thread_still_ends_with_the_line_and_exit_2():
    r = _run("blocked")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [
        "error: ray: got 'the local Ray instance stopped (raylet exited) after 3 of 10 "
        "evaluations'; allowed: a running instance (with --out FILE, run the command again "
        "with --resume to continue)"
    ]
    assert r.stdout == ""


def test_a_reported_death_stuck_at_exit_ends_with_exit_2_and_no_second_line():
    r = _run("reported")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == ["error: reported by the command"]


def test_a_normal_close_stops_the_watch():
    from topoopt.app.studies import engine

    e = engine.Engine(workers=2, progress=False)
    old = engine.WATCH_S
    engine.WATCH_S = 0.01
    try:
        e._arm_watch()
        e._watch_stop.set()  # what close() does before a normal shutdown
        import threading
        import time

        time.sleep(0.1)
        assert not any(t.name != "MainThread" and t.is_alive() and t.daemon
                       and getattr(t, "_target", None) == e._watch
                       for t in threading.enumerate())  # fmt: skip
    finally:
        engine.WATCH_S = old
