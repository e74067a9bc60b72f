"""Context parallelism (ring attention): K/V chunks circulate over the ``cp`` ring.

Each of the ``cp`` ranks of a context-parallel group holds ``s/cp`` tokens. In the forward pass of
every layer, each rank passes its key/value chunk (``2 * b * (s/cp) * (h_kv/t) * beta_act`` bytes,
``h_kv = kv_heads * head_dim``) to its ring successor ``cp - 1`` times; the backward pass sends the
K/V chunk and its gradient, twice as many transfers; full recomputation repeats the forward ones.
The transfers are fixed ``send`` demands from each member to the next in group order.
"""

from __future__ import annotations

import numpy as np

from traffic.models.megatron import stage_layout
from traffic.placement import RankGrid
from traffic.plan import Plan
from traffic.workload import Demand

__all__ = ["ring_pairs", "kv_chunk_bytes", "cp_demands"]


def ring_pairs(groups: np.ndarray) -> np.ndarray:
    """``[member k, member k+1 mod g]`` for every member of every group: shape ``(G*g, 2)``.

    Examples
    --------
    >>> ring_pairs(np.array([[0, 2, 4]])).tolist()
    [[0, 2], [2, 4], [4, 0]]
    """
    nxt = np.roll(groups, -1, axis=1)
    return np.stack([groups.reshape(-1), nxt.reshape(-1)], axis=1)


def kv_chunk_bytes(plan: Plan) -> int:
    """Bytes of one K/V chunk a rank sends per ring step: ``2*b*(s/cp)*(h_kv/t)*beta_act``."""
    m, par = plan.model, plan.parallelism
    return (
        2
        * par.micro_batch_size
        * (int(m.seq_len) // par.cp)
        * (m.kv_dim // par.tp)
        * plan.precision.activation_bytes
    )


def cp_demands(plan: Plan, grid: RankGrid) -> list[Demand]:
    """Ring-attention sends of every stage (empty when ``cp = 1``)."""
    par = plan.parallelism
    cp = par.cp
    if cp == 1:
        return []
    size = kv_chunk_bytes(plan)
    nmb = plan.micro_batches
    layers = stage_layout(plan.model, par.pp, par.vpp, par.stage_layers).layers
    bwd_factor = 2 + (1 if par.recompute == "full" else 0)
    out = []
    for i in range(par.pp):
        pairs = ring_pairs(grid.groups("cp", pp=i))
        steps = (cp - 1) * layers[i] * nmb
        out.append(
            Demand("send", pairs, size, "cp", "forward", steps, False, "cp ring K/V", stage=i)
        )
        out.append(
            Demand(
                "send",
                pairs,
                size,
                "cp",
                "backward",
                bwd_factor * steps,
                False,
                "cp ring K/V and dK/dV",
                stage=i,
            )
        )
    return out
