"""Sharded data parallelism: ZeRO 1-3 and PyTorch FSDP (``psi`` = the bytes being synced).

Per data-parallel group of ``n`` ranks and parameters ``P`` per rank (its model-parallel shard):

=================  =======================================================  ===============
mode               collectives                                              per micro-batch
=================  =======================================================  ===============
ZeRO-1             reduce-scatter gradients, all-gather parameters          once per iter.
ZeRO-2             reduce-scatter gradients (each micro-batch), all-gather  RS: m
FSDP shard_grad_op all-gather parameters forward, reduce-scatter gradients  AG, RS: m
ZeRO-3, full_shard all-gather forward, all-gather backward, reduce-scatter  AG, AG, RS: m
hybrid_shard       full_shard inside a shard group of ``k`` ranks, then an  all: m
                   all-reduce of the ``P/k`` shard across the ``n/k`` replicas
=================  =======================================================  ===============

With ``options.defer_grad_sync`` the gradient reduce-scatter (and the hybrid all-reduce) run once
per iteration instead of every micro-batch. Sizes: gradients ``P * beta_reduce`` (reduce-scatter
input), parameters ``P * beta_param`` (all-gather output).
"""

from __future__ import annotations

import numpy as np

from traffic.errors import InputError
from traffic.plan import Plan
from traffic.workload import Demand

__all__ = ["hybrid_groups", "sharded_demands"]


def hybrid_groups(groups: np.ndarray, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Split each data-parallel group into shard groups of ``shard`` consecutive members and the
    replica groups joining same-position members of different shard groups.

    Examples
    --------
    >>> s, r = hybrid_groups(np.arange(8).reshape(1, 8), 4)
    >>> s.tolist(), r.tolist()
    ([[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 4], [1, 5], [2, 6], [3, 7]])
    """
    g, n = groups.shape
    if n % shard:
        raise InputError("options.hybrid_shard_size", shard, f"a divisor of {n}")
    cube = groups.reshape(g, n // shard, shard)
    return cube.reshape(-1, shard), cube.transpose(0, 2, 1).reshape(-1, n // shard)


def _default_shard(plan: Plan, groups: np.ndarray) -> int:
    server = groups[0] // plan.cluster.gpus_per_server
    k = int((server == server[0]).sum())
    if groups.shape[1] % k:
        raise InputError("options.hybrid_shard_size", None, f"set explicitly: {k} peers per server")
    return k


def sharded_demands(
    plan: Plan, groups: np.ndarray, params: int, stage: int | None, label: str, rbytes: int
) -> list[Demand]:
    """ZeRO / FSDP collectives of one data-parallel group family holding ``params`` per rank."""
    par, opt = plan.parallelism, plan.options
    n = groups.shape[1]
    if n == 1 or params == 0:
        return []
    m = plan.micro_batches
    grad = params * rbytes
    prm = params * plan.precision.parameter_bytes
    sync = 1 if opt.defer_grad_sync else m
    mode = par.fsdp or f"zero{par.zero}"
    d = []

    def add(op, g, size, phase, count, what):
        d.append(
            Demand(op, g, size, "dp", phase, count, True, f"{label} {mode} {what}", stage=stage)
        )

    if mode == "zero1":
        add("reduce-scatter", groups, grad, "backward", 1, "gradient reduce-scatter")
        add("all-gather", groups, prm, "optimizer", 1, "parameter all-gather")
    elif mode == "zero2":
        add("reduce-scatter", groups, grad, "backward", sync, "gradient reduce-scatter")
        add("all-gather", groups, prm, "optimizer", 1, "parameter all-gather")
    elif mode == "shard_grad_op":
        add("all-gather", groups, prm, "forward", m, "parameter all-gather")
        add("reduce-scatter", groups, grad, "backward", sync, "gradient reduce-scatter")
    elif mode in ("zero3", "full_shard"):
        add("all-gather", groups, prm, "forward", m, "parameter all-gather")
        add("all-gather", groups, prm, "backward", m, "parameter all-gather")
        add("reduce-scatter", groups, grad, "backward", sync, "gradient reduce-scatter")
    elif mode == "hybrid_shard":
        k = opt.hybrid_shard_size or _default_shard(plan, groups)
        shard, replica = hybrid_groups(groups, k)
        add("all-gather", shard, prm, "forward", m, "parameter all-gather")
        add("all-gather", shard, prm, "backward", m, "parameter all-gather")
        add("reduce-scatter", shard, grad, "backward", sync, "gradient reduce-scatter")
        if replica.shape[1] > 1:
            add("all-reduce", replica, grad / k, "backward", sync, "shard all-reduce")
    else:  # pragma: no cover - guarded by the plan schema
        raise InputError("parallelism.zero", par.zero, "0..3")
    return d
