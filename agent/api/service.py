"""The host API inside the agent: each control-socket client's contexts, CQs, regions and QPs,
and the controller's profiles, probes and EV events.

``ApiService.install(control_server)`` adds the ``api.*`` ops to the agent's control socket
(JSON lines, see ``agent.api.client`` for the other end). What crosses the socket is small:
work requests name memory by L_Key and address, completions carry ids and lengths. The bytes
themselves never do: a region is a sealed memfd the application made, whose descriptor came
over the socket (``SCM_RIGHTS``), mapped here too, so a WRITE that arrives is placed straight
into the application's memory by the core and a posted WRITE is read from it in place.

Every request is checked here again whatever the client checked: a bad one is answered with
an ``ApiError`` naming the field (or, for the unanswered ``post_send`` / ``post_recv``, with
error completions and the QP in ERR, as a NIC would), and nothing else is disturbed. A client
that goes away releases everything it held: its QPs are closed (their peers see them fail),
its regions unregistered and unmapped, its channels closed.

Privileged clients (root or the socket's owner) may also use the controller's ``api.ctl.*``
ops; anyone else gets ``PermissionDenied`` for them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import logging
import mmap
import os
import random
import socket
import stat
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.api.errors import (
    ApiError,
    Busy,
    InvalidArgument,
    NotFound,
    NotSupported,
    OutOfResources,
    PermissionDenied,
    TooBig,
)
from agent.api.profiles import Binding, DeviceLimits, ProfileRegistry
from agent.api.types import (
    DEVICE_CAP_TRIM_NACK,
    Access,
    CtlEvState,
    Ev,
    EventType,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
    QpState,
    SendFlags,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from agent.core import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionSpec,
    Endpoint,
    Event,
    MessageAcked,
    MessageFailed,
    MessageReceived,
    SendQueueFull,
)
from agent.core.endpoint import CONNECTIONLESS_QP
from agent.core.ev_expansion import MAX_EV_BYTES, EvField, ProfileError, wire_ev
from agent.core.events import EvProbeAnswered, EvStateChanged
from agent.io.addresses import format_address
from agent.io.control_server import ControlServer, ControlSession
from agent.io.json_lines import Message, encode_line
from agent.io.reactor import Timer
from agent.io.runtime import AgentRuntime
from wire.constants import EvState

log = logging.getLogger(__name__)

_U16: Final = 0xFFFF
_U24: Final = 0xFFFFFF
_U32: Final = 0xFFFFFFFF
_U64: Final = (1 << 64) - 1
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
_NS: Final = 1e9
#: Testbed protocol version bit (``MRC_PROTOCOL_VERSION_1``).
PROTOCOL_VERSION_1: Final = 1
_FLUSH: Final = WcStatus.WR_FLUSH_ERR

_CORE_TO_CTL: Final = {
    EvState.GOOD: CtlEvState.GOOD,
    EvState.SKIP: CtlEvState.GOOD,
    EvState.ASSUMED_BAD: CtlEvState.ASSUMED_BAD,
    EvState.DENIED: CtlEvState.DENIED,
}

# --- request fields ---------------------------------------------------------------------------


def _get(message: Message, key: str, where: str | None = None) -> object:
    if key not in message:
        raise InvalidArgument("missing", where or key)
    return message[key]


def _int(
    message: Message, key: str, low: int = 0, high: int = _U64, where: str | None = None
) -> int:
    value = _get(message, key, where)
    if type(value) is not int or not low <= value <= high:
        raise InvalidArgument(f"must be an integer in {low}-{high}, got {value!r}", where or key)
    return value


def _opt_int(message: Message, key: str, low: int = 0, high: int = _U64) -> int | None:
    return None if message.get(key) is None else _int(message, key, low, high)


def _list(message: Message, key: str, limit: int, where: str | None = None) -> list[Any]:
    value = _get(message, key, where)
    if not isinstance(value, list):
        raise InvalidArgument("must be a list", where or key)
    if len(value) > limit:
        raise TooBig(f"at most {limit} entries, got {len(value)}", where or key)
    return value


def _ev(raw: object, where: str) -> Ev:
    if not isinstance(raw, dict):
        raise InvalidArgument("must be an object with 'val' and 'port'", where)
    text = raw.get("val")
    if not isinstance(text, str) or not text.startswith("0x") or len(text) % 2:
        raise InvalidArgument("'val' must be 0x and whole bytes of hex", f"{where}.val")
    try:
        val = bytes.fromhex(text[2:])
    except ValueError:
        raise InvalidArgument("'val' is not hex", f"{where}.val") from None
    if len(val) > MAX_EV_BYTES:
        raise InvalidArgument(f"at most {MAX_EV_BYTES} bytes", f"{where}.val")
    port = _int(raw, "port", 0, 255, f"{where}.port")
    return Ev(val, port)


def _enum(kind: Any, raw: object, where: str) -> Any:
    try:
        if isinstance(raw, str):
            return kind[raw.upper()]
        return kind(raw)
    except (KeyError, ValueError):
        names = ", ".join(member.name for member in kind)
        raise InvalidArgument(f"{raw!r} is not one of {names}", where) from None


# --- objects -------------------------------------------------------------------------------------


class _Cq:
    """A completion queue (or EV event queue) of a session."""

    __slots__ = ("armed", "channel", "cqe", "dropped", "events", "handle", "seq", "users")

    def __init__(self, handle: int, cqe: int, channel: _Channel | None, events: bool) -> None:
        self.handle = handle
        self.cqe = cqe
        self.channel = channel
        self.events = events  # an EV event CQ (controller)
        self.seq = 0  # entries pushed
        self.armed = False
        self.dropped = 0  # EV events the agent could not push (client not reading)
        self.users = 0  # QPs that complete into it


class _Channel:
    """A completion channel: the agent's end of the client's socketpair."""

    __slots__ = ("handle", "sock", "users")

    def __init__(self, handle: int, sock: socket.socket) -> None:
        self.handle = handle
        self.sock = sock
        self.users = 0


@dataclass
class _Region:
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
class _SendRec:
    wr_id: int
    opcode: WrOpcode
    signaled: bool
    length: int
    done: bool = False
    status: WcStatus = WcStatus.SUCCESS
    reason: str = ""


@dataclass
class _Qp:
    """A QP of a session and its queues."""

    num: int
    pd: int
    send_cq: _Cq
    recv_cq: _Cq
    max_send_wr: int
    max_recv_wr: int
    sq_sig_all: bool
    state: QpState = QpState.RESET
    ev_profile_id: int = 0
    cc_profile_id: int = 0
    binding: Binding | None = None
    endpoint: Endpoint | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    sq: deque[_SendRec] = field(default_factory=deque)
    by_msn: dict[int, _SendRec] = field(default_factory=dict)
    sq_done: int = 0
    wimm_outstanding: int = 0
    rq: deque[int] = field(default_factory=deque)
    pending_imm: deque[tuple[int, int]] = field(default_factory=deque)
    #: (plane, wire EV) -> the profile's EV, and the core's latest state of each.
    ev_of: dict[tuple[int, int], Ev] = field(default_factory=dict)
    wire_of: dict[Ev, tuple[int, int]] = field(default_factory=dict)
    ev_states: dict[Ev, CtlEvState] = field(default_factory=dict)


@dataclass
class _ProbeBatch:
    session: ApiSession
    request: int
    pending: dict[int, tuple[int, int]]  # seq -> (req_id, port)
    responses: list[dict[str, Any]] = field(default_factory=list)
    timer: Timer | None = None


# --- the service -----------------------------------------------------------------------------


class ApiService:
    """The host API of one agent: its profiles, and one ``ApiSession`` per client."""

    def __init__(self, runtime: AgentRuntime, limits: DeviceLimits | None = None) -> None:
        self.runtime = runtime
        self.planes = len(runtime.local_addresses)
        self.registry = ProfileRegistry(runtime.pool.default.config, self.planes, limits)
        self.sessions: dict[ControlSession, ApiSession] = {}
        self._rng = random.Random(int.from_bytes(os.urandom(8), "big"))
        self._next_pd = 1
        self._probes: dict[int, _ProbeBatch] = {}
        self._next_seq = 0
        #: Aggregate EV states reported per (EV profile, EV), for EV events.
        self._reported: dict[tuple[int, Ev], CtlEvState] = {}
        runtime.on_events(CONNECTIONLESS_QP, self._on_connectionless)

    def install(self, server: ControlServer) -> None:
        """Serve ``api.*`` on ``server``'s socket."""
        for op in _APP_OPS | _CTL_OPS:
            server.handlers[op] = self._dispatch
        self.runtime.status_providers["api"] = self.status

    def status(self) -> dict[str, Any]:
        """The host API's part of ``mrc-agent status``."""
        return {
            "clients": len(self.sessions),
            "qps": sum(len(s.qps) for s in self.sessions.values()),
            "regions": sum(len(s.regions) for s in self.sessions.values()),
            "ev_profiles": {str(p.id): p.to_json() for p in self.registry.ev_profiles.values()},
        }

    def new_pd(self) -> int:
        """A protection domain number no other client has."""
        pd = self._next_pd
        self._next_pd += 1
        return pd

    def random_key(self, taken: Callable[[int], bool]) -> int:
        """A random non-zero 32-bit key ``taken`` says is free."""
        while True:
            key = self._rng.randint(1, _U32)
            if not taken(key):
                return key

    def random_va(self) -> int:
        """A page-aligned address for a region (47 bits, as user space has)."""
        return self._rng.randrange(1 << 32, 1 << 46) & ~0xFFF

    def _dispatch(self, control: ControlSession, message: Message) -> None:
        session = self.sessions.get(control)
        if session is None:
            session = ApiSession(self, control)
            self.sessions[control] = session
            control.closers.append(lambda: self._session_closed(control))
        session.handle(message)

    def _session_closed(self, control: ControlSession) -> None:
        session = self.sessions.pop(control, None)
        if session is not None:
            session.release()

    # --- EV states and events -------------------------------------------------------------

    def qps_of_profile(self, profile_id: int) -> list[_Qp]:
        """The live QPs (connected) using EV profile ``profile_id``."""
        users = self.registry.ev_profile(profile_id).users
        return [
            qp
            for session in self.sessions.values()
            for qp in session.qps.values()
            if qp.num in users and qp.endpoint is not None
        ]

    def aggregate(self, profile_id: int, ev: Ev) -> CtlEvState:
        """An EV's state for the controller: DENIED if denied, ASSUMED_BAD if any QP of the
        profile has retired it, GOOD otherwise."""
        profile = self.registry.ev_profile(profile_id)
        if ev in profile.denied:
            return CtlEvState.DENIED
        states = [qp.ev_states.get(ev) for qp in self.qps_of_profile(profile_id)]
        if CtlEvState.ASSUMED_BAD in states:
            return CtlEvState.ASSUMED_BAD
        if profile.mode is EvMode.AUTO and not any(states):
            return CtlEvState.UNKNOWN
        return CtlEvState.GOOD

    def ev_changed(self, qp: _Qp, event: EvStateChanged) -> None:
        """A QP's core reported a home EV's new state: report the profile's if it changed."""
        key = (event.plane, event.value)
        ev = qp.ev_of.get(key)
        if ev is None:  # AUTO: the QP's own random EVs
            ev = Ev.stev(event.value, event.plane + 1)
            qp.ev_of[key] = ev
            qp.wire_of[ev] = key
        qp.ev_states[ev] = _CORE_TO_CTL[EvState(event.state)]
        self.report(qp.ev_profile_id, ev)

    def report(self, profile_id: int, ev: Ev) -> None:
        """Send an EV event if the EV's aggregate state changed and the mask asks for it."""
        state = self.aggregate(profile_id, ev)
        previous = self._reported.get((profile_id, ev), CtlEvState.GOOD)
        if state == previous:
            return
        self._reported[(profile_id, ev)] = state
        if state & self.registry.ev_profile(profile_id).event_mask:
            for session in self.sessions.values():
                session.push_ev_event(profile_id, ev, state)

    def apply_states(self, profile_id: int, effects: Sequence[tuple[Ev, CtlEvState]]) -> None:
        """Apply states the controller set to every live QP of the profile, at once."""
        now = self.runtime.clock()
        for ev, state in effects:
            for qp in self.qps_of_profile(profile_id):
                where = qp.wire_of.get(ev)
                if where is None or qp.endpoint is None:
                    continue
                plane, value = where
                with contextlib.suppress(KeyError):
                    if state is CtlEvState.DENIED:
                        qp.endpoint.deny_ev(qp.num, plane, value, now)
                    elif state is CtlEvState.ASSUMED_BAD:
                        qp.endpoint.retire_ev(qp.num, plane, value, now)
                    else:
                        qp.endpoint.admit_ev(qp.num, plane, value)
            self.report(profile_id, ev)
        self.runtime.service()

    # --- connectionless EV probes ---------------------------------------------------------

    def start_probes(
        self,
        session: ApiSession,
        request: int,
        probes: list[tuple[int, int, bytes, int]],
        timeout_ns: int,
    ) -> None:
        """Send ``probes`` (req_id, plane, peer, wire EV) and answer ``request`` once all are
        answered or ``timeout_ns`` passed."""
        endpoint = self.runtime.pool.default
        now = self.runtime.clock()
        batch = _ProbeBatch(session, request, {})
        for req_id, plane, peer, ev in probes:
            seq = self._free_seq()
            endpoint.send_ev_probe(plane, peer, ev, seq, now)
            batch.pending[seq] = (req_id, plane + 1)
            self._probes[seq] = batch
        batch.timer = self.runtime.reactor.call_at(
            now + timeout_ns / _NS, lambda: self._finish_probes(batch)
        )
        self.runtime.service()

    def _free_seq(self) -> int:
        for _ in range(_U16 + 1):
            seq = self._next_seq
            self._next_seq = (seq + 1) & _U16
            if seq not in self._probes:
                return seq
        raise OutOfResources("65536 EV probes are already waiting for their answer", "req")

    def _on_connectionless(self, event: Event) -> None:
        if not isinstance(event, EvProbeAnswered):
            return
        batch = self._probes.pop(event.seq, None)
        if batch is None:
            return
        req_id, port = batch.pending.pop(event.seq)
        batch.responses.append(
            {"req_id": req_id, "port": port, "rtt": round(event.rtt * _NS), "adj_svc_time": 0}
        )
        if not batch.pending:
            self._finish_probes(batch)

    def _finish_probes(self, batch: _ProbeBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        endpoint = self.runtime.pool.default
        timed_out = []
        for seq, (req_id, _port) in batch.pending.items():
            endpoint.cancel_ev_probe(seq)
            self._probes.pop(seq, None)
            timed_out.append(req_id)
        batch.pending.clear()
        batch.session.reply(batch.request, {"responses": batch.responses, "timed_out": timed_out})

    def forget_probes(self, session: ApiSession) -> None:
        """A client left: its probes' answers go nowhere."""
        endpoint = self.runtime.pool.default
        for seq, batch in list(self._probes.items()):
            if batch.session is session:
                endpoint.cancel_ev_probe(seq)
                del self._probes[seq]
                if batch.timer is not None:
                    batch.timer.cancel()


# --- one client ------------------------------------------------------------------------------

Handler = Callable[["ApiSession", int, Message], dict[str, Any] | None]


class ApiSession:
    """One control-socket client's host-API objects."""

    def __init__(self, service: ApiService, control: ControlSession) -> None:
        self.service = service
        self.control = control
        self.runtime = service.runtime
        self.opened = False
        self.async_sock: socket.socket | None = None
        self.channels: dict[int, _Channel] = {}
        self.cqs: dict[int, _Cq] = {}
        self.pds: set[int] = set()
        self.regions: dict[int, _Region] = {}
        self.qps: dict[int, _Qp] = {}
        self._zombies: list[mmap.mmap] = []
        self._next_handle = 1
        self._send_errors = 0
        #: QPs whose send queue moved with no completion to say so, told once per reactor turn.
        self._sq_moved: dict[int, _Qp] = {}

    # --- plumbing -----------------------------------------------------------------------------

    def handle(self, message: Message) -> None:
        """Serve one request line; errors go back to the client naming the field."""
        raw_id = message.get("id")
        request = raw_id if type(raw_id) is int else 0
        op = message.get("op")
        handler = _HANDLERS.get(op) if isinstance(op, str) else None
        fds = self._take_fds(message)
        try:
            if handler is None:
                raise NotSupported(f"unknown op {op!r}", "op")
            if op in _CTL_OPS and not self.control.privileged:
                raise PermissionDenied("the controller API is for root or the agent's user", "op")
            if not self.opened and op != "api.open":
                raise InvalidArgument("open a context first (api.open)", "op")
            result = handler(self, request, {**message, "_fds": fds})
            fds = []
            if result is not None and op not in _ASYNC_OPS:
                self.reply(request, result)
        except ApiError as exc:
            if op in _ASYNC_OPS:
                self.push({"p": "err", "op": op, "error": exc.to_json()})
            else:
                self.send({"id": request, "ok": False, "error": exc.to_json()})
        finally:
            for fd in fds:
                os.close(fd)
        if self.control.channel.pending_bytes > MAX_UNREAD_BYTES:
            log.warning("host API client does not read its completions: dropped")
            self.control.close()

    def _take_fds(self, message: Message) -> list[int]:
        count = message.get("fds", 0)
        if type(count) is not int or not 0 <= count <= 4:
            return []
        return self.control.channel.take_fds(count) or []

    def send(self, message: Message) -> None:
        """A line to the client."""
        self.control.channel.send(message)

    def reply(self, request: int, result: dict[str, Any]) -> None:
        """The answer to request ``request``."""
        self.send({"id": request, "ok": True, "result": result})

    def push(self, message: Message) -> None:
        """An unrequested line (completions, QP errors, EV events)."""
        self.send(message)

    def _new_handle(self) -> int:
        handle = self._next_handle
        self._next_handle += 1
        return handle

    def _write(self, sock: socket.socket | None, message: Message) -> None:
        """A line on a channel or the async-event socket; dropped if the client does not
        read it (it then has older wake-ups pending)."""
        if sock is None:
            return
        try:
            sock.send(encode_line(message))
        except OSError as exc:
            self._send_errors += 1
            if self._send_errors == 1 or exc.errno not in (errno.EAGAIN, errno.EPIPE):
                log.warning("host API client: a wake-up could not be written: %s", exc)

    def async_event(self, kind: EventType, element: int, reason: str = "") -> None:
        """An asynchronous event for this client (``mrc_get_async_event``)."""
        self._write(self.async_sock, {"t": int(kind), "e": element, "r": reason})

    def _adopt_socket(self, fds: list[int], where: str) -> socket.socket:
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

    # --- context ------------------------------------------------------------------------------

    def op_open(self, _request: int, message: Message) -> dict[str, Any]:
        if self.opened:
            raise InvalidArgument("this connection has its context already", "op")
        self.async_sock = self._adopt_socket(message["_fds"], "async_fd")
        self.opened = True
        return {"device": self.device_attr(), "privileged": self.control.privileged}

    def device_attr(self) -> dict[str, Any]:
        config = self.runtime.pool.default.config
        return {
            "mrc_protocol_version": PROTOCOL_VERSION_1,
            "max_wimm": MAX_WIMM,
            "max_wimm_dest": MAX_WIMM,
            "max_mpr": config.max_psn_window // 128,
            "mpr_resolution": 1,
            "max_qp_hint": 0,
            "cap": DEVICE_CAP_TRIM_NACK,
            "max_qp_wr": config.max_unconfirmed_messages,
            "max_cqe": MAX_CQE,
            "ports": [format_address(a) for a in self.runtime.local_addresses],
        }

    def op_query_device(self, _request: int, _message: Message) -> dict[str, Any]:
        return self.device_attr()

    def _port(self, message: Message) -> int:
        return _int(message, "port", 1, self.service.planes, "port_num") - 1

    def op_query_port(self, _request: int, message: Message) -> dict[str, Any]:
        plane = self._port(message)
        pool = self.runtime.pool
        return {
            "port_num": plane + 1,
            "state": "ACTIVE" if pool.plane_up(plane) else "DOWN",
            "port_admin_state": "ENABLED" if pool.plane_admin(plane) else "DISABLED",
            "gid": format_address(self.runtime.local_addresses[plane]),
        }

    # --- channels, CQs, PDs -------------------------------------------------------------------

    def op_channel_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.channels) >= MAX_CHANNELS:
            raise OutOfResources(f"at most {MAX_CHANNELS} completion channels", "channel")
        sock = self._adopt_socket(message["_fds"], "fd")
        handle = self._new_handle()
        self.channels[handle] = _Channel(handle, sock)
        return {"channel": handle}

    def _channel(self, message: Message, key: str = "channel") -> _Channel:
        handle = _int(message, key, 0, _U32)
        channel = self.channels.get(handle)
        if channel is None:
            raise NotFound(f"no completion channel {handle}", key)
        return channel

    def op_channel_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        channel = self._channel(message)
        if channel.users:
            raise Busy(f"{channel.users} CQs use it", "channel")
        del self.channels[channel.handle]
        channel.sock.close()
        return {}

    def op_cq_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.cqs) >= MAX_CQS:
            raise OutOfResources(f"at most {MAX_CQS} CQs", "cq")
        cqe = _int(message, "cqe", 1, MAX_CQE)
        channel = self._channel(message) if message.get("channel") is not None else None
        handle = self._new_handle()
        self.cqs[handle] = _Cq(handle, cqe, channel, bool(message.get("ev_events")))
        if channel is not None:
            channel.users += 1
        return {"cq": handle, "cqe": cqe}

    def _cq(self, message: Message, key: str = "cq", events: bool = False) -> _Cq:
        handle = _int(message, key, 0, _U32)
        cq = self.cqs.get(handle)
        if cq is None or cq.events != events:
            raise NotFound(f"no {'EV event ' if events else ''}CQ {handle}", key)
        return cq

    def op_cq_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        handle = _int(message, "cq", 0, _U32)
        cq = self.cqs.get(handle)
        if cq is None:
            raise NotFound(f"no CQ {handle}", "cq")
        if cq.users:
            raise Busy(f"{cq.users} QPs complete into it", "cq")
        del self.cqs[handle]
        if cq.channel is not None:
            cq.channel.users -= 1
        return {}

    def op_cq_notify(self, _request: int, message: Message) -> None:
        handle = _int(message, "cq", 0, _U32)
        cq = self.cqs.get(handle)
        if cq is None:
            raise NotFound(f"no CQ {handle}", "cq")
        if cq.channel is None:
            raise InvalidArgument("the CQ has no completion channel", "cq")
        seen = _int(message, "seen", 0, _U64)
        if seen < cq.seq:  # completions came after what the client saw: wake it now
            self._notify(cq)
        else:
            cq.armed = True

    def _notify(self, cq: _Cq) -> None:
        cq.armed = False
        if cq.channel is not None:
            self._write(cq.channel.sock, {"cq": cq.handle, "s": cq.seq})

    def _complete(self, cq: _Cq, entry: Message) -> None:
        cq.seq += 1
        self.push({"p": "wc", "cq": cq.handle, "s": cq.seq, **entry})
        if cq.armed:
            self._notify(cq)

    def push_ev_event(self, profile_id: int, ev: Ev, state: CtlEvState) -> None:
        """An EV event to every EV event CQ of this client."""
        for cq in self.cqs.values():
            if not cq.events:
                continue
            if self.control.channel.pending_bytes > MAX_UNREAD_BYTES // 2:
                cq.dropped += 1
                continue
            cq.seq += 1
            self.push(
                {
                    "p": "ev",
                    "cq": cq.handle,
                    "s": cq.seq,
                    "e": [profile_id, ev.to_json(), int(state), cq.dropped],
                }
            )
            cq.dropped = 0
            if cq.armed:
                self._notify(cq)

    def op_pd_alloc(self, _request: int, _message: Message) -> dict[str, Any]:
        if len(self.pds) >= MAX_PDS:
            raise OutOfResources(f"at most {MAX_PDS} protection domains", "pd")
        pd = self.service.new_pd()
        self.pds.add(pd)
        return {"pd": pd}

    def _pd(self, message: Message) -> int:
        pd = _int(message, "pd", 0, _U64)
        if pd not in self.pds:
            raise NotFound(f"no protection domain {pd}", "pd")
        return pd

    def op_pd_dealloc(self, _request: int, message: Message) -> dict[str, Any]:
        pd = self._pd(message)
        if any(r.pd == pd for r in self.regions.values()) or any(
            q.pd == pd for q in self.qps.values()
        ):
            raise Busy("regions or QPs still use it", "pd")
        self.pds.discard(pd)
        return {}

    # --- memory ---------------------------------------------------------------------------

    def op_mr_reg(self, _request: int, message: Message) -> dict[str, Any]:
        pd = self._pd(message)
        length = _int(message, "length", 1, 1 << 40)
        access = Access(_int(message, "access", 0, _U32))
        unsupported = access & (Access.REMOTE_READ | Access.REMOTE_ATOMIC)
        if unsupported:
            raise NotSupported("MRC has no READ or atomics: REMOTE_READ/ATOMIC", "access")
        if access & Access.REMOTE_WRITE and not access & Access.LOCAL_WRITE:
            raise InvalidArgument("REMOTE_WRITE needs LOCAL_WRITE (as verbs)", "access")
        if len(self.regions) >= MAX_REGIONS:
            raise OutOfResources(f"at most {MAX_REGIONS} regions", "mr")
        fds = message["_fds"]
        if len(fds) != 1:
            raise InvalidArgument("expected the region's memfd with the request", "fd")
        fd = fds.pop()
        try:
            mm = _map_region(fd, length)
        finally:
            os.close(fd)
        view = memoryview(mm)
        lkey = self.service.random_key(lambda key: key in self.regions)
        region = _Region(lkey, pd, self.service.random_va(), length, access, mm, view)
        if access & Access.REMOTE_WRITE:
            core = self.runtime.pool.default.register_memory(view, region.va, pd)
            region.rkey = core.rkey
        self.regions[lkey] = region
        return {"lkey": lkey, "rkey": region.rkey, "addr": region.va, "length": length}

    def op_mr_dereg(self, _request: int, message: Message) -> dict[str, Any]:
        lkey = _int(message, "lkey", 0, _U32)
        region = self.regions.pop(lkey, None)
        if region is None:
            raise NotFound(f"no region with L_Key {lkey:#x}", "lkey")
        self._unmap(region)
        return {}

    def _unmap(self, region: _Region) -> None:
        if region.rkey:
            with contextlib.suppress(KeyError):
                self.runtime.pool.default.memory.deregister(region.rkey)
        region.view.release()
        try:
            region.mm.close()
        except BufferError:
            # A posted WRITE still reads from it: unmapped once its last view is gone.
            self._zombies.append(region.mm)
        self._zombies = [mm for mm in self._zombies if not _closed(mm)]

    def local(
        self, pd: int, lkey: int, addr: int, length: int, where: str, write: bool = False
    ) -> _Region:
        """The region ``lkey`` of ``pd`` holding ``[addr, addr + length)``."""
        region = self.regions.get(lkey)
        if region is None or region.pd != pd:
            raise InvalidArgument(
                f"no region with L_Key {lkey:#x} in this QP's protection domain", f"{where}.lkey"
            )
        if addr < region.va or addr + length > region.va + region.length:
            raise InvalidArgument(
                f"[{addr:#x}, +{length}) lies outside the region [{region.va:#x}, "
                f"+{region.length})",
                f"{where}.addr",
            )
        if write and not region.access & Access.LOCAL_WRITE:
            raise InvalidArgument("the region lacks LOCAL_WRITE", f"{where}.lkey")
        return region

    # --- QPs ------------------------------------------------------------------------------------

    def _qp(self, message: Message) -> _Qp:
        num = _int(message, "qp", 0, _U24, "qp_num")
        qp = self.qps.get(num)
        if qp is None:
            raise NotFound(f"no QP {num:#x} in this context", "qp_num")
        return qp

    def op_qp_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.qps) >= MAX_QPS:
            raise OutOfResources(f"at most {MAX_QPS} QPs", "qp")
        pd = self._pd(message)
        send_cq = self._cq(message, "send_cq")
        recv_cq = self._cq(message, "recv_cq")
        limit = self.runtime.pool.default.config.max_unconfirmed_messages
        max_send_wr = _int(message, "max_send_wr", 1, limit, "cap.max_send_wr")
        max_recv_wr = _int(message, "max_recv_wr", 0, MAX_WIMM, "cap.max_recv_wr")
        if _int(message, "max_send_sge", 0, 1, "cap.max_send_sge") > 1:
            raise NotSupported("one SGE per WR", "cap.max_send_sge")
        _int(message, "max_recv_sge", 0, 1, "cap.max_recv_sge")
        num = self.runtime.pool.allocate_qp(self.runtime.pool.default)
        qp = _Qp(
            num, pd, send_cq, recv_cq, max_send_wr, max_recv_wr, bool(message.get("sq_sig_all"))
        )
        send_cq.users += 1
        recv_cq.users += 1
        self.qps[num] = qp
        return {"qp_num": num, "max_send_wr": max_send_wr, "max_recv_wr": max_recv_wr}

    def op_qp_modify(self, _request: int, message: Message) -> dict[str, Any]:
        qp = self._qp(message)
        target = _enum(QpState, _get(message, "qp_state"), "qp_state")
        attrs = message.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise InvalidArgument("must be an object", "attrs")
        current = message.get("cur_qp_state")
        if current is not None and _enum(QpState, current, "cur_qp_state") is not qp.state:
            raise InvalidArgument(f"the QP is {qp.state.name}", "cur_qp_state")
        if target is QpState.ERR:
            self.to_error(qp, "moved to ERR by the application")
        elif target is QpState.RESET:
            self._reset(qp)
        elif target is QpState.INIT:
            self._to_init(qp, attrs)
        elif target is QpState.RTR:
            self._to_rtr(qp, attrs)
        elif target is QpState.RTS:
            self._to_rts(qp, attrs)
        else:
            raise NotSupported(f"{target.name} is not an MRC QP state", "qp_state")
        return self._qp_attrs(qp)

    def _expect(self, qp: _Qp, target: QpState, *allowed: QpState) -> None:
        if qp.state not in allowed:
            before = " or ".join(s.name for s in allowed)
            raise InvalidArgument(
                f"{target.name} follows {before}, and the QP is {qp.state.name}", "qp_state"
            )

    def _to_init(self, qp: _Qp, attrs: dict[str, Any]) -> None:
        self._expect(qp, QpState.INIT, QpState.RESET, QpState.INIT)
        if attrs.get("qp_hint") is not None:
            raise NotSupported("QP hints are not offered (max_qp_hint 0)", "qp_hint")
        ev_id = _opt_int(attrs, "ev_profile_id")
        cc_id = _opt_int(attrs, "cc_profile_id")
        if qp.state is QpState.INIT and (ev_id is not None or cc_id is not None):
            self.service.registry.release(qp.num)
            qp.binding = None
        ev_id = qp.ev_profile_id if ev_id is None else ev_id
        cc_id = qp.cc_profile_id if cc_id is None else cc_id
        if qp.binding is None:
            ipv6 = self.runtime.ipv6
            qp.binding = self.service.registry.bind(qp.num, ev_id, cc_id, ipv6)
        qp.ev_profile_id, qp.cc_profile_id = ev_id, cc_id
        for key in ("cap",):
            if key in attrs:
                qp.attrs[key] = _int(attrs, key, 0, _U32)
        qp.state = QpState.INIT

    def _to_rtr(self, qp: _Qp, attrs: dict[str, Any]) -> None:
        self._expect(qp, QpState.RTR, QpState.INIT)
        assert qp.binding is not None
        dest = _int(attrs, "dest_qp_num", 2, _U24)
        rq_psn = _int(attrs, "rq_psn", 0, _U24)
        peers = self._peer_addresses(attrs)
        for key, high in (("max_wimm_dest", MAX_WIMM), ("mpr_dest", 255), ("path_mtu", 5)):
            if attrs.get(key) is not None:
                qp.attrs[key] = _int(attrs, key, 0, high)
        binding = qp.binding
        homes = None
        if binding.evs is not None:
            homes = tuple((ev.port - 1, value) for ev, value in binding.evs)
            for ev, value in binding.evs:
                qp.ev_of[(ev.port - 1, value)] = ev
                qp.wire_of[ev] = (ev.port - 1, value)
                qp.ev_states[ev] = CtlEvState.GOOD
        pool = self.runtime.pool
        endpoint = pool.endpoint_for(binding.config)
        spec = ConnectionSpec(
            qp.num,
            dest,
            peers,
            send_psn=0,
            receive_psn=rq_psn,
            evs=homes,
            ev_min_active=binding.min_active,
            ev_events=True,
            pd=qp.pd,
        )
        try:
            pool.connect(endpoint, spec)
        except ValueError as exc:
            raise InvalidArgument(str(exc), "dest_qp_num") from None
        qp.endpoint = endpoint
        qp.attrs.update(dest_qp_num=dest, rq_psn=rq_psn, dgids=[format_address(p) for p in peers])
        self.runtime.on_events(qp.num, lambda event: self._on_event(qp, event))
        now = self.runtime.clock()
        for ev in binding.denied:
            where = qp.wire_of.get(ev)
            if where is not None:
                endpoint.deny_ev(qp.num, where[0], where[1], now)
        qp.state = QpState.RTR

    def _peer_addresses(self, attrs: dict[str, Any]) -> tuple[bytes, ...]:
        raw = attrs.get("dgids")
        if raw is None and attrs.get("dgid") is not None:
            raw = [attrs["dgid"]]
        if not isinstance(raw, list) or not raw:
            raise InvalidArgument("the peer's address on each plane is needed", "ah_attr.dgid")
        if len(raw) != self.service.planes:
            raise InvalidArgument(
                f"{len(raw)} addresses for {self.service.planes} planes", "ah_attr.dgid"
            )
        packed = []
        for index, text in enumerate(raw):
            try:
                address = ipaddress.ip_address(text)
            except (ValueError, TypeError):
                raise InvalidArgument(
                    f"{text!r} is not an IP address", f"ah_attr.dgid[{index}]"
                ) from None
            if len(address.packed) != len(self.runtime.local_addresses[0]):
                raise InvalidArgument("not of this host's IP version", f"ah_attr.dgid[{index}]")
            packed.append(address.packed)
        return tuple(packed)

    def _to_rts(self, qp: _Qp, attrs: dict[str, Any]) -> None:
        if qp.state is QpState.RTS:
            if attrs.get("sq_psn") is not None:
                raise InvalidArgument("the send PSN is set on the way to RTS only", "sq_psn")
        else:
            self._expect(qp, QpState.RTS, QpState.RTR)
            sq_psn = _int(attrs, "sq_psn", 0, _U24)
            assert qp.endpoint is not None
            qp.endpoint.set_send_psn(qp.num, sq_psn)
            qp.attrs["sq_psn"] = sq_psn
        for key, high in (
            ("max_wimm", MAX_WIMM),
            ("mpr", 255),
            ("timeout", 24),
            ("retry_linear", 7),
            ("retry_exp", 25),
        ):
            if attrs.get(key) is not None:
                qp.attrs[key] = _int(attrs, key, 0, high)
        qp.state = QpState.RTS

    def _qp_attrs(self, qp: _Qp) -> dict[str, Any]:
        return {
            "qp_num": qp.num,
            "qp_state": qp.state.name,
            "ev_profile_id": qp.ev_profile_id,
            "cc_profile_id": qp.cc_profile_id,
            "max_send_wr": qp.max_send_wr,
            "max_recv_wr": qp.max_recv_wr,
            "sq_sig_all": qp.sq_sig_all,
            "max_wimm": qp.attrs.get("max_wimm", MAX_WIMM),
            "max_wimm_dest": qp.attrs.get("max_wimm_dest", MAX_WIMM),
            **{k: v for k, v in qp.attrs.items() if k not in ("max_wimm", "max_wimm_dest")},
        }

    def op_qp_query(self, _request: int, message: Message) -> dict[str, Any]:
        return self._qp_attrs(self._qp(message))

    def op_qp_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        qp = self._qp(message)
        self._destroy(qp)
        return {}

    def _destroy(self, qp: _Qp) -> None:
        self._disconnect(qp, "QP destroyed")
        self.runtime.pool.release_qp(qp.num)
        self.service.registry.release(qp.num)
        qp.send_cq.users -= 1
        qp.recv_cq.users -= 1
        self.qps.pop(qp.num, None)

    def _disconnect(self, qp: _Qp, reason: str) -> None:
        """Close the core connection (its peer sees it fail) and forget the QP's EVs."""
        if qp.endpoint is None:
            return
        self.runtime.on_events(qp.num, None)
        self.runtime.pool.close(qp.num)
        qp.endpoint = None
        for ev in list(qp.ev_states):
            qp.ev_states.pop(ev)
            self.service.report(qp.ev_profile_id, ev)
        log.info("host API QP %#x closed: %s", qp.num, reason)

    def _reset(self, qp: _Qp) -> None:
        """Back to RESET: the connection closes, queued work is dropped without completions
        (as verbs' RESET), the profiles are let go; the QP number stays."""
        self._disconnect(qp, "moved to RESET")
        self.service.registry.release(qp.num)
        qp.binding = None
        qp.sq.clear()
        qp.by_msn.clear()
        qp.rq.clear()
        qp.pending_imm.clear()
        qp.wimm_outstanding = 0
        qp.attrs.clear()
        qp.ev_of.clear()
        qp.wire_of.clear()
        qp.state = QpState.RESET
        self.push({"p": "qp", "qp": qp.num, "state": "RESET", "sq": qp.sq_done, "rq": 0})

    def to_error(self, qp: _Qp, reason: str, fatal: bool = False) -> None:
        """The QP enters ERR: its connection closes and every WR still queued completes with
        WR_FLUSH_ERR (in order, after any that completed); ``fatal`` raises QP_FATAL."""
        if qp.state is QpState.ERR:
            return
        qp.state = QpState.ERR
        self._disconnect(qp, reason)
        for rec in qp.sq:
            if not rec.done:
                rec.done, rec.status, rec.reason = True, _FLUSH, reason
        qp.by_msn.clear()
        self._retire(qp)
        while qp.rq:
            wr_id = qp.rq.popleft()
            self._complete(
                qp.recv_cq,
                {
                    "w": [
                        wr_id,
                        int(_FLUSH),
                        int(WcOpcode.RECV_RDMA_WITH_IMM),
                        qp.num,
                        0,
                        None,
                        reason,
                    ]
                },
            )
        self.push({"p": "qp", "qp": qp.num, "state": "ERR", "reason": reason})
        if fatal:
            self.async_event(EventType.QP_FATAL, qp.num, reason)

    # --- work requests --------------------------------------------------------------------

    def op_post_send(self, _request: int, message: Message) -> None:
        qp = self._qp(message)
        wrs = _list(message, "wr", MAX_WRS_PER_POST)
        for index, raw in enumerate(wrs):
            where = f"wr[{index}]"
            if qp.state is QpState.ERR:
                self._flush_post(qp, raw)
                continue
            try:
                self._post_one(qp, raw, where)
            except ApiError as exc:
                # The client checks all this before posting: only a client that did not is
                # here, and a NIC would fail the WR and put the QP in error.
                wr_id = raw[0] if isinstance(raw, list) and raw and type(raw[0]) is int else 0
                qp.sq.append(
                    _SendRec(
                        wr_id, WrOpcode.RDMA_WRITE, True, 0, True, WcStatus.LOC_QP_OP_ERR, str(exc)
                    )
                )
                self.to_error(qp, f"{where}: {exc}", fatal=True)
        self.runtime.service()

    def _flush_post(self, qp: _Qp, raw: object) -> None:
        wr_id = raw[0] if isinstance(raw, list) and raw and type(raw[0]) is int else 0
        qp.sq.append(_SendRec(wr_id, WrOpcode.RDMA_WRITE, True, 0, True, _FLUSH, "QP in ERR"))
        self._retire(qp)

    def _post_one(self, qp: _Qp, raw: object, where: str) -> None:
        if not isinstance(raw, list) or len(raw) != 9:
            raise InvalidArgument(
                "a WR is [wr_id, opcode, addr, length, lkey, "
                "remote_addr, rkey, imm_data, send_flags]",
                where,
            )
        wr_id, opcode, addr, length, lkey, remote_addr, rkey, imm, flags = raw
        fields = dict(
            zip(
                ("wr_id", "opcode", "addr", "length", "lkey", "remote_addr", "rkey", "send_flags"),
                (wr_id, opcode, addr, length, lkey, remote_addr, rkey, flags),
                strict=True,
            )
        )
        for key, value in fields.items():
            if type(value) is not int or value < 0:
                raise InvalidArgument("must be an unsigned integer", f"{where}.{key}")
        if qp.state is not QpState.RTS:
            raise InvalidArgument(f"the QP is {qp.state.name}: post_send needs RTS", "qp_state")
        kind = _enum(WrOpcode, opcode, f"{where}.opcode")
        if kind not in (WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM):
            raise NotSupported(
                f"{kind.name}: MRC posts RDMA WRITE (with immediate) only", f"{where}.opcode"
            )
        if len(qp.sq) >= qp.max_send_wr:
            raise OutOfResources(f"the send queue holds {qp.max_send_wr} WRs", where)
        with_imm = kind is WrOpcode.RDMA_WRITE_WITH_IMM
        if with_imm and (type(imm) is not int or not 0 <= imm <= _U32):
            raise InvalidArgument(
                "WRITE with immediate needs a 32-bit imm_data", f"{where}.imm_data"
            )
        if with_imm and qp.wimm_outstanding >= qp.attrs.get("max_wimm", MAX_WIMM):
            raise OutOfResources("max_wimm WRITEs with immediate are outstanding", where)
        if rkey > _U32 or remote_addr + length > _U64 or length > _U32:
            raise InvalidArgument("rkey is 32 bits, remote_addr + length 64", where)
        region = self.local(qp.pd, lkey, addr, length, f"{where}.sg_list[0]")
        start = addr - region.va
        data = region.view[start : start + length]
        assert qp.endpoint is not None
        signaled = bool(flags & SendFlags.SIGNALED) or qp.sq_sig_all
        rec = _SendRec(wr_id, kind, signaled, length)
        try:
            msn = qp.endpoint.post_write(qp.num, data, remote_addr, rkey, imm if with_imm else None)
        except (SendQueueFull, ConnectionClosed) as exc:
            rec.done, rec.status, rec.reason = True, _FLUSH, str(exc)
            qp.sq.append(rec)
            self._retire(qp)
            return
        except ValueError as exc:
            raise InvalidArgument(str(exc), where) from None
        qp.sq.append(rec)
        qp.by_msn[msn] = rec
        if with_imm:
            qp.wimm_outstanding += 1

    def op_post_recv(self, _request: int, message: Message) -> None:
        qp = self._qp(message)
        wrs = _list(message, "wr", MAX_WRS_PER_POST)
        for index, raw in enumerate(wrs):
            where = f"wr[{index}]"
            if not isinstance(raw, list) or len(raw) != 2 or type(raw[0]) is not int:
                raise InvalidArgument("a receive WR is [wr_id, [[addr, length, lkey]...]]", where)
            wr_id, sges = raw
            if qp.state not in (QpState.INIT, QpState.RTR, QpState.RTS):
                raise InvalidArgument(
                    f"the QP is {qp.state.name}: post_recv needs INIT, RTR or RTS", "qp_state"
                )
            if not isinstance(sges, list) or len(sges) > 1:
                raise InvalidArgument("at most one SGE", f"{where}.sg_list")
            for sge in sges:
                if (
                    not isinstance(sge, list)
                    or len(sge) != 3
                    or any(type(v) is not int or v < 0 for v in sge)
                ):
                    raise InvalidArgument("an SGE is [addr, length, lkey]", f"{where}.sg_list[0]")
                self.local(qp.pd, sge[2], sge[0], sge[1], f"{where}.sg_list[0]", write=True)
            if len(qp.rq) >= qp.max_recv_wr:
                raise OutOfResources(f"the receive queue holds {qp.max_recv_wr} WRs", where)
            qp.rq.append(wr_id)
        while qp.rq and qp.pending_imm:
            self._deliver_imm(qp, *qp.pending_imm.popleft())

    # --- core events ------------------------------------------------------------------------

    def _on_event(self, qp: _Qp, event: Event) -> None:
        if isinstance(event, MessageAcked):
            rec = qp.by_msn.pop(event.msn, None)
            if rec is not None:
                rec.done = True
                if rec.opcode is WrOpcode.RDMA_WRITE_WITH_IMM:
                    qp.wimm_outstanding -= 1
                self._retire(qp)
        elif isinstance(event, MessageReceived):
            if event.immediate is not None:
                if qp.rq:
                    self._deliver_imm(qp, event.length, event.immediate)
                elif len(qp.pending_imm) < qp.attrs.get("max_wimm_dest", MAX_WIMM):
                    qp.pending_imm.append((event.length, event.immediate))
                else:
                    self.to_error(
                        qp,
                        "a WRITE with immediate arrived with no receive posted "
                        "and max_wimm_dest already held",
                        fatal=True,
                    )
        elif isinstance(event, MessageFailed):
            # The receiver refused it (a remote access error, reported in the completion),
            # or the connection died (retries exhausted: the QP is lost, an async event too).
            refused = event.reason.startswith("receiver refused")
            rec = qp.by_msn.pop(event.msn, None)
            if rec is not None:
                rec.done = True
                rec.status = WcStatus.REM_ACCESS_ERR if refused else WcStatus.RETRY_EXC_ERR
                rec.reason = event.reason
            self.to_error(qp, f"message failed: {event.reason}", fatal=not refused)
        elif isinstance(event, ConnectionFailed):
            self.to_error(qp, event.reason, fatal=True)
        elif isinstance(event, EvStateChanged):
            self.service.ev_changed(qp, event)

    def _deliver_imm(self, qp: _Qp, length: int, immediate: int) -> None:
        wr_id = qp.rq.popleft()
        self._complete(
            qp.recv_cq,
            {"w": [wr_id, 0, int(WcOpcode.RECV_RDMA_WITH_IMM), qp.num, length, immediate, ""]},
        )

    def _retire(self, qp: _Qp) -> None:
        """Complete WRs in posting order (RC's guarantee), as far as they are done."""
        sq = qp.sq
        told = True
        while sq and sq[0].done:
            rec = sq.popleft()
            qp.sq_done += 1
            if rec.signaled or rec.status is not WcStatus.SUCCESS:
                self._complete(
                    qp.send_cq,
                    {
                        "w": [
                            rec.wr_id,
                            int(rec.status),
                            int(WcOpcode.RDMA_WRITE),
                            qp.num,
                            rec.length,
                            None,
                            rec.reason,
                        ],
                        "sq": [qp.num, qp.sq_done],
                    },
                )
                told = True
            else:
                told = False
        if not told:
            # One line per reactor turn however many acknowledgements it brought: a line per
            # unsignaled WRITE costs the agent and the client (often on one core) a write, a
            # read and a JSON round trip each.
            if not self._sq_moved:
                self.runtime.reactor.call_at(self.runtime.clock(), self._tell_sq)
            self._sq_moved[qp.num] = qp

    def _tell_sq(self) -> None:
        """How far each QP's send queue has moved (``_retire``), once for the turn."""
        moved, self._sq_moved = self._sq_moved, {}
        for number, qp in moved.items():
            if self.qps.get(number) is qp:
                self.push({"p": "sq", "qp": number, "n": qp.sq_done})

    # --- controller ---------------------------------------------------------------------------

    def op_ctl_query_device(self, _request: int, _message: Message) -> dict[str, Any]:
        registry = self.service.registry
        return {
            "mrc_ctl_protocol_version": PROTOCOL_VERSION_1,
            **registry.limits.to_json(registry.free_evs()),
            "phy_port_mask": sum(1 << port for port in range(1, self.service.planes + 1)),
        }

    def op_ctl_modify_port(self, _request: int, message: Message) -> dict[str, Any]:
        plane = self._port(message)
        state = _enum(PortAdminState, _get(message, "port_admin_state"), "port_admin_state")
        pool = self.runtime.pool
        was_up = pool.plane_up(plane)
        pool.set_plane_admin(plane, state is PortAdminState.ENABLED)
        now_up = pool.plane_up(plane)
        if now_up != was_up:
            kind = EventType.PORT_ACTIVE if now_up else EventType.PORT_ERR
            for session in self.service.sessions.values():
                session.async_event(kind, plane + 1, f"port {plane + 1} admin {state.name}")
        self.runtime.service()
        return self.op_query_port(0, message)

    def op_ctl_fmt_modify(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = _int(message, "profile", 0, _U64, "ev_fmt_profile_id")
        mode = message.get("ev_fmt_mode")
        widths = None
        if message.get("fmt_fields") is not None:
            raw = _list(message, "fmt_fields", 64)
            widths = [
                _int(f, "width", 0, 255, f"fmt_fields[{i}].width")
                if isinstance(f, dict)
                else _int({"width": f}, "width", 0, 255, f"fmt_fields[{i}]")
                for i, f in enumerate(raw)
            ]
        profile = self.service.registry.modify_format(
            profile_id,
            message.get("profile_state"),
            None if mode is None else _enum(FormatMode, mode, "ev_fmt_mode"),
            widths,
        )
        return profile.to_json()

    def op_ctl_fmt_query(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = _int(message, "profile", 0, _U64, "ev_fmt_profile_id")
        return self.service.registry.format(profile_id).to_json()

    def _entries(self, message: Message) -> list[EvOpEntry]:
        entries = []
        limit = self.service.registry.limits.ev_op_max_entries
        for index, raw in enumerate(_list(message, "entries", limit, "ev_op.entries")):
            where = f"ev_op.entries[{index}]"
            if not isinstance(raw, dict):
                raise InvalidArgument("must be an object", where)
            state = raw.get("state")
            entries.append(
                EvOpEntry(
                    ev=_ev(raw.get("ev"), f"{where}.ev"),
                    ev_new=None
                    if raw.get("ev_new") is None
                    else _ev(raw["ev_new"], f"{where}.ev_new"),
                    state=None if state is None else _enum(CtlEvState, state, f"{where}.state"),
                    flags=_int(raw, "flags", 0, _U32, f"{where}.flags") if "flags" in raw else 0,
                )
            )
        return entries

    def op_ctl_ev_modify(self, _request: int, message: Message) -> dict[str, Any]:
        registry = self.service.registry
        profile_id = _int(message, "profile", 0, _U64, "ev_profile_id")
        fields = None
        if message.get("fields") is not None:
            fields = []
            for index, raw in enumerate(_list(message, "fields", 64)):
                where = f"fields[{index}]"
                if not isinstance(raw, dict):
                    raise InvalidArgument("must be an object", where)
                unknown = set(raw) - {"width", "init_val", "min_val", "max_val", "mask"}
                if unknown:
                    raise InvalidArgument("unknown key", f"{where}.{sorted(unknown)[0]}")
                values = {
                    key: _int(raw, key, 0, _U32, f"{where}.{key}") if key in raw else 0
                    for key in ("init_val", "min_val", "max_val", "mask")
                }
                fields.append(
                    EvField(width=_int(raw, "width", 0, _U32, f"{where}.width"), **values)
                )
        op = None if message.get("ev_op") is None else _enum(EvOp, message["ev_op"], "ev_op")
        entries = self._entries(message) if op is not None else []
        profile = registry.ev_profile(profile_id)
        if op is EvOp.MODIFY_EV_STATE and profile.mode is EvMode.AUTO:
            for index, entry in enumerate(entries):
                if not any(
                    entry.ev in qp.wire_of for qp in self.service.qps_of_profile(profile_id)
                ):
                    raise NotFound(
                        f"no QP of AUTO profile {profile_id} has EV {entry.ev}",
                        f"ev_op.entries[{index}].ev",
                    )
        mode = message.get("ev_mode")
        profile, effects = registry.modify_ev_profile(
            profile_id,
            state=message.get("profile_state"),
            mode=None if mode is None else _enum(EvMode, mode, "ev_mode"),
            fmt_id=_opt_int(message, "ev_fmt_profile_id"),
            ev_count=_opt_int(message, "ev_count", 0, _U32),
            min_active=_opt_int(message, "ev_min_active", 0, _U32),
            event_mask=_opt_int(message, "ev_event_mask", 0, _U32),
            fields=fields,
            ev_op=op,
            entries=entries,
        )
        if effects:
            self.service.apply_states(profile_id, effects)
        return profile.to_json()

    def op_ctl_ev_query(self, _request: int, message: Message) -> dict[str, Any]:
        registry = self.service.registry
        profile_id = _int(message, "profile", 0, _U64, "ev_profile_id")
        profile = registry.ev_profile(profile_id)
        result = profile.to_json()
        op = None if message.get("ev_op") is None else _enum(EvOp, message["ev_op"], "ev_op")
        if op is EvOp.QUERY_EV_STATE:
            entries = self._entries(message)
            registry.query_ev_states(profile, entries)
            result["entries"] = [
                {"ev": e.ev.to_json(), "state": int(self.service.aggregate(profile_id, e.ev))}
                for e in entries
            ]
        elif op is EvOp.QUERY_EV_ARRAY:
            evs: list[Ev | None]
            if profile.mode is EvMode.AUTO:
                seen: dict[Ev, None] = {}
                for qp in self.service.qps_of_profile(profile_id):
                    for ev in qp.wire_of:
                        seen.setdefault(ev)
                evs = list(seen)
            else:
                evs = list(profile.evs)
            result["entries"] = [
                {
                    "ev": (ev or Ev(b"", 0)).to_json(),
                    "state": int(self.service.aggregate(profile_id, ev)) if ev else 0,
                }
                for ev in evs
            ]
        elif op is not None:
            raise InvalidArgument(f"{op.name} is a modification, not a query", "ev_op")
        return result

    def op_ctl_cc_modify(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = _int(message, "profile", 0, _U64, "cc_profile_id")
        config = message.get("cc_config")
        if config is not None and not isinstance(config, dict):
            raise InvalidArgument("must be an object", "cc_config")
        algorithm = message.get("algorithm")
        if algorithm is not None and not isinstance(algorithm, str):
            raise InvalidArgument("must be a string", "algorithm")
        profile = self.service.registry.modify_cc_profile(
            profile_id, message.get("profile_state"), algorithm, config
        )
        return profile.to_json()

    def op_ctl_cc_query(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = _int(message, "profile", 0, _U64, "cc_profile_id")
        return self.service.registry.cc_profile(profile_id).to_json()

    def op_ctl_ev_cq_create(self, request: int, message: Message) -> dict[str, Any]:
        return self.op_cq_create(request, {**message, "ev_events": True})

    def op_ctl_ep_batch(self, request: int, message: Message) -> None:
        _int(message, "req_tc", 0, 63)
        if message.get("op_type", 0) != 0:
            raise NotSupported("only EV probes (op_type 0) are offered", "op_type")
        timeout = _int(message, "rsp_timeout", 1, MAX_PROBE_TIMEOUT_NS)
        raws = _list(message, "req", 4096)
        if not raws:
            raise InvalidArgument("no request", "req")
        probes: list[tuple[int, int, bytes, int]] = []
        ids: set[int] = set()
        local = self.runtime.local_addresses
        for index, raw in enumerate(raws):
            where = f"req[{index}]"
            if not isinstance(raw, dict):
                raise InvalidArgument("must be an object", where)
            req_id = _int(raw, "req_id", 0, _U16, f"{where}.req_id")
            if req_id in ids:
                raise InvalidArgument(f"req_id {req_id} is used twice", f"{where}.req_id")
            ids.add(req_id)
            ev = _ev(raw.get("req_ev"), f"{where}.req_ev")
            if not 1 <= ev.port <= self.service.planes:
                raise InvalidArgument(f"ports are 1-{self.service.planes}", f"{where}.req_ev.port")
            plane = ev.port - 1
            mode = _enum(FormatMode, raw.get("ev_fmt_mode", "STEV"), f"{where}.ev_fmt_mode")
            try:
                value = wire_ev(mode, ev.padded(), self.runtime.ipv6)
            except ProfileError as exc:
                error = NotSupported if mode is FormatMode.SRV6 else InvalidArgument
                raise error(exc.reason, f"{where}.req_ev") from None
            peer = _address(raw.get("dgid"), f"{where}.dgid", len(local[0]))
            if raw.get("sgid") is not None:
                source = _address(raw["sgid"], f"{where}.sgid", len(local[0]))
                if source != local[plane]:
                    raise InvalidArgument(
                        f"{format_address(source)} is not port {ev.port}'s address "
                        f"({format_address(local[plane])})",
                        f"{where}.sgid",
                    )
            probes.append((req_id, plane, peer, value))
        self.service.start_probes(self, request, probes, timeout)

    # --- teardown ---------------------------------------------------------------------------

    def release(self) -> None:
        """The client is gone: close its QPs, unmap its regions, close its sockets."""
        self.service.forget_probes(self)
        for qp in list(self.qps.values()):
            self._destroy(qp)
        for region in list(self.regions.values()):
            self._unmap(region)
        self.regions.clear()
        for channel in self.channels.values():
            channel.sock.close()
        self.channels.clear()
        self.cqs.clear()
        if self.async_sock is not None:
            self.async_sock.close()
            self.async_sock = None
        self.runtime.service()


def _address(raw: object, where: str, size: int) -> bytes:
    try:
        packed = ipaddress.ip_address(raw).packed  # type: ignore[arg-type]
    except (ValueError, TypeError):
        raise InvalidArgument(f"{raw!r} is not an IP address", where) from None
    if len(packed) != size:
        raise InvalidArgument("not of this host's IP version", where)
    return packed


def _closed(mm: mmap.mmap) -> bool:
    try:
        mm.close()
    except BufferError:
        return False
    return True


def _map_region(fd: int, length: int) -> mmap.mmap:
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


_HANDLERS: dict[str, Callable[[ApiSession, int, Message], Any]] = {
    "api.open": ApiSession.op_open,
    "api.query_device": ApiSession.op_query_device,
    "api.query_port": ApiSession.op_query_port,
    "api.channel.create": ApiSession.op_channel_create,
    "api.channel.destroy": ApiSession.op_channel_destroy,
    "api.cq.create": ApiSession.op_cq_create,
    "api.cq.destroy": ApiSession.op_cq_destroy,
    "api.cq.notify": ApiSession.op_cq_notify,
    "api.pd.alloc": ApiSession.op_pd_alloc,
    "api.pd.dealloc": ApiSession.op_pd_dealloc,
    "api.mr.reg": ApiSession.op_mr_reg,
    "api.mr.dereg": ApiSession.op_mr_dereg,
    "api.qp.create": ApiSession.op_qp_create,
    "api.qp.modify": ApiSession.op_qp_modify,
    "api.qp.query": ApiSession.op_qp_query,
    "api.qp.destroy": ApiSession.op_qp_destroy,
    "api.post_send": ApiSession.op_post_send,
    "api.post_recv": ApiSession.op_post_recv,
    "api.ctl.query_device": ApiSession.op_ctl_query_device,
    "api.ctl.query_port": ApiSession.op_query_port,
    "api.ctl.modify_port": ApiSession.op_ctl_modify_port,
    "api.ctl.fmt.modify": ApiSession.op_ctl_fmt_modify,
    "api.ctl.fmt.query": ApiSession.op_ctl_fmt_query,
    "api.ctl.ev.modify": ApiSession.op_ctl_ev_modify,
    "api.ctl.ev.query": ApiSession.op_ctl_ev_query,
    "api.ctl.cc.modify": ApiSession.op_ctl_cc_modify,
    "api.ctl.cc.query": ApiSession.op_ctl_cc_query,
    "api.ctl.ev_cq.create": ApiSession.op_ctl_ev_cq_create,
    "api.ctl.ep_batch": ApiSession.op_ctl_ep_batch,
}
_CTL_OPS: Final = frozenset(op for op in _HANDLERS if op.startswith("api.ctl."))
_APP_OPS: Final = frozenset(_HANDLERS) - _CTL_OPS
#: Ops answered later or never: posts and arming are fire-and-forget (errors come back as
#: completions or an ``err`` line), a probe batch is answered when it ends.
_ASYNC_OPS: Final = frozenset({"api.post_send", "api.post_recv", "api.cq.notify"})
