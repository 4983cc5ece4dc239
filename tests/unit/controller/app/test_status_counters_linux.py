"""The status snapshot passes on what a target cannot count, so an empty member table reads
as "not counted" rather than "no traffic"."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from controller.app.fabric import FabricController, discovery_settings
from controller.app.status import collect_status, format_status
from controller.southbound.interface import PortCounters, SwitchCounters, SwitchRole
from tests.unit.controller.fakes import EventSink, FakeClock, FakeFabric
from topologies import Topology

NOTE = "members: the kernel keeps no per-next-hop counters (ports only)"


@dataclass
class PortsOnlyFabric(FakeFabric):
    """A fake southbound that, like the kernel, counts ports and no members."""

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        return SwitchCounters(
            ports={port: PortCounters(rx_packets=1) for port in ports},
            members={},
            not_counted=(NOTE,),
        )


def test_not_counted_notes_reach_the_snapshot_and_its_text(leaf_spine: Topology) -> None:
    clock = FakeClock()
    fabric = FabricController(
        leaf_spine,
        PortsOnlyFabric(leaf_spine),
        EventSink(clock).log,
        discovery_settings(leaf_spine),
        clock,
    )
    fabric.switch_connected("l1", SwitchRole.PRIMARY)  # only connected switches are read
    status = asyncio.run(collect_status(fabric))
    assert status["counters"]["l1"]["not_counted"] == [NOTE]
    assert status["counters"]["l1"]["members"] == {}
    assert f"l1 not counted: {NOTE}" in format_status(status)
