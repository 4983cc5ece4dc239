"""Link state from carrier: a link is down while any switch end has lost carrier or its switch
is lost, and up again when every switch end is back."""

from __future__ import annotations

import pytest

from controller.app.carrier import CarrierMonitor
from controller.app.liveness import LinkChange, LinkState
from topologies import LinkId, Topology


@pytest.fixture
def monitor(leaf_spine: Topology) -> CarrierMonitor:
    return CarrierMonitor(leaf_spine.all_links, [switch.name for switch in leaf_spine.switches])


def test_every_link_starts_up_host_links_included(
    monitor: CarrierMonitor, leaf_spine: Topology
) -> None:
    status = monitor.status()
    assert set(status) == {link.id for link in leaf_spine.all_links}
    assert all(
        entry.state is LinkState.UP and entry.changed_at is None for entry in status.values()
    )


def test_carrier_loss_at_either_end_takes_the_link_down_once(
    monitor: CarrierMonitor, leaf_spine: Topology, link_between
) -> None:
    link: LinkId = link_between(leaf_spine, "l1", "s1")  # l1:3 - s1:1
    assert monitor.port_status("l1", 3, False, at=5.0) == [
        LinkChange(link, LinkState.DOWN, 5.0, 5.0)
    ]
    assert monitor.port_status("s1", 1, False, at=5.1) == []  # already down
    assert monitor.port_status("l1", 3, True, at=6.0) == []  # s1's end still down
    assert monitor.port_status("s1", 1, True, at=6.5) == [LinkChange(link, LinkState.UP, 6.5, 6.5)]
    assert monitor.status()[link].changed_at == 6.5


def test_a_host_link_follows_its_switch_port(
    monitor: CarrierMonitor, leaf_spine: Topology, link_between
) -> None:
    link = link_between(leaf_spine, "h1", "l1")
    (change,) = monitor.port_status("l1", 1, False, at=1.0)
    assert (change.link, change.state) == (link, LinkState.DOWN)
    assert monitor.down_links() == {link}


def test_a_port_without_a_link_changes_nothing(monitor: CarrierMonitor) -> None:
    assert monitor.port_status("l1", 40, False, at=1.0) == []
    assert monitor.port_status("nobody", 1, False, at=1.0) == []


def test_a_lost_switch_takes_all_its_links_down_until_found(
    monitor: CarrierMonitor, leaf_spine: Topology
) -> None:
    changes = monitor.switch_lost("s1", at=2.0)
    assert {change.link for change in changes} == {
        link.id for link in leaf_spine.all_links if "s1" in (link.a.node, link.b.node)
    }
    assert all(change.state is LinkState.DOWN for change in changes)
    # Its neighbours' carrier stays up (the patch panel), yet the links stay down...
    assert monitor.port_status("l1", 3, True, at=2.5) == []
    # ...until the switch is in service again.
    back = monitor.switch_found("s1", at=3.0)
    assert len(back) == len(changes) and all(c.state is LinkState.UP for c in back)


def test_a_found_switch_with_a_dead_port_keeps_that_link_down(
    monitor: CarrierMonitor, leaf_spine: Topology, link_between
) -> None:
    monitor.switch_lost("s1", at=1.0)
    monitor.port_status("s1", 2, False, at=1.5)
    back = monitor.switch_found("s1", at=2.0)
    assert link_between(leaf_spine, "l2", "s1") not in {change.link for change in back}
    assert monitor.down_links() == {link_between(leaf_spine, "l2", "s1")}
