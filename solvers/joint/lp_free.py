"""The joint optimizer above ``lp_max_servers``: constructions routed without an LP.

:func:`lp_free_search` is what :func:`solvers.joint.driver.congestion_search` runs when the
cluster has more servers than its ``lp_max_servers`` (the routing LPs of 256 servers cost more
than the whole default work limit). Its steps, on the search state
(:class:`~solvers.joint.driver.CongestionSearch`):

1. The warm start with its free ports filled (as before: the baselines are finalists).
2. The bound: ideal switch and hop bounds (no LP relaxation).
3. Candidates (:func:`lp_free_candidates`): each baseline's circuits, the pipeline
   constructions (:func:`solvers.joint.pipeline_candidates.pipeline_candidates`), the degree
   splits of the congestion search (:func:`solvers.joint.driver.candidate_circuits` without its
   clock-limited stride search) and circulants on greedy mean-hop strides
   (:func:`greedy_strides`) with the ports left to MP matchings. Each is routed by
   :func:`solvers.joint.fast_routing.fast_route` (closed-form paths balanced by Frank-Wolfe,
   the baseline's rings kept when its circuits are the candidate's), in order, while the work
   limit allows.
4. Degree-preserving 2-swaps on the incumbent (:func:`solvers.joint.local_search.improve_by_swaps`)
   evaluated by the same router.
5. :meth:`~solvers.joint.driver.CongestionSearch.finish`: the finalists (incumbent, runner-up,
   the baselines) judged by the flow model when it can judge (never slower than the fastest
   warm start), else by the objective (never above the best baseline's).
"""

from __future__ import annotations

import math
import time

import numpy as np

from solvers.baselines.topoopt_method import mp_matchings
from solvers.baselines.traffic_input import topoopt_traffic
from solvers.bounds import lower_bound
from solvers.joint.fast_routing import fast_route
from solvers.joint.local_search import improve_by_swaps
from solvers.joint.pipeline_candidates import pipeline_candidates
from solvers.model.ports import fill_free_ports
from solvers.model.problem import DesignProblem
from topoopt.fabrics.circuits import Circuits

__all__ = ["greedy_strides", "circulant_mean_hops", "lp_free_candidates", "lp_free_search"]


def circulant_mean_hops(n: int, strides) -> float:
    """Mean hop count from a server to the others on the circulant ``{i, i +- p}`` (every
    server alike; ``inf`` when disconnected), by breadth-first search over the offsets.

    Examples
    --------
    >>> circulant_mean_hops(8, [1]), circulant_mean_hops(8, [1, 3])
    (2.2857142857142856, 1.4285714285714286)
    """
    steps = np.unique(np.concatenate([np.asarray(strides, np.int64) % n,
                                      (-np.asarray(strides, np.int64)) % n]))  # fmt: skip
    dist = np.full(n, -1, np.int64)
    dist[0] = 0
    front = np.array([0], np.int64)
    h = 0
    while front.size:
        h += 1
        nxt = np.unique((front[:, None] + steps[None, :]).ravel() % n)
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = h
        front = nxt
    if np.any(dist < 0):
        return math.inf
    return float(dist[1:].mean())


