"""Figures of an optical design: the circuit graph with loads and ring overlays, and the
optimizer's objective and bound over time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from topoopt.report.html import page_html

__all__ = ["circuit_graph", "optimizer_trace", "design_page"]


def _circle(n: int) -> tuple[np.ndarray, np.ndarray]:
    a = 2 * np.pi * np.arange(n) / max(n, 1)
    return np.cos(a), np.sin(a)


def circuit_graph(
    servers: int,
    circuits: np.ndarray,
    utilisation: np.ndarray | None = None,
    rings: Sequence[dict] = (),
    max_rings: int = 4,
    title: str = "Circuit topology",
) -> go.Figure:
    """Servers on a circle; one line per server pair with circuits.

    Parameters
    ----------
    servers : int
    circuits : numpy.ndarray
        ``(E, 3)`` rows ``[u, v, count]``.
    utilisation : numpy.ndarray, optional
        ``(E,)`` peak utilisation of each pair's circuits (colour); circuit count otherwise.
    rings : sequence of dict
        Design rings (``order`` lists servers); the first ``max_rings`` are overlaid as dashed
        closed paths, hidden until clicked in the legend.
    """
    x, y = _circle(servers)
    c = np.asarray(circuits, np.int64).reshape(-1, 3)
    fig = go.Figure()
    value = np.asarray(utilisation, float) if utilisation is not None else c[:, 2].astype(float)
    label = "utilisation" if utilisation is not None else "circuits"
    vmax = float(value.max()) if value.size else 1.0
    # group edges by width so that the figure has few traces (one per circuit count)
    for count in np.unique(c[:, 2]) if len(c) else []:
        sel = c[:, 2] == count
        u, v = c[sel, 0], c[sel, 1]
        xs = np.column_stack([x[u], x[v], np.full(u.size, np.nan)]).ravel()
        ys = np.column_stack([y[u], y[v], np.full(u.size, np.nan)]).ravel()
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"width": 1 + 1.5 * float(count), "color": "rgba(60,90,160,0.45)"},
                name=f"{int(count)} circuit(s) per pair",
                hoverinfo="skip",
            )
        )
    # midpoints carry the hover text and the colour (load or count)
    if len(c):
        mx, my = (x[c[:, 0]] + x[c[:, 1]]) / 2, (y[c[:, 0]] + y[c[:, 1]]) / 2
        fig.add_trace(
            go.Scatter(
                x=mx,
                y=my,
                mode="markers",
                marker={
                    "size": 6,
                    "color": value,
                    "colorscale": "Turbo",
                    "cmin": 0.0,
                    "cmax": vmax if vmax > 0 else 1.0,
                    "colorbar": {"title": {"text": label}},
                },
                customdata=np.column_stack([c, value]),
                hovertemplate=(
                    "servers %{customdata[0]} - %{customdata[1]}<br>"
                    f"circuits %{{customdata[2]}}<br>{label} %{{customdata[3]:.3g}}<extra></extra>"
                ),
                name=label,
            )
        )
    for k, r in enumerate(list(rings)[:max_rings]):
        order = np.asarray(r["order"], np.int64)
        o = np.append(order, order[:1])
        fig.add_trace(
            go.Scatter(
                x=x[o] * (0.92 - 0.04 * k),
                y=y[o] * (0.92 - 0.04 * k),
                mode="lines",
                line={"dash": "dot", "width": 1.5},
                name=f"ring {k + 1} ({r.get('phase', '')}, weight {float(r['weight']):.2f})",
                visible="legendonly",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=y,
            mode="markers+text" if servers <= 32 else "markers",
            text=[str(i) for i in range(servers)],
            textposition="top center",
            marker={"size": 9 if servers <= 64 else 5, "color": "#333"},
            name="servers",
            hovertemplate="server %{text}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"visible": False},
        yaxis={"visible": False, "scaleanchor": "x"},
        height=700,
        showlegend=True,
        legend={"orientation": "h", "yanchor": "top", "y": -0.02, "x": 0.0},
    )
    return fig


def optimizer_trace(
    trace: Sequence[dict], title: str = "Optimizer: objective and bound"
) -> go.Figure:
    """Incumbent objective and lower bound over wall time (``trace`` rows: ``t``, ``objective_s``,
    ``lower_bound_s``)."""
    t = [float(r["t"]) for r in trace]
    fig = go.Figure()
    fig.add_scatter(
        x=t,
        y=[float(r["objective_s"]) * 1e3 for r in trace],
        mode="lines+markers",
        line={"shape": "hv"},
        name="incumbent",
    )
    fig.add_scatter(
        x=t,
        y=[float(r["lower_bound_s"]) * 1e3 for r in trace],
        mode="lines+markers",
        line={"shape": "hv", "dash": "dash"},
        name="lower bound",
    )
    fig.update_layout(
        title=title, xaxis={"title": "wall time (s)"}, yaxis={"title": "communication time (ms)"}
    )
    return fig


def design_page(design, problem=None, title: str = "Design") -> str:
    """Self-contained HTML of a design: circuit graph (coloured by peak per-phase utilisation
    when ``problem`` is given) and the optimizer trace when the design records one."""
    util = None
    if problem is not None:
        from solvers.congestion import circuit_links, evaluate_routing

        ev = evaluate_routing(
            problem, design.circuits, design.phase_routings(problem), keep_loads=True
        )
        src, dst, cap = circuit_links(design.circuits, design.link_bandwidth)
        times = np.where(ev.phase_times > 0, ev.phase_times, np.inf)
        per_phase = [load / (cap * t) for load, t in zip(ev.link_loads, times, strict=True)]
        link_util = np.max(per_phase, axis=0) if per_phase else np.zeros(len(cap))
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        key = lo * design.servers + hi
        # design.circuits is canonical (rows u < v, sorted), so its keys are ascending
        ckey = design.circuits[:, 0] * design.servers + design.circuits[:, 1]
        util = np.zeros(len(ckey))
        np.maximum.at(util, np.searchsorted(ckey, key), np.nan_to_num(link_util))
    figs = [
        (
            "design-circuits",
            circuit_graph(design.servers, design.circuits, util, design.rings, title=title),
        )
    ]
    trace = design.info.get("trace") if isinstance(design.info, dict) else None
    if trace:
        figs.append(("design-optimizer", optimizer_trace(trace)))
    gap = design.gap if math.isfinite(design.gap) else float("nan")
    intro = (
        f"{design.solver}: objective {design.objective_s * 1e3:.4g} ms, lower bound "
        f"{design.lower_bound_s * 1e3:.4g} ms, gap {gap:.2%}, status {design.status}, "
        f"{design.wall_s:.2f} s."
    )
    return page_html(figs, title, intro=intro)
