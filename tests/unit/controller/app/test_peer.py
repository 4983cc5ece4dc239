"""A backup on a probe target follows the other controller's link state: its intent tracks
the primary's down links (so a takeover finds the switches holding it), and once it is
primary anywhere its own evidence decides; the peer's stream is folded event by event and
resynced by each status."""

from __future__ import annotations

import asyncio

from controller.app.discovery import discovery_settings
from controller.app.fabric import FabricController
from controller.app.peer import fold_message
from controller.app.programmer import RetryPolicy
from controller.intent import compute_intent
from controller.southbound.interface import LinkEvidence, SwitchRole
from tests.unit.controller.fakes import EventSink, FakeClock, FakeFabric
from topologies import Topology


def _fabric(topology: Topology) -> tuple[FabricController, EventSink]:
    clock = FakeClock()
    sink = EventSink(clock)
    fabric = FabricController(
        topology,
        FakeFabric(topology),
        sink.log,
        discovery_settings(topology, evidence=LinkEvidence.PROBES),
        clock,
        RetryPolicy(initial_s=0.01, max_s=0.02),
    )
    return fabric, sink


def test_a_backup_takes_the_peers_down_links_and_its_intent_follows(
    leaf_spine: Topology, link_between
) -> None:
    fabric, sink = _fabric(leaf_spine)
    link = link_between(leaf_spine, "l1", "s1")

    async def body() -> None:
        for name in fabric.views:
            fabric.switch_connected(name, SwitchRole.BACKUP)
        fabric.peer_down_links(frozenset({link}))
        assert fabric.down_links() == {link}
        assert fabric.intent == compute_intent(leaf_spine, frozenset({link}))
        fabric.peer_down_links(frozenset())
        assert fabric.down_links() == set()

    asyncio.run(body())
    assert [e["event"] for e in sink.events if e["event"].startswith("link_")] == [
        "link_down",
        "link_up",
    ]


def test_once_primary_anywhere_the_peer_is_not_listened_to(
    leaf_spine: Topology, link_between
) -> None:
    fabric, _ = _fabric(leaf_spine)
    link = link_between(leaf_spine, "l1", "s1")

    async def body() -> None:
        fabric.switch_connected("l1", SwitchRole.PRIMARY)
        fabric.peer_down_links(frozenset({link}))

    asyncio.run(body())
    assert fabric.down_links() == set()


def _event(name: str, **fields: str) -> dict:
    return {"kind": "event", "event": {"event": name, **fields}}


def test_the_peers_stream_is_folded_by_event_and_resynced_by_status(
    leaf_spine: Topology, link_between
) -> None:
    link = link_between(leaf_spine, "l1", "s1")
    other = link_between(leaf_spine, "l2", "s2")
    links = {str(each.id): each.id for each in leaf_spine.all_links}
    down: set = set()
    assert fold_message(_event("link_down", link=str(link)), links, down)
    assert down == {link}
    assert not fold_message(_event("program", switch="l1"), links, down)
    assert fold_message({"kind": "status", "status": {"down_links": [str(other)]}}, links, down)
    assert down == {other}
    assert fold_message(_event("link_up", link=str(other)), links, down)
    assert down == set()


def test_the_peers_down_links_are_where_the_backups_own_probes_start(
    leaf_spine: Topology, link_between
) -> None:
    # Else a link the peer saw come back just before it died would stay down for good: the
    # new primary's probes would report no change for a link they always thought up.
    fabric, _ = _fabric(leaf_spine)
    link = link_between(leaf_spine, "l1", "s1")

    async def body() -> None:
        for name in fabric.views:
            fabric.switch_connected(name, SwitchRole.BACKUP)
        fabric.peer_down_links(frozenset({link}))

    asyncio.run(body())
    status = fabric.link_status()
    assert {each for each, state in status.items() if state.state.value == "down"} == {link}
