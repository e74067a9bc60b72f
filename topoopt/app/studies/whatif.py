"""What ``topoopt whatif`` computes: a design's iteration time before and after a failure.

A failure removes circuits of a direct-connect design (:class:`~solvers.model.design.Design`). Three
iteration times are measured by the flow model
(:func:`topoopt.flowsim.iteration.simulate_iteration`, through the exact symmetry reduction,
which a failure coarsens or turns off by itself), each on the ring-ordered workload of
:func:`solvers.realise.design_workload`, exactly as ``topoopt simulate --design`` does:

- ``before_s``: the design as it is;
- ``after_s``: the surviving circuits, traffic *rerouted*: every design path that uses no lost
  circuit keeps its traffic (the surviving paths of a server pair share it in proportion to
  their weights); a pair that lost every path goes over all shortest paths of the surviving
  circuits (ECMP, hosts forwarding), as the flow model routes the pairs a design does not cover.
  The rings stay as designed. ``before_rerouted_s`` is the intact design on the same paths
  (the routing's share of the change). When the surviving circuits disconnect two servers
  that exchange bytes the job cannot run: ``after_s`` is ``None`` and ``disconnected`` is
  true;
- ``reoptimized_s``: a new design of the same problem where the surviving circuits are
  pre-wired (they must stay) and the failed ports are reserved (unusable), by the design's own
  solver (``joint`` under a small deterministic work limit when the design's solver is not a
  registered one). The re-optimiser never ships something slower than the rerouted design: if
  the new design is slower, or the solver refuses the problem (``solver_refused`` says why,
  e.g. ``topoopt`` needs 3 servers), it is dropped (``fallback`` true, ``rewired_circuits`` 0,
  ``reoptimized_s == after_s``).
- ``intact_on_reoptimized_s``: when the re-optimised design rewires nothing and still beats
  ``before_s`` (issue 29 item 6: on DLRM at 4 ports one failed circuit re-routed by ``joint``
  was 4.7 % faster than the intact ``joint`` design), the intact circuits on its routes and
  rings, simulated: 15.151 ms there against the design's 15.893 ms, so the gain is routing the
  intact design left on the table (the re-optimiser at a small work limit falls back to the
  congestion objective, item 3), not the failure. The sweep reports ``best_intact_s`` and the
  re-optimised slowdowns against it.

Ports and devices
-----------------
Port ``i`` of every server is patched into device ``i`` (:mod:`topoopt.fabrics.direct_connect`),
so a circuit joins port ``p`` of ``u`` and port ``p`` of ``v`` through device ``p``: the circuits
on one device form a matching. ``design.json`` records no ports, so :func:`port_assignment`
assigns them deterministically by edge colouring the circuit multigraph with ``degree``
colours (greedy, repaired by swapping two-coloured alternating paths as in König's proof, over
the canonical circuit order and then seeded permutations until one needs no crossing). A circuit
the colouring cannot place on one device (a graph that needs more than ``degree`` colours, e.g.
an odd cycle on two ports, or any ``d``-regular design on an odd number of servers, where a
device holds at most ``(n-1)/2`` circuits) takes the lowest free port at each end (two devices:
it is lost when either fails); :func:`port_assignment` reports these as ``crossed``.

Failure kinds
-------------
- ``links K``: ``K`` circuits (single circuits, counting parallel ones separately) drawn
  uniformly without replacement with ``numpy.random.default_rng(seed)``. The ports at both ends
  of a failed circuit are unusable afterwards (a failed transceiver or fibre).
- ``ports``: a file listing ``(server, ports)`` (that many of the server's ports fail, the
  highest port indices first: ports ``degree-1, degree-2, ...``) or circuits ``(u, v, count)``
  that fail (:func:`read_failure_file`).
- ``ocs U``: device ``U`` (``0 <= U < degree``) fails: port ``U`` of every server and every
  circuit through it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from topoopt.fabrics.circuits import Circuits
from traffic.errors import InputError

__all__ = [
    "Failure",
    "port_assignment",
    "links_failure",
    "MAX_SWEEP_SAMPLES",
    "ports_failure",
    "ocs_failure",
    "read_failure_file",
    "load_case",
    "make_case",
    "whatif",
    "whatif_sweep",
    "design_capex",
    "DEFAULT_REOPT_WORK_LIMIT",
]

DEFAULT_REOPT_WORK_LIMIT = 2.0
"""Deterministic work budget (joint work units) of a ``joint`` re-optimisation."""


# --------------------------------------------------------------------------- ports
ORDER_ATTEMPTS = 8
"""Circuit orders :func:`port_assignment` tries (canonical, then seeds 1..7); the fewest
crossed circuits win, the first order without any stops the search."""


def _swap_path(u, v, pu, pv, at, start: int, avoid: int, pa: int, pb: int, m: int) -> bool:
    """Swap colours ``pa``/``pb`` along the alternating path leaving ``start`` by its ``pa``
    circuit; refuse (False, nothing changed) if it reaches ``avoid`` or a crossed circuit."""
    path: list[int] = []
    x, col = start, pa
    while at[x, col] >= 0 and len(path) <= m:
        f = int(at[x, col])
        if pu[f] != pv[f]:
            return False
        path.append(f)
        x = int(v[f]) if int(u[f]) == x else int(u[f])
        col = pb if col == pa else pa
        if x == avoid:
            return False
    olds = [int(pu[f]) for f in path]
    for f, c_old in zip(path, olds, strict=True):
        at[u[f], c_old] = -1
        at[v[f], c_old] = -1
    for f, c_old in zip(path, olds, strict=True):
        c_new = pb if c_old == pa else pa
        pu[f] = pv[f] = c_new
        at[u[f], c_new] = f
        at[v[f], c_new] = f
    return True


def _colour(u, v, n: int, degree: int, order: np.ndarray):
    """One greedy colouring pass in ``order`` (see :func:`port_assignment`)."""
    m = u.shape[0]
    at = np.full((n, degree), -1, np.int64)  # at[x, p]: circuit on port p of server x
    pu = np.full(m, -1, np.int64)
    pv = np.full(m, -1, np.int64)
    crossed = 0
    for e in order.tolist():
        a_, b_ = int(u[e]), int(v[e])
        free_a = np.flatnonzero(at[a_] < 0)
        free_b = np.flatnonzero(at[b_] < 0)
        both = np.intersect1d(free_a, free_b)
        p = int(both[0]) if both.size else -1
        if p < 0:
            # b_ lacks pb and has a pa circuit: freeing pa at b_ by a Kempe swap
            for pa, pb in itertools.product(free_a.tolist(), free_b.tolist()):
                if _swap_path(u, v, pu, pv, at, b_, a_, pa, pb, m):
                    p = pa
                    break
        if p < 0:
            pu[e], pv[e] = int(free_a[0]), int(free_b[0])
            at[a_, pu[e]] = e
            at[b_, pv[e]] = e
            crossed += 1
            continue
        pu[e] = pv[e] = p
        at[a_, p] = e
        at[b_, p] = e
    return pu, pv, crossed


def port_assignment(circuits: Circuits, n: int, degree: int) -> tuple[np.ndarray, int]:
    """Ports of every single circuit: ``(rows, crossed)``.

    Parameters
    ----------
    circuits : Circuits
        The circuits on the ``n`` servers.
    n, degree : int
        Servers and ports per server (every server uses at most ``degree`` ports).

    Returns
    -------
    rows : numpy.ndarray
        ``int64 (C, 4)`` rows ``[u, v, port_u, port_v]``, one per single circuit, in canonical
        order (a bundle of ``count`` circuits gives ``count`` rows).
    crossed : int
        Circuits with ``port_u != port_v`` (not realisable on one device; module docstring).

    Examples
    --------
    A 4-cycle on 2 ports is bipartite: two devices, two circuits each, nothing crossed.

    >>> square = Circuits([[0, 1, 1], [0, 3, 1], [1, 2, 1], [2, 3, 1]], 4)
    >>> rows, crossed = port_assignment(square, 4, 2)
    >>> rows.tolist(), crossed
    ([[0, 1, 0, 0], [0, 3, 1, 1], [1, 2, 1, 1], [2, 3, 0, 0]], 0)
    >>> port_assignment(Circuits([[0, 1, 1], [0, 2, 1], [1, 2, 1]], 3), 3, 2)[1]  # a triangle
    1
    """
    c = circuits.rows
    u = np.repeat(c[:, 0], c[:, 2])
    v = np.repeat(c[:, 1], c[:, 2])
    m = u.shape[0]
    best = None
    for attempt in range(ORDER_ATTEMPTS):
        order = np.arange(m) if attempt == 0 else np.random.default_rng(attempt).permutation(m)
        pu, pv, crossed = _colour(u, v, n, degree, order)
        if best is None or crossed < best[2]:
            best = (pu, pv, crossed)
        if crossed == 0:
            break
    pu, pv, crossed = best
    return np.column_stack([u, v, pu, pv]).astype(np.int64), crossed


# --------------------------------------------------------------------------- failures
@dataclass(frozen=True)
class Failure:
    """Single circuits lost and ports failed.

    Attributes
    ----------
    kind : str
        ``links``, ``ports`` or ``ocs``.
    lost : numpy.ndarray
        ``int64 (k, 4)`` rows ``[u, v, port_u, port_v]`` of the single circuits lost.
    failed_ports : numpy.ndarray
        ``int64 (n,)`` ports per server that fail (unusable afterwards).
    label : str
        What failed, in words.
    """

    kind: str
    lost: np.ndarray
    failed_ports: np.ndarray
    label: str

    def lost_circuits(self, n: int) -> Circuits:
        """The lost circuits (one row of :attr:`lost` is one circuit)."""
        return Circuits(self.lost[:, :2], n)

    def records(self) -> list[dict[str, int]]:
        """JSON rows ``{"u", "v", "port_u", "port_v"}``."""
        keys = ("u", "v", "port_u", "port_v")
        return [dict(zip(keys, r, strict=True)) for r in self.lost.tolist()]


MAX_SWEEP_SAMPLES = 100
"""Most samples per failure count of :func:`whatif_sweep`: its seeds ``seed * 1000 + 10 i + k``
are distinct samples only for ``i < 100`` (sample 100 of seed 0 would be sample 0 of seed 1)."""


def _int(field: str, value: Any, lo: int, hi: int | None) -> int:
    allowed = f"an integer in {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(field, value, allowed)
    if value < lo or (hi is not None and value > hi):
        raise InputError(field, int(value), allowed)
    return int(value)


def links_failure(ports: np.ndarray, n: int, k: int, seed: int) -> Failure:
    """``k`` single circuits drawn uniformly without replacement (seeded).

    ``ports`` are the rows of :func:`port_assignment`.

    >>> rows, _ = port_assignment(Circuits([[0, 1, 2], [1, 2, 1]], 3), 3, 3)
    >>> f = links_failure(rows, 3, 2, seed=0)
    >>> f.lost.shape, int(f.failed_ports.sum())
    ((2, 4), 4)
    """
    total = int(ports.shape[0])
    k = _int("--fail-links", k, 0, total)
    pick = np.sort(np.random.default_rng(seed).choice(total, size=k, replace=False))
    lost = ports[pick]
    failed = np.bincount(lost[:, 0], minlength=n) + np.bincount(lost[:, 1], minlength=n)
    return Failure("links", lost, failed.astype(np.int64), f"{k} random circuit(s), seed {seed}")


def ocs_failure(ports: np.ndarray, n: int, degree: int, unit: int) -> Failure:
    """Device ``unit`` fails: port ``unit`` of every server and every circuit through it."""
    unit = _int("--fail-ocs", unit, 0, degree - 1)
    hit = (ports[:, 2] == unit) | (ports[:, 3] == unit)
    return Failure("ocs", ports[hit], np.ones(n, np.int64), f"device {unit}")


def ports_failure(ports: np.ndarray, n: int, degree: int, spec: dict[str, np.ndarray]) -> Failure:
    """A failure read by :func:`read_failure_file` (``{"ports": (k, 2)}`` or
    ``{"circuits": (k, 3)}``), checked against the design."""
    lost_idx: list[int] = []
    failed = np.zeros(n, np.int64)
    if "ports" in spec:
        for i, (s, k) in enumerate(spec["ports"].tolist()):
            if not 0 <= s < n:
                raise InputError(f"ports[{i}].server", s, f"a server id 0..{n - 1}")
            if not 1 <= k <= degree:
                raise InputError(f"ports[{i}].ports", k, f"an integer in 1..{degree} (the degree)")
            if failed[s]:
                raise InputError(f"ports[{i}].server", s, "each server listed once")
            failed[s] = k
        dead = np.zeros((n, degree), bool)
        for s in range(n):
            dead[s, degree - failed[s] :] = failed[s] > 0
        hit = dead[ports[:, 0], ports[:, 2]] | dead[ports[:, 1], ports[:, 3]]
        lost_idx = np.flatnonzero(hit).tolist()
        label = "ports " + ", ".join(f"{k} of server {s}" for s, k in spec["ports"].tolist())
    else:
        taken = np.zeros(ports.shape[0], bool)
        for i, (a, b, k) in enumerate(spec["circuits"].tolist()):
            u, v = min(a, b), max(a, b)
            if not (0 <= u < n and 0 <= v < n) or u == v:
                raise InputError(f"circuits[{i}]", [a, b], f"two distinct servers 0..{n - 1}")
            if k < 1:
                raise InputError(f"circuits[{i}].count", k, "an integer >= 1")
            idx = np.flatnonzero((ports[:, 0] == u) & (ports[:, 1] == v) & ~taken)
            if idx.size < k:
                have = int(((ports[:, 0] == u) & (ports[:, 1] == v)).sum())
                raise InputError(
                    f"circuits[{i}]", f"{k} circuit(s) {u}-{v}", f"circuits of the design ({have})"
                )
            taken[idx[idx.size - k :]] = True
            lost_idx.extend(idx[idx.size - k :].tolist())
        lost_idx = sorted(lost_idx)
        lost = ports[lost_idx]
        failed = np.bincount(lost[:, 0], minlength=n) + np.bincount(lost[:, 1], minlength=n)
        label = "circuits " + ", ".join(f"{u}-{v} x{k}" for u, v, k in spec["circuits"].tolist())
    return Failure("ports", ports[lost_idx], failed.astype(np.int64), label)


_CSV_INT = re.compile(r"-?[0-9]{1,9}")
"""An integer cell of a ``--fail-ports`` CSV (at most 9 digits, so below 2**31)."""


def read_failure_file(path: str | Path) -> dict[str, np.ndarray]:
    """Read a ``--fail-ports`` file strictly.

    Accepted forms: JSON ``{"ports": [[server, count], ...]}`` or
    ``{"circuits": [[u, v, count], ...]}`` (exactly one key); CSV with the header
    ``server,ports`` or ``u,v,count`` and integer rows.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "f.csv")
    >>> _ = Path(p).write_text("server,ports\\n3,2\\n")
    >>> read_failure_file(p)["ports"].tolist()
    [[3, 2]]
    """
    from traffic.decode import decode_text, parse_json, read_input
    from traffic.errors import preview

    p = Path(path)
    if not p.is_file():
        raise InputError("--fail-ports", str(path), "an existing CSV or JSON file")
    # the strict decoding of every input (size cap, UTF-8, and for JSON: no duplicate keys,
    # NaN, integers beyond int64 or deep nesting)
    text = decode_text(read_input(p, "--fail-ports file"), str(path))
    allowed_json = 'one key, "ports": [[server, count], ...] or "circuits": [[u, v, count], ...]'
    if text.lstrip().startswith(("{", "[")):
        doc = parse_json(text, str(path))
        if not isinstance(doc, dict) or len(doc) != 1 or not {"ports", "circuits"} & set(doc):
            raise InputError("--fail-ports", preview(doc), allowed_json)
        key = next(iter(doc))
        rows = doc[key]
    else:
        # plain comma-separated integers: split by hand (csv's reader raises on a lone CR or a
        # field over 128 KB, and a quoted field is not an integer anyway)
        reader = [line.split(",") for line in text.splitlines()]
        reader = [r for r in reader if r and any(x.strip() for x in r)]
        header = [x.strip().lower() for x in reader[0]] if reader else []  # as every header
        if header == ["server", "ports"]:
            key = "ports"
        elif header == ["u", "v", "count"]:
            key = "circuits"
        else:
            raise InputError("--fail-ports header", ",".join(header), "server,ports or u,v,count")
        rows = []
        for i, r in enumerate(reader[1:]):
            cells = [x.strip() for x in r]
            # ASCII digits only (int() also takes "1_0" and Arabic-Indic digits), and below 2**31
            if not all(_CSV_INT.fullmatch(x) for x in cells):
                raise InputError(f"{key}[{i}]", ",".join(r), "integers (ASCII digits, |x| < 2**31)")
            rows.append([int(x) for x in cells])
    width = 2 if key == "ports" else 3
    if not isinstance(rows, list) or not rows:
        raise InputError(f"--fail-ports {key}", rows, "a non-empty list of rows")
    for i, r in enumerate(rows):
        ok = isinstance(r, list) and len(r) == width
        ok = ok and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
        if not ok:
            raise InputError(f"{key}[{i}]", r, f"{width} integers")
    return {key: np.asarray(rows, np.int64).reshape(-1, width)}


# --------------------------------------------------------------------------- evaluation
@dataclass(frozen=True, eq=False)
class Case:
    """A design with its workload and problem, ready to fail."""

    workload: Any
    design: Any
    problem: Any
    ports: np.ndarray
    crossed: int


def load_case(design_path: str | Path, plan: str) -> Case:
    """Read ``design.json`` and the plan, and check they match (as ``topoopt simulate``)."""
    from solvers import HybridDesign, load_design
    from traffic.load import load_workload

    path = Path(design_path)
    if not path.is_file():
        raise InputError("--design", str(design_path), "an existing design.json file")
    d = load_design(path)
    if isinstance(d, HybridDesign):
        raise InputError("--design", "a hybrid design", "an optical (direct-connect) design")
    from topoopt.flowsim.work import check_work

    w = load_workload(plan)
    check_work(w, "what-if simulation", reduced=True)  # before any fabric or simulation
    return make_case(d, w, str(path))


def make_case(design, workload, name: str = "design.json") -> Case:
    """A :class:`Case` of a :class:`~solvers.model.design.Design` and the workload it was made
    for."""
    from solvers import DesignProblem, check_design_rings

    d = design
    if d.servers != workload.servers:
        allowed = f"a design for {workload.servers} servers (the plan's)"
        raise InputError("--design", f"{d.servers} servers", allowed)
    problem = DesignProblem.from_workload(
        workload, d.degree, d.link_bandwidth, reserved=d.reserved_ports, prewired=d.prewired
    )
    check_design_rings(d, problem, name)
    ports, crossed = port_assignment(d.circuits, d.servers, d.degree)
    return Case(workload, d, problem, ports, crossed)


def design_capex(case: Case) -> dict[str, Any]:
    """``capex_usd`` and ``power_w`` of the case's design as built (its direct-connect fabric,
    priced by :func:`topoopt.fabrics.cost.cost` with the default price table): what the failures
    below happen to. Re-routing and re-optimising reuse its ports and cables. A port speed the
    table does not price gives ``None`` and the reason in ``capex_error``."""
    from solvers import design_fabric
    from topoopt.fabrics.cost import cost

    fab = design_fabric(case.design, gpus_per_server=case.workload.gpus_per_server)
    try:
        r = cost(fab)
    except InputError as e:  # a port speed the price table has no item for: no price, no failure
        return {"capex_usd": None, "power_w": None, "capex_error": str(e)}
    return {"capex_usd": float(r.capex_usd), "power_w": float(r.power_w)}


def _iteration_s(case: Case, design, routing_paths=None, problem=None) -> float:
    from solvers import design_fabric, design_workload
    from topoopt.flowsim.iteration import simulate_iteration

    fab = design_fabric(design, gpus_per_server=case.workload.gpus_per_server)
    paths = design.routing if routing_paths is None else routing_paths
    routing = paths.to_pathset(fab.src, fab.dst, fab.n_nodes)
    w = design_workload(case.workload, design, problem or case.problem)
    return float(simulate_iteration(w, fab, routing=routing, reduction=True).iteration_s)


def _surviving_paths(paths, alive_keys: np.ndarray, n: int):
    """Design paths using only surviving pairs (``u * n + v``, ``u < v``), weights renormalised
    per commodity; commodities with no surviving path are dropped."""
    from solvers import NodePaths

    if paths.n_paths == 0:
        return paths
    u, v = paths.hops()
    key = np.minimum(u, v) * n + np.maximum(u, v)
    bad_hop = ~np.isin(key, alive_keys)
    hop_path = np.repeat(np.arange(paths.n_paths), paths.path_lengths())
    bad_path = np.bincount(hop_path, bad_hop, minlength=paths.n_paths) > 0
    keep = ~bad_path
    comm = paths.path_commodity()
    total = np.bincount(comm, np.where(keep, paths.weight, 0.0), minlength=paths.n_commodities)
    kc = total > 0
    keep &= kc[comm]
    new_id = np.cumsum(kc) - 1
    lens = np.diff(paths.path_ptr)[keep]
    pptr = np.zeros(int(keep.sum()) + 1, np.int64)
    np.cumsum(lens, out=pptr[1:])
    node_keep = np.repeat(keep, np.diff(paths.path_ptr))
    cptr = np.zeros(int(kc.sum()) + 1, np.int64)
    np.cumsum(np.bincount(new_id[comm[keep]], minlength=int(kc.sum())), out=cptr[1:])
    weight = paths.weight[keep] / total[comm[keep]]
    return NodePaths(paths.src[kc], paths.dst[kc], cptr, pptr, paths.nodes[node_keep], weight)


def _rerouted_paths(case: Case, survived):
    """The routing after a failure as explicit paths: the design's surviving paths, and ECMP on
    the surviving circuits for every design pair that lost all its paths."""
    from solvers import NodePaths, design_fabric, node_paths
    from topoopt.fabrics.routing import routes

    d, n = case.design, case.design.servers
    c = survived.circuits.rows
    paths = _surviving_paths(d.routing, c[:, 0] * n + c[:, 1], n)
    want = d.routing.src * n + d.routing.dst
    lost = np.setdiff1d(want, paths.src * n + paths.dst)
    if not lost.size:
        return paths
    fab = design_fabric(survived, gpus_per_server=case.workload.gpus_per_server)
    extra = node_paths(routes(fab, "ecmp", pairs=np.column_stack([lost // n, lost % n])), fab.dst)
    return NodePaths(
        np.r_[paths.src, extra.src],
        np.r_[paths.dst, extra.dst],
        np.r_[paths.commodity_ptr, extra.commodity_ptr[1:] + paths.n_paths],
        np.r_[paths.path_ptr, extra.path_ptr[1:] + paths.path_ptr[-1]],
        np.r_[paths.nodes, extra.nodes],
        np.r_[paths.weight, extra.weight],
    )


def _subtract(circuits: Circuits, lost: Circuits, n: int) -> Circuits:
    have = {(u, v): k for u, v, k in circuits.tolist()}
    for u, v, k in lost.tolist():
        have[(u, v)] -= k
    return Circuits([[u, v, k] for (u, v), k in sorted(have.items()) if k > 0], n)


def _connected(circuits: Circuits, paths, n: int) -> bool:
    _, lab = circuits.components()
    return bool(np.all(lab[paths.src] == lab[paths.dst]))


def whatif(
    case: Case,
    failure: Failure,
    *,
    solver: str | None = None,
    seed: int = 0,
    work_limit: float = DEFAULT_REOPT_WORK_LIMIT,
    time_limit_s: float = 60.0,
    before_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Iteration time before ``failure``, after it (rerouted), and re-optimised (module docstring).

    Returns
    -------
    dict
        ``before_s``, ``after_s`` (``None`` when the job cannot run), ``before_rerouted_s``
        (the intact design on the very paths ``after_s`` uses: ``after_s - before_rerouted_s``
        is the cost of the lost capacity, ``before_rerouted_s - before_s`` that of the changed
        routes), ``reoptimized_s``
        (``None`` when even the re-optimised design leaves two communicating servers apart),
        ``rewired_circuits`` (circuits the re-optimised design adds to the surviving ones),
        ``intact_on_reoptimized_s`` (when a re-optimised design that rewires nothing beats
        ``before_s``: the intact circuits on its routes and rings, else ``None``) and
        ``intact_routing_suboptimal`` (that intact design beats ``before_s``: the slowdowns
        below 1 are the design's routing, not the failure),
        ``surviving_circuits`` and ``reoptimized_circuits`` (``[u, v, count]`` rows),
        ``failed`` (lost circuits with their ports), ``failed_ports`` (per server, non-zero
        only), ``failure``, ``disconnected``, ``fallback``, ``solver``, ``crossed_circuits``.
    """
    from solvers import SOLVERS, solve

    d, n = case.design, case.design.servers
    if before_s is None:
        if progress:
            progress("simulating the design before the failure")
        before_s = _iteration_s(case, d)
    surviving = _subtract(d.circuits, failure.lost_circuits(n), n)
    disconnected = not _connected(surviving, d.routing, n)
    after_s = before_rerouted_s = None
    survived = replace(d, circuits=surviving)
    if not disconnected:
        if progress:
            progress(f"simulating after the failure of {failure.label}")
        paths = _rerouted_paths(case, survived)
        after_s = _iteration_s(case, survived, paths)
        before_rerouted_s = _iteration_s(case, d, paths)
    used = surviving.degrees()
    orig_res = d.reserved_ports if d.reserved_ports is not None else np.zeros(n, np.int64)
    reserved = np.minimum(orig_res + failure.failed_ports, d.degree - used.astype(np.int64))
    problem = case.problem.with_options(
        reserved=reserved, prewired=surviving if len(surviving) else None
    )
    name = solver or (d.solver if d.solver in SOLVERS else "joint")
    if progress:
        progress(f"re-optimising with {name} (surviving circuits pre-wired)")
    reopt_s, refused = None, ""
    try:
        new = solve(problem, name, seed=seed, work_limit=work_limit, time_limit_s=time_limit_s)
    except InputError as exc:  # the solver cannot take this problem: keep the rerouted design
        if after_s is None:
            raise InputError(
                "failure",
                failure.label,
                f"a failure that leaves the job's servers connected ({name}: {exc.value})",
            ) from None
        new, refused = survived, f"{name}: {exc}"
    if not refused and _connected(new.circuits, d.routing, n):
        reopt_s = _iteration_s(case, new, problem=problem)
    have = {(u, v): k for u, v, k in surviving.tolist()}
    rewired = sum(max(k - have.get((u, v), 0), 0) for u, v, k in new.circuits.tolist())
    fallback = after_s is not None and (reopt_s is None or reopt_s > after_s)
    if fallback:
        reopt_s, rewired = after_s, 0
    # A re-optimised design that rewires nothing is the surviving circuits under new routes and
    # rings; the same routes and rings on every intact circuit are an intact design (the lost
    # circuits come back unused). When the re-optimised design beats ``before_s`` that intact
    # design is simulated: it shows the time the design's own routing leaves on the table
    intact_s = None
    if not fallback and rewired == 0 and reopt_s is not None and reopt_s < before_s:
        if progress:
            progress("simulating the intact circuits on the re-optimised routes and rings")
        intact = replace(
            new, circuits=d.circuits, reserved_ports=d.reserved_ports, prewired=d.prewired
        )
        intact_s = _iteration_s(case, intact)
    nz = np.flatnonzero(failure.failed_ports)
    return {
        "before_s": before_s,
        "after_s": after_s,
        "before_rerouted_s": before_rerouted_s,
        "reoptimized_s": reopt_s,
        "intact_on_reoptimized_s": intact_s,
        "intact_routing_suboptimal": intact_s is not None and intact_s < before_s,
        "rewired_circuits": int(rewired),
        "surviving_circuits": surviving.tolist(),
        "reoptimized_circuits": (surviving if fallback else new.circuits).tolist(),
        "failed": failure.records(),
        "failed_ports": {str(int(i)): int(failure.failed_ports[i]) for i in nz},
        "failure": failure.label,
        "disconnected": disconnected,
        "fallback": bool(fallback),
        "solver": name,
        "solver_refused": refused,
        "crossed_circuits": case.crossed,
        **design_capex(case),
    }


