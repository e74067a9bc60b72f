"""Figures of transparent costs (issue 13): capex and power by component with each fabric's
bandwidth per server, and the breakeven curve of ``topoopt breakeven``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from topoopt.app.report.palette import is_bound

__all__ = ["cost_breakdown_bars", "breakeven_curve"]


def cost_breakdown_bars(
    table: pd.DataFrame, what: str = "capex", title: str | None = None
) -> go.Figure:
    """Capex (``what="capex"``, M$) or power (``"power"``, kW) of each fabric stacked by
    component (the rows' ``capex_breakdown`` / ``power_breakdown``); the x labels carry each
    fabric's network bandwidth per server (``server_bandwidth``, Gbps) and the cost-equivalent
    fat-tree's switch and tiers (``fabric_info``). The ideal switch (a bound, not a product:
    :data:`topoopt.app.report.palette.BOUNDS`) has no bar."""
    table = table[~table["fabric"].map(lambda f: is_bound(str(f)))]
    col, scale, unit = {
        "capex": ("capex_breakdown", 1e-6, "million USD"),
        "power": ("power_breakdown", 1e-3, "kW"),
    }[what]
    labels = []
    for _, r in table.iterrows():
        lab = f"{r['fabric']}<br>{r['server_bandwidth'] * 8e-9:.4g} Gbps/server"
        info = r.get("fabric_info")
        if isinstance(info, dict) and info.get("method") == "catalogue":
            lab += f"<br>{info['tiers']}-tier {info['switch']}"
        labels.append(lab)
    parts = [r if isinstance(r, dict) else {} for r in table[col]]
    comps = list(dict.fromkeys(c for p in parts for c in p))
    fig = go.Figure()
    for c in comps:
        fig.add_bar(
            x=labels,
            y=[p.get(c, 0.0) * scale for p in parts],
            name=c,
            hovertemplate=f"{c}: %{{y:.4g}} {unit}<extra></extra>",
        )
    fig.update_layout(
        barmode="stack",
        title=title or f"network {what} by component",
        yaxis={"title": f"{what} ({unit})"},
        legend={"title": "component"},
    )
    return fig


def breakeven_curve(
    curve: pd.DataFrame,
    optical_s: float,
    price: float | None,
    price_label: str = "electrical switch-port price (USD per port)",
    title: str = "Iteration time vs price",
) -> go.Figure:
    """Iteration time of the cost-equivalent fat-tree at each price (``curve`` columns
    ``price_usd``, ``iteration_s``, ``server_bandwidth``) against the optical design's
    (``optical_s``, flat), with the breakeven ``price`` marked (``None``: no tie in range)."""
    c = curve[np.isfinite(curve["iteration_s"])].sort_values("price_usd")  # inf: no fat-tree
    fig = go.Figure()
    fig.add_scatter(
        x=c["price_usd"],
        y=c["iteration_s"] * 1e3,
        mode="lines+markers",
        name="cost-equivalent fat-tree",
        customdata=c["server_bandwidth"] * 8e-9,
        hovertemplate=(
            "price %{x:.4g} USD<br>iteration %{y:.4g} ms<br>%{customdata:.4g} Gbps/server"
            "<extra></extra>"
        ),
    )
    fig.add_scatter(
        x=[c["price_usd"].min(), c["price_usd"].max()],
        y=[optical_s * 1e3] * 2,
        mode="lines",
        name="optical design",
        line={"dash": "dash"},
    )
    if price is not None:
        fig.add_vline(x=price, line_dash="dot", annotation_text=f"breakeven {price:.4g} USD")
    fig.update_layout(
        title=title,
        xaxis={"title": price_label, "type": "log"},
        yaxis={"title": "iteration time (ms)"},
    )
    return fig
