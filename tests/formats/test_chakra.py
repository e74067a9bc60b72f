"""Chakra execution traces: hand-written bytes that follow the public schema exactly, round trips
plan -> traces -> Workload, the replay of a send/receive ring against its closed form, and one-line
errors for broken folders."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from traffic import load_workload
from traffic.chakra import read_chakra, write_chakra
from traffic.chakra.framing import encode_varint, unframe
from traffic.errors import InputError

# ---- a protobuf wire encoder written from the wire-format rules alone (not our schema) --------


def _key(field: int, wire: int) -> bytes:
    return encode_varint(field << 3 | wire)


def _varint(field: int, value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 negatives: ten-byte two's complement
    return _key(field, 0) + encode_varint(value)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, 2) + encode_varint(len(data)) + data


def _double(field: int, value: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", value)


# et_def.proto field numbers: AttributeProto name=1, int64_val=9, bool_val=27, string_val=29,
# double_val=3; Node id=1 name=2 type=3 ctrl_deps=4 data_deps=5 duration_micros=7 attr=10;
# GlobalMetadata version=1 attr=2; NodeType COMP_NODE=4 COMM_SEND_NODE=5 COMM_RECV_NODE=6
# COMM_COLL_NODE=7; CollectiveCommType ALL_REDUCE=0 ALL_GATHER=2 ALL_TO_ALL=6.
def attr_int(name: str, v: int) -> bytes:
    return _bytes(10, _bytes(1, name.encode()) + _varint(9, v))


def attr_str(name: str, v: str) -> bytes:
    return _bytes(10, _bytes(1, name.encode()) + _bytes(29, v.encode()))


def attr_bool(name: str, v: bool) -> bytes:
    return _bytes(10, _bytes(1, name.encode()) + _varint(27, int(v)))


def node(nid: int, ntype: int, *parts: bytes, deps=(), data_deps=(), dur: int = 0) -> bytes:
    body = _varint(1, nid) + _bytes(2, f"n{nid}".encode()) + _varint(3, ntype)
    if deps:  # packed repeated uint64 (proto3 default)
        body += _bytes(4, b"".join(encode_varint(d) for d in deps))
    for d in data_deps:  # unpacked form must parse too
        body += _varint(5, d)
    if dur:
        body += _varint(7, dur)
    return body + b"".join(parts)


def trace(*nodes: bytes, meta: bytes = _bytes(1, b"0.0.4")) -> bytes:
    return b"".join(encode_varint(len(m)) + m for m in (meta, *nodes))


def coll(nid, comm_type, size, pg=None, deps=()):
    parts = [attr_bool("is_cpu_op", False), attr_int("comm_type", comm_type)]
    parts.append(attr_int("comm_size", size))
    if pg is not None:
        parts.append(attr_str("pg_name", pg))
    return node(nid, 7, *parts, deps=deps)


def write(folder, per_rank: list[bytes], groups: dict | None = None, name="w"):
    folder.mkdir(parents=True, exist_ok=True)
    for r, data in enumerate(per_rank):
        (folder / f"{name}.{r}.et").write_bytes(data)
    if groups is not None:
        (folder / "comm_group.json").write_text(json.dumps(groups))
    return folder


# ---- hand-written traces ----------------------------------------------------------------------


def test_handwritten_collectives_with_groups_sizes_and_ops(tmp_path):
    """4 ranks: a 1 MiB all-reduce over all (no pg_name), then an all-gather on {0,1} and {2,3}
    (pg "1" and "2" from comm_group.json), then compute of 250 us; ops, sizes, groups exact."""
    ranks = []
    for r in range(4):
        pg = "1" if r < 2 else "2"
        ranks.append(
            trace(
                coll(10, 0, 1 << 20),
                coll(11, 2, 4096, pg=pg, deps=[10]),
                node(12, 4, attr_bool("is_cpu_op", False), data_deps=[11], dur=250),
            )
        )
    w = read_chakra(write(tmp_path / "t", ranks, {"1": [0, 1], "2": [2, 3]}))
    assert w.gpus == 4 and w.gpus_per_server == 1
    by_op = {d.op: d for d in w.demands}
    assert set(by_op) == {"all-reduce", "all-gather"}
    ar, ag = by_op["all-reduce"], by_op["all-gather"]
    assert ar.size == 1 << 20 and ar.groups.tolist() == [[0, 1, 2, 3]] and ar.count == 1
    assert ag.size == 4096 and ag.groups.tolist() == [[0, 1], [2, 3]] and ag.count == 1
    # wire bytes: all-reduce 2(g-1)S, all-gather (g-1)S per group
    assert w.total_wire_bytes() == 2 * 3 * (1 << 20) + 2 * 1 * 4096
    tg = w.taskgraph
    # 4 compute tasks + 1 all-reduce + 2 all-gathers (merged across ranks)
    assert tg.n_tasks == 7
    assert sorted(tg.runtime_s[tg.kind == "forward"].tolist()) == [250e-6] * 4
    assert len(set(tg.device[tg.kind == "forward"].tolist())) == 4  # one GPU device per rank


def test_handwritten_send_recv_ring_replays_to_closed_form(tmp_path):
    """Ring of 4 ranks, 3 steps: each rank sends S to its successor, then receives from its
    predecessor, then sends again. On an ideal switch every step moves S over one port at B:
    the iteration is 3 * (S / B + latency) with the sends of a step concurrent."""
    from topoopt.fabrics import ideal
    from topoopt.flowsim.iteration import simulate_iteration

    S, n, steps = 12_500_000, 4, 3
    ranks = []
    for r in range(n):
        nodes, prev, nid = [], [], 0
        for k in range(steps):
            nodes.append(
                node(
                    nid,
                    5,
                    attr_int("comm_size", S),
                    attr_int("comm_dst", (r + 1) % n),
                    attr_int("comm_tag", k),
                    deps=prev,
                )
            )
            nodes.append(
                node(
                    nid + 1,
                    6,
                    attr_int("comm_size", S),
                    attr_int("comm_src", (r - 1) % n),
                    attr_int("comm_tag", k),
                    deps=[nid],
                )
            )
            prev, nid = [nid + 1], nid + 2
        ranks.append(trace(*nodes))
    w = read_chakra(write(tmp_path / "ring", ranks))
    (d,) = w.demands  # one family: 4 ring pairs, 3 times each
    assert (d.op, d.size, d.count) == ("send", S, steps)
    assert sorted(map(tuple, d.groups.tolist())) == [(r, (r + 1) % n) for r in range(n)]
    fab = ideal(n, 1, 12.5e9)
    res = simulate_iteration(w, fab)
    lat = float(fab.latency.max())
    hops = 2  # server -> switch -> server
    assert res.iteration_s == pytest.approx(steps * (S / 12.5e9 + hops * lat), rel=1e-9)


def test_handwritten_int64_negative_and_unknown_fields_are_tolerated(tmp_path):
    """Unknown fields (e.g. Node.storage = 11) parse as unknown; a negative comm_size is an error
    naming the node."""
    extra = _bytes(11, _varint(1, 1))  # StorageInfo{level=1}
    ok = trace(coll(0, 0, 64) + extra)
    w = read_chakra(write(tmp_path / "a", [ok, ok]))
    assert w.demands[0].size == 64
    bad = trace(coll(0, 0, -5))
    with pytest.raises(InputError, match="comm_size"):
        read_chakra(write(tmp_path / "b", [bad, bad]))


@pytest.mark.parametrize(
    "case, match",
    [
        ("size-mismatch", "as on rank 0"),
        ("missing-member", "collectives on every member"),
        ("cycle", "cycle"),
        ("truncated", "truncated"),
        ("bad-comm-type", "comm_type"),
        ("send-without-recv", "one receive per send"),
        ("gap-in-ranks", "without rank"),
        # found at the first offending message, not after parsing the file: ten million zero
        # bytes (each an empty message) took 21 s and 6 GB to end on "node id 0 twice"
        ("zeros", "message 1 is an empty Node"),
        ("duplicate-id", "node id 7 twice"),
    ],
)
def test_broken_traces_raise_one_input_error(tmp_path, case, match):
    d = tmp_path / case
    if case == "size-mismatch":
        write(d, [trace(coll(0, 0, 64)), trace(coll(0, 0, 128))])
    elif case == "missing-member":
        write(d, [trace(coll(0, 0, 64, pg="1")), trace(node(0, 4, dur=1))], {"1": [0, 1]})
    elif case == "cycle":
        t = trace(node(0, 4, data_deps=[1], dur=1), node(1, 4, data_deps=[0], dur=1))
        write(d, [t])
    elif case == "truncated":
        write(d, [trace(coll(0, 0, 64))[:-3]])
    elif case == "bad-comm-type":
        write(d, [trace(coll(0, 3, 64)), trace(coll(0, 3, 64))])  # GATHER
    elif case == "send-without-recv":
        s = node(0, 5, attr_int("comm_size", 8), attr_int("comm_dst", 1))
        write(d, [trace(s), trace(node(0, 4, dur=1))])
    elif case == "gap-in-ranks":
        d.mkdir()
        (d / "w.0.et").write_bytes(trace(node(0, 4, dur=1)))
        (d / "w.2.et").write_bytes(trace(node(0, 4, dur=1)))
    elif case == "zeros":
        d.mkdir()
        (d / "w.0.et").write_bytes(bytes(10_000_000))
    elif case == "duplicate-id":
        write(d, [trace(node(7, 4, dur=1), node(7, 4, dur=2))])
    with pytest.raises(InputError, match=match):
        read_chakra(d)


# ---- our writer: field numbers checked by a decoder written from the wire rules ----------------


def _decode(buf: bytes):
    """Fields of one message as (field, wire, value) with a minimal wire-format reader."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _read_varint(buf, pos)
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            v, pos = buf[pos : pos + n], pos + n
        elif wire == 1:
            v, pos = struct.unpack("<d", buf[pos : pos + 8])[0], pos + 8
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((field, wire, v))
    return out


