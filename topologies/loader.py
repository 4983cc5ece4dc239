"""Load a topology from a YAML file or string: parse, check, resolve, or raise with every problem.

Loading is all-or-nothing: callers get either a complete, validated :class:`Topology` or a
:class:`TopologyError` whose problems name file and line, and nothing has been touched yet.
"""

from __future__ import annotations

from pathlib import Path

from topologies.assemble import assemble_topology
from topologies.errors import Problem, ProblemLog, TopologyError
from topologies.marked_yaml import parse_yaml
from topologies.model import Topology
from topologies.parse import parse_document


def load_topology_file(path: str | Path) -> Topology:
    """Load and validate the topology in ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise TopologyError([Problem(str(path), 1, f"cannot read the file: {error}")]) from None
    return load_topology_text(text, source=str(path), default_name=path.stem)


def load_topology_text(
    text: str, source: str = "<string>", default_name: str = "topology"
) -> Topology:
    """Load and validate a topology given as YAML text; ``source`` names it in errors."""
    root = parse_yaml(text, source)
    parse_log = ProblemLog(source)
    document = parse_document(root, default_name, parse_log)
    parse_log.raise_if_any()
    check_log = ProblemLog(source)
    return assemble_topology(document, source, check_log)
