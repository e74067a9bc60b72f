"""Traffic formulas of each model family, used by :func:`traffic.build.workload_from_plan`.

- :mod:`~traffic.models.megatron`: dense PTD-P transformers (TP, SP, PP, DP, tied embeddings) and
  exact parameter counts;
- :mod:`~traffic.models.context_parallel`: ring attention;
- :mod:`~traffic.models.moe`: expert-parallel all-to-all;
- :mod:`~traffic.models.sharded_dp`: ZeRO 1-3 and FSDP;
- :mod:`~traffic.models.recsys`: DLRM / NCF embedding all-to-all and MLP all-reduce;
- :mod:`~traffic.models.data_parallel`: pure data parallel models.
"""

__all__: list[str] = []
