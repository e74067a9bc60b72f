"""The evaluation engine of the studies: a list of independent evaluations, run on Ray or
in-process, with results in input order whatever the worker count.

``Engine(workers=1)`` (no address) runs everything in this process, without importing Ray.
Otherwise every evaluation is a Ray task: on a local Ray instance that the engine starts on
entering its context (``ray.init(num_cpus=workers, include_dashboard=False,
log_to_driver=False)``, loopback only) and stops on leaving it, or on an existing cluster with
``address`` (the engine connects and disconnects; the cluster stays up, and its workers must be
able to import ``topoopt``). Results are collected by task index, so they never depend on the
order in which workers finish.

A failed evaluation is retried: a task that raises is re-run up to ``max_retries`` times (Ray's
``retry_exceptions=True``; in-process, the same loop), and a task whose worker process dies is
re-submitted by Ray (``max_retries``). An evaluation that still fails raises
:class:`EvaluationFailed` naming the task; none is ever silently dropped. Progress goes to
stderr as a rich progress bar, and so do Ray's own driver messages (stdout is redirected to
stderr while a Ray session the engine started is open: ``--json`` output stays clean).

The local instance dying (its raylet or GCS process exits, e.g. killed) is seen within
:data:`WAIT_S` of the next wait: :class:`RayInstanceDied` (one line for the CLI) is raised before
Ray's driver would end the process, the rest of that instance is stopped, and every result that
arrived before went to ``map``'s ``on_result`` (``cosearch --out`` saves them there, so that
``--resume`` continues).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from traffic.errors import InputError

PROBE_SECONDS = 5.0
"""How long :func:`probe_address` waits for a Ray head to accept a connection."""


def probe_address(address: str, timeout_s: float = PROBE_SECONDS) -> None:
    """Check that ``HOST:PORT`` (or ``ray://HOST:PORT``) accepts a TCP connection.

    ``ray.init`` on an address where nothing listens retries for more than a minute and prints
    Ray's own warnings on stderr; this check answers in at most ``timeout_s``. ``auto`` (Ray's
    own discovery) is left to Ray.

    Raises
    ------
    InputError
        Not ``HOST:PORT``, or nothing answering there.

    Examples
    --------
    >>> probe_address("127.0.0.1:1", 1.0)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: --address: got '127.0.0.1:1'; allowed: a reachable Ray cluster (no answer at 127.0.0.1:1: Connection refused)
    """  # noqa: E501
    import socket

    if address == "auto":
        return
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError("--address", address, "HOST:PORT of a Ray cluster's head (or auto)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise InputError(
            "--address", address, f"a reachable Ray cluster (no answer at {host}:{port}: {why})"
        ) from None


__all__ = ["RayInstanceDied", "probe_address", "PROBE_SECONDS", "Engine", "EvaluationFailed"]


@contextlib.contextmanager
def _quiet_fd2():
    """File descriptor 2 to /dev/null for the block (C++ logging bypasses ``sys.stderr``)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class EvaluationFailed(RuntimeError):
    """An evaluation failed on every attempt (the last exception is its ``__cause__``)."""


WAIT_S = 0.25
"""Seconds between two checks that the local Ray instance is alive while results are awaited."""


EXIT_ON_DEATH = False
"""Set by the command line's entry point (:func:`topoopt.app.cli.app.main`): a local instance this
engine started that dies is then also watched from a thread (:meth:`Engine._watch`), which ends
the process with the one line and exit 2 when the main thread has not done so within
:data:`GRACE_S` (it can be blocked in a Ray call, which Ray's driver ends after its 60 s GCS
timeout with exit 1). Off for library use: there the exception is the caller's."""

GRACE_S = 20.0
"""Seconds the main thread has, after the watcher sees the local instance die, to report it."""

WATCH_S = 0.5
"""Seconds between two checks of the watcher (:data:`EXIT_ON_DEATH`)."""


_START_HINT = (
    "a Ray instance that starts (run the command again on a less busy machine, or --workers 1 "
    "to evaluate in-process without Ray)"
)


class RayInstanceDied(InputError):
    """The local Ray instance stopped mid-run (its ``process`` exited): one line for the CLI.

    >>> print(RayInstanceDied("raylet", 3, 10))
    ray: got 'the local Ray instance stopped (raylet exited) after 3 of 10 evaluations'; allowed: a running instance (with --out FILE, run the command again with --resume to continue)
    """  # noqa: E501

    def __init__(self, process: str, done: int, total: int):
        self.process, self.done, self.total = str(process), int(done), int(total)
        super().__init__(
            "ray",
            f"the local Ray instance stopped ({self.process} exited) after {self.done} of "
            f"{self.total} evaluations",
            "a running instance (with --out FILE, run the command again with --resume to continue)",
        )

    def __reduce__(self):
        return (type(self), (self.process, self.done, self.total))


