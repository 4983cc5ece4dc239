"""Typed, line-aware reading of the fields of one YAML mapping.

Every read either returns a value of the expected type and range or records a problem naming the
line and the field, then abandons the item (:class:`ItemRejected`). Unknown fields are refused up
front, because a misspelt optional field would otherwise be silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import TypeVar

from topologies.errors import ItemRejected, ProblemLog
from topologies.marked_yaml import YamlList, YamlMap, YamlNode, YamlScalar

T = TypeVar("T")

#: Names of switches and hosts: short enough that Mininet's "<name>-eth<port>" fits IFNAMSIZ.
NODE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,9}$")
#: Names of whole topologies (they also name result folders, hence no spaces or slashes).
TOPOLOGY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: Names of NICs and planes.
SHORT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,14}$")


def describe(node: YamlNode) -> str:
    """A short description of a YAML value for error messages."""
    if isinstance(node, YamlMap):
        return "a mapping"
    if isinstance(node, YamlList):
        return "a list"
    if node.value is None:
        return "empty"
    return f"{node.value!r}"


class MapReader:
    """Reads the fields of one mapping (``what`` names it in messages, e.g. "switch 'l1'")."""

    def __init__(
        self, node: YamlNode, what: str, allowed: Collection[str], log: ProblemLog
    ) -> None:
        if not isinstance(node, YamlMap):
            raise log.reject(node.line, f"{what} must be a mapping, not {describe(node)}")
        self.node = node
        self.what = what
        self.log = log
        unknown = [key for key in node.entries if key not in allowed]
        for key in unknown:
            log.add(
                node.key_lines[key],
                f"unknown field {key!r} in {what} (allowed: {', '.join(sorted(allowed))})",
            )
        if unknown:
            raise ItemRejected(what)

    @property
    def line(self) -> int:
        """Line the mapping starts on."""
        return self.node.line

    def has(self, key: str) -> bool:
        """True if the field is present (even if empty)."""
        return key in self.node.entries

    def line_of(self, key: str) -> int:
        """Line of a field's key, or of the mapping when the field is absent."""
        return self.node.key_lines.get(key, self.node.line)

    def lines(self) -> dict[str, int]:
        """Line of every field present, plus ``""`` for the mapping itself."""
        return {"": self.node.line, **self.node.key_lines}

    def fail(self, key: str, message: str) -> ItemRejected:
        """Record a problem about field ``key`` and return the exception abandoning the item."""
        return self.log.reject(self.line_of(key), f"{self.what}: {message}")

    def required(self, key: str) -> YamlNode:
        """The raw node of a required field."""
        if key not in self.node.entries:
            raise self.fail(key, f"missing required field {key!r}")
        return self.node.entries[key]

    def optional(self, key: str) -> YamlNode | None:
        """The raw node of an optional field (None if absent)."""
        return self.node.entries.get(key)

    def string(self, key: str, pattern: re.Pattern[str] | None = None) -> str:
        """A required string field, optionally matching ``pattern``."""
        return self._string(key, self.required(key), pattern)

    def optional_string(self, key: str, pattern: re.Pattern[str] | None = None) -> str | None:
        """An optional string field."""
        node = self.optional(key)
        return None if node is None else self._string(key, node, pattern)

    def integer(self, key: str, low: int, high: int) -> int:
        """A required integer field within ``low..high``."""
        return self._integer(key, self.required(key), low, high)

    def optional_integer(self, key: str, low: int, high: int) -> int | None:
        """An optional integer field within ``low..high``."""
        node = self.optional(key)
        return None if node is None else self._integer(key, node, low, high)

    def optional_boolean(self, key: str) -> bool | None:
        """An optional ``true``/``false`` field."""
        node = self.optional(key)
        if node is None:
            return None
        value = node.value if isinstance(node, YamlScalar) else None
        if not isinstance(value, bool):
            raise self.fail(key, f"field {key!r} must be true or false, not {describe(node)}")
        return value

    def optional_positive_number(self, key: str) -> float | None:
        """An optional number field that must be greater than zero."""
        node = self.optional(key)
        if node is None:
            return None
        value = node.value if isinstance(node, YamlScalar) else None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"field {key!r} must be a number, not {describe(node)}")
        if not value > 0:
            raise self.fail(key, f"field {key!r} must be greater than 0, not {value}")
        return float(value)

    def optional_map(self, key: str, allowed: Collection[str]) -> MapReader | None:
        """An optional nested mapping, read with its own allowed fields."""
        node = self.optional(key)
        if node is None:
            return None
        return MapReader(node, f"{self.what} {key!r}", allowed, self.log)

    def list_of(self, key: str, *, required: bool) -> tuple[YamlNode, ...]:
        """The items of a list field (empty if absent and not required)."""
        node = self.required(key) if required else self.optional(key)
        if node is None:
            return ()
        if not isinstance(node, YamlList):
            raise self.fail(key, f"field {key!r} must be a list, not {describe(node)}")
        return node.items

    def converted(self, key: str, convert: Callable[[str], T], *, required: bool) -> T | None:
        """A string field turned into a value by ``convert``; its ValueError becomes a problem."""
        text = self.string(key) if required else self.optional_string(key)
        if text is None:
            return None
        try:
            return convert(text)
        except ValueError as error:
            raise self.fail(key, f"bad {key} {text!r}: {error}") from None

    def _string(self, key: str, node: YamlNode, pattern: re.Pattern[str] | None) -> str:
        if not isinstance(node, YamlScalar) or not isinstance(node.value, str):
            raise self.fail(key, f"field {key!r} must be a string, not {describe(node)}")
        if pattern is not None and not pattern.match(node.value):
            raise self.fail(
                key, f"field {key!r} value {node.value!r} does not match {pattern.pattern}"
            )
        return node.value

    def _integer(self, key: str, node: YamlNode, low: int, high: int) -> int:
        value = node.value if isinstance(node, YamlScalar) else None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"field {key!r} must be an integer, not {describe(node)}")
        if not low <= value <= high:
            raise self.fail(key, f"field {key!r} is {value}, outside {low}..{high}")
        return value
