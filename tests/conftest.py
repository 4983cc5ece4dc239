"""For every pytest suite: ``--skip-log FILE`` appends each skip to FILE (``tests.skip_log``),
which `make test` sums up at its end, one line per reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.skip_log import record


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--skip-log",
        type=Path,
        default=None,
        help="append one JSON line per skipped test or module to this file (tests.skip_log)",
    )


def _suite(nodeid: str) -> str:
    """``unit``, ``e2e``, ``bmv2`` (the directory under tests/), marked when the agent runs as
    pure Python (`make unit` runs the agent's tests twice)."""
    parts = nodeid.split("/")
    suite = parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]
    return f"{suite}, pure-Python agent" if os.environ.get("MRC_AGENT_PURE_PYTHON") else suite


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ").strip() or "(no reason given)"


class _SkipLog:
    """The plugin ``--skip-log`` registers: each skipped test (not an expected failure) and
    each skipped module, one line apiece."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self._record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self._record(report)

    def _record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        record(self.log, _suite(report.nodeid), _reason(report), report.nodeid)


def pytest_configure(config: pytest.Config) -> None:
    log: Path | None = config.getoption("--skip-log")
    if log is not None:
        config.pluginmanager.register(_SkipLog(log), "mrc-skip-log")
