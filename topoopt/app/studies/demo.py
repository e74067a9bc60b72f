"""The end-to-end demo on embedded plans: what ``topoopt demo`` runs and writes.

traffic (plan -> Workload) -> designs (the TopoOpt baseline and the joint optimizer) ->
simulated iteration on the ideal switch, the optical designs, an expander, a full-bisection,
an oversubscribed and a cost-equivalent fat-tree, a torus and a hybrid -> one comparison table
and a self-contained HTML report.

Deterministic: the designed fabrics stop on their deterministic work limits
(:data:`DEMO_WORK_LIMITS`), never on the clock; ``time_limit_s`` is only a safety cap
(:data:`DEMO_TIME_CAP_S`), and a design it cut says so in the table (``stopped_by`` ``"time
limit"``, :attr:`DemoResult.deterministic` False). Wall times are kept apart
(:attr:`DemoResult.timings`), so the same version gives byte-identical tables on every run.
Everything the demo reads ships with the package (embedded plans, the price table): it needs
no file outside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import plotly.graph_objects as go

from topoopt.app.report.html import page_html
from topoopt.app.report.pages import compare_figures, compare_summary
from topoopt.app.report.traffic_figures import class_bars, server_heatmap
from topoopt.app.studies.compare import CompareResult, compare
from traffic.expand import expand
from traffic.load import load_workload
from traffic.summary import class_table, traffic_summary

__all__ = [
    "DEMO_PLANS",
    "DEMO_DEGREES",
    "DEMO_FABRICS",
    "DEMO_TIME_CAP_S",
    "DEMO_WORK_LIMITS",
    "TIMING_COLUMNS",
    "DemoResult",
    "run_demo",
]

DEMO_PLANS = ("dlrm", "gpt3-175b-32")
"""Embedded plans of the demo: DLRM in TopoOpt's configuration on 16 servers x 8 GPUs, and GPT-3
175B (t=8 in a server, a 16-stage pipeline across servers, 2 replicas) on 32 servers x 8."""

DEMO_DEGREES = (4, 8)
"""Optical ports per server."""

DEMO_LINK_BANDWIDTH = 12.5e9
"""100 Gbps ports, bytes/s."""

DEMO_FABRICS = (
    "ideal",
    "topoopt-best",
    "joint",
    "expander",
    "fat-tree",
    "fat-tree-oversub",
    "fat-tree-cost-equivalent",
    "torus",
    "hybrid",
)

DEMO_TIME_CAP_S = 900.0
"""Wall-clock cap of each design search, seconds: a safety net far above what the work limits
take (a minute at most on 2 loaded cores), so the clock never decides."""

DEMO_WORK_LIMITS: dict[str, float | None] = {"dlrm": None, "gpt3-175b-32": None}
"""Deterministic work budget of the ``joint`` search per plan, in work units
(:func:`solvers.registry.solve`; None: the solver's default)."""

TIMING_COLUMNS = ("build_s", "simulate_s")
"""Wall-clock columns of the comparison rows, kept out of :attr:`DemoResult.comparison`."""


@dataclass
class DemoResult:
    """Tables and figures of one demo run.

    ``comparison`` holds one row per plan, port count and fabric, deterministic values only
    (designed fabrics add ``stopped_by``: why their search ended); ``timings`` the wall-clock
    columns (:data:`TIMING_COLUMNS`) of the same rows."""

    traffic: pd.DataFrame
    comparison: pd.DataFrame
    compares: dict[tuple[str, int], CompareResult]
    figures: list[tuple[str, go.Figure]] = field(default_factory=list)
    timings: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def deterministic(self) -> bool:
        """False when the wall-clock cap cut a design search (the tables may then differ)."""
        return all(
            dict(run.design.info).get("deterministic", True)
            for res in self.compares.values()
            for run in res.runs
            if run.design is not None
        )

    def verdict(self) -> list[str]:
        """One sentence per plan and port count: who wins at equal capex, by how much
        (:func:`topoopt.app.report.verdict.verdict_sentences`)."""
        from topoopt.app.report.verdict import verdict_sentences

        out = []
        for (plan, degree), res in self.compares.items():
            said = verdict_sentences(res.table, res.iterations)
            if said:
                out.append(f"{plan}, {degree} ports: {said[0]}")
        return out

    def best_positions(self) -> set[int]:
        """Positions in :attr:`comparison` of the rows to highlight: per plan and port count,
        the fastest product and the fastest at equal capex
        (:func:`topoopt.app.report.verdict.best_rows`)."""
        from topoopt.app.report.verdict import best_rows

        best: set[int] = set()
        for _, part in self.comparison.groupby(["plan", "degree"], sort=False):
            best |= {self.comparison.index.get_loc(i) for i in part.index[list(best_rows(part))]}
        return best

    def warnings(self) -> list[str]:
        """One line per design search that fell back to another objective or was cut by the
        clock (:func:`solvers.search_warning`), labelled with its plan and port count."""
        from solvers import search_warning

        out = []
        for (plan, degree), res in self.compares.items():
            for run in res.runs:
                if run.design is not None:
                    line = search_warning(run.design, f"{plan}, {degree} ports, {run.name}")
                    if line:
                        out.append(line)
        return out

    def html(self, warnings: Sequence[str] | None = None) -> str:
        """The self-contained report page (``warnings``: default :meth:`warnings`)."""
        # one table per plan, each in its own time unit (ms for DLRM, s for GPT-3)
        best, tables, marks = self.best_positions(), [], []
        for plan, part in self.comparison.groupby("plan", sort=False):
            rows = [self.comparison.index.get_loc(i) for i in part.index]
            frame = compare_summary(part, keys=("degree",)).rename(columns={"degree": "ports"})
            tables.append((f"{plan}: simulated iteration per ports per server and fabric", frame))
            marks.append({j for j, r in enumerate(rows) if r in best})
        return page_html(
            self.figures,
            "topoopt demo",
            verdict=self.verdict(),
            highlights=marks,
            warnings=self.warnings() if warnings is None else warnings,
            summary=tables,
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
    time_limit_s: float = DEMO_TIME_CAP_S,
    progress: Callable[[str], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    work_limits: Mapping[str, float | None] | None = None,
) -> DemoResult:
    """Run the demo pipeline (module docstring).

    ``time_limit_s`` caps each design search on the wall clock; ``work_limits`` (plan -> work
    units, default :data:`DEMO_WORK_LIMITS`) are their deterministic budgets. ``progress``
    receives one-line messages; ``on_step`` is called once per traffic summary and once per
    simulated fabric (``len(plans) * (1 + len(degrees) * len(fabrics))`` calls).
    """
    limits = DEMO_WORK_LIMITS if work_limits is None else work_limits
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
                work_limit=limits.get(name),
            )
            compares[(name, d)] = res
            stopped = [
                dict(r.design.info).get("stopped_by", "") if r.design is not None else ""
                for r in res.runs
            ]
            tables.append(res.table.assign(plan=name, degree=d, stopped_by=stopped))
            figures.extend(compare_figures(res, prefix=f"{slug}-d{d}", label=f"{name}, {d} ports"))
    comparison = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    timed = [c for c in TIMING_COLUMNS if c in comparison.columns]
    timings = comparison[["plan", "degree", "fabric", *timed]] if tables else pd.DataFrame()
    comparison = comparison.drop(columns=timed)
    result = DemoResult(
        pd.DataFrame(traffic_rows).fillna(0.0), comparison, compares, figures, timings
    )
    if not result.deterministic:
        say(
            f"the {time_limit_s:g} s wall-clock cap cut a design search: this table may differ "
            "from run to run (see stopped_by)"
        )
    return result
