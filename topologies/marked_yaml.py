"""YAML reading that keeps line numbers and refuses duplicate keys.

PyYAML's ordinary loaders return plain dicts and lists, losing where each value came from, and
silently keep the last of two equal keys. A topology error must name its line, and a repeated key
is almost always a mistake, so this module composes the YAML node graph itself and wraps every
value with the (1-based) line it starts on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

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

    Raises :class:`TopologyError` for a YAML syntax error, a non-string or duplicate key, or a
    value of a type a topology never uses (dates, binary, sets, ...).
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise TopologyError(
            [Problem(source, line, f"YAML syntax error: {error.problem or error}")]
        ) from None
    except yaml.YAMLError as error:
        raise TopologyError([Problem(source, 1, f"YAML error: {error}")]) from None
    if root is None:
        return None
    problems: list[Problem] = []
    tree = _convert(root, yaml.SafeLoader(""), source, problems)
    if problems:
        raise TopologyError(problems)
    return tree


def _convert(
    node: yaml.Node, loader: yaml.SafeLoader, source: str, problems: list[Problem]
) -> YamlNode:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        explicit_count = sum(1 for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge")
        loader.flatten_mapping(node)  # resolves '<<' merge keys in place, merged entries first
        merged_count = len(node.value) - explicit_count
        entries: dict[str, YamlNode] = {}
        key_lines: dict[str, int] = {}
        explicit_keys: set[str] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key_line = key_node.start_mark.line + 1
            key = _convert(key_node, loader, source, problems)
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
            entries[key.value] = _convert(value_node, loader, source, problems)
            key_lines[key.value] = key_line
        return YamlMap(entries, key_lines, line)
    if isinstance(node, yaml.SequenceNode):
        return YamlList(
            tuple(_convert(item, loader, source, problems) for item in node.value), line
        )
    value = loader.construct_object(node, deep=True)
    if value is not None and not isinstance(value, str | int | float | bool):
        problems.append(
            Problem(source, line, f"unsupported YAML value {node.value!r} ({type(value).__name__})")
        )
        return YamlScalar(None, line)
    return YamlScalar(value, line)
