"""The host API's enums and records, named as in OCP's ``mrc.h`` / ``mrc_ctl.h`` and verbs.

Enum values are the C API's own numbers (verbs' for QP states, opcodes, statuses and events;
OCP's bits for EV states, modes and capabilities), so a value read from a C program's output
means the same here. Records are frozen dataclasses with ``to_json`` / ``from_json`` where
they cross the control socket.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

from agent.core.ev_expansion import MAX_EV_BYTES, EvMode, FormatMode

__all__ = [
    "MAX_EV_BYTES",
    "Access",
    "AsyncEvent",
    "CtlEvState",
    "DeviceAttr",
    "EpRequest",
    "EpResponse",
    "Ev",
    "EvEvent",
    "EvMode",
    "EvOp",
    "EvOpEntry",
    "EventType",
    "FormatMode",
    "PortAdminState",
    "ProfileState",
    "QpState",
    "QpType",
    "RecvWR",
    "SendFlags",
    "SendWR",
    "Sge",
    "WcOpcode",
    "WcStatus",
    "WorkCompletion",
    "WrOpcode",
]


class QpState(IntEnum):
    """``ibv_qp_state``: MRC QPs go RESET -> INIT -> RTR -> RTS, and ERR on failure."""

    RESET = 0
    INIT = 1
    RTR = 2
    RTS = 3
    SQD = 4
    SQE = 5
    ERR = 6


class QpType(IntEnum):
    """What a QP is, chosen at creation (a testbed extension: OCP's ``mrc_qp_init_attr`` has
    no type, since ``mrc_create_qp`` makes MRC QPs only). ``MRC`` (the default) is an MRC QP;
    ``RC`` (verbs' ``IBV_QPT_RC``, same number) is a RoCEv2 reliable connection, the agent's
    baseline (``agent.roce``): one path, go-back-N, verbs' ``timeout`` and ``retry_cnt``."""

    MRC = 0
    RC = 2


class WrOpcode(IntEnum):
    """``ibv_wr_opcode``: MRC posts WRITE and WRITE with immediate only."""

    RDMA_WRITE = 0
    RDMA_WRITE_WITH_IMM = 1
    SEND = 2
    SEND_WITH_IMM = 3
    RDMA_READ = 4
    ATOMIC_CMP_AND_SWP = 5
    ATOMIC_FETCH_AND_ADD = 6


class WcOpcode(IntEnum):
    """``ibv_wc_opcode`` of the completions MRC produces."""

    RDMA_WRITE = 1
    RECV_RDMA_WITH_IMM = 129


class WcStatus(IntEnum):
    """``ibv_wc_status`` (the ones MRC produces)."""

    SUCCESS = 0
    LOC_LEN_ERR = 1
    LOC_QP_OP_ERR = 2
    LOC_PROT_ERR = 4
    WR_FLUSH_ERR = 5
    REM_INV_REQ_ERR = 9
    REM_ACCESS_ERR = 10
    REM_OP_ERR = 11
    RETRY_EXC_ERR = 12
    GENERAL_ERR = 21


class Access(IntFlag):
    """``ibv_access_flags`` of a memory region."""

    LOCAL_WRITE = 1
    REMOTE_WRITE = 2
    REMOTE_READ = 4
    REMOTE_ATOMIC = 8
    RELAXED_ORDERING = 1 << 20


class SendFlags(IntFlag):
    """``ibv_send_flags``."""

    FENCE = 1
    SIGNALED = 2
    SOLICITED = 4
    INLINE = 8


class EventType(IntEnum):
    """``ibv_event_type`` of the asynchronous events MRC raises."""

    CQ_ERR = 0
    QP_FATAL = 1
    QP_REQ_ERR = 2
    QP_ACCESS_ERR = 3
    PORT_ACTIVE = 9
    PORT_ERR = 10


class ProfileState(IntEnum):
    """``mrc_ctl_profile_state``: INIT -> OFFLINE -> ONLINE -> OFFLINE -> INIT."""

    INIT = 0
    OFFLINE = 1
    ONLINE = 2


class CtlEvState(IntFlag):
    """``mrc_ctl_ev_state``: the states a controller sets, reads and is told of."""

    GOOD = 1 << 0
    ASSUMED_BAD = 1 << 1
    DENIED = 1 << 2
    UNKNOWN = 1 << 31


class EvOp(IntEnum):
    """``mrc_ctl_ev_op``."""

    REPLACE_EV = 0
    MODIFY_EV_STATE = 1
    QUERY_EV_STATE = 2
    QUERY_EV_ARRAY = 3


class PortAdminState(IntEnum):
    """``mrc_ctl_port_admin_state``."""

    DISABLED = 0
    ENABLED = 1


#: ``mrc_device_cap``: the device generates TRIM NACKs.
DEVICE_CAP_TRIM_NACK = 1 << 0
#: ``mrc_ctl_attr_opt`` bits.
OPT_EV_PROFILE_MODIFY_ONLINE = 1 << 0
OPT_CC_PROFILE_MODIFY_ONLINE = 1 << 1
OPT_EV_EVENT = 1 << 2
OPT_EV_EXPLICIT_RANGE = 1 << 3
OPT_EV_EVENT_PRECISE_DROP_CNT = 1 << 4
OPT_EP_OP_EV_PROBE = 1 << 5
#: ``mrc_ctl_ev_op_flags``: REPLACE_EV replaces every copy of the EV.
EV_OP_F_ALL_COPIES = 1 << 0


@dataclass(frozen=True, slots=True)
class Ev:
    """An EV and the port (plane + 1) it goes out of: OCP's ``mrc_ctl_ev``.

    ``val`` is the compact EV's bits, read from its first byte (``MAX_EV_BYTES`` at most;
    shorter is zero-padded). ``Ev.stev(0xC0010000)`` is the 32-bit EV of a two-field STEV
    profile. Port 0 is OCP's "unpopulated".
    """

    val: bytes
    port: int = 1

    def __post_init__(self) -> None:
        if len(self.val) > MAX_EV_BYTES:
            raise ValueError(f"an EV is at most {MAX_EV_BYTES} bytes")
        object.__setattr__(self, "val", bytes(self.val).rstrip(b"\0") or b"\0")

    @classmethod
    def stev(cls, value: int, port: int = 1, bits: int = 32) -> Ev:
        """The EV whose first ``bits`` bits are ``value`` (big-endian)."""
        return cls((value << (-bits % 8)).to_bytes((bits + 7) // 8, "big"), port)

    def as_int(self, bits: int = 32) -> int:
        """The first ``bits`` bits as a number (inverse of ``stev``)."""
        padded = self.val.ljust(MAX_EV_BYTES, b"\0")
        return int.from_bytes(padded, "big") >> (MAX_EV_BYTES * 8 - bits)

    def padded(self) -> bytes:
        """The EV in a full ``MAX_EV_BYTES`` buffer."""
        return self.val.ljust(MAX_EV_BYTES, b"\0")

    def to_json(self) -> dict[str, Any]:
        """Wire form: hex and port."""
        return {"val": "0x" + self.val.hex(), "port": self.port}

    def __str__(self) -> str:
        return f"0x{self.val.hex()}@{self.port}"


@dataclass(frozen=True, slots=True)
class EvOpEntry:
    """One entry of an EV operation (OCP's ``mrc_ctl_ev_op_entry``): the EV, its
    replacement (REPLACE_EV), a state (set or reported), flags (``EV_OP_F_ALL_COPIES``)."""

    ev: Ev
    ev_new: Ev | None = None
    state: CtlEvState | None = None
    flags: int = 0


@dataclass(frozen=True, slots=True)
class EvEvent:
    """An EV's state changed (OCP's ``mrc_ctl_ev_event``); ``drop_count`` events were lost
    just before it because the event CQ was full (the testbed counts them exactly)."""

    profile_id: int
    ev: Ev
    state: CtlEvState
    drop_count: int = 0


@dataclass(frozen=True, slots=True)
class EpRequest:
    """One connectionless EV probe (OCP's ``mrc_ctl_ep_req``): ``req_ev`` to ``dgid``, from
    ``sgid`` (default: this host's address on the EV's port)."""

    req_id: int
    dgid: str
    req_ev: Ev
    sgid: str | None = None
    ev_fmt_mode: FormatMode = FormatMode.STEV


@dataclass(frozen=True, slots=True)
class EpResponse:
    """A probe's answer (OCP's ``mrc_ctl_ep_rsp``): the port it came back on and its RTT in
    nanoseconds."""

    req_id: int
    port: int
    rtt: int
    adj_svc_time: int = 0


@dataclass(frozen=True, slots=True)
class Sge:
    """A scatter/gather element: ``length`` bytes at ``addr`` of the region ``lkey`` names."""

    addr: int
    length: int
    lkey: int


@dataclass(frozen=True, slots=True)
class SendWR:
    """A send work request (``ibv_send_wr``): one WRITE or WRITE with immediate."""

    wr_id: int
    sg_list: tuple[Sge, ...] | list[Sge]
    remote_addr: int
    rkey: int
    opcode: WrOpcode = WrOpcode.RDMA_WRITE
    imm_data: int | None = None
    send_flags: SendFlags = SendFlags.SIGNALED


@dataclass(frozen=True, slots=True)
class RecvWR:
    """A receive work request (``ibv_recv_wr``): consumed by one WRITE with immediate, whose
    data lands where the writer said; ``sg_list`` may be empty."""

    wr_id: int
    sg_list: tuple[Sge, ...] | list[Sge] = ()


@dataclass(frozen=True, slots=True)
class WorkCompletion:
    """A completion (``ibv_wc``)."""

    wr_id: int
    status: WcStatus
    opcode: WcOpcode
    qp_num: int
    byte_len: int = 0
    imm_data: int | None = None
    vendor_err: str = ""


@dataclass(frozen=True, slots=True)
class AsyncEvent:
    """An asynchronous event (``mrc_async_event``): a QP in error, a CQ overrun, a port
    going down or up; ``element`` is the QP number, CQ handle or port number."""

    event_type: EventType
    element: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DeviceAttr:
    """``mrc_device_attr`` (plus the planes: the device's ports)."""

    mrc_protocol_version: int
    max_wimm: int
    max_wimm_dest: int
    max_mpr: int
    mpr_resolution: int
    max_qp_hint: int
    cap: int
    max_qp_wr: int
    max_cqe: int
    ports: tuple[str, ...] = field(default_factory=tuple)
