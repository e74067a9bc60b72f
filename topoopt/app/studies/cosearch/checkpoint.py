"""The co-search's evaluations on disk, as they finish, so that an interrupted search continues.

A checkpoint is a JSON-lines file: a header naming the search (a digest of the plan space's base,
the search configuration and the reference plan), then one line per finished evaluation: the
task's identity (its position in the search, candidate, fabric, stage, whether it keeps its
design, and the fixed design it was judged on) and its record (the design, when kept, as its
``design.json`` document). Each line is flushed and synced before the next evaluation is
reported, so a search stopped at any moment (the local Ray instance dying, a kill) leaves
every evaluation it had finished, and at most a torn last line, which is ignored.

The search is deterministic (every random choice is seeded, every evaluation's result depends
on its task only), so a search resumed from a checkpoint asks for the same tasks in the same
order: the ones on file are read instead of run, the others run and are appended, and the final
result equals the uninterrupted search's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from traffic.errors import InputError

__all__ = ["Checkpoint", "search_digest", "task_key"]

KIND = "topoopt-cosearch-checkpoint"
VERSION = 1


_NON_FINITE = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def _strict(x: Any) -> Any:
    """Strict-JSON form: a non-finite float (an infeasible evaluation's time) is tagged."""
    if isinstance(x, float) and not math.isfinite(x):
        return {"__float__": repr(x)}
    if isinstance(x, dict):
        return {k: _strict(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_strict(v) for v in x]
    return x


def _unstrict(x: Any) -> Any:
    """Inverse of :func:`_strict` (``json.loads`` object hook)."""
    if len(x) == 1 and x.get("__float__") in _NON_FINITE:
        return _NON_FINITE[x["__float__"]]
    return x


def _plain(x: Any) -> Any:
    """JSON-ready values (tuples as lists, numpy scalars as Python numbers)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if hasattr(x, "tolist"):
        return _plain(x.tolist())
    return x


def _design_doc(design) -> dict | None:
    if design is None:
        return None
    return {"type": type(design).__name__, "document": _plain(design.to_dict())}


def _design_from(doc: dict | None):
    if doc is None:
        return None
    from solvers import Design, HybridDesign

    cls = {"Design": Design, "HybridDesign": HybridDesign}[doc["type"]]
    return cls.from_json(json.dumps(doc["document"], allow_nan=False))


def task_key(task) -> str:
    """The identity of an evaluation task (:class:`.evaluate.EvalTask`), as a JSON string."""
    fixed = task.fixed_design
    fixed_key = None
    if fixed is not None:
        fixed_key = hashlib.sha256(fixed.to_json().encode()).hexdigest()
    return json.dumps(
        [task.index, task.candidate.key, task.fabric, task.stage, bool(task.keep_design),
         bool(task.screening), fixed_key],
        sort_keys=True,
        allow_nan=False,
    )  # fmt: skip


def search_digest(base: dict, config, reference) -> str:
    """What a checkpoint must match to be resumed: the base plan, configuration, reference."""
    from dataclasses import asdict

    doc = {"base": _plain(base), "config": _plain(asdict(config)),
           "reference": None if reference is None else reference.key}  # fmt: skip
    return hashlib.sha256(
        json.dumps(_strict(doc), sort_keys=True, default=str, allow_nan=False).encode()
    ).hexdigest()


class Checkpoint:
    """A checkpoint file (module docstring), opened for a search of ``digest``.

    Parameters
    ----------
    path : path
        The file (``cosearch --out``).
    digest : str
        :func:`search_digest` of the search.
    resume : bool
        Read the evaluations already in ``path`` (it may be missing: nothing to read) and
        append; otherwise the file is started afresh.

    Raises
    ------
    InputError
        ``--resume`` of a file that is no checkpoint or one of another search.
    """

    def __init__(self, path: str | os.PathLike, digest: str, resume: bool) -> None:
        self.path = Path(path)
        self.digest = digest
        self.done: dict[str, dict] = {}
        self.reused = 0
        self.saved = 0  # evaluations appended by this search
        self.fresh = not (resume and self.path.exists())
        keep = 0  # bytes of complete lines
        if resume and self.path.exists():
            raw = self.path.read_bytes()
            lines = raw.split(b"\n")
            try:
                head = json.loads(lines[0], object_hook=_unstrict)
                ok = isinstance(head, dict) and head.get("kind") == KIND
            except (json.JSONDecodeError, UnicodeDecodeError):
                ok = False
            if not ok:
                raise InputError("--resume", str(path), "a checkpoint written by cosearch --out")
            if head.get("search") != digest or head.get("version") != VERSION:
                raise InputError(
                    "--resume",
                    str(path),
                    "the checkpoint of the same cosearch command (model, cluster, options)",
                )
            keep = len(lines[0]) + 1
            for line in lines[1:]:
                if not raw.endswith(b"\n") and line is lines[-1]:
                    break  # a torn last line: the evaluation it held runs again
                if not line:
                    continue
                try:
                    row = json.loads(line, object_hook=_unstrict)
                    self.done[row["task"]] = row
                except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
                    break
                keep += len(line) + 1
            self._fh = open(self.path, "r+b")  # noqa: SIM115 - held open for the search
            self._fh.truncate(keep)
            self._fh.seek(keep)
        else:
            self._fh = open(self.path, "wb")  # noqa: SIM115 - held open for the search
            head = {"kind": KIND, "version": VERSION, "search": digest}
            self._write(head)

    def _write(self, obj: dict) -> None:
        self._fh.write(json.dumps(_strict(obj), sort_keys=True, allow_nan=False).encode() + b"\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def lookup(self, task) -> dict | None:
        """The record of ``task`` from the file, or None."""
        row = self.done.get(task_key(task))
        if row is None:
            return None
        rec = dict(row["record"])
        if "design_object" in row:
            rec["design_object"] = _design_from(row["design_object"])
        rec["index"] = task.index
        self.reused += 1
        return rec

    def save(self, task, rec: dict) -> None:
        """Append ``rec``, the record of ``task`` (flushed and synced)."""
        body = {k: v for k, v in rec.items() if k != "design_object"}
        row = {"task": task_key(task), "record": _plain(body)}
        if "design_object" in rec:
            row["design_object"] = _design_doc(rec["design_object"])
        self._write(row)
        self.saved += 1

    def close(self, failed: bool = False) -> None:
        """Close the file; a search that ``failed`` before it saved anything in a new file
        leaves no file behind (nothing half-written)."""
        self._fh.close()
        if failed and self.fresh and self.saved == 0:
            self.path.unlink(missing_ok=True)
