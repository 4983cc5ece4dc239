"""Hypothesis strategies for MRC packets and IP contexts, shared by the agent's tests."""

from __future__ import annotations

from hypothesis import strategies as st

from agent.core.datagram import IpContext
from agent.core.packets import (
    AckPacket,
    DataPacket,
    EndpointMessage,
    NackPacket,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from wire.constants import DATA_OPCODES, IMM_OPCODES, MAX_EV_PROBE_ANSWERS, EpType

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u24 = st.integers(0, 0xFFFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
s16 = st.integers(-0x8000, 0x7FFF)

ipv4_contexts = st.builds(
    IpContext,
    src=st.binary(min_size=4, max_size=4),
    dst=st.binary(min_size=4, max_size=4),
    ip_id=u16,
    flags_fragment=u16,
)
ipv6_contexts = st.builds(
    IpContext, src=st.binary(min_size=16, max_size=16), dst=st.binary(min_size=16, max_size=16)
)
ip_contexts = st.one_of(ipv4_contexts, ipv6_contexts)


@st.composite
def data_packets(draw: st.DrawFn, trimmed: bool = False) -> DataPacket | TrimmedDataHeader:
    opcode = int(draw(st.sampled_from(sorted(DATA_OPCODES))))
    immediate = draw(u32) if opcode in IMM_OPCODES else None
    common = {
        "opcode": opcode,
        "dest_qp": draw(u24),
        "psn": draw(u24),
        "msn": draw(u16),
        "rqmsn": draw(u16),
        "va": draw(st.integers(0, 2**64 - 1)),
        "rkey": draw(u32),
        "dma_length": draw(u32),
        "immediate": immediate,
        "tx_timestamp": draw(st.none() | u16),
        "ack_req": draw(st.booleans()),
        "retransmit": draw(st.booleans()),
        "pkey": draw(u16),
    }
    if common["tx_timestamp"] is not None:
        common["ts_flags"] = draw(u16)
    if trimmed:
        return TrimmedDataHeader(**common)
    return DataPacket(payload=draw(st.binary(max_size=1100)), **common)


sack_packets = st.builds(
    SackPacket,
    dest_qp=u24,
    psn=u24,
    cack_psn=u24,
    ack_psn_offset=s16,
    entropy=u32,
    bitmap=st.integers(0, 2**64 - 1),
    sack_offset=s16,
    skip_mode=st.integers(0, 3),
    probe_response=st.booleans(),
    header_type=st.integers(0, 15),
    next_header=st.integers(0, 31),
    src_pdc=u16,
    dst_pdc=u16,
    cc_type=st.integers(0, 15),
    cc_flags=st.integers(0, 15),
    mpr=u8,
    echoed_timestamp=u16,
    out_of_order_count=st.integers(0, 0x7FFF),
    rc=st.booleans(),
    rcv_cwnd_pen=st.integers(0, 127),
    received_bytes=u24,
    pkey=u16,
)
nack_packets = st.builds(
    NackPacket,
    dest_qp=u24,
    psn=u24,
    reason=u8,
    nack_psn=u24,
    entropy=u32,
    vendor_info=u8,
    header_type=st.integers(0, 15),
    next_header=st.integers(0, 31),
    src_pdc=u16,
    dst_pdc=u16,
    cc_type=st.integers(0, 15),
    cc_flags=st.integers(0, 15),
    tx_timestamp=u16,
    pkey=u16,
)
ack_packets = st.builds(AckPacket, dest_qp=u24, psn=u24, syndrome=u8, msn=u24, pkey=u16)
probe_packets = st.builds(ReliabilityProbe, dest_qp=u24, psn=u24, ack_req=st.booleans(), pkey=u16)
endpoint_packets = st.builds(
    EndpointMessage,
    dest_qp=u24,
    psn=u24,
    response=st.booleans(),
    ep_type=st.sampled_from([int(t) for t in EpType]),
    seq=u16,
    value=u32,
    flags=u8,
    pkey=u16,
)
#: An EV_PROBE response answering several probes at once (``more_answers``).
probe_answer_batches = st.builds(
    EndpointMessage,
    dest_qp=u24,
    psn=u24,
    response=st.just(True),
    ep_type=st.just(int(EpType.EV_PROBE)),
    seq=u16,
    value=u32,
    flags=u8,
    pkey=u16,
    more_answers=st.lists(st.tuples(u16, u32), min_size=1, max_size=MAX_EV_PROBE_ANSWERS - 1).map(
        tuple
    ),
)
control_packets = st.one_of(
    sack_packets, nack_packets, ack_packets, probe_packets, endpoint_packets, probe_answer_batches
)
any_packets = st.one_of(data_packets(), control_packets)
