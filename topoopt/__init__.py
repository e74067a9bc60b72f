"""topoopt: co-design the network of a distributed-training cluster with its job.

Packages (dependencies point one way): :mod:`traffic` (plans -> Workload) <- :mod:`topoopt`
core (fabrics, flow model) <- :mod:`solvers` (optimizers) <- the edges in :mod:`topoopt.app`
(the command line :mod:`topoopt.app.cli`, the reports :mod:`topoopt.app.report`, the studies
:mod:`topoopt.app.studies`, and the Python API :mod:`topoopt.app.api`). Importing this package
imports no typer, plotly, ortools or solvers.

The Python API is offered here lazily: ``topoopt.load_plan``, ``topoopt.load_workload``,
``topoopt.simulate``, ``topoopt.compare``, ``topoopt.design`` and ``topoopt.cosearch`` load
:mod:`topoopt.app.api` on first use (see ``docs/api.md``).
"""

__version__ = "0.1.0"

_API = ("load_plan", "load_workload", "simulate", "compare", "design", "cosearch", "Simulation")

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    """The API's names, imported on first use (the core stays light: no solvers, no plotly)."""
    if name in _API:
        from topoopt.app import api

        return getattr(api, name)
    raise AttributeError(f"module 'topoopt' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
