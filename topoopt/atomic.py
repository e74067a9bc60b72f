"""Atomic output files: write to a temporary file beside the target, then rename.

A failed or interrupted command never leaves a half-written output behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from traffic.errors import InputError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_with", "check_writable"]


def check_writable(path: str | os.PathLike, force: bool = False) -> Path:
    """Return ``path`` as a Path after checking it may be written.

    Raises
    ------
    InputError
        If the file exists and ``force`` is false, or its folder does not exist.
    """
    p = Path(path)
    if p.exists() and not force:
        raise InputError(str(p), "exists", "a path that does not exist yet, or pass --force")
    if not p.parent.exists():
        raise InputError(str(p), str(p.parent), "a file in an existing folder")
    return p


def atomic_write_with(path: str | os.PathLike, writer: Callable[[Path], None]) -> Path:
    """Call ``writer(tmp_path)`` and rename the temporary file onto ``path`` on success."""
    p = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        writer(tmp_path)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, p)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    return p


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    return atomic_write_with(path, lambda t: t.write_bytes(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))
