"""Tables and totals of a Workload's traffic (bytes per class, intra- vs inter-server)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traffic.expand import PairTraffic, expand
from traffic.workload import CLASSES, Workload

__all__ = ["traffic_summary", "class_table", "pair_frame", "demand_list"]


def class_table(workload: Workload, pairs: PairTraffic) -> pd.DataFrame:
    """Bytes per class: cluster total, per GPU, intra- and inter-server (server-level pairs)."""
    rows = []
    intra = pairs.src == pairs.dst
    for c in np.unique(pairs.cls):
        m = pairs.cls == c
        total = float(pairs.bytes[m].sum())
        rows.append(
            {
                "class": CLASSES[c],
                "bytes": total,
                "bytes_per_gpu": total / workload.gpus,
                "intra_server_bytes": float(pairs.bytes[m & intra].sum()),
                "inter_server_bytes": float(pairs.bytes[m & ~intra].sum()),
            }
        )
    return pd.DataFrame(
        rows,
        columns=["class", "bytes", "bytes_per_gpu", "intra_server_bytes", "inter_server_bytes"],
    )


def traffic_summary(workload: Workload, algorithm: str = "ring") -> dict[str, Any]:
    """The facts ``topoopt traffic --json`` prints.

    Returns
    -------
    dict
        ``gpus``, ``servers``, ``gpus_per_server``, ``parameters``, ``algorithm``,
        ``bytes_by_class`` (class -> wire bytes per iteration summed over all GPUs),
        ``bytes_per_gpu_by_class``, ``total_bytes``, ``inter_server_bytes``,
        ``intra_server_bytes``, ``demand_families`` (their number), ``demands`` (one entry per
        family: ``op``, ``size`` (bytes, nccl-tests ``S``), ``group_size``, ``groups``, ``count``
        (per group per iteration), ``class``, ``phase``, ``name``), ``conventions``.
    """
    pairs = expand(workload, algorithm, "server")
    table = class_table(workload, pairs)
    intra = pairs.src == pairs.dst
    return {
        "source": workload.name,
        "gpus": workload.gpus,
        "servers": workload.servers,
        "gpus_per_server": workload.gpus_per_server,
        "parameters": workload.parameters,
        "algorithm": algorithm,
        "bytes_by_class": dict(zip(table["class"], table["bytes"], strict=True)),
        "bytes_per_gpu_by_class": dict(zip(table["class"], table["bytes_per_gpu"], strict=True)),
        "total_bytes": float(pairs.bytes.sum()),
        "inter_server_bytes": float(pairs.bytes[~intra].sum()),
        "intra_server_bytes": float(pairs.bytes[intra].sum()),
        "demand_families": len(workload.demands),
        "demands": demand_list(workload),
        "conventions": dict(workload.conventions),
    }


def pair_frame(pairs: PairTraffic) -> pd.DataFrame:
    """Summed pair matrix as a sparse table ``src, dst, bytes`` (non-zero entries only)."""
    coo = pairs.matrix().tocoo()
    order = np.lexsort((coo.col, coo.row))
    return pd.DataFrame(
        {
            "src": coo.row[order].astype(np.int64),
            "dst": coo.col[order].astype(np.int64),
            "bytes": coo.data[order],
        }
    )


def demand_list(workload: Workload) -> list[dict[str, Any]]:
    """One record per demand family, for diffing against other tools.

    >>> from traffic.workload import Demand, Workload
    >>> w = Workload(4, 2, (Demand("all-reduce", [[0, 1], [2, 3]], 8.0, "dp", "backward", 3),))
    >>> demand_list(w)[0]["count"], demand_list(w)[0]["group_size"], demand_list(w)[0]["groups"]
    (3, 2, 2)
    """
    return [
        {
            "op": d.op,
            "size": float(d.size),
            "group_size": d.group_size,
            "groups": d.n_groups,
            "count": d.count,
            "class": d.cls,
            "phase": d.phase,
            "name": d.name,
        }
        for d in workload.demands
    ]
