"""Frames the PTF tests send: built from the project's scapy layers (agent.wire.layers)."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from agent.wire.constants import ROCEV2_UDP_PORT, DscpClass, Opcode
from agent.wire.layers import MrcBTH, MrcCCState, MrcMETH, MrcNETH, MrcRETH, MrcSETH

SRC_V4, DST_V4 = "10.0.1.1", "10.0.2.2"
SRC_V6, DST_V6 = "fd00:1::1", "fd00:2::2"
HOST_MAC = "00:00:00:00:11:11"


def ip_header(
    version: int,
    dscp: int,
    ecn: int,
    flow_label: int = 0,
    src: str | None = None,
    dst: str | None = None,
    ttl: int = 64,
) -> Packet:
    tos = (dscp << 2) | ecn
    if version == 4:
        return IP(src=src or SRC_V4, dst=dst or DST_V4, tos=tos, ttl=ttl, flags="DF", id=0)
    return IPv6(src=src or SRC_V6, dst=dst or DST_V6, tc=tos, fl=flow_label, hlim=ttl)


def mrc_data(
    dst_mac: str,
    *,
    version: int = 4,
    ev: int = 49152,
    psn: int = 0,
    dscp: int = DscpClass.TRIMMABLE,
    ecn: int = 2,
    payload_len: int = 1024,
    flow_label: int = 0,
    opcode: Opcode = Opcode.WRITE_ONLY,
    ts: bool = False,
    src: str | None = None,
    dst: str | None = None,
    ttl: int = 64,
) -> Packet:
    """An MRC data frame (WRITE_*), ECT(0) by default, EV in the UDP source port."""
    from agent.wire.layers import MrcImmDt, MrcTSETH

    mrc = MrcBTH(opcode=opcode, dqpn=0x12, psn=psn, ts=int(ts)) / MrcMETH(msn=1)
    if ts:
        mrc = mrc / MrcTSETH(tx_ts=1234)
    mrc = mrc / MrcRETH(va=0x1000 + psn * payload_len, rkey=0x42, dma_length=payload_len)
    if opcode in (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM):
        mrc = mrc / MrcImmDt(imm=0xABCD)
    mrc = mrc / Raw(bytes((psn + i) % 256 for i in range(payload_len)))
    return (
        Ether(dst=dst_mac, src=HOST_MAC)
        / ip_header(version, dscp, ecn, flow_label, src, dst, ttl)
        / UDP(sport=ev, dport=ROCEV2_UDP_PORT)
        / mrc
    )


def mrc_sack(
    dst_mac: str, *, version: int = 4, ev: int = 49152, psn: int = 0, ecn: int = 0
) -> Packet:
    """A SACK (control class)."""
    return (
        Ether(dst=dst_mac, src=HOST_MAC)
        / ip_header(version, DscpClass.CONTROL, ecn)
        / UDP(sport=ev, dport=ROCEV2_UDP_PORT)
        / MrcBTH(opcode=Opcode.SACK, dqpn=0x12, psn=psn)
        / MrcSETH(cum_ack_psn=psn, entropy=ev)
        / MrcCCState()
    )


def mrc_nack(dst_mac: str, *, version: int = 4, ev: int = 49152, psn: int = 0) -> Packet:
    """A NACK (control class)."""
    return (
        Ether(dst=dst_mac, src=HOST_MAC)
        / ip_header(version, DscpClass.CONTROL, 0)
        / UDP(sport=ev, dport=ROCEV2_UDP_PORT)
        / MrcBTH(opcode=Opcode.NACK, dqpn=0x12, psn=psn)
        / MrcNETH(nack_psn=psn)
    )


def routed(pkt: Packet, smac: str, dmac: str) -> Packet:
    """What a frame looks like after one routed hop: MACs rewritten, TTL/hop limit - 1."""
    out = pkt.copy()
    out[Ether].src = smac
    out[Ether].dst = dmac
    if IP in out:
        out[IP].ttl -= 1
        del out[IP].chksum
    else:
        out[IPv6].hlim -= 1
    return Ether(bytes(out))
