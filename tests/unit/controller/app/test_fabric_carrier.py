"""The controller with carrier as link evidence (the linux target): a port's carrier loss
takes its link down with the same events, recomputation and failover record as missed probes,
and a lost switch's links stay down until it is back in service."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from controller.app.discovery import discovery_settings
from controller.app.fabric import FabricController
from controller.app.liveness import LinkState
from controller.app.programmer import RetryPolicy
from controller.southbound.interface import LinkEvidence, SwitchRole
from tests.unit.controller.fakes import EventSink, FakeClock, FakeFabric, run_on_clock
from topologies import Topology


class CarrierScenario:
    """A controller over a FakeFabric whose ports' carrier the test reports."""

    def __init__(
        self,
        topology: Topology,
        evidence: LinkEvidence = LinkEvidence.CARRIER,
        enabled: bool = True,
    ) -> None:
        self.clock = FakeClock()
        self.sink = EventSink(self.clock)
        self.fake = FakeFabric(topology)
        self.fabric = FabricController(
            topology,
            self.fake,
            self.sink.log,
            discovery_settings(topology, enabled=enabled, evidence=evidence),
            self.clock,
            RetryPolicy(initial_s=0.01, max_s=0.02),
        )

    async def start(self) -> asyncio.Task[None]:
        await self.fake.run(self.fabric)
        task = asyncio.create_task(self.fabric.run_programmers())
        for name in self.fabric.views:
            self.fabric.switch_connected(name, SwitchRole.PRIMARY)
        await settle()
        return task


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def run(body: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(body())


def test_carrier_loss_is_a_link_down_with_recomputation_and_a_failover_record(
    leaf_spine: Topology, link_between
) -> None:
    scenario = CarrierScenario(leaf_spine)
    link = link_between(leaf_spine, "l1", "s1")

    async def body() -> None:
        task = await scenario.start()
        scenario.clock.advance(1.0)
        scenario.fabric.port_status("l1", 3, False)
        await settle()
        assert scenario.fabric.down_links() == {link}
        assert [e["link"] for e in scenario.sink.named("link_down")] == [str(link)]
        (changed,) = scenario.sink.named("intent_changed")
        assert set(changed["switches"]) == {"l1", "l2", "s1"}
        l1 = scenario.fake.intents["l1"]
        assert l1.groups  # still multipath over the other spines
        assert all(3 not in group.ports for group in l1.groups)
        (failover,) = scenario.sink.named("failover")
        assert failover["complete"] and failover["trigger"] == [f"{link} down"]
        scenario.fabric.port_status("l1", 3, True)
        await settle()
        assert scenario.fabric.down_links() == frozenset()
        assert [e["link"] for e in scenario.sink.named("link_up")] == [str(link)]
        task.cancel()

    run(body)


def test_every_port_report_is_logged(leaf_spine: Topology) -> None:
    scenario = CarrierScenario(leaf_spine)

    async def body() -> None:
        task = await scenario.start()
        scenario.fabric.port_status("l2", 1, True)
        (event,) = scenario.sink.named("port_status")
        assert (event["switch"], event["port"], event["up"]) == ("l2", 1, True)
        task.cancel()

    run(body)


def test_a_host_links_carrier_loss_removes_that_hosts_routes(
    leaf_spine: Topology, link_between
) -> None:
    scenario = CarrierScenario(leaf_spine)
    h3 = leaf_spine.host("h3").nics[0]

    async def body() -> None:
        task = await scenario.start()
        scenario.fabric.port_status("l2", 1, False)
        await settle()
        assert scenario.fabric.down_links() == {link_between(leaf_spine, "h3", "l2")}
        l1 = scenario.fake.intents["l1"]
        assert l1.routes_v4  # the other hosts' routes remain
        assert all(route.prefix.network_address != h3.ipv4.ip for route in l1.routes_v4)
        task.cancel()

    run(body)


def test_link_status_lists_host_links_with_carrier(leaf_spine: Topology) -> None:
    scenario = CarrierScenario(leaf_spine)
    assert set(scenario.fabric.link_status()) == {link.id for link in leaf_spine.all_links}


def test_a_lost_switch_is_routed_around_until_back_in_service(leaf_spine: Topology) -> None:
    scenario = CarrierScenario(leaf_spine)

    async def body() -> None:
        task = await scenario.start()
        scenario.fabric.switch_disconnected("s1")
        await settle()
        assert len(scenario.fabric.down_links()) == 2  # l1-s1, l2-s1
        l1_groups = scenario.fake.intents["l1"].groups
        assert l1_groups  # still multipath over the other spines
        assert all(3 not in group.ports for group in l1_groups)
        scenario.fabric.port_status("s1", 1, True)  # its initial report on reconnecting
        scenario.fabric.switch_connected("s1", SwitchRole.PRIMARY)
        await settle()
        assert scenario.fabric.views["s1"].in_service
        assert scenario.fabric.down_links() == frozenset()
        task.cancel()

    run(body)


def test_with_probes_as_evidence_carrier_reports_change_no_link(
    leaf_spine: Topology,
) -> None:
    scenario = CarrierScenario(leaf_spine, evidence=LinkEvidence.PROBES)

    async def body() -> None:
        task = await scenario.start()
        scenario.fabric.port_status("l1", 3, False)
        await settle()
        assert scenario.fabric.down_links() == frozenset()
        assert scenario.sink.named("link_down") == []
        task.cancel()

    run(body)


def test_without_discovery_links_stay_as_listed(leaf_spine: Topology) -> None:
    scenario = CarrierScenario(leaf_spine, enabled=False)

    async def body() -> None:
        task = await scenario.start()
        scenario.fabric.port_status("l1", 3, False)
        await settle()
        assert scenario.fabric.down_links() == frozenset()
        statuses = scenario.fabric.link_status().values()
        assert len(statuses) == len(leaf_spine.links)  # the switch-to-switch links
        assert all(status.state is LinkState.UP for status in statuses)
        task.cancel()

    run(body)


def test_a_switch_that_never_connects_is_routed_around_after_the_startup_grace(
    leaf_spine: Topology, link_between
) -> None:
    scenario = CarrierScenario(leaf_spine)
    grace = scenario.fabric.discovery.startup_grace_s
    assert grace > 0

    async def body() -> None:
        runner = asyncio.create_task(scenario.fabric.run())
        await settle()
        for name in scenario.fabric.views:
            if name != "s2":
                scenario.fabric.switch_connected(name, SwitchRole.PRIMARY)
        await settle()
        await asyncio.sleep(grace / 2)
        assert scenario.fabric.down_links() == frozenset()  # within the grace: as listed
        await asyncio.sleep(grace)
        assert scenario.fabric.down_links() == {
            link_between(leaf_spine, "l1", "s2"),
            link_between(leaf_spine, "l2", "s2"),
        }
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

    # The grace is a timer on the event loop: run on the scenario's clock, the test's pauses
    # and the grace expire in deadline order, whatever the machine's load.
    run_on_clock(scenario.clock, body)
