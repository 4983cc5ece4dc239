"""Fast encoder/decoder of MRC packets (the UDP payload: BTH, extension headers, payload, ICRC).

Pure ``struct`` code, no scapy: the data path runs through here twice per packet. The layout is
the one ``wire.layers`` (the scapy reference) documents and the tests cross-check; the
field meanings are summarised in ``agent.core.packets``. Choices this codec relies on:

* Every packet ends with the RoCEv2 ICRC (``agent.core.icrc``), so encoding and decoding need
  the IP/UDP context the packet travels in. A packet whose ICRC does not match is refused.
* A *trimmed* data packet has lost payload and ICRC; only its DSCP (TRIMMED or
  TRIMMED_LASTHOP) says so, so the caller passes ``trimmed=True`` and gets a
  ``TrimmedDataHeader``. Bytes after the headers of a trimmed packet are ignored.
* The ECN echo travels in SETH/NETH ``cc_flags`` bit 0 (``CC_FLAG_ECN_ECHO``).
* TSETH timestamps are microseconds modulo 2**16. The sender stamps every data packet and
  remembers the full send time of each transmission; an echo that equals the 16-bit stamp
  of the latest transmission of that PSN yields an RTT sample (now - that send time), so the
  wrap never matters and an echo of an older copy is ignored (Karn's rule, exactly).
* Endpoint requests/responses carry an 8-byte EPH after the BTH; only ``EpType`` values are
  accepted. An EV_PROBE response may carry up to ``MAX_EV_PROBE_ANSWERS - 1`` further EPHs,
  each another EV_PROBE answer (``EndpointMessage.more_answers``); anything else after an EPH
  is refused. The reliability probe is the BTH alone. The ACK carries an AETH.

Errors: ``decode`` raises ``DecodeError`` (with a ``DropReason``) for anything malformed and
nothing else; ``encode`` raises ``ValueError`` for a packet that cannot be put on the wire
(a caller's bug, never input).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from agent.core.crc import crc32
from agent.core.datagram import IpContext
from agent.core.drops import DropReason
from agent.core.icrc import compute_icrc, pseudo_header_crc
from agent.core.packets import (
    AckPacket,
    DataPacket,
    EndpointMessage,
    NackPacket,
    Packet,
    ReliabilityProbe,
    SackPacket,
    TrimmedDataHeader,
)
from agent.core.psn import PSN_MASK
from wire.constants import (
    BTH_FLAG_ACKREQ,
    BTH_FLAG_RTX,
    BTH_FLAG_TS,
    BTH_LEN,
    DATA_OPCODES,
    ICRC_LEN,
    IMM_OPCODES,
    MAX_EV_PROBE_ANSWERS,
    ROCEV2_UDP_PORT,
    EpType,
    Opcode,
)

#: Read per SACK: a plain int (an enum member access is slow).
_OP_SACK: Final = int(Opcode.SACK)
_OP_EP_RESPONSE: Final = int(Opcode.EP_RESPONSE)
_EV_PROBE: Final = int(EpType.EV_PROBE)
_U24: Final = 0xFFFFFF

# One struct per header combination, BTH included, so a packet's headers are one pack/unpack.
_BTH: Final = struct.Struct(">BBHII")
_DATA: Final = struct.Struct(">BBHIIHHQII")  # BTH METH RETH
_DATA_TS: Final = struct.Struct(">BBHIIHHHHQII")  # BTH METH TSETH RETH
_DATA_IMM: Final = struct.Struct(">BBHIIHHQIII")  # BTH METH RETH IMM
_DATA_TS_IMM: Final = struct.Struct(">BBHIIHHHHQIII")  # BTH METH TSETH RETH IMM
_ACK: Final = struct.Struct(">BBHIII")  # BTH AETH
_SACK: Final = struct.Struct(">BBHIIHhIHHIBBhQHHI")  # BTH SETH CC_STATE
_NACK: Final = struct.Struct(">BBHIIHBBIHHIBBH")  # BTH NETH
_EP: Final = struct.Struct(">BBHIIBBHI")  # BTH EPH
_EPH: Final = struct.Struct(">BBHI")  # a further EPH of an EV_PROBE response
_ICRC: Final = struct.Struct("<I")

#: An untrimmed data packet as the receive path takes it (``decode_whole_data_fields``):
#: (dest_qp, psn, msn, rqmsn, va, rkey, dma_length, payload, immediate, tx_timestamp,
#: ts_flags, pkey), ``DataPacket``'s fields after its opcode, less the two BTH flags.
WholeDataFields = tuple[int, int, int, int, int, int, int, bytes, int | None, int | None, int, int]


#: Packets received (data and control) or sent (control; data has its own encoder) whose
#: headers match an earlier one's (same IP context object, ports, length and BTH bytes 0-7:
#: opcode, flags byte, P_Key, QP) share the CRC of those headers and the masked
#: pseudo-header, the ICRC's first 53 (IPv4) or 73 (IPv6) bytes: the ICRC then takes one
#: ``crc32`` over the rest of the packet alone. Keyed by the context's ``id`` with the
#: context itself kept in the entry (and compared by identity), so an entry can never be
#: taken for a different context that reuses a freed object's id.
_ICRC_SEEDS: Final[dict[tuple[int, int, int, int, bytes], tuple[IpContext, int]]] = {}
#: Entries kept before the table is cleared (a connection's 256 EVs and a few lengths and
#: opcodes need a few thousand; input chosen to vary them cannot grow it beyond this).
MAX_ICRC_SEEDS = 8192
_SEEDED_LEN: Final = 8

_EP_TYPES: Final = frozenset(int(t) for t in EpType)
_DATA_OPCODE_SET: Final = frozenset(int(op) for op in DATA_OPCODES)
_IMM_OPCODE_SET: Final = frozenset(int(op) for op in IMM_OPCODES)


class DecodeError(Exception):
    """A received datagram is not a well-formed MRC packet; ``reason`` says why."""

    def __init__(self, reason: DropReason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def data_header_struct(opcode: int, timestamped: bool) -> struct.Struct:
    """The struct of a data packet's headers (BTH to RETH/immediate) for this opcode/TS flag."""
    if opcode in _IMM_OPCODE_SET:
        return _DATA_TS_IMM if timestamped else _DATA_IMM
    return _DATA_TS if timestamped else _DATA


