"""The verdict of a comparison in two or three sentences: who wins at equal capex, by how much,
and what binds the runner-up (its busiest traffic class and link), computed from the table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from topoopt.app.report.time_units import time_unit

__all__ = [
    "ideal_note",
    "BOUNDS",
    "shown_name",
    "EQUAL_CAPEX_RTOL",
    "TIE_RTOL",
    "best_rows",
    "equal_capex_rows",
    "noisy_rows",
    "rounding_sentence",
    "verdict_sentences",
]

BOUNDS = ("ideal",)
"""Fabrics that are bounds, not products: never a winner, never on a cost plot."""

TIE_RTOL = 0.001
"""Two iteration times within this fraction are a tie (the design suite's rule)."""

EQUAL_CAPEX_RTOL = 0.02
"""A fabric is within the optical design's budget when its capex exceeds it by at most this
fraction (the cost-equivalent fat-tree buys what can be built, so it often costs a little
less than the budget it was given)."""

_REFERENCE = ("topoopt-best", "topoopt", "joint", "topoopt-released")
"""The optical design whose capex the cost-equivalent fat-tree spends, in order of preference."""


def shown_name(fabric: str) -> str:
    """A fabric's name as tables show it: a bound (:data:`BOUNDS`) is marked ``(bound)``, so its
    capex and perf/$ are not read as a product's.

    Examples
    --------
    >>> shown_name("ideal"), shown_name("joint")
    ('ideal (bound)', 'joint')
    """
    return f"{fabric} (bound)" if fabric in BOUNDS else fabric


def ideal_note(ratio: float, fabric: str = "") -> str:
    """The parenthesis after a ratio to the ideal switch: a bound, or, for a row that finished
    sooner, why it can: its switches aggregate gradients (a ``*-ina`` fabric: the ideal switch
    carries every worker's copy), or max-min sharing is not the schedule that finishes soonest.

    >>> print(ideal_note(1.2)); print(ideal_note(0.99891))
    (a bound, not a product)
    (a fluid bound, not a product: max-min sharing on this fabric's links finished 0.109 % sooner, docs/model.md)
    >>> print(ideal_note(0.601, "fat-tree-ina"))
    (a bound for networks that only forward, not a product: this fabric's switches add the gradients in the network, 39.9 % sooner, docs/ina.md)
    """  # noqa: E501
    if not ratio < 1.0:
        return "(a bound, not a product)"
    if str(fabric).endswith("-ina"):
        return (
            "(a bound for networks that only forward, not a product: this fabric's switches "
            f"add the gradients in the network, {100 * (1 - ratio):.3g} % sooner, docs/ina.md)"
        )
    return (
        f"(a fluid bound, not a product: max-min sharing on this fabric's links finished "
        f"{100 * (1 - ratio):.3g} % sooner, docs/model.md)"
    )


def _t(seconds: float) -> str:
    unit, k = time_unit([seconds])
    return f"{seconds * k:.4g} {unit}"


def _reference(table: pd.DataFrame) -> str | None:
    """The reference optical design (:data:`_REFERENCE`) of the table, if it has one."""
    return next((f for f in _REFERENCE if f in set(table["fabric"])), None)


def _budget(table: pd.DataFrame) -> float | None:
    """The capex of the reference optical design (:data:`_REFERENCE`), if the table has one."""
    ref = _reference(table)
    if ref is None:
        return None
    return float(table.loc[table["fabric"] == ref, "capex_usd"].iloc[0])


def _m(usd: float) -> str:
    return f"{usd / 1e6:.3f} M$"


def equal_capex_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The products (no :data:`BOUNDS`) that fit the reference optical design's budget: capex at
    most the design's (plus :data:`EQUAL_CAPEX_RTOL`); empty when the table has no optical
    design."""
    products = table[~table["fabric"].isin(BOUNDS)]
    c0 = _budget(table)
    if c0 is None:
        return products.iloc[0:0]
    ok = products["capex_usd"].notna() & products["iteration_s"].notna()
    return products[ok & (products["capex_usd"] <= c0 + EQUAL_CAPEX_RTOL * abs(c0))]


def fastest_product(table: pd.DataFrame):
    """The label of the fastest product row (not a bound, built), of rows within
    :data:`TIE_RTOL` of the fastest the cheapest (a fat-tree of a 65,536-port switch was named
    "fastest overall" at 12.5 M$ beside a hybrid of the same time at 0.064 M$), and the labels
    of the others within it; ``(None, [])`` without one.

    >>> t = pd.DataFrame({"fabric": ["ideal", "fat-tree", "hybrid"],
    ...                   "iteration_s": [1.0, 1.2, 1.2 * (1 + 1e-15)],
    ...                   "capex_usd": [0.0, 12.5e6, 6.4e4]})
    >>> fastest_product(t)
    (2, [1])
    """
    t = pd.to_numeric(table["iteration_s"], errors="coerce")
    products = table[~table["fabric"].isin(BOUNDS) & t.notna()]
    if not len(products):
        return None, []
    tp = t[products.index].astype(float)
    tied = products[tp <= float(tp.min()) * (1 + TIE_RTOL)]
    cost = pd.to_numeric(tied["capex_usd"], errors="coerce").fillna(float("inf"))
    order = sorted(tied.index, key=lambda i: (float(cost[i]), float(tp[i])))
    return order[0], order[1:]


def best_rows(table: pd.DataFrame) -> set[int]:
    """Positions of the rows to highlight: the fastest product overall and the fastest at equal
    capex."""
    out = set()
    best, _ = fastest_product(table)  # rows not built have no time
    if best is not None:
        out.add(table.index.get_loc(best))
    same = equal_capex_rows(table)
    same = same[pd.to_numeric(same["iteration_s"], errors="coerce").notna()]
    if len(same) >= 2:
        out.add(table.index.get_loc(same["iteration_s"].astype(float).idxmin()))
    return out


def _binding(name: str, it: Any) -> str | None:
    """What binds fabric ``name``: its largest critical-path class and its busiest link."""
    parts = []
    by_class = getattr(it, "comm_by_class", None) or {}
    if by_class:
        cls, sec = max(by_class.items(), key=lambda kv: kv[1])
        if sec > 0:
            parts.append(f"most of its critical-path communication is {cls} ({_t(sec)})")
    links = getattr(it, "links", None)
    if links is not None and len(links) and "utilisation" in links:
        net = links[links["kind"] != "intra"] if "kind" in links else links
        if len(net):
            row = net.loc[net["utilisation"].idxmax()]
            parts.append(
                f"its busiest network link (node {int(row['src'])} -> {int(row['dst'])}) is busy "
                f"{100 * float(row['utilisation']):.0f} % of the iteration"
            )
    return f"On {name}, " + " and ".join(parts) + "." if parts else None


def verdict_sentences(table: pd.DataFrame, iterations: Mapping[str, Any] | None = None) -> list:
    """Two or three sentences that state a comparison's result.

    1. At equal capex (the rows of :func:`equal_capex_rows`: at most the reference optical
       design's capex, which the sentence names): the fastest and its margin over the runner-up,
       in per cent of the runner-up's iteration time, each with its own capex (the
       cost-equivalent fat-tree often buys less than its budget: it buys what can be built).
    2. The fastest product overall, its ratio to the ideal switch (named as a bound) and capex.
    3. With ``iterations`` (fabric -> :class:`~topoopt.flowsim.iteration.IterationResult`): what
       binds the runner-up at equal capex (:func:`_binding`).

    Examples
    --------
    >>> t = pd.DataFrame({"fabric": ["ideal", "fat-tree-cost-equivalent", "joint"],
    ...                   "iteration_s": [1.0, 1.2, 1.5], "capex_usd": [9e4, 7.7e4, 7.7e4],
    ...                   "ratio_to_ideal": [1.0, 1.2, 1.25]})
    >>> for s in verdict_sentences(t):
    ...     print(s)
    At equal capex (at most 0.077 M$, joint's capex), fat-tree-cost-equivalent is the fastest: 1200 ms per iteration for 0.077 M$, 20.0 % less than joint (1500 ms, 0.077 M$).
    Fastest overall: fat-tree-cost-equivalent, 1.200x the ideal switch (a bound, not a product), for 0.077 M$.
    """  # noqa: E501
    out = []
    same = equal_capex_rows(table).sort_values("iteration_s", kind="stable")
    runner = None
    if len(same) >= 2:
        win, runner = same.iloc[0], same.iloc[1]
        gain = 1 - float(win["iteration_s"]) / float(runner["iteration_s"])
        head = f"At equal capex (at most {_m(float(_budget(table)))}, {_reference(table)}'s capex)"
        tw, tr = _t(float(win["iteration_s"])), _t(float(runner["iteration_s"]))
        cw, cr = _m(float(win["capex_usd"])), _m(float(runner["capex_usd"]))
        if gain < TIE_RTOL:
            out.append(
                f"{head}, {win['fabric']} and {runner['fabric']} tie: {tw} ({cw}) and {tr} "
                f"({cr}) per iteration (within {100 * TIE_RTOL:.1f} %)."
            )
        else:
            out.append(
                f"{head}, {win['fabric']} is the fastest: {tw} per iteration for {cw}, "
                f"{100 * gain:.1f} % less than {runner['fabric']} ({tr}, {cr})."
            )
    at, also = fastest_product(table)
    if at is not None:
        best = table.loc[at]
        tie = "".join(
            f"; {table.loc[i, 'fabric']} is as fast (within {100 * TIE_RTOL:.1f} %) for "
            f"{float(table.loc[i, 'capex_usd']) / 1e6:.3f} M$"
            for i in also
        )
        out.append(
            f"Fastest overall: {best['fabric']}, {float(best['ratio_to_ideal']):.3f}x the ideal "
            f"switch {ideal_note(float(best['ratio_to_ideal']), str(best['fabric']))}, for "
            f"{float(best['capex_usd']) / 1e6:.3f} M${tie}."
        )
    if iterations and runner is not None and runner["fabric"] in iterations:
        why = _binding(str(runner["fabric"]), iterations[runner["fabric"]])
        if why:
            out.append(why)
    return out


def noisy_rows(table: pd.DataFrame) -> str | None:
    """The rows a rounding check moves by more than
    :data:`~topoopt.flowsim.conditioning.WELL_CONDITIONED`, as a phrase ("rounding alone moves
    X by up to p % ... ; the other rows agree to s"); None where none is (or none was checked).

    >>> t = pd.DataFrame({"fabric": ["torus", "rail"], "rounding_spread": [0.0125, 2e-14],
    ...                   "rounding_conditioned": ["ill", "well"]})
    >>> noisy_rows(t)
    'rounding alone moves torus by up to 1.25 % (its digits past that are noise); the other rows agree to 2.0e-14'
    """  # noqa: E501
    if "rounding_conditioned" not in table:
        return None
    ill = table[table["rounding_conditioned"] == "ill"]
    well = table[table["rounding_conditioned"] == "well"]
    if ill.empty:
        return None
    parts = ", ".join(
        f"{r['fabric']} by up to {100 * float(r['rounding_spread']):.3g} %"
        for _, r in ill.iterrows()
    )
    whose = "its" if len(ill) == 1 else "their"
    rest = "" if well.empty else f"; the other rows agree to {well['rounding_spread'].max():.1e}"
    return f"rounding alone moves {parts} ({whose} digits past that are noise){rest}"


def rounding_sentence(table: pd.DataFrame, runs: int) -> str | None:
    """What ``rounding_check`` found, in one sentence: the rows whose iteration rounding alone
    moves by more than :data:`~topoopt.flowsim.conditioning.WELL_CONDITIONED` (with their
    spread, :func:`noisy_rows`), or that every row is well conditioned; None without the check.

    >>> t = pd.DataFrame({"fabric": ["ideal", "torus", "rail"], "iteration_s": [1.0, 1.7, 1.1],
    ...                   "rounding_spread": [1e-15, 0.0125, 2e-14],
    ...                   "rounding_conditioned": ["well", "ill", "well"]})
    >>> print(rounding_sentence(t, 4))
    Rounding check (4 runs a row, every fabric link's bandwidth scaled by 1 + e, |e| <= 1e-13): rounding alone moves torus by up to 1.25 % (its digits past that are noise); the other rows agree to 2.0e-14.
    """  # noqa: E501
    if "rounding_conditioned" not in table or not runs:
        return None
    head = (
        f"Rounding check ({runs} run{'s' if runs > 1 else ''} a row, every fabric link's "
        "bandwidth scaled by 1 + e, |e| <= 1e-13)"
    )
    noisy = noisy_rows(table)
    if noisy is None:
        well = table[table["rounding_conditioned"] == "well"]
        return f"{head}: every row agrees to {float(well['rounding_spread'].max()):.1e}."
    return f"{head}: {noisy}."
