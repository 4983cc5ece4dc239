"""The endpoint's public API: setup validation, flow control on posting, closing, timers."""

from __future__ import annotations

import pytest

from agent.core import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionSpec,
    DropReason,
    Endpoint,
    MessageFailed,
    MrcConfig,
    SendQueueFull,
)
from tests.unit.agent.core.loopback import Loopback

V4_A = bytes([10, 0, 0, 1])
V4_B = bytes([10, 0, 0, 2])
V6 = bytes(15) + b"\x01"


@pytest.mark.parametrize(
    "addresses", [[], [V4_A, V6], [V4_A, V4_A], [b"\x01\x02"]], ids=["none", "mixed", "dup", "odd"]
)
def test_an_endpoint_needs_distinct_addresses_of_one_ip_version(addresses):
    with pytest.raises(ValueError):
        Endpoint(addresses)


def test_connect_refuses_a_spec_that_does_not_fit_the_endpoint():
    endpoint = Endpoint([V4_A])
    qp = endpoint.allocate_qp()
    with pytest.raises(ValueError, match="planes"):
        endpoint.connect(ConnectionSpec(qp, 5, (V4_B, V4_B)))
    with pytest.raises(ValueError, match="IP version"):
        endpoint.connect(ConnectionSpec(qp, 5, (V6,)))
    with pytest.raises(ValueError, match="reserved"):
        endpoint.connect(ConnectionSpec(1, 5, (V4_B,)))
    endpoint.connect(ConnectionSpec(qp, 5, (V4_B,)))
    with pytest.raises(ValueError, match="in use"):
        endpoint.connect(ConnectionSpec(qp, 6, (V4_B,)))
    assert endpoint.connections == (qp,)


def test_allocated_qps_are_distinct_and_never_the_special_ones():
    endpoint = Endpoint([V4_A])
    seen = set()
    for _ in range(50):
        qp = endpoint.allocate_qp()
        assert 2 <= qp <= 0xFFFFFF
        endpoint.connect(ConnectionSpec(qp, 5, (V4_B,)))
        seen.add(qp)
    assert len(seen) == 50


def test_posting_beyond_the_unconfirmed_limit_is_refused_until_messages_complete():
    link = Loopback.create(
        MrcConfig(ev_set_size=8, max_unconfirmed_messages=2, completion_history=4)
    )
    link.post(b"a")
    link.post(b"b")
    assert not link.a.can_post(link.qp_a)
    with pytest.raises(SendQueueFull):
        link.a.post_write(link.qp_a, b"c", link.va, link.rkey)
    link.run(1e-3)
    assert link.a.can_post(link.qp_a)


def test_impossible_writes_are_refused_at_posting():
    link = Loopback.create()
    with pytest.raises(ValueError):
        link.a.post_write(link.qp_a, b"x", -1, link.rkey)
    with pytest.raises(ValueError):
        link.a.post_write(link.qp_a, b"x", 0, 1 << 32)
    with pytest.raises(ValueError):
        link.a.post_write(link.qp_a, b"x", 0, link.rkey, immediate=-5)
    with pytest.raises(KeyError):
        link.a.post_write(0x777, b"x", 0, link.rkey)


def test_closing_fails_unconfirmed_messages_and_later_packets_find_no_qp():
    link = Loopback.create()
    msn = link.post(b"q" * 3000)
    link.a.close(link.qp_a)
    assert MessageFailed(link.qp_a, msn, "connection closed locally") in [
        link.a.next_event(),
    ]
    link.exchange()  # the receiver's answers reach a QP that no longer exists
    link.exchange()
    assert link.a.stats.drops[DropReason.UNKNOWN_QP] > 0
    with pytest.raises(KeyError):
        link.a.post_write(link.qp_a, b"x", link.va, link.rkey)


def test_a_failed_connection_refuses_new_work():
    link = Loopback.create(MrcConfig(ev_set_size=8, peer_timeout=0.01, rto_max=0.005))
    link.post(b"w")
    while link.a.can_post(link.qp_a) and link.now < 1.0:
        link.in_flight.clear()
        link.idle_until_timer()
    with pytest.raises(ConnectionClosed):
        link.a.post_write(link.qp_a, b"x", link.va, link.rkey)


def test_an_idle_endpoint_has_no_timer():
    link = Loopback.create()
    assert link.a.next_timer() is None
    link.post(b"z" * 100)
    assert link.a.next_timer() is not None
    link.run(2e-3)
    link.run(0.1, delay=0.01)
    assert link.a.next_timer() is None and link.b.next_timer() is None


def _silence_until(link: Loopback, end: float) -> None:
    """Lose everything from now on, until the connection fails or ``end`` (simulated s)."""
    while link.a.can_post(link.qp_a) and link.now < end:
        link.in_flight.clear()
        link.idle_until_timer()


def test_a_connections_own_peer_timeout_replaces_the_configured_one():
    link = Loopback.create(MrcConfig(ev_set_size=8, peer_timeout=10.0, rto_max=0.005))
    link.a.set_peer_timeout(link.qp_a, 0.02)
    link.post(b"w")
    _silence_until(link, 1.0)
    assert not link.a.can_post(link.qp_a), "failed long before the configured 10 s"
    assert any(isinstance(e, ConnectionFailed) for e in link.events_a)


def test_a_connection_without_a_peer_timeout_outlasts_any_silence():
    link = Loopback.create(MrcConfig(ev_set_size=8, peer_timeout=0.01, rto_max=0.005))
    link.a.set_peer_timeout(link.qp_a, None)
    link.post(b"w")
    _silence_until(link, 1.0)
    assert link.a.can_post(link.qp_a), "still retrying after 100 configured timeouts"
    with pytest.raises(ValueError, match="peer timeout"):
        link.a.set_peer_timeout(link.qp_a, 0.0)
