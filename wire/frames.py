"""Ready-made MRC frames (Ether / IPv4|IPv6 / UDP / MRC) for tests, PTF and captures.

Each constructor returns an *unbuilt* scapy packet: lengths, checksums, the BTH TS flag and the
ICRC are filled in when it is turned into bytes, so a caller may still edit any field
(``frame[MrcSETH].mpr = 3``) and get a consistent packet. The envelope follows the conventions
the host agent sends with and the P4 program parses:

* EV (32 bits, ``wire.entropy``): bits 31-16 are the UDP source port, bits 15-0 the low 16
  bits of the IPv6 flow label. Over IPv4 there is no flow label, so an IPv4 EV must have its
  low 16 bits clear (``Envelope`` refuses one that does, rather than drop entropy silently).
* DSCP by packet kind (``DscpClass`` defaults, overridable per envelope): data TRIMMABLE, a
  retransmitted data packet TRIMMABLE_RETX, everything else (ACK, SACK, NACK, probes, endpoint
  requests/responses) CONTROL. Switches classify by DSCP only.
* ECN: data is sent ECT(0) so switches can mark it CE; control is Not-ECT.
* IPv4: ID 0 and DF set, as the agent's raw-socket sender writes them (the ICRC covers both,
  so a receiver rebuilding the pseudo-header needs them fixed); TTL / hop limit 64.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw

from wire.constants import (
    CC_FLAG_ECN_ECHO,
    DATA_OPCODES,
    ECN_ECT0,
    ECN_NOT_ECT,
    IMM_OPCODES,
    MAX_EV_PROBE_ANSWERS,
    ROCEV2_UDP_PORT,
    DscpClass,
    EpType,
    NackReason,
    Opcode,
    SackSkipMode,
)
from wire.entropy import MAX_EV, ev_flow_label, ev_from_headers, ev_source_port
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
)

DEFAULT_SRC_MAC = "02:00:00:00:00:01"
DEFAULT_DST_MAC = "02:00:00:00:00:02"
DEFAULT_TTL = 64
_IPV4_FLAG_DF = 0x2
_MAX_PSN = 0xFFFFFF
_MAX_TS = 0xFFFF


def ev_of(frame: Packet) -> int:
    """The EV of a built or dissected MRC frame."""
    udp = frame.getlayer(UDP)
    if udp is None:
        raise ValueError("no UDP header: the EV rides in the UDP source port")
    ipv6 = frame.getlayer(IPv6)
    flow_label = int(ipv6.fl) if ipv6 is not None else 0
    return ev_from_headers(int(udp.sport), flow_label)


def traffic_class(dscp: int, ecn: int) -> int:
    """The IPv4 TOS / IPv6 traffic-class byte: DSCP in the high 6 bits, ECN in the low 2."""
    return (dscp << 2) | ecn


@dataclass(frozen=True)
class Envelope:
    """Ethernet, IP and UDP around an MRC packet: between which hosts, on which EV, how marked.

    ``dscp`` and ``ecn`` left as None take the packet kind's defaults (module docstring).
    """

    src_ip: str
    dst_ip: str
    ev: int
    src_mac: str = DEFAULT_SRC_MAC
    dst_mac: str = DEFAULT_DST_MAC
    dscp: int | None = None
    ecn: int | None = None
    ttl: int = DEFAULT_TTL

    def __post_init__(self) -> None:
        src = ipaddress.ip_address(self.src_ip)
        dst = ipaddress.ip_address(self.dst_ip)
        if src.version != dst.version:
            raise ValueError(
                f"source {self.src_ip} and destination {self.dst_ip} differ in IP version"
            )
        if not 0 <= self.ev <= MAX_EV:
            raise ValueError(f"EV {self.ev} is not a 32-bit value")
        if src.version == 4 and ev_flow_label(self.ev):
            raise ValueError(
                f"EV {self.ev:#010x} over IPv4: only bits 31-16 (the UDP source port) travel, "
                "bits 15-0 (the flow label) must be 0"
            )
        if self.dscp is not None and not 0 <= self.dscp <= 63:
            raise ValueError(f"DSCP {self.dscp} out of range 0-63")
        if self.ecn is not None and not 0 <= self.ecn <= 3:
            raise ValueError(f"ECN {self.ecn} out of range 0-3")
        if not 1 <= self.ttl <= 255:
            raise ValueError(f"TTL {self.ttl} out of range 1-255")

    @property
    def is_ipv6(self) -> bool:
        """Whether the packet travels over IPv6 (and so carries the EV's low half)."""
        return ipaddress.ip_address(self.src_ip).version == 6

    def wrap(self, mrc: Packet, *, dscp: int, ecn: int) -> Packet:
        """``mrc`` (an MRC BTH and what follows) inside this envelope.

        ``dscp`` / ``ecn`` are the packet kind's defaults, used where the envelope sets none.
        """
        tos = traffic_class(
            self.dscp if self.dscp is not None else dscp, self.ecn if self.ecn is not None else ecn
        )
        ip: Packet
        if self.is_ipv6:
            ip = IPv6(
                src=self.src_ip, dst=self.dst_ip, tc=tos, fl=ev_flow_label(self.ev), hlim=self.ttl
            )
        else:
            ip = IP(
                src=self.src_ip, dst=self.dst_ip, tos=tos, ttl=self.ttl, id=0, flags=_IPV4_FLAG_DF
            )
        udp = UDP(sport=ev_source_port(self.ev), dport=ROCEV2_UDP_PORT)
        frame: Packet = Ether(src=self.src_mac, dst=self.dst_mac) / ip / udp / mrc
        return frame


def _check_psn(name: str, psn: int) -> None:
    if not 0 <= psn <= _MAX_PSN:
        raise ValueError(f"{name} {psn} is not a 24-bit PSN")


def _check_timestamp(name: str, value: int) -> None:
    if not 0 <= value <= _MAX_TS:
        raise ValueError(f"{name} {value} is not a 16-bit timestamp (microseconds mod 2**16)")


def mrc_data_packet(
    envelope: Envelope,
    *,
    dqpn: int,
    psn: int,
    opcode: Opcode = Opcode.WRITE_ONLY,
    payload: bytes = b"",
    msn: int = 0,
    rqmsn: int = 0,
    va: int = 0,
    rkey: int = 0,
    dma_length: int | None = None,
    imm: int | None = None,
    tx_ts: int | None = None,
    ackreq: bool = False,
    retransmission: bool = False,
) -> Packet:
    """A data packet: BTH, METH, [TSETH], RETH, [ImmDt], payload, ICRC.

    ``tx_ts`` given adds a TSETH (and sets BTH.TS); ``imm`` is required on the *_IMM opcodes
    and refused on the others; ``dma_length`` defaults to the payload length (a one-packet
    message). A retransmission sets BTH.RTX and rides the TRIMMABLE_RETX class.
    """
    if opcode not in DATA_OPCODES:
        raise ValueError(f"opcode {opcode:#x} is not an MRC data opcode (0xC6-0xCB)")
    if (imm is not None) != (opcode in IMM_OPCODES):
        raise ValueError(f"{Opcode(opcode).name}: the immediate goes with the *_IMM opcodes only")
    _check_psn("psn", psn)
    bth = MrcBTH(opcode=opcode, dqpn=dqpn, psn=psn, ackreq=int(ackreq), rtx=int(retransmission))
    mrc: Packet = bth / MrcMETH(rqmsn=rqmsn, msn=msn)
    if tx_ts is not None:
        _check_timestamp("tx_ts", tx_ts)
        mrc = mrc / MrcTSETH(tx_ts=tx_ts)
    length = len(payload) if dma_length is None else dma_length
    mrc = mrc / MrcRETH(va=va, rkey=rkey, dma_length=length)
    if imm is not None:
        mrc = mrc / MrcImmDt(imm=imm)
    if payload:
        mrc = mrc / Raw(load=payload)
    dscp = DscpClass.TRIMMABLE_RETX if retransmission else DscpClass.TRIMMABLE
    return envelope.wrap(mrc, dscp=dscp, ecn=ECN_ECT0)


def mrc_ack(envelope: Envelope, *, dqpn: int, psn: int, syndrome: int = 0, msn: int = 0) -> Packet:
    """A plain ACK (0xD1): BTH, AETH."""
    _check_psn("psn", psn)
    mrc = MrcBTH(opcode=Opcode.ACK, dqpn=dqpn, psn=psn) / AETH(syndrome=syndrome, msn=msn)
    return envelope.wrap(mrc, dscp=DscpClass.CONTROL, ecn=ECN_NOT_ECT)


def mrc_sack(
    envelope: Envelope,
    *,
    dqpn: int,
    psn: int,
    cum_ack_psn: int,
    entropy: int,
    sack_bitmap: int = 0,
    sack_offset: int = 0,
    ack_psn_offset: int = 0,
    skip_mode: SackSkipMode = SackSkipMode.NONE,
    ecn_echo: bool = False,
    echoed_tx_ts: int = 0,
    received_bytes: int = 0,
    ooo_count: int = 0,
    rcv_cwnd_pen: int = 0,
) -> Packet:
    """A SACK (0xDC): BTH, SETH, CC_STATE. Fields not offered here can be set on the result."""
    _check_psn("psn", psn)
    _check_psn("cum_ack_psn", cum_ack_psn)
    _check_timestamp("echoed_tx_ts", echoed_tx_ts)
    seth = MrcSETH(
        m=skip_mode,
        ack_psn_offset=ack_psn_offset,
        entropy=entropy,
        cum_ack_psn=cum_ack_psn,
        cc_flags=CC_FLAG_ECN_ECHO if ecn_echo else 0,
        sack_offset=sack_offset,
        sack_bitmap=sack_bitmap,
    )
    cc_state = MrcCCState(
        echoed_tx_ts=echoed_tx_ts,
        ooo_count=ooo_count,
        rcv_cwnd_pen=rcv_cwnd_pen,
        received_bytes=received_bytes,
    )
    mrc = MrcBTH(opcode=Opcode.SACK, dqpn=dqpn, psn=psn) / seth / cc_state
    return envelope.wrap(mrc, dscp=DscpClass.CONTROL, ecn=ECN_NOT_ECT)


def mrc_nack(
    envelope: Envelope,
    *,
    dqpn: int,
    psn: int,
    nack_psn: int,
    reason: NackReason,
    entropy: int,
    tx_ts: int = 0,
    ecn_echo: bool = False,
) -> Packet:
    """A NACK (0xDD): BTH, NETH. ``tx_ts`` echoes the NACKed packet's TSETH timestamp."""
    _check_psn("psn", psn)
    _check_psn("nack_psn", nack_psn)
    _check_timestamp("tx_ts", tx_ts)
    neth = MrcNETH(
        reason=reason,
        entropy=entropy,
        nack_psn=nack_psn,
        cc_flags=CC_FLAG_ECN_ECHO if ecn_echo else 0,
        tx_ts=tx_ts,
    )
    mrc = MrcBTH(opcode=Opcode.NACK, dqpn=dqpn, psn=psn) / neth
    return envelope.wrap(mrc, dscp=DscpClass.CONTROL, ecn=ECN_NOT_ECT)


def mrc_reliability_probe(envelope: Envelope, *, dqpn: int, psn: int) -> Packet:
    """A reliability probe (0xDE): the BTH alone, its PSN the one probed."""
    _check_psn("psn", psn)
    mrc = MrcBTH(opcode=Opcode.RELIABILITY_PROBE, dqpn=dqpn, psn=psn)
    return envelope.wrap(mrc, dscp=DscpClass.CONTROL, ecn=ECN_NOT_ECT)


def mrc_ep_request(
    envelope: Envelope, *, dqpn: int, ep_type: EpType, seq: int, value: int, psn: int = 0
) -> Packet:
    """An endpoint request (0xD8): EV probe (value = the EV) or port-state update (bitmap)."""
    return _endpoint_packet(envelope, Opcode.EP_REQUEST, dqpn, ep_type, seq, value, psn)


def mrc_ep_response(
    envelope: Envelope,
    *,
    dqpn: int,
    ep_type: EpType,
    seq: int,
    value: int,
    psn: int = 0,
    more_answers: Sequence[tuple[int, int]] = (),
) -> Packet:
    """An endpoint response (0xD9), ``seq`` copied from the request it answers; an EV_PROBE
    response may answer further probes, ``(seq, value)`` each, one more EPH each."""
    if more_answers and ep_type != EpType.EV_PROBE:
        raise ValueError("only an EV_PROBE response carries further answers")
    if len(more_answers) >= MAX_EV_PROBE_ANSWERS:
        raise ValueError(f"at most {MAX_EV_PROBE_ANSWERS} answers in one response")
    frame = _endpoint_packet(envelope, Opcode.EP_RESPONSE, dqpn, ep_type, seq, value, psn)
    eph = frame[MrcEPH]
    for more_seq, more_value in more_answers:
        eph.add_payload(MrcEPH(type=EpType.EV_PROBE, seq=more_seq, value=more_value))
        eph = eph.payload
    return frame


def _endpoint_packet(
    envelope: Envelope, opcode: Opcode, dqpn: int, ep_type: EpType, seq: int, value: int, psn: int
) -> Packet:
    _check_psn("psn", psn)
    mrc = MrcBTH(opcode=opcode, dqpn=dqpn, psn=psn) / MrcEPH(type=ep_type, seq=seq, value=value)
    return envelope.wrap(mrc, dscp=DscpClass.CONTROL, ecn=ECN_NOT_ECT)


def trim(
    frame: Packet,
    *,
    last_hop: bool = False,
    trimmed_dscp: int = DscpClass.TRIMMED,
    trimmed_lasthop_dscp: int = DscpClass.TRIMMED_LASTHOP,
) -> Packet:
    """What a trimming switch forwards of a data frame: a copy cut after RETH (or ImmDt).

    Mirrors ``p4src/include/control/trim.p4``: payload and ICRC gone, IP and UDP lengths set to
    the cut size, UDP checksum 0, DSCP TRIMMED (TRIMMED_LASTHOP on a host-facing port), ECN
    kept. The trimmed DSCP values must be among the layers' ``trimmed_dscps()`` for the result
    to dissect as trimmed.
    """
    if frame.getlayer(MrcRETH) is None:
        raise ValueError("only data packets (with a RETH) are trimmed")
    cut: Packet = frame.copy()
    immediate = cut.getlayer(MrcImmDt)
    last_header = immediate if immediate is not None else cut[MrcRETH]
    last_header.remove_payload()
    bth = cut[MrcBTH]
    bth.icrc = None
    udp = cut[UDP]
    udp.len = None
    udp.chksum = 0
    dscp = trimmed_lasthop_dscp if last_hop else trimmed_dscp
    ip = cut.getlayer(IP)
    if ip is not None:
        ip.tos = traffic_class(dscp, int(ip.tos) & 0x3)
        ip.len = None
        ip.chksum = None
    else:
        ipv6 = cut[IPv6]
        ipv6.tc = traffic_class(dscp, int(ipv6.tc) & 0x3)
        ipv6.plen = None
    return cut
