"""Batched datagram calls (``agent.io.mmsg``) and the sender and receiver loops built on them.

What must hold: a batch goes out and comes in exactly as one call per datagram would have
sent and received it (bytes, order, source, DSCP/ECN, destination); a full socket buffer stops
a batch at the first datagram it refused, which is offered again later; any other error
drops and counts that one datagram alone. Loopback UDP needs no privilege; the raw-socket
test needs root and skips without it.
"""

from __future__ import annotations

import errno
import os
import socket
import struct

import pytest

from agent.core import IncomingDatagram, IpContext, OutgoingDatagram
from agent.io import mmsg
from agent.io.linux import IP_PKTINFO, IP_RECVTOS, IP_TOS_CMSG
from agent.io.raw_sender import RawSender, sockaddr
from agent.io.udp_receiver import MAX_DATAGRAM, UdpReceiver
from wire.constants import ECN_ECT0

LOOPBACK = bytes([127, 0, 0, 1])
needs_mmsg = pytest.mark.skipif(
    mmsg._SENDMMSG is None or mmsg._RECVMMSG is None, reason="no sendmmsg/recvmmsg in libc"
)


def _udp_socket(tos_and_pktinfo: bool = False) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if tos_and_pktinfo:
        sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
        sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def _fill(batch: mmsg.SendBatch, slot: int, data: bytes, name: bytes) -> None:
    start = slot * batch.slot_size
    batch.buffer[start : start + len(data)] = data
    batch.set_length(slot, len(data))
    batch.set_name(slot, name)


def _port_name(port: int) -> bytes:
    return struct.pack("=H", socket.AF_INET) + struct.pack(">H", port) + LOOPBACK + bytes(8)


@needs_mmsg
def test_one_sendmmsg_and_one_recvmmsg_move_a_batch_in_order_with_lengths_and_sources():
    receiver, sender = _udp_socket(), _udp_socket()
    try:
        batch = mmsg.SendBatch(slots=8, slot_size=256)
        name = _port_name(receiver.getsockname()[1])
        datagrams = [bytes([i]) * (10 + i) for i in range(8)]
        for slot, data in enumerate(datagrams):
            _fill(batch, slot, data, name)
        assert batch.flush(sender.fileno(), 8) == (8, 0)
        incoming = mmsg.ReceiveBatch(slots=16, slot_size=256)
        assert incoming.receive(receiver.fileno(), 16) == 8
        for slot, data in enumerate(datagrams):
            start = slot * incoming.slot_size
            length = incoming.length(slot)
            assert bytes(incoming.data[start : start + length]) == data
            source = incoming.name(slot)
            assert len(source) == 16  # sockaddr_in
            assert int.from_bytes(source[2:4], "big") == sender.getsockname()[1]
            assert bytes(source[4:8]) == LOOPBACK
        assert incoming.receive(receiver.fileno(), 16) == 0  # empty: 0, no exception
    finally:
        receiver.close()
        sender.close()


@needs_mmsg
def test_a_receive_batch_reads_at_most_limit_datagrams_and_flags_a_truncated_one():
    receiver, sender = _udp_socket(), _udp_socket()
    try:
        for size in (5, 300, 7):
            sender.sendto(b"z" * size, receiver.getsockname())
        incoming = mmsg.ReceiveBatch(slots=4, slot_size=100)
        assert incoming.receive(receiver.fileno(), 1) == 1
        assert incoming.length(0) == 5
        assert incoming.receive(receiver.fileno(), 4) == 2
        assert incoming.flags(0) & socket.MSG_TRUNC
        assert not incoming.flags(1) & socket.MSG_TRUNC and incoming.length(1) == 7
    finally:
        receiver.close()
        sender.close()


@needs_mmsg
def test_control_messages_split_as_recvmsg_gives_them():
    receiver, sender = _udp_socket(tos_and_pktinfo=True), _udp_socket()
    try:
        sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, (46 << 2) | ECN_ECT0)
        sender.sendto(b"a", receiver.getsockname())
        sender.sendto(b"b", receiver.getsockname())
        _data, expected, _flags, _address = receiver.recvmsg(16, 256)
        incoming = mmsg.ReceiveBatch(slots=2, slot_size=16, control_size=256)
        assert incoming.receive(receiver.fileno(), 2) == 1
        control = incoming.control_bytes(0)
        assert mmsg.split_control(control) == expected
        kinds = {(level, kind) for level, kind, _ in expected}
        assert (socket.IPPROTO_IP, IP_TOS_CMSG) in kinds
        assert (socket.IPPROTO_IP, IP_PKTINFO) in kinds
    finally:
        receiver.close()
        sender.close()


