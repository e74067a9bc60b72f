"""Mixture-of-experts traffic: expert-parallel all-to-all dispatch and combine.

Tokens per GPU entering a MoE layer: ``T = b*s/(t*cp)``. Each token goes to ``k`` experts.

Dropless (default)
    Dispatch sends ``T*k*h*beta_act`` per GPU over its EP group; under uniform routing each peer
    gets ``1/ep`` of it (``S = T*k*h*beta``). Combine sends the same back; the backward pass
    repeats both: 4 all-to-alls per MoE layer per micro-batch.
Capacity factor ``CF``
    Each rank sends each expert a fixed buffer of ``C = ceil(T*k/E * CF)`` tokens; the send buffer
    is ``S = E*C*h*beta`` whatever the routing.
Skewed load (``options.expert_load``, dropless only)
    EP rank ``j`` holds experts ``j*E/ep .. (j+1)*E/ep - 1`` and receives the share ``L_j`` of
    their normalised load: member ``i`` sends member ``j != i`` exactly ``T*k*h*beta*L_j`` bytes
    (``peer_bytes``); combine uses the transpose. Tokens routed to a rank's own experts stay local.
Expert tensor parallelism (``etp > 1``)
    Members of an ETP group all-gather the tokens they received before the experts and
    reduce-scatter the results after (forward; the backward pass swaps them): ``S = etp * R*h*beta``
    with ``R`` the tokens each received (``T*k`` uniform, ``E*C`` with a capacity factor,
    ``ep*T*k*L_j`` for EP rank ``j`` under skew).
"""

from __future__ import annotations

from math import ceil

import numpy as np

from traffic.models.megatron import stage_layout
from traffic.placement import RankGrid
from traffic.plan import Plan
from traffic.workload import Demand

__all__ = ["tokens_per_gpu", "capacity", "rank_loads", "dispatch_matrix", "moe_demands"]


def tokens_per_gpu(plan: Plan) -> int:
    """``T = b*s/(t*cp)``."""
    par = plan.parallelism
    return par.micro_batch_size * int(plan.model.seq_len) // (par.tp * par.cp)


def capacity(tokens: int, top_k: int, experts: int, factor: float) -> int:
    """Per-expert capacity from one rank: ``ceil(T*k/E * CF)``.

    Examples
    --------
    >>> capacity(4096, 2, 8, 1.25)
    1280
    """
    return ceil(tokens * top_k / experts * factor - 1e-9)


def rank_loads(load: tuple[float, ...], ep: int) -> np.ndarray:
    """Share of routed tokens received by each EP rank (contiguous blocks of ``E/ep`` experts).

    Examples
    --------
    >>> rank_loads((4, 2, 1, 1), 2).tolist()
    [0.75, 0.25]
    """
    v = np.asarray(load, dtype=np.float64)
    return v.reshape(ep, -1).sum(axis=1) / v.sum()


def dispatch_matrix(plan: Plan) -> tuple[float, np.ndarray | None, np.ndarray]:
    """``(S, peer_bytes or None, tokens received per EP rank)`` of one dispatch all-to-all."""
    m, par, opt = plan.model, plan.parallelism, plan.options
    ep, k, e = par.ep, int(m.top_k), int(m.experts)
    beta = plan.precision.activation_bytes
    h = int(m.hidden)
    tk = tokens_per_gpu(plan) * k
    if opt.capacity_factor is not None:
        c = capacity(tokens_per_gpu(plan), k, e, opt.capacity_factor)
        return float(e * c * h * beta), None, np.full(ep, float(e * c))
    if opt.expert_load is None:
        return float(tk * h * beta), None, np.full(ep, float(tk))
    share = rank_loads(opt.expert_load, ep)
    pb = np.tile(share * tk * h * beta, (ep, 1))
    np.fill_diagonal(pb, 0.0)
    return float(pb.sum(axis=1).max()), pb, share * tk * ep


def moe_demands(plan: Plan, expert: RankGrid) -> list[Demand]:
    """All-to-all (and ETP) collectives of the MoE layers of every stage."""
    m, par = plan.model, plan.parallelism
    if not m.is_moe:
        return []
    lay = stage_layout(m, par.pp, par.vpp, par.stage_layers)
    nmb = plan.micro_batches
    size, pb, received = dispatch_matrix(plan)
    h, beta = int(m.hidden), plan.precision.activation_bytes
    out: list[Demand] = []
    for i in range(par.pp):
        n = lay.moe[i] * nmb
        if n == 0:
            continue
        if par.ep > 1:
            g = expert.groups("ep", pp=i)
            for ph in ("forward", "backward"):
                if pb is None:
                    out.append(
                        Demand(
                            "all-to-all",
                            g,
                            size,
                            "ep",
                            ph,
                            2 * n,
                            False,
                            "moe dispatch + combine",
                            stage=i,
                        )
                    )
                else:
                    for name, mat in (("dispatch", pb), ("combine", pb.T.copy())):
                        sz = float(mat.sum(axis=1).max())
                        out.append(
                            Demand(
                                "all-to-all",
                                g,
                                sz,
                                "ep",
                                ph,
                                n,
                                False,
                                f"moe {name}",
                                peer_bytes=mat,
                                stage=i,
                            )
                        )
        if plan.etp > 1:
            tg = expert.groups("tp", pp=i)
            ep_of = expert.coordinate("ep")[tg[:, 0]]
            for j in range(par.ep):
                rows = tg[ep_of == j]
                s_etp = plan.etp * received[j] * h * beta
                for op in ("all-gather", "reduce-scatter"):
                    for ph in ("forward", "backward"):
                        out.append(Demand(op, rows, s_etp, "tp", ph, n, True, f"etp {op}", stage=i))
    return out
