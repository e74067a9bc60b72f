"""Chakra execution traces (MLCommons): per-rank protobuf traces in, and out.

- :mod:`traffic.chakra.schema`: the message definitions, built from the public schema at run time;
- :mod:`traffic.chakra.framing`: varint-length-prefixed messages, optionally gzip-compressed;
- :mod:`traffic.chakra.groups`: ASTRA-sim's comm-group file (process group -> ranks);
- :mod:`traffic.chakra.reader`: a folder of ``NAME.<rank>.et`` -> Workload with its task graph;
- :mod:`traffic.chakra.writer`: Workload -> ``NAME.<rank>.et`` + ``comm_group.json``.
"""

from traffic.chakra.reader import is_chakra_folder, read_chakra, trace_files
from traffic.chakra.writer import chakra_memory_estimate, chakra_node_count, write_chakra

__all__ = [
    "chakra_memory_estimate",
    "chakra_node_count",
    "is_chakra_folder",
    "read_chakra",
    "trace_files",
    "write_chakra",
]
