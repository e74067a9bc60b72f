"""Where numba caches the compiled kernels: a writable folder, else none.

``@njit(cache=True)`` raises ``RuntimeError: cannot cache function ...: no locator available``
when numba finds no writable folder: not the ``__pycache__`` beside the kernel's source (an
install owned by another user), not ``NUMBA_CACHE_DIR``, not the user-wide cache (a ``HOME``
that cannot be written). :func:`kernel_cache` looks in numba's order and, when none is
writable, points numba at a folder of this user's under the temporary folder
(``tempfile.gettempdir()``, which itself falls back to ``/tmp``, ``/var/tmp`` and the working
folder); when even that fails, the kernels are compiled in each process without a cache (seconds
at the first call, nothing on disk).

numba keys a cached kernel on its own source file's time stamp only. A kernel that calls
another module's kernel (the time-varying engine and the symmetry finder call ``_kernels``'
functions, which numba compiles into the caller) would keep the old callee after an upgrade
that changed only the callee's file: stale machine code, silently different results. So the
cache lives in a folder named by a hash of every kernel module's source
(:data:`KERNEL_SOURCES`, ``numba-<hash>``): any change to any of them starts a new cache.

The kernel modules decorate with ``@njit(cache=kernel_cache(__file__))``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["KERNEL_SOURCES", "kernel_cache", "sources_tag"]

#: Every module with cached kernels, from the project root (a test checks that every module
#: calling :func:`kernel_cache` is listed).
KERNEL_SOURCES = (
    "solvers/joint/rings.py",
    "solvers/routing_lp.py",
    "topoopt/flowsim/_bundle_kernels.py",
    "topoopt/flowsim/_kernels.py",
    "topoopt/flowsim/_ring_kernels.py",
    "topoopt/flowsim/_symmetry_kernels.py",
    "topoopt/flowsim/_timevarying_kernels.py",
)
_ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def sources_tag(root: Path = _ROOT) -> str:
    """``numba-`` and 16 hex digits of a SHA-256 over :data:`KERNEL_SOURCES` under ``root``.

    >>> sources_tag().startswith("numba-") and len(sources_tag()) == 22
    True
    """
    h = hashlib.sha256()
    for rel in KERNEL_SOURCES:
        h.update(rel.encode() + b"\0")
        try:
            h.update((root / rel).read_bytes())
        except OSError:  # an install without one of them: still a fixed tag
            h.update(b"\0missing")
        h.update(b"\0")
    return "numba-" + h.hexdigest()[:16]


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def kernel_cache(py_file: str) -> bool:
    """Whether the kernels of ``py_file`` can be cached; points numba at the ``numba-<hash>``
    folder of the current kernel sources, in the first writable place of numba's order (the
    user's ``NUMBA_CACHE_DIR``, beside the install, the user-wide cache, a folder of this user's
    under the temporary folder). One folder serves every kernel module (module docstring).

    >>> kernel_cache(__file__) in (True, False)
    True
    """
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    tag = sources_tag()

    def use(folder: Path) -> bool:
        if not _writable(folder):
            return False
        config.CACHE_DIR = str(folder)
        os.environ["NUMBA_CACHE_DIR"] = str(folder)  # worker processes (Ray, multiprocessing)
        return True

    if config.CACHE_DIR:  # the user's folder, or ours from an earlier module or a parent process
        given = Path(config.CACHE_DIR)
        if use(given if given.name == tag else given / tag):
            return True
    if use(_ROOT / "topoopt" / "__pycache__" / tag):  # beside the install, as numba would
        return True
    if use(Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / tag):
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
    return use(folder / tag)
