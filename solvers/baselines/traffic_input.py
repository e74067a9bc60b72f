"""What the TopoOpt baselines read: server-level ring groups and the MP byte matrix, all phases.

TopoOpt designs one topology for the whole iteration, so the per-phase
:class:`solvers.model.problem.DesignProblem` is merged here: every mutable ring group (a server set)
keeps its per-member ring bytes summed over the phases it appears in, and the fixed (model-
parallel, immutable) traffic of all phases is added into one sparse ``(n, n)`` byte matrix.

``T_AR`` of a group is the note's ``S * (2g - 1)``: with per-member ring bytes
``r = 2(g-1)/g * S`` (all-reduce) that is ``r * g * (2g - 1) / (2(g - 1))``; the same formula is
applied to reduce-scatter / all-gather rings (their ``S`` counted as an all-reduce's with the same
ring bytes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.model.problem import DesignProblem

__all__ = ["TopoOptTraffic", "topoopt_traffic"]


@dataclass(frozen=True, eq=False)
class TopoOptTraffic:
    """Phase-merged traffic of a design problem.

    Attributes
    ----------
    n : int
        Servers.
    groups : tuple of numpy.ndarray
        Sorted server ids of each distinct ring group (at least two servers each).
    ring_bytes : numpy.ndarray
        ``float64 (G,)``: bytes each member sends its successor per iteration, all phases.
    refs : tuple of tuple
        For each group, the ``(phase name, group index in that phase)`` it merges.
    mp : scipy.sparse.csr_matrix
        ``(n, n)`` fixed bytes per iteration, zero diagonal.
    """

    n: int
    groups: tuple[np.ndarray, ...]
    ring_bytes: np.ndarray
    refs: tuple[tuple[tuple[str, int], ...], ...]
    mp: sp.csr_matrix

    def ar_weight(self) -> np.ndarray:
        """``T_AR`` of each group: ``S * (2g - 1)`` in bytes (see the module docstring)."""
        g = np.array([s.size for s in self.groups], np.float64)
        return self.ring_bytes * g * (2 * g - 1) / (2 * (g - 1))

    def t_ar(self) -> float:
        """Sum of ``S * (2g - 1)`` over the ring groups."""
        return float(self.ar_weight().sum())

    def t_mp(self) -> float:
        """Sum of the MP byte matrix."""
        return float(self.mp.sum())


def topoopt_traffic(problem: DesignProblem) -> TopoOptTraffic:
    """Merge the phases of ``problem`` (see the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=4, gpus_per_server=1, demands=(
    ...     Demand("all-reduce", np.array([[0, 1, 2, 3]]), 100.0, "dp", "backward"),
    ...     Demand("send", np.array([[0, 1]]), 10.0, "pp", "forward", mutable=False),
    ...     Demand("send", np.array([[0, 1]]), 5.0, "pp", "backward", mutable=False)))
    >>> t = topoopt_traffic(DesignProblem.from_workload(w, degree=4, link_bandwidth=1.0))
    >>> [g.tolist() for g in t.groups], t.ring_bytes.tolist(), t.t_ar(), float(t.mp[0, 1])
    ([[0, 1, 2, 3]], [150.0], 700.0, 15.0)
    """
    n = problem.n
    index: dict[bytes, int] = {}
    groups: list[np.ndarray] = []
    byts: list[float] = []
    refs: list[list[tuple[str, int]]] = []
    mp = sp.csr_matrix((n, n))
    for ph in problem.phases:
        mp = mp + ph.fixed
        for i in range(ph.n_groups):
            s = ph.group(i)
            key = s.tobytes()
            if key not in index:
                index[key] = len(groups)
                groups.append(s)
                byts.append(0.0)
                refs.append([])
            j = index[key]
            byts[j] += float(ph.ring_bytes[i])
            refs[j].append((ph.name, i))
    mp = sp.csr_matrix(mp)
    mp.setdiag(0.0)
    mp.eliminate_zeros()
    return TopoOptTraffic(
        n, tuple(groups), np.asarray(byts, np.float64), tuple(tuple(r) for r in refs), mp
    )