def test_split_control_ignores_a_truncated_trailing_message():
    header = struct.Struct(f"={mmsg._SIZE_T_CHAR}ii")
    whole = header.pack(header.size + 1, 0, 1) + b"\x07" + bytes(7)  # padded to alignment
    broken = header.pack(header.size + 40, 0, 2) + b"\x00" * 4
    assert mmsg.split_control(whole + broken) == [(0, 1, b"\x07")]


class _Calls:
    """A stand-in for sendmmsg: takes ``plan[i]`` messages on call i (a negative entry fails
    that call with that errno), recording where each call started."""

    def __init__(self, batch: mmsg.SendBatch, plan: list[int]) -> None:
        self.batch = batch
        self.plan = plan
        self.starts: list[int] = []

    def __call__(self, _fd: int, vector: int, count: int, _flags: int) -> int:
        self.starts.append((vector - self.batch._vector) // mmsg.MMSGHDR_SIZE)
        step = self.plan.pop(0)
        if step < 0:
            import ctypes

            ctypes.set_errno(-step)
            return -1
        return min(step, count)


def test_flush_calls_again_after_a_partial_send_and_stops_at_the_error_that_follows():
    batch = mmsg.SendBatch(slots=8, slot_size=16)
    calls = _Calls(batch, [3, 2, -errno.EAGAIN])
    batch._call = calls
    assert batch.flush(-1, 8) == (5, errno.EAGAIN)
    assert calls.starts == [0, 3, 5]


def test_flush_from_a_later_slot_starts_there_and_retries_an_interrupted_call():
    batch = mmsg.SendBatch(slots=8, slot_size=16)
    calls = _Calls(batch, [-errno.EINTR, 8])
    batch._call = calls
    assert batch.flush(-1, 8, start=6) == (2, 0)
    assert calls.starts == [6, 6]


class _FakeRawSocket:
    def fileno(self) -> int:
        return -1

    def close(self) -> None:
        pass


def _datagram(payload: bytes, src_port: int = 0xC000) -> OutgoingDatagram:
    ip = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))
    return OutgoingDatagram(payload, ip, 0, src_port, 0, 4, ECN_ECT0)


def _batched_sender(plan: list[int]) -> tuple[RawSender, _Calls]:
    sender = RawSender(batch=True)
    sender._v4 = _FakeRawSocket()  # type: ignore[assignment]
    assert sender._batch is not None
    calls = _Calls(sender._batch, plan)
    sender._batch._call = calls
    return sender, calls


def test_send_many_stops_at_the_first_datagram_a_full_buffer_refuses():
    sender, _calls = _batched_sender([2, -errno.EAGAIN])
    datagrams = [_datagram(bytes([i]) * 20) for i in range(5)]
    assert sender.send_many(datagrams) == 2
    assert sender.sent == 2 and sender.send_errors == {}


def test_send_many_drops_and_counts_a_datagram_the_kernel_rejects_and_sends_the_rest():
    sender, calls = _batched_sender([1, -errno.EMSGSIZE, 3])
    datagrams = [_datagram(bytes([i]) * 20) for i in range(5)]
    assert sender.send_many(datagrams) == 5
    assert sender.sent == 4
    assert sender.send_errors == {"EMSGSIZE": 1}
    assert calls.starts == [0, 1, 2]


def test_send_many_fills_more_than_one_batch_when_given_more_than_a_batch():
    sender, calls = _batched_sender([64, 36])
    datagrams = [_datagram(b"d" * 10) for _ in range(100)]
    assert sender.send_many(datagrams, start=0) == 100
    assert sender.sent == 100 and len(calls.starts) == 2


def test_a_batch_slot_holds_the_ipv4_header_the_single_send_writes():
    sender, _calls = _batched_sender([1])
    datagram = _datagram(b"payload!", src_port=0xBEEF)
    sender.send_many([datagram])
    batch = sender._batch
    assert batch is not None
    written = bytes(batch.buffer[: 28 + 8])
    from agent.io.raw_sender import ipv4_udp_header

    assert written == ipv4_udp_header(datagram) + b"payload!"
    assert batch.slot_names[0] == sockaddr(datagram.ip.dst)


def _drain_all(receiver: UdpReceiver) -> list[IncomingDatagram]:
    got: list[IncomingDatagram] = []
    receiver.drain(receiver.sockets[0], got.append, 1000)
    return got


