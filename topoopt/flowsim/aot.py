"""The flow model's kernels compiled ahead of time: a simulation without numba's start-up.

A process that simulates pays numba's start-up before its first compiled call: ``import numba``
and the registries of its first call (about 0.5 s of CPU, scipy.linalg among them), then the load
of each kernel from numba's cache. :func:`build` compiles the kernels a netsim run calls
(:data:`AOT_KERNELS`: the event loop and the three helpers of :class:`FlowSet`'s checks) into one
extension module with ``numba.pycc``, from the ``@njit`` functions themselves: a thin exported
wrapper per kernel calls the ``@njit`` dispatcher, which numba compiles with its own options
(``error_model``, inlining) and links in. The module imports without numba.

The module's name holds a hash of the kernels' sources (:func:`source_hash`: ``_kernels.py``,
``_symmetry_kernels.py`` and this file), so a module built from other sources is never loaded:
after an edit of a kernel the JIT path runs until the module is built again. ``make setup``
builds it (``python -m topoopt.flowsim.aot``); without it (no C compiler, an install that cannot
be written), or with ``TOPOOPT_AOT=0`` in the environment, the kernels are numba's ``@njit``
functions, as before.

The kernels are imported from here (``from topoopt.flowsim.aot import simulate_kernel``). Each
is the compiled function behind a check of its arguments: a call whose arguments are not of the
types it was compiled for (:data:`AOT_KERNELS`: C-contiguous one-dimensional ``float64`` /
``int64`` arrays, ``float``, ``int``, ``bool``) goes to the ``@njit`` function, which compiles a
version for them, so every call computes what the JIT path computes. Read-only arrays take the
compiled path: these kernels never write their arguments (numba compiles each of them for
read-only arrays of every argument).
``tests/flowsim/test_aot.py`` checks that the two agree bit for bit.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "AOT_KERNELS",
    "blocked_kernel",
    "build",
    "csr_by_key",
    "first_repeated_link",
    "jit_kernel",
    "load",
    "module_name",
    "simulate_kernel",
    "source_hash",
]

_HERE = Path(__file__).resolve().parent
_PACKAGE = __name__.rpartition(".")[0]
SOURCES = ("_kernels.py", "_symmetry_kernels.py", "aot.py")
"""The files whose text the module's name hashes (in this folder)."""

AOT_KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "simulate_kernel": (
        "_kernels",
        # cap, path_ptr, path_links, pflow, pbytes, plat, flow_ptr, start, dep_ptr, deps,
        # rdep_ptr, rdep, lp_ptr, rtol, record, emult, max_refills, row_space
        tuple("f8[] i8[] i8[] i8[] f8[] f8[] i8[] f8[] i8[] i8[] i8[] i8[] i8[]".split())
        + ("f8", "b1", "i8[]", "i8", "i8"),
    ),
    "csr_by_key": ("_symmetry_kernels", ("i8[]", "i8")),
    "first_repeated_link": ("_symmetry_kernels", ("i8[]", "i8[]")),
    "blocked_kernel": ("_kernels", ("i8[]", "i8[]", "i8[]")),
}
"""Each compiled kernel: the module (in this package) of its ``@njit`` function and the types of
its arguments (``f8[]``/``i8[]``: C-contiguous one-dimensional ``float64``/``int64`` arrays;
``f8``, ``i8``, ``b1``: a float, an integer, a bool)."""

_F8 = np.dtype(np.float64)
_I8 = np.dtype(np.int64)


def _array_of(dtype: np.dtype) -> Callable[[Any], bool]:
    def ok(a: Any) -> bool:
        return (
            type(a) is np.ndarray
            and a.dtype == dtype
            and a.ndim == 1
            and a.flags.c_contiguous
            and a.flags.aligned
        )

    return ok


_ACCEPTS: dict[str, Callable[[Any], bool]] = {
    "f8[]": _array_of(_F8),
    "i8[]": _array_of(_I8),
    "f8": lambda x: type(x) is float or type(x) is np.float64,
    "i8": lambda x: type(x) is int or type(x) is np.int64,
    "b1": lambda x: type(x) is bool or type(x) is np.bool_,
}
"""What the compiled module takes for each argument type, exactly (anything else: the JIT)."""


def source_hash() -> str:
    """The SHA-256 (hex) of the kernels' sources (:data:`SOURCES`, in order, each with its
    name), the Python version and :data:`AOT_KERNELS`."""
    h = hashlib.sha256()
    h.update(f"{sys.implementation.cache_tag}\n{sorted(AOT_KERNELS.items())}\n".encode())
    for name in SOURCES:
        h.update(name.encode() + b"\n" + (_HERE / name).read_bytes() + b"\n")
    return h.hexdigest()