def _read_varint(buf: bytes, pos: int):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


def test_writer_uses_the_schema_field_numbers(tmp_path):
    from traffic.workload import Demand, Workload

    w = Workload(4, 2, (Demand("all-reduce", [[0, 1, 2, 3]], 1024.0, "dp", "backward", 2),))
    write_chakra(w, tmp_path)
    data = (tmp_path / "trace.0.et").read_bytes()
    meta, nodes = unframe(data, "t")
    assert len(nodes) == 2
    # framing: varint length then the message; second message is a Node
    n0, pos = _read_varint(data, 0)
    first_node_len, p2 = _read_varint(data, pos + n0)
    fields = _decode(data[p2 : p2 + first_node_len])
    f = {}
    for field, wire, v in fields:
        f.setdefault(field, []).append((wire, v))
    assert f[3] == [(0, 7)]  # type = COMM_COLL_NODE
    attrs = {}
    for _wire, raw in f[10]:
        a = _decode(raw)
        name = next(v for k, _, v in a if k == 1).decode()
        attrs[name] = [(k, wire_t, v) for k, wire_t, v in a if k != 1]
    assert attrs["comm_type"] == [(9, 0, 0)]  # int64_val = ALL_REDUCE
    assert attrs["comm_size"] == [(9, 0, 1024)]
    assert attrs["pg_name"][0][:2] == (29, 2)  # string_val
    assert attrs["is_cpu_op"] == [(27, 0, 0)]  # bool_val
    groups = json.loads((tmp_path / "comm_group.json").read_text())
    assert list(groups.values()) == [[0, 1, 2, 3]]


