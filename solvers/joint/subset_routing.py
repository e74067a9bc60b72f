"""Re-routing over the intact circuits minus one: the routings a failure would find, tried first.

``topoopt whatif`` re-optimises a design after one circuit fails; when nothing is rewired the
new design is the surviving circuits under a new routing, and that routing is valid on the
intact circuits too (the lost circuit comes back unused). Issue 29 item 6 found such a routing
4.7 % faster than the intact ``joint`` design: the routing LP's optimum is one of many
congestion-equivalent routings and the one it lands on depends on the graph it is given.

:func:`reroute_without_one` (step 5c of :mod:`solvers.joint.iteration_search`) tries that
routing before the design ships: for the incumbent's :data:`SUBSET_REROUTES` least-loaded
circuits (by the phase problem's congestion loads; the pre-wired ones excepted), the circuits
without it are routed by the LP on the phase problem, and the routing is simulated on the intact
circuits and kept as a finalist. A fixed number of routings and simulations: deterministic
(their work is charged; only the wall clock can cut it, and then the result says so).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from solvers.model.congestion import evaluate_routing
from topoopt.fabrics.circuits import Circuits, circuit_links

__all__ = ["SUBSET_REROUTES", "reroute_order", "reroute_without_one"]

SUBSET_REROUTES = 3
"""Circuits of the incumbent whose removal is re-routed (:func:`reroute_without_one`)."""


def reroute_order(problem, design) -> list[int]:
    """Rows of ``design.circuits`` by their peak utilisation over phases and directions (load /
    capacity / phase time under the design's own routing), least loaded first; pre-wired
    rows (at their pre-wired count) are left out."""
    c = design.circuits
    ev = evaluate_routing(problem, c, design.phase_routings(problem), keep_loads=True)
    _, _, cap = circuit_links(c, problem.link_bandwidth)
    util = np.zeros(cap.size)
    for t, loads in zip(ev.phase_times, ev.link_loads, strict=True):
        if t > 0 and np.isfinite(t):
            util = np.maximum(util, loads / cap / t)
    per_row = np.maximum(util[0::2], util[1::2])
    floor = {(int(a), int(b)): int(k) for a, b, k in problem.prewired_circuits().tolist()}
    rows = [i for i, (u, v, k) in enumerate(c.tolist()) if k > floor.get((u, v), 0)]
    return sorted(rows, key=lambda i: (per_row[i], i))


def reroute_without_one(s) -> None:
    """Step 5c on the iteration search state ``s`` (module docstring); records
    ``info["subset_reroutes"]``: per circuit tried, ``[u, v]`` and the simulated iteration."""
    if not s.finalists:
        return
    if s.warm_work >= s.wl:  # deterministic, as the congestion start: no room for more
        s.info["subset_reroutes"] = []
        return
    _, _, name, inc = min(s.finalists, key=lambda x: (x[0], x[1]))
    problem, n = s.problem, s.problem.n
    tried = []
    for r in reroute_order(problem, inc)[:SUBSET_REROUTES]:
        if time.perf_counter() >= s.end:
            s.capped.append("re-routing without one circuit")
            break
        u, v = (int(x) for x in inc.circuits.rows[r, :2])
        sub = inc.circuits.rows.copy()
        sub[r, 2] -= 1
        sub = Circuits(sub[sub[:, 2] > 0], n).rows
        d0, _ = s.routed_design(sub, problem, f"without circuit {u}-{v}")
        if d0 is None:  # disconnected without it, or the clock is up
            tried.append({"circuit": [u, v], "iteration_s": None})
            continue
        intact = replace(d0, circuits=inc.circuits)  # every hop is an intact circuit
        it = s.simulate_on_own_budget(intact)
        label = f"{name} re-routed without {u}-{v}"
        s.tried.append({"candidate": label, "routing": "phases", "iteration_s": it})
        tried.append({"circuit": [u, v], "iteration_s": it})
        if np.isfinite(it):
            s.finalists.append((it, len(s.finalists), label, intact))
            if it < s.best[0] * (1 - 1e-12):
                s.best = s.finalists[-1]
                if s.progress is not None:
                    s.progress(it, s.bound_s)
    s.info["subset_reroutes"] = tried
