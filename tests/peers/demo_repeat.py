"""Run ``topoopt demo``'s pipeline N times in one fresh interpreter and record its tables.

Started by ``tests/conftest.py`` in the background when the suite collects
``tests/test_demo_determinism.py``, so the twenty runs use the core the (single-process) test
session leaves idle; the test waits for it at the end of the session.

Usage: ``python tests/peers/demo_repeat.py OUT.json N``. Writes ``OUT.json`` once, at the end
(via a temporary file and a rename): for each run the SHA-256 of its tables (traffic and
comparison as CSV), whether every design search stopped on its work limit (``deterministic``),
and its wall time; the first run's comparison rows; and the files opened outside the repository
and the Python installation (the demo must need nothing beside the package).
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


def main() -> None:
    out, n = Path(sys.argv[1]), int(sys.argv[2])
    sys.addaudithook(_audit)
    from topoopt.app.studies.demo import run_demo

    runs, first_rows = [], None
    for _ in range(n):
        t0 = time.perf_counter()
        res = run_demo()
        tables = (res.traffic.to_csv() + res.comparison.to_csv()).encode()
        runs.append(
            {
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
