"""The end-to-end demo on embedded plans: what ``topoopt demo`` runs and writes.

traffic (plan -> Workload) -> designs (the TopoOpt baseline and the joint optimizer) ->
simulated iteration on the ideal switch, the optical designs, an expander, a full-bisection,
an oversubscribed and a cost-equivalent fat-tree, a torus and a hybrid -> one comparison table
and a self-contained HTML report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from topoopt.report.html import page_html
from topoopt.report.pages import compare_figures, compare_summary
from topoopt.report.traffic_figures import class_bars, server_heatmap
from topoopt.studies.compare import CompareResult, compare
from traffic.expand import expand
from traffic.load import load_workload
from traffic.summary import class_table, traffic_summary

__all__ = ["DEMO_PLANS", "DEMO_DEGREES", "DEMO_FABRICS", "DemoResult", "run_demo"]

DEMO_PLANS = ("dlrm", "gpt3-175b-32")
"""Embedded plans of the demo: DLRM in TopoOpt's configuration on 16 servers x 8 GPUs, and GPT-3
175B (t=8 in a server, a 16-stage pipeline across servers, 2 replicas) on 32 servers x 8."""

DEMO_DEGREES = (4, 8)
"""Optical ports per server."""

DEMO_LINK_BANDWIDTH = 12.5e9
"""100 Gbps ports, bytes/s."""

DEMO_FABRICS = (
    "ideal",
    "topoopt",
    "joint",
    "expander",
    "fat-tree",
    "fat-tree-oversub",
    "fat-tree-cost-equivalent",
    "torus",
    "hybrid",
)


@dataclass
class DemoResult:
    """Tables and figures of one demo run."""

    traffic: pd.DataFrame
    comparison: pd.DataFrame
    compares: dict[tuple[str, int], CompareResult]
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)

    def html(self) -> str:
        """The self-contained report page."""
        summary = compare_summary(self.comparison, keys=("plan", "degree")).rename(
            columns={"degree": "ports"}
        )
        return page_html(
            self.figures,
            "topoopt demo",
            summary=[("Simulated iteration per plan, ports per server and fabric", summary)],
            intro=(
                "Traffic of each plan, then for each plan and port count: iteration time against "
                "network cost, ratios to the ideal switch, link utilisation, the best optical "
                "design's circuits, its optimizer trace and iteration timeline."
            ),
        )


def run_demo(
    plans: Sequence[str] = DEMO_PLANS,
    degrees: Sequence[int] = DEMO_DEGREES,
    fabrics: Sequence[str] = DEMO_FABRICS,
    link_bandwidth: float = DEMO_LINK_BANDWIDTH,
    time_limit_s: float = 20.0,
    progress: Callable[[str], None] | None = None,
    on_step: Callable[[str], None] | None = None,
) -> DemoResult:
    """Run the demo pipeline (module docstring).

    ``progress`` receives one-line messages; ``on_step`` is called once per traffic summary and
    once per simulated fabric (``len(plans) * (1 + len(degrees) * len(fabrics))`` calls).
    """
    say = progress or (lambda _m: None)
    step = on_step or (lambda _m: None)
    traffic_rows, figures, tables, compares = [], [], [], {}
    for name in plans:
        say(f"traffic of {name}")
        w = load_workload(name)
        s = traffic_summary(w)
        traffic_rows.append(
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
        step(f"traffic {name}")
        for d in degrees:
            say(f"{name}, {d} ports per server")
            res = compare(
                w,
                fabrics,
                d,
                link_bandwidth,
                time_limit_s=time_limit_s,
                progress=progress,
                on_fabric_done=lambda fab, name=name, d=d: step(f"{name} d={d} {fab}"),
            )
            compares[(name, d)] = res
            tables.append(res.table.assign(plan=name, degree=d))
            figures.extend(compare_figures(res, prefix=f"{slug}-d{d}", label=f"{name}, {d} ports"))
    comparison = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    return DemoResult(pd.DataFrame(traffic_rows).fillna(0.0), comparison, compares, figures)
