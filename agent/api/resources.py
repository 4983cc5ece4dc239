"""What the agent holds for each host-API client: its completion queues, channels, regions
and QPs, the per-client limits, and how a client's descriptors (a region's memfd, a wake-up
socket) become the agent's."""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import stat
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final

from agent.api.errors import InvalidArgument
from agent.api.profiles import Binding
from agent.api.types import Access, CtlEvState, Ev, QpState, QpType, WcStatus, WrOpcode
from agent.core import Endpoint
from agent.roce import RoceEndpoint
from wire.constants import EvState

#: Per client: objects of each kind it may hold at once.
MAX_QPS: Final = 256
MAX_CQS: Final = 256
MAX_REGIONS: Final = 1024
MAX_CHANNELS: Final = 64
MAX_PDS: Final = 64
#: Entries a CQ may be created with, at most.
MAX_CQE: Final = 1 << 16
#: WRITEs with immediate a QP may have outstanding as requester and hold as responder.
MAX_WIMM: Final = 1024
#: Most work requests one post_send or post_recv line may carry.
MAX_WRS_PER_POST: Final = 1024
#: A client whose unread replies and completions pass this is not reading: it is dropped.
MAX_UNREAD_BYTES: Final = 64 << 20
#: Longest wait an EV probe batch may ask for (ns): a minute.
MAX_PROBE_TIMEOUT_NS: Final = 60 * 10**9
NS_PER_S: Final = 1e9
#: Testbed protocol version bit (``MRC_PROTOCOL_VERSION_1``).
PROTOCOL_VERSION_1: Final = 1
FLUSH: Final = WcStatus.WR_FLUSH_ERR
#: The core's EV states as the controller names them (SKIP is a GOOD EV passed over once).
CORE_TO_CTL: Final = {
    EvState.GOOD: CtlEvState.GOOD,
    EvState.SKIP: CtlEvState.GOOD,
    EvState.ASSUMED_BAD: CtlEvState.ASSUMED_BAD,
    EvState.DENIED: CtlEvState.DENIED,
}


class CqRecord:
    """A completion queue (or EV event queue) of a session."""

    __slots__ = ("armed", "channel", "cqe", "dropped", "events", "handle", "seq", "users")

    def __init__(self, handle: int, cqe: int, channel: ChannelRecord | None, events: bool) -> None:
        self.handle = handle
        self.cqe = cqe
        self.channel = channel
        self.events = events  # an EV event CQ (controller)
        self.seq = 0  # entries pushed
        self.armed = False
        self.dropped = 0  # EV events the agent could not push (client not reading)
        self.users = 0  # QPs that complete into it


class ChannelRecord:
    """A completion channel: the agent's end of the client's socketpair."""

    __slots__ = ("handle", "sock", "users")

    def __init__(self, handle: int, sock: socket.socket) -> None:
        self.handle = handle
        self.sock = sock
        self.users = 0


@dataclass
class RegionRecord:
    """A registered region: the client's memfd, mapped here too."""

    lkey: int
    pd: int
    va: int
    length: int
    access: Access
    mm: mmap.mmap
    view: memoryview
    rkey: int = 0


@dataclass
class SendRecord:
    wr_id: int
    opcode: WrOpcode
    signaled: bool
    length: int
    done: bool = False
    status: WcStatus = WcStatus.SUCCESS
    reason: str = ""


@dataclass
class QpRecord:
    """A QP of a session and its queues."""

    num: int
    pd: int
    send_cq: CqRecord
    recv_cq: CqRecord
    max_send_wr: int
    max_recv_wr: int
    sq_sig_all: bool
    state: QpState = QpState.RESET
    ev_profile_id: int = 0
    cc_profile_id: int = 0
    binding: Binding | None = None
    #: An MRC QP's endpoint once connected (RTR on).
    endpoint: Endpoint | None = None
    qp_type: QpType = QpType.MRC
    #: An RC QP's RoCE profile (``agent.roce.profiles``), chosen at creation; None for MRC.
    roce_profile: str | None = None
    #: An RC QP's endpoint once connected (RTS: the RoCE core opens a QP with both PSNs).
    roce: RoceEndpoint | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    sq: deque[SendRecord] = field(default_factory=deque)
    by_msn: dict[int, SendRecord] = field(default_factory=dict)
    sq_done: int = 0
    wimm_outstanding: int = 0
    rq: deque[int] = field(default_factory=deque)
    pending_imm: deque[tuple[int, int]] = field(default_factory=deque)
    #: (plane, wire EV) -> the profile's EV, and the core's latest state of each.
    ev_of: dict[tuple[int, int], Ev] = field(default_factory=dict)
    wire_of: dict[Ev, tuple[int, int]] = field(default_factory=dict)
    ev_states: dict[Ev, CtlEvState] = field(default_factory=dict)


def adopt_socket(fds: list[int], where: str) -> socket.socket:
    """The one socket descriptor that came with a request: a Unix stream socket the agent
    writes wake-ups to (a completion channel, the async-event socket), non-blocking."""
    if len(fds) != 1:
        raise InvalidArgument("expected one socket descriptor with the request", where)
    fd = fds.pop()
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        raise InvalidArgument("the descriptor is not a socket", where) from None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.close()
        raise InvalidArgument("must be a Unix stream socket", where)
    sock.setblocking(False)
    return sock


def unmapped(mm: mmap.mmap) -> bool:
    try:
        mm.close()
    except BufferError:
        return False
    return True


def map_region(fd: int, length: int) -> mmap.mmap:
    """Map a client's region: a memfd sealed against shrinking (the client could otherwise
    cut the file under the mapping, and a write there would kill the agent with SIGBUS)."""
    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise InvalidArgument(f"cannot inspect the descriptor: {exc.strerror}", "fd") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidArgument("the region's descriptor must be a memfd", "fd")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise InvalidArgument("the region's descriptor must be a memfd (no seals)", "fd") from None
    if not seals & fcntl.F_SEAL_SHRINK:
        raise InvalidArgument("the memfd must be sealed against shrinking (F_SEAL_SHRINK)", "fd")
    if info.st_size < length:
        raise InvalidArgument(f"{length} bytes, but the memfd holds {info.st_size}", "length")
    try:
        return mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:
        raise InvalidArgument(f"cannot map it: {exc.strerror}", "fd") from None
