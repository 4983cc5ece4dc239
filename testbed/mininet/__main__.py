"""``python -m testbed.mininet``: see ``testbed.mininet.cli``."""

from testbed.mininet.cli import main

raise SystemExit(main())
