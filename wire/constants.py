"""Wire-format constants of MRC over RoCEv2, as the whole testbed uses them.

These numbers are the contract between the host agent, the P4 program (``p4src/include/defines.p4``
mirrors them) and the tests; the standard RoCEv2 numbers the RoCE baseline uses (``RoceOpcode``,
``RoceDscp``) live here too, next to MRC's, since agents, switches and dissectors tell the two
apart by them. They follow OCP MRC 1.0 as ``docs/protocol.md`` describes it; where
the specification leaves a choice open, the choice is made here and documented.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

#: RoCEv2's UDP destination port; every MRC packet (data, SACK, NACK, probes) goes to it.
ROCEV2_UDP_PORT: Final = 4791


class Opcode(IntEnum):
    """BTH opcodes. Data opcodes are MRC's own (vendor range), not RoCE's."""

    WRITE_FIRST = 0xC6
    WRITE_MIDDLE = 0xC7
    WRITE_LAST = 0xC8
    WRITE_LAST_IMM = 0xC9
    WRITE_ONLY = 0xCA
    WRITE_ONLY_IMM = 0xCB
    ACK = 0xD1
    EP_REQUEST = 0xD8
    EP_RESPONSE = 0xD9
    SACK = 0xDC
    NACK = 0xDD
    RELIABILITY_PROBE = 0xDE


DATA_OPCODES: Final = frozenset(
    {
        Opcode.WRITE_FIRST,
        Opcode.WRITE_MIDDLE,
        Opcode.WRITE_LAST,
        Opcode.WRITE_LAST_IMM,
        Opcode.WRITE_ONLY,
        Opcode.WRITE_ONLY_IMM,
    }
)
IMM_OPCODES: Final = frozenset({Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM})

#: MRC's opcodes all lie in InfiniBand's manufacturer-specific range 0xC0-0xFF; every opcode
#: below it is a standard one (RoCE's RC, UC, UD and CNP). An agent or a dissector tells the
#: two transports apart by this one comparison on the first byte of the BTH.
MRC_OPCODE_MIN: Final = 0xC0


class RoceOpcode(IntEnum):
    """Standard RoCEv2 BTH opcodes of the RoCE baseline (IBTA Vol. 1, RC; Annex A17 for CNP).

    The reliable-connection (RC) transport's opcodes are 0x00-0x1F; the RoCE baseline speaks
    only RDMA WRITE, with and without immediate, and their acknowledgement, as MRC does.
    """

    RC_RDMA_WRITE_FIRST = 0x06
    RC_RDMA_WRITE_MIDDLE = 0x07
    RC_RDMA_WRITE_LAST = 0x08
    RC_RDMA_WRITE_LAST_IMM = 0x09
    RC_RDMA_WRITE_ONLY = 0x0A
    RC_RDMA_WRITE_ONLY_IMM = 0x0B
    RC_ACKNOWLEDGE = 0x11
    #: Congestion Notification Packet: BTH, 16 reserved bytes, ICRC (RoCEv2, Annex A17).
    CNP = 0x81


ROCE_DATA_OPCODES: Final = frozenset(
    {
        RoceOpcode.RC_RDMA_WRITE_FIRST,
        RoceOpcode.RC_RDMA_WRITE_MIDDLE,
        RoceOpcode.RC_RDMA_WRITE_LAST,
        RoceOpcode.RC_RDMA_WRITE_LAST_IMM,
        RoceOpcode.RC_RDMA_WRITE_ONLY,
        RoceOpcode.RC_RDMA_WRITE_ONLY_IMM,
    }
)
#: RoCE data opcodes with a RETH: only the first packet of a write (or its only one) says where
#: the message goes; MIDDLE and LAST packets follow it at the responder's running address.
ROCE_RETH_OPCODES: Final = frozenset(
    {
        RoceOpcode.RC_RDMA_WRITE_FIRST,
        RoceOpcode.RC_RDMA_WRITE_ONLY,
        RoceOpcode.RC_RDMA_WRITE_ONLY_IMM,
    }
)
#: RoCE data opcodes with an ImmDt: the last packet of a write with immediate (or its only one).
ROCE_IMM_OPCODES: Final = frozenset(
    {RoceOpcode.RC_RDMA_WRITE_LAST_IMM, RoceOpcode.RC_RDMA_WRITE_ONLY_IMM}
)


class NackReason(IntEnum):
    """NETH reason codes."""

    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    UNEXP_EVENT = 0x19


class AethSyndrome(IntEnum):
    """AETH syndrome byte, RoCE's encoding: an ACK, or a NAK with its code in the low 5 bits.

    The testbed sends an ACK (0xD1) to report a message placed in full, and a NAK with
    REMOTE_ACCESS_ERROR for a write the receiver refused (unknown R_Key, outside its region).
    """

    ACK = 0x00
    NAK_PSN_SEQUENCE_ERROR = 0x60
    NAK_INVALID_REQUEST = 0x61
    NAK_REMOTE_ACCESS_ERROR = 0x62
    NAK_REMOTE_OPERATIONAL_ERROR = 0x63


#: AETH credit field of an ACK whose responder does no end-to-end flow control (0b11111,
#: "invalid credit count"): RDMA writes consume no receive WQEs, so there is no credit to give.
AETH_CREDIT_INVALID: Final = 0x1F


class RoceDscp(IntEnum):
    """Default DSCP values of the RoCE baseline's three traffic classes.

    Data 26 and CNP 48 are common NIC defaults for RoCEv2 (its lossless class and the CNP's
    high priority); ACK/NAK travel in a class of their own, 28, so a switch can queue them
    apart from data: the testbed's switches put them on the high-priority queue with CNPs.
    Clear of MRC's six classes, so a fabric carrying both tells them apart by DSCP alone, as it
    does MRC's classes.
    """

    DATA = 26
    ACK = 28
    CNP = 48


class EvState(IntEnum):
    """Entropy-value states, numbered as in the spec."""

    GOOD = 0
    DENIED = 1
    SKIP = 2
    ASSUMED_BAD = 3


class SackSkipMode(IntEnum):
    """SETH ``m`` field: what the receiver asks the sender to do with the echoed EV."""

    NONE = 0
    SKIP_ONCE = 1
    ALWAYS_SKIP = 2


#: Most EV-probe answers one endpoint response carries (its own and ``MAX_EV_PROBE_ANSWERS - 1``
#: further EPHs): 64 x 8 bytes stays far below any path MTU, and a receiver rarely holds more
#: than a few unanswered probes of one peer at a time.
MAX_EV_PROBE_ANSWERS: Final = 64


class EpType(IntEnum):
    """Endpoint request/response (0xD8/0xD9) types: the testbed's choice, the notes give none."""

    EV_PROBE = 1
    PORT_STATUS = 2


