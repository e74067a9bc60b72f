"""Flow-level network model: max-min fair sharing of links by flows, event by event.

- :mod:`topoopt.flowsim.flowset`: the input arrays (:class:`FlowSet`).
- :mod:`topoopt.flowsim.max_min`: max-min fair rates by progressive filling.
- :mod:`topoopt.flowsim.simulator`: the event-driven simulation (:func:`simulate`), with the
  semantics (sharing, multipath, latency, dependencies) in its docstring.
- :mod:`topoopt.flowsim.netsim_json`: the documented JSON interface.
"""

from topoopt.flowsim.flowset import FlowSet
from topoopt.flowsim.max_min import fill_rates, max_min_rates
from topoopt.flowsim.simulator import SimResult, WorkLimitExceeded, simulate

__all__ = [
    "FlowSet",
    "SimResult",
    "WorkLimitExceeded",
    "fill_rates",
    "max_min_rates",
    "simulate",
]
