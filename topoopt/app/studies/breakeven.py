"""``topoopt breakeven``: the port price at which an optical design and the cost-equivalent
fat-tree tie in iteration time.

The optical design (``design_fabric``: ``topoopt``, ``topoopt-released``, ``topoopt-best`` or
``joint``, built once by :func:`topoopt.app.studies.compare.build_fabric`) has a fixed iteration
time
``T_opt``. The cost-equivalent fat-tree (:func:`topoopt.fabrics.cost.cost_equivalent_fat_tree`,
capped at the ideal switch's ``degree x B`` per server, as in ``compare``) is re-bought at every
price: with every price-table entry of the varied ``items`` multiplied by a factor ``f``,

- ``mode="electrical"``: ``items = ("switch_port",)``. The optical design has no switch port, so
  its capex (the budget) is fixed while the fat-tree's ports get dearer: the fat-tree buys less
  bandwidth and ``T_ft(f)`` is non-decreasing in ``f``;
- ``mode="optical"``: ``items = ("patch_panel_port", "ocs_port")``. The budget grows with ``f``
  and the fat-tree buys more: ``T_ft(f)`` is non-increasing in ``f``.

Either way ``g(f) = T_ft(f) - T_opt`` is monotone, and the breakeven factor is found by bisection
on ``log f``: first a fixed grid of factors (:data:`GRID`, also the plotted curve), then halving
the bracket where ``g`` changes sign until ``f_hi / f_lo <= 1 + rel_tol``. Every step rebuilds the
cost-equivalent fat-tree and simulates its iteration
(:func:`topoopt.flowsim.iteration.simulate_iteration`, through the exact symmetry reduction);
fat-trees already simulated (same link rate and shape) are reused. The work is a fixed number
of steps (deterministic, no wall clock).

The reported price is the varied item's unit price at the tie: the switch-port price at the
design's link rate ``B`` (electrical), or the patch-panel / OCS port price of the device the design
uses (optical).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from topoopt.fabrics.cost import PriceTable, cost, cost_equivalent_fat_tree, load_prices
from topoopt.flowsim.iteration import simulate_iteration
from topoopt.flowsim.work import check_work
from topoopt.units import bytes_per_s_to_gbps
from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["MODES", "DESIGNS", "GRID", "BreakevenResult", "PriceProbe", "breakeven"]

MODES = {"electrical": ("switch_port",), "optical": ("patch_panel_port", "ocs_port")}
"""Varied price-table items per mode."""

DESIGNS = ("topoopt", "topoopt-released", "topoopt-best", "joint")
"""Optical designs a breakeven can be computed for."""

GRID = tuple(float(4.0**k) for k in range(-4, 5))
"""Price factors of the curve (1/256 .. 256, times 4 apart), also the bisection's first bracket."""


