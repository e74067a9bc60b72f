"""Max-min fair rates of a set of flows on capacitated links, by progressive filling.

Progressive filling: every unfrozen flow's rate rises at the same pace; when a link's capacity is
used up, every unfrozen flow crossing it is frozen at the current level (that link is its
bottleneck); the others keep rising until every flow is frozen. The result is the unique max-min
fair allocation: no flow can get more without taking from a flow that has no more than it.

The implementation works on the sparse flow x link incidence (CSR: ``ptr``, ``links``) and freezes
a whole *set* of flows per round. With ``rem[l]`` the capacity of link ``l`` left by frozen flows
and ``n[l]`` its number of unfrozen flows, each link's fair share is ``s[l] = rem[l] / n[l]``; a
flow's share is ``m[f] = min over its links of s[l]``. A link is a *local bottleneck* when none of
its unfrozen flows has a smaller share elsewhere (``s[l] <= m[f]`` for every unfrozen ``f`` on
``l``). Shares only grow as flows freeze (a frozen flow never takes more than the share of any of
its links), so nothing can freeze a local bottleneck's flows below ``s[l]``: they all end at exactly
``s[l]``. Every round freezes all flows of all local bottlenecks at once (the global minimum is
always one), so the number of rounds is the depth of the bottleneck dependency chain, not the
number of distinct rates; every round is four linear passes (compiled with numba,
:func:`topoopt.flowsim._kernels.fill_kernel`) over the remaining flows. The simulator re-fills
one bottleneck link at a time instead (as :func:`topoopt.flowsim._kernels.fill_links_mult`
does, cheaper when few flows share a level); both give the same rates.

Warm start (used by :mod:`topoopt.flowsim.simulator`): if the flows frozen so far are exactly those
progressive filling freezes below some level (e.g. after flows leave, all flows whose rate is below
the smallest rate of a leaving flow keep their rates), filling can resume from them: pass their
left-over capacity as ``capacity`` and only the other flows as ``rows``.

Multiplicity: a flow may stand for ``m`` identical flows (same links). Progressive filling of the
expanded problem freezes all ``m`` copies together (they cross the same links), so counting the
flow ``m`` times in every link's number of unfrozen flows, and taking ``m`` times its rate from
each link when it freezes, is the same filling step by step; each member gets the rate returned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from traffic.errors import InputError

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built (a light start-up)
    import scipy.sparse as sp

__all__ = ["max_min_rates", "fill_rates"]


def fill_rates(
    ptr: np.ndarray,
    links: np.ndarray,
    rows: np.ndarray,
    capacity: np.ndarray,
    multiplicity: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Max-min fair rates of the flows ``rows`` given the capacity left for them.

    Parameters
    ----------
    ptr, links : numpy.ndarray
        ``int64`` CSR of the flow x link incidence: flow ``f`` crosses ``links[ptr[f]:ptr[f+1]]``
        (non-empty, no repeated link).
    rows : numpy.ndarray
        ``int64`` indices of the flows to allocate (the unfrozen flows).
    capacity : numpy.ndarray
        ``float64 (L,)`` capacity left for these flows on each link, bytes/s (>= 0).
    multiplicity : numpy.ndarray, optional
        ``int64``, one per flow of the CSR (not per row): flow ``f`` stands for
        ``multiplicity[f] >= 1`` identical flows (default 1).

    Returns
    -------
    rates : numpy.ndarray
        ``float64``, rate of each flow of ``rows`` (same order; every member's), bytes/s.
    residual : numpy.ndarray
        ``float64 (L,)`` capacity left after allocating ``rates`` (clipped at 0).
    rounds : int
        Number of filling rounds (each freezes every flow of every local bottleneck link).

    Examples
    --------
    Two links of 10 B/s; flow 0 crosses both, flows 1 and 2 one each (the parking lot):

    >>> ptr = np.array([0, 2, 3, 4]); links = np.array([0, 1, 0, 1])
    >>> rates, left, rounds = fill_rates(ptr, links, np.arange(3), np.array([10.0, 10.0]))
    >>> rates.tolist(), left.tolist()
    ([5.0, 5.0, 5.0], [0.0, 0.0])
    """
    from topoopt.flowsim._kernels import fill_kernel_mult  # numba (see topoopt.flowsim.aot)

    ptr = np.ascontiguousarray(ptr, np.int64)
    links = np.ascontiguousarray(links, np.int64)
    rows = np.ascontiguousarray(rows, np.int64).reshape(-1)
    rem = np.array(capacity, dtype=np.float64, copy=True).reshape(-1)
    out = np.empty(rows.shape[0], np.float64)
    if rows.shape[0] == 0:
        return out, rem, 0
    mult = _multiplicity(multiplicity, ptr.shape[0] - 1)
    rounds = fill_kernel_mult(ptr, links, rows, mult, rem, out)
    np.maximum(rem, 0.0, out=rem)
    return out, rem, int(rounds)


