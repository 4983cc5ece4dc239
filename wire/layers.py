"""Scapy layers for MRC over RoCEv2: the reference decoder for tests, PTF and captures.

Importing this module makes scapy dissect every UDP datagram to port 4791 as MRC, with the
extension headers chosen by the BTH opcode, and makes scapy compute the ICRC when it builds one.
A datagram whose opcode is a standard one (below ``MRC_OPCODE_MIN``, 0xC0: the RoCE baseline's
RDMA WRITEs, ACKs, NAKs and CNPs) dissects as standard RoCEv2 instead, with scapy's own
``scapy.contrib.roce`` layers (``BTH``, ``AETH``, ``CNPPadding``) and the two that module lacks,
``RoceRETH`` and ``RoceImmDt``::

    opcode                      RoCEv2 headers after contrib's BTH
    0x06 / 0x0A  WRITE FIRST / ONLY      RoceRETH, payload
    0x0B         WRITE ONLY with imm.    RoceRETH, RoceImmDt, payload
    0x07 / 0x08  WRITE MIDDLE / LAST     payload
    0x09         WRITE LAST with imm.    RoceImmDt, payload
    0x11         ACKNOWLEDGE             AETH (ACK, or NAK by its syndrome)
    0x81         CNP                     CNPPadding (16 reserved bytes)

(contrib's BTH holds the ICRC as its trailing field, as MrcBTH does; its payload keeps the
pad bytes the BTH's pad count announces.)

Packet layout (all big-endian; ``docs/protocol.md``)::

    Ether / IPv4|IPv6 / UDP(dport 4791) / BTH / <extension headers> / [payload] / ICRC

    opcode                    extension headers after the BTH
    0xC6-0xCB  WRITE_*        METH, TSETH (iff BTH.ts), RETH, ImmDt (0xC9, 0xCB only), payload
    0xD1       ACK            AETH (syndrome 8, MSN 24; scapy's contrib AETH, same layout)
    0xD8/0xD9  EP req/resp    EPH (8); an EV_PROBE response may carry up to 63 more EPHs
    0xDC       SACK           SETH (28) + CC_STATE (8)
    0xDD       NACK           NETH (20)
    0xDE       RELIABILITY    nothing: the BTH's PSN is the probed PSN

Every packet ends with the 4-byte ICRC (``wire.icrc``), held as the BTH's trailing ``icrc``
field the way scapy's contrib BTH holds it, except on a *trimmed* packet: a switch that trims
cuts a data packet after its headers, so payload and ICRC are gone, and re-marks its DSCP as
TRIMMED or TRIMMED_LASTHOP. The BTH recognises a trimmed packet by that DSCP in the enclosing
IP header (``trimmed_dscps()``, configurable like every DSCP class) and then expects no ICRC.

Why an own BTH rather than scapy's ``contrib.roce.BTH``: byte 8 differs. RoCE has AckReq and
7 reserved bits; MRC has A (ack request), R, RTX (retransmission), TS (TSETH present) and 4
reserved bits. The byte layout is RoCEv2's, so a standard RoCEv2 dissector (Wireshark's
InfiniBand one, contrib's BTH) still reads opcode, P_Key, destination QP and PSN of every packet.

Field choices (where the notes leave the field open, the choice is the testbed's):

* BTH: ``padcount`` is always 0, MRC does not pad the payload to 4 bytes (every packet's
  payload length is UDP length - headers - ICRC, and RETH carries the message length);
  ``version`` (TVer) 0; ``pkey`` 0xFFFF (default partition); ``resv8`` (byte 4) 0 on send and
  masked in the ICRC; ``ts`` defaults to "a TSETH follows" when left unset.
* METH: ``rqmsn`` and ``msn`` are 16-bit message sequence numbers; ``msn`` numbers the message a
  data packet belongs to, so packets of different messages can interleave and complete apart.
* TSETH: ``tx_ts`` is the sender's clock when the packet left, in microseconds modulo 2**16
  (wraps after 65.536 ms, far above any RTT of the testbed); a receiver echoes it in
  CC_STATE.echoed_tx_ts or NETH.tx_ts and the sender takes (now - echo) mod 2**16 as RTT.
  ``flags`` is carried and unused (0).
* RETH: ``va`` is the remote virtual address where *this packet's* payload goes, ``rkey`` the
  region's key, ``dma_length`` the length of the whole message, so any packet alone tells the
  receiver where its bytes go and when the message is complete.
* ImmDt: 32-bit immediate, delivered with the completion of *_IMM messages.
* SETH: ``cum_ack_psn`` is the cumulative ack (every PSN before it received),
  ``ack_psn_offset`` the signed offset of the PSN that triggered this SACK from it,
  ``sack_offset`` the signed offset of bitmap bit 0 from it, ``sack_bitmap`` bit i (LSB = 0)
  set when PSN ``cum_ack_psn + sack_offset + i`` arrived. ``entropy`` is the EV of the packet
  being answered; ``m`` the skip mode asked for that EV (``SackSkipMode``). ``cc_flags`` bit 0
  (``CC_FLAG_ECN_ECHO``) is the ECN echo: "the answered packet arrived CE-marked" -- that is
  where the ECN echo travels. ``pr`` is set when the SACK answers a reliability probe (the
  answered PSN is then the probed one, not a packet that arrived). ``type``, ``next``,
  ``cc_type``, ``mpr`` and the PDC ids are carried verbatim (0 unless a caller sets them).
* CC_STATE: ``rcv_cwnd_pen`` is the receiver's back-pressure 0-127, ``received_bytes`` a 24-bit
  running count, ``ooo_count`` the number of out-of-order packets held.
* NETH: ``nack_psn`` the PSN being NACKed, ``reason`` a ``NackReason``, ``entropy`` the EV the
  NACKed packet came on, ``tx_ts`` its echoed TSETH timestamp, ``cc_flags`` bit 0 the ECN echo.
* EPH (0xD8 request / 0xD9 response): ``type`` an ``EpType``; ``seq`` matches a response to its
  request; ``value`` is the EV being probed (EV_PROBE) or the sender's port-state bitmap, bit p
  set when plane/port p is up (PORT_STATUS); ``flags`` unused (0). An EV_PROBE response may
  carry up to ``MAX_EV_PROBE_ANSWERS`` EPHs back to back, each answering one probe: a receiver
  answers the probes that arrived together at once (the testbed's choice; the notes say only
  "request/response"). Each further EPH dissects as another ``MrcEPH`` layer.

Outside the UDP payload (see ``wire.frames``): the 32-bit EV is the UDP source port (bits
31-16) and, over IPv6, the low 16 bits of the flow label (bits 15-0), as the P4 parser builds it
(``p4src/include/control/next.p4``); DSCP gives the traffic class, the ECN bits the congestion mark.
"""

