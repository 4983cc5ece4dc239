"""The running controller against a simulated fabric (fake southbound, fake clock): it
reconciles switches it becomes primary on, finds failed links from missed probes, reprograms
only the switches whose intent changed, reports unlisted links, and survives bad input."""

from __future__ import annotations

import asyncio
from ipaddress import ip_address

import pytest

from controller.app.discovery import discovery_settings
from controller.app.fabric import FabricController
from controller.app.lldp import Probe, encode_probe
from controller.app.programmer import RetryPolicy
from controller.app.status import collect_status, format_status
from controller.intent import compute_intent
from controller.southbound.interface import SwitchRole
from tests.unit.controller.fakes import FakeClock, FakeFabric, run_on_clock
from topologies import Endpoint

TICK = 0.010
#: Ticks from a cut to its detection: three lost probes, the last one overdue by the flight
#: allowance (two intervals).
DETECTION_TICKS = 3 + 2


class Scenario:
    """A controller over a FakeFabric, driven tick by tick."""

    def __init__(self, topology, clock: FakeClock, sink) -> None:
        self.clock = clock
        self.sink = sink
        self.fake = FakeFabric(topology)
        self.fabric = FabricController(
            topology,
            self.fake,
            sink.log,
            discovery_settings(topology),
            clock,
            RetryPolicy(initial_s=0.01, max_s=0.02),
            nonce=77,
        )

    async def start(self, role: SwitchRole = SwitchRole.PRIMARY) -> asyncio.Task:
        await self.fake.run(self.fabric)
        task = asyncio.create_task(self.fabric.run_programmers())
        for name in self.fabric.views:
            self.fabric.switch_connected(name, role)
        await settle()
        return task

    async def ticks(self, count: int) -> list:
        changes = []
        for _ in range(count):
            self.clock.advance(TICK)
            changes += await self.fabric.probes.tick()
            await settle()
        return changes


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def run(scenario_body) -> None:
    asyncio.run(scenario_body())


@pytest.fixture
def scenario(leaf_spine, clock, sink) -> Scenario:
    return Scenario(leaf_spine, clock, sink)


def test_becoming_primary_reconciles_every_switch_with_a_read_back(scenario):
    async def body():
        task = await scenario.start()
        task.cancel()

    run(body)
    assert sorted(scenario.fake.programs) == sorted((name, True) for name in scenario.fabric.views)
    assert all(view.in_service for view in scenario.fabric.views.values())
    assert len(scenario.sink.named("switch_in_service")) == 6


def test_a_backup_controller_writes_nothing(scenario):
    async def body():
        task = await scenario.start(SwitchRole.BACKUP)
        await scenario.ticks(5)
        task.cancel()

    run(body)
    assert scenario.fake.programs == []
    assert scenario.fabric.probes.stats.sent == 0


def test_a_healthy_fabric_keeps_every_link_and_counts_every_probe(scenario):
    async def body():
        task = await scenario.start()
        changes = await scenario.ticks(10)
        task.cancel()
        return changes

    run(body)
    stats = scenario.fabric.probes.stats
    # 20 used ports: 16 ends of the 8 switch-switch links deliver, the 4 host ports do not.
    assert stats.sent == 10 * 20
    assert stats.received == 10 * 16
    assert scenario.fabric.generation == 0
    assert scenario.sink.named("link_down") == []


def test_a_cut_spine_link_is_routed_around_on_exactly_the_switches_that_need_it(scenario):
    async def body():
        task = await scenario.start()
        await scenario.ticks(3)
        scenario.fake.programs.clear()
        scenario.fake.cut_link("l2", "s1")
        changes = await scenario.ticks(DETECTION_TICKS)
        task.cancel()
        return changes

    run(body)
    (down,) = scenario.sink.named("link_down")
    assert down["link"] == "l2:3<->s1:2"
    assert sorted(name for name, _ in scenario.fake.programs) == ["l1", "l2", "s1"]
    l1 = scenario.fake.intents["l1"]
    assert l1.lookup(ip_address("10.0.2.1")).ports == (4, 5, 6)
    failover = scenario.fabric.last_failover
    assert failover is not None and failover.complete
    assert failover.switches == ("l1", "l2", "s1")
    # From the first lost probe's send to the tick on which the third one is overdue.
    detection_ms = (DETECTION_TICKS - 1) * TICK * 1000
    assert failover.detection_ms == pytest.approx(detection_ms)
    assert scenario.sink.named("failover")[0]["duration_ms"] == pytest.approx(detection_ms)


def test_a_restored_link_brings_the_original_intent_back(scenario, leaf_spine):
    async def body():
        task = await scenario.start()
        scenario.fake.cut_link("l2", "s1")
        await scenario.ticks(5)
        scenario.fake.restore_link("l2", "s1")
        await scenario.ticks(2)
        task.cancel()

    run(body)
    assert [e["link"] for e in scenario.sink.named("link_up")] == ["l2:3<->s1:2"]
    assert scenario.fabric.intent == compute_intent(leaf_spine)
    assert scenario.fake.intents["l1"] == compute_intent(leaf_spine).switch("l1")


def test_a_miswired_port_is_reported_and_its_link_not_used(scenario):
    async def body():
        task = await scenario.start()
        # l1:3's cable goes to an unused port of s2; s1:1's, the listed far end, to nothing.
        scenario.fake.rewired[Endpoint("l1", 3)] = Endpoint("s2", 3)
        scenario.fake.rewired[Endpoint("s1", 1)] = None
        await scenario.ticks(5)
        task.cancel()

    run(body)
    (report,) = scenario.sink.named("unlisted_link")
    assert (report["sender"], report["receiver"]) == ("l1:3", "s2:3")
    assert scenario.fabric.down_links() == {
        link.id for link in scenario.fabric.topology.links if link.a == Endpoint("l1", 3)
    }
    unlisted = next(iter(scenario.fabric.probes.unlisted_links.values()))
    assert unlisted.probes == 5


