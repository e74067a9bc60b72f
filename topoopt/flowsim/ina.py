"""In-network aggregation (ATP, Lao et al., NSDI 2021): all-reduce summed by programmable switches.

A fabric is *INA-capable* when its ``params`` carry ``ina_memory_bytes``, the aggregator memory
of each of its electrical (packet) switches (:func:`with_ina`); every ``switch`` node is then a
programmable (Tofino-class) switch. On such a fabric an all-reduce family whose groups the
switches can serve is expanded into an aggregation tree instead of the host algorithm; the others
keep the host algorithm (ATP's fallback). The full model, its assumptions and measured figures
are in ``docs/ina.md``.

The tree of one group
---------------------
Members sit on ``m`` servers, ``k`` members per server (the same ``k`` on every server); server
``s`` hangs off its top-of-rack switch (ToR) ``tor(s)``, the only switch it has a link to. With
``T`` distinct ToRs, the *root* is the ToR when ``T = 1``, else a switch at the least largest hop
distance from the ``T`` ToRs over switch-to-switch links (a spine of a leaf-spine, an aggregation
or core switch of a fat-tree); ties go to the candidate ``min(rank) mod (number of candidates)``,
which spreads groups over spines. The flows of one all-reduce of ``S`` bytes are then

======================= ==================== =========================================
flow                    bytes                what
======================= ==================== =========================================
member -> next member   ``2 (k-1)/k * S``    intra-server reduce-scatter + all-gather
 (same server, ring)                          (NVLink), only when ``k > 1``
member -> ``tor(s)``    ``S / k``            the member's shard, up
``tor`` -> root         ``S``                the ToR's partial aggregate (``T > 1``)
root -> ``tor``         ``S``                the aggregate, down (``T > 1``)
``tor(s)`` -> member    ``S / k``            the member's shard of the aggregate
======================= ==================== =========================================

so every server's NIC carries ``S`` up and ``S`` down (a ring: ``2(g-1)/g * S`` each way).
As in the fluid ring (:mod:`topoopt.flowsim.collectives`), all flows are released together: the
fluid limit of ATP's packet stream, where a switch forwards a fragment's aggregate as soon as the
last worker's fragment has arrived, so every stage streams at once. With dedicated links of ``B``
bytes/s and ``k = 1`` the all-reduce takes ``S / B`` plus the latency of its longest flow.

Memory budget
-------------
To stream at line rate a switch must hold one window of in-flight fragments per group: the
bandwidth-delay product ``W = B_nic * RTT`` with ``RTT = 2 h * latency`` for a tree of depth
``h`` hops (server to root), at least one aggregator (:data:`ATP_AGGREGATOR_BYTES`); a fabric
may fix ``W`` with ``params["ina_window_bytes"]``. All groups of one family run together and
share the switches. When, at every switch, the windows of all its groups' trees fit in
``ina_memory_bytes``, the family is aggregated in the network. Otherwise ATP's best-effort
sharing applies: a fragment that finds no free aggregator goes the host way, so the switches sum
the share ``memory / need`` of the fragments (at the tightest switch) and the host algorithm
moves the rest at the same time (:func:`ina_share`); with not one aggregator per group at a
switch the whole family uses the host algorithm. Families are judged one at a time (one
collective of a job holds the aggregators at a time; ATP releases an aggregator when its fragment
completes). Only all-reduce is aggregated, in
the ``fluid`` mode; groups on one server, groups whose servers have no single ToR, and families
whose groups differ in shape (servers per ToR, members per server) use the host algorithm.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import shortest_path

from topoopt.fabrics.fabric import Fabric, check_float
from topoopt.flowsim.templates import FlowTemplate
from traffic.errors import InputError
from traffic.workload import Demand

__all__ = [
    "ATP_AGGREGATORS",
    "ATP_AGGREGATOR_BYTES",
    "ATP_MEMORY_BYTES",
    "with_ina",
    "is_ina",
    "window_bytes",
    "ina_template",
    "ina_share",
    "ina_family_fits",
]

ATP_AGGREGATORS = 40_000
"""Aggregators of one switch in ATP's released P4 program (``in-ATP/ATP``,
``p4src/includes/registers.p4``: every gradient register has 40,000 instances)."""

ATP_AGGREGATOR_BYTES = 128
"""Gradient bytes of one ATP aggregator: 32 registers of one 32-bit value (same file)."""

ATP_MEMORY_BYTES = ATP_AGGREGATORS * ATP_AGGREGATOR_BYTES
"""Aggregator memory of one switch, bytes (5.12 MB): ATP's register allocation."""


