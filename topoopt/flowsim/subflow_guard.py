"""The memory of routed flows, checked before their sub-flows exist.

A flow between two servers is split over its route's paths into sub-flows (one per path, each
with its links). :func:`check_subflows` is called by
:meth:`topoopt.flowsim.network.FlowBuilder.build` and ``build_classes`` once the flows are
routed and before the sub-flow arrays are allocated, with the exact counts, and refuses a
simulation whose arrays would exceed ``TOPOOPT_MEMORY_BUDGET_GB``:

``arrays = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES * sub-flows``

(the estimate before anything is built, :mod:`topoopt.flowsim.work`, counts the flows alone).
It imports nothing of the flow model, so that the builder and the estimate can both use it.
"""

from __future__ import annotations

from traffic.errors import InputError
from traffic.limits import FLOW_PEAK_BYTES, memory_budget_bytes

__all__ = [
    "BUNDLE_BYTES",
    "BUNDLE_FLOW_BYTES",
    "BUNDLE_ROUTE_BYTES",
    "QUOTIENT_CLASS_BYTES",
    "ROUTE_COUNT_PEAK_BYTES",
    "FLOW_PEAK_BYTES",
    "SUBFLOW_BYTES",
    "SUBFLOW_BYTES_REDUCED",
    "QUOTIENT_SUBFLOW_BYTES",
    "EXPANDED_FLOW_BYTES",
    "EXPANDED_PATH_BYTES",
    "GROUPED_FLOW_BYTES",
    "GROUPED_SUBFLOW_BYTES",
    "check_bundles",
    "check_grouped",
    "check_route_counts",
    "check_expansion",
    "check_quotient",
    "check_subflows",
]

SUBFLOW_BYTES = 300.0
"""Peak bytes per sub-flow (a flow's share on one of its paths) at the routing of the flows,
:func:`check_subflows`: GPT-3 175B on the three-tier Clos of 2,048 servers x 8 NICs, 17.1 M
sub-flows of 1.06 M flows, peaks at 6.24 GB: 284 bytes a sub-flow beside the flows' own
:data:`FLOW_PEAK_BYTES` and :data:`topoopt.flowsim.work.PROCESS_BYTES` (the symmetry
reduction's incidence arrays included)."""


SUBFLOW_BYTES_REDUCED = 150.0
"""Peak bytes per sub-flow when the flows are simulated through the symmetry quotient
(:mod:`topoopt.flowsim.symmetry`; the event loop then holds the classes, not every sub-flow),
measured 2026-12-06 on the three-tier Clos of 2,048 servers x 8 NICs beside
:data:`FLOW_PEAK_BYTES` and :data:`topoopt.flowsim.work.PROCESS_BYTES`: GPT-3 175B, 17.1 M
sub-flows of 1.06 M flows, 3.20 GB peak (110 bytes a sub-flow); Llama 3 405B at tp 8 cp 16 pp 16
dp 8, 26.0 M sub-flows of 2.29 M flows, 4.79 GB peak (91 bytes a sub-flow). A reduction that
turns itself off is checked again with :data:`SUBFLOW_BYTES` before the plain simulation."""


