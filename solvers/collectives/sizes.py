"""Sizes first for one collective (issue 30): the transfers and the ECMP route arrays a
collective on ``n`` servers needs, estimated from the counts alone and refused beyond the flow
cap or the memory budget before any schedule, flow or route exists.

- Transfers: of an all-gather, reduce-scatter, all-reduce or broadcast, a ring schedule has at
  most ``n`` transfers, a tree ``4 n``, halving-doubling ``n ceil(log2 n)`` (the largest ratios
  over 2-1,025 servers are 1, 3.996 and 1); ``direct`` and every all-to-all have ``n (n - 1)``.
  Checked against ``TOPOOPT_MAX_FLOWS``. Blink and synthesized schedules are trees of a packing
  LP with its own limits.
- Routes: every server is a destination, and the ECMP route count
  (:func:`topoopt.fabrics.routing.shortest_path_counts`) holds :data:`ROUTE_ARRAYS` float64
  arrays of ``destinations x nodes`` at once: ``5 x 8 x n x N`` bytes (74.5 GiB for one of them
  at 100,000 servers on the ideal switch). Checked against ``TOPOOPT_MEMORY_BUDGET_GB`` unless
  the routes are given (a design's).
"""

from __future__ import annotations

import math

from traffic.errors import InputError
from traffic.limits import check_memory, max_flows

__all__ = ["ROUTE_ARRAYS", "collective_transfers", "check_collective_size"]

ROUTE_ARRAYS = 5
"""float64 ``(destinations, nodes)`` arrays the ECMP route count holds at once: distances, path
counts, the previous level, the next level and its product."""


def collective_transfers(collective: str, n: int, algorithm: str) -> int | None:
    """Upper bound on the transfers of a template schedule (module docstring); ``None`` for the
    packing-based algorithms (``blink``, ``synthesize``) other than all-to-all.

    >>> collective_transfers("all-reduce", 1000, "ring"), collective_transfers("all-to-all", 4, "tree")
    (1000, 12)
    """  # noqa: E501
    if algorithm == "direct" or collective == "all-to-all":
        return n * (n - 1)
    if algorithm == "ring":
        return n
    if algorithm == "tree":
        return 4 * n
    if algorithm == "halving-doubling":
        return n * max(1, math.ceil(math.log2(max(n, 2))))
    return None


def check_collective_size(
    collective: str, algorithm: str, servers: int, nodes: int, routed: bool = True
) -> None:
    """Refuse a collective on ``servers`` servers of a ``nodes``-node fabric beyond the flow cap
    or the memory budget (``routed``: the fabric's ECMP routes are computed, not given).

    Raises
    ------
    InputError
        Field ``servers``, naming the estimate, the limit and the variable that raises it.

    Examples
    --------
    >>> check_collective_size("all-reduce", "ring", 1000, 1001)
    >>> check_collective_size("all-reduce", "ring", 100_000, 100_001)
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: servers: got 'ECMP routes to 100,000 destinations over 100,001 nodes (about 400 GB of arrays)'; allowed: at most 8 GB of arrays (TOPOOPT_MEMORY_BUDGET_GB)
    """  # noqa: E501
    n = int(servers)
    flows = collective_transfers(collective, n, algorithm)
    cap = max_flows()
    if flows is not None and flows > cap:
        raise InputError(
            "servers",
            f"about {flows:,} transfers for a {algorithm} {collective} of {n:,} servers",
            f"at most {cap:,} flows (set TOPOOPT_MAX_FLOWS to raise it)",
        )
    if routed:
        check_memory(
            "servers",
            ROUTE_ARRAYS * 8.0 * n * int(nodes),
            f"ECMP routes to {n:,} destinations over {int(nodes):,} nodes",
        )