def with_ina(
    fabric: Fabric,
    memory_bytes: float = ATP_MEMORY_BYTES,
    window: float | None = None,
    fraction: float = 1.0,
) -> Fabric:
    """``fabric`` with programmable switches of ``memory_bytes`` aggregator memory each.

    Parameters
    ----------
    fabric : Fabric
        A fabric with electrical switches (leaf-spine, fat-tree, hybrid).
    memory_bytes : float
        Aggregator memory per switch (default :data:`ATP_MEMORY_BYTES`); 0 disables aggregation
        (every all-reduce falls back to the host algorithm).
    window : float, optional
        Bytes one group holds at each switch of its tree (default: the bandwidth-delay product,
        :func:`window_bytes`).
    fraction : float
        Share ``f`` of every aggregated all-reduce's bytes that the switches sum; the rest runs
        on the host algorithm at the same time (a hybrid fabric's optical ring, ``docs/ina.md``).

    Returns
    -------
    Fabric
        The same nodes and links, ``params`` with ``ina_memory_bytes`` (and ``ina_window_bytes``).

    Examples
    --------
    >>> from topoopt.fabrics import leaf_spine
    >>> f = with_ina(leaf_spine(8, radix=8, leaf_hosts=4))
    >>> is_ina(f), f.params["ina_memory_bytes"]
    (True, 5120000.0)
    """
    params = dict(fabric.params)
    params["ina_memory_bytes"] = check_float("ina_memory_bytes", memory_bytes, 0.0, strict=False)
    f = check_float("ina_fraction", fraction, 0.0)
    if f > 1.0:
        raise InputError("ina_fraction", fraction, "a number in (0, 1]")
    if f < 1.0:
        params["ina_fraction"] = f
    if window is not None:
        params["ina_window_bytes"] = check_float("ina_window_bytes", window, 0.0, strict=False)
    return replace(fabric, params=params, _cache={})


def is_ina(fabric: Fabric) -> bool:
    """Whether ``fabric``'s switches aggregate (:func:`with_ina`)."""
    return "ina_memory_bytes" in fabric.params


def _switch_graph(fabric: Fabric):
    key = ("ina", "graph")
    if key not in fabric._cache:
        sw = fabric.node_kind == "switch"
        keep = sw[fabric.src] & sw[fabric.dst]
        n = fabric.n_nodes
        adj = coo_matrix(
            (np.ones(int(keep.sum())), (fabric.src[keep], fabric.dst[keep])), shape=(n, n)
        ).tocsr()
        # each server's switches over its electrical links
        up = (fabric.src < fabric.n_servers) & sw[fabric.dst]
        up &= fabric.link_kind == "electrical"
        tor = np.full(fabric.n_servers, -1, np.int64)
        count = np.bincount(fabric.src[up], minlength=fabric.n_servers)
        tor[fabric.src[up]] = fabric.dst[up]
        tor[count != 1] = -1  # no switch, or several (rails): not served
        nic = np.zeros(fabric.n_servers)
        np.add.at(nic, fabric.src[up], fabric.capacity[up])
        lat = np.zeros(fabric.n_servers)
        np.maximum.at(lat, fabric.src[up], fabric.latency[up])
        fabric._cache[key] = (adj, tor, nic, lat)
    return fabric._cache[key]


def window_bytes(fabric: Fabric, server: int, depth: int) -> float:
    """Aggregator bytes one group holds at each switch of a tree of ``depth`` hops (module
    docstring): ``params["ina_window_bytes"]`` if set, else ``B_nic * 2 * depth * latency``
    of ``server``'s link; at least :data:`ATP_AGGREGATOR_BYTES` either way.

    >>> from topoopt.fabrics import leaf_spine
    >>> f = with_ina(leaf_spine(8, radix=8, leaf_hosts=4, port_bandwidth=1e10))
    >>> window_bytes(f, 0, 2)  # 1e10 B/s x 4 us
    40000.0
    """
    if "ina_window_bytes" in fabric.params:
        w = float(fabric.params["ina_window_bytes"])
    else:
        _, _, nic, lat = _switch_graph(fabric)
        w = float(nic[server]) * 2.0 * depth * float(lat[server])
    return max(float(ATP_AGGREGATOR_BYTES), w)


def _structure(servers: np.ndarray, tor: np.ndarray):
    """Per row of server ids: (server index per position, ToR index per server, k) by first
    appearance, or None when the servers do not have the same number of members."""
    _, first, s_idx = np.unique(servers, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))  # relabel servers by first appearance
    s_idx = order[s_idx.reshape(-1)]
    m = first.shape[0]
    counts = np.bincount(s_idx, minlength=m)
    if np.any(counts != counts[0]):
        return None
    srv = np.empty(m, np.int64)
    srv[s_idx] = servers
    tors = tor[srv]
    _, tfirst, t_idx = np.unique(tors, return_index=True, return_inverse=True)
    t_idx = np.argsort(np.argsort(tfirst))[t_idx.reshape(-1)]
    return s_idx, t_idx, int(counts[0]), srv, tors[np.sort(tfirst)]


