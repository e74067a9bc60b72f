"""Rank placement: which global ranks form each parallel group.

This reproduces Megatron-core's ``RankGenerator``: the ``order`` string (default
``"tp-cp-ep-dp-pp"``) lists the parallel dimensions from innermost (stride 1) to outermost, so
for the dense grid

    rank = tp_i + t*cp_i + t*cp*ep_i + t*cp*ep*dp_i + t*cp*ep*dp*pp_i

(``ep = 1`` in the dense grid). The groups of a set of dimensions (e.g. ``"dp"`` or ``"dp-cp"``)
are all ranks that differ only in those coordinates. Group ``g`` lists its members by their
coordinates along the selected dimensions, the first named in ``order`` varying fastest; groups
are numbered by the remaining coordinates in the same way. The expert grid of a mixture-of-experts
model is ``(tp=etp, cp=1, ep=ep, dp=edp, pp=pp)`` in the same order, with
``edp = world / (etp * ep * pp)``.

Examples
--------
>>> g = RankGrid.from_sizes(tp=2, pp=2, dp=4)
>>> g.groups("tp")[:2].tolist(), g.groups("pp")[:2].tolist()
([[0, 1], [2, 3]], [[0, 8], [1, 9]])
>>> g.groups("dp")[:2].tolist()
[[0, 2, 4, 6], [1, 3, 5, 7]]
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from traffic.errors import InputError

__all__ = [
    "DIMENSIONS",
    "DEFAULT_ORDER",
    "RankGrid",
    "StagedRankGrid",
    "parse_order",
    "rank_grids",
    "stage_meshes",
]

DIMENSIONS = ("tp", "cp", "ep", "dp", "pp")
"""Parallel dimensions known to the order string."""

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-core's default order: TP innermost, PP outermost."""


def parse_order(order: str, field: str = "parallelism.order") -> tuple[str, ...]:
    """Split and check an order string; missing dimensions are appended (outermost).

    Megatron appends a dimension missing from the order when its size is 1; so do we (a missing
    dimension with size > 1 is rejected by :meth:`RankGrid.from_sizes`).

    Examples
    --------
    >>> parse_order("tp-dp-pp")
    ('tp', 'dp', 'pp', 'cp', 'ep')
    """
    if not isinstance(order, str) or not order:
        raise InputError(field, order, f"dimensions from {'-'.join(DIMENSIONS)} joined by '-'")
    tokens = tuple(order.split("-"))
    bad = [t for t in tokens if t not in DIMENSIONS]
    if bad or len(set(tokens)) != len(tokens):
        raise InputError(
            field, order, f"distinct dimensions from {', '.join(DIMENSIONS)} joined by '-'"
        )
    return tokens + tuple(t for t in DIMENSIONS if t not in tokens)


