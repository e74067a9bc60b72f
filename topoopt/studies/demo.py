"""The end-to-end demo on embedded plans: what ``topoopt demo`` runs and writes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from topoopt.report.html import page_html
from topoopt.report.traffic_figures import class_bars, server_heatmap
from traffic.expand import expand
from traffic.load import load_workload
from traffic.summary import class_table, traffic_summary

__all__ = ["DEMO_PLANS", "DemoResult", "run_demo"]

DEMO_PLANS = ("dlrm", "gpt3-175b")
"""Embedded plans the demo runs by default."""


@dataclass
class DemoResult:
    """Tables and figures of one demo run."""

    traffic: pd.DataFrame
    summaries: dict[str, dict[str, Any]]
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)

    def html(self) -> str:
        """The self-contained report page."""
        return page_html(
            self.figures,
            "topoopt demo",
            intro="Traffic per iteration of the demo plans, by class and between servers.",
        )


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def run_demo(
    plans: Sequence[str] = DEMO_PLANS, progress: Callable[[str], None] | None = _stderr
) -> DemoResult:
    """Run the demo pipeline on ``plans`` (embedded plan names or files)."""
    say = progress or (lambda _msg: None)
    rows, summaries, figures = [], {}, []
    for k, name in enumerate(plans):
        say(f"[{k + 1}/{len(plans)}] traffic of {name}")
        w = load_workload(name)
        s = traffic_summary(w)
        summaries[name] = s
        rows.append(
            {
                "plan": name,
                "gpus": s["gpus"],
                "servers": s["servers"],
                "total_bytes": s["total_bytes"],
                "inter_server_bytes": s["inter_server_bytes"],
                "intra_server_bytes": s["intra_server_bytes"],
                **{f"{c}_bytes": b for c, b in s["bytes_by_class"].items()},
            }
        )
        pairs = expand(w, "ring", "server")
        slug = name.replace(".", "-")
        figures.append((f"{slug}-heatmap", server_heatmap(pairs, title=f"{name}: server traffic")))
        figures.append(
            (f"{slug}-classes", class_bars(class_table(w, pairs), title=f"{name}: bytes by class"))
        )
    return DemoResult(pd.DataFrame(rows).fillna(0.0), summaries, figures)
