"""Figures of a fabric comparison: iteration time vs capex, ratios to the ideal switch, link
utilisation CDFs, and the iteration timeline (Gantt chart)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from topoopt.app.report.palette import FABRIC_STYLES, fabric_styles, is_bound, trace_style

__all__ = [
    "trace_style",
    "merge_intervals",
    "time_vs_capex",
    "ratio_bars",
    "utilisation_cdf",
    "iteration_gantt",
]


def time_vs_capex(table: pd.DataFrame, title: str = "Iteration time vs network capex") -> go.Figure:
    """One point per fabric (the TopoOpt paper's view): capex on x, iteration time on y.

    Each fabric is its own trace (a legend entry in its colour and marker symbol of
    :mod:`topoopt.app.report.palette`) and is named on hover, so nearby points never print
    labels over each other. The ideal switch is a bound, not a product: it has no point, only a
    dotted line at its iteration time.
    """
    fig = go.Figure()
    products = table[~table["fabric"].map(lambda f: is_bound(str(f)))]
    styles = fabric_styles(str(f) for f in products["fabric"])
    for _, r in products.iterrows():
        st = styles[str(r["fabric"])]
        fig.add_scatter(
            x=[r["capex_usd"] / 1e6],
            y=[r["iteration_s"] * 1e3],
            mode="markers",
            name=str(r["fabric"]),
            marker={"size": 12, "color": st["color"], "symbol": st["symbol"]},
            hovertemplate=(
                f"{r['fabric']}<br>capex %{{x:.3f}} M$<br>iteration %{{y:.3f}} ms<extra></extra>"
            ),
        )
    for _, r in table[table["fabric"].map(lambda f: is_bound(str(f)))].iterrows():
        fig.add_hline(
            y=float(r["iteration_s"]) * 1e3,
            line={"dash": "dot", "color": FABRIC_STYLES.get(str(r["fabric"]), {}).get("color")},
            annotation_text=f"{r['fabric']} switch: a bound, not a product",
            annotation_position="top left",
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "network capex (million USD)"},
        yaxis={"title": "iteration time (ms)"},
        legend={"title": "fabric"},
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
    """CDF of network-link utilisation (bytes / (capacity x iteration time)) per fabric.

    Each fabric's line has its own colour and dash pattern (:func:`fabric_styles`), so lines that
    lie on top of each other stay visible; the legend lists every fabric.
    """
    fig = go.Figure()
    styles = fabric_styles(links)
    for name, frame in links.items():
        net = frame[frame["kind"] != "intra-server"] if "kind" in frame else frame
        u = np.sort(net["utilisation"].to_numpy())
        if u.size == 0:
            continue
        st = styles[name]
        fig.add_scatter(
            x=u,
            y=np.arange(1, u.size + 1) / u.size,
            mode="lines",
            line={"shape": "hv", "color": st["color"], "dash": st["dash"], "width": 2.5},
            name=name,
        )
    fig.update_layout(
        title=title,
        xaxis={"title": "utilisation over the iteration"},
        yaxis={"title": "fraction of links", "range": [0, 1]},
    )
    return fig


def merge_intervals(
    group: np.ndarray, start: np.ndarray, finish: np.ndarray, gap: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals per group: intervals of one group that overlap, touch, or are less
    than ``gap`` apart become one.

    Returns ``(group, start, finish, count)`` of the merged intervals (sorted by group, then
    start), ``count`` the number of original intervals in each.

    Examples
    --------
    >>> g, s, f, n = merge_intervals(
    ...     np.array([0, 0, 0, 1]), np.array([0.0, 1.0, 5.0, 0.0]), np.array([2.0, 3.0, 6.0, 1.0])
    ... )
    >>> g.tolist(), s.tolist(), f.tolist(), n.tolist()
    ([0, 0, 1], [0.0, 5.0, 0.0], [3.0, 6.0, 1.0], [2, 1, 1])
    """
    order = np.lexsort((start, group))
    g, s, f = group[order], start[order], finish[order]
    if g.size == 0:
        return g, s, f, np.zeros(0, np.int64)
    new_group = np.r_[True, g[1:] != g[:-1]]
    # running end of the current union within each group
    reach = f.copy()
    first = np.flatnonzero(new_group)
    ends = np.r_[first[1:], g.size]
    for a, b in zip(first, ends, strict=True):  # one accumulate per group (few groups)
        reach[a:b] = np.maximum.accumulate(f[a:b])
    breaks = new_group.copy()
    breaks[1:] |= s[1:] > reach[:-1] + gap
    idx = np.flatnonzero(breaks)
    count = np.diff(np.r_[idx, g.size])
    return g[idx], s[idx], np.maximum.reduceat(f, idx), count


def iteration_gantt(
    timeline: pd.DataFrame, title: str = "Iteration timeline", max_rows: int = 4000
) -> go.Figure:
    """Compute and communication tasks per stage; exposed (compute-blocking) communication
    highlighted.

    Every task is drawn. Up to ``max_rows`` tasks each get a bar; beyond that, the tasks of one
    lane and kind are merged into their busy intervals (the union of the tasks' spans); if
    those are still more than ``max_rows``, the shortest idle gaps between them are filled, just
    enough of them, and the title says what is shown: ``N tasks as M busy intervals (idle gaps up
    to X ms filled)``. Busy time and the last finish are kept exactly otherwise.
    """
    tl = timeline.sort_values(["start_s", "finish_s"], kind="stable")
    n_tasks = len(tl)
    stage = tl["stage"].fillna(-1).astype(int)
    lane = stage.map(lambda s: f"stage {s}" if s >= 0 else "global")
    lanes = [f"stage {s}" if s >= 0 else "global" for s in sorted(stage.unique())]
    colours = {"compute": "#4C78A8", "comm": "#E45756", "sync": "#F58518", "optimizer": "#54A24B"}
    kinds = sorted(tl["kind"].astype(str).unique())
    note, gap = "", 0.0
    rows: dict[str, tuple] = {}
    if n_tasks <= max_rows:
        for kind in kinds:
            part = tl[tl["kind"].astype(str) == kind]
            text = (part["class"].astype(str) + " " + part["phase"].astype(str)).to_numpy()
            rows[kind] = (
                lane.loc[part.index].to_numpy(),
                part["start_s"].to_numpy(float),
                part["finish_s"].to_numpy(float),
                text,
            )
    else:
        lane_id = pd.Categorical(lane, categories=lanes).codes.astype(np.int64)
        kind_id = pd.Categorical(tl["kind"].astype(str), categories=kinds).codes.astype(np.int64)
        group = lane_id * len(kinds) + kind_id
        start, finish = tl["start_s"].to_numpy(float), tl["finish_s"].to_numpy(float)
        gap = 0.0
        merged = merge_intervals(group, start, finish, gap)
        g0, s0, f0 = merged[:3]
        if g0.size > max_rows:
            # close the smallest idle gaps (between busy intervals of one lane and kind), just as
            # many as needed: the k-th smallest gap is the threshold
            idle = (s0[1:] - f0[:-1])[g0[1:] == g0[:-1]]
            k = min(g0.size - max_rows, idle.size)
            gap = float(np.partition(idle, k - 1)[k - 1])
            merged = merge_intervals(group, start, finish, gap)
        g, s, f, cnt = merged
        for k, kind in enumerate(kinds):
            sel = g % len(kinds) == k
            rows[kind] = (
                np.asarray(lanes, dtype=object)[g[sel] // len(kinds)],
                s[sel],
                f[sel],
                np.array([f"{c} task(s) merged" for c in cnt[sel]], dtype=object),
            )
        note = f"{n_tasks:,} tasks as {g.size:,} busy intervals" + (
            f" (idle gaps up to {gap * 1e3:.3g} ms filled)" if gap > 0 else ""
        )
        title = f"{title}<br><sup>{note}</sup>"
    fig = go.Figure()
    for kind in kinds:
        y, s, f, text = rows[kind]
        fig.add_bar(
            base=s * 1e3,
            x=(f - s) * 1e3,
            y=y,
            orientation="h",
            name=kind + (" (blocking)" if kind == "comm" else ""),
            marker={"color": colours.get(kind, "#999")},
            customdata=text,
            hovertemplate=(
                "%{y}<br>%{customdata}<br>start %{base:.3f} ms<br>duration %{x:.3f} ms"
                "<extra></extra>"
            ),
        )
    fig.update_layout(
        title=title,
        barmode="overlay",
        xaxis={"title": "time (ms)"},
        yaxis={"autorange": "reversed", "categoryorder": "array", "categoryarray": lanes},
        height=max(350, 22 * len(lanes) + 150),
        meta={
            "tasks": n_tasks,
            "bars": int(sum(len(r[1]) for r in rows.values())),
            "gap_s": gap,
            "note": note,
        },
    )
    return fig
