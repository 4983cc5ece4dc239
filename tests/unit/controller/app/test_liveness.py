"""Link liveness with a fake clock: three probes missed in a row mean down, one seen means up,
only probes that were sent can be missed, and late probes (a stalled switch or controller) are
not misses."""

from __future__ import annotations

import pytest

from controller.app.liveness import LinkMonitor, LinkState
from topologies import Endpoint, Link, LinkParams

PARAMS = LinkParams(1000.0, 64, 0)
A, B = Endpoint("l1", 3), Endpoint("s1", 1)
A2, B2 = Endpoint("l1", 4), Endpoint("s1", 2)
C, B3 = Endpoint("l2", 3), Endpoint("s1", 3)
LINK = Link(A, B, PARAMS)  # the link the tests cut
TWIN = Link(A2, B2, PARAMS)  # a parallel link that keeps delivering
OTHER = Link(C, B3, PARAMS)  # another switch's link into s1
INTERVAL = 1 / 64  # binary fractions keep the fake timeline exact
FLIGHT = 1 / 1024
SILENCE = 8 * INTERVAL
DIRECTIONS = ((A, B), (B, A), (A2, B2), (B2, A2), (C, B3), (B3, C))


class Driver:
    """Sends one probe per direction per interval and delivers those of senders not cut.

    ``delay`` holds deliveries back (a stalled switch): a probe sent at t arrives at
    t + delay, in order; ``sender_delay`` does so for chosen senders only.
    """

    def __init__(self, miss_limit: int = 3, allowance: float = INTERVAL) -> None:
        self.monitor = LinkMonitor([LINK, TWIN, OTHER], miss_limit, allowance, SILENCE)
        self.now = 0.0
        self.sequence = 0
        self.cut: set[Endpoint] = set()  # senders whose probes are lost
        self.delay = FLIGHT
        self.sender_delay: dict[Endpoint, float] = {}
        self.in_flight: list[tuple[float, Endpoint, Endpoint, int]] = []

    def round(self, *, send: bool = True) -> list:
        self.now += INTERVAL
        self.sequence += 1
        if send:
            for sender, receiver in DIRECTIONS:
                self.monitor.probe_sent(sender, self.sequence, self.now)
                if sender not in self.cut:
                    delay = self.sender_delay.get(sender, self.delay)
                    self.in_flight.append((self.now + delay, sender, receiver, self.sequence))
        arrived = [probe for probe in self.in_flight if probe[0] <= self.now + FLIGHT]
        self.in_flight = [probe for probe in self.in_flight if probe[0] > self.now + FLIGHT]
        for at, sender, receiver, sequence in arrived:
            self.monitor.probe_received(sender, receiver, sequence, at)
        return self.monitor.evaluate(self.now + FLIGHT)

    def rounds(self, count: int, **kwargs) -> list:
        changes = []
        for _ in range(count):
            changes += self.round(**kwargs)
        return changes


def test_healthy_links_stay_up():
    driver = Driver()
    assert driver.rounds(50) == []
    assert {s.state for s in driver.monitor.status().values()} == {LinkState.UP}


def test_a_cut_link_is_down_after_three_missed_probes_while_its_twin_stays_up():
    driver = Driver()
    driver.rounds(5)
    driver.cut = {A, B}
    # The lost probes are sent in rounds 1-3; each is known lost one round later, when the
    # twin's newer probes arrive and its flight allowance has passed.
    assert driver.rounds(3) == []
    (change,) = driver.round()
    assert change.link == LINK.id and change.state is LinkState.DOWN
    assert driver.monitor.down_links() == {LINK.id}


def test_the_down_change_dates_the_failure_to_the_first_missed_probe():
    driver = Driver()
    driver.rounds(5)
    first_lost_sent_at = driver.now + INTERVAL
    driver.cut = {A, B}
    (change,) = driver.rounds(4)
    assert change.since == pytest.approx(first_lost_sent_at)
    assert change.at - change.since == pytest.approx(3 * INTERVAL + FLIGHT)


def test_two_missed_probes_then_one_received_keeps_the_link_up():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, B}
    driver.rounds(2)
    driver.cut = set()
    assert driver.rounds(10) == []


def test_one_direction_lost_takes_the_link_down_only_after_the_silence_limit():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {B}  # a one-way failure, or one egress thread of s1 far behind the others
    assert driver.rounds(4 + int(SILENCE / INTERVAL) - 1) == []
    assert [c.state for c in driver.round()] == [LinkState.DOWN]


def test_one_direction_lost_toward_a_lost_switch_takes_the_link_down_at_once():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, A2, C}  # nothing reaches s1 any more; s1's own probes still arrive
    driver.monitor.mark_lost("s1")
    assert {c.link for c in driver.rounds(4)} == {LINK.id, TWIN.id, OTHER.id}


def test_a_link_seen_again_is_up_at_the_next_evaluation():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, B}
    driver.rounds(6)
    driver.cut = set()
    (change,) = driver.round()
    assert change.state is LinkState.UP
    assert change.since == pytest.approx(driver.now + FLIGHT)
    assert driver.monitor.down_links() == frozenset()


def test_a_controller_that_sends_nothing_declares_nothing_down():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, B, A2, B2}
    assert driver.rounds(100, send=False) == []


def test_probes_that_all_arrive_late_are_not_misses():
    driver = Driver()
    driver.rounds(3)
    driver.delay = 5 * INTERVAL  # the receiving switch stalls: everything it hands up is late
    assert driver.rounds(40) == []


