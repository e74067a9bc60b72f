"""Figures of a co-search (``topoopt cosearch --html``): the Pareto front of iteration time
against network capex, the best plan's server traffic, its design, and the top candidates with
the reason each lost."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

from topoopt.app.report.design_figures import circuit_graph
from topoopt.app.report.html import page_html
from topoopt.app.report.palette import fabric_styles, is_bound
from topoopt.fabrics.circuits import Circuits

__all__ = [
    "pareto_figure",
    "traffic_figure",
    "design_figure",
    "candidates_table",
    "cosearch_page",
]


def pareto_figure(records, pareto, title: str = "Iteration time vs network capex") -> go.Figure:
    """Every (plan, fabric) judged on a built fabric, in each fabric's colour and symbol
    (:mod:`topoopt.app.report.palette`); the front of what is plotted as a line. The ideal switch
    is a bound, not a product: it is left off (its points and the front through them)."""
    fig = go.Figure()
    records = [r for r in records if math.isfinite(r["iteration_s"])]  # not skipped ones
    records = [r for r in records if not is_bound(str(r["fabric"]))]
    if any(is_bound(str(r["fabric"])) for r in pareto):  # the front of the products alone
        pareto, fastest = [], math.inf
        for r in sorted(records, key=lambda r: (r["capex_usd"], r["iteration_s"])):
            if r["iteration_s"] < fastest:
                pareto.append(r)
                fastest = r["iteration_s"]
    fabrics = sorted({r["fabric"] for r in records})
    styles = fabric_styles(fabrics)
    for f in fabrics:
        rows = [r for r in records if r["fabric"] == f]
        fig.add_trace(
            go.Scatter(
                x=[r["capex_usd"] / 1e6 for r in rows],
                y=[r["iteration_s"] * 1e3 for r in rows],
                mode="markers",
                name=f,
                text=[r["label"] for r in rows],
                marker={"size": 10, "color": styles[f]["color"], "symbol": styles[f]["symbol"]},
                hovertemplate="%{text}<br>capex %{x:.3f} M$<br>%{y:.3f} ms<extra>" + f + "</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[r["capex_usd"] / 1e6 for r in pareto],
            y=[r["iteration_s"] * 1e3 for r in pareto],
            mode="lines",
            name="Pareto front",
            line={"dash": "dash", "color": "black"},
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"title": "network capex (million USD)"},
        yaxis={"title": "iteration time (ms)"},
    )
    return fig


def traffic_figure(server_bytes, title: str = "Best plan: bytes per iteration between servers"):
    """Heatmap of the best plan's server-level traffic matrix (diagonal: inside a server)."""
    m = np.asarray(server_bytes, dtype=float)
    fig = go.Figure(
        go.Heatmap(
            z=m / 1e9,
            colorscale="Viridis",
            colorbar={"title": "GB"},
            hovertemplate="server %{y} -> %{x}: %{z:.3f} GB<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis={"title": "destination server"},
        yaxis={"title": "source server", "autorange": "reversed"},
    )
    return fig


def design_figure(servers: int, design: dict | None, title: str = "Best plan: design"):
    """The best design's circuits (an empty figure saying so for electrical fabrics)."""
    if not design or not design.get("circuits"):
        fig = go.Figure()
        fig.update_layout(title=title + " (electrical fabric: no circuits)")
        return fig
    return circuit_graph(servers, Circuits(design["circuits"], servers), title=title)


def _ms(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return "skipped" if math.isinf(x) else f"{x * 1e3:.2f}"


def candidates_table(candidates, rejected: dict, top: int = 25, title: str = "Top candidates"):
    """Table of the ``top`` candidates (fastest first) and why each lost; cuts as a last row."""
    rows = list(candidates)[:top]
    cols = {
        "plan": [r["label"] for r in rows],
        "GB/GPU": [f"{r['memory_per_gpu_bytes'] / 1e9:.1f}" for r in rows],
        "compute bound ms": [_ms(r.get("compute_bound_s")) for r in rows],
        "ideal switch ms": [_ms(r.get("ideal_s")) for r in rows],
        "topoopt ms": [_ms(r.get("topoopt_s")) for r in rows],
        "target ms": [_ms(r.get("target_s")) for r in rows],
        "fate": [r["fate"] for r in rows],
    }
    cut = ", ".join(f"{k}: {v}" for k, v in rejected.items() if v)
    for k in cols:
        cols[k].append("" if k != "plan" else "not evaluated")
    cols["fate"][-1] = f"cut before simulation: {cut}" if cut else "none cut"
    fig = go.Figure(
        go.Table(
            header={"values": list(cols)},
            cells={"values": list(cols.values()), "align": "left"},
        )
    )
    fig.update_layout(title=title)
    return fig


def cosearch_page(res, title: str, verdict=(), warnings=()) -> str:
    """HTML report of a :class:`~topoopt.app.studies.cosearch.search.SearchResult`; ``verdict``
    (:func:`topoopt.app.report.study_verdicts.cosearch_verdict`) and ``warnings`` open it."""
    built = [r for r in res.records if not r.get("fixed_topology")]
    best = res.best
    servers = len(best["server_bytes"]) if best.get("server_bytes") else 0
    rejected = dict(res.counts.get("rejected", {}))
    for k in ("pruned by bounds", "not reached (budget)"):
        if res.counts.get(k):
            rejected[k] = res.counts[k]
    figs = [
        ("cosearch-pareto", pareto_figure(built, res.pareto)),
        ("cosearch-traffic", traffic_figure(best.get("server_bytes") or [[0.0]])),
        ("cosearch-design", design_figure(servers, best.get("design"))),
        ("cosearch-candidates", candidates_table(res.candidates, rejected)),
    ]
    intro = (
        f"Best on {best['fabric']}: {best['label']}, {best['iteration_s'] * 1e3:.2f} ms per "
        f"iteration, {best['memory_per_gpu_bytes'] / 1e9:.1f} GB per GPU; "
        f"{len(res.records)} evaluations."
    )
    return page_html(figs, title, intro, verdict=verdict, warnings=warnings)