@needs_mmsg
@pytest.mark.parametrize("tos", [0, (46 << 2), (4 << 2) | ECN_ECT0])
def test_the_batched_receive_loop_hands_over_what_the_plain_one_does(tos):
    sender = _udp_socket()
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    plain = UdpReceiver(ipv4=True, ipv6=False, port=0, batch=False)
    batched = UdpReceiver(ipv4=True, ipv6=False, port=0, batch=True)
    try:
        payloads = [os.urandom(50 + i) for i in range(70)]  # more than one batch
        results = []
        for receiver in (plain, batched):
            receiver.port = receiver.sockets[0].getsockname()[1]
            for payload in payloads:
                sender.sendto(payload, ("127.0.0.1", receiver.port))
            results.append(_drain_all(receiver))
        plain_got, batched_got = results
        assert [d.payload for d in batched_got] == payloads
        for a, b in zip(plain_got, batched_got, strict=True):
            assert (a.payload, a.ip, a.src_port, a.dscp, a.ecn, a.flow_label) == (
                b.payload,
                b.ip,
                b.src_port,
                b.dscp,
                b.ecn,
                b.flow_label,
            )
        assert batched_got[0].ip == IpContext(src=LOOPBACK, dst=LOOPBACK)
        assert (batched_got[0].dscp, batched_got[0].ecn) == (tos >> 2, tos & 3)
        assert batched.received == len(payloads)
    finally:
        sender.close()
        plain.close()
        batched.close()


@needs_mmsg
def test_one_unpack_reads_every_header_of_a_batch_as_the_per_slot_reads_do():
    receiver, sender = _udp_socket(), _udp_socket()
    try:
        for size in (5, 300, 7, 64):
            sender.sendto(b"z" * size, receiver.getsockname())
        incoming = mmsg.ReceiveBatch(slots=8, slot_size=100)
        assert incoming.receive(receiver.fileno(), 8) == 4
        values = mmsg.results(4).unpack_from(incoming.headers, mmsg.RESULT_OFFSET)
        assert values == tuple(
            value
            for slot in range(4)
            for value in (
                incoming.control_length(slot),
                incoming.flags(slot),
                incoming.length(slot),
            )
        )
        assert values[4] & socket.MSG_TRUNC  # the 300-byte one, cut to its 100-byte slot
    finally:
        receiver.close()
        sender.close()


@needs_mmsg
def test_the_batched_loop_keeps_each_datagrams_own_source_and_drops_a_too_long_one():
    senders = [_udp_socket() for _ in range(3)]
    receiver = UdpReceiver(ipv4=True, ipv6=False, port=0, batch=True)
    try:
        receiver.port = receiver.sockets[0].getsockname()[1]
        sent: list[tuple[bytes, int]] = []
        for i in range(140):  # more than two batches, three sources taking turns
            sender = senders[i % 3]
            if i == 70:
                sender.sendto(b"x" * (MAX_DATAGRAM + 1), ("127.0.0.1", receiver.port))
            payload = os.urandom(40 + i)
            sender.sendto(payload, ("127.0.0.1", receiver.port))
            sent.append((payload, sender.getsockname()[1]))
        got = _drain_all(receiver)
        assert [(d.payload, d.src_port) for d in got] == sent
        assert receiver.drops == {"longer than MAX_DATAGRAM": 1}
        assert receiver.received == len(sent)
    finally:
        for sender in senders:
            sender.close()
        receiver.close()


@needs_mmsg
@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
def test_send_many_over_a_raw_socket_delivers_every_datagram_in_order_with_its_tos():
    receiver = UdpReceiver(ipv4=True, ipv6=False, port=0, batch=True)
    sender = RawSender(batch=True)
    sender.open(ipv4=True, ipv6=False)
    try:
        port = receiver.sockets[0].getsockname()[1]
        receiver.port = port
        ip = IpContext(src=LOOPBACK, dst=LOOPBACK)
        datagrams = [
            OutgoingDatagram(bytes([i]) * 100, ip, 0, 0xC000 + i, 0, 4, ECN_ECT0, dst_port=port)
            for i in range(100)
        ]
        assert sender.send_many(datagrams) == 100
        got = _drain_all(receiver)
        assert [d.payload for d in got] == [d.payload for d in datagrams]
        assert [d.src_port for d in got] == [0xC000 + i for i in range(100)]
        assert {(d.dscp, d.ecn) for d in got} == {(4, ECN_ECT0)}
    finally:
        sender.close()
        receiver.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="raw sockets need root")
@pytest.mark.parametrize("batch", [False, True])
def test_an_ipv6_datagram_with_a_zero_udp_checksum_is_received(batch):
    """A switch zeroes the UDP checksum of a packet it trims; over IPv6 the kernel drops such a
    datagram unless the socket accepts it, and the trimmed header is what tells the receiver
    of the loss."""
    receiver = UdpReceiver(ipv4=False, ipv6=True, port=0, batch=batch)
    raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_UDP)
    try:
        receiver.port = receiver.sockets[0].getsockname()[1]
        payload = b"trimmed header"
        header = struct.pack(">HHHH", 0xC001, receiver.port, 8 + len(payload), 0)
        raw.sendto(header + payload, ("::1", 0))
        got = _drain_all(receiver)
        assert [d.payload for d in got] == [payload]
        assert got[0].src_port == 0xC001
    finally:
        raw.close()
        receiver.close()