class Engine:
    """Run evaluations in-process or on Ray (module docstring).

    Parameters
    ----------
    workers : int
        Parallel evaluations (CPUs of the local Ray instance). 1 without ``address``: in-process.
    address : str, optional
        Address of an existing Ray cluster (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``).
    max_retries : int
        Re-runs of a failed evaluation (exceptions and dead workers).
    progress : bool
        Show a progress bar on stderr.

    Examples
    --------
    >>> with Engine(workers=1, progress=False) as eng:
    ...     eng.backend, eng.map(abs, [-2, 3, -1])
    ('local', [2, 3, 1])
    """

    def __init__(
        self,
        workers: int = 1,
        address: str | None = None,
        *,
        max_retries: int = 2,
        progress: bool = True,
    ) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 4096:
            raise InputError("workers", workers, "an integer 1..4096")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise InputError("max_retries", max_retries, "an integer >= 0")
        self.workers = workers
        self.address = address or None
        self.max_retries = max_retries
        self.progress = progress
        self._ray = None
        self._started = False
        self._died = False
        self._stdout = None
        self._counts = (0, 0)  # evaluations finished and asked, for the watcher's line
        self._watch_stop = None

    @property
    def backend(self) -> str:
        """``"ray"`` or ``"local"``."""
        return "local" if (self.workers == 1 and self.address is None) else "ray"

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> Engine:
        if self.backend == "ray":
            self._start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> None:
        if self.address is not None:
            probe_address(self.address)  # one line in seconds, before Ray's minute of retries
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network calls
        # something that answers TCP but is no Ray head: give up after 10 s, not 60; our own
        # local instance dying is seen by its processes' exit (WAIT_S) well before 60 s
        timeout = "10" if self.address is not None else "60"
        os.environ.setdefault("RAY_gcs_rpc_server_reconnect_timeout_s", timeout)
        import ray

        self._ray = ray
        if ray.is_initialized():  # somebody else's session: use it, leave it running
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        # Ray's driver prints task failures and retries on stdout from a background thread:
        # send them to stderr while the session lasts (stdout carries --json documents)
        self._stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            if self.address is not None:
                with _quiet_fd2():  # Ray's C++ client logs every retry on fd 2
                    ray.init(address=self.address, **kwargs)
            else:
                # Ray enables token authentication for the local instance it starts and says so
                # on stderr each time: the default, kept, without the notice (one line rule)
                import logging

                notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
                level = notice.level
                notice.setLevel(logging.ERROR)
                try:
                    ray.init(num_cpus=self.workers, **kwargs)
                finally:
                    notice.setLevel(level)
        except (ConnectionError, ValueError) as exc:  # unreachable, or not an address at all
            sys.stdout, self._stdout = self._stdout, None
            if self.address is None:
                self._abandon_start()
                raise InputError(
                    "ray", f"a local instance that did not start ({exc})", _START_HINT
                ) from None
            raise InputError(
                "--address", self.address, f"a reachable Ray cluster ({exc})"
            ) from None
        except Exception as exc:  # Ray's own: e.g. its node timed out during start on a busy host
            sys.stdout, self._stdout = self._stdout, None
            self._abandon_start()
            what = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                "ray" if self.address is None else "--address",
                f"a Ray instance that did not start ({what[:200]})",
                _START_HINT,
            ) from None
        self._started = True
        if EXIT_ON_DEATH and self.address is None:
            self._arm_watch()

    def _arm_watch(self) -> None:
        """Start the watcher thread of :data:`EXIT_ON_DEATH`."""
        import threading

        self._watch_stop = threading.Event()
        err = os.dup(2)  # fd 2 itself may be quieted (_quiet_fd2) when the line is due
        threading.Thread(target=self._watch, args=(self._watch_stop, err), daemon=True).start()

    def _watch(self, stop, err: int) -> None:
        """Poll the local instance; once a process of it has exited, give the main thread
        :data:`GRACE_S` to report it and end, then end the process: the one line (when the
        main thread is still running: otherwise it has reported and is stuck exiting) and
        exit 2. ``stop`` set (the engine closed normally) ends the watch."""
        import threading
        import time

        dead = None
        while dead is None:
            if stop.wait(WATCH_S):
                return
            dead = self._dead_process()
        time.sleep(GRACE_S)
        if threading.main_thread().is_alive():
            line = f"error: {RayInstanceDied(dead, *self._counts)}\n"
            os.write(err, line.encode())
        os._exit(2)

    def _abandon_start(self) -> None:
        """Stop whatever a failed ``ray.init`` left running (quietly)."""
        try:
            with _quiet_fd2():
                self._ray.shutdown()
        except Exception:  # noqa: BLE001 - nothing was started, or it is gone already
            pass

    def close(self) -> None:
        """Stop the local Ray instance (or disconnect from the cluster) if this engine began it."""
        if self._started and self._ray is not None:
            if self._watch_stop is not None and not self._died:
                self._watch_stop.set()  # a normal close: its shutdown is no death
            if self._died:  # the rest of the instance goes too; Ray's complaints are not ours
                self._stop_dead_instance()
            else:
                self._ray.shutdown()
        if self._stdout is not None:
            sys.stdout, self._stdout = self._stdout, None
        self._started = False

    def _stop_dead_instance(self) -> None:
        """Kill what is left of the local instance this engine started (its own processes,
        by id) and drop the driver's state, with Ray's C++ logging on fd 2 silenced."""
        node = self._ray._private.worker._global_node
        for procs in (getattr(node, "all_processes", None) or {}).values():
            for p in procs:
                proc = getattr(p, "process", None)
                if proc is not None and proc.poll() is None:
                    proc.kill()
        with _quiet_fd2():
            try:
                self._ray.shutdown()
            except Exception:  # noqa: BLE001 - a dead instance cannot be shut down cleanly
                pass

    # ------------------------------------------------------------------ running
    def map(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        label: str = "evaluations",
        on_result: Callable[[int, Any], None] | None = None,
    ) -> list[Any]:
        """``[fn(x) for x in items]``, in parallel; results in the order of ``items``.

        ``on_result(k, result)`` is called in this process as each result arrives (in the
        order they finish), e.g. to save it before the next one.

        Raises
        ------
        RayInstanceDied
            The local Ray instance this engine started stopped (its raylet or GCS process
            exited); the results that arrived before were passed to ``on_result``.
        """
        items = list(items)
        if not items:
            return []
        if self.backend == "local":
            return self._map_local(fn, items, label, on_result)
        if self._ray is None:
            self._start()
        return self._map_ray(fn, items, label, on_result)

    def _check_alive(self, finished: int, total: int) -> None:
        """Raise :class:`RayInstanceDied` if the local instance this engine started is gone."""
        dead = self._dead_process()
        if dead is not None:
            self._died = True
            raise RayInstanceDied(dead, finished, total)

    def _dead_process(self) -> str | None:
        """The name of a process of the local Ray instance this engine started that has
        exited (raylet, GCS), else None (no local instance of ours: None)."""
        if not self._started or self.address is not None:
            return None
        node = getattr(getattr(self._ray, "_private", None), "worker", None)
        node = getattr(node, "_global_node", None)
        for name, procs in (getattr(node, "all_processes", None) or {}).items():
            if "raylet" not in name and "gcs" not in name:
                continue
            for p in procs:
                proc = getattr(p, "process", None)
                if proc is not None and proc.poll() is not None:
                    return name
        return None

    def _bar(self, total: int, label: str):
        """A rich bar on a terminal; one line per finished evaluation otherwise (logs)."""
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if self.progress and not sys.stderr.isatty():
            return _Lines()
        return Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(file=sys.stderr, markup=False),
            disable=not self.progress,
            transient=False,
        )

    def _map_local(self, fn, items, label, on_result=None):
        out = []
        with self._bar(len(items), label) as bar:
            tid = bar.add_task(label, total=len(items))
            for k, x in enumerate(items):
                for attempt in range(self.max_retries + 1):
                    try:
                        out.append(fn(x))
                        break
                    except InputError:
                        raise
                    except Exception as exc:
                        if attempt == self.max_retries:
                            raise EvaluationFailed(
                                f"{label}: task {k} failed {attempt + 1} times: {exc!r}"
                            ) from exc
                if on_result is not None:
                    on_result(k, out[-1])
                bar.advance(tid)
        return out

    def _map_ray(self, fn, items, label, on_result=None):
        ray = self._ray
        self._counts = (0, len(items))
        self._check_alive(0, len(items))
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries, retry_exceptions=True)(fn)
        refs = [remote.remote(x) for x in items]
        where = {ref: k for k, ref in enumerate(refs)}
        results: dict[int, Any] = {}
        pending = list(refs)
        with self._bar(len(items), label) as bar:
            tid = bar.add_task(label, total=len(items))
            while pending:
                # a short wait, so that a dead local instance is seen before Ray's driver gives
                # up on it (it ends the process after RAY_gcs_rpc_server_reconnect_timeout_s)
                self._counts = (len(results), len(items))
                done, pending = ray.wait(pending, num_returns=1, timeout=WAIT_S)
                self._check_alive(len(results), len(items))
                for ref in done:
                    k = where[ref]
                    try:
                        results[k] = ray.get(ref)
                    except Exception as exc:
                        # a task lost with its raylet: say so, and do not send cancels to a
                        # dead instance (they can block until Ray ends the process, exit 1)
                        self._check_alive(len(results), len(items))
                        for r in pending:
                            ray.cancel(r)
                        cause = getattr(exc, "cause", None) or exc
                        if isinstance(cause, InputError):
                            raise cause from None
                        raise EvaluationFailed(
                            f"{label}: task {k} failed after {self.max_retries} retries: {cause!r}"
                        ) from exc
                    if on_result is not None:
                        on_result(k, results[k])
                    bar.advance(tid)
        return [results[k] for k in range(len(items))]


class _Lines:
    """Progress as plain lines on stderr (``label: k/n``), the bar's stand-in off a terminal."""

    def __enter__(self):
        self._tasks: dict[int, list] = {}
        return self

    def __exit__(self, *exc) -> None:
        return None

    def add_task(self, label: str, total: int) -> int:
        self._tasks[len(self._tasks)] = [label, 0, total]
        return len(self._tasks) - 1

    def advance(self, tid: int) -> None:
        t = self._tasks[tid]
        t[1] += 1
        print(f"{t[0]}: {t[1]}/{t[2]}", file=sys.stderr, flush=True)