def greedy_strides(n: int, k: int) -> list[int]:
    """``k`` circulant strides: 1, then each next stride (in ``2..n/2``) the one that lowers
    the mean hop count most (:func:`circulant_mean_hops`; the smallest on ties). Deterministic.

    Examples
    --------
    >>> greedy_strides(16, 2)
    [1, 6]
    """
    chosen = [1]
    pool = [p for p in range(2, n // 2 + 1)]
    while len(chosen) < k and pool:
        scores = [(circulant_mean_hops(n, chosen + [p]), p) for p in pool]
        _, p = min(scores)
        chosen.append(p)
        pool.remove(p)
    return chosen


def lp_free_candidates(
    problem: DesignProblem, bases, splits=()
) -> list[tuple[str, np.ndarray, object]]:
    """``(name, circuits, rings_from)`` to route (module docstring, step 3): ``rings_from`` is
    the baseline whose rings are offered to the router (None: rings along circuits).
    ``splits``: the driver's degree splits ``(name, circuits)``
    (:func:`solvers.joint.driver.candidate_circuits` with ``strides=False``)."""
    from topoopt.fabrics import circulant_circuits

    n, d = problem.n, problem.degree
    out: list[tuple[str, np.ndarray, object]] = [
        (f"{b.solver} circuits", b.circuits, b) for b in bases
    ]
    out += [(nm, c, None) for nm, c in pipeline_candidates(problem)]
    out += [(nm, c, None) for nm, c in splits]
    traffic = topoopt_traffic(problem)
    whole = any(g.size == n for g in traffic.groups) or not traffic.groups
    if whole and not problem.has_port_options:
        top = d - d % 2
        for d_ar in range(top, 1, -2):
            strides = greedy_strides(n, d_ar // 2)
            if len(strides) < d_ar // 2:
                continue
            c = Circuits(circulant_circuits(n, strides), n).rows
            parts = [c]
            if d - d_ar and traffic.mp.nnz:
                parts.append(mp_matchings(traffic.mp, d - d_ar, n)[0])
            c = Circuits(np.vstack(parts), n).rows
            if c[:, 2].max() > problem.pair_cap:
                continue
            c = fill_free_ports(c, n, d, traffic.mp, problem.pair_cap)
            out.append((f"greedy strides {strides} + {d - d_ar} MP ports", c, None))
    return out


def lp_free_search(s, splits=()):
    """Steps 1-5 of the module docstring on the search state ``s``
    (:class:`~solvers.joint.driver.CongestionSearch`; ``splits`` as in
    :func:`lp_free_candidates`); returns its finished Design."""
    problem, info, meter = s.problem, s.info, s.meter
    info["steps"].append(
        "LP-free routing above lp_max_servers (closed-form paths balanced by Frank-Wolfe)"
    )
    s.fill_base_ports()
    b = lower_bound(problem, use_lp=False)
    info["bound_method"] = b.method
    s.bound_s = max(s.bound_s, b.lower_bound_s)
    s.report()
    tried = []
    seen: set[bytes] = set()
    for name, c, rings_from in lp_free_candidates(problem, s.bases, splits):
        c = Circuits(c, problem.n).rows
        key = c.tobytes()
        if key in seen:
            continue
        seen.add(key)
        if not meter.allows():
            break
        if s.cap_left(f"routing {name}") is None:
            break
        if problem.ocs is not None:  # as the layer holds it (after the clock's check: a
            c = s.fit(c)  # placement may take seconds at scale)
            if c.tobytes() != key and c.tobytes() in seen:
                continue
            seen.add(c.tobytes())
        ts = time.perf_counter()
        routed, val, util = fast_route(problem, c, extra=rings_from)
        work = routed.work if routed is not None else 0.0
        meter.charge(work, step=True)
        tried.append({"candidate": name, "objective_s": val, "work": work,
                      "wall_s": time.perf_counter() - ts})  # fmt: skip
        if routed is None:
            continue
        label = f"{name} (LP-free routing)"
        s.pool.append((val, len(s.pool), label, c, routed))
        if val < s.inc_obj * (1 - 1e-12):
            s.inc_obj = val
            s.inc = (c, routed, label, False, util)
            s.report()
    info["candidates"] = tried
    if s.search_swaps and s.inc is not None:
        _swaps(s)
    if s.inc is None:
        info["steps"].append("baseline kept (no candidate improved on it)")
    return s.finish(s.bound_s)


def _swaps(s) -> None:
    """Step 4: 2-swaps on the incumbent, each routed by :func:`fast_route`."""
    inc, problem = s.inc, s.problem
    last: dict = {}

    def evaluate(c):
        routed, val, util = fast_route(problem, c)
        s.meter.charge(routed.work if routed is not None else 0.0, step=True)
        last["eval"] = (routed, val, util)
        return val, util

    def improved(c, v):
        s.inc_obj = v
        last["best"] = last["eval"]
        s.report()

    def keep_going() -> bool:
        if not s.meter.allows():
            return False
        if time.perf_counter() >= s.search_end:
            s.capped.append("swap search")
            return False
        return True

    place = s.place if problem.ocs is not None else None  # swaps of two circuits on one OCS

    best_c, _, evals = improve_by_swaps(
        inc[0], problem.n, problem.pair_cap, evaluate, (s.inc_obj, inc[4]),
        on_improve=improved, floor=problem.prewired_circuits(), keep_going=keep_going,
        placement=place, layer=problem.ocs,
    )  # fmt: skip
    s.info["local_search_evaluations"] = evals
    if "best" in last and not np.array_equal(best_c, inc[0]):
        routed, val, util = last["best"]
        s.inc = (best_c, routed, inc[2] + " + swaps", False, util)
        s.inc_obj = val
