"""Chakra execution-trace message definitions, built at run time with the ``protobuf`` package.

The messages are written here from the public Chakra schema (MLCommons ``et_def.proto``, package
``ChakraProtoMsg``): the same message and field names, field numbers and wire types, so that our
files are read by Chakra's feeder (ASTRA-sim) and theirs by us. No generated code is involved: a
``FileDescriptorProto`` is assembled field by field and the classes come from
:func:`google.protobuf.message_factory.GetMessageClass`.

Only the messages a network study needs are defined: ``AttributeProto`` with every value kind of
its ``oneof`` (fields 3-32) and the list messages, ``GlobalMetadata``, ``IOInfo`` and ``Node``
(fields 1-10). ``Node.storage`` (field 11, storage-stack operations) is not defined; a node that
carries it parses normally and keeps the field as unknown bytes.

Examples
--------
>>> m = messages()
>>> n = m.Node(id=3, name="allreduce", type=NODE_TYPE["COMM_COLL_NODE"])
>>> n.attr.add(name="comm_size", int64_val=1024).int64_val
1024
>>> m.Node.FromString(n.SerializeToString()).attr[0].WhichOneof("value")
'int64_val'
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["NODE_TYPE", "COLLECTIVE", "messages", "PACKAGE"]

PACKAGE = "ChakraProtoMsg"

NODE_TYPE = {
    "INVALID_NODE": 0,
    "METADATA_NODE": 1,
    "MEM_LOAD_NODE": 2,
    "MEM_STORE_NODE": 3,
    "COMP_NODE": 4,
    "COMM_SEND_NODE": 5,
    "COMM_RECV_NODE": 6,
    "COMM_COLL_NODE": 7,
    "STORAGE_NODE": 8,
    "BATCH_NODE": 9,
    "CHECKPOINT_NODE": 10,
}
"""``NodeType`` enum of the schema: name -> number."""

COLLECTIVE = {
    "ALL_REDUCE": 0,
    "REDUCE": 1,
    "ALL_GATHER": 2,
    "GATHER": 3,
    "SCATTER": 4,
    "BROADCAST": 5,
    "ALL_TO_ALL": 6,
    "REDUCE_SCATTER": 7,
    "REDUCE_SCATTER_BLOCK": 8,
    "BARRIER": 9,
}
"""``CollectiveCommType`` enum of the schema: name -> number (the ``comm_type`` attribute)."""

_F = descriptor_pb2.FieldDescriptorProto
# (list message, scalar type) for the attribute value kinds, in field-number order 3..32.
_KINDS = (
    ("double", _F.TYPE_DOUBLE),
    ("float", _F.TYPE_FLOAT),
    ("int32", _F.TYPE_INT32),
    ("int64", _F.TYPE_INT64),
    ("uint32", _F.TYPE_UINT32),
    ("uint64", _F.TYPE_UINT64),
    ("sint32", _F.TYPE_SINT32),
    ("sint64", _F.TYPE_SINT64),
    ("fixed32", _F.TYPE_FIXED32),
    ("fixed64", _F.TYPE_FIXED64),
    ("sfixed32", _F.TYPE_SFIXED32),
    ("sfixed64", _F.TYPE_SFIXED64),
    ("bool", _F.TYPE_BOOL),
    ("string", _F.TYPE_STRING),
    ("bytes", _F.TYPE_BYTES),
)


def _list_name(kind: str) -> str:
    return {"uint32": "Uint32List", "uint64": "Uint64List"}.get(kind, kind.capitalize() + "List")


def _field(msg, name, number, ftype, *, label=_F.LABEL_OPTIONAL, type_name=None, oneof=None):
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name is not None:
        f.type_name = f".{PACKAGE}.{type_name}"
    if oneof is not None:
        f.oneof_index = oneof
    return f


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="topoopt_chakra_et_def.proto", package=PACKAGE, syntax="proto3"
    )
    # AttributeProto: name = 1, doc_string = 2, oneof value { <kind>_val = 3, <kind>_list = 4, ...}
    attr = fd.message_type.add(name="AttributeProto")
    _field(attr, "name", 1, _F.TYPE_STRING)
    _field(attr, "doc_string", 2, _F.TYPE_STRING)
    attr.oneof_decl.add(name="value")
    for i, (kind, ftype) in enumerate(_KINDS):
        _field(attr, f"{kind}_val", 3 + 2 * i, ftype, oneof=0)
        _field(
            attr, f"{kind}_list", 4 + 2 * i, _F.TYPE_MESSAGE, type_name=_list_name(kind), oneof=0
        )
    for kind, ftype in _KINDS:
        lst = fd.message_type.add(name=_list_name(kind))
        _field(lst, "values", 1, ftype, label=_F.LABEL_REPEATED)
    # GlobalMetadata: version = 1, repeated AttributeProto attr = 2
    gm = fd.message_type.add(name="GlobalMetadata")
    _field(gm, "version", 1, _F.TYPE_STRING)
    _field(gm, "attr", 2, _F.TYPE_MESSAGE, label=_F.LABEL_REPEATED, type_name="AttributeProto")
    # enums
    nt = fd.enum_type.add(name="NodeType")
    for k, v in NODE_TYPE.items():
        nt.value.add(name=k, number=v)
    ct = fd.enum_type.add(name="CollectiveCommType")
    for k, v in COLLECTIVE.items():
        ct.value.add(name=k, number=v)
    # IOInfo: values = 1, shapes = 2, types = 3 (strings)
    io = fd.message_type.add(name="IOInfo")
    for i, name in enumerate(("values", "shapes", "types")):
        _field(io, name, i + 1, _F.TYPE_STRING)
    # Node
    node = fd.message_type.add(name="Node")
    _field(node, "id", 1, _F.TYPE_UINT64)
    _field(node, "name", 2, _F.TYPE_STRING)
    f = _field(node, "type", 3, _F.TYPE_ENUM)
    f.type_name = f".{PACKAGE}.NodeType"
    _field(node, "ctrl_deps", 4, _F.TYPE_UINT64, label=_F.LABEL_REPEATED)
    _field(node, "data_deps", 5, _F.TYPE_UINT64, label=_F.LABEL_REPEATED)
    _field(node, "start_time_micros", 6, _F.TYPE_UINT64)
    _field(node, "duration_micros", 7, _F.TYPE_UINT64)
    _field(node, "inputs", 8, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "outputs", 9, _F.TYPE_MESSAGE, type_name="IOInfo")
    _field(node, "attr", 10, _F.TYPE_MESSAGE, label=_F.LABEL_REPEATED, type_name="AttributeProto")
    return fd


@functools.cache
def messages() -> SimpleNamespace:
    """The message classes: ``AttributeProto``, ``GlobalMetadata``, ``IOInfo``, ``Node`` and the
    ``<Kind>List`` messages, as attributes of one namespace (built once per process, in a private
    descriptor pool so they never clash with another copy of the schema)."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(_file().SerializeToString())
    names = ["AttributeProto", "GlobalMetadata", "IOInfo", "Node"]
    names += [_list_name(k) for k, _ in _KINDS]
    return SimpleNamespace(
        **{
            n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{n}"))
            for n in names
        }
    )
