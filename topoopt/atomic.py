"""Atomic output files: write to a temporary file beside the target, then publish it in one step.

A failed or interrupted command never leaves a half-written output behind, and never replaces a
file it was not allowed to replace:

- The temporary file (or folder, for outputs that are folders: :func:`atomic_write_folder`) sits
  in the target's folder and is named ``.NAME.XXXXXXXX.HOST.PID.tmp`` (``HOST`` six hex digits
  of a hash of the host name, ``PID`` the writer's process id).
- SIGTERM and SIGINT (and SIGHUP) arriving while a temporary file exists remove it before the
  process ends as it would have without us: by the signal, or by ``KeyboardInterrupt``.
- SIGKILL cannot be caught, so every later write into the same folder (and every
  :func:`check_writable`) removes the temporary files of this host whose process is gone
  (:func:`remove_stale_temporaries`).
- Without ``force`` the file is published with ``os.link`` (or, where a file system has no hard
  links, an ``O_EXCL`` creation of the target), so a file that appeared at the target while the
  command ran is not replaced: the write fails with :class:`InputError` naming the target.
- Problems with the target's folder (missing, not a folder, not writable) are found by
  :func:`check_writable` before any work, by really creating and removing a temporary file there,
  and every message names the user's path, never the temporary file.

Test hook: when the environment variable ``TOPOOPT_PAUSE_BEFORE_PUBLISH`` names a file path, the
writer, after writing its temporary file, writes the temporary file's path into that file and
waits (up to two minutes) until the file is removed. Tests use it to signal a writer mid-write, or
to create the target under it, deterministically.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traffic.errors import InputError

__all__ = [
    "atomic_write_folder",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_with",
    "check_writable",
    "remove_stale_temporaries",
    "temporary_name_pattern",
    "PAUSE_ENV",
]

PAUSE_ENV = "TOPOOPT_PAUSE_BEFORE_PUBLISH"
"""Environment variable of the test hook (module docstring)."""

_HOST = hashlib.sha1(socket.gethostname().encode("utf-8", "replace")).hexdigest()[:6]
_TMP_RE = re.compile(r"^\..+\.[a-z0-9_]{8}\.(?P<host>[0-9a-f]{6})\.(?P<pid>\d+)\.tmp$")
_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)

# Temporary files that exist right now, and the signal handlers we replaced to guard them.
_LIVE: set[str] = set()
_SAVED: dict[int, Any] = {}
_LOCK = threading.Lock()


def temporary_name_pattern() -> re.Pattern[str]:
    """The regular expression every temporary file name of this module matches.

    Groups ``host`` (hash of the host name) and ``pid`` (the writer's process id).

    Examples
    --------
    >>> m = temporary_name_pattern().match(".design.json.k2x9_a0q.0a1b2c.4242.tmp")
    >>> m["host"], int(m["pid"])
    ('0a1b2c', 4242)
    """
    return _TMP_RE


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not ours to judge
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a process of another user
    return True


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Remove this host's temporary files in ``folder`` whose writing process has ended.

    Only names of this module's pattern (:func:`temporary_name_pattern`) written on this host are
    touched (a process id from another host, on a shared file system, says nothing here). Returns
    the removed paths. A process id that was reused by an unrelated process keeps its file until
    that process ends too.
    """
    if os.name != "posix":
        return []
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TMP_RE.match(name)
        if m is None or m["host"] != _HOST or _pid_alive(int(m["pid"])):
            continue
        path = Path(folder) / name
        try:
            _remove(path)
        except OSError:
            continue
        removed.append(path)
    return removed


def _remove(path: str | os.PathLike) -> None:
    """Remove a temporary file, or a temporary folder with everything in it."""
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink()


def _new_temporary(p: Path) -> Path:
    """Create an empty temporary file beside ``p`` (an OSError names the temporary file)."""
    fd, tmp = tempfile.mkstemp(
        prefix=f".{p.name}.", suffix=f".{_HOST}.{os.getpid()}.tmp", dir=p.parent
    )
    os.close(fd)
    return Path(tmp)


def _folder_error(p: Path, exc: OSError) -> InputError:
    reason = f"a writable folder ({exc.strerror})"
    return InputError(str(p), f"folder {p.parent} not writable", reason)


def check_writable(path: str | os.PathLike, force: bool = False) -> Path:
    """Return ``path`` as a Path after checking, before any work, that it may be written.

    The folder is tried by creating and removing a temporary file in it, so read-only file
    systems, permissions and ACLs all show here, with the user's path in the message. Stale
    temporary files of ended processes in that folder are removed on the way.

    Raises
    ------
    InputError
        If the file exists and ``force`` is false; if it is a folder or a read-only file; if its
        folder does not exist, is not a folder, or cannot be written.
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(str(p), "a folder", "a file path (give the file name too)")
    if p.exists() or p.is_symlink():
        if not force:
            raise InputError(str(p), "exists", "a path that does not exist yet, or pass --force")
        if not os.access(p, os.W_OK):
            raise InputError(str(p), "a read-only file", "a writable file (check its permissions)")
    parent = p.parent
    if not parent.exists():
        raise InputError(str(p), str(parent), "a file in an existing folder")
    if not parent.is_dir():
        raise InputError(str(p), str(parent), "a file in a folder (this is not a folder)")
    remove_stale_temporaries(parent)
    try:
        _new_temporary(p).unlink()
    except OSError as exc:
        raise _folder_error(p, exc) from None
    return p


def _on_signal(signum: int, frame: Any) -> None:
    """Remove the live temporary files, then end the process as the replaced handler would."""
    prev = _SAVED.get(signum, signal.SIG_DFL)
    if callable(prev):
        # e.g. Python's SIGINT handler: its KeyboardInterrupt unwinds through the writer, whose
        # cleanup removes the temporary file.
        prev(signum, frame)
        return
    for t in list(_LIVE):
        try:
            _remove(t)
        except OSError:
            pass
    _LIVE.clear()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _guard(tmp: Path) -> None:
    """Register ``tmp`` as live; install the signal handlers with the first live file."""
    with _LOCK:
        _LIVE.add(str(tmp))
        if _SAVED or threading.current_thread() is not threading.main_thread():
            return  # installed already, or not possible off the main thread (stale cleanup)
        for sig in _SIGNALS:
            prev = signal.getsignal(sig)
            if prev in (signal.SIG_IGN, None):
                continue  # ignored signals end nothing; handlers not set from Python are kept
            _SAVED[sig] = prev
            signal.signal(sig, _on_signal)


def _unguard(tmp: Path) -> None:
    with _LOCK:
        _LIVE.discard(str(tmp))
        if _LIVE or not _SAVED or threading.current_thread() is not threading.main_thread():
            return
        for sig, prev in _SAVED.items():
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, prev)
        _SAVED.clear()


def _pause_for_tests(tmp: Path) -> None:
    flag = os.environ.get(PAUSE_ENV)
    if not flag:
        return
    Path(flag + ".part").write_text(str(tmp), encoding="utf-8")
    os.replace(flag + ".part", flag)  # the waiting test never reads a half-written flag
    deadline = time.monotonic() + 120.0
    while os.path.exists(flag) and time.monotonic() < deadline:
        time.sleep(0.01)


def _exists_error(p: Path) -> InputError:
    return InputError(
        str(p),
        "created by someone else while the command ran",
        "a path that does not exist yet, or pass --force to replace it",
    )


def _publish(tmp: Path, p: Path, force: bool) -> None:
    """Move ``tmp`` onto ``p``; without ``force`` never replace a file that exists by now."""
    if force:
        os.replace(tmp, p)
        return
    try:
        os.link(tmp, p)
    except FileExistsError:
        raise _exists_error(p) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # No hard links here: claim the name with O_EXCL, then replace our own empty claim.
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            raise _exists_error(p) from None
        os.close(fd)
        os.replace(tmp, p)
        return
    tmp.unlink()


def atomic_write_with(
    path: str | os.PathLike, writer: Callable[[Path], None], *, force: bool = True
) -> Path:
    """Call ``writer(tmp_path)`` and publish the temporary file as ``path`` on success.

    Parameters
    ----------
    path : path-like
        The output file.
    writer : callable
        Writes the whole content into the path it is given.
    force : bool
        Replace ``path`` if it exists when the file is published (default). Without it, a file
        that exists at that moment is kept and :class:`InputError` is raised.

    Raises
    ------
    InputError
        The folder cannot be written, or (without ``force``) the target exists. Messages name
        ``path``, not the temporary file.
    """
    p = Path(path)
    remove_stale_temporaries(p.parent)
    try:
        tmp = _new_temporary(p)
    except OSError as exc:
        raise _folder_error(p, exc) from None
    _guard(tmp)
    try:
        writer(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        _pause_for_tests(tmp)
        _publish(tmp, p, force)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        _unguard(tmp)
    return p


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, force: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (``force`` as in :func:`atomic_write_with`)."""
    return atomic_write_with(path, lambda t: t.write_bytes(data), force=force)


def atomic_write_text(path: str | os.PathLike, text: str, *, force: bool = True) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically (``force`` as in :func:`atomic_write_with`)."""
    return atomic_write_bytes(path, text.encode("utf-8"), force=force)


def atomic_write_folder(
    path: str | os.PathLike,
    fill: Callable[[Path], Any],
    *,
    force: bool = False,
    replaceable: Callable[[Path], bool] = lambda p: False,
) -> Any:
    """Fill a temporary folder beside ``path`` with ``fill(tmp)``, then rename it to ``path``.

    Signals and stale temporaries are handled as for files (module docstring). Without ``force``
    a folder that exists at ``path`` when the result is published is kept (:class:`InputError`
    naming ``path``); with ``force`` it is replaced only if ``replaceable(path)`` says so (for
    example: it holds nothing but an earlier output of the same command). Returns what ``fill``
    returned.
    """
    p = Path(path)
    remove_stale_temporaries(p.parent)
    suffix = f".{_HOST}.{os.getpid()}.tmp"
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=suffix, dir=p.parent))
    except OSError as exc:
        raise _folder_error(p, exc) from None
    _guard(tmp)
    old: Path | None = None
    try:
        result = fill(tmp)
        _pause_for_tests(tmp)
        if p.exists() or p.is_symlink():
            if not force:
                raise _exists_error(p)
            if not replaceable(p):
                raise InputError(str(p), "a folder topoopt did not write", "an earlier output")
            old = Path(tempfile.mkdtemp(prefix=f".{p.name}.", suffix=suffix, dir=p.parent))
            _guard(old)
            os.rename(p, old / "previous")
        try:
            os.rename(tmp, p)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _exists_error(p) from None
            raise
    except BaseException:
        if old is not None and (old / "previous").exists() and not p.exists():
            os.rename(old / "previous", p)  # put the earlier output back
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        _unguard(tmp)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            _unguard(old)
    return result
