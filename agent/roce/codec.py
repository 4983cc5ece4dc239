"""RoCEv2 packets to bytes and back (the UDP payload: BTH, RETH, ImmDt, AETH, payload, ICRC).

Byte layout, big-endian (IBTA Vol. 1 chapter 9; Annex A17 for RoCEv2 and the CNP)::

    BTH  (12)  opcode | SE, MigReq, PadCnt(2), TVer(4) | P_Key(16) | FECN, BECN, resv(6)
               | dest QP(24) | AckReq, resv(7) | PSN(24)
    RETH (16)  virtual address(64) | R_Key(32) | DMA length(32)   on WRITE FIRST / ONLY
    ImmDt (4)  immediate                                          on WRITE LAST_IMM / ONLY_IMM
    AETH  (4)  syndrome(8) | MSN(24)                              on ACKNOWLEDGE
               (a selective NAK, syndrome 0x7F: missing-PSN count(24) in the MSN's place;
               ``agent.roce.packets.SELECTIVE_NAK`` says why)
    CNP  (16)  reserved, zero                                     on CNP (0x81)
    payload, then pad bytes to a multiple of 4 (PadCnt of them), then the 4-byte ICRC

The ICRC is the one ``agent.core.icrc`` computes for MRC (the same RoCEv2 definition), so
both transports share one implementation; as MRC's codec does, the CRC of a packet's masked
pseudo-header and first BTH bytes is kept per path, opcode and length and seeds the rest, since
every packet of a QP repeats them. ``decode`` raises ``DecodeError`` (with the
``DropReason`` the caller counts) for anything malformed and nothing else; ``encode`` raises
``ValueError`` for a packet that cannot be put on the wire, which is a caller's bug.
"""

from __future__ import annotations

import struct
from typing import Final

from agent.core.codec import DecodeError
from agent.core.crc import crc32
from agent.core.datagram import IpContext
from agent.core.drops import DropReason
from agent.core.icrc import pseudo_header_crc
from agent.core.psn import PSN_MASK
from agent.roce.packets import (
    RoceAck,
    RoceCnp,
    RoceData,
    RocePacket,
    has_immediate,
    has_reth,
)
from wire.constants import (
    AETH_LEN,
    BTH_BECN,
    BTH_LEN,
    BTH_ROCE_ACKREQ,
    CNP_RESERVED_LEN,
    ICRC_LEN,
    IMM_LEN,
    RETH_LEN,
    ROCE_DATA_OPCODES,
    ROCEV2_UDP_PORT,
    RoceOpcode,
)

__all__ = ["DecodeError", "decode", "encode"]

_BTH: Final = struct.Struct(">BBHBBBBI")  # opcode, byte 1, pkey, byte 4, qp (3 bytes), word
_RETH: Final = struct.Struct(">QII")
_U32: Final = struct.Struct(">I")
_U24: Final = 0xFFFFFF
_SOLICITED: Final = 0x80
_PAD_SHIFT: Final = 4
_TVER_MASK: Final = 0x0F
_OP_ACK: Final = int(RoceOpcode.RC_ACKNOWLEDGE)
_OP_CNP: Final = int(RoceOpcode.CNP)
_DATA_OPCODE_SET: Final = frozenset(int(op) for op in ROCE_DATA_OPCODES)
_ACK_SIZE: Final = BTH_LEN + AETH_LEN + ICRC_LEN
_CNP_SIZE: Final = BTH_LEN + CNP_RESERVED_LEN + ICRC_LEN
_CNP_RESERVED: Final = bytes(CNP_RESERVED_LEN)
_ICRC: Final = struct.Struct("<I")
_SEEDED_LEN: Final = 8
_UDP_HEADER_LEN: Final = 8
#: Seeds kept before the table is cleared: a QP needs a few (three data opcodes, a last
#: packet's length, ACKs); input chosen to vary them cannot grow it beyond this.
MAX_ICRC_SEEDS: Final = 4096
#: (id of the IP context, source port, destination port, UDP length, BTH bytes 0-7) -> the
#: context (compared by identity, so a reused id can never match) and the CRC of the masked
#: pseudo-header and those BTH bytes.
_SEEDS: Final[dict[tuple[int, int, int, int, bytes], tuple[IpContext, int]]] = {}


def _icrc(data: bytes, end: int, ip: IpContext, src_port: int, dst_port: int) -> int:
    """The ICRC of the packet whose bytes before the ICRC are ``data[:end]``."""
    udp_length = _UDP_HEADER_LEN + end + ICRC_LEN
    key = (id(ip), src_port, dst_port, udp_length, data[:_SEEDED_LEN])
    cached = _SEEDS.get(key)
    if cached is not None and cached[0] is ip:
        seed = cached[1]
    else:
        # byte 4 (FECN/BECN/reserved) is masked to ones, as ``pseudo_header_crc`` does
        seed = crc32(data[5:_SEEDED_LEN], pseudo_header_crc(ip, src_port, dst_port, udp_length,
                                                             data[:4]))  # fmt: skip
        if len(_SEEDS) >= MAX_ICRC_SEEDS:
            _SEEDS.clear()
        _SEEDS[key] = (ip, seed)
    return crc32(memoryview(data)[_SEEDED_LEN:end], seed)


def _bth(opcode: int, byte1: int, pkey: int, byte4: int, dest_qp: int, word: int) -> bytes:
    if not 0 <= dest_qp <= _U24:
        raise ValueError(f"dest_qp {dest_qp} does not fit in 24 bits")
    return _BTH.pack(
        opcode, byte1, pkey, byte4, dest_qp >> 16, (dest_qp >> 8) & 0xFF, dest_qp & 0xFF, word
    )


