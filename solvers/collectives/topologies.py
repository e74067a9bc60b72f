"""Published topologies the collective algorithms are compared on.

:func:`dgx1` is the NVLink hybrid cube-mesh of an NVIDIA DGX-1 with V100 GPUs, the running
example of SCCL (Cai et al., PPoPP 2021, Fig. 1) and of Blink (Wang et al., MLSys 2020): GPUs
0-3 and 4-7 form two fully connected quads, GPU ``i`` links to ``i + 4``, and six NVLinks per GPU
make some of these links double (the matrix :data:`DGX1_NVLINKS`, NVLinks per GPU pair). Each
NVLink 2.0 carries 25 GB/s per direction. A subset of GPUs (a job's allocation) keeps the links
among them, renumbered ``0 .. k-1`` in the given order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from topoopt.fabrics.direct_connect import direct_connect
from topoopt.fabrics.fabric import Fabric
from traffic.errors import InputError

__all__ = ["DGX1_NVLINKS", "NVLINK2_BANDWIDTH", "dgx1"]

DGX1_NVLINKS = np.array(
    [
        [0, 2, 1, 1, 2, 0, 0, 0],
        [2, 0, 1, 2, 0, 1, 0, 0],
        [1, 1, 0, 2, 0, 0, 2, 0],
        [1, 2, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2, 1, 1],
        [0, 1, 0, 0, 2, 0, 1, 2],
        [0, 0, 2, 0, 1, 1, 0, 2],
        [0, 0, 0, 1, 1, 2, 2, 0],
    ],
    dtype=np.int64,
)
"""NVLinks between GPU pairs of a DGX-1 (V100): six per GPU."""

NVLINK2_BANDWIDTH = 25e9
"""Bytes/s of one NVLink 2.0 link per direction."""


def dgx1(
    gpus: Sequence[int] | None = None,
    link_bandwidth: float = NVLINK2_BANDWIDTH,
    latency: float = 1e-6,
) -> Fabric:
    """The DGX-1 NVLink topology (module docstring) as a switchless fabric of ``len(gpus)``
    servers (one GPU each), or of all 8 GPUs.

    Examples
    --------
    >>> f = dgx1()
    >>> f.n_servers, f.n_physical_links, float(f.capacity.max()) / 1e9
    (8, 24, 50.0)
    >>> dgx1([0, 1, 5, 4]).n_physical_links   # the 4-cycle 0-1-5-4: 2 + 1 + 2 + 2 NVLinks
    7
    """
    sel = list(range(8)) if gpus is None else [int(g) for g in gpus]
    if len(set(sel)) != len(sel) or not sel or min(sel) < 0 or max(sel) > 7 or len(sel) < 2:
        raise InputError("gpus", list(gpus or []), "2 to 8 distinct GPU ids 0..7")
    m = DGX1_NVLINKS[np.ix_(sel, sel)]
    k = len(sel)
    circ = [(i, j, int(m[i, j])) for i in range(k) for j in range(i + 1, k) if m[i, j]]
    deg = int(m.sum(axis=1).max())
    if not circ:
        raise InputError("gpus", sel, "GPUs with NVLinks among them")
    return direct_connect(
        k, deg, circ, link_bandwidth, latency=latency, family="dgx1", extra_params={"gpus": sel}
    )