# --------------------------------------------------------------------------- sweep
QUANTILES = (0.0, 0.5, 0.9, 1.0)
"""Quantiles of the slowdown reported by :func:`whatif_sweep`."""


def _quantiles(x: list[float]) -> dict[str, float] | None:
    if not x:
        return None
    q = np.quantile(np.asarray(x), QUANTILES)
    return {f"p{int(round(p * 100))}": float(v) for p, v in zip(QUANTILES, q, strict=True)}


def _fat_tree_sweep(case: Case, samples: int, seed: int, progress) -> dict[str, Any]:
    """Switch losses on the k-ary fat-tree of the same servers (``d * B`` per server).

    ``k`` is the smallest even radix with ``k^3/4 >= n``. Every switch is checked for the
    servers its loss cuts off (an edge switch takes its ``k/2`` servers with it: the job cannot
    run); ``samples`` of the switches whose loss leaves every server connected (drawn with
    ``default_rng(seed)``) are simulated with ECMP on the links that remain.
    """
    from topoopt.fabrics.fat_tree import fat_tree, fat_tree_radix
    from topoopt.flowsim.iteration import simulate_iteration

    d, n = case.design, case.design.servers
    k = fat_tree_radix(n)
    w = case.workload
    fab = fat_tree(k, n, port_bandwidth=d.degree * d.link_bandwidth,
                   gpus_per_server=w.gpus_per_server)  # fmt: skip
    before = float(simulate_iteration(w, fab, reduction=True).iteration_s)

    def without(s: int):
        keep = (fab.src != s) & (fab.dst != s)
        return replace(
            fab,
            src=fab.src[keep],
            dst=fab.dst[keep],
            capacity=fab.capacity[keep],
            latency=fab.latency[keep],
            link_kind=fab.link_kind[keep],
            cable=fab.cable[keep],
            multiplicity=fab.multiplicity[keep],
            medium=fab.medium[keep],
            _cache={},
        )

    switches = np.flatnonzero(fab.node_kind != "server")
    cut_off = []
    for s in switches.tolist():
        lab = without(s).components()[:n]
        cut_off.append(int(np.sum(lab != np.bincount(lab).argmax())))
    cut = np.asarray(cut_off)
    ok = switches[cut == 0]
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(ok, size=min(samples, ok.size), replace=False)) if ok.size else ok
    slow = []
    for s in pick.tolist():
        if progress:
            progress(f"fat-tree: switch {s} ({fab.node_kind[s]}) fails")
        it = simulate_iteration(w, without(s), reduction=True)  # a failure: fewer classes
        slow.append(float(it.iteration_s) / before)
    return {
        "k": k,
        "before_s": before,
        "switches": int(switches.size),
        "switch_losses_disconnecting": int(np.sum(cut > 0)),
        "servers_cut_off_max": int(cut.max(initial=0)),
        "simulated_switches": pick.tolist(),
        "slowdown": _quantiles(slow),
    }


