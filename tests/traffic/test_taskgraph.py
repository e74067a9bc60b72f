"""Importer for TopoOpt FlatBuffers task graphs (traffic.taskgraph).

The seven shared task graphs are checked against a second, minimal reader written here on the
``flatbuffers`` package's low-level ``Table`` API (one Python object per table, no numpy), which
shares no code with the vectorised reader under test. Synthetic files are written with
``flatbuffers.Builder`` and carry answers worked out by hand.
"""

from __future__ import annotations

import collections
import doctest
import functools
import struct
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from flatbuffers import encode
from flatbuffers import number_types as N
from flatbuffers.table import Table
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traffic.taskgraph as tgmod
from traffic.errors import InputError
from traffic.taskgraph import parse_taskgraph, read_taskgraph, workload_from_taskgraph
from traffic.workload import Workload

DATA = Path(__file__).resolve().parents[1] / "data" / "topoopt-taskgraphs"
NAMES = [
    "100candle_16.fbuf",
    "100candle_32.fbuf",
    "100dlrm_128.fbuf",
    "100dlrm_16.fbuf",
    "100dlrm_32.fbuf",
    "100transformer_16.fbuf",
    "100vgg_16.fbuf",
]
NO_NODE = 2**64 - 1


# ------------------------------------------------------------------------------------------
# The second reader: flatbuffers.table.Table, one table at a time.
# ------------------------------------------------------------------------------------------


def _field(t: Table, index: int) -> int:
    return t.Offset(4 + 2 * index)


def _get(t: Table, index: int, flags, default=0):
    o = _field(t, index)
    return t.Get(flags, t.Pos + o) if o else default


def _tables(t: Table, index: int) -> list[Table]:
    o = _field(t, index)
    if not o:
        return []
    start = t.Vector(o)
    return [Table(t.Bytes, t.Indirect(start + 4 * i)) for i in range(t.VectorLen(o))]


def _u64s(t: Table, index: int) -> list[int]:
    o = _field(t, index)
    if not o:
        return []
    start = t.Vector(o)
    return [t.Get(N.Uint64Flags, start + 8 * i) for i in range(t.VectorLen(o))]


@functools.cache
def minimal(name: str) -> dict:
    """Header, tasks and devices of a shared file, read with the flatbuffers package."""
    buf = bytearray((DATA / name).read_bytes())
    root = Table(buf, encode.Get(N.UOffsetTFlags.packer_type, buf, 0))
    tasks = [
        {
            "type": _get(t, 0, N.Int16Flags),
            "id": _get(t, 1, N.Uint64Flags),
            "device": _get(t, 2, N.Uint64Flags),
            "runtime_ms": _get(t, 3, N.Float32Flags, 0.0),
            "xfer": _get(t, 4, N.Uint64Flags),
            "next": _u64s(t, 5),
        }
        for t in _tables(root, 8)
    ]
    devices = {
        _get(d, 1, N.Uint64Flags): (_get(d, 2, N.Uint64Flags), _get(d, 3, N.Uint64Flags))
        for d in _tables(root, 9)
    }
    return {
        "ngpu": _get(root, 0, N.Uint32Flags),
        "nnode": _get(root, 1, N.Uint32Flags),
        "nswitch": _get(root, 2, N.Uint32Flags),
        "netbw": _get(root, 5, N.Float32Flags, 0.0),
        "tasks": tasks,
        "devices": devices,
        "tasks_vector_length_at": root.Vector(_field(root, 8)) - 4,
    }