class DscpClass(IntEnum):
    """Default DSCP values of the six MRC traffic classes.

    Switches classify by DSCP only, never by opcode. Control, trimmable and trimmed follow the
    public emulator's defaults (46, 4, 12); the other three are the testbed's choice, picked next
    to them and clear of the common AF/EF code points. All six are configurable in the agent and
    the controller; these are only defaults.
    """

    TRIMMABLE = 4
    TRIMMABLE_RETX = 5
    NO_TRIM = 6
    TRIMMED = 12
    TRIMMED_LASTHOP = 13
    CONTROL = 46


# Header sizes in bytes.
BTH_LEN: Final = 12
METH_LEN: Final = 4
TSETH_LEN: Final = 4
RETH_LEN: Final = 16
IMM_LEN: Final = 4
AETH_LEN: Final = 4
SETH_LEN: Final = 28
CC_STATE_LEN: Final = 8
NETH_LEN: Final = 20
EPH_LEN: Final = 8
ICRC_LEN: Final = 4
#: The reserved bytes of a RoCEv2 CNP, between its BTH and its ICRC.
CNP_RESERVED_LEN: Final = 16

#: BTH second-to-last byte flag bits (A, R, RTX, TS, then 4 reserved bits).
BTH_FLAG_ACKREQ: Final = 0x80
BTH_FLAG_R: Final = 0x40
BTH_FLAG_RTX: Final = 0x20
BTH_FLAG_TS: Final = 0x10

#: BTH byte 4 in RoCE: FECN and BECN (forward / backward explicit congestion notification);
#: a CNP sets BECN. MRC leaves the byte reserved; the ICRC masks it either way.
BTH_FECN: Final = 0x80
BTH_BECN: Final = 0x40
#: BTH byte 8 in RoCE: AckReq, then 7 reserved bits.
BTH_ROCE_ACKREQ: Final = 0x80

#: SETH / NETH ``cc_flags`` bit 0: the packet being answered arrived CE-marked (the ECN echo
#: travels here, the testbed's choice: the notes do not say where it goes).
CC_FLAG_ECN_ECHO: Final = 0x1

#: ECN code points in the low two bits of the IP TOS / traffic-class byte.
ECN_NOT_ECT: Final = 0
ECN_ECT1: Final = 1
ECN_ECT0: Final = 2
ECN_CE: Final = 3

#: Default RDMA payload per data packet (RoCE's usual path MTU for a 1500-byte frame).
DEFAULT_PAYLOAD: Final = 1024
