"""The sender's data path in bursts: cutting many packets in one call is the same as cutting
them one at a time, and the encoder's cached ICRC seeds never go stale.

Both are speed measures (``make bench-agent``); these tests pin that they change no byte and no
piece of accounting on the wire or in the sender.
"""

from __future__ import annotations

import os
import random

import pytest

from agent.core import ConnectionSpec, Endpoint, MrcConfig
from agent.core import data_encoder as data_encoder_module
from agent.core.codec import encode
from agent.core.data_encoder import DataPacketEncoder
from agent.core.datagram import IpContext
from agent.core.messages import SentPacket
from agent.core.packets import DataPacket
from agent.core.stats import RetransmitCause
from wire.constants import DATA_OPCODES, IMM_OPCODES

A, B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])


def _sender_with_messages(config: MrcConfig, sizes: list[int], send_psn: int = 0) -> Endpoint:
    endpoint = Endpoint([A], config, seed=7)
    endpoint.connect(
        ConnectionSpec(local_qp=0x10, remote_qp=0x20, remote_addresses=(B,), send_psn=send_psn)
    )
    for size in sizes:
        endpoint.post_write(0x10, os.urandom(size), 0x1000, 0x55)
    return endpoint


def _record(rec: SentPacket) -> tuple:
    assert rec.entry is not None
    return (
        rec.psn, rec.offset, rec.length, rec.opcode, rec.entry.value, rec.order, rec.ts16,
        rec.sent_time, rec.transmissions, rec.in_flight,
    )  # fmt: skip


def _sender_state(endpoint: Endpoint) -> tuple:
    sender = endpoint._connections[0x10].sender
    c = sender._counters
    recovery = sender.recovery
    return (
        sender._next_psn, sender._una, sender._outstanding, recovery.order,
        sender.bytes_in_flight, recovery.last_send, recovery.last_progress,
        c.data_packets_sent, c.data_bytes_sent, sorted(sender._records), list(recovery.in_flight),
        [(m.next_offset, m.unacked, m.segmented, m.last_psn)
         for m in sender.messages.unconfirmed.values()],
    )  # fmt: skip


@pytest.mark.parametrize("sizes", [[64 * 1024] * 3, [1, 1500, 3000, 0, 77 * 1024], [10] * 40])
@pytest.mark.parametrize("limit", [1, 7, 1000])
def test_a_burst_cuts_the_packets_one_call_per_packet_would_in_the_same_state(sizes, limit):
    config = MrcConfig(ev_set_size=16)
    one_by_one = _sender_with_messages(config, sizes)
    burst = _sender_with_messages(config, sizes)
    singles = []
    for _ in range(limit):
        rec = one_by_one._connections[0x10].sender.next_transmission(0.5)
        if rec is None:
            break
        singles.append(_record(rec))
    batch = [_record(r) for r in burst._connections[0x10].sender.next_transmissions(0.5, limit)]
    assert batch == singles
    assert len(batch) <= limit
    assert _sender_state(burst) == _sender_state(one_by_one)
    # The outstanding bitmap has exactly one bit per record, relative to una.
    sender = burst._connections[0x10].sender
    bits = sum(1 << ((psn - sender._una) & 0xFFFFFF) for psn in sender._records)
    assert sender._outstanding == bits
    assert not sender._records or sender._una == min(sender._records)


def test_a_burst_stops_at_the_congestion_window():
    config = MrcConfig(ev_set_size=256, initial_window=10 * 1024, min_window=1024)
    endpoint = _sender_with_messages(config, [64 * 1024])
    sender = endpoint._connections[0x10].sender
    assert len(sender.next_transmissions(0.0, 1000)) == 10
    assert sender.next_transmissions(0.0, 1000) == []
    assert sender.bytes_in_flight == 10 * 1024


def test_a_burst_sends_retransmissions_first():
    config = MrcConfig(ev_set_size=16)
    endpoint = _sender_with_messages(config, [8 * 1024])
    sender = endpoint._connections[0x10].sender
    first = sender.next_transmissions(0.0, 3)
    sender.recovery.declare_lost(first[1], RetransmitCause.SACK_GAP, 0.1, front=False)
    again = sender.next_transmissions(0.2, 3)
    assert [r.psn for r in again] == [first[1].psn, first[2].psn + 1, first[2].psn + 2]
    assert again[0].transmissions == 2


