"""The server-level design problem: who must talk to whom, phase by phase, on d ports of B bytes/s.

A :class:`DesignProblem` is what every optical-design solver reads. It is built from a
:class:`traffic.workload.Workload` by :meth:`DesignProblem.from_workload` and holds, for each phase
of the iteration (forward, backward, optimizer; one phase when the workload has no phase
structure):

- the *mutable* ring collectives (all-reduce, reduce-scatter, all-gather marked ``mutable``),
  lifted to server sets: a GPU group whose members sit on ``m`` distinct servers is a server-level
  ring over those ``m`` servers (the hierarchical algorithm: intra-server first, then one ring of
  ``S`` over the servers, each server sending ``2(m-1)/m * S`` to its successor for all-reduce,
  ``(m-1)/m * S`` for reduce-scatter and all-gather). Groups over the same server set are merged
  (their bytes add up), so 8 data-parallel groups that differ only in their local GPU index are
  one server group. The ring *order* is left to the solver;
- the *fixed* traffic (pipeline sends, all-to-all, broadcast, and collectives not marked mutable)
  as a sparse ``(n, n)`` server byte matrix with a zero diagonal (intra-server bytes never reach
  the optical ports).

Units: bytes per iteration and bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from traffic.errors import InputError
from traffic.expand import expand
from traffic.workload import PHASES, Workload

__all__ = ["RING_OPS", "PhaseTraffic", "DesignProblem", "ring_factor"]

RING_OPS = ("all-reduce", "reduce-scatter", "all-gather")
"""Collectives whose ring order is a design variable when the demand is ``mutable``."""


def ring_factor(op: str, m: int) -> float:
    """Bytes each member sends its ring successor per byte of ``S`` (one ring over ``m`` servers).

    Examples
    --------
    >>> ring_factor("all-reduce", 4), ring_factor("all-gather", 4)
    (1.5, 0.75)
    """
    if m <= 1:
        return 0.0
    if op == "all-reduce":
        return 2.0 * (m - 1) / m
    if op in ("reduce-scatter", "all-gather"):
        return (m - 1) / m
    raise InputError("op", op, f"one of {', '.join(RING_OPS)}")


@dataclass(frozen=True, eq=False)
class PhaseTraffic:
    """The server-level traffic of one phase.

    Attributes
    ----------
    name : str
        Phase name (``"forward"``, ``"backward"``, ``"optimizer"`` or ``"iteration"``).
    group_ptr : numpy.ndarray
        ``int64 (G+1,)``: the servers of ring group ``i`` are
        ``group_servers[group_ptr[i] : group_ptr[i+1]]`` (sorted, distinct, at least two).
    group_servers : numpy.ndarray
        ``int64`` flat server ids.
    ring_bytes : numpy.ndarray
        ``float64 (G,)``: bytes each member of group ``i`` sends its successor per iteration when
        the group runs on one ring (``r`` rings: ``1/r`` of it on each).
    fixed : scipy.sparse.csr_matrix
        ``(n, n)`` bytes per iteration of the fixed pair traffic, zero diagonal.
    """

    name: str
    group_ptr: np.ndarray
    group_servers: np.ndarray
    ring_bytes: np.ndarray
    fixed: sp.csr_matrix

    def __post_init__(self) -> None:
        object.__setattr__(self, "group_ptr", np.asarray(self.group_ptr, np.int64))
        object.__setattr__(self, "group_servers", np.asarray(self.group_servers, np.int64))
        object.__setattr__(self, "ring_bytes", np.asarray(self.ring_bytes, np.float64))
        fixed = sp.csr_matrix(self.fixed, dtype=np.float64)
        fixed.setdiag(0.0)
        fixed.eliminate_zeros()
        fixed.sum_duplicates()
        object.__setattr__(self, "fixed", fixed)
        g = self.ring_bytes.shape[0]
        if self.group_ptr.shape != (g + 1,) or self.group_ptr[-1] != self.group_servers.size:
            raise InputError(f"phase {self.name}.group_ptr", self.group_ptr.shape, f"({g + 1},)")
        if g and np.any(np.diff(self.group_ptr) < 2):
            raise InputError(f"phase {self.name}.groups", "a group of < 2 servers", ">= 2 servers")
        if np.any(self.ring_bytes < 0) or not np.all(np.isfinite(self.ring_bytes)):
            raise InputError(f"phase {self.name}.ring_bytes", "negative", "finite bytes >= 0")
        if fixed.nnz and fixed.data.min() < 0:
            raise InputError(f"phase {self.name}.fixed", float(fixed.data.min()), "bytes >= 0")

    @property
    def n_groups(self) -> int:
        """Number of ring groups."""
        return int(self.ring_bytes.shape[0])

    def group(self, i: int) -> np.ndarray:
        """Sorted server ids of ring group ``i``."""
        return self.group_servers[self.group_ptr[i] : self.group_ptr[i + 1]]

    def group_sizes(self) -> np.ndarray:
        """Members of each ring group."""
        return np.diff(self.group_ptr)

    def ring_out_bytes(self, n: int) -> np.ndarray:
        """Bytes each server sends (and receives) on rings, whatever the ring orders: ``(n,)``."""
        per = np.repeat(self.ring_bytes, self.group_sizes())
        return np.bincount(self.group_servers, weights=per, minlength=n)

    def out_bytes(self, n: int) -> np.ndarray:
        """Bytes each server sends to other servers (fixed + ring)."""
        return np.asarray(self.fixed.sum(axis=1)).ravel() + self.ring_out_bytes(n)

    def in_bytes(self, n: int) -> np.ndarray:
        """Bytes each server receives from other servers (fixed + ring)."""
        return np.asarray(self.fixed.sum(axis=0)).ravel() + self.ring_out_bytes(n)

    def total_bytes(self) -> float:
        """Bytes this phase puts on inter-server wires (fixed + ring), one hop each."""
        return float(self.fixed.sum() + (self.ring_bytes * self.group_sizes()).sum())


def _merge_groups(sets: list[np.ndarray], byts: list[float]):
    """Merge identical server sets; keep first-seen order (deterministic)."""
    index: dict[bytes, int] = {}
    keep_sets: list[np.ndarray] = []
    keep_bytes: list[float] = []
    for s, b in zip(sets, byts, strict=True):
        key = s.tobytes()
        if key in index:
            keep_bytes[index[key]] += b
        else:
            index[key] = len(keep_sets)
            keep_sets.append(s)
            keep_bytes.append(b)
    ptr = np.zeros(len(keep_sets) + 1, np.int64)
    if keep_sets:
        ptr[1:] = np.cumsum([s.size for s in keep_sets])
        flat = np.concatenate(keep_sets)
    else:
        flat = np.zeros(0, np.int64)
    return ptr, flat, np.asarray(keep_bytes, np.float64)


@dataclass(frozen=True, eq=False)
class DesignProblem:
    """Servers with ``degree`` optical ports of ``link_bandwidth`` bytes/s, and their traffic.

    Parameters
    ----------
    n : int
        Number of servers.
    degree : int
        Optical ports per server (``d``); a circuit uses one port at each end.
    link_bandwidth : float
        Bytes/s of one port, each direction (``B``).
    phases : tuple of PhaseTraffic
        Per-phase traffic; the communication time sums over phases.
    max_parallel : int, optional
        Cap on parallel circuits between one server pair (default: ``degree``).
    name : str
        Where the problem came from.
    workload : Workload, optional
        The GPU-level Workload behind the problem (set by :meth:`from_workload`).

    Examples
    --------
    >>> import numpy as np
    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(gpus=8, gpus_per_server=2, demands=(
    ...     Demand("all-reduce", np.array([[0, 2, 4, 6], [1, 3, 5, 7]]), 1e6, "dp", "backward"),))
    >>> p = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    >>> p.n, [ph.name for ph in p.phases], p.phases[0].group(0).tolist()
    (4, ['backward'], [0, 1, 2, 3])
    >>> float(p.phases[0].ring_bytes[0])  # two GPU groups x 2*(4-1)/4 * 1e6
    3000000.0
    """

    n: int
    degree: int
    link_bandwidth: float
    phases: tuple[PhaseTraffic, ...]
    max_parallel: int | None = None
    name: str = ""
    workload: Workload | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 2:
            raise InputError("servers", self.n, "an integer >= 2")
        if isinstance(self.degree, bool) or int(self.degree) != self.degree or self.degree < 1:
            raise InputError("degree", self.degree, "an integer >= 1")
        b = float(self.link_bandwidth)
        if not np.isfinite(b) or b <= 0:
            raise InputError(
                "link_bandwidth", self.link_bandwidth, "a finite number of bytes/s > 0"
            )
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "degree", int(self.degree))
        object.__setattr__(self, "link_bandwidth", b)
        object.__setattr__(self, "phases", tuple(self.phases))
        if self.max_parallel is not None:
            mp = self.max_parallel
            if isinstance(mp, bool) or int(mp) != mp or mp < 1:
                raise InputError("max_parallel", mp, "an integer >= 1 (or None)")
            object.__setattr__(self, "max_parallel", int(mp))
        for ph in self.phases:
            if ph.fixed.shape != (self.n, self.n):
                raise InputError(f"phase {ph.name}.fixed", ph.fixed.shape, f"({self.n}, {self.n})")
            if ph.group_servers.size and (
                ph.group_servers.min() < 0 or ph.group_servers.max() >= self.n
            ):
                raise InputError(
                    f"phase {ph.name}.groups", int(ph.group_servers.max()), f"0..{self.n - 1}"
                )

    @property
    def pair_cap(self) -> int:
        """Largest number of parallel circuits allowed between two servers."""
        return self.degree if self.max_parallel is None else min(self.max_parallel, self.degree)

    @property
    def n_phases(self) -> int:
        return len(self.phases)

    def with_options(self, **changes) -> DesignProblem:
        """A copy with some fields replaced (e.g. ``degree``, ``max_parallel``)."""
        return replace(self, **changes)

    @classmethod
    def from_workload(
        cls,
        workload: Workload,
        degree: int,
        link_bandwidth: float,
        max_parallel: int | None = None,
        split_phases: bool = True,
    ) -> DesignProblem:
        """Lift a GPU-level Workload to the server-level design problem.

        Parameters
        ----------
        workload : Workload
        degree : int
            Optical ports per server.
        link_bandwidth : float
            Bytes/s per port and direction.
        max_parallel : int, optional
            Cap on parallel circuits per server pair.
        split_phases : bool
            One phase per workload phase (default), or everything in one phase ``"iteration"``.
        """
        n = workload.servers
        gps = workload.gpus_per_server
        present = [p for p in PHASES if any(d.phase == p for d in workload.demands)]
        buckets = present if split_phases else ["iteration"]
        phases = []
        for name in buckets:
            sets: list[np.ndarray] = []
            byts: list[float] = []
            fixed_idx = []
            for idx, d in enumerate(workload.demands):
                if split_phases and d.phase != name:
                    continue
                if d.count == 0 or d.n_groups == 0 or d.group_size <= 1 or d.size == 0:
                    continue
                if d.mutable and d.op in RING_OPS:
                    srv = np.sort(d.groups // gps, axis=1)
                    rows, counts = np.unique(srv, axis=0, return_counts=True)
                    for row, c in zip(rows, counts, strict=True):
                        s = np.unique(row)
                        if s.size >= 2:
                            sets.append(s)
                            byts.append(float(c) * ring_factor(d.op, s.size) * d.size * d.count)
                else:
                    fixed_idx.append(idx)
            if fixed_idx:
                sub = replace(workload, demands=tuple(workload.demands[i] for i in fixed_idx))
                fixed = expand(sub, "ring", "server").matrix()
            else:
                fixed = sp.csr_matrix((n, n))
            ptr, flat, rb = _merge_groups(sets, byts)
            ph = PhaseTraffic(name, ptr, flat, rb, fixed)
            if ph.total_bytes() > 0:
                phases.append(ph)
        return cls(n, degree, link_bandwidth, tuple(phases), max_parallel, workload.name, workload)
