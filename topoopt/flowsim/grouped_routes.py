"""A builder's flows simulated through the grouped symmetry quotient, routes listed per pair.

:func:`topoopt.flowsim.network.simulate_builder_classes` simulates a builder's merged flows
through the route-bundle quotient (:mod:`topoopt.flowsim.bundles`) or, where that is off, through
the quotient of every sub-flow (:mod:`topoopt.flowsim.symmetry`): one sub-flow a path of every
merged flow, built before the classes are found. On the OCS spine every ECMP path of a switch
pair is not interchangeable (the bundle check fails), and many flows share a server pair of many
paths: Llama 3 405B at 16,384 GPUs (the calibrated plan) has 48.5 M such sub-flows of 3.70 M
flows, over the memory budget, although its 4,096-GPU run lists 40,832 paths of 1,536 server
pairs for 7.45 M sub-flows.

:func:`simulate_grouped_classes` lists each route once: the merged flows' *groups* (a server
pair's route, or a link flow's link) with their paths
(:class:`~topoopt.flowsim.epochs_reduction.GroupedFlows`, one path version), found classes by
:func:`~topoopt.flowsim.epochs_reduction.reduce_grouped` (an equitable partition of the groups'
paths and the flows, checked exactly: its module docstring proves the quotient exact) and
simulates the quotient with one epoch of the time-varying engine
(:func:`~topoopt.flowsim.epochs_reduction.simulate_grouped_reduced`, the static engine's
max-min fillings: the same result to rounding). It gives per-flow times and per-link bytes, no
per-path times, and ``None`` where the partition is off (no symmetry: the caller's own model
then decides). The memory guard counts what it holds (:func:`~topoopt.flowsim.subflow_guard.
check_grouped`: the builder's flows, the groups' paths, then the quotient's sub-flows).

Examples
--------
Four servers of two GPUs in a ring on an ideal switch, each GPU sending 25 bytes to its peer on
the next server: four merged flows (one a server pair), one class; 50 bytes a 100-byte/s port.

>>> from topoopt.fabrics import ideal
>>> from topoopt.flowsim.network import FlowBuilder, Network
>>> fb = FlowBuilder(Network(ideal(4, port_bandwidth=100.0, latency=0.0), gpus_per_server=2))
>>> ids = fb.add_ranks(range(8), [2, 3, 4, 5, 6, 7, 0, 1], 25.0)
>>> sim, flows, class_of = simulate_grouped_classes(fb)
>>> sim.finish.tolist(), flows.n_flows, class_of.tolist()
([0.5, 0.5, 0.5, 0.5], 4, [0, 0, 1, 1, 2, 2, 3, 3])
>>> sim.reduction["flow_classes"], sim.reduction["method"]
(1, 'grouped routes')
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from topoopt.csr import ranges
from topoopt.flowsim.flowset import merged_classes
from topoopt.flowsim.subflow_guard import check_grouped

__all__ = ["builder_groups", "simulate_grouped_classes"]


def builder_groups(builder, start: float = 0.0):
    """The merged flows of ``builder`` (a :class:`~topoopt.flowsim.network.FlowBuilder`) grouped
    by route: ``(grouped, class_of, epochs)``.

    ``grouped`` is a :class:`~topoopt.flowsim.epochs_reduction.GroupedFlows` of the merged flows
    (identical flows merged as :meth:`~topoopt.flowsim.network.FlowBuilder.build_classes` merges
    them: same route, bytes and dependency classes; ``class_of[i]`` the merged flow of builder
    flow ``i``) whose one path version lists each group's paths once: a server pair's routed
    paths (:meth:`~topoopt.flowsim.network.Network.pair_routes`, with their weights), a link
    flow's link. ``epochs``: one, at 0, with the network's capacities and that version. The
    builder's flows released at ``start``."""
    from topoopt.flowsim.epochs_reduction import GroupedFlows
    from topoopt.flowsim.timevarying import Epoch, EpochPaths

    a = builder.arrays()
    net = builder.net
    cap = net.capacity(builder.n_devices)
    lat = net.latency(builder.n_devices)
    n_cap = int(cap.shape[0])
    link = np.ascontiguousarray(a["link"], np.int64)
    pair = np.flatnonzero(link < 0)
    route = link.copy()
    if pair.size:
        ps, comm = net.pair_routes(a["src"][pair], a["dst"][pair], a["rail"][pair])
        route[pair] = n_cap + np.asarray(comm, np.int64)
    else:
        ps = None
    class_of, n_c, rep, dep_ptr, deps = merged_classes(
        route, a["size"], start, a["dep_ptr"], a["deps"]
    )
    g_key, group = np.unique(route[rep], return_inverse=True)  # links first, then pairs
    group = group.reshape(-1).astype(np.int64)
    n_g = g_key.shape[0]
    is_pair = g_key >= n_cap
    lo = np.zeros(n_g, np.int64)
    hi = np.ones(n_g, np.int64)
    if ps is not None:
        comm_g = g_key[is_pair] - n_cap
        cp = np.asarray(ps.commodity_ptr, np.int64)
        lo[is_pair], hi[is_pair] = cp[comm_g], cp[comm_g + 1]
    fptr = np.zeros(n_g + 1, np.int64)
    np.cumsum(hi - lo, out=fptr[1:])
    owner = np.repeat(np.arange(n_g, dtype=np.int64), hi - lo)
    ids = ranges(lo, hi)
    on = is_pair[owner]
    if ps is not None:
        pp = np.asarray(ps.path_ptr, np.int64)
        lens = np.where(on, np.diff(pp)[np.where(on, ids, 0)], 1)
    else:
        lens = np.ones(ids.shape[0], np.int64)
    pptr = np.zeros(ids.shape[0] + 1, np.int64)
    np.cumsum(lens, out=pptr[1:])
    links = np.empty(int(pptr[-1]), np.int64)
    if ps is not None:
        links[ranges(pptr[:-1][on], pptr[1:][on])] = np.asarray(ps.path_links, np.int64)[
            ranges(pp[ids[on]], pp[ids[on] + 1])
        ]
        w = np.where(on, np.asarray(ps.weight, np.float64)[np.where(on, ids, 0)], 1.0)
    else:
        w = np.ones(ids.shape[0])
    links[pptr[:-1][~on]] = g_key[owner[~on]]
    table = EpochPaths(fptr, pptr, links, w)
    gf = GroupedFlows(
        capacity=cap, latency=lat, size=np.asarray(a["size"], np.float64)[rep],
        start=np.full(n_c, float(start)), multiplicity=np.bincount(class_of, minlength=n_c),
        dep_ptr=dep_ptr, deps=deps, group=group, versions=[table],
    )  # fmt: skip
    return gf, class_of, [Epoch(0.0, cap, 0)]