def trimmed_length(mrc: bytes) -> int | None:
    """Length a trimming switch cuts data packet ``mrc`` to (its headers), or None if ``mrc`` is
    not a data packet. Used by the simulator's switches, which cut like the P4 program does."""
    if len(mrc) < BTH_LEN or mrc[0] not in _DATA_OPCODE_SET:
        return None
    size = data_header_struct(mrc[0], bool(mrc[8] & BTH_FLAG_TS)).size
    return size if len(mrc) >= size else None


def _flags(ack_req: bool, retransmit: bool, timestamped: bool) -> int:
    return (
        (BTH_FLAG_ACKREQ if ack_req else 0)
        | (BTH_FLAG_RTX if retransmit else 0)
        | (BTH_FLAG_TS if timestamped else 0)
    )


def _check_u24(name: str, value: int) -> None:
    if not 0 <= value <= _U24:
        raise ValueError(f"{name} {value} does not fit in 24 bits")


def _encode_data_headers(p: DataPacket | TrimmedDataHeader) -> bytes:
    if not (0 <= p.dest_qp <= _U24 and 0 <= p.psn <= _U24):  # inlined: once per packet
        _check_u24("dest_qp", p.dest_qp)
        _check_u24("psn", p.psn)
    if p.opcode not in _DATA_OPCODE_SET:
        raise ValueError(f"opcode {p.opcode:#x} is not an MRC data opcode")
    has_imm = p.opcode in _IMM_OPCODE_SET
    if has_imm != (p.immediate is not None):
        raise ValueError(f"opcode {p.opcode:#x}: an immediate goes with the *_IMM opcodes only")
    timestamped = p.tx_timestamp is not None
    word = (_flags(p.ack_req, p.retransmit, timestamped) << 24) | p.psn
    if timestamped:
        if has_imm:
            return _DATA_TS_IMM.pack(
                p.opcode, 0, p.pkey, p.dest_qp, word, p.rqmsn, p.msn, p.tx_timestamp,
                p.ts_flags, p.va, p.rkey, p.dma_length, p.immediate,
            )  # fmt: skip
        return _DATA_TS.pack(
            p.opcode, 0, p.pkey, p.dest_qp, word, p.rqmsn, p.msn, p.tx_timestamp, p.ts_flags,
            p.va, p.rkey, p.dma_length,
        )  # fmt: skip
    if has_imm:
        return _DATA_IMM.pack(
            p.opcode, 0, p.pkey, p.dest_qp, word, p.rqmsn, p.msn, p.va, p.rkey, p.dma_length,
            p.immediate,
        )  # fmt: skip
    return _DATA.pack(
        p.opcode, 0, p.pkey, p.dest_qp, word, p.rqmsn, p.msn, p.va, p.rkey, p.dma_length
    )


