"""The MRC packets the core speaks, as slotted dataclasses (decoded form).

Treat every one as immutable. None is declared frozen: a frozen dataclass's ``__init__`` sets
each field through ``object.__setattr__``, several times a plain one's cost, and the core
builds one per packet sent or received (per data packet, SACK, probe and its answer). For the
same reason each writes out its ``__init__`` (``init=False``): mypyc compiles a written one, but
runs a dataclass-generated one as Python, many times slower (the sender decodes one per SACK).

One class per packet kind; the BTH is flattened into each (``dest_qp``, ``psn``, flags), which keeps
the data path to one object per packet. ``agent.core.codec`` turns them into bytes and back;
field meanings follow ``wire.layers`` (the scapy reference) exactly:

* cumulative PSNs are exclusive ("every PSN before it has arrived");
* RETH ``va`` is where *this* packet's payload goes, ``dma_length`` the whole message's length;
* ``tx_timestamp`` is the sender's clock in microseconds modulo 2**16 (None: no TSETH);
* SETH/NETH ``cc_flags`` bit 0 is the ECN echo;
* SETH ``probe_response`` (the ``pr`` bit) is set when the SACK answers a reliability probe, so
  the answered PSN is the probed one, not a packet that arrived.

Reserved bits are sent as 0 and ignored on receipt; everything else round-trips exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from wire.constants import CC_FLAG_ECN_ECHO

#: The default partition key, the only one MRC uses.
DEFAULT_PKEY = 0xFFFF


@dataclass(init=False, slots=True)
class DataPacket:
    """An RDMA write packet (opcodes 0xC6-0xCB): METH, [TSETH], RETH, [immediate], payload."""

    opcode: int
    dest_qp: int
    psn: int
    msn: int
    rqmsn: int
    va: int
    rkey: int
    dma_length: int
    payload: bytes
    immediate: int | None = None
    tx_timestamp: int | None = None
    ts_flags: int = 0
    ack_req: bool = False
    retransmit: bool = False
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        opcode: int,
        dest_qp: int,
        psn: int,
        msn: int,
        rqmsn: int,
        va: int,
        rkey: int,
        dma_length: int,
        payload: bytes,
        immediate: int | None = None,
        tx_timestamp: int | None = None,
        ts_flags: int = 0,
        ack_req: bool = False,
        retransmit: bool = False,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.opcode = opcode
        self.dest_qp = dest_qp
        self.psn = psn
        self.msn = msn
        self.rqmsn = rqmsn
        self.va = va
        self.rkey = rkey
        self.dma_length = dma_length
        self.payload = payload
        self.immediate = immediate
        self.tx_timestamp = tx_timestamp
        self.ts_flags = ts_flags
        self.ack_req = ack_req
        self.retransmit = retransmit
        self.pkey = pkey


@dataclass(init=False, slots=True)
class TrimmedDataHeader:
    """What is left of a data packet a switch trimmed: its headers, no payload, no ICRC.

    Recognised by the TRIMMED / TRIMMED_LASTHOP DSCP, never by its bytes alone; the receiver
    answers it with a NACK so the sender retransmits at once.
    """

    opcode: int
    dest_qp: int
    psn: int
    msn: int
    rqmsn: int
    va: int
    rkey: int
    dma_length: int
    immediate: int | None = None
    tx_timestamp: int | None = None
    ts_flags: int = 0
    ack_req: bool = False
    retransmit: bool = False
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        opcode: int,
        dest_qp: int,
        psn: int,
        msn: int,
        rqmsn: int,
        va: int,
        rkey: int,
        dma_length: int,
        immediate: int | None = None,
        tx_timestamp: int | None = None,
        ts_flags: int = 0,
        ack_req: bool = False,
        retransmit: bool = False,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.opcode = opcode
        self.dest_qp = dest_qp
        self.psn = psn
        self.msn = msn
        self.rqmsn = rqmsn
        self.va = va
        self.rkey = rkey
        self.dma_length = dma_length
        self.immediate = immediate
        self.tx_timestamp = tx_timestamp
        self.ts_flags = ts_flags
        self.ack_req = ack_req
        self.retransmit = retransmit
        self.pkey = pkey


@dataclass(init=False, slots=True)
class AckPacket:
    """ACK (0xD1): BTH + AETH. The testbed uses it as the message-completion report: ``msn``
    is the message, ``syndrome`` ``AethSyndrome.ACK`` (placed in full) or a NAK code (refused),
    and the BTH ``psn`` the receiver's cumulative PSN."""

    dest_qp: int
    psn: int
    syndrome: int
    msn: int
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        dest_qp: int,
        psn: int,
        syndrome: int,
        msn: int,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.syndrome = syndrome
        self.msn = msn
        self.pkey = pkey