def _trees(network, rows: np.ndarray):
    """Structure and tree of every row (sorted members), or None if INA cannot serve them."""
    fab = network.fabric
    adj, tor, _, _ = _switch_graph(fab)
    gps = network.gpus_per_server
    rows = np.sort(np.asarray(rows, np.int64), axis=1)
    servers = rows // gps
    out, key0 = [], None
    dist_cache: dict = {}
    for r in range(rows.shape[0]):
        st = _structure(servers[r], tor)
        if st is None:
            return None
        s_idx, t_idx, k, srv, tors = st
        if tors.min() < 0 or srv.shape[0] < 2:
            return None
        key = (s_idx.tobytes(), t_idx.tobytes(), k)
        if key0 is None:
            key0 = key
        elif key != key0:
            return None
        if tors.shape[0] == 1:
            root, depth = int(tors[0]), 1
        else:
            tk = tuple(tors.tolist())
            if tk not in dist_cache:
                d = shortest_path(adj, unweighted=True, indices=tors)
                worst = d.max(axis=0)
                worst[fab.node_kind != "switch"] = np.inf
                best = worst.min()
                if not np.isfinite(best):
                    return None
                dist_cache[tk] = (np.flatnonzero(worst == best), int(best))
            cand, h = dist_cache[tk]
            root, depth = int(cand[int(rows[r].min()) % cand.shape[0]]), 1 + h
        out.append((s_idx, t_idx, k, srv, tors, root, depth))
    return rows, out


def ina_share(network, rows: np.ndarray) -> float:
    """Share of the groups ``rows``' fragments that the switches aggregate (module docstring):
    ``min(1, memory / need)`` over the switches of their trees, where ``need`` is the sum of the
    windows there; 0 when INA cannot serve the groups or a switch has not one aggregator
    (:data:`ATP_AGGREGATOR_BYTES`) per group.

    >>> from topoopt.fabrics import leaf_spine
    >>> from topoopt.flowsim.network import Network
    >>> f = leaf_spine(8, radix=8, leaf_hosts=4)
    >>> rows = [[0, 5], [1, 6]]  # both through ToRs 0 and 1: 2 windows of 1,000 B there
    >>> [ina_share(Network(with_ina(f, memory_bytes=m, window=1000.0)), rows)
    ...  for m in (4000.0, 1000.0, 255.0)]
    [1.0, 0.5, 0.0]
    """
    fab = network.fabric
    if not is_ina(fab):
        return 0.0
    t = _trees(network, rows)
    if t is None:
        return 0.0
    use = np.zeros(fab.n_nodes)
    groups = np.zeros(fab.n_nodes)
    for _s, _t, _k, srv, tors, root, depth in t[1]:
        nodes = np.unique(np.r_[tors, root])
        use[nodes] += window_bytes(fab, int(srv[0]), depth)
        groups[nodes] += 1
    mem = float(fab.params["ina_memory_bytes"])
    on = groups > 0
    if np.any(mem < groups[on] * ATP_AGGREGATOR_BYTES):
        return 0.0
    r = mem / use[on].max()
    return 1.0 if r >= 1.0 - 1e-12 else float(r)


def ina_family_fits(network, rows: np.ndarray) -> bool:
    """Whether the groups ``rows`` of one family all get their windows at every switch of their
    trees (module docstring), on ``network``'s INA-capable fabric: :func:`ina_share` is 1.

    >>> from topoopt.fabrics import leaf_spine
    >>> from topoopt.flowsim.network import Network
    >>> f = leaf_spine(8, radix=8, leaf_hosts=4)
    >>> ina_family_fits(Network(with_ina(f, window=100.0)), [[0, 5], [1, 6]])
    True
    >>> ina_family_fits(Network(with_ina(f, memory_bytes=150.0, window=100.0)), [[0, 5], [1, 6]])
    False
    """
    return ina_share(network, rows) >= 1.0