# ---- round trips ------------------------------------------------------------------------------

SMALL_GPT = """
model: {base: gpt3-175b, layers: 8, hidden: 1024, heads: 16, ffn: 4096, seq_len: 512}
parallelism: {tp: 2, pp: 2, dp: 2, sp: true, micro_batch_size: 1, global_batch_size: 8,
              distributed_optimizer: true}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 2, gpus_per_server: 4}
"""

SMALL_MOE = """
model: {base: mixtral-8x7b, layers: 4, hidden: 512, heads: 8, kv_heads: 8, ffn: 1024,
        seq_len: 256, experts: 4, top_k: 2}
parallelism: {tp: 1, pp: 2, dp: 4, ep: 4, micro_batch_size: 1, global_batch_size: 8}
precision: {activation_bytes: 2, gradient_bytes: 2, parameter_bytes: 2}
cluster: {servers: 2, gpus_per_server: 4}
"""


@pytest.mark.parametrize("source", ["vgg16-dp", "dlrm", "gpt", "moe"])
def test_plan_to_chakra_to_traffic_keeps_bytes_by_class(tmp_path, source):
    if source in ("gpt", "moe"):
        p = tmp_path / f"{source}.yaml"
        p.write_text(SMALL_GPT if source == "gpt" else SMALL_MOE)
        source = str(p)
    w = load_workload(source)
    out = tmp_path / "et"
    out.mkdir()
    write_chakra(w, out)
    w2 = load_workload(out)
    a, b = w.bytes_by_class(), w2.bytes_by_class()
    assert {k for k, v in a.items() if v} == {k for k, v in b.items() if v}
    for k, v in a.items():
        assert b.get(k, 0.0) == pytest.approx(v, rel=1e-9, abs=1e-6)
    assert w2.gpus == w.gpus and w2.gpus_per_server == w.gpus_per_server
    # per-op totals too
    ops = lambda wl: {  # noqa: E731
        op: sum(d.wire_bytes() for d in wl.demands if d.op == op) for op in {"send", "all-reduce"}
    }
    for op, v in ops(w).items():
        assert ops(w2)[op] == pytest.approx(v, rel=1e-9, abs=1e-6)


