"""Figure of ``topoopt reconfig``'s delay sweep: iteration time against reconfiguration delay."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["delay_sweep_figure", "SWEEP_SERIES"]

SWEEP_SERIES = (
    ("iteration_s", "chosen schedule", "solid"),
    ("static_iteration_s", "static joint", "dot"),
    ("ocs-reconfig_s", "OCS-reconfig", "dash"),
    ("sipml_s", "SiP-ML-like", "dashdot"),
    ("lower_bound_s", "lower bound", "longdash"),
)
"""Columns of :func:`solvers.reconfig.search.delay_sweep` drawn, their names and dashes."""


def delay_sweep_figure(table: pd.DataFrame, title: str = "Iteration time vs delay") -> go.Figure:
    """Iteration time (ms) against the switch's reconfiguration delay (us, log scale).

    ``table`` has the columns of :func:`solvers.reconfig.search.delay_sweep` (missing series
    are skipped) and optionally ``plan`` (one colour per plan, one dash per series).

    Examples
    --------
    >>> t = pd.DataFrame({"delay_s": [1e-5, 1e-3], "iteration_s": [1.0, 2.0],
    ...                   "static_iteration_s": [2.0, 2.0], "lower_bound_s": [0.5, 0.5]})
    >>> fig = delay_sweep_figure(t)
    >>> [tr.name for tr in fig.data], fig.layout.xaxis.type
    (['chosen schedule', 'static joint', 'lower bound'], 'log')
    """
    plans = table["plan"].drop_duplicates().tolist() if "plan" in table else [None]
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
    fig = go.Figure()
    for i, plan in enumerate(plans):
        rows = table if plan is None else table[table["plan"] == plan]
        rows = rows.sort_values("delay_s")
        for j, (col, name, dash) in enumerate(SWEEP_SERIES):
            if col not in rows:
                continue
            # one plan: a colour per series; several: a colour per plan, a dash per series
            colour = palette[(j if len(plans) == 1 else i) % len(palette)]
            label = name if plan is None else f"{plan}: {name}"
            fig.add_scatter(
                x=rows["delay_s"] * 1e6,
                y=rows[col] * 1e3,
                name=label,
                mode="lines+markers",
                line={"dash": dash, "color": colour},
                hovertemplate=f"{label}<br>delay %{{x:.4g}} us: %{{y:.4g}} ms<extra></extra>",
            )
    fig.update_layout(
        title=title,
        xaxis={"title": "reconfiguration delay (us)", "type": "log"},
        yaxis={"title": "iteration time (ms)", "rangemode": "tozero"},
        legend={"title": "schedule"},
    )
    return fig
