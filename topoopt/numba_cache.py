"""Where numba caches the compiled kernels: a writable folder, else none.

``@njit(cache=True)`` raises ``RuntimeError: cannot cache function ...: no locator available``
when numba finds no writable folder: not the ``__pycache__`` beside the kernel's source (an
install owned by another user), not ``NUMBA_CACHE_DIR``, not the user-wide cache (a ``HOME``
that cannot be written). :func:`kernel_cache` looks in numba's order and, when none is
writable, points numba at a folder of this user's under the temporary folder
(``tempfile.gettempdir()``, which itself falls back to ``/tmp``, ``/var/tmp`` and the working
folder); when even that fails, the kernels are compiled in each process without a cache (seconds
at the first call, nothing on disk).

The kernel modules decorate with ``@njit(cache=kernel_cache(__file__))``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["kernel_cache"]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def kernel_cache(py_file: str) -> bool:
    """Whether the kernels of ``py_file`` can be cached; sets numba's cache folder when only a
    temporary one can hold them (module docstring).

    >>> kernel_cache(__file__) in (True, False)
    True
    """
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    if config.CACHE_DIR and _writable(Path(config.CACHE_DIR)):
        return True
    if _writable(Path(py_file).resolve().parent / "__pycache__"):
        return True
    if _writable(Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)):
        return True
    try:
        uid = os.getuid()
    except AttributeError:  # no uid outside POSIX
        uid = 0
    try:
        folder = Path(tempfile.gettempdir()) / f"topoopt-numba-{uid}"
    except (OSError, FileNotFoundError):  # no usable temporary folder at all
        return False
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = folder.stat()
    except OSError:
        return False
    if (hasattr(os, "getuid") and st.st_uid != uid) or st.st_mode & 0o022 or not _writable(folder):
        return False  # another user's folder (it could hold their code) or an unwritable one
    config.CACHE_DIR = str(folder)
    os.environ["NUMBA_CACHE_DIR"] = str(folder)  # worker processes (Ray, multiprocessing)
    return True
