"""The fixed vocabularies of the CLI's options as enumerations, so ``--help`` and shell
completion list their choices and a wrong word is refused before any work.

The values are written out here (``--help`` imports no solver or study); ``tests/test_cli_options
.py`` checks that each enumeration equals the library's own tuple (``solvers.SOLVERS``,
``topoopt.flowsim.iteration.SCHEDULES``, ``topoopt.app.studies.compare.FABRICS``,
``topoopt.fabrics.cost.PRESETS``, the devices of :mod:`topoopt.fabrics.cost`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "AstraFamily",
    "CollectiveFabric",
    "Device",
    "ElectricalKind",
    "FabricName",
    "Preset",
    "Schedule",
    "SolverName",
]


class SolverName(StrEnum):
    """``--solver``: a design solver of :data:`solvers.SOLVERS`."""

    topoopt = "topoopt"
    topoopt_released = "topoopt-released"
    expander = "expander"
    joint = "joint"


class Schedule(StrEnum):
    """``--schedule``: a pipeline schedule of :data:`topoopt.flowsim.iteration.SCHEDULES`."""

    one_f_one_b = "1f1b"
    interleaved = "interleaved"
    eager_1f1b = "eager-1f1b"


class FabricName(StrEnum):
    """``--fabric`` of ``simulate`` and ``cosearch``: a name of
    :data:`topoopt.app.studies.compare.FABRICS`."""

    ideal = "ideal"
    fat_tree = "fat-tree"
    fat_tree_oversub = "fat-tree-oversub"
    fat_tree_cost_equivalent = "fat-tree-cost-equivalent"
    torus = "torus"
    expander = "expander"
    topoopt = "topoopt"
    topoopt_released = "topoopt-released"
    topoopt_best = "topoopt-best"
    joint = "joint"
    hybrid = "hybrid"
    fat_tree_ina = "fat-tree-ina"
    hybrid_ina = "hybrid-ina"
    rail = "rail"
    rail_only = "rail-only"
    ocs_spine = "ocs-spine"
    rail_circuits = "rail-circuits"
    rail_circuits_2 = "rail-circuits-2"


class AstraFamily(StrEnum):
    """``export --fabric``: a fabric family of :data:`topoopt.exports.astra_sim.FAMILIES`."""

    ideal = "ideal"
    fat_tree = "fat-tree"
    leaf_spine = "leaf-spine"
    rail = "rail"
    torus = "torus"
    direct = "direct"
    expander = "expander"
    topoopt = "topoopt"
    joint = "joint"
    hybrid = "hybrid"


class CollectiveFabric(StrEnum):
    """``collective --fabric``: a kind of
    :data:`topoopt.app.cli.commands.collective.FABRIC_KINDS`."""

    ideal = "ideal"
    fat_tree = "fat-tree"
    leaf_spine = "leaf-spine"
    torus = "torus"
    direct = "direct"
    expander = "expander"
    hybrid = "hybrid"
    dgx1 = "dgx1"


class Preset(StrEnum):
    """``--preset``: a named price table of :data:`topoopt.fabrics.cost.PRESETS`."""

    topoopt_paper = "topoopt-paper"


class Device(StrEnum):
    """``--device``: what holds the optical circuits."""

    patch_panel = "patch-panel"
    ocs = "ocs"


class ElectricalKind(StrEnum):
    """``--electrical`` of a hybrid fabric: its electrical part."""

    leaf_spine = "leaf-spine"
    fat_tree = "fat-tree"
