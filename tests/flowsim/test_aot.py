"""The kernels compiled ahead of time (:mod:`topoopt.flowsim.aot`) against numba's JIT.

- When the module is built (``make setup``), every kernel it holds computes what the ``@njit``
  function computes, bit for bit: whole simulations of small random flow sets (multipath,
  latency, dependencies, multiplicity, the series), and the three helpers on random arrays.
- Arguments of other types than the compiled ones (``int32`` keys, a strided array, a float for
  an integer...) go to the JIT.
- When it is not built, the kernels are the ``@njit`` functions themselves.
- The module's name follows the kernels' sources: one changed byte, another name.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import topoopt.flowsim.simulator as simulator
from topoopt.flowsim import FlowSet, aot, simulate

BUILT = aot.load() is not None
FIELDS = ("start", "finish", "path_start", "path_last_byte", "path_finish", "link_bytes",
          "series_time", "series_link", "series_load")  # fmt: skip


def random_flowset(seed: int) -> FlowSet:
    """Up to 40 flows of 1-3 paths (1-4 distinct links each) on 8 links; mixed capacities,
    latencies, starts, weights, dependencies on earlier flows, multiplicities 1-3."""
    rng = np.random.default_rng(seed)
    n_l, n_f = 8, int(rng.integers(2, 40))
    flow_ptr, path_ptr, links, weight, dep_ptr, deps = [0], [0], [], [], [0], []
    for f in range(n_f):
        k = int(rng.integers(1, 4))
        w = rng.uniform(0.1, 1.0, k)
        for _ in range(k):
            links.extend(rng.choice(n_l, int(rng.integers(1, 5)), replace=False).tolist())
            path_ptr.append(len(links))
        weight.extend((w / w.sum()).tolist())
        flow_ptr.append(len(weight))
        if f and rng.random() < 0.3:
            deps.extend(sorted(set(rng.integers(0, f, int(rng.integers(1, 3))).tolist())))
        dep_ptr.append(len(deps))
    return FlowSet(
        capacity=rng.choice([1e9, 2.5e9, 1e10], n_l),
        latency=rng.choice([0.0, 1e-6, 5e-6], n_l),
        size=rng.integers(0, 50, n_f) * 1e6 + rng.uniform(0, 1, n_f),
        start=np.where(rng.random(n_f) < 0.5, 0.0, rng.uniform(0, 0.02, n_f)),
        flow_ptr=flow_ptr, path_ptr=path_ptr, path_links=links, weight=weight,
        dep_ptr=dep_ptr, deps=deps, multiplicity=rng.integers(1, 4, n_f),
    )  # fmt: skip


def run(fs: FlowSet, kernel, monkeypatch) -> simulator.SimResult:
    monkeypatch.setattr(simulator, "simulate_kernel", kernel)
    return simulate(fs, record_series=True)


@pytest.mark.parametrize("seed", range(6))
def test_compiled_simulation_equals_the_jit(seed, monkeypatch):
    fs = random_flowset(seed)
    jit = run(fs, aot.jit_kernel("simulate_kernel"), monkeypatch)
    assert jit.n_events > 1 and np.all(jit.finish >= fs.start)  # a real run
    if not BUILT:  # not built: the simulator calls the @njit function itself
        assert aot.simulate_kernel is aot.jit_kernel("simulate_kernel")
        return
    ours = run(fs, aot.simulate_kernel.compiled, monkeypatch)
    for name in FIELDS:
        a, b = getattr(jit, name), getattr(ours, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert (jit.makespan, jit.n_events, jit.fill_rounds, jit.refills) == (
        ours.makespan, ours.n_events, ours.fill_rounds, ours.refills,
    )  # fmt: skip


def test_compiled_helpers_equal_the_jit():
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 30, 500)
    ptr = np.concatenate([[0], np.cumsum(rng.integers(1, 40, 60))]).astype(np.int64)
    links = rng.integers(0, 50, int(ptr[-1]))
    dep_ptr = np.concatenate([[0], np.cumsum(rng.integers(0, 3, 40))]).astype(np.int64)
    deps = rng.integers(0, 40, int(dep_ptr[-1]))
    rptr, order = aot.jit_kernel("csr_by_key")(deps, 40)
    owner = np.repeat(np.arange(40), np.diff(dep_ptr))[order]
    calls = {
        "csr_by_key": (keys, 30),
        "first_repeated_link": (ptr, links),
        "blocked_kernel": (dep_ptr, rptr, owner),
    }
    for name, args in calls.items():
        want = aot.jit_kernel(name)(*args)
        got = getattr(aot, name)(*args)
        if not BUILT:
            assert getattr(aot, name) is aot.jit_kernel(name)
        if not isinstance(want, tuple):  # blocked_kernel: one array
            want, got = (want,), (got,)
        for a, b in zip(want, got, strict=True):
            assert np.array_equal(a, b), name
    # the counting sort against a brute force
    ptr_k, order_k = aot.csr_by_key(keys, 30)
    assert np.array_equal(order_k, np.argsort(keys, kind="stable"))
    assert np.array_equal(ptr_k, np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=30))]))


def test_other_argument_types_go_to_the_jit(monkeypatch):
    """The compiled function only for the types it was built for (no new numba compile here:
    the JIT is a stand-in that records its calls)."""
    calls = []
    monkeypatch.setattr(aot, "jit_kernel", lambda name: lambda *a: calls.append(name) or "jit")
    kernel = aot._guarded("csr_by_key", lambda *a: "compiled")
    keys = np.arange(6, dtype=np.int64)
    assert kernel(keys, 6) == kernel(keys, np.int64(6)) == "compiled" and not calls
    others = [(keys.astype(np.int32), 6), (np.repeat(keys, 2)[::2], 6), (keys, 6.0), (keys, True),
              (keys.tolist(), 6), (keys.reshape(2, 3), 6), (keys,), (keys, 6, 0)]  # fmt: skip
    for args in others:
        assert kernel(*args) == "jit"
    assert calls == ["csr_by_key"] * len(others)


def test_module_name_follows_the_sources(tmp_path, monkeypatch):
    name = aot.module_name()
    assert name.startswith("_aot_") and len(name) == 21 and name == aot.module_name()
    for src in aot.SOURCES:
        shutil.copy(aot._HERE / src, tmp_path / src)
    monkeypatch.setattr(aot, "_HERE", tmp_path)
    assert aot.module_name() == name
    text = (tmp_path / "_kernels.py").read_text()
    (tmp_path / "_kernels.py").write_text(text.replace("RESYNC_EVERY = 256", "RESYNC_EVERY = 255"))
    assert aot.module_name() != name
