"""The compiled-kernel cache is keyed by every kernel module's source (topoopt.numba_cache): a
kernel compiled into another module's cached kernel (the time-varying engine calls
``_kernels.event_loop``) cannot survive a change of its own file."""

from __future__ import annotations

import shutil
from pathlib import Path

from topoopt.numba_cache import KERNEL_SOURCES, sources_tag

ROOT = Path(__file__).resolve().parent.parent


def test_every_cached_kernel_module_is_listed():
    callers = sorted(
        str(p.relative_to(ROOT))
        for folder in ("topoopt", "solvers", "traffic")
        for p in (ROOT / folder).rglob("*.py")
        if "kernel_cache(__file__)" in p.read_text(encoding="utf-8") and p.name != "numba_cache.py"
    )
    assert callers == sorted(KERNEL_SOURCES)


def test_the_tag_changes_with_any_kernel_source(tmp_path):
    for rel in KERNEL_SOURCES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    tag = sources_tag.__wrapped__
    assert tag(tmp_path) == sources_tag()  # the same bytes, the same folder
    seen = {tag(tmp_path)}
    for rel in KERNEL_SOURCES:
        f = tmp_path / rel
        text = f.read_bytes()
        f.write_bytes(text + b"\n# edited\n")
        seen.add(tag(tmp_path))
        f.write_bytes(text)
    assert len(seen) == 1 + len(KERNEL_SOURCES)
    assert tag(tmp_path) == sources_tag()


def test_numba_caches_in_the_tagged_folder():
    from numba.core import config

    import topoopt.flowsim._timevarying_kernels  # noqa: F401 (decorates with kernel_cache)

    assert Path(config.CACHE_DIR).name == sources_tag()
