"""Chakra traces written by someone else's tool (ASTRA-sim's collective microbenchmarks, shipped
unchanged in ``tests/data/chakra-astra-sim``): each collective comes in with its op, size and
group, and the send/recv ring all-reduce with its pairs and bytes."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest

from traffic.load import load_workload
from traffic.summary import traffic_summary

DATA = Path(__file__).resolve().parents[1] / "data" / "chakra-astra-sim"
MIB = 1 << 20


def test_traces_match_their_source_checksums_and_licence():
    rows = re.findall(
        r"^\| `([^`]+\.et)` \| ([\d,]+) \| `([0-9a-f]{64})` \|$",
        (DATA / "SOURCE.md").read_text(encoding="utf-8"),
        flags=re.M,
    )
    on_disk = sorted(p.relative_to(DATA).as_posix() for p in DATA.rglob("*.et"))
    assert sorted(r[0] for r in rows) == on_disk and len(on_disk) == 32
    for name, size, sha in rows:
        blob = (DATA / name).read_bytes()
        assert len(blob) == int(size.replace(",", ""))
        assert hashlib.sha256(blob).hexdigest() == sha
    assert "MIT License" in (DATA / "LICENSE").read_text(encoding="utf-8")


# (folder, op, ranks, wire bytes per group: all-reduce 2(g-1)S, the others (g-1)S)
COLLECTIVES = [
    ("all_reduce/8npus_1MB", "all-reduce", 8, 2 * 7 * MIB),
    ("all_gather/4npus_1MB", "all-gather", 4, 3 * MIB),
    ("reduce_scatter/4npus_1MB", "reduce-scatter", 4, 3 * MIB),
    ("all_to_all/8npus_1MB", "all-to-all", 8, 7 * MIB),
]


@pytest.mark.parametrize(("folder", "op", "ranks", "wire"), COLLECTIVES)
def test_each_collective_keeps_its_op_size_and_group(folder, op, ranks, wire):
    w = load_workload(DATA / folder)
    assert w.gpus == ranks
    (d,) = w.demands  # the same collective on every rank is one collective, not `ranks` of them
    assert d.op == op and d.size == MIB and d.count == 1
    assert d.groups.tolist() == [list(range(ranks))]
    s = traffic_summary(w)
    assert s["total_bytes"] == wire
    assert s["demands"][0]["op"] == op and s["demands"][0]["group_size"] == ranks


def test_send_recv_ring_allreduce_pairs_and_bytes():
    w = load_workload(DATA / "custom_ring_allreduce_8npus_1MB")
    n = 8
    assert w.gpus == n
    sends = [d for d in w.demands if d.op == "send"]
    assert sends and len(sends) == len(w.demands)
    pairs, total = set(), 0.0
    for d in sends:
        for src, dst in d.groups.tolist():
            pairs.add((src, dst))
        total += d.size * d.count * d.groups.shape[0]
    # a ring: every rank sends to exactly one other rank, and the pairs form one cycle
    succ = dict(pairs)
    assert len(succ) == n == len(pairs) and sorted(succ.values()) == list(range(n))
    seen, r = [], 0
    for _ in range(n):
        seen.append(r)
        r = succ[r]
    assert r == 0 and sorted(seen) == list(range(n))
    # 2(n-1) steps of S/n per rank: the wire bytes of a ring all-reduce of S = 1 MiB
    assert total == pytest.approx(2 * (n - 1) * MIB)
    assert np.unique([d.size for d in sends]).tolist() == [MIB / n]
