"""Stages of different tensor-parallel sizes (``parallelism.stage_tp``) and cross-mesh resharding.

Validation (one-line errors, exit 2 through the CLI), placement, per-stage formulas against the
uniform plans of each size, and the resharding byte counts against a brute-force, element by
element computation of who needs which element."""

from __future__ import annotations

import itertools
import json
from math import lcm

import numpy as np
import pytest
from typer.testing import CliRunner

from topoopt.app.cli.app import app
from traffic.build import workload_from_plan
from traffic.errors import InputError
from traffic.expand import server_matrix
from traffic.models import megatron
from traffic.models.resharding import intervals, reshard_demands, reshard_plan
from traffic.placement import RankGrid, StagedRankGrid, stage_meshes
from traffic.plan import load_plan
from traffic.workload import Workload, wire_bytes_per_collective

runner = CliRunner()
SMALL = {"base": "gpt3-175b", "layers": 8, "hidden": 1024, "heads": 16, "ffn": 4096}
SMALL |= {"seq_len": 512, "vocab": 32000}


def plan(stage_tp=(8, 8, 4, 4), dp=2, servers=6, gps=8, options=None, **par):
    doc = {
        "model": dict(SMALL),
        "parallelism": {"stage_tp": list(stage_tp), "pp": len(stage_tp), "dp": dp, **par},
        "cluster": {"servers": servers, "gpus_per_server": gps},
    }
    if options:
        doc["options"] = options
    return doc


# ------------------------------------------------------------------------------------ validation

BAD = [
    ({"stage_tp": [8, 8, 4]}, "parallelism.stage_tp", "exactly pp = 4"),
    ({"stage_tp": [8, 8, 4, 4, 4]}, "parallelism.stage_tp", "exactly pp = 4"),
    ({"stage_tp": [8, 8, 4, 3], "dp": None}, "parallelism.stage_tp", "dividing the GPU count"),
    ({"stage_tp": [8, 8, 6, 2]}, "parallelism.stage_tp", "divisor of the model's heads = 16"),
    ({"stage_tp": []}, "parallelism.stage_tp", "positive integers"),
    ({"stage_tp": [8, 0, 8, 8]}, "parallelism.stage_tp", "positive integers"),
    ({"stage_tp": "8,8,4,4"}, "parallelism.stage_tp", "positive integers"),
    ({"stage_tp": [8, True, 4, 4]}, "parallelism.stage_tp", "positive integers"),
    ({"tp": 4}, "parallelism.tp", "max(stage_tp) = 8"),
    ({"dp": 3}, "parallelism", "dp*cp*sum(stage_tp)"),
    ({"cp": 2, "dp": 1}, "parallelism.cp", "1 when stage_tp sizes differ"),
    ({"vpp": 2}, "parallelism.vpp", "1 when stage_tp sizes differ"),
    ({"order": "tp-pp-dp"}, "parallelism.order", "pp last"),
]


@pytest.mark.parametrize(("edit", "field", "allowed"), BAD)
def test_bad_stage_tp_is_one_line_input_error(edit, field, allowed):
    doc = plan()
    doc["parallelism"].update(edit)
    doc["parallelism"] = {k: v for k, v in doc["parallelism"].items() if v is not None}
    with pytest.raises(InputError) as e:
        load_plan(doc)
    assert e.value.field == field, str(e.value)
    assert allowed in str(e.value) and "\n" not in str(e.value)


def test_differing_stage_tp_needs_a_dense_transformer():
    doc = {
        "model": "mixtral-8x7b",
        "parallelism": {"stage_tp": [8, 4], "pp": 2, "dp": 1, "ep": 1},
        "cluster": {"servers": 3, "gpus_per_server": 4},
    }
    with pytest.raises(InputError, match="dense transformer"):
        load_plan(doc)


def test_bad_stage_tp_through_the_cli_exits_2_with_one_line(tmp_path):
    doc = plan((8, 8, 4), pp=4)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    r = runner.invoke(app, ["traffic", str(path), "--json"])
    assert r.exit_code == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: parallelism.stage_tp")


