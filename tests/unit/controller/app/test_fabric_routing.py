"""The running controller under each routing policy (fake southbound, fake clock): ``static``
reprograms only the two ends of a cut and never recomputes the fabric; ``reactive`` reprograms
every switch whose routes change at once; ``converge:SECONDS`` prunes the two ends at once and
the rest exactly SECONDS later, on the event loop's clock. Links are cut by carrier, so no probe
timing is involved; every test runs on the scenario's clock (``run_on_clock``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from ipaddress import ip_address

import pytest

from controller.app.discovery import discovery_settings
from controller.app.fabric import FabricController
from controller.app.programmer import RetryPolicy
from controller.app.status import collect_status, format_status
from controller.intent import RoutingPolicy
from controller.southbound.interface import LinkEvidence, SwitchRole
from tests.unit.controller.fakes import EventSink, FakeClock, FakeFabric, run_on_clock
from topologies import Topology
from topologies.paths import PathMode

H1 = ip_address("10.0.1.1")
H3 = ip_address("10.0.2.1")


class RoutingScenario:
    """A controller with a routing policy over a FakeFabric; the test reports carrier."""

    def __init__(
        self, topology: Topology, routing: str, path_mode: PathMode = PathMode.ECMP
    ) -> None:
        self.topology = topology
        self.clock = FakeClock()
        self.sink = EventSink(self.clock)
        self.fake = FakeFabric(topology)
        self.fabric = FabricController(
            topology,
            self.fake,
            self.sink.log,
            discovery_settings(topology, evidence=LinkEvidence.CARRIER),
            self.clock,
            RetryPolicy(initial_s=0.01, max_s=0.02),
            routing=RoutingPolicy.parse(routing),
            path_mode=path_mode,
        )

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await self.fake.run(self.fabric)
            task = asyncio.create_task(self.fabric.run_programmers())
            for name in self.fabric.views:
                self.fabric.switch_connected(name, SwitchRole.PRIMARY)
            await settle()
            self.fake.programs.clear()
            try:
                await body()
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        run_on_clock(self.clock, main)

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Carrier at both switch ends of the link between ``a`` and ``b``."""
        (link,) = [link for link in self.topology.all_links if {link.a.node, link.b.node} == {a, b}]
        for end in (link.a, link.b):
            if not self.topology.is_host(end.node):
                self.fabric.port_status(end.node, end.port, up)

    def programmed(self) -> list[str]:
        """Switches programmed since the last call, in order, then forgotten."""
        names = [name for name, _ in self.fake.programs]
        self.fake.programs.clear()
        return sorted(set(names))

    def ports(self, switch: str, address) -> tuple[int, ...] | None:
        """The ports ``switch`` hashes ``address`` over, as last programmed."""
        group = self.fake.intents[switch].lookup(address)
        return None if group is None else group.ports

    def events(self, name: str) -> list[dict]:
        return self.sink.named(name)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_static_reprograms_only_the_ends_of_a_cut_and_never_the_fabric(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "static")

    async def body() -> None:
        scenario.set_link("l2", "s1", up=False)
        await settle()
        assert scenario.programmed() == ["l2", "s1"]
        # l1 (not an end) keeps hashing l2's traffic onto all four spines; s1 drops it.
        assert scenario.ports("l1", H3) == (3, 4, 5, 6)
        assert scenario.ports("l2", H1) == (4, 5, 6)
        assert scenario.ports("s1", H3) is None
        await asyncio.sleep(60)  # nothing is recomputed later either
        assert scenario.programmed() == []
        status = await collect_status(scenario.fabric)
        assert status["routing"] == {
            "policy": "static",
            "mode": "static",
            "delay_s": 0.0,
            "routed_down_links": [],
            "pending_convergences": 0,
        }
        assert status["down_links"] == ["l2:3<->s1:2"]
        assert format_status(status).splitlines()[1] == "routing: static"
        scenario.set_link("l2", "s1", up=True)
        await settle()
        assert scenario.programmed() == ["l2", "s1"]
        assert scenario.ports("s1", H3) == (2,)

    scenario.run(body)
    changes = scenario.events("intent_changed")
    assert [e["phase"] for e in changes] == ["local", "local"]
    assert {e["routing"] for e in changes} == {"static"}
    assert changes[0]["routed_down_links"] == [] and changes[0]["down_links"] == ["l2:3<->s1:2"]
    assert [e["phase"] for e in scenario.events("failover")] == ["local", "local"]
    assert scenario.events("failover")[0]["switches"] == ["l2", "s1"]


