"""The input of the flow-level model: links, flows, weighted paths and dependencies, as arrays.

A :class:`FlowSet` holds everything :func:`topoopt.flowsim.simulate` needs, in compressed-sparse-row
(CSR) form like :class:`topoopt.paths.PathSet`:

- links ``l = 0 .. L-1`` have ``capacity[l]`` (bytes/s) and ``latency[l]`` (s);
- flows ``f = 0 .. F-1`` have ``size[f]`` (bytes) and an earliest ``start[f]`` (s);
- the sub-flows (paths) of flow ``f`` are ``flow_ptr[f] : flow_ptr[f+1]``; path ``p`` crosses the
  directed links ``path_links[path_ptr[p] : path_ptr[p+1]]`` and carries ``weight[p] * size[f]``
  bytes (the weights of a flow sum to 1);
- flow ``f`` may start only after the flows ``deps[dep_ptr[f] : dep_ptr[f+1]]`` have finished;
- flow ``f`` stands for ``multiplicity[f]`` identical flows (default 1): a *class* of flows with
  the same paths, weights, size, start and dependencies, simulated as one (exact, see
  :mod:`topoopt.flowsim.simulator`). :meth:`FlowSet.aggregate` finds such classes and
  :meth:`FlowSet.expand` turns each class back into its members.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from topoopt.csr import gather_rows
from topoopt.flowsim.aot import blocked_kernel, csr_by_key, first_repeated_link
from topoopt.paths import PathSet
from traffic.errors import InputError

if TYPE_CHECKING:  # scipy.sparse is imported where a matrix is built (a light start-up)
    import scipy.sparse as sp

__all__ = [
    "FlowSet",
    "WEIGHT_TOLERANCE",
    "class_dependencies",
    "class_representatives",
    "identical_classes",
    "merged_classes",
]

WEIGHT_TOLERANCE = 1e-9
"""How far the path weights of one flow may sum away from 1."""


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@dataclass(frozen=True, eq=False)
class FlowSet:
    """Links, flows, their weighted paths and their dependencies (all SI units).

    Attributes
    ----------
    capacity : numpy.ndarray
        ``float64 (L,)``: capacity of each directed link, bytes/s (positive, finite).
    latency : numpy.ndarray
        ``float64 (L,)``: latency of each link, seconds (non-negative).
    size : numpy.ndarray
        ``float64 (F,)``: bytes of each flow (non-negative).
    start : numpy.ndarray
        ``float64 (F,)``: earliest start of each flow, seconds (non-negative).
    flow_ptr : numpy.ndarray
        ``int64 (F+1,)``: paths of flow ``f`` are ``flow_ptr[f]:flow_ptr[f+1]`` (at least one).
    path_ptr : numpy.ndarray
        ``int64 (P+1,)``: links of path ``p`` are ``path_links[path_ptr[p]:path_ptr[p+1]]``.
    path_links : numpy.ndarray
        ``int64``: link ids in path order (a path is non-empty and crosses a link at most once).
    weight : numpy.ndarray
        ``float64 (P,)``: fraction of its flow each path carries (positive; per flow sum 1).
    dep_ptr, deps : numpy.ndarray, optional
        ``int64``: flow ``f`` waits for flows ``deps[dep_ptr[f]:dep_ptr[f+1]]``; acyclic.
        Default: no dependencies.
    multiplicity : numpy.ndarray, optional
        ``int64 (F,)``: flow ``f`` stands for ``multiplicity[f] >= 1`` identical flows (default:
        all ones). ``size`` is the bytes of one member.

    Raises
    ------
    InputError
        On any inconsistent shape, value or a dependency cycle.

    Examples
    --------
    Two flows over one 100 B/s link, the second one after the first:

    >>> fs = FlowSet.single_path([100.0], [0.0], size=[50.0, 50.0], start=[0.0, 0.0],
    ...                          paths=[[0], [0]], after=[[], [0]])
    >>> fs.n_flows, fs.n_paths, fs.n_links
    (2, 2, 1)
    >>> fs.path_bytes().tolist()
    [50.0, 50.0]
    """

    capacity: np.ndarray
    latency: np.ndarray
    size: np.ndarray
    start: np.ndarray
    flow_ptr: np.ndarray
    path_ptr: np.ndarray
    path_links: np.ndarray
    weight: np.ndarray
    dep_ptr: np.ndarray | None = None
    deps: np.ndarray | None = None
    multiplicity: np.ndarray | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        for name in ("capacity", "latency", "size", "start", "weight"):
            set_(self, name, np.ascontiguousarray(getattr(self, name), np.float64).reshape(-1))
        for name in ("flow_ptr", "path_ptr", "path_links"):
            set_(self, name, np.ascontiguousarray(getattr(self, name), np.int64).reshape(-1))
        n_f = self.size.shape[0]
        if self.dep_ptr is None:
            set_(self, "dep_ptr", np.zeros(n_f + 1, np.int64))
            set_(self, "deps", np.zeros(0, np.int64))
        set_(self, "dep_ptr", np.ascontiguousarray(self.dep_ptr, np.int64).reshape(-1))
        set_(self, "deps", np.ascontiguousarray(self.deps, np.int64).reshape(-1))
        set_(self, "multiplicity", _check_multiplicity(self.multiplicity, n_f))
        self._validate()

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        n_l, n_f, n_p = self.n_links, self.n_flows, self.n_paths
        if self.latency.shape != (n_l,):
            raise InputError("links.latency", self.latency.shape, f"shape ({n_l},)")
        bad = ~(np.isfinite(self.capacity) & (self.capacity > 0))
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"links[{i}].capacity", self.capacity[i], "a positive finite bytes/s")
        bad = ~(np.isfinite(self.latency) & (self.latency >= 0))
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"links[{i}].latency", self.latency[i], "a finite number >= 0 s")
        if self.start.shape != (n_f,):
            raise InputError("flows.start", self.start.shape, f"shape ({n_f},)")
        bad = ~(np.isfinite(self.size) & (self.size >= 0))
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"flows[{i}].bytes", self.size[i], "a finite number >= 0")
        bad = ~(np.isfinite(self.start) & (self.start >= 0))
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"flows[{i}].start", self.start[i], "a finite number >= 0 s")
        fp = self.flow_ptr
        if fp.shape != (n_f + 1,) or fp[0] != 0 or fp[-1] != n_p:
            raise InputError("flows.flow_ptr", fp.shape, f"shape ({n_f + 1},) from 0 to {n_p}")
        bad = np.diff(fp) < 1
        if bad.any():
            i = _first_bad(bad)
            raise InputError(f"flows[{i}].paths", [], "at least one path")
        pp = self.path_ptr
        if pp.shape != (n_p + 1,) or pp[0] != 0 or pp[-1] != self.path_links.shape[0]:
            raise InputError("flows.path_ptr", pp.shape, f"shape ({n_p + 1},) ending at nnz")
        bad = np.diff(pp) < 1
        if bad.any():
            p = _first_bad(bad)
            raise InputError(f"{self._path_name(p)}.links", [], "a non-empty list of link ids")
        pl = self.path_links
        bad = (pl < 0) | (pl >= n_l)
        if bad.any():
            e = _first_bad(bad)
            p = int(np.searchsorted(pp, e, side="right") - 1)
            raise InputError(f"{self._path_name(p)}.links", int(pl[e]), f"link ids 0..{n_l - 1}")
        p, dup = first_repeated_link(pp, pl)
        if p >= 0:
            raise InputError(
                f"{self._path_name(int(p))}.links", int(dup), "each link at most once per path"
            )
        bad = ~(np.isfinite(self.weight) & (self.weight > 0))
        if bad.any():
            p = _first_bad(bad)
            raise InputError(f"{self._path_name(p)}.weight", self.weight[p], "a number > 0")
        sums = np.add.reduceat(self.weight, fp[:-1]) if n_f else np.zeros(0)
        bad = np.abs(sums - 1.0) > WEIGHT_TOLERANCE
        if bad.any():
            i = _first_bad(bad)
            raise InputError(
                f"flows[{i}].paths.weight",
                float(sums[i]),
                f"weights summing to 1 (within {WEIGHT_TOLERANCE:g})",
            )
        self._validate_deps()

    def _validate_deps(self) -> None:
        n_f = self.n_flows
        dp, d = self.dep_ptr, self.deps
        if dp.shape != (n_f + 1,) or dp[0] != 0 or dp[-1] != d.shape[0]:
            raise InputError("flows.dep_ptr", dp.shape, f"shape ({n_f + 1},) ending at n_deps")
        owner = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(dp))
        bad = (d < 0) | (d >= n_f)
        if bad.any():
            e = _first_bad(bad)
            raise InputError(f"flows[{owner[e]}].after", int(d[e]), f"flow indices 0..{n_f - 1}")
        bad = d == owner
        if bad.any():
            e = _first_bad(bad)
            raise InputError(f"flows[{owner[e]}].after", int(d[e]), "other flows than itself")
        cyc = self.dependency_cycle()
        if cyc:
            raise InputError(
                f"flows[{cyc[0]}].after", cyc + [cyc[0]], "an acyclic dependency graph"
            )

    def _path_name(self, p: int) -> str:
        f = int(np.searchsorted(self.flow_ptr, p, side="right") - 1)
        return f"flows[{f}].paths[{p - int(self.flow_ptr[f])}]"

    # ------------------------------------------------------------------ sizes
    @property
    def n_links(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def n_flows(self) -> int:
        return int(self.size.shape[0])

    @property
    def n_paths(self) -> int:
        return int(self.weight.shape[0])

    # ------------------------------------------------------------------ derived arrays
    def path_flow(self) -> np.ndarray:
        """Flow index of every path (sub-flow)."""
        return np.repeat(np.arange(self.n_flows, dtype=np.int64), np.diff(self.flow_ptr))

    def path_bytes(self) -> np.ndarray:
        """Bytes each sub-flow carries: ``weight[p] * size[flow of p]`` (one member's)."""
        return self.weight * self.size[self.path_flow()]

    def path_multiplicity(self) -> np.ndarray:
        """``int64 (P,)``: multiplicity of the flow of every sub-flow."""
        return self.multiplicity[self.path_flow()]

    @property
    def n_members(self) -> int:
        """Number of flows counted with multiplicity (the flows of :meth:`expand`)."""
        return int(self.multiplicity.sum())

    def path_latency(self) -> np.ndarray:
        """Sum of the link latencies along each path, seconds."""
        if self.n_paths == 0:
            return np.zeros(0)
        return np.add.reduceat(self.latency[self.path_links], self.path_ptr[:-1])

    def incidence(self) -> sp.csr_matrix:
        """Sparse ``(P, L)`` sub-flow x link incidence matrix (1 where path ``p`` crosses ``l``)."""
        import scipy.sparse as sp

        data = np.ones(self.path_links.shape[0])
        return sp.csr_matrix(
            (data, self.path_links, self.path_ptr), shape=(self.n_paths, self.n_links)
        )

    def dependents(self) -> tuple[np.ndarray, np.ndarray]:
        """Reverse dependency CSR ``(ptr, flows)``: flows waiting on ``f`` are
        ``flows[ptr[f]:ptr[f+1]]``."""
        owner = np.repeat(np.arange(self.n_flows, dtype=np.int64), np.diff(self.dep_ptr))
        ptr, order = csr_by_key(self.deps, self.n_flows)  # a stable counting sort
        return ptr, owner[order]

    def dependency_cycle(self) -> list[int]:
        """A dependency cycle as a list of flow indices, or ``[]`` if the graph is acyclic.

        Kahn's algorithm (compiled: :func:`topoopt.flowsim._kernels.blocked_kernel`).
        """
        n_f = self.n_flows
        if self.deps.shape[0] == 0:
            return []
        rptr, rflows = self.dependents()
        indeg = blocked_kernel(self.dep_ptr, rptr, rflows)
        left = np.flatnonzero(indeg > 0)
        if left.size == 0:
            return []
        # Walk predecessors inside the blocked set until a flow repeats: that is a cycle.
        blocked = np.zeros(n_f, bool)
        blocked[left] = True
        seen: dict[int, int] = {}
        walk: list[int] = []
        f = int(left[0])
        while f not in seen:
            seen[f] = len(walk)
            walk.append(f)
            preds = self.deps[self.dep_ptr[f] : self.dep_ptr[f + 1]]
            f = int(preds[blocked[preds]][0])
        return walk[seen[f] :][::-1]

    # ------------------------------------------------------------------ classes
    def expand(self) -> tuple[FlowSet, np.ndarray]:
        """Every class of ``multiplicity[f]`` flows as that many separate flows.

        Returns ``(flows, class_of)``: the members of class ``f`` are the flows ``i`` with
        ``class_of[i] == f`` (consecutive, in class order); a member waits for every member of
        each class its class waits for.

        Examples
        --------
        >>> fs = FlowSet.single_path([10.0], [0.0], size=[5.0, 5.0], start=[0.0, 0.0],
        ...                          paths=[[0], [0]], after=[[], [0]])
        >>> fs = fs.with_multiplicity([2, 1])
        >>> big, class_of = fs.expand()
        >>> class_of.tolist(), big.deps.tolist()
        ([0, 0, 1], [0, 1])
        """
        m = self.multiplicity
        class_of = np.repeat(np.arange(self.n_flows, dtype=np.int64), m)
        first = np.zeros(self.n_flows + 1, np.int64)
        np.cumsum(m, out=first[1:])
        paths = _gather_rows(self.flow_ptr, class_of)
        n_paths = np.diff(self.flow_ptr)[class_of]
        flow_ptr = np.zeros(class_of.shape[0] + 1, np.int64)
        np.cumsum(n_paths, out=flow_ptr[1:])
        plen = np.diff(self.path_ptr)[paths]
        path_ptr = np.zeros(paths.shape[0] + 1, np.int64)
        np.cumsum(plen, out=path_ptr[1:])
        # dependencies: every member of each class its class waits for
        owner = np.repeat(np.arange(self.n_flows, dtype=np.int64), np.diff(self.dep_ptr))
        cls_n = np.bincount(owner, weights=m[self.deps], minlength=self.n_flows).astype(np.int64)
        cls_ptr = np.zeros(self.n_flows + 1, np.int64)
        np.cumsum(cls_n, out=cls_ptr[1:])
        cls_deps = _gather_rows(first, self.deps)
        dep_ptr = np.zeros(class_of.shape[0] + 1, np.int64)
        np.cumsum(cls_n[class_of], out=dep_ptr[1:])
        deps = cls_deps[_gather_rows(cls_ptr, class_of)]
        return (
            FlowSet(
                capacity=self.capacity,
                latency=self.latency,
                size=self.size[class_of],
                start=self.start[class_of],
                flow_ptr=flow_ptr,
                path_ptr=path_ptr,
                path_links=self.path_links[_gather_rows(self.path_ptr, paths)],
                weight=self.weight[paths],
                dep_ptr=dep_ptr,
                deps=deps,
            ),
            class_of,
        )

    def with_multiplicity(self, multiplicity) -> FlowSet:
        """The same flows with another multiplicity per flow."""
        return FlowSet(
            capacity=self.capacity,
            latency=self.latency,
            size=self.size,
            start=self.start,
            flow_ptr=self.flow_ptr,
            path_ptr=self.path_ptr,
            path_links=self.path_links,
            weight=self.weight,
            dep_ptr=self.dep_ptr,
            deps=self.deps,
            multiplicity=multiplicity,
        )

    def merge(self, class_of: np.ndarray) -> FlowSet:
        """One flow per class of ``class_of`` (``int64 (F,)``, classes ``0..C-1``, each used),
        with the summed multiplicity of its members.

        The first member of each class represents it (paths, weights, size, start); its
        dependencies become their classes (deduplicated). Exact only when the members of each
        class are identical flows with the same dependency classes, as :func:`identical_classes`
        guarantees; this is not checked here.
        """
        class_of = np.asarray(class_of, np.int64).reshape(-1)
        if class_of.shape != (self.n_flows,):
            raise InputError("class_of", class_of.shape, f"shape ({self.n_flows},)")
        n_c = int(class_of.max()) + 1 if class_of.size else 0
        if class_of.size and (class_of.min() < 0 or np.bincount(class_of).min() == 0):
            raise InputError("class_of", "gaps or negatives", f"every class 0..{n_c - 1} used")
        rep = class_representatives(class_of, n_c)
        mult = np.bincount(class_of, weights=self.multiplicity, minlength=n_c).astype(np.int64)
        paths = _gather_rows(self.flow_ptr, rep)
        flow_ptr = np.zeros(n_c + 1, np.int64)
        np.cumsum(np.diff(self.flow_ptr)[rep], out=flow_ptr[1:])
        path_ptr = np.zeros(paths.shape[0] + 1, np.int64)
        np.cumsum(np.diff(self.path_ptr)[paths], out=path_ptr[1:])
        dep_ptr, deps = class_dependencies(class_of, rep, self.dep_ptr, self.deps)
        return FlowSet(
            capacity=self.capacity,
            latency=self.latency,
            size=self.size[rep],
            start=self.start[rep],
            flow_ptr=flow_ptr,
            path_ptr=path_ptr,
            path_links=self.path_links[_gather_rows(self.path_ptr, paths)],
            weight=self.weight[paths],
            dep_ptr=dep_ptr,
            deps=deps,
            multiplicity=mult,
        )

    def route_keys(self) -> np.ndarray:
        """``int64 (F,)``: equal for two flows exactly when their weighted paths are equal
        (same paths, same links in the same order, same weights, in the same order)."""
        n_p = self.n_paths
        if self.n_flows == 0:
            return np.zeros(0, np.int64)
        plen = np.diff(self.path_ptr)
        width = int(plen.max())
        rows = np.full((n_p, width + 1), -1, np.int64)
        rows[:, 0] = self.weight.view(np.int64)
        col = np.arange(self.path_links.shape[0]) - np.repeat(self.path_ptr[:-1], plen)
        rows[np.repeat(np.arange(n_p), plen), col + 1] = self.path_links
        _, path_id = np.unique(rows, axis=0, return_inverse=True)
        npf = np.diff(self.flow_ptr)
        fw = int(npf.max())
        frow = np.full((self.n_flows, fw), -1, np.int64)
        fcol = np.arange(n_p) - np.repeat(self.flow_ptr[:-1], npf)
        frow[np.repeat(np.arange(self.n_flows), npf), fcol] = path_id.reshape(-1)
        _, key = np.unique(frow, axis=0, return_inverse=True)
        return key.reshape(-1).astype(np.int64)

    def aggregate(self) -> tuple[FlowSet, np.ndarray]:
        """Merge identical flows into classes with multiplicity (exact; see
        :func:`identical_classes`). Returns ``(flows, class_of)``: flow ``i`` of this set is
        simulated as flow ``class_of[i]`` of the result.

        Examples
        --------
        Three equal flows on one link, the third one after the first two:

        >>> fs = FlowSet.single_path([10.0], [0.0], size=[5.0] * 3, start=[0.0] * 3,
        ...                          paths=[[0], [0], [0]], after=[[], [], [0, 1]])
        >>> small, class_of = fs.aggregate()
        >>> class_of.tolist(), small.multiplicity.tolist(), small.deps.tolist()
        ([0, 0, 1], [2, 1], [0])
        """
        class_of = identical_classes(
            self.route_keys(), self.size, self.start, self.dep_ptr, self.deps
        )
        return self.merge(class_of), class_of

    # ------------------------------------------------------------------ constructors
    @classmethod
    def single_path(
        cls,
        capacity,
        latency,
        *,
        size,
        start,
        paths: list[list[int]],
        after: list[list[int]] | None = None,
    ) -> FlowSet:
        """Build a FlowSet where every flow has exactly one path (given as a list of link ids).

        Examples
        --------
        >>> FlowSet.single_path([1.0, 1.0], [0.0, 0.0], size=[1.0], start=[0.0],
        ...                     paths=[[0, 1]]).path_links.tolist()
        [0, 1]
        """
        n_f = len(paths)
        lens = np.array([len(p) for p in paths], np.int64)
        path_ptr = np.zeros(n_f + 1, np.int64)
        np.cumsum(lens, out=path_ptr[1:])
        links = np.concatenate([np.asarray(p, np.int64) for p in paths]) if n_f else []
        dep_ptr = deps = None
        if after is not None:
            dl = np.array([len(a) for a in after], np.int64)
            dep_ptr = np.zeros(len(after) + 1, np.int64)
            np.cumsum(dl, out=dep_ptr[1:])
            deps = np.concatenate([np.asarray(a, np.int64) for a in after]) if after else []
        return cls(
            capacity=capacity,
            latency=latency,
            size=size,
            start=start,
            flow_ptr=np.arange(n_f + 1),
            path_ptr=path_ptr,
            path_links=links,
            weight=np.ones(n_f),
            dep_ptr=dep_ptr,
            deps=deps,
        )

    @classmethod
    def from_pathset(
        cls,
        paths: PathSet,
        commodity: np.ndarray,
        size: np.ndarray,
        start: np.ndarray,
        capacity: np.ndarray,
        latency: np.ndarray,
    ) -> FlowSet:
        """Flows routed by a :class:`~topoopt.paths.PathSet`: flow ``f`` uses all weighted paths of
        commodity ``commodity[f]`` (vectorised gather of the CSR rows).

        Examples
        --------
        >>> ps = PathSet(src=[0], dst=[1], commodity_ptr=[0, 2], path_ptr=[0, 1, 3],
        ...              path_links=[0, 1, 2], weight=[0.5, 0.5])
        >>> fs = FlowSet.from_pathset(ps, [0, 0], [8.0, 4.0], [0.0, 1.0], [1.0] * 3, [0.0] * 3)
        >>> fs.path_bytes().tolist()
        [4.0, 4.0, 2.0, 2.0]
        """
        commodity = np.asarray(commodity, np.int64)
        bad = (commodity < 0) | (commodity >= paths.n_commodities)
        if bad.any():
            i = _first_bad(bad)
            raise InputError(
                f"flows[{i}].commodity", int(commodity[i]), f"0..{paths.n_commodities - 1}"
            )
        cp = paths.commodity_ptr
        n_per = cp[commodity + 1] - cp[commodity]
        sel = _gather_rows(cp, commodity)
        plen = paths.path_ptr[sel + 1] - paths.path_ptr[sel]
        links = paths.path_links[_gather_rows(paths.path_ptr, sel)]
        flow_ptr = np.zeros(commodity.shape[0] + 1, np.int64)
        np.cumsum(n_per, out=flow_ptr[1:])
        path_ptr = np.zeros(sel.shape[0] + 1, np.int64)
        np.cumsum(plen, out=path_ptr[1:])
        return cls(
            capacity=capacity,
            latency=latency,
            size=size,
            start=start,
            flow_ptr=flow_ptr,
            path_ptr=path_ptr,
            path_links=links,
            weight=paths.weight[sel],
        )


def _check_multiplicity(mult, n_f: int) -> np.ndarray:
    if mult is None:
        return np.ones(n_f, np.int64)
    raw = np.asarray(mult)
    if raw.shape != (n_f,):
        raise InputError("flows.multiplicity", raw.shape, f"shape ({n_f},)")
    if raw.dtype.kind not in "iuf" or raw.dtype == np.bool_:
        raise InputError("flows.multiplicity", str(raw.dtype), "integers >= 1")
    bad = (
        ~np.isfinite(raw) | (raw < 1) | (raw != np.floor(raw)) if raw.dtype.kind == "f" else raw < 1
    )
    if bad.any():
        i = _first_bad(bad)
        raise InputError(f"flows[{i}].multiplicity", raw[i].item(), "an integer >= 1")
    return np.ascontiguousarray(raw, np.int64)


def identical_classes(
    route: np.ndarray,
    size: np.ndarray,
    start: np.ndarray,
    dep_ptr: np.ndarray,
    deps: np.ndarray,
) -> np.ndarray:
    """Classes of identical flows: same route key, size, start, and the same *classes* of
    dependencies. Returns ``class_of`` (``int64 (F,)``, classes numbered by first member).

    Computed in one pass over a topological order of the (acyclic) dependency graph, so the
    classes of a flow's dependencies are known when it is visited
    (:func:`topoopt.flowsim._kernels.classes_kernel`).

    Why merging is exact: by induction over the topological order, members of one class are
    released at the same time (``max(start, finish of the dependency classes)``, and every member
    of a class finishes at the same time), cross the same weighted paths with the same bytes, so
    in the max-min allocation (unique, hence symmetric under swapping two of them) they get the
    same rate at every instant and finish together. A flow waiting on only some members of a
    class therefore waits exactly as long as one waiting on the whole class, so dependents need
    not agree on which members they wait for: their dependency lists name classes.

    Flows that already have a multiplicity merge like any other (their multiplicities add up).

    Examples
    --------
    >>> identical_classes([0, 0, 1, 0], [5.0] * 4, [0.0] * 4, [0, 0, 0, 0, 1], [0]).tolist()
    [0, 0, 1, 2]
    """
    from topoopt.flowsim._kernels import classes_kernel  # numba (see topoopt.flowsim.aot)
    from topoopt.flowsim._symmetry_kernels import dense_ids

    route = np.asarray(route, np.int64).reshape(-1)
    n_f = route.shape[0]
    size = np.asarray(size, np.float64).reshape(-1)
    start = np.asarray(start, np.float64).reshape(-1)
    dep_ptr = np.asarray(dep_ptr, np.int64).reshape(-1)
    deps = np.asarray(deps, np.int64).reshape(-1)
    base = np.column_stack([route, size.view(np.int64), start.view(np.int64)])
    if deps.size and (deps.min() < 0 or deps.max() >= n_f):
        bad = int(deps.min()) if deps.min() < 0 else int(deps.max())
        raise InputError("after", bad, f"flow indices 0..{n_f - 1}")
    owner = np.repeat(np.arange(n_f, dtype=np.int64), np.diff(dep_ptr))
    rptr, order = csr_by_key(deps, n_f)  # a stable counting sort
    rflows = owner[order]
    class_of, visited = classes_kernel(base, dep_ptr, deps, rptr, rflows)
    if visited < n_f:
        i = _first_bad(class_of < 0)
        raise InputError(f"flows[{i}].after", "a dependency cycle", "an acyclic dependency graph")
    # renumber classes by first member
    return dense_ids(np.ascontiguousarray(class_of, np.int64).view(np.uint64))


def class_representatives(class_of: np.ndarray, n_classes: int) -> np.ndarray:
    """``int64 (C,)``: the first flow of each class."""
    class_of = np.asarray(class_of, np.int64)
    rep = np.full(n_classes, -1, np.int64)
    rep[class_of[::-1]] = np.arange(class_of.shape[0] - 1, -1, -1, dtype=np.int64)
    return rep


def class_dependencies(
    class_of: np.ndarray, rep: np.ndarray, dep_ptr: np.ndarray, deps: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Dependency CSR between classes: class ``c`` waits for the classes of the dependencies of
    its representative ``rep[c]`` (sorted, each once)."""
    from topoopt.flowsim._symmetry_kernels import class_dep_rows  # numba (see topoopt.flowsim.aot)

    return class_dep_rows(
        np.ascontiguousarray(class_of, np.int64),
        np.ascontiguousarray(rep, np.int64),
        np.ascontiguousarray(dep_ptr, np.int64),
        np.ascontiguousarray(deps, np.int64),
    )


def merged_classes(route, size, start: float, dep_ptr, deps):
    """The classes of identical flows (:func:`identical_classes`, every flow starting at
    ``start``) with what a merged flow set needs: ``(class_of, n_classes, rep, class_dep_ptr,
    class_deps)``, ``rep`` the first flow of each class and the dependencies between classes
    (:func:`class_representatives`, :func:`class_dependencies`).

    >>> c, n, rep, dp, d = merged_classes([0, 0, 1], [5.0] * 3, 0.0, [0, 0, 0, 1], [0])
    >>> c.tolist(), n, rep.tolist(), dp.tolist(), d.tolist()
    ([0, 0, 1], 2, [0, 2], [0, 0, 1], [0])
    """
    n_f = np.asarray(route).reshape(-1).shape[0]
    class_of = identical_classes(route, size, np.full(n_f, float(start)), dep_ptr, deps)
    n_c = int(class_of.max()) + 1 if n_f else 0
    rep = class_representatives(class_of, n_c)
    dep_ptr_c, deps_c = class_dependencies(class_of, rep, dep_ptr, deps)
    return class_of, n_c, rep, dep_ptr_c, deps_c


_gather_rows = gather_rows
