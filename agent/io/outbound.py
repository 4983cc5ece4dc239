"""The sending side of a transfer: side-channel handshake, then RDMA writes until confirmed.

``OutboundTransfer`` does what every client does (non-blocking TCP connect with a timeout,
``hello`` -> ``welcome``, opening the MRC connection, following its events, tearing it all
down exactly once); ``agent.io.file_transfer`` and ``agent.io.perf_transfer`` say what to
write and when they are done. A transfer ends in ``result`` (a JSON-ready dict) or ``error``
(an ``AgentError`` whose code says what failed), and calls its ``on_finished`` callbacks.

It runs inside an ``AgentRuntime``: the host's agent (for requests arriving on the control
socket) or one a command started for itself. Either way the loop calls in; nothing blocks.

The connection is MRC's, or for a RoCE transport (``transport.is_roce``) RoCE RC QPs
(``agent.roce``): the same handshake, writes and events, on the runtime's RoCE endpoint, the
writes striped over the QPs (``agent.io.qp_striping``). A RoCE QP that uses up its retries
fails the transfer with the QP's own error, as a training job sees it.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import secrets
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from agent.core import (
    ConnectionClosed,
    ConnectionFailed,
    ConnectionSpec,
    ConnectionStats,
    Endpoint,
    Event,
    MessageAcked,
    MessageFailed,
    MrcConfig,
    SendQueueFull,
)
from agent.io.addresses import PeerAddress, format_address, resolve
from agent.io.caller_check import sign_hello
from agent.io.errors import (
    AgentError,
    PeerUnreachableError,
    ProtocolError,
    TransferFailedError,
    error_from_code,
)
from agent.io.json_lines import LineChannel, Message
from agent.io.qp_striping import connect_striped, merged_roce_stats, merged_stats
from agent.io.reactor import WRITE, Timer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import (
    Hello,
    Purpose,
    QpOffer,
    Refusal,
    SideMessage,
    Welcome,
    parse_side_message,
    peer_plane_addresses,
)
from agent.io.stats_json import connection_stats_to_json, ev_state_counts, roce_stats_to_json
from agent.io.transport import MRC, RoceSetup, Transport, roce_config_for
from agent.roce import RoceConfig, RoceEndpoint

log = logging.getLogger(__name__)

#: Seconds to wait for the peer's side channel to accept the TCP connection.
CONNECT_TIMEOUT = 5.0
#: Seconds to wait for any side-channel answer (welcome, committed, farewell): a receiver
#: writing a large file to disk answers ``commit`` only once the file is synced.
REPLY_TIMEOUT = 60.0
#: Seconds without a single acknowledged byte, while writes are outstanding, after which a
#: transfer gives up. The core's own peer timeout does not cover this: a path that passes
#: small packets (probes, SACKs) but not data (an MTU black hole) keeps the peer "alive".
STALL_TIMEOUT = 10.0
#: ... or this many of the connection's RTOs, whichever is longer: on a fabric whose queues hold
#: seconds of packets (the spray experiment's slowed links) one timeout and its answer can take
#: longer than 10 s between them, and a fixed limit failed transfers that were progressing.
STALL_RTOS = 4.0
_U24 = 0xFFFFFF


def describe_connect_error(code: int, peer: PeerAddress) -> str:
    """A user-facing sentence for a failed TCP connect to a peer's side channel."""
    if code == errno.ECONNREFUSED:
        return (
            f"nothing listens at {peer} (connection refused): is `mrc-agent serve` "
            f"(or `mrc-perf --server`) running there?"
        )
    return f"peer {peer} unreachable: {os.strerror(code)}"


def stall_limit(stall_timeout: float, stats: ConnectionStats) -> float:
    """Seconds without an acknowledged byte after which a transfer is stalled: the configured
    ``stall_timeout``, stretched to ``STALL_RTOS`` RTOs (backoff included) of a slow path."""
    return max(stall_timeout, STALL_RTOS * stats.rto)


