"""Shared behaviour of every CLI command: one-line errors with exit code 2, JSON on stdout,
progress on stderr, atomic output files."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import typer
from rich.console import Console

from topoopt.atomic import atomic_write_text, atomic_write_with, check_writable
from traffic.errors import InputError

__all__ = [
    "handle_errors",
    "emit_json",
    "to_jsonable",
    "stdout",
    "stderr",
    "prepare_output",
    "write_output_text",
    "write_output_with",
]

F = TypeVar("F", bound=Callable[..., Any])

# Tables keep their columns when stdout is a pipe or a file (rich would assume 80 columns).
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)


def handle_errors(func: F) -> F:
    """Turn :class:`InputError` (and unreadable files) into one line on stderr and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, tuples and non-finite floats into plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating | float):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def emit_json(obj: Any) -> None:
    """Print exactly one JSON document on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def prepare_output(path: Path | None, force: bool) -> Path | None:
    """Check an output path before any work is done (exists without --force -> exit 2)."""
    if path is None:
        return None
    return check_writable(path, force=force)


def write_output_text(path: Path, text: str) -> None:
    """Write a text output atomically and say so on stderr."""
    atomic_write_text(path, text)
    print(f"wrote {path}", file=sys.stderr)


def write_output_with(path: Path, writer: Callable[[Path], None]) -> None:
    """Write an output through ``writer(tmp_path)`` atomically and say so on stderr."""
    atomic_write_with(path, writer)
    print(f"wrote {path}", file=sys.stderr)
