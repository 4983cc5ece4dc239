"""Fixtures for the tofino southbound against PI's P4Runtime server (``mrc_pi_server``).

Each test brings up its own fabric of servers on free ports and its own controller processes,
and every one is killed when the test ends. Without the server the tests skip with one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bmv2.controller.harness import ControllerProcess
from tests.e2e.tofino.pi_fabric import PiFabric, server_skip_reason, write_program


@pytest.fixture(autouse=True)
def _needs_server() -> None:
    reason = server_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def program(tmp_path: Path) -> Path:
    return write_program(tmp_path / "program")


@pytest.fixture
def fabrics(tmp_path: Path) -> Iterator[object]:
    """A factory of server fabrics, one per topology text; all stopped at the end."""
    started: list[PiFabric] = []

    def start(topology_text: str) -> PiFabric:
        fabric = PiFabric(topology_text, tmp_path)
        started.append(fabric)
        return fabric.__enter__()

    yield start
    for fabric in started:
        fabric.close()


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[object]:
    """A factory of controller processes; every one is killed when the test ends."""
    started: list[ControllerProcess] = []

    def start(
        fabric: PiFabric, config: Path, name: str = "ctl", election_id: int = 10
    ) -> ControllerProcess:
        process = ControllerProcess(
            fabric.topology_file, tmp_path, name, election_id, ("--config", str(config))
        )
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
