"""Sample MRC frames shared by the wire tests: one of every packet kind, over IPv4 and IPv6."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from scapy.fields import ConditionalField, SignedShortField
from scapy.packet import Packet

from wire.constants import EpType, NackReason, Opcode
from wire.frames import (
    Envelope,
    mrc_ack,
    mrc_data_packet,
    mrc_ep_request,
    mrc_ep_response,
    mrc_nack,
    mrc_reliability_probe,
    mrc_sack,
)
from wire.layers import (
    AETH,
    MrcBTH,
    MrcCCState,
    MrcEPH,
    MrcImmDt,
    MrcMETH,
    MrcNETH,
    MrcRETH,
    MrcSETH,
    MrcTSETH,
)

ENVELOPE_V4 = Envelope(src_ip="10.0.1.1", dst_ip="10.0.2.2", ev=0xC0DE0000)
ENVELOPE_V6 = Envelope(src_ip="fd00:1::1", dst_ip="fd00:2::2", ev=0xC0DEBEEF)

#: Every MRC layer, so that tests can walk a packet's MRC headers.
MRC_LAYERS: tuple[type[Packet], ...] = (
    MrcBTH,
    MrcMETH,
    MrcTSETH,
    MrcRETH,
    MrcImmDt,
    AETH,
    MrcSETH,
    MrcCCState,
    MrcNETH,
    MrcEPH,
)

#: Fields that must keep their value for the packet to stay the kind it is.
_STRUCTURAL_FIELDS = {(MrcBTH, "opcode"), (MrcBTH, "ts"), (MrcBTH, "icrc")}


def every_kind(envelope: Envelope) -> dict[str, Packet]:
    """One frame of every MRC packet kind (each data variant too), built with the helpers."""
    return {
        "write_first": mrc_data_packet(
            envelope,
            dqpn=7,
            psn=100,
            opcode=Opcode.WRITE_FIRST,
            payload=b"\x01" * 64,
            msn=3,
            va=0x7F00_0000_1000,
            rkey=0x1234,
            dma_length=4096,
        ),
        "write_middle_timestamped": mrc_data_packet(
            envelope,
            dqpn=7,
            psn=101,
            opcode=Opcode.WRITE_MIDDLE,
            payload=b"\x02" * 33,
            msn=3,
            va=0x7F00_0000_1040,
            rkey=0x1234,
            dma_length=4096,
            tx_ts=0xBEEF,
        ),
        "write_last": mrc_data_packet(
            envelope,
            dqpn=7,
            psn=102,
            opcode=Opcode.WRITE_LAST,
            payload=b"\x03" * 5,
            msn=3,
            rkey=0x1234,
            dma_length=4096,
            retransmission=True,
        ),
        "write_last_imm": mrc_data_packet(
            envelope,
            dqpn=7,
            psn=103,
            opcode=Opcode.WRITE_LAST_IMM,
            payload=b"\x04" * 8,
            msn=4,
            dma_length=4096,
            imm=0xCAFEF00D,
            tx_ts=17,
        ),
        "write_only": mrc_data_packet(
            envelope, dqpn=7, psn=104, payload=b"hello", msn=5, ackreq=True
        ),
        "write_only_imm": mrc_data_packet(
            envelope, dqpn=7, psn=105, opcode=Opcode.WRITE_ONLY_IMM, imm=1, msn=6
        ),
        "ack": mrc_ack(envelope, dqpn=9, psn=200, syndrome=0x1F, msn=0xABCDE),
        "sack": mrc_sack(
            envelope,
            dqpn=9,
            psn=201,
            cum_ack_psn=0xFFFFF0,
            entropy=0xC0DEBEEF,
            sack_bitmap=0x8000_0000_0000_0001,
            sack_offset=-3,
            ack_psn_offset=5,
            ecn_echo=True,
            echoed_tx_ts=0xBEEF,
            received_bytes=0xABCDEF,
            ooo_count=0x7FFF,
            rcv_cwnd_pen=127,
        ),
        "nack": mrc_nack(
            envelope,
            dqpn=9,
            psn=202,
            nack_psn=102,
            reason=NackReason.TRIMMED_LASTHOP,
            entropy=0xC0DE0001,
            tx_ts=4242,
            ecn_echo=True,
        ),
        "reliability_probe": mrc_reliability_probe(envelope, dqpn=9, psn=203),
        "ep_request": mrc_ep_request(
            envelope, dqpn=9, ep_type=EpType.EV_PROBE, seq=77, value=0xC0DE0002
        ),
        "ep_response": mrc_ep_response(
            envelope, dqpn=9, ep_type=EpType.PORT_STATUS, seq=77, value=0b1011
        ),
    }


def randomise_fields(frame: Packet, rng: random.Random) -> Packet:
    """A copy of ``frame`` with every non-structural MRC header field set to a random value.

    Used where a test must show that *each* field survives (a default of 0 would hide a field
    that is never read).
    """
    out = frame.copy()
    for layer_class in MRC_LAYERS:
        layer = out.getlayer(layer_class)
        if layer is None:
            continue
        for field in layer.fields_desc:
            if isinstance(field, ConditionalField) or (layer_class, field.name) in (
                _STRUCTURAL_FIELDS
            ):
                continue
            layer.setfieldval(field.name, _random_value(field, rng))
    return out


def _random_value(field: Any, rng: random.Random) -> int:
    if isinstance(field, SignedShortField):
        return rng.randrange(-(1 << 15), 1 << 15)
    bits = field.size if hasattr(field, "size") else 8 * field.sz  # bit fields have a size
    return rng.randrange(0, 1 << bits)


@pytest.fixture(params=["ipv4", "ipv6"])
def envelope(request: pytest.FixtureRequest) -> Envelope:
    """An IPv4 and an IPv6 envelope: every test that takes it runs over both."""
    return ENVELOPE_V4 if request.param == "ipv4" else ENVELOPE_V6


@pytest.fixture
def frames_by_kind(envelope: Envelope) -> dict[str, Packet]:
    """One frame of every packet kind, in the parametrised envelope."""
    return every_kind(envelope)


@pytest.fixture(scope="session")
def sample_frames() -> list[tuple[str, Packet]]:
    """Every packet kind over IPv4 and over IPv6, labelled ``ipv4/sack`` and so on."""
    return [
        (f"{family}/{kind}", frame)
        for family, env in (("ipv4", ENVELOPE_V4), ("ipv6", ENVELOPE_V6))
        for kind, frame in every_kind(env).items()
    ]


@pytest.fixture(scope="session")
def randomise() -> Callable[[Packet, random.Random], Packet]:
    """``randomise_fields``, for tests that need every header field to carry a distinct value."""
    return randomise_fields
