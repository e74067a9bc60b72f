"""topoopt: co-design the network of a distributed-training cluster with its job.

Packages (dependencies point one way): :mod:`traffic` (plans -> Workload) <- :mod:`topoopt`
(fabrics, flow model) <- :mod:`solvers` (optimizers) <- edges (:mod:`topoopt.app.cli`,
:mod:`topoopt.app.report`). Importing this package imports no typer, plotly or ortools.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