def _multiplicity(multiplicity, n: int) -> np.ndarray:
    if multiplicity is None:
        return np.ones(n, np.int64)
    m = np.asarray(multiplicity)
    if m.shape != (n,):
        raise InputError("multiplicity", m.shape, f"one integer >= 1 per flow, shape ({n},)")
    if m.dtype.kind not in "iuf" or m.dtype == np.bool_:
        raise InputError("multiplicity", str(m.dtype), "integers >= 1")
    bad = ~(np.isfinite(m) & (m >= 1) & (m == np.floor(m)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"multiplicity[{i}]", m[i].item(), "an integer >= 1")
    return np.ascontiguousarray(m, np.int64)


def max_min_rates(
    incidence: sp.spmatrix | sp.sparray, capacity: np.ndarray, multiplicity=None
) -> np.ndarray:
    """Max-min fair rate of every flow (row) of a flow x link incidence matrix.

    Parameters
    ----------
    incidence : scipy.sparse matrix or array, shape ``(F, L)``
        Non-zero where flow ``f`` crosses link ``l`` (values are ignored). Every row needs at
        least one non-zero.
    capacity : array_like, shape ``(L,)``
        Link capacities, bytes/s (positive, finite).
    multiplicity : array_like, optional
        ``(F,)`` integers >= 1: row ``f`` stands for that many identical flows (default 1).

    Returns
    -------
    numpy.ndarray
        ``float64 (F,)`` rates, bytes/s.

    Raises
    ------
    InputError
        If a capacity is not positive and finite, the shapes disagree, or a flow crosses no link.

    Examples
    --------
    Three flows on one 12 B/s link and one of them also on a 2 B/s link:

    >>> import scipy.sparse as sp
    >>> inc = sp.csr_matrix(np.array([[1, 1], [1, 0], [1, 0]]))
    >>> max_min_rates(inc, [12.0, 2.0]).tolist()
    [2.0, 5.0, 5.0]
    """
    import scipy.sparse as sp

    cap = np.asarray(capacity, np.float64).reshape(-1)
    inc = sp.csr_matrix(incidence)
    if inc.shape[1] != cap.shape[0]:
        raise InputError("capacity", cap.shape, f"one capacity per link ({inc.shape[1]})")
    bad = ~(np.isfinite(cap) & (cap > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"capacity[{i}]", float(cap[i]), "a positive finite bytes/s")
    inc.eliminate_zeros()
    inc.sum_duplicates()
    inc.sort_indices()
    lens = np.diff(inc.indptr)
    if (lens == 0).any():
        i = int(np.flatnonzero(lens == 0)[0])
        raise InputError(f"incidence row {i}", "no link", "every flow crosses at least one link")
    ptr = inc.indptr.astype(np.int64)
    rates, _, _ = fill_rates(
        ptr, inc.indices.astype(np.int64), np.arange(inc.shape[0]), cap, multiplicity
    )
    return rates
