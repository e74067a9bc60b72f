"""solvers: choose optical circuits and collective routing jointly (OR-Tools).

This is the one door into the solver floor: the edges (:mod:`topoopt.app`) import these names
from ``solvers`` and nothing from its submodules. Inside :mod:`solvers`, modules import each
other directly, never through this door. No name here is also a submodule's name.

- The problem and the designs: :class:`DesignProblem`, :class:`Design`, :class:`HybridDesign`,
  :class:`NodePaths`, :func:`read_prewired_file`, :func:`with_port_options`.
- Solving: :func:`solve` (every solver by name: :data:`SOLVERS`, :data:`OBJECTIVES`; what the
  search did: :func:`search_summary`, :data:`SEARCH_COLUMNS`, :func:`search_warning`),
  :func:`solve_hybrid` (:func:`solvers.hybrid_design.hybrid_design`) and :func:`route_hybrid`
  (an optical layer over an electrical fabric),
  :func:`load_design` and :func:`check_design_rings` (``design.json`` back into a design).
- Realising a design for the flow model: :func:`design_fabric`, :func:`design_routing`,
  :func:`design_workload`, :func:`realise_design` (all three), :func:`simulate_design`.
- Studies' entry points: :func:`reconfigure`, :func:`reconfigure_hybrid` (a hybrid's optical
  circuits), :func:`reconfigure_spine` (an OCS spine's
  pod-to-pod circuits), :func:`phase_routing` (a design's routing tables changed per
  communication phase on its fixed circuits), :func:`iteration_under_hybrid_schedule` and
  :func:`iteration_under_spine_schedule` (one iteration under their schedules),
  :func:`demand_circuits`, :func:`run_baselines` and :func:`schedule_cost` (reconfiguration over
  time); :func:`design_cluster`, :func:`cluster_totals`,
  :func:`play_arrivals`, :func:`load_jobs`, :func:`load_arrivals`, :class:`OcsLayer` (shared
  clusters); :func:`run_collective`, :data:`NVLINK2_BANDWIDTH`, :func:`dgx1` (collective
  schedules); :func:`best_strides`, :func:`circulant_stats`, :func:`geometric_strides`
  (circulant strides); :func:`evaluate_routing` (the congestion objective of a routing),
  :func:`node_paths`, :func:`ring_records`; :func:`design_rail_circuits` and
  :func:`rail_circuits_fabric` (rail-aligned circuits, :class:`RailDesign`).
"""

from solvers.baselines.strides import best_strides, circulant_stats, geometric_strides
from solvers.cluster.arrivals import play as play_arrivals
from solvers.cluster.cluster_design import design_cluster
from solvers.cluster.cluster_design import totals as cluster_totals
from solvers.cluster.jobs import load_arrivals, load_jobs
from solvers.cluster.ocs import OcsLayer
from solvers.collectives.run import run_collective
from solvers.collectives.sizes import check_collective_size
from solvers.collectives.topologies import NVLINK2_BANDWIDTH, dgx1
from solvers.hybrid_design import HybridDesign, route_hybrid
from solvers.hybrid_design import hybrid_design as solve_hybrid
from solvers.joint.phase_routing import phase_routing
from solvers.model.congestion import evaluate_routing
from solvers.model.design import Design, NodePaths, node_paths, ring_records
from solvers.model.ocs_layers import check_ocs, place_circuits
from solvers.model.ports import with_port_options
from solvers.model.problem import DesignProblem, read_prewired_file
from solvers.ocs_repair import respect_ocs
from solvers.rail_design import RailDesign, design_rail_circuits, rail_circuits_fabric
from solvers.realise import (
    design_fabric,
    design_routing,
    design_workload,
    realise_design,
    simulate_design,
)
from solvers.reconfig.baselines import run_baselines
from solvers.reconfig.capex import schedule_cost
from solvers.reconfig.demand import demand_circuits
from solvers.reconfig.hybrid_phase import iteration_under_hybrid_schedule, reconfigure_hybrid
from solvers.reconfig.search import PHASE_MERGES, reconfigure
from solvers.reconfig.spine import iteration_under_spine_schedule, reconfigure_spine
from solvers.registry import (
    OBJECTIVES,
    SEARCH_COLUMNS,
    SOLVERS,
    check_design_rings,
    load_design,
    search_summary,
    search_warning,
    solve,
)

__all__ = [
    "RailDesign",
    "design_rail_circuits",
    "rail_circuits_fabric",
    "DesignProblem",
    "Design",
    "HybridDesign",
    "NodePaths",
    "read_prewired_file",
    "with_port_options",
    "check_ocs",
    "place_circuits",
    "respect_ocs",
    "SOLVERS",
    "OBJECTIVES",
    "solve",
    "SEARCH_COLUMNS",
    "search_summary",
    "search_warning",
    "solve_hybrid",
    "route_hybrid",
    "load_design",
    "check_design_rings",
    "design_fabric",
    "design_routing",
    "design_workload",
    "realise_design",
    "simulate_design",
    "reconfigure",
    "PHASE_MERGES",
    "reconfigure_hybrid",
    "reconfigure_spine",
    "phase_routing",
    "iteration_under_hybrid_schedule",
    "iteration_under_spine_schedule",
    "demand_circuits",
    "run_baselines",
    "schedule_cost",
    "design_cluster",
    "cluster_totals",
    "play_arrivals",
    "load_jobs",
    "load_arrivals",
    "OcsLayer",
    "run_collective",
    "check_collective_size",
    "NVLINK2_BANDWIDTH",
    "dgx1",
    "best_strides",
    "circulant_stats",
    "geometric_strides",
    "evaluate_routing",
    "node_paths",
    "ring_records",
]
