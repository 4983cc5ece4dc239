"""Link liveness with a fake clock: three probes missed in a row mean down, one seen means up,
and only probes that were actually sent can be missed."""

from __future__ import annotations

import pytest

from controller.app.liveness import LinkMonitor, LinkState
from topologies import Endpoint, Link, LinkParams

PARAMS = LinkParams(1000.0, 64, 0)
A, B = Endpoint("l1", 3), Endpoint("s1", 1)
LINK = Link(A, B, PARAMS)
INTERVAL = 1 / 64  # binary fractions keep the fake timeline exact
FLIGHT = 1 / 1024


class Driver:
    """Sends one probe each way per interval and delivers the directions that are not cut."""

    def __init__(self, miss_limit: int = 3, allowance: float = INTERVAL) -> None:
        self.monitor = LinkMonitor([LINK], miss_limit, allowance)
        self.now = 0.0
        self.sequence = 0
        self.cut: set[Endpoint] = set()  # senders whose probes are lost

    def round(self, *, send: bool = True) -> list:
        self.now += INTERVAL
        self.sequence += 1
        if send:
            for sender, receiver in ((A, B), (B, A)):
                self.monitor.probe_sent(sender, self.sequence, self.now)
                if sender not in self.cut:
                    self.monitor.probe_received(sender, receiver, self.sequence, self.now + FLIGHT)
        return self.monitor.evaluate(self.now)

    def rounds(self, count: int, **kwargs) -> list:
        changes = []
        for _ in range(count):
            changes += self.round(**kwargs)
        return changes


def test_a_healthy_link_stays_up():
    driver = Driver()
    assert driver.rounds(50) == []
    assert driver.monitor.status()[LINK.id].state is LinkState.UP


def test_a_link_is_down_after_three_missed_probes_and_not_before():
    driver = Driver()
    driver.rounds(5)
    driver.cut = {A, B}
    # Probe k counts as missed one interval after it was sent: rounds 1-3 send the lost
    # probes, round 4 is when the third one is overdue.
    assert driver.rounds(3) == []
    (change,) = driver.round()
    assert change.link == LINK.id and change.state is LinkState.DOWN
    assert driver.monitor.down_links() == {LINK.id}


def test_the_down_change_dates_the_failure_to_the_first_missed_probe():
    driver = Driver()
    driver.rounds(5)
    first_lost_sent_at = driver.now + INTERVAL
    driver.cut = {A}
    (change,) = driver.rounds(4)
    assert change.since == pytest.approx(first_lost_sent_at)
    assert change.at - change.since == pytest.approx(3 * INTERVAL)


def test_two_missed_probes_then_one_received_keeps_the_link_up():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {A, B}
    driver.rounds(2)
    driver.cut = set()
    assert driver.rounds(10) == []


def test_losing_one_direction_takes_the_link_down():
    driver = Driver()
    driver.rounds(3)
    driver.cut = {B}
    changes = driver.rounds(4)
    assert [c.state for c in changes] == [LinkState.DOWN]


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
    driver.cut = {A, B}
    assert driver.rounds(100, send=False) == []


def test_a_probe_still_within_its_flight_allowance_is_not_missed():
    driver = Driver(allowance=5 * INTERVAL)
    driver.rounds(3)
    driver.cut = {A, B}
    assert driver.rounds(7) == []  # the third lost probe is not yet overdue
    assert [c.state for c in driver.rounds(1)] == [LinkState.DOWN]


def test_a_miss_limit_of_one_reacts_to_the_first_lost_probe():
    driver = Driver(miss_limit=1)
    driver.rounds(2)
    driver.cut = {A}
    assert [c.state for c in driver.rounds(2)] == [LinkState.DOWN]


def test_a_probe_between_ports_no_listed_link_joins_is_not_counted():
    monitor = LinkMonitor([LINK], 3, INTERVAL)
    assert not monitor.probe_received(A, Endpoint("s2", 1), 1, 0.0)
    assert not monitor.probe_received(Endpoint("l1", 1), A, 1, 0.0)
    assert monitor.probe_received(A, B, 1, 0.0)


def test_an_old_probe_arriving_late_does_not_clear_newer_misses():
    monitor = LinkMonitor([LINK], 3, INTERVAL)
    for sequence in range(1, 5):
        monitor.probe_sent(A, sequence, sequence * INTERVAL)
        monitor.probe_sent(B, sequence, sequence * INTERVAL)
        monitor.probe_received(B, A, sequence, sequence * INTERVAL)
    monitor.probe_received(A, B, 1, 4 * INTERVAL)  # probe 1 of A arrives; 2-4 are still missing
    (change,) = monitor.evaluate(5 * INTERVAL + FLIGHT)
    assert change.state is LinkState.DOWN


def test_a_port_at_two_links_or_a_link_listed_twice_is_refused():
    with pytest.raises(ValueError, match="listed twice"):
        LinkMonitor([LINK, LINK], 3, INTERVAL)
    other = Link(A, Endpoint("s2", 1), PARAMS)
    with pytest.raises(ValueError, match="two links"):
        LinkMonitor([LINK, other], 3, INTERVAL)


def test_nonsensical_limits_are_refused():
    with pytest.raises(ValueError, match="miss_limit"):
        LinkMonitor([LINK], 0, INTERVAL)
    with pytest.raises(ValueError, match="flight_allowance"):
        LinkMonitor([LINK], 3, -1.0)
