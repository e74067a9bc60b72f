"""The joint optimizer: circuits, ring orders and routing chosen together.

Modules: :mod:`~solvers.joint.driver` (the anytime pipeline, :func:`congestion_search`),
:mod:`~solvers.joint.exact_mip` (the exact MIP for small clusters),
:mod:`~solvers.joint.local_search` (degree-preserving swaps), :mod:`~solvers.joint.rings`
(candidate ring orders); the iteration objective (the default of ``solve(..., "joint")``):
:mod:`~solvers.joint.iteration_search` (:func:`iteration_design`),
:mod:`~solvers.joint.iteration_objective` (criticality windows, scoring),
:mod:`~solvers.joint.critical_path` (CPM, the iteration lower bound) and
:mod:`~solvers.joint.iteration_mip` (exact circuits for tiny task graphs).
"""

from solvers.joint.driver import congestion_search
from solvers.joint.exact_mip import exact_design
from solvers.joint.iteration_search import iteration_design

__all__ = ["congestion_search", "exact_design", "iteration_design"]
