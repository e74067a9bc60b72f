"""The design benchmark's workloads (issue 5, section 5), each a function of the server count.

Plan workloads are built at any server count ``n`` (``n`` a multiple of 16 for GPT-3):

``dlrm``
    TopoOpt's DLRM (64 tables x 10^7 rows x 128 dims, global batch 65,536) on ``n`` servers x 4
    GPUs as in the paper: tables sharded table-wise (all-to-all), MLPs data parallel.
``candle-uno``, ``bert-large``, ``vgg16``
    Pure data parallel on ``n`` servers x 8 GPUs (one all-reduce group per local GPU index).
``gpt3-pp``
    GPT-3 175B, Megatron PTD-P with ``t = 8`` inside a server, ``p = 16`` stages across servers
    and ``dp = n / 16``; 64 micro-batches of 1 sequence per pipeline (order ``tp-dp-pp``: the
    stages of a pipeline sit on servers ``n/16`` apart).
``mixtral-ep``
    Mixtral 8x7B at 4k context, ``t = 2`` with sequence parallelism inside a server, ``ep = 8``
    expert groups spanning 8 servers (order ``tp-cp-dp-ep-pp``: the expert ranks of a group are
    ``n / 8`` servers apart), data parallel over the rest.

Task graphs: the seven TopoOpt artifact graphs in ``tests/data/topoopt-taskgraphs`` at their own
server counts (``tg-<model>-<n>``).

``MP_HEAVY`` names the workloads the acceptance's geometric mean runs over (DLRM, CANDLE with
TopoOpt's hybrid strategy, GPT-3 PP, Mixtral EP); ``PURE_DP`` the pure data-parallel ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from traffic.errors import InputError
from traffic.workload import Workload

__all__ = [
    "PLAN_WORKLOADS",
    "TASK_GRAPHS",
    "PURE_DP",
    "MP_HEAVY",
    "BenchWorkload",
    "plan_mapping",
    "plan_workload",
    "taskgraph_dir",
    "suite_cases",
]

PLAN_WORKLOADS = ("dlrm", "candle-uno", "bert-large", "vgg16", "gpt3-pp", "mixtral-ep")
"""Plan workloads built at every server count."""

TASK_GRAPHS = {
    "tg-candle-16": "100candle_16.fbuf",
    "tg-candle-32": "100candle_32.fbuf",
    "tg-dlrm-16": "100dlrm_16.fbuf",
    "tg-dlrm-32": "100dlrm_32.fbuf",
    "tg-dlrm-128": "100dlrm_128.fbuf",
    "tg-transformer-16": "100transformer_16.fbuf",
    "tg-vgg-16": "100vgg_16.fbuf",
}
"""TopoOpt artifact task graphs by benchmark name."""

PURE_DP = ("candle-uno", "bert-large", "vgg16", "tg-transformer-16", "tg-vgg-16")
"""Workloads whose only inter-server traffic is data-parallel all-reduce."""

MP_HEAVY = (
    "dlrm",
    "gpt3-pp",
    "mixtral-ep",
    "tg-candle-16",
    "tg-candle-32",
    "tg-dlrm-16",
    "tg-dlrm-32",
    "tg-dlrm-128",
)
"""Workloads with model-parallel traffic between servers (the acceptance's geometric mean)."""

_DP_BATCH = {"candle-uno": 4096, "bert-large": 1024, "vgg16": 2048}


def plan_mapping(name: str, servers: int) -> dict:
    """The plan (a mapping for :func:`traffic.plan.load_plan`) of workload ``name`` on ``servers``.

    Examples
    --------
    >>> m = plan_mapping("gpt3-pp", 32)
    >>> m["parallelism"]["tp"], m["parallelism"]["pp"], m["parallelism"]["dp"]
    (8, 16, 2)
    >>> plan_mapping("dlrm", 128)["parallelism"]["micro_batch_size"]
    128
    """
    n = int(servers)
    if n < 2:
        raise InputError("servers", servers, "an integer >= 2")
    fp32 = {"activation_bytes": 4, "gradient_bytes": 4, "parameter_bytes": 4}
    bf16 = {"activation_bytes": 2, "gradient_bytes": 2, "parameter_bytes": 2}
    if name == "dlrm":
        gpus = 4 * n
        if 65536 % gpus:
            raise InputError("servers", n, "a power of two <= 16384 for dlrm (batch 65,536)")
        return {
            "model": "dlrm",
            "parallelism": {
                "dp": gpus,
                "micro_batch_size": 65536 // gpus,
                "global_batch_size": 65536,
            },
            "precision": fp32,
            "cluster": {"servers": n, "gpus_per_server": 4},
        }
    if name in _DP_BATCH:
        gpus = 8 * n
        per = max(1, _DP_BATCH[name] // gpus)
        return {
            "model": name,
            "parallelism": {"dp": gpus, "micro_batch_size": per, "global_batch_size": per * gpus},
            "precision": fp32,
            "cluster": {"servers": n, "gpus_per_server": 8},
        }
    if name == "gpt3-pp":
        if n % 16:
            raise InputError("servers", n, "a multiple of 16 for gpt3-pp (p = 16 stages)")
        dp = n // 16
        return {
            "model": "gpt3-175b",
            "parallelism": {
                "tp": 8,
                "pp": 16,
                "dp": dp,
                "micro_batch_size": 1,
                "global_batch_size": 64 * dp,
                "order": "tp-dp-pp",
            },
            "precision": bf16,
            "cluster": {"servers": n, "gpus_per_server": 8},
        }
    if name == "mixtral-ep":
        if n % 8:
            raise InputError("servers", n, "a multiple of 8 for mixtral-ep (ep = 8)")
        dp = 4 * n  # 8 GPUs per server / t = 2
        return {
            "model": {"base": "mixtral-8x7b", "seq_len": 4096},
            "parallelism": {
                "tp": 2,
                "sp": True,
                "ep": 8,
                "etp": 1,
                "dp": dp,
                "micro_batch_size": 1,
                "global_batch_size": dp,
                "distributed_optimizer": True,
                "order": "tp-cp-dp-ep-pp",
            },
            "precision": bf16,
            "cluster": {"servers": n, "gpus_per_server": 8},
        }
    raise InputError("workload", name, f"one of {', '.join(PLAN_WORKLOADS)}")


def plan_workload(name: str, servers: int) -> Workload:
    """Build plan workload ``name`` on ``servers`` servers (see :func:`plan_mapping`)."""
    from traffic.build import workload_from_plan
    from traffic.plan import load_plan

    return workload_from_plan(load_plan(plan_mapping(name, servers)), name=f"{name}-{servers}")


def taskgraph_dir() -> Path:
    """The TopoOpt task graphs in ``tests/data`` (``TOPOOPT_TASKGRAPHS`` overrides)."""
    env = os.environ.get("TOPOOPT_TASKGRAPHS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "tests" / "data" / "topoopt-taskgraphs"


@dataclass(frozen=True)
class BenchWorkload:
    """One workload of the suite: its name, server count and a builder."""

    name: str
    servers: int
    build: Callable[[], Workload]

    @property
    def mp_heavy(self) -> bool:
        return self.name in MP_HEAVY

    @property
    def pure_dp(self) -> bool:
        return self.name in PURE_DP


def suite_cases(
    workloads: list[str] | None, sizes: list[int], taskgraph_sizes: list[int] | None = None
) -> list[BenchWorkload]:
    """The (workload, servers) cases of a run: plan workloads at each size in ``sizes`` that
    fits, then the task graphs at their own server counts (only those in ``taskgraph_sizes``
    when given).

    Examples
    --------
    >>> [(c.name, c.servers) for c in suite_cases(["gpt3-pp", "tg-dlrm-32"], [16, 64])]
    [('gpt3-pp', 16), ('gpt3-pp', 64), ('tg-dlrm-32', 32)]
    >>> [c.name for c in suite_cases(["tg-dlrm-32", "tg-vgg-16"], [16], taskgraph_sizes=[16])]
    ['tg-vgg-16']
    """
    wanted = list(PLAN_WORKLOADS) + list(TASK_GRAPHS) if workloads is None else list(workloads)
    for w in wanted:
        if w not in PLAN_WORKLOADS and w not in TASK_GRAPHS:
            allowed = ", ".join(list(PLAN_WORKLOADS) + list(TASK_GRAPHS))
            raise InputError("workloads", w, f"a comma-separated list of {allowed}")
    out: list[BenchWorkload] = []
    for n in sizes:
        for w in wanted:
            if w in PLAN_WORKLOADS:
                if w == "gpt3-pp" and n % 16:
                    continue
                if w == "mixtral-ep" and n % 8:
                    continue
                out.append(BenchWorkload(w, n, lambda w=w, n=n: plan_workload(w, n)))
    folder = taskgraph_dir()
    for w in wanted:
        if w in TASK_GRAPHS:
            n = int(TASK_GRAPHS[w].split("_")[1].split(".")[0])
            if taskgraph_sizes is not None and n not in taskgraph_sizes:
                continue
            path = folder / TASK_GRAPHS[w]

            def build(path=path) -> Workload:
                from traffic.taskgraph import read_taskgraph

                return read_taskgraph(path)

            out.append(BenchWorkload(w, n, build))
    return out
