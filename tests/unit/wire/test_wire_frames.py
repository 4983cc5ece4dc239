"""Frame constructors: the envelope (EV, DSCP, ECN, IP fields) and each header's arguments."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from wire.constants import (
    CC_FLAG_ECN_ECHO,
    ECN_ECT0,
    ECN_NOT_ECT,
    ROCEV2_UDP_PORT,
    DscpClass,
    NackReason,
    Opcode,
    SackSkipMode,
)
from wire.frames import (
    Envelope,
    ev_of,
    mrc_data_packet,
    mrc_nack,
    mrc_sack,
    traffic_class,
)
from wire.layers import MrcBTH, MrcNETH, MrcRETH, MrcSETH, MrcTSETH

DATA_KINDS = {
    "write_first",
    "write_middle_timestamped",
    "write_last",
    "write_last_imm",
    "write_only",
    "write_only_imm",
}


def tos_of(frame) -> int:
    return frame[IP].tos if frame.haslayer(IP) else frame[IPv6].tc


def test_every_frame_goes_to_udp_4791_from_the_source_port_of_its_ev(frames_by_kind, envelope):
    for kind, frame in frames_by_kind.items():
        wire = Ether(bytes(frame))
        assert wire[UDP].dport == ROCEV2_UDP_PORT, kind
        assert wire[UDP].sport == envelope.ev >> 16, kind
        assert ev_of(wire) == envelope.ev, kind


def test_over_ipv6_the_flow_label_carries_the_low_half_of_the_ev():
    envelope = Envelope(src_ip="fd00::1", dst_ip="fd00::2", ev=0xABCD_1234)
    wire = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=1)))
    assert wire[IPv6].fl == 0x1234
    assert wire[UDP].sport == 0xABCD


def test_an_ipv4_ev_with_a_low_half_is_refused_rather_than_silently_cut():
    with pytest.raises(ValueError, match="bits 15-0"):
        Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0xABCD_0001)


def test_data_is_trimmable_and_ect0_control_is_control_and_not_ect(frames_by_kind):
    for kind, frame in frames_by_kind.items():
        tos = tos_of(Ether(bytes(frame)))
        if kind == "write_last":  # the retransmission
            assert tos == traffic_class(DscpClass.TRIMMABLE_RETX, ECN_ECT0), kind
        elif kind in DATA_KINDS:
            assert tos == traffic_class(DscpClass.TRIMMABLE, ECN_ECT0), kind
        else:
            assert tos == traffic_class(DscpClass.CONTROL, ECN_NOT_ECT), kind


def test_a_retransmission_sets_the_rtx_flag(frames_by_kind):
    assert Ether(bytes(frames_by_kind["write_last"]))[MrcBTH].rtx == 1
    assert Ether(bytes(frames_by_kind["write_first"]))[MrcBTH].rtx == 0


def test_the_envelope_can_override_dscp_and_ecn():
    envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=1 << 16, dscp=40, ecn=1)
    wire = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=1)))
    assert wire[IP].tos == (40 << 2) | 1


def test_ipv4_frames_carry_id_0_and_dont_fragment_as_the_agent_sends_them():
    envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=1 << 16)
    wire = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=1)))
    assert wire[IP].id == 0
    assert wire[IP].flags == "DF"
    assert wire[IP].ttl == 64


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"src_ip": "10.0.0.1", "dst_ip": "fd00::1"}, "differ in IP version"),
        ({"ev": -1}, "32-bit"),
        ({"ev": 1 << 32}, "32-bit"),
        ({"dscp": 64}, "DSCP 64"),
        ({"ecn": 4}, "ECN 4"),
        ({"ttl": 0}, "TTL 0"),
        ({"src_ip": "not-an-address"}, "does not appear to be an IPv4 or IPv6 address"),
    ],
)
def test_a_bad_envelope_is_refused_with_a_message_naming_the_problem(fields, message):
    arguments = {"src_ip": "fd00::1", "dst_ip": "fd00::2", "ev": 0, **fields}
    with pytest.raises(ValueError, match=message):
        Envelope(**arguments)


def test_a_timestamp_adds_a_tseth_and_sets_the_ts_flag(envelope):
    wire = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=1, tx_ts=0xFFFF)))
    assert wire[MrcBTH].ts == 1
    assert wire[MrcTSETH].tx_ts == 0xFFFF


def test_dma_length_defaults_to_the_payload_length(envelope):
    wire = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=1, payload=b"x" * 37)))
    assert wire[MrcRETH].dma_length == 37


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"opcode": Opcode.SACK}, "not an MRC data opcode"),
        ({"opcode": Opcode.WRITE_ONLY_IMM}, "immediate"),
        ({"opcode": Opcode.WRITE_ONLY, "imm": 5}, "immediate"),
        ({"psn": 1 << 24}, "24-bit PSN"),
        ({"tx_ts": 1 << 16}, "16-bit timestamp"),
    ],
)
def test_a_data_packet_with_inconsistent_arguments_is_refused(envelope, arguments, message):
    with pytest.raises(ValueError, match=message):
        mrc_data_packet(envelope, **{"dqpn": 1, "psn": 1, **arguments})


def test_sack_and_nack_carry_the_ecn_echo_in_cc_flags_bit_0(envelope):
    sack = mrc_sack(envelope, dqpn=1, psn=1, cum_ack_psn=1, entropy=2, ecn_echo=True)
    nack = mrc_nack(
        envelope, dqpn=1, psn=1, nack_psn=1, reason=NackReason.TRIMMED, entropy=2, ecn_echo=True
    )
    quiet = mrc_sack(envelope, dqpn=1, psn=1, cum_ack_psn=1, entropy=2)
    assert Ether(bytes(sack))[MrcSETH].cc_flags == CC_FLAG_ECN_ECHO
    assert Ether(bytes(nack))[MrcNETH].cc_flags == CC_FLAG_ECN_ECHO
    assert Ether(bytes(quiet))[MrcSETH].cc_flags == 0


def test_sack_skip_mode_lands_in_the_m_field(envelope):
    sack = mrc_sack(
        envelope, dqpn=1, psn=1, cum_ack_psn=1, entropy=2, skip_mode=SackSkipMode.ALWAYS_SKIP
    )
    assert Ether(bytes(sack))[MrcSETH].m == SackSkipMode.ALWAYS_SKIP


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cum_ack_psn": 1 << 24}, "cum_ack_psn"),
        ({"echoed_tx_ts": 1 << 16}, "echoed_tx_ts"),
        ({"psn": -1}, "psn"),
    ],
)
def test_a_sack_with_an_out_of_range_field_is_refused(envelope, arguments, message):
    with pytest.raises(ValueError, match=message):
        mrc_sack(envelope, **{"dqpn": 1, "psn": 1, "cum_ack_psn": 1, "entropy": 2, **arguments})
