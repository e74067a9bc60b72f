"""Figures of a fabric comparison: iteration time vs capex, ratios to the ideal switch, link
utilisation CDFs, and the iteration timeline (Gantt chart)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

__all__ = ["time_vs_capex", "ratio_bars", "utilisation_cdf", "iteration_gantt"]


def time_vs_capex(table: pd.DataFrame, title: str = "Iteration time vs network capex") -> go.Figure:
    """One point per fabric (the TopoOpt paper's view): capex on x, iteration time on y."""
    fig = go.Figure(
        go.Scatter(
            x=table["capex_usd"] / 1e6,
            y=table["iteration_s"] * 1e3,
            mode="markers+text",
            text=table["fabric"],
            textposition="top center",
            marker={"size": 11},
            hovertemplate="%{text}<br>capex %{x:.3f} M$<br>iteration %{y:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"title": "network capex (million USD)"},
        yaxis={"title": "iteration time (ms)"},
    )
    return fig


def ratio_bars(table: pd.DataFrame, title: str = "Ratio to the ideal switch") -> go.Figure:
    """Iteration and communication time of each fabric over the ideal switch's."""
    ideal = table.loc[table["fabric"] == "ideal"].iloc[0]
    fig = go.Figure()
    fig.add_bar(x=table["fabric"], y=table["iteration_s"] / ideal["iteration_s"], name="iteration")
    fig.add_bar(x=table["fabric"], y=table["comm_s"] / ideal["comm_s"], name="communication")
    fig.add_hline(y=1.0, line_dash="dash")
    fig.update_layout(barmode="group", title=title, yaxis={"title": "x ideal switch"})
    return fig


def utilisation_cdf(links: dict[str, pd.DataFrame], title: str = "Link utilisation") -> go.Figure:
    """CDF of network-link utilisation (bytes / (capacity x iteration time)) per fabric."""
    fig = go.Figure()
    for name, frame in links.items():
        net = frame[frame["kind"] != "intra-server"] if "kind" in frame else frame
        u = np.sort(net["utilisation"].to_numpy())
        if u.size == 0:
            continue
        fig.add_scatter(
            x=u, y=np.arange(1, u.size + 1) / u.size, mode="lines", line={"shape": "hv"}, name=name
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "utilisation over the iteration"},
        yaxis={"title": "fraction of links", "range": [0, 1]},
    )
    return fig


def iteration_gantt(
    timeline: pd.DataFrame, title: str = "Iteration timeline", max_rows: int = 4000
) -> go.Figure:
    """Compute and communication tasks per stage; exposed (compute-blocking) communication
    highlighted. Long timelines keep the first ``max_rows`` tasks by start time."""
    tl = timeline.sort_values("start_s").head(max_rows)
    lane = tl["stage"].fillna(-1).astype(int).map(lambda s: f"stage {s}" if s >= 0 else "global")
    colours = {"compute": "#4C78A8", "comm": "#E45756", "sync": "#F58518", "optimizer": "#54A24B"}
    fig = go.Figure()
    for kind, part in tl.groupby("kind", sort=True):
        idx = part.index
        fig.add_bar(
            base=part["start_s"] * 1e3,
            x=(part["finish_s"] - part["start_s"]) * 1e3,
            y=lane.loc[idx],
            orientation="h",
            name=str(kind) + (" (blocking)" if kind == "comm" else ""),
            marker={"color": colours.get(str(kind), "#999")},
            customdata=np.column_stack([part["class"].astype(str), part["phase"].astype(str)]),
            hovertemplate=(
                "%{y}<br>%{customdata[0]} %{customdata[1]}<br>"
                "start %{base:.3f} ms<br>duration %{x:.3f} ms<extra></extra>"
            ),
        )
    fig.update_layout(
        title=title,
        barmode="overlay",
        xaxis={"title": "time (ms)"},
        yaxis={"autorange": "reversed"},
        height=max(350, 22 * lane.nunique() + 150),
    )
    return fig