def _psn_word(psn: int, ack_req: bool = False) -> int:
    if not 0 <= psn <= PSN_MASK:
        raise ValueError(f"psn {psn} does not fit in 24 bits")
    return (BTH_ROCE_ACKREQ << 24 if ack_req else 0) | psn


def encode_body(packet: RocePacket) -> bytes:
    """The packet's bytes without the ICRC trailer."""
    if type(packet) is RoceData:
        opcode = packet.opcode
        if opcode not in _DATA_OPCODE_SET:
            raise ValueError(f"opcode {opcode:#x} is not a RoCE RDMA WRITE opcode")
        if has_immediate(opcode) != (packet.immediate is not None):
            raise ValueError(f"opcode {opcode:#x}: an immediate goes with the *_IMM opcodes only")
        pad = -len(packet.payload) % 4
        byte1 = (_SOLICITED if packet.solicited else 0) | (pad << _PAD_SHIFT)
        parts = [_bth(opcode, byte1, packet.pkey, 0, packet.dest_qp,
                      _psn_word(packet.psn, packet.ack_req))]  # fmt: skip
        if has_reth(opcode):
            parts.append(_RETH.pack(packet.va, packet.rkey, packet.dma_length))
        if packet.immediate is not None:
            parts.append(_U32.pack(packet.immediate))
        parts.append(packet.payload)
        parts.append(bytes(pad))
        return b"".join(parts)
    if type(packet) is RoceAck:
        if not 0 <= packet.syndrome <= 0xFF or not 0 <= packet.msn <= _U24:
            raise ValueError("AETH syndrome is 8 bits and MSN 24 bits")
        return _bth(_OP_ACK, 0, packet.pkey, 0, packet.dest_qp, _psn_word(packet.psn)) + (
            _U32.pack((packet.syndrome << 24) | packet.msn)
        )
    if type(packet) is RoceCnp:
        return _bth(_OP_CNP, 0, packet.pkey, BTH_BECN, packet.dest_qp, 0) + _CNP_RESERVED
    raise ValueError(f"cannot encode {type(packet).__name__}")


def encode(packet: RocePacket, ip: IpContext, src_port: int) -> bytes:
    """The UDP payload of ``packet`` sent from ``src_port`` to 4791 over ``ip``, ICRC included."""
    body = encode_body(packet)
    return body + _ICRC.pack(_icrc(body, len(body), ip, src_port, ROCEV2_UDP_PORT))


def decode(datagram: bytes, ip: IpContext, src_port: int, dst_port: int) -> RocePacket:
    """The packet in UDP payload ``datagram`` as it arrived (IP context and ports included,
    since the ICRC covers them). ``DecodeError`` says what is wrong with a malformed one."""
    size = len(datagram)
    if size < BTH_LEN + ICRC_LEN:
        raise DecodeError(DropReason.TRUNCATED, f"{size} bytes: shorter than BTH + ICRC")
    opcode, byte1, pkey, _byte4, qp_hi, qp_mid, qp_lo, word = _BTH.unpack_from(datagram)
    if opcode not in _DATA_OPCODE_SET and opcode != _OP_ACK and opcode != _OP_CNP:
        raise DecodeError(DropReason.UNKNOWN_OPCODE, f"opcode {opcode:#x} is not spoken here")
    if byte1 & _TVER_MASK:
        raise DecodeError(DropReason.BAD_FIELD, f"transport version {byte1 & _TVER_MASK}")
    end = size - ICRC_LEN
    if _icrc(datagram, end, ip, src_port, dst_port) != _ICRC.unpack_from(datagram, end)[0]:
        raise DecodeError(DropReason.BAD_ICRC, "ICRC does not match the packet")
    dest_qp = (qp_hi << 16) | (qp_mid << 8) | qp_lo
    psn = word & PSN_MASK
    if opcode == _OP_ACK:
        if size != _ACK_SIZE:
            raise DecodeError(DropReason.BAD_FIELD, f"an ACK is {_ACK_SIZE} bytes, got {size}")
        (aeth,) = _U32.unpack_from(datagram, BTH_LEN)
        return RoceAck(dest_qp, psn, aeth >> 24, aeth & _U24, pkey)
    if opcode == _OP_CNP:
        if size != _CNP_SIZE:
            raise DecodeError(DropReason.BAD_FIELD, f"a CNP is {_CNP_SIZE} bytes, got {size}")
        return RoceCnp(dest_qp, pkey)
    offset = BTH_LEN
    va = rkey = dma_length = 0
    if has_reth(opcode):
        if end < offset + RETH_LEN:
            raise DecodeError(DropReason.TRUNCATED, f"opcode {opcode:#x} without its RETH")
        va, rkey, dma_length = _RETH.unpack_from(datagram, offset)
        offset += RETH_LEN
    immediate: int | None = None
    if has_immediate(opcode):
        if end < offset + IMM_LEN:
            raise DecodeError(DropReason.TRUNCATED, f"opcode {opcode:#x} without its ImmDt")
        (immediate,) = _U32.unpack_from(datagram, offset)
        offset += IMM_LEN
    pad = (byte1 >> _PAD_SHIFT) & 0x3
    if end - offset < pad:
        raise DecodeError(DropReason.BAD_FIELD, f"pad count {pad} exceeds the payload")
    return RoceData(
        opcode, dest_qp, psn, datagram[offset : end - pad], bool(word >> 24 & BTH_ROCE_ACKREQ),
        va, rkey, dma_length, immediate, bool(byte1 & _SOLICITED), pkey,
    )  # fmt: skip
