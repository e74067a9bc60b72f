"""Files for other tools: GraphML of a fabric or design, ASTRA-sim network/system configs."""

from topoopt.exports.graphml import fabric_graph, write_graphml

__all__ = ["fabric_graph", "write_graphml"]
