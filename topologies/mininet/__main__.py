"""``python -m topologies.mininet``: see ``topologies.mininet.cli``."""

from topologies.mininet.cli import main

raise SystemExit(main())