def ina_template(network, demand: Demand, members: np.ndarray, size: float, repeats: int = 1,
                 family_rows: np.ndarray | None = None, host=None):  # fmt: skip
    """The aggregation-tree flows of ``repeats`` all-reduces of ``size`` bytes over the groups
    ``members``, or None when the host algorithm must run (module docstring).

    Parameters
    ----------
    network : Network
        The simulation's network (its fabric decides; pseudo-ranks name switches,
        :meth:`~topoopt.flowsim.network.Network.switch_rank`).
    demand : Demand
        The family (only ``all-reduce`` is aggregated).
    members : numpy.ndarray
        ``(G, g)`` member ranks of the groups to expand.
    size : float
        Bytes of one all-reduce (nccl-tests ``S``).
    family_rows : numpy.ndarray, optional
        All groups of the family (default ``members``): they share the switch memory.
    host : FlowTemplate, optional
        The host algorithm's template over ``members`` (positions ``0..g-1``): with
        ``params["ina_fraction"] = f < 1`` the fraction ``1 - f`` of the bytes runs on it, the
        rest in the network (the template then has positions ``0..g-1`` for ``members`` as
        given, then the sorted members, then the switches).

    Returns
    -------
    (FlowTemplate, numpy.ndarray) or None
        The template over positions ``0 .. g+X-1`` (members sorted, then ToRs, then the root)
        and the ``(G, g+X)`` ranks / switch pseudo-ranks of those positions.

    Examples
    --------
    Four servers on two ToRs of a leaf-spine: each member sends and receives ``S`` once.

    >>> from topoopt.fabrics import leaf_spine
    >>> from topoopt.flowsim.network import Network
    >>> net = Network(with_ina(leaf_spine(4, radix=4, leaf_hosts=2)))
    >>> d = Demand("all-reduce", [[0, 1, 2, 3]], 100.0, "dp", "backward")
    >>> t, ends = ina_template(net, d, d.groups, 100.0)
    >>> t.src.tolist(), t.dst.tolist(), t.bytes.tolist()
    ([0, 1, 2, 3, 4, 5, 6, 6, 4, 4, 5, 5], [4, 4, 5, 5, 6, 6, 4, 5, 0, 1, 2, 3], [100.0, 100.0, \
100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0])
    """
    if demand.op != "all-reduce" or not is_ina(network.fabric) or repeats <= 0:
        return None
    members = np.asarray(members, np.int64)
    fam = members if family_rows is None else np.asarray(family_rows, np.int64)
    share = ina_share(network, fam) if members.size else 0.0
    f = float(network.fabric.params.get("ina_fraction", 1.0)) * share
    if share <= 0.0 or (f < 1.0 and host is None):
        return None
    rows, trees = _trees(network, members)
    s_idx, t_idx, k, _srv, tors, _root, _depth = trees[0]
    g, m, T = rows.shape[1], int(s_idx.max()) + 1, int(t_idx.max()) + 1
    S = float(size) * int(repeats)
    pos = np.arange(g)
    src, dst, byt, step = [], [], [], []
    if k > 1:  # intra-server ring over each server's members, in position order
        order = np.lexsort((pos, s_idx))
        nxt = np.empty(g, np.int64)
        blocks = order.reshape(m, k)
        nxt[blocks.ravel()] = np.roll(blocks, -1, axis=1).ravel()
        src.append(pos), dst.append(nxt), byt.append(np.full(g, 2.0 * (k - 1) / k * S))
        step.append(np.zeros(g, np.int64))
    tor_pos = g + t_idx[s_idx]  # the position of each member's ToR
    src.append(pos), dst.append(tor_pos), byt.append(np.full(g, S / k))
    step.append(np.ones(g, np.int64))
    if T > 1:
        tp, root_pos = g + np.arange(T), g + T
        src += [tp, np.full(T, root_pos)]
        dst += [np.full(T, root_pos), tp]
        byt += [np.full(T, S), np.full(T, S)]
        step += [np.full(T, 2), np.full(T, 3)]
    src.append(tor_pos), dst.append(pos), byt.append(np.full(g, S / k))
    step.append(np.full(g, 4))
    n = sum(a.shape[0] for a in src)
    t = FlowTemplate(
        np.concatenate(src).astype(np.int64),
        np.concatenate(dst).astype(np.int64),
        np.concatenate(byt).astype(np.float64),
        np.zeros(n + 1, np.int64),
        np.zeros(0, np.int64),
        np.concatenate(step).astype(np.int64),
    )
    cols = [rows]
    if f < 1.0:  # split: (1 - f) of the bytes on the host algorithm
        t = FlowTemplate(
            np.r_[host.src, t.src + g],
            np.r_[host.dst, t.dst + g],
            np.r_[host.bytes * (1.0 - f), t.bytes * f],
            np.r_[host.dep_ptr, host.dep_ptr[-1] + t.dep_ptr[1:]],
            host.deps,
            np.r_[host.step, t.step + int(host.step.max(initial=0)) + 1],
        )
        cols = [members, rows]
    tor_cols = np.array([tr[4] for tr in trees], np.int64)  # (G, T) ToR nodes
    cols.append(network.switch_rank(tor_cols))
    if T > 1:
        cols.append(network.switch_rank(np.array([[tr[5]] for tr in trees], np.int64)))
    return t, np.concatenate(cols, axis=1)
