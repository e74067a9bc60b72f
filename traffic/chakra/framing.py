"""Chakra's file framing: a ``GlobalMetadata`` message, then ``Node`` messages, each prefixed
with its length as a base-128 varint (the framing of Chakra's ``protolib``). Files may be
gzip-compressed.

Everything that is not such a file raises :class:`~traffic.errors.InputError` naming the file, the
message that failed and what is allowed.

Examples
--------
>>> from traffic.chakra.schema import messages
>>> m = messages()
>>> data = frame([m.GlobalMetadata(version="0.0.4"), m.Node(id=1, name="x")])
>>> data[:1], len(data)
(b'\\x07', 14)
>>> meta, nodes = unframe(data, "t.0.et")
>>> meta.version, [n.name for n in nodes]
('0.0.4', ['x'])
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from google.protobuf.message import DecodeError

from traffic.chakra.schema import messages
from traffic.errors import InputError

__all__ = ["MAX_TRACE_BYTES", "MAX_MESSAGE_BYTES", "ALLOWED", "encode_varint", "frame", "unframe"]

MAX_TRACE_BYTES = 1 << 30
"""Largest (decompressed) trace file read, in bytes."""

MAX_MESSAGE_BYTES = 64 << 20
"""Largest single message, in bytes."""

ALLOWED = (
    "a Chakra execution trace: varint-length-prefixed protobuf messages (GlobalMetadata, then "
    "Nodes), optionally gzip-compressed"
)


def encode_varint(n: int) -> bytes:
    """Base-128 varint of a non-negative integer (protobuf's encoding of a length).

    >>> encode_varint(300)
    b'\\xac\\x02'
    """
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def frame(msgs: Iterable) -> bytes:
    """Serialise messages with a varint length before each."""
    parts = []
    for msg in msgs:
        body = msg.SerializeToString(deterministic=True)
        parts.append(encode_varint(len(body)))
        parts.append(body)
    return b"".join(parts)


def _decompress(data: bytes, source: str) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    d = zlib.decompressobj(wbits=31)
    try:
        out = d.decompress(data, MAX_TRACE_BYTES + 1)
    except zlib.error:
        raise InputError(source, "a corrupt gzip stream", ALLOWED) from None
    if len(out) > MAX_TRACE_BYTES:
        raise InputError(
            source, f"more than {MAX_TRACE_BYTES} bytes once decompressed", ALLOWED
        ) from None
    return out


def unframe(data: bytes, source: str):
    """Split a trace into its ``GlobalMetadata`` and its list of ``Node`` messages.

    Raises
    ------
    InputError
        Empty file, truncated length or message, a message that is not valid protobuf of the
        expected type, an empty node message, a node id seen before, a file or message over the
        size limits (each at the first offending message: ten million zero bytes, each an empty
        message, were all parsed, 6 GB, before the duplicate id was found).
    """
    if len(data) > MAX_TRACE_BYTES:
        raise InputError(source, f"{len(data)} bytes", f"at most {MAX_TRACE_BYTES} bytes")
    data = _decompress(data, source)
    if not data:
        raise InputError(source, "an empty file", ALLOWED)
    m = messages()
    view = memoryview(data)
    n = len(data)
    pos = 0
    meta = None
    nodes = []
    seen: set[int] = set()
    index = 0
    while pos < n:
        # varint length
        length = 0
        shift = 0
        while True:
            if pos >= n:
                raise InputError(source, f"a truncated length before message {index}", ALLOWED)
            b = data[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 35:
                raise InputError(source, f"a malformed length before message {index}", ALLOWED)
        if length > MAX_MESSAGE_BYTES:
            raise InputError(
                source,
                f"message {index} of {length} bytes",
                f"messages of at most {MAX_MESSAGE_BYTES} bytes; {ALLOWED}",
            )
        if pos + length > n:
            raise InputError(
                source, f"message {index} truncated ({n - pos} of {length} bytes)", ALLOWED
            )
        if length == 0 and index > 0:  # a node without a field: not a node of any trace
            raise InputError(source, f"message {index} is an empty Node", ALLOWED)
        cls = m.GlobalMetadata if index == 0 else m.Node
        try:
            msg = cls.FromString(view[pos : pos + length].tobytes())
        except (DecodeError, RuntimeError, ValueError) as exc:
            what = "GlobalMetadata" if index == 0 else "Node"
            raise InputError(
                source, f"message {index} is not a valid {what} ({exc})", ALLOWED
            ) from None
        pos += length
        if index == 0:
            meta = msg
        else:
            if msg.id in seen:
                raise InputError(source, f"node id {msg.id} twice", "unique node ids")
            seen.add(msg.id)
            nodes.append(msg)
        index += 1
    return meta, nodes
