"""The controller process against real BMv2 switches: it programs the fabric so hosts reach
each other, routes around a cut link, reprograms a switch killed with SIGKILL, reconciles after
its own restart without wiping anything, and hands over to a backup controller."""

from __future__ import annotations

import pytest

from tests.bmv2.controller.harness import difference, read_back, wait_until
from tests.e2e.mininet.pings import ping, ping_all

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.mininet]

SWITCHES = ["l1", "l2"]
CONVERGE_S = 60.0


def _holds_intent(topology, down=frozenset()) -> bool:
    return all(difference(topology, name, down).is_empty for name in SWITCHES)


def _no_write_failed(*controllers) -> None:
    failed = [e for c in controllers for e in c.events.named("write_failed")]
    assert failed == [], f"switches refused writes: {failed}"


def _writes(events, switch: str, after: int = 0) -> int:
    return sum(
        e["inserts"] + e["modifies"] + e["deletes"]
        for e in events.events[after:]
        if e["event"] == "program" and e["switch"] == switch
    )


def _status_group(controller, switch: str, group_id: int) -> list[dict]:
    groups = controller.status()["groups"][switch]
    return next(group["members"] for group in groups if group["group_id"] == group_id)


def test_hosts_reach_each_other_over_ipv4_and_ipv6_once_the_controller_is_up(
    pair_network, pair_topology, controllers
):
    controller = controllers("ctl")
    controller.events.wait_in_service(SWITCHES, CONVERGE_S)
    assert _holds_intent(pair_topology)
    failed = [str(result) for result in ping_all(pair_network) if not result.lossless]
    assert failed == []
    status = controller.status()
    assert {link["state"] for link in status["links"]} == {"up"}
    assert status["switches"]["l1"]["in_service"]
    _no_write_failed(controller)


def test_a_cut_link_is_detected_and_routed_around_then_restored(
    pair_network, pair_topology, controllers
):
    controller = controllers("ctl")
    controller.events.wait_in_service(SWITCHES, CONVERGE_S)
    start = controller.events.mark()
    cut = pair_network.cut("l1:3", "l2:3")
    try:
        down = controller.events.wait_for("link_down", 10, after=start)
        failover = controller.events.wait_for("failover", 10, after=start)
        assert down["link"] == str(cut)
        assert set(failover["switches"]) == {"l1", "l2"} and failover["complete"]
        assert failover["writes"] >= 2, "each leaf's group toward the other must shrink"
        assert _holds_intent(pair_topology, frozenset({cut}))
        l1_group = [m["port"] for m in _status_group(controller, "l1", 3)]
        assert l1_group == [4]
        assert ping(pair_network, "h1", "h3").lossless
    finally:
        pair_network.restore("l1:3", "l2:3")
    controller.events.wait_for("link_up", 10, after=start)
    wait_until(lambda: _holds_intent(pair_topology), 10, "groups restored after the link")
    # The failover is recorded once every switch acknowledged its writes, which can be a moment
    # after the groups read back restored: wait for the record, not for the state.
    restored = controller.events.wait_for(
        "failover", 10, lambda e: e["trigger"] == [f"{cut} up"], start
    )
    assert restored["complete"]
    status = controller.status()
    assert status["last_failover"]["trigger"] == [f"{cut} up"]
    _no_write_failed(controller)


def test_a_switch_killed_and_restarted_is_reprogrammed_to_the_same_state(
    pair_network, pair_topology, controllers
):
    controller = controllers("ctl")
    controller.events.wait_in_service(SWITCHES, CONVERGE_S)
    before = read_back(pair_topology, "l2")
    start = controller.events.mark()
    pair_network.restart_switch("l2")
    controller.events.wait_for("switch_disconnected", 20, lambda e: e["switch"] == "l2", start)
    controller.events.wait_in_service(["l2"], CONVERGE_S, after=start)
    wait_until(lambda: _holds_intent(pair_topology), 20, "both switches back to the intent")
    assert set(read_back(pair_topology, "l2")) == set(before)
    assert ping(pair_network, "h1", "h3").lossless
    _no_write_failed(controller)


def test_a_restarted_controller_reconciles_without_wiping(pair_network, pair_topology, controllers):
    first = controllers("first")
    first.events.wait_in_service(SWITCHES, CONVERGE_S)
    held = {name: read_back(pair_topology, name) for name in SWITCHES}
    first.kill()
    assert {name: read_back(pair_topology, name) for name in SWITCHES} == held
    second = controllers("second")
    second.events.wait_in_service(SWITCHES, CONVERGE_S)
    for name in SWITCHES:
        reconcile = second.events.wait_for("program", 5, lambda e, n=name: e["switch"] == n)
        assert reconcile["read_back"] and reconcile["ok"]
        assert _writes(second.events, name) == 0, "the restarted controller rewrote state"
        assert set(read_back(pair_topology, name)) == set(held[name])
    assert ping(pair_network, "h2", "h4", family=6).lossless
    _no_write_failed(first, second)


def test_a_backup_controller_takes_over_when_the_primary_dies_without_dropping_state(
    pair_network, pair_topology, controllers
):
    primary = controllers("primary", 20)
    primary.events.wait_in_service(SWITCHES, CONVERGE_S)
    backup = controllers("backup", 10)
    for name in SWITCHES:
        backup.events.wait_for("switch_connected", CONVERGE_S, lambda e, n=name: e["switch"] == n)
    assert {e["role"] for e in backup.events.named("switch_connected")} == {"backup"}
    assert backup.events.named("program") == []
    held = {name: read_back(pair_topology, name) for name in SWITCHES}
    primary.kill()
    backup.events.wait_in_service(SWITCHES, CONVERGE_S)
    assert [e["role"] for e in backup.events.named("switch_connected")][-2:] == [
        "primary",
        "primary",
    ]
    for name in SWITCHES:
        assert _writes(backup.events, name) == 0, "the backup rewrote state on take-over"
        assert set(read_back(pair_topology, name)) == set(held[name])
    assert _holds_intent(pair_topology)
    assert ping(pair_network, "h1", "h4").lossless
    _no_write_failed(primary, backup)