def test_export_cli_round_trip_and_errors(tmp_path):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "topoopt.app.cli", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    r = run("export", "dlrm", "--format", "chakra", "--out", "et", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ranks"] == 128 and (tmp_path / "et" / "trace.127.et").is_file()
    t1 = json.loads(run("traffic", "dlrm", "--json").stdout)["bytes_by_class"]
    t2 = json.loads(run("traffic", "et", "--json").stdout)["bytes_by_class"]
    for k in t1:
        assert t2[k] == pytest.approx(t1[k], rel=1e-9)
    # an existing folder without --force, and a folder that is not ours even with --force
    r = run("export", "dlrm", "--format", "chakra", "--out", "et")
    assert r.returncode == 2 and r.stderr.count("error:") == 1 and "Traceback" not in r.stderr
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x")
    r = run("export", "dlrm", "--format", "chakra", "--out", "mine", "--force")
    assert r.returncode == 2 and (tmp_path / "mine" / "keep.txt").exists()
    # an earlier export is replaced with --force, nothing temporary left behind
    r = run("export", "vgg16-dp", "--format", "chakra", "--out", "et", "--force")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["et", "mine"]
    # a broken trace folder: one line, exit 2
    (tmp_path / "et" / "trace.3.et").write_bytes(b"\x05\x00")
    r = run("traffic", "et", "--json")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "trace.3.et" in r.stderr


def test_fuzzed_trace_bytes_give_a_workload_or_one_input_error(tmp_path):
    """Byte flips, truncations and insertions in a small valid trace folder: every case either
    reads (and then replays) or raises InputError, never anything else."""
    from traffic.workload import Demand, Workload

    w = Workload(
        4,
        2,
        (
            Demand("all-reduce", [[0, 1, 2, 3]], 1024.0, "dp", "backward", 2),
            Demand("send", [[0, 2], [1, 3]], 512.0, "pp", "forward", 1, mutable=False),
        ),
    )
    base = tmp_path / "base"
    base.mkdir()
    write_chakra(w, base)
    original = (base / "trace.0.et").read_bytes()
    rng = np.random.default_rng(7)
    outcomes = {"ok": 0, "error": 0}
    for i in range(300):
        data = bytearray(original)
        kind = i % 3
        if kind == 0:
            for _ in range(1 + i % 4):
                data[rng.integers(len(data))] = int(rng.integers(256))
        elif kind == 1:
            data = data[: int(rng.integers(len(data)))]
        else:
            at = int(rng.integers(len(data)))
            data[at:at] = rng.integers(0, 256, int(rng.integers(1, 6))).astype(np.uint8).tobytes()
        d = tmp_path / f"c{i}"
        d.mkdir()
        for r in range(4):
            src = bytes(data) if r == 0 else (base / f"trace.{r}.et").read_bytes()
            (d / f"trace.{r}.et").write_bytes(src)
        (d / "comm_group.json").write_bytes((base / "comm_group.json").read_bytes())
        try:
            read_chakra(d)
            outcomes["ok"] += 1
        except InputError:
            outcomes["error"] += 1
    assert outcomes["ok"] + outcomes["error"] == 300
    assert outcomes["error"] > 100  # most mutations break the trace, and are reported as such


def test_converter_quirks_host_calls_dangling_and_control_cycles(tmp_path):
    """What PyTorch-converted traces contain: a host-side c10d call (COMM_COLL_NODE, is_cpu_op,
    no comm_type/comm_size) above the GPU kernel node that carries the collective; dependencies
    on dropped nodes; a CPU operator and its kernel naming each other (control one way, data the
    other). The collective is read once, with its kernel's size; the quirks are counted."""
    host = node(1, 7, attr_bool("is_cpu_op", True), deps=[99], dur=30)  # dangling dep 99
    kernel = node(
        2,
        7,
        attr_bool("is_cpu_op", False),
        attr_int("comm_type", 0),
        attr_int("comm_size", 8196000),
        data_deps=[1],
    )
    cpu_op = node(3, 4, attr_bool("is_cpu_op", True), deps=[4], data_deps=[2], dur=5)
    gpu_op = node(4, 4, attr_bool("is_cpu_op", False), data_deps=[3], dur=7)
    t = trace(host, kernel, cpu_op, gpu_op)
    w = read_chakra(write(tmp_path / "q", [t, t]))
    (d,) = w.demands
    assert (d.op, d.size, d.groups.tolist()) == ("all-reduce", 8196000.0, [[0, 1]])
    assert w.info["dangling_dependencies"] == 2  # one per rank
    assert w.info["cyclic_control_dependencies_dropped"] == 2
    tg = w.taskgraph
    host_steps = (tg.kind == "forward") & np.isclose(tg.runtime_s, 30e-6)
    assert host_steps.sum() == 2 and (tg.device[host_steps] % 2 == 1).all()  # host thread
    # a cycle of data dependencies stays an error
    bad = trace(node(1, 4, data_deps=[2], dur=1), node(2, 4, data_deps=[1], dur=1))
    with pytest.raises(InputError, match="cycle"):
        read_chakra(write(tmp_path / "c", [bad]))


def test_export_folder_is_removed_on_sigterm_and_collected_after_sigkill(tmp_path):
    """The export's temporary folder carries the writer's PID: SIGTERM mid-write removes it,
    and after SIGKILL the next run removes it; the target never appears half-written."""
    import os
    import signal
    import time

    from topoopt.atomic import PAUSE_ENV, temporary_name_pattern

    for sig in (signal.SIGTERM, signal.SIGKILL):
        flag = tmp_path / f"flag{int(sig)}"
        env = dict(os.environ, **{PAUSE_ENV: str(flag)})
        proc = subprocess.Popen(
            [sys.executable, "-m", "topoopt.app.cli", "export", "vgg16-dp", "--format", "chakra"]
            + ["--out", f"out{int(sig)}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        tmp = tmp_path / Path(flag.read_text())  # relative to the writer's folder, or absolute
        assert tmp.is_dir() and temporary_name_pattern().match(tmp.name)
        assert int(temporary_name_pattern().match(tmp.name)["pid"]) == proc.pid
        proc.send_signal(sig)
        proc.wait(timeout=60)
        assert not (tmp_path / f"out{int(sig)}").exists()
        if sig == signal.SIGTERM:
            assert not tmp.exists()
        else:
            assert tmp.exists()  # SIGKILL cannot be caught ...
            r = subprocess.run(
                [sys.executable, "-m", "topoopt.app.cli", "export", "dlrm", "--format", "chakra"]
                + ["--out", "again"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
            )
            assert r.returncode == 0, r.stderr
            assert not tmp.exists()  # ... so the next run collects it
