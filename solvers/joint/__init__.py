"""The joint optimizer: circuits, ring orders and routing chosen together.

Modules: :mod:`~solvers.joint.driver` (the anytime pipeline, :func:`joint_design`),
:mod:`~solvers.joint.exact_mip` (the exact MIP for small clusters),
:mod:`~solvers.joint.local_search` (degree-preserving swaps) and :mod:`~solvers.joint.rings`
(candidate ring orders).
"""

from solvers.joint.driver import joint_design
from solvers.joint.exact_mip import exact_design

__all__ = ["joint_design", "exact_design"]
