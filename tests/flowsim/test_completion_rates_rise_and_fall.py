"""A completion that raises one group's rate and lowers another's, against the closed form.

Link A (10 B/s) carries f1 (10 B) and f2 (100 B); link B (20 B/s) carries f2 and f3 (100 B).
Max-min: A's share 5 is the smaller, so f1 and f2 get 5 and f3 the 15 left on B. f1 ends at
t = 2; then f2 alone on A could take 10 and B's 20 split 10 / 10: f2's rate rises to 10 and
f3's falls to 10. f3 has 100 - 15 * 2 = 70 B left: it ends at 2 + 70 / 10 = 9; f2 has
100 - 5 * 2 = 90 B left at t = 2, 70 sent by t = 9, the last 20 alone at 10 B/s (A is still its
bottleneck): it ends at 11. With and without the load log (the event loop may take different
paths for the two), the same times.
"""

import numpy as np
import pytest

from topoopt.flowsim import FlowSet, simulate


@pytest.mark.parametrize("record", [True, False])
def test_a_completion_raises_one_rate_and_lowers_another(record):
    fs = FlowSet(
        capacity=np.array([10.0, 20.0]),
        latency=np.zeros(2),
        size=np.array([10.0, 100.0, 100.0]),
        start=np.zeros(3),
        flow_ptr=np.array([0, 1, 2, 3]),
        path_ptr=np.array([0, 1, 3, 4]),
        path_links=np.array([0, 0, 1, 1]),
        weight=np.ones(3),
    )
    res = simulate(fs, record_series=record)
    np.testing.assert_allclose(res.finish, [2.0, 11.0, 9.0], rtol=1e-14)
    assert res.n_events == 4  # the arrivals at 0, then 2, 9 and 11
    if record:  # B: 5 + 15 from 0, 10 + 10 from 2, f2's 10 from 9, nothing from 11; A: 10
        times, loads = res.link_load(1)
        np.testing.assert_allclose(times, [0.0, 0.0, 2.0, 9.0, 11.0], rtol=1e-14)
        np.testing.assert_allclose(loads, [0.0, 20.0, 20.0, 10.0, 0.0], rtol=1e-14, atol=1e-12)
        times, loads = res.link_load(0)
        np.testing.assert_allclose(loads, [0.0, 10.0, 10.0, 10.0, 0.0], rtol=1e-14, atol=1e-12)