def test_defaults_dp_and_tp_follow_the_sum_rule():
    doc = plan(dp=None, servers=12)
    del doc["parallelism"]["dp"]
    p = load_plan(doc)
    assert p.dp == 96 // 24 and p.parallelism.tp == 8 and p.stage_tp == (8, 8, 4, 4)
    assert not p.uniform_tp


# ------------------------------------------------------------------------------------ identity


def _signature(w: Workload):
    return [
        (d.op, d.groups.tolist(), float(d.size), d.cls, d.phase, d.count, d.name, d.stage)
        for d in w.demands
    ]


@pytest.mark.parametrize("extra", [{}, {"sp": True}, {"zero": 3}])
def test_uniform_stage_tp_is_byte_identical_to_tp(extra):
    base = {
        "model": "gpt3-175b",
        "parallelism": {"tp": 8, "pp": 16, "dp": 2, "global_batch_size": 512, **extra},
        "cluster": {"servers": 32, "gpus_per_server": 8},
    }
    staged = json.loads(json.dumps(base))
    staged["parallelism"]["stage_tp"] = [8] * 16
    a, b = workload_from_plan(base), workload_from_plan(staged)
    assert _signature(a) == _signature(b)
    assert a.info == b.info


# ------------------------------------------------------------------------------------ placement


def test_staged_grid_places_every_rank_once_in_stage_blocks():
    g = StagedRankGrid.from_sizes((8, 8, 4, 2), dp=3)
    seen = np.concatenate([stage_meshes(g, i).ravel() for i in range(4)])
    assert sorted(seen.tolist()) == list(range(g.world)) == list(range(3 * 22))
    for i, t in enumerate((8, 8, 4, 2)):
        mesh = stage_meshes(g, i)
        assert mesh.shape == (3, t)
        lo = 3 * sum((8, 8, 4, 2)[:i])
        assert mesh.min() == lo and mesh.max() == lo + 3 * t - 1
        assert (np.diff(mesh, axis=1) == 1).all()  # TP innermost
        dp = g.groups("dp", pp=i)
        assert dp.shape == (t, 3) and (dp[:, 1:] - dp[:, :-1] == t).all()
    # equal sizes: the same meshes as the plain grid
    u, r = StagedRankGrid.from_sizes((4, 4, 4), dp=2), RankGrid.from_sizes(tp=4, pp=3, dp=2)
    for i in range(3):
        assert stage_meshes(u, i).tolist() == stage_meshes(r, i).tolist()
        assert u.groups("dp", pp=i).tolist() == r.groups("dp", pp=i).tolist()
    with pytest.raises(InputError):
        g.groups("pp")


def test_per_stage_parameters_and_flops_follow_each_stage_tp():
    # middle stages hold no embedding: they must equal the uniform plan of their own TP size
    staged = load_plan(plan((8, 8, 4, 4)))
    u8 = load_plan({**plan((8, 8, 8, 8), servers=8), "parallelism": {"tp": 8, "pp": 4, "dp": 2}})
    u4 = load_plan({**plan((4, 4, 4, 4), servers=4), "parallelism": {"tp": 4, "pp": 4, "dp": 2}})
    sp, s8, s4 = (megatron.stage_parameters(p) for p in (staged, u8, u4))
    ff, f8, f4 = (megatron.forward_flops(p) for p in (staged, u8, u4))
    assert sp[1] == s8[1] and sp[2] == s4[2]
    assert ff[1] == f8[1] and ff[2] == f4[2]
    # the vocab is padded for lcm(stage_tp): every stage's embedding shard is whole
    assert megatron.plan_padded_vocab(staged) % (128 * 8) == 0
    w = workload_from_plan(staged)
    tp = [d for d in w.demands if d.cls == "tp"]
    assert {d.stage: d.group_size for d in tp} == {0: 8, 1: 8, 2: 4, 3: 4}


def test_memory_per_stage_follows_each_stage_tp():
    from traffic.memory import memory_per_gpu

    staged = memory_per_gpu(load_plan(plan((8, 8, 4, 4)))).per_stage
    u8 = memory_per_gpu(load_plan(plan((8, 8, 8, 8), servers=8))).per_stage
    u4 = memory_per_gpu(load_plan(plan((4, 4, 4, 4), servers=4))).per_stage
    assert staged[:2] == u8[:2] and staged[2] == u4[2]


