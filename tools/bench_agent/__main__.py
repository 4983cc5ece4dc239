"""``python -m tools.bench_agent``: see ``tools.bench_agent``."""

from __future__ import annotations

import sys

from tools.bench_agent.cli import main

sys.exit(main())
