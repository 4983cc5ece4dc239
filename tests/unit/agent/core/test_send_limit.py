"""A caller may cap the data packets one ``datagrams_to_send`` call cuts (the runtime sends in
bounded bursts and reads the answers in between). The cap holds back data only, never a SACK
or a probe; it says how many packets went; the next call carries on where the last stopped; and
with several connections the one that goes first turns, so none waits behind a busy other."""

from __future__ import annotations

import os

from agent.core import ConnectionSpec, Endpoint, IncomingDatagram, MrcConfig
from agent.core.datagram import IpContext, OutgoingDatagram
from wire.constants import DATA_OPCODES

A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
_DATA_OPCODES = {int(op) for op in DATA_OPCODES}
#: A window far above what the tests send, so that only the cap limits a call.
_WIDE = MrcConfig(initial_window=1 << 22, max_window=1 << 22)


def _data(datagrams: list[OutgoingDatagram]) -> list[OutgoingDatagram]:
    return [d for d in datagrams if d.payload[0] in _DATA_OPCODES]


def _psn(datagram: OutgoingDatagram) -> int:
    return int.from_bytes(datagram.payload[9:12], "big")


def _sender(qps: int = 1, packets_each: int = 40) -> Endpoint:
    endpoint = Endpoint([A], _WIDE, seed=5)
    for index in range(qps):
        qp = 0x10 + index
        endpoint.connect(ConnectionSpec(qp, 0x20 + index, (B,)))
        endpoint.post_write(qp, os.urandom(packets_each * _WIDE.payload_size), 0, 0x55)
    return endpoint


def test_a_limit_caps_the_data_packets_of_one_call_and_says_it_was_used_up() -> None:
    endpoint = _sender()
    first = _data(endpoint.datagrams_to_send(0.0, limit=16))
    assert len(first) == 16
    assert endpoint.data_sent_last_call == 16  # all of the limit: more may be ready


def test_the_next_call_carries_on_where_the_limited_one_stopped() -> None:
    endpoint = _sender(packets_each=40)
    first = _data(endpoint.datagrams_to_send(0.0, limit=16))
    rest = _data(endpoint.datagrams_to_send(0.0, limit=100))
    assert [_psn(d) for d in first + rest] == list(range(40))
    assert endpoint.data_sent_last_call == 24  # less than the limit: nothing more is ready


def test_without_a_limit_the_window_alone_bounds_a_call() -> None:
    endpoint = _sender(packets_each=40)
    assert len(_data(endpoint.datagrams_to_send(0.0))) == 40
    assert endpoint.data_sent_last_call == 40


def test_a_limit_never_holds_back_a_sack() -> None:
    receiver = Endpoint([B], _WIDE, seed=6)
    receiver.connect(ConnectionSpec(0x20, 0x10, (A,)))
    region = receiver.register_memory(bytearray(1 << 16))
    sender = Endpoint([A], _WIDE, seed=5)
    sender.connect(ConnectionSpec(0x10, 0x20, (B,)))
    sender.post_write(0x10, os.urandom(4 * _WIDE.payload_size), region.va, region.rkey)
    ip = IpContext(A, B)
    receiver.receive_datagrams(
        [IncomingDatagram(d.payload, ip, d.src_port, d.dscp, d.ecn)
         for d in sender.datagrams_to_send(0.0)],
        0.001,
    )  # fmt: skip
    answers = receiver.datagrams_to_send(0.001, limit=0)
    assert answers and not _data(answers)
    assert receiver.data_sent_last_call == 0


def test_connections_take_turns_going_first_under_a_limit() -> None:
    endpoint = _sender(qps=2, packets_each=40)
    by_qp: dict[int, int] = {}
    for _ in range(4):
        for datagram in _data(endpoint.datagrams_to_send(0.0, limit=10)):
            qp = int.from_bytes(datagram.payload[5:8], "big")
            by_qp[qp] = by_qp.get(qp, 0) + 1
    assert by_qp == {0x20: 20, 0x21: 20}
