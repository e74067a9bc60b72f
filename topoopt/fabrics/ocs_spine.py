"""The OCS spine (Jupiter-style, Poutievski et al., SIGCOMM'22): electrical pods whose
aggregation uplinks land on optical circuit switches instead of spine switches.

Structure (:func:`ocs_spine_shape`):

1. Leaves take ``s = hosts_per_leaf(radix, 1) // P`` servers of ``P`` NIC ports each (a server's
   ports on its leaf, as in the bundled Clos) and have ``u = s P`` uplinks (full bisection).
2. ``pods`` pods of ``Lp`` leaves (default: the three-tier Clos's pods, at most ``radix / 2``
   leaves, and at least two pods). A pod is a two-tier Clos: ``A`` aggregation switches, every
   leaf with a bundle of ``b = ceil(u / A)`` cables to each (the fewest ``A`` with
   ``s P + A b <= radix`` and ``2 Lp b <= radix``). An aggregation switch has as many uplinks as
   downlinks (``Lp b``): the pod is non-blocking up to the OCS layer.
3. The OCS layer replaces the spine: every OCS of ``ocs_radix`` ports takes ``c = ocs_radix //
   pods`` uplinks of every pod (``ceil(U / c)`` OCSes for ``U`` uplinks a pod). Uplink ``k`` of a
   pod (aggregation switch ``k // (Lp b)``) is on OCS ``k // c``.
4. The pod-to-pod circuits are engineered from the job's pod-level traffic
   (:func:`engineer_circuits`): a circuit joins two uplinks of two pods on the same OCS, so each
   pod uses at most ``c`` ports on each OCS. Pairs without a circuit are reached over two
   circuits through a transit pod (the fabric's shortest-path ECMP routing does both).

Bill of materials (:func:`topoopt.fabrics.cost.bill_of_materials`, the same rules as every
fabric): a NIC per server port, a transceiver at both ends of every electrical fibre, every
switch bought whole (its radix of ports), an aggregation uplink is one switch port with one
transceiver and one fibre to its OCS port, and every OCS is bought whole (``ocs_radix`` ports).
No spine switch is bought.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.fat_tree import hosts_per_leaf
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from topoopt.fabrics.torus import DEFAULT_OCS_DELAY
from traffic.errors import InputError

__all__ = [
    "PALOMAR_PORTS",
    "OcsSpineShape",
    "ocs_spine_shape",
    "engineer_circuits",
    "pod_demand",
    "circuit_links",
    "ocs_spine",
]

PALOMAR_PORTS = 136
"""Ports of the Palomar OCS of Jupiter and TPU v4 (``traffic/hardware/catalogue.yaml``)."""


@dataclass(frozen=True)
class OcsSpineShape:
    """Switch and OCS counts of an OCS spine (module docstring, steps 1-3)."""

    servers: int
    ports_per_server: int
    radix: int
    ocs_radix: int
    servers_per_leaf: int
    leaves: int
    pods: int
    leaves_per_pod: int
    aggs_per_pod: int
    bundle: int
    ports_per_ocs_per_pod: int
    ocses: int

    @property
    def pod_leaves(self) -> np.ndarray:
        """Leaves of each pod (the last may have fewer)."""
        return np.diff(np.minimum(np.arange(self.pods + 1) * self.leaves_per_pod, self.leaves))

    @property
    def pod_uplinks(self) -> np.ndarray:
        """OCS-facing uplinks of each pod: ``A x Lp x b``."""
        return self.aggs_per_pod * self.pod_leaves * self.bundle

    @property
    def ocs_ports(self) -> np.ndarray:
        """``(ocses, pods)``: uplinks of pod ``p`` on OCS ``o`` (at most ``c``)."""
        o = np.arange(self.ocses)[:, None] * self.ports_per_ocs_per_pod
        c = self.ports_per_ocs_per_pod
        return np.clip(self.pod_uplinks[None, :] - o, 0, c).astype(np.int64)

    @property
    def switches(self) -> int:
        """Electrical switches: leaves and aggregation switches (no spine)."""
        return self.leaves + self.pods * self.aggs_per_pod

    def info(self) -> dict:
        """JSON-able counts."""
        return {
            "tiers": 2,
            "optical_spine": True,
            "pods": self.pods,
            "leaves": self.leaves,
            "aggregation": self.pods * self.aggs_per_pod,
            "spines": 0,
            "ocses": self.ocses,
            "ocs_radix": self.ocs_radix,
            "servers_per_leaf": self.servers_per_leaf,
            "leaves_per_pod": self.leaves_per_pod,
            "aggs_per_pod": self.aggs_per_pod,
            "bundle": self.bundle,
            "ports_per_ocs_per_pod": self.ports_per_ocs_per_pod,
            "ports_per_server": self.ports_per_server,
        }


def ocs_spine_shape(
    servers: int,
    radix: int = 64,
    *,
    ports_per_server: int = 1,
    pods: int | None = None,
    ocs_radix: int = PALOMAR_PORTS,
) -> OcsSpineShape:
    """The counts of an OCS spine (module docstring, steps 1-3).

    Examples
    --------
    >>> s = ocs_spine_shape(64, 16, pods=4)  # 8 servers a leaf, 2 leaves a pod
    >>> s.leaves, s.aggs_per_pod, s.bundle, s.pod_uplinks.tolist(), s.ocses
    (8, 2, 4, [16, 16, 16, 16], 1)
    """
    n = check_int("servers", servers)
    radix = check_int("radix", radix, minimum=4)
    p = check_int("ports_per_server", ports_per_server)
    k = check_int("ocs_radix", ocs_radix, minimum=2)
    s = min(n, hosts_per_leaf(radix, 1.0) // p)
    if s < 1:
        raise InputError("ports_per_server", p, f"at most {radix // 2} on a {radix}-port leaf")
    leaves = math.ceil(n / s)
    if leaves < 2:
        raise InputError("servers", n, f"more than {s} (one leaf holds them: no spine to replace)")
    if pods is None:
        pods = max(2, math.ceil(leaves / (radix // 2)))
    pods = check_int("pods", pods)
    if not 2 <= pods <= min(leaves, k):
        raise InputError("pods", pods, f"2..{min(leaves, k)} ({leaves} leaves, {k}-port OCS)")
    lp = math.ceil(leaves / pods)
    pods = math.ceil(leaves / lp)
    u = s * p
    for a in range(1, u + 1):
        b = -(-u // a)
        if u + a * b <= radix and 2 * lp * b <= radix:
            break
    else:
        raise InputError("servers", n, f"pods of at most {radix // 2} leaves of radix {radix}")
    c = k // pods
    uplinks = a * lp * b
    return OcsSpineShape(n, p, radix, k, s, leaves, pods, lp, a, b, c, math.ceil(uplinks / c))


def engineer_circuits(demand: np.ndarray, ocs_ports: np.ndarray) -> np.ndarray:
    """Pod-to-pod circuits on every OCS, from pod-level demand (topology engineering).

    First a floor of one circuit per pod pair (each on the first OCS where both pods have a
    free port; Jupiter keeps such a uniform baseline), so that every pair has a direct path
    when the ports allow and the fabric stays connected. Then greedy water-filling (max-min
    of circuits per byte): circuits are added one at a time,
    each to the pod pair with the largest ``w_pq / (x_pq + 1)`` among the pairs with a free
    port on the current OCS, where ``w = D + D^T`` (plus ``1e-9 max(w)``, so that pairs without
    demand share the ports left over) and ``x_pq`` counts the
    circuits already given on every OCS. OCSes are filled in order; ties go to the lowest
    ``(p, q)``. A circuit takes one port of each pod on its OCS, so pod ``p`` never has more
    than ``ocs_ports[o, p]`` circuits on OCS ``o``.

    Parameters
    ----------
    demand : (P, P) array
        Bytes from pod ``p`` to pod ``q`` (diagonal ignored).
    ocs_ports : (O, P) int array
        Uplinks of pod ``p`` on OCS ``o``.

    Returns
    -------
    (O, P, P) int64 array
        Symmetric circuit counts per OCS, zero diagonal.

    Examples
    --------
    >>> d = np.array([[0, 3, 1], [3, 0, 0], [1, 0, 0]], float)
    >>> engineer_circuits(d, np.array([[4, 4, 4]])).sum(axis=0).tolist()
    [[0, 3, 1], [3, 0, 1], [1, 1, 0]]
    """
    demand = np.asarray(demand, np.float64)
    ports = np.asarray(ocs_ports, np.int64)
    n_ocs, n_pods = ports.shape
    if demand.shape != (n_pods, n_pods) or not np.all(np.isfinite(demand)) or demand.min() < 0:
        raise InputError("pod_demand", demand.shape, f"a ({n_pods}, {n_pods}) array of bytes >= 0")
    w = demand + demand.T
    np.fill_diagonal(w, 0.0)
    w = w + 1e-9 * max(float(w.max()), 1.0)
    off = ~np.eye(n_pods, dtype=bool)
    total = np.zeros((n_pods, n_pods), np.int64)
    out = np.zeros((n_ocs, n_pods, n_pods), np.int64)
    free_all = ports.copy()
    for x in range(n_pods):  # the floor: one circuit per pair, on the first OCS with room
        for y in range(x + 1, n_pods):
            room = np.flatnonzero((free_all[:, x] > 0) & (free_all[:, y] > 0))
            if room.size:
                o = int(room[0])
                out[o, x, y] += 1
                out[o, y, x] += 1
                total[x, y] += 1
                total[y, x] += 1
                free_all[o, [x, y]] -= 1
    for o in range(n_ocs):
        free = free_all[o].copy()
        while True:
            ok = off & (free[:, None] > 0) & (free[None, :] > 0)
            if not ok.any():
                break
            score = np.where(ok, w / (total + 1.0), -1.0)
            p, q = divmod(int(np.argmax(score)), n_pods)
            for a, b in ((p, q), (q, p)):
                out[o, a, b] += 1
                total[a, b] += 1
            free[p] -= 1
            free[q] -= 1
    return out


def pod_demand(server_bytes, pod_of: np.ndarray, pods: int) -> np.ndarray:
    """``(pods, pods)`` bytes from a server-level matrix (dense or scipy.sparse).

    >>> pod_demand(np.ones((4, 4)), np.array([0, 0, 1, 1]), 2).tolist()
    [[4.0, 4.0], [4.0, 4.0]]
    """
    import scipy.sparse as sp

    m = sp.coo_matrix(server_bytes)
    out = np.zeros((pods, pods))
    np.add.at(out, (pod_of[m.row], pod_of[m.col]), m.data)
    return out


def circuit_links(shape: OcsSpineShape, circuits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The aggregation switches each circuit joins (module docstring, step 3).

    On OCS ``o`` the circuits of pod pair ``(x, y)``, pairs in order, take the next free
    uplinks of both pods on that OCS (from ``o c``); uplink ``k`` of pod ``p`` is on its
    aggregation switch ``k // (Lp b)``. Node ids as in :func:`ocs_spine`.

    Parameters
    ----------
    shape : OcsSpineShape
    circuits : (O, P, P) int array
        Symmetric circuit counts per OCS (:func:`engineer_circuits`).

    Returns
    -------
    cu, cv : int64 arrays
        One entry per circuit: its two aggregation switches' node ids.

    Raises
    ------
    InputError
        Wrong shape, negative or asymmetric counts, or more circuits of a pod on an OCS than
        its ports there.

    Examples
    --------
    >>> sh = ocs_spine_shape(64, 16, pods=4)
    >>> c = engineer_circuits(np.ones((4, 4)), sh.ocs_ports)
    >>> cu, cv = circuit_links(sh, c)
    >>> cu.size, int(c.sum()) // 2
    (32, 32)
    """
    sh = shape
    circ = np.asarray(circuits)
    if (
        circ.shape != (sh.ocses, sh.pods, sh.pods)
        or not np.issubdtype(circ.dtype, np.integer)
        or circ.min(initial=0) < 0
        or not np.array_equal(circ, circ.transpose(0, 2, 1))
        or np.any(np.diagonal(circ, axis1=1, axis2=2))
    ):
        raise InputError(
            "circuits", circ.shape, f"symmetric counts >= 0 of shape ({sh.ocses}, {sh.pods}, "
            f"{sh.pods}) with a zero diagonal",
        )  # fmt: skip
    used = circ.sum(axis=2)
    if np.any(used > sh.ocs_ports):
        o, p = np.argwhere(used > sh.ocs_ports)[0]
        raise InputError(
            f"circuits[{o}]", f"pod {p}: {int(used[o, p])} circuits",
            f"at most its {int(sh.ocs_ports[o, p])} ports on OCS {o}",
        )  # fmt: skip
    a = sh.aggs_per_pod
    a0 = sh.servers + sh.leaves
    per_agg = sh.pod_leaves * sh.bundle
    c = sh.ports_per_ocs_per_pod
    cu, cv = [], []
    for o in range(sh.ocses):
        nxt = o * c + np.zeros(sh.pods, np.int64)  # next free uplink of each pod on OCS o
        for x in range(sh.pods):
            for y in range(x + 1, sh.pods):
                m = int(circ[o, x, y])
                if m:
                    kx, ky = nxt[x] + np.arange(m), nxt[y] + np.arange(m)
                    nxt[x] += m
                    nxt[y] += m
                    cu.append(a0 + x * a + kx // per_agg[x])
                    cv.append(a0 + y * a + ky // per_agg[y])
    cu = np.concatenate(cu) if cu else np.zeros(0, np.int64)
    cv = np.concatenate(cv) if cv else np.zeros(0, np.int64)
    return cu, cv


def ocs_spine(
    servers: int,
    radix: int = 64,
    *,
    ports_per_server: int = 1,
    pods: int | None = None,
    ocs_radix: int = PALOMAR_PORTS,
    demand: np.ndarray | None = None,
    circuits: np.ndarray | None = None,
    links: tuple[np.ndarray, np.ndarray] | None = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
    reconfiguration_delay: float = DEFAULT_OCS_DELAY,
) -> Fabric:
    """An OCS spine (module docstring) with circuits engineered for ``demand``.

    Parameters
    ----------
    demand : (pods, pods) array, optional
        Pod-level bytes (:func:`pod_demand`); default uniform.
    circuits : (ocses, pods, pods) int array, optional
        The circuits themselves instead of ``demand`` (:func:`engineer_circuits`'s form).
    links : (cu, cv) int arrays, optional
        Instead of both, the aggregation switches of every circuit (:func:`circuit_links`), in
        any number a switch pair: a union of circuit sets (:mod:`solvers.reconfig.spine`).

    Node order: servers, leaves (pod-major), aggregation switches (pod-major), OCSes. The
    circuits are optical links between aggregation switches; the OCS nodes carry no link (as
    in every optical layer of :mod:`topoopt.fabrics`) and are counted for their ports.

    Examples
    --------
    >>> f = ocs_spine(64, 16, pods=4, port_bandwidth=1e9)
    >>> f.family, f.n_switches, int((f.node_kind == "ocs").sum())
    ('ocs-spine', 16, 1)
    """
    sh = ocs_spine_shape(
        servers, radix, ports_per_server=ports_per_server, pods=pods, ocs_radix=ocs_radix
    )
    bw = check_float("port_bandwidth", port_bandwidth)
    n, p, s, lp, a, b = (
        sh.servers, sh.ports_per_server, sh.servers_per_leaf, sh.leaves_per_pod,
        sh.aggs_per_pod, sh.bundle,
    )  # fmt: skip
    if links is not None:
        if demand is not None or circuits is not None:
            raise InputError("links", "with demand or circuits", "one of demand, circuits, links")
        cu, cv = (np.asarray(x, np.int64).reshape(-1) for x in links)
        a_lo, a_hi = n + sh.leaves, n + sh.switches
        if cu.shape != cv.shape or np.any((np.r_[cu, cv] < a_lo) | (np.r_[cu, cv] >= a_hi)):
            raise InputError("links", "endpoints", f"aggregation switch ids {a_lo}..{a_hi - 1}")
    else:
        if circuits is None:
            d = np.ones((sh.pods, sh.pods)) if demand is None else np.asarray(demand, np.float64)
            circuits = engineer_circuits(d, sh.ocs_ports)
        elif demand is not None:
            raise InputError("circuits", "with demand", "one of demand, circuits, links")
        cu, cv = circuit_links(sh, circuits)
    l0, a0 = n, n + sh.leaves
    # host cables, then every leaf to every aggregation switch of its pod
    hu, hv = np.arange(n), l0 + np.arange(n) // s
    leaf = np.repeat(np.arange(sh.leaves), a)
    agg = (leaf // lp) * a + np.tile(np.arange(a), sh.leaves)
    n_sw, n_ocs = sh.switches, sh.ocses
    ne = hu.shape[0] + leaf.shape[0]
    ports = np.r_[np.full(n, p), np.full(n_sw, sh.radix), np.full(n_ocs, sh.ocs_radix)]
    if links is not None:  # a union of circuit sets may hold more circuits than ports (unpriced)
        up = np.bincount(np.r_[cu, cv], minlength=ports.shape[0])
        down = np.bincount(agg + a0, minlength=ports.shape[0]) * b
        ports = np.maximum(ports, up + down)
    fab = build_fabric(
        "ocs-spine",
        {
            **sh.info(),
            "servers": n,
            "radix": sh.radix,
            "port_bandwidth": bw,
            "circuits": int(cu.shape[0]),
        },
        np.array(["server"] * n + ["switch"] * n_sw + ["ocs"] * n_ocs),
        np.r_[np.zeros(n), np.ones(sh.leaves), np.full(sh.pods * a, 2), np.full(n_ocs, 3)],
        ports,
        np.r_[hu, l0 + leaf, cu],
        np.r_[hv, agg + a0, cv],
        bw,
        np.r_[np.array(["electrical"] * ne), np.array(["optical"] * cu.shape[0])],
        multiplicity=np.r_[np.full(n, p), np.full(leaf.shape[0], b), np.ones(cu.shape[0])],
        latency=latency,
        server_ports=p,
        port_bandwidth=bw,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        reconfiguration_delay=reconfiguration_delay,
    )
    return fab
