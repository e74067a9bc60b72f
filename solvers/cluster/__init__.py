"""Shared optical clusters: many jobs on one fabric of servers wired to OCS units.

- :mod:`solvers.cluster.ocs`: the physical layer (port ``i`` of every server to OCS plane ``i``,
  planes split into units of a given radix with shifted boundaries) and the port assignment
  that decides whether a circuit multigraph is realisable on it;
- :mod:`solvers.cluster.jobs`: the jobs file and the arrivals file (strict schemas);
- :mod:`solvers.cluster.placement`: disjoint server sets for the jobs;
- :mod:`solvers.cluster.job_design`: one job's circuits on its servers, realisable on the OCS layer;
- :mod:`solvers.cluster.cluster_design`: every job placed and designed, per-job iteration times;
- :mod:`solvers.cluster.arrivals`: arrivals and departures with the fewest changed circuits.

``docs/clusters.md`` describes the model.
"""

__all__: list[str] = []
