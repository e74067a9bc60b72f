"""The memory estimate's per-flow terms against what a reduced simulation allocates.

:func:`topoopt.flowsim.work.estimate_work` with ``reduced`` charges each flow one route bundle
and one quotient class (``BUNDLE_FLOW_BYTES + BUNDLE_BYTES + QUOTIENT_CLASS_BYTES``), the most
a reduced run can hold when it finds no symmetry. Checked here on a small plan without
symmetry (Mixtral with uneven expert loads on 4 servers x 2 GPUs: every flow its own class),
independently of the constants' own measurements: the nbytes of the arrays the run keeps (the
builder's, its class map, the bundles, the partition and the quotient), and the peak of what
the simulation allocates (``tracemalloc``: numpy's allocations; the numba kernels' own
temporaries are not traced, which the constants' margin covers)."""

from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pytest

from topoopt.fabrics import ideal
from topoopt.flowsim.bundles import reduce_bundles
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.subflow_guard import (
    BUNDLE_BYTES,
    BUNDLE_FLOW_BYTES,
    GROUPED_FLOW_BYTES,
    QUOTIENT_CLASS_BYTES,
    check_grouped,
)
from topoopt.flowsim.work import GPU_PAIR_BYTES, GPU_PEAK_BYTES, estimate_work, held_matrix_bytes
from traffic.build import workload_from_plan
from traffic.plan import load_plan

PER_FLOW = BUNDLE_FLOW_BYTES + BUNDLE_BYTES + QUOTIENT_CLASS_BYTES


def _asymmetric(servers: int = 4):
    """Mixtral, 2 layers, ep 8 with expert loads 1..8: no two all-to-all flows alike."""
    g = 2 * servers
    return workload_from_plan(
        load_plan(
            {"model": {"base": "mixtral-8x7b", "layers": 2},
             "parallelism": {"tp": 1, "dp": g, "ep": 8, "micro_batch_size": 1,
                             "global_batch_size": 2 * g},
             "precision": {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2},
             "cluster": {"servers": servers, "gpus_per_server": 2},
             "options": {"expert_load": [1, 2, 3, 4, 5, 6, 7, 8]}}
        )
    )  # fmt: skip


def _nbytes(obj) -> int:
    """Bytes of the numpy arrays in ``obj`` (arrays, dataclasses, tuples, dicts of them)."""
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if dataclasses.is_dataclass(obj):
        return sum(_nbytes(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, tuple | list):
        return sum(_nbytes(x) for x in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(x) for x in obj.values())
    return 0


def _run(w, builds=None):
    fab = ideal(w.servers, gpus_per_server=w.gpus_per_server)
    return simulate_iteration(
        w, fab, exposed_by_class=False, reduction=True, path_times=False, builds=builds
    )


def test_the_per_flow_terms_cover_the_arrays_a_run_without_symmetry_keeps():
    """Builder arrays (link, src, dst, rail, size, dependency CSR), the class map, the route
    bundles, the partition's labels and the quotient FlowSet with its multiplicities, path
    latencies and sub-flow map: counted from their nbytes, at most the charged terms (held
    258 bytes a flow of the 700 charged)."""
    w = _asymmetric()
    builds: dict = {}
    it = _run(w, builds)
    red_info = it.info["reduction"]
    assert red_info["status"] == "on" and red_info["flow_classes"] == red_info["flows"]
    fb = builds[frozenset()][0]
    n = fb.n
    assert n == estimate_work(w, reduced=True).flows
    bs, class_of = fb.build_bundles()
    red = reduce_bundles(bs)
    assert red.info["flow_classes"] == bs.n_flows == bs.n_bundles  # no symmetry
    builder = _nbytes(fb.arrays()) + class_of.nbytes
    bundles = _nbytes(bs)
    quotient = _nbytes((red.partition, red.flows, red.emult, red.plat, red.qpath))
    assert builder <= BUNDLE_FLOW_BYTES * n
    assert bundles <= BUNDLE_BYTES * bs.n_bundles
    assert builder + bundles + quotient <= PER_FLOW * n
    # independently: each flow's own arrays are dozens of bytes, the whole hundreds
    assert 200 < (builder + bundles + quotient) / n < PER_FLOW


def test_the_estimate_is_at_least_the_traced_peak_without_symmetry():
    """The reduced estimate's arrays (per-flow and per-GPU terms) are at least what the
    simulation of a plan without symmetry allocates at its peak (numpy, traced), the flows'
    terms alone too; the grouped check (per-phase routing) charges the same a flow."""
    w = _asymmetric()
    _run(w)  # the kernels and caches loaded once, outside the measurement
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        it = _run(w)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    red = it.info["reduction"]
    assert red["flow_classes"] == red["flows"]  # no symmetry found
    est = estimate_work(w, reduced=True)
    gpu = GPU_PEAK_BYTES * w.gpus + GPU_PAIR_BYTES * w.gpus**2 + held_matrix_bytes(w)
    assert est.array_bytes == pytest.approx(PER_FLOW * est.flows + gpu)
    assert PER_FLOW * est.flows >= peak
    assert est.array_bytes >= peak
    assert GROUPED_FLOW_BYTES == PER_FLOW
    assert check_grouped(est.flows, 0) >= peak