def test_tied_embedding_of_different_first_and_last_tp_covers_every_row_once():
    p = load_plan(plan((4, 8, 8, 2), servers=22, gps=2, dp=2))
    w = workload_from_plan(p)
    emb = [d for d in w.demands if d.cls == "embedding"]
    vp, h, rb = megatron.plan_padded_vocab(p), 1024, megatron.reduce_bytes(p)
    rows = sum(d.size / (h * rb) * d.n_groups for d in emb)
    assert rows == 2 * vp  # dp = 2 replicas, each row of the vocab in one pair
    for d in emb:
        assert d.group_size == 2
        first, last = d.groups[:, 0], d.groups[:, 1]
        assert (first < 2 * 4).all() and (last >= 2 * 20).all()


# ------------------------------------------------------------------------------------ resharding


def brute(E, beta, ta, tz, sharded, hosts):
    """Who needs / holds each element, by enumeration."""

    def owner(n, t):
        return [[k for k in range(t) if e in range(*intervals(n, t)[k])] for e in range(n)]

    have = owner(E, ta) if sharded else [list(range(ta))] * E
    need = owner(E, tz) if sharded else [list(range(tz))] * E
    per_recv = np.zeros(tz)
    pair = np.zeros((ta, tz))
    net = intra = 0
    for e in range(E):
        for k in need[e]:
            per_recv[k] += beta
            j = next(j for j in have[e]) if sharded else k % ta
            pair[j, k] += beta
        hs = {hosts[k] for k in need[e]}
        net += len(hs) * beta
        intra += (len(need[e]) - len(hs)) * beta
    return per_recv, pair, net, intra


SIZES = [1, 2, 3, 4, 6, 8]


