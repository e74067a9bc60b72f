"""Fabrics: one array-based network model, its families, routing, metrics, cost and power.

Families: :func:`ideal`, :func:`fat_tree`, :func:`leaf_spine` (one to three tiers,
:func:`clos_shape`), :func:`rail_optimized`, :func:`rail_only`, :func:`rail_circuits`,
:func:`torus`, :func:`tpu_v4_torus`, :func:`direct_connect`, :func:`expander`, :func:`hybrid`.
Routing: :func:`routes` -> :class:`topoopt.paths.PathSet`. Metrics: :func:`bisection`,
:func:`diameter`. Cost: :func:`bill_of_materials`, :func:`cost`, :func:`cost_equivalent_fat_tree`.
"""

from topoopt.fabrics.cost import (
    CostEquivalent,
    CostReport,
    PriceTable,
    bill_of_materials,
    cost,
    cost_equivalent_fat_tree,
    load_prices,
)
from topoopt.fabrics.direct_connect import (
    circulant_circuits,
    direct_connect,
    geometric_strides,
    load_circuits,
    normalise_circuits,
)
from topoopt.fabrics.expander import expander
from topoopt.fabrics.fabric import LINK_KINDS, NODE_KINDS, Fabric, build_fabric
from topoopt.fabrics.fat_tree import (
    ClosShape,
    clos,
    clos_shape,
    fat_tree,
    leaf_spine,
    rail_optimized,
)
from topoopt.fabrics.hybrid import add_optical_layer, hybrid
from topoopt.fabrics.ideal import ideal
from topoopt.fabrics.metrics import Bisection, bisection, bisection_bandwidth, diameter
from topoopt.fabrics.ocs_layout import OcsLayout
from topoopt.fabrics.rail import rail_only
from topoopt.fabrics.rail_circuits import rail_circuits
from topoopt.fabrics.routing import (
    dimension_order_routes,
    explicit_paths,
    path_nodes,
    routes,
    server_pairs,
)
from topoopt.fabrics.torus import parse_dims, torus, tpu_v4_torus

__all__ = [
    "OcsLayout",
    "Fabric",
    "NODE_KINDS",
    "LINK_KINDS",
    "build_fabric",
    "ideal",
    "fat_tree",
    "leaf_spine",
    "rail_optimized",
    "rail_only",
    "rail_circuits",
    "ClosShape",
    "clos_shape",
    "clos",
    "torus",
    "tpu_v4_torus",
    "parse_dims",
    "direct_connect",
    "expander",
    "hybrid",
    "add_optical_layer",
    "normalise_circuits",
    "load_circuits",
    "circulant_circuits",
    "geometric_strides",
    "routes",
    "dimension_order_routes",
    "explicit_paths",
    "path_nodes",
    "server_pairs",
    "Bisection",
    "bisection",
    "bisection_bandwidth",
    "diameter",
    "PriceTable",
    "CostReport",
    "CostEquivalent",
    "load_prices",
    "bill_of_materials",
    "cost",
    "cost_equivalent_fat_tree",
]
