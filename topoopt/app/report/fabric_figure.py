"""Draw a fabric with plotly: servers, switches and optical devices, links coloured by kind."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from topoopt.fabrics.fabric import Fabric

__all__ = ["fabric_figure", "fabric_layout", "DIV_ID"]

DIV_ID = "topoopt-fabric"
"""Fixed ``div_id`` of the HTML export, so the same fabric gives the same file."""

_NODE_STYLE = {
    "server": ("circle", "#1f77b4"),
    "switch": ("square", "#ff7f0e"),
    "ocs": ("diamond", "#2ca02c"),
    "patch-panel": ("diamond-open", "#2ca02c"),
}
_LINK_COLOUR = {"electrical": "#7f7f7f", "optical": "#d62728", "intra-server": "#9467bd"}


def fabric_layout(fabric: Fabric) -> np.ndarray:
    """``(N, 2)`` drawing positions.

    Tori: servers on their (flattened) grid; tiered fabrics (switch layers): one row per layer,
    servers at the bottom; direct-connect: servers on a circle. Optical devices sit on a row
    above everything else.
    """
    n, s = fabric.n_nodes, fabric.n_servers
    pos = np.zeros((n, 2))
    if fabric.coords is not None:
        c = fabric.coords
        dims = np.asarray(fabric.params["dims"])
        x = c[:, 0] + (c[:, 2] * (dims[0] + 1) if c.shape[1] > 2 else 0)
        y = c[:, 1] if c.shape[1] > 1 else np.zeros(s)
        pos[:s] = np.column_stack([x, y])
        top = float(pos[:s, 1].max()) + 2
    elif np.any(fabric.node_kind == "switch"):
        for layer in np.unique(fabric.node_layer):
            idx = np.flatnonzero((fabric.node_layer == layer) & (fabric.node_kind != "ocs"))
            idx = idx[fabric.node_kind[idx] != "patch-panel"]
            if idx.size:
                pos[idx, 0] = (np.arange(idx.size) + 0.5) / idx.size * s
                pos[idx, 1] = 3.0 * layer
        top = 3.0 * float(fabric.node_layer.max()) + 3
    else:
        ang = 2 * np.pi * np.arange(s) / s
        r = s / (2 * np.pi)
        pos[:s] = np.column_stack([r * np.cos(ang), r * np.sin(ang)])
        top = r + 3
    dev = np.flatnonzero(np.isin(fabric.node_kind, ("ocs", "patch-panel")))
    if dev.size:
        lo, hi = float(pos[:s, 0].min()), float(pos[:s, 0].max())
        pos[dev, 0] = lo + (np.arange(dev.size) + 0.5) / dev.size * max(hi - lo, 1.0)
        pos[dev, 1] = top
    return pos


def fabric_figure(fabric: Fabric, title: str | None = None) -> go.Figure:
    """A plotly figure of ``fabric``: one line trace per link kind, one marker trace per node kind.

    Optical devices are drawn unlinked (circuits cross them transparently).
    """
    pos = fabric_layout(fabric)
    fig = go.Figure()
    first = np.arange(0, fabric.n_links, 2)
    for kind in ("electrical", "optical", "intra-server"):
        sel = first[fabric.link_kind[first] == kind]
        if not sel.size:
            continue
        xs = np.full(3 * sel.size, np.nan)
        ys = np.full(3 * sel.size, np.nan)
        xs[0::3], xs[1::3] = pos[fabric.src[sel], 0], pos[fabric.dst[sel], 0]
        ys[0::3], ys[1::3] = pos[fabric.src[sel], 1], pos[fabric.dst[sel], 1]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                name=f"{kind} links ({int(fabric.multiplicity[sel].sum())})",
                line={"color": _LINK_COLOUR[kind], "width": 1},
                hoverinfo="skip",
            )
        )
    for kind, (symbol, colour) in _NODE_STYLE.items():
        idx = np.flatnonzero(fabric.node_kind == kind)
        if not idx.size:
            continue
        fig.add_trace(
            go.Scatter(
                x=pos[idx, 0],
                y=pos[idx, 1],
                mode="markers",
                name=f"{kind} ({idx.size})",
                marker={"symbol": symbol, "color": colour, "size": 8 if kind == "server" else 11},
                text=[f"{kind} {i} ({int(fabric.node_ports[i])} ports)" for i in idx],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        title=title or f"{fabric.family}: {fabric.n_servers} servers",
        showlegend=True,
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        plot_bgcolor="white",
        template="plotly_white",
    )
    return fig