@pytest.mark.parametrize("v6", [False, True])
def test_one_encoder_over_many_packets_matches_the_reference_codec_each_time(v6, monkeypatch):
    # Few seeds kept, so the table is cleared and refilled during the run as well.
    monkeypatch.setattr(data_encoder_module, "MAX_SEEDS", 5)
    rng = random.Random(3)
    if v6:
        ip = IpContext(src=bytes(range(16)), dst=bytes(range(16, 32)))
    else:
        ip = IpContext(src=A, dst=B)
    encoder = DataPacketEncoder(ip, 0x123456)
    opcodes = sorted(int(op) for op in DATA_OPCODES)
    for _ in range(300):
        opcode = rng.choice(opcodes)
        payload = rng.randbytes(rng.choice([0, 1, 1024, 1024, 700]))
        src_port = rng.choice([0xC000, 0xC001, 0xFFFF, 7])
        imm = rng.getrandbits(32) if opcode in IMM_OPCODES else None
        psn, msn, rqmsn = rng.getrandbits(24), rng.getrandbits(16), rng.getrandbits(16)
        va, rkey, dma = rng.getrandbits(64), rng.getrandbits(32), rng.getrandbits(32)
        ts, ack_req, rtx = rng.getrandbits(16), rng.random() < 0.5, rng.random() < 0.5
        fast = encoder.encode(
            opcode, psn, msn, rqmsn, va, rkey, dma, memoryview(payload), imm, ts, ack_req, rtx,
            src_port,
        )  # fmt: skip
        reference = DataPacket(
            opcode, 0x123456, psn, msn, rqmsn, va, rkey, dma, payload, imm, ts, 0, ack_req, rtx
        )
        assert fast == encode(reference, ip, src_port)


@pytest.mark.parametrize("seed", range(6))
def test_acknowledging_a_sack_in_one_pass_equals_acknowledging_each_packet_alone(seed):
    rng = random.Random(seed)
    config = MrcConfig(ev_set_size=8)
    one_pass = _sender_with_messages(config, [5000, 20 * 1024, 3000])
    each = _sender_with_messages(config, [5000, 20 * 1024, 3000])
    a = one_pass._connections[0x10].sender
    b = each._connections[0x10].sender
    sent_a = a.next_transmissions(0.0, 30)
    b.next_transmissions(0.0, 30)
    una = a._una
    newly = 0
    for index in range(len(sent_a)):
        if rng.random() < 0.6:
            newly |= 1 << index
    acked_a, rack_a = a._acknowledge_all(newly, una, None, 0, 0.001)
    acked_b = 0
    for index in range(len(sent_a)):
        if (newly >> index) & 1:
            rec = b._records.pop((una + index) & 0xFFFFFF)
            acked_b += b._acknowledge(rec, 0.001)
    assert acked_a == acked_b
    assert rack_a == max((r.order for i, r in enumerate(sent_a) if (newly >> i) & 1), default=0)

    def state(sender: object) -> tuple:
        s = sender  # type: ignore[assignment]
        return (
            sorted(s._records), list(s.recovery.in_flight), s.bytes_in_flight,
            s._counters.packets_acked, s._counters.bytes_acked, s.recovery.last_rto_spurious,
            [(m.unacked, m.done) for m in s.messages.unconfirmed.values()],
            len(s.messages._confirm_heap),
            [(slot.current.value, slot.current.outstanding) for slot in s._ev_set._slots],
        )  # fmt: skip

    assert state(a) == state(b)


@pytest.mark.parametrize("send_psn", [0, 0xFFFFF8])  # the second wraps the 24-bit PSN space
def test_bursts_after_partial_acknowledgement_keep_one_outstanding_bit_per_record(send_psn):
    endpoint = _sender_with_messages(MrcConfig(ev_set_size=16), [40 * 1024], send_psn)
    sender = endpoint._connections[0x10].sender
    first = sender.next_transmissions(0.0, 10)
    sender._outstanding &= ~0b11111
    sender._acknowledge_all(0b11111, sender._una, None, 0, 0.001)
    sender._advance_una()
    assert sender._una == first[5].psn
    more = sender.next_transmissions(0.002, 10)
    assert [r.psn for r in more] == [(first[-1].psn + 1 + i) & 0xFFFFFF for i in range(10)]
    bits = sum(1 << ((psn - sender._una) & 0xFFFFFF) for psn in sender._records)
    assert sender._outstanding == bits and len(sender._records) == 15
