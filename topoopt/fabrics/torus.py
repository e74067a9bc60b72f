"""Tori: 1-, 2-, 3-D wrap-around (any sizes), twisted tori, and TPU-v4-style OCS-joined cubes.

Server ``i`` sits at coordinates ``np.unravel_index(i, dims, order="F")``: the first dimension
varies fastest. Each server has ``2 * links_per_dim`` ports per dimension of size >= 2 (a
dimension of size 2 therefore joins its two servers with a bundle of ``2 * links_per_dim``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from topoopt.fabrics.fabric import (
    DEFAULT_LINK_LATENCY,
    Fabric,
    build_fabric,
    check_float,
    check_int,
)
from topoopt.fabrics.ideal import DEFAULT_PORT_BANDWIDTH
from traffic.errors import InputError

__all__ = [
    "torus",
    "tpu_v4_torus",
    "parse_dims",
    "torus_neighbours",
    "twist_matrix",
    "DEFAULT_OCS_DELAY",
    "PALOMAR_RADIX",
]

DEFAULT_OCS_DELAY = 10e-3
"""Default reconfiguration delay of an optical circuit switch, seconds (10 ms)."""

PALOMAR_RADIX = 136
"""Ports of Google's Palomar OCS (136 x 136, 128 used in a TPU v4 pod plus spares)."""


def parse_dims(text: str | Sequence[int]) -> tuple[int, ...]:
    """Parse ``"4x4x4"`` (or a sequence) into a tuple of 1 to 3 positive sizes.

    >>> parse_dims("16x16x4")
    (16, 16, 4)
    """
    if isinstance(text, str):
        if not re.fullmatch(r"\s*\d+(\s*x\s*\d+){0,2}\s*", text):
            raise InputError("dims", text, "1 to 3 sizes like 4x4x4")
        dims = tuple(int(t) for t in text.split("x"))
    else:
        dims = tuple(check_int("dims", int(t) if isinstance(t, np.integer) else t) for t in text)
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise InputError("dims", text, "1 to 3 positive sizes like 4x4x4")
    check_int("servers", math.prod(dims))  # the memory budget, before any array is built
    return dims


def twist_matrix(dims: Sequence[int]) -> np.ndarray:
    """The standard twist: wrapping in a shorter dimension shifts the longest by half its size.

    For a ``2a x a`` torus this is the twisted torus of Camarero, Martinez and Beivide (wrap in the
    short dimension moves ``a`` along the long one); TPU v4 offers the 3-D analogue (e.g. 4x4x8).

    >>> twist_matrix((8, 4)).tolist()
    [[0, 0], [4, 0]]
    """
    dims = tuple(dims)
    t = np.zeros((len(dims), len(dims)), np.int64)
    longest = int(np.argmax(dims))
    for i, d in enumerate(dims):
        if d < dims[longest]:
            t[i, longest] = dims[longest] // 2
    return t


def torus_neighbours(dims: Sequence[int], twist: np.ndarray | None = None) -> np.ndarray:
    """``(D, n)`` array: the ``+1`` neighbour of every server in each dimension.

    With a twist matrix ``T``, the wrap-around step in dimension ``i`` (from coordinate
    ``dims[i]-1`` to 0) also adds ``T[i, j]`` to every other coordinate ``j`` (mod its size).
    """
    dims = tuple(dims)
    n = int(np.prod(dims))
    coords = np.stack(np.unravel_index(np.arange(n), dims, order="F"), axis=1)
    out = np.empty((len(dims), n), np.int64)
    for i, d in enumerate(dims):
        c = coords.copy()
        wrap = c[:, i] == d - 1
        c[:, i] = (c[:, i] + 1) % d
        if twist is not None:
            for j, dj in enumerate(dims):
                if j != i and twist[i, j]:
                    c[wrap, j] = (c[wrap, j] + twist[i, j]) % dj
        out[i] = np.ravel_multi_index(tuple(c.T), dims, order="F")
    return out


def _check_twist(dims: tuple[int, ...], twist) -> np.ndarray | None:
    if twist is None or twist is False:
        return None
    if twist is True:
        return twist_matrix(dims)
    t = np.asarray(twist, np.int64)
    if t.shape != (len(dims), len(dims)) or np.any(np.diag(t) != 0):
        raise InputError("twist", t.tolist(), f"a {len(dims)}x{len(dims)} matrix, zero diagonal")
    return t


