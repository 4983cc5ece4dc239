"""The runtime's in-place send path (``agent.core.send_slots``): data packets the core writes
into the transport's send slots (the transport's headers in front of them) reach the peer
intact and in order, also when the socket buffer takes only part of a batch (the rest waits
in the backlog, in order, behind anything already waiting) and when the kernel rejects one
packet (counted, the rest still go)."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from agent.core import IpContext, MrcConfig
from agent.core.data_encoder import DataPacketEncoder
from agent.core.send_slots import SendSlots
from agent.io import mmsg
from agent.io.file_transfer import FileTransfer
from agent.io.inbound import InboundPolicy, SideChannelServer
from agent.io.raw_sender import IPV4_UDP_HEADER_LEN, RawSender, ipv4_udp_header, sockaddr
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import (
    PLANE_A,
    PLANE_B,
    MemoryDatagramIO,
    random_loss,
    run_until,
)
from tests.unit.agent.io.test_mmsg import _Calls, _FakeRawSocket
from tests.unit.agent.io.test_transfers import LOCALHOST
from wire.constants import ROCEV2_UDP_PORT


class SlottedMemoryIO(MemoryDatagramIO):
    """A memory link end that offers send slots; every ``refuse_every``-th ``send_slots``
    takes only the first half of the batch, as a nearly full socket buffer would."""

    def __init__(self, capacity: int = 8, refuse_every: int = 3) -> None:
        super().__init__()
        self.capacity = capacity
        self.refuse_every = refuse_every
        self.calls = 0
        self.slotted = 0

    def make_slots(self, sink: Callable[[SendSlots], None]) -> SendSlots:
        size = 1400
        return SendSlots(
            memoryview(bytearray(self.capacity * size)), size, self.capacity,
            IPV4_UDP_HEADER_LEN, sink,
        )  # fmt: skip

    def send_slots(self, slots: SendSlots) -> int:
        self.calls += 1
        take = slots.count // 2 if self.calls % self.refuse_every == 0 else slots.count
        for slot in range(take):
            self.send(slots.datagram(slot))
        self.slotted += take
        return take


def test_a_file_crosses_a_lossy_link_through_partly_refused_send_slots(tmp_path: Path) -> None:
    client_io, server_io = SlottedMemoryIO(), MemoryDatagramIO()
    client_io.peer, server_io.peer = server_io, client_io
    client_io.drop = random_loss(0.02, seed=3)
    client = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=client_io, seed=1)
    server = AgentRuntime([PLANE_B], MrcConfig(), datagram_io=server_io, seed=2)
    (tmp_path / "out").mkdir()
    side = SideChannelServer(server, LOCALHOST, InboundPolicy(tmp_path / "out", 1 << 24))
    try:
        data = os.urandom(400_000)
        transfer = FileTransfer(
            client, LOCALHOST.__class__("127.0.0.1", side.address.port), data, "slots.bin",
            message_size=64 * 1024,
        )  # fmt: skip
        transfer.start()
        run_until([client, server], lambda: transfer.finished, 60.0)
        assert transfer.error is None
        assert (tmp_path / "out" / "slots.bin").read_bytes() == data
        assert client_io.slotted > 100  # the data went through the slots ...
        assert client_io.calls >= client_io.refuse_every  # ... and some were refused
    finally:
        client.close()
        server.close()


def _filled(slots: SendSlots, count: int) -> SendSlots:
    ip = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))
    encoder = DataPacketEncoder(ip, 0x20)
    for slot in range(count):
        length = encoder.encode_into(
            slots.buffer, slot * slots.slot_size + slots.header_room, 0x07, slot, 1, 0, 0, 1,
            1 << 20, memoryview(bytes([slot]) * 100), None, 0, False, False, 0xC000 + slot,
        )  # fmt: skip
        # TOS 0x12: DSCP 4, ECN 2.
        slots.envelopes[slot].fill(ip, 0, 0xC000 + slot, 0, 4, 2, ROCEV2_UDP_PORT, length)
    slots.count = count
    return slots


def _slotted_sender(plan: list[int]) -> tuple[RawSender, _Calls, SendSlots]:
    sender = RawSender(batch=True)
    sender._v4 = _FakeRawSocket()  # type: ignore[assignment]
    slots = sender.make_slots(lambda _slots: None)
    assert slots is not None and sender._slot_batch is not None
    calls = _Calls(sender._slot_batch, plan)
    sender._slot_batch._call = calls
    return sender, calls, slots


def test_send_slots_stops_at_the_first_packet_a_full_buffer_refuses() -> None:
    sender, _calls, slots = _slotted_sender([2, -errno.EAGAIN])
    _filled(slots, 5)
    assert sender.send_slots(slots) == 2
    assert sender.sent == 2 and sender.send_errors == {}
    assert sender._slot_batch is not None
    assert sender._slot_batch.slot_names[:5] == [sockaddr(bytes([10, 0, 0, 2]))] * 5


def test_send_slots_drops_and_counts_a_packet_the_kernel_rejects_and_sends_the_rest() -> None:
    sender, calls, slots = _slotted_sender([1, -errno.EMSGSIZE, 3])
    _filled(slots, 5)
    assert sender.send_slots(slots) == 5
    assert sender.sent == 4 and sender.send_errors == {"EMSGSIZE": 1}
    assert calls.starts == [0, 1, 2]


def test_the_runtime_keeps_refused_slots_in_order_and_queues_later_ones_behind_them() -> None:
    io = SlottedMemoryIO(capacity=8, refuse_every=1)  # every call takes half
    runtime = AgentRuntime([PLANE_A], MrcConfig(), datagram_io=io, seed=1)
    try:
        slots = runtime._slots
        assert slots is not None
        reference = _filled(_slotted_sender([])[2], 6)
        for _ in range(2):  # the same six packets twice, as if the core had written them
            slots.buffer[: 6 * slots.slot_size] = b"\0" * (6 * slots.slot_size)
            for slot in range(6):
                packet = reference.payload(slot)
                at = slot * slots.slot_size + slots.header_room
                slots.buffer[at : at + len(packet)] = packet
                e = reference.envelopes[slot]
                slots.envelopes[slot].fill(
                    e.ip, 0, e.src_port, e.flow_label, e.dscp, e.ecn, e.dst_port, e.length
                )
            slots.count = 6
            slots.flush()
            assert slots.count == 0
        expected = [reference.datagram(slot) for slot in range(6)]
        # First flush: three sent, three kept; second: queued whole behind them.
        assert io.slotted == 3
        assert list(runtime._backlog) == expected[3:] + expected
    finally:
        runtime.close()


def test_each_slot_names_its_own_destination_across_batches_to_different_peers() -> None:
    sender, _calls, slots = _slotted_sender([64] * 20)
    batch = sender._slot_batch
    assert batch is not None
    peer_b, peer_c = bytes([10, 0, 0, 2]), bytes([10, 0, 0, 3])
    # One context object per path, as the core has; some rounds repeat the previous peer
    # (the names are then already in place), some switch or mix peers.
    context = {d: IpContext(src=bytes([10, 0, 0, 1]), dst=d) for d in (peer_b, peer_c)}
    rounds = [
        [peer_b] * 5, [peer_b] * 5, [peer_b] * 3, [peer_c] * 7, [peer_b] * 2, [peer_b] * 6,
        [peer_b, peer_c, peer_b] + [peer_b] * 3, [peer_c] * 7, [peer_c] * 2,
    ]  # fmt: skip
    for destinations in rounds:
        _filled(slots, len(destinations))
        for slot, destination in enumerate(destinations):
            slots.envelopes[slot].ip = context[destination]
        assert sender.send_slots(slots) == len(destinations)
        assert batch.slot_names[: len(destinations)] == [sockaddr(d) for d in destinations]
        slots.clear()


def test_send_slots_writes_the_single_sends_ipv4_header_and_length_for_each_slot() -> None:
    # The core writes only the MRC datagram and its envelope; the raw sender owns the header
    # room and the iovec lengths, and must produce what its one-datagram path sends.
    sender, _calls, slots = _slotted_sender([5])
    _filled(slots, 5)
    expected = [slots.datagram(slot) for slot in range(5)]
    assert sender.send_slots(slots) == 5
    batch = sender._slot_batch
    assert batch is not None
    for slot, datagram in enumerate(expected):
        packet = ipv4_udp_header(datagram) + datagram.payload
        length = mmsg.IOV_LEN.unpack_from(
            batch.iov_view, slot * mmsg.IOVEC_SIZE + mmsg.IOV_LEN_OFFSET
        )[0]
        start = slot * batch.slot_size
        assert length == len(packet)
        assert bytes(batch.buffer[start : start + length]) == packet