@dataclass(frozen=True, eq=False)
class RankGrid:
    """An orthogonal grid of parallel dimensions over ``world`` ranks.

    Parameters
    ----------
    order : tuple of str
        All of :data:`DIMENSIONS`, innermost first.
    sizes : tuple of int
        Size of each dimension, aligned with ``order``.
    """

    order: tuple[str, ...]
    sizes: tuple[int, ...]

    @classmethod
    def from_sizes(
        cls,
        tp: int = 1,
        pp: int = 1,
        dp: int = 1,
        cp: int = 1,
        ep: int = 1,
        order: str = DEFAULT_ORDER,
    ) -> RankGrid:
        """A grid from dimension sizes and an order string."""
        names = parse_order(order)
        given = {"tp": tp, "cp": cp, "ep": ep, "dp": dp, "pp": pp}
        explicit = order.split("-")
        for name, size in given.items():
            if int(size) != size or size < 1:
                raise InputError(f"parallelism.{name}", size, "a positive integer")
            if name not in explicit and size > 1:
                raise InputError("parallelism.order", order, f"an order naming {name} ({size} > 1)")
        return cls(order=names, sizes=tuple(int(given[n]) for n in names))

    @property
    def world(self) -> int:
        """Number of ranks."""
        return prod(self.sizes)

    def size(self, dim: str) -> int:
        """Size of one dimension."""
        return self.sizes[self.order.index(dim)]

    def _grid(self) -> np.ndarray:
        # axis k of the result is dimension order[k]; order[0] has stride 1.
        return np.arange(self.world, dtype=np.int64).reshape(self.sizes[::-1]).transpose()

    def groups(self, dims: str, **fixed: int) -> np.ndarray:
        """Groups over the dimensions in ``dims`` (e.g. ``"dp"``, ``"dp-cp"``, ``"tp-pp"``).

        Keyword arguments keep only the groups at one coordinate of other dimensions, e.g.
        ``groups("tp", pp=0)`` for the tensor-parallel groups of the first pipeline stage.

        Returns
        -------
        numpy.ndarray
            ``int64`` array of shape ``(world / group_size, group_size)``, in Megatron-core's
            order (see the module docstring).
        """
        sel = dims.split("-")
        if any(d not in self.order for d in sel) or len(set(sel)) != len(sel):
            raise InputError("dims", dims, f"distinct names from {', '.join(self.order)}")
        masked = [k for k, d in enumerate(self.order) if d in sel]
        unmasked = [k for k, d in enumerate(self.order) if d not in sel]
        # C-order flattening makes the last axis fastest: put the first-named axis last.
        axes = unmasked[::-1] + masked[::-1]
        gsize = prod(self.sizes[k] for k in masked)
        out = np.ascontiguousarray(self._grid().transpose(axes).reshape(-1, gsize))
        for dim, value in fixed.items():
            if dim in sel or dim not in self.order:
                raise InputError(dim, value, f"a dimension not in {dims!r}")
            out = out[self.coordinate(dim)[out[:, 0]] == value]
        return out

    def coordinate(self, dim: str) -> np.ndarray:
        """Each rank's index along ``dim``: ``int64`` array of shape ``(world,)``."""
        k = self.order.index(dim)
        stride = prod(self.sizes[:k])
        return (np.arange(self.world, dtype=np.int64) // stride) % self.sizes[k]


def rank_grids(
    tp: int, pp: int, dp: int, cp: int = 1, ep: int = 1, etp: int = 1, order: str = DEFAULT_ORDER
) -> tuple[RankGrid, RankGrid]:
    """The dense grid and the expert grid of a plan, as Megatron-core builds them.

    The dense grid is ``(tp, cp, ep=1, dp, pp)``; the expert grid is ``(tp=etp, cp=1, ep, dp=edp,
    pp)`` with ``edp = tp*cp*dp / (etp*ep)``, both in ``order``.

    Examples
    --------
    >>> dense, expert = rank_grids(tp=2, pp=1, dp=4, ep=4)
    >>> expert.groups("ep").tolist()
    [[0, 1, 2, 3], [4, 5, 6, 7]]
    >>> expert.groups("dp").tolist()
    [[0, 4], [1, 5], [2, 6], [3, 7]]
    """
    dense = RankGrid.from_sizes(tp=tp, pp=pp, dp=dp, cp=cp, ep=1, order=order)
    per_stage = tp * cp * dp
    if per_stage % (etp * ep):
        raise InputError(
            "parallelism.ep",
            ep,
            f"etp*ep = {etp * ep} dividing tp*cp*dp = {per_stage} (the ranks of a stage)",
        )
    expert = RankGrid.from_sizes(
        tp=etp, pp=pp, dp=per_stage // (etp * ep), cp=1, ep=ep, order=order
    )
    return dense, expert


@dataclass(frozen=True, eq=False)
class StagedRankGrid:
    """Pipeline stages of different tensor-parallel sizes (``parallelism.stage_tp``).

    Stage ``i`` is a block of ``stage_tp[i] * cp * dp`` consecutive ranks starting at
    ``offsets[i] = cp * dp * sum(stage_tp[:i])`` (pipeline parallelism outermost, as in the
    default order); inside the block ranks follow a :class:`RankGrid` of ``(tp=stage_tp[i],
    cp, dp)`` in ``order``. With equal sizes this is the plain grid.

    Parameters
    ----------
    stages : tuple of RankGrid
        One grid per stage (``pp = 1`` each).
    offsets : tuple of int
        First global rank of each stage.

    Examples
    --------
    >>> g = StagedRankGrid.from_sizes((2, 1), dp=2)
    >>> g.world, g.groups("tp", pp=0).tolist(), g.groups("dp", pp=1).tolist()
    (6, [[0, 1], [2, 3]], [[4, 5]])
    """

    stages: tuple[RankGrid, ...]
    offsets: tuple[int, ...]

    @classmethod
    def from_sizes(
        cls, stage_tp: tuple[int, ...], dp: int = 1, cp: int = 1, order: str = DEFAULT_ORDER
    ) -> StagedRankGrid:
        """A staged grid from the stage sizes, ``dp``, ``cp`` and an order string."""
        grids, offs, off = [], [], 0
        for t in stage_tp:
            g = RankGrid.from_sizes(tp=int(t), pp=1, dp=dp, cp=cp, order=order)
            grids.append(g)
            offs.append(off)
            off += g.world
        return cls(stages=tuple(grids), offsets=tuple(offs))

    @property
    def world(self) -> int:
        """Number of ranks."""
        return sum(g.world for g in self.stages)

    def groups(self, dims: str, pp: int | None = None, **fixed: int) -> np.ndarray:
        """Groups over ``dims`` inside stage ``pp`` (as :meth:`RankGrid.groups`); a group
        spanning stages (``dims`` naming ``pp``) has no meaning when the sizes differ."""
        if pp is None or "pp" in dims.split("-"):
            raise InputError(
                "dims", dims, "groups inside one stage (pp=i) when stage_tp sizes differ"
            )
        return self.stages[pp].groups(dims, **fixed) + self.offsets[pp]


def stage_meshes(grid: RankGrid | StagedRankGrid, stage: int) -> np.ndarray:
    """The tensor-parallel meshes of one stage: ``(dp*cp, tp_stage)`` global ranks, row ``r``
    the same (cp, dp) coordinate in every stage (so row ``r`` of two stages are the ends of one
    pipeline replica), column ``k`` the TP index.

    Examples
    --------
    >>> stage_meshes(RankGrid.from_sizes(tp=2, pp=2, dp=2), 1).tolist()
    [[4, 5], [6, 7]]
    >>> stage_meshes(StagedRankGrid.from_sizes((2, 1), dp=2), 1).tolist()
    [[4], [5]]
    """
    return grid.groups("tp", pp=stage)
