"""Figure functions return plotly figures of the expected structure and values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from solvers.problem import DesignProblem
from solvers.registry import solve
from topoopt.report.compare_figures import iteration_gantt, ratio_bars, time_vs_capex
from topoopt.report.design_figures import circuit_graph, optimizer_trace
from topoopt.report.pages import circuit_utilisation
from topoopt.report.traffic_figures import server_heatmap
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
    circuits = np.array([[0, 1, 1], [1, 2, 2]])
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
    scatter = time_vs_capex(table)
    assert list(scatter.data[0].x) == [1.0, 2.0]
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
