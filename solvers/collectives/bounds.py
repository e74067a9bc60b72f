"""Lower bounds on the time of a collective over the servers of a fabric (bandwidth cut bounds).

``S`` is the nccl-tests size (bytes), ``n`` the members (one per server), ``B_in(v)`` and
``B_out(v)`` the summed capacity of the fabric links entering and leaving server ``v``.

Per-node cut bounds (every fabric):

==================  ==================================================================
collective          bound
==================  ==================================================================
all-gather          ``max_v (n-1)/n * S / B_in(v)``: ``v`` must receive every other shard
reduce-scatter      ``max_v (n-1)/n * S / B_out(v)``: ``v``'s share of every other shard
                    must leave it (the reduction's inputs cannot be skipped)
all-reduce          ``max_v S / B_in(v)`` and ``S / B_out(v)`` (every element of ``v``'s
                    result needs a message in, every input element a message out), and
                    ``2(n-1) * S / sum_v B_in(v)`` (and ``B_out``): combining ``n`` inputs
                    for ``n`` readers takes at least ``2(n-1)`` messages per element (the
                    one-way gossip bound), each leaving and entering a server. On a
                    ``d``-regular graph of links ``B`` this is ``2(n-1)/n * S / (d B)``, the
                    Patarasuk-Yuan bound (J. Parallel Distrib. Comput. 69(2), 2009)
broadcast           ``S / B_in(v)`` for every non-root ``v`` and ``S / B_out(root)``
all-to-all          ``max_v (n-1)/n * S / B_in(v)`` and ``(n-1)/n * S / B_out(v)``
==================  ==================================================================

The per-server form of Patarasuk and Yuan's bound, ``2(n-1)/n * S / B_in(v)``, is *not* a
valid bound on an irregular graph: a server with one neighbour can send its whole input to it
and receive the result back, ``S / B`` in all (tree algorithms, Blink, do exactly that).

Subset cut bounds (switchless fabrics, ``n <= 16``, every proper subset ``U`` of the servers;
``C(U)`` the capacity of the links entering ``U``): all-gather ``(n-|U|)/n * S / C(U)``,
broadcast ``S / C(U)`` for ``U`` without the root, all-to-all ``|U|(n-|U|)/n * S / C(U)``,
reduce-scatter the same as all-gather with the links leaving ``U``. Single servers are the
per-node bounds; larger sets are sometimes tighter (a sparse cut).

The bound reported is the largest of these; latency is not included (the flow model adds it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from topoopt.fabrics.fabric import Fabric
from traffic.errors import InputError

__all__ = ["COLLECTIVES", "Bound", "cut_bound"]

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "broadcast", "all-to-all")
"""The collectives of ``topoopt collective``."""

_SUBSET_MAX = 16


@dataclass(frozen=True)
class Bound:
    """A lower bound on a collective's time.

    Attributes
    ----------
    seconds : float
        The bound (the largest of the two below).
    per_node_s : float
        The per-node cut bound.
    subset_s : float
        The best subset cut bound (0 when not computed).
    formula : str
        Which bound it is, in words.
    """

    seconds: float
    per_node_s: float
    subset_s: float
    formula: str


def _io(fabric: Fabric, n: int) -> tuple[np.ndarray, np.ndarray]:
    cap = np.asarray(fabric.capacity, np.float64)
    b_in = np.bincount(fabric.dst, weights=cap, minlength=fabric.n_nodes)[:n]
    b_out = np.bincount(fabric.src, weights=cap, minlength=fabric.n_nodes)[:n]
    return b_in, b_out


def _subset(fabric: Fabric, n: int, collective: str, size: float, root: int) -> float:
    s, d = np.asarray(fabric.src), np.asarray(fabric.dst)
    if n > _SUBSET_MAX or collective == "all-reduce":
        return 0.0
    if np.any((s >= fabric.n_servers) | (d >= fabric.n_servers)):
        return 0.0
    keep = (s < n) & (d < n)
    c = np.zeros((n, n))
    np.add.at(c, (s[keep], d[keep]), fabric.capacity[keep])
    masks = np.arange(1, 2**n - 1, dtype=np.int64)
    m = ((masks[:, None] >> np.arange(n)) & 1).astype(np.float64)  # (subsets, n) membership
    k = m.sum(axis=1)
    into = (((1.0 - m) @ c) * m).sum(axis=1)  # links from outside U into U
    out = ((m @ c) * (1.0 - m)).sum(axis=1)
    if collective == "all-gather":
        need, capu = (n - k) / n * size, into
    elif collective == "reduce-scatter":
        need, capu = (n - k) / n * size, out
    elif collective == "broadcast":
        need, capu = np.where(m[:, root] > 0, 0.0, size), into
    else:  # all-to-all
        need, capu = k * (n - k) / n * size, into
    with np.errstate(divide="ignore"):
        t = np.where(need > 0, need / np.where(capu > 0, capu, np.nan), 0.0)
    if np.any(np.isnan(t)):
        raise InputError("fabric", fabric.family, "servers connected to each other")
    return float(t.max())


def cut_bound(
    fabric: Fabric, collective: str, size: float, n: int | None = None, root: int = 0
) -> Bound:
    """The cut lower bound (module docstring) of ``collective`` of ``size`` bytes on the first
    ``n`` servers of ``fabric``.

    Examples
    --------
    A 4-server ring of 1 GB/s links, 1 MB all-gather: each server has 2 GB/s in, so
    ``3/4 * 1e6 / 2e9`` = 375 us.

    >>> from topoopt.fabrics import torus
    >>> b = cut_bound(torus("4", 1e9), "all-gather", 1e6)
    >>> round(b.seconds * 1e6, 6), round(b.per_node_s * 1e6, 6)
    (375.0, 375.0)
    """
    if collective not in COLLECTIVES:
        raise InputError("collective", collective, f"one of {', '.join(COLLECTIVES)}")
    if not (np.isfinite(size) and size > 0):
        raise InputError("size", size, "a finite number of bytes > 0")
    n = fabric.n_servers if n is None else int(n)
    if not 0 <= root < n:
        raise InputError("root", root, f"a member 0..{n - 1}")
    b_in, b_out = _io(fabric, n)
    if np.any(b_in <= 0) or np.any(b_out <= 0):
        raise InputError("fabric", fabric.family, "every server with links in and out")
    f = (n - 1) / n * size
    if collective == "all-gather":
        per, text = float(np.max(f / b_in)), "(n-1)/n * S / B_in(v), worst server"
    elif collective == "reduce-scatter":
        per, text = float(np.max(f / b_out)), "(n-1)/n * S / B_out(v), worst server"
    elif collective == "all-reduce":
        node = max(np.max(size / b_in), np.max(size / b_out))
        total = 2 * (n - 1) * size / min(b_in.sum(), b_out.sum())
        per = float(max(node, total))
        text = (
            "2(n-1) * S / sum_v B(v) (gossip messages)"
            if total >= node
            else "S / B_in(v) or S / B_out(v), worst server"
        )
    elif collective == "broadcast":
        others = np.delete(b_in, root)
        per = float(max(np.max(size / others), size / b_out[root]))
        text = "S / B_in(v) over non-roots and S / B_out(root)"
    else:
        per = float(max(np.max(f / b_in), np.max(f / b_out)))
        text = "(n-1)/n * S / B_in(v) and / B_out(v), worst server"
    sub = _subset(fabric, n, collective, size, root)
    if sub > per * (1 + 1e-12):
        text += "; a subset cut is tighter"
    return Bound(max(per, sub), per, sub, text)
