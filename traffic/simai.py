"""SimAI / AICB workload text files: write a plan's Workload as one, and parse one.

The format (SimAI's ``workload`` input, as AICB generates it):

- line 1, the header: ``HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: T ep: E pp: P
  vpp: V ga: M all_gpus: N checkpoints: 0 checkpoint_initiates: 0 pp_comm: S_pp``;
- line 2: the number of layer lines;
- one line per layer, tab-separated: ``name``, ``-1``, forward compute time, forward
  communication type, its size, input-gradient compute time, type, size, weight-gradient compute
  time, type, size, update time. Types: ``ALLREDUCE``, ``ALLGATHER``, ``REDUCESCATTER``,
  ``ALLTOALL`` (on the model-parallel group), the same with ``_EP`` (expert-parallel group) or
  ``_DP_EP`` (expert data-parallel group), or ``NONE``. Sizes are bytes (``S``, nccl-tests
  convention); compute times are nanoseconds.

**One pipeline stage per file.** SimAI replays the same layer list on every rank (its
``Workload`` is SPMD) and models the pipeline analytically, in ``Layer::report``: the bubble is
the per-micro-batch time of the layers in the file (their forward, input- and weight-gradient
compute plus exposed forward and input-gradient communication) times ``(pp - 1) / (ga vpp)``,
and the pipeline transfers cost ``2 vpp ga pp_comm`` at the network's bandwidth. The layer lines
are therefore one stage's layers, as AICB writes them (``layers / pp`` per file); a file holding
every stage's layers would make each rank run ``pp`` stages of compute and tensor-parallel
traffic. :func:`simai_workload` writes one stage, by default the one with the most forward
FLOPs (the pipeline's bottleneck; the first of equals).

What :func:`simai_workload` writes, for a Workload built from a plan and a stage ``s``: one line
per collective a rank of that stage runs per micro-batch (forward collectives in the forward
slot, backward ones in the input-gradient slot, side by side), then one line per collective it
runs once per iteration (gradient synchronisation, in the weight-gradient slot). ``tp`` and
``embedding`` collectives are on the model-parallel group, ``ep`` on ``_EP``, ``dp`` on the
data-parallel group (weight-gradient slot; expert parameters' on ``_DP_EP``). Pipeline sends go
to ``pp_comm``. Context-parallel traffic has no SimAI type and is refused. The stage's forward
compute time per micro-batch (the plan's FLOPs at the given throughput) is put on its first
line, the backward (twice that) on the input-gradient slot of that line. ``ga`` is the number
of micro-batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traffic.errors import InputError
from traffic.workload import Workload

__all__ = ["SIMAI_TYPES", "SimAILine", "SimAIWorkload", "simai_workload", "parse_simai"]

HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD"
_OP = {"all-reduce": "ALLREDUCE", "all-gather": "ALLGATHER", "reduce-scatter": "REDUCESCATTER"}
_OP["all-to-all"] = "ALLTOALL"
SIMAI_TYPES = tuple(
    ["NONE"]
    + [
        t + sfx
        for t in ("ALLREDUCE", "ALLGATHER", "REDUCESCATTER", "ALLTOALL")
        for sfx in ("", "_EP", "_DP_EP")
    ]
)
"""Communication types a SimAI line may name."""

_HEADER_KEYS = (
    "model_parallel_NPU_group",
    "ep",
    "pp",
    "vpp",
    "ga",
    "all_gpus",
    "checkpoints",
    "checkpoint_initiates",
    "pp_comm",
)


@dataclass(frozen=True)
class SimAILine:
    """One layer line: name and the three (compute ns, comm type, comm bytes) slots + update."""

    name: str
    fwd_ns: int
    fwd_type: str
    fwd_bytes: int
    ig_ns: int
    ig_type: str
    ig_bytes: int
    wg_ns: int
    wg_type: str
    wg_bytes: int
    update_ns: int


@dataclass(frozen=True)
class SimAIWorkload:
    """A parsed SimAI workload: header fields and the layer lines."""

    header: dict
    lines: tuple[SimAILine, ...]


def _simai_type(cls: str, op: str, where: str, expert: bool = False) -> str:
    if cls not in ("tp", "embedding", "ep", "dp"):
        raise InputError(where, f"class {cls}", "tp, embedding, ep, dp or pp (SimAI has no CP)")
    t = _OP.get(op)
    if t is None:
        raise InputError(where, op, "all-reduce, all-gather, reduce-scatter or all-to-all")
    if cls == "dp" and expert:
        return t + "_DP_EP"
    if cls in ("tp", "embedding", "dp"):
        return t
    return t + "_EP"


def simai_workload(
    w: Workload,
    *,
    flops_per_s: float = 312e12 * 0.5,
    update_ns: int = 100,
    stage: int | None = None,
) -> str:
    """The SimAI workload text of one pipeline stage of a plan's Workload (module docstring).

    Parameters
    ----------
    w : Workload
        Built from a plan (needs ``info["micro_batches"]``; task graphs and traces are refused).
    flops_per_s : float
        Achieved FLOP/s per GPU that turns the plan's FLOPs into compute nanoseconds.
    update_ns : int
        The update-time column.
    stage : int, optional
        The pipeline stage written (default: the one with the most forward FLOPs).
    """
    info = dict(w.info)
    m = info.get("micro_batches")
    if not m or w.taskgraph is not None:
        raise InputError("export --format simai", w.name, "a workload built from a plan file")
    m = int(m)
    conv = dict(w.conventions)
    st = conv.get("stage_tp")
    if st and len(set(st)) > 1:
        raise InputError(
            "export --format simai",
            f"stage_tp {list(st)}",
            "equal TP sizes (SimAI's workload has one model_parallel_NPU_group)",
        )
    par = info.get("parallelism") or conv.get("parallelism") or {}
    stages = sorted({d.stage for d in w.demands if d.stage is not None} | {0})
    flops = np.atleast_1d(np.asarray(info.get("forward_flops_per_microbatch_per_gpu", 0.0)))
    pp_sizes = [d.size for d in w.demands if d.cls == "pp" and d.op == "send"]
    if stage is None:
        per = [float(flops[min(s, flops.size - 1)]) for s in stages]
        stage = stages[int(np.argmax(per))]
    if stage not in stages:
        raise InputError("--stage", stage, f"a pipeline stage 0..{len(stages) - 1}")
    lines: list[str] = []
    for s in [stage]:
        per_mb = {"forward": [], "backward": []}
        per_it = []
        for d in w.demands:
            if (d.stage if d.stage is not None else 0) != s or d.group_size < 2 or d.count == 0:
                continue
            if d.cls == "pp":
                continue
            t = _simai_type(d.cls, d.op, f"demand {d.name!r}", d.name.startswith("expert"))
            if d.cls != "dp" and d.phase in per_mb and d.count % m == 0:
                per_mb[d.phase] += [(d, t)] * (d.count // m)
            else:
                per_it += [(d, t)] * d.count
        f_ns = int(round(float(flops[min(s, flops.size - 1)]) / flops_per_s * 1e9))
        n_mb = max(len(per_mb["forward"]), len(per_mb["backward"]), 1)
        for i in range(n_mb):
            fw = per_mb["forward"][i] if i < len(per_mb["forward"]) else None
            bw = per_mb["backward"][i] if i < len(per_mb["backward"]) else None
            name = f"stage{s}_" + (fw or bw or (None, "compute"))[1].lower()
            lines.append(
                "\t".join(
                    str(x)
                    for x in (
                        name,
                        -1,
                        f_ns if i == 0 else 1,
                        fw[1] if fw else "NONE",
                        int(round(fw[0].size)) if fw else 0,
                        2 * f_ns if i == 0 else 1,
                        bw[1] if bw else "NONE",
                        int(round(bw[0].size)) if bw else 0,
                        1,
                        "NONE",
                        0,
                        update_ns,
                    )
                )
            )
        for d, t in per_it:
            lines.append(
                "\t".join(
                    str(x)
                    for x in (
                        f"stage{s}_grad_{t.lower()}",
                        -1,
                        1,
                        "NONE",
                        0,
                        1,
                        "NONE",
                        0,
                        1,
                        t,
                        int(round(d.size)),
                        update_ns,
                    )
                )
            )
    header = {
        "model_parallel_NPU_group": int(par.get("tp", _group_of(w, "tp"))),
        "ep": int(par.get("ep", _group_of(w, "ep"))),
        "pp": len(stages),
        "vpp": int(par.get("vpp", 1)),
        "ga": m,
        "all_gpus": w.gpus,
        "checkpoints": 0,
        "checkpoint_initiates": 0,
        "pp_comm": int(round(max(pp_sizes))) if pp_sizes else 0,
    }
    head = HEADER + " " + " ".join(f"{k}: {v}" for k, v in header.items())
    return "\n".join([head, str(len(lines)), *lines]) + "\n"


def _group_of(w: Workload, cls: str) -> int:
    sizes = [d.group_size for d in w.demands if d.cls == cls and d.op != "send"]
    return max(sizes) if sizes else 1


def parse_simai(text: str, source: str = "workload.txt") -> SimAIWorkload:
    """Parse a SimAI workload text (strict: every field checked).

    >>> t = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 1 "
    ...      "ga: 4 all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0 pp_comm: 0\\n1\\n"
    ...      "l0\\t-1\\t10\\tALLREDUCE\\t64\\t20\\tNONE\\t0\\t1\\tNONE\\t0\\t100\\n")
    >>> wl = parse_simai(t)
    >>> wl.header["ga"], wl.lines[0].fwd_type, wl.lines[0].fwd_bytes
    (4, 'ALLREDUCE', 64)
    """
    rows = text.splitlines()
    if len(rows) < 2:
        raise InputError(source, f"{len(rows)} lines", "a header, a line count and layer lines")
    head = rows[0].split()
    if not head or head[0] != HEADER and not head[0].isupper():
        raise InputError(f"{source}: line 1", rows[0][:40], f"'{HEADER} key: value ...'")
    header: dict = {"kind": head[0]}
    toks = head[1:]
    if len(toks) % 2:
        raise InputError(f"{source}: line 1", rows[0][:60], "pairs 'key: value'")
    for k, v in zip(toks[::2], toks[1::2], strict=True):
        if not k.endswith(":"):
            raise InputError(f"{source}: line 1", k, "'key:' followed by a value")
        try:
            header[k[:-1]] = int(v)
        except ValueError:
            raise InputError(f"{source}: line 1: {k[:-1]}", v, "an integer") from None
    for k in ("model_parallel_NPU_group", "ep", "pp", "ga", "all_gpus"):
        if k not in header:
            raise InputError(f"{source}: line 1", f"no {k}", ", ".join(_HEADER_KEYS))
    try:
        n = int(rows[1])
    except ValueError:
        raise InputError(f"{source}: line 2", rows[1][:20], "the number of layer lines") from None
    body = [r for r in rows[2:] if r.strip()]
    if n != len(body):
        raise InputError(f"{source}: line 2", n, f"the number of layer lines ({len(body)})")
    lines = []
    for i, r in enumerate(body):
        f = r.split("\t") if "\t" in r else r.split()
        where = f"{source}: line {i + 3}"
        if len(f) != 12:
            raise InputError(where, f"{len(f)} fields", "12 tab-separated fields")
        try:
            nums = [int(f[j]) for j in (1, 2, 4, 5, 7, 8, 10, 11)]
        except ValueError:
            raise InputError(where, r[:60], "integers for times and sizes") from None
        for j in (3, 6, 9):
            if f[j] not in SIMAI_TYPES:
                raise InputError(where, f[j], ", ".join(SIMAI_TYPES))
        if min(nums[1:]) < 0:
            raise InputError(where, r[:60], "times and sizes >= 0")
        lines.append(
            SimAILine(
                f[0],
                nums[1],
                f[3],
                nums[2],
                nums[3],
                f[6],
                nums[4],
                nums[5],
                f[9],
                nums[6],
                nums[7],
            )
        )
    return SimAIWorkload(header=header, lines=tuple(lines))