def encode_body(packet: Packet) -> bytes:
    """The MRC bytes of ``packet`` without the ICRC trailer."""
    if type(packet) is DataPacket:
        return _encode_data_headers(packet) + packet.payload
    if type(packet) is SackPacket:
        _check_u24("cack_psn", packet.cack_psn)
        _check_u24("received_bytes", packet.received_bytes)
        return _SACK.pack(
            _OP_SACK, 0, packet.pkey, _qp(packet.dest_qp), _psn_word(packet.psn),
            (packet.header_type << 12) | (packet.next_header << 7) | (packet.skip_mode << 5)
            | (int(packet.probe_response) << 4),
            packet.ack_psn_offset, packet.entropy, packet.src_pdc, packet.dst_pdc,
            packet.cack_psn, (packet.cc_type << 4) | packet.cc_flags, packet.mpr,
            packet.sack_offset, packet.bitmap, packet.echoed_timestamp,
            packet.out_of_order_count,
            (int(packet.rc) << 31) | (packet.rcv_cwnd_pen << 24) | packet.received_bytes,
        )  # fmt: skip
    if type(packet) is NackPacket:
        _check_u24("nack_psn", packet.nack_psn)
        return _NACK.pack(
            Opcode.NACK, 0, packet.pkey, _qp(packet.dest_qp), _psn_word(packet.psn),
            (packet.header_type << 12) | (packet.next_header << 7), packet.reason,
            packet.vendor_info, packet.entropy, packet.src_pdc, packet.dst_pdc,
            packet.nack_psn, (packet.cc_type << 4) | packet.cc_flags, 0, packet.tx_timestamp,
        )  # fmt: skip
    if type(packet) is AckPacket:
        _check_u24("msn", packet.msn)
        return _ACK.pack(
            Opcode.ACK, 0, packet.pkey, _qp(packet.dest_qp), _psn_word(packet.psn),
            (packet.syndrome << 24) | packet.msn,
        )  # fmt: skip
    if type(packet) is ReliabilityProbe:
        return _BTH.pack(
            Opcode.RELIABILITY_PROBE, 0, packet.pkey, _qp(packet.dest_qp),
            _psn_word(packet.psn, BTH_FLAG_ACKREQ if packet.ack_req else 0),
        )  # fmt: skip
    if type(packet) is EndpointMessage:
        opcode = Opcode.EP_RESPONSE if packet.response else Opcode.EP_REQUEST
        head = _EP.pack(
            opcode, 0, packet.pkey, _qp(packet.dest_qp), _psn_word(packet.psn), packet.ep_type,
            packet.flags, packet.seq, packet.value,
        )  # fmt: skip
        more = packet.more_answers
        if not more:
            return head
        if not packet.response or packet.ep_type != _EV_PROBE:
            raise ValueError("only an EV_PROBE response carries further answers")
        if len(more) >= MAX_EV_PROBE_ANSWERS:
            raise ValueError(f"{len(more) + 1} answers in one response, at most "
                             f"{MAX_EV_PROBE_ANSWERS}")  # fmt: skip
        return head + b"".join(_EPH.pack(_EV_PROBE, 0, seq, value) for seq, value in more)
    if type(packet) is TrimmedDataHeader:
        return _encode_data_headers(packet)
    raise ValueError(f"not an MRC packet: {packet!r}")


