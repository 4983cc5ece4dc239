"""YAML reading that keeps line numbers and refuses duplicate keys.

PyYAML's ordinary loaders return plain dicts and lists, losing where each value came from, and
silently keep the last of two equal keys. A topology error must name its line, and a repeated key
is almost always a mistake, so this module composes the YAML node graph itself and wraps every
value with the (1-based) line it starts on. The YAML is composed within the bounds of
:mod:`topologies.bounded_yaml` (size, nesting, aliases expanded); past one is a problem too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from topologies import bounded_yaml
from topologies.errors import Problem, TopologyError

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class YamlScalar:
    """A scalar value and the line it is on."""

    value: Scalar
    line: int


@dataclass(frozen=True)
class YamlList:
    """A sequence and the line it starts on."""

    items: tuple[YamlNode, ...]
    line: int


@dataclass(frozen=True)
class YamlMap:
    """A mapping with string keys, the line of each key, and the line the mapping starts on."""

    entries: dict[str, YamlNode]
    key_lines: dict[str, int]
    line: int = field(default=1)


YamlNode = YamlScalar | YamlList | YamlMap


def parse_yaml(text: str, source: str) -> YamlNode | None:
    """Parse ``text`` into a line-annotated tree; ``None`` for an empty document.

    Raises :class:`TopologyError` for a YAML syntax error, a document past the bounds of
    :mod:`topologies.bounded_yaml`, a non-string or duplicate key, or a value of a type a
    topology never uses (dates, binary, sets, ...).
    """
    try:
        root = bounded_yaml.compose(text)
    except yaml.MarkedYAMLError as error:
        line = bounded_yaml.error_line(error, text) or 1
        raise TopologyError(
            [Problem(source, line, f"YAML syntax error: {error.problem or error}")]
        ) from None
    except yaml.YAMLError as error:
        line = bounded_yaml.error_line(error, text) or 1
        raise TopologyError([Problem(source, line, f"YAML error: {error}")]) from None
    except bounded_yaml.YamlRejected as error:
        raise TopologyError([Problem(source, error.line or 1, error.reason)]) from None
    if root is None:
        return None
    converter = _Converter(source)
    tree = converter.convert(root)
    if converter.problems:
        raise TopologyError(converter.problems)
    return tree


class _Converter:
    """Walks PyYAML's node graph once per node.

    Aliases make the graph a DAG (or, for a self-referencing alias, a cycle): each node is
    converted once and shared, so alias bombs stay cheap, and a cycle is a problem.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.loader = yaml.SafeLoader("")
        self.problems: list[Problem] = []
        self.done: dict[int, YamlNode] = {}
        self.in_progress: set[int] = set()

    def convert(self, node: yaml.Node) -> YamlNode:
        key = id(node)
        if key in self.done:
            return self.done[key]
        line = node.start_mark.line + 1
        if key in self.in_progress:
            self.problems.append(Problem(self.source, line, "recursive YAML alias"))
            return YamlScalar(None, line)
        self.in_progress.add(key)
        try:
            converted = _convert(node, self.loader, self.source, self.problems, self.convert)
        finally:
            self.in_progress.discard(key)
        self.done[key] = converted
        return converted


def _convert(
    node: yaml.Node,
    loader: yaml.SafeLoader,
    source: str,
    problems: list[Problem],
    convert: Callable[[yaml.Node], YamlNode],
) -> YamlNode:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        explicit_count = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
        try:
            loader.flatten_mapping(node)  # resolves '<<' merge keys in place, merged ones first
        except yaml.MarkedYAMLError as error:  # e.g. '<<: 3', a merge of no mapping
            problems.append(Problem(source, line, f"bad YAML merge key: {error.problem}"))
            return YamlMap({}, {}, line)
        merged_count = len(node.value) - explicit_count
        entries: dict[str, YamlNode] = {}
        key_lines: dict[str, int] = {}
        explicit_keys: set[str] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key_line = key_node.start_mark.line + 1
            key = convert(key_node)
            if not isinstance(key, YamlScalar) or not isinstance(key.value, str):
                problems.append(Problem(source, key_line, "mapping keys must be plain strings"))
                continue
            if position >= merged_count:
                # Explicit keys override merged ones; only a repeated explicit key is a mistake.
                if key.value in explicit_keys:
                    problems.append(
                        Problem(
                            source,
                            key_line,
                            f"duplicate key {key.value!r} (first at line {key_lines[key.value]})",
                        )
                    )
                    continue
                explicit_keys.add(key.value)
            entries[key.value] = convert(value_node)
            key_lines[key.value] = key_line
        return YamlMap(entries, key_lines, line)
    if isinstance(node, yaml.SequenceNode):
        return YamlList(tuple(convert(item) for item in node.value), line)
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError as error:  # e.g. an unknown '!tag'
        problems.append(Problem(source, line, f"unsupported YAML value: {error}"))
        return YamlScalar(None, line)
    if value is not None and not isinstance(value, str | int | float | bool):
        problems.append(
            Problem(source, line, f"unsupported YAML value {node.value!r} ({type(value).__name__})")
        )
        return YamlScalar(None, line)
    return YamlScalar(value, line)