from __future__ import annotations

from typing import Any

from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FCSField,
    IntField,
    ShortField,
    SignedShortField,
    XByteField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, Padding, bind_layers, bind_top_down

from wire.constants import (
    BTH_FLAG_TS,
    DATA_OPCODES,
    ICRC_LEN,
    IMM_OPCODES,
    MRC_OPCODE_MIN,
    ROCE_IMM_OPCODES,
    ROCE_RETH_OPCODES,
    ROCEV2_UDP_PORT,
    DscpClass,
    EpType,
    NackReason,
    Opcode,
    RoceOpcode,
    SackSkipMode,
)
from wire.icrc import compute_icrc, icrc_from_bytes, icrc_to_bytes

__all__ = [
    "AETH",
    "BTH",
    "CNPPadding",
    "MrcBTH",
    "MrcCCState",
    "MrcEPH",
    "MrcImmDt",
    "MrcMETH",
    "MrcNETH",
    "MrcRETH",
    "MrcSETH",
    "MrcTSETH",
    "RoceImmDt",
    "RoceRETH",
    "carries_icrc",
    "icrc_matches",
    "is_trimmed",
    "set_trimmed_dscps",
    "trimmed_dscps",
]

_OPCODE_NAMES = {int(op): op.name for op in Opcode}
_NACK_REASON_NAMES = {int(reason): reason.name for reason in NackReason}
_EP_TYPE_NAMES = {int(ep_type): ep_type.name for ep_type in EpType}
_SKIP_MODE_NAMES = {int(mode): mode.name for mode in SackSkipMode}

_trimmed_dscp_values: frozenset[int] = frozenset({DscpClass.TRIMMED, DscpClass.TRIMMED_LASTHOP})


def set_trimmed_dscps(trimmed: int, trimmed_lasthop: int) -> None:
    """Tell the layers which DSCP values mark a trimmed packet (the classes are configurable).

    Process-wide, like scapy's own ``conf``: dissection has no other place to learn it from.
    """
    global _trimmed_dscp_values
    for value in (trimmed, trimmed_lasthop):
        if not 0 <= value <= 63:
            raise ValueError(f"DSCP {value} out of range 0-63")
    _trimmed_dscp_values = frozenset({trimmed, trimmed_lasthop})


