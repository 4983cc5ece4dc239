"""Fixtures for the testbed runner and experiment tests.

They need root and Mininet, and per target BMv2 with its CLI and the compiled program
(``bmv2``) or ``tc`` and a controller that programs kernel switches (``linux``), and skip with
one line naming what is missing. ``testbed_target`` runs a test once per target;
``needs_testbed`` is the bmv2-only check of tests that do not take a target yet. Every run
uses a topology on ports of its own and a private runs directory (``MRC_MININET_RUNS``), so
the tests find their run's prefix there and never touch a run of anyone else on the machine
(``stop`` is always given that prefix).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.mininet.naming import RUN_PREFIX_PATTERN
from testbed.mininet.runs import RUNS_ROOT_ENV
from tests.e2e.mininet.environment import TARGETS, forwarding_skip_reason
from tests.e2e.testbed.topology_files import preset_on_own_ports


@pytest.fixture
def needs_testbed() -> None:
    """Skip unless the BMv2 target can come up here."""
    reason = forwarding_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(params=TARGETS)
def testbed_target(request: pytest.FixtureRequest) -> str:
    """Each switch target in turn (the value ``--target`` takes), skipped with the reason
    where it cannot come up here."""
    target = str(request.param)
    reason = forwarding_skip_reason(target)
    if reason:
        pytest.skip(reason)
    return target


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runs directory of this test's own, for the test and every child it starts; after
    the test, whatever a failed test left of its runs is swept (so the next test's ports are
    free), after the test's own assertions have looked."""
    path = tmp_path / "runs"
    path.mkdir()
    monkeypatch.setenv(RUNS_ROOT_ENV, str(path))
    yield path
    from testbed.mininet.cleanup import sweep

    for run in path.iterdir():
        if RUN_PREFIX_PATTERN.match(run.name):
            sweep(run.name)


@pytest.fixture
def leaf_spine_file(tmp_path: Path) -> Path:
    """The leaf-spine preset on ports no other test module uses (gRPC 5065x, Thrift 969x)."""
    return preset_on_own_ports("leaf-spine", tmp_path, grpc_base=50650, thrift_base=9690)


@pytest.fixture
def leaf_spine_4x4_file(tmp_path: Path) -> Path:
    """The leaf-spine-4x4 preset on ports no other test module uses (gRPC 5075x, Thrift 979x)."""
    return preset_on_own_ports("leaf-spine-4x4", tmp_path, grpc_base=50750, thrift_base=9790)