def test_static_drops_a_group_whose_every_member_died_and_its_routes(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "static")

    async def body() -> None:
        for spine in ("s1", "s2", "s3", "s4"):
            scenario.set_link("l1", spine, up=False)
        await settle()
        l1 = scenario.fake.intents["l1"]
        assert l1.lookup(H3) is None
        assert 3 not in {group.group_id for group in l1.groups}
        assert all(route.next_id != 3 for route in (*l1.routes_v4, *l1.routes_v6))
        assert scenario.ports("l2", H1) == (3, 4, 5, 6), "l2 is not told"

    scenario.run(body)


def test_reactive_reprograms_every_switch_whose_routes_change_at_once(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "reactive")

    async def body() -> None:
        scenario.set_link("l2", "s1", up=False)
        await settle()
        assert scenario.programmed() == ["l1", "l2", "s1"]
        assert scenario.ports("l1", H3) == (4, 5, 6)
        assert scenario.fabric.routed_down_links() == scenario.fabric.down_links()

    scenario.run(body)
    assert [e["phase"] for e in scenario.events("intent_changed")] == ["reactive"]


def test_converge_prunes_at_once_and_reroutes_the_fabric_exactly_its_delay_later(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "converge:3")

    async def body() -> None:
        scenario.set_link("l2", "s1", up=False)
        await settle()
        assert scenario.programmed() == ["l2", "s1"]
        assert scenario.fabric.pending_convergences() == 1
        assert scenario.ports("l1", H3) == (3, 4, 5, 6)
        await asyncio.sleep(2.999)
        assert scenario.programmed() == []
        await asyncio.sleep(0.002)
        await settle()
        assert scenario.programmed() == ["l1", "s1"]  # s1 now falls back via l1
        assert scenario.ports("l1", H3) == (4, 5, 6)
        assert scenario.fabric.pending_convergences() == 0

    scenario.run(body)
    local, converged = scenario.events("intent_changed")
    assert (local["phase"], converged["phase"]) == ("local", "converged")
    assert converged["mono"] - local["mono"] == pytest.approx(3.0)
    assert converged["routed_down_links"] == ["l2:3<->s1:2"]
    failovers = scenario.events("failover")
    assert [f["phase"] for f in failovers] == ["local", "converged"]
    # Detection is shared; the converged record's programming time holds the 3 s delay.
    assert failovers[1]["programming_ms"] >= 3000


def test_converge_sees_the_link_state_of_its_delay_ago_even_across_a_quick_restore(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "converge:3")
    seen: list[tuple[float, tuple[int, ...] | None]] = []

    async def body() -> None:
        start = scenario.clock.monotonic()
        scenario.set_link("l2", "s1", up=False)
        await settle()
        await asyncio.sleep(1)
        scenario.set_link("l2", "s1", up=True)  # back before the fabric ever heard of it
        await settle()
        assert scenario.ports("l2", H1) == (3, 4, 5, 6), "the ends use it again at once"
        for at in (2.5, 3.5, 4.5):
            await asyncio.sleep(start + at - scenario.clock.monotonic())
            await settle()
            seen.append((at, scenario.ports("l1", H3)))

    scenario.run(body)
    # The cut reaches l1 at 3 s, the restore at 4 s: each exactly the delay after it happened.
    assert seen == [(2.5, (3, 4, 5, 6)), (3.5, (4, 5, 6)), (4.5, (3, 4, 5, 6))]


def test_the_policy_is_in_the_controller_started_event(leaf_spine):
    scenario = RoutingScenario(leaf_spine, "converge:0.5")

    async def main() -> None:
        runner = asyncio.create_task(scenario.fabric.run())
        await settle()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)

    run_on_clock(scenario.clock, main)
    (started,) = scenario.events("controller_started")
    assert started["routing"] == "converge:0.5"