def encode(packet: Packet, ip: IpContext, src_port: int, dst_port: int = ROCEV2_UDP_PORT) -> bytes:
    """The UDP payload that carries ``packet`` (ICRC included) in the given IP/UDP headers.

    A ``TrimmedDataHeader`` encodes to the header bytes alone, as a switch forwards it.
    """
    if type(packet) is DataPacket:  # the data path: one call less per packet sent
        body = _encode_data_headers(packet) + packet.payload
        return body + _ICRC.pack(compute_icrc(body, ip, src_port, dst_port))
    body = encode_body(packet)
    if type(packet) is TrimmedDataHeader:
        return body
    size = len(body) + ICRC_LEN
    return body + _ICRC.pack(_seeded_icrc(body, len(body), size, ip, src_port, dst_port))


def _qp(qp: int) -> int:
    _check_u24("dest_qp", qp)
    return qp


def _psn_word(psn: int, flags: int = 0) -> int:
    _check_u24("psn", psn)
    return (flags << 24) | psn


def decode(
    datagram: bytes,
    ip: IpContext,
    src_port: int,
    dst_port: int = ROCEV2_UDP_PORT,
    *,
    trimmed: bool = False,
) -> Packet:
    """Decode a received UDP payload. ``trimmed``: its DSCP says a switch trimmed it.

    Raises ``DecodeError`` for truncated input, unknown opcodes, bad ICRC or bad fields.
    """
    size = len(datagram)
    if size < BTH_LEN:
        raise DecodeError(DropReason.TRUNCATED, f"{size} bytes, a BTH alone is {BTH_LEN}")
    opcode = datagram[0]
    if trimmed:
        if opcode not in _DATA_OPCODE_SET:
            raise DecodeError(
                DropReason.BAD_FIELD, f"opcode {opcode:#x} in a trimmed packet: only data is"
            )
        return _decode_data(datagram, opcode, trimmed=True)
    if size < BTH_LEN + ICRC_LEN:
        raise DecodeError(DropReason.TRUNCATED, f"{size} bytes, BTH + ICRC need 16")
    if opcode in _DATA_OPCODE_SET:
        return _decode_whole_data(datagram, size, opcode, ip, src_port, dst_port)
    decoder = _CONTROL_DECODERS.get(opcode)
    if decoder is None:
        raise DecodeError(DropReason.UNKNOWN_OPCODE, f"opcode {opcode:#x}")
    end = size - ICRC_LEN
    expected = decoder[0].size
    # An EV_PROBE response may go on with further EPHs (checked by ``_decode_endpoint``).
    if end != expected and not (opcode == _OP_EP_RESPONSE and end > expected):
        kind = DropReason.TRUNCATED if end < expected else DropReason.BAD_FIELD
        raise DecodeError(kind, f"opcode {opcode:#x}: {end} header bytes, need {expected}")
    # Seeded like a data packet's: a sender checks a SACK every few packets it sends.
    (carried,) = _ICRC.unpack_from(datagram, end)
    if _seeded_icrc(datagram, end, size, ip, src_port, dst_port) != carried:
        raise DecodeError(DropReason.BAD_ICRC, "ICRC does not match packet and IP/UDP headers")
    return decoder[1](datagram)