QUOTIENT_SUBFLOW_BYTES = 100.0
"""Peak bytes per sub-flow of the symmetry quotient (a sub-flow class: its row in the quotient
FlowSet, its incidences and the event loop's state of it), beside what :func:`check_subflows`
charges the routed sub-flows with ``reduced``: :func:`check_quotient`, once the classes are
known and before the quotient is built. Negligible where the symmetry is strong (GPT-3 175B on
the 16,384-GPU Clos: 39,900 classes of 1,058,684 flows); where it is weak (a capped ECMP
routing breaks it) the quotient is almost as large as the sub-flows and the routed sub-flows'
estimate alone can fall short. Measured 2026-12-07 (session 46, the quotient's incidences
counted in chunks, :data:`topoopt.flowsim.symmetry.QUOTIENT_CHUNK`), Mixtral 8x7B on the OCS
spine capped at 32 ECMP paths a pair: at 8,192 GPUs 920,880 flows, 4,759,844 sub-flows,
4,271,654 quotient sub-flows, 2.15 GB peak with the chunks' pieces concatenated (1.79 GB above
:data:`topoopt.flowsim.work.PROCESS_BYTES`; :func:`check_subflows` alone 1.54 GB: 59 bytes a
quotient sub-flow short), 1.93 GB written in place (1.57 GB), estimated 1.97 GB (1.10x, 1.25x);
at 32,768 GPUs 3,676,464 flows, 14,397,732 sub-flows, 12,945,318 quotient sub-flows, 5.46 GB
peak (5.10 GB of arrays), estimated 6.76 GB (1.33x). Before the chunks the same runs peaked at
2.70 and 7.78 GB."""


def check_quotient(flows: int, subflows: int, quotient_subflows: int) -> float:
    """Refuse a symmetry quotient of ``quotient_subflows`` sub-flows for ``flows`` flows routed
    into ``subflows`` sub-flows (:func:`check_subflows` with ``reduced`` checked those before
    their arrays existed) when the arrays would exceed the memory budget; return the estimate:

    ``arrays = FLOW_PEAK_BYTES * flows + SUBFLOW_BYTES_REDUCED * subflows
    + QUOTIENT_SUBFLOW_BYTES * quotient_subflows``

    Called by :func:`topoopt.flowsim.symmetry.reduce_flows` (its ``check``) when the classes
    are known, before the quotient is built.

    Raises
    ------
    InputError
        Field ``flows`` (as :func:`check_subflows`), naming the quotient, the estimate, the
        budget and the variable that raises it.

    Examples
    --------
    >>> round(check_quotient(920_880, 4_759_844, 4_271_654) / 1e9, 2)  # 1.79 GB measured
    1.97
    >>> round(check_quotient(3_676_464, 14_397_732, 12_945_318) / 1e9, 2)  # 5.10 GB measured
    6.76
    """
    est = _bytes(
        (FLOW_PEAK_BYTES, flows), (SUBFLOW_BYTES_REDUCED, subflows),
        (QUOTIENT_SUBFLOW_BYTES, quotient_subflows),
    )  # fmt: skip
    return _within_budget(
        est,
        f"a symmetry quotient of {int(quotient_subflows):,} sub-flows for {int(subflows):,} "
        f"sub-flows of {int(flows):,} flows (about {est / 1e9:,.1f} GB of arrays)",
    )


def _bytes(*terms: tuple[float, int]) -> float:
    """The estimate of a check: the sum of bytes-per-item times items over ``terms``."""
    return sum(per * float(n) for per, n in terms)


def _within_budget(est: float, what: str) -> float:
    """``est`` (bytes of arrays) if within :func:`memory_budget_bytes`; else the one-line refusal
    of every check here: field ``flows``, ``what`` the request with ``est`` in it."""
    budget = memory_budget_bytes()
    if est > budget:
        raise InputError(
            "flows", what, f"at most {budget / 1e9:g} GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)"
        )
    return est


