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

Ports reserved or pre-wired (issue #5, section 2)
-------------------------------------------------
Two options restrict which optical ports the optimizer may wire:

- ``reserved``: ports per server held back from the optimizer (management or storage NICs,
  broken ports): ``None`` (none), one integer for every server, or an integer array of length
  ``n``. Server ``i`` then has ``usable_i = degree - reserved_i`` ports
  (:meth:`DesignProblem.usable_ports`).
- ``prewired``: circuits that already exist and must stay (cables the operator will not move),
  an integer array ``(k, 3)`` of rows ``[u, v, count]`` with ``u != v`` and ``count >= 1``,
  stored canonical (``u < v``, one row per pair, sorted; rows given as ``[v, u, c]`` or repeated
  are merged). They use a port at both ends (counted against ``usable``), carry traffic like
  any circuit, and every design a solver returns contains them: its count on each pre-wired
  pair is at least the pre-wired count (:func:`solvers.model.design.check_ports`). A pre-wired pair
  above :attr:`DesignProblem.pair_cap` is an error.

What is left for the optimizer at server ``i`` is ``free_i = usable_i - prewired degree_i``
(:meth:`DesignProblem.free_ports`). Both default to ``None``: the problem is then exactly the
one without options (``usable_i = degree``, nothing pre-wired). A CSV (``u,v,count``) or JSON
list of pre-wired circuits is read by :func:`read_prewired`.

Optical layers of finite-radix OCSes
------------------------------------
``ocs``: an :class:`~topoopt.fabrics.ocs_layout.OcsLayout` (``None``: one OCS of unbounded radix,
any port reaches any port). With finite radix a circuit can join two ports only if they land
on the same OCS (port ``p`` of every server on OCS group ``p`` in the ``per-rail`` layout, as
TPU v4's). The searches build their circuits without it; :func:`solvers.solve` (the door every
method is called through) then keeps the largest placeable subset, fills the ports left on
common OCSes and routes the result again (:func:`solvers.ocs_repair.respect_ocs`), and
:func:`solvers.model.ocs_layers.check_ocs` refuses a design that does not fit.

Units: bytes per iteration and bytes/s.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Annotated

import numpy as np
import scipy.sparse as sp
from pydantic import Field, TypeAdapter, ValidationError

from topoopt.fabrics.circuits import Circuits
from topoopt.fabrics.ocs_layout import OcsLayout
from traffic.errors import InputError
from traffic.expand import expand
from traffic.limits import SERVER_PORTS_ALLOWED, check_server_ports
from traffic.workload import PHASES, Workload

__all__ = [
    "RING_OPS",
    "PhaseTraffic",
    "DesignProblem",
    "check_within_ports",
    "ring_factor",
    "read_prewired",
    "read_prewired_file",
]

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
    reserved : int or array_like of int, optional
        Ports per server held back from the optimizer (one value for all, or ``n`` values);
        stored as an ``int64 (n,)`` array, or ``None`` (see the module docstring).
    prewired : Circuits or array_like, optional
        Circuits ``[u, v, count]`` that exist and must stay; stored as a
        :class:`~topoopt.fabrics.circuits.Circuits` (see the module docstring).
    ocs : OcsLayout, optional
        The optical layer of finite-radix OCSes the ports land on (module docstring); its
        ``servers`` and ``degree`` must be the problem's.

    Raises
    ------
    InputError
        On a bad field: ``reserved`` negative or above ``degree``, a pre-wired server out of
        range, a self loop, a non-integer or negative count, a pre-wired pair above
        ``pair_cap``, or a server whose pre-wired circuits exceed its usable ports.

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

    One reserved port everywhere and one cable that must stay between servers 1 and 3:

    >>> q = DesignProblem.from_workload(w, 3, 1e9, reserved=1, prewired=[[3, 1, 1]])
    >>> q.prewired.tolist(), q.usable_ports().tolist(), q.free_ports().tolist(), q.free_degree
    ([[1, 3, 1]], [2, 2, 2, 2], [2, 1, 2, 1], 1)
    """

    n: int
    degree: int
    link_bandwidth: float
    phases: tuple[PhaseTraffic, ...]
    max_parallel: int | None = None
    name: str = ""
    workload: Workload | None = field(default=None, repr=False)
    reserved: np.ndarray | None = None
    prewired: Circuits | None = None
    ocs: OcsLayout | None = None

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 2:
            raise InputError("servers", self.n, "an integer >= 2")
        if isinstance(self.degree, bool) or int(self.degree) != self.degree:
            raise InputError("degree", self.degree, SERVER_PORTS_ALLOWED)
        check_server_ports("degree", int(self.degree))
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
        if self.ocs is not None:
            if not isinstance(self.ocs, OcsLayout):
                raise InputError("ocs", type(self.ocs).__name__, "an OcsLayout or None")
            if (self.ocs.servers, self.ocs.degree) != (self.n, self.degree):
                raise InputError(
                    "ocs", f"{self.ocs.servers} servers x {self.ocs.degree} ports",
                    f"the problem's {self.n} servers x {self.degree} ports",
                )  # fmt: skip
        if self.reserved is not None:
            object.__setattr__(
                self, "reserved", _check_reserved(self.reserved, self.n, self.degree)
            )
        if self.prewired is not None:
            pc = _canonical_prewired(self.prewired, self.n)
            object.__setattr__(self, "prewired", pc)
            pre = pc.rows
            if pre.size and pre[:, 2].max() > self.pair_cap:
                r = int(np.argmax(pre[:, 2]))
                raise InputError(
                    f"prewired (pair {int(pre[r, 0])}-{int(pre[r, 1])})",
                    int(pre[r, 2]),
                    f"at most pair_cap = {self.pair_cap} circuits per pair",
                )
            check_within_ports(
                "prewired", self.prewired_degrees(), self.usable_ports(), self.degree, "ports"
            )

    @property
    def has_port_options(self) -> bool:
        """True when some port is reserved or some circuit pre-wired."""
        return bool(
            (self.reserved is not None and self.reserved.any())
            or (self.prewired is not None and len(self.prewired))
        )

    def usable_ports(self) -> np.ndarray:
        """``int64 (n,)``: ports the designs may use at each server (``degree - reserved``)."""
        if self.reserved is None:
            return np.full(self.n, self.degree, np.int64)
        return self.degree - self.reserved

    def prewired_degrees(self) -> np.ndarray:
        """``int64 (n,)``: ports the pre-wired circuits take at each server."""
        return self.prewired_circuits().degrees()

    def free_ports(self) -> np.ndarray:
        """``int64 (n,)``: ports left for the optimizer (usable minus pre-wired)."""
        return self.usable_ports() - self.prewired_degrees()

    @property
    def free_degree(self) -> int:
        """``min_i free_i``: the uniform degree a regular construction can use on top."""
        return int(self.free_ports().min())

    def prewired_circuits(self) -> Circuits:
        """The pre-wired circuits (none when the problem has no such option)."""
        return Circuits((), self.n) if self.prewired is None else self.prewired

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
        reserved=None,
        prewired=None,
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
        reserved, prewired : optional
            Ports reserved and circuits pre-wired (see the class and the module docstring).
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
        return cls(
            n, degree, link_bandwidth, tuple(phases), max_parallel, workload.name, workload,
            reserved, prewired,
        )  # fmt: skip


def check_within_ports(
    field_name: str,
    used: np.ndarray,
    usable: np.ndarray,
    degree: int,
    unit: str = "",
    ports: str = "ports",
    degree_name: str = "degree",
) -> None:
    """Raise :class:`InputError` naming the first server whose ``used`` ports exceed ``usable``
    (``degree - reserved``); ``unit`` is appended to the value shown, ``ports`` names them.

    Examples
    --------
    >>> check_within_ports("prewired", np.array([1, 3]), np.array([2, 2]), 3, "ports")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: prewired (server 1): got '3 ports'; allowed: at most the 2 usable ports (degree 3 - reserved 1)
    """  # noqa: E501
    if np.any(used > usable):
        i = int(np.argmax(used - usable))
        shown = f"{int(used[i])} {unit}" if unit else int(used[i])
        raise InputError(
            f"{field_name} (server {i})",
            shown,
            f"at most the {int(usable[i])} usable {ports} "
            f"({degree_name} {degree} - reserved {degree - int(usable[i])})",
        )


def _integers(value, field_name: str, what: str) -> np.ndarray:
    """``value`` as an int64 array, refusing booleans, non-numbers and non-integers."""
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        raise InputError(field_name, value, what) from None
    if a.dtype == bool or a.dtype.kind not in "iuf":
        raise InputError(field_name, value, what)
    if a.dtype.kind == "f" and (not np.all(np.isfinite(a)) or np.any(a != np.round(a))):
        bad = a[~np.isfinite(a) | (a != np.round(a))].ravel()[0]
        raise InputError(field_name, float(bad), what)
    return a.astype(np.int64)


def _check_reserved(value, n: int, degree: int) -> np.ndarray:
    """``reserved`` as ``int64 (n,)`` in ``0..degree``."""
    allowed = f"integers 0..{degree} (one for all servers or {n} values)"
    if isinstance(value, bool):
        raise InputError("reserved", value, allowed)
    a = _integers(value, "reserved", allowed)
    if a.ndim == 0:
        a = np.full(n, int(a), np.int64)
    if a.shape != (n,):
        raise InputError("reserved", f"shape {a.shape}", allowed)
    if a.min() < 0 or a.max() > degree:
        i = int(np.argmax((a < 0) | (a > degree)))
        raise InputError(f"reserved (server {i})", int(a[i]), allowed)
    return a


def _canonical_prewired(value, n: int) -> Circuits:
    """Pre-wired rows as :class:`Circuits` (``u < v``, merged, sorted, no zero count)."""
    if isinstance(value, Circuits):
        return Circuits(value, n, field="prewired")
    allowed = "rows [u, v, count] of integers"
    a = _integers(value, "prewired", allowed)
    if a.size == 0:
        return Circuits((), n)
    if a.ndim != 2 or a.shape[1] != 3:
        raise InputError("prewired", f"shape {a.shape}", allowed + " (shape (k, 3))")
    return Circuits(a, n, field="prewired")


_INT_CELL = re.compile(r"-?[0-9]{1,19}")
PREWIRED_ROWS = TypeAdapter(
    list[Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=3, max_length=3)]]
)
"""Schema of a JSON pre-wired list: ``[[u, v, count], ...]``, integers (strict: no ``true``,
``1.0`` or ``"1"``); ranges are checked by :func:`read_prewired`."""


_PREWIRED_ONE_ROW = "at least one row u,v,count (leave --prewired out when nothing is pre-wired)"


def read_prewired(text: str, name: str = "prewired") -> np.ndarray:
    r"""Pre-wired circuits from CSV text (header ``u,v,count``) or a JSON list of ``[u, v, count]``.

    The format is guessed from the first non-blank character (``[``: JSON, read by the strict
    decoder of :mod:`traffic.decode`). Each row is three integers (no strings, no floats):
    server ids ``u != v`` and a count ``>= 0``, all below ``2**31``. Rows are returned as given
    (``int64 (k, 3)``); :class:`DesignProblem` checks them against the cluster.

    Raises
    ------
    InputError
        Naming the file (``name``), the line or item, and what is wrong.

    Examples
    --------
    >>> read_prewired("u,v,count\n0,1,1\n2,3,2\n").tolist()
    [[0, 1, 1], [2, 3, 2]]
    >>> read_prewired("[[0, 1, 1]]").tolist()
    [[0, 1, 1]]
    >>> read_prewired("u,v,count\n0,1,x\n")
    Traceback (most recent call last):
    ...
    traffic.errors.InputError: prewired line 2 count: got 'x'; allowed: an integer 0..2147483647
    """
    from topoopt.fabrics.circuits_schema import MAX_ID, rows_array
    from traffic.decode import parse_json

    cols = ("u", "v", "count")
    if text.lstrip().startswith("["):
        doc = parse_json(text, name)
        try:
            rows = PREWIRED_ROWS.validate_python(doc, strict=True)
        except ValidationError as exc:
            err = exc.errors(include_url=False, include_context=False)[0]
            loc = tuple(err["loc"])
            field = name if not loc else f"{name} item {loc[0]}"
            if len(loc) > 1 and isinstance(loc[1], int) and 0 <= loc[1] < 3:
                field += f" {cols[loc[1]]}"
            allowed = "a list [u, v, count]" if len(loc) == 1 else f"an integer 0..{MAX_ID}"
            raise InputError(field, err.get("input"), allowed if loc else "a JSON list") from None
        if not rows:
            raise InputError(name, "[]", _PREWIRED_ONE_ROW)
        return rows_array(
            rows, name, min_count=0, where=lambda i: f"{name} item {i}", distinct=False
        )
    lines = text.splitlines()
    # the first non-blank line is the header (one pass: popping blank lines one by one is
    # quadratic in a file of a million newlines)
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    first = lines[start] if start < len(lines) else ""
    header = [h.strip().lower() for h in first.split(",")] if first else []
    if header != list(cols):
        raise InputError(f"{name} line {start + 1}", first, "the header u,v,count")
    rows: list[list[int]] = []
    for lineno, line in enumerate(lines[start + 1 :], start=start + 2):
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 3:
            raise InputError(f"{name} line {lineno}", line, "three fields u,v,count")
        row = []
        for c, col in zip(cells, cols, strict=True):
            if not _INT_CELL.fullmatch(c) or not 0 <= int(c) <= MAX_ID:
                raise InputError(f"{name} line {lineno} {col}", c, f"an integer 0..{MAX_ID}")
            row.append(int(c))
        rows.append(row)
    if not rows:
        raise InputError(name, "the header u,v,count and no row", _PREWIRED_ONE_ROW)
    return rows_array(
        rows, name, min_count=0, where=lambda i: f"{name} row {i + 1}", distinct=False
    )


def read_prewired_file(path: str | os.PathLike) -> np.ndarray:
    """:func:`read_prewired` of a file (read with a size cap, strict UTF-8); errors name it."""
    from traffic.decode import decode_text, read_input

    name = str(path)
    return read_prewired(decode_text(read_input(path, "pre-wired list"), name), name)
