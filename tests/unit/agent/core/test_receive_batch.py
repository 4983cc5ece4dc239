"""``Endpoint.receive_datagrams``: a batch handed over in one call is processed exactly as the
same datagrams handed over one by one at the same time (what is placed, answered, counted
and dropped), so the runtime may hand over what one system call read in a single call."""

from __future__ import annotations

import os

from agent.core import ConnectionSpec, Endpoint, IncomingDatagram, MrcConfig
from agent.core.datagram import IpContext

A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def _pair() -> tuple[Endpoint, Endpoint, int, int]:
    config = MrcConfig(ev_set_size=16)
    sender, receiver = Endpoint([A], config, seed=3), Endpoint([B], config, seed=4)
    region = receiver.register_memory(bytearray(1 << 17))
    sender.connect(ConnectionSpec(local_qp=0x10, remote_qp=0x20, remote_addresses=(B,)))
    receiver.connect(ConnectionSpec(local_qp=0x20, remote_qp=0x10, remote_addresses=(A,)))
    return sender, receiver, region.rkey, region.va


def _incoming(sender: Endpoint, rkey: int, va: int) -> list[IncomingDatagram]:
    data = os.urandom(40 * 1024)
    sender.post_write(0x10, data, va, rkey)
    out = sender.datagrams_to_send(0.0)
    ip = IpContext(src=A, dst=B)
    datagrams = [
        IncomingDatagram(d.payload, ip, d.src_port, d.dscp, d.ecn, d.flow_label) for d in out
    ]
    # Some that must be dropped, each for its own reason, and a duplicate.
    datagrams.insert(3, IncomingDatagram(b"\x00" * 5, ip, 1, 0, 0))
    datagrams.insert(7, IncomingDatagram(datagrams[2].payload, IpContext(src=A, dst=A), 1, 0, 0))
    datagrams.insert(9, IncomingDatagram(datagrams[4].payload, ip, 1, 0, 0, dst_port=1))
    datagrams.append(datagrams[20])
    return datagrams


def _outcome(receiver: Endpoint) -> tuple:
    events = []
    while (event := receiver.next_event()) is not None:
        events.append(event)
    replies = [d.payload for d in receiver.datagrams_to_send(0.001)]
    stats = receiver.stats
    return (
        events, replies, dict(stats.drops), stats.datagrams_received,
        receiver.connection_stats(0x20).data_packets_received,
    )  # fmt: skip


def test_a_batch_is_processed_as_the_same_datagrams_one_by_one():
    sender, one_by_one, rkey, va = _pair()
    _sender, batched, rkey_b, va_b = _pair()
    assert (rkey, va) == (rkey_b, va_b)  # same seeds: the same region, QPs and keys
    datagrams = _incoming(sender, rkey, va)
    for datagram in datagrams:
        one_by_one.receive_datagram(datagram, 0.0005)
    batched.receive_datagrams(datagrams, 0.0005)
    expected = _outcome(one_by_one)
    assert _outcome(batched) == expected
    drops = expected[2]
    assert sum(drops.values()) == 3 and expected[3] == len(datagrams)
    assert expected[4] == 40  # every data packet placed once, the duplicate not counted
