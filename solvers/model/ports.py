"""Port options every solver honours: reserved ports and pre-wired circuits
(:attr:`~solvers.model.problem.DesignProblem.reserved`,
:attr:`~solvers.model.problem.DesignProblem.prewired`).

- :func:`merge_prewired`: a construction on the free ports plus the pre-wired circuits;
- :func:`fill_free_ports`: wire pairs of servers that still have free ports, heaviest traffic
  first (capacity never hurts under the congestion objective);
- :func:`check_ports`, :func:`check_prewired_present`: a design against the options;
- :func:`with_port_options`: a design checked and recording the options.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from solvers.model.design import Design
from solvers.model.problem import DesignProblem, check_within_ports
from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "merge_prewired",
    "fill_free_ports",
    "check_ports",
    "check_prewired_present",
    "with_port_options",
]


def merge_prewired(circuits, problem: DesignProblem) -> np.ndarray:
    """``circuits`` (a construction on the free ports) plus the problem's pre-wired circuits.

    Counts add up; on a pre-wired pair the sum is cut back to ``max(pair_cap, c)`` (``c`` the
    construction's own count), so the pre-wired count is always kept and no pair goes above
    both the cap and what the construction itself asked for. The ports this frees are left for
    :func:`solvers.joint.local_search.fill_free_ports`.

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import DesignProblem, PhaseTraffic
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix((4, 4)))
    >>> p = DesignProblem(4, 3, 1.0, (ph,), max_parallel=1, prewired=[[0, 1, 1]])
    >>> merge_prewired([[0, 1, 1], [1, 2, 1]], p).tolist()
    [[0, 1, 1], [1, 2, 1]]
    """
    n = problem.n
    cc = Circuits(circuits, n)
    c = cc.rows
    pre = problem.prewired_circuits()
    if not len(pre):
        return c
    both = cc.merged(pre).rows.copy()  # counts cut back below
    own = {(u, v): k for u, v, k in c.tolist()}
    wired = {(u, v) for u, v, _ in pre.tolist()}
    cap = problem.pair_cap
    for r, (u, v, k) in enumerate(both.tolist()):
        if (u, v) in wired:
            both[r, 2] = min(k, max(cap, own.get((u, v), 0)))
    return both


def check_ports(design, problem: DesignProblem) -> None:
    """Raise :class:`InputError` when ``design`` breaks ``problem``'s port options.

    ``design`` is a :class:`Design` (or anything with ``circuits``) or a circuit array. Checked:
    every server uses at most ``degree - reserved`` ports, and every pre-wired pair has at
    least its pre-wired count.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from solvers.model.problem import DesignProblem, PhaseTraffic
    >>> ph = PhaseTraffic("p", [0], [], [], sp.csr_matrix((4, 4)))
    >>> p = DesignProblem(4, 2, 1.0, (ph,), reserved=[1, 0, 0, 0], prewired=[[1, 2, 1]])
    >>> check_ports([[1, 2, 1], [0, 3, 1]], p)
    >>> for bad in ([[0, 1, 1], [0, 3, 1], [1, 2, 1]], [[0, 3, 1]]):
    ...     try:
    ...         check_ports(bad, p)
    ...     except InputError as exc:
    ...         print(exc.field, exc.value)
    circuits (server 0) 2
    circuits (pre-wired pair 1-2) 0
    """
    n = problem.n
    c = Circuits(getattr(design, "circuits", design), n)  # a Design's is kept as it is
    check_within_ports("circuits", c.degrees(), problem.usable_ports(), problem.degree)
    check_prewired_present(c, problem.prewired_circuits())


def check_prewired_present(circuits: Circuits, prewired: Circuits) -> None:
    """Raise :class:`InputError` when ``circuits`` have fewer circuits on some pre-wired pair
    than ``prewired`` requires.

    Examples
    --------
    >>> check_prewired_present(Circuits([[0, 1, 2]], 3), Circuits([[0, 1, 1]], 3))
    >>> check_prewired_present(Circuits([[0, 1, 1]], 3), Circuits([[1, 2, 1]], 3))
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: circuits (pre-wired pair 1-2): got 0; allowed: at least the 1 pre-wired circuit(s)
    """  # noqa: E501
    if not len(prewired):
        return
    have = {(int(u), int(v)): int(k) for u, v, k in circuits.tolist()}
    for u, v, k in prewired.tolist():
        if have.get((u, v), 0) < k:
            raise InputError(
                f"circuits (pre-wired pair {u}-{v})",
                have.get((u, v), 0),
                f"at least the {k} pre-wired circuit(s)",
            )


def with_port_options(design: Design, problem: DesignProblem) -> Design:
    """``design`` checked by :func:`check_ports` and recording ``problem``'s port options.

    A problem without options returns ``design`` unchanged.
    """
    if problem.reserved is None and problem.prewired is None:
        return design
    check_ports(design, problem)
    reserved = problem.reserved if problem.reserved is not None else np.zeros(problem.n, int)
    return replace(design, reserved_ports=reserved, prewired=problem.prewired_circuits())


def fill_free_ports(
    circuits,
    n: int,
    d: int | np.ndarray,
    demand: sp.spmatrix,
    pair_cap: int,
    connect: bool = False,
) -> np.ndarray:
    """Add circuits between servers with free ports, heaviest symmetric demand first.

    ``d`` is the port budget: one number for every server, or ``(n,)`` per-server budgets
    (``degree - reserved`` when ports are reserved). Ties go to the lowest ``(a, b)``.
    ``connect``: while the circuit graph has several components, the next circuit joins two of
    them (preferring joins after which the merged component still has a free port, then the
    heaviest demand); used when the circuits to fill are not connected to begin with (pre-wired
    circuits with few free ports).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> fill_free_ports([[0, 1, 1]], 4, 1, sp.csr_matrix((4, 4)), 1).tolist()
    [[0, 1, 1], [2, 3, 1]]
    >>> fill_free_ports([[0, 1, 1]], 4, [1, 2, 1, 2], sp.csr_matrix((4, 4)), 1).tolist()
    [[0, 1, 1], [1, 2, 1]]
    >>> fill_free_ports([[0, 1, 1], [2, 3, 1]], 4, 2, sp.csr_matrix((4, 4)), 1, True).tolist()
    [[0, 1, 1], [0, 2, 1], [1, 3, 1], [2, 3, 1]]
    """
    cur = Circuits(circuits, n)
    c = cur.rows
    free = np.maximum(np.asarray(d, np.int64) - cur.degrees(), 0)
    if free.sum() < 2:
        return c
    dem = sp.csr_matrix(demand)
    count = {(int(u), int(v)): int(k) for u, v, k in c}
    added = []
    while True:
        idx = np.flatnonzero(free > 0)
        if idx.size < 2:
            break
        sub = dem[idx][:, idx].toarray()
        w = sub + sub.T
        ok = np.triu(np.ones((idx.size, idx.size), bool), 1)
        for (a, b), k in count.items():
            if k >= pair_cap and free[a] > 0 and free[b] > 0:
                ia, ib = np.searchsorted(idx, a), np.searchsorted(idx, b)
                ok[ia, ib] = False
        if not ok.any():
            break
        if connect:
            ok = _joining(ok, idx, free, cur.merged(added))
        score = np.where(ok, w, -np.inf)
        flat = int(np.argmax(score))  # first maximum: lowest (a, b) among ties
        a, b = int(idx[flat // idx.size]), int(idx[flat % idx.size])
        count[(a, b)] = count.get((a, b), 0) + 1
        free[a] -= 1
        free[b] -= 1
        added.append([a, b, 1])
    if not added:
        return c
    return cur.merged(added).rows


def _joining(ok, idx, free, now: Circuits) -> np.ndarray:
    """``ok`` restricted to pairs that join two components of the circuits ``now`` (those after
    which the merged component keeps a free port first); ``ok`` itself when none joins."""
    k, label = now.components()
    if k == 1:
        return ok
    lab = label[idx]
    cross = ok & (lab[:, None] != lab[None, :])
    if not cross.any():
        return ok
    comp_free = np.bincount(label, weights=free, minlength=k)
    keeps = comp_free[lab][:, None] + comp_free[lab][None, :] - 2 > 0
    best = cross & keeps
    return best if best.any() else cross
