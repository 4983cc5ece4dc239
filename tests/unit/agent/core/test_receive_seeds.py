"""The receive path's cached ICRC seeds (``agent.core.codec``): a packet, data or control (a
sender checks a SACK every few packets), is checked against the seed of exactly its own
headers, so caching changes which packets pass in no case.

The seed covers the masked pseudo-header and BTH bytes 0-7; it is looked up by the IP context
object (by identity), the ports, the length and those BTH bytes.
"""

from __future__ import annotations

import random

import pytest

from agent.core import codec
from agent.core.codec import DecodeError, decode, encode
from agent.core.datagram import IpContext
from agent.core.drops import DropReason
from agent.core.icrc import icrc_valid
from agent.core.packets import AckPacket, DataPacket, EndpointMessage, SackPacket
from wire.constants import Opcode

A, B, C = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), bytes([10, 0, 0, 3])


def _packet(psn: int, payload: bytes, qp: int = 0x77) -> DataPacket:
    return DataPacket(
        Opcode.WRITE_MIDDLE, qp, psn, 3, 3, 0x1000 + psn, 0x55, 1 << 20, payload, None, 9
    )


def test_every_packet_of_a_stream_decodes_once_seeds_are_cached_and_corruption_is_caught():
    ip = IpContext(src=A, dst=B)
    rng = random.Random(1)
    for psn in range(200):
        payload = rng.randbytes(rng.choice([1024, 1024, 17]))
        port = rng.choice([0xC000, 0xC001, 0xC002])
        wire = encode(_packet(psn, payload), ip, port)
        assert decode(wire, ip, port) == _packet(psn, payload)
        broken = bytearray(wire)
        broken[rng.randrange(8, len(wire) - 4)] ^= 1 << rng.randrange(8)
        with pytest.raises(DecodeError) as caught:
            decode(bytes(broken), ip, port)
        assert caught.value.reason is DropReason.BAD_ICRC


def test_sacks_decode_with_cached_seeds_and_corruption_is_still_caught():
    ip = IpContext(src=B, dst=A)
    rng = random.Random(2)
    for psn in range(200):
        sack = SackPacket(
            0x77, psn, psn + 1, 0, rng.getrandbits(32), rng.getrandbits(64),
            echoed_timestamp=rng.getrandbits(16), received_bytes=rng.getrandbits(24),
        )  # fmt: skip
        port = rng.choice([0xC000, 0xC001])
        wire = encode(sack, ip, port)
        assert decode(wire, ip, port) == sack
        broken = bytearray(wire)
        broken[rng.choice([5, 6, 7, *range(8, len(wire) - 4)])] ^= 1 << rng.randrange(8)
        with pytest.raises(DecodeError) as caught:
            decode(bytes(broken), ip, port)
        assert caught.value.reason is DropReason.BAD_ICRC
    with pytest.raises(DecodeError):
        decode(encode(sack, ip, 0xC000), IpContext(src=C, dst=A), 0xC000)


def test_control_packets_sent_through_cached_seeds_carry_the_reference_icrc():
    """The encoder takes its control packets' ICRC from the same seed table: every one must
    match ``agent.core.icrc``'s from-scratch computation, first use and cached alike."""
    rng = random.Random(3)
    contexts = [IpContext(src=A, dst=B), IpContext(src=A, dst=C), IpContext(src=B, dst=A)]
    for _ in range(300):
        packet = rng.choice(
            [
                SackPacket(0x77, 1, rng.getrandbits(24), 0, rng.getrandbits(32), 5),
                AckPacket(0x78, rng.getrandbits(24), 0, rng.getrandbits(24)),
                EndpointMessage(0x79, 0, rng.random() < 0.5, 1, rng.getrandbits(16), 7),
            ]
        )
        ip = rng.choice(contexts)
        port = rng.choice([0xC000, 0xC001, 0xC002])
        assert icrc_valid(encode(packet, ip, port), ip, port, 4791)


def test_a_seed_cached_for_one_context_never_passes_a_packet_sent_in_another():
    right = IpContext(src=A, dst=B)
    wire = encode(_packet(5, b"x" * 100), right, 0xC000)
    decode(wire, right, 0xC000)  # its seed is now cached
    for other in (IpContext(src=C, dst=B), IpContext(src=A, dst=B, ip_id=7)):
        with pytest.raises(DecodeError):
            decode(wire, other, 0xC000)
    with pytest.raises(DecodeError):
        decode(wire, right, 0xC001)  # another source port (EV)
    with pytest.raises(DecodeError):
        decode(wire, right, 0xC000, 4792)  # another destination port
    assert decode(wire, IpContext(src=A, dst=B), 0xC000) == _packet(5, b"x" * 100)


def test_the_qp_and_the_bth_start_are_checked_even_with_a_cached_seed():
    ip = IpContext(src=A, dst=B)
    wire = encode(_packet(5, b"y" * 64, qp=0x10), ip, 0xC000)
    decode(wire, ip, 0xC000)
    other_qp = bytearray(wire)
    other_qp[7] ^= 0x01  # QP 0x10 -> 0x11, ICRC unchanged
    with pytest.raises(DecodeError):
        decode(bytes(other_qp), ip, 0xC000)


def test_the_seed_table_is_bounded(monkeypatch):
    monkeypatch.setattr(codec, "MAX_ICRC_SEEDS", 4)
    codec._ICRC_SEEDS.clear()
    ip = IpContext(src=A, dst=B)
    for port in range(0xC000, 0xC000 + 20):
        wire = encode(_packet(1, b"z" * 10), ip, port)
        assert decode(wire, ip, port).psn == 1
        assert len(codec._ICRC_SEEDS) <= 4
