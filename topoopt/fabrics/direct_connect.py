"""Optical direct-connect fabrics: n servers x d ports joined by circuits, hosts forward traffic.

Port ``i`` of every server is patched into optical device ``i`` (a patch panel, reconfigured in
minutes, or an optical circuit switch, ~10 ms), so the circuits form a multigraph of maximum degree
``d`` over the servers (parallel circuits allowed). Traffic between servers that share no circuit
is forwarded by intermediate hosts over several circuits (see :mod:`topoopt.fabrics.routing`).
This is the fabric the TopoOpt solvers design.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from topoopt.fabrics.circuit_fabric import (
    DEFAULT_PATCH_PANEL_DELAY,
    DEVICES,
    reconfiguration_delay_for,
)
from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.fabric import DEFAULT_LINK_LATENCY, Fabric, check_float, check_int
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = [
    "DEVICES",
    "DEFAULT_PATCH_PANEL_DELAY",
    "direct_connect",
    "normalise_circuits",
    "load_circuits",
    "circulant_circuits",
    "geometric_strides",
    "select_permutations",
    "reconfiguration_delay_for",
]


def normalise_circuits(circuits: Any, servers: int, degree: int | None = None) -> np.ndarray:
    """Circuits as an ``(m, 3)`` int array of ``(u, v, count)`` with ``u < v``, merged, sorted.

    Parameters
    ----------
    circuits : array_like, iterable of tuples, or networkx graph
        ``(u, v)`` or ``(u, v, count)`` rows, or a (multi)graph over servers ``0..n-1`` (an edge
        attribute ``count`` multiplies an edge; parallel edges of a multigraph add up).
    servers : int
        Number of servers.
    degree : int, optional
        Ports per server; each server's circuit count must not exceed it.

    Examples
    --------
    >>> normalise_circuits([(1, 0), (0, 1, 2), (2, 1)], 3, degree=4).tolist()
    [[0, 1, 3], [1, 2, 1]]
    """
    return Circuits(circuits, servers, degree=degree, min_count=1).rows.copy()


def load_circuits(path: str | Path) -> np.ndarray:
    """Read circuits from a file: JSON (``[[u, v, count], ...]`` or ``{"circuits": [...]}``) or
    text/CSV with one ``u v [count]`` row per line (commas or spaces; ``#`` comments and a header
    line allowed). Returns the ``(m, 3)`` rows (``m >= 1``), checked by the schema of
    :mod:`topoopt.fabrics.circuits_schema`; check them against a fabric with
    :func:`normalise_circuits`.
    """
    from topoopt.fabrics.circuits_schema import load_circuits_file

    return load_circuits_file(path)


def select_permutations(candidates: Sequence[int], k: int) -> list[int]:
    """Pick ``k`` strides from ``candidates`` by TopoOpt's geometric rule (SelectPermutations).

    As in the released code: sort the candidates ascending; ``ratio = (max/min)^(1/k)``; start
    the running value at the smallest candidate; ``k`` times, take the smallest unused candidate
    ``>=`` the running value, then multiply the running value by ``ratio``. (When no unused
    candidate is ``>=`` the running value, which the rule never meets for ``k <= phi/2``, the
    largest unused candidate is taken.) Strides ``p`` and ``n - p`` are distinct candidates, so
    for large ``k`` the rule may pick a ring and its reverse (a double ring).

    Parameters
    ----------
    candidates : sequence of int
        Candidate strides (e.g. every ``p`` coprime with ``n``, TopoOpt's TotientPerms).
    k : int
        Number of strides to pick, ``1 <= k <= len(candidates)``.

    Returns
    -------
    list of int
        The chosen strides, in the order picked (ascending).

    Examples
    --------
    >>> cands = [p for p in range(1, 128) if math.gcd(p, 128) == 1]
    >>> select_permutations(cands, 4)
    [1, 5, 13, 39]
    >>> select_permutations([1, 3, 5, 7, 9, 11, 13, 15], 4)
    [1, 3, 5, 9]
    """
    cand = sorted({int(c) for c in candidates})
    if not cand or cand[0] < 1:
        raise InputError("candidates", list(candidates)[:8], "a non-empty list of positive strides")
    if isinstance(k, bool) or int(k) != k or not 1 <= k <= len(cand):
        raise InputError("k", k, f"an integer in [1, {len(cand)}] (the number of candidates)")
    ratio = (cand[-1] / cand[0]) ** (1.0 / k)
    value = float(cand[0])
    used: set[int] = set()
    chosen: list[int] = []
    for _ in range(int(k)):
        pick = next((c for c in cand if c not in used and c >= value - 1e-9), None)
        if pick is None:
            pick = max(c for c in cand if c not in used)
        used.add(pick)
        chosen.append(pick)
        value *= ratio
    return chosen


def geometric_strides(servers: int, k: int) -> list[int]:
    """Pick ``k`` ring strides by the geometric rule of the released TopoOpt code.

    Candidates are the strides ``p`` in ``1..n-1`` with ``gcd(p, n) = 1`` (each a single ring
    over all ``n`` servers); :func:`select_permutations` picks ``k`` of them.

    Examples
    --------
    >>> geometric_strides(16, 4), geometric_strides(128, 3)
    ([1, 3, 5, 9], [1, 7, 27])
    """
    n = check_int("servers", servers, minimum=2)
    k = check_int("strides", k)
    cand = [p for p in range(1, n) if math.gcd(p, n) == 1]
    if k > len(cand):
        raise InputError("degree", 2 * k, f"at most {2 * len(cand)} for {n} servers")
    return select_permutations(cand, k)


def circulant_circuits(servers: int, strides: Iterable[int]) -> np.ndarray:
    """Circuits ``(i, i + p mod n, 1)`` for every server ``i`` and stride ``p`` (2 ports each).

    >>> circulant_circuits(4, [1]).tolist()
    [[0, 1, 1], [1, 2, 1], [2, 3, 1], [3, 0, 1]]
    """
    n = check_int("servers", servers, minimum=2)
    rows = []
    for p in strides:
        p = int(p)
        if p % n == 0:
            raise InputError("strides", p, f"not a multiple of {n}")
        i = np.arange(n)
        rows.append(np.column_stack([i, (i + p) % n, np.ones(n, np.int64)]))
    return np.concatenate(rows) if rows else np.zeros((0, 3), np.int64)


def direct_connect(
    servers: int,
    degree: int,
    circuits: Any = None,
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    device: str = "patch-panel",
    reconfiguration_delay: float | None = None,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
    family: str = "direct-connect",
    extra_params: dict | None = None,
    ocs_radix: int | None = None,
    ocs_layout: str = "per-rail",
) -> Fabric:
    """Optical direct-connect fabric of ``servers`` servers with ``degree`` ports each.

    Parameters
    ----------
    servers : int
        Number of servers ``n``.
    degree : int
        Optical ports per server ``d``.
    circuits : array_like, iterable, networkx graph or None
        The circuits (see :func:`normalise_circuits`); a bundle of ``count`` parallel circuits is
        one cable of capacity ``count * port_bandwidth``. Default: the TopoOpt circulant graph of
        ``d // 2`` :func:`geometric_strides` (an odd port stays unused).
    port_bandwidth : float
        Bytes/s of one port (one circuit), each direction.
    device : {"patch-panel", "ocs"}
        Device realising the circuits: ``d`` devices of ``n`` ports each, device ``i`` holding
        port ``i`` of every server.
    reconfiguration_delay : float, optional
        Seconds to rewire (default 10 ms for an OCS, 300 s for a patch panel).
    ocs_radix : int, optional
        Ports of one OCS (``device="ocs"``; default: unbounded, ``d`` devices of ``n`` ports).
        With a radix the devices are those of :class:`~topoopt.fabrics.ocs_layout.OcsLayout`
        (``ocs_layout``: ``per-rail``, one group per port index, or ``packed``), each counted
        with all its ports in the bill of materials, and a circuit between two servers that
        share no OCS is refused. (Whether all circuits fit the OCSes together is a placement
        problem: :func:`solvers.model.ocs_layers.check_ocs`.)

    Returns
    -------
    Fabric
        Nodes: ``n`` servers then the optical devices (no links: they are transparent).

    Examples
    --------
    >>> f = direct_connect(12, 4)
    >>> f.n_physical_links, f.reconfiguration_delay, f.params["strides"]
    (24, 300.0, [1, 5])
    >>> g = direct_connect(300, 8, device="ocs", ocs_radix=136)
    >>> int((g.node_kind == "ocs").sum()), int(g.node_ports[g.node_kind == "ocs"].sum())
    (24, 3264)
    >>> direct_connect(4, 1, [(0, 1), (0, 2)])
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: circuits.server[0]: got 2; allowed: at most 1 circuits (the degree)
    """
    n = check_int("servers", servers)
    d = check_int("degree", degree)
    b = check_float("port_bandwidth", port_bandwidth)
    delay = reconfiguration_delay_for(device, reconfiguration_delay)
    strides = None
    if circuits is None:
        if n < 2 or d < 2:
            raise InputError("circuits", None, "given explicitly when servers < 2 or degree < 2")
        strides = geometric_strides(n, d // 2)
        circuits = circulant_circuits(n, strides)
    circ = Circuits(circuits, n, degree=d, min_count=1)
    return circ.to_fabric(
        d,
        b,
        device=device,
        reconfiguration_delay=delay,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        latency=latency,
        family=family,
        strides=strides,
        extra_params=extra_params,
        ocs_radix=ocs_radix,
        ocs_layout=ocs_layout,
    )
