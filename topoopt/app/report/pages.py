"""Whole report pages (self-contained HTML) assembled from the figure functions."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from topoopt.app.report.compare_figures import (
    iteration_gantt,
    ratio_bars,
    time_vs_capex,
    utilisation_cdf,
)
from topoopt.app.report.cost_figures import cost_breakdown_bars
from topoopt.app.report.design_figures import circuit_graph, optimizer_traces
from topoopt.app.report.html import page_html
from topoopt.app.report.time_units import time_unit
from topoopt.app.report.verdict import (
    best_rows,
    rounding_sentence,
    shown_name,
    verdict_sentences,
)
from topoopt.fabrics.circuits import Circuits

__all__ = [
    "SUMMARY_COLUMNS",
    "circuit_utilisation",
    "compare_figures",
    "compare_page",
    "compare_summary",
    "summary_columns",
]

SUMMARY_COLUMNS = (
    ("fabric", "fabric", None),
    ("iteration ms", "iteration_s", 1e3),
    ("comm ms", "comm_s", 1e3),
    ("exposed ms", "exposed_comm_s", 1e3),
    ("capex M$", "capex_usd", 1e-6),
    ("power kW", "power_w", 1e-3),
    ("Gbps/server", "server_bandwidth", 8e-9),
    ("x ideal", "ratio_to_ideal", 1.0),
    ("iter/s per M$", "iterations_per_s_per_musd", 1.0),
)
"""``(heading, column, scale)`` of the comparison summary (terminal and HTML); times are in ms
here, in seconds when a value passes 10 s (:func:`summary_columns`)."""

TIME_COLUMNS = ("iteration_s", "comm_s", "exposed_comm_s")


def summary_columns(table) -> tuple[tuple[str, str, float | None], ...]:
    """:data:`SUMMARY_COLUMNS` for ``table``: the time columns in seconds (headed ``s``) when any
    of them passes :data:`topoopt.app.report.time_units.SECONDS_ABOVE_S`, else in ms."""
    unit, factor = time_unit(*(table[c] for c in TIME_COLUMNS if c in table))
    return tuple(
        (head.replace(" ms", f" {unit}"), col, factor) if col in TIME_COLUMNS else (head, col, s)
        for head, col, s in SUMMARY_COLUMNS
    )


def compare_summary(table, keys: tuple[str, ...] = ()) -> pd.DataFrame:
    """The summary table of a comparison (the CLI's columns, in ms or s, M$, kW), ``keys`` columns
    (e.g. ``plan``, ``degree``) first; columns the table lacks are left out."""
    out = {k: table[k] for k in keys if k in table}
    for head, col, scale in summary_columns(table):
        if col == "fabric" and col in table:  # the ideal switch marked as a bound
            out[head] = table[col].map(shown_name)
        elif col in table:
            out[head] = table[col] if scale is None else table[col] * scale
    return pd.DataFrame(out)


def circuit_utilisation(circuits: Circuits, links) -> np.ndarray:
    """Utilisation over the iteration of each circuit row (the busier direction), from a
    simulation's per-link table (``src``, ``dst``, ``utilisation``; server ids first)."""
    c, n = circuits.rows, max(circuits.n, 1)
    net = links[(links["src"] < n) & (links["dst"] < n)]
    lo = np.minimum(net["src"].to_numpy(), net["dst"].to_numpy())
    hi = np.maximum(net["src"].to_numpy(), net["dst"].to_numpy())
    key = lo * n + hi
    ckey = c[:, 0] * n + c[:, 1]
    order = np.argsort(ckey)
    pos = np.searchsorted(ckey[order], key)
    ok = (pos < len(ckey)) & (ckey[order][np.clip(pos, 0, len(ckey) - 1)] == key)
    out = np.zeros(len(ckey))
    np.maximum.at(out, order[pos[ok]], net["utilisation"].to_numpy()[ok])
    return out


def compare_figures(res, prefix: str = "compare", label: str = "") -> list:
    """``(div_id, figure)`` pairs of one comparison (see :mod:`topoopt.app.studies.compare`);
    ``label`` prefixes every title."""
    lab = f"{label}: " if label else ""
    figs = [
        (
            f"{prefix}-time-vs-capex",
            time_vs_capex(res.table, title=f"{lab}iteration time vs network capex"),
        ),
        (f"{prefix}-ratios", ratio_bars(res.table, title=f"{lab}ratio to the ideal switch")),
        (
            f"{prefix}-capex-breakdown",
            cost_breakdown_bars(res.table, "capex", title=f"{lab}network capex by component"),
        ),
        (
            f"{prefix}-power-breakdown",
            cost_breakdown_bars(res.table, "power", title=f"{lab}network power by component"),
        ),
        (
            f"{prefix}-utilisation",
            utilisation_cdf(
                {k: v.links for k, v in res.iterations.items()}, title=f"{lab}link utilisation"
            ),
        ),
    ]
    best = min(
        (r for r in res.runs if r.design is not None),
        key=lambda r: res.iterations[r.name].iteration_s,
        default=None,
    )
    if best is not None:
        figs.append(
            (
                f"{prefix}-circuits",
                circuit_graph(
                    best.design.servers,
                    best.design.circuits,
                    circuit_utilisation(best.design.circuits, res.iterations[best.name].links),
                    rings=best.design.rings,
                    title=f"{lab}circuits of the {best.name} design",
                ),
            )
        )
        # every design that ran shows its optimizer trace (its final point if it records none)
        designed = {r.name: r.design for r in res.runs if r.design is not None}
        figs.append(
            (
                f"{prefix}-optimizer",
                optimizer_traces(designed, title=f"{lab}optimizer objective and bound"),
            )
        )
        figs.append(
            (
                f"{prefix}-timeline",
                iteration_gantt(
                    res.iterations[best.name].timeline,
                    title=f"{lab}iteration timeline on the {best.name} design",
                ),
            )
        )
    return figs


def compare_page(res, title: str, warnings: Sequence[str] = ()) -> str:
    """The self-contained HTML report of one comparison: the verdict
    (:func:`~topoopt.app.report.verdict.verdict_sentences`) and ``warnings`` (searches that fell
    back or were cut by the clock) open it."""
    p = res.params
    intro = (
        f"{p['workload']}: {p['gpus']} GPUs on {p['servers']} servers, {p['degree']} ports x "
        f"{p['link_bandwidth'] * 8 / 1e9:g} Gbps per server."
    )
    return page_html(
        compare_figures(res),
        title,
        intro=intro,
        summary=[("Summary (best rows in bold; ideal is a bound)", compare_summary(res.table))],
        verdict=[
            *verdict_sentences(res.table, res.iterations),
            *filter(None, [rounding_sentence(res.table, p.get("rounding_check", 0))]),
        ],
        highlight=best_rows(res.table),
        warnings=warnings,
    )
