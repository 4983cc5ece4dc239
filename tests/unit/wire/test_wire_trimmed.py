"""Trimmed packets: headers only, no payload, no ICRC, recognised by their DSCP."""

from __future__ import annotations

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from wire.constants import (
    BTH_LEN,
    ECN_CE,
    IMM_LEN,
    METH_LEN,
    RETH_LEN,
    TSETH_LEN,
    DscpClass,
    Opcode,
)
from wire.frames import Envelope, mrc_data_packet, mrc_sack, trim
from wire.layers import (
    MrcBTH,
    MrcImmDt,
    MrcMETH,
    MrcRETH,
    MrcTSETH,
    carries_icrc,
    icrc_matches,
    is_trimmed,
    set_trimmed_dscps,
    trimmed_dscps,
)

UDP_LEN = 8


def dscp_of(frame) -> int:
    return (frame[IP].tos if frame.haslayer(IP) else frame[IPv6].tc) >> 2


def ecn_of(frame) -> int:
    return (frame[IP].tos if frame.haslayer(IP) else frame[IPv6].tc) & 0x3


def data_frame(envelope: Envelope, **fields):
    defaults = {"dqpn": 7, "psn": 11, "payload": bytes(range(200)), "msn": 2, "va": 0x1000}
    return mrc_data_packet(envelope, **{**defaults, **fields})


def test_a_trimmed_packet_dissects_into_its_headers_with_no_payload_and_no_icrc(envelope):
    cut = Ether(bytes(trim(data_frame(envelope, tx_ts=99))))
    assert is_trimmed(cut[MrcBTH])
    assert not carries_icrc(cut[MrcBTH])
    assert [type(layer) for layer in cut[MrcBTH].iterpayloads()] == [
        MrcBTH,
        MrcMETH,
        MrcTSETH,
        MrcRETH,
    ]
    assert cut[MrcBTH].psn == 11
    assert cut[MrcMETH].msn == 2
    assert cut[MrcTSETH].tx_ts == 99
    assert cut[MrcRETH].va == 0x1000
    assert cut[MrcRETH].dma_length == 200
    assert not cut.haslayer(Raw)


def test_trimming_keeps_the_immediate_of_an_imm_opcode(envelope):
    frame = data_frame(envelope, opcode=Opcode.WRITE_ONLY_IMM, imm=0xFEED)
    cut = Ether(bytes(trim(frame)))
    assert cut[MrcImmDt].imm == 0xFEED
    assert len(cut[UDP].payload) == BTH_LEN + METH_LEN + RETH_LEN + IMM_LEN


def test_trim_mirrors_the_switch_lengths_rewritten_udp_checksum_zero_ecn_kept(envelope):
    frame = data_frame(envelope, tx_ts=1)
    cut = Ether(bytes(trim(frame)))
    headers = BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN
    assert cut[UDP].len == UDP_LEN + headers
    assert cut[UDP].chksum == 0
    if cut.haslayer(IP):
        assert cut[IP].len == 20 + UDP_LEN + headers
    else:
        assert cut[IPv6].plen == UDP_LEN + headers
    assert ecn_of(cut) == ecn_of(Ether(bytes(frame)))


def test_trim_marks_trimmed_in_the_fabric_and_trimmed_lasthop_toward_a_host(envelope):
    frame = data_frame(envelope)
    assert dscp_of(Ether(bytes(trim(frame)))) == DscpClass.TRIMMED
    assert dscp_of(Ether(bytes(trim(frame, last_hop=True)))) == DscpClass.TRIMMED_LASTHOP


def test_trimming_a_ce_marked_packet_keeps_the_mark(envelope):
    frame = mrc_data_packet(
        Envelope(envelope.src_ip, envelope.dst_ip, envelope.ev, ecn=ECN_CE), dqpn=1, psn=1
    )
    assert ecn_of(Ether(bytes(trim(frame)))) == ECN_CE


def test_trimming_leaves_the_original_frame_untouched(envelope):
    frame = data_frame(envelope)
    before = bytes(frame)
    trim(frame)
    assert bytes(frame) == before


def test_trimming_a_dissected_frame_works_like_trimming_a_built_one(envelope):
    frame = data_frame(envelope)
    assert bytes(trim(Ether(bytes(frame)))) == bytes(trim(frame))


def test_only_data_packets_are_trimmed(envelope):
    sack = mrc_sack(envelope, dqpn=1, psn=1, cum_ack_psn=1, entropy=1)
    with pytest.raises(ValueError, match="only data packets"):
        trim(sack)


def test_checking_the_icrc_of_a_trimmed_packet_is_a_clear_error(envelope):
    cut = Ether(bytes(trim(data_frame(envelope))))
    with pytest.raises(ValueError, match="trimmed packet has no ICRC"):
        icrc_matches(cut)


def test_the_trimmed_dscp_values_are_configurable():
    envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0x10000)
    frame = data_frame(envelope)
    defaults = trimmed_dscps()
    set_trimmed_dscps(30, 31)
    try:
        assert trimmed_dscps() == {30, 31}
        cut = Ether(bytes(trim(frame, trimmed_dscp=30, trimmed_lasthop_dscp=31)))
        assert is_trimmed(cut[MrcBTH])
        assert not cut.haslayer(Raw)
        # The default TRIMMED value now means an ordinary packet, which has an ICRC.
        ordinary = Ether(
            bytes(
                mrc_data_packet(
                    Envelope(envelope.src_ip, envelope.dst_ip, envelope.ev, dscp=DscpClass.TRIMMED),
                    dqpn=1,
                    psn=1,
                    payload=b"abc",
                )
            )
        )
        assert carries_icrc(ordinary[MrcBTH])
        assert icrc_matches(ordinary)
    finally:
        set_trimmed_dscps(*sorted(defaults))
    assert trimmed_dscps() == defaults


def test_a_dscp_outside_six_bits_is_refused():
    with pytest.raises(ValueError, match="out of range"):
        set_trimmed_dscps(64, 13)
