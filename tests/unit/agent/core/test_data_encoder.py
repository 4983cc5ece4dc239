"""The data path encoder writes exactly the bytes the reference codec writes for the same data
packet (every opcode, IPv4 and IPv6, with and without the ACK-request and retransmit flags),
so the sender's fast path can never drift from the documented wire format."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.core.codec import decode, encode
from agent.core.data_encoder import DataPacketEncoder
from agent.core.datagram import IpContext
from agent.core.packets import DataPacket
from tests.unit.agent.core.strategies import ip_contexts, u16, u24, u32
from wire.constants import DATA_OPCODES, IMM_OPCODES

u64 = st.integers(0, (1 << 64) - 1)


@settings(max_examples=200, deadline=None)
@given(
    ip=ip_contexts,
    opcode=st.sampled_from(sorted(int(op) for op in DATA_OPCODES)),
    dest_qp=u24,
    psn=u24,
    msn=u16,
    rqmsn=u16,
    va=u64,
    rkey=u32,
    dma_length=u32,
    payload=st.binary(max_size=1100),
    immediate=u32,
    timestamp=u16,
    ack_req=st.booleans(),
    retransmit=st.booleans(),
    src_port=u16,
)
def test_encoded_bytes_equal_the_reference_codec(
    ip: IpContext,
    opcode: int,
    dest_qp: int,
    psn: int,
    msn: int,
    rqmsn: int,
    va: int,
    rkey: int,
    dma_length: int,
    payload: bytes,
    immediate: int,
    timestamp: int,
    ack_req: bool,
    retransmit: bool,
    src_port: int,
) -> None:
    imm = immediate if opcode in IMM_OPCODES else None
    reference = DataPacket(
        opcode, dest_qp, psn, msn, rqmsn, va, rkey, dma_length, payload, imm, timestamp, 0,
        ack_req, retransmit,
    )  # fmt: skip
    fast = DataPacketEncoder(ip, dest_qp).encode(
        opcode, psn, msn, rqmsn, va, rkey, dma_length, memoryview(payload), imm, timestamp,
        ack_req, retransmit, src_port,
    )  # fmt: skip
    assert fast == encode(reference, ip, src_port)
    assert decode(fast, ip, src_port) == reference  # ICRC included


def test_a_destination_qp_beyond_24_bits_is_refused_when_the_encoder_is_made() -> None:
    ip = IpContext(src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]))
    with pytest.raises(ValueError, match="24 bits"):
        DataPacketEncoder(ip, 1 << 24)