@dataclass(frozen=True)
class BreakevenResult:
    """The tie price, its bracket and the iteration-time curve.

    ``status``: ``"tie"`` (the fat-tree's iteration time crosses the optical design's at
    ``price_usd``), ``"step"`` (the order flips inside the final bracket but at a catalogue step,
    where the fat-tree's time jumps past the optical one), ``"optical-faster"`` (over the whole
    grid) or ``"fat-tree-faster"``.
    """

    mode: str
    design: str
    status: str
    price_usd: float | None
    factor: float | None
    bracket: tuple[float, float] | None
    base_price_usd: float
    price_item: str
    optical_iteration_s: float
    optical_capex_usd: float
    tie_iteration_s: float | None
    curve: pd.DataFrame
    steps: int
    params: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (``curve`` as a list of records)."""
        return {
            "mode": self.mode,
            "design": self.design,
            "status": self.status,
            "price_usd": self.price_usd,
            "price_item": self.price_item,
            "base_price_usd": self.base_price_usd,
            "factor": self.factor,
            "bracket_factors": list(self.bracket) if self.bracket else None,
            "bracket_prices_usd": (
                [f * self.base_price_usd for f in self.bracket] if self.bracket else None
            ),
            "optical_iteration_s": self.optical_iteration_s,
            "optical_capex_usd": self.optical_capex_usd,
            "tie_iteration_s": self.tie_iteration_s,
            "steps": self.steps,
            "curve": self.curve.to_dict(orient="records"),
            "params": self.params,
        }


class PriceProbe:
    """``T_ft(f)``: the cost-equivalent fat-tree's iteration time with the ``mode``'s prices
    times ``f`` (module docstring), memoised per fat-tree shape and rate.

    Built by :func:`breakeven`; public so that a tie can be checked independently.
    """

    def __init__(
        self,
        workload: Workload,
        optical_fabric,
        prices: PriceTable,
        mode: str,
        max_bandwidth: float,
    ) -> None:
        if mode not in MODES:
            raise InputError("mode", mode, f"one of {', '.join(MODES)}")
        self.workload = workload
        self.optical_fabric = optical_fabric
        self.prices = prices
        self.items = MODES[mode]
        self.max_bandwidth = float(max_bandwidth)
        self._sims: dict[tuple, float] = {}
        self.calls = 0

    def point(self, factor: float) -> dict[str, Any]:
        """One curve point: factor, budget, the fat-tree bought and its iteration time
        (``inf`` when the budget buys no catalogue Clos at all)."""
        p = self.prices.scaled(self.items, factor)
        budget = cost(self.optical_fabric, p).capex_usd
        row: dict[str, Any] = {"factor": float(factor), "budget_usd": budget}
        try:
            eq = cost_equivalent_fat_tree(
                budget,
                self.workload.servers,
                prices=p,
                max_bandwidth=self.max_bandwidth,
                gpus_per_server=self.workload.gpus_per_server,
                fluid_mix=True,  # a continuous price curve: the speed-mix bound (docs/costs.md)
            )
        except InputError:
            row.update(
                iteration_s=math.inf,
                server_bandwidth=0.0,
                capex_usd=0.0,
                link_gbps=0.0,
                tiers=0,
                switch="",
            )
            return row
        info = eq.info
        key = (round(eq.port_bandwidth, 3), info["switch"], info["leaves"], info["spines"])
        if key not in self._sims:
            self.calls += 1
            it = simulate_iteration(
                self.workload, eq.fabric, exposed_by_class=False, reduction=True
            )
            self._sims[key] = float(it.iteration_s)
        row.update(
            iteration_s=self._sims[key],
            server_bandwidth=eq.server_bandwidth,
            capex_usd=eq.capex_usd,
            link_gbps=info["link_gbps"],
            tiers=info["tiers"],
            switch=info["switch"],
        )
        return row


def _search_warning(run, name: str) -> str | None:
    """The warning line of the optical design's search (:func:`solvers.search_warning`): it fell
    back to another objective or the clock cut it; ``None`` otherwise or for a built fabric."""
    design = getattr(run, "design", None)
    if design is None:
        return None
    from solvers import search_warning

    return search_warning(design, name)


def breakeven(
    workload: Workload,
    degree: int = 8,
    link_bandwidth: float = 12.5e9,
    *,
    design_fabric: str = "topoopt",
    mode: str = "electrical",
    prices: PriceTable | None = None,
    seed: int = 0,
    time_limit_s: float = 30.0,
    rel_tol: float = 1e-3,
    max_steps: int = 40,
    progress: Callable[[str], None] | None = None,
    optical: Any = None,
) -> BreakevenResult:
    """The ``mode``'s port price at which ``design_fabric`` and the cost-equivalent fat-tree
    tie in iteration time (module docstring).

    Parameters
    ----------
    workload : Workload
        The job (its servers and GPUs per server size both fabrics).
    degree, link_bandwidth : int, float
        Optical ports per server and their rate (bytes/s), as in ``compare``.
    design_fabric : str
        One of :data:`DESIGNS`.
    mode : {"electrical", "optical"}
        Which price varies (:data:`MODES`).
    prices : PriceTable, optional
        Base prices (default table); the factor multiplies them.
    rel_tol : float
        Bisection stops when the factor bracket is within ``1 + rel_tol``.
    max_steps : int
        Most bisection steps (a deterministic work limit).
    optical : FabricRun, optional
        A prebuilt optical fabric (:class:`topoopt.app.studies.compare.FabricRun`: fabric,
        workload, routing) instead of solving ``design_fabric``; the result names it by
        ``optical.name``.

    Returns
    -------
    BreakevenResult
    """
    from topoopt.app.studies.compare import build_fabric

    say = progress or (lambda _m: None)
    if optical is None and design_fabric not in DESIGNS:
        raise InputError("design_fabric", design_fabric, f"one of {', '.join(DESIGNS)}")
    if mode not in MODES:
        raise InputError("mode", mode, f"one of {', '.join(MODES)}")
    if not 0 < rel_tol < 1:
        raise InputError("rel_tol", rel_tol, "a number in (0, 1)")
    prices = load_prices() if prices is None else prices
    d, B = int(degree), float(link_bandwidth)
    check_work(workload, "breakeven simulation", reduced=True)  # before any fabric or design
    if optical is None:
        say(f"breakeven: building the {design_fabric} design")
        run = build_fabric(
            design_fabric,
            workload,
            d,
            B,
            seed=seed,
            time_limit_s=time_limit_s,
            prices=prices,
            progress=progress,
        )
    else:
        run, design_fabric = optical, str(optical.name)
    gbps = bytes_per_s_to_gbps(B)
    base = [prices.unit(item, gbps)[0] for item in MODES[mode]]
    if not max(base) > 0:  # the factors scale it: every price tried would be 0
        raise InputError(
            "--prices", prices.source,
            f"a positive {' or '.join(MODES[mode])} price (the breakeven scales it; "
            f"the table's is {max(base):g} USD)",
        )  # fmt: skip
    # equal capex of nothing: no fat-tree, "against inf ms", a price range "0 to 0 USD"
    if not cost(run.fabric, prices).capex_usd > 0:
        raise InputError(
            "--prices", prices.source,
            f"a price table in which the {design_fabric} design costs more than 0 USD "
            "(the breakeven prices a fat-tree at its capex)",
        )  # fmt: skip
    opt = simulate_iteration(
        run.workload, run.fabric, routing=run.routing, exposed_by_class=False, reduction=True
    )
    t_opt = float(opt.iteration_s)
    probe = PriceProbe(workload, run.fabric, prices, mode, max_bandwidth=d * B)
    sign = 1.0 if mode == "electrical" else -1.0  # g(f) * sign is non-decreasing

    def g(row: dict) -> float:
        return sign * (row["iteration_s"] - t_opt)

    rows = []
    for f in GRID:
        say(f"breakeven: factor {f:g}")
        rows.append(probe.point(f))
    built = [
        r for r in rows if r.get("iteration_s") is not None and math.isfinite(r["iteration_s"])
    ]
    if not built:  # no catalogue switch builds a Clos at any price: not a win of the design
        raise InputError(
            "--prices", prices.source,
            f"a switch catalogue with a model that builds a Clos of {workload.servers:,} servers "
            f"x {d} NICs at {gbps:g} Gbps (none of the table's does, at any price tried)",
        )  # fmt: skip
    vals = [g(r) for r in rows]
    bracket = None
    for a, b in zip(range(len(GRID)), range(1, len(GRID)), strict=False):
        if vals[a] < 0 <= vals[b]:
            bracket = [GRID[a], GRID[b]]
            break
    steps = 0
    tie_row = None
    if bracket is not None:
        lo, hi = bracket
        while hi / lo > 1 + rel_tol and steps < max_steps:
            mid = math.sqrt(lo * hi)
            row = probe.point(mid)
            rows.append(row)
            steps += 1
            if g(row) < 0:
                lo = mid
            else:
                hi = mid
        bracket = [lo, hi]
        factor = math.sqrt(lo * hi)
        tie_row = probe.point(factor)
        rows.append(tie_row)
        close = abs(tie_row["iteration_s"] - t_opt) <= 1e-2 * t_opt
        status = "tie" if close else "step"
    else:
        factor = None
        # g < 0 on the whole grid: electrical T_ft < T_opt (the fat-tree wins at every price),
        # optical T_ft > T_opt (the optical design wins); g >= 0: the other way round
        fat_tree_wins = all(v < 0 for v in vals) == (sign > 0)
        status = "fat-tree-faster" if fat_tree_wins else "optical-faster"
    item = "switch_port" if mode == "electrical" else _optical_item(run.fabric)
    ref = B * 8 / 1e9 if mode == "electrical" else None
    base = prices.unit(item, ref)[0]
    curve = pd.DataFrame(rows).drop_duplicates("factor").sort_values("factor", ignore_index=True)
    curve.insert(1, "price_usd", curve["factor"] * base)
    opt_capex = cost(run.fabric, prices).capex_usd
    return BreakevenResult(
        mode=mode,
        design=design_fabric,
        status=status,
        price_usd=None if factor is None else factor * base,
        factor=factor,
        bracket=None if bracket is None else (float(bracket[0]), float(bracket[1])),
        base_price_usd=base,
        price_item=item if ref is None else f"{item}_{ref:g}G",
        optical_iteration_s=t_opt,
        optical_capex_usd=opt_capex,
        tie_iteration_s=None if tie_row is None else float(tie_row["iteration_s"]),
        curve=curve,
        steps=steps,
        params={
            "degree": d,
            "link_bandwidth": B,
            "servers": workload.servers,
            "gpus": workload.gpus,
            "workload": workload.name,
            "seed": seed,
            "rel_tol": rel_tol,
            "prices": prices.source,
            "simulations": probe.calls,
            "grid": list(GRID),
            "search_warning": _search_warning(run, design_fabric),
        },
    )


def _optical_item(fabric) -> str:
    """The optical device port the design is built on (patch panel unless it has OCSes)."""
    return "ocs_port" if bool(np.any(fabric.node_kind == "ocs")) else "patch_panel_port"
