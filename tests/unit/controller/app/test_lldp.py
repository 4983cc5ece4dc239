"""LLDP probe frames: exact round trips, valid 802.1AB framing, and a ProbeDecodeError (never
any other exception) for anything else."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.lldp import (
    LLDPDUChassisID,
    LLDPDUEndOfLLDPDU,
    LLDPDUPortID,
    LLDPDUTimeToLive,
)
from scapy.layers.l2 import Ether

from controller.app.lldp import (
    LLDP_DST_MAC,
    LLDP_ETHERTYPE,
    MIN_FRAME,
    ForeignLldp,
    Probe,
    ProbeDecodeError,
    decode_probe,
    encode_probe,
)

SRC = "02:00:00:01:00:03"
names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60
).filter(lambda s: 1 <= len(s.encode()) <= 254)
probes = st.builds(
    Probe,
    switch=names,
    port=st.integers(0, 0xFFFF),
    nonce=st.integers(0, (1 << 32) - 1),
    sequence=st.integers(0, (1 << 64) - 1),
)


@settings(max_examples=150)
@given(probe=probes)
def test_every_probe_decodes_to_itself(probe):
    assert decode_probe(encode_probe(probe, SRC)) == probe


def test_a_probe_is_a_minimum_size_lldp_frame_to_the_nearest_bridge_address():
    frame = encode_probe(Probe("l1", 3, 7, 42), SRC, ttl_s=2)
    assert len(frame) == MIN_FRAME
    assert frame[:6] == LLDP_DST_MAC
    assert frame[6:12] == bytes.fromhex("020000010003")
    assert struct.unpack("!H", frame[12:14])[0] == LLDP_ETHERTYPE


def test_scapy_reads_the_mandatory_tlvs_of_a_probe():
    frame = Ether(encode_probe(Probe("spine-7", 12, 1, 2), SRC, ttl_s=3))
    assert frame[LLDPDUChassisID].subtype == 7
    assert bytes(frame[LLDPDUChassisID].id) == b"spine-7"
    assert bytes(frame[LLDPDUPortID].id) == b"12"
    assert frame[LLDPDUTimeToLive].ttl == 3
    assert frame.haslayer(LLDPDUEndOfLLDPDU)


@pytest.mark.parametrize("length", range(0, 60))
def test_every_truncation_of_a_probe_is_rejected_cleanly(length):
    frame = encode_probe(Probe("l1", 3, 7, 42), SRC)
    end_of_tlvs = 14 + 4 + 2 + 3 + 2 + 4 + 16 + 2  # chassis "l1", port "3", TTL, org, End
    if length >= end_of_tlvs:
        assert decode_probe(frame[:length]) == Probe("l1", 3, 7, 42)
    else:
        with pytest.raises(ProbeDecodeError):
            decode_probe(frame[:length])


@settings(max_examples=300)
@given(data=st.binary(max_size=120))
def test_arbitrary_bytes_raise_only_probe_decode_error(data):
    with contextlib.suppress(ProbeDecodeError):
        decode_probe(data)


@settings(max_examples=200)
@given(position=st.integers(14, 51), value=st.integers(0, 255))
def test_a_corrupted_probe_decodes_or_raises_probe_decode_error(position, value):
    frame = bytearray(encode_probe(Probe("leaf1", 7, 9, 11), SRC))
    frame[position] = value
    try:
        probe = decode_probe(bytes(frame))
    except ProbeDecodeError:
        return
    assert isinstance(probe, Probe)


def test_lldp_from_another_sender_is_foreign_not_malformed():
    frame = bytes(Ether(dst="01:80:c2:00:00:0e", src=SRC) / _plain_lldp())
    with pytest.raises(ForeignLldp):
        decode_probe(frame)


def _plain_lldp():
    return (
        LLDPDUChassisID(subtype=4, id=b"\x02\x00\x00\x00\x00\x01")
        / LLDPDUPortID(subtype=5, id=b"eth0")
        / LLDPDUTimeToLive(ttl=120)
        / LLDPDUEndOfLLDPDU()
    )


def test_a_non_lldp_frame_is_rejected():
    frame = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src=SRC, type=0x0800)) + bytes(46)
    with pytest.raises(ProbeDecodeError, match="not LLDP"):
        decode_probe(frame)


def test_a_probe_whose_port_id_is_not_a_number_is_rejected():
    frame = bytearray(encode_probe(Probe("l1", 3, 7, 42), SRC))
    port_id_value = 14 + 2 + 3 + 2 + 1  # after the chassis TLV and the port ID subtype
    frame[port_id_value] = ord("x")
    with pytest.raises(ProbeDecodeError, match="not a port number"):
        decode_probe(bytes(frame))


@pytest.mark.parametrize(
    ("field", "value"),
    [("switch", ""), ("port", -1), ("port", 1 << 16), ("nonce", 1 << 32), ("sequence", -1)],
)
def test_a_probe_out_of_range_cannot_be_built(field, value):
    arguments = {"switch": "l1", "port": 1, "nonce": 0, "sequence": 0, field: value}
    with pytest.raises(ValueError):
        Probe(**arguments)
