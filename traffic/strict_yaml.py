"""Strict YAML for :mod:`traffic.decode` (its module docstring has the rules): PyYAML's safe
loader that bounds depth and expanded size while composing (alias bombs), refuses duplicate keys
and YAML 1.1 base-60 numbers, and reads exponent numbers without a dot or an exponent sign
(``1e-3``, ``2.5e9``) as numbers, as YAML 1.2 does. Imported by :func:`traffic.decode.parse_yaml`
when a YAML input is read, so a process that reads only JSON never loads PyYAML.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from traffic.errors import InputError
from traffic.limits import MAX_DEPTH, MAX_YAML_BYTES, MAX_YAML_NODES

__all__ = ["compose_yaml"]


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that bounds depth and expanded size while composing, and rejects duplicate
    keys while constructing."""

    def __init__(self, stream: str, name: str):
        super().__init__(stream)
        self.name = name
        self._depth = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent, index):  # noqa: D102 (PyYAML hook)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise InputError(
                f"{self.name} line {mark.line + 1}",
                f"nesting depth {self._depth}",
                f"at most {MAX_DEPTH} nested lists/mappings",
            )
        node = super().compose_node(parent, index)
        self._depth -= 1
        key = id(node)
        size = self._sizes.get(key)
        if size is None:
            size = 1
            if isinstance(node, yaml.SequenceNode):
                size += sum(self._sizes.get(id(c), 1) for c in node.value)
            elif isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    size += self._sizes.get(id(k), 1) + self._sizes.get(id(v), 1)
            self._sizes[key] = size
        if size > MAX_YAML_NODES:
            mark = node.start_mark
            raise InputError(
                f"{self.name} line {mark.line + 1}",
                f"a document expanding to more than {MAX_YAML_NODES:,} values (aliases)",
                "a document without alias bombs",
            )
        return node

    def construct_mapping(self, node, deep=False):  # noqa: D102 (PyYAML hook)
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:
                    raise InputError(
                        f"{self.name} line {key_node.start_mark.line + 1}",
                        "a list or mapping as a key",
                        "plain keys",
                    ) from None
                if dup:
                    raise InputError(
                        f"{self.name} line {key_node.start_mark.line + 1}",
                        f"duplicate key {key!r}",
                        "each key once per mapping",
                    )
        return super().construct_mapping(node, deep=deep)


def _no_sexagesimal(loader: _StrictLoader, node: yaml.ScalarNode) -> None:
    """YAML 1.1 reads ``1:30`` as the number 90 (base 60): refuse it rather than guess."""
    if ":" in str(node.value):
        raise InputError(
            f"{loader.name} line {node.start_mark.line + 1}",
            node.value,
            "a plain number (YAML 1.1 base-60 numbers such as 1:30 are refused; quote text)",
        )


def _construct_int(loader: _StrictLoader, node: yaml.ScalarNode) -> int:
    _no_sexagesimal(loader, node)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


def _construct_float(loader: _StrictLoader, node: yaml.ScalarNode) -> float:
    _no_sexagesimal(loader, node)
    return yaml.SafeLoader.construct_yaml_float(loader, node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
# YAML 1.1 reads ``1e-3`` and ``1.5e3`` as text (its floats need a dot and a signed exponent):
# a time of 1e-3 s was refused as "not a valid number". Read them as YAML 1.2 does (numbers).
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def compose_yaml(text: str, name: str) -> Any:
    """The values of the YAML document ``text``, read strictly (:func:`traffic.decode.parse_yaml`
    then checks they are JSON-like values and has the examples)."""
    if len(text) > MAX_YAML_BYTES:
        raise InputError(name, f"{len(text):,} characters", f"YAML of at most {MAX_YAML_BYTES:,}")
    loader = None
    try:
        loader = _StrictLoader(text, name)  # the reader checks the characters here
        data = loader.get_single_data()
    except yaml.reader.ReaderError as exc:
        ch = exc.character
        code = ch if isinstance(ch, int) else ord(ch[:1] or "?")
        where = f"character 0x{code:02x} at offset {exc.position}"
        raise InputError(name, where, "printable YAML text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "unknown line"
        problem = getattr(exc, "problem", None) or "syntax error"
        raise InputError(name, where, f"valid YAML ({problem})") from None
    except RecursionError:
        raise InputError(name, "too deep", f"at most {MAX_DEPTH} nested lists/mappings") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data
