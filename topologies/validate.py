"""Command line: check a topology file (or preset name) and summarise it.

    python -m topologies.validate FILE_OR_PRESET [--explicit]

Exit status 0 when the topology loads, 1 with every problem (file:line: message) on standard
error when it does not. ``--explicit`` prints the topology with every derived value spelt out.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from topologies.document import dump_document, explicit_document
from topologies.errors import TopologyError
from topologies.presets import load_topology


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m topologies.validate", description="Validate a topology file."
    )
    parser.add_argument("topology", help="a topology file or a preset name")
    parser.add_argument(
        "--explicit", action="store_true", help="print the topology with derived values filled in"
    )
    args = parser.parse_args(argv)
    try:
        topology = load_topology(args.topology)
    except TopologyError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return 1
    if args.explicit:
        sys.stdout.write(dump_document(explicit_document(topology)))
        return 0
    print(
        f"{topology.source}: topology {topology.name!r} is valid: {len(topology.planes)} plane(s), "
        f"{len(topology.switches)} switches, {len(topology.hosts)} hosts, "
        f"{len(topology.links)} switch links, {len(topology.host_links)} host links"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
