"""Figures of an optical design: the circuit graph with loads and ring overlays, and the
optimizer's objective and bound over time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from topoopt.app.report.html import page_html
from topoopt.fabrics.circuits import Circuits

__all__ = [
    "circuit_graph",
    "optimizer_trace",
    "optimizer_traces",
    "design_trace",
    "design_summary",
    "design_page",
]


def _circle(n: int) -> tuple[np.ndarray, np.ndarray]:
    a = 2 * np.pi * np.arange(n) / max(n, 1)
    return np.cos(a), np.sin(a)


def circuit_graph(
    servers: int,
    circuits: Circuits,
    utilisation: np.ndarray | None = None,
    rings: Sequence[dict] = (),
    max_rings: int = 4,
    title: str = "Circuit topology",
) -> go.Figure:
    """Servers on a circle; one line per server pair with circuits.

    Parameters
    ----------
    servers : int
    circuits : Circuits
        The circuits on the ``servers`` servers.
    utilisation : numpy.ndarray, optional
        ``(E,)`` peak utilisation of each pair's circuits (colour); circuit count otherwise.
    rings : sequence of dict
        Design rings (``order`` lists servers); the first ``max_rings`` are overlaid as dashed
        closed paths, hidden until clicked in the legend.
    """
    x, y = _circle(servers)
    c = circuits.rows
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
    fig = go.Figure()
    for key, name, dash in (
        ("objective_s", "incumbent", "solid"),
        ("lower_bound_s", "lower bound", "dash"),
    ):
        pts = [(float(r["t"]), float(r[key])) for r in trace if math.isfinite(float(r[key]))]
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] * 1e3 for p in pts],
            mode="lines+markers",
            line={"shape": "hv", "dash": dash},
            name=name,
        )
    fig.update_layout(
        title=title, xaxis={"title": "wall time (s)"}, yaxis={"title": "objective (ms)"}
    )
    return fig


def design_trace(design) -> list[dict]:
    """The optimizer trace a design records (``info["trace"]``), or, for a solver that records
    none, its final state as a one-row trace (``t`` = wall time), so a design always has one."""
    info = design.info if isinstance(design.info, dict) else {}
    trace = info.get("trace")
    if trace:
        return [dict(r) for r in trace]
    return [
        {
            "t": float(design.wall_s),
            "objective_s": float(design.objective_s),
            "lower_bound_s": float(design.lower_bound_s),
        }
    ]


def optimizer_traces(
    designs: dict[str, object], title: str = "Optimizer: objective and bound"
) -> go.Figure:
    """Incumbent (solid, markers) and lower bound (dashed) over wall time of every design in
    ``designs`` (name -> design), one colour per design (:func:`design_trace`; a solver without a
    trace shows its final point). Non-finite values are left out."""
    from topoopt.app.report.palette import fabric_styles

    fig = go.Figure()
    styles = fabric_styles(designs)
    for name, design in designs.items():
        rows = design_trace(design)
        st = styles[name]
        for key, label, dash in (
            ("objective_s", "incumbent", "solid"),
            ("lower_bound_s", "lower bound", "dash"),
        ):
            pts = [(float(r["t"]), float(r[key])) for r in rows if math.isfinite(float(r[key]))]
            fig.add_scatter(
                x=[p[0] for p in pts],
                y=[p[1] * 1e3 for p in pts],
                mode="lines+markers",
                line={"shape": "hv", "dash": dash, "color": st["color"]},
                marker={"symbol": st["symbol"]},
                name=f"{name}: {label}",
                legendgroup=name,
            )
    fig.update_layout(
        title=title, xaxis={"title": "wall time (s)"}, yaxis={"title": "objective (ms)"}
    )
    return fig


def design_summary(design) -> pd.DataFrame:
    """One-row table of a design for the top of its report."""
    c = design.circuits
    return pd.DataFrame(
        [
            {
                "solver": design.solver,
                "status": design.status,
                "servers": int(design.servers),
                "ports per server": int(design.degree),
                "circuits": c.total,
                "rings": len(design.rings),
                "objective ms": design.objective_s * 1e3,
                "lower bound ms": design.lower_bound_s * 1e3,
                "gap %": design.gap * 100 if math.isfinite(design.gap) else float("nan"),
                "wall s": design.wall_s,
            }
        ]
    )


def design_page(
    design,
    problem=None,
    title: str = "Design",
    verdict: Sequence[str] = (),
    warnings: Sequence[str] = (),
) -> str:
    """Self-contained HTML of a design: circuit graph (coloured by peak per-phase utilisation
    when ``problem`` is given) and the optimizer trace when the design records one; ``verdict``
    sentences (:func:`topoopt.app.report.study_verdicts.design_verdict`) and the search's
    ``warnings`` open the page."""
    util = None
    if problem is not None:
        from solvers import evaluate_routing

        ev = evaluate_routing(
            problem, design.circuits, design.phase_routings(problem), keep_loads=True
        )
        src, dst, cap = design.circuits.links(design.link_bandwidth)
        times = np.where(ev.phase_times > 0, ev.phase_times, np.inf)
        per_phase = [load / (cap * t) for load, t in zip(ev.link_loads, times, strict=True)]
        link_util = np.max(per_phase, axis=0) if per_phase else np.zeros(len(cap))
        lo, hi = np.minimum(src, dst), np.maximum(src, dst)
        key = lo * design.servers + hi
        # design.circuits is canonical (rows u < v, sorted), so its keys are ascending
        rows = design.circuits.rows
        ckey = rows[:, 0] * design.servers + rows[:, 1]
        util = np.zeros(len(ckey))
        np.maximum.at(util, np.searchsorted(ckey, key), np.nan_to_num(link_util))
    figs = [
        (
            "design-circuits",
            circuit_graph(design.servers, design.circuits, util, design.rings, title=title),
        )
    ]
    figs.append(("design-optimizer", optimizer_trace(design_trace(design))))
    gap = design.gap if math.isfinite(design.gap) else float("nan")
    intro = (
        f"{design.solver}: objective {design.objective_s * 1e3:.4g} ms, lower bound "
        f"{design.lower_bound_s * 1e3:.4g} ms, gap {gap:.2%}, status {design.status}, "
        f"{design.wall_s:.2f} s."
    )
    return page_html(
        figs,
        title,
        intro=intro,
        summary=[("Design", design_summary(design))],
        verdict=verdict,
        warnings=warnings,
    )
