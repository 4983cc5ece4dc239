"""``--routing static`` on real BMv2 switches, where every member of a multi-member group goes
down: the pair's leaves each hash the other's hosts over two parallel links, and both are cut
under traffic. No switch dies (BMv2 kills itself with SIGFPE on a packet for a group whose
every member its watch_port has deactivated: ``controller.southbound.mapping``'s anchor keeps
one unwatched), the traffic toward the cut-off leaf is dropped, local traffic keeps flowing,
and the routes come back with the links.

Run under the shared lock; needs root, Mininet and BMv2 (skips otherwise).
"""

from __future__ import annotations

import time

import pytest

from controller.intent import routed_intent
from controller.southbound.mapping import desired_records
from controller.southbound.plan import plan_writes
from tests.bmv2.controller.harness import read_back, wait_until
from tests.e2e.mininet.pings import finish_ping, ping, start_ping

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.mininet]

SWITCHES = ["l1", "l2"]
PARALLEL = (("l1:3", "l2:3"), ("l1:4", "l2:4"))
CONVERGE_S = 60.0
#: Generous: a loaded machine polls links and answers status requests late.
LINK_S = 30.0
#: Echo requests every 10 ms while the links go down, BMv2 notices and the controller reacts.
FLOOD_COUNT = 300
FLOOD_INTERVAL_S = 0.01


def _bmv2_sees(network, up: bool) -> bool:
    """Whether both switch ends of both parallel links read ``up`` in BMv2's port status (an
    AssertionError naming the exit status of a leaf that died)."""
    dead = {name: status for name, status in _alive(network).items() if status is not None}
    assert not dead, f"switches exited (status): {dead}"
    return all(is_up == up for a, b in PARALLEL for is_up in network.link_state(a, b).values())


def _alive(network) -> dict[str, int | None]:
    """Each leaf's BMv2 exit status (None: still running)."""
    return {name: network.switch(name).process.poll() for name in SWITCHES}


def _ingress_drops(controller, switch: str, port: int) -> int:
    """What ``switch`` dropped of the packets that came in on ``port``, from the controller's
    status (asked again while a loaded switch's counters time out)."""
    deadline = time.monotonic() + LINK_S
    while True:
        counters = controller.status()["counters"].get(switch, {})
        if "ports" in counters:
            return counters["ports"][str(port)]["drops"]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{switch}'s counters unreadable for {LINK_S} s: {counters}")
        time.sleep(0.1)


def _holds(topology, down=frozenset()) -> bool:
    """Whether both leaves hold the static intent with ``down`` pruned (quirks tolerated)."""
    intent = routed_intent(topology, frozenset(), down)
    return all(
        plan_writes(read_back(topology, name), desired_records(intent.switch(name))).is_empty
        for name in SWITCHES
    )


def _cut_both_under_traffic(network) -> tuple[object, ...]:
    """Cut both parallel links while h1 floods h3, and wait until BMv2 sees them down; the
    flood goes on across that moment. Returns the cut link ids."""
    address = str(network.topology.host("h3").nics[0].ipv4.ip)
    flood = start_ping(network, "h1", address, FLOOD_COUNT, FLOOD_INTERVAL_S)
    cuts = tuple(network.cut(a, b) for a, b in PARALLEL)
    try:
        wait_until(lambda: _bmv2_sees(network, up=False), LINK_S, "BMv2 sees both links down")
    finally:
        result = finish_ping(flood, "h1", "h3", address, FLOOD_COUNT)
    assert result.received < FLOOD_COUNT, "the cut links carried the whole flood"
    return cuts


def _restore_both(network) -> None:
    for a, b in PARALLEL:
        network.restore(a, b)
    wait_until(lambda: _bmv2_sees(network, up=True), LINK_S, "BMv2 sees both links up")


def test_a_group_whose_every_watched_member_is_down_kills_no_switch(
    pair_network, pair_topology, controllers
):
    """The data plane alone (no link discovery: the controller never hears of the cut): both
    members' ports die under traffic, and the switches live on, dropping what the group gets."""
    controller = controllers("static-blind", 10, "--routing", "static", "--no-discovery")
    controller.events.wait_in_service(SWITCHES, CONVERGE_S)
    assert ping(pair_network, "h1", "h3").lossless
    try:
        _cut_both_under_traffic(pair_network)
        assert ping(pair_network, "h1", "h3", count=3).received == 0
        assert _alive(pair_network) == {"l1": None, "l2": None}
        assert ping(pair_network, "h1", "h2").lossless, "local traffic keeps flowing"
    finally:
        _restore_both(pair_network)
    assert _alive(pair_network) == {"l1": None, "l2": None}
    wait_until(lambda: ping(pair_network, "h1", "h3").lossless, LINK_S, "h1 reaches h3 again")


def test_a_static_fabric_drops_a_group_with_no_live_member_and_brings_it_back(
    pair_network, pair_topology, controllers
):
    controller = controllers("static", 10, "--routing", "static")
    controller.events.wait_in_service(SWITCHES, CONVERGE_S)
    (started,) = controller.events.named("controller_started")
    assert started["routing"] == "static"
    assert controller.status()["routing"]["policy"] == "static"
    start = controller.events.mark()
    try:
        cuts = _cut_both_under_traffic(pair_network)
        for cut in cuts:
            controller.events.wait_for(
                "link_down", LINK_S, lambda e, c=cut: e["link"] == str(c), start
            )
        wait_until(lambda: _holds(pair_topology, frozenset(cuts)), LINK_S, "groups pruned")
        status = controller.status()
        assert status["routing"]["routed_down_links"] == [], "static: nothing recomputed"
        # Each leaf lost its group toward the other (and the routes selecting it).
        assert [g["group_id"] for g in status["groups"]["l1"]] == [1, 2]
        drops0 = _ingress_drops(controller, "l1", 1)
        assert ping(pair_network, "h1", "h3", count=3).received == 0
        wait_until(
            lambda: _ingress_drops(controller, "l1", 1) - drops0 >= 3,
            LINK_S,
            "l1 counts h1's echo requests as dropped (no route)",
        )
        assert _alive(pair_network) == {"l1": None, "l2": None}
        assert ping(pair_network, "h1", "h2").lossless
        controller.events.wait_for("failover", LINK_S, after=start)
        failovers = [e for e in controller.events.events[start:] if e["event"] == "failover"]
        assert failovers and {e["phase"] for e in failovers} == {"local"}
    finally:
        _restore_both(pair_network)
    wait_until(lambda: _holds(pair_topology), LINK_S, "both groups restored")
    wait_until(lambda: ping(pair_network, "h1", "h3").lossless, LINK_S, "h1 reaches h3 again")
    assert _alive(pair_network) == {"l1": None, "l2": None}
    assert controller.events.named("write_failed") == []
