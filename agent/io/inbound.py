"""The receiving side: the side-channel listener and one session per connecting peer.

For each peer that says ``hello`` the agent registers a region (a file's size, or one message
for a ``sink``), opens an MRC connection and answers ``welcome``. It then follows the core's
``MessageReceived`` events for that connection. A file is committed when the peer asks: only
if every byte of the region arrived, and then it is written atomically to the ``--out-dir``,
re-read hash included in the answer, so the sender's exit status reflects what is on disk.
A sink is simply counted. When the TCP connection ends, for any reason, the MRC connection is
closed and the region released: a vanished peer leaves nothing behind.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core import (
    ConnectionSpec,
    Event,
    MemoryRegion,
    MessageReceived,
    WriteRejected,
)
from agent.io.addresses import PeerAddress, format_address
from agent.io.errors import (
    AgentError,
    ErrorCode,
    PortInUseError,
    ProtocolError,
    TransferFailedError,
    UsageError,
)
from agent.io.json_lines import LineChannel, Message
from agent.io.out_dir import check_file_name, write_atomically
from agent.io.reactor import READ, Timer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import (
    Bye,
    Commit,
    Committed,
    Farewell,
    Hello,
    Purpose,
    Refusal,
    Welcome,
    parse_side_message,
    peer_plane_addresses,
)
from agent.io.stats_json import connection_stats_to_json

log = logging.getLogger(__name__)

#: Seconds a new side-channel connection has to say hello.
HELLO_TIMEOUT = 10.0
#: Largest region a peer may ask for by default: 1 GiB (``--max-region`` changes it).
DEFAULT_MAX_REGION = 1 << 30
_U24 = 0xFFFFFF


@dataclass(frozen=True, slots=True)
class InboundPolicy:
    """What the agent accepts from peers."""

    #: Where completed files go; None refuses file transfers (sinks are still accepted).
    out_dir: Path | None
    #: Largest region one peer may make this host allocate.
    max_region: int = DEFAULT_MAX_REGION


class SideChannelServer:
    """Listens for peers on TCP and runs an ``InboundSession`` for each."""

    def __init__(self, runtime: AgentRuntime, listen: PeerAddress, policy: InboundPolicy) -> None:
        self.runtime = runtime
        self.policy = policy
        self.sessions: set[InboundSession] = set()
        family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((listen.host, listen.port))
            sock.listen(64)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"side-channel port {listen} is already in use (another mrc-agent?); "
                    f"choose another with --listen"
                ) from None
            raise UsageError(f"cannot listen on {listen}: {exc.strerror}") from None
        sock.setblocking(False)
        self.sock = sock
        self.address = PeerAddress(*sock.getsockname()[:2])
        runtime.reactor.watch(sock, READ, self._accept)
        runtime.on_close(self.close)

    def _accept(self, _mask: int) -> None:
        while True:
            try:
                conn, address = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("side channel: accept failed: %s", exc)
                return
            session = InboundSession(self, conn, f"{address[0]}:{address[1]}")
            self.sessions.add(session)

    def close(self) -> None:
        """Stop listening and end every session."""
        for session in list(self.sessions):
            session.end("agent shutting down")
        self.runtime.reactor.unwatch(self.sock)
        self.sock.close()


class InboundSession:
    """One peer's connection: hello, region, MRC connection, commit or bye."""

    def __init__(self, server: SideChannelServer, sock: socket.socket, peer: str) -> None:
        self.server = server
        self.runtime = server.runtime
        self.peer = peer
        self.hello: Hello | None = None
        self.qp: int | None = None
        self.region: MemoryRegion | None = None
        self.bytes_received = 0
        self.messages_received = 0
        self.writes_rejected = 0
        self._ended = False
        self.channel = LineChannel(sock, self.runtime.reactor, self._on_line, self._on_closed)
        self._hello_timer: Timer | None = self.runtime.reactor.call_at(
            self.runtime.clock() + HELLO_TIMEOUT, lambda: self.end("no hello in time")
        )

    # --- side channel ---------------------------------------------------------------------

    def _on_line(self, line: Message) -> None:
        try:
            message = parse_side_message(line)
            if self.hello is None:
                if not isinstance(message, Hello):
                    raise ProtocolError(f"expected 'hello', got {line.get('type')!r}")
                self._accept_hello(message)
            elif isinstance(message, Commit):
                self._commit(message)
            elif isinstance(message, Bye):
                self._farewell()
            else:
                raise ProtocolError(f"unexpected {line.get('type')!r} after hello")
        except AgentError as exc:
            self._refuse(exc.code, str(exc))

    def _on_closed(self, reason: str | None) -> None:
        self.end(reason or "peer closed the side channel")

    def _refuse(self, code: ErrorCode, text: str) -> None:
        log.warning("side channel %s: refused: %s", self.peer, text)
        self.channel.send(Refusal(code, text).to_json())
        self.end(f"refused: {text}")

    def _accept_hello(self, hello: Hello) -> None:
        policy = self.server.policy
        runtime = self.runtime
        remote = peer_plane_addresses(hello.planes, runtime.local_addresses)
        if hello.purpose is Purpose.FILE:
            if policy.out_dir is None:
                raise TransferFailedError("this agent stores no files (started without --out-dir)")
            check_file_name(hello.name or "")
        if hello.length > policy.max_region:
            raise TransferFailedError(
                f"{hello.length} bytes asked; this agent accepts at most {policy.max_region} "
                f"per transfer (--max-region)"
            )
        if self._hello_timer is not None:
            self._hello_timer.cancel()
            self._hello_timer = None
        endpoint = runtime.pool.default
        self.region = endpoint.register_memory(bytearray(hello.length))
        qp = runtime.pool.allocate_qp(endpoint)
        psn = secrets.randbelow(_U24 + 1)
        try:
            runtime.pool.connect(
                endpoint,
                ConnectionSpec(
                    local_qp=qp,
                    remote_qp=hello.qp,
                    remote_addresses=remote,
                    send_psn=psn,
                    receive_psn=hello.psn,
                ),
            )
        except ValueError as exc:
            runtime.pool.release_qp(qp)
            raise ProtocolError(f"cannot open the connection: {exc}") from None
        self.qp = qp
        self.hello = hello
        runtime.on_events(qp, self._on_event)
        self.channel.send(
            Welcome(
                qp=qp,
                psn=psn,
                planes=tuple(format_address(a) for a in runtime.local_addresses),
                rkey=self.region.rkey,
                va=self.region.va,
                length=hello.length,
            ).to_json()
        )
        what = f"file {hello.name!r}" if hello.purpose is Purpose.FILE else "perf sink"
        log.info("%s: %s, %d bytes, qp %#x <- %#x", self.peer, what, hello.length, qp, hello.qp)

    def _commit(self, commit: Commit) -> None:
        hello, region = self.hello, self.region
        assert hello is not None and region is not None
        if hello.purpose is not Purpose.FILE:
            raise ProtocolError("'commit' ends a file transfer, this is a sink")
        if self.bytes_received < hello.length:
            raise TransferFailedError(
                f"commit after {self.bytes_received} of {hello.length} bytes arrived"
            )
        digest = hashlib.sha256(region.buffer).hexdigest()
        if digest != commit.sha256:
            code = ErrorCode.TRANSFER_FAILED
            self._refuse(code, f"received bytes hash to {digest}, sender says {commit.sha256}")
            return
        out_dir = self.server.policy.out_dir
        assert out_dir is not None and hello.name is not None
        try:
            path = write_atomically(out_dir, hello.name, region.buffer)
            stored = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            self._refuse(ErrorCode.TRANSFER_FAILED, f"cannot store {hello.name}: {exc.strerror}")
            return
        log.info("%s: stored %s (%d bytes, sha256 %s)", self.peer, path, hello.length, stored)
        self.channel.send(Committed(sha256=stored, path=str(path), length=hello.length).to_json())
        self.end(None)

    def _farewell(self) -> None:
        self.channel.send(Farewell(receiver=self.receiver_stats()).to_json())
        self.end(None)

    def receiver_stats(self) -> dict[str, Any]:
        """What this side saw of the transfer (sent back in the farewell)."""
        result: dict[str, Any] = {
            "bytes_received": self.bytes_received,
            "messages_received": self.messages_received,
            "writes_rejected": self.writes_rejected,
            "drops": self.runtime.pool.drops(),
            "io": self.runtime.io.counters(),
        }
        if self.qp is not None:
            stats = self.runtime.pool.connection_stats(self.qp)
            result["connection"] = connection_stats_to_json(stats, with_evs=False)
        return result

    # --- MRC events -----------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, MessageReceived):
            self.bytes_received += event.length
            self.messages_received += 1
        elif isinstance(event, WriteRejected):
            self.writes_rejected += 1
            log.warning("%s: write rejected: %s", self.peer, event.reason)
        else:
            log.info("%s: %s", self.peer, event)

    # --- teardown -------------------------------------------------------------------------

    def end(self, reason: str | None) -> None:
        """Close the MRC connection, free the region, close the channel (once)."""
        if self._ended:
            return
        self._ended = True
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        runtime = self.runtime
        if self.qp is not None:
            runtime.on_events(self.qp, None)
            runtime.pool.close(self.qp)
        if self.region is not None:
            runtime.pool.default.memory.deregister(self.region.rkey)
            self.region = None
        self.channel.close_after_flush()
        self.server.sessions.discard(self)
        if reason is not None:
            log.info("%s: session ended: %s", self.peer, reason)