def simulate_grouped_classes(
    builder, start: float = 0.0, *, record_series: bool = True, max_refills: int | None = None
):
    """The builder's merged flows simulated through their grouped quotient (module docstring):
    ``(result, flows, class_of)`` as :func:`~topoopt.flowsim.network.simulate_builder_classes`
    returns them, ``result`` per merged flow with per-link bytes and no per-path times
    (``path_*`` ``None``; ``reduction["method"]`` is ``"grouped routes"``), ``flows`` a view
    with ``n_flows`` and ``flow_ptr`` (each merged flow's count of paths), or ``None`` when
    the partition is off (``reduce_grouped``'s reasons). Exact (module docstring).

    Raises
    ------
    InputError
        Field ``flows``: the builder's flows with the groups' paths, or with the quotient's
        sub-flows, over the memory budget (:func:`~topoopt.flowsim.subflow_guard.check_grouped`).
    """
    from topoopt.flowsim.epochs_reduction import reduce_grouped, simulate_grouped_reduced

    n_b = builder.n
    gf, class_of, epochs = builder_groups(builder, start)
    table = gf.versions[0]
    check_grouped(n_b, int(table.weight.shape[0]))
    # the classes' group paths before the quotient lists them (at least its sub-flows)
    red = reduce_grouped(gf, epochs, check=lambda listed: check_grouped(n_b, listed))
    if red.flows is None:
        return None
    check_grouped(n_b, int(red.info["quotient_paths"]))
    red.info["method"] = "grouped routes"
    res = simulate_grouped_reduced(gf, red, record_series=record_series, max_refills=max_refills)
    counts = np.diff(table.flow_ptr)[gf.group]
    fptr = np.zeros(gf.n_flows + 1, np.int64)
    np.cumsum(counts, out=fptr[1:])
    return res, SimpleNamespace(n_flows=gf.n_flows, flow_ptr=fptr), class_of
