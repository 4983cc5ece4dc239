"""The status snapshot passes on what a target cannot count, so an empty member table reads
as "not counted" rather than "no traffic"."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.app.discovery import discovery_settings
from controller.app.fabric import FabricController
from controller.app.status import collect_status, format_status
from controller.southbound.interface import PortCounters, SwitchCounters, SwitchRole
from tests.unit.controller.fakes import EventSink, FakeClock, FakeFabric
from topologies import Topology

NOTE = "members: the kernel keeps no per-next-hop counters (ports only)"


@dataclass
class PortsOnlyFabric(FakeFabric):
    """A fake southbound that, like the kernel, counts ports and no members (it notes which
    members it was asked for)."""

    asked_members: dict[str, list[int]] = field(default_factory=dict)

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        self.asked_members[switch] = list(members)
        return SwitchCounters(
            ports={port: PortCounters(rx_packets=1) for port in ports},
            members={},
            not_counted=(NOTE,),
        )


def test_not_counted_notes_reach_the_snapshot_and_its_text(leaf_spine: Topology) -> None:
    clock = FakeClock()
    southbound = PortsOnlyFabric(leaf_spine)
    fabric = FabricController(
        leaf_spine,
        southbound,
        EventSink(clock).log,
        discovery_settings(leaf_spine),
        clock,
    )
    fabric.switch_connected("l1", SwitchRole.PRIMARY)  # only connected switches are read
    status = asyncio.run(collect_status(fabric))
    assert set(status["counters"]) == {"l1"}
    assert southbound.asked_members["l1"]  # the members were asked for, and not counted
    assert status["counters"]["l1"]["not_counted"] == [NOTE]
    text = format_status(status)
    assert f"l1 not counted: {NOTE}" in text
    assert "l1 member" not in text  # no "0 pkts" line that would read as no traffic