def decode_whole_data_fields(
    datagram: bytes, size: int, opcode: int, ip: IpContext, src_port: int, dst_port: int
) -> WholeDataFields:
    """``decode`` of an untrimmed data packet, for a caller that made ``decode``'s own checks
    first (not trimmed, ``size >= MIN_WHOLE_DATA``, first byte in ``DATA_OPCODE_SET``): its
    fields, ICRC checked, as one tuple (see ``WholeDataFields``) rather than a ``DataPacket``.

    The receiver's per-packet path, so the header is unpacked once, the ICRC (see
    ``agent.core.icrc``) computed over the datagram in place from its headers' cached seed
    (``_seeded_icrc``), not through ``compute_icrc``, and no packet object is built (a tuple
    is made in C, a ``DataPacket`` costs far more). A function of its own, not an alias: the
    native build calls a function directly but an alias through Python's calling convention."""
    flags = datagram[8]
    timestamped = flags & BTH_FLAG_TS
    if opcode in _IMM_OPCODE_SET:
        layout = _DATA_TS_IMM if timestamped else _DATA_IMM
    else:
        layout = _DATA_TS if timestamped else _DATA
    header_size = layout.size
    end = size - ICRC_LEN
    if end < header_size:
        raise DecodeError(
            DropReason.TRUNCATED, f"opcode {opcode:#x}: {end} bytes, headers need {header_size}"
        )
    (carried,) = _ICRC.unpack_from(datagram, end)
    if _seeded_icrc(datagram, end, size, ip, src_port, dst_port) != carried:
        raise DecodeError(DropReason.BAD_ICRC, "ICRC does not match packet and IP/UDP headers")
    fields = layout.unpack_from(datagram)
    if timestamped:
        return (
            fields[3] & _U24, fields[4] & PSN_MASK, fields[6], fields[5], fields[9],
            fields[10], fields[11], datagram[header_size:end],
            fields[12] if len(fields) > 12 else None, fields[7], fields[8], fields[2],
        )  # fmt: skip
    return (
        fields[3] & _U24, fields[4] & PSN_MASK, fields[6], fields[5], fields[7], fields[8],
        fields[9], datagram[header_size:end], fields[10] if len(fields) > 10 else None,
        None, 0, fields[2],
    )  # fmt: skip


def data_packet_fields(packet: DataPacket) -> WholeDataFields:
    """``packet``'s fields as ``decode_whole_data_fields`` gives them (the inverse of
    ``_decode_whole_data``'s mapping), for a caller that holds a ``DataPacket``."""
    p = packet
    return (
        p.dest_qp, p.psn, p.msn, p.rqmsn, p.va, p.rkey, p.dma_length, p.payload, p.immediate,
        p.tx_timestamp, p.ts_flags, p.pkey,
    )  # fmt: skip


def _decode_whole_data(
    datagram: bytes, size: int, opcode: int, ip: IpContext, src_port: int, dst_port: int
) -> DataPacket:
    """``decode_whole_data_fields`` as a ``DataPacket`` (``decode``'s data path)."""
    (
        dest_qp, psn, msn, rqmsn, va, rkey, dma_length, payload, immediate, ts, ts_flags, pkey
    ) = decode_whole_data_fields(datagram, size, opcode, ip, src_port, dst_port)  # fmt: skip
    flags = datagram[8]
    return DataPacket(
        opcode, dest_qp, psn, msn, rqmsn, va, rkey, dma_length, payload, immediate, ts,
        ts_flags, bool(flags & BTH_FLAG_ACKREQ), bool(flags & BTH_FLAG_RTX), pkey,
    )  # fmt: skip


DATA_OPCODE_SET: Final = _DATA_OPCODE_SET
MIN_WHOLE_DATA: Final = BTH_LEN + ICRC_LEN


