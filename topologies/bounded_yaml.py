"""YAML from a file someone else wrote, read within bounds: size, nesting depth, alias expansion.

PyYAML has no limits: its composer recurses once per nesting level (RecursionError on a deep
document, which is no YAMLError), and aliases make a small document stand for a huge one
("billion laughs"): cheap to compose, but everything that walks the result, merge keys
included, walks every copy. Every YAML file the testbed reads (topologies, the controller's
configuration, experiment variants) goes through this module, which returns a composed node
graph or a document, or raises a YAMLError for bad syntax or :class:`YamlRejected` for anything
past a bound, and no other exception.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

#: The largest file read: the largest generated fabric (a k=16 fat-tree) is 130 KB.
MAX_BYTES = 1 << 20
#: Nesting of mappings and sequences; a topology is 4 deep, a configuration 3.
MAX_DEPTH = 32
#: Values (scalars, mappings, sequences) with every alias counted as a copy of what it names;
#: a k=16 fat-tree holds 25,000.
MAX_VALUES = 250_000


class YamlRejected(ValueError):
    """Input the YAML reader refuses: ``reason`` says why, ``line`` (1-based) where, if known."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason if line is None else f"line {line}: {reason}")
        self.reason = reason
        self.line = line


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path``; YamlRejected past ``max_bytes`` or for other than UTF-8.

    Reads at most ``max_bytes + 1`` bytes, so a device or a pipe cannot make it read forever.
    OSError (no such file, no permission) is the caller's to report.
    """
    with path.open("rb") as file:
        data = file.read(max_bytes + 1)
        if len(data) > max_bytes:
            size = os.fstat(file.fileno()).st_size
            known = f"is {size} bytes" if size > max_bytes else "is larger than that"
            raise YamlRejected(f"a file may hold at most {max_bytes} bytes; this one {known}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise YamlRejected(f"not UTF-8 text (byte {error.start})", line) from None


def compose(
    text: str, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES
) -> yaml.Node | None:
    """The node graph of the single YAML document in ``text`` (None if empty), checked against
    the bounds (and ``MAX_BYTES``); a yaml.YAMLError for a syntax error, else YamlRejected."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "replace")) > MAX_BYTES:
        raise YamlRejected(f"a document may hold at most {MAX_BYTES} bytes")
    try:
        loader = _BoundedLoader(text, max_depth)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
        if root is not None:
            _Expansion(max_depth, max_values).measure(root, 1)
        return root
    except (yaml.YAMLError, YamlRejected):
        raise
    except Exception as error:  # RecursionError or a bug: still this document's error
        raise YamlRejected(f"cannot read the YAML ({type(error).__name__}: {error})") from None


def load(text: str) -> Any:
    """The document in ``text`` as plain Python values (what ``yaml.safe_load`` returns), bounded
    as :func:`compose` is; a yaml.YAMLError for bad syntax or a bad value, else YamlRejected."""
    root = compose(text)
    if root is None:
        return None
    try:
        return yaml.SafeLoader("").construct_document(root)
    except yaml.YAMLError:
        raise
    except Exception as error:  # RecursionError or a bug in the constructor
        raise YamlRejected(f"cannot read the YAML ({type(error).__name__}: {error})") from None


def error_line(error: yaml.YAMLError, text: str) -> int | None:
    """The 1-based line a PyYAML error points at, if it points at one."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        return None if mark is None else mark.line + 1
    if isinstance(error, yaml.reader.ReaderError):  # a character YAML does not allow
        return text.count("\n", 0, error.position) + 1
    return None


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader whose composer refuses nesting past ``max_depth`` before recursing into it.

    Depth counts mappings and sequences (the root one is at depth 1), not the scalars in them.
    """

    def __init__(self, text: str, max_depth: int) -> None:
        super().__init__(text)
        self._max_depth = max_depth
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self._depth >= self._max_depth:
            line = None if event.start_mark is None else event.start_mark.line + 1
            raise YamlRejected(f"nested deeper than {self._max_depth} levels", line)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Expansion:
    """Measures the document as aliases expand it: its depth and its count of values.

    Each node is measured once (aliases share nodes), so measuring is linear in the composed
    graph however large the expansion. An alias names a node that comes earlier in the
    document, so it is met measured already (or, for a recursive alias, in progress): the
    recursion follows the composed tree, which the composer kept within ``max_depth``. A
    node's height counts the collections from it down (a scalar's is 0): met at ``depth``,
    its deepest collection is at ``depth + height - 1``.
    """

    def __init__(self, max_depth: int, max_values: int) -> None:
        self.max_depth = max_depth
        self.max_values = max_values
        self.measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)
        self.in_progress: set[int] = set()

    def measure(self, node: yaml.Node, depth: int) -> tuple[int, int]:
        """(values, height) of ``node``, met ``depth`` levels down; YamlRejected past a bound."""
        line = node.start_mark.line + 1
        key = id(node)
        if key in self.in_progress:
            raise YamlRejected("recursive YAML alias", line)
        if key not in self.measured:
            self.in_progress.add(key)
            self.measured[key] = self._measure_children(node, depth, line)
            self.in_progress.discard(key)
        values, height = self.measured[key]
        if depth + height - 1 > self.max_depth:
            raise YamlRejected(f"aliases nest it deeper than {self.max_depth} levels", line)
        return values, height

    def _measure_children(self, node: yaml.Node, depth: int, line: int) -> tuple[int, int]:
        if isinstance(node, yaml.ScalarNode):
            return 1, 0
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = list(node.value)
        values, height = 1, 1
        for child in children:
            child_values, child_height = self.measure(child, depth + 1)
            values += child_values
            height = max(height, child_height + 1)
            if values > self.max_values:
                raise YamlRejected(
                    f"more than {self.max_values} values once aliases are expanded", line
                )
        return values, height
