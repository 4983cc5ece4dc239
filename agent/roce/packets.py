"""The three kinds of RoCEv2 packet the baseline exchanges, as plain values.

``RoceData`` is an RDMA WRITE packet (FIRST, MIDDLE, LAST, ONLY, with or without immediate),
``RoceAck`` an RC ACKNOWLEDGE carrying an AETH (a positive ACK or a NAK, by its syndrome) and
``RoceCnp`` a congestion notification. ``agent.roce.codec`` turns them into bytes and back.

The BTH is RoCE's own (IBTA Vol. 1, 9.2): byte 1 holds SE, MigReq, the pad count and TVer,
byte 4 FECN/BECN (reserved in RoCEv2 but for a CNP's BECN), byte 8 AckReq and 7 reserved bits,
so unlike MRC's BTH there is no retransmission or timestamp flag: a RoCE responder cannot tell
a retransmission from a first copy, and needs none, since it accepts only the expected PSN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from wire.constants import ROCE_IMM_OPCODES, ROCE_RETH_OPCODES

#: The default partition key, as MRC uses it.
DEFAULT_PKEY: Final = 0xFFFF

#: AETH syndrome of the testbed's *selective NAK*, the one addition to RoCE's wire format, sent
#: only by a responder running selective repeat (``RoceConfig.selective_repeat``). The IBTA's
#: AETH has no SACK bitmap, and its sequence-error NAK means "everything before this PSN
#: arrived, resend from it", which cannot name a second gap. So a selective NAK is an
#: ACKNOWLEDGE whose syndrome is a NAK with code 31 (0x7F: NAK class, the last code the IBTA
#: reserves, the least likely to be given a meaning), whose BTH PSN is the first missing PSN of
#: one gap and whose AETH low 24 bits (the MSN of every other AETH) count the missing PSNs. It
#: acknowledges nothing: ACKs stay cumulative. One goes out per gap, when the packet that
#: reveals the gap arrives. A requester not running selective repeat takes it for the unknown
#: NAK it is and fails the QP, as a NIC would. NICs that do selective repeat (NVIDIA's recent
#: ones) do not publish their wire format; this is the testbed's.
SELECTIVE_NAK: Final = 0x7F

_RETH_OPCODE_SET: Final = frozenset(int(op) for op in ROCE_RETH_OPCODES)
_IMM_OPCODE_SET: Final = frozenset(int(op) for op in ROCE_IMM_OPCODES)


def has_reth(opcode: int) -> bool:
    """Whether packets of ``opcode`` carry a RETH (the first or only packet of a write)."""
    return opcode in _RETH_OPCODE_SET


def has_immediate(opcode: int) -> bool:
    """Whether packets of ``opcode`` carry an ImmDt (the last or only packet of a write)."""
    return opcode in _IMM_OPCODE_SET


@dataclass(init=False, slots=True)
class RoceData:
    """One RDMA WRITE packet.

    ``va``, ``rkey`` and ``dma_length`` are the RETH, present on FIRST and ONLY packets only
    (0 otherwise): where the whole message goes and how long it is. ``immediate`` is given
    exactly on the *_IMM opcodes. ``payload`` excludes the pad bytes that round it up to a
    multiple of 4 on the wire (the BTH's pad count says how many there were).

    Treat as immutable; not frozen and with its ``__init__`` written out, for speed, as
    ``agent.core.datagram``'s per-packet objects: one is made for every packet each way.
    """

    opcode: int
    dest_qp: int
    psn: int
    payload: bytes
    ack_req: bool
    va: int
    rkey: int
    dma_length: int
    immediate: int | None
    solicited: bool
    pkey: int

    def __init__(
        self,
        opcode: int,
        dest_qp: int,
        psn: int,
        payload: bytes,
        ack_req: bool = False,
        va: int = 0,
        rkey: int = 0,
        dma_length: int = 0,
        immediate: int | None = None,
        solicited: bool = False,
        pkey: int = DEFAULT_PKEY,
    ) -> None:
        self.opcode = opcode
        self.dest_qp = dest_qp
        self.psn = psn
        self.payload = payload
        self.ack_req = ack_req
        self.va = va
        self.rkey = rkey
        self.dma_length = dma_length
        self.immediate = immediate
        self.solicited = solicited
        self.pkey = pkey


@dataclass(init=False, slots=True)
class RoceAck:
    """An RC ACKNOWLEDGE: AETH ``syndrome`` (ACK with a credit count, or NAK with a code) and
    ``msn``, the responder's count of completed messages. A positive ACK's ``psn`` is the
    newest PSN it acknowledges (all before it too); a NAK's is the PSN it refers to: for a
    sequence error the PSN the responder expects, everything before which it acknowledges.
    A ``SELECTIVE_NAK``'s ``psn`` is a gap's first missing PSN and its ``msn`` field the
    number of PSNs missing there."""

    dest_qp: int
    psn: int
    syndrome: int
    msn: int
    pkey: int

    def __init__(
        self, dest_qp: int, psn: int, syndrome: int, msn: int, pkey: int = DEFAULT_PKEY
    ) -> None:
        self.dest_qp = dest_qp
        self.psn = psn
        self.syndrome = syndrome
        self.msn = msn
        self.pkey = pkey


@dataclass(frozen=True, slots=True)
class RoceCnp:
    """A congestion notification to ``dest_qp``: its data arrived CE-marked."""

    dest_qp: int
    pkey: int = DEFAULT_PKEY


RocePacket = RoceData | RoceAck | RoceCnp