def _seeded_icrc(
    data: bytes, end: int, size: int, ip: IpContext, src_port: int, dst_port: int
) -> int:
    """The ICRC of the ``size``-byte UDP payload whose bytes up to its ICRC are
    ``data[:end]``, from the cached seed of its headers (see ``_ICRC_SEEDS``)."""
    key = (id(ip), src_port, dst_port, size, data[:_SEEDED_LEN])
    cached = _ICRC_SEEDS.get(key)
    if cached is not None and cached[0] is ip:
        seed = cached[1]
    else:
        seed = _icrc_seed(key, ip, src_port, dst_port, size, data)
    return crc32(memoryview(data)[_SEEDED_LEN:end], seed)


def _icrc_seed(
    key: tuple[int, int, int, int, bytes],
    ip: IpContext,
    src_port: int,
    dst_port: int,
    size: int,
    datagram: bytes,
) -> int:
    """The CRC of a packet's masked pseudo-header and BTH bytes 0-7, kept in
    ``_ICRC_SEEDS`` for the next packet with the same headers."""
    pseudo = pseudo_header_crc(ip, src_port, dst_port, size + 8, datagram[:4])
    seed = crc32(datagram[5:_SEEDED_LEN], pseudo)
    if len(_ICRC_SEEDS) >= MAX_ICRC_SEEDS:
        _ICRC_SEEDS.clear()
    _ICRC_SEEDS[key] = (ip, seed)
    return seed


def _decode_data(
    datagram: bytes, opcode: int, *, trimmed: bool, layout: struct.Struct | None = None
) -> DataPacket | TrimmedDataHeader:
    """``layout``: the header struct when the caller already looked it up."""
    flags = datagram[8]
    timestamped = bool(flags & BTH_FLAG_TS)
    if layout is None:
        layout = data_header_struct(opcode, timestamped)
    end = len(datagram) if trimmed else len(datagram) - ICRC_LEN
    if end < layout.size:
        raise DecodeError(
            DropReason.TRUNCATED, f"opcode {opcode:#x}: {end} bytes, headers need {layout.size}"
        )
    fields = layout.unpack_from(datagram)
    pkey = fields[2]
    qp = fields[3] & _U24
    psn = fields[4] & PSN_MASK
    rqmsn, msn = fields[5], fields[6]
    if timestamped:
        ts, ts_flags = fields[7], fields[8]
        va, rkey, dma_length = fields[9], fields[10], fields[11]
        immediate = fields[12] if len(fields) > 12 else None
    else:
        ts, ts_flags = None, 0
        va, rkey, dma_length = fields[7], fields[8], fields[9]
        immediate = fields[10] if len(fields) > 10 else None
    ack_req = bool(flags & BTH_FLAG_ACKREQ)
    retransmit = bool(flags & BTH_FLAG_RTX)
    if trimmed:
        return TrimmedDataHeader(
            opcode, qp, psn, msn, rqmsn, va, rkey, dma_length, immediate, ts, ts_flags, ack_req,
            retransmit, pkey,
        )  # fmt: skip
    return DataPacket(
        opcode, qp, psn, msn, rqmsn, va, rkey, dma_length, datagram[layout.size : end], immediate,
        ts, ts_flags, ack_req, retransmit, pkey,
    )  # fmt: skip


def _decode_sack(datagram: bytes) -> SackPacket:
    (
        _op, _b1, pkey, qp, psn, word0, ack_off, entropy, src_pdc, dst_pdc, cack, cc, mpr,
        sack_off, bitmap, echoed, ooo, word_cc,
    ) = _SACK.unpack_from(datagram)  # fmt: skip
    # Positional, in field order: one per SACK received, keywords cost a third more.
    return SackPacket(
        qp & _U24, psn & PSN_MASK, cack & PSN_MASK, ack_off, entropy, bitmap, sack_off,
        (word0 >> 5) & 0x3, bool(word0 & 0x10), word0 >> 12, (word0 >> 7) & 0x1F, src_pdc,
        dst_pdc, cc >> 4, cc & 0xF, mpr, echoed, ooo & 0x7FFF, bool(word_cc >> 31),
        (word_cc >> 24) & 0x7F, word_cc & _U24, pkey,
    )  # fmt: skip


