"""The time-varying engine (:func:`topoopt.flowsim.timevarying.simulate_epochs`).

- without epochs, one class and unit weights it is :func:`topoopt.flowsim.simulate` (random
  FlowSets of ``test_kernels``: multipath, zero bytes, dependencies, latency, multiplicity);
- closed forms: a capacity change and a path change on two links, a pause (capacity 0) and
  resume, strict priorities (two classes on one link; a low class on a link the high class
  leaves idle), weighted sharing;
- random cases with epochs (capacity changes, zeros, path changes), priorities and weights
  against an independent plain-Python simulator that recomputes every rate level by level;
- weighted max-min against SimGrid (``tests/peers/simgrid_peer.py`` with ``sharing_weight``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from test_kernels import random_flowset
from test_simgrid_agreement import CASES, build, make_case, run_peer

from topoopt.flowsim import FlowSet, WorkLimitExceeded, simulate
from topoopt.flowsim.netsim_json import parse_netsim
from topoopt.flowsim.timevarying import Epoch, EpochPaths, simulate_epochs
from traffic.errors import InputError


# ---------------------------------------------------------------------- reference
def level_fill(paths, wts, left):
    """Weighted progressive filling one water level at a time on the capacities ``left``
    (updated in place): every unfrozen flow rises by ``w * inc``; full links freeze theirs."""
    n = len(paths)
    rate = [0.0] * n
    frozen = [False] * n
    while not all(frozen):
        wsum = {}
        for f in range(n):
            if not frozen[f]:
                for link in paths[f]:
                    wsum[link] = wsum.get(link, 0.0) + wts[f]
        inc = min(max(left[link], 0.0) / w for link, w in wsum.items())
        for f in range(n):
            if not frozen[f]:
                rate[f] += wts[f] * inc
        for link, w in wsum.items():
            left[link] -= inc * w
        full = {link for link in wsum if left[link] <= 1e-12 * max(1.0, abs(left[link]) + inc)}
        for link in full:
            left[link] = 0.0
        for f in range(n):
            if not frozen[f] and full.intersection(paths[f]):
                frozen[f] = True
    return rate


def reference(fs, epochs=(), priority=None, weight=None, rtol=1e-12):
    """Event by event from scratch: ``(start, finish)`` per flow (semantics of the module)."""
    n_f = fs.n_flows
    prio = [0] * n_f if priority is None else list(priority)
    wt = [1.0] * n_f if weight is None else list(weight)
    mult = fs.multiplicity.tolist()
    versions = [(fs.flow_ptr.tolist(), fs.path_ptr.tolist(), fs.path_links.tolist(), fs.weight)]
    ep_list = []
    for e in epochs:
        v = None
        if e.paths is not None:
            p = e.paths
            versions.append(
                (p.flow_ptr.tolist(), p.path_ptr.tolist(), p.path_links.tolist(), p.weight)
            )
            v = len(versions) - 1
        ep_list.append((e.start_s, e.capacity.tolist(), v))
    lat = fs.latency.tolist()

    def paths_of(v, f):
        fp, pp, pl, w = versions[v]
        return [(pl[pp[p] : pp[p + 1]], float(w[p])) for p in range(fp[f], fp[f + 1])]

    deps = [fs.deps[fs.dep_ptr[f] : fs.dep_ptr[f + 1]].tolist() for f in range(n_f)]
    release = [float(fs.start[f]) if not deps[f] else None for f in range(n_f)]
    finish = [np.inf] * n_f
    done = [False] * n_f
    started = [False] * n_f
    arrive = [-np.inf] * n_f
    pieces = []  # dicts: flow, links, left, rate, last
    cap = fs.capacity.tolist()
    ver, ei, t = 0, 0, 0.0
    while True:
        t_c = min((t + p["left"] / p["rate"] for p in pieces if p["rate"] > 0), default=np.inf)
        due = [release[f] for f in range(n_f) if not started[f] and release[f] is not None]
        t_next = min(t_c, min(due, default=np.inf), ep_list[ei][0] if ei < len(ep_list) else np.inf)
        if t_next == np.inf:
            break
        for p in pieces:
            if p["rate"] > 0 and t_next > t:
                p["left"] -= p["rate"] * (t_next - t)
                p["last"] = t_next
        t = max(t, t_next)
        cut = t + rtol * abs(t)
        ended = [p for p in pieces if p["rate"] > 0 and p["left"] <= p["rate"] * (cut - t)]
        while True:
            for p in ended:
                f = p["flow"]
                arrive[f] = max(arrive[f], t + sum(lat[k] for k in p["links"]))
                pieces.remove(p)
            for f in range(n_f):
                if started[f] and not done[f] and not any(p["flow"] == f for p in pieces):
                    done[f] = True
                    finish[f] = arrive[f]
            for f in range(n_f):
                if release[f] is None and all(done[d] for d in deps[f]):
                    release[f] = max([float(fs.start[f])] + [finish[d] for d in deps[f]])
            while ei < len(ep_list) and ep_list[ei][0] <= cut:
                _, cap, v = ep_list[ei]
                ei += 1
                if v is None:
                    continue
                ver = v
                rem = {}
                for p in pieces:
                    f = p["flow"]
                    rem[f] = rem.get(f, 0.0) + max(p["left"], 0.0)
                    if p["sent0"] > max(p["left"], 0.0):
                        arrive[f] = max(arrive[f], p["last"] + sum(lat[k] for k in p["links"]))
                pieces = []
                for f, r in rem.items():
                    for links, w in paths_of(ver, f):
                        pieces.append(
                            {"flow": f, "links": links, "left": r * w, "sent0": r * w,
                             "rate": 0.0, "last": -np.inf}
                        )  # fmt: skip
            new = [
                f for f in range(n_f) if not started[f] and release[f] is not None
                and release[f] <= cut
            ]  # fmt: skip
            if not new:
                break
            ended = []
            for f in new:
                started[f] = True
                for links, w in paths_of(ver, f):
                    p = {"flow": f, "links": links, "left": fs.size[f] * w,
                         "sent0": fs.size[f] * w, "rate": 0.0, "last": -np.inf}  # fmt: skip
                    pieces.append(p)
                    if p["left"] <= 0:
                        ended.append(p)
        # lexicographic weighted max-min; a flow of multiplicity m counts m times
        left = list(cap)
        for c in sorted({prio[p["flow"]] for p in pieces}):
            mine = [p for p in pieces if prio[p["flow"]] == c]
            rates = level_fill(
                [p["links"] for p in mine], [wt[p["flow"]] * mult[p["flow"]] for p in mine], left
            )
            for p, r in zip(mine, rates, strict=True):
                p["rate"] = r / mult[p["flow"]]
    start = [np.inf if r is None else r for r in release]
    return np.array(start, float), np.array(finish, float)


def random_paths(rng, n_links, n_flows):
    flow_ptr, path_ptr, links, weight = [0], [0], [], []
    for _ in range(n_flows):
        k = 2 if rng.random() < 0.3 else 1
        for w in [0.25, 0.75] if k == 2 else [1.0]:
            links += sorted(
                rng.choice(n_links, rng.integers(1, min(4, n_links + 1)), replace=False)
            )
            path_ptr.append(len(links))
            weight.append(w)
        flow_ptr.append(len(weight))
    return EpochPaths(flow_ptr, path_ptr, links, weight)


# ---------------------------------------------------------------------- equals simulate()
@pytest.mark.parametrize("seed", range(30))
def test_without_epochs_it_is_simulate(seed):
    rng = np.random.default_rng(3000 + seed)
    fs = random_flowset(
        rng,
        int(rng.integers(2, 9)),
        int(rng.integers(5, 60)),
        multipath=seed % 2 == 0,
        zero=seed % 3 == 0,
        deps=seed % 4 < 2,
        latency=seed % 5 < 3,
        stagger=[0.0, 0.3, 0.8][seed % 3],
    )
    if seed % 4 == 3:
        fs = fs.with_multiplicity(rng.integers(1, 4, fs.n_flows))
    a, b = simulate(fs), simulate_epochs(fs)
    for name in ("start", "finish", "path_last_byte", "path_finish", "link_bytes"):
        np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-12, atol=0)
    assert b.n_events == a.n_events and b.makespan == pytest.approx(a.makespan, rel=1e-12)
    # equal priorities and equal weights of any value are the same sharing
    c = simulate_epochs(fs, priority=np.full(fs.n_flows, 3), weight=np.full(fs.n_flows, 2.5))
    np.testing.assert_allclose(c.finish, a.finish, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------- closed forms
def test_capacity_change_on_two_links():
    # flow 0 on A,B and flow 1 on B, 60 bytes each; both 10 B/s. Until 2 s: 5 B/s each on B.
    # From 2 s B has 30 B/s: flow 0 is held by A at 10 (50 bytes: 7 s), flow 1 gets 20 (4.5 s).
    fs = FlowSet.single_path(
        [10.0, 10.0], [0.0, 0.0], size=[60.0, 60.0], start=[0.0, 0.0], paths=[[0, 1], [1]]
    )
    res = simulate_epochs(fs, [Epoch(2.0, [10.0, 30.0])])
    np.testing.assert_allclose(res.finish, [7.0, 4.5], rtol=1e-14)
    times, loads = res.link_load(1)
    assert times.tolist() == [0, 0, 2, 4.5, 7] and loads.tolist() == [0, 10, 30, 10, 0]
    np.testing.assert_allclose(res.link_bytes, [60.0, 120.0])


def test_path_change_re_splits_the_remaining_bytes():
    # Two 10 B/s links A (latency 0.25 s) and B (latency 0.5 s); flows 0, 1 of 100 bytes on A
    # share 5 B/s each until 4 s (80 left each). Then flow 0 moves to A and B half-half: 40 on
    # B alone ends at 8 s, 40 on A at 5 B/s ends at 12 s (arrives 12.25); flow 1 then has 40
    # left at 10 B/s: ends at 16 s (arrives 16.25).
    fs = FlowSet.single_path(
        [10.0, 10.0], [0.25, 0.5], size=[100.0, 100.0], start=[0.0, 0.0], paths=[[0], [0]]
    )
    new = EpochPaths([0, 2, 3], [0, 1, 2, 3], [0, 1, 0], [0.5, 0.5, 1.0])
    res = simulate_epochs(fs, [Epoch(4.0, [10.0, 10.0], new)])
    np.testing.assert_allclose(res.finish, [12.25, 16.25], rtol=1e-14)
    np.testing.assert_allclose(res.link_bytes, [160.0, 40.0])
    # every unfinished flow is re-split onto the epoch's paths: no per-path times of their own
    assert np.isnan(res.path_last_byte).all()
    # a one-path swap: each alone on its link from 4 s, 80 bytes at 10 B/s
    swap = EpochPaths.single_path([[1], [0]])
    res = simulate_epochs(fs, [Epoch(4.0, [10.0, 10.0], swap)])
    np.testing.assert_allclose(res.finish, [12.5, 12.25], rtol=1e-14)
    # a flow that starts after the change starts on the new paths
    late = FlowSet.single_path(
        [10.0, 10.0], [0.0, 0.0], size=[100.0, 30.0], start=[0.0, 5.0], paths=[[0], [0]]
    )
    res = simulate_epochs(late, [Epoch(4.0, [10.0, 10.0], swap)])
    np.testing.assert_allclose(res.finish, [10.0, 8.0], rtol=1e-14)


def test_pause_then_resume():
    # A, B of 10 B/s; flow 0 on A, flow 1 on A,B, flow 2 on B, 100 bytes each. Until 3 s all
    # get 5 B/s (85 left). A is off from 3 to 5 s: flows 0, 1 pause, flow 2 runs at 10 (65 left
    # at 5 s). Then 5 B/s each again: flow 2 ends at 18 s, flows 0 and 1 (20 left, still 5 B/s
    # on A) at 22 s.
    fs = FlowSet.single_path(
        [10.0, 10.0], [0.0, 0.0], size=[100.0] * 3, start=[0.0] * 3, paths=[[0], [0, 1], [1]]
    )
    res = simulate_epochs(fs, [Epoch(3.0, [0.0, 10.0]), Epoch(5.0, [10.0, 10.0])])
    np.testing.assert_allclose(res.finish, [22.0, 22.0, 18.0], rtol=1e-14)
    times, loads = res.link_load(0)
    assert times.tolist() == [0.0, 0.0, 3.0, 5.0, 22.0] and loads.tolist() == [0, 10, 0, 10, 0]
    # off for good: flows 0 and 1 never finish, flow 2 ends at 3 + 8.5 s
    res = simulate_epochs(fs, [Epoch(3.0, [0.0, 10.0])])
    assert res.finish[:2].tolist() == [np.inf, np.inf] and res.finish[2] == pytest.approx(11.5)
    # a flow released during a pause waits for the capacity (starts at 1 s, sends from 5 s)
    one = FlowSet.single_path([10.0], [0.0], size=[20.0], start=[1.0], paths=[[0]])
    res = simulate_epochs(one, [Epoch(0.0, [0.0]), Epoch(5.0, [10.0])])
    assert res.start.tolist() == [1.0] and res.finish.tolist() == [7.0]


def test_strict_priority_on_one_link():
    # 10 B/s; the low flow (100 bytes) runs alone until the high one (50 bytes) arrives at 2 s,
    # then waits 5 s: high ends at 7 s, low (80 left) at 15 s.
    fs = FlowSet.single_path([10.0], [0.0], size=[100.0, 50.0], start=[0.0, 2.0], paths=[[0], [0]])
    res = simulate_epochs(fs, priority=[1, 0])
    np.testing.assert_allclose(res.finish, [15.0, 7.0], rtol=1e-14)
    # the classes are ranks: 7 and 3 are the same as 1 and 0
    np.testing.assert_array_equal(simulate_epochs(fs, priority=[7, 3]).finish, res.finish)


def test_low_class_takes_what_the_high_class_leaves():
    # A = 5, B = 10 B/s. High flow 0 on A,B is held at 5 by A, so B has 5 left for low flow 1
    # (50 bytes: 10 s); low flow 2 on A gets nothing until flow 0 (100 bytes) ends at 20 s,
    # then 10 bytes at 5 B/s: 22 s.
    fs = FlowSet.single_path(
        [5.0, 10.0], [0.0, 0.0], size=[100.0, 50.0, 10.0], start=[0.0] * 3,
        paths=[[0, 1], [1], [0]],
    )  # fmt: skip
    res = simulate_epochs(fs, priority=[0, 1, 1])
    np.testing.assert_allclose(res.finish, [20.0, 10.0, 22.0], rtol=1e-14)
    # without priorities: A is shared 2.5/2.5 until flow 2 ends at 4 s, ...
    flat = simulate_epochs(fs)
    np.testing.assert_allclose(flat.finish, simulate(fs).finish, rtol=1e-12)
    assert flat.finish[0] > res.finish[0]


def test_weighted_parking_lot():
    # A, B of 12 B/s; flow 0 (weight 1) on A,B, flow 1 (weight 2) on A, flow 2 (weight 1) on B.
    # A fills first at level 12 / 3 = 4: rates 4 and 8; B gives flow 2 the 8 left. 48 bytes
    # each: flows 1 and 2 end at 6 s; flow 0 (24 left) then runs alone at 12: ends at 8 s.
    fs = FlowSet.single_path(
        [12.0, 12.0], [0.0, 0.0], size=[48.0] * 3, start=[0.0] * 3, paths=[[0, 1], [0], [1]]
    )
    res = simulate_epochs(fs, weight=[1.0, 2.0, 1.0])
    np.testing.assert_allclose(res.finish, [8.0, 6.0, 6.0], rtol=1e-14)
    # weight and multiplicity: a class of 2 flows of weight 1 with a flow of weight 2 on one
    # 8 B/s link: 2 B/s per member, 4 B/s for the other (8 bytes: 2 s); then the members' last
    # 4 bytes at 4 B/s each: 3 s
    one = FlowSet.single_path([8.0], [0.0], size=[8.0, 8.0], start=[0.0, 0.0], paths=[[0], [0]])
    res = simulate_epochs(one.with_multiplicity([2, 1]), weight=[1.0, 2.0])
    np.testing.assert_allclose(res.finish, [3.0, 2.0], rtol=1e-14)
    np.testing.assert_allclose(res.link_bytes, [24.0])


def test_non_preemptive_micro_ops():
    # 10 B/s; a low flow of 100 bytes from 0 s, a high flow of 50 bytes at 2.5 s. Preemptive:
    # high alone, ends at 7.5 s. Low non-preemptive as a whole: it keeps sharing (75 left at
    # 2.5 s, 5 B/s each): high ends at 12.5 s. Low in 10 non-preemptive micro-ops of 10 bytes:
    # the one in flight at 2.5 s (5 left) shares until 3.5 s, the next waits for the high
    # flow (45 left at 10 B/s: 8 s) and starts at 8 s. The low flow ends at 15 s every time.
    fs = FlowSet.single_path([10.0], [0.0], size=[100.0, 50.0], start=[0.0, 2.5], paths=[[0], [0]])
    pre = simulate_epochs(fs, priority=[1, 0])
    np.testing.assert_allclose(pre.finish, [15.0, 7.5], rtol=1e-14)
    whole = simulate_epochs(fs, priority=[1, 0], nonpreemptive=np.array([True, False]))
    np.testing.assert_allclose(whole.finish, [15.0, 12.5], rtol=1e-14)
    chain = FlowSet.single_path(
        [10.0], [0.0], size=[10.0] * 10 + [50.0], start=[0.0] * 10 + [2.5],
        paths=[[0]] * 11, after=[[]] + [[i] for i in range(9)] + [[]],
    )  # fmt: skip
    res = simulate_epochs(chain, priority=[1] * 10 + [0], nonpreemptive=np.arange(11) < 10)
    np.testing.assert_allclose(res.finish[[9, 10]], [15.0, 8.0], rtol=1e-14)
    np.testing.assert_allclose(res.start[:5], [0.0, 1.0, 2.0, 8.0, 9.0], rtol=1e-14)
    # a non-preemptive flow only waits for higher classes on its own links: on another link
    # it starts at once
    two = FlowSet.single_path([10.0, 10.0], [0.0, 0.0], size=[10.0, 10.0], start=[0.0, 0.0],
                              paths=[[0], [1]])  # fmt: skip
    res = simulate_epochs(two, priority=[0, 1], nonpreemptive=np.array([False, True]))
    assert res.finish.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("seed", range(6))
def test_non_preemptive_in_one_class_changes_nothing(seed):
    rng = np.random.default_rng(6000 + seed)
    fs = random_flowset(rng, 5, 30, multipath=True, zero=True, deps=True, latency=True,
                        stagger=0.5)  # fmt: skip
    res = simulate_epochs(fs, nonpreemptive=rng.random(fs.n_flows) < 0.5)
    np.testing.assert_allclose(res.finish, simulate(fs).finish, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------- against the reference
@pytest.mark.parametrize("seed", range(16))
def test_random_epochs_priorities_weights_match_the_reference(seed):
    rng = np.random.default_rng(4000 + seed)
    n_l = int(rng.integers(2, 7))
    fs = random_flowset(
        rng, n_l, int(rng.integers(4, 25)), multipath=True, zero=seed % 3 == 0,
        deps=seed % 2 == 0, latency=seed % 4 < 2, stagger=0.5,
    )  # fmt: skip
    if seed % 5 == 4:
        fs = fs.with_multiplicity(rng.integers(1, 3, fs.n_flows))
    epochs, t = [], 0.0
    for _ in range(int(rng.integers(1, 5))):
        t += float(rng.choice([0.3, 0.7, 1.1]))
        cap = rng.choice([0.0, 1.0, 2.0, 4.0], n_l, p=[0.15, 0.3, 0.3, 0.25])
        paths = random_paths(rng, n_l, fs.n_flows) if rng.random() < 0.5 else None
        epochs.append(Epoch(t, cap, paths))
    epochs.append(Epoch(t + 1.0, np.full(n_l, 3.0)))  # everything can finish in the end
    prio = rng.integers(0, 3, fs.n_flows) if seed % 2 else None
    wts = rng.choice([0.5, 1.0, 2.0, 3.0], fs.n_flows) if seed % 3 else None
    res = simulate_epochs(fs, epochs, priority=prio, weight=wts)
    start, finish = reference(fs, epochs, prio, wts)
    assert np.isfinite(res.finish).all()
    np.testing.assert_allclose(res.start, start, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.finish, finish, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------- SimGrid weights
WEIGHTED = [c for c in CASES if c[0] in ("fat_tree4", "torus4x4", "direct16d4") and c[1] >= 40]


@pytest.mark.parametrize(("name", "n_flows", "split"), WEIGHTED)
def test_weighted_sharing_agrees_with_simgrid(name, n_flows, split, tmp_path):
    seed = 5000 + WEIGHTED.index((name, n_flows, split))
    graph, hosts = build(name, seed)
    case = make_case(graph, hosts, n_flows, seed, split)
    w = np.random.default_rng(seed).choice([0.5, 1.0, 2.0, 3.0], n_flows)
    ours = simulate_epochs(parse_netsim(case).flows, weight=w).finish
    weighted = copy.deepcopy(case)
    for flow, x in zip(weighted["flows"], w, strict=True):
        flow["sharing_weight"] = float(x)
    theirs = np.array([f["finish"] for f in run_peer(weighted, tmp_path)["flows"]])
    rel = np.abs(ours - theirs) / theirs
    assert rel.max() <= 1e-9, f"max relative difference {rel.max():.3e} at flow {rel.argmax()}"
    # the weights matter: unweighted finish times differ well beyond the tolerance
    assert np.abs(simulate(parse_netsim(case).flows).finish - theirs).max() > 1e-6 * theirs.max()


# ---------------------------------------------------------------------- input and limits
def two_flows():
    return FlowSet.single_path(
        [10.0, 10.0], [0.0, 0.0], size=[10.0, 10.0], start=[0.0, 0.0], paths=[[0], [1]]
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"epochs": [Epoch(1.0, [1.0, 1.0]), Epoch(1.0, [1.0, 1.0])]}, "epochs[1].start_s"),
        ({"epochs": [Epoch(-1.0, [1.0, 1.0])]}, "epochs[0].start_s"),
        ({"epochs": [Epoch(1.0, [1.0])]}, "epochs[0].capacity"),
        ({"epochs": [Epoch(1.0, [1.0, -1.0])]}, "epochs[0].capacity[1]"),
        ({"epochs": [Epoch(1.0, [1.0, np.nan])]}, "epochs[0].capacity[1]"),
        ({"epochs": [(1.0, [1.0, 1.0])]}, "epochs[0]"),
        ({"epochs": [Epoch(1.0, [1.0, 1.0], EpochPaths.single_path([[0]]))]}, "epochs[0].paths"),
        (
            {"epochs": [Epoch(1.0, [1.0, 1.0], EpochPaths([0, 1, 2], [0, 1, 2], [0, 5], [1, 1]))]},
            "epochs[0].paths",
        ),
        ({"priority": [0, -1]}, "priority[1]"),
        ({"priority": [0, 0.5]}, "priority[1]"),
        ({"priority": [0]}, "priority"),
        ({"weight": [1.0, 0.0]}, "weight[1]"),
        ({"weight": [1.0, np.inf]}, "weight[1]"),
        ({"rtol": 0.1}, "rtol"),
        ({"max_refills": -1}, "max_refills"),
        ({"nonpreemptive": [1, 0]}, "nonpreemptive"),
        ({"nonpreemptive": np.array([True])}, "nonpreemptive"),
    ],
)
def test_bad_input_is_an_input_error(kwargs, field):
    with pytest.raises(InputError) as err:
        simulate_epochs(two_flows(), **kwargs)
    assert err.value.field.startswith(field)


def test_work_limit_stops_deterministically():
    rng = np.random.default_rng(7)
    fs = random_flowset(rng, 5, 40, multipath=True, zero=False, deps=False, latency=False,
                        stagger=0.5)  # fmt: skip
    full = simulate_epochs(fs)
    assert full.refills > 10
    with pytest.raises(WorkLimitExceeded) as err:
        simulate_epochs(fs, max_refills=full.refills // 2)
    assert err.value.limit == full.refills // 2
    assert simulate_epochs(fs, max_refills=full.refills).refills == full.refills


# ---------------------------------------------------------------------- many events
def long_run_flowset(seed: int, n_flows: int = 500, n_links: int = 10) -> FlowSet:
    """Distinct sizes and starts: hundreds of events, rates changing at most of them."""
    rng = np.random.default_rng(seed)
    flow_ptr, path_ptr, plinks, weight = [0], [0], [], []
    for _ in range(n_flows):
        w = [0.4, 0.6] if rng.random() < 0.3 else [1.0]
        for x in w:
            plinks += sorted(rng.choice(n_links, rng.integers(1, 4), replace=False).tolist())
            path_ptr.append(len(plinks))
            weight.append(x)
        flow_ptr.append(len(weight))
    after = [
        sorted(set(rng.integers(0, f, 2).tolist())) if f and rng.random() < 0.3 else []
        for f in range(n_flows)
    ]
    return FlowSet(
        capacity=rng.uniform(1.0, 5.0, n_links), latency=rng.choice([0.0, 0.01], n_links),
        size=rng.uniform(0.5, 10.0, n_flows), start=rng.uniform(0.0, 20.0, n_flows),
        flow_ptr=flow_ptr, path_ptr=path_ptr, path_links=plinks, weight=weight,
        dep_ptr=np.concatenate([[0], np.cumsum([len(a) for a in after])]),
        deps=np.array(sum(after, []), np.int64),
    )  # fmt: skip


@pytest.mark.parametrize("seed", [11, 12])
def test_long_runs_equal_simulate(seed):
    """Long runs (hundreds of events, partial re-fills, arrivals among running flows), alone
    and with a no-op epoch that re-fills everything midway, are :func:`simulate`'s run, event
    for event."""
    fs = long_run_flowset(seed)
    a = simulate(fs)
    for epochs in ([], [Epoch(7.3, fs.capacity)]):
        b = simulate_epochs(fs, epochs)
        assert b.n_events - len(epochs) == a.n_events > 400
        for name in ("start", "finish", "link_bytes"):
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-9, atol=0)


# ---------------------------------------------------------------------- late cut
def test_late_cut_closed_form():
    """Flow 0 (300 B on link 0, 100 B/s) has 200 B left when link 0 drops to 50 B/s at 1 s: it
    ends at 1 + 200 / 50 = 5 s. Flow 1 (400 B on link 1) ends at 4 s. With a horizon of 4.5 s
    the plain run simulates flow 1's end; the late cut stops at the epoch (5 > 4.5)."""
    fs = FlowSet.single_path([100.0, 100.0], [0.0, 0.0], size=[300.0, 400.0], start=[0.0, 0.0],
                             paths=[[0], [1]])  # fmt: skip
    ep = [Epoch(1.0, np.array([50.0, 100.0]))]
    assert simulate_epochs(fs, ep).finish.tolist() == [5.0, 4.0]
    plain = simulate_epochs(fs, ep, horizon=4.5)
    cut = simulate_epochs(fs, ep, horizon=4.5, late_cut=True)
    assert plain.finish.tolist() == [np.inf, 4.0]
    assert cut.finish.tolist() == [np.inf, np.inf] and cut.n_events < plain.n_events
    # at the horizon 5 s nothing is cut: the bound is the finish itself
    assert simulate_epochs(fs, ep, horizon=5.0, late_cut=True).finish.tolist() == [5.0, 4.0]
    # bytes on a link of capacity 0 in the last epoch never arrive: cut at once
    dark = [Epoch(1.0, np.array([0.0, 100.0]))]
    assert simulate_epochs(fs, dark, horizon=100.0, late_cut=True).finish.tolist() == [
        np.inf, np.inf
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
def test_late_cut_decides_as_the_horizon_does(seed, monkeypatch):
    """For horizons around the finishes: every flow ends by the horizon with the late cut
    exactly when it does without, with the same finishes; when not, the finishes the cut run
    has are the plain run's. Checked at the last epoch only, or also every 1 or 5 events."""
    import topoopt.flowsim.timevarying as tv

    monkeypatch.setattr(tv, "LATE_EVERY", [10**9, 1, 5][seed % 3])
    rng = np.random.default_rng(5000 + seed)
    fs = long_run_flowset(seed, n_flows=60 + 40 * (seed % 3), n_links=4 + seed % 3)
    t_ep = float(rng.uniform(2.0, 15.0))
    paths = random_paths(rng, fs.n_links, fs.n_flows) if seed % 2 else None
    epochs = [Epoch(t_ep, rng.uniform(0.5, 4.0, fs.n_links), paths)]
    full = simulate_epochs(fs, epochs)
    end = float(full.finish.max())
    for hz in [0.5 * t_ep, t_ep, *np.quantile(full.finish, [0.5, 0.9, 0.99]), end, 2 * end]:
        plain = simulate_epochs(fs, epochs, horizon=hz)
        cut = simulate_epochs(fs, epochs, horizon=hz, late_cut=True)
        done = np.isfinite(plain.finish).all()
        assert np.isfinite(cut.finish).all() == done
        seen = np.isfinite(cut.finish)
        np.testing.assert_array_equal(cut.finish[seen], plain.finish[seen])
        assert cut.n_events <= plain.n_events
        if done:
            np.testing.assert_array_equal(cut.finish, full.finish)


def test_bytes_left_closed_form():
    """Flow 0: 300 B from 0 s on link 0 (100 B/s), flow 1: 100 B from 5 s on paths [0] and
    [1] split 0.25 / 0.75. At 1 s flow 0 has 200 B left and flow 1 has not started (25 and
    75 B); at 4 s flow 0 is done; the run is unchanged by the taking."""
    fs = FlowSet(
        capacity=[100.0, 100.0], latency=[0.0, 0.0], size=[300.0, 100.0], start=[0.0, 5.0],
        flow_ptr=[0, 1, 3], path_ptr=[0, 1, 2, 3], path_links=[0, 0, 1],
        weight=[1.0, 0.25, 0.75],
    )  # fmt: skip
    plain = simulate_epochs(fs)
    res, left = simulate_epochs(fs, left_at=[4.0, 1.0, 99.0])
    np.testing.assert_array_equal(res.finish, plain.finish)
    assert left.times.tolist() == [1.0, 4.0, 99.0] and left.ok.all()
    assert left.version.tolist() == [0, 0, 0]
    assert [x.tolist() for x in left.left] == [[200.0, 25.0, 75.0], [0.0, 25.0, 75.0], [0.0] * 3]
    # the run stops before 7 s (at its horizon, 2 s: the next event is at 3 s), or at once
    _, left = simulate_epochs(fs, horizon=2.0, left_at=[1.0, 3.0, 7.0])
    assert left.ok.tolist() == [True, True, False] and left.left[2] is None
    _, left = simulate_epochs(fs, horizon=2.0, late_cut=True, left_at=[1.0])
    assert left.ok.tolist() == [False]


# ---------------------------------------------------------- the rest after the last epoch
def _epochs_for(seed, fs, rng):
    """One epoch (capacities, with new paths for odd seeds), or for seeds divisible by 3 a
    dark one (link 0 carries nothing) then the last one."""
    t_ep = float(rng.uniform(2.0, 15.0))
    paths = random_paths(rng, fs.n_links, fs.n_flows) if seed % 2 else None
    last = Epoch(t_ep + 0.5, rng.uniform(0.5, 4.0, fs.n_links), paths)
    if seed % 3:
        return [last]
    dark = fs.capacity.copy()
    dark[0] = 0.0
    return [Epoch(t_ep, dark), last]


@pytest.mark.parametrize("seed", range(6))
def test_the_rest_after_the_last_epoch_is_the_run(seed):
    """The run handed over at its last epoch's start, its rest simulated by :func:`simulate`
    (:func:`remainder_flows`), is the whole run of :func:`simulate_epochs`: the same finishes
    (the rest's, or the arrivals so far where later); the flows finished before are the
    run's, exactly; the handoff is at the last epoch's start."""
    from topoopt.flowsim.timevarying import remainder_flows

    rng = np.random.default_rng(7000 + seed)
    fs = long_run_flowset(seed, n_flows=60 + 40 * (seed % 3), n_links=4 + seed % 3)
    epochs = _epochs_for(seed, fs, rng)
    full = simulate_epochs(fs, epochs)
    res, ho = simulate_epochs(fs, epochs, horizon=1e9, handoff=True)
    assert ho.handed and ho.time == epochs[-1].start_s
    done = np.isfinite(res.finish)
    np.testing.assert_array_equal(res.finish[done], full.finish[done])
    rest, idx, floor = remainder_flows(fs, res, ho)
    np.testing.assert_array_equal(idx, np.flatnonzero(~done))
    assert rest.n_flows == idx.size > 10 and np.any(ho.n_left > 0)
    sim = simulate(rest)
    np.testing.assert_allclose(np.maximum(sim.finish, floor), full.finish[idx], rtol=1e-9, atol=0)
    if epochs[-1].paths is not None:  # every piece re-split at the handoff, none has sent:
        # the rest carries what the run carries after it
        sent = res.link_bytes + sim.link_bytes
        np.testing.assert_allclose(sent, full.link_bytes, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_past_horizon_after_epochs_decides_as_the_horizon_does(seed):
    """For horizons around the last byte (no latency: the last finish), the verdict is the
    plain run's (some flow unfinished at the horizon) whenever the horizon is off the last
    byte by more than the margin, and never ``True`` when the plain run ends by it."""
    from topoopt.flowsim.timevarying import past_horizon_after_epochs

    rng = np.random.default_rng(8000 + seed)
    fs = long_run_flowset(seed, n_flows=60 + 40 * (seed % 3), n_links=4 + seed % 3)
    fs = FlowSet(**{**{k: getattr(fs, k) for k in (
        "capacity", "size", "start", "flow_ptr", "path_ptr", "path_links", "weight", "dep_ptr",
        "deps")}, "latency": np.zeros(fs.n_links)})  # fmt: skip
    epochs = _epochs_for(seed, fs, rng)
    end = float(simulate_epochs(fs, epochs).finish.max())
    t_last = epochs[-1].start_s
    for hz in [0.5 * t_last, t_last, 0.5 * (t_last + end), end * (1 - 1e-4), end * (1 + 1e-4)]:
        plain = not np.all(np.isfinite(simulate_epochs(fs, epochs, horizon=hz).finish))
        assert past_horizon_after_epochs(fs, epochs, hz).past == plain
    assert not past_horizon_after_epochs(fs, epochs, end).past
    # the bytes left are taken in the first run, as simulate_epochs takes them
    v = past_horizon_after_epochs(fs, epochs, end * 0.9, left_at=[0.5 * t_last])
    _, own = simulate_epochs(fs, epochs, left_at=[0.5 * t_last])
    assert v.past and v.by in ("run", "rest") and v.left.ok[0]
    np.testing.assert_array_equal(v.left.left[0], own.left[0])


def test_past_horizon_after_epochs_paused_forever():
    """Bytes on a link of capacity 0 in the last epoch never arrive: past any horizon (the
    late cut at the handoff); a run that ends before the last epoch is as the plain run."""
    from topoopt.flowsim.timevarying import past_horizon_after_epochs

    fs = FlowSet.single_path([100.0, 100.0], [0.0, 0.0], size=[300.0, 400.0], start=[0.0, 0.0],
                             paths=[[0], [1]])  # fmt: skip
    v = past_horizon_after_epochs(fs, [Epoch(1.0, np.array([0.0, 100.0]))], 100.0)
    assert (v.past, v.by) == (True, "run")
    late = [Epoch(10.0, np.array([0.0, 100.0]))]  # both done at 3 and 4 s
    assert not past_horizon_after_epochs(fs, late, 100.0).past
    v = past_horizon_after_epochs(fs, late, 3.5)
    assert (v.past, v.by) == (True, "run")


@pytest.mark.parametrize("seed", range(4))
def test_rest_kernel_is_the_static_engine_with_a_horizon(seed, monkeypatch):
    """Without a horizon the rest's event loop is :func:`simulate`'s, to the last bit (the same
    code); with one, it stops exactly when some byte is sent after it (horizons off the last
    byte by 1e-3 relative: the late cut's margin is far below), and the flows it finished
    are :func:`simulate`'s. The late cut checked at the start only, or every 1 or 5 events."""
    import topoopt.flowsim.timevarying as tv
    from topoopt.flowsim.timevarying import _rest_run

    monkeypatch.setattr(tv, "LATE_EVERY", [10**9, 1, 5, 1][seed])

    rng = np.random.default_rng(9000 + seed)
    fs = random_flowset(rng, int(rng.integers(3, 8)), int(rng.integers(30, 80)), multipath=True,
                        zero=seed == 2, deps=True, latency=seed % 2 == 0, stagger=0.3)  # fmt: skip
    if seed % 2:
        fs = fs.with_multiplicity(rng.integers(1, 4, fs.n_flows))
    a = simulate(fs, record_series=False)
    finish, last, stopped, refills = _rest_run(fs, np.inf, 1e-12, -1)
    assert not stopped and refills == a.refills
    np.testing.assert_array_equal(finish, a.finish)
    np.testing.assert_array_equal(last, a.path_last_byte)
    end = float(np.max(a.path_last_byte))
    for cut in [0.3 * end, 0.9 * end, end * (1 - 1e-3), end * (1 + 1e-3)]:
        finish, _, stopped, _ = _rest_run(fs, cut, 1e-12, -1)
        assert stopped == (end > cut)
        seen = np.isfinite(finish)
        np.testing.assert_array_equal(finish[seen], a.finish[seen])


# ------------------------------------------------- the first epoch's bytes left, bounded below
@pytest.mark.parametrize("seed", range(4))
def test_unreleased_left_is_below_the_bytes_left(seed):
    """The static engine's lower bounds of the bytes left at times inside the first epoch
    (:func:`unreleased_left`): never above what :func:`simulate_epochs` takes there, equal to
    it (the whole size by the weights) on every flow the run has not released by then, and
    0 elsewhere; with multiplicities, dependencies, latencies and a later epoch of new paths."""
    from topoopt.flowsim.timevarying import unreleased_left

    rng = np.random.default_rng(9500 + seed)
    fs = long_run_flowset(seed, n_flows=60 + 40 * (seed % 3), n_links=4 + seed % 3)
    if seed % 2:
        fs = fs.with_multiplicity(rng.integers(1, 4, fs.n_flows))
    first = random_paths(rng, fs.n_links, fs.n_flows)
    cap0 = rng.uniform(0.5, 4.0, fs.n_links)
    t_ep = float(rng.uniform(8.0, 15.0))
    epochs = [Epoch(0.0, cap0, first), Epoch(t_ep, rng.uniform(0.5, 4.0, fs.n_links),
                                             EpochPaths.of(fs))]  # fmt: skip
    times = sorted(rng.uniform(0.5, t_ep, 4).tolist()) + [t_ep]
    res, own = simulate_epochs(fs, epochs, left_at=times)
    got = unreleased_left(fs, epochs, times)
    assert got.ok.all() and got.version.tolist() == [1] * len(times)
    pflow = np.repeat(np.arange(fs.n_flows), np.diff(first.flow_ptr))
    full = fs.size[pflow] * first.weight
    n_waiting = 0
    for x, lo, exact in zip(times, got.left, own.left, strict=True):
        assert np.all(lo <= exact + 1e-9 * full)
        waiting = res.start[pflow] > x * (1 + 1e-6)  # released after x in the run itself
        np.testing.assert_allclose(lo[waiting], exact[waiting], rtol=1e-12, atol=0)
        np.testing.assert_array_equal(lo[waiting], full[waiting])
        assert np.all((lo == 0.0) | (lo == full))
        n_waiting += int(waiting.sum())
    assert n_waiting > 20


def test_unreleased_left_refuses_what_it_cannot_state():
    """No epoch at 0 with paths, a time past the second epoch, a path of the first epoch on a
    link of capacity 0: ``None``."""
    from topoopt.flowsim.timevarying import unreleased_left

    fs = FlowSet.single_path([1.0, 1.0], [0.0, 0.0], size=[1.0, 2.0], start=[0.0, 0.0],
                             paths=[[0], [1]], after=[[], [0]])  # fmt: skip
    p = EpochPaths.of(fs)
    assert unreleased_left(fs, [Epoch(0.0, np.ones(2))], [0.5]) is None
    assert unreleased_left(fs, [Epoch(0.0, np.ones(2), p), Epoch(1.0, np.ones(2))], [1.5]) is None
    assert unreleased_left(fs, [Epoch(0.0, np.array([1.0, 0.0]), p)], [0.5]) is None
    got = unreleased_left(fs, [Epoch(0.0, np.array([1.0, 1.0]), p)], [0.5, 0.999, 1.5])
    assert [x.tolist() for x in got.left] == [[0.0, 2.0], [0.0, 2.0], [0.0, 0.0]]
