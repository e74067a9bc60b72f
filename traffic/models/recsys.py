"""Recommendation models (DLRM, NCF): table-wise sharded embeddings plus data-parallel MLPs.

Tables are dealt round-robin to the ``N`` GPUs (table ``k`` on GPU ``k mod N``), each GPU holding
the whole of its tables. Per micro-batch of ``b`` samples per GPU, the forward pass is one
all-to-all where GPU ``i`` sends every other GPU ``j`` the pooled vectors of ``j``'s samples for
its own tables, ``b * D_i * beta_act`` bytes with ``D_i`` the summed width of GPU ``i``'s tables;
the backward pass sends the gradients of those vectors back (the transpose). The MLPs are data
parallel: one all-reduce of their gradients per iteration over all GPUs. Embedding gradients stay
on the table's GPU (no sync).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from traffic.limits import check_memory
from traffic.models.megatron import reduce_bytes
from traffic.placement import RankGrid
from traffic.plan import Plan
from traffic.workload import Demand
from traffic.zoo import ModelSpec

__all__ = [
    "table_dims",
    "dims_per_gpu",
    "embedding_peer_bytes",
    "mlp_parameters",
    "recsys_parameters",
    "recsys_demands",
]


def table_dims(model: ModelSpec) -> np.ndarray:
    """Width of every table, in order (``count`` repeats expanded)."""
    return np.array([t.dim for t in model.tables for _ in range(t.count)], dtype=np.int64)


def dims_per_gpu(model: ModelSpec, gpus: int, table_gpus: np.ndarray | None = None) -> np.ndarray:
    """``D_i``: summed width of the tables on GPU ``i``.

    ``table_gpus`` gives the GPU of each table (in :func:`table_dims` order); the default is
    round-robin, table ``k`` on GPU ``k mod gpus``.

    Examples
    --------
    >>> from traffic.zoo import get_model
    >>> dims_per_gpu(get_model("ncf"), 3).tolist()
    [192, 64, 128]
    >>> dims_per_gpu(get_model("ncf"), 3, np.array([2, 2, 2, 2])).tolist()
    [0, 0, 384]
    """
    dims = table_dims(model)
    where = np.arange(dims.size) % gpus if table_gpus is None else np.asarray(table_gpus)
    if where.shape != dims.shape or np.any(where < 0) or np.any(where >= gpus):
        from traffic.errors import InputError

        raise InputError("table_gpus", where.tolist()[:8], f"{dims.size} GPU ids in [0, {gpus})")
    return np.bincount(where, weights=dims, minlength=gpus).astype(np.int64)


def mlp_parameters(model: ModelSpec) -> int:
    """Weights and biases of the MLPs (``w_i * w_{i+1} + w_{i+1}`` per layer)."""
    return int(sum(a * z + z for mlp in model.mlps for a, z in zip(mlp[:-1], mlp[1:], strict=True)))


def recsys_parameters(model: ModelSpec) -> int:
    """Embedding rows x widths plus MLP parameters.

    Examples
    --------
    >>> from traffic.zoo import get_model
    >>> recsys_parameters(get_model("dlrm")) - 64 * 10**7 * 128
    4139393
    """
    emb = sum(t.rows * t.dim * t.count for t in model.tables)
    return int(emb) + mlp_parameters(model)


def recsys_demands(
    plan: Plan, grid: RankGrid, table_gpus: np.ndarray | None = None
) -> list[Demand]:
    """Embedding all-to-all (forward, backward) and MLP gradient all-reduce.

    ``table_gpus``: the GPU of each table (default round-robin, see :func:`dims_per_gpu`).
    """
    n = plan.gpus
    b = plan.parallelism.micro_batch_size
    beta = plan.precision.activation_bytes
    nmb = plan.micro_batches
    dims = dims_per_gpu(plan.model, n, table_gpus)
    group = grid.groups("dp")
    out: list[Demand] = []
    if n > 1:
        if np.all(dims == dims[0]):
            size = float(n * b * dims[0] * beta)
            for ph in ("forward", "backward"):
                out.append(
                    Demand(
                        "all-to-all",
                        group,
                        size,
                        "embedding",
                        ph,
                        nmb,
                        False,
                        "embedding all-to-all",
                        stage=0,
                    )
                )
        else:
            fwd = embedding_peer_bytes((b * dims * beta).astype(np.float64))
            for ph, mat in (("forward", fwd), ("backward", fwd.T.tocsr())):
                out.append(
                    Demand(
                        "all-to-all",
                        group,
                        float(np.asarray(mat.sum(axis=1)).max()),
                        "embedding",
                        ph,
                        nmb,
                        False,
                        "embedding all-to-all",
                        peer_bytes=mat,
                        stage=0,
                    )
                )
        out.append(
            Demand(
                "all-reduce",
                group,
                mlp_parameters(plan.model) * reduce_bytes(plan),
                "dp",
                "backward",
                1,
                True,
                "mlp gradient all-reduce",
                stage=0,
            )
        )
    return out


def embedding_peer_bytes(send: np.ndarray) -> sp.csr_matrix:
    """The forward embedding all-to-all: member ``i`` sends ``send[i]`` bytes to every other
    member, as a sparse ``(n, n)`` matrix holding only the rows of members that send (those
    with tables): ``n_senders * (n - 1)`` entries instead of ``n**2``. At 16,384 GPUs and 64
    tables (TopoOpt's DLRM) that is 1,048,512 entries, 12.6 MB, where the dense float64 matrix
    was 2.15 GB (and the backward, its transpose, as much again). The matrices are checked
    against the memory budget before they are built.

    >>> embedding_peer_bytes(np.array([3.0, 0.0, 5.0])).toarray().tolist()
    [[0.0, 3.0, 3.0], [0.0, 0.0, 0.0], [5.0, 5.0, 0.0]]
    """
    send = np.asarray(send, dtype=np.float64)
    n = int(send.size)
    senders = np.flatnonzero(send > 0)
    k = int(senders.size)
    nnz = k * (n - 1)
    index = 4.0 if max(nnz, n) < 2**31 else 8.0  # scipy's int32 or int64 indices
    check_memory(  # data, column indices and row pointers, forward and backward
        "cluster.servers",
        2 * ((8.0 + index) * nnz + index * (n + 1)),
        f"{n:,} GPUs' embedding all-to-all matrices ({k:,} senders x {n - 1:,} peers, twice)",
    )
    counts = np.zeros(n, np.int64)
    counts[senders] = n - 1
    indptr = np.concatenate([[0], np.cumsum(counts)])
    # row s holds every column but s, ascending
    cols = np.tile(np.arange(n - 1, dtype=np.int64), k).reshape(k, n - 1)
    cols += cols >= senders[:, None]
    data = np.repeat(send[senders], n - 1)
    return sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, n))
