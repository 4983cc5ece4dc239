"""The scapy layers and the agent's struct codec agree, byte for byte, on every packet kind.

The layers are the reference; ``agent.core.codec`` is what the data path runs. For random field
values of each kind: the UDP payload scapy builds equals what the codec encodes (so headers and
ICRC agree), the codec decodes scapy's bytes to the same values, and scapy dissects the codec's
bytes to the same fields. Reserved bits, which the codec does not model, stay 0.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from agent.core import codec
from agent.core.datagram import IPV4_DONT_FRAGMENT, IpContext
from agent.core.icrc import compute_icrc as codec_compute_icrc
from agent.core.packets import (
    AckPacket,
    DataPacket,
    EndpointMessage,
    NackPacket,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from wire.constants import (
    DATA_OPCODES,
    ICRC_LEN,
    IMM_OPCODES,
    MAX_EV_PROBE_ANSWERS,
    ROCEV2_UDP_PORT,
    DscpClass,
    EpType,
    NackReason,
    Opcode,
)
from wire.frames import DEFAULT_DST_MAC, DEFAULT_SRC_MAC, traffic_class
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

ADDRESSES = {4: ("10.1.2.3", "10.4.5.6"), 6: ("fd00:1::7", "fd00:2::8")}


def u(bits: int) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << bits) - 1)


S16 = st.integers(-(1 << 15), (1 << 15) - 1)


@dataclass(frozen=True)
class Kind:
    """One packet kind: how to draw its fields, and how each side spells the packet."""

    fields: st.SearchStrategy[dict[str, Any]]
    scapy: Callable[[dict[str, Any]], Packet]
    codec: Callable[[dict[str, Any]], Any]
    trimmed: bool = False


def _data_fields(with_payload: bool) -> st.SearchStrategy[dict[str, Any]]:
    return st.sampled_from(sorted(DATA_OPCODES)).flatmap(
        lambda opcode: st.fixed_dictionaries(
            {
                "opcode": st.just(int(opcode)),
                "dest_qp": u(24),
                "psn": u(24),
                "msn": u(16),
                "rqmsn": u(16),
                "va": u(64),
                "rkey": u(32),
                "dma_length": u(32),
                "payload": st.binary(max_size=48) if with_payload else st.just(b""),
                "immediate": u(32) if opcode in IMM_OPCODES else st.none(),
                "tx_timestamp": st.none() | u(16),
                "ts_flags": u(16),
                "ack_req": st.booleans(),
                "retransmit": st.booleans(),
                "pkey": u(16),
            }
        )
    )


def _scapy_data(f: dict[str, Any]) -> Packet:
    timestamped = f["tx_timestamp"] is not None
    mrc = MrcBTH(
        opcode=f["opcode"],
        pkey=f["pkey"],
        dqpn=f["dest_qp"],
        psn=f["psn"],
        ackreq=int(f["ack_req"]),
        rtx=int(f["retransmit"]),
    ) / MrcMETH(rqmsn=f["rqmsn"], msn=f["msn"])
    if timestamped:
        mrc = mrc / MrcTSETH(tx_ts=f["tx_timestamp"], flags=f["ts_flags"])
    mrc = mrc / MrcRETH(va=f["va"], rkey=f["rkey"], dma_length=f["dma_length"])
    if f["immediate"] is not None:
        mrc = mrc / MrcImmDt(imm=f["immediate"])
    if f["payload"]:
        mrc = mrc / Raw(f["payload"])
    return mrc


def _codec_data(f: dict[str, Any]) -> DataPacket:
    if f["tx_timestamp"] is None:
        return DataPacket(**{**f, "ts_flags": 0})  # no TSETH: nothing carries the flags
    return DataPacket(**f)


def _codec_trimmed(f: dict[str, Any]) -> TrimmedDataHeader:
    values = {key: value for key, value in f.items() if key != "payload"}
    if values["tx_timestamp"] is None:
        values["ts_flags"] = 0  # no TSETH: nothing carries the flags
    return TrimmedDataHeader(**values)


_ACK_FIELDS = st.fixed_dictionaries(
    {"dest_qp": u(24), "psn": u(24), "syndrome": u(8), "msn": u(24), "pkey": u(16)}
)
_SACK_FIELDS = st.fixed_dictionaries(
    {
        "dest_qp": u(24),
        "psn": u(24),
        "cack_psn": u(24),
        "ack_psn_offset": S16,
        "entropy": u(32),
        "bitmap": u(64),
        "sack_offset": S16,
        "skip_mode": u(2),
        "probe_response": st.booleans(),
        "header_type": u(4),
        "next_header": u(5),
        "src_pdc": u(16),
        "dst_pdc": u(16),
        "cc_type": u(4),
        "cc_flags": u(4),
        "mpr": u(8),
        "echoed_timestamp": u(16),
        "out_of_order_count": u(15),
        "rc": st.booleans(),
        "rcv_cwnd_pen": u(7),
        "received_bytes": u(24),
        "pkey": u(16),
    }
)
_NACK_FIELDS = st.fixed_dictionaries(
    {
        "dest_qp": u(24),
        "psn": u(24),
        "reason": st.sampled_from(sorted(int(reason) for reason in NackReason)),
        "nack_psn": u(24),
        "entropy": u(32),
        "vendor_info": u(8),
        "header_type": u(4),
        "next_header": u(5),
        "src_pdc": u(16),
        "dst_pdc": u(16),
        "cc_type": u(4),
        "cc_flags": u(4),
        "tx_timestamp": u(16),
        "pkey": u(16),
    }
)
_PROBE_FIELDS = st.fixed_dictionaries(
    {"dest_qp": u(24), "psn": u(24), "ack_req": st.booleans(), "pkey": u(16)}
)
_EP_FIELDS = st.fixed_dictionaries(
    {
        "dest_qp": u(24),
        "psn": u(24),
        "response": st.booleans(),
        "ep_type": st.sampled_from(sorted(int(ep_type) for ep_type in EpType)),
        "seq": u(16),
        "value": u(32),
        "flags": u(8),
        "pkey": u(16),
    }
)

#: An EV_PROBE response answering several probes: its further answers as (seq, value).
_PROBE_ANSWERS_FIELDS = st.fixed_dictionaries(
    {
        "dest_qp": u(24),
        "psn": u(24),
        "response": st.just(True),
        "ep_type": st.just(int(EpType.EV_PROBE)),
        "seq": u(16),
        "value": u(32),
        "flags": u(8),
        "pkey": u(16),
        "more_answers": st.lists(
            st.tuples(u(16), u(32)), min_size=1, max_size=MAX_EV_PROBE_ANSWERS - 1
        ).map(tuple),
    }
)


def _scapy_probe_answers(f: dict[str, Any]) -> Packet:
    frame = _bth(f, Opcode.EP_RESPONSE) / MrcEPH(
        type=f["ep_type"], flags=f["flags"], seq=f["seq"], value=f["value"]
    )
    for seq, value in f["more_answers"]:
        frame = frame / MrcEPH(type=EpType.EV_PROBE, seq=seq, value=value)
    return frame


def _bth(f: dict[str, Any], opcode: int, ackreq: bool = False) -> MrcBTH:
    return MrcBTH(
        opcode=opcode, pkey=f["pkey"], dqpn=f["dest_qp"], psn=f["psn"], ackreq=int(ackreq)
    )


KINDS = {
    "data": Kind(_data_fields(with_payload=True), _scapy_data, _codec_data),
    "trimmed_data": Kind(_data_fields(with_payload=False), _scapy_data, _codec_trimmed, True),
    "ack": Kind(
        _ACK_FIELDS,
        lambda f: _bth(f, Opcode.ACK) / AETH(syndrome=f["syndrome"], msn=f["msn"]),
        lambda f: AckPacket(**f),
    ),
    "sack": Kind(
        _SACK_FIELDS,
        lambda f: (
            _bth(f, Opcode.SACK)
            / MrcSETH(
                type=f["header_type"],
                next=f["next_header"],
                m=f["skip_mode"],
                pr=int(f["probe_response"]),
                ack_psn_offset=f["ack_psn_offset"],
                entropy=f["entropy"],
                src_pdc_id=f["src_pdc"],
                dst_pdc_id=f["dst_pdc"],
                cum_ack_psn=f["cack_psn"],
                cc_type=f["cc_type"],
                cc_flags=f["cc_flags"],
                mpr=f["mpr"],
                sack_offset=f["sack_offset"],
                sack_bitmap=f["bitmap"],
            )
            / MrcCCState(
                echoed_tx_ts=f["echoed_timestamp"],
                ooo_count=f["out_of_order_count"],
                r_c=int(f["rc"]),
                rcv_cwnd_pen=f["rcv_cwnd_pen"],
                received_bytes=f["received_bytes"],
            )
        ),
        lambda f: SackPacket(**f),
    ),
    "nack": Kind(
        _NACK_FIELDS,
        lambda f: (
            _bth(f, Opcode.NACK)
            / MrcNETH(
                type=f["header_type"],
                next=f["next_header"],
                reason=f["reason"],
                vendor=f["vendor_info"],
                entropy=f["entropy"],
                src_pdc_id=f["src_pdc"],
                dst_pdc_id=f["dst_pdc"],
                nack_psn=f["nack_psn"],
                cc_type=f["cc_type"],
                cc_flags=f["cc_flags"],
                tx_ts=f["tx_timestamp"],
            )
        ),
        lambda f: NackPacket(**f),
    ),
    "reliability_probe": Kind(
        _PROBE_FIELDS,
        lambda f: _bth(f, Opcode.RELIABILITY_PROBE, ackreq=f["ack_req"]),
        lambda f: ReliabilityProbe(**f),
    ),
    "endpoint": Kind(
        _EP_FIELDS,
        lambda f: (
            _bth(f, Opcode.EP_RESPONSE if f["response"] else Opcode.EP_REQUEST)
            / MrcEPH(type=f["ep_type"], flags=f["flags"], seq=f["seq"], value=f["value"])
        ),
        lambda f: EndpointMessage(**f),
    ),
    "probe_answers": Kind(
        _PROBE_ANSWERS_FIELDS, _scapy_probe_answers, lambda f: EndpointMessage(**f)
    ),
}


def envelope(version: int, source_port: int, trimmed: bool) -> tuple[Packet, IpContext]:
    """Ether/IP/UDP as the agent sends (IPv4 ID 0, DF), and the codec's view of the same."""
    src, dst = ADDRESSES[version]
    dscp = DscpClass.TRIMMED if trimmed else DscpClass.TRIMMABLE
    ip: Packet
    if version == 4:
        ip = IP(src=src, dst=dst, id=0, flags="DF", tos=traffic_class(dscp, 0))
    else:
        ip = IPv6(src=src, dst=dst, tc=traffic_class(dscp, 0))
    context = IpContext(
        src=ipaddress.ip_address(src).packed,
        dst=ipaddress.ip_address(dst).packed,
        ip_id=0,
        flags_fragment=IPV4_DONT_FRAGMENT,
    )
    return Ether(src=DEFAULT_SRC_MAC, dst=DEFAULT_DST_MAC) / ip / UDP(
        sport=source_port, dport=ROCEV2_UDP_PORT
    ), context