def trimmed_dscps() -> frozenset[int]:
    """The DSCP values that currently mark a trimmed packet."""
    return _trimmed_dscp_values


def _enclosing(layer: Packet | None, kinds: tuple[type[Packet], ...]) -> Packet | None:
    """The nearest layer below ``layer`` (or itself) that is one of ``kinds``."""
    while layer is not None:
        if isinstance(layer, kinds):
            return layer
        layer = layer.underlayer
    return None


def is_trimmed(layer: Packet) -> bool:
    """Whether ``layer`` travels in an IP packet whose DSCP says a switch trimmed it."""
    ip = _enclosing(layer, (IP, IPv6))
    if ip is None:
        return False
    traffic_class = ip.tos if isinstance(ip, IP) else ip.tc
    return (int(traffic_class or 0) >> 2) in _trimmed_dscp_values


def carries_icrc(layer: Packet) -> bool:
    """Whether the packet around ``layer`` ends with an ICRC (every one but a trimmed one)."""
    return not is_trimmed(layer)


class MrcBTH(Packet):
    """Base Transport Header, RoCEv2 byte layout with MRC's byte-8 flags, plus the ICRC trailer."""

    name = "MRC BTH"
    fields_desc = [
        ByteEnumField("opcode", Opcode.WRITE_ONLY, _OPCODE_NAMES),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        XByteField("resv8", 0),
        BitField("dqpn", 0, 24),
        BitField("ackreq", 0, 1),
        BitField("r", 0, 1),
        BitField("rtx", 0, 1),
        BitField("ts", None, 1),
        BitField("resv4", 0, 4),
        BitField("psn", 0, 24),
        ConditionalField(FCSField("icrc", None, fmt="<I"), carries_icrc),
    ]

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        """Dissect a standard opcode (the RoCE baseline's) as scapy's RoCEv2 ``BTH``."""
        if _pkt and _pkt[0] < MRC_OPCODE_MIN:
            return BTH
        return cls

    def post_build(self, pkt: bytes, pay: bytes) -> bytes:
        """Fill in the TS flag (when unset) and the ICRC (when unset and the packet has one)."""
        if self.ts is None and self.haslayer(MrcTSETH):
            pkt = pkt[:8] + bytes([pkt[8] | BTH_FLAG_TS]) + pkt[9:]
        packet = pkt + pay
        if self.icrc is None and carries_icrc(self):
            datagram = _ip_udp_headers(self, len(packet)) + packet
            packet = packet[:-ICRC_LEN] + icrc_to_bytes(compute_icrc(datagram))
        return packet


