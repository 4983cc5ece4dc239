"""An agent's acknowledgement totals: what acknowledging cost over its life.

Specification: the pool sums, over its connections open and closed, the acknowledgements
they sent (SACKs and message ACKs) and the data packets they received; a connection's share
stays in the totals after it closes (a collective's QPs close with the job), and the
agent's status reports them.
"""

from __future__ import annotations

import os

from agent.core import ConnectionSpec, MrcConfig
from agent.io.endpoints import EndpointPool
from tests.unit.agent.core.loopback import to_incoming
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B


def _pair() -> tuple[EndpointPool, EndpointPool, int, int, int]:
    """Two pools, one connection between them; b has memory a writes into."""
    config = MrcConfig(ev_set_size=8)
    a = EndpointPool([PLANE_A], config, seed=1)
    b = EndpointPool([PLANE_B], config, seed=2)
    qp_a, qp_b = a.allocate_qp(a.default), b.allocate_qp(b.default)
    a.connect(a.default, ConnectionSpec(qp_a, qp_b, (PLANE_B,)))
    b.connect(b.default, ConnectionSpec(qp_b, qp_a, (PLANE_A,)))
    region = b.default.register_memory(bytearray(1 << 20), va=0x4000)
    return a, b, qp_a, qp_b, region.rkey


def _exchange(a: EndpointPool, b: EndpointPool, rounds: int) -> None:
    now = 0.0
    for _ in range(rounds):
        now += 1e-4
        for source, target in ((a, b), (b, a)):
            for datagram in source.datagrams_to_send(now):
                target.receive_datagram(to_incoming(datagram), now)


def test_the_totals_count_what_the_receiving_side_sent_and_received():
    a, b, qp_a, qp_b, rkey = _pair()
    a.default.post_write(qp_a, os.urandom(10 * 1024), 0x4000, rkey)
    _exchange(a, b, 10)
    totals = b.ack_totals()
    stats = b.connection_stats(qp_b)
    assert totals == {"acks_sent": stats.acks_sent, "data_packets_received": 10}
    assert 2 <= totals["acks_sent"] < 10  # coalesced, and the message's ACK among them
    assert a.ack_totals()["data_packets_received"] == 0


def test_a_closed_connections_share_stays_in_the_totals():
    a, b, qp_a, qp_b, rkey = _pair()
    a.default.post_write(qp_a, os.urandom(4 * 1024), 0x4000, rkey)
    _exchange(a, b, 10)
    before = b.ack_totals()
    b.close(qp_b)
    assert b.qps == ()
    assert b.ack_totals() == before and before["data_packets_received"] == 4