def mrc_field_values(frame: Packet) -> dict[str, object]:
    values: dict[str, object] = {}
    layer = frame[MrcBTH]
    while layer:
        for field in layer.fields_desc:
            values[f"{type(layer).__name__}.{field.name}"] = layer.getfieldval(field.name)
        layer = layer.payload
    return values


@pytest.mark.parametrize("kind_name", sorted(KINDS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_scapy_and_codec_produce_and_read_the_same_bytes(kind_name, data):
    kind = KINDS[kind_name]
    fields = data.draw(kind.fields, label="fields")
    version = data.draw(st.sampled_from([4, 6]), label="ip version")
    source_port = data.draw(u(16), label="udp source port (EV high half)")
    outer, context = envelope(version, source_port, kind.trimmed)
    expected_packet = kind.codec(fields)

    scapy_frame = Ether(bytes(outer / kind.scapy(fields)))
    scapy_payload = bytes(scapy_frame[UDP].payload)
    codec_payload = codec.encode(expected_packet, context, source_port)

    assert codec_payload == scapy_payload
    assert codec.decode(scapy_payload, context, source_port, trimmed=kind.trimmed) == (
        expected_packet
    )
    from_codec = Ether(bytes(outer / Raw(codec_payload)))
    assert mrc_field_values(from_codec) == mrc_field_values(scapy_frame)
    if not kind.trimmed:
        assert icrc_matches(from_codec)
        body = codec_payload[:-ICRC_LEN]
        assert codec_compute_icrc(body, context, source_port, ROCEV2_UDP_PORT) == (
            scapy_frame[MrcBTH].icrc
        )


@pytest.mark.parametrize("version", [4, 6])
def test_the_codec_refuses_a_scapy_packet_whose_payload_was_corrupted(version):
    outer, context = envelope(version, 0xC000, trimmed=False)
    fields = {
        "opcode": Opcode.WRITE_ONLY, "dest_qp": 1, "psn": 2, "msn": 3, "rqmsn": 0, "va": 0,
        "rkey": 5, "dma_length": 4, "payload": b"abcd", "immediate": None,
        "tx_timestamp": None, "ts_flags": 0, "ack_req": False, "retransmit": False,
        "pkey": 0xFFFF,
    }  # fmt: skip
    payload = bytearray(bytes(Ether(bytes(outer / _scapy_data(fields)))[UDP].payload))
    payload[-ICRC_LEN - 1] ^= 0x20
    with pytest.raises(codec.DecodeError, match="ICRC"):
        codec.decode(bytes(payload), context, 0xC000)