class MrcMETH(Packet):
    """MRC Extended Transport Header on every data packet: which message a packet belongs to."""

    name = "MRC METH"
    fields_desc = [
        ShortField("rqmsn", 0),
        ShortField("msn", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """A TSETH follows when the BTH's TS flag says so, otherwise the RETH."""
        bth = _enclosing(self, (MrcBTH,))
        if bth is not None and bth.ts:
            return MrcTSETH
        return MrcRETH


class MrcTSETH(Packet):
    """Timestamp extension header: the sender's transmit time, echoed back for RTT."""

    name = "MRC TSETH"
    fields_desc = [
        ShortField("tx_ts", 0),
        XShortField("flags", 0),
    ]


class MrcRETH(Packet):
    """RDMA Extended Transport Header, on every MRC data packet so any order can be placed."""

    name = "MRC RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_length", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """The immediate follows on the *_IMM opcodes; the payload follows otherwise."""
        bth = _enclosing(self, (MrcBTH,))
        if bth is not None and bth.opcode in IMM_OPCODES:
            return MrcImmDt
        return Packet.guess_payload_class(self, payload)


class MrcImmDt(Packet):
    """Immediate data of WRITE_LAST_IMM / WRITE_ONLY_IMM."""

    name = "MRC ImmDt"
    fields_desc = [XIntField("imm", 0)]


class MrcSETH(Packet):
    """Selective-ACK extension header: cumulative ack, bitmap, echoed EV."""

    name = "MRC SETH"
    fields_desc = [
        BitField("type", 0, 4),
        BitField("next", 0, 5),
        BitEnumField("m", SackSkipMode.NONE, 2, _SKIP_MODE_NAMES),
        BitField("pr", 0, 1),
        BitField("reserved0", 0, 4),
        SignedShortField("ack_psn_offset", 0),
        XIntField("entropy", 0),
        ShortField("src_pdc_id", 0),
        ShortField("dst_pdc_id", 0),
        XByteField("reserved1", 0),
        BitField("cum_ack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_flags", 0, 4),
        ByteField("mpr", 0),
        SignedShortField("sack_offset", 0),
        XLongField("sack_bitmap", 0),
    ]


class MrcCCState(Packet):
    """Congestion-control state a SACK carries back: echoed timestamp and receiver pressure."""

    name = "MRC CC_STATE"
    fields_desc = [
        ShortField("echoed_tx_ts", 0),
        BitField("reserved", 0, 1),
        BitField("ooo_count", 0, 15),
        BitField("r_c", 0, 1),
        BitField("rcv_cwnd_pen", 0, 7),
        BitField("received_bytes", 0, 24),
    ]


class MrcNETH(Packet):
    """NACK extension header: which PSN, and why (a trim, a missing buffer, ...)."""

    name = "MRC NETH"
    fields_desc = [
        BitField("type", 0, 4),
        BitField("next", 0, 5),
        BitField("reserved0", 0, 7),
        ByteEnumField("reason", NackReason.TRIMMED, _NACK_REASON_NAMES),
        XByteField("vendor", 0),
        XIntField("entropy", 0),
        ShortField("src_pdc_id", 0),
        ShortField("dst_pdc_id", 0),
        XByteField("reserved1", 0),
        BitField("nack_psn", 0, 24),
        BitField("cc_type", 0, 4),
        BitField("cc_flags", 0, 4),
        XByteField("reserved2", 0),
        ShortField("tx_ts", 0),
    ]


class MrcEPH(Packet):
    """Endpoint header of requests/responses 0xD8/0xD9: EV probes and port-state updates."""

    name = "MRC EPH"
    fields_desc = [
        ByteEnumField("type", EpType.EV_PROBE, _EP_TYPE_NAMES),
        XByteField("flags", 0),
        ShortField("seq", 0),
        XIntField("value", 0),
    ]


class RoceRETH(Packet):
    """RoCEv2 RDMA Extended Transport Header, on a write's FIRST or ONLY packet only: where
    the whole message goes and how long it is (scapy's contrib module has none)."""

    name = "RoCE RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_length", 0),
    ]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        """The immediate follows on WRITE ONLY with immediate, the payload otherwise."""
        bth = _enclosing(self, (BTH,))
        if bth is not None and bth.opcode in ROCE_IMM_OPCODES:
            return RoceImmDt
        return Packet.guess_payload_class(self, payload)


class RoceImmDt(Packet):
    """RoCEv2 immediate data of WRITE LAST / ONLY with immediate."""

    name = "RoCE ImmDt"
    fields_desc = [XIntField("imm", 0)]


def icrc_matches(packet: Packet) -> bool:
    """Whether the ICRC an MRC packet carries is the one its bytes call for.

    Works on what the fields say now (a dissected packet, possibly edited, or a built one), and
    on a standard RoCEv2 packet (scapy's contrib ``BTH``) alike: one ICRC for both.
    Raises ``ValueError`` when the packet has no ICRC to check: not MRC or RoCE over IP/UDP, or
    trimmed (a receiver recognises a trimmed packet by its DSCP and skips the check).
    """
    bth = packet.getlayer(MrcBTH)
    carried: int | None
    if bth is None:
        bth = packet.getlayer(BTH)
        if bth is None:
            raise ValueError("not an MRC or RoCEv2 packet: no BTH layer")
        # contrib's BTH reads the (least-significant-byte-first) ICRC as a big-endian number
        carried = (
            None if bth.icrc is None else int.from_bytes(bth.icrc.to_bytes(4, "big"), "little")
        )
    else:
        if not carries_icrc(bth):
            raise ValueError("a trimmed packet has no ICRC (its DSCP marks it trimmed)")
        carried = bth.icrc
    mrc_bytes = _bytes_without_padding(bth)
    if carried is None:
        carried = icrc_from_bytes(mrc_bytes[-ICRC_LEN:])
    datagram = _ip_udp_headers(bth, len(mrc_bytes)) + mrc_bytes
    return compute_icrc(datagram) == carried


def _bytes_without_padding(bth: Packet) -> bytes:
    """The UDP payload from the BTH on, rebuilt without the Ethernet padding scapy appends."""
    chain: Packet = bth.copy()
    padding = chain.getlayer(Padding)
    if padding is not None and padding.underlayer is not None:
        padding.underlayer.remove_payload()
    return bytes(chain)