def minimal_facts(name: str) -> dict:
    """Totals derived from the minimal reader only."""
    m = minimal(name)
    nnode, width = m["nnode"], m["nnode"] + m["nswitch"]
    by_id = {t["id"]: t for t in m["tasks"]}
    preds = collections.defaultdict(list)
    for t in m["tasks"]:
        if t["type"] != 6:
            for s in t["next"]:
                preds[s].append(t["id"])
    pair = {"forward": np.zeros((nnode, nnode), np.int64)}
    pair["backward"] = np.zeros((nnode, nnode), np.int64)
    for t in m["tasks"]:
        if t["type"] == 5:
            node, prop = m["devices"][t["device"]]
            assert node == NO_NODE
            (p,) = preds[t["id"]]  # each transfer has one compute predecessor in these files
            phase = {0: "forward", 1: "backward"}[by_id[p]["type"]]
            pair[phase][prop // width, prop % width] += t["xfer"]
    ar = collections.defaultdict(lambda: [0, 0, 0])  # g -> [tasks, sum S, wire bytes]
    groups = collections.Counter()
    for t in m["tasks"]:
        if t["type"] == 6:
            g = len(t["next"])
            ar[g][0] += 1
            ar[g][1] += t["xfer"]
            ar[g][2] += 2 * (g - 1) * t["xfer"]
            if g > 1:
                groups[(tuple(sorted(t["next"])), t["xfer"])] += 1
            assert all(by_id[p]["type"] == 1 for p in preds[t["id"]])  # after backward tasks
    edges = {(t["id"], s) for t in m["tasks"] if t["type"] != 6 for s in t["next"]}
    return {
        "types": collections.Counter(t["type"] for t in m["tasks"]),
        "pair": pair,
        "send_bytes": int(pair["forward"].sum() + pair["backward"].sum()),
        "allreduce": dict(ar),
        "groups": groups,
        "edges": edges,
    }


@functools.cache
def imported(name: str) -> Workload:
    return read_taskgraph(DATA / name)


# ------------------------------------------------------------------------------------------
# The seven TopoOpt files shipped in tests/data.
# ------------------------------------------------------------------------------------------


def test_shared_data_folder_is_present():
    assert DATA.is_dir(), f"missing task-graph folder {DATA}"
    assert sorted(p.name for p in DATA.glob("*.fbuf")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_header_and_task_counts(name):
    m = minimal(name)
    raw = parse_taskgraph((DATA / name).read_bytes(), source=name)
    assert (raw.ngpupernode, raw.nnode, raw.nswitch) == (m["ngpu"], m["nnode"], m["nswitch"])
    # The files are "100 Gbps" runs: 1.25e7 bytes per ms = 1.25e10 bytes per s.
    assert m["netbw"] == 1.25e7
    assert raw.netbw == pytest.approx(100e9 / 8, rel=1e-12)
    w = imported(name)
    assert (w.gpus, w.gpus_per_server, w.servers) == (m["nnode"] * m["ngpu"], m["ngpu"], m["nnode"])
    expect = {tgmod.TASK_KINDS[k]: n for k, n in minimal_facts(name)["types"].items()}
    assert raw.type_counts() == expect
    assert w.info["tasks_by_kind"] == expect
    tg = w.taskgraph
    assert tg.n_tasks == len(m["tasks"])
    assert collections.Counter(tg.kind.tolist()) == expect


@pytest.mark.parametrize("name", NAMES)
def test_send_matrix_per_phase(name):
    """MP transfers: per (src, dst) server pair and phase, exactly the file's bytes."""
    facts = minimal_facts(name)
    w = imported(name)
    nnode = w.servers
    for phase in ("forward", "backward"):
        got = np.zeros((nnode, nnode), np.int64)
        for d in w.select(classes=["mp"], phases=[phase]).demands:
            assert d.op == "send" and not d.mutable
            rows = w.server_of(d.groups)
            np.add.at(got, (rows[:, 0], rows[:, 1]), int(d.size) * d.count)
        np.testing.assert_array_equal(got, facts["pair"][phase])
    assert w.select(phases=["optimizer"]).demands == ()
    assert w.info["transfer_bytes"] == facts["send_bytes"]
    assert sum(d.wire_bytes() for d in w.demands if d.op == "send") == facts["send_bytes"]
    # one row per (src, dst, phase): no pair repeated inside a phase
    for phase in ("forward", "backward"):
        rows = np.concatenate(
            [d.groups for d in w.select(classes=["mp"], phases=[phase]).demands] or [[[0, 0]]]
        )
        assert len({tuple(r) for r in rows.tolist()}) == len(rows)


@pytest.mark.parametrize("name", NAMES)
def test_allreduce_totals_per_group_size(name):
    facts = minimal_facts(name)
    w = imported(name)
    got = collections.defaultdict(lambda: [0, 0, 0])
    groups = collections.Counter()
    for d in w.demands:
        if d.op != "all-reduce":
            continue
        assert d.mutable and d.cls == "dp" and d.phase == "backward"
        got[d.group_size][0] += d.n_groups
        got[d.group_size][1] += int(d.size) * d.n_groups
        got[d.group_size][2] += int(d.wire_bytes())
        for row in w.server_of(d.groups).tolist():
            groups[(tuple(sorted(row)), int(d.size))] += 1
    expect = {g: v for g, v in facts["allreduce"].items() if g > 1}
    assert dict(got) == expect
    assert groups == facts["groups"]
    dropped = facts["allreduce"].get(1, [0, 0, 0])
    assert w.info["allreduce_dropped_single_server"] == dropped[0]
    assert w.info["allreduce_dropped_bytes"] == dropped[1]


@pytest.mark.parametrize("name", NAMES)
def test_total_wire_bytes(name):
    """Send: S per transfer; all-reduce: 2(g-1)S per group (0 for g = 1)."""
    m = minimal(name)
    expect = sum(t["xfer"] for t in m["tasks"] if t["type"] == 5)
    expect += sum(2 * (len(t["next"]) - 1) * t["xfer"] for t in m["tasks"] if t["type"] == 6)
    w = imported(name)
    assert w.total_wire_bytes() == expect
    assert sum(w.bytes_by_class().values()) == expect


@pytest.mark.parametrize("name", NAMES)
def test_dependency_graph(name):
    m = minimal(name)
    facts = minimal_facts(name)
    w = imported(name)
    tg = w.taskgraph
    ids = tg.task_id.view(np.uint64)
    assert ids.tolist() == [t["id"] for t in m["tasks"]]
    got_edges = {(int(ids[a]), int(ids[b])) for a, b in tg.edges.tolist()}
    assert got_edges == facts["edges"] and len(tg.edges) == len(facts["edges"])
    listed = sum(len(t["next"]) for t in m["tasks"] if t["type"] != 6)
    assert w.info["duplicate_edges"] == listed - len(facts["edges"])
    runtimes = np.array([t["runtime_ms"] for t in m["tasks"]]) / 1000.0
    np.testing.assert_allclose(tg.runtime_s, runtimes, rtol=1e-15)
    for i, t in enumerate(m["tasks"]):
        if t["type"] in (0, 1, 3):
            assert tg.server[i] == m["devices"][t["device"]][0]
            assert tg.size_bytes[i] == 0.0
        elif t["type"] == 5:
            node, prop = m["devices"][t["device"]]
            fam, row = tg.demand[i]
            d = w.demands[fam]
            width = m["nnode"] + m["nswitch"]
            assert w.server_of(d.groups[row]).tolist() == [prop // width, prop % width]
            assert tg.size_bytes[i] == t["xfer"] and tg.server[i] == -1
        elif t["type"] == 6:
            fam, row = tg.demand[i]
            if len(t["next"]) == 1:
                assert (fam, row) == (-1, -1)
            else:
                d = w.demands[fam]
                assert w.server_of(d.groups[row]).tolist() == t["next"]
                assert d.size == t["xfer"]
    assert w.info["phase_by_fallback"] == 0


def test_rank_convention_and_determinism():
    w1 = read_taskgraph(DATA / "100dlrm_16.fbuf")
    w2 = read_taskgraph(DATA / "100dlrm_16.fbuf")
    assert "first GPU" in w1.conventions["rank"]
    assert w1.summary().equals(w2.summary())
    for a, b in zip(w1.demands, w2.demands, strict=True):
        np.testing.assert_array_equal(a.groups, b.groups)
        assert a.groups.min() >= 0 and (a.groups % w1.gpus_per_server == 0).all()


def test_doctests():
    res = doctest.testmod(tgmod, optionflags=doctest.ELLIPSIS)
    assert res.attempted >= 3 and res.failed == 0


# ------------------------------------------------------------------------------------------
# Synthetic files written with flatbuffers.Builder.
# ------------------------------------------------------------------------------------------


def build_file(
    tasks: list[dict],
    devices: list[dict],
    ngpu: int = 2,
    nnode: int = 3,
    nswitch: int = 1,
    netbw: float = 1.25e7,
) -> bytes:
    """A task graph file; task dict keys: type, id, device, runtime_ms, xfer, next."""
    b = flatbuffers.Builder(1024)

    def table_vector(offsets):
        b.StartVector(4, len(offsets), 4)
        for o in reversed(offsets):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    task_offsets = []
    for t in tasks:
        nxt = t.get("next", [])
        b.StartVector(8, len(nxt), 8)
        for v in reversed(nxt):
            b.PrependUint64(v)
        vec = b.EndVector()
        b.StartObject(6)
        b.PrependInt16Slot(0, t["type"], 0)
        b.PrependUint64Slot(1, t["id"], 0)
        b.PrependUint64Slot(2, t.get("device", 0), 0)
        b.PrependFloat32Slot(3, t.get("runtime_ms", 0.0), 0.0)
        b.PrependUint64Slot(4, t.get("xfer", 0), 0)
        b.PrependUOffsetTRelativeSlot(5, vec, 0)
        task_offsets.append(b.EndObject())
    dev_offsets = []
    for d in devices:
        b.StartObject(5)
        b.PrependInt32Slot(0, d.get("type", 0), 0)
        b.PrependUint64Slot(1, d["id"], 0)
        b.PrependUint64Slot(2, d.get("node", NO_NODE), 0)
        b.PrependUint64Slot(3, d.get("property", 0), 0)
        dev_offsets.append(b.EndObject())
    tv, dv = table_vector(task_offsets), table_vector(dev_offsets)
    b.StartObject(12)
    b.PrependUint32Slot(0, ngpu, 0)
    b.PrependUint32Slot(1, nnode, 0)
    b.PrependUint32Slot(2, nswitch, 0)
    b.PrependFloat32Slot(5, netbw, 0.0)
    b.PrependUOffsetTRelativeSlot(8, tv, 0)
    b.PrependUOffsetTRelativeSlot(9, dv, 0)
    b.Finish(b.EndObject())
    return bytes(b.Output())


def servers(n=3):
    """Compute devices 100 + s on server s."""
    return [{"id": 100 + s, "node": s, "property": s} for s in range(n)]


def link(src, dst, nnode=3, nswitch=1):
    """The nominal network device for src -> dst (id 200 + property)."""
    prop = src * (nnode + nswitch) + dst
    return {"id": 200 + prop, "property": prop}


def dev_of(src, dst):
    return link(src, dst)["id"]


def example_tasks() -> list[dict]:
    """Hand-made iteration on 3 servers x 2 GPUs; the expected results are in the tests."""
    return [
        {"type": 0, "id": 1, "device": 100, "runtime_ms": 2.0, "next": [2, 12]},  # fwd s0
        {"type": 5, "id": 2, "device": dev_of(0, 1), "xfer": 100, "next": [3]},  # fwd, 0->1
        {"type": 2, "id": 3, "device": 101, "xfer": 7, "next": [4]},  # intra-server comm
        {"type": 5, "id": 4, "device": dev_of(1, 2), "xfer": 50, "next": [5]},  # fwd via chain
        {"type": 0, "id": 5, "device": 102, "runtime_ms": 1.5, "next": [6]},
        {"type": 1, "id": 6, "device": 102, "runtime_ms": 3.0, "next": [7, 10]},
        {"type": 5, "id": 7, "device": dev_of(2, 1), "xfer": 70, "next": [8]},  # bwd, 2->1
        {"type": 1, "id": 8, "device": 101, "runtime_ms": 3.0, "next": [9]},
        {"type": 3, "id": 9, "device": 101, "runtime_ms": 0.5, "next": [13]},  # update
        {"type": 6, "id": 10, "xfer": 1000, "next": [0, 1, 2]},  # all-reduce after bwd
        {"type": 6, "id": 11, "xfer": 10, "next": [1]},  # single server: dropped
        {"type": 5, "id": 12, "device": dev_of(0, 1), "xfer": 20, "next": [3]},  # fwd, 0->1 again
        {"type": 4, "id": 13},  # barrier after update -> optimizer
        {"type": 5, "id": 14, "device": dev_of(2, 0), "xfer": 5, "next": [6]},  # bwd by successor
        {"type": 6, "id": 15, "xfer": 8, "next": [2, 0]},  # isolated: backward by fallback
    ]


def example_devices():
    return servers() + [link(0, 1), link(1, 2), link(2, 1), link(2, 0)]


def test_synthetic_file_by_hand():
    raw = parse_taskgraph(build_file(example_tasks(), example_devices()), source="hand.fbuf")
    assert raw.netbw == pytest.approx(1.25e10)
    w = workload_from_taskgraph(raw)
    assert (w.gpus, w.gpus_per_server, w.servers, w.name) == (6, 2, 3, "hand.fbuf")
    sends = {
        (d.phase, tuple(r), d.size) for d in w.demands if d.op == "send" for r in d.groups.tolist()
    }
    # ranks are 2 * server; transfers 0->1 (100 + 20) are summed
    assert sends == {
        ("forward", (0, 2), 120.0),
        ("forward", (2, 4), 50.0),
        ("backward", (4, 2), 70.0),
        ("backward", (4, 0), 5.0),
    }
    ars = [(d.phase, d.groups.tolist(), d.size) for d in w.demands if d.op == "all-reduce"]
    assert sorted(ars) == [("backward", [[0, 2, 4]], 1000.0), ("backward", [[4, 0]], 8.0)]
    # 120 + 50 + 70 + 5 sent once; all-reduces 2*(3-1)*1000 + 2*(2-1)*8
    assert w.total_wire_bytes() == 245 + 4000 + 16
    assert w.info["allreduce_dropped_single_server"] == 1
    assert w.info["allreduce_dropped_bytes"] == 10
    assert w.info["phase_by_fallback"] == 2  # the isolated all-reduces 11 and 15
    tg = w.taskgraph
    assert tg.kind.tolist() == [
        "forward", "transfer", "comm", "transfer", "forward", "backward", "transfer",
        "backward", "update", "all-reduce", "all-reduce", "transfer", "barrier", "transfer",
        "all-reduce",
    ]  # fmt: skip
    assert tg.server.tolist() == [0, -1, 1, -1, 2, 2, -1, 1, 1, -1, -1, -1, -1, -1, -1]
    np.testing.assert_allclose(tg.runtime_s[[0, 4, 5, 8]], [2e-3, 1.5e-3, 3e-3, 0.5e-3])
    assert tg.size_bytes.tolist() == [0, 100, 7, 50, 0, 0, 70, 0, 0, 1000, 10, 20, 0, 5, 8]
    pairs = {(int(tg.task_id[a]), int(tg.task_id[b])) for a, b in tg.edges.tolist()}
    assert pairs == {
        (1, 2), (1, 12), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (6, 10), (7, 8), (8, 9),
        (9, 13), (12, 3), (14, 6),
    }  # fmt: skip
    # transfers 2 and 12 share one row (0 -> 1 forward); dropped all-reduce 11 maps to nothing
    assert tuple(tg.demand[1]) == tuple(tg.demand[11])
    assert tuple(tg.demand[10]) == (-1, -1) and tuple(tg.demand[0]) == (-1, -1)
    fam, row = tg.demand[13]
    assert w.demands[fam].groups[row].tolist() == [4, 0]


def test_optimizer_phase_transfer():
    tasks = [
        {"type": 3, "id": 1, "device": 100, "next": [2]},
        {"type": 5, "id": 2, "device": dev_of(0, 1), "xfer": 9, "next": [3]},
        {"type": 0, "id": 3, "device": 101},
    ]
    w = workload_from_taskgraph(parse_taskgraph(build_file(tasks, servers() + [link(0, 1)])))
    (d,) = w.demands
    assert (d.phase, d.groups.tolist(), d.size) == ("optimizer", [[0, 2]], 9.0)


BAD_GRAPHS = {
    "unknown successor": (
        [{"type": 0, "id": 1, "device": 100, "next": [99]}],
        "not a task",
    ),
    "duplicate task id": (
        [{"type": 0, "id": 1, "device": 100}, {"type": 1, "id": 1, "device": 100}],
        "used by two tasks",
    ),
    "cycle": (
        [
            {"type": 0, "id": 1, "device": 100, "next": [2]},
            {"type": 0, "id": 2, "device": 100, "next": [1]},
        ],
        "cycle",
    ),
    "transfer to a switch": (
        [{"type": 5, "id": 1, "device": 200 + 0 * 4 + 3, "xfer": 1}],
        "must be servers",
    ),
    "transfer on unknown device": (
        [{"type": 5, "id": 1, "device": 999, "xfer": 1}],
        "unknown device",
    ),
    "all-reduce server out of range": (
        [{"type": 6, "id": 1, "xfer": 4, "next": [0, 3]}],
        "servers are 0..2",
    ),
    "all-reduce server twice": (
        [{"type": 6, "id": 1, "xfer": 4, "next": [1, 1]}],
        "naming a server twice",
    ),
    "all-reduce empty group": (
        [{"type": 6, "id": 1, "xfer": 4}],
        "empty group",
    ),
    "compute task without device": (
        [{"type": 1, "id": 1, "device": 77}],
        "not a device of a server",
    ),
    "unknown task type": (
        [{"type": 9, "id": 1, "device": 100}],
        "types are 0..6",
    ),
    "negative runtime": (
        [{"type": 0, "id": 1, "device": 100, "runtime_ms": -1.0}],
        "must be finite",
    ),
    "huge xfersize": (
        [{"type": 5, "id": 1, "device": dev_of(0, 1), "xfer": 2**60}],
        "2**53",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
def test_malformed_graphs(case, tmp_path):
    tasks, phrase = BAD_GRAPHS[case]
    devices = servers() + [link(0, 1), {"id": 203, "property": 3}]
    path = tmp_path / "bad.fbuf"
    path.write_bytes(build_file(tasks, devices))
    with pytest.raises(InputError) as e:
        read_taskgraph(path)
    assert e.value.field == str(path)
    assert phrase in str(e.value)
    assert "TopoOpt FlatBuffers task graph" in e.value.allowed


@pytest.mark.parametrize(
    "header, phrase",
    [({"nnode": 0}, "nnode = 0"), ({"ngpu": 0}, "ngpupernode = 0"), ({"ngpu": 4096}, "4096")],
)
def test_bad_header(header, phrase):
    data = build_file([{"type": 0, "id": 1, "device": 100}], servers(), **header)
    with pytest.raises(InputError, match=phrase):
        parse_taskgraph(data, source="h.fbuf")


# ------------------------------------------------------------------------------------------
# Truncated, foreign and corrupted files.
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["100vgg_16.fbuf", "100dlrm_16.fbuf"])
def test_truncations(name, tmp_path):
    data = (DATA / name).read_bytes()
    n = len(data)
    cuts = [0, 1, 3, 4, 7, 8, 12, 64, 1000, n // 3, n // 2, 2 * n // 3, n - 100, n - 8, n - 1]
    cuts += list(range(0, n, 997))
    path = tmp_path / name
    for cut in cuts:
        path.write_bytes(data[:cut])
        with pytest.raises(InputError) as e:
            read_taskgraph(path)
        assert e.value.field == str(path), cut


FOREIGN = {
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00"
    b"\x00\x1f\xf3\xffa\x00\x00\x00\x00IEND\xaeB`\x82",
    "yaml plan": b"model: gpt3-175b\nparallelism: {tp: 8, pp: 16, dp: 8}\n"
    b"cluster: {servers: 128, gpus_per_server: 8}\n",
    "json": b'{"model": "llama2-7b", "cluster": {"servers": 2}}',
    "empty": b"",
    "zeros": bytes(4096),
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_foreign_files(kind, tmp_path):
    path = tmp_path / f"x.{kind.split()[0]}"
    path.write_bytes(FOREIGN[kind])
    with pytest.raises(InputError) as e:
        read_taskgraph(path)
    assert e.value.field == str(path)
    assert str(path) in str(e.value) and "TopoOpt FlatBuffers task graph" in str(e.value)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_taskgraph(tmp_path / "nope.fbuf")
    with pytest.raises(InputError, match="unreadable"):
        read_taskgraph(tmp_path)


def test_root_offset_out_of_range():
    data = bytearray((DATA / "100vgg_16.fbuf").read_bytes())
    struct.pack_into("<I", data, 0, len(data) + 100)
    with pytest.raises(InputError, match="outside the 67608-byte file") as e:
        parse_taskgraph(bytes(data), source="v.fbuf")
    assert e.value.field == "v.fbuf"


def test_vector_length_past_end():
    name = "100vgg_16.fbuf"
    data = bytearray((DATA / name).read_bytes())
    at = minimal(name)["tasks_vector_length_at"]
    assert struct.unpack_from("<I", data, at)[0] == len(minimal(name)["tasks"])
    struct.pack_into("<I", data, at, 10**8)
    with pytest.raises(InputError, match="past the end"):
        parse_taskgraph(bytes(data), source="v.fbuf")


def _parse_or_input_error(data: bytes) -> None:
    try:
        w = workload_from_taskgraph(parse_taskgraph(data, source="r.fbuf"))
    except InputError as e:
        assert e.field == "r.fbuf"
    else:
        assert isinstance(w, Workload)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_never_crash(data):
    _parse_or_input_error(data)


VGG = (DATA / "100vgg_16.fbuf").read_bytes() if (DATA / "100vgg_16.fbuf").exists() else b""


@settings(
    max_examples=150,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.integers(0, max(len(VGG) - 1, 0)), st.integers(0, 255)),
        min_size=1,
        max_size=12,
    )
)
def test_corrupted_real_file_never_crashes(edits):
    data = bytearray(VGG)
    assert data, "shared task graph missing"
    for pos, value in edits:
        data[pos] = value
    _parse_or_input_error(bytes(data))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(st.integers(0, 600), st.binary(min_size=1, max_size=64))
def test_corrupted_header_region_never_crashes(pos, junk):
    data = bytearray(VGG)
    assert data, "shared task graph missing"
    data[pos : pos + len(junk)] = junk
    _parse_or_input_error(bytes(data))
