"""A running network with its forwarding state, on either target: on bmv2 written by the
stand-in programmer (``fabric_program``), on linux by the real controller
(``controller_fabric``). Both offer ``program(down)``: after it, the fabric holds the state for
the links in ``down`` being down."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.mininet.controller_fabric import ControllerFabric
from tests.e2e.mininet.environment import forwarding_skip_reason
from tests.e2e.mininet.fabric_program import FabricProgrammer

Fabric = FabricProgrammer | ControllerFabric


@contextlib.contextmanager
def programmed_fabric(network: Any, topology_ref: str) -> Iterator[Fabric]:
    """The fabric of ``network`` programmed for every link up, for the ``with`` block; skips
    the test when the network's target cannot be programmed here."""
    reason = forwarding_skip_reason(str(network.target))
    if reason:
        pytest.skip(reason)
    fabric: Fabric
    if str(network.target) == "bmv2":
        fabric = FabricProgrammer(network)
    else:
        fabric = ControllerFabric(network, topology_ref)
    try:
        fabric.program()
        yield fabric
    finally:
        fabric.close()