def check_subflows(flows: int, subflows: int, reduced: bool = False) -> float:
    """Refuse routed flows whose sub-flows would exceed the memory budget; return the estimated
    array bytes (module docstring) otherwise.

    Called with the flows of one simulation once their routes are known and before the
    sub-flow arrays exist: ``flows`` flows (before identical flows are merged) split into
    ``subflows`` sub-flows in all; ``reduced``: they will be simulated through the symmetry
    quotient (:data:`SUBFLOW_BYTES_REDUCED` a sub-flow instead of :data:`SUBFLOW_BYTES`).

    Raises
    ------
    InputError
        Field ``flows``, naming the sub-flows, the estimate, the budget and the variable that
        raises it.

    Examples
    --------
    >>> round(check_subflows(1_058_684, 17_147_580) / 1e9, 2)  # GPT-3 175B, 16,384 GPUs
    6.1
    >>> round(check_subflows(1_058_684, 17_147_580, reduced=True) / 1e9, 2)  # 3.20 GB measured
    3.52
    >>> check_subflows(10**6, 10**8)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '100,000,000 sub-flows of 1,000,000 flows (about 30.9 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    per = SUBFLOW_BYTES_REDUCED if reduced else SUBFLOW_BYTES
    est = FLOW_PEAK_BYTES * float(flows) + per * float(subflows)
    return _within_budget(
        est,
        f"{int(subflows):,} sub-flows of {int(flows):,} flows (about {est / 1e9:,.1f} GB "
        "of arrays)",
    )


BUNDLE_FLOW_BYTES = 300.0
"""Peak bytes per flow (before identical flows merge) of a simulation through route bundles
(:mod:`topoopt.flowsim.bundles`: the builder's arrays, the merged flows, their classes and the
result expanded per flow), :func:`check_bundles`."""

BUNDLE_BYTES = 300.0
"""Peak bytes per route bundle (its fixed links, route, count, weight, class and refinement
state, and its expanded times), :func:`check_bundles`."""

BUNDLE_ROUTE_BYTES = 64.0
"""Peak bytes per entry of the switch pairs' route link counts (link, count, hop, sorted copies;
:func:`topoopt.fabrics.routing.route_link_counts`), :func:`check_bundles`."""


def check_bundles(flows: int, bundles: int, route_entries: int = 0) -> float:
    """Refuse a simulation through route bundles whose arrays would exceed the memory budget;
    return the estimated array bytes otherwise:

    ``arrays = BUNDLE_FLOW_BYTES * flows + BUNDLE_BYTES * bundles + BUNDLE_ROUTE_BYTES *
    route_entries``

    counting what the route-bundle path builds (:meth:`topoopt.flowsim.network.FlowBuilder.
    build_bundles`, called once the bundles are counted and before their arrays exist), not
    the sub-flows it never lists. Fitted on the measured peaks above
    :data:`topoopt.flowsim.work.PROCESS_BYTES` of ``docs/performance.md`` (session 36): GPT-3
    175B at 16,384 GPUs on the rail fabric (1,058,684 flows, 4,556,668 bundles) and the
    fat-tree (1,058,684 / 1,058,684), at 65,536 GPUs on the fat-tree (3,780,476 / 3,780,476)
    and ``gpt3-175b-fsdp`` at 4,096 GPUs (10,794,582 / 10,772,480): the estimate is 0.9 to 1.5
    times the measured arrays. A design's listed routes (:func:`topoopt.flowsim.bundles.
    listed_bundles`, session 37): Llama 3 405B on its ``joint`` design at 16,384 GPUs,
    7,596,964 flows and 7,596,804 bundles, 3.68 GB peak (4.56 GB estimated, 1.4 times the
    arrays). A reduction that turns itself off is checked again as sub-flows
    (:func:`check_subflows`) before the plain model is built.

    Raises
    ------
    InputError
        Field ``flows``, naming the bundles, the estimate, the budget and the variable that
        raises it.

    Examples
    --------
    >>> round(check_bundles(10_794_582, 10_772_480, 100_000) / 1e9, 2)  # FSDP, 4,096 GPUs
    6.48
    >>> check_bundles(10**7, 10**8)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '100,000,000 route bundles of 10,000,000 flows (about 33.0 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    est = _bytes(
        (BUNDLE_FLOW_BYTES, flows), (BUNDLE_BYTES, bundles), (BUNDLE_ROUTE_BYTES, route_entries)
    )
    return _within_budget(
        est,
        f"{int(bundles):,} route bundles of {int(flows):,} flows (about {est / 1e9:,.1f} GB "
        "of arrays)",
    )


QUOTIENT_CLASS_BYTES = 100.0
"""Peak bytes per flow class of the symmetry quotient, beside :data:`BUNDLE_FLOW_BYTES` a flow
and :data:`BUNDLE_BYTES` a bundle: the partition's labels, the quotient FlowSet (size, start,
flow and path pointers, path links, weights, the class dependencies), its multiplicities, path
latencies and sub-flow map, and the event loop's state of each class. A check made before the
classes are known charges one a flow (:func:`topoopt.flowsim.work.estimate_work` with
``reduced``, :func:`check_grouped`): the quotient is no smaller than the flows where the run
finds no symmetry, as in Llama 3 405B's ``joint`` row at 2,048 GPUs (``advise``), whose
rewritten collectives on the ideal switch give 459,998 flows in 459,998 classes.

The three terms then charge 700 bytes a flow. Measured 2026-12-07 on runs without symmetry:
that row's ideal-switch run, 650 bytes a flow resident (0.30 GB for 459,998 flows; 470 bytes
a flow for the same flows and bundles in the fabric's 62,774 classes; ``tracemalloc``, 0.2452
against 0.2126 GB), and a small plan (``tests/flowsim/test_estimate_terms.py``: 1,072 flows
in 880 classes) whose kept arrays are 258 bytes a flow by their nbytes (builder 66, class map
8, bundles 81, partition and quotient 104) and whose traced peak is 543 bytes a flow. Without
this term (600 bytes a flow) the estimate was 0.87x the measured arrays of that row (session
42)."""

GROUPED_FLOW_BYTES = BUNDLE_FLOW_BYTES + BUNDLE_BYTES + QUOTIENT_CLASS_BYTES
"""Peak bytes per builder flow of a reduced run whose routes and classes are not counted yet
(:func:`check_grouped`): one bundle (or group route) and one quotient class a flow at most."""


GROUPED_SUBFLOW_BYTES = 480.0
"""Peak bytes per sub-flow of a run through the grouped quotient (:func:`check_grouped`): the
quotient's listing of its flow classes' group paths (merged by path class), its tables and the
time-varying engine's state of each. Measured (session 45, ``benchmarks/bench_advise_row.py
--guards`` and a 20 ms resident-memory sampler): Mixtral 8x7B's ``ocs-spine`` row at 32,768
GPUs, 3,676,464 builder flows whose quotient has 17,649,200 sub-flows (21x the groups' 826,861
paths), peaked at 9.79 GB while listing the quotient (9.43 GB above
:data:`topoopt.flowsim.work.PROCESS_BYTES`): 388 bytes a quotient sub-flow beside
:data:`GROUPED_FLOW_BYTES` a flow; the run of the quotient alone 8.73 GB (329). With
:data:`SUBFLOW_BYTES_REDUCED` (150) that row was estimated at 2.70 GB before the listing and
5.22 GB after it. 480 is 1.24x the listing's."""


def check_grouped(flows: int, subflows: int) -> float:
    """Refuse a run through the grouped symmetry quotient (the per-phase routing's runs,
    :func:`solvers.phase_routing`; a static run whose every sub-flow is over the budget,
    :func:`topoopt.flowsim.grouped_routes.simulate_grouped_classes`) whose arrays would exceed
    the memory budget; return the estimated array bytes otherwise:

    ``arrays = GROUPED_FLOW_BYTES * flows + GROUPED_SUBFLOW_BYTES * sub-flows``

    for ``flows`` builder flows (before identical flows merge) and ``subflows`` routed
    sub-flows of their groups or quotient (or, for the static run, of the flow classes' group
    paths before the quotient lists them: :func:`topoopt.flowsim.epochs_reduction.
    reduce_grouped`'s ``check``). The per-flow term is the route-bundle path's
    (:func:`check_bundles`, one bundle a flow) with one quotient class a flow
    (:data:`QUOTIENT_CLASS_BYTES`), not the plain model's :data:`FLOW_PEAK_BYTES`: these runs
    hold the builder, its classes and the quotient, never the plain event loop of every flow
    (a run that falls back to it is checked by :func:`check_subflows` first). Measured
    (``advise``'s ``joint-phased`` row, session 42): Mixtral 8x7B at 32,768 GPUs, 13,826,976
    flows, 59,393 sub-flows, 7.94 GB peak (7.58 GB above
    :data:`topoopt.flowsim.work.PROCESS_BYTES`): estimated 9.71 GB (1.28x; 12.5 GB, 1.65x,
    with :data:`FLOW_PEAK_BYTES`); Llama 3 405B there, 15,088,036 flows, held 8.91 GB when its
    fallback to the plain engine was refused: 10.57 GB. A static run (session 44): Llama 3
    405B calibrated on the OCS spine at 16,384 GPUs, 3,701,928 flows, 2,292,096 quotient
    sub-flows, 2.58 GB peak for the whole ``advise`` row: estimated 2.94 GB (3.69 GB with
    :data:`GROUPED_SUBFLOW_BYTES`, session 45, which the OCS spine at 32,768 GPUs needed).

    Raises
    ------
    InputError
        Field ``flows`` (as :func:`check_subflows`), naming the sub-flows, the estimate, the
        budget and the variable that raises it.

    Examples
    --------
    >>> round(check_grouped(878_496, 5_890) / 1e9, 3)  # Mixtral 8x7B, 2,048 GPUs: 0.46 measured
    0.618
    >>> check_grouped(13_826_976, 59_393)  # Mixtral 8x7B, 32,768 GPUs: 7.94 GB measured
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '59,393 sub-flows of 13,826,976 flows through the grouped quotient (about 9.7 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    est = GROUPED_FLOW_BYTES * float(flows) + GROUPED_SUBFLOW_BYTES * float(subflows)
    return _within_budget(
        est,
        f"{int(subflows):,} sub-flows of {int(flows):,} flows through the grouped quotient "
        f"(about {est / 1e9:,.1f} GB of arrays)",
    )


ROUTE_COUNT_PEAK_BYTES = 80.0
"""Peak bytes per entry of the switch pairs' route link counts, from their computation to the
route bundles built on them (:func:`topoopt.fabrics.routing.route_link_counts`'s chunks, the
fabric's cache of every pair, handed to the bundles uncopied, and the bundle set's arrays over
them), :func:`check_route_counts`: measured 2026-12-06 with random GPU-to-GPU flows on the rail
fabric of 2,048 servers x 8 GPUs through ``FlowBuilder.build_bundles``, 1.16 GB peak at 20,000
flows (10.5 M entries) and 2.45 GB at 60,000 (29.1 M): 69 bytes an entry above 0.43 GB (141
before the counts were sorted by chunk and kept uncopied)."""


def check_route_counts(pairs: int, entries: int, known: int = 0) -> float:
    """Refuse switch-pair route link counts whose memory would exceed the budget, before they
    are computed; return the estimated bytes otherwise:

    ``arrays = ROUTE_COUNT_PEAK_BYTES * (entries + known)``

    ``pairs`` switch pairs not computed yet with ``entries`` entries in all
    (:func:`topoopt.fabrics.routing.route_link_entries`), beside ``known`` entries already
    kept for the fabric. Called by the route-bundle path
    (:meth:`topoopt.flowsim.network.Network._switch_routes`) before
    :func:`~topoopt.fabrics.routing.route_link_counts` runs: random flows between many rails
    need a switch pair each, hundreds of entries a pair on a three-tier Clos.

    Raises
    ------
    InputError
        Field ``flows``, naming the switch pairs, their entries, the estimate, the budget and
        the variable that raises it.

    Examples
    --------
    >>> round(check_route_counts(19_162, 10_477_056) / 1e9, 2)  # 1.16 GB measured in all
    0.84
    >>> check_route_counts(140_000, 120_000_000)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '140,000 switch pairs to route (120,000,000 route link entries, about 9.6 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    est = ROUTE_COUNT_PEAK_BYTES * (float(entries) + float(known))
    return _within_budget(
        est,
        f"{int(pairs):,} switch pairs to route ({int(entries) + int(known):,} route link "
        f"entries, about {est / 1e9:,.1f} GB of arrays)",
    )


EXPANDED_PATH_BYTES = 32.0
"""Bytes per sub-flow of the per-flow result of a simulation of merged flows
(:func:`topoopt.flowsim.simulator.expand_classes`: every builder flow gets its class's paths'
start, last-byte and finish times, gathered through one index array: four 8-byte arrays of
one entry per path of every builder flow), :func:`check_expansion`. Measured 2026-12-06: DLRM
on the OCS spine at 4,096 GPUs, 21.1 M expanded sub-flows (528,263 builder flows on 338,003
simulated sub-flows): four arrays of 168.9 MB each, the largest allocations of the run
(tracemalloc)."""


EXPANDED_FLOW_BYTES = 16.0
"""Bytes per builder flow of that result (its start and finish), :func:`check_expansion`."""


def check_expansion(flows: int, subflows: int, expanded: int) -> float:
    """Refuse a result per builder flow whose per-path times alone would exceed the memory
    budget; return their estimated bytes otherwise:

    ``arrays = EXPANDED_FLOW_BYTES * flows + EXPANDED_PATH_BYTES * expanded``

    for ``flows`` builder flows merged into classes of ``subflows`` simulated sub-flows, whose
    expansion gives every builder flow its class's paths: ``expanded`` sub-flows in all (the
    sum over the builder flows of their class's path count). Called by
    :func:`topoopt.flowsim.iteration.simulate_iteration` before it expands the simulation
    (:func:`topoopt.flowsim.simulator.expand_classes`), and first, with the same count, by
    :meth:`topoopt.flowsim.network.FlowBuilder.build_classes` before the pairs are routed (from
    their path counts, :meth:`~topoopt.flowsim.network.Network.pair_path_counts`: DLRM's torus
    at 4,096 GPUs was refused after routing and simulating, 113 s of CPU under cProfile and
    4.3 GB; now before, after 0.9 s and 0.38 GB). A caller
    that keeps per-flow times only (``path_times=False``, as ``advise``) passes ``expanded=0``
    and builds no per-path result. The earlier checks
    (:func:`check_subflows`, :func:`check_bundles`) count the simulated sub-flows or bundles,
    not this expansion, which is many times them where many flows share a pair of many paths
    (an all-to-all on a torus, or across the OCS spine's transit pods); this check counts what
    the expansion allocates (a lower bound of the process then: the flows' arrays are alive
    beside it), so that what cannot fit is refused in one line instead of a killed process.

    Raises
    ------
    InputError
        Field ``flows`` (as :func:`check_subflows`: a caller may retry with fewer paths a
        pair), naming the expanded sub-flows, the estimate, the budget and the variable that
        raises it.

    Examples
    --------
    >>> round(check_expansion(528_263, 338_003, 21_110_000) / 1e9, 3)  # DLRM, OCS spine, 4,096
    0.684
    >>> check_expansion(548_753, 14_071_180, 700_000_000)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: flows: got '700,000,000 sub-flows in the result of 548,753 flows (about 22.4 GB of arrays)'; allowed: at most 8 GB (set TOPOOPT_MEMORY_BUDGET_GB to raise it)
    """  # noqa: E501
    del subflows  # counted by the checks before the simulation
    est = EXPANDED_FLOW_BYTES * float(flows) + EXPANDED_PATH_BYTES * float(expanded)
    return _within_budget(
        est,
        f"{int(expanded):,} sub-flows in the result of {int(flows):,} flows (about "
        f"{est / 1e9:,.1f} GB of arrays)",
    )