def test_a_stalled_sender_is_not_declared_cut_while_its_neighbour_hears_others():
    driver = Driver()
    driver.rounds(3)
    # l1's BMv2 stalls: its probes reach s1 five intervals late, while l2's arrive at once.
    driver.sender_delay = {A: 5 * INTERVAL, A2: 5 * INTERVAL}
    assert driver.rounds(40) == []


def test_a_switch_that_hands_up_nothing_loses_its_links_after_the_silence_limit():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, A2, C}  # s1 receives nothing at all: no newer probe can prove a loss
    silence_rounds = int(SILENCE / INTERVAL)
    # The lost probes must each be older than the silence limit, and then the one-way failure
    # must last the silence limit again (s1's own probes keep arriving).
    assert driver.rounds(silence_rounds) == []
    later = driver.rounds(silence_rounds + 4)
    assert {c.link for c in later} == {LINK.id, TWIN.id, OTHER.id}
    assert all(c.state is LinkState.DOWN for c in later)


def test_a_lost_switch_loses_its_links_as_soon_as_three_probes_are_overdue():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, A2, C}
    driver.monitor.mark_lost("s1")
    driver.rounds(3)
    changes = driver.round()
    assert {c.link for c in changes} == {LINK.id, TWIN.id, OTHER.id}


def test_a_found_switch_is_judged_by_its_own_probes_again():
    driver = Driver()
    driver.monitor.mark_lost("s1")
    driver.monitor.mark_found("s1")
    driver.rounds(3)
    driver.delay = 4 * INTERVAL
    assert driver.rounds(20) == []


def test_a_probe_still_within_its_flight_allowance_is_not_missed():
    driver = Driver(allowance=5 * INTERVAL)
    driver.rounds(3)
    driver.cut = {A, B}
    assert driver.rounds(7) == []  # the third lost probe is not yet overdue
    assert [c.state for c in driver.rounds(1)] == [LinkState.DOWN]


def test_a_miss_limit_of_one_reacts_to_the_first_lost_probe():
    driver = Driver(miss_limit=1)
    driver.rounds(2)
    driver.cut = {A, B}
    assert [c.state for c in driver.rounds(2)] == [LinkState.DOWN]


def test_a_withdrawn_probe_is_never_missed():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, B}
    for _ in range(10):
        driver.now += INTERVAL
        driver.sequence += 1
        for sender, receiver in DIRECTIONS:
            driver.monitor.probe_sent(sender, driver.sequence, driver.now)
            if sender in driver.cut:
                driver.monitor.probe_withdrawn(sender, driver.sequence)
            else:
                driver.monitor.probe_received(sender, receiver, driver.sequence, driver.now)
        assert driver.monitor.evaluate(driver.now + FLIGHT) == []


def test_a_probe_between_ports_no_listed_link_joins_is_not_counted():
    monitor = LinkMonitor([LINK], 3, INTERVAL, SILENCE)
    assert not monitor.probe_received(A, Endpoint("s2", 1), 1, 0.0)
    assert not monitor.probe_received(Endpoint("l1", 1), A, 1, 0.0)
    assert monitor.probe_received(A, B, 1, 0.0)


def test_an_old_probe_arriving_late_does_not_clear_newer_misses():
    monitor = LinkMonitor([LINK, TWIN, OTHER], 3, INTERVAL, SILENCE)
    for sequence in range(1, 6):
        at = sequence * INTERVAL
        for sender, receiver in DIRECTIONS:
            monitor.probe_sent(sender, sequence, at)
            if sender not in (A, B):
                monitor.probe_received(sender, receiver, sequence, at + FLIGHT)
    monitor.probe_received(A, B, 1, 5 * INTERVAL)  # probe 1 of A arrives; 2-5 are missing
    (change,) = monitor.evaluate(5 * INTERVAL + 2 * FLIGHT)
    assert change.link == LINK.id and change.state is LinkState.DOWN


def test_a_port_at_two_links_or_a_link_listed_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        LinkMonitor([LINK, LINK], 3, INTERVAL, SILENCE)
    other = Link(A, Endpoint("s2", 1), PARAMS)
    with pytest.raises(ValueError, match="two links"):
        LinkMonitor([LINK, other], 3, INTERVAL, SILENCE)


def test_nonsensical_limits_are_refused():
    with pytest.raises(ValueError, match="miss_limit"):
        LinkMonitor([LINK], 0, INTERVAL, SILENCE)
    with pytest.raises(ValueError, match="flight_allowance"):
        LinkMonitor([LINK], 3, -1.0, SILENCE)
    with pytest.raises(ValueError, match="silence_limit"):
        LinkMonitor([LINK], 3, INTERVAL, INTERVAL / 2)


def test_links_assumed_down_from_a_peer_come_up_once_probes_cross_them():
    # A backup takes its peer's view; the link was restored before the peer died, and the
    # backup's own probes, once it sends them, must bring it back up.
    driver = Driver()
    driver.monitor.assume(frozenset({LINK.id, TWIN.id}), driver.now)
    assert driver.monitor.down_links() == {LINK.id, TWIN.id}
    assert driver.rounds(3, send=False) == [], "taking the peer's view reports nothing"
    driver.cut = {A2, B2}  # the twin is still cut
    (change,) = driver.round()
    assert (change.link, change.state) == (LINK.id, LinkState.UP)
    driver.rounds(6)
    assert driver.monitor.down_links() == {TWIN.id}, "a link still cut stays down"
    driver.monitor.assume(frozenset(), driver.now)
    assert driver.monitor.down_links() == frozenset()