def module_name() -> str:
    """The name of the compiled module for the current sources (``_aot_`` and 16 hex digits)."""
    return "_aot_" + source_hash()[:16]


def _enabled() -> bool:
    return os.environ.get("TOPOOPT_AOT", "1").strip() not in ("0", "false", "no", "off")


_LOADED: list[Any] = []


def load() -> Any:
    """The compiled module of the current sources, or ``None`` (not built, built from other
    sources, not importable, or ``TOPOOPT_AOT=0``)."""
    if not _LOADED:
        mod = None
        if _enabled():
            try:
                mod = importlib.import_module(f"{_PACKAGE}.{module_name()}")
            except (ImportError, OSError):
                mod = None
        _LOADED.append(mod)
    return _LOADED[0]


def jit_kernel(name: str) -> Callable:
    """The ``@njit`` function of kernel ``name`` (imports numba)."""
    home, _ = AOT_KERNELS[name]
    return getattr(importlib.import_module(f"{_PACKAGE}.{home}"), name)


def _guarded(name: str, compiled: Callable) -> Callable:
    """``compiled`` for the argument types it was built for, the ``@njit`` function else."""
    checks = tuple(_ACCEPTS[t] for t in AOT_KERNELS[name][1])
    n = len(checks)

    def kernel(*args):
        if len(args) == n and all(ok(a) for ok, a in zip(checks, args, strict=True)):
            return compiled(*args)
        return jit_kernel(name)(*args)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"Kernel ``{name}``, compiled ahead of time (:mod:`{__name__}`)."
    kernel.compiled = compiled
    return kernel


def _kernel(name: str) -> Callable:
    mod = load()
    if mod is None:
        return jit_kernel(name)
    return _guarded(name, getattr(mod, name))


simulate_kernel = _kernel("simulate_kernel")
csr_by_key = _kernel("csr_by_key")
first_repeated_link = _kernel("first_repeated_link")
blocked_kernel = _kernel("blocked_kernel")


def _wrapper(name: str, target: Callable) -> Callable:
    """A Python function of the kernel's arity that calls ``target`` (the exported symbol)."""
    args = ", ".join(f"a{i}" for i in range(len(AOT_KERNELS[name][1])))
    ns: dict[str, Any] = {"target": target}
    exec(f"def {name}({args}):\n    return target({args})\n", ns)  # noqa: S102 (our own text)
    return ns[name]


def build(folder: str | Path | None = None, *, verbose: bool = False) -> Path:
    """Compile :data:`AOT_KERNELS` into the module :func:`module_name` in ``folder`` (default:
    this package's folder) unless it is there already; remove modules of other sources.

    Needs numba and a C compiler (``numba.pycc``); the module is written to a temporary name and
    renamed, so a process never imports half a file.

    Returns
    -------
    pathlib.Path
        The module's file.
    """
    from numba import types
    from numba.pycc import CC

    out_dir = Path(folder) if folder is not None else _HERE
    name = module_name()
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = out_dir / f"{name}{suffix}"
    if target.exists():
        return target
    arg_types = {
        "f8[]": types.float64[::1],
        "i8[]": types.int64[::1],
        "f8": types.float64,
        "i8": types.int64,
        "b1": types.boolean,
    }
    cc = CC(name)
    cc.verbose = verbose
    tmp = out_dir / f".build-{name}-{os.getpid()}"
    tmp.mkdir(parents=True, exist_ok=True)
    cc.output_dir = str(tmp)
    for kname, (_, kinds) in AOT_KERNELS.items():
        sig = tuple(arg_types[k] for k in kinds)
        cc.export(kname, sig)(_wrapper(kname, jit_kernel(kname)))
    try:
        cc.compile()
        os.replace(tmp / cc.output_file, target)
    finally:
        for f in tmp.glob("*"):
            f.unlink()
        tmp.rmdir()
    for old in out_dir.glob(f"_aot_*{suffix}"):
        if old != target:
            old.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    """Build the module (``make aot``: ``from topoopt.flowsim.aot import main; main()``), or with
    ``["--check"]`` say whether it is built; a failed build is reported on stderr (exit code 0:
    the JIT path runs)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        mod = load()
        print(mod.__file__ if mod is not None else "not built: the kernels run under numba's JIT")
        return 0 if mod is not None else 1
    try:
        path = build()
    except Exception as exc:  # noqa: BLE001 (any failure leaves the JIT path; say why)
        print(f"topoopt: the ahead-of-time kernels were not built ({exc}); the JIT runs instead",
              file=sys.stderr)  # fmt: skip
        return 0
    print(f"topoopt: ahead-of-time kernels in {path}", file=sys.stderr)
    return 0