def test_malformed_probes_are_counted_and_logged_at_most_once_a_second(scenario):
    async def body():
        task = await scenario.start()
        for _ in range(3):
            scenario.fabric.frame_received("l1", 3, b"\x01\x80\xc2" + bytes(11))
        scenario.clock.advance(1.5)
        scenario.fabric.frame_received("l1", 3, b"garbage")
        task.cancel()

    run(body)
    assert scenario.fabric.probes.stats.malformed == 4
    logged = scenario.sink.named("malformed_probe")
    assert len(logged) == 2 and logged[1]["suppressed_since_last"] == 2


def test_probes_of_another_controller_instance_are_ignored(scenario):
    async def body():
        task = await scenario.start()
        frame = encode_probe(Probe("s1", 1, 12345, 1), "02:00:00:03:00:01")
        scenario.fabric.frame_received("l1", 3, frame)
        task.cancel()

    run(body)
    assert scenario.fabric.probes.stats.other_controller == 1
    assert scenario.fabric.probes.stats.received == 0


def test_a_lost_switch_takes_its_links_down_and_is_reprogrammed_when_it_returns(scenario):
    async def body():
        task = await scenario.start()
        await scenario.ticks(2)
        scenario.fabric.switch_disconnected("s1")
        scenario.fake.unreachable.add("s1")
        await scenario.ticks(5)
        down_while_lost = set(scenario.fabric.down_links())
        scenario.fake.programs.clear()
        scenario.fake.unreachable.discard("s1")
        scenario.fabric.switch_connected("s1", SwitchRole.PRIMARY)
        await settle()
        await scenario.ticks(3)
        task.cancel()
        return down_while_lost

    down_while_lost = asyncio.run(body())
    assert {str(link) for link in down_while_lost} == {"l1:3<->s1:1", "l2:3<->s1:2"}
    assert scenario.fake.programs[0] == ("s1", True)
    assert scenario.fabric.down_links() == frozenset()


def test_a_failed_program_is_logged_and_retried_with_a_read_back(scenario):
    scenario.fake.fail_next["l1"] = "UNKNOWN: table full"

    async def body():
        task = await scenario.start()
        await asyncio.sleep(0.05)  # the retry policy's first delay is 0.01 s
        task.cancel()

    run_on_clock(scenario.clock, body)
    l1_calls = [call for call in scenario.fake.programs if call[0] == "l1"]
    assert l1_calls == [("l1", True), ("l1", True)]
    failed = [e for e in scenario.sink.named("program") if not e["ok"]]
    assert failed[0]["switch"] == "l1" and failed[0]["error"] == "UNKNOWN: table full"
    assert scenario.fabric.views["l1"].in_service


def test_status_shows_links_groups_counters_and_the_last_failover(scenario):
    async def body():
        task = await scenario.start()
        scenario.fake.cut_link("l1", "s4")
        await scenario.ticks(5)
        scenario.fake.unreachable.add("s4")
        status = await collect_status(scenario.fabric)
        task.cancel()
        return status

    status = asyncio.run(body())
    links = {link["link"]: link["state"] for link in status["links"]}
    assert links["l1:6<->s4:1"] == "down" and links["l1:3<->s1:1"] == "up"
    l1_groups = {g["group_id"]: g for g in status["groups"]["l1"]}
    assert [m["port"] for m in l1_groups[3]["members"]] == [3, 4, 5]
    assert status["counters"]["l1"]["ports"]["3"]["tx_packets"] == 6
    assert status["counters"]["l1"]["members"]["2"]["packets"] == 12
    assert "error" in status["counters"]["s4"]
    assert status["last_failover"]["trigger"] == ["l1:6<->s4:1 down"]
    text = format_status(status)
    assert "l1:6<->s4:1                  down" in text
    assert "s4: unavailable" in text
    assert "last failover: l1:6<->s4:1 down" in text


def test_a_neighbour_still_being_reconciled_does_not_flap_its_links(scenario):
    # Every program of s1 fails (each retry too, however soon it comes): s1 stays primary and
    # not in service for the whole test.
    scenario.fake.failing["s1"] = "UNKNOWN: slow switch"

    async def body():
        task = await scenario.start()
        await scenario.ticks(6)  # s1 is primary but not in service: its probes are not taken
        in_service = scenario.fabric.views["s1"].in_service
        task.cancel()
        return in_service

    assert asyncio.run(body()) is False
    assert scenario.sink.named("link_down") == []


def test_a_switch_that_never_connects_loses_its_links_after_the_startup_grace(scenario):
    async def body():
        await scenario.fake.run(scenario.fabric)
        task = asyncio.create_task(scenario.fabric.run_programmers())
        for name in scenario.fabric.views:
            if name != "s2":
                scenario.fabric.switch_connected(name, SwitchRole.PRIMARY)
        await settle()
        await scenario.ticks(20)
        within_grace = set(scenario.fabric.down_links())
        scenario.clock.advance(scenario.fabric.discovery.startup_grace_s)
        # Past the grace s2 counts as lost: three overdue probes toward it take its links down.
        await scenario.ticks(DETECTION_TICKS)
        task.cancel()
        return within_grace

    within_grace = asyncio.run(body())
    assert within_grace == set()
    assert {str(link) for link in scenario.fabric.down_links()} == {
        "l1:4<->s2:1",
        "l2:4<->s2:2",
    }
