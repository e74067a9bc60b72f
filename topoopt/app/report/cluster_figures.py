"""Figures of ``topoopt cluster``: per-job iteration time against the job alone on an ideal
switch, the servers each job holds, and the circuits changed per arrival or departure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

__all__ = ["job_table", "job_iteration_bars", "placement_strip", "changes_bars", "cluster_page"]


def job_table(jobs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per job: name, servers, iteration and ideal-switch ms, slowdown, circuits.

    >>> t = job_table([{"name": "a", "servers": [0, 1], "iteration_s": 2e-3,
    ...                 "alone_ideal_s": 1e-3, "n_circuits": 2, "repaired_circuits": 0}])
    >>> t["slowdown"].tolist(), t["servers"].tolist()
    ([2.0], ['0..1 (2)'])
    """
    rows = [
        {
            "job": j["name"],
            "servers": f"{j['servers'][0]}..{j['servers'][-1]} ({len(j['servers'])})",
            "iteration_ms": j["iteration_s"] * 1e3,
            "slowdown": j["iteration_s"] / j["alone_ideal_s"],
            "ideal_switch_ms": j["alone_ideal_s"] * 1e3,
            "circuits": j["n_circuits"],
            "repaired": j["repaired_circuits"],
        }
        for j in jobs
    ]
    cols = ["job", "servers", "iteration_ms", "slowdown", "ideal_switch_ms", "circuits", "repaired"]
    return pd.DataFrame(rows, columns=cols)


def job_iteration_bars(jobs: Sequence[Mapping[str, Any]], title: str = "") -> go.Figure:
    """Grouped bars: each job's iteration time on its circuits and alone on an ideal switch."""
    names = [j["name"] for j in jobs]
    fig = go.Figure()
    fig.add_bar(x=names, y=[j["iteration_s"] * 1e3 for j in jobs], name="shared OCS cluster")
    fig.add_bar(x=names, y=[j["alone_ideal_s"] * 1e3 for j in jobs], name="alone, ideal switch")
    fig.update_layout(
        barmode="group",
        title=title or "per-job iteration time",
        xaxis={"title": "job"},
        yaxis={"title": "iteration time (ms)"},
    )
    return fig


def placement_strip(jobs: Sequence[Mapping[str, Any]], servers: int) -> go.Figure:
    """The servers of each job on one axis (a coloured mark per server)."""
    fig = go.Figure()
    for j in jobs:
        fig.add_scatter(
            x=j["servers"],
            y=[j["name"]] * len(j["servers"]),
            mode="markers",
            marker={"symbol": "square", "size": 8},
            name=j["name"],
        )
    fig.update_layout(
        title=f"placement on {servers} servers",
        xaxis={"title": "server", "range": [-0.5, servers - 0.5]},
        yaxis={"title": "job"},
        showlegend=False,
    )
    return fig


def changes_bars(events: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Per event: running circuits torn down, and circuits added."""
    x = [f"t={e['time_s']:g} s {e['event']} {e['job']}" for e in events]
    fig = go.Figure()
    fig.add_bar(x=x, y=[e["changed_circuits"] for e in events], name="running circuits changed")
    fig.add_bar(x=x, y=[e["added_circuits"] for e in events], name="circuits added")
    fig.add_bar(x=x, y=[e["removed_circuits"] for e in events], name="circuits of departed jobs")
    fig.update_layout(barmode="group", title="circuits per event", yaxis={"title": "circuits"})
    return fig


def cluster_page(res: Mapping[str, Any], verdict: Sequence[str] = ()) -> str:
    """The HTML report of one ``topoopt cluster`` result document; ``verdict``
    (:func:`topoopt.app.report.study_verdicts.cluster_verdict`) opens it."""
    from topoopt.app.report.html import page_html

    jobs = res["jobs"]
    figs = [
        ("cluster-iteration", job_iteration_bars(jobs)),
        ("cluster-placement", placement_strip(jobs, res["servers"])),
    ]
    summary = [("jobs", job_table(jobs))]
    if "events" in res:
        figs.append(("cluster-changes", changes_bars(res["events"])))
        ev = pd.DataFrame(
            [
                {
                    "time_s": e["time_s"],
                    "event": e["event"],
                    "job": e["job"],
                    "changed_circuits": e["changed_circuits"],
                    "added_circuits": e["added_circuits"],
                    "replanned": e["replanned"],
                    "running": len(e["running"]),
                }
                for e in res["events"]
            ]
        )
        summary.append(("arrivals and departures", ev))
    intro = (
        f"{len(jobs)} jobs on {res['servers']} servers, {res['degree']} x {res['link_gbps']:g} "
        f"Gbps ports, OCS units of radix {res['ocs_radix']} ({res['ocs_units_per_plane']} per "
        f"port index), solver {res['solver']}."
    )
    return page_html(figs, "topoopt cluster", intro, summary, verdict=verdict)
