"""Pure data parallelism (CNNs, BERT, CANDLE-Uno): one gradient all-reduce per iteration.

Each GPU sends ``2(n-1)/n * P * beta_reduce`` bytes per iteration with a bandwidth-optimal
algorithm (bucketing changes the number of messages, not the bytes). With ``zero`` or ``fsdp``
the sync follows :mod:`traffic.models.sharded_dp`.
"""

from __future__ import annotations

from traffic.models.megatron import reduce_bytes
from traffic.models.sharded_dp import sharded_demands
from traffic.placement import RankGrid
from traffic.plan import Plan
from traffic.workload import Demand

__all__ = ["data_parallel_demands"]


def data_parallel_demands(plan: Plan, grid: RankGrid) -> list[Demand]:
    """Gradient sync of a model known by its parameter count, over all GPUs."""
    par = plan.parallelism
    params = int(plan.model.parameters)
    group = grid.groups("dp")
    rb = reduce_bytes(plan)
    if group.shape[1] == 1:
        return []
    if par.zero or par.fsdp or par.distributed_optimizer:
        if par.distributed_optimizer:
            par_zero = plan.model_copy(update={"parallelism": par.model_copy(update={"zero": 1})})
            return sharded_demands(par_zero, group, params, 0, "dp", rb)
        return sharded_demands(plan, group, params, 0, "dp", rb)
    return [
        Demand(
            "all-reduce",
            group,
            params * rb,
            "dp",
            "backward",
            1,
            True,
            "gradient all-reduce",
            stage=0,
        )
    ]