def whatif_sweep(
    case: Case,
    *,
    samples: int = 4,
    seed: int = 0,
    solver: str | None = None,
    work_limit: float = DEFAULT_REOPT_WORK_LIMIT,
    time_limit_s: float = 60.0,
    fat_tree: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Slowdown over ``samples`` random single and ``samples`` double circuit failures.

    Sample ``i`` of ``k`` failed circuits uses seed ``seed * 1000 + 10 * i + k`` (distinct for
    ``i`` below :data:`MAX_SWEEP_SAMPLES`, the most ``samples`` may be: each sample is a
    simulation and a re-optimisation; 1e9 samples ran for ever). Returns per
    ``k`` the quantiles (``p0, p50, p90, p100``) of ``after_s / before_s`` (over the samples
    that stay connected) and ``reoptimized_s / before_s``, the count of disconnecting samples,
    and a switch-loss sweep on a k-ary fat-tree of the same servers (:func:`_fat_tree_sweep`):
    a lost edge switch cuts its servers off (the job cannot run there), other losses are
    simulated with ECMP on what remains.
    """
    samples = _int("--samples", samples, 1, MAX_SWEEP_SAMPLES)
    total = int(case.ports.shape[0])
    before = _iteration_s(case, case.design)
    out: dict[str, Any] = {
        "before_s": before, "samples": samples, **design_capex(case), "failures": {}
    }  # fmt: skip
    reopt_by_k: dict[str, list[float]] = {}
    for k in (1, 2):
        if k > total:
            raise InputError("--design", f"{total} circuit(s)", f"at least {k} to fail {k}")
        after, reopt, disc, lost, rewired, intact = [], [], 0, 0, [], []
        for i in range(samples):
            s = seed * 1000 + 10 * i + k
            if progress is not None:  # [step/steps]: the CLI's bar counts them (ETA)
                progress(f"[{(k - 1) * samples + i + 1}/{2 * samples}] {k} failed, sample {i + 1}")
            f = links_failure(case.ports, case.design.servers, k, s)
            r = whatif(case, f, solver=solver, seed=seed, work_limit=work_limit,
                       time_limit_s=time_limit_s, before_s=before, progress=progress)  # fmt: skip
            if r["after_s"] is None:
                disc += 1
            else:
                after.append(r["after_s"] / before)
            if r["reoptimized_s"] is None:
                lost += 1
            else:
                reopt.append(r["reoptimized_s"] / before)
            rewired.append(r["rewired_circuits"])
            if r["intact_on_reoptimized_s"] is not None:
                intact.append(r["intact_on_reoptimized_s"])
        out["failures"][str(k)] = {
            "after_slowdown": _quantiles(after),
            "reoptimized_slowdown": _quantiles(reopt),
            "disconnected": disc,
            "disconnected_reoptimized": lost,
            "rewired_circuits_mean": float(np.mean(rewired)),
            "intact_routing_suboptimal": int(sum(t < before for t in intact)),
        }
        reopt_by_k[str(k)] = reopt
        best = min(intact, default=before)
        if best < before:
            out["best_intact_s"] = min(out.get("best_intact_s", before), best)
    if "best_intact_s" in out:  # slowdowns against the fastest intact design the sweep saw
        for k, r in out["failures"].items():
            r["reoptimized_vs_best_intact"] = _quantiles(
                [x * before / out["best_intact_s"] for x in reopt_by_k[k]]
            )
    if fat_tree:
        out["fat_tree"] = _fat_tree_sweep(case, samples, seed, progress)
    return out
