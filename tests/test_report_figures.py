"""Figure functions return plotly figures of the expected structure and values."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from solvers.model.problem import DesignProblem
from solvers.registry import solve
from topoopt.app.report.compare_figures import (
    iteration_gantt,
    ratio_bars,
    time_vs_capex,
    utilisation_cdf,
)
from topoopt.app.report.design_figures import circuit_graph, optimizer_trace
from topoopt.app.report.pages import circuit_utilisation
from topoopt.app.report.traffic_figures import server_heatmap
from topoopt.fabrics.circuits import Circuits
from traffic.expand import expand
from traffic.workload import Demand, Workload


def two_class_workload():
    return Workload(
        8,
        2,
        (
            Demand("all-reduce", np.array([[0, 2, 4, 6]]), 1e6, "dp", "backward"),
            Demand("send", np.array([[1, 7]]), 5e5, "pp", "forward", mutable=False),
        ),
    )


def test_heatmap_has_one_view_per_class_and_they_add_up():
    pairs = expand(two_class_workload(), "ring", "server")
    fig = server_heatmap(pairs)
    assert [t.name for t in fig.data] == ["all classes", "pp", "dp"]  # CLASSES order
    assert [t.visible for t in fig.data] == [True, False, False]
    assert len(fig.layout.updatemenus[0].buttons) == 3

    def grid(t):
        z = np.array(t.z, dtype=float)
        return np.where(np.isnan(z), 0.0, 10.0**z)

    np.testing.assert_allclose(grid(fig.data[1]) + grid(fig.data[2]), grid(fig.data[0]))
    # the pp send: 5e5 bytes from server 0 (rank 1) to server 3 (rank 7)
    assert grid(fig.data[1])[0, 3] == pytest.approx(5e5)


def test_circuit_utilisation_takes_the_busier_direction():
    circuits = Circuits([[0, 1, 1], [1, 2, 2]], 3)
    links = pd.DataFrame(
        {
            "src": [0, 1, 1, 2, 3],
            "dst": [1, 0, 2, 1, 3],
            "utilisation": [0.2, 0.7, 0.1, 0.4, 0.9],  # the last row: not a circuit
        }
    )
    np.testing.assert_allclose(circuit_utilisation(circuits, links), [0.7, 0.4])
    fig = circuit_graph(3, circuits, circuit_utilisation(circuits, links))
    marker = [t for t in fig.data if t.name == "utilisation"][0]
    np.testing.assert_allclose(marker.marker.color, [0.7, 0.4])


def test_joint_records_an_optimizer_trace():
    w = Workload(
        8,
        1,
        (
            Demand(
                "all-to-all", np.arange(8).reshape(1, 8), 8e6, "embedding", "forward", mutable=False
            ),
        ),
    )
    d = solve(DesignProblem.from_workload(w, degree=3, link_bandwidth=1e9), "joint", time_limit_s=5)
    trace = d.info["trace"]
    assert trace and trace[-1]["objective_s"] == d.objective_s
    obj = [r["objective_s"] for r in trace]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(obj, obj[1:], strict=False))
    assert all(r["lower_bound_s"] <= r["objective_s"] * (1 + 1e-9) for r in trace)
    fig = optimizer_trace(trace)
    assert [t.name for t in fig.data] == ["incumbent", "lower bound"]


def test_comparison_figures():
    table = pd.DataFrame(
        {
            "fabric": ["ideal", "fat-tree"],
            "iteration_s": [1.0, 2.0],
            "comm_s": [0.5, 1.5],
            "capex_usd": [1e6, 2e6],
        }
    )
    bars = ratio_bars(table)
    assert list(bars.data[0].y) == [1.0, 2.0] and list(bars.data[1].y) == [1.0, 3.0]
    scatter = time_vs_capex(table)  # the ideal switch: a line at its time, not a point
    assert [(t.name, list(t.x), list(t.y)) for t in scatter.data] == [("fat-tree", [2.0], [2000.0])]
    (line,) = scatter.layout.shapes
    assert (line.y0, line.y1, line.line.dash) == (1000.0, 1000.0, "dot")
    assert "a bound, not a product" in scatter.layout.annotations[0].text
    tl = pd.DataFrame(
        {
            "task": [0, 1],
            "kind": ["compute", "comm"],
            "stage": [0, 1],
            "class": ["compute", "tp"],
            "phase": ["forward", "forward"],
            "start_s": [0.0, 0.001],
            "finish_s": [0.001, 0.003],
        }
    )
    g = iteration_gantt(tl)
    assert {t.name for t in g.data} == {"compute", "comm (blocking)"}


# ------------------------------------------------------------------------------------------
# Report readability (issue 12, section 4): summary table, labels, timelines, CDFs, traces.
# ------------------------------------------------------------------------------------------


def _fabric_table(n: int) -> pd.DataFrame:
    # nearly equal points: printed labels would sit on top of each other
    return pd.DataFrame(
        {
            "fabric": [f"fabric-{k}" for k in range(n)],
            "iteration_s": 1.0 + 1e-4 * np.arange(n),
            "comm_s": 0.5 + 1e-4 * np.arange(n),
            "capex_usd": 1e6 + np.arange(n),
        }
    )


def test_time_vs_capex_names_points_by_legend_and_hover_not_printed_labels():
    fig = time_vs_capex(_fabric_table(12))
    assert [t.name for t in fig.data] == [f"fabric-{k}" for k in range(12)]
    for t in fig.data:
        assert "text" not in t.mode and t.text is None  # nothing printed beside the points
        assert t.name in t.hovertemplate
        assert len(t.x) == 1
    styles = {(t.marker.color, t.marker.symbol) for t in fig.data}
    assert len(styles) == 12
    assert fig.layout.showlegend is not False


def test_utilisation_cdf_lines_can_be_told_apart():
    rng = np.random.default_rng(0)
    same = pd.DataFrame({"utilisation": rng.random(50), "kind": "network"})
    links = {f"f{k}": same for k in range(9)}  # identical curves: only style separates them
    links["empty"] = same.iloc[:0]
    fig = utilisation_cdf(links)
    assert [t.name for t in fig.data] == [f"f{k}" for k in range(9)]
    styles = [(t.line.color, t.line.dash) for t in fig.data]
    assert len(set(styles)) == 9
    assert len({d for _, d in styles}) >= 7  # dash patterns differ, not only the colours
    u = np.sort(same["utilisation"].to_numpy())
    np.testing.assert_allclose(fig.data[0].x, u)
    np.testing.assert_allclose(fig.data[0].y, np.arange(1, 51) / 50)


def _timeline(n: int, seed: int, width: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = np.sort(rng.random(n))
    return pd.DataFrame(
        {
            "task": np.arange(n),
            "kind": rng.choice(["compute", "comm"], n),
            "stage": rng.integers(0, 3, n),
            "class": "dp",
            "phase": "backward",
            "start_s": start,
            "finish_s": start + width * rng.random(n),
        }
    )


def _union(intervals) -> float:
    """Total length of a union of intervals, by a plain sweep (the test's own derivation)."""
    total, end = 0.0, -np.inf
    for s, f in sorted(intervals):
        if s > end:
            total += f - s
            end = f
        elif f > end:
            total += f - end
            end = f
    return total


def _bars(fig):
    out = {}
    for t in fig.data:
        kind = t.name.replace(" (blocking)", "")
        for y, b, x in zip(t.y, t.base, t.x, strict=True):
            out.setdefault((y, kind), []).append((b / 1e3, (b + x) / 1e3))
    return out


def test_gantt_draws_every_task_when_small():
    tl = _timeline(300, 1, 0.01)
    fig = iteration_gantt(tl, max_rows=300)
    assert sum(len(t.x) for t in fig.data) == 300
    assert "busy intervals" not in fig.layout.title.text
    assert fig.layout.meta["tasks"] == 300 and fig.layout.meta["bars"] == 300


def test_gantt_aggregates_long_timelines_exactly_and_says_so():
    tl = _timeline(10_000, 2, 0.05)  # long, overlapping tasks: their unions are few
    fig = iteration_gantt(tl, max_rows=4000)
    bars = _bars(fig)
    assert sum(len(v) for v in bars.values()) <= 4000
    assert "10,000 tasks as" in fig.layout.title.text and "filled" not in fig.layout.title.text
    for (lane, kind), got in bars.items():
        stage = int(lane.split()[-1])
        part = tl[(tl["stage"] == stage) & (tl["kind"] == kind)]
        want = list(zip(part["start_s"], part["finish_s"], strict=True))
        assert sum(f - s for s, f in got) == pytest.approx(_union(want), rel=1e-9)
    assert max(f for v in bars.values() for _, f in v) == pytest.approx(tl["finish_s"].max())


def test_gantt_with_more_gaps_than_bars_covers_every_task_and_states_the_gap():
    tl = _timeline(20_000, 3, 1e-6)  # tiny disjoint tasks: only filling gaps can bound the bars
    fig = iteration_gantt(tl, max_rows=500)
    bars = _bars(fig)
    assert sum(len(v) for v in bars.values()) <= 500
    title = fig.layout.title.text
    assert "20,000 tasks as" in title and "idle gaps up to" in title and "ms filled" in title
    gap = fig.layout.meta["gap_s"]
    shown = float(re.search(r"idle gaps up to ([0-9.e+-]+) ms", title).group(1)) / 1e3
    assert shown == pytest.approx(gap, rel=5e-3)  # the title states it (3 digits)
    for (lane, kind), got in bars.items():
        stage = int(lane.split()[-1])
        part = tl[(tl["stage"] == stage) & (tl["kind"] == kind)]
        got = np.array(sorted(got))
        # every task lies inside one bar of its lane and kind: nothing is dropped
        # (bars come back through ms and base + width: allow 1e-12 s of rounding)
        i = np.searchsorted(got[:, 0], part["start_s"].to_numpy() + 1e-12, side="right") - 1
        assert (i >= 0).all()
        assert (got[i, 1] >= part["finish_s"].to_numpy() - 1e-12).all()
        # only gaps up to the stated one were filled: bars stay apart by more than it
        assert (got[1:, 0] - got[:-1, 1] > gap - 1e-12).all()
        # and the filled gaps are the shortest ones: the bars' total length exceeds the busy
        # time by at most (bars closed) x gap
        busy = _union(list(zip(part["start_s"], part["finish_s"], strict=True)))
        assert busy <= (got[:, 1] - got[:, 0]).sum() <= busy + len(part) * gap


def test_summary_table_comes_before_the_figures():
    from topoopt.app.report.html import page_html
    from topoopt.app.report.pages import compare_summary

    table = _fabric_table(3).assign(exposed_comm_s=0.25, power_w=5e3, ratio_to_ideal=[1, 2, 3])
    summary = compare_summary(table)
    assert list(summary.columns) == [
        "fabric",
        "iteration ms",
        "comm ms",
        "exposed ms",
        "capex M$",
        "power kW",
        "x ideal",
    ]
    assert summary["iteration ms"].tolist() == pytest.approx([1000.0, 1000.1, 1000.2])
    assert summary["power kW"].tolist() == [5.0, 5.0, 5.0]
    page = page_html([("f", time_vs_capex(table))], "t", summary=[("Summary", summary)])
    assert page.index('<table class="summary">') < page.index('<section class="figure">')
    assert "<td>fabric-2</td>" in page and '<td class="num">1,000</td>' in page


def _fake_design(trace, wall=2.0):
    from types import SimpleNamespace

    return SimpleNamespace(
        info={"trace": trace} if trace is not None else {},
        wall_s=wall,
        objective_s=0.004,
        lower_bound_s=0.001,
    )


def test_optimizer_traces_show_every_design_even_without_a_recorded_trace():
    from topoopt.app.report.design_figures import design_trace, optimizer_traces

    joint = _fake_design(
        [
            {"t": 0.5, "objective_s": 0.006, "lower_bound_s": 0.001},
            {"t": 1.5, "objective_s": 0.004, "lower_bound_s": float("-inf")},
        ]
    )
    topoopt = _fake_design(None, wall=0.25)
    assert design_trace(topoopt) == [{"t": 0.25, "objective_s": 0.004, "lower_bound_s": 0.001}]
    fig = optimizer_traces({"joint": joint, "topoopt": topoopt})
    names = [t.name for t in fig.data]
    assert names == [
        "joint: incumbent",
        "joint: lower bound",
        "topoopt: incumbent",
        "topoopt: lower bound",
    ]
    assert list(fig.data[0].y) == pytest.approx([6.0, 4.0])
    assert list(fig.data[1].x) == [0.5]  # the non-finite bound is left out, not drawn as 0
    assert list(fig.data[2].x) == [0.25] and list(fig.data[2].y) == pytest.approx([4.0])
    assert fig.data[0].line.color != fig.data[2].line.color


def test_design_page_has_a_summary_and_always_an_optimizer_trace():
    from topoopt.app.report.design_figures import design_page

    w = two_class_workload()
    problem = DesignProblem.from_workload(w, degree=2, link_bandwidth=1e9)
    d = solve(problem, "topoopt", time_limit_s=5)
    page = design_page(d, problem, title="t")
    assert 'id="design-optimizer"' in page and 'id="design-circuits"' in page
    assert page.index('<table class="summary">') < page.index('<section class="figure">')
    assert f"<td>{d.solver}</td>" in page


def test_comparison_report_traces_every_design_and_starts_with_the_summary():
    from topoopt.app.report.pages import compare_figures, compare_page
    from topoopt.app.studies.compare import compare
    from traffic.load import load_workload

    res = compare(load_workload("dlrm"), ["ideal", "topoopt", "topoopt-released"], 4, 12.5e9)
    figs = dict(compare_figures(res))
    opt = figs["compare-optimizer"]
    assert {t.name.split(":")[0] for t in opt.data} == {"topoopt", "topoopt-released"}
    page = compare_page(res, "t")
    assert page.index('<table class="summary">') < page.index('<section class="figure">')
    for name in ("ideal (bound)", "topoopt", "topoopt-released"):  # the ideal switch: a bound
        assert f"<td>{name}</td>" in page


# ------------------------------------------------------------------------------------------
# One colour per fabric across all reports; the ideal switch off cost plots (issue 28).
# ------------------------------------------------------------------------------------------


def test_every_fabric_has_its_own_style():
    from topoopt.app.report.palette import BOUNDS, FABRIC_STYLES
    from topoopt.app.studies.compare import FABRICS

    assert set(FABRICS) <= set(FABRIC_STYLES)
    colours = [s["color"] for s in FABRIC_STYLES.values()]
    assert len(set(colours)) == len(colours)  # no two fabrics share a colour
    assert set(BOUNDS) == {"ideal"}


def _compare_like_table(fabrics):
    n = len(fabrics)
    return pd.DataFrame(
        {
            "fabric": fabrics,
            "iteration_s": 1.0 + 0.1 * np.arange(n),
            "comm_s": 0.5 + 0.1 * np.arange(n),
            "capex_usd": 1e6 * (1 + np.arange(n)),
            "server_bandwidth": np.full(n, 1e11),
            "capex_breakdown": [{"switch": 1e6 * (1 + k)} for k in range(n)],
            "power_breakdown": [{"switch": 1e3} for _ in range(n)],
        }
    )


def test_one_colour_per_fabric_in_every_figure():
    """``joint`` (and every other fabric) has one colour and symbol in the capex scatter, the
    utilisation CDF and the cosearch Pareto plot, whatever the other fabrics of the figure and
    their order (the optimizer traces: the next test)."""
    from topoopt.app.report.cosearch_figures import pareto_figure
    from topoopt.app.report.palette import FABRIC_STYLES

    want = {f: FABRIC_STYLES[f] for f in ("joint", "fat-tree", "topoopt", "torus")}
    seen: dict[str, set] = {f: set() for f in want}

    def note(name, colour, symbol=None):
        if name in seen:
            seen[name].add(colour)
            assert symbol in (None, want[name]["symbol"]), name

    for order in (["ideal", "joint", "fat-tree", "topoopt"], ["torus", "topoopt", "joint"]):
        for t in time_vs_capex(_compare_like_table(order)).data:
            note(t.name, t.marker.color, t.marker.symbol)
        frame = pd.DataFrame({"utilisation": [0.1, 0.5], "kind": "network"})
        for t in utilisation_cdf({f: frame for f in order}).data:
            note(t.name, t.line.color)
        records = [
            {"fabric": f, "iteration_s": 1.0 + k, "capex_usd": 1e6 * (3 - k), "label": f"p{k}"}
            for k, f in enumerate(order)
        ]
        for t in pareto_figure(records, records).data:
            if t.name != "Pareto front":
                note(t.name, t.marker.color, t.marker.symbol)
    for f, colours in seen.items():
        assert colours == {want[f]["color"]}, (f, colours)


def test_optimizer_traces_take_the_fabric_colours():
    from solvers import DesignProblem, solve
    from topoopt.app.report.design_figures import optimizer_traces
    from topoopt.app.report.palette import FABRIC_STYLES
    from traffic.load import load_workload

    w = load_workload("dlrm")
    d = solve(DesignProblem.from_workload(w, 4, 12.5e9), "topoopt", seed=0)
    for names in (["topoopt", "joint"], ["joint", "topoopt"]):
        fig = optimizer_traces({n: d for n in names})
        for t in fig.data:
            fabric = t.legendgroup
            assert t.line.color == FABRIC_STYLES[fabric]["color"], t.name


def test_the_ideal_switch_is_off_cost_plots():
    from topoopt.app.report.cosearch_figures import pareto_figure
    from topoopt.app.report.cost_figures import cost_breakdown_bars

    table = _compare_like_table(["ideal", "fat-tree", "joint"])
    scatter = time_vs_capex(table)
    assert [t.name for t in scatter.data] == ["fat-tree", "joint"]
    assert [s.y0 for s in scatter.layout.shapes] == [1000.0]  # its time, as a bound line
    bars = cost_breakdown_bars(table, "capex")
    assert [x.split("<br>")[0] for x in bars.data[0].x] == ["fat-tree", "joint"]
    assert list(bars.data[0].y) == [2.0, 3.0]
    # the ideal switch cheapest and fastest: the front is recomputed over the products
    records = [
        {"fabric": "ideal", "iteration_s": 0.5, "capex_usd": 1e5, "label": "a"},
        {"fabric": "fat-tree", "iteration_s": 2.0, "capex_usd": 1e6, "label": "b"},
        {"fabric": "joint", "iteration_s": 1.0, "capex_usd": 2e6, "label": "c"},
        {"fabric": "joint", "iteration_s": 3.0, "capex_usd": 3e6, "label": "d"},
    ]
    fig = pareto_figure(records, [records[0]])
    names = [t.name for t in fig.data]
    assert "ideal" not in names
    front = fig.data[names.index("Pareto front")]
    assert list(front.x) == [1.0, 2.0] and list(front.y) == [2000.0, 1000.0]
