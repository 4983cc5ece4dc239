"""Frames the PTF tests send, built with the project's frame constructors (wire.frames).

Thin wrappers that fix the suite's addresses and defaults (small payloads, a fixed QP), so a test
names only what it varies. Standard RoCEv2 frames (``roce_frame``) are laid out here byte by
byte, so that what the switch is tested against does not depend on the agent's own encoder.
"""

from __future__ import annotations

import struct

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from wire import frames
from wire.constants import (
    ECN_ECT0,
    ECN_NOT_ECT,
    ICRC_LEN,
    ROCE_DATA_OPCODES,
    ROCE_IMM_OPCODES,
    ROCE_RETH_OPCODES,
    AethSyndrome,
    DscpClass,
    NackReason,
    Opcode,
    RoceDscp,
    RoceOpcode,
)
from wire.entropy import ev_from_headers
from wire.frames import Envelope
from wire.icrc import compute_icrc, icrc_to_bytes

SRC_V4, DST_V4 = "10.0.1.1", "10.0.2.2"
SRC_V6, DST_V6 = "fd00:1::1", "fd00:2::2"
HOST_MAC = "00:00:00:00:11:11"
QP = 0x12


def envelope(
    dst_mac: str,
    *,
    version: int = 4,
    ev: int = 49152,
    flow_label: int = 0,
    dscp: int | None = None,
    ecn: int | None = None,
    src: str | None = None,
    dst: str | None = None,
    ttl: int = 64,
) -> Envelope:
    """Ethernet/IP/UDP for a frame from the suite's host; `ev` is the UDP source port here."""
    v4 = version == 4
    return Envelope(
        src_ip=src or (SRC_V4 if v4 else SRC_V6),
        dst_ip=dst or (DST_V4 if v4 else DST_V6),
        ev=ev_from_headers(ev, 0 if v4 else flow_label),
        src_mac=HOST_MAC,
        dst_mac=dst_mac,
        dscp=dscp,
        ecn=ecn,
        ttl=ttl,
    )


def mrc_data(
    dst_mac: str,
    *,
    version: int = 4,
    ev: int = 49152,
    psn: int = 0,
    dscp: int = DscpClass.TRIMMABLE,
    ecn: int = ECN_ECT0,
    payload_len: int = 1024,
    flow_label: int = 0,
    opcode: Opcode = Opcode.WRITE_ONLY,
    ts: bool = False,
    src: str | None = None,
    dst: str | None = None,
    ttl: int = 64,
) -> Packet:
    """An MRC data frame (WRITE_*), ECT(0) by default, EV in the UDP source port."""
    env = envelope(
        dst_mac,
        version=version,
        ev=ev,
        flow_label=flow_label,
        dscp=dscp,
        ecn=ecn,
        src=src,
        dst=dst,
        ttl=ttl,
    )
    imm = 0xABCD if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM) else None
    return frames.mrc_data_packet(
        env,
        dqpn=QP,
        psn=psn,
        opcode=opcode,
        payload=bytes((psn + i) % 256 for i in range(payload_len)),
        msn=1,
        va=0x1000 + psn * payload_len,
        rkey=0x42,
        dma_length=payload_len,
        imm=imm,
        tx_ts=1234 if ts else None,
    )


def mrc_sack(
    dst_mac: str, *, version: int = 4, ev: int = 49152, psn: int = 0, ecn: int = 0
) -> Packet:
    """A SACK (control class)."""
    env = envelope(dst_mac, version=version, ev=ev, ecn=ecn)
    return frames.mrc_sack(env, dqpn=QP, psn=psn, cum_ack_psn=psn, entropy=env.ev)


def mrc_nack(dst_mac: str, *, version: int = 4, ev: int = 49152, psn: int = 0) -> Packet:
    """A NACK for a trimmed packet (control class)."""
    env = envelope(dst_mac, version=version, ev=ev)
    return frames.mrc_nack(
        env, dqpn=QP, psn=psn, nack_psn=psn, reason=NackReason.TRIMMED, entropy=env.ev
    )


def routed(pkt: Packet, smac: str, dmac: str) -> Packet:
    """What a frame looks like after one routed hop: MACs rewritten, TTL/hop limit - 1."""
    out = Ether(bytes(pkt))
    out[Ether].src = smac
    out[Ether].dst = dmac
    if IP in out:
        out[IP].ttl -= 1
        del out[IP].chksum
    else:
        out[IPv6].hlim -= 1
    return Ether(bytes(out))


def roce_frame(
    dst_mac: str,
    opcode: int,
    *,
    version: int = 4,
    sport: int = 49152,
    psn: int = 0,
    dscp: int | None = None,
    ecn: int | None = None,
    payload_len: int = 256,
    syndrome: int = AethSyndrome.ACK,
) -> Packet:
    """A standard RoCEv2 RC frame: BTH, then what ``opcode`` carries (RETH, ImmDt, payload on
    the writes; AETH on ACK 0x11; 16 reserved bytes on CNP 0x81; nothing on others), ICRC.

    DSCP and ECN default to the class of the opcode: data ``RoceDscp.DATA`` and ECT(0), ACK/NAK
    ``RoceDscp.ACK``, CNP ``RoceDscp.CNP``, both not ECN-capable."""
    if opcode in ROCE_DATA_OPCODES:
        kind_dscp, kind_ecn = RoceDscp.DATA, ECN_ECT0
    elif opcode == RoceOpcode.CNP:
        kind_dscp, kind_ecn = RoceDscp.CNP, ECN_NOT_ECT
    else:
        kind_dscp, kind_ecn = RoceDscp.ACK, ECN_NOT_ECT
    env = envelope(
        dst_mac,
        version=version,
        ev=sport,
        dscp=kind_dscp if dscp is None else dscp,
        ecn=kind_ecn if ecn is None else ecn,
    )
    # BTH: opcode | SE,M,pad,TVer | P_Key | FECN,BECN,resv | dest QP | AckReq,resv | PSN.
    becn = 0x40 if opcode == RoceOpcode.CNP else 0
    body = struct.pack("!BBHB", opcode, 0, 0xFFFF, becn) + QP.to_bytes(3, "big")
    body += struct.pack("!I", psn & 0xFFFFFF)
    if opcode in ROCE_RETH_OPCODES:
        body += struct.pack("!QII", 0x1000 + psn * payload_len, 0x42, payload_len)
    if opcode in ROCE_IMM_OPCODES:
        body += struct.pack("!I", 0xABCD)
    if opcode == RoceOpcode.RC_ACKNOWLEDGE:
        body += struct.pack("!I", (syndrome << 24) | 1)
    if opcode == RoceOpcode.CNP:
        body += bytes(16)
    if opcode in ROCE_DATA_OPCODES:
        body += bytes((psn + i) % 256 for i in range(payload_len))
    frame = env.wrap(Raw(load=body + bytes(ICRC_LEN)), dscp=kind_dscp, ecn=kind_ecn)
    frame = Ether(bytes(frame))
    ip = bytes(frame.payload)
    return Ether(bytes(frame)[:-ICRC_LEN] + icrc_to_bytes(compute_icrc(ip)))


def bth_offset(frame: bytes) -> int:
    """Where the BTH starts in an Ethernet frame carrying IPv4 or IPv6 and UDP."""
    ethertype = int.from_bytes(frame[12:14], "big")
    return 14 + (40 if ethertype == 0x86DD else 20) + 8
