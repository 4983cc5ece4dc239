"""The MRC scapy layers: what importing ``wire.layers`` makes scapy build and dissect."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib import roce
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from wire.constants import (
    BTH_LEN,
    CC_STATE_LEN,
    EPH_LEN,
    ICRC_LEN,
    MAX_EV_PROBE_ANSWERS,
    METH_LEN,
    NETH_LEN,
    RETH_LEN,
    ROCEV2_UDP_PORT,
    SETH_LEN,
    TSETH_LEN,
    EpType,
    Opcode,
)
from wire.entropy import ev_from_headers
from wire.frames import (
    DEFAULT_DST_MAC,
    DEFAULT_SRC_MAC,
    Envelope,
    mrc_data_packet,
    mrc_ep_response,
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
    icrc_matches,
)

EXPECTED_CHAINS = {
    "write_first": [MrcBTH, MrcMETH, MrcRETH, Raw],
    "write_middle_timestamped": [MrcBTH, MrcMETH, MrcTSETH, MrcRETH, Raw],
    "write_last": [MrcBTH, MrcMETH, MrcRETH, Raw],
    "write_last_imm": [MrcBTH, MrcMETH, MrcTSETH, MrcRETH, MrcImmDt, Raw],
    "write_only": [MrcBTH, MrcMETH, MrcRETH, Raw],
    "write_only_imm": [MrcBTH, MrcMETH, MrcRETH, MrcImmDt],
    "ack": [MrcBTH, AETH],
    "sack": [MrcBTH, MrcSETH, MrcCCState],
    "nack": [MrcBTH, MrcNETH],
    "reliability_probe": [MrcBTH],
    "ep_request": [MrcBTH, MrcEPH],
    "ep_response": [MrcBTH, MrcEPH],
}


def mrc_chain(frame: Packet) -> list[type[Packet]]:
    """The classes of the layers from the BTH on."""
    layer = frame[MrcBTH]
    chain = []
    while layer:
        chain.append(type(layer))
        layer = layer.payload
    return chain


def field_values(frame: Packet) -> dict[str, object]:
    """Every field of every layer from the BTH on, keyed ``Layer.field``."""
    values: dict[str, object] = {}
    layer = frame[MrcBTH]
    while layer:
        for name in layer.fields:
            values[f"{type(layer).__name__}.{name}"] = layer.getfieldval(name)
        layer = layer.payload
    return values


def test_header_sizes_match_the_wire_format():
    assert len(MrcBTH(icrc=0)) == BTH_LEN + ICRC_LEN
    assert len(MrcMETH()) == METH_LEN
    assert len(MrcTSETH()) == TSETH_LEN
    assert len(MrcRETH()) == RETH_LEN
    assert len(MrcSETH()) == SETH_LEN
    assert len(MrcCCState()) == CC_STATE_LEN
    assert len(MrcNETH()) == NETH_LEN
    assert len(MrcEPH()) == EPH_LEN


def test_every_packet_kind_dissects_into_the_headers_its_opcode_calls_for(frames_by_kind):
    for kind, frame in frames_by_kind.items():
        dissected = Ether(bytes(frame))
        assert mrc_chain(dissected) == EXPECTED_CHAINS[kind], kind


def test_every_packet_kind_round_trips_field_for_field_and_byte_for_byte(frames_by_kind, randomise):
    rng = random.Random(4791)
    for kind, frame in frames_by_kind.items():
        original = randomise(frame, rng)
        wire = bytes(original)
        dissected = Ether(wire)
        expected = {
            key: value
            for key, value in field_values(original).items()
            if value is not None  # ICRC and TS: computed on build
        }
        got = field_values(dissected)
        assert {key: got.get(key) for key in expected} == expected, kind
        assert bytes(dissected) == wire, kind


def test_bth_keeps_the_rocev2_byte_layout_so_a_standard_bth_reads_opcode_qp_and_psn(
    frames_by_kind,
):
    for kind, frame in frames_by_kind.items():
        wire = bytes(frame)
        mrc = bytes(Ether(wire)[UDP].payload)
        standard = roce.BTH(mrc)
        assert standard.opcode == frame[MrcBTH].opcode, kind
        assert standard.dqpn == frame[MrcBTH].dqpn, kind
        assert standard.psn == frame[MrcBTH].psn, kind
        assert standard.pkey == 0xFFFF, kind


def test_bth_byte_8_carries_a_r_rtx_ts_from_the_most_significant_bit():
    bth = bytes(MrcBTH(ackreq=1, r=0, rtx=1, ts=1, resv4=0, icrc=0))
    assert bth[8] == 0b1011_0000
    assert bytes(MrcBTH(r=1, ts=0, icrc=0))[8] == 0b0100_0000


def test_ts_flag_is_set_on_build_when_a_tseth_follows_and_clear_otherwise():
    with_tseth = MrcBTH(icrc=0) / MrcMETH() / MrcTSETH() / MrcRETH()
    without = MrcBTH(icrc=0) / MrcMETH() / MrcRETH()
    assert MrcBTH(bytes(with_tseth)).ts == 1
    assert MrcBTH(bytes(without)).ts == 0


def test_an_explicit_ts_flag_is_kept_even_when_it_contradicts_the_headers():
    lying = MrcBTH(ts=0, icrc=0) / MrcMETH() / MrcTSETH(tx_ts=0x1111) / MrcRETH()
    dissected = MrcBTH(bytes(lying))
    assert dissected.ts == 0
    assert MrcTSETH not in dissected  # read as RETH: the flag, not the builder, decides


def test_stacking_an_extension_header_on_a_bth_sets_the_opcode_it_is_bound_to():
    assert (MrcBTH() / MrcSETH()).opcode == Opcode.SACK
    assert (MrcBTH() / MrcNETH()).opcode == Opcode.NACK
    assert (MrcBTH() / AETH()).opcode == Opcode.ACK
    assert (MrcBTH() / MrcEPH()).opcode == Opcode.EP_REQUEST
    assert (MrcBTH() / MrcMETH()).opcode == Opcode.WRITE_ONLY


def test_udp_4791_dissects_as_mrc_on_any_ev_even_a_well_known_source_port():
    for source_port in (53, 67, 123, 161, 4789, 4791, 6081, 65535):
        envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=ev_from_headers(source_port))
        frame = Ether(bytes(mrc_data_packet(envelope, dqpn=1, psn=2, payload=b"x")))
        assert frame[UDP].sport == source_port
        assert mrc_chain(frame) == [MrcBTH, MrcMETH, MrcRETH, Raw], source_port


def test_binding_another_layer_to_port_4791_later_does_not_take_mrc_dissection_away():
    class Impostor(Packet):
        name = "impostor"

    bind_layers(UDP, Impostor, dport=ROCEV2_UDP_PORT)
    try:
        frame = Ether(
            bytes(
                Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
                / IP()
                / UDP(sport=1000)
                / MrcBTH(opcode=0xDE)
            )
        )
        assert frame.haslayer(MrcBTH)
        assert not frame.haslayer(Impostor)
    finally:
        UDP.payload_guess = [entry for entry in UDP.payload_guess if entry[1] is not Impostor]


def test_unknown_opcode_leaves_the_rest_of_the_packet_as_raw_bytes():
    # an opcode of MRC's range MRC does not define (standard opcodes are RoCE's, see
    # test_wire_roce_layers.py)
    frame = (
        Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
        / IP()
        / UDP(sport=1000)
        / MrcBTH(opcode=0xF0)
        / Raw(b"\xaa" * 6)
    )
    dissected = Ether(bytes(frame))
    assert dissected[MrcBTH].opcode == 0xF0
    assert dissected[Raw].load == b"\xaa" * 6


@pytest.mark.parametrize("cut", [1, 7, BTH_LEN + 3, BTH_LEN + 10])
def test_a_truncated_mrc_packet_dissects_without_raising_and_keeps_its_bytes(cut):
    wire = bytes(
        Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
        / IP()
        / UDP(sport=1000)
        / MrcBTH(opcode=Opcode.SACK)
        / MrcSETH(cum_ack_psn=5)
        / MrcCCState()
    )
    truncated_wire = wire[: 14 + 20 + 8 + cut]
    truncated = Ether(truncated_wire)
    assert bytes(truncated) == truncated_wire


@settings(max_examples=60, deadline=None)
@given(
    opcode=st.sampled_from(sorted(int(op) for op in Opcode)),
    dqpn=st.integers(0, 0xFFFFFF),
    psn=st.integers(0, 0xFFFFFF),
    flags=st.tuples(*[st.integers(0, 1)] * 3),
    body=st.binary(max_size=64),
)
def test_any_bth_round_trips_over_udp(opcode, dqpn, psn, flags, body):
    ackreq, r, rtx = flags
    frame = (
        Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC)
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / UDP(sport=0xC000)
        / MrcBTH(opcode=opcode, dqpn=dqpn, psn=psn, ackreq=ackreq, r=r, rtx=rtx, ts=0)
        / Raw(body)
    )
    wire = bytes(frame)
    bth = Ether(wire)[MrcBTH]
    assert (bth.opcode, bth.dqpn, bth.psn) == (opcode, dqpn, psn)
    assert (bth.ackreq, bth.r, bth.rtx, bth.ts) == (ackreq, r, rtx, 0)
    assert bytes(Ether(wire)) == wire


@settings(max_examples=60, deadline=None)
@given(
    cum_ack_psn=st.integers(0, 0xFFFFFF),
    ack_psn_offset=st.integers(-(2**15), 2**15 - 1),
    sack_offset=st.integers(-(2**15), 2**15 - 1),
    bitmap=st.integers(0, 2**64 - 1),
    entropy=st.integers(0, 2**32 - 1),
    m=st.integers(0, 3),
    ooo=st.integers(0, 2**15 - 1),
    pen=st.integers(0, 127),
    received=st.integers(0, 2**24 - 1),
)
def test_any_sack_round_trips_including_signed_offsets(
    cum_ack_psn, ack_psn_offset, sack_offset, bitmap, entropy, m, ooo, pen, received
):
    sent = MrcSETH(
        cum_ack_psn=cum_ack_psn,
        ack_psn_offset=ack_psn_offset,
        sack_offset=sack_offset,
        sack_bitmap=bitmap,
        entropy=entropy,
        m=m,
    ) / MrcCCState(ooo_count=ooo, rcv_cwnd_pen=pen, received_bytes=received)
    got = MrcSETH(bytes(sent))
    assert (got.cum_ack_psn, got.ack_psn_offset, got.sack_offset) == (
        cum_ack_psn,
        ack_psn_offset,
        sack_offset,
    )
    assert (got.sack_bitmap, got.entropy, got.m) == (bitmap, entropy, m)
    cc = got[MrcCCState]
    assert (cc.ooo_count, cc.rcv_cwnd_pen, cc.received_bytes) == (ooo, pen, received)


def test_seth_bytes_sit_at_the_offsets_the_notes_give():
    seth = bytes(
        MrcSETH(
            type=0xA,
            next=0x1F,
            m=2,
            pr=1,
            ack_psn_offset=-1,
            entropy=0x11223344,
            src_pdc_id=0x5566,
            dst_pdc_id=0x7788,
            cum_ack_psn=0xABCDEF,
            cc_type=0x9,
            cc_flags=0x1,
            mpr=0x42,
            sack_offset=-2,
            sack_bitmap=0x0102030405060708,
        )
    )
    assert seth[0:2] == bytes([0xAF, 0xD0])  # 1010 11111 10 1 0000
    assert seth[2:4] == b"\xff\xff"
    assert seth[4:8] == bytes.fromhex("11223344")
    assert seth[8:12] == bytes.fromhex("55667788")
    assert seth[12:16] == bytes.fromhex("00abcdef")
    assert seth[16:18] == bytes([0x91, 0x42])
    assert seth[18:20] == b"\xff\xfe"
    assert seth[20:28] == bytes.fromhex("0102030405060708")


def test_neth_and_cc_state_bytes_sit_at_the_offsets_the_notes_give():
    neth = bytes(
        MrcNETH(
            type=0x3,
            next=0x1,
            reason=0x0B,
            vendor=0xEE,
            entropy=0xDEADBEEF,
            src_pdc_id=1,
            dst_pdc_id=2,
            nack_psn=0x010203,
            cc_type=0xF,
            cc_flags=0x1,
            tx_ts=0x1234,
        )
    )
    assert neth.hex() == "30800beedeadbeef0001000200010203f1001234"
    cc = bytes(
        MrcCCState(echoed_tx_ts=0xABCD, ooo_count=3, r_c=1, rcv_cwnd_pen=5, received_bytes=0x0A0B0C)
    )
    assert cc.hex() == "abcd0003850a0b0c"


def test_an_ev_probe_response_dissects_each_answer_it_carries_as_an_eph():
    envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0x1234_0000)
    answers = [(2, 0xC002_0000), (3, 0xC003_0000)]
    built = mrc_ep_response(
        envelope, dqpn=5, ep_type=EpType.EV_PROBE, seq=1, value=0xC001_0000, more_answers=answers
    )
    frame = Ether(bytes(built))
    assert mrc_chain(frame) == [MrcBTH, MrcEPH, MrcEPH, MrcEPH]
    layer, seen = frame[MrcEPH], []
    while layer:
        seen.append((layer.seq, layer.value))
        layer = layer.payload
    assert seen == [(1, 0xC001_0000), *answers]
    assert icrc_matches(frame)


@pytest.mark.parametrize(
    ("ep_type", "answers"),
    [(EpType.PORT_STATUS, [(2, 3)]), (EpType.EV_PROBE, [(2, 3)] * MAX_EV_PROBE_ANSWERS)],
    ids=["port status", "too many"],
)
def test_building_a_response_refuses_answers_it_cannot_carry(ep_type, answers):
    envelope = Envelope(src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=0x1234_0000)
    with pytest.raises(ValueError, match="answers"):
        mrc_ep_response(envelope, dqpn=5, ep_type=ep_type, seq=1, value=2, more_answers=answers)


def test_eph_is_type_flags_seq_value():
    assert bytes(MrcEPH(type=2, flags=0x80, seq=0x0102, value=0xA0B0C0D0)).hex() == (
        "02800102a0b0c0d0"
    )
