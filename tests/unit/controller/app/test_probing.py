"""The probe loop on its own (fake southbound, fake clock, switch views set by the test): only
in-service primaries send, host ports only when asked, frames at a switch out of service are
ignored, and a round's link changes reach the fabric through its callback."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from controller.app.discovery import discovery_settings
from controller.app.probing import LinkProber
from controller.app.switch_view import SwitchView
from controller.southbound.interface import SwitchRole
from tests.unit.controller.fakes import FakeFabric

TICK = 0.010
#: Ticks from a cut to its detection: three lost probes, the last one overdue by the flight
#: allowance (two intervals).
DETECTION_TICKS = 3 + 2


class ProbeScenario:
    """A LinkProber over a FakeFabric; every switch starts in service as primary."""

    def __init__(self, topology, clock, sink, *, probe_host_ports: bool = True) -> None:
        self.clock = clock
        self.fake = FakeFabric(topology)
        self.views = {
            switch.name: SwitchView(SwitchRole.PRIMARY, in_service=True, ever_connected=True)
            for switch in topology.switches
        }
        self.reported: list = []
        settings = discovery_settings(topology, probe_host_ports=probe_host_ports)
        self.prober = LinkProber(
            topology,
            self.fake,
            settings,
            self.views,
            self.reported.extend,
            log=sink.log,
            clock=clock,
            nonce=77,
            started_at=clock.monotonic(),
        )
        self.fake.events = self.prober

    def ticks(self, count: int) -> list:
        async def body() -> list:
            changes = []
            for _ in range(count):
                self.clock.advance(TICK)
                changes += await self.prober.tick()
            return changes

        return asyncio.run(body())


def test_only_in_service_primaries_send_probes(leaf_spine, clock, sink):
    scenario = ProbeScenario(leaf_spine, clock, sink)
    scenario.views["l1"] = replace(scenario.views["l1"], role=SwitchRole.BACKUP)
    scenario.views["l2"] = replace(scenario.views["l2"], in_service=False)
    scenario.ticks(1)
    # The four spines send, one probe per spine port (2 each); the leaves send none.
    assert scenario.prober.stats.sent == 4 * 2


def test_host_ports_are_probed_only_when_asked(leaf_spine, clock, sink):
    everywhere = ProbeScenario(leaf_spine, clock, sink)
    everywhere.ticks(1)
    between_switches = ProbeScenario(leaf_spine, clock, sink, probe_host_ports=False)
    between_switches.ticks(1)
    # 20 used ports, 4 of them toward hosts.
    assert (everywhere.prober.stats.sent, between_switches.prober.stats.sent) == (20, 16)


def test_frames_at_a_switch_out_of_service_are_ignored(leaf_spine, clock, sink):
    scenario = ProbeScenario(leaf_spine, clock, sink)
    scenario.views["s1"].in_service = False
    scenario.ticks(1)
    # s1 sends none, and the 2 the leaves send it are not taken.
    assert (scenario.prober.stats.sent, scenario.prober.stats.ignored) == (20 - 2, 2)
    assert scenario.prober.stats.received == 16 - 2 - 2


def test_a_rounds_link_changes_reach_the_callback(leaf_spine, clock, sink):
    scenario = ProbeScenario(leaf_spine, clock, sink)
    scenario.ticks(2)
    scenario.fake.cut_link("l2", "s1")
    changes = scenario.ticks(DETECTION_TICKS)
    assert [(str(change.link), str(change.state)) for change in changes] == [
        ("l2:3<->s1:2", "down")
    ]
    assert scenario.reported == changes
    status = scenario.prober.status()
    assert {str(link) for link, state in status.items() if state.state == "down"} == {"l2:3<->s1:2"}