def describe_stall(stats: ConnectionStats) -> str:
    """What a stalled connection looked like, in one line: a stall is rare and hard to
    reproduce, so the error itself must say whether EVs, the window, timeouts or probes held
    the data back."""
    states = ", ".join(
        f"{count} {state}" for state, count in sorted(ev_state_counts(stats.evs).items())
    )
    return (
        f"EVs: {states}; cwnd {stats.cwnd} B, {stats.bytes_in_flight} B in flight, "
        f"rto {stats.rto:.3g} s after {stats.timeouts} timeouts; "
        f"{stats.data_packets_sent} data packets sent, {stats.packets_acked} acked; "
        f"EV probes {stats.ev_probes_sent} sent, {stats.ev_probes_answered} answered"
    )


class OutboundTransfer(ABC):
    """Client side of one transfer; subclasses post the writes and judge completion."""

    purpose: Purpose

    def __init__(
        self,
        runtime: AgentRuntime,
        peer: PeerAddress,
        *,
        length: int,
        message_size: int,
        name: str | None = None,
        config: MrcConfig | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        reply_timeout: float = REPLY_TIMEOUT,
        stall_timeout: float = STALL_TIMEOUT,
        transport: Transport = MRC,
        roce: RoceSetup | None = None,
    ) -> None:
        self.runtime = runtime
        self.peer = peer
        self.length = length
        self.message_size = message_size
        self.name = name
        self.transport = transport
        mrc_endpoint = runtime.pool.endpoint_for(config if not transport.is_roce else None)
        self.config = mrc_endpoint.config
        #: RoCE transports: the QPs' settings, their count and profile, and the settings
        #: alone (each QP's).
        self.roce_setup: RoceSetup | None = None
        self.roce: RoceConfig | None = None
        self.endpoint: Endpoint | RoceEndpoint = mrc_endpoint
        if transport.is_roce:
            self.roce_setup = roce or RoceSetup(roce_config_for(self.config.dscp))
            self.roce = self.roce_setup.config
            self.endpoint = runtime.pool.roce
            # The QP's own retries decide when it has failed; the stall watch only backs them.
            timeout = self.roce.local_ack_timeout
            if timeout is not None:
                stall_timeout = max(stall_timeout, 2 * (self.roce.retry_cnt + 1) * timeout)
        self._connect_timeout = connect_timeout
        self._reply_timeout = reply_timeout
        self._stall_timeout = stall_timeout
        self._writing = False
        self._progress_bytes = 0
        self._progress_at = 0.0
        self.qp = runtime.pool.allocate_qp(self.endpoint)
        self._psn = secrets.randbelow(_U24 + 1)
        #: RoCE over several QPs: the QPs after ``qp`` and their first PSNs.
        self._extra_qps: tuple[QpOffer, ...] = tuple(
            (runtime.pool.allocate_qp(self.endpoint), secrets.randbelow(_U24 + 1))
            for _ in range(self.roce_setup.qps - 1 if self.roce_setup is not None else 0)
        )
        #: Every QP the writes go over, ``qp`` first; the one the next write takes.
        self.qps: tuple[int, ...] = (self.qp, *(qp for qp, _psn in self._extra_qps))
        self._next_qp = 0
        self._sock: socket.socket | None = None
        self._channel: LineChannel | None = None
        self._timer: Timer | None = None
        self._connected = False
        self.welcome: Welcome | None = None
        self.finished = False
        self.result: dict[str, Any] | None = None
        self.error: AgentError | None = None
        self.stats: ConnectionStats | None = None
        self.on_finished: list[Callable[[OutboundTransfer], None]] = []
        #: Most messages posted and not yet confirmed: enough to cover the largest window.
        self.max_outstanding = max(
            2,
            min(
                self.config.max_unconfirmed_messages,
                math.ceil(self.config.max_window / message_size) + 1,
            ),
        )
        if self.roce is not None:
            per_qp = max(
                2,
                min(
                    self.roce.send_queue_depth,
                    math.ceil(self.roce.max_outstanding * self.roce.pmtu / message_size) + 1,
                ),
            )
            self.max_outstanding = per_qp * len(self.qps)

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Resolve the peer and start connecting; failures end the transfer."""
        try:
            family, address = resolve(self.peer.host, self.peer.port)
            sock = socket.socket(family, socket.SOCK_STREAM)
        except AgentError as exc:
            self._fail(exc)
            return
        except OSError as exc:
            self._fail(PeerUnreachableError(f"peer {self.peer}: {exc.strerror or exc}"))
            return
        sock.setblocking(False)
        self._sock = sock
        code = sock.connect_ex(address)
        if code not in (0, errno.EINPROGRESS):
            self._fail(PeerUnreachableError(describe_connect_error(code, self.peer)))
            return
        self.runtime.reactor.watch(sock, WRITE, self._on_connect_ready)
        self._arm_timer(
            self._connect_timeout,
            lambda: PeerUnreachableError(
                f"peer {self.peer} unreachable: no answer within {self._connect_timeout:g} s"
            ),
        )

    def cancel(self, reason: str) -> None:
        """Abandon the transfer (the client went away, or the user interrupted)."""
        self._fail(TransferFailedError(f"cancelled: {reason}"))

    def _on_connect_ready(self, _mask: int) -> None:
        sock = self._sock
        if sock is None or self.finished:
            return
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._fail(PeerUnreachableError(describe_connect_error(code, self.peer)))
            return
        self.runtime.reactor.unwatch(sock)
        self._channel = LineChannel(
            sock, self.runtime.reactor, self._on_line, self._on_closed, peer=str(self.peer)
        )
        hello = Hello(
            qp=self.qp,
            psn=self._psn,
            planes=tuple(format_address(a) for a in self.runtime.local_addresses),
            purpose=self.purpose,
            length=self.length,
            name=self.name,
            transport=self.transport.on_wire,
            extra_qps=self._extra_qps,
            selective_repeat=self.roce is not None and self.roce.selective_repeat,
        )
        secret = self.runtime.side_channel_secret
        message = hello.to_json()
        if secret is not None:
            message = sign_hello(message, secret, self.runtime.wall_clock())
        self._channel.send(message)
        self._await_reply("welcome")

    def _arm_timer(self, seconds: float, error: Callable[[], AgentError]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.runtime.reactor.call_at(
            self.runtime.clock() + seconds, lambda: self._fail(error())
        )

    def _await_reply(self, what: str) -> None:
        self._arm_timer(
            self._reply_timeout,
            lambda: TransferFailedError(
                f"peer {self.peer} did not send {what!r} within {self._reply_timeout:g} s"
            ),
        )

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # --- side channel ---------------------------------------------------------------------

    def _on_line(self, line: Message) -> None:
        if self.finished:
            return
        try:
            message = parse_side_message(line)
        except ProtocolError as exc:
            self._fail(ProtocolError(f"peer {self.peer} sent a bad message: {exc}"))
            return
        if isinstance(message, Refusal):
            self._fail(error_from_code(message.code, f"peer {self.peer}: {message.message}"))
            return
        if self.welcome is None:
            if not isinstance(message, Welcome):
                self._fail(ProtocolError(f"peer {self.peer} answered hello with {line!r}"))
                return
            self._disarm()
            self._open(message)
            return
        self._disarm()
        self._on_side_message(message)

    def _on_closed(self, reason: str | None) -> None:
        if not self.finished:
            detail = reason or "closed by the peer"
            self._fail(TransferFailedError(f"side channel to {self.peer} ended: {detail}"))

    def _open(self, welcome: Welcome) -> None:
        try:
            remote = peer_plane_addresses(welcome.planes, self.runtime.local_addresses)
        except ProtocolError as exc:
            self._fail(exc)
            return
        if welcome.length < self.length:
            self._fail(
                ProtocolError(f"peer offered {welcome.length} bytes of region, {self.length} asked")
            )
            return
        if welcome.transport != self.transport.on_wire:
            self._fail(
                ProtocolError(
                    f"peer {self.peer} set up a {welcome.transport} connection, not the "
                    f"{self.transport.on_wire} one asked for (an agent without --transport "
                    f"{self.transport.on_wire}?)"
                )
            )
            return
        refusal = self._roce_mismatch(welcome)
        if refusal is not None:
            self._fail(ProtocolError(f"peer {self.peer} {refusal}"))
            return
        self.welcome = welcome
        try:
            if self.roce is not None:
                connect_striped(
                    self.runtime.pool,
                    ((self.qp, self._psn), *self._extra_qps),
                    ((welcome.qp, welcome.psn), *welcome.extra_qps),
                    remote,
                    self.roce,
                )
            else:
                assert isinstance(self.endpoint, Endpoint)
                choose = self.runtime.choose_evs
                spec = ConnectionSpec(
                    local_qp=self.qp,
                    remote_qp=welcome.qp,
                    remote_addresses=remote,
                    send_psn=self._psn,
                    receive_psn=welcome.psn,
                    evs=None
                    if choose is None
                    else choose(remote, self.endpoint.config.ev_set_size),
                    ev_standin_when_starved=choose is not None,
                )
                self.runtime.pool.connect(self.endpoint, spec)
        except ValueError as exc:
            self._fail(ProtocolError(f"cannot open the connection {self.peer} offered: {exc}"))
            return
        self._connected = True
        for qp in self.qps:
            self.runtime.on_events(qp, self._on_event)
        log.info(
            "connected to %s (%s): qp %#x -> %#x (%d QP(s)), %d plane(s), %d-byte region",
            self.peer,
            self.transport.name,
            self.qp,
            welcome.qp,
            len(self.qps),
            len(remote),
            welcome.length,
        )
        self._writing = True
        self._progress_at = self.runtime.clock()
        self.runtime.reactor.call_at(self._progress_at + 1.0, self._watch_progress)
        self._begin()

    def _roce_mismatch(self, welcome: Welcome) -> str | None:
        """What the peer set up differently from the RoCE QPs asked for (None: nothing)."""
        if len(welcome.extra_qps) != len(self._extra_qps):
            return (
                f"answered {1 + len(welcome.extra_qps)} QP(s) for the {len(self.qps)} offered "
                f"(an agent without --qps?)"
            )
        selective = self.roce is not None and self.roce.selective_repeat
        if welcome.selective_repeat != selective:
            return (
                f"set up {'selective repeat' if welcome.selective_repeat else 'go-back-N'} QPs, "
                f"not the {'selective repeat' if selective else 'go-back-N'} ones asked for"
            )
        return None

    def _watch_progress(self) -> None:
        """Fail a transfer whose writes make no progress at all for ``stall_timeout``."""
        if self.finished or not self._writing:
            return
        now = self.runtime.clock()
        stats = self._live_stats()
        acked = stats.bytes_acked
        if acked != self._progress_bytes:
            self._progress_bytes, self._progress_at = acked, now
        elif now - self._progress_at >= (limit := stall_limit(self._stall_timeout, stats)):
            errors = self.runtime.io.counters().get("send_errors")
            local = f"; local send errors: {errors}" if errors else ""
            self._fail(
                TransferFailedError(
                    f"no data acknowledged by {self.peer} for {limit:.3g} s{local} "
                    f"({describe_stall(stats)})"
                )
            )
            return
        self.runtime.reactor.call_at(now + 1.0, self._watch_progress)

    def send_side(self, message: SideMessage, expect: str) -> None:
        """Send a side-channel message and wait (with the reply timeout) for ``expect``.
        The writes are over by then: the stall watch stops."""
        self._writing = False
        if self._channel is not None:
            self._channel.send(message.to_json())
            self._await_reply(expect)

    # --- MRC ------------------------------------------------------------------------------

    def post(self, data: bytes, offset: int) -> bool:
        """RDMA-write ``data`` at ``offset`` of the peer's region; False if the send queue is
        full (retry after the next acknowledgement)."""
        welcome = self.welcome
        assert welcome is not None
        qps = self.qps
        try:
            self.endpoint.post_write(qps[self._next_qp], data, welcome.va + offset, welcome.rkey)
        except SendQueueFull:
            return False
        except ConnectionClosed as exc:
            self._fail(TransferFailedError(f"connection closed: {exc}"))
            return False
        self._next_qp = (self._next_qp + 1) % len(qps)  # round-robin: agent.io.qp_striping
        return True

    def _on_event(self, event: Event) -> None:
        if self.finished:
            return
        if isinstance(event, MessageAcked):
            self._on_acked(event)
        elif isinstance(event, MessageFailed):
            self._fail(
                TransferFailedError(f"message {event.msn} failed: {event.reason}{self._state()}")
            )
        elif isinstance(event, ConnectionFailed):
            self._fail(
                TransferFailedError(
                    f"connection to {self.peer} failed: {event.reason}{self._state()}"
                )
            )
        else:
            log.info("qp %#x: %s", self.qp, event)

    def _state(self) -> str:
        """The connection's state for a failure's message (what ``describe_stall`` says), so
        that a rare failure explains itself; empty before the connection opened."""
        stats = self.connection_stats()
        return f" ({describe_stall(stats)})" if stats is not None else ""

    def connection_stats(self) -> ConnectionStats | None:
        """The connection's statistics now (None before it opened)."""
        if not self._connected:
            return self.stats
        return self._live_stats()

    def _live_stats(self) -> ConnectionStats:
        """The open connection's statistics: its QPs' together (``agent.io.qp_striping``)."""
        pool = self.runtime.pool
        return merged_stats([pool.connection_stats(qp) for qp in self.qps])

    # --- subclass hooks -------------------------------------------------------------------

    @abstractmethod
    def _begin(self) -> None:
        """The connection is open: start posting."""

    @abstractmethod
    def _on_acked(self, event: MessageAcked) -> None:
        """The receiver confirmed one message."""

    @abstractmethod
    def _on_side_message(self, message: SideMessage) -> None:
        """A side-channel message after the welcome (committed, farewell)."""

    # --- endings --------------------------------------------------------------------------

    def finish(self, result: dict[str, Any]) -> None:
        """Success: tear down and report ``result``."""
        self._end(result, None)

    def _fail(self, error: AgentError) -> None:
        self._end(None, error)

    def _end(self, result: dict[str, Any] | None, error: AgentError | None) -> None:
        if self.finished:
            return
        self.finished = True
        self.result = result
        self.error = error
        self._disarm()
        pool = self.runtime.pool
        if self._connected:
            self.stats = self._live_stats()
            if result is not None:
                result["transport"] = self.transport.name
                result["connection"] = connection_stats_to_json(self.stats)
                if self.roce_setup is not None:
                    self._add_roce_result(result, self.roce_setup)
            for qp in self.qps:
                self.runtime.on_events(qp, None)
                pool.close(qp)
            self._connected = False
        else:
            for qp in self.qps:
                pool.release_qp(qp)
        if self._channel is not None:
            self._channel.close_after_flush()
        elif self._sock is not None:
            self.runtime.reactor.unwatch(self._sock)
            self._sock.close()
        if error is not None:
            log.warning("transfer to %s failed: %s", self.peer, error)
        for callback in self.on_finished:
            callback(self)

    def _add_roce_result(self, result: dict[str, Any], setup: RoceSetup) -> None:
        """The RoCE sections of a result: the QPs together (``roce``, with the profile, the
        QP count and the NIC's line rate) and, over several QPs, each one's (``roce_qps``)."""
        each = [self.runtime.pool.roce.roce_stats(qp) for qp in self.qps]
        result["roce"] = roce_stats_to_json(merged_roce_stats(each)) | {
            "profile": setup.profile,
            "qps": len(each),
            "line_rate_bps": setup.config.dcqcn.line_rate * 8,
        }
        if len(each) > 1:
            result["roce_qps"] = [roce_stats_to_json(stats) for stats in each]
