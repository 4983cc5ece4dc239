"""Load a topology from a YAML file or string: parse, check, resolve, or raise with every problem.

Loading is all-or-nothing: callers get either a complete, validated :class:`Topology` or a
:class:`TopologyError` whose problems name file and line, and nothing has been touched yet.
A file is read within the bounds of :mod:`topologies.bounded_yaml` (1 MiB, 32 levels, 250,000
values with aliases expanded), and any other failure while loading, a bug included, is a
TopologyError too: a topology file can make loading fail, never crash the caller.
"""

from __future__ import annotations

from pathlib import Path

from topologies import bounded_yaml
from topologies.assemble import assemble_topology
from topologies.errors import Problem, ProblemLog, TopologyError
from topologies.marked_yaml import parse_yaml
from topologies.model import Topology
from topologies.parse import parse_document


def load_topology_file(path: str | Path) -> Topology:
    """Load and validate the topology in ``path``."""
    path = Path(path)
    try:
        text = bounded_yaml.read_text(path)
    except OSError as error:
        raise TopologyError([Problem(str(path), 1, f"cannot read the file: {error}")]) from None
    except bounded_yaml.YamlRejected as error:
        raise TopologyError([Problem(str(path), error.line or 1, error.reason)]) from None
    return load_topology_text(text, source=str(path), default_name=path.stem)


def load_topology_text(
    text: str, source: str = "<string>", default_name: str = "topology"
) -> Topology:
    """Load and validate a topology given as YAML text; ``source`` names it in errors."""
    try:
        return _load(text, source, default_name)
    except TopologyError:
        raise
    except Exception as error:  # RecursionError, a bug: still this file's error, not a crash
        message = f"cannot load the topology ({type(error).__name__}: {error})"
        raise TopologyError([Problem(source, 1, message)]) from error


def _load(text: str, source: str, default_name: str) -> Topology:
    root = parse_yaml(text, source)
    parse_log = ProblemLog(source)
    document = parse_document(root, default_name, parse_log)
    parse_log.raise_if_any()
    check_log = ProblemLog(source)
    return assemble_topology(document, source, check_log)
