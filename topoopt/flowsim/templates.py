"""A collective's flows over group positions, before they are placed on a fabric.

:class:`FlowTemplate` is what every collective algorithm produces (:mod:`.collectives`' rings,
halving-doubling, trees, hierarchical; :mod:`.ina`'s in-network aggregation; the schedules of
:mod:`solvers.collectives`) and what :func:`topoopt.flowsim.collectives.expand_demand` maps
onto the members of each group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FlowTemplate"]


@dataclass(frozen=True, eq=False)
class FlowTemplate:
    """The flows of one collective over group positions ``0..g-1``.

    Attributes
    ----------
    src, dst : numpy.ndarray
        ``int64`` source and destination positions of each flow.
    bytes : numpy.ndarray
        ``float64`` bytes of each flow.
    dep_ptr, deps : numpy.ndarray
        CSR dependencies: flow ``f`` starts after flows ``deps[dep_ptr[f]:dep_ptr[f+1]]``.
    step : numpy.ndarray
        ``int64`` step (ring steps, hierarchical stages; 0 for a single-step fluid template).
    """

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    dep_ptr: np.ndarray
    deps: np.ndarray
    step: np.ndarray

    @property
    def n_flows(self) -> int:
        return int(self.src.shape[0])