def _ip_udp_headers(bth: Packet, udp_payload_len: int) -> bytes:
    """IP and UDP headers of the datagram around ``bth``, as they will be on the wire.

    Built from copies without payload, because the real headers are only finished after the
    BTH is (lengths and checksums depend on it); the fields the ICRC masks do not matter.
    """
    udp = bth.underlayer
    if not isinstance(udp, UDP):
        raise ValueError(
            "the ICRC covers the IP and UDP headers: put MrcBTH under IP/UDP or IPv6/UDP, "
            "or give icrc= explicitly"
        )
    ip = udp.underlayer
    udp_len = udp.len if udp.len is not None else 8 + udp_payload_len
    udp_header = UDP(sport=udp.sport, dport=udp.dport, len=udp_len, chksum=0)
    if isinstance(ip, IP):
        header = _header_only(ip, proto=ip.proto)
        if header.len is None:
            header.len = len(header) + udp_len
        return bytes(header) + bytes(udp_header)
    if isinstance(ip, IPv6):
        header = _header_only(ip, nh=ip.nh)
        if header.plen is None:
            header.plen = udp_len
        return bytes(header) + bytes(udp_header)
    raise ValueError("the ICRC needs UDP directly over IPv4 or IPv6")


def _header_only(ip: Packet, **pinned: Any) -> Packet:
    """A copy of ``ip`` without payload, with fields that the payload had implied pinned."""
    header: Packet = ip.copy()
    header.remove_payload()
    for name, value in pinned.items():
        header.setfieldval(name, value)
    return header


def _bind_mrc_to_rocev2_port() -> None:
    """Make UDP port 4791 dissect as MRC, whatever else was bound to it and in which order.

    Scapy tries a layer's bindings in registration order. ``scapy.contrib.roce`` binds its own
    BTH to port 4791, and scapy binds DNS, DHCP, NTP... to well-known *source* ports; an MRC
    packet's source port is its EV, which may be any of them. So the MRC binding goes first
    in UDP's list and replaces any other port-4791 binding. Modules imported later append
    behind it, so they cannot take precedence either.
    """
    others = [
        (fields, upper)
        for fields, upper in UDP.payload_guess
        if fields.get("dport") != ROCEV2_UDP_PORT
    ]
    UDP.payload_guess = [({"dport": ROCEV2_UDP_PORT}, MrcBTH), *others]
    bind_top_down(UDP, MrcBTH, dport=ROCEV2_UDP_PORT)


def _bind_roce_headers() -> None:
    """Scapy's RoCEv2 BTH -> RETH / ImmDt by opcode (contrib binds AETH and the CNP itself)."""
    only = RoceOpcode.RC_RDMA_WRITE_ONLY  # bound last: ``BTH()/RoceRETH()`` builds an ONLY
    for opcode in [*sorted(ROCE_RETH_OPCODES - {only}), only]:
        bind_layers(BTH, RoceRETH, opcode=int(opcode))
    for opcode in ROCE_IMM_OPCODES - ROCE_RETH_OPCODES:
        bind_layers(BTH, RoceImmDt, opcode=int(opcode))


def _bind_extension_headers() -> None:
    """BTH -> extension header by opcode; then the fixed successors.

    The last data opcode bound is WRITE_ONLY, so ``MrcBTH()/MrcMETH()`` defaults to it.
    """
    for opcode in [*sorted(DATA_OPCODES - {Opcode.WRITE_ONLY}), Opcode.WRITE_ONLY]:
        bind_layers(MrcBTH, MrcMETH, opcode=int(opcode))
    bind_layers(MrcBTH, AETH, opcode=int(Opcode.ACK))
    bind_layers(MrcBTH, MrcEPH, opcode=int(Opcode.EP_RESPONSE))
    bind_layers(MrcBTH, MrcEPH, opcode=int(Opcode.EP_REQUEST))
    bind_layers(MrcBTH, MrcSETH, opcode=int(Opcode.SACK))
    bind_layers(MrcBTH, MrcNETH, opcode=int(Opcode.NACK))
    bind_layers(MrcEPH, MrcEPH)  # the further answers of an EV_PROBE response
    bind_layers(MrcSETH, MrcCCState)
    bind_layers(MrcTSETH, MrcRETH)


_bind_mrc_to_rocev2_port()
_bind_extension_headers()
_bind_roce_headers()