def _decode_nack(datagram: bytes) -> NackPacket:
    (
        _op, _b1, pkey, qp, psn, word0, reason, vendor, entropy, src_pdc, dst_pdc, nack_psn, cc,
        _resv, ts,
    ) = _NACK.unpack_from(datagram)  # fmt: skip
    return NackPacket(
        dest_qp=qp & _U24,
        psn=psn & PSN_MASK,
        reason=reason,
        nack_psn=nack_psn & PSN_MASK,
        entropy=entropy,
        vendor_info=vendor,
        header_type=word0 >> 12,
        next_header=(word0 >> 7) & 0x1F,
        src_pdc=src_pdc,
        dst_pdc=dst_pdc,
        cc_type=cc >> 4,
        cc_flags=cc & 0xF,
        tx_timestamp=ts,
        pkey=pkey,
    )


def _decode_ack(datagram: bytes) -> AckPacket:
    _op, _b1, pkey, qp, psn, aeth = _ACK.unpack_from(datagram)
    return AckPacket(qp & _U24, psn & PSN_MASK, aeth >> 24, aeth & _U24, pkey)


def _decode_probe(datagram: bytes) -> ReliabilityProbe:
    _op, _b1, pkey, qp, word = _BTH.unpack_from(datagram)
    return ReliabilityProbe(qp & _U24, word & PSN_MASK, bool((word >> 24) & BTH_FLAG_ACKREQ), pkey)


def _decode_endpoint(datagram: bytes) -> EndpointMessage:
    op, _b1, pkey, qp, word, ep_type, flags, seq, value = _EP.unpack_from(datagram)
    if ep_type not in _EP_TYPES:
        raise DecodeError(DropReason.BAD_FIELD, f"unknown endpoint request type {ep_type}")
    more: tuple[tuple[int, int], ...] = ()
    extra = len(datagram) - ICRC_LEN - _EP.size
    if extra:  # only an EV_PROBE response gets here with bytes after its EPH (see ``decode``)
        count, partial = divmod(extra, _EPH.size)
        if partial or ep_type != _EV_PROBE or count >= MAX_EV_PROBE_ANSWERS:
            raise DecodeError(
                DropReason.BAD_FIELD, f"{extra} bytes after the EPH of an endpoint response"
            )
        answers = []
        for offset in range(_EP.size, _EP.size + extra, _EPH.size):
            more_type, _flags, more_seq, more_value = _EPH.unpack_from(datagram, offset)
            if more_type != _EV_PROBE:
                raise DecodeError(
                    DropReason.BAD_FIELD, f"endpoint type {more_type} among EV probe answers"
                )
            answers.append((more_seq, more_value))
        more = tuple(answers)
    return EndpointMessage(
        qp & _U24, word & PSN_MASK, op == Opcode.EP_RESPONSE, ep_type, seq, value, flags, pkey,
        more,
    )  # fmt: skip


#: Control opcodes: their fixed header layout and decoder.
_CONTROL_DECODERS: Final[dict[int, tuple[struct.Struct, Callable[[bytes], Packet]]]] = {
    Opcode.SACK: (_SACK, _decode_sack),
    Opcode.NACK: (_NACK, _decode_nack),
    Opcode.ACK: (_ACK, _decode_ack),
    Opcode.RELIABILITY_PROBE: (_BTH, _decode_probe),
    Opcode.EP_REQUEST: (_EP, _decode_endpoint),
    Opcode.EP_RESPONSE: (_EP, _decode_endpoint),
}