@pytest.mark.parametrize(("ta", "tz"), [(a, z) for a in SIZES for z in SIZES if a != z])
@pytest.mark.parametrize("sharded", [False, True])
def test_resharding_bytes_match_brute_force(ta, tz, sharded):
    E, beta = 50, 2  # not a multiple of lcm: unequal pieces
    rng = np.random.default_rng(ta * 10 + tz)
    hosts = tuple(sorted(rng.integers(0, 3, tz).tolist()))
    per_recv, pair, net, intra = brute(E, beta, ta, tz, sharded, hosts)
    naive = reshard_plan(E, beta, ta, tz, sharded, "naive")
    got = np.zeros((ta, tz))
    for j, k, b in naive.sends:
        got[j, k] += b
    assert np.array_equal(got, pair)
    assert naive.network_bytes == per_recv.sum()
    bc = reshard_plan(E, beta, ta, tz, sharded, "broadcast", hosts)
    assert bc.network_bytes == net and bc.broadcast_bytes == intra
    # every receiver gets exactly what it needs, over the network or by its host's broadcast
    recv = np.zeros(tz)
    for _, k, b in bc.sends:
        recv[k] += b
    for root, others, b in bc.broadcasts:
        assert all(hosts[k] == hosts[root] for k in others)
        recv[list(others)] += b
    assert np.array_equal(recv, per_recv)
    # load balance: greedy least-loaded, within one piece of the mean
    load = np.zeros(ta)
    for j, _, b in bc.sends:
        load[j] += b
    piece = beta * -(-E // lcm(ta, tz))
    if not sharded:
        assert load.max() <= bc.network_bytes / ta + piece
    else:
        assert bc.network_bytes == naive.network_bytes == E * beta


def test_replicated_resharding_closed_forms():
    S = 2**20
    assert reshard_plan(S, 1, 8, 4, False).network_bytes == 4 * S  # every receiver fetches S
    assert reshard_plan(S, 1, 4, 8, False).network_bytes == 8 * S
    for ta, tz in ((8, 4), (4, 8), (2, 16)):
        hosts = tuple(k // 8 for k in range(tz))  # 8 GPUs per host
        p = reshard_plan(S, 1, ta, tz, False, "broadcast", hosts)
        n_hosts = len(set(hosts))
        assert p.network_bytes == n_hosts * S  # once per receiver host
        assert p.broadcast_bytes == (tz - n_hosts) * S
        load = np.bincount([j for j, _, _ in p.sends], [b for _, _, b in p.sends], ta)
        assert np.allclose(load, n_hosts * S / ta)  # senders balanced exactly


def test_reshard_demands_stack_replicas_and_keep_their_bytes():
    src = np.arange(16).reshape(2, 8)
    dst = np.array([[16, 17, 18, 19], [20, 21, 22, 23]])  # 4-GPU servers: one host per replica
    for alg in ("naive", "broadcast"):
        ds = reshard_demands(
            src,
            dst,
            4096,
            2,
            False,
            alg,
            4,
            phase="forward",
            count=5,
            stage=0,
            dst_stage=1,
            name="r",
        )
        p = reshard_plan(4096, 2, 8, 4, False, alg, (0, 0, 0, 0))
        sends = sum(d.size * d.n_groups for d in ds if d.op == "send")
        bc = sum(
            wire_bytes_per_collective(d.op, d.group_size, d.size) * d.n_groups
            for d in ds
            if d.op == "broadcast"
        )
        assert sends == 2 * p.network_bytes and bc == 2 * p.broadcast_bytes
        assert all(d.cls == "pp" and d.count == 5 for d in ds)
        for d in ds:
            if d.op == "send":
                same = (d.groups[:, 0] < 8) == (d.groups[:, 1] < 20)  # replica kept
                assert same.all()


def _inter_pp(w: Workload) -> float:
    m = server_matrix(w.select(classes=["pp"]))
    m = m.tocsr() if hasattr(m, "tocsr") else m
    return float(m.sum() - m.diagonal().sum())


@pytest.mark.parametrize(("sp", "sg"), [(False, False), (False, True), (True, True)])
def test_plan_pp_inter_server_bytes_follow_the_formulas(sp, sg):
    # stages 8, 8, 4, 4 on 8-GPU servers, dp = 2: stage 0 on servers 0-1, 1 on 2-3, 2 on 4,
    # 3 on 5. Boundaries 0-1 and 2-3 are plain sends, 1-2 reshards 8 -> 4 (and 4 -> 8 back).
    # A plain send is 1/t of the activation per rank with SP or the SC'21 scatter/gather (sg,
    # Megatron's default; its TP all-gather stays inside a server), all of it otherwise.
    res = {}
    for alg in ("naive", "broadcast"):
        p = load_plan(plan(sp=sp, options={"resharding": alg, "pp_scatter_gather": sg}))
        w = workload_from_plan(p)
        res[alg] = _inter_pp(w)
        m, S = p.micro_batches, 1 * 512 * 1024 * 2
        split = sp or sg
        plain = 2 * m * 2 * (8 * (S // 8 if split else S) + 4 * (S // 4 if split else S))
        if sp:
            reshard = 2 * m * 2 * S  # every element once, each way
        elif alg == "naive":
            reshard = 2 * m * (4 * S + 8 * S)  # every receiver fetches the whole tensor
        else:
            reshard = 2 * m * (S + S)  # once per receiver host (one host per mesh here)
        assert res[alg] == plain + reshard, alg
    assert (res["broadcast"] < res["naive"]) == (not sp)


def test_every_pair_of_small_stage_tp_is_consistent():
    for ta, tz in itertools.permutations((1, 2, 4), 2):
        w = workload_from_plan(plan((ta, tz), dp=4, servers=2 * (ta + tz), gps=2))
        assert w.gpus == 4 * (ta + tz)
        pp = [d for d in w.demands if d.cls == "pp"]
        assert {d.phase for d in pp} == {"forward", "backward"}


def test_simai_export_refuses_differing_stage_tp():
    from traffic.simai import simai_workload

    with pytest.raises(InputError, match="one model_parallel_NPU_group"):
        simai_workload(workload_from_plan(plan()))
    assert simai_workload(workload_from_plan(plan((8, 8, 8, 8), servers=8))).startswith("HYBRID")
