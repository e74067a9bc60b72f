"""Run ``topoopt demo``'s pipeline in one fresh interpreter, slot after slot, and record its
tables.

Started by ``tests/conftest.py`` in the background when the suite collects
``tests/test_demo_determinism.py``, so the runs use the core the (single-process) test session
leaves idle; when the session reaches that test (it runs last) with slots still unclaimed, a
second interpreter of this script takes them on the core the session no longer needs.

Usage: ``python tests/peers/demo_repeat.py OUT.json N SLOTS``. The runs are the slots
``0 .. N-1``: before each run the interpreter claims the lowest free slot by creating the file
``SLOTS/<slot>`` (``O_EXCL``: one interpreter per slot) and stops when none is left. Writes
``OUT.json`` once, at the end (via a temporary file and a rename): for each run its slot, the
SHA-256 of its tables (traffic and comparison as CSV), whether every design search stopped on
its work limit (``deterministic``), and its wall time; the comparison rows of this interpreter's
first run; and the files opened (the demo must need nothing beside the package).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path

_opened: list[str] = []


def _audit(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], str | Path):
        _opened.append(str(args[0]))


def _plain(o):
    """numpy scalars and arrays as Python values (for ``json.dumps``)."""
    return o.tolist() if hasattr(o, "tolist") else str(o)


def _claim(slots: Path, n: int) -> int | None:
    """The lowest slot no interpreter has claimed, now claimed by this one (None: all taken)."""
    for slot in range(n):
        try:
            os.close(os.open(slots / str(slot), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        return slot
    return None


def main() -> None:
    out, n, slots = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    sys.addaudithook(_audit)
    from topoopt.app.studies.demo import run_demo

    runs, first_rows = [], None
    while (slot := _claim(slots, n)) is not None:
        t0 = time.perf_counter()
        res = run_demo()
        tables = (res.traffic.to_csv() + res.comparison.to_csv()).encode()
        runs.append(
            {
                "slot": slot,
                "sha256": hashlib.sha256(tables).hexdigest(),
                "deterministic": bool(res.deterministic),
                "wall_s": time.perf_counter() - t0,
            }
        )
        if first_rows is None:
            first_rows = res.comparison.to_dict(orient="records")
    doc = {"runs": runs, "first_rows": first_rows, "opened": sorted(set(_opened))}
    tmp = out.with_name(out.name + ".part")
    tmp.write_text(json.dumps(doc, default=_plain))  # floats as their shortest repr: exact
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