def torus(
    dims: str | Sequence[int],
    port_bandwidth: float = DEFAULT_PORT_BANDWIDTH,
    *,
    links_per_dim: int = 1,
    twist: bool | Sequence[Sequence[int]] | None = None,
    medium: str = "fibre",
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """Wrap-around torus with one server per node and direct server-to-server links.

    Parameters
    ----------
    dims : str or sequence of int
        Sizes, e.g. ``"4x4x4"`` or ``(16, 16, 4)``; 1 to 3 dimensions.
    port_bandwidth : float
        Bytes/s of one link, each direction.
    links_per_dim : int
        Parallel links to each neighbour in each dimension.
    twist : bool or matrix, optional
        ``True`` for :func:`twist_matrix`, or an explicit ``D x D`` twist matrix.
    medium : {"fibre", "copper"}
        Cable medium (copper: no transceivers in the bill of materials).

    Returns
    -------
    Fabric
        ``prod(dims)`` servers, no switches, ``links_per_dim * n`` links per dimension of size
        >= 2 (bundled), ``coords`` set.

    Examples
    --------
    >>> f = torus("4x4")
    >>> f.n_servers, f.n_physical_links, int(f.server_ports[0])
    (16, 32, 4)
    """
    dims = parse_dims(dims)
    lpd = check_int("links_per_dim", links_per_dim)
    b = check_float("port_bandwidth", port_bandwidth)
    t = _check_twist(dims, twist)
    n = int(np.prod(dims))
    nb = torus_neighbours(dims, t)
    active = [i for i, d in enumerate(dims) if d >= 2]
    u = np.concatenate([np.arange(n)] * len(active)) if active else np.zeros(0, np.int64)
    v = np.concatenate([nb[i] for i in active]) if active else np.zeros(0, np.int64)
    coords = np.stack(np.unravel_index(np.arange(n), dims, order="F"), axis=1)
    return build_fabric(
        "torus",
        {
            "dims": list(dims),
            "port_bandwidth": b,
            "links_per_dim": lpd,
            "twist": None if t is None else t.tolist(),
        },
        np.array(["server"] * n),
        np.zeros(n),
        np.full(n, 2 * lpd * len(active)),
        u,
        v,
        b,
        "electrical",
        multiplicity=lpd,
        medium=medium,
        latency=latency,
        server_ports=2 * lpd * len(active),
        port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        coords=coords,
    )


def tpu_v4_torus(
    dims: str | Sequence[int] = (4, 4, 4),
    port_bandwidth: float = 50e9,
    *,
    cube: int = 4,
    twist: bool | Sequence[Sequence[int]] | None = None,
    ocs_radix: int = PALOMAR_RADIX,
    reconfiguration_delay: float = DEFAULT_OCS_DELAY,
    gpus_per_server: int = 1,
    intra_server_bandwidth: float | None = None,
    latency: float = DEFAULT_LINK_LATENCY,
) -> Fabric:
    """TPU-v4-style 3-D torus: ``cube^3`` blocks wired in copper, faces joined by OCS circuits.

    Inside a cube, neighbours are joined by copper (electrical) links; every link that leaves a
    cube (including the wrap-around of a one-cube dimension) is an optical circuit through an OCS,
    so the job's torus shape (``dims``, multiples of ``cube``) and its twist are chosen per job.
    As in the TPU v4 pod, there is one OCS per (dimension, face position): ``3 * cube^2`` OCS of
    ``ocs_radix`` ports, each using two ports per cube.

    Parameters
    ----------
    dims : str or sequence of 3 int
        Torus shape in chips, each a multiple of ``cube``.
    port_bandwidth : float
        Bytes/s of one inter-chip link (TPU v4 ICI: 50 GB/s per direction).
    cube : int
        Edge of the copper block (4 in TPU v4).
    twist : bool or matrix, optional
        As in :func:`torus`.
    ocs_radix : int
        Ports of one OCS (136 for Palomar).
    reconfiguration_delay : float
        OCS reconfiguration time, seconds.

    Examples
    --------
    >>> f = tpu_v4_torus("4x4x8")
    >>> int(f.server_optical_ports.sum()), int((f.node_kind == "ocs").sum())
    (192, 48)
    """
    dims = parse_dims(dims)
    cube = check_int("cube", cube, minimum=3)
    if len(dims) != 3 or any(d % cube for d in dims):
        raise InputError("dims", "x".join(map(str, dims)), f"3 sizes, multiples of {cube}")
    b = check_float("port_bandwidth", port_bandwidth)
    radix = check_int("ocs_radix", ocs_radix, minimum=2)
    delay = check_float("reconfiguration_delay", reconfiguration_delay, 0.0, strict=False)
    t = _check_twist(dims, twist)
    n = int(np.prod(dims))
    n_cubes = n // cube**3
    if 2 * n_cubes > radix:
        raise InputError("dims", "x".join(map(str, dims)), f"at most {radix // 2} cubes")
    nb = torus_neighbours(dims, t)
    coords = np.stack(np.unravel_index(np.arange(n), dims, order="F"), axis=1)
    u = np.concatenate([np.arange(n)] * 3)
    v = nb.reshape(-1)
    # a +1 step leaves the cube when the coordinate is the cube's last
    leaves = np.concatenate([coords[:, i] % cube == cube - 1 for i in range(3)])
    kind = np.where(leaves, "optical", "electrical")
    medium = np.where(leaves, "fibre", "copper")
    on_face = (coords % cube == 0) | (coords % cube == cube - 1)
    n_ocs = 3 * cube * cube
    return build_fabric(
        "tpu-v4",
        {
            "dims": list(dims),
            "cube": cube,
            "port_bandwidth": b,
            "ocs_radix": radix,
            "twist": None if t is None else t.tolist(),
            "reconfiguration_delay": delay,
        },
        np.array(["server"] * n + ["ocs"] * n_ocs),
        np.r_[np.zeros(n), np.full(n_ocs, 1)],
        np.r_[np.full(n, 6), np.full(n_ocs, radix)],
        u,
        v,
        b,
        kind,
        medium=medium,
        latency=latency,
        server_ports=6,
        server_optical_ports=on_face.sum(axis=1),
        port_bandwidth=b,
        optical_port_bandwidth=b,
        gpus_per_server=gpus_per_server,
        intra_server_bandwidth=intra_server_bandwidth,
        reconfiguration_delay=delay,
        coords=coords,
    )