@dataclass(init=False, slots=True)
class SackPacket:
    """SACK (0xDC): BTH + SETH + CC_STATE, answering the data packets that arrived since the last
    one (coalesced, see ``agent.core.receiver``).

    ``cack_psn`` is cumulative (exclusive); PSN ``cack_psn + ack_psn_offset`` is the packet being
    answered, which arrived on EV ``entropy``; bitmap bit i (LSB first) says PSN
    ``cack_psn + sack_offset + i`` arrived. ``echoed_timestamp`` is that packet's TSETH value.
    """

    dest_qp: int
    psn: int
    cack_psn: int
    ack_psn_offset: int
    entropy: int
    bitmap: int
    sack_offset: int = 0
    skip_mode: int = 0
    probe_response: bool = False
    header_type: int = 0
    next_header: int = 0
    src_pdc: int = 0
    dst_pdc: int = 0
    cc_type: int = 0
    cc_flags: int = 0
    mpr: int = 0
    echoed_timestamp: int = 0
    out_of_order_count: int = 0
    rc: bool = False
    rcv_cwnd_pen: int = 0
    received_bytes: int = 0
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        dest_qp: int,
        psn: int,
        cack_psn: int,
        ack_psn_offset: int,
        entropy: int,
        bitmap: int,
        sack_offset: int = 0,
        skip_mode: int = 0,
        probe_response: bool = False,
        header_type: int = 0,
        next_header: int = 0,
        src_pdc: int = 0,
        dst_pdc: int = 0,
        cc_type: int = 0,
        cc_flags: int = 0,
        mpr: int = 0,
        echoed_timestamp: int = 0,
        out_of_order_count: int = 0,
        rc: bool = False,
        rcv_cwnd_pen: int = 0,
        received_bytes: int = 0,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.cack_psn = cack_psn
        self.ack_psn_offset = ack_psn_offset
        self.entropy = entropy
        self.bitmap = bitmap
        self.sack_offset = sack_offset
        self.skip_mode = skip_mode
        self.probe_response = probe_response
        self.header_type = header_type
        self.next_header = next_header
        self.src_pdc = src_pdc
        self.dst_pdc = dst_pdc
        self.cc_type = cc_type
        self.cc_flags = cc_flags
        self.mpr = mpr
        self.echoed_timestamp = echoed_timestamp
        self.out_of_order_count = out_of_order_count
        self.rc = rc
        self.rcv_cwnd_pen = rcv_cwnd_pen
        self.received_bytes = received_bytes
        self.pkey = pkey

    @property
    def ecn_echo(self) -> bool:
        """Whether the answered packet arrived CE-marked."""
        return bool(self.cc_flags & CC_FLAG_ECN_ECHO)


@dataclass(init=False, slots=True)
class NackPacket:
    """NACK (0xDD): BTH + NETH. ``nack_psn`` is the PSN refused, ``reason`` a ``NackReason``
    (kept as an int: vendor reasons must survive a round trip), ``entropy`` the EV it came on,
    ``tx_timestamp`` its echoed TSETH value."""

    dest_qp: int
    psn: int
    reason: int
    nack_psn: int
    entropy: int
    vendor_info: int = 0
    header_type: int = 0
    next_header: int = 0
    src_pdc: int = 0
    dst_pdc: int = 0
    cc_type: int = 0
    cc_flags: int = 0
    tx_timestamp: int = 0
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        dest_qp: int,
        psn: int,
        reason: int,
        nack_psn: int,
        entropy: int,
        vendor_info: int = 0,
        header_type: int = 0,
        next_header: int = 0,
        src_pdc: int = 0,
        dst_pdc: int = 0,
        cc_type: int = 0,
        cc_flags: int = 0,
        tx_timestamp: int = 0,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.reason = reason
        self.nack_psn = nack_psn
        self.entropy = entropy
        self.vendor_info = vendor_info
        self.header_type = header_type
        self.next_header = next_header
        self.src_pdc = src_pdc
        self.dst_pdc = dst_pdc
        self.cc_type = cc_type
        self.cc_flags = cc_flags
        self.tx_timestamp = tx_timestamp
        self.pkey = pkey

    @property
    def ecn_echo(self) -> bool:
        """Whether the NACKed packet arrived CE-marked."""
        return bool(self.cc_flags & CC_FLAG_ECN_ECHO)


@dataclass(init=False, slots=True)
class ReliabilityProbe:
    """Reliability probe (0xDE): the BTH alone; ``psn`` is the probed PSN. The receiver
    answers with a SACK whose ``probe_response`` bit is set."""

    dest_qp: int
    psn: int
    ack_req: bool = False
    pkey: int = DEFAULT_PKEY

    def __init__(
        self,
        dest_qp: int,
        psn: int,
        ack_req: bool = False,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.ack_req = ack_req
        self.pkey = pkey


@dataclass(init=False, slots=True)
class EndpointMessage:
    """Endpoint request (0xD8) or response (0xD9): BTH + EPH.

    ``ep_type`` is an ``EpType``; ``seq`` pairs a response with its request; ``value`` is the EV
    being probed (EV_PROBE) or the port-state bitmap, bit p set when plane p is up
    (PORT_STATUS).

    ``more_answers``: further EV-probe answers, ``(seq, value)`` each, that an EV_PROBE
    response carries after its own (one more EPH each on the wire, see ``wire.layers``).
    A receiver answers the probes that arrived together in one response, because each probe
    answered alone cost its sender a datagram to receive and decode, and under loss probe
    answers were a large share of the datagrams a sender received.
    """

    dest_qp: int
    psn: int
    response: bool
    ep_type: int
    seq: int
    value: int
    flags: int = 0
    pkey: int = DEFAULT_PKEY
    more_answers: tuple[tuple[int, int], ...] = ()

    def __init__(
        self,
        dest_qp: int,
        psn: int,
        response: bool,
        ep_type: int,
        seq: int,
        value: int,
        flags: int = 0,
        pkey: int = DEFAULT_PKEY,
        more_answers: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.response = response
        self.ep_type = ep_type
        self.seq = seq
        self.value = value
        self.flags = flags
        self.pkey = pkey
        self.more_answers = more_answers


#: Every decoded packet kind.
Packet = (
    DataPacket
    | TrimmedDataHeader
    | AckPacket
    | SackPacket
    | NackPacket
    | ReliabilityProbe
    | EndpointMessage
)
