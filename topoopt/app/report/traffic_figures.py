"""Figures of a Workload's traffic: the server matrix heatmap and the class breakdown."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from traffic.expand import PairTraffic
from traffic.workload import CLASSES

__all__ = ["server_heatmap", "class_bars", "format_bytes"]


def format_bytes(b: float) -> str:
    """Bytes with a decimal prefix, e.g. ``1.5 GB``.

    >>> format_bytes(1.5e9)
    '1.5 GB'
    >>> format_bytes(0)
    '0 B'
    """
    if b <= 0:
        return "0 B"
    units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"]
    k = min(int(math.log10(b) // 3), len(units) - 1)
    return f"{b / 10 ** (3 * k):.3g} {units[k]}"


def _grid(n_blocks: int, flat: np.ndarray, weights: np.ndarray) -> np.ndarray:
    return np.bincount(flat, weights=weights, minlength=n_blocks * n_blocks).reshape(
        n_blocks, n_blocks
    )


def server_heatmap(pairs: PairTraffic, max_cells: int = 256, title: str | None = None) -> go.Figure:
    """Heatmap of a server-level pair matrix, log colour scale, with a menu to show one class.

    Hover shows source, destination, bytes and the classes that contribute. Clusters with more
    than ``max_cells`` servers are shown in blocks of consecutive servers (said in the title).

    Parameters
    ----------
    pairs : PairTraffic
        Server-level pairs (``expand(..., level="server")``).
    max_cells : int
        Largest number of rows/columns drawn.
    """
    n = pairs.n
    block = max(1, math.ceil(n / max_cells))
    nb = math.ceil(n / block)
    flat = (pairs.src // block) * nb + pairs.dst // block
    total = _grid(nb, flat, pairs.bytes)
    mask = np.zeros(nb * nb, dtype=np.int64)
    np.bitwise_or.at(mask, flat, (1 << pairs.cls.astype(np.int64)))
    mask = mask.reshape(nb, nb)
    names = np.array(
        [
            ", ".join(CLASSES[c] for c in range(len(CLASSES)) if m >> c & 1)
            for m in range(1 << len(CLASSES))
        ],
        dtype=object,
    )
    views = [("all classes", total, names[mask])]
    present = np.unique(pairs.cls)
    if present.size > 1:
        for c in present:
            sel = pairs.cls == c
            views.append((CLASSES[c], _grid(nb, flat[sel], pairs.bytes[sel]), None))
    positive = total[total > 0]
    lo = math.floor(math.log10(positive.min())) if positive.size else 0
    hi = math.ceil(math.log10(positive.max())) if positive.size else 1
    ticks = list(range(lo, hi + 1))
    axis = np.arange(nb) * block
    unit = "server" if block == 1 else f"servers (blocks of {block})"
    fmt = np.vectorize(format_bytes, otypes=[object])
    fig = go.Figure()
    for k, (label, grid, cls_names) in enumerate(views):
        z = np.where(grid > 0, np.log10(np.where(grid > 0, grid, 1.0)), np.nan)
        who = cls_names if cls_names is not None else np.full(grid.shape, label, dtype=object)
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=axis,
                y=axis,
                customdata=np.stack([fmt(grid), who], axis=-1),
                colorscale="Viridis",
                zmin=lo,
                zmax=hi,
                visible=k == 0,
                name=label,
                colorbar={
                    "title": {"text": "bytes"},
                    "tickvals": ticks,
                    "ticktext": [format_bytes(10.0**t) for t in ticks],
                },
                hovertemplate=(
                    "source %{y}<br>destination %{x}<br>%{customdata[0]}<br>"
                    "classes: %{customdata[1]}<extra></extra>"
                ),
            )
        )
    if len(views) > 1:
        buttons = [
            {
                "label": label,
                "method": "update",
                "args": [{"visible": [j == k for j in range(len(views))]}],
            }
            for k, (label, _, _) in enumerate(views)
        ]
        fig.update_layout(
            updatemenus=[{"buttons": buttons, "direction": "down", "x": 1.0, "y": 1.12}]
        )
    fig.update_layout(
        title=title or f"Traffic per iteration between {unit} (log scale)",
        xaxis={"title": f"destination {unit}", "constrain": "domain"},
        yaxis={
            "title": f"source {unit}",
            "autorange": "reversed",
            "scaleanchor": "x",
            "constrain": "domain",
        },
        height=650,
    )
    return fig


def class_bars(table: pd.DataFrame, title: str = "Bytes per iteration by class") -> go.Figure:
    """Grouped bars of intra- and inter-server bytes per class (from ``class_table``)."""
    fig = go.Figure()
    for col, name in (
        ("intra_server_bytes", "intra-server"),
        ("inter_server_bytes", "inter-server"),
    ):
        fig.add_bar(x=table["class"], y=table[col], name=name)
    fig.update_layout(
        barmode="group",
        title=title,
        yaxis={"title": "bytes", "type": "log", "exponentformat": "SI"},
    )
    return fig
